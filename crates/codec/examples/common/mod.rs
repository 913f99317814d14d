//! What the per-page timing examples share: `--corpus DIR` taken out of
//! the arguments, the corpus's pages, and the codecs the other arguments
//! name.

use ccvm_codec::{by_name, Codec};

/// The corpus files (from `--corpus DIR`, else the bundled corpus) and the
/// codec names left in the arguments.
///
/// # Panics
///
/// If the corpus does not load (an example's way of saying so).
pub fn corpus_and_names() -> (std::path::PathBuf, Vec<ccvm_corpus::PageFile>, Vec<String>) {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dir = take_value(&mut args, "--corpus").map_or_else(ccvm_corpus::default_dir, std::path::PathBuf::from);
    let files = ccvm_corpus::load_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    (dir, files, args)
}

/// The value after `flag` in `args`, taking both out of `args`; `None`
/// if the flag is absent or last.
pub fn take_value(args: &mut Vec<String>, flag: &str) -> Option<String> {
    match args.iter().position(|a| a == flag) {
        Some(k) if k + 1 < args.len() => args.drain(k..k + 2).nth(1),
        _ => None,
    }
}

/// The codecs called `names`: those of the registry, and
/// `wordlz-lz-only` ([`ccvm_codec::wordlz::WordLz::lz_only`]).
///
/// # Panics
///
/// On an unknown name, with the registry's message.
pub fn codecs(names: &[String]) -> Vec<Box<dyn Codec>> {
    names
        .iter()
        .map(|n| match n.as_str() {
            "wordlz-lz-only" => Box::new(ccvm_codec::wordlz::WordLz::lz_only()),
            _ => by_name(n).unwrap_or_else(|e| panic!("{e}")),
        })
        .collect()
}

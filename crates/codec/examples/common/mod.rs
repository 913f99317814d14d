//! What the per-page timing examples share: `--corpus DIR` taken out of
//! the arguments, the corpus's pages, and the codecs the other arguments
//! name.

use ccvm_codec::{by_name, Codec};

/// The first corpus folder and the files of all (from `--corpus DIR`,
/// repeatable, else the bundled corpus), and the codec names left in the
/// arguments.
///
/// # Panics
///
/// If the corpus does not load (an example's way of saying so).
pub fn corpus_and_names() -> (std::path::PathBuf, Vec<ccvm_corpus::PageFile>, Vec<String>) {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut dirs = Vec::new();
    while let Some(d) = take_value(&mut args, "--corpus") {
        dirs.push(std::path::PathBuf::from(d));
    }
    if dirs.is_empty() {
        dirs.push(ccvm_corpus::default_dir());
    }
    let files = dirs
        .iter()
        .flat_map(|d| ccvm_corpus::load_dir(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    (dirs.swap_remove(0), files, args)
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

/// What [`round_trips`] measured: the bytes stored (a page the codec
/// cannot shrink counts whole) and the fastest pass's compression and
/// decompression times.
#[allow(dead_code)] // not every example times round trips
pub struct RoundTrips {
    pub stored: usize,
    pub compress: std::time::Duration,
    pub decompress: std::time::Duration,
}

#[allow(dead_code)] // not every example times round trips
impl RoundTrips {
    /// The fastest pass's time, both ways.
    pub fn time(&self) -> std::time::Duration {
        self.compress + self.decompress
    }
}

/// Every page of `pages` compressed and decompressed with `codec`, each
/// checked against its original, `passes` times.
///
/// # Panics
///
/// If the codec's output does not decode to its input.
#[allow(dead_code)] // not every example times round trips
pub fn round_trips(codec: &mut dyn Codec, pages: &[u8], passes: usize) -> RoundTrips {
    use ccvm_codec::PAGE_SIZE;
    use std::time::{Duration, Instant};
    let mut packed = vec![0u8; pages.len()];
    let mut lens = vec![0usize; pages.len() / PAGE_SIZE];
    let mut back = vec![0u8; PAGE_SIZE];
    let (mut compress, mut decompress) = (Duration::MAX, Duration::ZERO);
    for _ in 0..passes {
        let t = Instant::now();
        for ((p, slot), len) in pages
            .chunks_exact(PAGE_SIZE)
            .zip(packed.chunks_exact_mut(PAGE_SIZE))
            .zip(&mut lens)
        {
            *len = codec.compress(p, slot).unwrap_or(0);
        }
        let c = t.elapsed();
        let t = Instant::now();
        for ((p, slot), &len) in pages
            .chunks_exact(PAGE_SIZE)
            .zip(packed.chunks_exact(PAGE_SIZE))
            .zip(&lens)
        {
            if len == 0 {
                back.copy_from_slice(p);
            } else {
                codec.decompress(&slot[..len], &mut back).expect("own output decodes");
                assert_eq!(back, p, "round trip");
            }
            std::hint::black_box(&back);
        }
        let d = t.elapsed();
        if c.saturating_add(d) < compress.saturating_add(decompress) {
            (compress, decompress) = (c, d);
        }
    }
    let stored = lens.iter().map(|&l| if l == 0 { PAGE_SIZE } else { l }).sum();
    RoundTrips {
        stored,
        compress,
        decompress,
    }
}

/// The programs of the corpus folders named as arguments (default:
/// `corpus/large` beside the bundled corpus), all folders as one set, and
/// the folders' names joined; for the leave-one-program-out examples.
///
/// # Panics
///
/// If a folder does not load, or fewer than two programs do.
#[allow(dead_code)] // the leave-one-program-out examples only
pub fn programs_from_args() -> (Vec<ccvm_corpus::PageFile>, String) {
    programs_from(&std::env::args().skip(1).collect::<Vec<_>>())
}

/// [`programs_from_args`] for the folders named in `args`.
///
/// # Panics
///
/// If a folder does not load, or fewer than two programs do.
#[allow(dead_code)] // the examples that compare programs only
pub fn programs_from(args: &[String]) -> (Vec<ccvm_corpus::PageFile>, String) {
    let mut dirs: Vec<std::path::PathBuf> = args.iter().map(Into::into).collect();
    if dirs.is_empty() {
        let pages = ccvm_corpus::default_dir();
        dirs.push(pages.parent().expect("corpus/pages has a parent").join("large"));
    }
    let files: Vec<_> = dirs
        .iter()
        .flat_map(|d| ccvm_corpus::load_dir(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert!(files.len() >= 2, "leaving one out needs two programs or more");
    let names = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    (files, names)
}

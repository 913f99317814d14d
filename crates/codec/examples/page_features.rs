//! Prints one CSV line per corpus page: its compressed size under WKdm,
//! LZ4 and WordLZ, and the page statistics the hybrid's rule and WordLZ's
//! design were chosen from.
//!
//! `cargo run --release -p ccvm-codec --example page_features > features.csv`
//!
//! Columns beyond the sizes (fractions of the page's 1024 words unless
//! said otherwise):
//! * `ascii`, `zero_bytes`: printable and zero bytes (of 4096);
//! * `zero_words`: words that are 0;
//! * `partial10`, `partial12`: non-zero words that a 16-entry
//!   direct-mapped dictionary of recent words (WKdm's model) matches in
//!   their upper 22 or 20 bits but not exactly;
//! * `aligned_repeat`: words inside a repeat of 8 or more bytes of an
//!   earlier word-aligned position, found at word-aligned positions;
//! * `any_repeat`: words inside a repeat of 6 or more bytes found at any
//!   byte position (greedy, every earlier position a candidate).

use std::collections::HashMap;

use ccvm_codec::{by_name, PAGE_SIZE};

fn word(p: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(p[i..i + 4].try_into().expect("4 bytes"))
}

/// Words (non-zero) matching a direct-mapped dictionary in their upper
/// `32 - low` bits but not exactly.
fn partials(p: &[u8], low: u32) -> usize {
    let mut dict = [0u32; 16];
    let mut n = 0;
    for i in (0..p.len()).step_by(4) {
        let w = word(p, i);
        if w == 0 {
            continue;
        }
        let s = ((w >> low).wrapping_mul(0x9E37_79B1) >> 28) as usize;
        if dict[s] != w {
            n += usize::from(dict[s] >> low == w >> low);
            dict[s] = w;
        }
    }
    n
}

/// Bytes covered by greedy matches of at least `min` bytes, looked for at
/// every `step`-th position against earlier positions on the same grid.
fn repeat_bytes(p: &[u8], step: usize, min: usize) -> usize {
    let mut last: HashMap<&[u8], usize> = HashMap::new();
    let (mut i, mut covered) = (0, 0);
    while i + min <= p.len() {
        let key = &p[i..i + min];
        match last.insert(key, i) {
            Some(j) => {
                let len = (0..p.len() - i).take_while(|&k| p[j + k] == p[i + k]).count();
                covered += len;
                let end = i + len;
                i += step;
                while i < end && i + min <= p.len() {
                    last.insert(&p[i..i + min], i);
                    i += step;
                }
            }
            None => i += step,
        }
    }
    covered
}

fn main() {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap_or_else(|e| panic!("{e}"));
    let mut codecs = ["wkdm", "lz4", "wordlz"].map(|n| by_name(n).expect("a codec"));
    let mut out = vec![0u8; 2 * PAGE_SIZE];
    println!("file,wk,lz4,wordlz,ascii,zero_bytes,zero_words,partial10,partial12,aligned_repeat,any_repeat");
    for f in &files {
        for p in f.pages() {
            let sizes = codecs
                .iter_mut()
                .map(|c| c.compress(p, &mut out).unwrap_or(PAGE_SIZE).min(PAGE_SIZE).to_string())
                .collect::<Vec<_>>()
                .join(",");
            let ascii = p.iter().filter(|&&b| (0x20..0x7F).contains(&b)).count();
            let zeros = p.iter().filter(|&&b| b == 0).count();
            let words = (p.len() / 4) as f64;
            let zero_words = (0..p.len()).step_by(4).filter(|&i| word(p, i) == 0).count();
            println!(
                "{},{sizes},{ascii},{zeros},{:.3},{:.3},{:.3},{:.3},{:.3}",
                f.name,
                zero_words as f64 / words,
                partials(p, 10) as f64 / words,
                partials(p, 12) as f64 / words,
                repeat_bytes(p, 4, 8) as f64 / 4.0 / words,
                repeat_bytes(p, 1, 6) as f64 / 4.0 / words,
            );
        }
    }
}

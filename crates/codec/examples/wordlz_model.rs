//! The size model behind WordLZ's format choices: for each variant of the
//! format, the corpus's compression ratio computed from bit costs alone
//! (no encoder is run), with the same greedy parse as the encoder.
//!
//! `cargo run --release -p ccvm-codec --example wordlz_model [-- --corpus DIR]`
//!
//! Costs, per the format in `crates/codec/src/wordlz/mod.rs`: a sequence is
//! a token byte, extension bytes for runs of 7 or more word tokens and
//! matches of 17 or more words, and a 16-bit offset unless it repeats the
//! last one; a word token is a WKdm word (2-bit tag; exact +4 bits, partial
//! +4 and 10 bits, miss +32). Ratios are of whole pages, each costed at most
//! a page, as the codecs are measured.

use std::collections::HashMap;

// Only the corpus loader is needed here, not the codec lookup.
#[allow(dead_code)]
mod common;

/// One variant of the format.
#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    /// Matches may repeat the last offset for a flag bit.
    repeat: bool,
    /// Word tokens are WK-coded (else 32 bits each).
    wk: bool,
    /// Shortest match, words.
    min: usize,
    /// Positions inside a match are entered into the match index.
    inner: bool,
}

fn word(p: &[u8], k: usize) -> u32 {
    u32::from_le_bytes(p[4 * k..4 * k + 4].try_into().expect("4 bytes"))
}

/// Bits of extension bytes for `v` in a field that holds up to `max - 1`.
fn ext(v: usize, max: usize) -> u64 {
    if v < max {
        0
    } else {
        8 * (1 + (v - max) / 255) as u64
    }
}

/// Bits of page `p` under variant `v`.
fn page_bits(p: &[u8], v: Variant) -> u64 {
    let n = p.len() / 4;
    let key = |k: usize| -> Vec<u32> { (k..k + v.min).map(|t| word(p, t)).collect() };
    let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
    let mut dict = [0u32; 16];
    let (mut bits, mut k, mut run, mut rep) = (32u64, 0, 0usize, 1usize);
    let same = |a: usize, b: usize, len: usize| (0..len).all(|t| word(p, a + t) == word(p, b + t));
    let extend = |a: usize, b: usize| {
        (0..)
            .take_while(|&t| b + t < n && word(p, a + t) == word(p, b + t))
            .count()
    };
    while k < n {
        let mut found = None;
        if k + v.min <= n {
            if v.repeat && k >= rep && same(k - rep, k, v.min) {
                found = Some((true, extend(k - rep, k)));
            } else if let Some(&j) = index.get(&key(k)) {
                rep = k - j;
                found = Some((false, extend(j, k)));
            }
            index.insert(key(k), k);
        }
        if let Some((repeated, len)) = found {
            bits += 8 + ext(run, 7) + ext(len - v.min, 15) + if repeated { 0 } else { 16 };
            if v.inner {
                for t in k + 1..(k + len).min(n + 1 - v.min) {
                    index.insert(key(t), t);
                }
            }
            run = 0;
            k += len;
            continue;
        }
        let x = word(p, k);
        let s = ((x >> 10).wrapping_mul(0x9E37_79B1) >> 28) as usize;
        bits += match (v.wk, x) {
            (false, _) => 32,
            (true, 0) => 2,
            (true, _) if dict[s] == x => 6,
            (true, _) if dict[s] >> 10 == x >> 10 => 2 + 4 + 32 / 3,
            _ => 34,
        };
        if x != 0 {
            dict[s] = x;
        }
        run += 1;
        k += 1;
    }
    if run > 0 {
        bits += 8 + ext(run, 7);
    }
    bits
}

fn main() {
    let (_, files, _) = common::corpus_and_names();
    let built = Variant {
        name: "as built",
        repeat: true,
        wk: true,
        min: 2,
        inner: false,
    };
    let variants = [
        built,
        Variant {
            name: "no repeat offset",
            repeat: false,
            ..built
        },
        Variant {
            name: "raw word tokens",
            wk: false,
            ..built
        },
        Variant {
            name: "min match 1 word",
            min: 1,
            ..built
        },
        Variant {
            name: "min match 3 words",
            min: 3,
            ..built
        },
        Variant {
            name: "index inside matches",
            inner: true,
            ..built
        },
    ];
    for v in variants {
        let (mut raw, mut packed) = (0u64, 0u64);
        let mut per_file = String::new();
        for f in &files {
            let (mut fr, mut fp) = (0u64, 0u64);
            for p in f.pages() {
                fr += p.len() as u64;
                fp += page_bits(p, v).div_ceil(8).min(p.len() as u64);
            }
            raw += fr;
            packed += fp;
            per_file += &format!("  {} {:.3}", f.name, fr as f64 / fp as f64);
        }
        println!("{:22} all {:.3}{per_file}", v.name, raw as f64 / packed as f64);
    }
}

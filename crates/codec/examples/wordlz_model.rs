//! The size model behind WordLZ's format choices: for each variant of the
//! format, the corpus's compression ratio computed from bit costs alone
//! (no encoder is run), with the same greedy parse as the encoder.
//!
//! `cargo run --release -p ccvm-codec --example wordlz_model [-- --corpus DIR]`
//!
//! Costs, per the format in `crates/codec/src/wordlz/mod.rs`: a sequence is
//! a token byte, extension bytes for runs of 7 or more word tokens and
//! matches of 17 or more words, and a 16-bit offset unless it repeats the
//! last one; a word token is a WK word (2-bit tag; exact + an index,
//! partial + an index and 10 bits, miss +32), against a direct-mapped
//! dictionary of 256 words with byte-wide indices as built (WkDm256), or
//! of other sizes. Ratios are of whole pages, each costed at most a page,
//! as the codecs are measured. The "no LZ" rows are WK alone, every word a
//! word token: they size WkDm256's dictionary.

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
    /// Words per position: matches start, end and are measured in units of
    /// this many words (2: 8-byte units at 8-byte alignment).
    unit: usize,
    /// log2 of the word tokens' dictionary slots (4: WKdm's 16; 8: as built).
    slot_bits: u32,
    /// Bits an index costs (at least `slot_bits`; 8 when indices are bytes).
    idx_bits: u64,
    /// Matches are looked for (table and repeat offset) at even words only;
    /// one found may take back the word token before it (whose dictionary
    /// update the model keeps: a slight flattery).
    even: bool,
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
    let mut dict = vec![0u32; 1 << 12];
    let (mut bits, mut k, mut run, mut rep) = (32u64, 0, 0usize, 1usize);
    let mut last_cost = 0u64;
    let same = |a: usize, b: usize, len: usize| (0..len).all(|t| word(p, a + t) == word(p, b + t));
    let extend = |a: usize, b: usize| {
        (0..)
            .take_while(|&t| b + t < n && word(p, a + t) == word(p, b + t))
            .count()
    };
    while k < n {
        let mut found = None;
        let mut back = 0;
        if k % v.unit == 0 && k + v.min <= n {
            let looked_up = !v.even || k % 2 == 0;
            if v.repeat && looked_up && k >= rep && same(k - rep, k, v.min) {
                found = Some((true, extend(k - rep, k) / v.unit * v.unit));
                if v.even && run > 0 && k > rep && word(p, k - 1 - rep) == word(p, k - 1) {
                    back = 1;
                }
            } else if looked_up {
                if let Some(&j) = index.get(&key(k)) {
                    rep = k - j;
                    found = Some((false, extend(j, k) / v.unit * v.unit));
                    if v.even && run > 0 && j > 0 && word(p, j - 1) == word(p, k - 1) {
                        back = 1;
                    }
                }
            }
            if looked_up {
                index.insert(key(k), k);
            }
        }
        if back == 1 {
            // The last word token joins the match: undo its cost.
            bits -= last_cost;
            run -= 1;
        }
        if let Some((repeated, len)) = found {
            let len = len + back;
            bits += 8 + ext(run, 7) + ext(len - v.min, 15) + if repeated { 0 } else { 16 };
            if v.inner {
                for t in k + 1..(k + len).min(n + 1 - v.min) {
                    index.insert(key(t), t);
                }
            }
            run = 0;
            k += len - back;
            continue;
        }
        let x = word(p, k);
        let s = ((x >> 10).wrapping_mul(0x9E37_79B1) as u64 >> (32 - v.slot_bits)) as usize;
        let sb = v.idx_bits.max(u64::from(v.slot_bits));
        last_cost = match (v.wk, x) {
            (false, _) => 32,
            (true, 0) => 2,
            (true, _) if dict[s] == x => 2 + sb,
            (true, _) if dict[s] >> 10 == x >> 10 => 2 + sb + 32 / 3,
            _ => 34,
        };
        bits += last_cost;
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
    for v in variants() {
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

/// The format as built, and each variant of it measured.
fn variants() -> [Variant; 14] {
    let built = Variant {
        name: "as built",
        repeat: true,
        wk: true,
        min: 2,
        inner: false,
        unit: 1,
        slot_bits: 8,
        idx_bits: 8,
        even: false,
    };
    let pure_wk = |name, slot_bits| Variant {
        name,
        min: usize::MAX / 2,
        slot_bits,
        idx_bits: 0,
        ..built
    };
    [
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
            name: "16-word dictionary",
            slot_bits: 4,
            idx_bits: 0,
            ..built
        },
        Variant {
            name: "64 words, 6-bit index",
            slot_bits: 6,
            idx_bits: 0,
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
        Variant {
            name: "8-byte units",
            unit: 2,
            ..built
        },
        Variant {
            name: "even words only",
            even: true,
            ..built
        },
        pure_wk("no LZ, 16 words", 4),
        pure_wk("no LZ, 64 words", 6),
        pure_wk("no LZ, 256 words", 8),
        pure_wk("no LZ, 1024 words", 10),
    ]
}

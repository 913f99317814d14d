//! Leave-one-program-out judgement of PageLz's table of pairs.
//!
//! PageLz writes the fifteen commonest (literals, copy length) shapes of a
//! sequence in two bytes; its table was read off all the corpus's
//! programs, so the corpus cannot also judge it. Here each program is
//! left out in turn: the fifteen commonest shapes of the *other* programs'
//! pages make its table, and its own pages are sized with that table,
//! beside the shipped table and LZ4 on the same pages. The worst program
//! is what a program the project does not hold can expect.
//!
//! The encoder's parse does not depend on the table (it is greedy; the
//! table only decides how a shape is written), so each page is compressed
//! once and its sequences' shapes are read back from the output; sizing
//! the shipped table that way must give the encoder's own sizes, which
//! the example checks.
//!
//! `cargo run --release -p ccvm-codec --example pagelz_pairs [CORPUS_DIR...]`
//! (default: `corpus/large` beside `corpus/pages`).

use std::collections::{HashMap, HashSet};

#[allow(dead_code)] // only the programs
mod common;

use ccvm_codec::{
    baseline::Lz4,
    pagelz::{PageLz, ESCAPE, MAX_OFFSET, MIN_MATCH, PAIRS},
    Codec, PAGE_SIZE,
};

type Shape = (usize, usize);

/// One page as PageLz parsed it: its sequences' shapes and the literals
/// that end it; `None` for a page kept raw.
type Parse = Option<(Vec<Shape>, usize)>;

/// Reads a length field's continuation bytes at `*i`.
fn more(packed: &[u8], i: &mut usize) -> usize {
    let mut sum = 0;
    loop {
        let b = packed[*i];
        *i += 1;
        sum += b as usize;
        if b < 255 {
            return sum;
        }
    }
}

/// The shapes of a block PageLz wrote (see the format in `pagelz`'s docs).
fn shapes(packed: &[u8]) -> (Vec<Shape>, usize) {
    let (mut seqs, mut i) = (Vec::new(), 0);
    loop {
        let h = u16::from_le_bytes([packed[i], packed[i + 1]]) as usize;
        let (code, offset) = (h >> 12, h & MAX_OFFSET);
        if code != ESCAPE as usize {
            let (l, m) = PAIRS[code];
            seqs.push((l as usize, m as usize));
            i += 2 + l as usize;
            continue;
        }
        let t = packed[i + 2] as usize;
        i += 3;
        let (mut l, mut m) = (t >> 4, t & 15);
        if l == 15 {
            l += more(packed, &mut i);
        }
        if m == 15 {
            m += more(packed, &mut i);
        }
        if offset == 0 {
            return (seqs, l);
        }
        seqs.push((l, m + MIN_MATCH));
        i += l;
    }
}

fn more_bytes(v: usize) -> usize {
    if v < 15 {
        0
    } else {
        (v - 15) / 255 + 1
    }
}

/// A page's stored size with `table` as the coded shapes.
fn size(page: &Parse, table: &HashSet<Shape>) -> usize {
    let Some((seqs, tail)) = page else { return PAGE_SIZE };
    let coded: usize = seqs
        .iter()
        .map(|&(l, m)| {
            if table.contains(&(l, m)) {
                2 + l
            } else {
                3 + l + more_bytes(l) + more_bytes(m - MIN_MATCH)
            }
        })
        .sum();
    (coded + 3 + tail + more_bytes(*tail)).min(PAGE_SIZE)
}

/// The fifteen commonest shapes of `programs`' pages.
fn commonest<'a>(programs: impl Iterator<Item = &'a Vec<Parse>>) -> HashSet<Shape> {
    let mut counts: HashMap<Shape, u64> = HashMap::new();
    for pages in programs {
        for (seqs, _) in pages.iter().flatten() {
            for &s in seqs {
                *counts.entry(s).or_default() += 1;
            }
        }
    }
    let mut ranked: Vec<(Shape, u64)> = counts.into_iter().collect();
    ranked.sort_by_key(|&(s, c)| (std::cmp::Reverse(c), s));
    ranked.into_iter().take(PAIRS.len()).map(|(s, _)| s).collect()
}

fn main() {
    let (files, _) = common::programs_from_args();
    let shipped: HashSet<Shape> = PAIRS.iter().map(|&(l, m)| (l as usize, m as usize)).collect();
    let (mut codec, mut lz4) = (PageLz::new(), Lz4::new());
    let mut out = vec![0u8; PAGE_SIZE];
    let mut lz4_bytes = Vec::new();
    let parses: Vec<Vec<Parse>> = files
        .iter()
        .map(|f| {
            eprintln!("parsing {} ({} pages)", f.name, f.page_count());
            let mut l4 = 0;
            let pages = f
                .pages()
                .map(|p| {
                    l4 += lz4.compress(p, &mut out).map_or(PAGE_SIZE, |n| n.min(PAGE_SIZE));
                    let n = codec.compress(p, &mut out).ok().filter(|&n| n < PAGE_SIZE)?;
                    let parse = Some(shapes(&out[..n]));
                    assert_eq!(
                        size(&parse, &shipped),
                        n,
                        "the shapes read back size the page as written"
                    );
                    parse
                })
                .collect();
            lz4_bytes.push(l4 as f64);
            pages
        })
        .collect();
    println!(
        "{:18} {:>8} {:>9} {:>7} {:>11}",
        "left out", "shipped", "held out", "lz4", "held × lz4"
    );
    let (mut all, mut worst) = ([0f64; 3], None::<(f64, String)>);
    for (k, f) in files.iter().enumerate() {
        let table = commonest(parses.iter().enumerate().filter(|&(j, _)| j != k).map(|(_, p)| p));
        let shipped_bytes: usize = parses[k].iter().map(|p| size(p, &shipped)).sum();
        let held_bytes: usize = parses[k].iter().map(|p| size(p, &table)).sum();
        let total = f.data.len() as f64;
        let against = lz4_bytes[k] / held_bytes as f64;
        println!(
            "{:18} {:8.3} {:9.3} {:7.3} {:11.3}",
            f.name,
            total / shipped_bytes as f64,
            total / held_bytes as f64,
            total / lz4_bytes[k],
            against
        );
        all[0] += shipped_bytes as f64;
        all[1] += held_bytes as f64;
        all[2] += lz4_bytes[k];
        if worst.as_ref().is_none_or(|(w, _)| against < *w) {
            worst = Some((against, f.name.clone()));
        }
    }
    let total: f64 = files.iter().map(|f| f.data.len() as f64).sum();
    println!(
        "{:18} {:8.3} {:9.3} {:7.3} {:11.3}",
        "all",
        total / all[0],
        total / all[1],
        total / all[2],
        all[2] / all[1]
    );
    let (w, name) = worst.expect("programs");
    println!("worst program held out, against LZ4's ratio: {name}, {w:.3}");
}

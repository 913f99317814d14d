//! Per-page compression and decompression time of named codecs over the
//! corpus, the codecs interleaved, best of seven rounds of five passes:
//! a quicker, finer reading than `ccvm bench codecs` when working on one
//! codec.
//!
//! `cargo run --release -p ccvm-codec --example codec_times -- lz4 wordlz [--corpus DIR] [--budget BYTES]`
//!
//! `--budget` sets the output room each compression gets (default a page;
//! the store gives its huge threshold, 3072 bytes): a page that does not
//! fit is kept raw, and then neither decoded nor counted in the
//! decompression time.

use std::time::Instant;

use ccvm_codec::PAGE_SIZE;

mod common;

fn main() {
    let (_, files, mut args) = common::corpus_and_names();
    let budget = common::take_value(&mut args, "--budget").map_or(PAGE_SIZE, |v| {
        v.parse::<usize>()
            .ok()
            .filter(|&b| (1..=PAGE_SIZE).contains(&b))
            .unwrap_or_else(|| panic!("--budget {v}: give a byte count from 1 to {PAGE_SIZE}"))
    });
    let pages: Vec<&[u8]> = files.iter().flat_map(|f| f.pages()).collect();
    let mut codecs = common::codecs(&args);
    let (mut out, mut back) = (vec![0u8; budget], vec![0u8; PAGE_SIZE]);
    // Pages a codec cannot shrink are stored raw, not decoded.
    let packed: Vec<Vec<Vec<u8>>> = codecs
        .iter_mut()
        .map(|c| {
            pages
                .iter()
                .map(|p| c.compress(p, &mut out).map_or(Vec::new(), |n| out[..n].to_vec()))
                .collect()
        })
        .collect();
    let mut best = vec![(f64::MAX, f64::MAX); codecs.len()];
    let per_page = |t: Instant| t.elapsed().as_nanos() as f64 / (5 * pages.len()) as f64;
    for _ in 0..7 {
        for (k, c) in codecs.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..5 {
                for p in &pages {
                    let _ = c.compress(p, &mut out);
                }
            }
            best[k].0 = best[k].0.min(per_page(t));
            let t = Instant::now();
            for _ in 0..5 {
                for q in packed[k].iter().filter(|q| !q.is_empty()) {
                    c.decompress(q, &mut back).expect("own output decodes");
                }
            }
            best[k].1 = best[k].1.min(per_page(t));
        }
    }
    for ((name, (c, d)), p) in args.iter().zip(best).zip(&packed) {
        let raw = p.iter().filter(|q| q.is_empty()).count();
        // A page kept raw takes a whole page, as the store keeps it.
        let stored: usize = p.iter().map(|q| if q.is_empty() { PAGE_SIZE } else { q.len() }).sum();
        let ratio = (p.len() * PAGE_SIZE) as f64 / stored.max(1) as f64;
        println!(
            "{name:14} compress {c:6.0} ns/page  decompress {d:6.0} ns/page  raw {raw} of {}  ratio {ratio:.3}",
            p.len()
        );
    }
}

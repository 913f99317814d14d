//! Sweeps the hybrid codec's thresholds on corpus folders and prints, for
//! each pair, the compression ratio, the worst program's ratio as a share
//! of the fallback codec's alone, and the compression and decompression
//! speeds beside the fallback's, measured in the same run (best of 3
//! passes, one thread).
//!
//! `cargo run --release -p ccvm-codec --example tune_hybrid -- [--pagelz] [CORPUS_DIR...]`
//!
//! The fallback is LZ4, or PageLz with `--pagelz`.

#[allow(dead_code)] // only the round trips
mod common;

use ccvm_codec::{baseline::Lz4, hybrid::Hybrid, pagelz::PageLz, Codec, PAGE_SIZE};
use std::time::{Duration, Instant};

/// Stored bytes, and the best compression and decompression times of `passes`.
fn measure(codec: &mut dyn Codec, pages: &[u8], passes: usize) -> (usize, Duration, Duration) {
    let mut packed = vec![0u8; 2 * PAGE_SIZE];
    let mut back = vec![0u8; PAGE_SIZE];
    let (mut stored, mut best_c, mut best_d) = (0, Duration::MAX, Duration::MAX);
    for _ in 0..passes {
        let (mut c, mut d, mut total) = (Duration::ZERO, Duration::ZERO, 0);
        for page in pages.chunks_exact(PAGE_SIZE) {
            let t = Instant::now();
            let n = codec.compress(page, &mut packed).expect("twice a page fits");
            c += t.elapsed();
            let t = Instant::now();
            codec.decompress(&packed[..n], &mut back).expect("own output decodes");
            d += t.elapsed();
            assert_eq!(back, page, "{} lost a page", codec.name());
            total += n.min(PAGE_SIZE);
        }
        stored = total;
        best_c = best_c.min(c);
        best_d = best_d.min(d);
    }
    (stored, best_c, best_d)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let pagelz = args.iter().any(|a| a == "--pagelz");
    args.retain(|a| a != "--pagelz");
    if args.is_empty() {
        args.push(ccvm_corpus::default_dir().display().to_string());
    }
    let programs: Vec<_> = args
        .iter()
        .flat_map(|d| ccvm_corpus::load_dir(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mb = |bytes: usize, t: Duration| bytes as f64 / t.as_secs_f64() / 1e6;
    let fallback = || -> Box<dyn Codec> {
        if pagelz {
            Box::new(PageLz::new())
        } else {
            Box::new(Lz4::new())
        }
    };
    let alone: Vec<_> = programs.iter().map(|p| measure(&mut *fallback(), &p.data, 3)).collect();
    let all = |runs: &[(usize, Duration, Duration)]| {
        runs.iter().fold((0, Duration::ZERO, Duration::ZERO), |(s, c, d), r| {
            (s + r.0, c + r.1, d + r.2)
        })
    };
    let bytes: usize = programs.iter().map(|p| p.data.len()).sum();
    let (s0, c0, d0) = all(&alone);
    let name = fallback().name();
    println!(
        "{name}: ratio {:.3}, compress {:.0} MB/s, decompress {:.0} MB/s",
        bytes as f64 / s0 as f64,
        mb(bytes, c0),
        mb(bytes, d0)
    );
    for keep in [0, 512, 1024, 1408, 1792] {
        for abort in [keep, 2048, 2560, 3072, 4096].into_iter().filter(|&a| a >= keep) {
            let make = || {
                if pagelz {
                    Hybrid::with_pagelz_thresholds(keep, abort)
                } else {
                    Hybrid::with_thresholds(keep, abort)
                }
            };
            let runs: Vec<_> = programs.iter().map(|p| measure(&mut make(), &p.data, 3)).collect();
            let (s, c, d) = all(&runs);
            let (worst, share) = programs
                .iter()
                .zip(runs.iter().zip(&alone))
                .map(|(p, (r, a))| (p.name.as_str(), a.0 as f64 / r.0 as f64))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("a program");
            println!(
                "keep {keep:>4} abort {abort:>4}: ratio {:.3} ({:+.1}% vs {name}), worst {worst} {share:.3}, compress {:.2}x, decompress {:.2}x {name}'s speed",
                bytes as f64 / s as f64,
                (s0 as f64 / s as f64 - 1.0) * 100.0,
                c0.as_secs_f64() / c.as_secs_f64(),
                d0.as_secs_f64() / d.as_secs_f64(),
            );
        }
    }
}

//! Sweeps the hybrid codec's thresholds on corpus folders and prints, for
//! each pair, the compression ratio, the worst program's ratio as a share
//! of the fallback codec's alone, and the compression and decompression
//! speeds beside the fallback's, measured in the same run (best of 3
//! passes, one thread).
//!
//! `cargo run --release -p ccvm-codec --example tune_hybrid -- [--pagelz] [CORPUS_DIR...]`
//!
//! The fallback is LZ4, or PageLz with `--pagelz`; the folders default to
//! `corpus/large`.

#[allow(dead_code)] // only the round trips and the programs
mod common;

use common::RoundTrips;

use ccvm_codec::{baseline::Lz4, hybrid::Hybrid, pagelz::PageLz, Codec};
use std::time::Duration;

fn measure(codec: &mut dyn Codec, pages: &[u8]) -> RoundTrips {
    common::round_trips(codec, pages, 3)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let pagelz = args.iter().any(|a| a == "--pagelz");
    args.retain(|a| a != "--pagelz");
    let (programs, _) = common::programs_from(&args);
    let mb = |bytes: usize, t: Duration| bytes as f64 / t.as_secs_f64() / 1e6;
    let fallback = || -> Box<dyn Codec> {
        if pagelz {
            Box::new(PageLz::new())
        } else {
            Box::new(Lz4::new())
        }
    };
    let alone: Vec<_> = programs.iter().map(|p| measure(&mut *fallback(), &p.data)).collect();
    let all = |runs: &[RoundTrips]| {
        runs.iter().fold((0, Duration::ZERO, Duration::ZERO), |(s, c, d), r| {
            (s + r.stored, c + r.compress, d + r.decompress)
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
            let runs: Vec<_> = programs.iter().map(|p| measure(&mut make(), &p.data)).collect();
            let (s, c, d) = all(&runs);
            let (worst, share) = programs
                .iter()
                .zip(runs.iter().zip(&alone))
                .map(|(p, (r, a))| (p.name.as_str(), a.stored as f64 / r.stored as f64))
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

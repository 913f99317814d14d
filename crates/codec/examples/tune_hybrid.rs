//! Sweeps the hybrid codec's threshold on a corpus and prints, for each,
//! the compression ratio and symmetric throughput beside LZ4's, measured in
//! the same run (best of 5 passes, one thread).
//!
//! `cargo run --release -p ccvm-codec --example tune_hybrid [CORPUS_DIR]`

#[allow(dead_code)] // only the round trips
mod common;

use ccvm_codec::{baseline::Lz4, hybrid::Hybrid, Codec};

fn measure(codec: &mut dyn Codec, pages: &[u8]) -> (f64, f64) {
    let (stored, best) = common::round_trips(codec, pages, 5);
    (
        pages.len() as f64 / stored as f64,
        pages.len() as f64 / best.as_secs_f64() / 1e6,
    )
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(Into::into)
        .unwrap_or_else(ccvm_corpus::default_dir);
    let files = ccvm_corpus::load_dir(dir).unwrap_or_else(|e| panic!("{e}"));
    let pages: Vec<u8> = files.iter().flat_map(|f| f.data.iter().copied()).collect();
    let (lr, ls) = measure(&mut Lz4::new(), &pages);
    println!("lz4: ratio {lr:.3}, symmetric {ls:.0} MB/s");
    for keep in [1024, 1280, 1408, 1536, 1792, 2048] {
        for abort in [keep, keep + 256, keep + 512, 4096] {
            let (r, s) = measure(&mut Hybrid::with_thresholds(keep, abort), &pages);
            println!(
                "keep {keep:>4} abort {abort:>4}: ratio {r:.3} ({:+.1}% vs lz4), symmetric {s:.0} MB/s ({:.2}x lz4)",
                (r / lr - 1.0) * 100.0,
                s / ls
            );
        }
    }
}

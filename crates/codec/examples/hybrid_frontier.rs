//! What any per-page choice among codecs can reach: the bound on a hybrid.
//!
//! Every page is compressed and decompressed by each named codec and
//! timed (the best of three rounds of five calls on that page). A chooser
//! that knew every page's sizes and times in advance, for free, would pick
//! for each page the codec with the least `bytes + λ · nanoseconds`; as λ
//! runs from 0 (size alone) upwards, the totals trace the best trade-offs
//! between ratio and symmetric speed that a per-page hybrid of these codecs
//! can have (with many pages, the sum of per-page choices fills in the
//! convex hull). A real hybrid pays for its projection on top, so it sits
//! behind this frontier.
//!
//! Symmetric speed is bytes / (compress time + decompress time), against
//! LZ4's in the same run. A page a codec cannot shrink is kept raw, 4096
//! bytes and no decode.
//!
//! `cargo run --release -p ccvm-codec --example hybrid_frontier -- wkdm lz4 wordlz lzo1x-1 [--corpus DIR]`

use std::time::Instant;

use ccvm_codec::PAGE_SIZE;

mod common;

/// Size and time of one page under one codec.
#[derive(Clone, Copy)]
struct Cost {
    bytes: f64,
    ns: f64,
}

fn time_min(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..5 {
                f();
            }
            t.elapsed().as_nanos() as f64 / 5.0
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let (dir, files, mut args) = common::corpus_and_names();
    if !args.iter().any(|a| a == "lz4") {
        args.push("lz4".into());
    }
    let pages: Vec<&[u8]> = files.iter().flat_map(|f| f.pages()).collect();
    let mut codecs = common::codecs(&args);
    let (mut out, mut back) = (vec![0u8; PAGE_SIZE], vec![0u8; PAGE_SIZE]);
    // cost[page][codec]
    let cost: Vec<Vec<Cost>> = pages
        .iter()
        .map(|p| {
            codecs
                .iter_mut()
                .map(|c| {
                    let compress = time_min(|| {
                        let _ = c.compress(p, &mut out);
                    });
                    match c.compress(p, &mut out) {
                        Ok(n) => {
                            let packed = out[..n].to_vec();
                            let decompress = time_min(|| c.decompress(&packed, &mut back).expect("own output decodes"));
                            Cost {
                                bytes: n as f64,
                                ns: compress + decompress,
                            }
                        }
                        Err(_) => Cost {
                            bytes: PAGE_SIZE as f64,
                            ns: compress,
                        },
                    }
                })
                .collect()
        })
        .collect();
    let total = (pages.len() * PAGE_SIZE) as f64;
    // Ratio, MB/s (symmetric) and the share of pages per codec for a choice.
    let sum = |choose: &dyn Fn(&[Cost]) -> usize| {
        let (mut bytes, mut ns, mut share) = (0.0, 0.0, vec![0usize; codecs.len()]);
        for c in &cost {
            let k = choose(c);
            bytes += c[k].bytes;
            ns += c[k].ns;
            share[k] += 1;
        }
        (total / bytes, total / ns * 1e3, share)
    };
    let lz4 = args.iter().position(|a| a == "lz4").expect("added above");
    let (_, lz4_speed, _) = sum(&|_| lz4);
    println!(
        "{} pages from {}; symmetric speed against LZ4's {lz4_speed:.0} MB/s",
        pages.len(),
        dir.display()
    );
    println!(
        "{:24} {:>7} {:>10} {:>7}  pages per codec",
        "choice", "ratio", "sym MB/s", "× LZ4"
    );
    let row = |label: &str, (ratio, speed, share): (f64, f64, Vec<usize>)| {
        let shares: Vec<String> = args.iter().zip(&share).map(|(n, s)| format!("{n} {s}")).collect();
        println!(
            "{label:24} {ratio:7.3} {speed:10.0} {:7.2}  {}",
            speed / lz4_speed,
            shares.join(", ")
        );
    };
    for (k, name) in args.iter().enumerate() {
        row(&format!("{name} alone"), sum(&|_| k));
    }
    for lambda in [0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0] {
        let choose = |c: &[Cost]| {
            (0..c.len())
                .min_by(|&a, &b| {
                    let (x, y) = (c[a].bytes + lambda * c[a].ns, c[b].bytes + lambda * c[b].ns);
                    x.total_cmp(&y)
                })
                .expect("a codec")
        };
        row(&format!("best, λ = {lambda} B/ns"), sum(&choose));
    }
}

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
//! With `--own`, the baselines (LZ4, LZO1X-1, zstd) are timed but never
//! chosen: the bound on a hybrid made of ccvm's own codecs. Each row also
//! names the program whose ratio is lowest as a share of LZ4's on it.
//!
//! `cargo run --release -p ccvm-codec --example hybrid_frontier -- wkdm lz4 wordlz lzo1x-1 [--own] [--corpus DIR]`

use std::time::Instant;

use ccvm_codec::PAGE_SIZE;

mod common;

/// Size and time of one page under one codec.
#[derive(Clone, Copy)]
struct Cost {
    bytes: f64,
    ns: f64,
    /// The compression's share of `ns`.
    compress_ns: f64,
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

/// `cost[page][codec]`: every page's size and times under every codec.
fn measure(codecs: &mut [Box<dyn ccvm_codec::Codec>], pages: &[&[u8]]) -> Vec<Vec<Cost>> {
    let (mut out, mut back) = (vec![0u8; PAGE_SIZE], vec![0u8; PAGE_SIZE]);
    pages
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
                                compress_ns: compress,
                            }
                        }
                        Err(_) => Cost {
                            bytes: PAGE_SIZE as f64,
                            ns: compress,
                            compress_ns: compress,
                        },
                    }
                })
                .collect()
        })
        .collect()
}

/// The program whose ratio is the lowest share of LZ4's, and that share,
/// from the bytes each program took and LZ4's bytes for it.
fn worst_program(per_program: &[f64], lz4_bytes: &[f64]) -> (usize, f64) {
    per_program
        .iter()
        .zip(lz4_bytes)
        .map(|(b, l)| l / b)
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, 1.0))
}

fn main() {
    let (dir, files, mut args) = common::corpus_and_names();
    let own = args.iter().any(|a| a == "--own");
    args.retain(|a| a != "--own");
    if !args.iter().any(|a| a == "lz4") {
        args.push("lz4".into());
    }
    let pages: Vec<&[u8]> = files.iter().flat_map(|f| f.pages()).collect();
    // The program (file) of every page, for the worst program's ratio.
    let program: Vec<usize> = files
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.pages().map(move |_| i))
        .collect();
    let baseline = |name: &str| matches!(name, "lz4" | "lzo1x-1" | "zstd-1");
    let choosable: Vec<usize> = (0..args.len()).filter(|&k| !own || !baseline(&args[k])).collect();
    let cost = measure(&mut common::codecs(&args), &pages);
    let total = (pages.len() * PAGE_SIZE) as f64;
    // Ratio, MB/s (symmetric) and the share of pages per codec for a choice.
    let lz4 = args.iter().position(|a| a == "lz4").expect("added above");
    // Bytes per program under LZ4, for each choice's worst program.
    let mut lz4_bytes = vec![0.0; files.len()];
    for (c, &f) in cost.iter().zip(&program) {
        lz4_bytes[f] += c[lz4].bytes;
    }
    let sum = |choose: &dyn Fn(&[Cost]) -> usize| {
        let (mut bytes, mut ns, mut share) = (0.0, 0.0, vec![0usize; args.len()]);
        let mut per_program = vec![0.0; files.len()];
        for (c, &f) in cost.iter().zip(&program) {
            let k = choose(c);
            bytes += c[k].bytes;
            per_program[f] += c[k].bytes;
            ns += c[k].ns;
            share[k] += 1;
        }
        (
            total / bytes,
            total / ns * 1e3,
            share,
            worst_program(&per_program, &lz4_bytes),
        )
    };
    let (_, lz4_speed, _, _) = sum(&|_| lz4);
    println!(
        "{} pages from {}; symmetric speed against LZ4's {lz4_speed:.0} MB/s",
        pages.len(),
        dir.display()
    );
    println!(
        "{:24} {:>7} {:>10} {:>7}  worst program, × LZ4's ratio  pages per codec",
        "choice", "ratio", "sym MB/s", "× LZ4"
    );
    type Sum = (f64, f64, Vec<usize>, (usize, f64));
    let row = |label: &str, (ratio, speed, share, (worst, of_lz4)): Sum| {
        let shares: Vec<String> = args.iter().zip(&share).map(|(n, s)| format!("{n} {s}")).collect();
        println!(
            "{label:24} {ratio:7.3} {speed:10.0} {:7.2}  {} {of_lz4:.3}  {}",
            speed / lz4_speed,
            files[worst].name,
            shares.join(", ")
        );
    };
    for (k, name) in args.iter().enumerate() {
        row(&format!("{name} alone"), sum(&|_| k));
    }
    for lambda in [
        0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 1.0, 2.0, 5.0,
    ] {
        let choose = |c: &[Cost]| {
            choosable
                .iter()
                .copied()
                .min_by(|&a, &b| {
                    let (x, y) = (c[a].bytes + lambda * c[a].ns, c[b].bytes + lambda * c[b].ns);
                    x.total_cmp(&y)
                })
                .expect("a codec")
        };
        row(&format!("best, λ = {lambda} B/ns"), sum(&choose));
    }

    if args.len() >= 2 && !baseline(&args[0]) && !baseline(&args[1]) {
        let names = (args[0].as_str(), args[1].as_str());
        two_step(&cost, &program, &lz4_bytes, lz4_speed, names, &files);
    }
}

/// A chooser that pays for its projection: the first codec compresses
/// every page, and its output is kept when at most `keep` bytes; otherwise
/// the second codec compresses the page too and the smaller output is
/// kept. Its time is the first's compression, then the kept codec's round
/// trip (and the other's compression).
fn two_step(
    cost: &[Vec<Cost>],
    program: &[usize],
    lz4_bytes: &[f64],
    lz4_speed: f64,
    (first, second): (&str, &str),
    files: &[ccvm_corpus::PageFile],
) {
    let total = (cost.len() * PAGE_SIZE) as f64;
    for keep in [256.0, 512.0, 768.0, 1024.0, 1280.0, 1536.0] {
        let (mut bytes, mut ns) = (0.0, 0.0);
        let mut per_program = vec![0.0; lz4_bytes.len()];
        for (c, &f) in cost.iter().zip(program) {
            let (a, b) = (c[0], c[1]);
            let (kb, kn) = if a.bytes <= keep {
                (a.bytes, a.ns)
            } else if b.bytes <= a.bytes {
                (b.bytes, a.compress_ns + b.ns)
            } else {
                (a.bytes, a.ns + b.compress_ns)
            };
            bytes += kb;
            ns += kn;
            per_program[f] += kb;
        }
        let (worst, of_lz4) = worst_program(&per_program, lz4_bytes);
        let speed = total / ns * 1e3;
        println!(
            "{:24} {:7.3} {speed:10.0} {:7.2}  {} {of_lz4:.3}  then {second}",
            format!("{first} first, keep {keep}"),
            total / bytes,
            speed / lz4_speed,
            files[worst].name
        );
    }
}

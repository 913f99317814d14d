//! Leave-one-program-out judgement of the hybrid codec's thresholds.
//!
//! The hybrid's two thresholds (keep WKdm's output up to *keep* bytes per
//! 4 KiB; abandon WKdm past *abort*) were chosen on the whole corpus, so
//! the corpus cannot also judge them. Here each program's pages are left
//! out in turn: the thresholds are chosen on the other programs (the
//! highest ratio among the pairs whose symmetric throughput there is at
//! least LZ4's), then judged on the program left out, against LZ4 and
//! LZO1X-1 measured on the same pages in the same run. The worst program
//! is what a program the project does not hold can expect.
//!
//! `cargo run --release -p ccvm-codec --example held_out [CORPUS_DIR...]`
//! (default: `corpus/large` beside `corpus/pages`; several folders are
//! judged as one set of programs).

#[allow(dead_code)] // only the round trips and the programs
mod common;

use ccvm_codec::{
    baseline::{Lz4, Lzo1x1},
    hybrid::Hybrid,
    Codec,
};

/// A codec's total on one program: stored bytes and round-trip time.
#[derive(Clone, Copy, Default)]
struct Total {
    bytes: f64,
    secs: f64,
}

impl std::ops::AddAssign for Total {
    fn add_assign(&mut self, o: Total) {
        self.bytes += o.bytes;
        self.secs += o.secs;
    }
}

/// A codec's round trips over `pages` (best of three passes).
fn measure(codec: &mut dyn Codec, pages: &[u8]) -> Total {
    let trips = common::round_trips(codec, pages, 3);
    Total {
        bytes: trips.stored as f64,
        secs: trips.time().as_secs_f64(),
    }
}

fn main() {
    let (files, dir) = common::programs_from_args();
    let pairs: Vec<(usize, usize)> = [1024, 1280, 1408, 1536, 1792, 2048]
        .into_iter()
        .flat_map(|keep| [keep, keep + 256, keep + 512, 4096].map(|abort| (keep, abort)))
        .collect();
    // Per program: LZ4, LZO1X-1, then each pair.
    let totals: Vec<Vec<Total>> = files
        .iter()
        .map(|f| {
            eprintln!("measuring {} ({} pages)", f.name, f.page_count());
            let mut row = vec![measure(&mut Lz4::new(), &f.data), measure(&mut Lzo1x1::new(), &f.data)];
            row.extend(
                pairs
                    .iter()
                    .map(|&(keep, abort)| measure(&mut Hybrid::with_thresholds(keep, abort), &f.data)),
            );
            row
        })
        .collect();
    let size = |i: usize| files[i].data.len() as f64;
    println!(
        "{} programs from {}; hybrid thresholds chosen on the others, judged on the one left out",
        files.len(),
        dir
    );
    println!(
        "{:18} {:>11} {:>7} {:>7} {:>7} {:>9} {:>9}",
        "left out", "keep/abort", "hybrid", "lz4", "lzo", "× lz4", "sym × lz4"
    );
    let mut worst: Option<(f64, String)> = None;
    let mut all = [Total::default(); 3];
    for out in 0..files.len() {
        // The pair with the best ratio on the others among those at least
        // as fast as LZ4 there (the fastest pair if none is).
        let others = |k: usize| {
            let mut t = Total::default();
            (0..files.len()).filter(|&i| i != out).for_each(|i| t += totals[i][k]);
            t
        };
        let lz4 = others(0);
        let chosen = (0..pairs.len())
            .filter(|&j| others(2 + j).secs <= lz4.secs)
            .min_by(|&a, &b| others(2 + a).bytes.total_cmp(&others(2 + b).bytes))
            .unwrap_or_else(|| {
                (0..pairs.len())
                    .min_by(|&a, &b| others(2 + a).secs.total_cmp(&others(2 + b).secs))
                    .expect("pairs")
            });
        let [l4, lo, hy] = [totals[out][0], totals[out][1], totals[out][2 + chosen]];
        all[0] += l4;
        all[1] += lo;
        all[2] += hy;
        let (ratio, against) = (size(out) / hy.bytes, l4.bytes / hy.bytes);
        println!(
            "{:18} {:>11} {:7.3} {:7.3} {:7.3} {:9.3} {:9.2}",
            files[out].name,
            format!("{}/{}", pairs[chosen].0, pairs[chosen].1),
            ratio,
            size(out) / l4.bytes,
            size(out) / lo.bytes,
            against,
            l4.secs / hy.secs
        );
        if worst.as_ref().is_none_or(|(w, _)| against < *w) {
            worst = Some((against, files[out].name.clone()));
        }
    }
    let total: f64 = files.iter().map(|f| f.data.len() as f64).sum();
    println!(
        "{:18} {:>11} {:7.3} {:7.3} {:7.3} {:9.3} {:9.2}",
        "all, held out",
        "",
        total / all[2].bytes,
        total / all[0].bytes,
        total / all[1].bytes,
        all[0].bytes / all[2].bytes,
        all[0].secs / all[2].secs
    );
    let (w, name) = worst.expect("programs");
    println!("worst program against LZ4's ratio: {name}, {w:.3}");
}

//! How compressed 64-byte lines fit a compressed cache, on real memory:
//! paper 003 §6.4's comparison of pair-matching with segmented lines (its
//! Figure 6.5 and Table 6.3), statically.
//!
//! Every 64-byte line of the corpus is compressed by each named codec (a
//! line that does not shrink is stored as it is, 64 bytes). The lines are
//! dealt to the sets of an 8-way cache (line `i` to set `i mod sets`), and
//! each set's lines are taken eight at a time, as the set would hold them:
//!
//! * segmented into `k` parts of `64/k` bytes: a line takes
//!   `ceil(size / (64/k))` segments, its effective ratio `segments / k`;
//! * pair-matching: two lines share one line's space when their sizes add
//!   to 64 or less; the most pairs a set's eight can make (smallest with
//!   largest that fits), a paired line counting 50%, an unpaired one 100%.
//!
//! The effective system-wide compression ratio is the mean over all lines,
//! as 003 defines it; the raw ratio is the mean of `size / 64`. Lower is
//! better. (A static view: which lines share a set at once depends on the
//! access stream, which the cache simulator will replay.)
//!
//! `cargo run --release -p ccvm-codec --example line_placement -- cpack fpc bdi wkdm lz4 [--corpus DIR]`

mod common;

const LINE: usize = 64;
const WAYS: usize = 8;
const SETS: usize = 2048;

/// The sum of the effective ratios of one set's lines under
/// pair-matching: lines less the pairs made.
fn paired(sizes: &mut [usize]) -> f64 {
    sizes.sort_unstable();
    let (mut i, mut j, mut pairs) = (0usize, sizes.len(), 0usize);
    while j > i + 1 {
        if sizes[i] + sizes[j - 1] <= LINE {
            pairs += 1;
            i += 1;
        }
        j -= 1;
    }
    // Paired lines count a half each; the rest a whole line.
    (sizes.len() - pairs) as f64
}

fn main() {
    let (dir, files, mut names) = common::corpus_and_names();
    if names.is_empty() {
        names = ["cpack", "fpc", "bdi", "wkdm", "lz4"].map(String::from).to_vec();
    }
    let lines: Vec<&[u8]> = files.iter().flat_map(|f| f.data.chunks_exact(LINE)).collect();
    println!(
        "{} lines of 64 bytes from {}; {SETS} sets of {WAYS} ways",
        lines.len(),
        dir.display()
    );
    println!(
        "{:>8} {:>7} {:>8} {:>8} {:>8} {:>13}",
        "codec", "raw", "seg4", "seg8", "pair", "lines <= 50%"
    );
    for mut codec in common::codecs(&names) {
        let mut out = [0u8; LINE];
        let sizes: Vec<usize> = lines
            .iter()
            .map(|l| codec.compress(l, &mut out).map_or(LINE, |n| n.min(LINE)))
            .collect();
        let n = sizes.len() as f64;
        let raw = sizes.iter().sum::<usize>() as f64 / (n * LINE as f64);
        let seg = |k: usize| sizes.iter().map(|&s| s.div_ceil(LINE / k)).sum::<usize>() as f64 / (n * k as f64);
        let mut sets: Vec<Vec<usize>> = vec![Vec::new(); SETS];
        for (i, &s) in sizes.iter().enumerate() {
            sets[i % SETS].push(s);
        }
        let slots: f64 = sets
            .iter_mut()
            .flat_map(|set| set.chunks_mut(WAYS).map(paired).collect::<Vec<_>>())
            .sum();
        let half = sizes.iter().filter(|&&s| s <= LINE / 2).count() as f64 / n;
        println!(
            "{:>8} {:>6.1}% {:>7.1}% {:>7.1}% {:>7.1}% {:>12.1}%",
            codec.name(),
            raw * 100.0,
            seg(4) * 100.0,
            seg(8) * 100.0,
            slots / n * 100.0,
            half * 100.0
        );
    }
}

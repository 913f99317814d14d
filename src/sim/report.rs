//! `ccvm sim report`: what a sweep's rows say, per trace, codec, policy
//! and disk cost, against LRU and against the best fixed share.

use std::path::Path;

use anyhow::Context;
use ccvm_sim::plan::TraceSummary;
use ccvm_sim::sweep::SweepRow;

/// The distinct keys `key` gives the rows (those it gives one), sorted.
fn distinct<K: Ord>(rows: &[SweepRow], key: impl Fn(&SweepRow) -> Option<K>) -> Vec<K> {
    let mut keys: Vec<K> = rows.iter().filter_map(key).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A row's disk cost in whole microseconds, to group rows by.
fn disk_us(r: &SweepRow) -> u64 {
    (r.disk_ms * 1000.0) as u64
}

/// Prints, per adaptive policy, trace and codec at 5 ms, the adaptive
/// policy's paging time over the best fixed share's at each size (the
/// issue's target: within 10% everywhere in the interesting region). The
/// fixed shares are every `fixedN` the sweep ran, and no compression.
fn against_best_fixed(rows: &[SweepRow]) -> anyhow::Result<()> {
    let at_5ms = |r: &&SweepRow| (r.disk_ms - 5.0).abs() < 1e-9;
    let keys = distinct(rows, |r| {
        (r.policy.starts_with("adaptive") && at_5ms(&r)).then(|| (r.policy.clone(), r.trace.clone(), r.codec.clone()))
    });
    let mut fixed: Vec<&str> = rows
        .iter()
        .filter(|r| r.policy.starts_with("fixed"))
        .map(|r| r.policy.as_str())
        .collect();
    fixed.sort_by_key(|p| p.trim_start_matches("fixed").parse::<u32>().unwrap_or(0));
    fixed.dedup();
    let mut shown = String::new();
    for (policy, trace, codec) in keys {
        if shown != policy {
            outln!()?;
            outln!(
                "{policy} / best fixed share ({}, and no compression), 5 ms: worst and mean over sizes",
                fixed.join(", ")
            )?;
            outln!(
                "{:<12} {:<7} | {:>8} {:>8} {:>3} | {:>8} {:>8} {:>3} | sizes over 1.10",
                "trace",
                "codec",
                "region",
                "mean",
                "n",
                "all",
                "mean",
                "n"
            )?;
            shown = policy.clone();
        }
        let at = |name: &str, m: usize| {
            rows.iter().filter(at_5ms).find(|r| {
                r.trace == trace && r.policy == name && r.memory_pages == m && (r.codec == codec || name == "lru")
            })
        };
        let mut region = Vec::new();
        let mut all = Vec::new();
        let mut over = Vec::new();
        for a in rows
            .iter()
            .filter(at_5ms)
            .filter(|r| r.trace == trace && r.codec == codec && r.policy == policy)
        {
            let m = a.memory_pages;
            let best = std::iter::once("lru")
                .chain(fixed.iter().copied())
                .filter_map(|p| at(p, m).map(|r| r.paging_s))
                .fold(f64::INFINITY, f64::min);
            if !best.is_finite() || best <= 0.0 {
                continue;
            }
            let ratio = a.paging_s / best;
            all.push(ratio);
            if a.interesting {
                region.push(ratio);
            }
            if ratio > 1.10 {
                over.push(m);
            }
        }
        let worst_mean = |v: &[f64]| {
            if v.is_empty() {
                return "       -        -   0".to_string();
            }
            let worst = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            format!(
                "{worst:>8.2} {:>8.2} {:>3}",
                v.iter().sum::<f64>() / v.len() as f64,
                v.len()
            )
        };
        outln!(
            "{trace:<12} {codec:<7} | {} | {} | {over:?}",
            worst_mean(&region),
            worst_mean(&all)
        )?;
    }
    Ok(())
}

/// Prints, per trace, codec, policy and disk cost, the mean and range of
/// the paging-time reduction over the interesting region.
pub fn report(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join("sweep.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {}; run `ccvm sim sweep ... --out {}` first",
            path.display(),
            dir.display()
        )
    })?;
    let rows: Vec<SweepRow> =
        serde_json::from_str(&text).with_context(|| format!("{} is not a sweep", path.display()))?;
    let keys = distinct(&rows, |r| {
        (r.policy != "lru").then(|| (r.trace.clone(), r.codec.clone(), r.policy.clone(), disk_us(r)))
    });
    if let Some(f) = rows.first().map(|r| r.cpu_factor).filter(|&f| f != 1.0) {
        outln!("simulated CPU {f} times slower than the measuring one (codec and program run times x {f})")?;
    }
    print_traces(dir)?;
    print_header()?;
    print_reductions(&rows, keys)?;
    against_best_fixed(&rows)?;
    no_harm(&rows)?;
    Ok(())
}

/// The report's column headings.
fn print_header() -> anyhow::Result<()> {
    outln!(
        "paging-time reduction against LRU, % (paper 000 at 5 ms: 20-80% over the interesting region, about 40% on average)"
    )?;
    outln!("and the change in time to completion (run + paging) against LRU's, % (negative: sooner)")?;
    outln!(
        "{:<12} {:<7} {:<13} {:>7} | {:>24} | {:>24} | {:>21}",
        "",
        "",
        "",
        "",
        "interesting region",
        "every size LRU pages at",
        "completion, % change"
    )?;
    outln!(
        "{:<12} {:<7} {:<13} {:>7} | {:>7} {:>7} {:>7} {:>1} | {:>7} {:>7} {:>7} {:>1} | {:>6} {:>6} {:>7}",
        "trace",
        "codec",
        "policy",
        "disk ms",
        "mean",
        "min",
        "max",
        "n",
        "mean",
        "min",
        "max",
        "n",
        "region",
        "all",
        "worst"
    )?;
    Ok(())
}

/// A line per (trace, codec, policy, disk cost) key of `rows`: the
/// reduction's mean and range over the interesting region and over every
/// size, and the change in time to completion.
fn print_reductions(rows: &[SweepRow], keys: Vec<(String, String, String, u64)>) -> anyhow::Result<()> {
    let stats = |v: &[f64]| {
        if v.is_empty() {
            return "      -       -       - 0".to_string();
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        format!("{mean:>7.1} {min:>7.1} {max:>7.1} {}", v.len())
    };
    for (trace, codec, policy, disk) in keys {
        let of: Vec<&SweepRow> = rows
            .iter()
            .filter(|r| {
                r.trace == trace && r.codec == codec && r.policy == policy && (r.disk_ms * 1000.0) as u64 == disk
            })
            .collect();
        let reduction = |r: &&SweepRow| r.normalized.map(|n| (1.0 - n) * 100.0);
        let region: Vec<f64> = of.iter().filter(|r| r.interesting).filter_map(reduction).collect();
        let all: Vec<f64> = of.iter().filter_map(reduction).collect();
        // End to end, so sizes where LRU barely pages do not dominate.
        let completion = |r: &&SweepRow| {
            (r.run_s > 0.0).then(|| ((r.run_s + r.paging_s) / (r.run_s + r.lru_paging_s) - 1.0) * 100.0)
        };
        let mean = |v: Vec<f64>| {
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.1}", v.iter().sum::<f64>() / v.len() as f64)
            }
        };
        let all_completion: Vec<f64> = of.iter().filter_map(completion).collect();
        let worst = all_completion.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        outln!(
            "{trace:<12} {codec:<7} {policy:<13} {:>7} | {} | {} | {:>6} {:>6} {:>7}",
            disk as f64 / 1000.0,
            stats(&region),
            stats(&all),
            mean(of.iter().filter(|r| r.interesting).filter_map(completion).collect()),
            mean(all_completion),
            if worst.is_finite() {
                format!("{worst:+.1}")
            } else {
                "-".into()
            }
        )?;
    }
    Ok(())
}

/// Prints, per trace, codec and disk cost, the adaptive policies' worst
/// paging time against LRU's over every size at which LRU pages (issue
/// 11's "no harm" bound is 1.05) and how many sizes exceed that bound.
fn no_harm(rows: &[SweepRow]) -> anyhow::Result<()> {
    let keys = distinct(rows, |r| {
        r.policy
            .starts_with("adaptive")
            .then(|| (r.policy.clone(), r.trace.clone(), r.codec.clone(), disk_us(r)))
    });
    outln!()?;
    outln!("adaptive / LRU paging time over every size at which LRU pages: worst, and sizes above 1.05")?;
    outln!(
        "{:<13} {:<12} {:<7} {:>7} | {:>7} {:>5}",
        "policy",
        "trace",
        "codec",
        "disk ms",
        "worst",
        "over"
    )?;
    for (policy, trace, codec, disk) in keys {
        let ratios: Vec<f64> = rows
            .iter()
            .filter(|r| {
                r.policy == policy && r.trace == trace && r.codec == codec && (r.disk_ms * 1000.0) as u64 == disk
            })
            .filter_map(|r| r.normalized)
            .collect();
        let worst = ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let over = ratios.iter().filter(|&&n| n > 1.05).count();
        outln!(
            "{policy:<13} {trace:<12} {codec:<7} {:>7} | {worst:>7.2} {over:>2}/{:<2}",
            disk as f64 / 1000.0,
            ratios.len()
        )?;
    }
    Ok(())
}

/// Prints `traces.csv` (written by the sweep since it was added), if any:
/// what each trace is, and its images' ratio per codec.
fn print_traces(dir: &Path) -> anyhow::Result<()> {
    let Ok(mut reader) = csv::Reader::from_path(dir.join("traces.csv")) else {
        return Ok(());
    };
    outln!(
        "{:<12} {:>10} {:>9} {:>8} {:>13} {:<7} {:>9} {:>6} {:>7} {:>7}",
        "trace",
        "references",
        "footprint",
        "run s",
        "region (5 ms)",
        "codec",
        "images",
        "ratio",
        "comp us",
        "dec us"
    )?;
    for s in reader.deserialize::<TraceSummary>().filter_map(Result::ok) {
        let region = match (s.region_lo, s.region_hi) {
            (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
            _ => "-".to_string(),
        };
        outln!(
            "{:<12} {:>10} {:>9} {:>8.6} {:>13} {:<7} {:>9} {:>6.3} {:>7.3} {:>7.3}",
            s.trace,
            s.references,
            s.footprint_pages,
            s.run_s,
            region,
            s.codec,
            s.images,
            s.ratio,
            s.compress_us,
            s.decompress_us
        )?;
    }
    outln!()?;
    Ok(())
}

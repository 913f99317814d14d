//! `ccvm sim sweep` and `ccvm sim report`: trace-driven simulation of the
//! policies over memory sizes, codecs and disk costs (paper 000 §4). This
//! module runs sweeps; [`report`] summarizes them.

mod report;

pub use report::report;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use ccvm_sim::sweep::{self, SweepRow};
use ccvm_sim::{CodecCosts, SimConfig, Trace};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

/// Disk costs of the sensitivity study, ms: paper 000 Figure 6's, plus
/// today's SSD-like 0.1 and 0.02 ms.
pub const DISK_MS: [f64; 7] = [0.02, 0.1, 0.625, 1.25, 2.5, 5.0, 10.0];

/// What to sweep.
pub struct SweepOptions {
    /// Trace files.
    pub traces: Vec<PathBuf>,
    /// Output folder.
    pub out: PathBuf,
    /// Codecs of the cache.
    pub codecs: Vec<String>,
    /// Policies besides plain LRU.
    pub policies: Vec<String>,
    /// Memory sizes per trace.
    pub sizes: usize,
    /// Exact memory sizes, pages, instead of log-spaced ones.
    pub pages: Vec<usize>,
    /// Timed runs per image.
    pub runs: usize,
    /// How many times slower the simulated CPU is than this one: multiplies
    /// codec times and the program's own run time (both run on the CPU), so
    /// the interesting region moves with it.
    pub cpu_factor: f64,
    /// Cost of writing a page to disk, ms (0: free, as paper 000).
    pub write_ms: f64,
    /// Model the live runtime's trapped pages with this share (`None`:
    /// every reference reaches the policy).
    pub trap_share: Option<f64>,
    /// Charge compressed pages the live store's slack share, as the live
    /// runtime does (see `ccvm_sim::SimConfig::store_slack`).
    pub store_slack: bool,
    /// Disk costs of the sensitivity study, ms; 5 ms is always run.
    pub disk_ms: Vec<f64>,
    /// How to cost imported plain traces (`.txt`, `.csv`).
    pub plain: PlainCosts,
}

/// The compression ratio and codec times given to imported plain traces,
/// which carry no page contents, and the program's run time.
pub struct PlainCosts {
    /// Compression ratio of every page.
    pub ratio: f64,
    /// Compression time per page, ns.
    pub compress_ns: u32,
    /// Decompression time per page, ns.
    pub decompress_ns: u32,
    /// The traced program's run time, ns (0: no interesting region).
    pub run_time_ns: u64,
}

struct Point<'a> {
    name: String,
    trace: &'a Trace,
    costs: &'a CodecCosts,
    lru: &'a [u64],
    run_time_ns: f64,
    policy: String,
    pages: usize,
    disk_ms: f64,
    cache_cost_ns: f64,
}

/// Runs the sweep and writes `sweep.csv` and `sweep.json` to the output
/// folder.
pub fn sweep(opts: &SweepOptions) -> anyhow::Result<()> {
    let mut disk_costs = opts.disk_ms.clone();
    disk_costs.push(5.0);
    disk_costs.sort_by(f64::total_cmp);
    disk_costs.dedup();
    std::fs::create_dir_all(&opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let cache = opts.out.join("costs");
    let mut loaded = Vec::new();
    for path in &opts.traces {
        let plain = matches!(path.extension().and_then(|e| e.to_str()), Some("txt" | "csv"));
        let trace = if plain {
            Trace::import_plain(path, opts.plain.run_time_ns)?
        } else {
            Trace::load(path)?
        };
        if trace.refs.is_empty() {
            bail!("{}: the trace has no references", path.display());
        }
        let lru = sweep::lru_disk_faults(&trace);
        let run = run_time_ns(&trace, opts);
        let region = sweep::interesting_region(&lru, 5e6, run);
        let footprint = lru.len() - 1;
        let window = trace.header.window_pages as usize;
        let mut sizes = if opts.pages.is_empty() {
            let mut sizes = sweep::log_sizes(window.max(8), footprint, opts.sizes);
            for &disk_ms in &disk_costs {
                if let Some((lo, hi)) = sweep::interesting_region(&lru, disk_ms * 1e6, run) {
                    sizes.extend([lo, hi, (lo + hi) / 2]);
                }
            }
            sizes
        } else {
            let (ok, out): (Vec<usize>, Vec<usize>) =
                opts.pages.iter().partition(|&&m| m >= window.max(1) && m <= footprint);
            if !out.is_empty() {
                eprintln!(
                    "{}: skipping sizes {out:?}: the trace covers {}..={footprint} pages (its window to its footprint)",
                    path.display(),
                    window.max(1)
                );
            }
            ok
        };
        sizes.retain(|&m| m >= window && m <= footprint);
        sizes.sort_unstable();
        sizes.dedup();
        let mut costs = Vec::new();
        if plain {
            let p = &opts.plain;
            eprintln!(
                "{}: imported {} references; every page compresses {}:1 in {} ns and back in {} ns",
                path.display(),
                trace.refs.len(),
                p.ratio,
                p.compress_ns,
                p.decompress_ns
            );
            costs.push(CodecCosts::uniform(
                trace.image_count,
                p.ratio,
                p.compress_ns,
                p.decompress_ns,
            ));
        }
        for codec in opts.codecs.iter().filter(|_| !plain) {
            eprintln!(
                "{}: {codec} costs of {} page images (timed once, then kept in {})",
                path.display(),
                trace.image_count,
                cache.display()
            );
            let bar = ProgressBar::new(trace.image_count as u64).with_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} images timed, {eta} left").expect("template"),
            );
            let measured = CodecCosts::cached_with_progress(path, codec, opts.runs, &cache, &mut || bar.inc(1));
            bar.finish_and_clear();
            costs.push(measured?);
        }
        // Traces are named by file stem, or whole file name when two stems clash.
        let stem = |p: &Path| {
            p.file_stem()
                .map_or("trace".into(), |s| s.to_string_lossy().into_owned())
        };
        let clash = opts.traces.iter().filter(|p| stem(p) == stem(path)).count() > 1;
        let name = if clash {
            path.file_name()
                .map_or("trace".into(), |s| s.to_string_lossy().replace('.', "_"))
        } else {
            stem(path)
        };
        loaded.push((name, trace, lru, region, sizes, costs));
    }
    let mut points = Vec::new();
    for (name, trace, lru, _, sizes, costs) in &loaded {
        for (ci, c) in costs.iter().enumerate() {
            let n = c.size.len().max(1) as f64;
            let per_hit = c
                .compress_ns
                .iter()
                .zip(&c.decompress_ns)
                .map(|(&a, &b)| (a + b) as f64)
                .sum::<f64>()
                / n;
            for policy in &opts.policies {
                // The disk-cost study (Figure 6) is for the adaptive policy
                // (and adaptive-safe, whose bound is at every disk cost)
                // with the first codec; everything is run at 5 ms.
                let disks: &[f64] = if (policy == "adaptive" || policy == "adaptive-safe") && ci == 0 {
                    &disk_costs
                } else {
                    &[5.0]
                };
                for &disk_ms in disks {
                    for &pages in sizes {
                        points.push(Point {
                            name: name.clone(),
                            trace,
                            costs: c,
                            lru,
                            run_time_ns: run_time_ns(trace, opts),
                            policy: policy.clone(),
                            pages,
                            disk_ms,
                            cache_cost_ns: per_hit * opts.cpu_factor,
                        });
                    }
                }
            }
        }
    }
    let bar = ProgressBar::new(points.len() as u64)
        .with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} simulations, {eta} left").expect("template"));
    let rows: Result<Vec<SweepRow>, String> = points
        .par_iter()
        .map(|p| {
            let config = SimConfig {
                disk_read_ns: p.disk_ms * 1e6,
                disk_write_ns: opts.write_ms * 1e6,
                cpu_factor: opts.cpu_factor,
                trap_share: opts.trap_share,
                store_slack: opts.store_slack,
            };
            let r = sweep::run_point(
                &p.name,
                p.trace,
                p.costs,
                p.lru,
                p.run_time_ns,
                &p.policy,
                p.pages,
                &config,
                p.cache_cost_ns,
            );
            bar.inc(1);
            r
        })
        .collect();
    bar.finish_and_clear();
    let mut rows = rows.map_err(anyhow::Error::msg)?;
    // LRU rows from the stack pass, for the figures and the CSV.
    for (name, trace, lru, region, sizes, _) in &loaded {
        for &disk_ms in &disk_costs {
            let run = run_time_ns(trace, opts);
            let lru_region = sweep::interesting_region(lru, disk_ms * 1e6, run);
            for &pages in sizes {
                let s = sweep::lru_paging_ns(lru, pages, disk_ms * 1e6, opts.write_ms * 1e6) / 1e9;
                rows.push(SweepRow {
                    trace: name.clone(),
                    policy: "lru".into(),
                    codec: "-".into(),
                    disk_ms,
                    cpu_factor: opts.cpu_factor,
                    memory_pages: pages,
                    run_s: run / 1e9,
                    interesting: lru_region.is_some_and(|(lo, hi)| (lo..=hi).contains(&pages)),
                    cache_hits: 0,
                    disk_faults: lru[pages],
                    compressions: 0,
                    decompressions: 0,
                    paging_s: s,
                    lru_paging_s: s,
                    normalized: (s > 0.0).then_some(1.0),
                });
            }
        }
        match region {
            Some((lo, hi)) => eprintln!("{name}: interesting region {lo}..{hi} pages at 5 ms per fault"),
            None => eprintln!("{name}: no memory size pages little enough for an interesting region"),
        }
    }
    write_rows(&opts.out, &rows)?;
    write_traces(&opts.out, &loaded, opts)?;
    crate::figures::write(&opts.out, &rows)?;
    println!(
        "wrote {} rows to {} and figures fig3/fig4/fig6_TRACE.{{svg,png}}",
        rows.len(),
        opts.out.join("sweep.{csv,json}").display()
    );
    Ok(())
}

type Loaded = (
    String,
    Trace,
    Vec<u64>,
    Option<(usize, usize)>,
    Vec<usize>,
    Vec<CodecCosts>,
);

/// Writes `traces.csv`: per trace and codec, what the study's tables quote
/// about the trace itself (references, footprint, run time, the interesting
/// region at 5 ms) and about its page images under that codec (ratio as
/// 4096 bytes over the mean compressed size, mean codec times).
fn write_traces(out: &Path, loaded: &[Loaded], opts: &SweepOptions) -> anyhow::Result<()> {
    let mut csv = String::from(
        "trace,references,footprint_pages,window_pages,run_s,region_lo,region_hi,codec,images,ratio,compress_us,decompress_us\n",
    );
    for (name, trace, lru, region, _, costs) in loaded {
        for c in costs {
            let n = c.size.len().max(1) as f64;
            let mean = |v: &[u32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
            let (lo, hi) = region.map_or((String::new(), String::new()), |(lo, hi)| {
                (lo.to_string(), hi.to_string())
            });
            csv.push_str(&format!(
                "{name},{},{},{},{:.6},{lo},{hi},{},{},{:.3},{:.3},{:.3}\n",
                trace.refs.len(),
                lru.len() - 1,
                trace.header.window_pages,
                run_time_ns(trace, opts) / 1e9,
                c.codec,
                c.size.len(),
                4096.0 / mean(&c.size).max(1.0),
                mean(&c.compress_ns) / 1e3,
                mean(&c.decompress_ns) / 1e3,
            ));
        }
    }
    std::fs::write(out.join("traces.csv"), csv)?;
    Ok(())
}

/// The traced program's run time on the simulated CPU, ns.
fn run_time_ns(trace: &Trace, opts: &SweepOptions) -> f64 {
    trace.footer.run_time_ns as f64 * opts.cpu_factor
}

fn write_rows(out: &Path, rows: &[SweepRow]) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(rows)?;
    std::fs::write(out.join("sweep.json"), json)?;
    let mut csv = String::from(
        "trace,policy,codec,disk_ms,cpu_factor,memory_pages,run_s,interesting,cache_hits,disk_faults,compressions,decompressions,paging_s,lru_paging_s,normalized\n",
    );
    for r in rows {
        csv.push_str(&format!(
            "{},{},{},{},{},{},{:.6},{},{},{},{},{},{:.6},{:.6},{}\n",
            r.trace,
            r.policy,
            r.codec,
            r.disk_ms,
            r.cpu_factor,
            r.memory_pages,
            r.run_s,
            r.interesting,
            r.cache_hits,
            r.disk_faults,
            r.compressions,
            r.decompressions,
            r.paging_s,
            r.lru_paging_s,
            r.normalized.map_or(String::new(), |n| format!("{n:.4}"))
        ));
    }
    std::fs::write(out.join("sweep.csv"), csv)?;
    Ok(())
}

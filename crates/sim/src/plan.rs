//! Planning and running a sweep, paper 000 §4's study: for each trace, the
//! memory sizes to simulate (log-spaced, plus the ends and middle of the
//! interesting region at every disk cost studied), the codec costs, which
//! policy runs at which disk costs, the plain LRU rows from one stack
//! pass, and a summary of each trace. A command line parses its flags into
//! a [`SweepPlan`], shows progress and writes what the plan returns.
//!
//! Choices: the disk-cost study (Figure 6) is run for the adaptive
//! policies with the first codec only, since the paper varies the disk
//! for its adaptive policy alone; everything is run at 5 ms, the paper's
//! disk, which is therefore always among the disk costs.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sweep::{interesting_region, log_sizes, lru_disk_faults, lru_paging_ns, run_point, PointSpec, SweepRow};
use crate::{CodecCosts, SimConfig, SimError, Trace};

/// Disk costs of the sensitivity study, ms: paper 000 Figure 6's, plus
/// today's SSD-like 0.1 and 0.02 ms.
pub const DISK_MS: [f64; 7] = [0.02, 0.1, 0.625, 1.25, 2.5, 5.0, 10.0];

/// The disk cost every policy is run at, ms: paper 000's.
pub const PAPER_DISK_MS: f64 = 5.0;

/// The compression ratio and codec times given to imported plain traces,
/// which carry no page contents, and the program's run time.
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// What to sweep.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    /// Codecs of the cache.
    pub codecs: Vec<ccvm_codec::CodecId>,
    /// Policies besides plain LRU.
    pub policies: Vec<ccvm_policy::PolicySpec>,
    /// Log-spaced memory sizes per trace.
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
    /// runtime does ([`SimConfig::store_slack`]).
    pub store_slack: bool,
    /// Disk costs of the sensitivity study, ms; [`PAPER_DISK_MS`] is
    /// always run.
    pub disk_ms: Vec<f64>,
    /// How to cost imported plain traces (`.txt`, `.csv`).
    pub plain: PlainCosts,
}

/// A trace loaded and measured for a sweep.
pub struct Loaded {
    /// Its name in the rows: the file stem, or the whole file name when
    /// two stems clash.
    pub name: String,
    /// The references.
    pub trace: Trace,
    /// LRU's disk faults at every size up to the footprint.
    pub lru: Vec<u64>,
    /// The interesting region at [`PAPER_DISK_MS`], pages.
    pub region: Option<(usize, usize)>,
    /// The sizes to simulate, pages, ascending.
    pub sizes: Vec<usize>,
    /// Exact sizes asked for that the trace does not cover.
    pub skipped: Vec<usize>,
    /// Codec costs, one per codec (one uniform set for a plain trace).
    pub costs: Vec<CodecCosts>,
    /// Whether it was imported from a plain list of page numbers.
    pub plain: bool,
}

/// What loading a trace reports as it goes, for a progress display.
pub enum Progress {
    /// Timing `images` page images with `codec` begins (or reading them
    /// back from the cost cache).
    Timing {
        /// The codec.
        codec: ccvm_codec::CodecId,
        /// How many images.
        images: u32,
    },
    /// One more image timed.
    Timed,
}

/// One simulation of a sweep: a trace at a size, with a codec, a policy and
/// a disk cost.
pub struct Point<'a> {
    spec: PointSpec<'a>,
    disk_ms: f64,
}

/// Per trace and codec, what the study's tables quote about the trace
/// (references, footprint, run time, the interesting region at 5 ms) and
/// about its page images under that codec (the ratio as 4096 bytes over
/// the mean compressed size, mean codec times): a row of `traces.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Trace name.
    pub trace: String,
    /// References.
    pub references: usize,
    /// Distinct pages.
    pub footprint_pages: usize,
    /// Pages the tracer kept uncompressed.
    pub window_pages: u64,
    /// The program's run time on the simulated CPU, seconds.
    pub run_s: f64,
    /// The interesting region's first size at 5 ms, pages.
    pub region_lo: Option<usize>,
    /// Its last size.
    pub region_hi: Option<usize>,
    /// Codec.
    pub codec: String,
    /// Page images timed.
    pub images: usize,
    /// Compression ratio.
    pub ratio: f64,
    /// Mean compression time, µs.
    pub compress_us: f64,
    /// Mean decompression time, µs.
    pub decompress_us: f64,
}

/// The names traces get in a sweep's rows and figures: each file's stem;
/// its whole file name (dots made underscores) when two stems clash; its
/// folder's name and file name when two file names clash; and a number
/// after that when one file is named twice. No two traces share a name.
///
/// ```
/// use std::path::PathBuf;
/// let paths = [PathBuf::from("a/gcc.trace"), PathBuf::from("b/gcc.txt"), PathBuf::from("py.trace")];
/// assert_eq!(ccvm_sim::plan::trace_names(&paths), ["gcc_trace", "gcc_txt", "py"]);
/// let paths = [PathBuf::from("a/gcc.trace"), PathBuf::from("b/gcc.trace"), PathBuf::from("b/gcc.trace")];
/// assert_eq!(ccvm_sim::plan::trace_names(&paths), ["a_gcc_trace", "b_gcc_trace", "b_gcc_trace_2"]);
/// ```
pub fn trace_names(paths: &[PathBuf]) -> Vec<String> {
    let stem = |p: &Path| {
        p.file_stem()
            .map_or("trace".into(), |s| s.to_string_lossy().into_owned())
    };
    let file = |p: &Path| {
        p.file_name()
            .map_or("trace".into(), |s| s.to_string_lossy().replace('.', "_"))
    };
    let unique = |names: &[String], i: usize| names.iter().filter(|n| **n == names[i]).count() == 1;
    let mut names: Vec<String> = paths.iter().map(|p| stem(p)).collect();
    let by_file: Vec<String> = paths.iter().map(|p| file(p)).collect();
    let mut in_folder = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        // One file name in several folders: the folder's name joins it.
        let folder = p
            .parent()
            .and_then(Path::file_name)
            .map_or(String::new(), |f| format!("{}_", f.to_string_lossy()));
        in_folder.push(format!("{folder}{}", by_file[i]));
    }
    let clashing: Vec<bool> = (0..names.len()).map(|i| !unique(&names, i)).collect();
    for (i, clash) in clashing.into_iter().enumerate() {
        if clash {
            names[i] = if unique(&by_file, i) {
                by_file[i].clone()
            } else {
                in_folder[i].clone()
            };
        }
    }
    // Whatever is still shared (one file named twice) is numbered.
    let mut seen = std::collections::HashMap::new();
    for name in &mut names {
        let n = seen.entry(name.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            *name = format!("{name}_{n}");
        }
    }
    names
}

/// Whether `path` names a plain page-number list (`.txt`, `.csv`) rather
/// than a ccvm trace.
fn is_plain(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("txt" | "csv"))
}

impl SweepPlan {
    /// The disk costs studied, ms, ascending, [`PAPER_DISK_MS`] among them.
    pub fn disk_costs(&self) -> Vec<f64> {
        let mut d = self.disk_ms.clone();
        d.push(PAPER_DISK_MS);
        d.sort_by(f64::total_cmp);
        d.dedup();
        d
    }

    /// The traced program's run time on the simulated CPU, ns.
    fn run_time_ns(&self, trace: &Trace) -> f64 {
        trace.footer.run_time_ns as f64 * self.cpu_factor
    }

    /// Reads the trace at `path` (a ccvm trace, or a plain `.txt`/`.csv`
    /// list of page numbers) whole, so that a damaged, empty or oversized
    /// trace is refused before any sweep work starts.
    ///
    /// # Errors
    ///
    /// A damaged, empty or oversized trace.
    pub fn read(&self, path: &Path) -> Result<Trace, SimError> {
        let trace = if is_plain(path) {
            Trace::import_plain(path, self.plain.run_time_ns)?
        } else {
            Trace::load(path)?
        };
        if trace.refs.is_empty() {
            return Err(SimError::Config(format!(
                "{}: the trace has no references",
                path.display()
            )));
        }
        Ok(trace)
    }

    /// Takes the trace read from `path` (see [`SweepPlan::read`]) as
    /// `name`, chooses its sizes and measures its codec costs, keeping them
    /// in `cost_cache` for the next sweep.
    ///
    /// # Errors
    ///
    /// No size to simulate, or a codec that cannot be timed.
    pub fn load(
        &self,
        path: &Path,
        trace: Trace,
        name: String,
        cost_cache: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Loaded, SimError> {
        let plain = is_plain(path);
        let lru = lru_disk_faults(&trace);
        let run = self.run_time_ns(&trace);
        let region = interesting_region(&lru, PAPER_DISK_MS * 1e6, run);
        let footprint = lru.len() - 1;
        let window = trace.header.window_pages as usize;
        let mut skipped = Vec::new();
        let mut sizes = if self.pages.is_empty() {
            let mut sizes = log_sizes(window.max(8), footprint, self.sizes);
            for disk_ms in self.disk_costs() {
                if let Some((lo, hi)) = interesting_region(&lru, disk_ms * 1e6, run) {
                    sizes.extend([lo, hi, (lo + hi) / 2]);
                }
            }
            sizes
        } else {
            let (ok, out): (Vec<usize>, Vec<usize>) =
                self.pages.iter().partition(|&&m| m >= window.max(1) && m <= footprint);
            skipped = out;
            ok
        };
        sizes.retain(|&m| m >= window && m <= footprint);
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.is_empty() {
            return Err(SimError::Config(format!(
                "{}: no memory size to simulate: the trace covers {}..={footprint} pages; give --pages in that range",
                path.display(),
                window.max(1)
            )));
        }
        let mut costs = Vec::new();
        if plain {
            let p = &self.plain;
            costs.push(CodecCosts::uniform(
                trace.image_count,
                p.ratio,
                p.compress_ns,
                p.decompress_ns,
            ));
        } else {
            for &codec in &self.codecs {
                progress(Progress::Timing {
                    codec,
                    images: trace.image_count,
                });
                let measured = CodecCosts::cached_with_progress(
                    path,
                    trace.image_count,
                    codec,
                    self.runs,
                    cost_cache,
                    &mut || progress(Progress::Timed),
                );
                costs.push(measured?);
            }
        }
        Ok(Loaded {
            name,
            trace,
            lru,
            region,
            sizes,
            skipped,
            costs,
            plain,
        })
    }

    /// Every simulation the sweep runs over `loaded`: each codec, policy
    /// and size at [`PAPER_DISK_MS`], and the adaptive policies with the
    /// first codec at every disk cost studied.
    pub fn points<'a>(&'a self, loaded: &'a [Loaded]) -> Vec<Point<'a>> {
        let disk_costs = self.disk_costs();
        let mut points = Vec::new();
        for l in loaded {
            for (ci, c) in l.costs.iter().enumerate() {
                let n = c.size.len().max(1) as f64;
                let per_hit = c
                    .compress_ns
                    .iter()
                    .zip(&c.decompress_ns)
                    .map(|(&a, &b)| (a + b) as f64)
                    .sum::<f64>()
                    / n;
                for policy in &self.policies {
                    let adaptive = matches!(policy.name(), "adaptive" | "adaptive-safe");
                    let disks: &[f64] = if adaptive && ci == 0 {
                        &disk_costs
                    } else {
                        &[PAPER_DISK_MS]
                    };
                    for &disk_ms in disks {
                        for &pages in &l.sizes {
                            let spec = PointSpec {
                                name: &l.name,
                                trace: &l.trace,
                                costs: c,
                                lru: &l.lru,
                                run_time_ns: self.run_time_ns(&l.trace),
                                policy,
                                pages,
                                cache_cost_ns: per_hit * self.cpu_factor,
                            };
                            points.push(Point { spec, disk_ms });
                        }
                    }
                }
            }
        }
        points
    }

    /// Runs `points` on every core, calling `done` after each.
    ///
    pub fn run(&self, points: &[Point<'_>], done: &(dyn Fn() + Sync)) -> Vec<SweepRow> {
        points
            .par_iter()
            .map(|p| {
                let config = SimConfig {
                    disk_read_ns: p.disk_ms * 1e6,
                    disk_write_ns: self.write_ms * 1e6,
                    cpu_factor: self.cpu_factor,
                    trap_share: self.trap_share,
                    store_slack: self.store_slack,
                };
                let r = run_point(&p.spec, &config);
                done();
                r
            })
            .collect()
    }

    /// Plain LRU's rows, from the stack pass: every size of each trace at
    /// every disk cost studied.
    pub fn lru_rows(&self, loaded: &[Loaded]) -> Vec<SweepRow> {
        let mut rows = Vec::new();
        for l in loaded {
            let run = self.run_time_ns(&l.trace);
            for disk_ms in self.disk_costs() {
                let region = interesting_region(&l.lru, disk_ms * 1e6, run);
                for &pages in &l.sizes {
                    let s = lru_paging_ns(&l.lru, pages, disk_ms * 1e6, self.write_ms * 1e6) / 1e9;
                    rows.push(SweepRow {
                        trace: l.name.clone(),
                        policy: "lru".into(),
                        codec: "-".into(),
                        disk_ms,
                        cpu_factor: self.cpu_factor,
                        memory_pages: pages,
                        run_s: run / 1e9,
                        interesting: region.is_some_and(|(lo, hi)| (lo..=hi).contains(&pages)),
                        cache_hits: 0,
                        disk_faults: l.lru[pages],
                        compressions: 0,
                        decompressions: 0,
                        paging_s: s,
                        lru_paging_s: s,
                        normalized: (s > 0.0).then_some(1.0),
                    });
                }
            }
        }
        rows
    }

    /// One [`TraceSummary`] per trace and codec.
    pub fn summaries(&self, loaded: &[Loaded]) -> Vec<TraceSummary> {
        let mut out = Vec::new();
        for l in loaded {
            for c in &l.costs {
                let n = c.size.len().max(1) as f64;
                let mean = |v: &[u32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
                out.push(TraceSummary {
                    trace: l.name.clone(),
                    references: l.trace.refs.len(),
                    footprint_pages: l.lru.len() - 1,
                    window_pages: l.trace.header.window_pages,
                    run_s: self.run_time_ns(&l.trace) / 1e9,
                    region_lo: l.region.map(|r| r.0),
                    region_hi: l.region.map(|r| r.1),
                    codec: c.codec.clone(),
                    images: c.size.len(),
                    ratio: ccvm_codec::PAGE_SIZE as f64 / mean(&c.size).max(1.0),
                    compress_us: mean(&c.compress_ns) / 1e3,
                    decompress_us: mean(&c.decompress_ns) / 1e3,
                });
            }
        }
        out
    }
}

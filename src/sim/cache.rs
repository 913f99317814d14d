//! `ccvm sim record-lines` and `ccvm sim cache`: line-level traces of
//! programs, and the cache-hierarchy simulator over them (paper 003
//! chapter 6; crates/cachesim).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use ccvm_cachesim::system::{simulate, Machine, Run, Timing, L2};
use ccvm_cachesim::trace::LineTrace;
use ccvm_cachesim::{Config, Organization, Thresholds};
use rayon::prelude::*;

/// Records a line trace of `program args` (Valgrind's Lackey) to `out`.
pub fn record(program: &OsString, args: &[OsString], out: &Path, limit: Option<u64>) -> anyhow::Result<()> {
    let file = ccvm_output::OutputFile::create(out)?;
    let started = std::time::Instant::now();
    let forwarding = ccvm_output::interrupt::forwarding();
    let (file, r) =
        ccvm_cachesim::record::record_with(program, args, std::io::BufWriter::new(file), limit, &mut |pid| {
            forwarding.started(pid)
        })
        .with_context(|| format!("tracing {}", program.to_string_lossy()))?;
    drop(forwarding);
    file.into_inner().map_err(|e| e.into_error())?.commit()?;
    let bytes = std::fs::metadata(out)?.len();
    eprintln!(
        "{}: {} references, {} instructions, {} line contents{}{} in {:.1} s; {:.2} bytes a reference",
        out.display(),
        r.totals.references,
        r.totals.instructions,
        r.totals.contents,
        if r.unreadable > 0 {
            format!(" ({} lines unreadable)", r.unreadable)
        } else {
            String::new()
        },
        if r.stopped_at_limit {
            ", stopped at the limit"
        } else {
            ""
        },
        started.elapsed().as_secs_f64(),
        bytes as f64 / r.totals.references.max(1) as f64,
    );
    Ok(())
}

/// One L2 organization of the sweep, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Org {
    Fixed(Organization),
    Adaptive,
}

fn parse_org(s: &str) -> anyhow::Result<(String, Org)> {
    let org = match s {
        "plain" => Org::Fixed(Organization::Plain),
        "seg4" => Org::Fixed(Organization::Segmented { segments: 4 }),
        "seg8" => Org::Fixed(Organization::Segmented { segments: 8 }),
        "pair" => Org::Fixed(Organization::PairMatching),
        "adaptive" => Org::Adaptive,
        other => bail!("unknown L2 organization '{other}': use plain, seg4, seg8, pair or adaptive"),
    };
    Ok((s.to_string(), org))
}

/// What `ccvm sim cache` is asked.
pub struct CacheSweep {
    /// Trace files.
    pub traces: Vec<PathBuf>,
    /// L1 bytes and ways.
    pub l1: (u64, usize),
    /// L2 sizes.
    pub l2_sizes: Vec<u64>,
    /// L2 ways.
    pub ways: usize,
    /// Organizations.
    pub orgs: Vec<String>,
    /// Line codecs.
    pub codecs: Vec<ccvm_codec::CodecId>,
    /// Also run each organization with link compression.
    pub link: bool,
    /// Latencies and the link's rate.
    pub timing: Timing,
    /// Print each row as a JSON line on standard output instead of the table.
    pub json: bool,
    /// Draw each trace's figures (speed-up and misses against L2 size) here.
    pub figures: Option<PathBuf>,
}

struct Row {
    trace: String,
    l2: u64,
    org: String,
    codec: String,
    link: bool,
    run: Run,
}

/// Runs the sweep and prints a table: each configuration's L2 misses per
/// thousand instructions, IPC and its speed-up over a plain L2 of the same
/// size, lines held per frame, share stored compressed, and bytes moved.
pub fn sweep(a: &CacheSweep) -> anyhow::Result<()> {
    let orgs = check_sweep(a)?;
    // Figures are refused before any work when their folder cannot be used.
    let figures_dir = a.figures.as_ref().map(ccvm_output::OutputDir::create).transpose()?;
    let mut out = std::io::stdout().lock();
    if !a.json {
        writeln!(
            out,
            "{:<14} {:>6} {:<9} {:<6} {:>5} {:>8} {:>6} {:>8} {:>7} {:>7} {:>9} {:>9}",
            "trace",
            "L2",
            "org",
            "codec",
            "link",
            "MPKI",
            "IPC",
            "speedup",
            "lines/f",
            "compr%",
            "MB read",
            "MB written"
        )?;
    }
    let mut all: Vec<Row> = Vec::new();
    for (path, name) in a.traces.iter().zip(ccvm_sim::plan::trace_names(&a.traces)) {
        let loading = std::time::Instant::now();
        let trace = LineTrace::open(path)?;
        eprintln!(
            "{}: {} references, {} instructions, {} distinct line images; read in {:.1} s",
            path.display(),
            trace.references(),
            trace.instructions(),
            trace.images().len(),
            loading.elapsed().as_secs_f64()
        );
        for &codec in &a.codecs {
            let rows = sweep_codec(a, &orgs, &trace, &name, codec);
            print_rows(&mut out, &rows, a.json)?;
            all.extend(rows);
        }
    }
    if let Some(dir) = figures_dir {
        figures(dir.path(), &all)?;
        eprintln!("figures in {}", dir.path().display());
        dir.keep();
    }
    Ok(())
}

/// The organizations `a` names, once its shapes and codecs are checked.
fn check_sweep(a: &CacheSweep) -> anyhow::Result<Vec<(String, Org)>> {
    let orgs = a
        .orgs
        .iter()
        .map(|s| parse_org(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for &s in &a.l2_sizes {
        check_shape(s, a.ways).with_context(|| format!("L2 of {s} bytes and {} ways", a.ways))?;
    }
    check_shape(a.l1.0, a.l1.1).context("L1")?;
    Ok(orgs)
}

/// Every configuration of `trace` (named `name`) with codec `codec_id`:
/// each L2 size, the plain L2 first and then each organization, with and
/// without link compression, simulated in parallel.
fn sweep_codec(
    a: &CacheSweep,
    orgs: &[(String, Org)],
    trace: &LineTrace,
    name: &str,
    codec_id: ccvm_codec::CodecId,
) -> Vec<Row> {
    let codec_name = codec_id.name();
    let sizes = trace.sizes(codec_id.make().as_mut());
    let mut jobs = Vec::new();
    for &l2 in &a.l2_sizes {
        let plain = ("plain".to_string(), Org::Fixed(Organization::Plain));
        let others = orgs.iter().filter(|(label, _)| label != "plain");
        for (label, org) in std::iter::once(&plain).chain(others) {
            for link in [false, true] {
                if !link || a.link {
                    jobs.push((l2, label.clone(), *org, link));
                }
            }
        }
    }
    let l1 = Config {
        size: a.l1.0 as usize,
        ways: a.l1.1,
        organization: Organization::Plain,
    };
    let simulating = std::time::Instant::now();
    let runs: Vec<Run> = jobs
        .par_iter()
        .map(|&(l2, _, org, link)| {
            let l2 = match org {
                Org::Fixed(organization) => L2::Fixed(Config {
                    size: l2 as usize,
                    ways: a.ways,
                    organization,
                }),
                Org::Adaptive => L2::Adaptive {
                    size: l2 as usize,
                    ways: a.ways,
                    thresholds: Thresholds::PAPER,
                },
            };
            let machine = Machine {
                l1,
                l2,
                timing: a.timing,
                link_compression: link,
            };
            simulate(trace, &sizes, &machine)
        })
        .collect();
    let threads = rayon::current_num_threads().min(jobs.len());
    let cpu = simulating.elapsed().as_secs_f64() * threads as f64;
    eprintln!(
        "{codec_name}: {} configurations in {:.1} s on {threads} threads: {:.1} M references/s per configuration per core",
        jobs.len(),
        simulating.elapsed().as_secs_f64(),
        (trace.references() * jobs.len() as u64) as f64 / cpu / 1e6
    );
    jobs.into_iter()
        .zip(runs)
        .map(|((l2, org, _, link), run)| Row {
            trace: name.to_string(),
            l2,
            org,
            codec: codec_name.to_string(),
            link,
            run,
        })
        .collect()
}

/// Prints `rows` (one trace and codec) as table lines or JSON lines, each
/// with its speed-up over the plain L2 of its size.
fn print_rows(out: &mut impl Write, rows: &[Row], json: bool) -> anyhow::Result<()> {
    for r in rows {
        let base = rows
            .iter()
            .find(|b| b.l2 == r.l2 && b.org == "plain" && !b.link)
            .expect("every size has its plain run");
        let speedup = r.run.ipc() / base.run.ipc();
        if json {
            writeln!(
                out,
                "{}",
                serde_json::json!({
                    "trace": r.trace, "l2": r.l2, "org": r.org, "codec": r.codec, "link": r.link,
                    "references": r.run.references, "instructions": r.run.instructions, "cycles": r.run.cycles,
                    "l1_misses": r.run.l1.misses, "l2_misses": r.run.l2.misses, "l2_hits": r.run.l2.hits,
                    "compressed_hits": r.run.l2.compressed_hits, "lru_hits": r.run.l2.lru_hits,
                    "bytes_read": r.run.bytes_read, "bytes_written": r.run.bytes_written,
                    "writebacks": r.run.writebacks, "unknown": r.run.unknown,
                    "lines_per_frame": r.run.lines_per_frame, "compressed_share": r.run.compressed_share,
                    "periods": r.run.periods, "speedup": speedup,
                })
            )?;
            continue;
        }
        writeln!(
            out,
            "{:<14} {:>6} {:<9} {:<6} {:>5} {:>8.3} {:>6.3} {:>7.1}% {:>7.2} {:>6.1}% {:>9.1} {:>9.1}",
            truncate(&r.trace, 14),
            size_label(r.l2),
            r.org,
            truncate(&r.codec, 6),
            if r.link { "on" } else { "off" },
            r.run.mpki(),
            r.run.ipc(),
            (speedup - 1.0) * 100.0,
            r.run.lines_per_frame,
            r.run.compressed_share * 100.0,
            r.run.bytes_read as f64 / 1e6,
            r.run.bytes_written as f64 / 1e6,
        )?;
    }
    Ok(())
}

/// Per trace and codec: speed-up over a plain L2 of the same size, and L2
/// misses per thousand instructions, against the L2's size (log scale).
fn figures(dir: &Path, rows: &[Row]) -> anyhow::Result<()> {
    use crate::figures::{save, Figure};
    let mut keys: Vec<(&str, &str)> = rows.iter().map(|r| (r.trace.as_str(), r.codec.as_str())).collect();
    keys.dedup();
    for (trace, codec) in keys {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.trace == trace && r.codec == codec).collect();
        let mut configs: Vec<(&str, bool)> = mine.iter().map(|r| (r.org.as_str(), r.link)).collect();
        configs.sort();
        configs.dedup();
        let series = |y: &dyn Fn(&Row) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
            configs
                .iter()
                .map(|&(org, link)| {
                    let pts = mine
                        .iter()
                        .filter(|r| r.org == org && r.link == link)
                        .map(|r| (((r.l2 >> 10) as f64).log2(), y(r)))
                        .collect();
                    (format!("{org}{}", if link { " + link" } else { "" }), pts)
                })
                .collect()
        };
        let ipc_plain = |r: &Row| {
            mine.iter()
                .find(|b| b.l2 == r.l2 && b.org == "plain" && !b.link)
                .map_or(1.0, |b| b.run.ipc())
        };
        save(
            dir,
            &format!("{trace}-{codec}-speedup"),
            &Figure {
                title: format!("{trace}: speed-up over a plain L2 ({codec})"),
                x_label: "L2 size, log2 KiB",
                y_label: "IPC gain, %",
                log_y: false,
                series: series(&|r| (r.run.ipc() / ipc_plain(r) - 1.0) * 100.0),
                shade: None,
            },
        )?;
        save(
            dir,
            &format!("{trace}-{codec}-mpki"),
            &Figure {
                title: format!("{trace}: L2 misses per thousand instructions ({codec})"),
                x_label: "L2 size, log2 KiB",
                y_label: "MPKI",
                log_y: false,
                series: series(&|r| r.run.mpki()),
                shade: None,
            },
        )?;
    }
    Ok(())
}

pub(crate) fn check_shape(size: u64, ways: usize) -> anyhow::Result<()> {
    let lines = size / 64;
    if ways == 0
        || ways > ccvm_cachesim::MAX_WAYS
        || !size.is_multiple_of(64 * ways as u64)
        || !(lines / ways as u64).is_power_of_two()
    {
        bail!(
            "a cache must be a power-of-two number of sets of 1 to {} ways of 64-byte lines",
            ccvm_cachesim::MAX_WAYS
        );
    }
    Ok(())
}

pub(crate) fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// 262144 as "256K", 1048576 as "1M".
pub(crate) fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

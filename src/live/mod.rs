//! `ccvm run`, `ccvm trace` and `ccvm demo`: built-in workloads paged live
//! through the runtime.

pub mod args;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccvm_runtime::{Region, RuntimeConfig, RuntimeStats, TraceConfig};
use ccvm_workload::Workload;
use serde::Serialize;

use crate::args::Format;
use crate::report::{self, Row};

/// One paged run of a workload.
pub struct RunOptions {
    /// The workload.
    pub workload: Workload,
    /// Region bytes.
    pub size: u64,
    /// Seed.
    pub seed: u64,
    /// Runtime settings.
    pub config: RuntimeConfig,
    /// The workload's checksum, known from an earlier plain run: given, the
    /// plain reference run is skipped (so that a meter of this process's
    /// memory sees the paged run alone).
    pub reference: Option<u64>,
    /// Meter the paged run in a memory cgroup of its own, where the
    /// machine lets ccvm make one (see [`RunReport::cgroup_peak_bytes`]).
    pub cgroup_meter: bool,
}

/// What a run measured.
#[derive(Serialize)]
pub struct RunReport {
    /// Row label.
    pub label: String,
    /// Workload name.
    pub workload: String,
    /// Policy.
    pub policy: String,
    /// Codec.
    pub codec: String,
    /// Region bytes.
    pub size: u64,
    /// RAM budget bytes.
    pub ram: u64,
    /// Wall time of the paged run, seconds.
    pub wall_s: f64,
    /// Wall time in plain memory, seconds.
    pub plain_s: f64,
    /// The workload's checksum.
    pub checksum: String,
    /// Whether it equals the checksum in plain memory.
    pub checksum_ok: bool,
    /// The most memory the kernel charged ccvm's processes at once during
    /// the paged run, bytes: the peak of a memory cgroup made inside ccvm's
    /// own, which ccvm joins after the plain run and before it makes the
    /// region (so the region, the store, ccvm's tables and the helper
    /// process are in it; the binary and what ccvm held before are not).
    /// Absent where ccvm may not make one (not root, no memory controller).
    pub cgroup_peak_bytes: Option<u64>,
    /// The most memory ccvm's processes held during the paged run, bytes:
    /// their summed PSS, sampled (see the `meter` module).
    pub peak_pss_bytes: u64,
    /// The runtime's counters.
    pub stats: RuntimeStats,
}

/// Refuses a workload size that the paged run and its plain reference run
/// cannot both take: below the workloads' minimum, not whole pages, or
/// more than the memory free for the plain run.
fn check_size(size: u64) -> anyhow::Result<()> {
    if size < ccvm_workload::MIN_BYTES as u64 {
        bail!("--size {size} is below the workloads' minimum of 1M");
    }
    crate::args::check_pages("--size", size)?;
    let free = crate::args::available_ram();
    if size > free {
        bail!(
            "--size {}: the reference run in plain memory needs that much and {} is free; use a smaller size \
             (or `ccvm exec` to page a program of your own at any size)",
            crate::args::human(size),
            crate::args::human(free)
        );
    }
    crate::args::check_userfaultfd()
}

/// Runs `opts` live (after a plain run for the reference checksum).
pub fn run_one(label: &str, opts: &RunOptions) -> anyhow::Result<RunReport> {
    check_size(opts.size)?;
    let activity = crate::progress::activity(format!("{}: the reference run in plain memory", opts.workload.name));
    let (want, plain_time) = match opts.reference {
        Some(sum) => (sum, Duration::ZERO),
        None => opts.workload.run_plain(opts.size, opts.seed),
    };
    activity.set(format!(
        "{}: the paged run (plain memory took {:.1} s)",
        opts.workload.name,
        plain_time.as_secs_f64()
    ));
    let cgroup = opts
        .cgroup_meter
        .then(|| ccvm_kernelswap::Cgroup::meter_within_own("ccvm-run").ok())
        .flatten()
        // Left (with the helper) when dropped, on every way out of the run.
        .filter(|group| group.join().is_ok());
    let meter = crate::meter::TreeMeter::start(std::process::id());
    let mut region = Region::new(opts.size as usize, opts.config.clone())?;
    let t = Instant::now();
    let got = (opts.workload.run)(region.as_mut_slice(), opts.seed);
    let wall = t.elapsed();
    let stats = region.finish()?;
    let peak_pss_bytes = meter.finish();
    let cgroup_peak_bytes = cgroup.map(|group| group.peak_bytes()).filter(|&b| b > 0);
    drop(activity);
    Ok(RunReport {
        label: label.into(),
        workload: opts.workload.name.into(),
        policy: opts.config.policy.to_string(),
        codec: opts.config.codec.to_string(),
        size: opts.size,
        ram: opts.config.ram_bytes,
        wall_s: wall.as_secs_f64(),
        plain_s: plain_time.as_secs_f64(),
        checksum: format!("{got:016x}"),
        checksum_ok: got == want,
        cgroup_peak_bytes,
        peak_pss_bytes,
        stats,
    })
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

/// Prints one run in full.
pub fn print_run(r: &RunReport, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(r)?)?,
        Format::Csv => {
            let row = report::RunRow::new(r.workload.clone(), &r.policy, &r.codec, r.ram, r.wall_s, &r.stats);
            report::print(&[row], Format::Csv)?;
        }
        Format::Table => {}
    }
    if format != Format::Table {
        return if r.checksum_ok {
            Ok(())
        } else {
            bail!("the paged run's checksum differs from plain memory's")
        };
    }
    let s = &r.stats;
    let ok = if r.checksum_ok {
        "matches plain memory"
    } else {
        "DIFFERS from plain memory"
    };
    outln!(
        "workload {} ({} MiB) in {} MiB of RAM; policy {}, codec {}",
        r.workload,
        mib(r.size),
        mib(r.ram),
        r.policy,
        r.codec
    )?;
    outln!(
        "wall time              {:.3} s (plain memory {:.3} s)",
        r.wall_s,
        r.plain_s
    )?;
    outln!("checksum               {} ({ok})", r.checksum)?;
    let held = match r.cgroup_peak_bytes {
        Some(peak) => format!(
            "{} MiB at most (a memory cgroup's peak charge of the paged run; {} MiB PSS sampled)",
            mib(peak),
            mib(r.peak_pss_bytes)
        ),
        None => format!(
            "{} MiB at most (ccvm's processes, PSS sampled at most 1% of the time)",
            mib(r.peak_pss_bytes)
        ),
    };
    outln!(
        "memory held            {held} for --ram {} MiB, of which ccvm's own tables, frames and helper {} MiB at most",
        mib(r.ram),
        mib(s.overhead_bytes)
    )?;
    print_stats(&mut std::io::stdout().lock(), s)?;
    if !r.checksum_ok {
        bail!("the paged run's checksum differs from plain memory's");
    }
    Ok(())
}

/// Prints the runtime's counters, a line each, as `ccvm run` shows them.
pub fn print_stats(out: &mut impl std::io::Write, s: &RuntimeStats) -> std::io::Result<()> {
    print_faults(out, s)?;
    print_pages(out, s)?;
    print_levels(out, s)
}

/// The faults, by where they were served from, and their service times.
fn print_faults(out: &mut impl std::io::Write, s: &RuntimeStats) -> std::io::Result<()> {
    writeln!(
        out,
        "faults                 {} zero-fill, {} from the cache, {} from the swap file, {} of trapped pages",
        s.faults_zero, s.faults_cache, s.faults_disk, s.faults_trap
    )?;
    if s.tree_processes > 1 {
        writeln!(
            out,
            "shared budget          {} processes at most shared --ram; the tree charged {} MiB at most \
             (a page two processes map counts in each); this process was allowed {} MiB at least",
            s.tree_processes,
            mib(s.tree_peak_bytes),
            mib(s.allowance_least_bytes)
        )?;
    }
    if s.faults_zero_read > 0 {
        writeln!(
            out,
            "zero reads             {} reads of never-written pages mapped as the shared zero page (no memory held)",
            s.faults_zero_read
        )?;
    }
    writeln!(
        out,
        "fault service µs       cache p50 {:.1} p99 {:.1}; swap p50 {:.1} p99 {:.1}; trapped p50 {:.1} p99 {:.1}",
        s.latency_cache.p50_us,
        s.latency_cache.p99_us,
        s.latency_disk.p50_us,
        s.latency_disk.p99_us,
        s.latency_trap.p50_us,
        s.latency_trap.p99_us
    )?;
    Ok(())
}

/// The pages that moved, and how.
fn print_pages(out: &mut impl std::io::Write, s: &RuntimeStats) -> std::io::Result<()> {
    writeln!(
        out,
        "pages                  {} compressed, {} decompressed, {} spilled compressed, {} swapped raw",
        s.pages_compressed, s.pages_decompressed, s.pages_spilled, s.pages_swapped_raw
    )?;
    if s.pages_compressed_background > 0 {
        writeln!(
            out,
            "background             {} pages compressed by the helper process ({} handed over in their frames); {} faults on pages it had not reached",
            s.pages_compressed_background, s.pages_read_by_helper, s.faults_pending
        )?;
    }
    if s.pages_copied_in > 0 {
        writeln!(
            out,
            "copied in              {} pages mapped by copying while the program ran other threads (a moved frame would interrupt their CPUs)",
            s.pages_copied_in
        )?;
    }
    if s.pages_evicted_together > 0 {
        writeln!(
            out,
            "evicted together       {} pages in {} batches, one TLB flush a batch, while the program ran other threads",
            s.pages_evicted_together, s.eviction_batches
        )?;
    }
    if s.pages_read_ahead + s.pages_read_ahead_disk + s.pages_zero_ahead > 0 {
        writeln!(
            out,
            "read-ahead             {} pages mapped from the cache, {} from the swap file and {} new pages mapped as \
             zeros after a fault, before they were touched",
            s.pages_read_ahead, s.pages_read_ahead_disk, s.pages_zero_ahead
        )?;
    }
    if s.write_scans > 0 {
        writeln!(
            out,
            "write scans            {} scans of the page tables found {} resident pages written since the last",
            s.write_scans, s.pages_seen_written
        )?;
    }
    Ok(())
}

/// The compression ratio, the swap file, the split and the store.
fn print_levels(out: &mut impl std::io::Write, s: &RuntimeStats) -> std::io::Result<()> {
    writeln!(out, "compression ratio      {:.3}", s.compression_ratio())?;
    writeln!(
        out,
        "swap file              {} MiB written in {} writes, {} MiB read in {} reads ({}-byte direct I/O); \
         {} MiB at most; cleaner: {} clusters, {} pages moved",
        mib(s.swap.bytes_written),
        s.swap.writes,
        mib(s.swap.bytes_read),
        s.swap.reads,
        s.swap.alignment,
        mib(s.swap.file_bytes),
        s.swap.cleaned,
        s.swap.pages_moved
    )?;
    writeln!(
        out,
        "split (most)           {} uncompressed pages; {} MiB compression cache",
        s.uncompressed_pages,
        mib(s.cache_budget)
    )?;
    let st = &s.store;
    writeln!(
        out,
        "store (mm_stat)        orig {} compr {} mem_used {} mem_limit {} mem_used_max {} same {} compacted {} huge {}",
        st.orig_data_size,
        st.compr_data_size,
        st.mem_used_total,
        st.mem_limit,
        st.mem_used_max,
        st.same_pages,
        st.pages_compacted,
        st.huge_pages
    )?;
    Ok(())
}

/// Traces a workload to `out` with a window of `window` uncompressed pages.
pub fn trace(
    workload: Workload,
    size: u64,
    seed: u64,
    window: u64,
    codec: ccvm_codec::CodecId,
    out: PathBuf,
) -> anyhow::Result<()> {
    check_size(size)?;
    let activity = crate::progress::activity(format!("{}: the reference run in plain memory", workload.name));
    let (want, plain_time) = workload.run_plain(size, seed);
    activity.set(format!("{}: tracing into {}", workload.name, out.display()));
    let watch = crate::progress::DiskWatch::new(&out);
    // The cache holds every page that leaves the window, so nothing is
    // written to disk and every reference outside the window faults.
    let ram = window * 4096 + 2 * size + (1 << 20);
    let probe = RuntimeConfig {
        ram_bytes: ram,
        ..RuntimeConfig::default()
    };
    // The share is of the policy's budget (the RAM less the store's
    // reserve); half a page more keeps rounding from losing a page.
    let share = (window * 4096 + 2048) as f64 / probe.policy_budget().ram_bytes as f64;
    let config = RuntimeConfig {
        ram_bytes: ram,
        uncompressed_share: share,
        policy: "fixed".parse()?,
        codec,
        trace: Some(TraceConfig {
            path: out.clone(),
            workload: workload.name.into(),
            seed,
            run_time_ns: plain_time.as_nanos() as u64,
        }),
        ..RuntimeConfig::default()
    };
    let mut region = Region::new(size as usize, config)?;
    let t = Instant::now();
    let got = (workload.run)(region.as_mut_slice(), seed);
    let wall = t.elapsed();
    let stats = region.finish()?;
    drop((watch, activity));
    if got != want {
        bail!("the traced run's checksum differs from plain memory's");
    }
    let bytes = std::fs::metadata(&out)
        .with_context(|| format!("reading back {}", out.display()))?
        .len();
    outln!(
        "traced {} ({} MiB, seed {seed}) with a {window}-page window in {:.2} s (plain {:.3} s): {} references, {} pages compressed -> {} ({} KiB)",
        workload.name,
        mib(size),
        wall.as_secs_f64(),
        plain_time.as_secs_f64(),
        stats.faults_zero + stats.faults_cache + stats.faults_disk,
        stats.pages_compressed,
        out.display(),
        bytes / 1024
    )?;
    Ok(())
}

#[derive(Serialize)]
struct DemoRow {
    mode: String,
    wall_s: f64,
    cache_faults: u64,
    disk_faults: u64,
    disk_read_mib: f64,
    disk_written_mib: f64,
    ratio: f64,
    checksum_ok: bool,
}

impl Row for DemoRow {
    fn headers() -> &'static [&'static str] {
        &[
            "mode",
            "wall s",
            "cache faults",
            "disk faults",
            "disk read MiB",
            "disk written MiB",
            "ratio",
            "checksum",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.mode.clone(),
            format!("{:.2}", self.wall_s),
            self.cache_faults.to_string(),
            self.disk_faults.to_string(),
            format!("{:.1}", self.disk_read_mib),
            format!("{:.1}", self.disk_written_mib),
            if self.ratio > 0.0 {
                format!("{:.2}", self.ratio)
            } else {
                "-".into()
            },
            if self.checksum_ok { "ok".into() } else { "WRONG".into() },
        ]
    }
}

/// `ccvm demo`: one workload at twice its RAM budget, without and with the
/// compression cache, on this machine's disk and on an emulated slower one.
pub fn demo(format: Format) -> anyhow::Result<()> {
    let workload = ccvm_workload::by_name("graph").map_err(anyhow::Error::msg)?;
    let (size, ram) = (4u64 << 20, 2u64 << 20);
    let slow = Duration::from_micros(250);
    if format == Format::Table {
        outln!(
            "ccvm demo: the '{}' workload ({}) in a {} MiB region with {} MiB of RAM,\n\
             paged live with userfaultfd to an O_DIRECT swap file; every run's checksum is checked against plain memory\n",
            workload.name,
            workload.about,
            size >> 20,
            ram >> 20
        )?;
    }
    // (label, policy, uncompressed share, codec): the "copy" row is the
    // same two-segment mechanism with the second segment uncompressed, so
    // it and the WKdm row differ by compression alone.
    let modes = [
        ("all RAM uncompressed, FIFO", "none", 1.0, "copy"),
        ("half RAM an uncompressed LRU segment", "fixed", 0.5, "copy"),
        ("half RAM a WKdm compression cache", "fixed", 0.5, "wkdm"),
        ("adaptive WKdm cache (paper 000 §3)", "adaptive", 0.5, "wkdm"),
        ("adaptive, splits measured on a sample", "adaptive-safe", 0.5, "wkdm"),
    ];
    let mut rows = Vec::new();
    for (disk, latency) in [("this disk", Duration::ZERO), ("+0.25 ms/read", slow)] {
        for (label, policy, share, codec) in modes {
            let opts = RunOptions {
                workload,
                size,
                seed: 1,
                reference: None,
                cgroup_meter: true,
                config: RuntimeConfig {
                    ram_bytes: ram,
                    uncompressed_share: share,
                    policy: policy.parse()?,
                    codec: codec.parse()?,
                    disk_latency: latency,
                    ..RuntimeConfig::default()
                },
            };
            let r = run_one(label, &opts)?;
            let s = &r.stats;
            rows.push(DemoRow {
                mode: format!("{label} ({disk})"),
                wall_s: r.wall_s,
                cache_faults: s.faults_cache,
                disk_faults: s.faults_disk,
                disk_read_mib: s.swap.bytes_read as f64 / (1 << 20) as f64,
                disk_written_mib: s.swap.bytes_written as f64 / (1 << 20) as f64,
                ratio: if s.pages_compressed > 0 {
                    s.compression_ratio()
                } else {
                    0.0
                },
                checksum_ok: r.checksum_ok,
            });
        }
    }
    report::print(&rows, format)?;
    if format == Format::Table {
        outln!(
            "\nThe second segment catches pages on their way out (a fault there costs ~15 µs all in, here);\n\
             compressing it holds more of them, so fewer reach the disk. That pays when a disk read costs\n\
             more than the faults it adds: not on this machine's fast disk, clearly on a slower one.\n\
             The adaptive policy weighs the two costs online (`--disk-cost`, `--cache-cost` of `ccvm run`)."
        )?;
    }
    if rows.iter().any(|r| !r.checksum_ok) {
        bail!("a paged run's checksum differs from plain memory's");
    }
    kernel_comparison(format)
}

/// The demo's second part: the same kind of workload under the kernel's
/// own compressed swap (a cgroup limit over zram-lz4) and under ccvm with
/// the same total memory. Skipped, with a line saying why, where the
/// machine cannot run it (not root, swap in use, no zram or memory cgroup).
fn kernel_comparison(format: Format) -> anyhow::Result<()> {
    if let Err(why) = crate::bench_kernel::check_machine() {
        if format == Format::Table {
            outln!(
                "
The comparison with the kernel's zram swap is skipped: {why:#}"
            )?;
        }
        return Ok(());
    }
    if !crate::bench_kernel::zram_available() {
        if format == Format::Table {
            outln!("\nThe comparison with the kernel's zram swap is skipped: this machine has no zram device")?;
        }
        return Ok(());
    }
    let case = crate::bench_kernel::demo_case();
    if format == Format::Table {
        outln!(
            "\nThe comparison a user makes: '{}' under the kernel's own compressed swap (cgroup limits of {} MiB\n\
             over zram-lz4) and under ccvm, each side's memory measured as the kernel counts it (the cgroup's peak\n\
             charge, plus zram's pool), compared at equal measured memory, as `ccvm bench kernel` does:\n",
            case.label(),
            case.limits
                .iter()
                .map(|l| (l >> 20).to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        )?;
    }
    let plan = crate::bench_kernel::Plan {
        cases: vec![case],
        kernels: vec!["zram-lz4".into()],
        runs: 1,
        swap_dir: std::env::temp_dir(),
        ccvm_args: Vec::new(),
        ccvm_rams: Vec::new(),
        figures: None,
    };
    crate::bench_kernel::run(&plan, format)
}

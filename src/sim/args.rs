//! The flags of `ccvm sim`'s subcommands, and what each does with them.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::args;

#[derive(Subcommand)]
pub enum SimCommand {
    /// Simulates traces over memory sizes, policies, codecs and disk costs; writes CSV and JSON.
    Sweep(Box<SweepArgs>),
    /// Summarizes a sweep: paging-time reduction over each trace's interesting region.
    Report {
        /// The sweep's output folder.
        dir: PathBuf,
    },
    /// Records a line-level trace (data references, instruction counts, line contents) of a program run under
    /// Valgrind's Lackey, or of a built-in workload, for `ccvm sim cache`.
    RecordLines(RecordLinesArgs),
    /// Simulates line traces through L1/L2 hierarchies: plain, segmented, pair-matching and adaptive L2
    /// compression, with and without memory-link compression (paper 003 chapter 6).
    Cache(CacheArgs),
    /// Runs line traces together, one per core, on a chip of private L2s: cooperative compression and migration
    /// against each alone and against private L2s twice the size (paper 003 chapter 7).
    Chip(ChipArgs),
    /// Full memory compression (a chipset cache over memory compressed by blocks) against a compressed disk
    /// cache (pages compressed whole in part of memory), at memory sizes below each trace's footprint (paper 002).
    Memory(MemoryArgs),
}

#[derive(Args)]
pub struct MemoryArgs {
    /// Line traces.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Physical memory as shares of each trace's footprint (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [0.5, 0.75, 1.0])]
    memory: Vec<f64>,
    /// A page read from disk, e.g. 100us (cycles of a 1 GHz core).
    #[arg(long, value_parser = args::parse_duration, default_value = "100us")]
    disk: std::time::Duration,
    /// L2 bytes.
    #[arg(long, value_parser = args::parse_bytes, default_value = "256K")]
    l2: u64,
    /// FMC's chipset cache as a share of physical memory (002: 16-32 MB of 4-8 GB).
    #[arg(long, default_value_t = 1.0 / 128.0)]
    chipset_share: f64,
    /// FMC's codec, on 256-byte blocks (002 assumes X-Match).
    #[arg(long, default_value = "xmatch")]
    fmc_codec: ccvm_codec::CodecId,
    /// CDC's codec, on whole pages (timed on the trace's pages).
    #[arg(long, default_value = "lz4")]
    cdc_codec: ccvm_codec::CodecId,
}

#[derive(Args)]
pub struct ChipArgs {
    /// Line traces, one per core (2 to 8).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// L1 data cache of each core: bytes (2-way).
    #[arg(long, value_parser = args::parse_bytes, default_value = "32K")]
    l1: u64,
    /// Each core's L2 sizes (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = args::parse_bytes, default_values_t = [256 << 10])]
    l2: Vec<u64>,
    /// L2 ways.
    #[arg(long, default_value_t = 8)]
    ways: usize,
    /// Line codec (see `ccvm codecs`).
    #[arg(long, default_value = "cpack")]
    codec: ccvm_codec::CodecId,
    /// Lines cross the memory link compressed.
    #[arg(long)]
    link: bool,
}

#[derive(Args)]
pub struct RecordLinesArgs {
    /// Output trace file (.cclt).
    #[arg(short, long)]
    output: PathBuf,
    /// Stop the program after this many data references.
    #[arg(long)]
    limit: Option<u64>,
    /// Trace a built-in workload (see `ccvm workloads`) instead of a program.
    #[arg(long, conflicts_with = "program")]
    workload: Option<String>,
    /// The built-in workload's memory.
    #[arg(long, value_parser = args::parse_bytes, default_value = "4M")]
    size: u64,
    /// The built-in workload's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The program and its arguments, after `--`.
    #[arg(last = true)]
    program: Vec<std::ffi::OsString>,
}

#[derive(Args)]
pub struct CacheArgs {
    /// Line traces (from `ccvm sim record-lines`).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// L1 data cache: bytes (2-way unless --l1-ways).
    #[arg(long, value_parser = args::parse_bytes, default_value = "32K")]
    l1: u64,
    /// L1 ways.
    #[arg(long, default_value_t = 2)]
    l1_ways: usize,
    /// L2 sizes (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = args::parse_bytes, default_values_t = [256 << 10, 1 << 20])]
    l2: Vec<u64>,
    /// L2 ways.
    #[arg(long, default_value_t = 8)]
    ways: usize,
    /// L2 organizations besides plain: plain, seg4, seg8, pair, adaptive (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = ["seg8", "pair", "adaptive"].map(String::from))]
    org: Vec<String>,
    /// Line codecs (comma-separated; see `ccvm codecs`).
    #[arg(long, value_delimiter = ',', default_values = ["cpack"])]
    codec: Vec<ccvm_codec::CodecId>,
    /// Also run every organization, plain included, with lines compressed on the memory link.
    #[arg(long)]
    link: bool,
    /// Cycles to decompress a line (003 Table 6.2: C-Pack 8), at most 1000000.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(..=1_000_000))]
    decompress: u64,
    /// Cycles of an L2 hit (003 Table 6.4: 10), at most 1000000.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(..=1_000_000))]
    l2_latency: u64,
    /// Cycles of memory before a line's first byte (003 Table 6.4: 80), at most 1000000.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u64).range(..=1_000_000))]
    memory_latency: u64,
    /// Bytes a cycle on the memory link (003 Table 6.4: 10), 1 to 1000000.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    link_bytes_per_cycle: u64,
    /// Print every row as a JSON line on standard output instead of the table.
    #[arg(long)]
    json: bool,
    /// Draw each trace's speed-up and miss figures (SVG and PNG) in this folder.
    #[arg(long)]
    figures: Option<PathBuf>,
}

#[derive(Args)]
pub struct SweepArgs {
    /// Trace files (from `ccvm trace`).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Output folder.
    #[arg(long)]
    out: PathBuf,
    /// Codec of the cache (repeatable).
    #[arg(long = "codec", value_name = "NAME", default_values = ["wkdm", "lz4"])]
    codecs: Vec<ccvm_codec::CodecId>,
    /// Policy to simulate besides LRU (repeatable; see `ccvm run --help`).
    #[arg(long = "policy", value_name = "NAME", default_values = ["adaptive", "fixed10", "fixed23", "fixed37", "fixed50", "zswap", "douglis"])]
    policies: Vec<ccvm_policy::PolicySpec>,
    /// Memory sizes per trace, log-spaced (plus the interesting region's ends), 1 to 10000.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    sizes: u64,
    /// Simulate exactly these memory sizes, in pages (e.g. 128,256,400), instead of log-spaced ones.
    #[arg(long, value_delimiter = ',')]
    pages: Vec<usize>,
    /// Timed runs per page image (the median is kept), 1 to 1000.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    runs: u64,
    /// Simulate a CPU this many times slower (2) or faster (0.5): multiplies the measured codec times and the
    /// program's own run time, which sets the interesting region.
    #[arg(long, default_value_t = 1.0, value_parser = args::positive)]
    cpu_factor: f64,
    /// Disk costs per page read, ms, of the sensitivity study (Figure 6), run for the adaptive policies (adaptive, adaptive-safe) with the
    /// first codec; every policy also runs at 5 ms.
    #[arg(long, value_delimiter = ',', default_values_t = ccvm_sim::plan::DISK_MS, value_parser = args::positive)]
    disk_ms: Vec<f64>,
    /// Charge each page written to disk this many ms (default 0: writes are free, as in paper 000).
    #[arg(long, default_value_t = 0.0, value_parser = args::non_negative)]
    write_ms: f64,
    /// Model the live runtime's trapped pages (`ccvm run --trap-share`): only references to that share of the
    /// oldest uncompressed pages reach the policy. Default: every reference does (exact recency).
    #[arg(long, value_parser = args::share)]
    trap_share: Option<f64>,
    /// Charge each compressed page an eighth more for the store's slack, as the live runtime's policy does
    /// (default: its compressed bytes and mapping entry only, as in paper 000).
    #[arg(long)]
    store_slack: bool,
    /// Imported plain traces (.txt: a page number per line; .csv: a `page` column): compression ratio, 1 or more.
    #[arg(long, default_value_t = 2.0, value_parser = args::ratio)]
    ratio: f64,
    /// Imported plain traces: compression time per page (at most 4s).
    #[arg(long, value_parser = args::duration_u32_ns, default_value = "4us")]
    compress_time: std::time::Duration,
    /// Imported plain traces: decompression time per page (at most 4s).
    #[arg(long, value_parser = args::duration_u32_ns, default_value = "2us")]
    decompress_time: std::time::Duration,
    /// Imported plain traces: the program's own run time (for the interesting region).
    #[arg(long, value_parser = args::parse_duration, default_value = "0s")]
    run_time: std::time::Duration,
}

/// Runs `ccvm sim`'s subcommand `command`.
pub fn run(command: SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Sweep(a) => sweep(*a),
        SimCommand::Report { dir } => super::report(&dir),
        SimCommand::RecordLines(a) => {
            let (program, args) = match (&a.workload, a.program.split_first()) {
                (Some(w), _) => {
                    ccvm_workload::by_name(w).map_err(anyhow::Error::msg)?;
                    let me = anyhow::Context::context(std::env::current_exe(), "finding ccvm's own path")?;
                    let args = ["workload-plain", w, &a.size.to_string(), &a.seed.to_string()];
                    (me.into_os_string(), args.iter().map(std::ffi::OsString::from).collect())
                }
                (None, Some((p, rest))) => (p.clone(), rest.to_vec()),
                (None, None) => anyhow::bail!("name a program after `--`, or a built-in workload with --workload"),
            };
            super::cache::record(&program, &args, &a.output, a.limit)
        }
        SimCommand::Cache(a) => {
            args::check_simulated("--l1", a.l1, 0.25)?;
            for &l2 in &a.l2 {
                args::check_simulated("--l2", l2, 0.5)?;
            }
            super::cache::sweep(&super::cache::CacheSweep {
                traces: a.traces,
                l1: (a.l1, a.l1_ways),
                l2_sizes: a.l2,
                ways: a.ways,
                orgs: a.org,
                codecs: a.codec,
                link: a.link,
                timing: ccvm_cachesim::system::Timing {
                    decompress: a.decompress,
                    l2: a.l2_latency,
                    memory: a.memory_latency,
                    bytes_per_cycle: a.link_bytes_per_cycle,
                    ..ccvm_cachesim::system::Timing::PAPER
                },
                json: a.json,
                figures: a.figures,
            })
        }
        SimCommand::Chip(a) => {
            for &l2 in &a.l2 {
                args::check_simulated("--l2 (on every core)", l2 * a.traces.len().max(1) as u64, 0.5)?;
            }
            super::chip::chip(&super::chip::ChipSweep {
                traces: a.traces,
                l1: (a.l1, 2),
                l2_sizes: a.l2,
                ways: a.ways,
                codec: a.codec,
                link: a.link,
            })
        }
        SimCommand::Memory(a) => {
            args::check_simulated("--l2", a.l2, 0.5)?;
            super::memory::memory(&super::memory::MemorySweep {
                traces: a.traces,
                shares: a.memory,
                disk: a.disk.as_nanos() as u64,
                l2: a.l2,
                chipset_share: a.chipset_share,
                fmc_codec: a.fmc_codec,
                cdc_codec: a.cdc_codec,
            })
        }
    }
}

/// `ccvm sim sweep`.
fn sweep(a: SweepArgs) -> anyhow::Result<()> {
    let plan = ccvm_sim::plan::SweepPlan {
        codecs: a.codecs,
        policies: a.policies,
        sizes: a.sizes as usize,
        pages: a.pages,
        runs: a.runs as usize,
        cpu_factor: a.cpu_factor,
        write_ms: a.write_ms,
        trap_share: a.trap_share,
        store_slack: a.store_slack,
        disk_ms: a.disk_ms,
        plain: ccvm_sim::plan::PlainCosts {
            ratio: a.ratio,
            compress_ns: a.compress_time.as_nanos() as u32,
            decompress_ns: a.decompress_time.as_nanos() as u32,
            run_time_ns: a.run_time.as_nanos() as u64,
        },
    };
    super::sweep(&a.traces, &a.out, &plan)
}

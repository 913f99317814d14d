//! `ccvm`: the command line of ccvm, compressed caching for virtual memory.
//!
//! Each subcommand is a thin layer over the workspace's crates; this crate
//! owns argument parsing, progress display and report formatting only.

/// `println!` that returns the write's error instead of panicking (a full
/// disk, `/dev/full`, a closed pipe), for `?` to carry up to one line.
macro_rules! outln {
    () => {
        std::io::Write::write_all(&mut std::io::stdout().lock(), b"\n").map_err(crate::stdout_error)
    };
    ($($arg:tt)*) => {
        std::io::Write::write_fmt(&mut std::io::stdout().lock(), format_args!("{}\n", format_args!($($arg)*)))
            .map_err(crate::stdout_error)
    };
}

/// `print!` as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        std::io::Write::write_fmt(&mut std::io::stdout().lock(), format_args!($($arg)*)).map_err(crate::stdout_error)
    };
}

mod args;
mod bench_codecs;
mod bench_faults;
mod bench_kernel;
mod bench_store;
mod exec;
mod figures;
mod live;
mod meter;
mod mount;
mod pack;
mod progress;
mod report;
mod signals;
mod sim;

/// Counted, so that a region's tables are charged to its RAM budget (see
/// `ccvm_runtime::accounting`).
#[global_allocator]
static ALLOC: ccvm_runtime::accounting::Counted<std::alloc::System> =
    ccvm_runtime::accounting::Counted(std::alloc::System);

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use args::OutputArgs;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ccvm",
    version,
    about = "Compressed caching for virtual memory: codecs, a compressed page store, and a live runtime that pages programs through a compression cache"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main demonstration: a workload at twice its RAM budget, paged live without and with the compression cache.
    Demo(DemoArgs),
    /// Runs a built-in workload in a region paged live through the compression cache.
    Run(RunArgs),
    /// Runs an unmodified program with its heap paged live through the compression cache, and reports on it.
    Exec(ExecArgs),
    /// Traces a built-in workload: every reference outside a small window, and every page image compressed.
    Trace(TraceArgs),
    /// Lists the built-in workloads.
    Workloads,
    /// Trace-driven simulation.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Lists the codecs and what each is.
    Codecs,
    /// Stores a file page by page compressed (.ccz), for loading on demand (paper 004's Exepack2 pages).
    Pack(pack::PackArgs),
    /// Maps a .ccz file: each page is read and decompressed on first touch, through userfaultfd.
    Map(pack::MapArgs),
    /// Runs a built-in workload in ordinary memory (what `ccvm sim record-lines --workload` traces).
    #[command(hide = true)]
    WorkloadPlain {
        /// Workload name.
        name: String,
        /// Bytes of memory.
        #[arg(value_parser = args::parse_bytes)]
        size: u64,
        /// Seed.
        seed: u64,
    },
    /// Serves a compressed RAM filesystem (FUSE) at DIR until it is unmounted: file blocks in the compressed
    /// store, within a hard memory limit (CRAMES's compressed RAM filesystem).
    Mount(mount::Args),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Compression ratio and speed of each codec on folders of real memory pages.
    Codecs(bench_codecs::Args),
    /// Memory efficiency and speed of the compressed page store, per allocator and chunk size.
    Store(bench_store::Args),
    /// Cold loads of packed files (.ccz) page by page against plain mmap and the same file uncompressed (paper
    /// 004's measurement). Drops the files' pages from the page cache before each run.
    Pack(pack::BenchArgs),
    /// A workload under the kernel's own compressed swap (cgroup limit + zram or zswap) against ccvm at the same
    /// total memory. Needs root; sets up and tears down zram, zswap and the cgroup itself.
    Kernel(bench_kernel::Args),
    /// What one fault costs, all in, under the kernel's zram and under ccvm: the same real pages touched at random
    /// in a region larger than its memory, less plain memory's time, per fault. Needs root (zram and a cgroup).
    Faults(bench_faults::Args),
    /// One system's run of `bench faults` in a process of its own (used by `bench faults`).
    #[command(hide = true)]
    FaultsChild(bench_faults::ChildArgs),
    /// Runs a workload in plain memory and prints its checksum, wall time and major faults as JSON (used by
    /// `bench kernel` inside its cgroup).
    #[command(hide = true)]
    PlainChild {
        #[arg(long)]
        workload: String,
        #[arg(long, value_parser = args::parse_bytes)]
        size: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Subcommand)]
enum SimCommand {
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
struct MemoryArgs {
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
    #[arg(long, default_value = "xmatch", value_parser = args::codec)]
    fmc_codec: String,
    /// CDC's codec, on whole pages (timed on the trace's pages).
    #[arg(long, default_value = "lz4", value_parser = args::codec)]
    cdc_codec: String,
}

#[derive(Args)]
struct ChipArgs {
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
    #[arg(long, default_value = "cpack", value_parser = args::codec)]
    codec: String,
    /// Lines cross the memory link compressed.
    #[arg(long)]
    link: bool,
}

#[derive(Args)]
struct RecordLinesArgs {
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
struct CacheArgs {
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
    #[arg(long, value_delimiter = ',', default_values_t = ["cpack".to_string()], value_parser = args::codec)]
    codec: Vec<String>,
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
struct SweepArgs {
    /// Trace files (from `ccvm trace`).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Output folder.
    #[arg(long)]
    out: PathBuf,
    /// Codec of the cache (repeatable).
    #[arg(long = "codec", value_name = "NAME", default_values_t = ["wkdm".to_string(), "lz4".to_string()], value_parser = args::codec)]
    codecs: Vec<String>,
    /// Policy to simulate besides LRU (repeatable; see `ccvm run --help`).
    #[arg(long = "policy", value_name = "NAME", value_parser = ccvm_policy::parse_name, default_values_t = ["adaptive", "fixed10", "fixed23", "fixed37", "fixed50", "zswap", "douglis"].map(String::from))]
    policies: Vec<String>,
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

#[derive(Args)]
struct DemoArgs {
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
struct RunArgs {
    /// Workload name (see `ccvm workloads`).
    #[arg(long)]
    workload: String,
    /// Region size, e.g. 256M.
    #[arg(long, value_parser = args::parse_bytes)]
    size: u64,
    /// RAM budget for uncompressed pages plus the compression cache, e.g. 64M.
    #[arg(long, value_parser = args::parse_bytes)]
    ram: u64,
    /// Share of the RAM budget for uncompressed pages (fixed policy), 0 to 1.
    #[arg(long, default_value_t = 0.5, value_parser = args::share)]
    uncompressed_share: f64,
    #[arg(long, default_value = ccvm_policy::DEFAULT_POLICY, value_parser = ccvm_policy::parse_name, help = ccvm_policy::help())]
    policy: String,
    /// Cost of a disk fault for the adaptive policy (plus --disk-latency), until disk faults are measured:
    /// an untraced run then prices one at --cache-cost plus the measured difference of their service times.
    #[arg(long, value_parser = args::parse_duration, default_value = "100us")]
    disk_cost: std::time::Duration,
    /// Cost of a compression-cache fault for the adaptive policy.
    #[arg(long, value_parser = args::parse_duration, default_value = "25us")]
    cache_cost: std::time::Duration,
    /// Codec of the compression cache (see `ccvm codecs`). The default, hybrid, keeps WKdm's speed and ratio
    /// on pages of numbers and LZ4's ratio on pages of strings.
    #[arg(long, default_value = ccvm_codec::DEFAULT_CODEC, value_parser = args::codec)]
    codec: String,
    /// Directory for the swap file (default: the system's temp directory).
    #[arg(long)]
    swap_dir: Option<PathBuf>,
    /// Added to each swap-file read, to emulate a slower disk, e.g. 5ms (at most 10s).
    #[arg(long, value_parser = args::disk_latency)]
    disk_latency: Option<std::time::Duration>,
    /// How faults are served: signal (in the faulting thread, fast) or thread (a handler thread; system calls
    /// into paged memory work).
    #[arg(long, default_value = "signal", value_parser = ccvm_runtime::FaultMode::by_name)]
    fault_mode: ccvm_runtime::FaultMode,
    /// Copy page frames in and out (UFFDIO_COPY, write-protect and MADV_DONTNEED) instead of moving them with
    /// UFFDIO_MOVE, which is the default where the kernel has it (Linux 6.8+) and about a third cheaper.
    #[arg(long)]
    copy_frames: bool,
    /// Compress evicted pages in the faulting thread instead of in a helper process on another core (the
    /// default).
    #[arg(long)]
    compress_in_fault: bool,
    /// Share of uncompressed pages kept trapped (unmapped, uncompressed) so that their touches are seen: an
    /// approximation of LRU for resident pages (frames must move: not with --copy-frames). 0 replaces them in
    /// fault order.
    #[arg(long, default_value_t = 0.0, value_parser = args::share)]
    trap_share: f64,
    /// Most pages read ahead from the compression cache when cache faults walk through memory in order (the
    /// window doubles from 2 while they do); 0 turns read-ahead off.
    #[arg(long, default_value_t = ccvm_runtime::DEFAULT_READAHEAD)]
    readahead: usize,
    /// Give a never-touched page that is read a real zeroed page, as on a write, instead of the kernel's shared
    /// zero page (which holds no memory until the page's first write).
    #[arg(long)]
    no_zero_reads: bool,
    /// Read which resident pages were written lately from the page tables (asynchronous write protection and
    /// PAGEMAP_SCAN, Linux 6.7) and keep them, second-chance style, instead of replacing resident pages in
    /// fault order. Reads of untouched pages then get writable zeros.
    #[arg(long)]
    write_scan: bool,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The workload's checksum from an earlier plain run (hexadecimal): the plain reference run is skipped, so
    /// that a memory meter around this process sees the paged run alone (`bench kernel` uses it).
    #[arg(long, hide = true, value_parser = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16))]
    reference: Option<u64>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
struct ExecArgs {
    /// RAM budget of the program's heap: uncompressed pages plus the compression cache, e.g. 64M.
    #[arg(long, value_parser = args::parse_bytes, default_value = "128M")]
    ram: u64,
    /// Address space reserved for the heap; what the program allocates beyond it is not paged.
    #[arg(long, value_parser = args::parse_bytes, default_value = "4G")]
    heap: u64,
    /// Share of the RAM budget for uncompressed pages (fixed policy), 0 to 1.
    #[arg(long, default_value_t = 0.5, value_parser = args::share)]
    uncompressed_share: f64,
    /// Policy (see `ccvm run --help`).
    #[arg(long, default_value = ccvm_policy::DEFAULT_POLICY, value_parser = ccvm_policy::parse_name)]
    policy: String,
    /// Codec of the compression cache (see `ccvm codecs`).
    #[arg(long, default_value = ccvm_codec::DEFAULT_CODEC, value_parser = args::codec)]
    codec: String,
    /// Directory for the swap file (default: the system's temp directory).
    #[arg(long)]
    swap_dir: Option<PathBuf>,
    /// How faults are served: signal (in the faulting thread; every system call is intercepted so that its
    /// buffers in the heap are in memory first) or thread (a handler thread woken by the kernel; slower faults,
    /// no interception: for programs whose kernel work outlives a call, such as io_uring or AIO).
    #[arg(long, default_value = "signal", value_parser = ["thread", "signal"])]
    fault_mode: String,
    /// Copy page frames instead of moving them (see `ccvm run --help`).
    #[arg(long)]
    copy_frames: bool,
    /// Compress evicted pages in the faulting path instead of in a helper process.
    #[arg(long)]
    compress_in_fault: bool,
    /// Most pages read ahead from the compression cache when cache faults walk through memory in order; 0 turns
    /// read-ahead off.
    #[arg(long, default_value_t = ccvm_runtime::DEFAULT_READAHEAD)]
    readahead: usize,
    /// Share of uncompressed pages kept trapped (unmapped, uncompressed) so that their touches are seen (see
    /// `ccvm run --help`).
    #[arg(long, default_value_t = 0.0, value_parser = args::share)]
    trap_share: f64,
    /// Keep resident pages written lately, read from the page tables (see `ccvm run --help`).
    #[arg(long)]
    write_scan: bool,
    /// Cost of a disk fault for the adaptive policy, until disk faults are measured (see `ccvm run --help`).
    #[arg(long, value_parser = args::parse_duration, default_value = "100us")]
    disk_cost: std::time::Duration,
    /// Cost of a compression-cache fault for the adaptive policy.
    #[arg(long, value_parser = args::parse_duration, default_value = "25us")]
    cache_cost: std::time::Duration,
    /// Run the program unpaged first (output discarded) and show both wall times.
    #[arg(long)]
    compare: bool,
    /// Run the program without ccvm: for a program ccvm cannot page (statically linked).
    #[arg(long)]
    unpaged: bool,
    /// --json or --csv: the report in that form (on standard error, like the text report).
    #[command(flatten)]
    output: OutputArgs,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "PROGRAM"
    )]
    command: Vec<String>,
}

#[derive(Args)]
struct TraceArgs {
    /// Workload name (see `ccvm workloads`).
    #[arg(long, required_unless_present = "exec", conflicts_with = "exec")]
    workload: Option<String>,
    /// Trace an unmodified program instead (its heap, through `ccvm exec`'s preloaded library): the program and
    /// its arguments follow `--`. Each paged process is traced; the trace with the most references is kept.
    #[arg(long, requires = "command")]
    exec: bool,
    /// With --exec: address space reserved for the program's heap.
    #[arg(long, value_parser = args::parse_bytes, default_value = "4G")]
    heap: u64,
    /// Region size, e.g. 64M.
    #[arg(long, value_parser = args::parse_bytes, default_value = "16M")]
    size: u64,
    /// Uncompressed pages kept while tracing: references to them are not seen.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(2..))]
    window: u64,
    /// Codec of the cache while tracing (the trace stores page images, not codec output).
    #[arg(long, default_value = "lz4", value_parser = args::codec)]
    codec: String,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Trace file to write.
    #[arg(short, long)]
    out: PathBuf,
    /// With --exec: the program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM")]
    command: Vec<String>,
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo(args) => live::demo(args.output.format()),
        Command::Run(args) => {
            let workload = ccvm_workload::by_name(&args.workload).map_err(anyhow::Error::msg)?;
            args::check_budget("--ram", args.ram)?;
            let opts = live::RunOptions {
                workload,
                size: args.size,
                seed: args.seed,
                reference: args.reference,
                config: ccvm_runtime::RuntimeConfig {
                    ram_bytes: args.ram,
                    uncompressed_share: args.uncompressed_share,
                    policy: args.policy,
                    codec: args.codec,
                    swap_dir: args.swap_dir,
                    disk_latency: args.disk_latency.unwrap_or_default(),
                    trace: None,
                    disk_cost: args.disk_cost,
                    cache_cost: args.cache_cost,
                    fault_mode: args.fault_mode,
                    move_frames: !args.copy_frames,
                    background_compression: !args.compress_in_fault,
                    trap_share: args.trap_share,
                    readahead: args.readahead,
                    zero_reads: !args.no_zero_reads,
                    write_scan: args.write_scan,
                },
            };
            let report = live::run_one("run", &opts)?;
            live::print_run(&report, args.output.format())
        }
        Command::Exec(args) => {
            args::check_budget("--ram", args.ram)?;
            args::check_pages("--heap", args.heap)?;
            let settings = ccvm_runtime::ExecSettings {
                ram_bytes: args.ram,
                heap_bytes: args.heap,
                policy: args.policy,
                codec: args.codec,
                uncompressed_share: args.uncompressed_share,
                fault_mode: args.fault_mode,
                swap_dir: args.swap_dir,
                move_frames: !args.copy_frames,
                background_compression: !args.compress_in_fault,
                disk_cost_ns: args.disk_cost.as_nanos() as u64,
                cache_cost_ns: args.cache_cost.as_nanos() as u64,
                report_dir: None,
                trace_dir: None,
                trace_run_time_ns: 0,
                readahead: args.readahead,
                trap_share: args.trap_share,
                write_scan: args.write_scan,
            };
            let code = exec::exec(exec::ExecOptions {
                settings,
                command: args.command,
                compare: args.compare,
                unpaged: args.unpaged,
                format: args.output.format(),
                report: args.report,
            })?;
            std::process::exit(code);
        }
        Command::Trace(args) if args.exec => {
            args::check_pages("--heap", args.heap)?;
            args::check_userfaultfd()?;
            exec::trace(&args.command, args.window, &args.codec, args.heap, &args.out)
        }
        Command::Trace(args) => {
            let name = args.workload.as_deref().unwrap_or_default();
            let workload = ccvm_workload::by_name(name).map_err(anyhow::Error::msg)?;
            live::trace(workload, args.size, args.seed, args.window, &args.codec, args.out)
        }
        Command::Sim(SimCommand::Sweep(a)) => {
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
            sim::sweep(&a.traces, &a.out, &plan)
        }
        Command::Sim(SimCommand::Report { dir }) => sim::report(&dir),
        Command::Sim(SimCommand::RecordLines(a)) => {
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
            sim::cache::record(&program, &args, &a.output, a.limit)
        }
        Command::Sim(SimCommand::Cache(a)) => {
            args::check_simulated("--l1", a.l1, 0.25)?;
            for &l2 in &a.l2 {
                args::check_simulated("--l2", l2, 0.5)?;
            }
            sim::cache::sweep(&sim::cache::CacheSweep {
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
        Command::Sim(SimCommand::Chip(a)) => {
            for &l2 in &a.l2 {
                args::check_simulated("--l2 (on every core)", l2 * a.traces.len().max(1) as u64, 0.5)?;
            }
            sim::chip::chip(&sim::chip::ChipSweep {
                traces: a.traces,
                l1: (a.l1, 2),
                l2_sizes: a.l2,
                ways: a.ways,
                codec: a.codec,
                link: a.link,
            })
        }
        Command::Sim(SimCommand::Memory(a)) => {
            args::check_simulated("--l2", a.l2, 0.5)?;
            sim::memory::memory(&sim::memory::MemorySweep {
                traces: a.traces,
                shares: a.memory,
                disk: a.disk.as_nanos() as u64,
                l2: a.l2,
                chipset_share: a.chipset_share,
                fmc_codec: a.fmc_codec,
                cdc_codec: a.cdc_codec,
            })
        }
        Command::WorkloadPlain { name, size, seed } => {
            let w = ccvm_workload::by_name(&name).map_err(anyhow::Error::msg)?;
            let mut memory = vec![0u8; (size as usize).max(ccvm_workload::MIN_BYTES)];
            outln!("{}: checksum {:#x}", w.name, (w.run)(&mut memory, seed))?;
            Ok(())
        }
        Command::Workloads => {
            for w in ccvm_workload::WORKLOADS {
                outln!("{:<10} {}", w.name, w.about)?;
            }
            Ok(())
        }
        Command::Bench(BenchCommand::Codecs(args)) => bench_codecs::run_args(args),
        Command::Bench(BenchCommand::Kernel(args)) => bench_kernel::run_args(args),
        Command::Bench(BenchCommand::Faults(args)) => bench_faults::run_args(args),
        Command::Bench(BenchCommand::Store(args)) => bench_store::run_args(args),
        Command::Bench(BenchCommand::FaultsChild(args)) => bench_faults::child(&args),
        Command::Bench(BenchCommand::PlainChild { workload, size, seed }) => {
            bench_kernel::plain_child(&workload, size, seed)
        }
        Command::Pack(a) => pack::run_pack(a),
        Command::Mount(a) => mount::run_args(a),
        Command::Map(a) => pack::run_map(a),
        Command::Bench(BenchCommand::Pack(a)) => pack::run_bench(a),
        Command::Codecs => {
            let width = ccvm_codec::CODECS.iter().map(|c| c.name.len()).max().unwrap_or(0);
            for c in ccvm_codec::CODECS {
                outln!("{:<width$} {}", c.name, c.about)?;
            }
            Ok(())
        }
    }
}

/// A failed write to standard output, as an error that says so.
fn stdout_error(e: std::io::Error) -> anyhow::Error {
    anyhow::Error::new(e).context("writing to standard output")
}

/// `e` and its causes on one line, each cause once: an error that already
/// quotes its cause (as many do) is not followed by it again.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Whether `e` is a write to a pipe whose reader has gone (`| head`).
fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn main() -> ExitCode {
    // SIGPIPE stays ignored (Rust's default): a write to a closed pipe
    // fails with EPIPE, the error unwinds like any other so that temporary
    // folders are removed, and ccvm ends quietly as a killed tool would.
    signals::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help, asked for or shown for a missing subcommand, as clap prints it.
        Err(e) if !e.use_stderr() || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            e.exit()
        }
        Err(e) => {
            // One line, as every other error: clap's first, which names
            // the flag and what is wrong with its value.
            let text = e.render().to_string();
            let mut lines = text.lines();
            let mut first = lines
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .to_string();
            // "the following required arguments were not provided:" names
            // them on the lines after it.
            if first.ends_with(':') {
                let named: Vec<&str> = lines.take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
                first = format!("{} {}", first, named.join(", "));
            }
            let _ = writeln!(std::io::stderr(), "ccvm: {first}; see --help");
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_closed_pipe(&e) => ExitCode::from(141),
        Err(e) => {
            // Standard error may be a full disk too: the status still tells.
            let _ = writeln!(std::io::stderr(), "ccvm: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

//! The flags of `ccvm run`, `ccvm trace` and `ccvm demo`, and what each does with them.

use std::path::PathBuf;

use clap::Args;

use crate::args::{self, OutputArgs, PagingArgs};

#[derive(Args)]
pub struct DemoArgs {
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct RunArgs {
    /// Workload name (see `ccvm workloads`).
    #[arg(long)]
    workload: String,
    /// Region size, e.g. 256M.
    #[arg(long, value_parser = args::parse_bytes)]
    size: u64,
    /// RAM budget for uncompressed pages plus the compression cache, e.g. 64M.
    #[arg(long, value_parser = args::parse_bytes)]
    ram: u64,
    #[command(flatten)]
    paging: PagingArgs,
    /// Added to each swap-file read, to emulate a slower disk, e.g. 5ms (at most 10s).
    #[arg(long, value_parser = args::disk_latency)]
    disk_latency: Option<std::time::Duration>,
    /// Give a never-touched page that is read a real zeroed page, as on a write, instead of the kernel's shared
    /// zero page (which holds no memory until the page's first write).
    #[arg(long)]
    no_zero_reads: bool,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The workload's checksum from an earlier plain run (hexadecimal): the plain reference run is skipped, so
    /// that a memory meter around this process sees the paged run alone (`bench kernel` uses it).
    #[arg(long, hide = true, value_parser = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16))]
    reference: Option<u64>,
    /// Do not meter the paged run in a memory cgroup of its own (made, as root, inside ccvm's): the meter
    /// costs about 0.4 MiB, charged to the group ccvm runs in, so a run metered from outside (`ccvm bench
    /// kernel`) goes without it.
    #[arg(long)]
    no_cgroup_meter: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct TraceArgs {
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
    #[arg(long, default_value = "lz4")]
    codec: ccvm_codec::CodecId,
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

/// `ccvm demo`.
pub fn demo(a: &DemoArgs) -> anyhow::Result<()> {
    super::demo(a.output.format())
}

/// `ccvm run`.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let workload = ccvm_workload::by_name(&a.workload).map_err(anyhow::Error::msg)?;
    let mut config = a.paging.config(a.ram)?;
    config.disk_latency = a.disk_latency.unwrap_or_default();
    config.zero_reads = !a.no_zero_reads;
    let opts = super::RunOptions {
        workload,
        size: a.size,
        seed: a.seed,
        reference: a.reference,
        cgroup_meter: !a.no_cgroup_meter,
        config,
    };
    let report = super::run_one("run", &opts)?;
    super::print_run(&report, a.output.format())
}

/// `ccvm trace`: a built-in workload, or a program with `--exec`.
pub fn trace(a: TraceArgs) -> anyhow::Result<()> {
    if a.exec {
        args::check_pages("--heap", a.heap)?;
        args::check_userfaultfd()?;
        return crate::exec::trace(&a.command, a.window, a.codec, a.heap, &a.out);
    }
    let name = a.workload.as_deref().unwrap_or_default();
    let workload = ccvm_workload::by_name(name).map_err(anyhow::Error::msg)?;
    super::trace(workload, a.size, a.seed, a.window, a.codec, a.out)
}

//! `ccvm bench`: its subcommands, each in the module that owns it.

use clap::Subcommand;

use crate::{args, bench_codecs, bench_faults, bench_kernel, bench_store, pack};

#[derive(Subcommand)]
pub enum BenchCommand {
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

/// Runs `ccvm bench`'s subcommand `command`.
pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Codecs(args) => bench_codecs::run_args(args),
        BenchCommand::Kernel(args) => bench_kernel::run_args(args),
        BenchCommand::Faults(args) => bench_faults::run_args(args),
        BenchCommand::Store(args) => bench_store::run_args(args),
        BenchCommand::FaultsChild(args) => bench_faults::child(&args),
        BenchCommand::PlainChild { workload, size, seed } => bench_kernel::plain_child(&workload, size, seed),
        BenchCommand::Pack(a) => pack::run_bench(a),
    }
}

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
mod bench;
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
mod sim;

/// Counted, so that a region's tables are charged to its RAM budget (see
/// `ccvm_runtime::accounting`).
#[global_allocator]
static ALLOC: ccvm_runtime::accounting::Counted<std::alloc::System> =
    ccvm_runtime::accounting::Counted(std::alloc::System);

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Demo(live::args::DemoArgs),
    /// Runs a built-in workload in a region paged live through the compression cache.
    Run(live::args::RunArgs),
    /// Runs an unmodified program with its heap paged live through the compression cache, and reports on it.
    Exec(exec::args::ExecArgs),
    /// Traces a built-in workload: every reference outside a small window, and every page image compressed.
    Trace(live::args::TraceArgs),
    /// Lists the built-in workloads.
    Workloads,
    /// Trace-driven simulation.
    #[command(subcommand)]
    Sim(sim::args::SimCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
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

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo(args) => live::args::demo(&args),
        Command::Run(args) => live::args::run(args),
        Command::Exec(args) => {
            let code = exec::args::run(args)?;
            std::process::exit(code);
        }
        Command::Trace(args) => live::args::trace(args),
        Command::Sim(command) => sim::args::run(command),
        Command::Bench(command) => bench::run(command),
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
        Command::Pack(a) => pack::run_pack(a),
        Command::Mount(a) => mount::run_args(a),
        Command::Map(a) => pack::run_map(a),
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
    ccvm_output::interrupt::install();
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

//! `ccvm`: the command line of ccvm, compressed caching for virtual memory.
//!
//! Each subcommand is a thin layer over the workspace's crates; this crate
//! owns argument parsing, progress display and report formatting only.

mod bench_codecs;
mod bench_store;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "ccvm",
    version,
    about = "Compressed caching for virtual memory: codecs, benchmarks and (soon) a live compressed-memory runtime"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main demonstration (for now: the codec benchmark on the bundled corpus).
    Demo,
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Lists the codecs and what each is.
    Codecs,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Compression ratio and speed of each codec on folders of real memory pages.
    Codecs(BenchCodecsArgs),
    /// Memory efficiency and speed of the compressed page store, per allocator and chunk size.
    Store(BenchStoreArgs),
}

#[derive(Args)]
struct BenchStoreArgs {
    /// Folder of page files (whole 4096-byte pages; .zst files are decompressed). Default: the bundled corpus.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Allocator to measure (repeatable). Default: all.
    #[arg(long = "allocator", value_name = "NAME")]
    allocators: Vec<String>,
    /// Codec the store compresses with.
    #[arg(long, default_value = "lz4")]
    codec: String,
    /// Chunk size in bytes (repeatable): a power of two from 4096.
    #[arg(long = "chunk", value_name = "BYTES", default_values_t = [65536usize])]
    chunks: Vec<usize>,
    #[command(flatten)]
    output: OutputArgs,
}

/// Output format of a report.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// JSON.
    Json,
    /// CSV with a header line.
    Csv,
}

#[derive(Args)]
struct BenchCodecsArgs {
    /// Folder of page files (whole 4096-byte pages; .zst files are decompressed). Default: the bundled corpus.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Codec to measure (repeatable). Default: every general-purpose codec.
    #[arg(long = "codec", value_name = "NAME")]
    codecs: Vec<String>,
    /// Timed passes per file and codec; the best is kept.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    passes: u32,
    /// Bytes compressed as one block: 4096 (pages) or a divisor of it, e.g. 64 for cache lines.
    #[arg(long, default_value_t = 4096)]
    block: usize,
    #[command(flatten)]
    output: OutputArgs,
}

/// The output flags every report takes.
#[derive(Args)]
struct OutputArgs {
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    csv: bool,
}

impl OutputArgs {
    fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo => {
            println!("ccvm demo: every codec on the bundled corpus of real memory pages (release build, one thread)\n");
            let opts = bench_codecs::Options {
                corpus: None,
                codecs: vec![],
                passes: 3,
                block: ccvm_codec::PAGE_SIZE,
            };
            bench_codecs::run(&opts, Format::Table)
        }
        Command::Bench(BenchCommand::Codecs(args)) => {
            let opts = bench_codecs::Options {
                corpus: args.corpus.clone(),
                codecs: args.codecs.clone(),
                passes: args.passes,
                block: args.block,
            };
            bench_codecs::run(&opts, args.output.format())
        }
        Command::Bench(BenchCommand::Store(args)) => {
            let format = args.output.format();
            let opts = bench_store::Options {
                corpus: args.corpus,
                allocators: args.allocators,
                codec: args.codec,
                chunks: args.chunks,
            };
            bench_store::run(&opts, format)
        }
        Command::Codecs => {
            for c in ccvm_codec::CODECS {
                println!("{:<10} {}", c.name, c.about);
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccvm: {e:#}");
            ExitCode::FAILURE
        }
    }
}

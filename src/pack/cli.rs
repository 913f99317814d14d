//! The command-line arguments of `ccvm pack`, `ccvm map` and `ccvm bench
//! pack`, and how each becomes a call into the `pack` module.

use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct PackArgs {
    /// The file to pack.
    file: PathBuf,
    /// The packed file to write.
    #[arg(short, long)]
    output: PathBuf,
    /// Codec of the pages (see `ccvm codecs`): exepack2 is OS/2's format.
    #[arg(long, default_value = "exepack2")]
    codec: ccvm_codec::CodecId,
}

#[derive(clap::Args)]
pub(crate) struct MapArgs {
    /// The .ccz file.
    file: PathBuf,
    /// Read and check every page before mapping.
    #[arg(long)]
    verify: bool,
    /// Write the file's original bytes, read through the mapping, to this file (- for standard output).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Otherwise, pages to touch and time: all, or sparse (runs of 1-8 pages at random places, a fifth of the
    /// file).
    #[arg(long, value_enum, default_value = "all")]
    touch: super::Pattern,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    output_format: crate::args::OutputArgs,
}

/// How packed pages are read.
#[derive(clap::Args)]
pub(crate) struct ReadArgs {
    /// Read pages through the page cache (with its read-ahead) instead of with O_DIRECT (every page load from
    /// the disk, as a pager without a file cache).
    #[arg(long)]
    buffered: bool,
    /// Added to every page read, to emulate a slower disk's access time, e.g. 5ms (at most 10s).
    #[arg(long, value_parser = crate::args::disk_latency)]
    disk_latency: Option<std::time::Duration>,
    /// Emulated disk transfer rate per second, e.g. 2M: every read also waits its bytes' transfer time.
    #[arg(long, value_parser = crate::args::parse_bytes)]
    disk_rate: Option<u64>,
    /// Most pages read at once when faults walk forward through the file (1 to 32; 1 reads only the page
    /// faulted).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=32))]
    readahead: u64,
    /// Seed of the sparse pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl ReadArgs {
    fn options(&self) -> ccvm_pack::ReadOptions {
        ccvm_pack::ReadOptions {
            direct: !self.buffered,
            latency: self.disk_latency.unwrap_or_default(),
            bandwidth: self.disk_rate.unwrap_or(0),
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Files to pack and load: executables, shared libraries, data files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Codecs of the packed variants (besides copy, the uncompressed file loaded the same way).
    #[arg(long = "codec", default_values = ["exepack2", "lz4"])]
    codecs: Vec<ccvm_codec::CodecId>,
    /// Access patterns to measure.
    #[arg(long = "pattern", value_enum, default_values_t = [super::Pattern::All, super::Pattern::Sparse])]
    patterns: Vec<super::Pattern>,
    /// Runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Directory for the packed files: on a disk, not tmpfs (default: the system's temp directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    output: crate::args::OutputArgs,
}

/// Runs `ccvm pack` with the arguments the command line gave.
pub(crate) fn run_pack(a: PackArgs) -> anyhow::Result<()> {
    super::pack(&a.file, &a.output, a.codec)
}

/// Runs `ccvm map` with the arguments the command line gave.
pub(crate) fn run_map(a: MapArgs) -> anyhow::Result<()> {
    crate::args::check_userfaultfd()?;
    let opts = super::MapOptions {
        verify: a.verify,
        output: a.output,
        touch: a.touch,
        read: a.read.options(),
        readahead: a.read.readahead as usize,
        seed: a.read.seed,
    };
    super::map(&a.file, &opts, a.output_format.format())
}

/// Runs `ccvm bench pack` with the arguments the command line gave.
pub(crate) fn run_bench(a: BenchArgs) -> anyhow::Result<()> {
    let opts = super::BenchOptions {
        files: a.files,
        codecs: a.codecs,
        patterns: a.patterns,
        read: a.read.options(),
        repeat: a.repeat,
        dir: a.dir.unwrap_or_else(std::env::temp_dir),
        readahead: a.read.readahead as usize,
        seed: a.read.seed,
    };
    super::bench(&opts, a.output.format())
}

//! `ccvm bench codecs`: compression ratio and speed of codecs on real pages.
//!
//! Method: each page (or, with `--block 64`, each cache line of it) is
//! compressed on its own into a budget of its own size (a block that does
//! not shrink is kept raw and counts in full, and its "decompression" is a
//! copy, as in a store). One pass compresses every page
//! of a file, then decompresses every page; the best of `passes` passes is
//! kept for each direction, on one thread. The codecs take turns file by
//! file, so that noise on a shared machine falls on all of them alike.
//! Every round trip is checked byte for byte after the timed loops. Throughputs are in MB/s of original data
//! (10^6 bytes); "symmetric" divides the bytes by the time to compress *and*
//! decompress them, the figure that matters for compressed caching (paper
//! 003, §4.4.1).
//!
//! When LZ4 is among the codecs, the table ends with each codec's worst
//! program: its ratio there as a fraction of LZ4's on the same pages. An
//! overall ratio can hide a program a codec loses on (a word model on byte
//! strings); the worst program is what a program the corpus does not hold
//! can expect, so it is printed beside the mean.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccvm_codec::{Codec, CodecInfo, CompressError, CODECS, PAGE_SIZE};
use ccvm_corpus::PageFile;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::args::Format;
use crate::report::{self, Row};

/// What to measure.
pub struct Options {
    /// Corpus folders, their files measured together; empty for the
    /// bundled corpus.
    pub corpus: Vec<PathBuf>,
    /// The codecs; empty for every general-purpose codec.
    pub codecs: Vec<ccvm_codec::CodecId>,
    /// Timed passes; the best is kept.
    pub passes: u32,
    /// Bytes compressed as one block: 4096 for pages, 64 for cache lines.
    pub block: usize,
}

/// One codec on one file (or on all files: `file` = "all").
#[derive(Serialize, Clone)]
pub struct Measurement {
    /// Corpus file name, or "all".
    pub file: String,
    /// Codec name.
    pub codec: String,
    /// Pages measured.
    pub pages: usize,
    /// Original bytes.
    pub original_bytes: u64,
    /// Bytes after compression, a block that does not shrink counting in full.
    pub compressed_bytes: u64,
    /// Bytes compressed as one block (each page is cut into blocks).
    pub block: usize,
    /// Blocks kept raw because they did not shrink.
    pub raw_blocks: usize,
    /// original / compressed.
    pub ratio: f64,
    /// Best compression time for all pages, seconds.
    pub compress_s: f64,
    /// Best decompression time for all pages, seconds.
    pub decompress_s: f64,
    /// Compression throughput, MB/s of original data.
    pub compress_mbps: f64,
    /// Decompression throughput, MB/s of original data.
    pub decompress_mbps: f64,
    /// Symmetric throughput: original bytes / (compress + decompress time).
    pub symmetric_mbps: f64,
}

/// What one codec did to some pages: added up over files for the totals.
#[derive(Default, Clone, Copy)]
struct Tally {
    pages: usize,
    compressed: u64,
    raw: usize,
    tc: f64,
    td: f64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.pages += o.pages;
        self.compressed += o.compressed;
        self.raw += o.raw;
        self.tc += o.tc;
        self.td += o.td;
    }
}

impl Measurement {
    fn new(file: &str, codec: &str, block: usize, t: Tally) -> Self {
        let bytes = (t.pages * PAGE_SIZE) as u64;
        let mbps = |secs: f64| bytes as f64 / secs / 1e6;
        Measurement {
            file: file.to_string(),
            codec: codec.to_string(),
            pages: t.pages,
            original_bytes: bytes,
            compressed_bytes: t.compressed,
            block,
            raw_blocks: t.raw,
            ratio: bytes as f64 / t.compressed as f64,
            compress_s: t.tc,
            decompress_s: t.td,
            compress_mbps: mbps(t.tc),
            decompress_mbps: mbps(t.td),
            symmetric_mbps: mbps(t.tc + t.td),
        }
    }
}

impl Row for Measurement {
    fn headers() -> &'static [&'static str] {
        &[
            "file",
            "codec",
            "pages",
            "ratio",
            "block",
            "raw blocks",
            "compress MB/s",
            "decompress MB/s",
            "symmetric MB/s",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.file.clone(),
            self.codec.clone(),
            self.pages.to_string(),
            format!("{:.3}", self.ratio),
            self.block.to_string(),
            self.raw_blocks.to_string(),
            format!("{:.0}", self.compress_mbps),
            format!("{:.0}", self.decompress_mbps),
            format!("{:.0}", self.symmetric_mbps),
        ]
    }
}

/// Result of the best passes of one codec over one file.
struct FileRun {
    compressed: u64,
    raw: usize,
    tc: Duration,
    td: Duration,
}

/// Times `codec` over the pages of `file`, checking every round trip.
fn measure(
    codec: &mut dyn Codec,
    file: &PageFile,
    passes: u32,
    block: usize,
    progress: &ProgressBar,
) -> anyhow::Result<FileRun> {
    let blocks = file.data.len() / block;
    let mut packed = vec![0u8; file.data.len()];
    let mut lens = vec![0usize; blocks];
    let mut back = vec![0u8; file.data.len()];
    let (mut best_c, mut best_d) = (Duration::MAX, Duration::MAX);
    for _ in 0..passes {
        let t = Instant::now();
        for ((page, slot), len) in file
            .data
            .chunks_exact(block)
            .zip(packed.chunks_exact_mut(block))
            .zip(lens.iter_mut())
        {
            *len = match codec.compress(page, slot) {
                Ok(n) if n < block => n,
                Ok(_) | Err(CompressError::DoesNotFit { .. }) => 0,
                Err(e) => bail!("{}: {e}", codec.name()),
            };
        }
        best_c = best_c.min(t.elapsed());
        back.fill(0);
        let t = Instant::now();
        for (((page, slot), &len), out) in file
            .data
            .chunks_exact(block)
            .zip(packed.chunks_exact(block))
            .zip(&lens)
            .zip(back.chunks_exact_mut(block))
        {
            if len == 0 {
                out.copy_from_slice(page);
            } else {
                codec
                    .decompress(&slot[..len], out)
                    .with_context(|| format!("{} failed to decode its own output", codec.name()))?;
            }
        }
        best_d = best_d.min(t.elapsed());
        std::hint::black_box(&back);
        if back != file.data {
            let bad = back
                .chunks_exact(block)
                .zip(file.data.chunks_exact(block))
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            bail!("{}: block {bad} of {} did not round-trip", codec.name(), file.name);
        }
        progress.inc(1);
    }
    let raw = lens.iter().filter(|&&l| l == 0).count();
    let compressed = lens.iter().map(|&l| if l == 0 { block } else { l } as u64).sum();
    Ok(FileRun {
        compressed,
        raw,
        tc: best_c,
        td: best_d,
    })
}

fn selected(codecs: &[ccvm_codec::CodecId]) -> Vec<&'static CodecInfo> {
    if codecs.is_empty() {
        return CODECS.iter().filter(|c| c.general).collect();
    }
    codecs.iter().map(|c| c.info()).collect()
}

/// Measures and returns one row per (file, codec) and per codec over all files.
pub fn measure_all(opts: &Options) -> anyhow::Result<Vec<Measurement>> {
    if !(4..=PAGE_SIZE).contains(&opts.block) || !PAGE_SIZE.is_multiple_of(opts.block) || !opts.block.is_multiple_of(4)
    {
        bail!(
            "--block {} is not a block size: give a multiple of 4 that divides 4096 (64 for cache lines)",
            opts.block
        );
    }
    let codecs = selected(&opts.codecs);
    let mut files = load_corpus(&opts.corpus)?;
    let memory_files = files.len();
    // Delta16 is made for sensor samples, not memory: give it its data too.
    if codecs.iter().any(|c| c.name == "delta16") {
        files.push(ccvm_corpus::sensor::pages(256, 1));
        debug_assert_eq!(files.last().map(|f| f.name.as_str()), Some(SENSOR));
    }
    let progress = ProgressBar::with_draw_target(
        Some((files.len() * codecs.len()) as u64 * opts.passes as u64),
        ProgressDrawTarget::hidden(),
    );
    progress.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} passes, {eta} left").unwrap());
    let started = Instant::now();
    // Each file is measured with every codec in turn before the next file,
    // so that a burst of noise on a shared machine falls on all the codecs
    // compared, not on one codec's whole run.
    let mut made: Vec<Box<dyn Codec>> = codecs.iter().map(|info| (info.make)()).collect();
    let mut tallies = vec![Vec::with_capacity(files.len()); codecs.len()];
    for file in &files {
        if started.elapsed() > Duration::from_secs(1) && progress.is_hidden() {
            progress.set_draw_target(ProgressDrawTarget::stderr());
        }
        for (codec, per_file) in made.iter_mut().zip(&mut tallies) {
            let run = measure(codec.as_mut(), file, opts.passes, opts.block, &progress)?;
            per_file.push(Tally {
                pages: file.page_count(),
                compressed: run.compressed,
                raw: run.raw,
                tc: run.tc.as_secs_f64(),
                td: run.td.as_secs_f64(),
            });
        }
    }
    let mut rows = Vec::new();
    for (info, per_file) in codecs.iter().zip(tallies) {
        let mut total = Tally::default();
        for (i, (file, tally)) in files.iter().zip(per_file).enumerate() {
            rows.push(Measurement::new(&file.name, info.name, opts.block, tally));
            if i < memory_files {
                total += tally;
            }
        }
        rows.push(Measurement::new("all", info.name, opts.block, total));
    }
    progress.finish_and_clear();
    Ok(rows)
}

/// Runs the benchmark and prints the report: per-file rows, then a summary
/// of every codec over all files.
pub fn run(opts: &Options, format: Format) -> anyhow::Result<()> {
    let mut rows = measure_all(opts)?;
    if format == Format::Table {
        eprintln!(
            "corpus {}, {}-byte blocks, one thread, best of {} passes, {}",
            corpus_dirs(&opts.corpus)
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" + "),
            opts.block,
            opts.passes,
            cpu_name()
        );
    }
    // Group the summary rows at the end for reading.
    rows.sort_by_key(|r| r.file == "all");
    report::print(&rows, format)?;
    if format == Format::Table {
        let worst = worst_programs(&rows);
        if !worst.is_empty() {
            println!();
            report::print(&worst, format)?;
        }
    }
    Ok(())
}

/// The folders `dirs` names, or the bundled corpus when it names none.
fn corpus_dirs(dirs: &[PathBuf]) -> Vec<PathBuf> {
    if dirs.is_empty() {
        vec![ccvm_corpus::default_dir()]
    } else {
        dirs.to_vec()
    }
}

/// Every page file of `dirs` (the bundled corpus when empty), in folder
/// order. Two files of one name would make the per-program rows ambiguous.
fn load_corpus(dirs: &[PathBuf]) -> anyhow::Result<Vec<PageFile>> {
    let mut files: Vec<PageFile> = Vec::new();
    for dir in corpus_dirs(dirs) {
        for file in ccvm_corpus::load_dir(&dir)? {
            if files.iter().any(|f| f.name == file.name) {
                bail!(
                    "two corpus files are named {} (the second in {}): give folders whose files differ",
                    file.name,
                    dir.display()
                );
            }
            files.push(file);
        }
    }
    Ok(files)
}

/// The generated sensor file's name: not a program, so never a worst one.
const SENSOR: &str = "sensor (generated)";

/// A codec's worst program against LZ4 measured in the same run.
#[derive(Serialize)]
struct Worst {
    codec: String,
    ratio: f64,
    ratio_vs_lz4: f64,
    symmetric_vs_lz4: f64,
    worst_program: String,
    worst_vs_lz4: f64,
    below_lz4: usize,
    programs: usize,
}

impl Row for Worst {
    fn headers() -> &'static [&'static str] {
        &[
            "codec",
            "worst program",
            "ratio",
            "× lz4",
            "worst × lz4",
            "programs below lz4",
            "symmetric × lz4",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.codec.clone(),
            self.worst_program.clone(),
            format!("{:.3}", self.ratio),
            format!("{:.3}", self.ratio_vs_lz4),
            format!("{:.3}", self.worst_vs_lz4),
            format!("{} of {}", self.below_lz4, self.programs),
            format!("{:.2}", self.symmetric_vs_lz4),
        ]
    }
}

/// Each codec's worst program by its ratio over LZ4's on the same file,
/// from the rows of one run; empty when LZ4 was not measured.
fn worst_programs(rows: &[Measurement]) -> Vec<Worst> {
    let lz4 = |file: &str| rows.iter().find(|r| r.codec == "lz4" && r.file == file);
    let Some(lz4_all) = lz4("all") else {
        return Vec::new();
    };
    let mut codecs: Vec<&str> = Vec::new();
    for r in rows {
        if !codecs.contains(&r.codec.as_str()) {
            codecs.push(&r.codec);
        }
    }
    codecs
        .into_iter()
        .filter_map(|codec| {
            let all = rows.iter().find(|r| r.codec == codec && r.file == "all")?;
            let per_file: Vec<(&str, f64)> = rows
                .iter()
                .filter(|r| r.codec == codec && r.file != "all" && r.file != SENSOR)
                .filter_map(|r| Some((r.file.as_str(), r.ratio / lz4(&r.file)?.ratio)))
                .collect();
            let &(worst_program, worst_vs_lz4) = per_file.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
            Some(Worst {
                codec: codec.to_string(),
                ratio: all.ratio,
                ratio_vs_lz4: all.ratio / lz4_all.ratio,
                symmetric_vs_lz4: all.symmetric_mbps / lz4_all.symmetric_mbps,
                worst_program: worst_program.to_string(),
                worst_vs_lz4,
                below_lz4: per_file.iter().filter(|p| p.1 < 1.0).count(),
                programs: per_file.len(),
            })
        })
        .collect()
}

/// The processor's model name, for the report header.
fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The subcommand's arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Folder of page files (whole 4096-byte pages; .zst files are decompressed); repeat it to measure the files of
    /// several folders together. Default: the bundled corpus.
    #[arg(long)]
    corpus: Vec<PathBuf>,
    /// Codec to measure (repeatable). Default: every general-purpose codec.
    #[arg(long = "codec", value_name = "NAME")]
    codecs: Vec<ccvm_codec::CodecId>,
    /// Timed passes per file and codec; the best is kept.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    passes: u32,
    /// Bytes compressed as one block: 4096 (pages) or a divisor of it, e.g. 64 for cache lines.
    #[arg(long, default_value_t = 4096)]
    block: usize,
    #[command(flatten)]
    output: crate::args::OutputArgs,
}

/// Runs the subcommand with the arguments the command line gave.
pub(crate) fn run_args(args: Args) -> anyhow::Result<()> {
    let opts = Options {
        corpus: args.corpus.clone(),
        codecs: args.codecs.clone(),
        passes: args.passes,
        block: args.block,
    };
    run(&opts, args.output.format())
}

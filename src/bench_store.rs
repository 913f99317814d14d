//! `ccvm bench store`: memory efficiency and speed of the compressed page
//! store with each allocator and chunk size, on real pages (the comparison
//! of paper 003 Figure 3.4).
//!
//! Method: every corpus page is put into a fresh store (page numbers in
//! corpus order); then a churn of as many operations as there are pages
//! removes a random page and puts a random corpus page in its place, as
//! swap traffic does. Reported: memory held in chunks against the
//! compressed bytes (the allocator's overhead, as zram's `mem_used_total`
//! against `compr_data_size`), the same with the allocator's and mapping
//! table's bookkeeping, fragmentation after loading, at its worst during
//! the churn and after it, and the time of each put and get of the churn
//! (the store's steady state, as swap traffic meets it) beyond the time
//! spent in the codec on that same call (median and 99th percentile), on
//! one thread. Times are read from the TSC-based clock of `quanta`: the
//! system clock costs 50 to 250 ns a reading in this kind of virtual
//! machine, as much as the store's own work, and four readings frame each
//! measured call. `--pages N` stores N pages, the corpus repeated, to
//! measure the store at a scale the corpus does not reach.
//!
//! With `--threads N` it measures throughput instead, the figure to set
//! beside a zram device's: N threads put every corpus page into a fresh
//! store (thread t the pages t, t + N, ...), then get them all back the
//! same way; megabytes (10^6 bytes) of original pages per second of wall
//! time for each phase, codec included, the median of five rounds. Every
//! page got back is compared with the page put, outside the timing.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use ccvm_corpus::PAGE_SIZE;
use ccvm_store::{alloc::ALLOCATORS, Store, StoreConfig};
use serde::Serialize;

use crate::args::Format;
use crate::report::{self, Row};

/// What to measure.
pub struct Options {
    /// Corpus folder; `None` for the bundled corpus.
    pub corpus: Option<PathBuf>,
    /// Allocator names; empty for all.
    pub allocators: Vec<String>,
    /// The codec.
    pub codec: ccvm_codec::CodecId,
    /// Chunk sizes.
    pub chunks: Vec<usize>,
    /// Thread counts for the throughput measurement; empty for the
    /// one-thread churn.
    pub threads: Vec<usize>,
    /// Pages to store (the corpus repeated); `None` for one per corpus page.
    pub pages: Option<usize>,
}

/// Rounds of the throughput measurement (the median is reported).
const ROUNDS: usize = 5;

/// Throughput with one allocator, chunk size and thread count.
#[derive(Serialize)]
pub struct ThroughputRun {
    /// Allocator name.
    pub allocator: String,
    /// Chunk size, bytes.
    pub chunk: usize,
    /// Codec name.
    pub codec: String,
    /// Threads putting and getting.
    pub threads: usize,
    /// Pages put and got per round.
    pub pages: usize,
    /// Original bytes put per second, 10^6 bytes (median of the rounds).
    pub put_mbps: f64,
    /// Original bytes got per second, 10^6 bytes (median of the rounds).
    pub get_mbps: f64,
}

impl Row for ThroughputRun {
    fn headers() -> &'static [&'static str] {
        &[
            "allocator",
            "chunk",
            "codec",
            "threads",
            "pages",
            "put MB/s",
            "get MB/s",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.allocator.clone(),
            self.chunk.to_string(),
            self.codec.clone(),
            self.threads.to_string(),
            self.pages.to_string(),
            format!("{:.0}", self.put_mbps),
            format!("{:.0}", self.get_mbps),
        ]
    }
}

/// Puts `pages` into a fresh store, then gets them, with `threads` threads,
/// [`ROUNDS`] times; checks every page got.
fn throughput(
    allocator: &str,
    chunk: usize,
    codec: ccvm_codec::CodecId,
    threads: usize,
    pages: &[&[u8]],
) -> anyhow::Result<ThroughputRun> {
    let mut puts = Vec::new();
    let mut gets = Vec::new();
    for round in 0..ROUNDS {
        let store = Store::new(StoreConfig {
            codec,
            allocator: allocator.into(),
            chunk_size: chunk,
            ..StoreConfig::default()
        })?;
        let mine = |t: usize| (t..pages.len()).step_by(threads);
        let started = Instant::now();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let store = &store;
                    s.spawn(move || mine(t).try_for_each(|n| store.put(n as u64, pages[n]).map(drop)))
                })
                .collect();
            workers.into_iter().try_for_each(|w| w.join().expect("a put thread"))
        })?;
        puts.push(started.elapsed().as_nanos() as u64);
        let check = round == ROUNDS - 1;
        let started = Instant::now();
        let bad = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let store = &store;
                    s.spawn(move || -> anyhow::Result<Option<usize>> {
                        let mut out = vec![0u8; PAGE_SIZE];
                        let mut bad = None;
                        for n in mine(t) {
                            store.get(n as u64, &mut out)?;
                            if check && out != pages[n] {
                                bad = Some(n);
                            }
                        }
                        Ok(bad)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a get thread"))
                .collect::<anyhow::Result<Vec<_>>>()
        })?;
        gets.push(started.elapsed().as_nanos() as u64);
        if let Some(n) = bad.into_iter().flatten().next() {
            bail!("page {n} came back different from the page put");
        }
    }
    let mb = (pages.len() * PAGE_SIZE) as f64 / 1e6;
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        percentile(v, 0.5) as f64 / 1e9
    };
    Ok(ThroughputRun {
        allocator: allocator.into(),
        chunk,
        codec: codec.name().into(),
        threads,
        pages: pages.len(),
        put_mbps: mb / median(&mut puts),
        get_mbps: mb / median(&mut gets),
    })
}

/// One allocator and chunk size.
#[derive(Serialize)]
pub struct StoreRun {
    /// Allocator name.
    pub allocator: String,
    /// Chunk size, bytes.
    pub chunk: usize,
    /// Pages loaded.
    pub pages: usize,
    /// Compressed bytes after loading (slots as requested).
    pub compressed_bytes: u64,
    /// Chunk bytes held after loading.
    pub mem_used: u64,
    /// mem_used / compressed - 1, in per cent.
    /// `None` when nothing was stored compressed (every page was the same
    /// byte repeated, kept in the mapping table alone).
    pub overhead_pct: Option<f64>,
    /// Same, counting allocator bookkeeping and the mapping table.
    pub overhead_with_metadata_pct: Option<f64>,
    /// Original bytes / (chunk bytes + bookkeeping), after loading.
    pub effective_ratio: f64,
    /// Fragmentation after loading, per cent.
    pub frag_loaded_pct: f64,
    /// Worst fragmentation seen during the churn, per cent.
    pub frag_churn_max_pct: f64,
    /// Fragmentation after the churn, per cent.
    pub frag_after_pct: f64,
    /// Compactions run.
    pub compactions: u64,
    /// Put time beyond the codec's, median, ns.
    pub put_ns_median: u64,
    /// Put time beyond the codec's, 99th percentile, ns.
    pub put_ns_p99: u64,
    /// Get time beyond the codec's, median, ns.
    pub get_ns_median: u64,
    /// Get time beyond the codec's, 99th percentile, ns.
    pub get_ns_p99: u64,
}

impl Row for StoreRun {
    fn headers() -> &'static [&'static str] {
        &[
            "allocator",
            "chunk",
            "pages",
            "overhead %",
            "+meta %",
            "eff. ratio",
            "frag load %",
            "frag churn max %",
            "frag after %",
            "put ns p50",
            "put ns p99",
            "get ns p50",
            "get ns p99",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.allocator.clone(),
            self.chunk.to_string(),
            self.pages.to_string(),
            self.overhead_pct.map_or("-".into(), |p| format!("{p:.2}")),
            self.overhead_with_metadata_pct
                .map_or("-".into(), |p| format!("{p:.2}")),
            format!("{:.3}", self.effective_ratio),
            format!("{:.2}", self.frag_loaded_pct),
            format!("{:.2}", self.frag_churn_max_pct),
            format!("{:.2}", self.frag_after_pct),
            self.put_ns_median.to_string(),
            self.put_ns_p99.to_string(),
            self.get_ns_median.to_string(),
            self.get_ns_p99.to_string(),
        ]
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0)
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn measure(allocator: &str, chunk: usize, codec: ccvm_codec::CodecId, pages: &[&[u8]]) -> anyhow::Result<StoreRun> {
    let config = StoreConfig {
        codec,
        allocator: allocator.into(),
        chunk_size: chunk,
        ..StoreConfig::default()
    };
    let store = Store::new(config)?;
    let mut put_ns = Vec::with_capacity(2 * pages.len());
    let mut get_ns = Vec::with_capacity(pages.len());
    let put = |n: u64, page: &[u8], put_ns: &mut Vec<u64>| -> anyhow::Result<()> {
        let t = quanta::Instant::now();
        let codec_time = store.put_measured(n, page)?;
        put_ns.push(t.elapsed().saturating_sub(codec_time).as_nanos() as u64);
        Ok(())
    };
    for (n, page) in pages.iter().enumerate() {
        put(n as u64, page, &mut Vec::new())?;
    }
    let loaded = store.stats();
    let mut out = vec![0u8; PAGE_SIZE];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut frag_max = loaded.fragmentation;
    for i in 0..pages.len() {
        let n = xorshift(&mut x) % pages.len() as u64;
        let t = quanta::Instant::now();
        let codec_time = store.get_measured(n, &mut out)?;
        get_ns.push(t.elapsed().saturating_sub(codec_time).as_nanos() as u64);
        store.remove(n);
        put(n, pages[xorshift(&mut x) as usize % pages.len()], &mut put_ns)?;
        if i % 256 == 0 {
            frag_max = frag_max.max(store.stats().fragmentation);
        }
    }
    let after = store.stats();
    put_ns.sort_unstable();
    get_ns.sort_unstable();
    let compressed = loaded.compr_data_size as f64;
    Ok(StoreRun {
        allocator: allocator.into(),
        chunk,
        pages: pages.len(),
        compressed_bytes: loaded.compr_data_size,
        mem_used: loaded.mem_used_total,
        overhead_pct: (compressed > 0.0).then(|| (loaded.mem_used_total as f64 / compressed - 1.0) * 100.0),
        overhead_with_metadata_pct: (compressed > 0.0)
            .then(|| (loaded.memory_used() as f64 / compressed - 1.0) * 100.0),
        effective_ratio: loaded.orig_data_size as f64 / loaded.memory_used() as f64,
        frag_loaded_pct: loaded.fragmentation * 100.0,
        frag_churn_max_pct: frag_max.max(after.fragmentation) * 100.0,
        frag_after_pct: after.fragmentation * 100.0,
        compactions: after.compactions,
        put_ns_median: percentile(&put_ns, 0.5),
        put_ns_p99: percentile(&put_ns, 0.99),
        get_ns_median: percentile(&get_ns, 0.5),
        get_ns_p99: percentile(&get_ns, 0.99),
    })
}

/// Runs the benchmark and prints one row per allocator and chunk size.
pub fn run(opts: &Options, format: Format) -> anyhow::Result<()> {
    if opts.threads.contains(&0) {
        bail!("--threads 0: give a number of threads of 1 or more");
    }
    let names: Vec<String> = if opts.allocators.is_empty() {
        ALLOCATORS.iter().map(|a| a.name.to_string()).collect()
    } else {
        opts.allocators.clone()
    };
    for n in &names {
        if !ALLOCATORS.iter().any(|a| a.name == n) {
            bail!(ccvm_store::alloc::by_name(n, 65536).err().unwrap_or_default());
        }
    }
    for &chunk in &opts.chunks {
        // Settings are checked before any work or output.
        let config = StoreConfig {
            codec: opts.codec,
            chunk_size: chunk,
            ..StoreConfig::default()
        };
        Store::new(config)?;
    }
    let dir = opts.corpus.clone().unwrap_or_else(ccvm_corpus::default_dir);
    let files = ccvm_corpus::load_dir(&dir)?;
    let corpus: Vec<&[u8]> = files.iter().flat_map(|f| f.pages()).collect();
    if corpus.is_empty() {
        bail!("corpus {} holds no pages: give a folder of page files", dir.display());
    }
    let pages: Vec<&[u8]> = match opts.pages {
        Some(0) => bail!("--pages 0: give a number of pages of 1 or more"),
        Some(n) => corpus.iter().copied().cycle().take(n).collect(),
        None => corpus,
    };
    if format == Format::Table && !opts.threads.is_empty() {
        eprintln!(
            "corpus {}: {} pages; codec {}; put all, then get all, {ROUNDS} rounds, medians; MB/s of original pages",
            dir.display(),
            pages.len(),
            opts.codec
        );
    } else if format == Format::Table {
        eprintln!(
            "corpus {}: {} pages; codec {}; load, then {} get+remove+put churn steps, timed beyond the codec; one thread",
            dir.display(),
            pages.len(),
            opts.codec,
            pages.len()
        );
    }
    if !opts.threads.is_empty() {
        let mut rows = Vec::new();
        for &chunk in &opts.chunks {
            for name in &names {
                for &threads in &opts.threads {
                    rows.push(
                        throughput(name, chunk, opts.codec, threads, &pages)
                            .with_context(|| format!("{name}, {chunk}-byte chunks, {threads} threads"))?,
                    );
                }
            }
        }
        return report::print(&rows, format);
    }
    let mut rows = Vec::new();
    for &chunk in &opts.chunks {
        for name in &names {
            rows.push(
                measure(name, chunk, opts.codec, &pages).with_context(|| format!("{name}, {chunk}-byte chunks"))?,
            );
        }
    }
    report::print(&rows, format)
}

/// The subcommand's arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Folder of page files (whole 4096-byte pages; .zst files are decompressed). Default: the bundled corpus.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Allocator to measure (repeatable). Default: all.
    #[arg(long = "allocator", value_name = "NAME")]
    allocators: Vec<String>,
    /// Codec the store compresses with.
    #[arg(long, default_value = "lz4")]
    codec: ccvm_codec::CodecId,
    /// Chunk size in bytes (repeatable): a power of two from 4096.
    #[arg(long = "chunk", value_name = "BYTES", default_values_t = [65536usize])]
    chunks: Vec<usize>,
    /// Measure put and get throughput (MB/s of original pages) with this many threads (repeatable) instead of
    /// the one-thread churn.
    #[arg(long = "threads", value_name = "N")]
    threads: Vec<usize>,
    /// Store this many pages: the corpus's pages in order, repeated as needed, each under its own page number
    /// (default: one per corpus page). For measuring the store at a scale the corpus does not reach.
    #[arg(long, value_name = "N")]
    pages: Option<usize>,
    #[command(flatten)]
    output: crate::args::OutputArgs,
}

/// Runs the subcommand with the arguments the command line gave.
pub(crate) fn run_args(args: Args) -> anyhow::Result<()> {
    let format = args.output.format();
    if let Some(pages) = args.pages {
        crate::args::check_simulated("--pages", (pages as u64).saturating_mul(4096), 0.5)?;
    }
    let opts = Options {
        corpus: args.corpus,
        allocators: args.allocators,
        codec: args.codec,
        chunks: args.chunks,
        threads: args.threads,
        pages: args.pages,
    };
    run(&opts, format)
}

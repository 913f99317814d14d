//! `ccvm pack`, `ccvm map` and `ccvm bench pack`: files stored page by page
//! compressed and loaded on demand (paper 004), and the measurement 004
//! made: the time to load pages of a compressed file against the same
//! file uncompressed.

mod cli;

pub(crate) use cli::{run_bench, run_map, run_pack, BenchArgs, MapArgs, PackArgs};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccvm_codec::PAGE_SIZE;
use ccvm_pack::{disk_bytes_read, drop_from_page_cache, pack_file, Mapping, Packed, PlainMapping, ReadOptions};
use clap::ValueEnum;
use serde::Serialize;

use crate::args::Format;
use crate::report::{self, Row};

/// Which pages a measurement touches, and in what order.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Every page, in order: loading a whole program or file.
    All,
    /// Runs of 1 to 8 pages at random places, in random order, until a
    /// fifth of the pages are touched: a program calling into scattered
    /// functions of a large binary, or a lookup in a data file.
    Sparse,
}

impl Pattern {
    /// The pages to touch, in order, for a file of `pages` pages.
    pub fn pages(self, pages: usize, seed: u64) -> Vec<usize> {
        match self {
            Pattern::All => (0..pages).collect(),
            Pattern::Sparse => {
                let mut rng = seed | 1;
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut seen = vec![false; pages];
                let mut order = Vec::new();
                let target = pages.div_ceil(5);
                while order.len() < target {
                    let start = next() as usize % pages;
                    let run = 1 + next() as usize % 8;
                    for p in (start..pages).take(run) {
                        if !seen[p] && order.len() < target {
                            seen[p] = true;
                            order.push(p);
                        }
                    }
                }
                order
            }
        }
    }
}

/// `ccvm pack`: packs `src` into `dst`.
pub fn pack(src: &Path, dst: &Path, codec: ccvm_codec::CodecId) -> anyhow::Result<()> {
    let mut c = codec.make();
    let started = Instant::now();
    let s = pack_file(src, dst, c.as_mut())?;
    outln!(
        "{}: {} bytes in {} pages -> {} bytes ({:.2}x): {} zero, {} raw, {} compressed with {codec}, in {:.0} ms",
        src.display(),
        s.file_len,
        s.zero + s.raw + s.compressed,
        s.packed_len,
        s.ratio(),
        s.zero,
        s.raw,
        s.compressed,
        started.elapsed().as_secs_f64() * 1e3
    )?;
    Ok(())
}

/// What `ccvm map` does with the mapping.
pub struct MapOptions {
    /// Read every page first, checking each.
    pub verify: bool,
    /// Write the file's bytes, read through the mapping, here (`-`: stdout).
    pub output: Option<PathBuf>,
    /// Otherwise touch pages in this pattern and report the time.
    pub touch: Pattern,
    /// How pages are read.
    pub read: ReadOptions,
    /// Most pages read at once.
    pub readahead: usize,
    /// Seed of the sparse pattern.
    pub seed: u64,
}

/// `ccvm map`.
pub fn map(path: &Path, o: &MapOptions, format: Format) -> anyhow::Result<()> {
    if o.verify {
        let mut p = Packed::open(path, o.read).map_err(|e| in_file(path, e))?;
        p.verify().map_err(|e| in_file(path, e))?;
        eprintln!("{}: all {} pages check", path.display(), p.pages());
    }
    let packed = Packed::open(path, o.read).map_err(|e| in_file(path, e))?;
    let codec = packed.codec().to_string();
    // Refused before any page is read; written whole or not at all.
    let output = match &o.output {
        Some(out) if out == Path::new("-") => Some(ccvm_output::OutputFile::create("/dev/stdout")?),
        Some(out) => Some(ccvm_output::OutputFile::create(out)?),
        None => None,
    };
    let mapping = Mapping::with_readahead(packed, o.readahead)?;
    if let Some(mut out) = output {
        // Through a buffer: a page that faults while the kernel copies
        // from the mapping would be loaded with the output's inode locked,
        // and a damaged page's fatal stop could not then remove the
        // staged file.
        let mut buf = vec![0u8; 1 << 20];
        for chunk in mapping.as_slice().chunks(buf.len()) {
            buf[..chunk.len()].copy_from_slice(chunk);
            out.write_all(&buf[..chunk.len()])
                .with_context(|| format!("writing {}", out.target().display()))?;
        }
        out.commit()?;
        return Ok(());
    }
    let pages = mapping.as_slice().len().div_ceil(PAGE_SIZE);
    let order = o.touch.pages(pages, o.seed);
    let started = Instant::now();
    let sum = touch(mapping.as_slice(), &order);
    let elapsed = started.elapsed();
    let s = mapping.finish();
    let row = LoadRow {
        file: path.display().to_string(),
        variant: format!("ccz {codec}"),
        pattern: o.touch,
        pages: order.len(),
        ms: elapsed.as_secs_f64() * 1e3,
        us_per_page: elapsed.as_secs_f64() * 1e6 / order.len().max(1) as f64,
        disk_kib: s.bytes_read / 1024,
        read_us_per_page: s.read_ns as f64 / 1e3 / s.pages.max(1) as f64,
        decode_us_per_page: s.decode_ns as f64 / 1e3 / s.pages.max(1) as f64,
        vs_copy: None,
    };
    std::hint::black_box(sum);
    report::print(&[row], format)
}

/// The error with the file's name in front, unless it names it already
/// (an I/O error does).
fn in_file(path: &Path, e: ccvm_pack::PackError) -> anyhow::Error {
    match e {
        ccvm_pack::PackError::Io(_) => anyhow::Error::new(e),
        other => anyhow::anyhow!("{}: {other}", path.display()),
    }
}

/// Reads one byte of each page in `order`: every touch is a first touch.
fn touch(bytes: &[u8], order: &[usize]) -> u64 {
    order.iter().map(|&p| bytes[p * PAGE_SIZE] as u64).sum()
}

/// One measured load.
#[derive(Serialize, Clone)]
pub struct LoadRow {
    file: String,
    variant: String,
    pattern: Pattern,
    pages: usize,
    ms: f64,
    us_per_page: f64,
    disk_kib: u64,
    read_us_per_page: f64,
    decode_us_per_page: f64,
    vs_copy: Option<f64>,
}

impl Row for LoadRow {
    fn headers() -> &'static [&'static str] {
        &[
            "file",
            "variant",
            "pattern",
            "pages",
            "ms",
            "us/page",
            "disk KiB",
            "read us",
            "decode us",
            "vs copy",
        ]
    }

    fn cells(&self) -> Vec<String> {
        vec![
            self.file.clone(),
            self.variant.clone(),
            format!("{:?}", self.pattern).to_lowercase(),
            self.pages.to_string(),
            format!("{:.1}", self.ms),
            format!("{:.1}", self.us_per_page),
            self.disk_kib.to_string(),
            format!("{:.1}", self.read_us_per_page),
            format!("{:.1}", self.decode_us_per_page),
            self.vs_copy.map(|r| format!("{r:.2}")).unwrap_or_else(|| "-".into()),
        ]
    }
}

/// What `ccvm bench pack` measures.
pub struct BenchOptions {
    /// The files.
    pub files: Vec<PathBuf>,
    /// Codecs of the packed variants, besides `copy` (uncompressed, the
    /// baseline loaded the same way).
    pub codecs: Vec<ccvm_codec::CodecId>,
    /// Patterns to measure.
    pub patterns: Vec<Pattern>,
    /// How packed pages are read.
    pub read: ReadOptions,
    /// Runs of each measurement; the median is reported.
    pub repeat: usize,
    /// Where the packed files are written (a disk, not tmpfs).
    pub dir: PathBuf,
    /// Most pages read at once.
    pub readahead: usize,
    /// Seed of the sparse pattern.
    pub seed: u64,
}

/// `ccvm bench pack`.
pub fn bench(o: &BenchOptions, format: Format) -> anyhow::Result<()> {
    if o.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let emulated = o.read.latency > Duration::ZERO || o.read.bandwidth > 0;
    let mut rows = Vec::new();
    for file in &o.files {
        let original = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        if original.is_empty() {
            bail!("{} is empty: give files with pages to load", file.display());
        }
        let pages = original.len().div_ceil(PAGE_SIZE);
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut variants: Vec<(String, Option<PathBuf>)> = Vec::new();
        if !emulated {
            variants.push(("mmap".into(), None));
        }
        let copy = ccvm_codec::CodecId::by_name("copy")?;
        for codec in std::iter::once(copy).chain(o.codecs.iter().copied()) {
            let dst = o
                .dir
                .join(format!("ccvm-bench-{}-{name}.{codec}.ccz", std::process::id()));
            let s = pack_file(file, &dst, codec.make().as_mut())?;
            variants.push((format!("ccz {codec} ({:.2}x)", s.ratio()), Some(dst)));
        }
        for &pattern in &o.patterns {
            let order = pattern.pages(pages, o.seed);
            let mut copy_ms = None;
            for (variant, packed) in &variants {
                let mut runs = Vec::new();
                for _ in 0..o.repeat {
                    runs.push(match packed {
                        None => load_mmap(file, &original, &order)?,
                        Some(p) => load_ccz(p, o.read, o.readahead, &original, &order)?,
                    });
                }
                runs.sort_by(|a, b| a.0.total_cmp(&b.0));
                let (ms, disk, read_us, decode_us) = runs[runs.len() / 2];
                if variant.starts_with("ccz copy") {
                    copy_ms = Some(ms);
                }
                rows.push(LoadRow {
                    file: name.clone(),
                    variant: variant.clone(),
                    pattern,
                    pages: order.len(),
                    ms,
                    us_per_page: ms * 1e3 / order.len() as f64,
                    disk_kib: disk / 1024,
                    read_us_per_page: read_us,
                    decode_us_per_page: decode_us,
                    vs_copy: copy_ms.filter(|_| packed.is_some()).map(|c| ms / c),
                });
            }
        }
        for (_, packed) in &variants {
            if let Some(p) = packed {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    report::print(&rows, format)
}

/// Drops `path`'s pages from the page cache, so the next read goes to
/// the disk.
fn evict(path: &Path) -> anyhow::Result<()> {
    drop_from_page_cache(path).with_context(|| format!("cannot drop {} from the page cache", path.display()))
}

/// Checks the touched pages of `bytes` against the original file.
fn check(bytes: &[u8], original: &[u8], order: &[usize], what: &str) -> anyhow::Result<()> {
    for &p in order {
        let range = p * PAGE_SIZE..((p + 1) * PAGE_SIZE).min(original.len());
        if bytes[range.clone()] != original[range] {
            bail!("{what}: page {p} differs from the original file");
        }
    }
    Ok(())
}

/// Times a cold load of `order`'s pages of `file` with plain `mmap`.
fn load_mmap(file: &Path, original: &[u8], order: &[usize]) -> anyhow::Result<(f64, u64, f64, f64)> {
    evict(file)?;
    let before = disk_bytes_read();
    let started = Instant::now();
    let mapping = PlainMapping::open(file).with_context(|| format!("mmap of {}", file.display()))?;
    std::hint::black_box(touch(mapping.as_slice(), order));
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let disk = disk_bytes_read() - before;
    check(mapping.as_slice(), original, order, "mmap")?;
    Ok((ms, disk, 0.0, 0.0))
}

/// Times a cold load of `order`'s pages of the packed file `packed`.
fn load_ccz(
    packed: &Path,
    read: ReadOptions,
    readahead: usize,
    original: &[u8],
    order: &[usize],
) -> anyhow::Result<(f64, u64, f64, f64)> {
    evict(packed)?;
    let before = disk_bytes_read();
    let started = Instant::now();
    let mapping = Mapping::with_readahead(Packed::open(packed, read)?, readahead)?;
    std::hint::black_box(touch(mapping.as_slice(), order));
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let disk = disk_bytes_read() - before;
    check(mapping.as_slice(), original, order, &packed.display().to_string())?;
    let s = mapping.finish();
    let per = |ns: u64| ns as f64 / 1e3 / s.pages.max(1) as f64;
    Ok((ms, disk, per(s.read_ns), per(s.decode_ns)))
}

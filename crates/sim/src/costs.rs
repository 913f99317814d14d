//! Compression traces: what each page image costs with a codec.

use std::path::Path;
use std::time::Instant;

use ccvm_codec::{CodecId, PAGE_SIZE};
use ccvm_trace::{Event, TraceReader};

use crate::SimError;

/// Per image of a trace: compressed size (4096 when it does not shrink,
/// as the store keeps it raw) and compress and decompress times.
#[derive(Debug, Clone)]
pub struct CodecCosts {
    /// Codec name.
    pub codec: String,
    /// Bytes per image.
    pub size: Vec<u32>,
    /// Compression nanoseconds per image.
    pub compress_ns: Vec<u32>,
    /// Decompression nanoseconds per image.
    pub decompress_ns: Vec<u32>,
}

/// Evicts the caches' contents between timed runs, so that each run
/// starts as a page fault does: with the page's data not in cache.
struct Disturber(Vec<u64>);

impl Disturber {
    fn run(&mut self) {
        for (i, w) in self.0.iter_mut().enumerate().step_by(8) {
            *w = w.wrapping_add(i as u64);
        }
    }
}

impl CodecCosts {
    /// Compresses every image of the trace at `path` with `codec`, timing
    /// each compression and decompression `runs` times (the median is
    /// kept) with the caches disturbed before each run (paper 000 §4.1),
    /// and checking every round trip.
    ///
    /// # Errors
    ///
    /// An unknown codec, a damaged trace, or a round trip that fails.
    pub fn measure(path: &Path, codec: CodecId, runs: usize) -> Result<CodecCosts, SimError> {
        Self::measure_with_progress(path, codec, runs, &mut || {})
    }

    /// As [`CodecCosts::measure`], calling `on_image` after each image (for
    /// a progress bar: a long trace takes minutes).
    ///
    /// # Errors
    ///
    /// As [`CodecCosts::measure`].
    pub fn measure_with_progress(
        path: &Path,
        codec: CodecId,
        runs: usize,
        on_image: &mut dyn FnMut(),
    ) -> Result<CodecCosts, SimError> {
        let mut c = codec.make();
        let mut r = TraceReader::open(path)?;
        let mut costs = CodecCosts {
            codec: codec.name().into(),
            size: Vec::new(),
            compress_ns: Vec::new(),
            decompress_ns: Vec::new(),
        };
        let mut out = vec![0u8; PAGE_SIZE];
        let mut back = vec![0u8; PAGE_SIZE];
        // 1 MiB: twice this machine's per-core L2.
        let mut disturb = Disturber(vec![0; 1 << 17]);
        let runs = runs.max(1);
        let (mut ct, mut dt) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        while let Some(e) = r.next_event()? {
            let Event::NewImage { bytes, .. } = e else {
                continue;
            };
            ct.clear();
            dt.clear();
            let mut size = PAGE_SIZE;
            for _ in 0..runs {
                disturb.run();
                let t = Instant::now();
                let n = c.compress(&bytes, &mut out[..ccvm_policy::HUGE_THRESHOLD]);
                ct.push(t.elapsed().as_nanos() as u32);
                if let Ok(n) = n {
                    size = n;
                    let t = Instant::now();
                    c.decompress(&out[..n], &mut back)
                        .map_err(|e| SimError::Config(format!("{codec} failed a round trip: {e}")))?;
                    dt.push(t.elapsed().as_nanos() as u32);
                    if back[..] != bytes[..] {
                        return Err(SimError::Config(format!("{codec} failed a round trip")));
                    }
                } else {
                    dt.push(0);
                }
            }
            ct.sort_unstable();
            dt.sort_unstable();
            costs.size.push(size as u32);
            costs.compress_ns.push(ct[runs / 2]);
            costs.decompress_ns.push(dt[runs / 2]);
            on_image();
        }
        Ok(costs)
    }
}

const MAGIC: &[u8; 8] = b"CCVMCOST";

/// The cache file's name for `codec`'s costs on the trace at `path`: the
/// trace's name for people, and a hash of its full path, so that traces
/// of one name in different folders never share costs.
fn cache_name(path: &Path, codec: &str) -> String {
    use std::hash::{Hash, Hasher};
    let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    full.hash(&mut h);
    let name = path
        .file_name()
        .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
    format!("{name}.{:016x}.{codec}.costs", h.finish())
}

/// Identifies the trace a cost file was measured on: its length and
/// modification time.
fn trace_id(path: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(path)?;
    let mtime = m
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Ok((m.len(), mtime))
}

impl CodecCosts {
    /// The costs of `codec` on the trace at `path`, which holds `images`
    /// page images, from `cache_dir` if measured before on this very file,
    /// else measured (see [`CodecCosts::measure`]) and saved there, so a
    /// sweep never compresses an image twice. A cache file is untrusted: one
    /// that was made for another file (the trace's full path, length and
    /// modification time are its key), counts other than `images` images or
    /// holds a size no page can have is measured anew, never believed.
    ///
    /// # Errors
    ///
    /// As [`CodecCosts::measure`], or an I/O error on the cache.
    pub fn cached(
        path: &Path,
        images: u32,
        codec: CodecId,
        runs: usize,
        cache_dir: &Path,
    ) -> Result<CodecCosts, SimError> {
        Self::cached_with_progress(path, images, codec, runs, cache_dir, &mut || {})
    }

    /// As [`CodecCosts::cached`], calling `on_image` after each image it
    /// measures (never when the cache answers).
    ///
    /// # Errors
    ///
    /// As [`CodecCosts::cached`].
    pub fn cached_with_progress(
        path: &Path,
        images: u32,
        codec: CodecId,
        runs: usize,
        cache_dir: &Path,
        on_image: &mut dyn FnMut(),
    ) -> Result<CodecCosts, SimError> {
        let io = |e: ccvm_output::OutputError| SimError::Config(format!("cost cache: {e}"));
        let (len, mtime) = trace_id(path).map_err(|e| SimError::Config(format!("{}: {e}", path.display())))?;
        let file = cache_dir.join(cache_name(path, codec.name()));
        if let Ok(bytes) = std::fs::read(&file) {
            if let Some(c) = Self::decode(&bytes, codec.name(), len, mtime).filter(|c| c.size.len() == images as usize)
            {
                return Ok(c);
            }
        }
        let costs = Self::measure_with_progress(path, codec, runs, on_image)?;
        if costs.size.len() != images as usize {
            return Err(SimError::Config(format!(
                "{}: changed while it was read ({} page images, then {})",
                path.display(),
                images,
                costs.size.len()
            )));
        }
        ccvm_output::OutputDir::create(cache_dir).map_err(io)?.keep();
        ccvm_output::write(&file, &costs.encode(len, mtime)).map_err(io)?;
        Ok(costs)
    }

    fn encode(&self, len: u64, mtime: u64) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + 12 * self.size.len());
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&mtime.to_le_bytes());
        b.extend_from_slice(&(self.size.len() as u64).to_le_bytes());
        for i in 0..self.size.len() {
            for v in [self.size[i], self.compress_ns[i], self.decompress_ns[i]] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    /// Reads a cost-cache file's bytes `b`, made for a trace of `len` bytes
    /// modified at `mtime` (ns since the epoch). `None` for anything else:
    /// another trace's file, a wrong count, a truncated body, a size no page
    /// can have. The bytes are untrusted: what they cost to read is bounded
    /// by their length.
    ///
    /// ```
    /// use ccvm_sim::CodecCosts;
    /// assert!(CodecCosts::decode(b"CCVMCOST", "lz4", 0, 0).is_none());
    /// let mut crafted = b"CCVMCOST".to_vec();
    /// crafted.extend([0u8; 16]);
    /// crafted.extend(u64::MAX.to_le_bytes()); // a count no file holds
    /// assert!(CodecCosts::decode(&crafted, "lz4", 0, 0).is_none());
    /// ```
    pub fn decode(b: &[u8], codec: &str, len: u64, mtime: u64) -> Option<CodecCosts> {
        let word = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        if b.get(..8)? != MAGIC || word(8)? != len || word(16)? != mtime {
            return None;
        }
        let n = usize::try_from(word(24)?).ok()?;
        let body = b.get(32..)?;
        if Some(body.len()) != n.checked_mul(12) {
            return None;
        }
        let mut c = CodecCosts {
            codec: codec.into(),
            size: Vec::with_capacity(n),
            compress_ns: Vec::with_capacity(n),
            decompress_ns: Vec::with_capacity(n),
        };
        for t in body.chunks_exact(12) {
            let v = |k: usize| u32::from_le_bytes(t[4 * k..4 * k + 4].try_into().expect("4 bytes"));
            c.size.push(v(0));
            c.compress_ns.push(v(1));
            c.decompress_ns.push(v(2));
        }
        c.size.iter().all(|&s| (1..=PAGE_SIZE as u32).contains(&s)).then_some(c)
    }
}

impl CodecCosts {
    /// The same cost for every one of `images` images: a compression
    /// ratio and compress and decompress times, for traces that carry no
    /// page contents (see [`crate::Trace::import_plain`]).
    ///
    /// ```
    /// let c = ccvm_sim::CodecCosts::uniform(3, 2.0, 20_000, 10_000);
    /// assert_eq!(c.size, [2048, 2048, 2048]);
    /// ```
    pub fn uniform(images: u32, ratio: f64, compress_ns: u32, decompress_ns: u32) -> CodecCosts {
        let size = ((PAGE_SIZE as f64 / ratio.max(1.0)).round() as u32).clamp(1, PAGE_SIZE as u32);
        let n = images as usize;
        CodecCosts {
            codec: format!("ratio{ratio}"),
            size: vec![size; n],
            compress_ns: vec![compress_ns; n],
            decompress_ns: vec![decompress_ns; n],
        }
    }

    /// The share of a round trip (compression plus decompression, summed
    /// over the images) that compression takes; 0.5 with no timings.
    ///
    /// ```
    /// let c = ccvm_sim::CodecCosts::uniform(3, 2.0, 30_000, 10_000);
    /// assert_eq!(c.compress_share(), 0.75);
    /// ```
    pub fn compress_share(&self) -> f64 {
        let compress: f64 = self.compress_ns.iter().map(|&t| f64::from(t)).sum();
        let decompress: f64 = self.decompress_ns.iter().map(|&t| f64::from(t)).sum();
        if compress + decompress > 0.0 {
            compress / (compress + decompress)
        } else {
            0.5
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace of `images` distinct page images at `path`.
    fn trace(path: &Path, images: u8) {
        let header = ccvm_trace::Header {
            workload: "t".into(),
            seed: 1,
            region_bytes: 64 * 4096,
            window_pages: 1,
        };
        let mut w = ccvm_trace::TraceWriter::create(path, &header).unwrap();
        for i in 0..images {
            w.reference(u64::from(i), true).unwrap();
            w.image(u64::from(i), &[i; 4096]).unwrap();
        }
        w.finish(1).unwrap();
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ccvm-costs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_cache_file_with_too_few_entries_is_measured_anew() {
        let dir = scratch("short");
        let path = dir.join("t.trace");
        trace(&path, 3);
        let cache = dir.join("costs");
        let full = CodecCosts::cached(&path, 3, "lz4".parse().unwrap(), 1, &cache).unwrap();
        assert_eq!(full.size.len(), 3);
        // The same identity, one entry: as a crafted or stale file would be.
        let (len, mtime) = trace_id(&path).unwrap();
        let mut one = full.clone();
        for v in [&mut one.size, &mut one.compress_ns, &mut one.decompress_ns] {
            v.truncate(1);
        }
        let file = cache.join(cache_name(&path, "lz4"));
        std::fs::write(&file, one.encode(len, mtime)).unwrap();
        let again = CodecCosts::cached(&path, 3, "lz4".parse().unwrap(), 1, &cache).unwrap();
        assert_eq!(again.size, full.size);
        // A count no file could hold is refused without allocating it.
        let mut crafted = one.encode(len, mtime);
        crafted[24..32].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
        assert!(CodecCosts::decode(&crafted, "lz4", len, mtime).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn traces_of_one_name_in_two_folders_have_two_cache_files() {
        let dir = scratch("names");
        let (a, b) = (dir.join("a/t.trace"), dir.join("b/t.trace"));
        std::fs::create_dir_all(a.parent().unwrap()).unwrap();
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        trace(&a, 2);
        trace(&b, 2);
        assert_ne!(cache_name(&a, "lz4"), cache_name(&b, "lz4"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

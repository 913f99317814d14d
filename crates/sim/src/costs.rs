//! Compression traces: what each page image costs with a codec.

use std::path::Path;
use std::time::Instant;

use ccvm_codec::PAGE_SIZE;
use ccvm_trace::{Event, TraceReader};

use crate::SimError;

/// Per image of a trace: compressed size (4096 when it does not shrink,
/// as the store keeps it raw) and compress and decompress times.
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
    pub fn measure(path: &Path, codec: &str, runs: usize) -> Result<CodecCosts, SimError> {
        let mut c = ccvm_codec::by_name(codec).map_err(SimError::Config)?;
        let mut r = TraceReader::open(path)?;
        let mut costs = CodecCosts {
            codec: codec.into(),
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
                let n = c.compress(&bytes, &mut out[..PAGE_SIZE * 3 / 4]);
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
        }
        Ok(costs)
    }
}

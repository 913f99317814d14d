//! Sweeps: every memory size × policy × codec × disk cost of a trace, the
//! plain LRU baseline from one stack-distance pass, and the interesting
//! region of memory sizes.

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::{Budget, Costs, Params, PolicySpec};
use serde::{Deserialize, Serialize};

use crate::{lru_faults, simulate, CodecCosts, SimConfig, Trace};

/// One configuration's outcome: a row of `sweep.json` and `sweep.csv`,
/// read back by `ccvm sim report` (fields added since the first sweeps
/// default when absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// Trace name.
    pub trace: String,
    /// Policy.
    pub policy: String,
    /// Codec of the cache.
    pub codec: String,
    /// Disk cost per page read, milliseconds.
    pub disk_ms: f64,
    /// How many times slower the simulated CPU is than the one that timed
    /// the codecs and ran the program.
    #[serde(default = "one")]
    pub cpu_factor: f64,
    /// Memory size, pages.
    pub memory_pages: usize,
    /// The program's own run time on the simulated CPU, seconds (paging
    /// excluded).
    #[serde(default)]
    pub run_s: f64,
    /// Whether the size is in the trace's interesting region.
    pub interesting: bool,
    /// Cache hits.
    #[serde(default)]
    pub cache_hits: u64,
    /// Disk faults.
    #[serde(default)]
    pub disk_faults: u64,
    /// Compressions.
    #[serde(default)]
    pub compressions: u64,
    /// Decompressions.
    #[serde(default)]
    pub decompressions: u64,
    /// Paging time, seconds.
    pub paging_s: f64,
    /// Plain LRU's paging time at this size and disk cost, seconds.
    pub lru_paging_s: f64,
    /// paging_s / lru_paging_s; `None` when LRU does not page at this size.
    pub normalized: Option<f64>,
}

fn one() -> f64 {
    1.0
}

/// The interesting region of memory sizes for a program (paper 000 §4),
/// which depends on the disk cost:
/// from the smallest size at which it spends at most 90% of its time
/// paging under LRU (paging ≤ 9 × its own run time) to the smallest at
/// which paging takes at most 5% of its run time, both with the given
/// disk cost; `None` when no size pages that little.
///
/// `disk_faults[m]` is LRU's disk faults at m pages.
pub fn interesting_region(disk_faults: &[u64], disk_ns: f64, run_time_ns: f64) -> Option<(usize, usize)> {
    let paging = |m: usize| disk_faults[m] as f64 * disk_ns;
    let lo = (1..disk_faults.len()).find(|&m| paging(m) <= 9.0 * run_time_ns)?;
    let hi = (lo..disk_faults.len()).find(|&m| paging(m) <= 0.05 * run_time_ns)?;
    Some((lo, hi.max(lo)))
}

/// LRU's disk faults at every size from 0 to the footprint: stack-pass
/// misses less first touches (zero-filled, not read from disk).
pub fn lru_disk_faults(trace: &Trace) -> Vec<u64> {
    let footprint = {
        let mut seen = vec![false; trace.pages().max(1)];
        let mut n = 0;
        for &p in &trace.refs {
            if let Some(s) = seen.get_mut(p as usize) {
                n += !*s as usize;
                *s = true;
            }
        }
        n
    };
    let faults = lru_faults(&trace.refs, trace.pages(), footprint + 1);
    faults.iter().map(|&f| f - footprint as u64).collect()
}

/// Plain LRU's paging time at `pages` pages, nanoseconds: its disk reads,
/// and, when writes are charged, one write per eviction (every page that
/// enters memory once memory is full; all counted as written, as the
/// simulated policies' are).
pub fn lru_paging_ns(lru: &[u64], pages: usize, read_ns: f64, write_ns: f64) -> f64 {
    let footprint = lru.len() - 1;
    let faults = lru[pages.min(footprint)];
    let evictions = (faults + footprint as u64).saturating_sub(pages as u64);
    faults as f64 * read_ns + evictions as f64 * write_ns
}

/// Memory sizes for a sweep: `count` sizes spaced evenly on a log scale
/// from `lo` to `hi` pages (distinct, ascending).
pub fn log_sizes(lo: usize, hi: usize, count: usize) -> Vec<usize> {
    let (lo, hi) = (lo.max(2) as f64, hi.max(lo + 1) as f64);
    let mut v: Vec<usize> = (0..count)
        .map(|i| (lo * (hi / lo).powf(i as f64 / (count.max(2) - 1) as f64)).round() as usize)
        .collect();
    v.dedup();
    v
}

/// One configuration of a sweep: a trace at a memory size, with a codec's
/// costs and a policy.
pub struct PointSpec<'a> {
    /// The trace's name in the row.
    pub name: &'a str,
    /// The trace.
    pub trace: &'a Trace,
    /// The codec's costs over its images.
    pub costs: &'a CodecCosts,
    /// LRU's disk faults at every size ([`lru_disk_faults`]).
    pub lru: &'a [u64],
    /// The program's own run time on the simulated CPU, ns.
    pub run_time_ns: f64,
    /// The policy.
    pub policy: &'a PolicySpec,
    /// Memory, pages.
    pub pages: usize,
    /// What the adaptive policies take a cache hit to cost, ns.
    pub cache_cost_ns: f64,
}

/// Simulates one configuration under `config` and compares it with LRU.
pub fn run_point(spec: &PointSpec<'_>, config: &SimConfig) -> SweepRow {
    let PointSpec {
        name,
        trace,
        costs,
        lru,
        run_time_ns,
        policy,
        pages,
        cache_cost_ns,
    } = *spec;
    let budget = Budget {
        ram_bytes: (pages * PAGE_SIZE) as u64,
        page_size: PAGE_SIZE as u64,
    };
    let params = Params {
        uncompressed_share: 0.5,
        costs: Costs {
            disk_ns: config.disk_read_ns,
            codec_ns: cache_cost_ns,
            compress_share: costs.compress_share(),
        },
    };
    let region = interesting_region(lru, config.disk_read_ns, run_time_ns);
    let mut p = policy.make(budget, params);
    let r = simulate(trace, costs, p.as_mut(), config);
    let lru_s = lru_paging_ns(lru, pages, config.disk_read_ns, config.disk_write_ns) / 1e9;
    let paging_s = r.paging_ns / 1e9;
    SweepRow {
        trace: name.into(),
        policy: policy.to_string(),
        codec: costs.codec.clone(),
        disk_ms: config.disk_read_ns / 1e6,
        cpu_factor: config.cpu_factor,
        memory_pages: pages,
        run_s: run_time_ns / 1e9,
        interesting: region.is_some_and(|(lo, hi)| (lo..=hi).contains(&pages)),
        cache_hits: r.cache_hits,
        disk_faults: r.disk_faults,
        compressions: r.compressions,
        decompressions: r.decompressions,
        paging_s,
        lru_paging_s: lru_s,
        normalized: (lru_s > 0.0).then(|| paging_s / lru_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interesting_region_follows_the_definition() {
        // Faults fall from 1000 at size 0 to 0 at size 10.
        let faults: Vec<u64> = (0..=10).map(|m| 1000 - 100 * m).collect();
        // Run time 100 ns, disk 1 ns: 90% paging at <= 900 faults (m = 1);
        // 5% at <= 5 faults (m = 10).
        assert_eq!(interesting_region(&faults, 1.0, 100.0), Some((1, 10)));
        assert_eq!(log_sizes(10, 1000, 3), [10, 100, 1000]);
    }

    #[test]
    fn lru_writes_every_page_that_enters_a_full_memory() {
        // Footprint 3; at 1 page, 4 disk faults: 7 pages entered, 6 evicted.
        let lru = [9, 4, 1, 0];
        assert_eq!(lru_paging_ns(&lru, 1, 10.0, 0.0), 40.0);
        assert_eq!(lru_paging_ns(&lru, 1, 10.0, 1.0), 46.0);
        // At the footprint nothing is evicted.
        assert_eq!(lru_paging_ns(&lru, 3, 10.0, 1.0), 0.0);
    }
}

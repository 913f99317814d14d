//! What a region reports.

use serde::{Deserialize, Serialize};

use crate::swap::SwapStats;

/// Fault service times of one kind, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Faults measured.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// A region's counters. Fault service time runs from reading the fault
/// event to the page being mapped (the faulting thread wakes then), and
/// includes any added disk latency; it leaves out the evictions that
/// follow, which run while the thread proceeds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RuntimeStats {
    /// First writes (or first touches, where reads are not mapped as the
    /// zero page), served with zeros.
    pub faults_zero: u64,
    /// Reads of never-written pages, served with the kernel's zero page,
    /// write-protected: they hold no memory until their first write, which
    /// counts in `faults_zero`.
    #[serde(default)]
    pub faults_zero_read: u64,
    /// Faults served from the compression cache.
    pub faults_cache: u64,
    /// Faults served from the swap file.
    pub faults_disk: u64,
    /// Touches of trapped pages (uncompressed, unmapped so that the policy
    /// sees their references): served by mapping them back.
    pub faults_trap: u64,
    /// Touches of watched pages (unmapped so that `adaptive-safe` sees
    /// whether running uncompressed would have faulted on them; see
    /// `ccvm_policy::NoneSample`): served by mapping them back.
    #[serde(default)]
    pub faults_watch: u64,
    /// Fault events for pages already mapped (another thread's fault on
    /// the same page, served once) and write-protect faults raised during
    /// an eviction.
    pub faults_repeat: u64,
    /// Victims the policy chose that a system call was using (pinned by
    /// the guard, see `ccvm_runtime::guard`): left mapped, and told to the
    /// policy as touched again at once.
    #[serde(default)]
    pub evictions_pinned: u64,
    /// Pages the program dropped (`MADV_DONTNEED`, `MADV_FREE`): their
    /// copies in the cache or on disk were replaced by zeros.
    #[serde(default)]
    pub pages_discarded: u64,
    /// System calls the guard intercepted (SIGBUS mode under `ccvm exec`).
    #[serde(default)]
    pub guarded_calls: u64,
    /// Of those, calls that passed region memory to the kernel, whose
    /// pages were faulted in and pinned first.
    #[serde(default)]
    pub guarded_calls_with_buffers: u64,
    /// Pages of such calls touched before the call (each a fault where it
    /// was not resident).
    #[serde(default)]
    pub guard_pages_touched: u64,
    /// Calls whose buffers could not be pinned (the pin table was full):
    /// faulted in only.
    #[serde(default)]
    pub pins_refused: u64,
    /// Faults on evicted pages still waiting for the compressor thread
    /// (compressed by the faulting thread, then served from the cache).
    pub faults_pending: u64,
    /// Pages read ahead from the cache: decompressed and mapped after a
    /// cache fault before they were touched.
    pub pages_read_ahead: u64,
    /// Pages read ahead from the swap file: read with the faulting page's
    /// neighbours in one request, and mapped before they were touched.
    pub pages_read_ahead_disk: u64,
    /// Never-touched pages mapped as zeros ahead of a run of first touches.
    pub pages_zero_ahead: u64,
    /// Pages compressed into the cache.
    pub pages_compressed: u64,
    /// Of those, pages the compressor thread compressed.
    pub pages_compressed_background: u64,
    /// Evicted pages handed to the helper in their frames, which it reads
    /// itself: the faulting thread copied none of them.
    #[serde(default)]
    pub pages_read_by_helper: u64,
    /// Pages mapped in by copying (`UFFDIO_COPY`) rather than by moving a
    /// frame, because the process ran other threads, whose CPUs a move
    /// would interrupt to flush their TLBs.
    #[serde(default)]
    pub pages_copied_in: u64,
    /// Evicted (or watched) pages that left the region in batches, one
    /// TLB flush for each batch, because the process ran other threads
    /// (see `eviction_batches`).
    #[serde(default)]
    pub pages_evicted_together: u64,
    /// Batches those pages left in.
    #[serde(default)]
    pub eviction_batches: u64,
    /// Pages decompressed (from the cache or from disk).
    pub pages_decompressed: u64,
    /// Pages written to disk uncompressed (compression off, or too large
    /// for the cache).
    pub pages_swapped_raw: u64,
    /// Pages moved from the cache to disk, still compressed.
    pub pages_spilled: u64,
    /// Bytes of the pages compressed (4096 each).
    pub bytes_in: u64,
    /// Bytes they compressed to (same-filled pages count 0).
    pub bytes_out: u64,
    /// Swap file I/O.
    pub swap: SwapStats,
    /// The compression cache's counters.
    pub store: ccvm_store::Stats,
    /// Service time of faults served from the cache.
    pub latency_cache: Latency,
    /// Service time of faults served from disk.
    pub latency_disk: Latency,
    /// Service time of first touches.
    pub latency_zero: Latency,
    /// Service time of touches of trapped pages.
    pub latency_trap: Latency,
    /// Pages trapped at the end.
    pub pages_trapped: usize,
    /// Pages unmapped to be watched (`ccvm_policy::Action::Watch`).
    #[serde(default)]
    pub pages_watched: u64,
    /// Watched pages whose copy was compressed to tell the policy their
    /// size (see `RuntimeConfig::fault_mode`: signal mode, untraced).
    #[serde(default)]
    pub pages_measured: u64,
    /// Scans of the page tables for pages written lately (see
    /// `RuntimeConfig::write_scan`).
    #[serde(default)]
    pub write_scans: u64,
    /// Resident pages those scans found written, each a touch for the
    /// policy.
    #[serde(default)]
    pub pages_seen_written: u64,
    /// Pages evicted and still waiting for the helper process at the end
    /// (not yet in `pages_compressed`).
    pub pages_pending: usize,
    /// Most uncompressed pages allowed.
    pub uncompressed_pages: usize,
    /// Most bytes the compression cache may use.
    pub cache_budget: u64,
    /// Most of ccvm's own memory charged to the RAM budget at once
    /// (tables, spare frames, the helper; see `accounting`), bytes.
    pub overhead_bytes: u64,
    /// Most processes sharing the RAM budget at once, as this process saw
    /// its tree (see the `tree` module); 0 or 1 for a lone process.
    #[serde(default)]
    pub tree_processes: u64,
    /// Most the whole tree was charged at once, as its members read it,
    /// bytes (pages two processes map are counted in each).
    #[serde(default)]
    pub tree_peak_bytes: u64,
    /// Least this process was allowed to hold of the shared budget, bytes
    /// (0 for a lone process, which holds the whole budget).
    #[serde(default)]
    pub allowance_least_bytes: u64,
}

impl RuntimeStats {
    /// Original bytes / compressed bytes of the pages compressed so far.
    pub fn compression_ratio(&self) -> f64 {
        self.bytes_in as f64 / self.bytes_out.max(1) as f64
    }
}

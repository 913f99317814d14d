//! What the pager tells whoever watches it. The fault path and the
//! evictor report each thing that happens as an [`Event`] and do not know
//! who listens; two [`Observer`]s do:
//!
//! * [`Statistics`]: the counters and latency histograms a region reports
//!   ([`RuntimeStats`]);
//! * [`Tracing`]: the reference trace that a replay simulates, with the
//!   image of every evicted page.
//!
//! # Choices
//!
//! * The observers are a closed set held in [`Observers`], not a list of
//!   trait objects: the pager reads the statistics back when it publishes
//!   them and hands the trace writer back to be finished, and the fault
//!   path pays for no indirect call.
//! * What feeds the policy (the service times of `costs`, the policy's own
//!   calls) is not an observer: it changes what the pager does, and an
//!   observer never does.

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::Level;
use ccvm_trace::TraceWriter;
use hdrhistogram::Histogram;

use super::fatal;
use crate::stats::{Latency, RuntimeStats};

/// How a fault that mapped a page was served.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Service {
    /// A first touch, served with zeros (or a first write to the zero page).
    Zero,
    /// Decompressed from the compression cache.
    Cache,
    /// Read from the swap file.
    Disk,
    /// A trapped page's frame mapped back.
    Trap,
    /// A watched page's frame mapped back.
    Watch,
}

impl Service {
    /// The level the page came from, as the policy names it.
    pub(super) fn level(self) -> Level {
        match self {
            Service::Zero => Level::New,
            Service::Cache => Level::Compressed,
            Service::Disk => Level::Disk,
            Service::Trap | Service::Watch => Level::Uncompressed,
        }
    }
}

/// One thing that happened in the pager.
#[derive(Clone, Copy)]
pub(super) enum Event<'a> {
    /// A fault on `page` (a write if `write`) served as `service` in `ns`
    /// nanoseconds: a reference.
    Served {
        /// The faulting page.
        page: u64,
        /// Whether the access was a write.
        write: bool,
        /// How it was served.
        service: Service,
        /// Service time.
        ns: u64,
    },
    /// A read of a never-written page, mapped as the zero page.
    ZeroRead,
    /// A fault on a page already mapped (another thread's, or a
    /// write-protect fault during an eviction).
    Repeat,
    /// A fault on a page waiting in the helper's ring.
    Pending,
    /// A page read ahead from `Level` after a fault.
    ReadAhead(Level),
    /// Page `page` left memory holding `bytes`.
    Evicted {
        /// The page.
        page: u64,
        /// Its bytes as it left.
        bytes: &'a [u8],
    },
    /// An evicted page kept in `len` bytes in the cache, compressed by the
    /// helper process if `background`.
    Compressed {
        /// Bytes it takes in the store.
        len: usize,
        /// Whether the helper compressed it.
        background: bool,
    },
    /// An evicted page handed to the helper in its frame.
    HandedFrame,
    /// A page about to be mapped in by copying, because the process runs
    /// other threads (see `crate::threads`).
    CopiedIn,
    /// This many evicted pages left the region together, with one TLB
    /// flush (see `together`).
    EvictedTogether(u64),
    /// An evicted page written to the swap file uncompressed.
    SwappedRaw,
    /// A compressed page moved from the cache to the swap file.
    Spilled,
    /// A resident page's frame parked to watch its next touch.
    Watched,
    /// A copy of a watched page compressed to tell the policy its size.
    Measured,
    /// A victim left mapped because a system call uses it.
    Pinned,
    /// Pages decompressed.
    Decompressed(u64),
    /// The program dropped `pages` pages from `page` on.
    Discarded {
        /// The first.
        page: u64,
        /// How many.
        pages: u64,
    },
    /// ccvm's own memory charged to the budget, measured now.
    Overhead(u64),
    /// The process tree as this process last read it: its processes, its
    /// charge, and what this process may hold.
    Tree {
        /// Most processes in the tree at once.
        processes: u64,
        /// Most the tree was charged at once, bytes.
        peak_bytes: u64,
        /// This process's allowance now, bytes.
        allowance: u64,
    },
}

/// Whoever watches the pager: told every [`Event`], changes nothing the
/// pager does.
pub(super) trait Observer {
    /// Takes note of `event`.
    fn observe(&mut self, event: &Event<'_>);
}

/// Histograms of service times, nanoseconds.
struct Timers {
    cache: Histogram<u64>,
    disk: Histogram<u64>,
    zero: Histogram<u64>,
    trap: Histogram<u64>,
}

impl Timers {
    fn new() -> Self {
        let h = || Histogram::new_with_bounds(1, 60_000_000_000, 2).expect("valid bounds");
        Timers {
            cache: h(),
            disk: h(),
            zero: h(),
            trap: h(),
        }
    }

    fn summary(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            count: h.len(),
            p50_us: h.value_at_quantile(0.5) as f64 / 1000.0,
            p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
        }
    }
}

/// The counters and latency histograms of a region.
pub(super) struct Statistics {
    stats: RuntimeStats,
    timers: Timers,
}

impl Statistics {
    /// Counters from zero, for a policy that keeps at most
    /// `uncompressed_pages` uncompressed and `cache_budget` bytes in the
    /// cache.
    pub(super) fn new(uncompressed_pages: usize, cache_budget: u64) -> Statistics {
        Statistics {
            stats: RuntimeStats {
                uncompressed_pages,
                cache_budget,
                ..RuntimeStats::default()
            },
            timers: Timers::new(),
        }
    }

    /// The counters with the latency summaries filled in.
    pub(super) fn snapshot(&self) -> RuntimeStats {
        let mut s = self.stats.clone();
        s.latency_cache = Timers::summary(&self.timers.cache);
        s.latency_disk = Timers::summary(&self.timers.disk);
        s.latency_zero = Timers::summary(&self.timers.zero);
        s.latency_trap = Timers::summary(&self.timers.trap);
        s
    }

    /// The least allowance is this process's own from here on (a forked
    /// child's share starts anew).
    pub(super) fn forget_allowance(&mut self) {
        self.stats.allowance_least_bytes = 0;
    }

    fn served(&mut self, service: Service, ns: u64) {
        let s = &mut self.stats;
        let (count, timer) = match service {
            Service::Zero => (&mut s.faults_zero, &mut self.timers.zero),
            Service::Cache => (&mut s.faults_cache, &mut self.timers.cache),
            Service::Disk => (&mut s.faults_disk, &mut self.timers.disk),
            Service::Trap => (&mut s.faults_trap, &mut self.timers.trap),
            Service::Watch => (&mut s.faults_watch, &mut self.timers.trap),
        };
        *count += 1;
        timer.saturating_record(ns.max(1));
    }

    fn tree(&mut self, processes: u64, peak_bytes: u64, allowance: u64) {
        let s = &mut self.stats;
        s.tree_processes = s.tree_processes.max(processes);
        s.tree_peak_bytes = s.tree_peak_bytes.max(peak_bytes);
        s.allowance_least_bytes = match s.allowance_least_bytes {
            0 => allowance,
            least => least.min(allowance),
        };
    }
}

impl Observer for Statistics {
    fn observe(&mut self, event: &Event<'_>) {
        let s = &mut self.stats;
        match *event {
            Event::Served { service, ns, .. } => self.served(service, ns),
            Event::ZeroRead => s.faults_zero_read += 1,
            Event::Repeat => s.faults_repeat += 1,
            Event::Pending => s.faults_pending += 1,
            Event::ReadAhead(Level::Disk) => s.pages_read_ahead_disk += 1,
            Event::ReadAhead(Level::New) => s.pages_zero_ahead += 1,
            Event::ReadAhead(_) => s.pages_read_ahead += 1,
            Event::Evicted { .. } => {}
            Event::Compressed { len, background } => {
                s.pages_compressed += 1;
                s.pages_compressed_background += u64::from(background);
                s.bytes_in += PAGE_SIZE as u64;
                s.bytes_out += len as u64;
            }
            Event::HandedFrame => s.pages_read_by_helper += 1,
            Event::CopiedIn => s.pages_copied_in += 1,
            Event::EvictedTogether(n) => {
                s.pages_evicted_together += n;
                s.eviction_batches += 1;
            }
            Event::SwappedRaw => s.pages_swapped_raw += 1,
            Event::Spilled => s.pages_spilled += 1,
            Event::Watched => s.pages_watched += 1,
            Event::Measured => s.pages_measured += 1,
            Event::Pinned => s.evictions_pinned += 1,
            Event::Decompressed(n) => s.pages_decompressed += n,
            Event::Discarded { pages, .. } => s.pages_discarded += pages,
            Event::Overhead(bytes) => s.overhead_bytes = s.overhead_bytes.max(bytes),
            Event::Tree {
                processes,
                peak_bytes,
                allowance,
            } => self.tree(processes, peak_bytes, allowance),
        }
    }
}

/// The reference trace: each served fault a reference, each evicted page's
/// image kept, so that a replay compressing the page later compresses what
/// it held.
pub(super) struct Tracing(pub(super) TraceWriter);

impl Observer for Tracing {
    fn observe(&mut self, event: &Event<'_>) {
        let written = match *event {
            Event::Served { page, write, .. } => self.0.reference(page, write),
            Event::Evicted { page, bytes } => self.0.image(page, bytes),
            Event::Discarded { page, pages } => self.0.discard(page, pages),
            _ => return,
        };
        if let Err(e) = written {
            fatal(format!("writing the trace: {e}"));
        }
    }
}

/// The pager's observers: its statistics always, its trace when traced.
pub(super) struct Observers {
    /// The counters.
    pub(super) statistics: Statistics,
    /// The trace, if the region is traced and its trace not yet finished.
    pub(super) tracing: Option<Tracing>,
}

impl Observers {
    /// Tells every observer of `event`.
    pub(super) fn observe(&mut self, event: Event<'_>) {
        self.statistics.observe(&event);
        if let Some(t) = &mut self.tracing {
            t.observe(&event);
        }
    }
}

//! The fault handler: serves every fault of a region and carries out the
//! policy's evictions, on the faulting thread itself (SIGBUS mode, the
//! default; see the `signal` module) or on a handler thread (event mode).
//!
//! # Choices
//!
//! * One pager per region, behind a mutex: faults are served one at a
//!   time. Two threads faulting on one page both come here; the first maps
//!   it, the second finds it resident and returns (in event mode it only
//!   wakes).
//! * Evicting a page write-protects it (userfaultfd WP), copies it, then
//!   drops it (`MADV_DONTNEED`), all under the pager lock. A thread writing
//!   to it meanwhile takes a write-protect fault and waits for the lock;
//!   by then the page is missing and is served from the cache. So a write
//!   is never lost between the copy and the drop, and readers never block.
//! * Evictions run after the page is mapped, so fault service time leaves
//!   them out. In event mode the faulting thread runs meanwhile; in SIGBUS
//!   mode it does them itself before retrying its access.
//! * A read of a never-touched page that continues no run of faults maps
//!   the kernel's shared zero page, write-protected (state `Zero`), as the
//!   kernel itself does for anonymous memory: a program that reads more
//!   than it writes (an open-addressing table probing empty slots, a sparse
//!   array) holds no memory for those pages, and they are not in the
//!   policy's recency order, since there is nothing to evict. A read that
//!   continues a run is taken for a scan that will write what it reads
//!   (`a[i] += x` over fresh memory): it gets writable zeros and read-ahead,
//!   as a first write does, instead of a second fault per page. A `Zero`
//!   page's first write takes a write-protect fault, counted as the
//!   page's first touch; lifting the protection lets the kernel
//!   replace the zero page on the retried write. A thread that writes
//!   between the two ioctls that map and protect the zero page gets its own
//!   page uncounted until its next write faults; nothing is lost, since a
//!   `Zero` page is never evicted. Off while tracing, so that a trace holds
//!   every first touch as a reference, as the simulator counts them.
//! * A failure the program cannot be told of (a swap I/O error, a page
//!   that fails its checksum or does not decode) stops the process with a
//!   one-line message and exit status 3: no data can be given to the
//!   faulting thread that is not the page's.

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use ccvm_codec::{Codec, PAGE_SIZE};
use ccvm_policy::{Action, Policy};
use ccvm_store::{Store, StoreError};
use ccvm_trace::TraceWriter;

use crate::aligned::AlignedBuf;
use crate::compressor::{Finished, Helper, TakenBack};
use crate::frames::Frames;
use crate::protections::Protections;
use crate::readahead::Streams;
use crate::stats::RuntimeStats;
use crate::swap::{SwapFile, SwapSlot};
use crate::uffd::Uffd;
use crate::written::WriteScan;
use ccvm_policy::Traps;

pub(crate) mod costs;
mod disk;
mod evict;
mod fork;
mod lock;
mod map;
mod measure;
mod observe;
mod overhead;
mod room;
mod serve;
mod share;
mod table;
mod together;

pub(crate) use lock::{lock, lock_for_fault, Locked};

pub(crate) use share::start_trimmer;
pub use share::{allocating_for_ccvm, on_tree_tick, SNAPSHOT_PERIOD};

use observe::{Event, Observers, Statistics, Tracing};
use overhead::Overhead;
use table::{PageState, PageTable};

/// Where a page's bytes are while it is rebuilt or evicted.
#[derive(Clone, Copy)]
enum Target {
    /// The pager's own buffer (`Pager::page`).
    Buffer,
    /// The frame in a page's shadow slot (see the `frames` module).
    Frame(usize),
}

/// Exit status when paging cannot go on safely.
pub const FATAL_EXIT: i32 = 3;

pub(crate) struct Pager {
    /// What it was made of: the region and the levels that hold its pages.
    pub parts: PagerParts,
    snapshot: RuntimeStats,
    /// Where every page is.
    pages: PageTable,
    /// ccvm's own memory charged to the budget (see `overhead`).
    overhead: Overhead,
    actions: Vec<Action>,
    /// Pages the swap file's cleaner moved, with their new slots.
    moved: Vec<(u64, SwapSlot)>,
    /// The buffer pages are rebuilt in when no spare frame is at hand.
    page: AlignedBuf,
    /// A buffer for an evicted page copied out of the region, kept between
    /// evictions (see `evict::Evicted`).
    copies: Option<AlignedBuf>,
    /// Frames the helper is done with, between a collection and their
    /// release (kept to spare an allocation a fault).
    freed: Vec<crate::frames::Parked>,
    payload: AlignedBuf,
    /// The region's shadow, for `UFFDIO_MOVE`, when the kernel has it.
    frames: Option<Frames>,
    /// Whether the process runs other threads (see `crate::threads`).
    threads: crate::threads::ThreadWatch,
    /// Which resident pages are trapped (with a shadow only).
    traps: Option<Traps>,
    /// Pages to trap, reused.
    to_trap: Vec<u64>,
    /// Slots of a window read ahead from disk, reused.
    ahead: Vec<SwapSlot>,
    /// Pinned victims kept since the last fault: past the resident count,
    /// every resident page is pinned and evictions go ahead regardless.
    pinned_streak: usize,
    /// The helper process that compresses evicted pages, if any.
    helper: Option<Helper>,
    /// Runs of cache faults and first touches, for read-ahead.
    streams: Streams,
    /// Reads of untouched pages map the zero page (see the module docs).
    zero_reads: bool,
    /// Which resident pages were written lately (see the `written` module).
    write_scan: Option<WriteScan>,
    /// Pages the program made other than read-write (see `protections`).
    pub(crate) protections: Protections,
    /// Service times told to the policy (see the `costs` module).
    costs: Option<costs::CostMeter>,
    /// The budget this process shares with its process tree, and what it
    /// may hold of it now (see `share`).
    share: share::Share,
    /// Who is told what happens: statistics and tracing (see `observe`).
    observers: Observers,
    /// Evictions deferred to leave together (see `together`).
    together: together::Together,
    /// Where watched pages are measured for the policy (see `measure`).
    scratch: Option<measure::Scratch>,
}

/// Stops the process: see the module docs. `_exit`, not `exit`: this may
/// run in a signal handler, where atexit handlers and stdio locks are not
/// safe to enter.
fn fatal(what: impl std::fmt::Display) -> ! {
    eprintln!("ccvm: {what}; stopping");
    // Outputs being written are not left half-staged (signal-safe).
    ccvm_output::remove_staged();
    // SAFETY: _exit ends the process at once; nothing runs after it.
    unsafe { libc::_exit(FATAL_EXIT) }
}

/// What a pager is made of: the region it serves and the parts that hold
/// its pages.
pub struct PagerParts {
    /// The region's userfaultfd.
    pub uffd: Uffd,
    /// The region's first byte.
    pub base: usize,
    /// The region's length in pages.
    pub pages: usize,
    /// How the RAM budget divides: the whole of it (uncompressed pages and
    /// the compression cache together), and the store's reserve that the
    /// policy does not manage.
    pub split: ccvm_policy::RamSplit,
    /// The compression cache.
    pub store: Arc<Store>,
    /// The codec of pages compressed in the faulting thread.
    pub codec: Box<dyn Codec>,
    /// The disk level.
    pub swap: SwapFile,
    /// Who decides what moves.
    pub policy: Box<dyn Policy>,
    /// Where references go when tracing; the pager's observers take it
    /// when the pager is made (see `observe`).
    pub trace: Option<TraceWriter>,
    /// Move frames with `UFFDIO_MOVE` instead of copying them.
    pub move_frames: bool,
    /// Map pages in by copying while the process runs other threads.
    pub copy_in_when_threaded: bool,
    /// Faults are served by a thread of ccvm's in the process
    /// ([`crate::FaultMode::Thread`]).
    pub fault_thread: bool,
    /// Share of uncompressed pages kept trapped (needs moved frames).
    pub trap_share: f64,
    /// Bytes the process's counting allocator held before the region's
    /// parts were made (`crate::accounting`); `None` if it counts none.
    pub alloc_base: Option<usize>,
}

impl Pager {
    pub fn new(mut parts: PagerParts) -> Pager {
        let observers = Observers {
            statistics: Statistics::new(parts.policy.uncompressed_limit(), parts.policy.cache_limit()),
            tracing: parts.trace.take().map(Tracing),
        };
        let frames = if parts.move_frames {
            Frames::new(&parts.uffd, parts.pages)
        } else {
            None
        };
        let traps = (frames.is_some() && parts.trap_share > 0.0).then(|| Traps::new(parts.trap_share));
        // Watching a page takes its frame into the shadow; without one the
        // policy keeps reading its counterfactual off the recency order.
        if frames.is_some() {
            parts.policy.faults_only();
        }
        let protections = Protections::for_region(parts.base, parts.pages);
        Pager {
            pages: PageTable::new(parts.pages),
            overhead: Overhead::new(parts.alloc_base, parts.split.policy_ram(parts.split.ram_bytes)),
            share: share::Share::alone(parts.split.ram_bytes),
            parts,
            snapshot: RuntimeStats::default(),
            actions: Vec::new(),
            moved: Vec::new(),
            page: AlignedBuf::new(PAGE_SIZE),
            copies: Some(AlignedBuf::new(PAGE_SIZE)),
            freed: Vec::with_capacity(crate::compressor::RING),
            payload: AlignedBuf::new(PAGE_SIZE),
            frames,
            threads: crate::threads::ThreadWatch::new(),
            traps,
            to_trap: Vec::new(),
            ahead: Vec::new(),
            pinned_streak: 0,
            helper: None,
            streams: Streams::new(0),
            zero_reads: false,
            write_scan: None,
            protections,
            costs: None,
            observers,
            together: together::Together::new(),
            scratch: None,
        }
    }

    /// Sends evictions to `helper` to be compressed.
    pub fn compress_in_background(&mut self, helper: Helper) {
        self.helper = Some(helper);
    }

    /// Reads up to `most` pages ahead on cache faults and first touches
    /// that continue a run (see the `readahead` module).
    pub fn read_ahead(&mut self, most: usize) {
        self.streams = Streams::new(most);
    }

    /// Tells the policy what disk and cache faults cost here, all in, when
    /// faults are served in `mode` (see the `costs` module).
    pub fn measure_costs(&mut self, mode: crate::config::FaultMode) {
        self.costs = Some(costs::CostMeter::new(costs::delivery(mode)));
    }

    /// Tells the policy which resident pages were written lately (see the
    /// `written` module), if the region's userfaultfd has asynchronous write
    /// protection and frames move; returns whether it will.
    pub fn scan_writes(&mut self) -> bool {
        if self.parts.uffd.writes_async() && self.frames.is_some() {
            self.write_scan = WriteScan::open();
        }
        self.write_scan.is_some()
    }

    /// A write scan, if one is due: each resident page written since the
    /// last is a touch for the policy, from uncompressed memory.
    fn scan_if_due(&mut self) {
        let Some(scan) = &mut self.write_scan else {
            return;
        };
        if !scan.due(self.pages.resident) {
            return;
        }
        let (state, policy, actions) = (&self.pages, &mut self.parts.policy, &mut self.actions);
        let result = scan.scan(self.parts.base, |page| {
            if matches!(state[page], PageState::Uncompressed) {
                policy.referenced(page as u64, actions);
            }
        });
        if result.is_err() {
            // A kernel without PAGEMAP_SCAN: replacement stays in fault order.
            self.write_scan = None;
        }
        self.run_actions();
    }

    /// Maps reads of never-touched pages as the zero page, write-protected,
    /// until they are written (see the module docs).
    pub fn map_reads_as_zero(&mut self, on: bool) {
        self.zero_reads = on;
    }

    /// Puts the pages the helper has finished into the store.
    fn collect_finished(&mut self) {
        let Some(mut helper) = self.helper.take() else {
            return;
        };
        let mut freed = std::mem::take(&mut self.freed);
        helper.collect(&mut freed, |f: Finished<'_>| {
            let page = f.page as usize;
            debug_assert!(matches!(self.pages[page], PageState::Pending));
            let Some(stored) = f.stored else {
                // The helper could not read the frame.
                return self.compress(page, f.page_bytes);
            };
            match self.parts.store.put_stored(f.page, stored, f.bytes) {
                Ok(len) => self.compressed(page, len, true),
                // The policy must make room first: the path without a helper.
                Err(StoreError::Full { .. } | StoreError::OutOfMemory) => self.compress(page, f.page_bytes),
                Err(e) => fatal(e),
            }
        });
        self.helper = Some(helper);
        self.release_frames(&mut freed);
        self.freed = freed;
    }

    /// Makes the frames in `freed` spare.
    fn release_frames(&mut self, freed: &mut Vec<crate::frames::Parked>) {
        if freed.is_empty() {
            return;
        }
        let frames = self.frames.as_mut().expect("frames handed to the helper have frames");
        for frame in freed.drain(..) {
            frames.release(frame);
        }
    }

    /// Compresses pending page `page`, which the helper has not finished,
    /// in this thread from its copy in the ring. The helper is set aside
    /// meanwhile, as in `collect_finished`: the copy is its memory, and
    /// compressing it makes room only by spilling, never by evicting.
    fn complete_pending(&mut self, page: usize) {
        let mut helper = self.helper.take().expect("pending pages have a helper");
        match helper.take_back(page as u64).expect("a pending page is in the ring") {
            TakenBack::Copy(bytes) => self.compress(page, bytes),
            TakenBack::Frame(frame) => {
                self.compress(page, frame.bytes());
                let frames = self.frames.as_mut().expect("a frame handed to the helper has frames");
                frames.release(frame);
            }
        }
        self.helper = Some(helper);
    }

    /// The program dropped pages `pages` (`MADV_DONTNEED` or `MADV_FREE`,
    /// or a freed block its heap gave back): each reads back as zeros, as
    /// the kernel's would, and leaves the policy and every level. A page in
    /// the cache is removed from the store, one on disk frees its slot, a
    /// trapped page's frame becomes spare; a resident page is the caller's
    /// (the kernel's own `madvise` drops it, after this). Every such page
    /// is new again: its next touch maps zeros.
    pub fn discard(&mut self, pages: std::ops::Range<usize>) {
        self.collect_finished();
        self.run_actions();
        if self.together.waits_within(&pages) {
            // Evictions waiting for their batch leave now: a page must not
            // be dropped while its eviction is half done.
            self.evict_deferred();
        }
        for page in pages.start..pages.end.min(self.pages.len()) {
            while matches!(self.pages[page], PageState::Pending) {
                self.complete_pending(page);
                self.run_actions();
                if self.together.waits_within(&(page..pages.end)) {
                    // The spills and evictions that compression called for
                    // deferred a page still to be dropped.
                    self.evict_deferred();
                }
            }
            match self.pages[page] {
                PageState::New => continue,
                PageState::Zero => {
                    // Mapped as the zero page, and not in the policy.
                    self.pages[page] = PageState::New;
                    continue;
                }
                PageState::Uncompressed => self.evicted_one(page),
                PageState::Trapped => {
                    self.evicted_one(page);
                    let frames = self.frames.as_mut().expect("a trapped page has frames");
                    let frame = frames.parked(page);
                    frames.release(frame);
                }
                PageState::Compressed => {
                    self.parts.store.remove(page as u64);
                }
                PageState::Disk(i) => {
                    let slot = self.pages.disk.take(i);
                    self.parts.swap.forget(page as u64, slot);
                }
                PageState::Pending => unreachable!("completed by the loop above"),
            }
            self.pages[page] = PageState::New;
            self.parts.policy.discarded(page as u64);
        }
        let first = pages.start.min(self.pages.len());
        self.observers.observe(Event::Discarded {
            page: first as u64,
            pages: pages.end.min(self.pages.len()).saturating_sub(first) as u64,
        });
    }

    fn addr(&self, page: usize) -> usize {
        self.parts.base + page * PAGE_SIZE
    }

    /// Serves every pending fault event (event mode); returns how many.
    fn drain_events(&mut self) -> usize {
        let mut served = 0;
        loop {
            match self.parts.uffd.read_fault() {
                Ok(Some(fault)) => {
                    served += 1;
                    self.handle(fault);
                }
                Ok(None) => return served,
                Err(e) => fatal(format!("reading userfaultfd events: {e}")),
            }
        }
    }

    /// The counters as of now.
    pub fn stats(&mut self) -> RuntimeStats {
        self.publish();
        self.snapshot.clone()
    }

    /// Ends paging: the final counters and the trace writer, if any, for
    /// the caller to finish.
    pub fn finish(&mut self) -> (RuntimeStats, Option<TraceWriter>) {
        (self.stats(), self.take_trace())
    }

    /// The trace writer, if the region is traced, for the caller to
    /// finish: references after this are not traced.
    pub fn take_trace(&mut self) -> Option<TraceWriter> {
        self.observers.tracing.take().map(|t| t.0)
    }

    fn publish(&mut self) {
        let mut s = self.observers.statistics.snapshot();
        s.swap = self.parts.swap.stats;
        s.store = self.parts.store.stats();
        s.pages_trapped = self.traps.as_ref().map_or(0, Traps::trapped);
        s.pages_pending = self.helper.as_ref().map_or(0, Helper::waiting);
        if let Some(scan) = &self.write_scan {
            s.write_scans = scan.scans;
            s.pages_seen_written = scan.written;
        }
        self.snapshot = s;
    }
}

/// The event-mode handler thread: serves faults until `stop` becomes
/// readable (see [`serve_while_busy`]).
pub(crate) fn run_events(pager: Arc<Mutex<Pager>>, uffd_fd: RawFd, stop: RawFd) {
    loop {
        // The numbers as they are now: a program's `dup2` onto one moves
        // it (see `crate::fds`), and `poll` looks its numbers up again
        // while it waits, so a wait during a move may have seen the
        // program's file: then it is waited again.
        let now = || (crate::fds::current(uffd_fd), crate::fds::current(stop));
        let numbers = now();
        let stopped = crate::uffd::wait_for_fault(numbers.0, numbers.1, 100)
            .unwrap_or_else(|e| fatal(format!("poll on userfaultfd: {e}")));
        if now() != numbers {
            continue;
        }
        if stopped {
            lock(&pager).drain_events();
            break;
        }
        serve_while_busy(&pager, numbers);
    }
}

/// How long the handler thread keeps looking for the next fault before it
/// sleeps (see [`serve_while_busy`]).
const BUSY: std::time::Duration = std::time::Duration::from_micros(20);

/// Serves faults as they come until none came for [`BUSY`], or `stop` is
/// readable.
///
/// A handler that sleeps between faults is woken for each by an interrupt
/// to its CPU, which on a virtual machine must first leave its halt.
/// Looking again for 20 µs after each fault catches the next fault of a
/// thread that faults often, and costs a thread that faults seldom 20 µs
/// of the handler's CPU a fault. `ccvm run --workload hashindex --size 32M
/// --ram 20M --policy fixed50 --fault-mode thread` (567,000 cache faults):
/// 25.3 and 26.0 s sleeping, 17.7 and 17.7 s looking (`docs/results.md`,
/// "Thread faults: the handler's wake-up").
fn serve_while_busy(pager: &Mutex<Pager>, (uffd, stop): (RawFd, RawFd)) {
    let mut last = std::time::Instant::now();
    loop {
        if lock(pager).drain_events() > 0 {
            last = std::time::Instant::now();
        } else if last.elapsed() >= BUSY {
            return;
        }
        if crate::uffd::wait_for_fault(uffd, stop, 0).unwrap_or(true) {
            return;
        }
        std::hint::spin_loop();
    }
}

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
use std::time::Instant;

use ccvm_codec::{Codec, PAGE_SIZE};
use ccvm_policy::{Action, Level, Policy};
use ccvm_store::{Store, StoreError, Stored};
use ccvm_trace::TraceWriter;

use crate::aligned::{AlignedBuf, ZeroTable};
use crate::compressor::{Finished, Helper};
use crate::frames::Frames;
use crate::protections::Protections;
use crate::readahead::Streams;
use crate::stats::{RuntimeStats, Timers};
use crate::swap::{SwapFile, SwapSlot};
use crate::uffd::{Fault, Uffd};
use crate::written::WriteScan;
use ccvm_policy::Traps;

mod costs;
mod fork;
mod lock;
pub(crate) use lock::{lock, Locked};
mod disk;
mod evict;
mod overhead;
mod share;

pub(crate) use share::start_trimmer;
pub use share::{allocating_for_ccvm, on_tree_tick, SNAPSHOT_PERIOD};

use disk::DiskSlots;
use overhead::Overhead;

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

/// Where a page is: the four places of `ccvm_policy::Level` (`New`,
/// `Uncompressed`, `Compressed`, `Disk`, named as the policy and the
/// simulator name them), and three ways of being in one of them that only
/// the mechanism sees (`Trapped` and `Zero`, `Pending`).
///
/// repr(u8), New first: zeroed memory holds New pages (see `untouched`).
#[derive(Clone, Copy)]
#[repr(u8)]
enum PageState {
    // Made only as zeroed memory, by `untouched`.
    #[allow(dead_code)]
    New = 0,
    /// Uncompressed and mapped in the region.
    Uncompressed,
    /// Uncompressed, its frame in its shadow slot: a touch faults.
    Trapped,
    /// Evicted, copied into the helper process's ring to be compressed
    /// there (see the `compressor` module); compressed as far as the
    /// policy knows.
    Pending,
    /// In the compression cache.
    Compressed,
    /// In the swap file, at the slot kept at this index of `disk`.
    Disk(u32),
    /// New, only read so far: mapped as the zero page, write-protected;
    /// holds no memory and is not in the policy.
    Zero,
}

pub(crate) struct Pager {
    /// What it was made of: the region and the levels that hold its pages.
    pub parts: PagerParts,
    snapshot: RuntimeStats,
    state: ZeroTable<PageState>,
    /// The swap-file slots of the pages on disk.
    disk: DiskSlots,
    /// Pages that have left `New`: the state table holds memory for them.
    seen: usize,
    /// ccvm's own memory charged to the budget (see `overhead`).
    overhead: Overhead,
    resident: usize,
    actions: Vec<Action>,
    /// Pages the swap file's cleaner moved, with their new slots.
    moved: Vec<(u64, SwapSlot)>,
    page: AlignedBuf,
    payload: AlignedBuf,
    /// The region's shadow, for `UFFDIO_MOVE`, when the kernel has it.
    frames: Option<Frames>,
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
    /// The budget this process shares with those it forked or was forked
    /// from (see the `tree` module), and what it may hold of it now.
    tree: Option<crate::tree::Tree>,
    allowance: u64,
    /// Faults until the tree's table is read again.
    tree_countdown: u32,
    /// Whether this process runs the tree's thread (see `share`).
    trimming: bool,
    stats: RuntimeStats,
    timers: Timers,
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

// SAFETY: repr(u8) with `New` = 0 and plain-data fields: all-zero bytes
// are a `New` page.
unsafe impl crate::aligned::Zeroable for PageState {}

/// What a pager is made of: the region it serves and the parts that hold
/// its pages.
pub struct PagerParts {
    /// The region's userfaultfd.
    pub uffd: Uffd,
    /// The region's first byte.
    pub base: usize,
    /// The region's length in pages.
    pub pages: usize,
    /// RAM for uncompressed pages and the compression cache together.
    pub ram_bytes: u64,
    /// Of it, what the policy does not manage (the store's reserve).
    pub reserve: u64,
    /// The compression cache.
    pub store: Arc<Store>,
    /// The codec of pages compressed in the faulting thread.
    pub codec: Box<dyn Codec>,
    /// The disk level.
    pub swap: SwapFile,
    /// Who decides what moves.
    pub policy: Box<dyn Policy>,
    /// Where references go when tracing.
    pub trace: Option<TraceWriter>,
    /// Move frames with `UFFDIO_MOVE` instead of copying them.
    pub move_frames: bool,
    /// Share of uncompressed pages kept trapped (needs moved frames).
    pub trap_share: f64,
    /// Bytes the process's counting allocator held before the region's
    /// parts were made (`crate::accounting`); `None` if it counts none.
    pub alloc_base: Option<usize>,
}

impl Pager {
    pub fn new(mut parts: PagerParts) -> Pager {
        let stats = RuntimeStats {
            uncompressed_pages: parts.policy.uncompressed_limit(),
            cache_budget: parts.policy.cache_limit(),
            ..RuntimeStats::default()
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
            state: ZeroTable::new(parts.pages),
            disk: DiskSlots::default(),
            seen: 0,
            overhead: Overhead::new(parts.alloc_base, parts.ram_bytes.saturating_sub(parts.reserve)),
            allowance: parts.ram_bytes,
            parts,
            snapshot: RuntimeStats::default(),
            resident: 0,
            actions: Vec::new(),
            moved: Vec::new(),
            page: AlignedBuf::new(PAGE_SIZE),
            payload: AlignedBuf::new(PAGE_SIZE),
            frames,
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
            tree: None,
            tree_countdown: 0,
            trimming: false,
            stats,
            timers: Timers::new(),
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

    /// Tells the policy what disk and cache faults take to serve here (see
    /// the `costs` module).
    pub fn measure_costs(&mut self) {
        self.costs = Some(costs::CostMeter::default());
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
        if !scan.due(self.resident) {
            return;
        }
        let (state, policy, actions) = (&self.state, &mut self.parts.policy, &mut self.actions);
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
        helper.collect(|f: Finished<'_>| {
            let page = f.page as usize;
            debug_assert!(matches!(self.state[page], PageState::Pending));
            match self.parts.store.put_stored(f.page, f.stored, f.bytes) {
                Ok(len) => {
                    self.stats.pages_compressed_background += 1;
                    self.compressed(page, len);
                }
                // The policy must make room first: the path without a helper.
                Err(StoreError::Full { .. } | StoreError::OutOfMemory) => self.compress(page, f.page_bytes),
                Err(e) => fatal(e),
            }
        });
        self.helper = Some(helper);
    }

    /// Compresses pending page `page`, which the helper has not finished,
    /// in this thread from its copy in the ring.
    fn complete_pending(&mut self, page: usize) {
        let helper = self.helper.as_mut().expect("pending pages have a helper");
        let bytes = helper.take_back(page as u64).expect("a pending page is in the ring");
        // SAFETY: a ring entry taken back is not reused before it is
        // collected, which this call does not do; detached to lend the store.
        let bytes = unsafe { std::slice::from_raw_parts(bytes.as_ptr(), PAGE_SIZE) };
        self.compress(page, bytes);
    }

    /// The program dropped pages `pages` (`MADV_DONTNEED` or `MADV_FREE`):
    /// each reads back as zeros, as the kernel's would. A page in the cache
    /// or on disk is replaced by a zero-filled one (no memory, no I/O; the
    /// policy still counts it where it was, as a page it will fault back);
    /// a trapped page's frame is zeroed. Resident pages are the caller's:
    /// the kernel's own `madvise` drops them, and their next touch maps
    /// zeros.
    pub fn discard(&mut self, pages: std::ops::Range<usize>) {
        self.collect_finished();
        self.run_actions();
        for page in pages.start..pages.end.min(self.state.len()) {
            if matches!(self.state[page], PageState::Pending) {
                self.complete_pending(page);
                self.run_actions();
            }
            match self.state[page] {
                PageState::Compressed => {
                    if let Err(e) = self.parts.store.put(page as u64, &[0u8; PAGE_SIZE]) {
                        fatal(format!("dropping page {page} from the compression cache: {e}"));
                    }
                }
                PageState::Disk(i) => {
                    self.parts.swap.forget(page as u64, self.disk.get(i));
                    match self.parts.swap.write(page as u64, ccvm_store::Stored::Same(0), &[]) {
                        Ok(zero) => self.disk.set(i, zero),
                        Err(e) => fatal(e),
                    }
                }
                PageState::Trapped => {
                    let frames = self.frames.as_ref().expect("a trapped page has frames");
                    // SAFETY: the page's frame, parked in its shadow slot:
                    // a mapped page of ours that nothing else refers to.
                    unsafe { std::ptr::write_bytes(frames.slot(page) as *mut u8, 0, PAGE_SIZE) };
                }
                _ => {}
            }
        }
        self.stats.pages_discarded += pages.len() as u64;
    }

    fn addr(&self, page: usize) -> usize {
        self.parts.base + page * PAGE_SIZE
    }

    /// Serves every pending fault event (event mode).
    fn drain_events(&mut self) {
        loop {
            match self.parts.uffd.read_fault() {
                Ok(Some(fault)) => self.handle(fault),
                Ok(None) => break,
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
        (self.stats(), self.parts.trace.take())
    }

    fn publish(&mut self) {
        let mut s = self.stats.clone();
        s.swap = self.parts.swap.stats;
        s.store = self.parts.store.stats();
        s.latency_cache = Timers::summary(&self.timers.cache);
        s.latency_disk = Timers::summary(&self.timers.disk);
        s.latency_zero = Timers::summary(&self.timers.zero);
        s.latency_trap = Timers::summary(&self.timers.trap);
        s.pages_trapped = self.traps.as_ref().map_or(0, Traps::trapped);
        s.pages_pending = self.helper.as_ref().map_or(0, Helper::waiting);
        if let Some(scan) = &self.write_scan {
            s.write_scans = scan.scans;
            s.pages_seen_written = scan.written;
        }
        self.snapshot = s;
    }

    /// Serves one fault, from an event (event mode) or a SIGBUS raised in
    /// the faulting thread.
    pub fn handle(&mut self, fault: Fault) {
        let page = fault.addr.wrapping_sub(self.parts.base) / PAGE_SIZE;
        if page >= self.state.len() {
            return;
        }
        if fault.write_protect && matches!(self.state[page], PageState::Zero) {
            self.serve(page, true);
        } else if fault.write_protect {
            self.stats.faults_repeat += 1;
            self.wake(page);
        } else {
            self.serve(page, fault.write);
        }
    }

    fn wake(&self, page: usize) {
        if let Err(e) = self.parts.uffd.wake(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd wake: {e}"));
        }
    }

    /// A buffer to rebuild a page in before it is mapped: a spare frame
    /// when there is one (mapped by moving it), else `self.page`.
    fn target(&mut self, page: usize) -> Target {
        match self.frames.as_mut().and_then(|f| f.take_spare(page)) {
            Some(slot) => Target::Frame(slot),
            None => Target::Buffer,
        }
    }

    /// The 4096 bytes of `target`, to write the page into.
    fn target_bytes(&mut self, target: Target) -> &mut [u8] {
        match target {
            Target::Buffer => &mut self.page,
            Target::Frame(slot) => {
                let addr = self.frames.as_ref().expect("a frame target has frames").slot(slot);
                // SAFETY: a shadow slot holding a frame: a mapped page of
                // ours that nothing else refers to.
                unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, PAGE_SIZE) }
            }
        }
    }

    /// Maps the page rebuilt in `target` at `page`.
    fn map_page(&mut self, page: usize, target: Target) {
        let dst = self.addr(page);
        let r = match target {
            // SAFETY: the source is our own 4096-byte buffer; the
            // destination is a page of the registered region.
            Target::Buffer => unsafe { self.parts.uffd.copy(self.page.as_ptr(), dst, PAGE_SIZE) },
            Target::Frame(slot) => {
                let frames = self.frames.as_mut().expect("a frame target has frames");
                match frames.map(&self.parts.uffd, slot, dst) {
                    // Shared with a forked child after all, or mapped into
                    // a range the program made other than read-write
                    // (which the kernel will not move into): copy it.
                    Err(nix::errno::Errno::EBUSY | nix::errno::Errno::EINVAL) => {
                        // SAFETY: the source is the frame, mapped in our
                        // shadow; the destination a page of the region.
                        let r = unsafe { self.parts.uffd.copy(frames.slot(slot) as *const u8, dst, PAGE_SIZE) };
                        frames.give_back(slot, page);
                        r
                    }
                    Err(e) => {
                        frames.give_back(slot, page);
                        Err(e)
                    }
                    Ok(()) => Ok(()),
                }
            }
        };
        match r {
            Ok(()) => {}
            Err(nix::errno::Errno::EEXIST) => self.wake(page),
            Err(e) => fatal(format!("mapping page {page}: {e}")),
        }
    }

    fn serve(&mut self, page: usize, write: bool) {
        let started = Instant::now();
        self.pinned_streak = 0;
        // Pages the helper finished, and the spills their sizes call for,
        // before this page's state is read: a spill may be of this page.
        self.collect_finished();
        self.run_actions();
        self.scan_if_due();
        // Set where the run detector has already seen this fault.
        let mut window = None;
        let from = match self.state[page] {
            PageState::Uncompressed => {
                // Mapped by another thread's fault meanwhile (the zero page
                // is then refused), or dropped by the program itself
                // (`MADV_DONTNEED`), which leaves zeros.
                self.stats.faults_repeat += 1;
                self.map_zero_page(page);
                return;
            }
            PageState::Pending => {
                self.collect_finished();
                if matches!(self.state[page], PageState::Pending) {
                    self.stats.faults_pending += 1;
                    self.complete_pending(page);
                }
                self.run_actions();
                return self.serve(page, write);
            }
            PageState::Trapped => {
                // Its frame is in its shadow slot, as it was left.
                self.map_page(page, Target::Frame(page));
                if self.traps.as_ref().is_some_and(|t| t.is_trapped(page as u64)) {
                    self.stats.faults_trap += 1;
                } else {
                    self.stats.faults_watch += 1;
                }
                Level::Uncompressed
            }
            PageState::New | PageState::Zero if !write && self.zero_reads => {
                let w = self.window(page);
                if w == 0 {
                    self.map_zero_read(page);
                    self.stats.faults_zero_read += 1;
                    return;
                }
                // A read continuing a run is a scan, which as often as
                // not writes what it reads: zeros it can write, and the
                // next pages read ahead, as for a first write.
                window = Some(w);
                self.map_zeros(page);
                self.stats.faults_zero += 1;
                Level::New
            }
            PageState::Zero => {
                // The first write to a page only read so far: the retried
                // write replaces the zero page with the kernel's own. If
                // the program dropped the mapping meanwhile, the retry
                // faults as missing and is served as resident (zeros).
                if let Err(e) = self.parts.uffd.write_unprotect(self.addr(page), PAGE_SIZE) {
                    fatal(format!("userfaultfd write-unprotect: {e}"));
                }
                self.stats.faults_zero += 1;
                Level::New
            }
            PageState::New => {
                self.map_zeros(page);
                self.stats.faults_zero += 1;
                Level::New
            }
            PageState::Compressed => {
                self.map_from_cache(page);
                self.stats.faults_cache += 1;
                Level::Compressed
            }
            PageState::Disk(i) => {
                let slot = self.disk.take(i);
                self.map_from_disk(page, slot);
                self.stats.faults_disk += 1;
                Level::Disk
            }
        };
        let ns = started.elapsed().as_nanos() as u64;
        let timer = match from {
            Level::New => &mut self.timers.zero,
            Level::Compressed => &mut self.timers.cache,
            Level::Uncompressed => &mut self.timers.trap,
            Level::Disk => &mut self.timers.disk,
        };
        timer.saturating_record(ns.max(1));
        if let Some(meter) = &mut self.costs {
            if matches!(from, Level::Disk | Level::Compressed) {
                meter.record(from == Level::Disk, ns);
            }
            if let Some((disk_ns, cache_ns)) = meter.due() {
                self.parts.policy.fault_service(disk_ns, cache_ns);
            }
        }
        self.now_resident(page, from);
        if let Some(t) = &mut self.parts.trace {
            if let Err(e) = t.reference(page as u64, write) {
                fatal(format!("writing the trace: {e}"));
            }
        }
        self.parts.policy.touch(page as u64, from, &mut self.actions);
        self.after_touch();
        if matches!(from, Level::Compressed | Level::New | Level::Disk) {
            let window = window.unwrap_or_else(|| self.window(page));
            if window > 0 {
                self.read_ahead_after(page, window, from);
            }
        }
    }

    /// Pages to read ahead after a fault on `page` (see the `readahead`
    /// module), at most a quarter of the uncompressed pages: a window near
    /// their number would evict pages read ahead before they are touched.
    fn window(&mut self, page: usize) -> usize {
        let w = self.streams.fault(page);
        w.min(self.parts.policy.uncompressed_limit() / 4)
    }

    /// Maps never-touched page `page` as zeros: a spare frame, zeroed,
    /// saves the kernel allocating and zeroing one at the first write;
    /// else the zero page.
    fn map_zeros(&mut self, page: usize) {
        match self.target(page) {
            Target::Frame(slot) => {
                self.target_bytes(Target::Frame(slot)).fill(0);
                self.map_page(page, Target::Frame(slot));
            }
            Target::Buffer => self.map_zero_page(page),
        }
    }

    /// Maps never-touched (or only read) page `page` as the zero page,
    /// write-protected so that its first write faults.
    fn map_zero_read(&mut self, page: usize) {
        self.map_zero_page(page);
        if let Err(e) = self.parts.uffd.write_protect(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd write-protect: {e}"));
        }
        self.state[page] = PageState::Zero;
    }

    /// Maps the kernel's zero page at `page`; if something is mapped there
    /// already (another thread's fault won), only wakes its waiters.
    fn map_zero_page(&self, page: usize) {
        match self.parts.uffd.zeropage(self.addr(page), PAGE_SIZE) {
            Ok(()) => {}
            Err(nix::errno::Errno::EEXIST) => self.wake(page),
            Err(e) => fatal(format!("userfaultfd zeropage: {e}")),
        }
    }

    /// Reads page `page` back from `slot` in the swap file, checked,
    /// and maps it.
    fn map_from_disk(&mut self, page: usize, slot: SwapSlot) {
        let stored = match self.parts.swap.read(page as u64, slot, &mut self.payload) {
            Ok(s) => s,
            Err(e) => fatal(e),
        };
        let target = self.target(page);
        self.decode(page, stored, target);
        self.map_page(page, target);
    }

    /// Decompresses cached page `page` into a spare frame (or the buffer)
    /// and maps it.
    fn map_from_cache(&mut self, page: usize) {
        let target = self.target(page);
        let out = self.target_bytes(target);
        // SAFETY: `out` is our buffer or a spare frame, not part of the
        // store; detach it from `self` to lend the store.
        let out = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr(), PAGE_SIZE) };
        if let Err(e) = self.parts.store.take(page as u64, out) {
            fatal(e);
        }
        self.map_page(page, target);
        self.stats.pages_decompressed += 1;
    }

    /// Maps the pages among the `window` after `page` that are where the
    /// faulting page was (`from`: the cache, or never touched), each a
    /// touch for the policy (see the `readahead` module).
    fn read_ahead_after(&mut self, page: usize, window: usize, from: Level) {
        let end = (page + window).min(self.state.len() - 1);
        if from == Level::Disk {
            // One read for the window's pages that lie side by side in the
            // swap file; the others are left where they are.
            let mut slots = std::mem::take(&mut self.ahead);
            slots.clear();
            slots.extend((page + 1..=end).filter_map(|p| match self.state[p] {
                PageState::Disk(i) => Some(self.disk.get(i)),
                _ => None,
            }));
            let read = self.parts.swap.read_ahead(&slots);
            self.ahead = slots;
            match read {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => fatal(e),
            }
        }
        for next in page + 1..=end {
            if !self.protections.read_write(next) {
                // Not committed, or not the program's to write.
                break;
            }
            // Evictions made for an earlier page of the window may have
            // spilled this one: its state is read afresh.
            match (self.state[next], from) {
                (PageState::Compressed, Level::Compressed) => {
                    self.map_from_cache(next);
                    self.stats.pages_read_ahead += 1;
                }
                (PageState::Disk(i), Level::Disk) if self.parts.swap.holds_ahead(self.disk.get(i)) => {
                    let slot = self.disk.take(i);
                    self.map_from_disk(next, slot);
                    self.stats.pages_read_ahead_disk += 1;
                }
                (PageState::New, Level::New) => {
                    self.map_zeros(next);
                    self.stats.pages_zero_ahead += 1;
                }
                _ => continue,
            }
            self.now_resident(next, from);
            self.parts.policy.touch(next as u64, from, &mut self.actions);
            self.after_touch();
        }
    }

    /// `page`, just mapped from level `from`, is resident.
    fn now_resident(&mut self, page: usize, from: Level) {
        self.state[page] = PageState::Uncompressed;
        if let Some(scan) = &mut self.write_scan {
            scan.fault(page);
        }
        if from == Level::New {
            self.seen += 1;
        }
        match (&mut self.traps, from) {
            // A trapped or watched page was resident all along; it is
            // mapped again.
            (Some(traps), Level::Uncompressed) => {
                traps.touch(page as u64);
            }
            (None, Level::Uncompressed) => {}
            (traps, _) => {
                self.resident += 1;
                if let Some(traps) = traps {
                    traps.resident(page as u64);
                }
            }
        }
    }

    /// Carries out the policy's evictions, keeps the budget, and traps the
    /// pages that now should be.
    fn after_touch(&mut self) {
        self.run_actions();
        self.keep_within_ram();
        let Some(traps) = &mut self.traps else {
            return;
        };
        let mut to_trap = std::mem::take(&mut self.to_trap);
        traps.rebalance(&mut to_trap);
        for p in to_trap.drain(..) {
            if !self.park(p as usize) {
                self.traps.as_mut().expect("checked").untrap(p);
            }
        }
        self.to_trap = to_trap;
    }

    /// Moves resident page `page`'s frame into its shadow slot, keeping it
    /// uncompressed, so that its next touch faults (a trapped or watched
    /// page). Returns whether it moved (it needs a shadow, and the kernel
    /// may refuse).
    fn park(&mut self, page: usize) -> bool {
        if self.pinned(page) {
            return false;
        }
        let addr = self.addr(page);
        let Some(frames) = &mut self.frames else {
            return false;
        };
        let parked = frames.park(&self.parts.uffd, page, addr).is_ok();
        if parked {
            self.state[page] = PageState::Trapped;
        }
        parked
    }

    /// Whether a system call is using `page`, so that it must stay mapped
    /// (see `crate::pins`).
    fn pinned(&self, page: usize) -> bool {
        crate::pins::holds(self.addr(page), PAGE_SIZE)
    }

    /// Rebuilds a page read from disk (in `self.payload`) into `target`.
    fn decode(&mut self, page: usize, stored: Stored, target: Target) {
        let out = self.target_bytes(target);
        // SAFETY: as in `serve`: our buffer or frame, apart from the payload.
        let out = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr(), PAGE_SIZE) };
        self.decode_into(page, stored, out);
    }

    /// Rebuilds a page read from disk (in `self.payload`) into `out`.
    fn decode_into(&mut self, page: usize, stored: Stored, out: &mut [u8]) {
        match stored {
            Stored::Same(v) => out
                .chunks_exact_mut(8)
                .for_each(|w| w.copy_from_slice(&v.to_le_bytes())),
            Stored::Raw => out.copy_from_slice(&self.payload),
            Stored::Compressed(n) => {
                if let Err(e) = self.parts.codec.decompress(&self.payload[..n], out) {
                    fatal(format!("page {page} read from the swap file does not decode: {e}"));
                }
                self.stats.pages_decompressed += 1;
            }
        }
    }

    /// Keeps uncompressed pages plus the cache's real memory (slack and
    /// bookkeeping included) within the RAM budget.
    fn keep_within_ram(&mut self) {
        if self.overhead.due() {
            self.overhead.set(overhead::Parts {
                states: (self.seen * std::mem::size_of::<PageState>()) as u64,
                spare: self.frames.as_ref().map_or(0, Frames::spare_bytes),
                helper: self.helper.as_ref().map_or(0, Helper::memory),
                store_books: self.parts.store.stats().metadata_bytes,
            });
            self.stats.overhead_bytes = self.stats.overhead_bytes.max(self.overhead.bytes);
        }
        self.consult_tree(false);
        if let Some(ram) = self
            .overhead
            .policy_ram(self.allowance.saturating_sub(self.parts.reserve))
        {
            self.parts.policy.set_ram(ram);
        }
        let over = |p: &Pager| p.charge() > p.allowance;
        if !over(self) {
            return;
        }
        // Giving back a chunk or two is cheaper than spilling a page.
        while over(self) && self.parts.store.reclaim_chunk() {}
        self.parts.store.compact_when_due();
        while over(self) && self.parts.policy.make_room(&mut self.actions) {
            self.run_actions();
        }
        // A share of a tree's budget cut at once (see `tree`): uncompressed
        // pages leave too, each at most once (one that cannot leave is
        // kept mapped and comes back to the policy).
        if self.allowance < self.parts.ram_bytes {
            let mut tries = self.resident;
            while over(self) && tries > 0 && self.parts.policy.shrink(&mut self.actions) {
                tries -= 1;
                self.run_actions();
                while over(self) && self.parts.policy.make_room(&mut self.actions) {
                    self.run_actions();
                }
            }
        }
    }
}

/// The event-mode handler thread: serves faults until `stop` becomes
/// readable.
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
        lock(&pager).drain_events();
        if stopped {
            break;
        }
    }
}

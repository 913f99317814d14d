//! Managed regions: anonymous memory registered with userfaultfd, paged by
//! a handler thread through the compression cache to a swap file.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ccvm_codec::PAGE_SIZE;
use ccvm_store::{Store, StoreConfig};
use ccvm_trace::{Header, TraceWriter};

use crate::compressor::Helper;
use crate::config::{FaultMode, RuntimeConfig, RuntimeError};
use crate::pager::{Pager, PagerParts};
use crate::protections::FOREIGN;
use crate::stats::RuntimeStats;
use crate::swap::SwapFile;
use crate::uffd::Uffd;

/// A region of memory of which at most a RAM budget is held, part
/// uncompressed and part in the compression cache, and the rest in a swap
/// file. It reads and writes as ordinary memory.
///
/// Dropping the region stops its handler and frees its pages, its store
/// and its swap file.
///
/// ```no_run
/// use ccvm_runtime::{Region, RuntimeConfig};
/// let config = RuntimeConfig { ram_bytes: 1 << 20, ..RuntimeConfig::default() };
/// let mut region = Region::new(4 << 20, config)?; // 4 MiB through 1 MiB of RAM
/// region.as_mut_slice().fill(7);
/// assert!(region.as_mut_slice().iter().all(|&b| b == 7));
/// let stats = region.finish()?;
/// assert!(stats.pages_compressed > 0);
/// # Ok::<(), ccvm_runtime::RuntimeError>(())
/// ```
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    pager: Arc<Mutex<Pager>>,
    mode: FaultMode,
    /// Event mode: the handler thread and the eventfd that stops it.
    handler: Option<(JoinHandle<()>, crate::fds::Held)>,
    /// Whether faults are still served (until `stop`).
    live: bool,
    swap_fd: RawFd,
    trace: Option<crate::TraceConfig>,
}

// SAFETY: the region's memory is plain process memory, valid while the
// Region lives; the safe accessors give either exclusive access (&mut) or
// atomics, so sharing the handle between threads is sound.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

fn os(what: &'static str) -> RuntimeError {
    RuntimeError::Os {
        what,
        source: std::io::Error::last_os_error(),
    }
}

/// The trace writer of `config`'s trace, if it asks for one, its header
/// filled in for a region of `len` bytes and `window` uncompressed pages.
fn open_trace(config: &RuntimeConfig, len: usize, window: usize) -> Result<Option<TraceWriter>, RuntimeError> {
    let Some(t) = &config.trace else {
        return Ok(None);
    };
    let header = Header {
        workload: t.workload.clone(),
        seed: t.seed,
        region_bytes: len as u64,
        window_pages: window as u64,
    };
    TraceWriter::create(&t.path, &header)
        .map(Some)
        .map_err(|source| RuntimeError::Trace {
            path: t.path.clone(),
            source,
        })
}

/// The helper process that compresses evictions, if `config` asks for one
/// and the budget affords it: where ccvm's own memory is `charged` to the
/// budget, a small budget cannot (see `HELPER_MIN_RAM`).
fn start_helper(config: &RuntimeConfig, store: &Store, charged: bool) -> Result<Option<Helper>, RuntimeError> {
    let fits = !charged || config.ram_bytes >= RuntimeConfig::HELPER_MIN_RAM;
    if !(config.background_compression && fits) {
        return Ok(None);
    }
    let helper = Helper::start(config.codec.make(), store.huge_threshold())
        .ok_or_else(|| os("starting the compressor process"))?;
    Ok(Some(helper))
}

/// Turns on the pager's parts that `config` asks for.
fn set_up(pager: &mut Pager, config: &RuntimeConfig, helper: Option<Helper>, write_scan: bool) {
    if let Some(helper) = helper {
        pager.compress_in_background(helper);
    }
    if let Some(tree) = crate::tree::Tree::new(config.ram_bytes) {
        pager.share_budget(tree);
    }
    if config.trace.is_none() {
        pager.read_ahead(config.readahead);
        pager.measure_costs(config.fault_mode);
        if config.fault_mode == crate::config::FaultMode::Signal {
            pager.measure_watched();
        }
        // A zero page's protection must stop its first write, which
        // asynchronous protection does not (see the `written` module).
        let scanning = write_scan && pager.scan_writes();
        pager.map_reads_as_zero(config.zero_reads && !scanning);
    }
}

impl Region {
    /// Makes a region of `bytes` (rounded up to whole pages) paged as
    /// `config` says.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Userfaultfd`] if this process may not use
    /// userfaultfd, [`RuntimeError::Config`] for a bad setting, or the
    /// error of the system call, swap file or trace file that failed.
    pub fn new(bytes: usize, config: RuntimeConfig) -> Result<Region, RuntimeError> {
        let len = bytes.max(PAGE_SIZE).next_multiple_of(PAGE_SIZE);
        let alloc_base = crate::accounting::allocated();
        config.validate()?;
        let budget = config.policy_budget();
        let params = ccvm_policy::Params {
            uncompressed_share: config.uncompressed_share,
            costs: ccvm_policy::Costs {
                disk_ns: (config.disk_cost + config.disk_latency).as_nanos() as f64,
                codec_ns: config.cache_price().as_nanos() as f64,
                compress_share: 0.5,
            },
        };
        let policy = config.policy.make(budget, params);
        let store = Arc::new(Store::new(StoreConfig {
            codec: config.codec,
            chunk_size: RuntimeConfig::STORE_CHUNK,
            memory_limit: config.ram_split().store_limit(policy.cache_limit()) as usize,
            ..StoreConfig::default()
        })?);
        let dir = config.swap_dir.clone().unwrap_or_else(std::env::temp_dir);
        let swap = SwapFile::create(&dir, config.disk_latency)?;
        let trace = open_trace(&config, len, policy.uncompressed_limit())?;

        // Forked before the region and its shadow exist, so that it shares
        // none of their pages (see the `compressor` module).
        let helper = start_helper(&config, &store, alloc_base.is_some())?;
        let sigbus = config.fault_mode == FaultMode::Signal;
        let write_scan = config.write_scan && config.move_frames && config.trace.is_none();
        let uffd = Uffd::open_with(sigbus, write_scan)?;
        let base = crate::frames::map_small_pages(len).ok_or_else(|| os("mmap of the region"))?;
        let unmap = |e| {
            // SAFETY: the mapping made just above.
            unsafe { libc::munmap(base, len) };
            e
        };
        if !uffd.register(base as usize, len) {
            return Err(unmap(RuntimeError::KernelTooOld(
                "userfaultfd write-protection of anonymous memory",
            )));
        }
        let swap_fd = swap.fd();
        let uffd_fd = uffd.raw();
        let pager = Arc::new(Mutex::new(Pager::new(PagerParts {
            uffd,
            base: base as usize,
            pages: len / PAGE_SIZE,
            split: config.ram_split(),
            store: store.clone(),
            codec: config.codec.make(),
            swap,
            policy,
            trace,
            move_frames: config.move_frames,
            copy_in_when_threaded: config.copy_in_when_threaded,
            fault_thread: config.fault_mode == FaultMode::Thread,
            trap_share: config.trap_share,
            alloc_base,
        })));
        set_up(&mut crate::pager::lock(&pager), &config, helper, write_scan);
        let handler = match config.fault_mode {
            FaultMode::Signal => {
                crate::signal::add(base as usize, base as usize + len, Arc::as_ptr(&pager))
                    .map_err(|e| unmap(RuntimeError::Config(e)))?;
                None
            }
            FaultMode::Thread => Some(spawn_handler(pager.clone(), uffd_fd).map_err(unmap)?),
        };
        Ok(Region {
            base: NonNull::new(base.cast()).expect("mmap does not return null"),
            len,
            pager,
            mode: config.fault_mode,
            handler,
            live: true,
            swap_fd,
            trace: config.trace,
        })
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: a region has at least a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte; page-aligned. Valid while the region lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// The region as bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is len bytes, valid while self lives, and
        // &mut self makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.len) }
    }

    /// The region as 64-bit atomics, for many threads at once.
    pub fn atomics(&self) -> &[AtomicU64] {
        // SAFETY: page-aligned, len a multiple of 8, valid while self
        // lives; atomics may alias each other freely.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }

    /// How faults are served.
    pub fn fault_mode(&self) -> FaultMode {
        self.mode
    }

    /// Counters as of now.
    pub fn stats(&self) -> RuntimeStats {
        let mut stats = crate::pager::lock(&self.pager).stats();
        if crate::guard::installed() {
            (
                stats.guarded_calls,
                stats.guarded_calls_with_buffers,
                stats.guard_pages_touched,
            ) = crate::guard::counters();
            stats.pins_refused = crate::pins::refused() as u64;
        }
        stats
    }

    /// Touches every page of `range` (byte offsets into the region) from
    /// this thread, so that they are resident: in SIGBUS mode, do this
    /// before handing region memory to a system call, which fails with
    /// `EFAULT` on a page that is not (see [`FaultMode::Signal`]). Pages
    /// may be evicted again by later faults; keep the range under the RAM
    /// budget's uncompressed share and make the call right after.
    ///
    /// # Panics
    ///
    /// If `range` is not within the region.
    pub fn prefault(&self, range: std::ops::Range<usize>) {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "{range:?} is outside the region"
        );
        // A write access (one that stores what it read, so that a
        // concurrent writer loses nothing) because a read may map the zero
        // page write-protected, and a kernel write into that fails in
        // SIGBUS mode.
        let base = self.base.as_ptr() as usize;
        crate::guard::touch(base + range.start, base + range.end, crate::guard::Access::Write);
    }

    /// `madvise(MADV_DONTNEED)` on `range` (byte offsets into the region,
    /// page-aligned at the start): afterwards every page of it reads as
    /// zeros, including pages that were in the compression cache or on
    /// disk, whose copies are dropped.
    ///
    /// # Panics
    ///
    /// If `range` is not within the region.
    pub fn discard(&self, range: std::ops::Range<usize>) {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "{range:?} is outside the region"
        );
        let pages = range.start / PAGE_SIZE..range.end.div_ceil(PAGE_SIZE);
        discard_locked(&self.pager, self.base.as_ptr() as usize, pages);
    }

    /// `mprotect(prot)` on `range` (byte offsets into the region,
    /// page-aligned at the start), told to the pager first: a page the
    /// program makes other than read-write is one the kernel will not move
    /// (`UFFDIO_MOVE`), so the pager copies it in and out instead, and one
    /// it cannot read (`PROT_NONE`) stays in place. A `prot` outside
    /// `PROT_READ | PROT_WRITE | PROT_EXEC` marks the range as no longer
    /// the region's (the program mapped something else over it), and makes
    /// no system call.
    ///
    /// # Errors
    ///
    /// The system call's error; the pager's record is then unchanged.
    ///
    /// # Panics
    ///
    /// If `range` is not within the region.
    pub fn protect(&self, range: std::ops::Range<usize>, prot: i32) -> Result<(), nix::errno::Errno> {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "{range:?} is outside the region"
        );
        let pages = range.start / PAGE_SIZE..range.end.div_ceil(PAGE_SIZE);
        let all = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        let _allow = crate::guard::Allow::new();
        // Under the pager's lock: no eviction or mapping runs between the
        // kernel's change and the record's.
        let mut p = crate::pager::lock(&self.pager);
        if prot & !all != 0 {
            p.protections.set(pages, FOREIGN);
            return Ok(());
        }
        let addr = self.base.as_ptr() as u64 + (pages.start * PAGE_SIZE) as u64;
        let len = (pages.len() * PAGE_SIZE) as u64;
        // SAFETY: pages of the region, which this process maps.
        let r = unsafe { crate::guard::raw_syscall(libc::SYS_mprotect, [addr, len, prot as u64, 0, 0, 0]) };
        if r < 0 {
            return Err(nix::errno::Errno::from_raw(-r as i32));
        }
        // Pages another mapping replaced stay out of the region.
        let foreign: Vec<_> = p
            .protections
            .within(pages.clone())
            .into_iter()
            .filter(|&(_, q)| q == FOREIGN)
            .collect();
        p.protections.set(pages, prot);
        for (run, _) in foreign {
            p.protections.set(run, FOREIGN);
        }
        Ok(())
    }

    /// Gives `range` (byte offsets into the region) back to plain
    /// read-write memory of the region, as [`Region::protect`] with
    /// `PROT_READ | PROT_WRITE` does, and maps anonymous memory,
    /// registered again, over its pages another mapping replaced: for heap
    /// memory the program has unmapped. Pages never protected cost no
    /// system call.
    ///
    /// # Errors
    ///
    /// The error of the system call that failed.
    ///
    /// # Panics
    ///
    /// If `range` is not within the region.
    pub fn unprotect(&self, range: std::ops::Range<usize>) -> Result<(), nix::errno::Errno> {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "{range:?} is outside the region"
        );
        let pages = range.start / PAGE_SIZE..range.end.div_ceil(PAGE_SIZE);
        let _allow = crate::guard::Allow::new();
        let mut p = crate::pager::lock(&self.pager);
        let base = self.base.as_ptr() as u64;
        for (run, prot) in p.protections.within(pages.clone()) {
            let addr = base + (run.start * PAGE_SIZE) as u64;
            let len = (run.len() * PAGE_SIZE) as u64;
            let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
            let (nr, args) = if prot == FOREIGN {
                let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE;
                (libc::SYS_mmap, [addr, len, rw, flags as u64, u64::MAX, 0])
            } else {
                (libc::SYS_mprotect, [addr, len, rw, 0, 0, 0])
            };
            // SAFETY: pages of the region, which the program has given up.
            let r = unsafe { crate::guard::raw_syscall(nr, args) };
            if r < 0 {
                return Err(nix::errno::Errno::from_raw(-r as i32));
            }
            if prot == FOREIGN && !p.parts.uffd.register(addr as usize, len as usize) {
                return Err(nix::errno::Errno::EINVAL);
            }
            p.protections.set(run, libc::PROT_READ | libc::PROT_WRITE);
        }
        Ok(())
    }

    /// Whether any page of `range` (byte offsets into the region) was
    /// given a protection other than read-write by [`Region::protect`].
    pub fn protected(&self, range: std::ops::Range<usize>) -> bool {
        let pages = range.start / PAGE_SIZE..range.end.div_ceil(PAGE_SIZE);
        let p = crate::pager::lock(&self.pager);
        p.protections.any_in(pages)
    }

    /// Holds the pager for a `fork` about to happen: no fault is served
    /// until the guard is used up in the parent ([`ForkGuard::parent`]) or
    /// in the child ([`ForkGuard::child`]). Pages on their way to the
    /// helper process are compressed first, trapped pages mapped back and
    /// the swap file's buffer written, since a child inherits neither the
    /// helper's ring, nor the shadow, nor a buffer the parent will reuse.
    ///
    /// Call it from a `pthread_atfork` prepare handler, after taking any
    /// lock that a thread may hold while it touches the region (such as an
    /// allocator's), so that no such thread waits on a fault meanwhile.
    pub fn prepare_fork(&self) -> ForkGuard<'_> {
        let mut pager = crate::pager::lock(&self.pager);
        pager.settle_for_fork();
        pager.hold_for_child();
        let page_child = pager.child_can_be_paged(self.mode == FaultMode::Signal);
        ForkGuard {
            pager,
            me: Arc::downgrade(&self.pager),
            page_child,
        }
    }

    /// Ends the trace, if the region is traced, while the region stays in
    /// use (a process that exits with other threads still running cannot
    /// [`finish`](Region::finish) it): references after this are not
    /// traced.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Trace`] if the trace could not be finished.
    pub fn finish_trace(&self) -> Result<(), RuntimeError> {
        let writer = crate::pager::lock(&self.pager).take_trace();
        if let (Some(writer), Some(t)) = (writer, &self.trace) {
            writer.finish(t.run_time_ns).map_err(|source| RuntimeError::Trace {
                path: t.path.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// The swap file's descriptor, for diagnostics (tests corrupt it).
    pub fn swap_fd(&self) -> RawFd {
        crate::fds::current(self.swap_fd)
    }

    /// Stops serving faults; afterwards nothing touches the region.
    fn stop(&mut self) {
        if !std::mem::take(&mut self.live) {
            return;
        }
        match self.handler.take() {
            Some((thread, stop)) => {
                let one = 1u64.to_ne_bytes();
                // SAFETY: writing 8 bytes to our eventfd.
                unsafe { libc::write(stop.in_use().fd(), one.as_ptr().cast(), 8) };
                thread.join().expect("the pager thread does not panic");
            }
            None => crate::signal::remove(Arc::as_ptr(&self.pager)),
        }
        crate::pager::lock(&self.pager).leave_tree();
    }

    /// Stops paging, ends the trace (if any) and returns the final counters.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Trace`] if the trace could not be finished.
    pub fn finish(mut self) -> Result<RuntimeStats, RuntimeError> {
        self.stop();
        let (stats, trace) = crate::pager::lock(&self.pager).finish();
        if let (Some(writer), Some(t)) = (trace, &self.trace) {
            writer.finish(t.run_time_ns).map_err(|source| RuntimeError::Trace {
                path: t.path.clone(),
                source,
            })?;
        }
        Ok(stats)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: our mapping; the handler has stopped and no reference
        // into it outlives self.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The pager held across a `fork` (see [`Region::prepare_fork`]).
pub struct ForkGuard<'a> {
    pager: crate::pager::Locked<'a>,
    /// The same pager, for the thread of a shared budget (see `tree`).
    me: std::sync::Weak<Mutex<Pager>>,
    /// Whether the child will be paged (see the pager's fork module).
    page_child: bool,
}

/// How a forked child's region goes on (see [`ForkGuard::child`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildPaging {
    /// Paged, from the child's copy of the parent's state at the fork.
    Paged,
    /// Unpaged: every page was written into place (this many were not in
    /// memory), and the region is plain memory from now on.
    Materialized(usize),
}

impl ForkGuard<'_> {
    /// In the parent after the fork: the clusters of the swap file the
    /// child may read are frozen (see the swap module), and faults are
    /// served again. The parent does not wait for the child.
    pub fn parent(mut self) {
        self.pager.after_fork_parent();
        let start = self.pager.join_tree_after_fork(false);
        self.start_trimmer(start);
    }

    /// Releases the pager and, if `start`, starts the thread of the tree's
    /// shared budget (see the pager's `share` module).
    fn start_trimmer(self, start: bool) {
        let ForkGuard { pager, me, .. } = self;
        drop(pager);
        if start && !crate::pager::start_trimmer(me.clone()) {
            if let Some(p) = me.upgrade() {
                crate::pager::lock(&p).no_trimmer();
            }
        }
    }

    /// In the child after the fork, before anything else touches the
    /// region: makes the pager the child's own, with a userfaultfd of its
    /// own, so that the region is paged as in the parent
    /// ([`ChildPaging::Paged`]). In event mode, with write scans or a
    /// trace, or if the child cannot have a userfaultfd, it writes every
    /// page held compressed or in the swap file into its place instead and
    /// leaves the region unpaged for good ([`ChildPaging::Materialized`]);
    /// the region must then not be used as a `Region` afterwards, only as
    /// memory, and its pager stays held.
    pub fn child(mut self) -> ChildPaging {
        if self.page_child {
            match self.pager.adopt_in_child() {
                Ok(()) => {
                    let start = self.pager.join_tree_after_fork(true);
                    self.start_trimmer(start);
                    return ChildPaging::Paged;
                }
                Err(e) => eprintln!("ccvm: the forked child {} runs unpaged: {e}", std::process::id()),
            }
        }
        let written = self.pager.materialize_in_child();
        std::mem::forget(self);
        ChildPaging::Materialized(written)
    }
}

/// Starts the event-mode handler thread; returns it with the eventfd that
/// stops it.
/// Drops `pages` of the region at `base` served by `pager`: its copies
/// first, then the kernel's mapping, under the pager's lock so that no
/// fault maps a page between the two.
pub(crate) fn discard_locked(pager: &Mutex<Pager>, base: usize, pages: std::ops::Range<usize>) {
    let _allow = crate::guard::Allow::new();
    let mut p = crate::pager::lock(pager);
    p.discard(pages.clone());
    // SAFETY: page-aligned pages of the region, whose contents the
    // program gave up.
    unsafe {
        crate::sys_madvise(
            (base + pages.start * PAGE_SIZE) as *mut libc::c_void,
            pages.len() * PAGE_SIZE,
            libc::MADV_DONTNEED,
        )
    };
}

fn spawn_handler(pager: Arc<Mutex<Pager>>, uffd_fd: RawFd) -> Result<(JoinHandle<()>, crate::fds::Held), RuntimeError> {
    // SAFETY: eventfd with valid flags; the result is checked.
    let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if stop < 0 {
        return Err(os("eventfd"));
    }
    // SAFETY: a descriptor we own from here on.
    let stop = crate::fds::raise(unsafe { OwnedFd::from_raw_fd(stop) });
    let stop_fd = stop.raw();
    let thread = std::thread::Builder::new()
        .name("ccvm-pager".into())
        .spawn(move || crate::pager::run_events(pager, uffd_fd, stop_fd))
        .map_err(|source| RuntimeError::Os {
            what: "spawning the pager",
            source,
        })?;
    Ok((thread, stop))
}

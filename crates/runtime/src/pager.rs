//! The fault handler: one thread per region that serves every fault and
//! carries out the policy's evictions.
//!
//! # Choices
//!
//! * One handler thread serves faults one at a time. Two threads faulting
//!   on one page queue two events; the first is served, the copy wakes
//!   both, and the second finds the page mapped and only wakes.
//! * Evicting a page write-protects it (userfaultfd WP), copies it, then
//!   drops it (`MADV_DONTNEED`). A thread writing to it meanwhile blocks on
//!   the write-protect fault; its event is read after the eviction is done,
//!   and waking it makes it fault again on the now-missing page, which is
//!   served from the cache. So a write is never lost between the copy and
//!   the drop, and readers never block.
//! * Evictions run after the faulting thread has been woken, so its fault
//!   service time does not include them.
//! * A failure the program cannot be told of (a swap I/O error, a page
//!   that fails its checksum or does not decode) stops the process with a
//!   one-line message and exit status 3: the faulting thread is blocked in
//!   the kernel and no data can be given to it that is not the page's.

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccvm_codec::{Codec, PAGE_SIZE};
use ccvm_policy::{Action, Level, Policy};
use ccvm_store::{Store, StoreError, Stored, ENTRY_BYTES};
use ccvm_trace::TraceWriter;

use crate::aligned::AlignedBuf;
use crate::stats::{RuntimeStats, Timers};
use crate::swap::{SwapFile, SwapSlot};
use crate::uffd::{Fault, Uffd};

/// Exit status when paging cannot go on safely.
pub const FATAL_EXIT: i32 = 3;

#[derive(Clone, Copy)]
enum PageState {
    Untouched,
    Resident,
    Compressed,
    Swapped(SwapSlot),
}

pub(crate) struct Pager {
    pub uffd: Uffd,
    pub base: usize,
    pub ram_bytes: u64,
    pub store: Store,
    pub codec: Box<dyn Codec>,
    pub swap: SwapFile,
    pub policy: Box<dyn Policy>,
    pub trace: Option<TraceWriter>,
    pub shared: Arc<Mutex<RuntimeStats>>,
    state: Vec<PageState>,
    resident: usize,
    actions: Vec<Action>,
    /// Pages the swap file's cleaner moved, with their new slots.
    moved: Vec<(u64, SwapSlot)>,
    page: AlignedBuf,
    payload: AlignedBuf,
    stats: RuntimeStats,
    timers: Timers,
    published: Instant,
}

/// Stops the process: see the module docs.
fn fatal(what: impl std::fmt::Display) -> ! {
    eprintln!("ccvm: {what}; stopping");
    std::process::exit(FATAL_EXIT);
}

impl Pager {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        uffd: Uffd,
        base: usize,
        pages: usize,
        ram_bytes: u64,
        store: Store,
        codec: Box<dyn Codec>,
        swap: SwapFile,
        policy: Box<dyn Policy>,
        trace: Option<TraceWriter>,
        shared: Arc<Mutex<RuntimeStats>>,
    ) -> Pager {
        let stats = RuntimeStats {
            uncompressed_pages: policy.uncompressed_limit(),
            cache_budget: policy.cache_limit(),
            ..RuntimeStats::default()
        };
        Pager {
            uffd,
            base,
            ram_bytes,
            store,
            codec,
            swap,
            policy,
            trace,
            shared,
            state: vec![PageState::Untouched; pages],
            resident: 0,
            actions: Vec::new(),
            moved: Vec::new(),
            page: AlignedBuf::new(PAGE_SIZE),
            payload: AlignedBuf::new(PAGE_SIZE),
            stats,
            timers: Timers::new(),
            published: Instant::now(),
        }
    }

    fn addr(&self, page: usize) -> usize {
        self.base + page * PAGE_SIZE
    }

    /// Serves faults until `stop` becomes readable; returns the trace
    /// writer, if any, for the caller to finish.
    pub fn run(mut self, stop: RawFd) -> (RuntimeStats, Option<TraceWriter>) {
        let uffd_fd = self.uffd.raw();
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: uffd_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: stop,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: fds is a valid array of two pollfd.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                fatal(format!("poll on userfaultfd: {e}"));
            }
            loop {
                match self.uffd.read_fault() {
                    Ok(Some(fault)) => self.handle(fault),
                    Ok(None) => break,
                    Err(e) => fatal(format!("reading userfaultfd events: {e}")),
                }
            }
            if self.published.elapsed() > Duration::from_millis(20) {
                self.publish();
            }
            if fds[1].revents & libc::POLLIN != 0 {
                break;
            }
        }
        self.publish();
        let stats = self.shared.lock().expect("stats").clone();
        (stats, self.trace.take())
    }

    fn publish(&mut self) {
        self.published = Instant::now();
        let mut s = self.stats.clone();
        s.swap = self.swap.stats;
        s.store = self.store.stats();
        s.latency_cache = Timers::summary(&self.timers.cache);
        s.latency_disk = Timers::summary(&self.timers.disk);
        s.latency_zero = Timers::summary(&self.timers.zero);
        *self.shared.lock().expect("stats") = s;
    }

    fn handle(&mut self, fault: Fault) {
        let page = fault.addr.wrapping_sub(self.base) / PAGE_SIZE;
        if page >= self.state.len() {
            return;
        }
        if fault.write_protect {
            self.stats.faults_repeat += 1;
            self.wake(page);
        } else {
            self.serve(page, fault.write);
        }
    }

    fn wake(&self, page: usize) {
        if let Err(e) = self.uffd.wake(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd wake: {e}"));
        }
    }

    fn map_page(&self, page: usize) {
        // SAFETY: the source is our own 4096-byte buffer; the destination
        // is a page of the registered region that is not mapped.
        let r = unsafe { self.uffd.copy(self.page.as_ptr(), self.addr(page), PAGE_SIZE) };
        match r {
            Ok(()) => {}
            Err(nix::errno::Errno::EEXIST) => self.wake(page),
            Err(e) => fatal(format!("userfaultfd copy: {e}")),
        }
    }

    fn serve(&mut self, page: usize, write: bool) {
        let started = Instant::now();
        let from = match self.state[page] {
            PageState::Resident => {
                self.stats.faults_repeat += 1;
                self.wake(page);
                return;
            }
            PageState::Untouched => {
                match self.uffd.zeropage(self.addr(page), PAGE_SIZE) {
                    Ok(()) => {}
                    Err(nix::errno::Errno::EEXIST) => self.wake(page),
                    Err(e) => fatal(format!("userfaultfd zeropage: {e}")),
                }
                self.stats.faults_zero += 1;
                Level::New
            }
            PageState::Compressed => {
                if let Err(e) = self.store.get(page as u64, &mut self.page) {
                    fatal(e);
                }
                self.store.remove(page as u64);
                self.map_page(page);
                self.stats.faults_cache += 1;
                self.stats.pages_decompressed += 1;
                Level::Compressed
            }
            PageState::Swapped(slot) => {
                let stored = match self.swap.read(page as u64, slot, &mut self.payload) {
                    Ok(s) => s,
                    Err(e) => fatal(e),
                };
                self.decode(page, stored);
                self.map_page(page);
                self.stats.faults_disk += 1;
                Level::Disk
            }
        };
        let ns = started.elapsed().as_nanos() as u64;
        let timer = match from {
            Level::New => &mut self.timers.zero,
            Level::Compressed => &mut self.timers.cache,
            _ => &mut self.timers.disk,
        };
        timer.saturating_record(ns.max(1));
        self.state[page] = PageState::Resident;
        self.resident += 1;
        if let Some(t) = &mut self.trace {
            if let Err(e) = t.reference(page as u64, write) {
                fatal(format!("writing the trace: {e}"));
            }
        }
        self.policy.touch(page as u64, from, &mut self.actions);
        self.run_actions();
        self.keep_within_ram();
    }

    /// Rebuilds a page read from disk into `self.page`.
    fn decode(&mut self, page: usize, stored: Stored) {
        match stored {
            Stored::Same(v) => self
                .page
                .chunks_exact_mut(8)
                .for_each(|w| w.copy_from_slice(&v.to_le_bytes())),
            Stored::Raw => self.page.copy_from_slice(&self.payload),
            Stored::Compressed(n) => {
                if let Err(e) = self.codec.decompress(&self.payload[..n], &mut self.page) {
                    fatal(format!("page {page} read from the swap file does not decode: {e}"));
                }
                self.stats.pages_decompressed += 1;
            }
        }
    }

    fn run_actions(&mut self) {
        let mut i = 0;
        while i < self.actions.len() {
            let action = self.actions[i];
            i += 1;
            self.act(action);
        }
        self.actions.clear();
    }

    /// Copies a resident page out and unmaps it (see the module docs).
    fn evict(&mut self, page: usize) {
        let addr = self.addr(page);
        if let Err(e) = self.uffd.write_protect(addr, PAGE_SIZE) {
            fatal(format!("userfaultfd write-protect: {e}"));
        }
        // SAFETY: the page is mapped (resident) and write-protected, so no
        // thread changes it while it is copied.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, self.page.as_mut_ptr(), PAGE_SIZE) };
        // SAFETY: a page-aligned range of our own mapping.
        if unsafe { libc::madvise(addr as *mut libc::c_void, PAGE_SIZE, libc::MADV_DONTNEED) } != 0 {
            fatal(format!("madvise: {}", std::io::Error::last_os_error()));
        }
        self.resident -= 1;
    }

    fn write_swap(&mut self, page: usize, stored: Stored, from_payload: bool) {
        let bytes: &[u8] = match (stored, from_payload) {
            (Stored::Same(_), _) => &[],
            (Stored::Compressed(n), true) => &self.payload[..n],
            (_, true) => &self.payload,
            (_, false) => &self.page,
        };
        match self.swap.write(page as u64, stored, bytes) {
            Ok(slot) => self.state[page] = PageState::Swapped(slot),
            Err(e) => fatal(e),
        }
        let mut moved = std::mem::take(&mut self.moved);
        if let Err(e) = self.swap.clean(&mut moved) {
            fatal(e);
        }
        for (p, slot) in moved.drain(..) {
            debug_assert!(matches!(self.state[p as usize], PageState::Swapped(_)));
            self.state[p as usize] = PageState::Swapped(slot);
        }
        self.moved = moved;
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Compress(p) => {
                let page = p as usize;
                self.evict(page);
                if let Some(t) = &mut self.trace {
                    if let Err(e) = t.image(p, &self.page) {
                        fatal(format!("writing the trace: {e}"));
                    }
                }
                self.compress(page);
            }
            Action::SwapOut(p) => {
                let page = p as usize;
                self.evict(page);
                self.write_swap(page, Stored::Raw, false);
                self.stats.pages_swapped_raw += 1;
            }
            Action::Spill(p) => {
                let page = p as usize;
                let stored = match self.store.take_stored(p, &mut self.payload) {
                    Ok(s) => s,
                    Err(e) => fatal(format!("compression cache lost page {page}: {e}")),
                };
                self.write_swap(page, stored, true);
                self.stats.pages_spilled += 1;
            }
        }
    }

    /// Puts the evicted page (in `self.page`) into the cache, spilling to
    /// make room as the policy chooses, or to disk raw if it cannot fit.
    fn compress(&mut self, page: usize) {
        loop {
            match self.store.put(page as u64, &self.page) {
                Ok(len) => {
                    self.state[page] = PageState::Compressed;
                    self.stats.pages_compressed += 1;
                    self.stats.bytes_in += PAGE_SIZE as u64;
                    self.stats.bytes_out += len as u64;
                    self.policy
                        .compressed(page as u64, (len + ENTRY_BYTES) as u64, &mut self.actions);
                    return;
                }
                Err(StoreError::Full { .. } | StoreError::OutOfMemory) => {
                    let mut spills = Vec::new();
                    if !self.policy.make_room(&mut spills) {
                        self.write_swap(page, Stored::Raw, false);
                        self.policy.swapped_instead(page as u64);
                        self.stats.pages_swapped_raw += 1;
                        return;
                    }
                    for s in spills {
                        self.act(s);
                    }
                }
                Err(e) => fatal(e),
            }
        }
    }

    /// Keeps uncompressed pages plus the cache's real memory (slack and
    /// bookkeeping included) within the RAM budget.
    fn keep_within_ram(&mut self) {
        let over = |p: &Pager| p.resident as u64 * PAGE_SIZE as u64 + p.store.memory_used() > p.ram_bytes;
        if !over(self) {
            return;
        }
        self.store.compact();
        while over(self) && self.policy.make_room(&mut self.actions) {
            self.run_actions();
        }
    }
}

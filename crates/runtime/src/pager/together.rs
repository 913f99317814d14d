//! Evictions carried out together while the process runs other threads:
//! one TLB flush for a batch of pages instead of one for each.
//!
//! Taking a page out of a page table flushes it from the TLB of every CPU
//! where a thread of the process runs, by an interrupt the caller waits
//! for. On this 2-CPU virtual machine, with a second thread running on
//! the other CPU, that is about 19 µs a page, by `UFFDIO_MOVE` as by
//! `MADV_DONTNEED` (`docs/results.md`, "Frames moved while other threads
//! run"); it was the largest single cost of a Go program paged in 40 MiB.
//! The kernel's own reclaim flushes once for a batch of pages; so does
//! `process_madvise(MADV_DONTNEED)` over a vector of pages (Linux 6.16+),
//! but it drops what the pages hold, and a write between a copy and the
//! drop would be lost.
//!
//! # Design
//!
//! The pages are *spliced* first: `vmsplice` puts a reference to each
//! page's frame into a pipe of ccvm's. Then one `process_madvise` drops
//! them all from the page table, with one flush. A thread that wrote a
//! page before the drop wrote into the very frame the pipe refers to, and
//! after it none can write; reading the pipe then gives every page as it
//! last was. So the pages leave with their last bytes and one interrupt
//! for the batch: 1.8 µs a page in batches of 32, against 18 for a page
//! moved alone, with a second thread running (`docs/programs/flushes.c`).
//!
//! # Choices
//!
//! * An eviction the policy asks for is *deferred*: the page is counted
//!   out of memory at once (the policy and the budget see it leave), stays
//!   mapped, and leaves with the batch, at most [`BATCH`] pages (128 KiB)
//!   later. So memory may exceed the budget by that much for a while.
//! * The batch leaves when it is full, and before anything other than a
//!   fault is done under the pager's lock (`crate::pager::lock`): an
//!   `mprotect`, a discard, a fork, a pin's settling. A deferred page is
//!   thus still resident and read-write whenever it leaves, and no other
//!   path meets a page half gone.
//! * Only where nothing else can go wrong: faults served by SIGBUS (so
//!   that `vmsplice` of a page the program dropped fails with `EFAULT`
//!   instead of waiting on this very pager), no trace being written (its
//!   order of events would change), no traps or write scans (their pages
//!   are not plainly mapped), and no fork since the region was made (a
//!   frame shared with another process is copied on a write, and the write
//!   would land in a frame the pipe does not hold).
//! * A page the pipe refuses (the program dropped it, or the pipe is full)
//!   leaves alone, by the path a single eviction takes.
//! * The policy's watched pages (`Action::Watch`: kept, but unmapped so
//!   that their next touch is seen) leave with the batch too, their bytes
//!   copied into their shadow slots (`UFFDIO_COPY` into an empty slot
//!   flushes nothing), and a touched one is copied back into the region
//!   instead of moved; its slot's frame is dropped with the next batch.
//!   Moved, each watched page cost two flushes: on the Go program the
//!   machine's TLB shootdowns over a run fell from 1,071 and 5,731 to 327
//!   and 265 (`/proc/interrupts`, two runs each way).

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::Action;

use super::evict::Evicted;
use super::observe::Event;
use super::{PageState, Pager};
use crate::aligned::AlignedBuf;
use crate::fds::OwnProcessFd;

/// A deferred eviction: the page and the policy's action.
type Deferred = (usize, Action);

/// Most pages deferred before they leave together.
pub(super) const BATCH: usize = 32;

/// The deferred evictions and what carries them out.
pub(super) struct Together {
    /// Deferred evictions, oldest first: the page and the policy's action.
    waiting: Vec<Deferred>,
    /// The pipe's ends (read, write) of the process that made them.
    pipe: Option<(u32, crate::fds::Held, crate::fds::Held)>,
    /// This process's pidfd, for `process_madvise`.
    pidfd: OwnProcessFd,
    /// Buffers the pipe is read into, kept between batches.
    buffers: Vec<AlignedBuf>,
    /// Shadow slots whose frames were copied back into the region (a
    /// watched page touched): dropped with the next batch.
    stale: Vec<usize>,
    /// The kernel refused a batch's pipe or drop once: never again.
    refused: bool,
    /// The region was shared with a forked process.
    pub(super) forked: bool,
}

impl Together {
    pub(super) fn new() -> Together {
        Together {
            waiting: Vec::new(),
            pipe: None,
            pidfd: OwnProcessFd::new(),
            buffers: Vec::new(),
            stale: Vec::new(),
            refused: false,
            forked: false,
        }
    }

    /// Whether `page`'s eviction is deferred.
    pub(super) fn is_waiting(&self, page: usize) -> bool {
        self.waiting.iter().any(|&(p, _)| p == page)
    }

    /// Whether any page of `pages` has its eviction (or watch) deferred.
    pub(super) fn waits_within(&self, pages: &std::ops::Range<usize>) -> bool {
        self.waiting.iter().any(|(p, _)| pages.contains(p))
    }

    /// Keeps `buffer` for a later batch, up to a batch's worth.
    pub(super) fn keep(&mut self, buffer: AlignedBuf) {
        if self.buffers.len() < BATCH {
            self.buffers.push(buffer);
        }
    }

    /// The pipe's (read, write) descriptors for this process, made and
    /// sized for a batch if need be; `None` if the kernel refuses.
    fn pipe(&mut self) -> Option<(i32, i32)> {
        let pid = std::process::id();
        if self.pipe.as_ref().is_none_or(|(p, _, _)| *p != pid) {
            self.pipe = open_pipe().map(|(r, w)| (pid, crate::fds::raise(r), crate::fds::raise(w)));
        }
        self.pipe.as_ref().map(|(_, r, w)| (r.in_use().fd(), w.in_use().fd()))
    }
}

/// A pipe that holds a batch, both ends non-blocking; `None` if it
/// cannot be made or sized.
fn open_pipe() -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: a two-int array for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return None;
    }
    // SAFETY: new descriptors we own.
    let (r, w) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: a pipe we own.
    let size = unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, (BATCH * PAGE_SIZE) as i32) };
    (size >= (BATCH * PAGE_SIZE) as i32).then_some((r, w))
}

impl Pager {
    /// Whether eviction `action` of `page` may wait for the batch (see the
    /// module docs).
    pub(super) fn may_defer(&mut self, page: usize) -> bool {
        matches!(self.pages[page], PageState::Uncompressed) && self.protections.read_write(page) && self.may_batch()
    }

    /// Whether pages leave in batches now: the process runs other threads
    /// and nothing rules batches out (see the module docs).
    pub(super) fn may_batch(&mut self) -> bool {
        if self.together.refused
            || self.together.forked
            || self.parts.fault_thread
            || !self.parts.copy_in_when_threaded
            || self.traps.is_some()
            || self.write_scan.is_some()
            || self.observers.tracing.is_some()
        {
            return false;
        }
        let own = usize::from(self.share.trimming);
        self.threads.others(own)
    }

    /// Defers eviction `action` of `page` (see [`Pager::may_defer`]), or
    /// its watch (`Action::Watch`: parked with the batch); the batch leaves
    /// if it is full.
    pub(super) fn defer(&mut self, page: usize, action: Action) {
        let watch = matches!(action, Action::Watch(_));
        if !watch {
            self.evicted_one(page);
        }
        match self.together.waiting.iter_mut().find(|(p, _)| *p == page) {
            // A watch waiting for a page that now leaves: the eviction
            // takes its place.
            Some(entry) if !watch => entry.1 = action,
            Some(_) => {}
            None => self.together.waiting.push((page, action)),
        }
        if self.together.waiting.len() >= BATCH {
            self.evict_deferred();
        }
    }

    /// Whether watched page `page`, touched, should be copied back from
    /// its slot (no flush) rather than moved (a flush while other threads
    /// run); its slot's frame is then dropped with the next batch.
    pub(super) fn copy_back_watched(&mut self, page: usize) -> bool {
        let frames = self.frames.as_ref().expect("a trapped page has frames");
        let (src, dst) = (frames.slot(page), self.addr(page));
        // SAFETY: the source is the page's frame in our shadow; the
        // destination a missing page of the region.
        match unsafe { self.parts.uffd.copy(src as *const u8, dst, PAGE_SIZE) } {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(_) => return false,
        }
        self.together.stale.push(page);
        if self.together.stale.len() >= BATCH {
            self.evict_deferred();
        }
        true
    }

    /// Carries out every deferred eviction (see the module docs).
    pub(crate) fn evict_deferred(&mut self) {
        if self.together.waiting.is_empty() && self.together.stale.is_empty() {
            return;
        }
        // The calls below are the pager's own, whoever locked it (an
        // intercepted one would wait for this very pager).
        let _allow = crate::guard::Allow::new();
        let waiting = std::mem::take(&mut self.together.waiting);
        let mut going = Vec::with_capacity(waiting.len());
        let mut alone_first = Vec::new();
        for &(page, action) in &waiting {
            let watch = matches!(action, Action::Watch(_));
            if watch && (!matches!(self.pages[page], PageState::Uncompressed) || self.pinned(page)) {
                // Gone meanwhile, or in use by a system call: not watched.
                continue;
            }
            if !matches!(self.pages[page], PageState::Uncompressed) {
                // Not plainly mapped any more: it leaves as one page does.
                debug_assert!(false, "a deferred page {page} changed state");
                alone_first.push((page, action));
            } else if self.pinned(page) {
                // A system call is using it: it stays (see `act`).
                self.pages.resident += 1;
                self.keep_mapped(action);
            } else {
                going.push((page, action));
            }
        }
        let (spliced, mut alone) = self.splice(&going);
        alone.extend(alone_first);
        // Watches the pipe refused are let go: the page stays mapped.
        alone.retain(|(_, action)| !matches!(action, Action::Watch(_)));
        let mut buffers = std::mem::take(&mut self.together.buffers);
        if !spliced.is_empty() || !self.together.stale.is_empty() {
            self.drop_spliced(&spliced);
        }
        if !spliced.is_empty() {
            while buffers.len() < spliced.len() {
                buffers.push(AlignedBuf::new(PAGE_SIZE));
            }
            self.read_spliced(&mut buffers[..spliced.len()]);
            self.observers.observe(Event::EvictedTogether(spliced.len() as u64));
        }
        let rest = buffers.split_off(spliced.len());
        self.together.buffers.extend(rest);
        for (&(page, action), buffer) in spliced.iter().zip(buffers) {
            if matches!(action, Action::Watch(_)) {
                self.watched_from(page, &buffer);
                self.together.keep(buffer);
            } else {
                self.after_evict(page, action, Evicted::Copied(buffer));
            }
        }
        for (page, action) in alone {
            // As a single eviction: counted out again there.
            self.pages.resident += 1;
            self.evict_now(page, action);
        }
        let mut waiting = waiting;
        waiting.clear();
        if self.together.waiting.is_empty() {
            // Its capacity is kept for the next batch.
            self.together.waiting = waiting;
        }
    }

    /// Puts references to the frames of `going` into the pipe, in order:
    /// the pages spliced, and those that must leave alone.
    fn splice(&mut self, going: &[Deferred]) -> (Vec<Deferred>, Vec<Deferred>) {
        let Some((_, w)) = self.together.pipe().filter(|_| !going.is_empty()) else {
            if !going.is_empty() {
                self.together.refused = true;
            }
            return (Vec::new(), going.to_vec());
        };
        let (mut spliced, mut alone) = (Vec::with_capacity(going.len()), Vec::new());
        let mut next = 0;
        while next < going.len() {
            let iov: Vec<libc::iovec> = going[next..].iter().map(|&(p, _)| self.iovec(p)).collect();
            let args = [
                w as u64,
                iov.as_ptr() as u64,
                iov.len() as u64,
                libc::SPLICE_F_NONBLOCK as u64,
                0,
                0,
            ];
            // SAFETY: the iovecs name resident pages of the region; the
            // pipe holds references to their frames, nothing is written.
            let r = unsafe { crate::guard::raw_syscall(libc::SYS_vmsplice, args) };
            let whole = if r > 0 { r as usize / PAGE_SIZE } else { 0 };
            if r > 0 && !(r as usize).is_multiple_of(PAGE_SIZE) {
                // Part of a page: the kernel takes whole pages of whole
                // iovecs, so the books no longer match what the pipe holds.
                super::fatal("vmsplice took part of a page");
            }
            spliced.extend_from_slice(&going[next..next + whole]);
            next += whole;
            if next < going.len() && whole < iov.len() {
                // Refused (dropped by the program, or the pipe is full):
                // this one leaves alone.
                alone.push(going[next]);
                next += 1;
            }
        }
        (spliced, alone)
    }

    /// Watched page `page` left the region with a batch, its bytes in
    /// `bytes`: they go into its shadow slot (an empty slot, filled
    /// without a flush), as a parked frame would be, so that its next
    /// touch faults and is seen. If the slot takes nothing, the page is
    /// mapped back where it was, unwatched.
    fn watched_from(&mut self, page: usize, bytes: &[u8]) {
        let frames = self.frames.as_ref().expect("a watch needs frames");
        let slot = frames.slot(page);
        // SAFETY: our own page of bytes, copied into an empty slot of our
        // shadow, or back into the page's own place in the region.
        if unsafe { self.parts.uffd.copy(bytes.as_ptr(), slot, PAGE_SIZE) }.is_ok() {
            self.pages[page] = PageState::Trapped;
            self.observers.observe(Event::Watched);
            return;
        }
        // SAFETY: as above.
        if let Err(e) = unsafe { self.parts.uffd.copy(bytes.as_ptr(), self.addr(page), PAGE_SIZE) } {
            super::fatal(format!("mapping watched page {page} back: {e}"));
        }
    }

    fn iovec(&self, page: usize) -> libc::iovec {
        libc::iovec {
            iov_base: self.addr(page) as *mut libc::c_void,
            iov_len: PAGE_SIZE,
        }
    }

    /// Drops the spliced pages from the page table: in one call, with one
    /// flush, where the kernel allows it.
    fn drop_spliced(&mut self, spliced: &[Deferred]) {
        let mut iov: Vec<libc::iovec> = spliced.iter().map(|&(p, _)| self.iovec(p)).collect();
        let stale = std::mem::take(&mut self.together.stale);
        if let Some(frames) = &self.frames {
            iov.extend(stale.iter().map(|&p| libc::iovec {
                iov_base: frames.slot(p) as *mut libc::c_void,
                iov_len: PAGE_SIZE,
            }));
        }
        // SAFETY: resident pages of the region whose frames the pipe holds,
        // and slots whose frames were copied back: nothing needs what they
        // hold.
        if !unsafe { crate::frames::drop_pages(&mut self.together.pidfd, &iov, true) } {
            // Refused or partly done (finished one by one): batches stop.
            self.together.refused = true;
        }
    }

    /// Reads the spliced pages' bytes out of the pipe into `buffers`.
    fn read_spliced(&mut self, buffers: &mut [AlignedBuf]) {
        let Some((r, _)) = self.together.pipe() else {
            super::fatal("the eviction pipe went away");
        };
        let mut iov: Vec<libc::iovec> = buffers
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: PAGE_SIZE,
            })
            .collect();
        let mut first = 0;
        while first < iov.len() {
            let args = [
                r as u64,
                iov[first..].as_ptr() as u64,
                (iov.len() - first) as u64,
                0,
                0,
                0,
            ];
            // SAFETY: our own buffers, a page each.
            let n = unsafe { crate::guard::raw_syscall(libc::SYS_readv, args) };
            if n <= 0 {
                super::fatal(format!("reading evicted pages back from their pipe: error {}", -n));
            }
            let mut n = n as usize;
            while n > 0 {
                let v = &mut iov[first];
                let k = n.min(v.iov_len);
                v.iov_base = v.iov_base.wrapping_byte_add(k);
                v.iov_len -= k;
                n -= k;
                if v.iov_len == 0 {
                    first += 1;
                }
            }
        }
    }
}

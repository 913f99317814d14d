//! What the pager does around a `fork`: the child of a paged process is
//! paged too, from its copy of the parent's state at the fork.
//!
//! # Choices
//!
//! * A forked child does not inherit the userfaultfd registration (without
//!   `UFFD_FEATURE_EVENT_FORK`, which needs `CAP_SYS_PTRACE` and blocks the
//!   fork until a reader takes the event), so a page that is not in its
//!   memory would read as zeros. The child's copy of the pager therefore
//!   opens a userfaultfd of its own and registers the region before
//!   `fork` returns to the program (the `pthread_atfork` child handler,
//!   [`Pager::adopt_in_child`]); the pages the parent held in memory are
//!   the child's by copy-on-write, and the rest it serves from its own
//!   copies of the store (the process's memory, copied on write like the
//!   rest) and of the swap file's index.
//! * The swap file is shared, not copied: the clusters that hold pages at
//!   the fork are frozen in both processes, so nothing the parent later
//!   does changes what the child reads, and the other way round (see the
//!   `swap` module). The parent does not wait for the child.
//! * The child compresses in its own thread: the helper process and its
//!   ring are the parent's ([`Helper::abandon`](crate::compressor::Helper::abandon)). Pages in the ring are
//!   compressed by the parent before the fork, so neither process has a
//!   page only there. A helper forked from the child would share the
//!   child's resident pages: they could not be moved out (`EBUSY`), and
//!   the helper would keep each one the child dropped. A helper for a
//!   child must start from a fresh program, not a fork (not built).
//! * Trapped pages live in the shadow, which a child does not inherit
//!   (`MADV_DONTFORK`): they are mapped back before the fork, and the child
//!   makes a shadow of its own. So are watched ones
//!   (`ccvm_policy::Action::Watch`), whose next touch then goes unseen: the
//!   policy's sample of what paging without a cache would cost misses at
//!   most one fault per page watched at the fork.
//! * Pages mapped as the zero page lose their write protection in the
//!   child (the kernel drops it with the registration); the child
//!   protects them again, so that their first write still counts.
//! * Parent and child share one budget, `--ram`, for the whole tree,
//!   divided as the `tree` module says (max-min fair: each may hold what
//!   the others leave, and never less than an equal share). A page both
//!   processes map is one page of memory until either writes it; the
//!   budget counts it in each, so the tree holds at most `--ram` (and a
//!   little more between two reads of the shared table), usually less.
//! * Only SIGBUS mode pages children: in event mode the handler thread,
//!   which the child does not inherit, would have to be started inside
//!   `fork`, and with a trace the child would share the parent's trace
//!   file. A child of a parent with write scans is paged without them:
//!   its own userfaultfd has no asynchronous write protection, and the
//!   kernel clears the parent's marks in the child's page tables when the
//!   registration is not inherited, so its replacement is in fault order.
//!   There, and wherever the child
//!   cannot get a userfaultfd, the child writes every page held
//!   compressed or on disk into place ([`Pager::materialize_in_child`])
//!   and runs unpaged, as it did before children were paged; it reads
//!   only its own copies and frozen clusters, so that too is safe without
//!   the parent waiting.

use super::observe::{Event, Statistics};
use super::{fatal, PageState, Pager, Target};
use crate::frames::Frames;
use crate::protections::FOREIGN;
use crate::uffd::Uffd;
use ccvm_codec::PAGE_SIZE;

/// `mprotect` of one page, straight to the kernel; whether it was done.
fn mprotect(addr: *mut u8, prot: i32) -> bool {
    // SAFETY: one page of the region, mapped in this process.
    unsafe {
        crate::guard::raw_syscall(
            libc::SYS_mprotect,
            [addr as u64, PAGE_SIZE as u64, prot as u64, 0, 0, 0],
        ) == 0
    }
}

impl Pager {
    /// Leaves no page in the helper's ring, trapped in the shadow, or only
    /// in the swap file's buffer, so that a child forked now needs none of
    /// them.
    pub(crate) fn settle_for_fork(&mut self) {
        self.evict_deferred();
        // Frames shared with a child from here on: no batches (`together`).
        self.together.forked = true;
        self.collect_finished();
        self.run_actions();
        while let Some(page) = self.helper.as_ref().and_then(|h| h.first_waiting()) {
            self.observers.observe(Event::Pending);
            self.complete_pending(page as usize);
            self.run_actions();
        }
        for page in self.pages.written_runs().into_iter().flatten() {
            if matches!(self.pages[page], PageState::Trapped) {
                self.map_page(page, Target::Frame(page));
                self.pages[page] = PageState::Uncompressed;
                if let Some(traps) = &mut self.traps {
                    traps.untrap(page as u64);
                }
            }
        }
        if let Err(e) = self.parts.swap.settle_for_fork() {
            fatal(e);
        }
    }

    /// Whether a child forked now can be paged (see the module docs).
    pub(crate) fn child_can_be_paged(&self, signal_mode: bool) -> bool {
        signal_mode && self.observers.tracing.is_none()
    }

    /// In the parent after a fork.
    pub(crate) fn after_fork_parent(&mut self) {
        self.parts.swap.after_fork_parent();
    }

    /// In a forked child, before it runs on: makes this copy of the
    /// parent's pager the child's own (see the module docs). The counters
    /// start again from zero, so that the child's report is its own.
    ///
    /// # Errors
    ///
    /// A message if the child cannot have a userfaultfd of its own or
    /// register the region with it; the pager is then as it was, and the
    /// caller materializes instead.
    pub(crate) fn adopt_in_child(&mut self) -> Result<(), String> {
        let uffd = Uffd::open_with(true, false).map_err(|e| e.to_string())?;
        // The region's pages, less those another mapping replaced.
        let pages = self.pages.len();
        let mut start = 0;
        let mut runs = Vec::new();
        for (run, _) in self
            .protections
            .within(0..pages)
            .into_iter()
            .filter(|&(_, p)| p == FOREIGN)
        {
            if run.start > start {
                runs.push(start..run.start);
            }
            start = run.end;
        }
        if start < pages {
            runs.push(start..pages);
        }
        for run in runs {
            if !uffd.register(self.addr(run.start), run.len() * PAGE_SIZE) {
                return Err(format!("registering pages {run:?} of the region in the forked child"));
            }
        }
        // From here on the child's: the parent's descriptor closes here.
        self.parts.uffd = uffd;
        // The child's descriptor has no asynchronous write protection (and
        // the kernel dropped the parent's marks from the child's page
        // tables with the registration), so it replaces in fault order.
        self.write_scan = None;
        self.parts.swap.after_fork_child();
        if let Some(helper) = self.helper.take() {
            helper.abandon();
        }
        if let Some(old) = self.frames.take() {
            // Its mapping is not the child's (`MADV_DONTFORK`): forget it
            // rather than unmap whatever may be there now.
            std::mem::forget(old);
            self.frames = Frames::new(&self.parts.uffd, pages);
        }
        if self.frames.is_none() {
            self.traps = None;
        }
        // Zero pages: protected again, a run at a time.
        for written in self.pages.written_runs() {
            let mut page = written.start;
            while page < written.end {
                if !matches!(self.pages[page], PageState::Zero) {
                    page += 1;
                    continue;
                }
                let first = page;
                while page < written.end && matches!(self.pages[page], PageState::Zero) {
                    page += 1;
                }
                let (addr, len) = (self.addr(first), (page - first) * PAGE_SIZE);
                if let Err(e) = self.parts.uffd.write_protect(addr, len) {
                    fatal(format!("protecting zero pages in the forked child: {e}"));
                }
            }
        }
        self.observers.statistics =
            Statistics::new(self.parts.policy.uncompressed_limit(), self.parts.policy.cache_limit());
        Ok(())
    }

    /// In a forked child: writes every page held compressed or in the swap
    /// file into its place in the region (which the child has unregistered)
    /// and forgets the helper, which is the parent's. Returns the pages
    /// written. Afterwards the pager must not be used.
    pub(crate) fn materialize_in_child(&mut self) -> usize {
        if let Some(helper) = self.helper.take() {
            helper.abandon();
        }
        let mut written = 0;
        for page in self.pages.written_runs().into_iter().flatten() {
            if matches!(
                self.pages[page],
                PageState::New | PageState::Zero | PageState::Uncompressed
            ) {
                continue;
            }
            let addr = self.addr(page) as *mut u8;
            let prot = self.protections.of(page);
            if prot == FOREIGN {
                continue;
            }
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            // A page the program protected is opened for the write, then
            // given its protection back (the child has one thread here).
            let reprotect = prot != rw && mprotect(addr, rw);
            // SAFETY: a page of the region, which is mapped in the child
            // and not registered: a write allocates it.
            let out = unsafe { std::slice::from_raw_parts_mut(addr, PAGE_SIZE) };
            match self.pages[page] {
                PageState::Compressed => {
                    if let Err(e) = self.parts.store.get(page as u64, out) {
                        fatal(e);
                    }
                }
                PageState::Disk(i) => {
                    let slot = self.pages.disk.take(i);
                    let stored = match self.parts.swap.read(page as u64, slot, &mut self.payload) {
                        Ok(s) => s,
                        Err(e) => fatal(e),
                    };
                    self.decode_into(page, stored, out);
                }
                PageState::Pending | PageState::Trapped => {
                    fatal(format!("page {page} was not settled before the fork"))
                }
                PageState::New | PageState::Zero | PageState::Uncompressed => continue,
            }
            if reprotect {
                mprotect(addr, prot);
            }
            self.pages[page] = PageState::Uncompressed;
            written += 1;
        }
        written
    }
}

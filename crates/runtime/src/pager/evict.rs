//! Carrying out the policy's evictions: a resident page taken out of the
//! region (moved to its shadow slot, or copied out under write
//! protection), then handed to the helper's ring, compressed into the
//! store, or written to the swap file; and spills of compressed pages to
//! disk. The fault path in the parent module calls [`Pager::run_actions`]
//! after telling the policy of a touch.

use std::sync::atomic::Ordering;

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::{Action, Level};
use ccvm_store::{StoreError, Stored};

use super::observe::Event;
use super::{fatal, PageState, Pager};
use crate::aligned::AlignedBuf;
use crate::frames::Parked;
use crate::swap::{SwapFile, SwapSlot};

/// An evicted page's bytes, owned by the eviction that carries it out:
/// lent to the trace, the helper's ring, the store or the swap file while
/// the pager goes on (spilling other pages to make room for it), then
/// handed back with [`Pager::done_with`]. Owning them, rather than
/// borrowing a buffer of the pager's, is what lets the eviction call the
/// pager's other parts while it holds them.
pub(super) enum Evicted {
    /// Copied out of the region into a buffer of its own.
    Copied(AlignedBuf),
    /// Its frame, moved to its shadow slot (see the `frames` module).
    Parked(Parked),
}

impl Evicted {
    /// The page's bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Evicted::Copied(buffer) => buffer,
            Evicted::Parked(frame) => frame.bytes(),
        }
    }
}

impl Pager {
    pub(super) fn run_actions(&mut self) {
        let mut i = 0;
        while i < self.actions.len() {
            let action = self.actions[i];
            i += 1;
            self.act(action);
        }
        self.actions.clear();
    }

    /// Takes a resident page out of the region: moved into its shadow
    /// slot, or, where the kernel cannot move it, copied out under write
    /// protection and dropped (see the module docs). Returns its bytes, or
    /// `None` if it must stay mapped.
    pub(super) fn evict(&mut self, page: usize) -> Option<Evicted> {
        let addr = self.addr(page);
        if matches!(self.pages[page], PageState::Trapped) {
            self.evicted_one(page);
            let frames = self.frames.as_ref().expect("a trapped page has frames");
            return Some(Evicted::Parked(frames.parked(page)));
        }
        if !self.protections.readable(page) {
            // PROT_NONE, or no longer the region's: it cannot be copied out.
            return None;
        }
        let movable = self.protections.read_write(page);
        if !movable && self.parts.uffd.writes_async() {
            // Write protection would not stop a writer (see `written`).
            return None;
        }
        if let Some(frames) = self.frames.as_mut().filter(|_| movable) {
            let mut parked = frames.park(&self.parts.uffd, page, addr).is_ok();
            if !parked && crate::uffd::mapped(addr, PAGE_SIZE) == Some(false) {
                // Not there to move: dropped without the pager being told
                // (a drop it is told of takes the page out of the books; see
                // `Pager::discard`), so it reads as zeros. The write below
                // would fault on the region inside this fault's service:
                // SIGBUS, or a pager thread waiting on itself (node and the
                // JVM met both under write scans).
                self.evicted_one(page);
                return Some(self.zeros());
            }
            if !parked && self.parts.uffd.writes_async() {
                // Protection would not stop a writer here (see the
                // `written` module). The kernel refuses to move a page
                // shared with a forked child: writing nothing to it makes
                // it this process's own, and then it moves. One pinned by
                // a device or I/O stays.
                // SAFETY: a resident page of the region, mapped writable; a
                // compare-and-swap of a word with itself changes no byte
                // another thread sees, but is a write to the CPU (an add of
                // 0 would be compiled to a load).
                let word = unsafe { &*(addr as *const std::sync::atomic::AtomicU64) };
                let v = word.load(Ordering::Relaxed);
                let _ = word.compare_exchange(v, v, Ordering::SeqCst, Ordering::Relaxed);
                parked = frames.park(&self.parts.uffd, page, addr).is_ok();
                if !parked {
                    return None;
                }
            }
            if parked {
                let frame = frames.parked(page);
                self.evicted_one(page);
                return Some(Evicted::Parked(frame));
            }
        }
        self.evicted_one(page);
        if let Err(e) = self.parts.uffd.write_protect(addr, PAGE_SIZE) {
            fatal(format!("userfaultfd write-protect: {e}"));
        }
        if crate::uffd::mapped(addr, PAGE_SIZE) == Some(false) {
            // Dropped by the program (`MADV_DONTNEED`): it reads as zeros,
            // and reading it here would fault on the region.
            return Some(self.zeros());
        }
        let mut copy = self.copies.take().unwrap_or_else(|| AlignedBuf::new(PAGE_SIZE));
        // SAFETY: the page is mapped (resident) and write-protected, so no
        // thread changes it while it is copied.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, copy.as_mut_ptr(), PAGE_SIZE) };
        // SAFETY: a page-aligned range of our own mapping.
        if unsafe { crate::sys_madvise(addr as *mut libc::c_void, PAGE_SIZE, libc::MADV_DONTNEED) } != 0 {
            fatal(format!("madvise: {}", std::io::Error::last_os_error()));
        }
        Some(Evicted::Copied(copy))
    }

    /// The bytes of an evicted page the program had dropped: zeros.
    fn zeros(&mut self) -> Evicted {
        let mut copy = self.copies.take().unwrap_or_else(|| AlignedBuf::new(PAGE_SIZE));
        copy.fill(0);
        Evicted::Copied(copy)
    }

    /// Resident page `page` has left memory.
    pub(super) fn evicted_one(&mut self, page: usize) {
        self.pages.resident -= 1;
        if let Some(traps) = &mut self.traps {
            traps.evicted(page as u64);
        }
    }

    /// The eviction is carried out and the page's bytes are no longer
    /// needed: a frame becomes spare, a buffer is kept for the next copy.
    pub(super) fn done_with(&mut self, evicted: Evicted) {
        match evicted {
            Evicted::Parked(frame) => self.frames.as_mut().expect("a parked frame has frames").release(frame),
            Evicted::Copied(buffer) if self.copies.is_none() => self.copies = Some(buffer),
            Evicted::Copied(buffer) => self.together.keep(buffer),
        }
    }

    /// Writes page `page`, kept as `stored` in `bytes`, to the swap file.
    pub(super) fn write_swap(&mut self, page: usize, stored: Stored, bytes: &[u8]) {
        let slot = write_page(&mut self.parts.swap, page, stored, bytes);
        self.on_disk(page, slot);
    }

    /// Page `page` is at `slot` in the swap file; the cleaner runs, and
    /// the pages it moved take their new slots.
    fn on_disk(&mut self, page: usize, slot: SwapSlot) {
        self.pages[page] = PageState::Disk(self.pages.disk.put(slot));
        let mut moved = std::mem::take(&mut self.moved);
        if let Err(e) = self.parts.swap.clean(&mut moved) {
            fatal(e);
        }
        for (p, slot) in moved.drain(..) {
            match self.pages[p as usize] {
                PageState::Disk(i) => self.pages.disk.set(i, slot),
                _ => debug_assert!(false, "a page moved in the swap file is on disk"),
            }
        }
        self.moved = moved;
    }

    pub(super) fn act(&mut self, action: Action) {
        match action {
            Action::Compress(p) | Action::SwapOut(p)
                if self.pinned(p as usize) && self.pinned_streak <= self.pages.resident + 16 =>
            {
                self.keep_mapped(action);
            }
            Action::Compress(p) | Action::SwapOut(p) if self.may_defer(p as usize) => self.defer(p as usize, action),
            Action::Compress(p) | Action::SwapOut(p) => self.evict_now(p as usize, action),
            Action::Watch(p) => {
                let page = p as usize;
                // Only a mapped page that stays: any other faults at its
                // next touch anyway (a deferred eviction's too).
                if !matches!(self.pages[page], PageState::Uncompressed) || self.together.is_waiting(page) {
                    return;
                }
                self.measure(page);
                if self.frames.is_some() && self.may_defer(page) {
                    // Parked with the next batch, without a flush of its own.
                    return self.defer(page, action);
                }
                if self.park(page) {
                    self.observers.observe(Event::Watched);
                }
            }
            Action::Spill(p) => {
                let page = p as usize;
                let stored = match self.parts.store.take_stored(p, &mut self.payload) {
                    Ok(s) => s,
                    Err(e) => fatal(format!("compression cache lost page {page}: {e}")),
                };
                let slot = write_page(&mut self.parts.swap, page, stored, &self.payload);
                self.on_disk(page, slot);
                self.observers.observe(Event::Spilled);
            }
        }
    }

    /// Carries out eviction `action` (`Compress` or `SwapOut`) of `page`
    /// now, alone.
    pub(super) fn evict_now(&mut self, page: usize, action: Action) {
        let Some(evicted) = self.evict(page) else {
            return self.keep_mapped(action);
        };
        self.after_evict(page, action, evicted);
    }

    /// Eviction `action` of `page`, whose bytes left the region as
    /// `evicted`: they go to the helper, the store or the swap file.
    pub(super) fn after_evict(&mut self, page: usize, action: Action, evicted: Evicted) {
        let p = page as u64;
        let bytes = evicted.bytes();
        self.observers.observe(Event::Evicted { page: p, bytes });
        match (&mut self.helper, action) {
            (_, Action::SwapOut(_)) => {
                self.write_swap(page, Stored::Raw, bytes);
                self.observers.observe(Event::SwappedRaw);
            }
            (Some(helper), _) if helper.has_room() => {
                self.pages[page] = PageState::Pending;
                match evicted {
                    // The helper reads the frame itself: no copy here.
                    Evicted::Parked(frame) if helper.reads_frames() => {
                        helper.push_frame(p, frame);
                        return self.observers.observe(Event::HandedFrame);
                    }
                    _ => helper.push(p, bytes),
                }
            }
            _ => self.compress(page, bytes),
        }
        self.done_with(evicted);
    }

    /// Eviction `action` (`Compress` or `SwapOut`) of a page that must stay
    /// mapped: a system call is using it (see `crate::pins`), or the kernel
    /// would not move it. The policy hears that it was written to disk and
    /// touched again at once, which is what it would have seen had the
    /// page left and faulted back.
    pub(super) fn keep_mapped(&mut self, action: Action) {
        let (Action::Compress(p) | Action::SwapOut(p)) = action else {
            return;
        };
        self.pinned_streak += 1;
        if self.pinned_streak > 2 * self.pages.resident + 64 {
            // Every resident page refused to leave: stopping beats looping.
            fatal("the kernel refuses to move any resident page out of the heap; run without --write-scan");
        }
        if matches!(action, Action::Compress(_)) {
            self.parts.policy.swapped_instead(p);
        }
        self.observers.observe(Event::Pinned);
        self.parts.policy.touch(p, Level::Disk, &mut self.actions);
    }

    /// Puts the evicted page's `bytes` into the cache, spilling to make
    /// room as the policy chooses, or to disk raw if it cannot fit.
    pub(super) fn compress(&mut self, page: usize, bytes: &[u8]) {
        loop {
            match self.parts.store.put(page as u64, bytes) {
                Ok(len) => return self.compressed(page, len, false),
                Err(StoreError::Full { .. } | StoreError::OutOfMemory) => {
                    let mut spills = Vec::new();
                    if !self.parts.policy.make_room(&mut spills) {
                        self.write_swap(page, Stored::Raw, bytes);
                        self.parts.policy.swapped_instead(page as u64);
                        self.observers.observe(Event::SwappedRaw);
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

    /// `page` is in the store, in `len` bytes (compressed by the helper
    /// if `background`): the observers and the policy are told.
    pub(super) fn compressed(&mut self, page: usize, len: usize, background: bool) {
        self.pages[page] = PageState::Compressed;
        self.observers.observe(Event::Compressed { len, background });
        self.parts
            .policy
            .compressed(page as u64, crate::CHARGE.of(len), &mut self.actions);
    }
}

/// Writes page `page`, kept as `stored` in `bytes`, to `swap`: only the
/// bytes its kind needs. Stops the process if the write fails (see the
/// pager's module docs).
fn write_page(swap: &mut SwapFile, page: usize, stored: Stored, bytes: &[u8]) -> SwapSlot {
    let bytes = match stored {
        Stored::Same(_) => &[],
        Stored::Compressed(n) => &bytes[..n],
        Stored::Raw => bytes,
    };
    swap.write(page as u64, stored, bytes).unwrap_or_else(|e| fatal(e))
}

//! Page frames moved, not copied, with `UFFDIO_MOVE` (Linux 6.8).
//!
//! Evicting a page the classic way costs a write-protect (a TLB flush), a
//! 4 KiB copy and an `MADV_DONTNEED` (another flush), and mapping one back
//! costs `UFFDIO_COPY` (a page allocation and another copy). Instead the
//! pager keeps a *shadow*: a second mapping as large as the region, where
//! page `p`'s frame parks at offset `p` whenever it is not mapped in the
//! region:
//!
//! * a **trapped** page (see `ccvm_policy::Traps`) is moved to its shadow
//!   slot, uncompressed; a touch faults, and moving it back is the whole
//!   service;
//! * an **evicted** page is moved there (if it was not trapped already)
//!   and compressed in place. Its frame is then *spare*: the next page
//!   mapped is decompressed into a spare frame and moved into the region,
//!   so frames cycle with no allocation, zeroing or copy. The move is
//!   atomic: a write lands in the page before it moves, or faults on the
//!   now-missing page and waits for the pager lock, by which time the page
//!   is in the cache. No write-protection is needed.
//!
//! # Choices
//!
//! * A spare frame stays in its page's slot. When that page is mapped
//!   again its own spare frame is used (taken out of the spare list), so a
//!   page's slot is always empty while the page is in the region, and
//!   moving it out never meets an occupied slot.
//! * At most [`MAX_SPARE`] spare frames (128 KiB) are kept: faults and
//!   evictions alternate, so a few suffice, and these frames are the
//!   runtime's own memory, charged to the RAM budget (256 of them, 1 MiB,
//!   were 1% of a 110 MiB budget for no measured gain). Beyond that the
//!   oldest are freed, as the next point says.
//! * Beyond the cap, the oldest [`FREE_BATCH`] spare frames are freed
//!   together, with one `process_madvise(MADV_DONTNEED)`: the kernel then
//!   flushes them from other CPUs' TLBs once, not once a frame. Spare
//!   frames pile up when pages are mapped in by copying, which the pager
//!   does while the process runs other threads (`crate::threads`); with
//!   a second thread running, `MADV_DONTNEED` cost 20.4 µs a page one
//!   page a call, and 1.0 µs 32 pages a call (`docs/programs/flushes.c`,
//!   `docs/results.md`, "Frames moved while other threads run"). Where the kernel refuses the
//!   call (before Linux 6.13 a process may not give itself this advice
//!   by it), frames are freed one by one.
//! * The shadow is not inherited by forked children (`MADV_DONTFORK`): a
//!   frame shared with a child cannot be moved. Region pages shared with a
//!   child (the program forked) are evicted the copying way instead.
//! * The shadow is registered with the region's userfaultfd (the kernel's
//!   rule for a move's destination) and reserves no memory
//!   (`MAP_NORESERVE`); only slots known to hold a frame are touched.

use std::collections::VecDeque;
use std::sync::Arc;

use ccvm_codec::PAGE_SIZE;
use nix::errno::Errno;

use crate::aligned::ZeroTable;
use crate::uffd::Uffd;

/// Most spare frames kept.
pub(crate) const MAX_SPARE: usize = 32;

/// Spare frames freed at once when there are more than [`MAX_SPARE`].
pub(crate) const FREE_BATCH: usize = 16;

/// The shadow of a region. See the module docs.
pub(crate) struct Frames {
    /// The mapping, shared with the [`Parked`] frames lent out of it.
    shadow: Arc<Shadow>,
    /// Pages whose slot holds a spare frame, oldest first.
    spare: VecDeque<u32>,
    /// Per page: whether its slot holds a spare frame.
    is_spare: ZeroTable<bool>,
    /// This process's pidfd, for `process_madvise`.
    pidfd: crate::fds::OwnProcessFd,
    /// The kernel refused a batched free: free frames one by one.
    one_by_one: bool,
}

impl Frames {
    /// Maps and registers the shadow of a region of `pages` pages; `None`
    /// if the kernel cannot move pages or the mapping cannot be made.
    pub fn new(uffd: &Uffd, pages: usize) -> Option<Frames> {
        if !uffd.can_move() {
            return None;
        }
        let len = pages * PAGE_SIZE;
        let base = map_small_pages(len)?;
        // A fork (the compressor's helper, or the program's own) must not
        // share the shadow's frames: a shared frame cannot be moved.
        // SAFETY: the mapping just made.
        unsafe { crate::sys_madvise(base, len, libc::MADV_DONTFORK) };
        if uffd.register_missing(base as usize, len).is_err() {
            // SAFETY: the mapping made above.
            unsafe { libc::munmap(base, len) };
            return None;
        }
        Some(Frames {
            shadow: Arc::new(Shadow {
                base: base as usize,
                len,
            }),
            spare: VecDeque::with_capacity(MAX_SPARE + 1),
            is_spare: ZeroTable::new(pages),
            pidfd: crate::fds::OwnProcessFd::new(),
            one_by_one: false,
        })
    }

    /// The address of page `page`'s slot.
    pub fn slot(&self, page: usize) -> usize {
        self.shadow.base + page * PAGE_SIZE
    }

    /// A spare frame to rebuild `page` in before [`Frames::map`]: the
    /// page's own if it has one, else any; `None` if none is spare.
    /// Returns the slot (page number) the frame is in.
    pub fn take_spare(&mut self, page: usize) -> Option<usize> {
        let from = if self.is_spare[page] {
            let i = self.spare.iter().position(|&p| p as usize == page).expect("listed");
            self.spare.remove(i);
            page
        } else {
            self.spare.pop_back()? as usize
        };
        self.is_spare[from] = false;
        Some(from)
    }

    /// Whether page `page`'s own slot holds a spare frame.
    pub fn is_spare(&self, page: usize) -> bool {
        self.is_spare[page]
    }

    /// Gives back a frame taken with [`Frames::take_spare`] and not moved
    /// to `page`, which is in the region now (its bytes were copied, or
    /// another thread mapped it): a frame in `page`'s own slot is freed,
    /// since a resident page's slot must be empty (see the module docs).
    /// Otherwise the frame stays spare where it is.
    pub fn give_back(&mut self, slot: usize, page: usize) {
        if slot == page {
            // SAFETY: a slot of our shadow holding a frame nothing refers to.
            unsafe { crate::sys_madvise(self.slot(slot) as *mut libc::c_void, PAGE_SIZE, libc::MADV_DONTNEED) };
            return;
        }
        self.is_spare[slot] = true;
        self.spare.push_back(slot as u32);
    }

    /// Moves the frame in `slot` to region page `dst` (not mapped).
    ///
    /// # Errors
    ///
    /// The move's error; the frame is then still in `slot`.
    pub fn map(&mut self, uffd: &Uffd, slot: usize, dst: usize) -> Result<(), Errno> {
        uffd.move_pages(dst, self.slot(slot), PAGE_SIZE)
    }

    /// Moves region page `page` (mapped at `src`) to its slot.
    ///
    /// # Errors
    ///
    /// The move's error (`EBUSY` for a page shared with a forked child);
    /// the page is then still mapped at `src`.
    pub fn park(&mut self, uffd: &Uffd, page: usize, src: usize) -> Result<(), Errno> {
        debug_assert!(!self.is_spare[page], "a resident page's slot is empty");
        uffd.move_pages(self.slot(page), src, PAGE_SIZE)
    }

    /// Bytes of spare frames held now.
    pub fn spare_bytes(&self) -> u64 {
        (self.spare.len() * PAGE_SIZE) as u64
    }

    /// The frame of page `page`, which left the region and is parked in
    /// its slot (by [`Frames::park`], or trapped before), lent to the
    /// eviction that carries the page out until [`Frames::release`] makes
    /// it spare.
    pub fn parked(&self, page: usize) -> Parked {
        debug_assert!(!self.is_spare[page], "a parked frame is not spare");
        Parked {
            shadow: Arc::clone(&self.shadow),
            page,
        }
    }

    /// The evicted page's frame is no longer needed: it is spare now.
    pub fn release(&mut self, frame: Parked) {
        let page = frame.page;
        self.is_spare[page] = true;
        self.spare.push_back(page as u32);
        if self.spare.len() > MAX_SPARE {
            let mut batch = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: PAGE_SIZE,
            }; FREE_BATCH];
            for v in &mut batch {
                let oldest = self.spare.pop_front().expect("over the cap") as usize;
                self.is_spare[oldest] = false;
                v.iov_base = self.slot(oldest) as *mut libc::c_void;
            }
            self.free(&batch);
        }
    }

    /// Frees the frames in the slots `batch` names: in one call where the
    /// kernel allows it, else one by one.
    fn free(&mut self, batch: &[libc::iovec]) {
        // SAFETY: slots of our shadow holding frames that nothing refers
        // to any more.
        if !unsafe { drop_pages(&mut self.pidfd, batch, !self.one_by_one) } {
            self.one_by_one = true;
        }
    }
}

/// Drops the pages `pages` names (a page each) with `MADV_DONTNEED`: in
/// one `process_madvise`, with one TLB flush, if `batched` and the kernel
/// allows it, else (or for what that call left) one by one. Returns
/// whether the one call did it all.
///
/// # Safety
///
/// Every page named must be this process's, and nothing may need what it
/// holds.
pub(crate) unsafe fn drop_pages(pidfd: &mut crate::fds::OwnProcessFd, pages: &[libc::iovec], batched: bool) -> bool {
    if batched {
        let dropped = pidfd.get(open_own_pidfd).map(|held| {
            let fd = held.in_use();
            let args = [
                fd.fd() as u64,
                pages.as_ptr() as u64,
                pages.len() as u64,
                libc::MADV_DONTNEED as u64,
                0,
                0,
            ];
            // SAFETY: the caller's pages, whose contents nothing needs.
            unsafe { crate::guard::raw_syscall(libc::SYS_process_madvise, args) }
        });
        if dropped == Some((pages.len() * PAGE_SIZE) as i64) {
            return true;
        }
    }
    for v in pages {
        // SAFETY: as above.
        unsafe { crate::sys_madvise(v.iov_base, PAGE_SIZE, libc::MADV_DONTNEED) };
    }
    false
}

/// A pidfd of this process; `None` if the kernel has none to give.
fn open_own_pidfd() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid = u64::from(std::process::id());
    // SAFETY: pidfd_open of our own pid; the descriptor is ours.
    let fd = unsafe { crate::guard::raw_syscall(libc::SYS_pidfd_open, [pid, 0, 0, 0, 0, 0]) };
    // SAFETY: a new descriptor we own.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// A fresh private anonymous mapping of `len` bytes that reserves no
/// memory and holds only small pages (huge pages would be filled 2 MiB at
/// a time behind the pager's back, and moves take single pages); `None` if
/// mmap fails.
pub(crate) fn map_small_pages(len: usize) -> Option<*mut libc::c_void> {
    let base = ccvm_store::chunks::map_anonymous(len, libc::MAP_PRIVATE | libc::MAP_NORESERVE)?;
    // SAFETY: the mapping just made.
    unsafe { crate::sys_madvise(base, len, libc::MADV_NOHUGEPAGE) };
    Some(base)
}

/// The shadow's mapping, unmapped when the last of its holders goes.
struct Shadow {
    base: usize,
    len: usize,
}

impl Drop for Shadow {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Frames::new`; no `Frames` or `Parked`
        // that reads it is left.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// An evicted page's frame, parked in its shadow slot: the page's bytes,
/// owned by the eviction until it hands them back with
/// [`Frames::release`].
///
/// Invariant: while a `Parked` lives, nothing writes its slot. The slot is
/// neither spare (so no fault rebuilds another page in it) nor the page's
/// place in the region (the page is not mapped), and the pager that made
/// it carries the eviction out under its lock, or hands it to the helper's
/// ring, which only reads it and gives it back when the page is collected
/// or taken back (`crate::compressor`). The mapping stays alive while the
/// value does, since it holds a share of it.
pub(crate) struct Parked {
    shadow: Arc<Shadow>,
    page: usize,
}

impl Parked {
    /// The page's bytes.
    pub fn bytes(&self) -> &[u8] {
        let addr = self.shadow.base + self.page * PAGE_SIZE;
        // SAFETY: a slot of the live mapping holding a frame, which nothing
        // writes while this value lives (the type's invariant); the slice
        // borrows the value.
        unsafe { std::slice::from_raw_parts(addr as *const u8, PAGE_SIZE) }
    }
}

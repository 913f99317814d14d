//! Page frames recycled in user space with `UFFDIO_MOVE` (Linux 6.8).
//!
//! Evicting a page the classic way costs a write-protect (a TLB flush), a
//! 4 KiB copy and an `MADV_DONTNEED` (another flush), and mapping one back
//! costs `UFFDIO_COPY` (a page allocation and another copy). With
//! `UFFDIO_MOVE` the pager instead keeps a small staging area of frames:
//!
//! * to evict, it moves the page out of the region into an empty staging
//!   slot (one ioctl, one flush of one entry, no copy) and compresses it
//!   there. The move is atomic: a write lands in the page before it moves,
//!   or faults on the now-missing page and waits for the pager lock, by
//!   which time the page is in the cache. No write-protection is needed;
//! * to map a page, it decompresses into a staging slot that still holds a
//!   frame and moves that frame into the region: no allocation, no copy.
//!
//! So frames cycle between the region and the staging area, and the
//! kernel's allocator, zeroing and reclaim stay out of the fault path.
//!
//! # Choices
//!
//! * 64 slots (256 KiB): faults and evictions alternate, so a handful of
//!   frames suffices; the rest of the area covers runs of evictions.
//!   These frames are the runtime's own overhead, outside the RAM budget.
//! * When evictions have filled every slot (a run of first touches, which
//!   take no frame), the whole area is dropped with one `MADV_DONTNEED`.
//!   When faults have emptied every slot, the pager maps with
//!   `UFFDIO_COPY` from its buffer, as without `UFFDIO_MOVE`.
//! * The area is registered with the region's userfaultfd (the kernel's
//!   rule for a move's destination). Only slots known to hold a frame are
//!   ever touched, so it never faults.

use ccvm_codec::PAGE_SIZE;

use crate::uffd::Uffd;

const SLOTS: usize = 64;

/// The staging area. See the module docs.
pub(crate) struct Frames {
    base: usize,
    /// Slots holding a frame (free to overwrite).
    full: Vec<u32>,
    /// Slots with no frame (free to move a page into).
    empty: Vec<u32>,
}

impl Frames {
    /// Maps and registers the staging area, every slot holding a frame;
    /// `None` if the kernel cannot move pages or the area cannot be made.
    pub fn new(uffd: &Uffd) -> Option<Frames> {
        if !uffd.can_move() {
            return None;
        }
        let len = SLOTS * PAGE_SIZE;
        // SAFETY: a fresh private anonymous mapping, populated.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: our own mapping; a move takes single small pages only.
        unsafe { libc::madvise(base, len, libc::MADV_NOHUGEPAGE) };
        // Write every slot so each holds a frame of its own (not the
        // shared zero page).
        // SAFETY: len writable bytes of our mapping.
        unsafe { std::ptr::write_bytes(base.cast::<u8>(), 1, len) };
        if uffd.register_missing(base as usize, len).is_err() {
            // SAFETY: the mapping made above.
            unsafe { libc::munmap(base, len) };
            return None;
        }
        Some(Frames {
            base: base as usize,
            full: (0..SLOTS as u32).collect(),
            empty: Vec::with_capacity(SLOTS),
        })
    }

    /// The address of `slot`.
    pub fn addr(&self, slot: u32) -> usize {
        self.base + slot as usize * PAGE_SIZE
    }

    /// A slot holding a frame, to decompress into and then move into the
    /// region with [`Frames::map`]; `None` if all are empty.
    pub fn take_full(&mut self) -> Option<u32> {
        self.full.pop()
    }

    /// Moves the frame of full `slot` to the region page at `dst` (not
    /// mapped). The slot is empty afterwards.
    pub fn map(&mut self, uffd: &Uffd, slot: u32, dst: usize) -> Result<(), nix::errno::Errno> {
        let r = uffd.move_pages(dst, self.addr(slot), PAGE_SIZE);
        match r {
            Ok(()) => self.empty.push(slot),
            Err(_) => self.full.push(slot),
        }
        r
    }

    /// Moves the region page at `src` (mapped) into an empty slot, which
    /// then holds it; returns the slot.
    ///
    /// # Errors
    ///
    /// The move's error (`EBUSY` for a page shared with a forked child);
    /// the page is then still mapped at `src`.
    pub fn evict(&mut self, uffd: &Uffd, src: usize) -> Result<u32, nix::errno::Errno> {
        if self.empty.is_empty() {
            self.drop_all();
        }
        let slot = self.empty.pop().expect("drop_all empties every slot");
        match uffd.move_pages(self.addr(slot), src, PAGE_SIZE) {
            Ok(()) => {
                self.full.push(slot);
                Ok(slot)
            }
            Err(e) => {
                self.empty.push(slot);
                Err(e)
            }
        }
    }

    /// Frees every frame of the area: one `MADV_DONTNEED`.
    fn drop_all(&mut self) {
        // SAFETY: our own mapping; nothing refers to its contents.
        unsafe { libc::madvise(self.base as *mut libc::c_void, SLOTS * PAGE_SIZE, libc::MADV_DONTNEED) };
        self.full.clear();
        self.empty.clear();
        self.empty.extend(0..SLOTS as u32);
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, which nothing outlives.
        unsafe { libc::munmap(self.base as *mut libc::c_void, SLOTS * PAGE_SIZE) };
    }
}

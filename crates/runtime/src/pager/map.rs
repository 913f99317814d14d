//! Rebuilding a page and mapping it into the region: from the compression
//! cache, from the swap file, or as zeros, into a spare frame that is then
//! moved into place (`UFFDIO_MOVE`) or into the pager's buffer that is
//! copied (`UFFDIO_COPY`). Every way in ends in [`Pager::map_page`] or
//! [`Pager::map_zero_page`], which treat a page mapped meanwhile by
//! another thread's fault as served.

use ccvm_codec::{Codec, PAGE_SIZE};
use ccvm_store::Stored;

use super::observe::Event;
use super::{fatal, PageState, Pager, Target};
use crate::aligned::AlignedBuf;
use crate::frames::Frames;
use crate::swap::SwapSlot;

impl Pager {
    /// A buffer to rebuild a page in before it is mapped: a spare frame
    /// when there is one (mapped by moving it), else `self.page`. While the
    /// process runs other threads, `self.page` (copied in, which flushes
    /// no other CPU's TLB; see `crate::threads`) unless the page's own
    /// slot holds its spare frame, which must leave the slot anyway.
    pub(super) fn target(&mut self, page: usize) -> Target {
        let own = usize::from(self.share.trimming) + usize::from(self.parts.fault_thread);
        let copy_in = self.parts.copy_in_when_threaded && self.threads.others(own);
        let Some(frames) = self.frames.as_mut() else {
            return Target::Buffer;
        };
        if copy_in && !frames.is_spare(page) {
            self.observers.observe(Event::CopiedIn);
            return Target::Buffer;
        }
        match frames.take_spare(page) {
            Some(slot) => Target::Frame(slot),
            None => Target::Buffer,
        }
    }

    /// The 4096 bytes of `target`, to write the page into.
    pub(super) fn target_bytes(&mut self, target: Target) -> &mut [u8] {
        target_bytes(&mut self.page, self.frames.as_ref(), target)
    }

    /// Maps the page rebuilt in `target` at `page`.
    pub(super) fn map_page(&mut self, page: usize, target: Target) {
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

    /// Maps never-touched page `page` as zeros the program can write: a
    /// spare frame, zeroed, or else a zeroed page copied in.
    ///
    /// Not the kernel's zero page: it is mapped read-only, so the write
    /// that follows (at once on a first write, soon on the pages read
    /// ahead of a run of them) faults again, and the kernel's copy of it
    /// flushes the page from every CPU the program's threads run on, an
    /// interrupt to each. On a JVM that does not page (`--ram 400M`), those
    /// second faults and their flushes were most of ccvm's overhead.
    pub(super) fn map_zeros(&mut self, page: usize) {
        let target = self.target(page);
        self.target_bytes(target).fill(0);
        self.map_page(page, target);
    }

    /// Maps never-touched (or only read) page `page` as the zero page,
    /// write-protected so that its first write faults.
    pub(super) fn map_zero_read(&mut self, page: usize) {
        self.map_zero_page(page);
        if let Err(e) = self.parts.uffd.write_protect(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd write-protect: {e}"));
        }
        self.pages[page] = PageState::Zero;
    }

    /// Maps the kernel's zero page at `page`; if something is mapped there
    /// already (another thread's fault won), only wakes its waiters.
    pub(super) fn map_zero_page(&self, page: usize) {
        match self.parts.uffd.zeropage(self.addr(page), PAGE_SIZE) {
            Ok(()) => {}
            Err(nix::errno::Errno::EEXIST) => self.wake(page),
            Err(e) => fatal(format!("userfaultfd zeropage: {e}")),
        }
    }

    /// Reads page `page` back from `slot` in the swap file, checked,
    /// and maps it.
    pub(super) fn map_from_disk(&mut self, page: usize, slot: SwapSlot) {
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
    pub(super) fn map_from_cache(&mut self, page: usize) {
        let target = self.target(page);
        let out = target_bytes(&mut self.page, self.frames.as_ref(), target);
        if let Err(e) = self.parts.store.take(page as u64, out) {
            fatal(e);
        }
        self.map_page(page, target);
        self.observers.observe(Event::Decompressed(1));
    }

    /// Rebuilds a page read from disk (in `self.payload`) into `target`.
    pub(super) fn decode(&mut self, page: usize, stored: Stored, target: Target) {
        let out = target_bytes(&mut self.page, self.frames.as_ref(), target);
        let decoded = decode(page, stored, &self.payload, self.parts.codec.as_mut(), out);
        self.observers.observe(Event::Decompressed(u64::from(decoded)));
    }

    /// Rebuilds a page read from disk (in `self.payload`) into `out`.
    pub(super) fn decode_into(&mut self, page: usize, stored: Stored, out: &mut [u8]) {
        let decoded = decode(page, stored, &self.payload, self.parts.codec.as_mut(), out);
        self.observers.observe(Event::Decompressed(u64::from(decoded)));
    }
}

/// The 4096 bytes of `target`: the pager's `buffer`, or a frame in its
/// shadow slot. Borrows only those, so that the store or the codec can be
/// lent them while the rest of the pager is in use.
fn target_bytes<'a>(buffer: &'a mut AlignedBuf, frames: Option<&Frames>, target: Target) -> &'a mut [u8] {
    match target {
        Target::Buffer => buffer,
        Target::Frame(slot) => {
            let addr = frames.expect("a frame target has frames").slot(slot);
            // SAFETY: a shadow slot holding a frame: a mapped page of ours
            // that nothing else refers to, for as long as the target is
            // held (it is the pager's, behind the pager's lock).
            unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, PAGE_SIZE) }
        }
    }
}

/// Rebuilds a page read from disk as `stored` (its bytes in `payload`)
/// into `out`; returns whether it was decompressed.
fn decode(page: usize, stored: Stored, payload: &[u8], codec: &mut dyn Codec, out: &mut [u8]) -> bool {
    match stored {
        Stored::Same(v) => out
            .chunks_exact_mut(8)
            .for_each(|w| w.copy_from_slice(&v.to_le_bytes())),
        Stored::Raw => out.copy_from_slice(payload),
        Stored::Compressed(n) => {
            if let Err(e) = codec.decompress(&payload[..n], out) {
                fatal(format!("page {page} read from the swap file does not decode: {e}"));
            }
            return true;
        }
    }
    false
}

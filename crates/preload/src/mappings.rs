//! The heap blocks handed out as anonymous mappings, so that `munmap` and
//! `mremap` can tell them from other heap memory.
//!
//! A program may unmap a mapping piecewise (GCC's garbage collector gives
//! back runs of pages from a larger mapping), and may unmap a range that
//! spans several mappings. Each mapping keeps a bit per page unmapped; its
//! block is freed only when every page is, so no page still in use is ever
//! reused. Unmapped pages are dropped at once (the pager forgets them, as
//! the kernel frees them), and stay readable, as zeros, until the block is
//! freed (the kernel would fault on them): a correct program does not
//! notice. Kept, they were paged as live data.
//!
//! Lock order: this module's lock is never held while the heap's is taken
//! (the caller frees blocks after [`unmap`] returns), so a fork's prepare
//! handler may take the heap's lock and then this one.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

const PAGE: usize = ccvm_runtime::PAGE_SIZE;

/// One mapping's pages.
pub struct Mapping {
    pages: usize,
    /// One bit per page, set once unmapped.
    unmapped: Vec<u64>,
    left: usize,
}

static MAPPINGS: Mutex<BTreeMap<usize, Mapping>> = Mutex::new(BTreeMap::new());

/// The lock (held across `fork`).
pub fn lock() -> MutexGuard<'static, BTreeMap<usize, Mapping>> {
    MAPPINGS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records a mapping of `len` bytes (a multiple of the page size) at `start`.
pub fn add(start: usize, len: usize) {
    let pages = len / PAGE;
    let mapping = Mapping {
        pages,
        unmapped: vec![0; pages.div_ceil(64)],
        left: pages,
    };
    lock().insert(start, mapping);
}

/// The length of the mapping that starts at `start`, if one does.
pub fn len_of(start: usize) -> Option<usize> {
    lock().get(&start).map(|m| m.pages * PAGE)
}

/// Whether every page of `addr..addr + len` lies in one mapping and is
/// still mapped.
pub fn covers(addr: usize, len: usize) -> bool {
    let end = addr.saturating_add(len.next_multiple_of(PAGE));
    let map = lock();
    let Some((&start, m)) = map.range(..=addr).next_back() else {
        return false;
    };
    end <= start + m.pages * PAGE
        && ((addr - start) / PAGE..(end - start) / PAGE).all(|p| m.unmapped[p / 64] & (1 << (p % 64)) == 0)
}

/// Marks the pages of `addr..addr + len` mapped again (a fixed mapping
/// made over pages the program unmapped), if they all lie in one mapping
/// not yet freed: its block is still the program's, so nothing else uses
/// them. Fails with `ENOMEM` otherwise, and with `EEXIST` if `replace` is
/// false and a page is still mapped (`MAP_FIXED_NOREPLACE`).
pub fn remap(addr: usize, len: usize, replace: bool) -> Result<(), i32> {
    let end = addr.saturating_add(len.next_multiple_of(PAGE));
    let mut map = lock();
    let Some((&start, m)) = map.range_mut(..=addr).next_back() else {
        return Err(libc::ENOMEM);
    };
    if end > start + m.pages * PAGE {
        return Err(libc::ENOMEM);
    }
    let pages = (addr - start) / PAGE..(end - start) / PAGE;
    let is_unmapped = |m: &Mapping, p: usize| m.unmapped[p / 64] & (1 << (p % 64)) != 0;
    if !replace && pages.clone().any(|p| !is_unmapped(m, p)) {
        return Err(libc::EEXIST);
    }
    for p in pages {
        if is_unmapped(m, p) {
            m.unmapped[p / 64] &= !(1 << (p % 64));
            m.left += 1;
        }
    }
    Ok(())
}

/// What [`unmap`] found: byte ranges, as start and length.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unmapped {
    /// The parts of mappings the range covered, for the caller to drop.
    pub within: Vec<(usize, usize)>,
    /// The mappings now wholly unmapped (and forgotten), for the caller to
    /// free.
    pub freed: Vec<(usize, usize)>,
}

/// Marks the pages of `addr..addr + len` unmapped in every mapping they
/// fall in (heap memory in no mapping is left alone).
pub fn unmap(addr: usize, len: usize) -> Unmapped {
    let end = addr.saturating_add(len.next_multiple_of(PAGE));
    let mut out = Unmapped::default();
    let mut map = lock();
    for (&start, m) in map.range_mut(..end).rev() {
        let m_end = start + m.pages * PAGE;
        if m_end <= addr {
            break;
        }
        let first = (addr.max(start) - start) / PAGE;
        let last = (end.min(m_end) - start).div_ceil(PAGE);
        out.within.push((start + first * PAGE, (last - first) * PAGE));
        for page in first..last {
            let (word, bit) = (page / 64, 1u64 << (page % 64));
            if m.unmapped[word] & bit == 0 {
                m.unmapped[word] |= bit;
                m.left -= 1;
            }
        }
        if m.left == 0 {
            out.freed.push((start, m.pages * PAGE));
        }
    }
    for (start, _) in &out.freed {
        map.remove(start);
    }
    out
}

/// Forgets the mapping at `start` (moved by `mremap`); its length, if it
/// was one.
pub fn take(start: usize) -> Option<usize> {
    lock().remove(&start).map(|m| m.pages * PAGE)
}

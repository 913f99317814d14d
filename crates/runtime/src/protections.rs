//! Which pages of a region the program has given a protection other than
//! read-write (`mprotect`, or a fixed mapping over heap memory), so that
//! the pager treats them as the kernel lets it.
//!
//! # Choices
//!
//! * Ranges, not a byte per page: a program changes the protection of few,
//!   large ranges (a JIT's code, a garbage collector's reservations), and
//!   most programs none, so the pager's check is one `is_empty` on every
//!   eviction and read-ahead.
//! * What the pager does with each (see `Pager::evict` and
//!   `Pager::map_page`): `UFFDIO_MOVE` refuses a range that is not
//!   read-write, so a readable page is evicted by write-protecting,
//!   copying and dropping it, and mapped back by copying; an unreadable one
//!   (`PROT_NONE`) cannot be copied out and stays where it is; read-ahead
//!   stops at any of them, so that nothing is mapped into a reservation
//!   that the program has not committed.
//! * [`FOREIGN`] marks pages the program has mapped something else over
//!   (a file at a fixed address inside the heap): they are no longer the
//!   region's, and the pager leaves them alone.
//! * The guard, which touches a system call's buffers before the call (in
//!   a signal handler, where it may take no lock), reads a lock-free copy:
//!   two bits a page ([`access`]), set under the pager's lock as the
//!   ranges change. It touches a read-only page by reading it only, and
//!   leaves unreadable and foreign pages to the kernel, which fails the
//!   call (`EFAULT`) or faults on them itself, as it would unpaged.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Pages another mapping has replaced: not the pager's any more.
pub(crate) const FOREIGN: i32 = -1;

/// The guard's copy: two bits a page of the region at `BASE` (bit 0: not
/// writable, bit 1: not readable by the pager), null until a protection
/// is first set.
static BITS: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
static BASE: AtomicUsize = AtomicUsize::new(0);
static PAGES: AtomicUsize = AtomicUsize::new(0);

/// Whether the page at `addr` may be read and written by the guard's touch
/// (`(readable, writable)`); both for any page no protection was set on.
pub(crate) fn access(addr: usize) -> (bool, bool) {
    let bits = BITS.load(Relaxed);
    if bits.is_null() {
        return (true, true);
    }
    let page = addr.wrapping_sub(BASE.load(Relaxed)) / PAGE;
    if page >= PAGES.load(Relaxed) {
        return (true, true);
    }
    // SAFETY: the table has PAGES / 32 + 1 words, and is never freed.
    let word = unsafe { &*bits.add(page / 32) }.load(Relaxed) >> (2 * (page % 32));
    (word & 2 == 0, word & 1 == 0)
}

const PAGE: usize = ccvm_codec::PAGE_SIZE;

/// Records `pages` of the region at `base` (of `total` pages) as `prot`
/// in the guard's copy, making it on first use.
fn publish(base: usize, total: usize, pages: std::ops::Range<usize>, prot: i32) {
    if BITS.load(Relaxed).is_null() {
        if prot == libc::PROT_READ | libc::PROT_WRITE {
            return;
        }
        let words = total / 32 + 1;
        let Some(table) = crate::frames::map_small_pages(words * 8) else {
            return;
        };
        BASE.store(base, Relaxed);
        PAGES.store(total, Relaxed);
        BITS.store(table.cast(), Relaxed);
    }
    if BASE.load(Relaxed) != base {
        return;
    }
    let not_writable = prot == FOREIGN || prot & libc::PROT_WRITE == 0;
    let not_readable = prot == FOREIGN || prot & libc::PROT_READ == 0;
    let value = u64::from(not_writable) | (u64::from(not_readable) << 1);
    let bits = BITS.load(Relaxed);
    for page in pages {
        // SAFETY: as in `access`; `page` is below `total`.
        let word = unsafe { &*bits.add(page / 32) };
        let shift = 2 * (page % 32);
        let old = word.load(Relaxed);
        word.store((old & !(3 << shift)) | (value << shift), Relaxed);
    }
}

/// Ranges of pages whose protection is not read-write.
#[derive(Default)]
pub(crate) struct Protections {
    /// Start page → (end page, protection), disjoint and never read-write.
    ranges: BTreeMap<usize, (usize, i32)>,
    /// The region's first byte and its length in pages, for the guard's
    /// copy (`None`: no copy, as in the unit tests).
    region: Option<(usize, usize)>,
}

impl Protections {
    /// Ranges of the region at `base`, `pages` long, published to the
    /// guard as they change.
    pub(crate) fn for_region(base: usize, pages: usize) -> Protections {
        Protections {
            ranges: BTreeMap::new(),
            region: Some((base, pages)),
        }
    }

    /// Whether every page is read-write (the common case, checked first).
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The protection of `page`: `PROT_READ | PROT_WRITE` unless set
    /// otherwise.
    pub(crate) fn of(&self, page: usize) -> i32 {
        match self.ranges.range(..=page).next_back() {
            Some((_, &(end, prot))) if page < end => prot,
            _ => libc::PROT_READ | libc::PROT_WRITE,
        }
    }

    /// Whether the pager may read `page` (to copy it out).
    pub(crate) fn readable(&self, page: usize) -> bool {
        self.is_empty() || {
            let prot = self.of(page);
            prot != FOREIGN && prot & libc::PROT_READ != 0
        }
    }

    /// Whether `page` is plain read-write memory of the region.
    pub(crate) fn read_write(&self, page: usize) -> bool {
        self.is_empty() || self.of(page) == libc::PROT_READ | libc::PROT_WRITE
    }

    /// Whether any page of `pages` is not read-write.
    pub(crate) fn any_in(&self, pages: std::ops::Range<usize>) -> bool {
        !self.is_empty()
            && !pages.is_empty()
            && (self.of(pages.start) != libc::PROT_READ | libc::PROT_WRITE
                || self.ranges.range(pages.start..pages.end).next().is_some())
    }

    /// The ranges within `pages` that are not read-write, clipped to it.
    pub(crate) fn within(&self, pages: std::ops::Range<usize>) -> Vec<(std::ops::Range<usize>, i32)> {
        let first = match self.ranges.range(..=pages.start).next_back() {
            Some((&s, _)) => s,
            None => pages.start,
        };
        self.ranges
            .range(first..pages.end)
            .filter(|(_, &(end, _))| end > pages.start)
            .map(|(&s, &(end, prot))| (s.max(pages.start)..end.min(pages.end), prot))
            .collect()
    }

    /// Sets `pages` to `prot` (a `PROT_*` set, or [`FOREIGN`]).
    pub(crate) fn set(&mut self, pages: std::ops::Range<usize>, prot: i32) {
        if pages.is_empty() {
            return;
        }
        if let Some((base, total)) = self.region {
            publish(base, total, pages.clone(), prot);
        }
        // Cut the ranges that straddle either end, then drop those inside.
        for cut in [pages.start, pages.end] {
            if let Some((&start, &(end, p))) = self.ranges.range(..cut).next_back() {
                if end > cut {
                    self.ranges.insert(start, (cut, p));
                    self.ranges.insert(cut, (end, p));
                }
            }
        }
        let inside: Vec<usize> = self.ranges.range(pages.clone()).map(|(&s, _)| s).collect();
        for start in inside {
            self.ranges.remove(&start);
        }
        if prot != libc::PROT_READ | libc::PROT_WRITE {
            self.ranges.insert(pages.start, (pages.end, prot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;

    /// Random sets against a plain per-page model.
    #[test]
    fn ranges_agree_with_a_page_map_under_random_sets() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let prots = [
            RW,
            libc::PROT_NONE,
            libc::PROT_READ,
            libc::PROT_READ | libc::PROT_EXEC,
            FOREIGN,
        ];
        let mut p = Protections::default();
        let mut model: HashMap<usize, i32> = HashMap::new();
        for _ in 0..5_000 {
            let start = next(200);
            let end = start + next(40);
            let prot = prots[next(prots.len())];
            p.set(start..end, prot);
            for page in start..end {
                model.insert(page, prot);
            }
            let probe = next(260);
            let want = model.get(&probe).copied().unwrap_or(RW);
            assert_eq!(p.of(probe), want, "page {probe}");
            let (a, b) = (next(250), next(20));
            let any = (a..a + b).any(|q| model.get(&q).copied().unwrap_or(RW) != RW);
            assert_eq!(p.any_in(a..a + b), any, "pages {a}..{}", a + b);
            let listed: usize = p.within(a..a + b).iter().map(|(r, _)| r.len()).sum();
            let counted = (a..a + b).filter(|q| model.get(q).copied().unwrap_or(RW) != RW).count();
            assert_eq!(listed, counted, "pages {a}..{}", a + b);
        }
        // Disjoint, ordered and never read-write.
        let mut last = 0;
        for (&s, &(e, prot)) in &p.ranges {
            assert!(s >= last && e > s && prot != RW);
            last = e;
        }
    }
}

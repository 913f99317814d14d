//! What ccvm's own code holds in memory, so that the RAM budget can
//! include it.
//!
//! A paged program's memory, as the kernel's memory cgroup counts it, is
//! the pages in its region and the compression cache *plus* everything the
//! runtime keeps to run them: the policy's tables (a few dozen bytes for
//! every page it has seen), the store's mapping table, the swap file's
//! checksums, spare frames, the helper process and its ring. Left out of
//! the budget, these made `ccvm run` hold 6–9% more than `--ram`. The
//! budget now covers them (see the `pager` module's `keep_within_ram`).
//!
//! # Choice: count allocations, not resident memory
//!
//! The process's resident memory cannot tell ccvm's tables apart from the
//! program's own memory outside its heap (libraries, stacks, a JVM's heap),
//! which the budget does not cover. So the tables are counted where they
//! are made: [`Counted`] wraps the process's global allocator and keeps
//! the bytes live in an atomic, and a region charges itself what was
//! allocated after it started. The binaries install it (`ccvm`, and the
//! preload library of `ccvm exec`); a process that does not (a test) pays
//! no overhead and sees [`allocated`] return `None`.
//!
//! Large zeroed blocks (at least [`ZEROED_UNCOUNTED`] bytes) are not
//! counted: they come from the kernel untouched and hold memory only where
//! written. The codecs' working arrays are such blocks, sized for their
//! largest input (64 KiB) and touched a page's worth at a time: counted
//! whole, they made ccvm's own memory 1.8 MiB on an 8 MiB region. Such a
//! block is remembered by address (in a table of [`UNCOUNTED_SLOTS`]; past
//! that it is counted) so that freeing it subtracts nothing.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

/// Zeroed blocks at least this large are not counted (see the module docs).
pub const ZEROED_UNCOUNTED: usize = 64 << 10;

/// Most uncounted zeroed blocks remembered at once.
pub const UNCOUNTED_SLOTS: usize = 256;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
static UNCOUNTED: [AtomicUsize; UNCOUNTED_SLOTS] = [const { AtomicUsize::new(0) }; UNCOUNTED_SLOTS];

/// Remembers `p` as an uncounted block; `false` if the table is full.
fn remember(p: usize) -> bool {
    UNCOUNTED
        .iter()
        .any(|slot| slot.compare_exchange(0, p, Ordering::AcqRel, Ordering::Relaxed).is_ok())
}

/// Forgets `p` if it was remembered; whether it was.
fn forget(p: usize) -> bool {
    UNCOUNTED
        .iter()
        .any(|slot| slot.compare_exchange(p, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok())
}

/// A global allocator that counts the bytes live in `A`.
///
/// ```
/// use ccvm_runtime::accounting::Counted;
/// // In a binary:
/// // #[global_allocator]
/// // static ALLOC: Counted<std::alloc::System> = Counted(std::alloc::System);
/// let _ = Counted(std::alloc::System);
/// ```
pub struct Counted<A>(pub A);

fn add(bytes: usize) {
    INSTALLED.store(true, Ordering::Relaxed);
    LIVE.fetch_add(bytes as isize, Ordering::Relaxed);
}

fn sub(bytes: usize) {
    LIVE.fetch_sub(bytes as isize, Ordering::Relaxed);
}

// SAFETY: every call is passed on to `A` unchanged; only a counter is kept.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counted<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        let uncounted = !p.is_null() && layout.size() >= ZEROED_UNCOUNTED && remember(p as usize);
        if !p.is_null() && !uncounted {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let uncounted = layout.size() >= ZEROED_UNCOUNTED && forget(ptr as usize);
        // SAFETY: the caller's block and layout, passed on.
        unsafe { self.0.dealloc(ptr, layout) };
        if !uncounted {
            sub(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let uncounted = layout.size() >= ZEROED_UNCOUNTED && forget(ptr as usize);
        // SAFETY: the caller's block, layout and size, passed on.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if p.is_null() {
            // The old block stands, as it was counted.
            if uncounted {
                remember(ptr as usize);
            }
            return p;
        }
        // A grown block is written past its zeroed part: counted from now.
        if !uncounted {
            sub(layout.size());
        }
        add(new_size);
        p
    }
}

/// Bytes live in the process's [`Counted`] allocator, or `None` if the
/// process does not count (it installed no [`Counted`] global allocator,
/// or has allocated nothing through it).
pub fn allocated() -> Option<usize> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| LIVE.load(Ordering::Relaxed).max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_live_and_nothing_of_large_zeroed_blocks() {
        let a = Counted(std::alloc::System);
        let before = LIVE.load(Ordering::Relaxed);
        let small = Layout::from_size_align(1000, 8).unwrap();
        let large = Layout::from_size_align(4 << 20, 8).unwrap();
        let mid = Layout::from_size_align(ZEROED_UNCOUNTED, 8).unwrap();
        // SAFETY: layouts of non-zero size; each block freed with its layout.
        unsafe {
            let p = a.alloc(small);
            assert_eq!(LIVE.load(Ordering::Relaxed) - before, 1000);
            let p = a.realloc(p, small, 3000);
            assert_eq!(LIVE.load(Ordering::Relaxed) - before, 3000);
            let z = a.alloc_zeroed(large);
            assert_eq!(LIVE.load(Ordering::Relaxed) - before, 3000);
            a.dealloc(z, large);
            assert_eq!(LIVE.load(Ordering::Relaxed) - before, 3000);
            // Large but not zeroed: counted, and uncounted when freed.
            let m = a.alloc(mid);
            assert_eq!(LIVE.load(Ordering::Relaxed) - before, 3000 + ZEROED_UNCOUNTED as isize);
            a.dealloc(m, mid);
            // Zeroed, then grown: counted from the growth on.
            let z = a.alloc_zeroed(mid);
            let z = a.realloc(z, mid, 2 * ZEROED_UNCOUNTED);
            assert_eq!(
                LIVE.load(Ordering::Relaxed) - before,
                3000 + 2 * ZEROED_UNCOUNTED as isize
            );
            a.dealloc(z, Layout::from_size_align(2 * ZEROED_UNCOUNTED, 8).unwrap());
            a.dealloc(p, Layout::from_size_align(3000, 8).unwrap());
        }
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
        assert!(allocated().is_some());
    }
}

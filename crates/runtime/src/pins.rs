//! Pages a system call is using: the pager must not evict them until the
//! call returns.
//!
//! In SIGBUS mode a system call that touches a page that is not resident
//! fails with `EFAULT` (see the `guard` module). The guard therefore
//! faults a call's buffers in before the call and pins them here; the
//! pager leaves a pinned page mapped when the policy picks it (see
//! `Pager::act`). Without the pin another thread's fault could evict a
//! buffer page between the touch and the kernel's copy.
//!
//! # Choices
//!
//! * A fixed table of byte ranges, written with atomics only: pins are
//!   taken and dropped in a signal handler, where no lock may be taken
//!   that the interrupted code could hold, and nothing may be allocated.
//! * 256 ranges for the whole process. A call that finds the table full
//!   still has its buffers faulted in, unpinned (counted), which is safe
//!   for a single-threaded program and only leaves a race in a threaded
//!   one.
//! * A count of pins in use, so that the pager's check costs one load when
//!   nothing is pinned, which is almost always.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

const SLOTS: usize = 256;
/// A slot being filled: its range is not written yet, so it holds every
/// address (a conservative answer while it lasts).
const CLAIMED: usize = usize::MAX;

#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicUsize = AtomicUsize::new(0);
static START: [AtomicUsize; SLOTS] = [FREE; SLOTS];
static END: [AtomicUsize; SLOTS] = [FREE; SLOTS];
static IN_USE: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// A pinned range, unpinned when dropped.
#[must_use = "the range is unpinned when this is dropped"]
pub(crate) struct Pin(usize);

impl Pin {
    /// Keeps the range pinned past this value: its slot, for
    /// [`Pin::from_slot`] to unpin later (a pin held across calls).
    pub(crate) fn into_slot(self) -> usize {
        let slot = self.0;
        std::mem::forget(self);
        slot
    }

    /// The pin [`Pin::into_slot`] gave up.
    ///
    /// # Safety
    ///
    /// `slot` came from `into_slot` and is taken back once.
    pub(crate) unsafe fn from_slot(slot: usize) -> Pin {
        Pin(slot)
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        START[self.0].store(0, SeqCst);
        END[self.0].store(0, SeqCst);
        IN_USE.fetch_sub(1, SeqCst);
    }
}

/// Pins `[start, end)`, or returns `None` (counted) when all slots are in
/// use.
pub(crate) fn pin(start: usize, end: usize) -> Option<Pin> {
    for i in 0..SLOTS {
        if END[i].compare_exchange(0, CLAIMED, SeqCst, SeqCst).is_ok() {
            IN_USE.fetch_add(1, SeqCst);
            START[i].store(start, SeqCst);
            END[i].store(end, SeqCst);
            return Some(Pin(i));
        }
    }
    REFUSED.fetch_add(1, SeqCst);
    None
}

/// Whether any byte of `[addr, addr + len)` is pinned.
pub(crate) fn holds(addr: usize, len: usize) -> bool {
    if IN_USE.load(SeqCst) == 0 {
        return false;
    }
    (0..SLOTS).any(|i| {
        let end = END[i].load(SeqCst);
        end == CLAIMED || (end > addr && START[i].load(SeqCst) < addr + len)
    })
}

/// How many pins were refused for want of a slot.
pub(crate) fn refused() -> usize {
    REFUSED.load(SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_holds_its_range_until_dropped() {
        // A range far from any other test's.
        let base = 0x7e00_0000_0000;
        assert!(!holds(base, 4096));
        let p = pin(base + 4096, base + 3 * 4096).expect("a free slot");
        assert!(!holds(base, 4096));
        assert!(holds(base + 4096, 4096));
        assert!(holds(base + 2 * 4096, 1));
        assert!(!holds(base + 3 * 4096, 4096));
        drop(p);
        assert!(!holds(base + 4096, 4096));
    }
}

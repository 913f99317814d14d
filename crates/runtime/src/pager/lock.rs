//! Who holds the pager: [`lock`] takes it and notes the holding thread,
//! so that what that thread allocates meanwhile comes from the C library
//! (see [`super::allocating_for_ccvm`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::Pager;

/// The thread (`pthread_self`) that holds the pager now, 0 if none.
static HOLDER: AtomicUsize = AtomicUsize::new(0);

/// The pager, locked by this thread through [`lock`].
pub(crate) struct Locked<'a>(MutexGuard<'a, Pager>);

impl std::ops::Deref for Locked<'_> {
    type Target = Pager;
    fn deref(&self) -> &Pager {
        &self.0
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Pager {
        &mut self.0
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        HOLDER.store(0, Ordering::Release);
    }
}

/// Locks the pager (a panic while it was held does not stop the others),
/// and notes that this thread holds it: what this thread allocates
/// meanwhile comes from the C library, not `ccvm exec`'s paged heap (see
/// [`allocating_for_ccvm`](super::allocating_for_ccvm)). Without that, a table grown while the pager
/// is held (the protections of an `mprotect`'d range) could land on a heap
/// page that is not resident, and the fault would wait for the pager that
/// this very thread holds.
///
/// Evictions deferred to leave together are carried out first (see the
/// `together` module), so that whatever the caller does meets no page
/// half gone; only a fault's service, through [`lock_for_fault`], lets
/// them wait.
pub(crate) fn lock(pager: &Mutex<Pager>) -> Locked<'_> {
    let mut locked = lock_for_fault(pager);
    locked.evict_deferred();
    locked
}

/// Locks the pager as [`lock`] does, to serve a fault: evictions deferred
/// may wait longer.
pub(crate) fn lock_for_fault(pager: &Mutex<Pager>) -> Locked<'_> {
    let guard = pager.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: always valid; reads the thread pointer.
    HOLDER.store(unsafe { libc::pthread_self() } as usize, Ordering::Release);
    Locked(guard)
}

/// Whether this thread holds the pager.
pub(super) fn held_here() -> bool {
    let holder = HOLDER.load(Ordering::Acquire);
    // SAFETY: always valid; reads the thread pointer.
    holder != 0 && holder == unsafe { libc::pthread_self() } as usize
}

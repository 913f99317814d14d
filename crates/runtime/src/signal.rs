//! Faults served in the faulting thread: userfaultfd's SIGBUS mode.
//!
//! In SIGBUS mode the kernel queues no fault event; the thread that
//! touched a missing (or write-protected) page of a region gets SIGBUS,
//! and the handler installed here serves the fault on that thread's own
//! stack: it finds the region by the faulting address, takes the region's
//! pager lock, maps the page with `UFFDIO_COPY` (no wake-up: nobody sleeps)
//! and returns, and the access is retried. This removes what made a fault
//! cost ~30 µs in event mode: the faulting thread going to sleep, a second
//! thread waking on another CPU, and the wake-up back.
//!
//! # Choices
//!
//! * One process-wide handler over a fixed table of regions (64 slots),
//!   read without locks, because a signal handler may not block on a lock
//!   that the interrupted code could hold. The table's own writers (region
//!   creation and drop) serialise on a mutex outside the handler.
//! * A SIGBUS whose address is in no region is not ours (a truncated file
//!   mapping, say): the handler passes it to the handler that was there
//!   before, or restores the default action so the retried access ends the
//!   process as it would have without ccvm.
//! * A fault taken inside the kernel on the program's behalf (a `read(2)`
//!   into a page that is not resident) raises no signal in SIGBUS mode: the
//!   system call fails with `EFAULT`. Programs that hand region memory to
//!   the kernel touch the buffer first
//!   ([`Region::prefault`](crate::Region::prefault)), run under the
//!   [`guard`](crate::guard), which does that for every call, or run in
//!   event mode ([`FaultMode::Thread`](crate::FaultMode)).
//! * The handler blocks every signal while it serves a fault (a handler of
//!   the program that touched the region there would wait on the pager's
//!   lock), and lets its own system calls through the guard.
//! * The handler keeps `errno` as it found it: the interrupted code may be
//!   between a system call and reading its `errno`.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use crate::pager::Pager;
use crate::uffd::Fault;

const SLOTS: usize = 64;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    pager: AtomicPtr<Mutex<Pager>>,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    pager: AtomicPtr::new(std::ptr::null_mut()),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static WRITERS: Mutex<()> = Mutex::new(());
static INSTALL: Once = Once::new();
/// The handler that was there before ours, or that the program installed
/// since (see the `guard` module): `(handler, flags, mask)`.
static PREVIOUS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// The action SIGBUS signals that are not the region's are passed to:
/// `(handler, flags, mask)` as the kernel takes them.
pub(crate) fn program_action() -> (usize, u64, u64) {
    (
        PREVIOUS[0].load(Ordering::Relaxed) as usize,
        PREVIOUS[1].load(Ordering::Relaxed),
        PREVIOUS[2].load(Ordering::Relaxed),
    )
}

/// Sets the action that SIGBUS signals that are not the region's are
/// passed to.
pub(crate) fn set_program_action(handler: usize, flags: u64, mask: u64) {
    PREVIOUS[0].store(handler as u64, Ordering::Relaxed);
    PREVIOUS[1].store(flags, Ordering::Relaxed);
    PREVIOUS[2].store(mask, Ordering::Relaxed);
}

/// `madvise(MADV_DONTNEED)` of `[addr, addr + len)` where it lies in a
/// region (see `Region::discard`); returns the part inside one, `None` if
/// `addr` is in none.
pub(crate) fn discard(addr: usize, len: usize) -> Option<usize> {
    let (start, end, pager) = region_of(addr)?;
    let last = addr.saturating_add(len).min(end);
    let pages = (addr - start) / crate::PAGE_SIZE..(last - start).div_ceil(crate::PAGE_SIZE);
    crate::region::discard_locked(pager, start, pages);
    Some(last - addr)
}

/// Waits for every fault and eviction under way in any region to finish:
/// a pin taken before this is seen by every eviction after it.
pub(crate) fn settle() {
    for slot in &TABLE {
        let pager = slot.pager.load(Ordering::Acquire);
        // SAFETY: as in `find`.
        if let Some(pager) = unsafe { pager.as_ref() } {
            drop(crate::pager::lock(pager));
        }
    }
}

/// Adds a region `[start, end)` served by `pager`, installing the handler
/// on first use. The pager must stay alive until [`remove`] returns.
///
/// # Errors
///
/// A message if all slots are taken or the handler cannot be installed.
pub(crate) fn add(start: usize, end: usize, pager: *const Mutex<Pager>) -> Result<(), String> {
    let mut installed = Ok(());
    INSTALL.call_once(|| installed = install());
    installed?;
    let _guard = WRITERS.lock().unwrap_or_else(|e| e.into_inner());
    let slot = TABLE
        .iter()
        .find(|s| s.pager.load(Ordering::Acquire).is_null())
        .ok_or_else(|| {
            format!("more than {SLOTS} regions in SIGBUS mode at once; drop one or use --fault-mode thread")
        })?;
    slot.start.store(start, Ordering::Relaxed);
    slot.end.store(end, Ordering::Relaxed);
    slot.pager.store(pager.cast_mut(), Ordering::Release);
    Ok(())
}

/// Takes the region served by `pager` out of the table. Faults in it after
/// this are no longer served (the region is being unmapped).
pub(crate) fn remove(pager: *const Mutex<Pager>) {
    let _guard = WRITERS.lock().unwrap_or_else(|e| e.into_inner());
    for slot in &TABLE {
        if slot.pager.load(Ordering::Acquire) == pager.cast_mut() {
            slot.end.store(0, Ordering::Relaxed);
            slot.start.store(0, Ordering::Relaxed);
            slot.pager.store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

/// The region holding `addr`: `(start, end, pager)`.
fn region_of(addr: usize) -> Option<(usize, usize, &'static Mutex<Pager>)> {
    TABLE.iter().find_map(|s| {
        let pager = s.pager.load(Ordering::Acquire);
        let (start, end) = (s.start.load(Ordering::Relaxed), s.end.load(Ordering::Relaxed));
        // SAFETY: a pager in the table lives until `remove` takes it out,
        // and a region is only removed when no access to it can be made.
        ((start..end).contains(&addr) && !pager.is_null()).then(|| (start, end, unsafe { &*pager }))
    })
}

fn find(addr: usize) -> Option<&'static Mutex<Pager>> {
    region_of(addr).map(|(_, _, pager)| pager)
}

fn install() -> Result<(), String> {
    // SAFETY: a zeroed sigaction is a valid starting point; the fields set
    // are the handler, SA_SIGINFO and an empty mask.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        // (The guard adds SA_ONSTACK when it gives each thread a stack of
        // its own: not before, since a program's small one, such as Rust's
        // for its own overflow handler, is too small to serve a fault on.)
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // Nothing runs inside a fault's service: a handler of the program
        // that touched the region there would wait on the pager's lock.
        libc::sigfillset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &action, &mut previous) != 0 {
            return Err(format!(
                "installing the SIGBUS handler: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mask = *(&previous.sa_mask as *const libc::sigset_t).cast::<u64>();
        set_program_action(previous.sa_sigaction, previous.sa_flags as u32 as u64, mask);
    }
    Ok(())
}

/// Whether the interrupted access was a write, from the x86-64 page-fault
/// error code the kernel leaves in the signal frame; `false` elsewhere.
fn was_write(context: *mut libc::c_void) -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: with SA_SIGINFO the third argument is the ucontext_t.
        let uc = unsafe { &*(context as *const libc::ucontext_t) };
        uc.uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
    {
        let _ = context;
        false
    }
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: errno is thread-local and always valid to read and write.
    let errno = unsafe { *libc::__errno_location() };
    // The pager's own system calls go straight to the kernel.
    let _allow = crate::guard::Allow::new();
    match find(addr) {
        Some(pager) => {
            let fault = Fault {
                addr,
                write: was_write(context),
                write_protect: false,
            };
            crate::pager::lock_for_fault(pager).handle(fault);
        }
        None => pass_on(sig, info, context),
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Hands a SIGBUS that is not ours to the handler there was before.
fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let (handler, flags, _) = program_action();
    match handler {
        h if h != libc::SIG_DFL && h != libc::SIG_IGN => {
            if flags & libc::SA_SIGINFO as u64 != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, context);
            } else {
                // SAFETY: a plain handler takes the signal number.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
        }
        _ => {
            // The retried access raises SIGBUS again, now with the default
            // action: the process ends as it would have without ccvm.
            // SAFETY: restoring the default disposition of SIGBUS.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        }
    }
}

//! SIGBUS-speed faults that system calls cannot break: every system call
//! of a guarded process is intercepted (syscall user dispatch), its
//! buffers in the region are faulted in and pinned, and the call is made
//! for it.
//!
//! In SIGBUS mode a touch of a page that is not resident raises SIGBUS in
//! the touching thread, which serves it in a few microseconds; but a touch
//! made by the kernel inside a system call (a `read(2)` into a `malloc`ed
//! buffer) raises nothing and fails the call with `EFAULT`. Retrying the
//! call is not sound (a partial copy returns a short count, a datagram is
//! dropped). The guard makes the pages present before the kernel touches
//! them, and keeps them present until the call returns.
//!
//! # How
//!
//! * `prctl(PR_SET_SYSCALL_USER_DISPATCH)` makes every system call of the
//!   thread raise SIGSYS while its selector byte says *block*, except
//!   calls made from one exempt range of code (the `raw` module). The
//!   SIGSYS handler reads the call from the saved registers, finds its
//!   buffers (the `calls` module), pins them (`crate::pins`), touches each
//!   page (a SIGBUS fault where it is not resident), and makes the call
//!   from the exempt code, putting the result where the program expects
//!   it. This covers what symbol interposition cannot: the C library's
//!   internal calls (stdio's reads, `readdir`'s `getdents`, the resolver),
//!   inline system calls, and every thread.
//! * The selector is per thread (the kernel does not carry it over
//!   `clone` or `fork`). While the guard's own code or the pager runs, the
//!   selector says *allow* ([`Allow`]), so their calls go straight through.
//! * Calls that must return where they were made (`clone`, `clone3`,
//!   `fork`, `vfork`) are re-run in place: the handler rewinds the saved
//!   instruction pointer to the call, sets the trap flag and allows the
//!   call; the single-step trap after it, in the parent and in the child,
//!   registers the thread and blocks again. The locale's tables are read
//!   first (`touch_locale`), since a new thread reads them before it can
//!   take a fault.
//! * Signal state: every handler returns through the guard's restorer
//!   (`rt_sigaction` is rewritten, and handlers installed before the guard
//!   are reinstalled), since a trapped `rt_sigreturn` would need the frame
//!   the handler ran on. `rt_sigprocmask` is applied to the interrupted
//!   context's mask, as the kernel would have, except that SIGSYS, SIGBUS
//!   and SIGTRAP are never blocked (a forced signal that is blocked kills
//!   the process). The program's own handlers of those three are kept and
//!   called for signals that are not the guard's.
//! * Signal stacks: ccvm's handlers run on an alternate stack of ccvm's
//!   for each thread, since the interrupted stack may be in the region (a
//!   goroutine's), and a program's own alternate stack in the region is
//!   kept resident (the `altstack` module).
//!
//! # Cost and limits
//!
//! * Every system call pays a signal's round trip (about 1.5 µs on this
//!   project's machine, against 0.1 µs for a plain call); faults are
//!   served at SIGBUS speed.
//! * A buffer larger than a quarter of the RAM budget is faulted in but
//!   not pinned beyond that quarter, so that a huge `read` cannot pin the
//!   budget away; a threaded program may then see such a call fail.
//! * Memory the kernel touches after a call returns cannot be covered:
//!   `io_uring_setup` and `io_setup` (kernel AIO) fail with `ENOSYS`, as
//!   on a kernel built without them, and libraries fall back to threads.
//!   A `vmsplice`d page is not covered (see the `calls` module).

mod altstack;
mod buffers;
mod calls;
mod raw;
mod signals;

use buffers::guarded_call;
pub(crate) use buffers::touch;
pub use buffers::{prepare, Prepared};
use signals::{action, pass_on, sigaction, sigprocmask, store_action, KernelAction, PROGRAM_SIGSYS, PROGRAM_SIGTRAP};

pub(crate) use calls::Access;

/// A system call made straight to the kernel, past any wrapper a
/// preloaded library puts over the C library's `syscall` (and exempt from
/// the guard's interception).
pub use raw::syscall as raw_syscall;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

const PR_SET_SYSCALL_USER_DISPATCH: u64 = 59;
const PR_SYS_DISPATCH_ON: u64 = 1;
const ALLOW: u8 = 0;
const BLOCK: u8 = 1;
/// `si_code` of a SIGSYS raised by syscall user dispatch.
const SYS_USER_DISPATCH: i32 = 2;
const SA_RESTORER: u64 = 0x0400_0000;
/// The x86 trap flag in `EFLAGS`.
const TRAP_FLAG: i64 = 0x100;
/// The signals the guard and the SIGBUS handler rely on, as a mask.
const OURS: u64 = bit(libc::SIGSYS) | bit(libc::SIGBUS) | bit(libc::SIGTRAP);

const fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// Threads' selectors, found by `pthread_self()` (the thread pointer,
/// read without the dynamic linker). Not Rust thread-locals: in a
/// preloaded library those are reached through the dynamic thread vector,
/// which the C library allocates with `malloc`, in the paged heap, so
/// that a handler reading it could fault inside a fault.
mod selectors {
    use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};

    pub(super) const SLOTS: usize = 4096;
    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: AtomicUsize = AtomicUsize::new(0);
    #[allow(clippy::declare_interior_mutable_const)]
    const ALLOWED: AtomicU8 = AtomicU8::new(super::ALLOW);
    static OWNER: [AtomicUsize; SLOTS] = [FREE; SLOTS];
    static SELECTOR: [AtomicU8; SLOTS] = [ALLOWED; SLOTS];

    fn me() -> usize {
        // SAFETY: always valid; reads the thread pointer.
        unsafe { libc::pthread_self() as usize }
    }

    fn probe(me: usize) -> impl Iterator<Item = usize> {
        let home = (me >> 12 ^ me >> 24) % SLOTS;
        (0..SLOTS).map(move |i| (home + i) % SLOTS)
    }

    /// This thread's selector, if it has one.
    pub(super) fn mine() -> Option<&'static AtomicU8> {
        index().map(|i| &SELECTOR[i])
    }

    /// This thread's slot in the table, if it has one.
    pub(super) fn index() -> Option<usize> {
        let me = me();
        probe(me)
            .take_while(|&i| OWNER[i].load(Relaxed) != 0)
            .find(|&i| OWNER[i].load(Relaxed) == me)
    }

    /// Gives this thread's selector back (the thread is ending).
    pub(super) fn release() {
        if let Some(i) = index() {
            SELECTOR[i].store(super::ALLOW, Relaxed);
            // A tombstone, so that probes for threads placed past it
            // still find them.
            OWNER[i].store(usize::MAX, Relaxed);
        }
    }

    /// This thread's selector, taken if it has none; `None` if all are
    /// taken.
    pub(super) fn claim() -> Option<&'static AtomicU8> {
        if let Some(s) = mine() {
            return Some(s);
        }
        let me = me();
        probe(me)
            .find(|&i| {
                let owner = OWNER[i].load(Relaxed);
                (owner == 0 || owner == usize::MAX) && OWNER[i].compare_exchange(owner, me, Relaxed, Relaxed).is_ok()
            })
            .map(|i| &SELECTOR[i])
    }
}

static INSTALLED: AtomicBool = AtomicBool::new(false);
static START: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// What makes `mmap`, `munmap`, `mprotect` and `mremap` calls that name the
/// region, a `fn(i64, [u64; 6]) -> i64` as a `usize` (0: none; see
/// [`route_memory_calls`]).
static MEMORY_CALLS: AtomicUsize = AtomicUsize::new(0);

/// What runs before a process ends with an `exit_group` made without the
/// C library, a `fn()` as a `usize` (0: none; see [`on_exit_group`]).
static AT_EXIT_GROUP: AtomicUsize = AtomicUsize::new(0);

/// Has the guard call `at_exit` when the process ends with an
/// `exit_group` call, in the thread that makes it, before the call. `ccvm
/// exec` writes the process's report there: a Go program ends with an
/// inline `exit_group`, past the C library's exit and its destructors.
/// `at_exit` runs with the thread allowed, so that its own calls go
/// straight to the kernel; it may run again after the C library's exit
/// has run it.
pub fn on_exit_group(at_exit: fn()) {
    AT_EXIT_GROUP.store(at_exit as usize, Relaxed);
}

/// Has the guard hand `mmap` (fixed), `munmap`, `mprotect` and `mremap`
/// calls whose ranges reach into the region to `calls` (the system call's
/// number and arguments, returning its result or `-errno`), whoever made
/// them: the C library's wrappers are replaced by `ccvm exec`'s own, but a
/// call made without the C library (an inline system call, as some
/// runtimes make) would otherwise change the region behind the pager's
/// back (a range moved with `mremap` would leave its evicted pages
/// behind). `calls` runs in the guard's SIGSYS handler with the thread
/// allowed, so that its own calls go straight to the kernel.
pub fn route_memory_calls(calls: fn(i64, [u64; 6]) -> i64) {
    MEMORY_CALLS.store(calls as usize, Relaxed);
}

/// Whether memory call `nr` with `args` names a range that reaches into
/// the region (for `mmap`, only a fixed mapping does).
fn names_region(nr: i64, args: &[u64; 6]) -> bool {
    let overlaps = |addr: u64, len: u64| {
        let (start, end) = (START.load(Relaxed) as u64, END.load(Relaxed) as u64);
        addr < end && addr.saturating_add(len) > start
    };
    let fixed = (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) as u64;
    match nr {
        libc::SYS_mmap => args[3] & fixed != 0 && overlaps(args[0], args[1]),
        libc::SYS_munmap | libc::SYS_mprotect => overlaps(args[0], args[1]),
        libc::SYS_mremap => {
            overlaps(args[0], args[1]) || (args[3] & libc::MREMAP_FIXED as u64 != 0 && overlaps(args[4], args[2]))
        }
        _ => false,
    }
}
static PIN_LIMIT: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);
static CALLS_WITH_BUFFERS: AtomicU64 = AtomicU64::new(0);
static PAGES_TOUCHED: AtomicU64 = AtomicU64::new(0);
/// Where re-run calls return (the instruction after each `syscall`).
#[allow(clippy::declare_interior_mutable_const)]
const NO_SITE: AtomicUsize = AtomicUsize::new(0);
static STEP_SITES: [AtomicUsize; 16] = [NO_SITE; 16];

/// Reads the global locale's tables, so that they are resident when a new
/// thread starts: the C library starts a thread with every signal
/// blocked and reads them (`__ctype_init`) before it unblocks any, and a
/// program's locale lives in its heap, so a fault there, which the pager
/// cannot be told of, would end the process with SIGBUS.
pub(crate) fn touch_locale() {
    // SAFETY: reads the global locale's LC_CTYPE data, the structure
    // whose entries `__ctype_init` reads; the result is not kept.
    unsafe {
        std::hint::black_box(libc::nl_langinfo(libc::CODESET));
    }
}

/// Lets this thread's system calls through unintercepted while it lives,
/// restoring the selector as it found it when dropped. The pager's and the
/// guard's own code runs under one.
#[must_use = "calls are let through only while this lives"]
pub struct Allow {
    previous: u8,
}

impl Allow {
    /// Allows this thread's calls.
    pub fn new() -> Allow {
        let previous = selectors::mine().map_or(ALLOW, |s| s.load(Relaxed));
        set_selector(ALLOW);
        Allow { previous }
    }
}

impl Default for Allow {
    fn default() -> Self {
        Allow::new()
    }
}

impl Drop for Allow {
    fn drop(&mut self) {
        set_selector(self.previous);
    }
}

fn set_selector(value: u8) {
    // An atomic store: not moved across the calls it governs.
    if let Some(s) = selectors::mine() {
        s.store(value, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What the guard has done so far: `(calls intercepted, calls that passed
/// region memory, pages of theirs touched)`.
pub fn counters() -> (u64, u64, u64) {
    (
        CALLS.load(Relaxed),
        CALLS_WITH_BUFFERS.load(Relaxed),
        PAGES_TOUCHED.load(Relaxed),
    )
}

/// Turns the guard off in this process: for a forked child whose heap is
/// plain memory (the kernel does not carry the interception over a fork;
/// this stops the wrappers of [`prepare`] reaching for the parent's pager).
pub fn detach() {
    INSTALLED.store(false, Relaxed);
}

/// Whether the guard is on in this process.
pub fn installed() -> bool {
    INSTALLED.load(Relaxed)
}

/// Guards the region `[start, end)` (served in SIGBUS mode) for the rest
/// of the process: from now on, this thread's system calls, and those of
/// every thread and `vfork` child it starts, are intercepted as the module
/// docs say. `pin_limit` is the most bytes one call's buffers pin.
///
/// Call it once, early, before the program starts threads (threads that
/// exist already are not guarded). A second call does nothing.
///
/// # Errors
///
/// A message if the kernel has no syscall user dispatch (Linux 5.11 and
/// later) or a handler cannot be installed.
pub fn install(start: usize, end: usize, pin_limit: usize) -> Result<(), String> {
    if INSTALLED.swap(true, Relaxed) {
        return Ok(());
    }
    START.store(start, Relaxed);
    END.store(end, Relaxed);
    PIN_LIMIT.store(pin_limit, Relaxed);
    // On ccvm's own alternate stack (see the `altstack` module).
    let ours = |handler: usize| KernelAction {
        handler,
        flags: (libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK) as u64 | SA_RESTORER,
        restorer: raw::restorer(),
        mask: 0,
    };
    for (sig, program, handler) in [
        (libc::SIGSYS, &PROGRAM_SIGSYS, on_sigsys as *const () as usize),
        (libc::SIGTRAP, &PROGRAM_SIGTRAP, on_sigtrap as *const () as usize),
    ] {
        let previous = action(sig, Some(&ours(handler))).map_err(|e| format!("installing the SIGSYS guard: {e}"))?;
        store_action(program, &previous);
    }
    // Handlers installed before now (the SIGBUS handler among them) return
    // through the C library's restorer, whose rt_sigreturn would trap.
    for sig in 1..=64 {
        if [libc::SIGKILL, libc::SIGSTOP, libc::SIGSYS, libc::SIGTRAP].contains(&sig) {
            continue;
        }
        if let Ok(mut a) = action(sig, None) {
            if a.handler > 1 {
                if sig == libc::SIGBUS {
                    // The fault handler's, on ccvm's stack of each thread
                    // (see the `altstack` module).
                    a.flags |= libc::SA_ONSTACK as u64;
                }
                a.flags |= SA_RESTORER;
                a.restorer = raw::restorer();
                a.mask &= !OURS;
                action(sig, Some(&a)).map_err(|e| format!("reinstalling the handler of signal {sig}: {e}"))?;
            }
        }
    }
    register_thread(None)
        .map_err(|e| format!("syscall user dispatch: {e} (it needs Linux 5.11 or later; use --fault-mode thread)"))
}

/// Registers this thread's selector with the kernel, gives it ccvm's
/// alternate stack (see the `altstack` module; `context`: the handler's,
/// if called from one) and blocks its calls.
fn register_thread(context: Option<&mut libc::ucontext_t>) -> Result<(), std::io::Error> {
    let (start, len) = raw::exempt();
    let selector = selectors::claim().ok_or_else(|| std::io::Error::other("more than 4096 threads"))?;
    selector.store(ALLOW, Relaxed);
    // SAFETY: the selector is a static byte of this thread's own; the
    // exempt range is code of this library.
    let r = unsafe {
        raw::syscall(
            libc::SYS_prctl,
            [
                PR_SET_SYSCALL_USER_DISPATCH,
                PR_SYS_DISPATCH_ON,
                start as u64,
                len as u64,
                selector.as_ptr() as u64,
                0,
            ],
        )
    };
    if r < 0 {
        return Err(std::io::Error::from_raw_os_error(-r as i32));
    }
    altstack::give_own(context);
    selector.store(BLOCK, Relaxed);
    Ok(())
}

fn in_region(addr: usize) -> bool {
    (START.load(Relaxed)..END.load(Relaxed)).contains(&addr)
}

/// Re-runs the call in place with the trap flag set: `clone` and its kin
/// must return where they were made, in the parent and in the child.
fn step_over(gregs: &mut [i64; 23]) {
    let site = gregs[libc::REG_RIP as usize] as usize;
    for s in &STEP_SITES {
        let current = s.load(Relaxed);
        if current == site || (current == 0 && s.compare_exchange(0, site, Relaxed, Relaxed).is_ok()) {
            break;
        }
    }
    // `syscall` is two bytes.
    gregs[libc::REG_RIP as usize] -= 2;
    gregs[libc::REG_EFL as usize] |= TRAP_FLAG;
}

extern "C" fn on_sigsys(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes valid pointers to SA_SIGINFO handlers.
    let (info_ref, uc) = unsafe { (&*info, &mut *(context as *mut libc::ucontext_t)) };
    if info_ref.si_code != SYS_USER_DISPATCH {
        return pass_on(&PROGRAM_SIGSYS, sig, info, context);
    }
    let allow = Allow::new();
    // SAFETY: errno is thread-local; kept for the interrupted code.
    let errno = unsafe { *libc::__errno_location() };
    CALLS.fetch_add(1, Relaxed);
    let g = &mut uc.uc_mcontext.gregs;
    let nr = g[libc::REG_RAX as usize];
    let args = [
        libc::REG_RDI,
        libc::REG_RSI,
        libc::REG_RDX,
        libc::REG_R10,
        libc::REG_R8,
        libc::REG_R9,
    ]
    .map(|r| g[r as usize] as u64);
    let result = match nr {
        libc::SYS_clone | libc::SYS_clone3 | libc::SYS_fork | libc::SYS_vfork => {
            touch_locale();
            step_over(g);
            // Allowed until the step's trap: the call runs in place.
            std::mem::forget(allow);
            return;
        }
        libc::SYS_rt_sigreturn => {
            drop(allow);
            // SAFETY: a trapped rt_sigreturn, redone on its own stack.
            unsafe { raw::sigreturn(g[libc::REG_RSP as usize] as u64) }
        }
        libc::SYS_rt_sigaction => sigaction(args),
        libc::SYS_rt_sigprocmask => sigprocmask(uc, args),
        libc::SYS_prctl if args[0] == PR_SET_SYSCALL_USER_DISPATCH => -(libc::EBUSY as i64),
        // Kernel workers would touch the buffers after the call returns:
        // refused, as by a kernel without them, so that libraries fall
        // back to their thread pools (libuv, liburing users).
        libc::SYS_io_uring_setup | libc::SYS_io_setup => -(libc::ENOSYS as i64),
        // Pages the program drops read back as zeros, cached and swapped
        // copies included.
        libc::SYS_madvise
            if matches!(args[2] as i32, libc::MADV_DONTNEED | libc::MADV_FREE)
                && in_region(args[0] as usize)
                && (args[0] as usize).is_multiple_of(crate::PAGE_SIZE) =>
        {
            let inside = crate::signal::discard(args[0] as usize, args[1] as usize).unwrap_or(0);
            match args[1] as usize - inside.min(args[1] as usize) {
                0 => 0,
                rest => {
                    let tail = [args[0] + inside as u64, rest as u64, args[2], 0, 0, 0];
                    // SAFETY: the program's own call, on the part past the region.
                    unsafe { raw::syscall(libc::SYS_madvise, tail) }
                }
            }
        }
        libc::SYS_mmap | libc::SYS_munmap | libc::SYS_mprotect | libc::SYS_mremap
            if MEMORY_CALLS.load(Relaxed) != 0 && names_region(nr, &args) =>
        {
            // SAFETY: stored by `route_memory_calls` from such a function.
            let calls: fn(i64, [u64; 6]) -> i64 = unsafe { std::mem::transmute(MEMORY_CALLS.load(Relaxed)) };
            calls(nr, args)
        }
        // ccvm's own descriptors are not the program's to close (see
        // `crate::fds`).
        libc::SYS_close | libc::SYS_dup if crate::fds::is_ours(args[0] as i32) => -(libc::EBADF as i64),
        // A dup onto one of them moves it first.
        libc::SYS_dup2 | libc::SYS_dup3 => crate::fds::dup_onto(args[0] as i32, args[1] as i32, &mut || {
            // SAFETY: the program's own call, as asked.
            unsafe { raw::syscall(nr, args) }
        }),
        libc::SYS_close_range => {
            crate::fds::close_range_around(args[0] as u32, args[1] as u32, args[2] as u32, &mut |a, b, f| {
                // SAFETY: closing the program's own descriptors, as asked.
                unsafe { raw::syscall(libc::SYS_close_range, [a as u64, b as u64, f as u64, 0, 0, 0]) }
            })
        }
        // A signal stack in the region must stay resident.
        libc::SYS_sigaltstack => match altstack::sigaltstack(args, uc) {
            altstack::Outcome::Done(r) => r,
            altstack::Outcome::Rerun => {
                step_over(&mut uc.uc_mcontext.gregs);
                // Allowed until the step's trap, as for `clone`.
                std::mem::forget(allow);
                return;
            }
        },
        libc::SYS_exit | libc::SYS_exit_group => ending(nr, args, allow),
        _ => guarded_call(nr, args),
    };
    uc.uc_mcontext.gregs[libc::REG_RAX as usize] = result;
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// A thread's `exit` (its signal stack and selector given back) or the
/// process's `exit_group` (the function of [`on_exit_group`] run first).
fn ending(nr: i64, args: [u64; 6], allow: Allow) -> i64 {
    if nr == libc::SYS_exit {
        drop(allow);
        altstack::release();
        selectors::release();
    } else {
        let at_exit = AT_EXIT_GROUP.load(Relaxed);
        if at_exit != 0 {
            // SAFETY: stored by `on_exit_group` from a `fn()`.
            let at_exit: fn() = unsafe { std::mem::transmute(at_exit) };
            at_exit();
        }
    }
    // SAFETY: the program's own exit.
    unsafe { raw::syscall(nr, args) }
}

extern "C" fn on_sigtrap(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: as in `on_sigsys`.
    let uc = unsafe { &mut *(context as *mut libc::ucontext_t) };
    let g = &mut uc.uc_mcontext.gregs;
    let rip = g[libc::REG_RIP as usize] as usize;
    let ours = g[libc::REG_EFL as usize] & TRAP_FLAG != 0
        && STEP_SITES.iter().any(|s| {
            let site = s.load(Relaxed);
            site != 0 && rip.wrapping_sub(site) < 16
        });
    if !ours {
        return pass_on(&PROGRAM_SIGTRAP, sig, info, context);
    }
    g[libc::REG_EFL as usize] &= !TRAP_FLAG;
    if altstack::after_rerun(g) {
        set_selector(BLOCK);
        return;
    }
    // A new thread or process starts unregistered; the parent registers
    // again, which changes nothing.
    if register_thread(Some(uc)).is_err() {
        set_selector(ALLOW);
    }
}

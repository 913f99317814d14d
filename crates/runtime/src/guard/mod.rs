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
//!   first ([`touch_locale`]), since a new thread reads them before it can
//!   take a fault.
//! * Signal state: every handler returns through the guard's restorer
//!   (`rt_sigaction` is rewritten, and handlers installed before the guard
//!   are reinstalled), since a trapped `rt_sigreturn` would need the frame
//!   the handler ran on. `rt_sigprocmask` is applied to the interrupted
//!   context's mask, as the kernel would have, except that SIGSYS, SIGBUS
//!   and SIGTRAP are never blocked (a forced signal that is blocked kills
//!   the process). The program's own handlers of those three are kept and
//!   called for signals that are not the guard's.
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

mod calls;
mod raw;

pub(crate) use calls::Access;

/// A system call made straight to the kernel, past any wrapper a
/// preloaded library puts over the C library's `syscall` (and exempt from
/// the guard's interception).
pub use raw::syscall as raw_syscall;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::pins::{self, Pin};

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

    const SLOTS: usize = 4096;
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
        let me = me();
        probe(me)
            .map(|i| (i, OWNER[i].load(Relaxed)))
            .take_while(|&(_, owner)| owner != 0)
            .find(|&(_, owner)| owner == me)
            .map(|(i, _)| &SELECTOR[i])
    }

    /// Gives this thread's selector back (the thread is ending).
    pub(super) fn release() {
        let me = me();
        if let Some(i) = probe(me)
            .take_while(|&i| OWNER[i].load(Relaxed) != 0)
            .find(|&i| OWNER[i].load(Relaxed) == me)
        {
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

/// A signal action as the kernel takes it on x86-64.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct KernelAction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// The program's own actions for SIGSYS and SIGTRAP (SIGBUS's are kept by
/// the `signal` module), as `[handler, flags, mask]`.
#[allow(clippy::declare_interior_mutable_const)]
const NO_ACTION: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
static PROGRAM_SIGSYS: [AtomicU64; 3] = NO_ACTION;
static PROGRAM_SIGTRAP: [AtomicU64; 3] = NO_ACTION;

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
    let ours = |handler: usize| KernelAction {
        handler,
        flags: (libc::SA_SIGINFO | libc::SA_NODEFER) as u64 | SA_RESTORER,
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
                a.flags |= SA_RESTORER;
                a.restorer = raw::restorer();
                a.mask &= !OURS;
                action(sig, Some(&a)).map_err(|e| format!("reinstalling the handler of signal {sig}: {e}"))?;
            }
        }
    }
    register_thread()
        .map_err(|e| format!("syscall user dispatch: {e} (it needs Linux 5.11 or later; use --fault-mode thread)"))
}

/// Sets signal `sig`'s action to `new` (if any) and returns the old one.
fn action(sig: i32, new: Option<&KernelAction>) -> Result<KernelAction, std::io::Error> {
    let mut old = KernelAction::default();
    let new = new.map_or(0, |a| a as *const KernelAction as u64);
    // SAFETY: valid action structures of the kernel's layout.
    let r = unsafe {
        raw::syscall(
            libc::SYS_rt_sigaction,
            [sig as u64, new, &mut old as *mut KernelAction as u64, 8, 0, 0],
        )
    };
    if r < 0 {
        return Err(std::io::Error::from_raw_os_error(-r as i32));
    }
    Ok(old)
}

fn store_action(to: &[AtomicU64; 3], a: &KernelAction) {
    to[0].store(a.handler as u64, Relaxed);
    to[1].store(a.flags, Relaxed);
    to[2].store(a.mask, Relaxed);
}

fn load_action(from: &[AtomicU64; 3]) -> KernelAction {
    KernelAction {
        handler: from[0].load(Relaxed) as usize,
        flags: from[1].load(Relaxed),
        restorer: raw::restorer(),
        mask: from[2].load(Relaxed),
    }
}

/// Registers this thread's selector with the kernel and blocks its calls.
fn register_thread() -> Result<(), std::io::Error> {
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
    selector.store(BLOCK, Relaxed);
    Ok(())
}

fn in_region(addr: usize) -> bool {
    (START.load(Relaxed)..END.load(Relaxed)).contains(&addr)
}

/// Reads `out.len()` bytes at `addr`: directly inside the region (a
/// fault there is served), through the kernel elsewhere, so that a bad
/// pointer is an error, not a crash.
fn peek(addr: usize, out: &mut [u8]) -> bool {
    if wholly_in_region(addr, out.len()) {
        // SAFETY: inside the region, which is mapped read-write for its
        // whole length (a missing page faults and is served).
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
        return true;
    }
    through_kernel(addr, out.as_mut_ptr(), out.len(), false)
}

/// Writes `bytes` at `addr` as `peek` reads.
fn poke(addr: usize, bytes: &[u8]) -> bool {
    if wholly_in_region(addr, bytes.len()) {
        // SAFETY: inside the region, mapped read-write.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        return true;
    }
    through_kernel(addr, bytes.as_ptr().cast_mut(), bytes.len(), true)
}

fn wholly_in_region(addr: usize, len: usize) -> bool {
    in_region(addr) && addr.checked_add(len).is_some_and(|e| e <= END.load(Relaxed))
}

/// Copies `len` bytes between `local` and the program's `addr` through the
/// kernel (`process_vm_writev` to write, `process_vm_readv` to read), which
/// checks `addr`; whether all were copied.
fn through_kernel(addr: usize, local: *mut u8, len: usize, write: bool) -> bool {
    let local = libc::iovec {
        iov_base: local.cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the kernel checks the remote range; the local one is the
    // caller's buffer of `len` bytes.
    let n = unsafe {
        if write {
            libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
        }
    };
    n == len as isize
}

/// Touches every page of `[start, end)` (inside the region) as `access`:
/// a read, or a write that stores what it read.
pub(crate) fn touch(start: usize, end: usize, access: calls::Access) {
    for page in (start & !(crate::PAGE_SIZE - 1)..end).step_by(crate::PAGE_SIZE) {
        // A page the program made read-only is only read, and one it made
        // unreadable (or mapped something else over) is left to the
        // kernel, which fails the call or faults on it as it would unpaged.
        let (readable, writable) = crate::protections::access(page);
        if !readable {
            continue;
        }
        // SAFETY: a page of the region, mapped readable; an atomic byte
        // is valid for any bits, and a compare-exchange of a value with
        // itself changes nothing a concurrent writer stored.
        let byte = unsafe { &*(page as *const std::sync::atomic::AtomicU8) };
        let v = byte.load(Relaxed);
        if access == calls::Access::Write && writable {
            let _ = byte.compare_exchange(v, v, Relaxed, Relaxed);
        }
    }
}

/// The region buffers of one call: pinned, and touched.
struct Held {
    pins: [Option<Pin>; 16],
    ranges: [(usize, usize, calls::Access); 16],
    count: usize,
    pinned_bytes: usize,
    any: bool,
}

impl Held {
    fn new() -> Held {
        Held {
            pins: [const { None }; 16],
            ranges: [(0, 0, calls::Access::Read); 16],
            count: 0,
            pinned_bytes: 0,
            any: false,
        }
    }

    /// Takes the part of `[addr, addr + len)` inside the region.
    fn take(&mut self, addr: usize, len: usize, access: calls::Access) {
        let (lo, hi) = (START.load(Relaxed), END.load(Relaxed));
        let start = addr.max(lo);
        let end = addr.saturating_add(len).min(hi);
        if start >= end {
            return;
        }
        self.any = true;
        let (first, last) = (start & !(crate::PAGE_SIZE - 1), end.next_multiple_of(crate::PAGE_SIZE));
        if self.count < self.pins.len() && self.pinned_bytes + (last - first) <= PIN_LIMIT.load(Relaxed) {
            if let Some(pin) = pins::pin(first, last) {
                self.pins[self.count] = Some(pin);
                self.ranges[self.count] = (start, end, access);
                self.count += 1;
                self.pinned_bytes += last - first;
            }
        }
        PAGES_TOUCHED.fetch_add(((last - first) / crate::PAGE_SIZE) as u64, Relaxed);
        touch(start, end, access);
    }

    /// Touches the pinned ranges again, after every eviction decided
    /// before their pins has been carried out.
    fn settle(&self) {
        crate::signal::settle();
        for &(start, end, access) in &self.ranges[..self.count] {
            touch(start, end, access);
        }
    }
}

/// A call about to be made by a wrapper of the C library's function (no
/// SIGSYS round trip): its region buffers are resident and pinned, and
/// this thread's calls are let through, until this is dropped.
#[must_use = "the buffers are unpinned when this is dropped"]
pub struct Prepared {
    _held: Held,
    _allow: Allow,
}

/// Prepares call `nr` with `args` (x86-64 numbering, arguments as the
/// kernel takes them) to be made through the C library, as the SIGSYS
/// handler would before making it: for wrappers of frequent calls, which
/// then cost about a tenth of an intercepted call. Does nothing when the
/// guard is not installed.
pub fn prepare(nr: i64, args: [u64; 6]) -> Prepared {
    let allow = Allow::new();
    // Inside the guard's or the pager's own code (the pager's swap-file
    // reads), calls are the runtime's, with no region buffers.
    let held = if installed() && allow.previous == BLOCK {
        CALLS.fetch_add(1, Relaxed);
        buffers_in(nr, args)
    } else {
        Held::new()
    };
    Prepared {
        _held: held,
        _allow: allow,
    }
}

/// The region buffers of call `nr`, pinned and touched.
fn buffers_in(nr: i64, args: [u64; 6]) -> Held {
    let mut held = Held::new();
    if !calls::manages_memory(nr) {
        calls::buffers(nr, &args, &peek, &mut |addr, len, access| held.take(addr, len, access));
        // Any other argument that points into the region: its page.
        for &a in &args {
            if in_region(a as usize) {
                held.take(a as usize, 1, calls::Access::Read);
            }
        }
    }
    if held.any {
        held.settle();
        CALLS_WITH_BUFFERS.fetch_add(1, Relaxed);
    }
    held
}

/// Makes call `nr` with `args` for the program, its region buffers
/// resident and pinned until it returns.
fn guarded_call(nr: i64, args: [u64; 6]) -> i64 {
    let held = buffers_in(nr, args);
    // Blocked while the call runs, so that a handler run inside it (a
    // signal that interrupts a blocking read) is guarded too.
    set_selector(BLOCK);
    // SAFETY: the program's own call, with its own arguments.
    let r = unsafe { raw::syscall(nr, args) };
    set_selector(ALLOW);
    drop(held);
    r
}

/// `rt_sigaction`, with every handler returning through the guard's
/// restorer, and the program's SIGSYS and SIGTRAP actions kept aside.
fn sigaction(args: [u64; 6]) -> i64 {
    let (sig, new, old, size) = (args[0] as i32, args[1] as usize, args[2] as usize, args[3]);
    if size != 8 {
        return -(libc::EINVAL as i64);
    }
    let read = |at: usize| {
        let mut bytes = [0u8; std::mem::size_of::<KernelAction>()];
        // SAFETY: any bytes are a valid KernelAction (plain integers).
        peek(at, &mut bytes).then(|| unsafe { std::mem::transmute::<_, KernelAction>(bytes) })
    };
    let write = |at: usize, a: &KernelAction| {
        // SAFETY: a plain structure of integers, viewed as bytes.
        let bytes: [u8; std::mem::size_of::<KernelAction>()] = unsafe { std::mem::transmute(*a) };
        poke(at, &bytes)
    };
    let kept = match sig {
        libc::SIGSYS => Some(&PROGRAM_SIGSYS),
        libc::SIGTRAP => Some(&PROGRAM_SIGTRAP),
        _ => None,
    };
    let new = if new == 0 {
        None
    } else {
        match read(new) {
            Some(a) => Some(a),
            None => return -(libc::EFAULT as i64),
        }
    };
    if let Some(kept) = kept {
        if old != 0 && !write(old, &load_action(kept)) {
            return -(libc::EFAULT as i64);
        }
        if let Some(a) = new {
            store_action(kept, &a);
        }
        return 0;
    }
    if sig == libc::SIGBUS {
        // The SIGBUS handler serves the region's faults: the program's
        // handler is kept to be passed the faults that are not ours.
        let (handler, flags, mask) = crate::signal::program_action();
        if old != 0
            && !write(
                old,
                &KernelAction {
                    handler,
                    flags,
                    restorer: raw::restorer(),
                    mask,
                },
            )
        {
            return -(libc::EFAULT as i64);
        }
        if let Some(a) = new {
            crate::signal::set_program_action(a.handler, a.flags, a.mask);
        }
        return 0;
    }
    let mut held = Held::new();
    held.take(old, std::mem::size_of::<KernelAction>(), calls::Access::Write);
    let mut changed = new;
    if let Some(a) = &mut changed {
        if a.handler > 1 {
            a.flags |= SA_RESTORER;
            a.restorer = raw::restorer();
        }
        a.mask &= !OURS;
    }
    let new_ptr = changed.as_ref().map_or(0, |a| a as *const KernelAction as u64);
    // SAFETY: a valid action on our stack; `old` is the program's.
    unsafe { raw::syscall(libc::SYS_rt_sigaction, [sig as u64, new_ptr, old as u64, 8, 0, 0]) }
}

/// `rt_sigprocmask`, applied to the mask the interrupted code gets back
/// when the handler returns, with the guard's signals kept unblocked.
fn sigprocmask(uc: &mut libc::ucontext_t, args: [u64; 6]) -> i64 {
    let (how, set, old, size) = (args[0] as i32, args[1] as usize, args[2] as usize, args[3]);
    if size != 8 {
        return -(libc::EINVAL as i64);
    }
    // SAFETY: the kernel's mask is the first 64 bits of the C library's
    // larger sigset_t.
    let mask = unsafe { &mut *(&mut uc.uc_sigmask as *mut libc::sigset_t).cast::<u64>() };
    let current = *mask;
    let change = if set == 0 {
        None
    } else {
        let mut bytes = [0u8; 8];
        if !peek(set, &mut bytes) {
            return -(libc::EFAULT as i64);
        }
        Some(u64::from_ne_bytes(bytes))
    };
    if let Some(s) = change {
        let next = match how {
            libc::SIG_BLOCK => current | s,
            libc::SIG_UNBLOCK => current & !s,
            libc::SIG_SETMASK => s,
            _ => return -(libc::EINVAL as i64),
        };
        *mask = next & !OURS;
    }
    if old != 0 && !poke(old, &current.to_ne_bytes()) {
        return -(libc::EFAULT as i64);
    }
    0
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
        libc::SYS_exit => {
            drop(allow);
            selectors::release();
            // SAFETY: the thread's own exit.
            unsafe { raw::syscall(nr, args) }
        }
        _ => guarded_call(nr, args),
    };
    uc.uc_mcontext.gregs[libc::REG_RAX as usize] = result;
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
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
    // A new thread or process starts unregistered; the parent registers
    // again, which changes nothing.
    if register_thread().is_err() {
        set_selector(ALLOW);
    }
}

/// Hands a signal that is not the guard's to the program's handler, or
/// takes the default action.
fn pass_on(program: &[AtomicU64; 3], sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let a = load_action(program);
    match a.handler {
        0 => {
            let _allow = Allow::new();
            // The default action: set it and raise the signal again.
            let dfl = KernelAction::default();
            let _ = action(sig, Some(&dfl));
            // SAFETY: sends the signal to this thread.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), sig) };
        }
        1 => {}
        h if a.flags & libc::SA_SIGINFO as u64 != 0 => {
            // SAFETY: the program installed this handler with SA_SIGINFO.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(h) };
            f(sig, info, context)
        }
        h => {
            // SAFETY: a plain handler takes the signal number.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
            f(sig)
        }
    }
}

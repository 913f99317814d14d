//! Signal stacks: ccvm's handlers run on an alternate stack outside the
//! region, and a program's alternate stack in the region stays resident.
//!
//! The kernel writes a signal's frame (about 3 KiB with the vector
//! registers' state) below the interrupted stack pointer, or onto the
//! thread's alternate stack for a handler installed with `SA_ONSTACK`.
//! Two ways that broke paged programs:
//!
//! * A frame written onto a stack in the region. Go's goroutines run on
//!   stacks of 2 KiB carved out of its heap, and every system call the
//!   guard intercepts (SIGSYS) or fault it serves (SIGBUS) put a frame
//!   below the goroutine's stack pointer, over the next stack's memory: a
//!   cgo-linked Go program read a free-list pointer of 0xf0f at its first
//!   goroutine and died. So each guarded thread gets an alternate stack of
//!   its own ([`OWN_SIZE`], mapped by the kernel outside the region), and
//!   ccvm's handlers are installed with `SA_ONSTACK`. A cgo Go runtime
//!   adopts the stack it finds as its signal stack; so does Rust's.
//! * A frame written onto a program's alternate stack in the region whose
//!   page is not resident: in SIGBUS mode the kernel cannot fault it in,
//!   gives up the delivery and kills the process with SIGSEGV (a C
//!   program that took a signal on a `malloc`ed alternate stack). So a
//!   program's own stack is faulted in (written, so that each page is the
//!   thread's own, not the shared zero page) and pinned (see
//!   `crate::pins`) while installed.
//!
//! Setting a stack from a handler: the kernel's `rt_sigreturn` puts back
//! the alternate stack the thread had when the signal came (from the
//! frame's `uc_stack`), so a new thread's stack, set at its first trap
//! (which runs on the thread's own stack), is written into the interrupted
//! context too. A handler running on an alternate stack cannot change it
//! at all (`EPERM`, and `rt_sigreturn` then ignores a changed `uc_stack`),
//! so a change the program asks for is made by re-running its call in
//! place, as `clone` is, its arguments naming the stack to set, and its
//! registers put back at the single-step trap ([`after_rerun`]).
//!
//! A thread ends inside the guard's handler, on ccvm's stack, which it
//! therefore cannot unmap: the stack goes to a graveyard, and the next
//! new thread takes it once the kernel says its old thread is gone.
//!
//! Choices: a program's alternate stack smaller than [`LEAST_REAL`] is
//! recorded, not installed: ccvm's handlers, which serve faults on it,
//! need more than the 8 KiB such stacks often have. The program's
//! `sigaltstack` then reads back what it set, while its handlers run on
//! ccvm's larger stack. One pin per thread, kept by the thread's slot in
//! the selectors' table; a thread that ends without the guard seeing its
//! `exit` (a forked child's copies of its parent's other threads) leaves
//! its stack pinned, a few pages never evicted.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};

use super::{buffers, raw, selectors};
use crate::pins::{self, Pin};

/// ccvm's own alternate stack for each guarded thread.
pub(super) const OWN_SIZE: usize = 128 << 10;
/// A program's alternate stack at least this long is installed as it
/// asks; a smaller one is only recorded.
pub(super) const LEAST_REAL: usize = 64 << 10;

const NO_PIN: usize = usize::MAX;
const SS_DISABLE: u64 = 2;
const SS_ONSTACK: u64 = 1;
#[allow(clippy::declare_interior_mutable_const)]
const NONE: AtomicUsize = AtomicUsize::new(NO_PIN);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO64: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NO_RECORD: [AtomicU64; 3] = [ZERO64; 3];
/// Per thread slot: the pin of the program's stack, as [`Pin::into_slot`]
/// gave it.
static PINNED: [AtomicUsize; selectors::SLOTS] = [NONE; selectors::SLOTS];
/// Per thread slot: the base of ccvm's own stack (0: none).
static OWN: [AtomicUsize; selectors::SLOTS] = [ZERO; selectors::SLOTS];
/// Per thread slot: a small stack the program set, recorded as its
/// `stack_t` words (base, flags, size); flags 0 with base 0: none.
static RECORDED: [[AtomicU64; 3]; selectors::SLOTS] = [NO_RECORD; selectors::SLOTS];
/// Per thread slot: whether `RECORDED` holds the program's setting.
static HAS_RECORD: [AtomicUsize; selectors::SLOTS] = [ZERO; selectors::SLOTS];
/// Per thread slot: the stack a re-run call sets, its program's first two
/// argument registers, and whether a re-run is pending.
static KERNEL_SET: [[AtomicU64; 3]; selectors::SLOTS] = [NO_RECORD; selectors::SLOTS];
static SAVED: [[AtomicU64; 3]; selectors::SLOTS] = [NO_RECORD; selectors::SLOTS];
static RERUN: [AtomicUsize; selectors::SLOTS] = [ZERO; selectors::SLOTS];
/// Stacks of ccvm's whose threads ended (0: a free place), and the ids of
/// those threads.
const GRAVES: usize = 64;
/// A place in the graveyard being filled.
const CLAIMED: usize = 1;
static GRAVE: [AtomicUsize; GRAVES] = [ZERO; GRAVES];
static GRAVE_TID: [AtomicUsize; GRAVES] = [ZERO; GRAVES];

fn raw0(nr: i64) -> i64 {
    // SAFETY: a call without arguments or effects on memory.
    unsafe { raw::syscall(nr, [0; 6]) }
}

/// A stack from the graveyard whose thread is gone, if any.
fn from_grave() -> Option<usize> {
    let pid = raw0(libc::SYS_getpid) as u64;
    (0..GRAVES).find_map(|i| {
        let base = GRAVE[i].load(SeqCst);
        if base == 0 || base == CLAIMED {
            return None;
        }
        let tid = GRAVE_TID[i].load(SeqCst) as u64;
        // SAFETY: signal 0 only asks whether the thread exists.
        let gone = unsafe { raw::syscall(libc::SYS_tgkill, [pid, tid, 0, 0, 0, 0]) } == -(libc::ESRCH as i64);
        (gone && GRAVE[i].compare_exchange(base, 0, SeqCst, SeqCst).is_ok()).then_some(base)
    })
}

/// A `stack_t` as three words: base, flags, size.
type StackT = [u64; 3];

fn kernel_sigaltstack(new: Option<&StackT>, old: Option<&mut StackT>) -> i64 {
    let n = new.map_or(0, |s| s.as_ptr() as u64);
    let o = old.map_or(0, |s| s.as_mut_ptr() as u64);
    // SAFETY: both point to three words of ours, or are null.
    unsafe { raw::syscall(libc::SYS_sigaltstack, [n, o, 0, 0, 0, 0]) }
}

/// Sets the alternate stack `stack`, in the kernel and, if the call is
/// made from a handler (not running on an alternate stack: a new thread's
/// first trap), in the context it returns to, which `rt_sigreturn` would
/// otherwise put back.
fn install(stack: &StackT, context: Option<&mut libc::ucontext_t>) -> i64 {
    let r = kernel_sigaltstack(Some(stack), None);
    if let (0, Some(uc)) = (r, context) {
        uc.uc_stack = libc::stack_t {
            ss_sp: stack[0] as *mut libc::c_void,
            ss_flags: stack[1] as i32,
            ss_size: stack[2] as usize,
        };
    }
    r
}

/// The kernel's checks of a new `stack_t`, which an `rt_sigreturn` that
/// installs it would otherwise fail as a bad frame: 0 or `-errno`.
fn check(stack: &StackT) -> i64 {
    const SS_AUTODISARM: u64 = 1 << 31;
    let mode = stack[1] & !SS_AUTODISARM;
    if mode > SS_DISABLE {
        return -(libc::EINVAL as i64);
    }
    // SAFETY: reads the auxiliary vector.
    let least = (unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize).max(libc::MINSIGSTKSZ);
    if mode != SS_DISABLE && (stack[2] as usize) < least {
        return -(libc::ENOMEM as i64);
    }
    0
}

/// Gives this thread an alternate stack of ccvm's if it has none. Called
/// as each thread is registered with the guard, from the handler whose
/// `context` it returns to, if any.
pub(super) fn give_own(context: Option<&mut libc::ucontext_t>) {
    let Some(slot) = selectors::index() else { return };
    let mut old = [0u64; 3];
    if kernel_sigaltstack(None, Some(&mut old)) != 0 || old[1] & SS_DISABLE == 0 {
        // The thread has one already (inherited across a fork).
        return;
    }
    let base = match from_grave() {
        Some(base) => base as i64,
        None => {
            let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK) as u64;
            let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
            // SAFETY: a new mapping the kernel places (outside the region,
            // since the call goes straight to it).
            unsafe { raw::syscall(libc::SYS_mmap, [0, OWN_SIZE as u64, prot, flags, u64::MAX, 0]) }
        }
    };
    if base < 0 {
        return;
    }
    if install(&[base as u64, 0, OWN_SIZE as u64], context) == 0 {
        OWN[slot].store(base as usize, SeqCst);
    } else {
        // SAFETY: the mapping just made, unused.
        unsafe { raw::syscall(libc::SYS_munmap, [base as u64, OWN_SIZE as u64, 0, 0, 0, 0]) };
    }
}

/// What the guard's handler does with a `sigaltstack` call.
pub(super) enum Outcome {
    /// Done: the call's result.
    Done(i64),
    /// The kernel's stack must change, which a handler running on an
    /// alternate stack cannot do: the caller re-runs the call in place
    /// (its arguments now name the stack to set), and [`after_rerun`]
    /// puts the program's registers back.
    Rerun,
}

/// The program's `sigaltstack(new, old)`, interrupted with context `uc`
/// (see the module docs).
pub(super) fn sigaltstack(args: [u64; 6], uc: &mut libc::ucontext_t) -> Outcome {
    let Some(slot) = selectors::index() else {
        return Outcome::Done(buffers::guarded_call(libc::SYS_sigaltstack, args));
    };
    match decide(slot, args, uc) {
        Ok(None) => Outcome::Done(0),
        Ok(Some(stack)) => {
            // The call is made again from the program's context, on its
            // own stack, with `stack` and no old stack to report.
            for (w, v) in KERNEL_SET[slot].iter().zip(stack) {
                w.store(v, SeqCst);
            }
            let g = &mut uc.uc_mcontext.gregs;
            SAVED[slot][0].store(g[libc::REG_RDI as usize] as u64, SeqCst);
            SAVED[slot][1].store(g[libc::REG_RSI as usize] as u64, SeqCst);
            RERUN[slot].store(1, SeqCst);
            g[libc::REG_RDI as usize] = KERNEL_SET[slot].as_ptr() as i64;
            g[libc::REG_RSI as usize] = 0;
            Outcome::Rerun
        }
        Err(e) => Outcome::Done(e),
    }
}

/// After a call re-run for [`Outcome::Rerun`], in the trap that follows
/// it: the program's argument registers as they were. Whether this
/// thread had one pending.
pub(super) fn after_rerun(gregs: &mut [i64; 23]) -> bool {
    let Some(slot) = selectors::index() else { return false };
    if RERUN[slot].swap(0, SeqCst) == 0 {
        return false;
    }
    gregs[libc::REG_RDI as usize] = SAVED[slot][0].load(SeqCst) as i64;
    gregs[libc::REG_RSI as usize] = SAVED[slot][1].load(SeqCst) as i64;
    true
}

/// Works out the program's call: `Ok(Some(stack))` if the kernel must be
/// given `stack`, `Ok(None)` if nothing changes there; the old stack is
/// reported and the program's new one recorded or pinned meanwhile.
fn decide(slot: usize, args: [u64; 6], uc: &mut libc::ucontext_t) -> Result<Option<StackT>, i64> {
    let mut raw_new = [0u8; 24];
    if args[0] != 0 && !buffers::peek(args[0] as usize, &mut raw_new) {
        return Err(-(libc::EFAULT as i64));
    }
    let word = |i: usize| u64::from_ne_bytes(raw_new[i * 8..i * 8 + 8].try_into().expect("eight bytes"));
    let new = (args[0] != 0).then(|| [word(0), word(1) & 0xffff_ffff, word(2)]);
    // The kernel's stack when the call was made, and what the program
    // reads back: its recorded stack, or that one.
    let s = uc.uc_stack;
    let current = [s.ss_sp as u64, s.ss_flags as u32 as u64 & !SS_ONSTACK, s.ss_size as u64];
    let previous = if HAS_RECORD[slot].load(SeqCst) != 0 {
        RECORDED[slot].each_ref().map(|w| w.load(SeqCst))
    } else {
        current
    };
    // The program is on its alternate stack only if its stack pointer
    // lies in it (the guard's handler always is on one).
    let sp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
    let on_it = previous[1] & SS_DISABLE == 0 && sp.wrapping_sub(previous[0]) < previous[2];
    if on_it && new.is_some() {
        // The kernel's rule: not while running on it.
        return Err(-(libc::EPERM as i64));
    }
    if let Some(stack) = new {
        let r = check(&stack);
        if r != 0 {
            return Err(r);
        }
    }
    if args[1] != 0 {
        let old = [
            previous[0],
            previous[1] | if on_it { SS_ONSTACK } else { 0 },
            previous[2],
        ];
        let mut bytes = [0u8; 24];
        for (i, w) in old.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        if !buffers::poke(args[1] as usize, &bytes) {
            return Err(-(libc::EFAULT as i64));
        }
    }
    let Some(stack) = new else { return Ok(None) };
    let disable = stack[1] & SS_DISABLE != 0;
    let own = OWN[slot].load(SeqCst);
    unpin(slot);
    // Without a stack of ccvm's to keep, the program's is installed.
    let wanted = if own != 0 && (disable || (stack[2] as usize) < LEAST_REAL) {
        for (w, v) in RECORDED[slot].iter().zip(stack) {
            w.store(v, SeqCst);
        }
        HAS_RECORD[slot].store(1, SeqCst);
        [own as u64, 0, OWN_SIZE as u64]
    } else {
        HAS_RECORD[slot].store(0, SeqCst);
        if !disable {
            // Resident before the kernel may write a frame on it.
            pin_if_in_region(slot, stack[0] as usize, stack[2] as usize);
        }
        stack
    };
    let same = |a: &StackT, b: &StackT| a[1] & SS_DISABLE != 0 && b[1] & SS_DISABLE != 0 || a == b;
    Ok((!same(&wanted, &current)).then_some(wanted))
}

fn pin_if_in_region(slot: usize, base: usize, size: usize) {
    let (start, end) = (super::START.load(SeqCst), super::END.load(SeqCst));
    let top = base.saturating_add(size);
    if base >= end || top <= start {
        return;
    }
    buffers::touch(base.max(start), top.min(end), super::Access::Write);
    if let Some(pin) = pins::pin(base, top) {
        PINNED[slot].store(pin.into_slot(), SeqCst);
    }
}

fn unpin(slot: usize) {
    let pin = PINNED[slot].swap(NO_PIN, SeqCst);
    if pin != NO_PIN {
        // SAFETY: stored from `into_slot`, and swapped out once.
        drop(unsafe { Pin::from_slot(pin) });
    }
}

/// The thread is ending (in the guard's handler, on ccvm's stack): its
/// pin is dropped, and ccvm's stack goes to the graveyard (or, with no
/// place free there, is left mapped).
pub(super) fn release() {
    let Some(slot) = selectors::index() else { return };
    unpin(slot);
    HAS_RECORD[slot].store(0, SeqCst);
    let own = OWN[slot].swap(0, SeqCst);
    if own == 0 {
        return;
    }
    let tid = raw0(libc::SYS_gettid) as usize;
    for i in 0..GRAVES {
        // Claimed first (1 is no stack), so that the id and the stack are
        // one thread's.
        if GRAVE[i].compare_exchange(0, CLAIMED, SeqCst, SeqCst).is_ok() {
            GRAVE_TID[i].store(tid, SeqCst);
            GRAVE[i].store(own, SeqCst);
            return;
        }
    }
}

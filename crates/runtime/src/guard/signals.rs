//! The program's signal state under the guard: `rt_sigaction` rewritten so
//! that every handler returns through the guard's restorer (the program's
//! own SIGSYS and SIGTRAP handlers kept aside and called for signals that
//! are not the guard's), and `rt_sigprocmask` applied to the interrupted
//! context's mask, never blocking the three signals the guard needs.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::buffers::{peek, poke, Held};
use super::{calls, raw, Allow, OURS, SA_RESTORER};

/// A signal action as the kernel takes it on x86-64.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct KernelAction {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

/// The program's own actions for SIGSYS and SIGTRAP (SIGBUS's are kept by
/// the `signal` module), as `[handler, flags, mask]`.
#[allow(clippy::declare_interior_mutable_const)]
pub(super) const NO_ACTION: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

pub(super) static PROGRAM_SIGSYS: [AtomicU64; 3] = NO_ACTION;

pub(super) static PROGRAM_SIGTRAP: [AtomicU64; 3] = NO_ACTION;

/// Sets signal `sig`'s action to `new` (if any) and returns the old one.
pub(super) fn action(sig: i32, new: Option<&KernelAction>) -> Result<KernelAction, std::io::Error> {
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

pub(super) fn store_action(to: &[AtomicU64; 3], a: &KernelAction) {
    to[0].store(a.handler as u64, Relaxed);
    to[1].store(a.flags, Relaxed);
    to[2].store(a.mask, Relaxed);
}

pub(super) fn load_action(from: &[AtomicU64; 3]) -> KernelAction {
    KernelAction {
        handler: from[0].load(Relaxed) as usize,
        flags: from[1].load(Relaxed),
        restorer: raw::restorer(),
        mask: from[2].load(Relaxed),
    }
}

/// `rt_sigaction`, with every handler returning through the guard's
/// restorer, and the program's SIGSYS and SIGTRAP actions kept aside.
pub(super) fn sigaction(args: [u64; 6]) -> i64 {
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
pub(super) fn sigprocmask(uc: &mut libc::ucontext_t, args: [u64; 6]) -> i64 {
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

/// Hands a signal that is not the guard's to the program's handler, or
/// takes the default action.
pub(super) fn pass_on(
    program: &[AtomicU64; 3],
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
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

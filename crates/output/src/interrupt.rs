//! What a ccvm command does when it is sent SIGINT, SIGTERM, SIGHUP or
//! SIGQUIT: the outputs it is staging are removed, or the signal is the
//! program's it runs.
//!
//! While ccvm waits for a program of the user's (`exec`, `trace --exec`,
//! `sim record-lines`), the signal is the program's: a signal sent to
//! ccvm's own process is forwarded to it once, as `timeout` does, and ccvm
//! waits for it to end, cleans up and exits with its status. A signal from
//! the terminal (Ctrl-C) already reached the program's process group, so it
//! is not sent a second time. Otherwise ccvm removes the output files it is
//! staging (so an interrupted run leaves the previous output and no stray
//! file) and dies of the signal as it would have.

use std::sync::atomic::{AtomicI32, Ordering};

/// The program being waited for (0: none; -1: about to start).
static CHILD: AtomicI32 = AtomicI32::new(0);

/// A signal that came while the program was about to start, to forward
/// once it has.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let child = CHILD.load(Ordering::Acquire);
    if child == -1 {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        if unsafe { (*info).si_code } <= 0 {
            PENDING.store(sig, Ordering::Release);
        }
        return;
    }
    if child > 0 {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let code = unsafe { (*info).si_code };
        // SI_USER, SI_QUEUE, SI_TKILL (<= 0): sent by a process, not by the
        // terminal to the whole foreground group.
        if code <= 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(child, sig) };
        }
        return;
    }
    crate::remove_staged();
    // SAFETY: restoring the default action and raising the signal again,
    // both async-signal-safe, so the process ends as the signal asks.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Installs the handlers, once, at start-up.
///
/// ```
/// ccvm_output::interrupt::install();
/// let forwarding = ccvm_output::interrupt::forwarding();
/// let child = std::process::Command::new("true").spawn()?;
/// forwarding.started(child.id());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: a zeroed sigaction is valid; the handler has the
        // SA_SIGINFO signature and touches only atomics and signal-safe calls.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// While this value lives, signals go to the program being started, then
/// to the program once it has been (see [`Forwarding::started`]).
pub struct Forwarding(());

/// Holds signals for a program about to be started: call before spawning
/// it, then [`Forwarding::started`] with its process id.
pub fn forwarding() -> Forwarding {
    PENDING.store(0, Ordering::Release);
    CHILD.store(-1, Ordering::Release);
    Forwarding(())
}

impl Forwarding {
    /// The program now runs as `pid`: a signal held meanwhile is sent now.
    pub fn started(&self, pid: u32) {
        CHILD.store(pid as i32, Ordering::Release);
        let held = PENDING.swap(0, Ordering::AcqRel);
        if held != 0 {
            // SAFETY: kill with a process id this process started.
            unsafe { libc::kill(pid as i32, held) };
        }
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        CHILD.store(0, Ordering::Release);
        let held = PENDING.swap(0, Ordering::AcqRel);
        if held != 0 {
            // The program never started: the signal is ccvm's own again.
            // SAFETY: raising a signal at this process.
            unsafe { libc::raise(held) };
        }
    }
}

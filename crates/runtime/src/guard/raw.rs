//! The guard's own system calls: the only code from which a guarded
//! thread's calls reach the kernel without a SIGSYS.
//!
//! Syscall user dispatch exempts one range of code; these few
//! instructions are that range. Everything the guard must do while the
//! thread's selector blocks calls (the intercepted call itself, the
//! registration of a new thread, the return from a signal handler) is
//! made from here.

use std::arch::global_asm;

global_asm!(
    ".pushsection .text.ccvm_guard,\"ax\",@progbits",
    ".p2align 4",
    ".globl ccvm_guard_start",
    ".hidden ccvm_guard_start",
    "ccvm_guard_start:",
    // ccvm_guard_syscall6(nr, a, b, c, d, e, f): the System V argument
    // registers moved into the kernel's.
    ".globl ccvm_guard_syscall6",
    ".hidden ccvm_guard_syscall6",
    "ccvm_guard_syscall6:",
    "mov rax, rdi",
    "mov rdi, rsi",
    "mov rsi, rdx",
    "mov rdx, rcx",
    "mov r10, r8",
    "mov r8, r9",
    "mov r9, [rsp + 8]",
    "syscall",
    "ret",
    // The return from every signal handler (installed as sa_restorer):
    // rt_sigreturn, with the stack as the kernel left it.
    ".globl ccvm_guard_restorer",
    ".hidden ccvm_guard_restorer",
    "ccvm_guard_restorer:",
    "mov rax, 15",
    "syscall",
    // ccvm_guard_sigreturn(rsp): a handler's return that was trapped
    // (its restorer is not ours), redone on the stack it was made on.
    ".globl ccvm_guard_sigreturn",
    ".hidden ccvm_guard_sigreturn",
    "ccvm_guard_sigreturn:",
    "mov rsp, rdi",
    "mov rax, 15",
    "syscall",
    // The kernel allows a call by the address after its instruction.
    "nop",
    ".globl ccvm_guard_end",
    ".hidden ccvm_guard_end",
    "ccvm_guard_end:",
    "ud2",
    ".popsection",
);

extern "C" {
    fn ccvm_guard_start();
    fn ccvm_guard_end();
    fn ccvm_guard_syscall6(nr: i64, a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> i64;
    fn ccvm_guard_restorer();
    fn ccvm_guard_sigreturn(rsp: u64) -> !;
}

/// The exempt code, `(start, length)`.
pub(super) fn exempt() -> (usize, usize) {
    let start = ccvm_guard_start as *const () as usize;
    (start, ccvm_guard_end as *const () as usize - start)
}

/// The restorer every handler of a guarded process returns through.
pub(super) fn restorer() -> usize {
    ccvm_guard_restorer as *const () as usize
}

/// Makes system call `nr` with `args`, from the exempt code. Returns the
/// kernel's result (a negative errno on failure).
///
/// # Safety
///
/// The call's effects are the caller's: its pointers must be valid for
/// what the call does with them.
pub unsafe fn syscall(nr: i64, args: [u64; 6]) -> i64 {
    // SAFETY: the caller's.
    unsafe { ccvm_guard_syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5]) }
}

/// Returns from the signal frame whose `rt_sigreturn` was trapped, at the
/// stack pointer it was made with.
///
/// # Safety
///
/// `rsp` must be the stack pointer of a trapped `rt_sigreturn`: just past
/// a signal frame's return address.
pub(super) unsafe fn sigreturn(rsp: u64) -> ! {
    // SAFETY: the caller's.
    unsafe { ccvm_guard_sigreturn(rsp) }
}

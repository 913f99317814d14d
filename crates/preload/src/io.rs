//! The C library's most frequent system-call wrappers, replaced so that a
//! guarded program's reads and writes skip the guard's SIGSYS round trip;
//! and its `close`, `close_range`, `closefrom`, `dup`, `dup2` and `dup3`,
//! replaced so that ccvm's own descriptors stay open and in place in either
//! fault mode (`ccvm_runtime::fds`).
//!
//! Under the guard ([`ccvm_runtime::guard`]) every system call raises
//! SIGSYS and is made by the handler: about 1.4 µs a call, which a program
//! doing a million small reads feels (`dd bs=4k` ran 9x slower). These
//! wrappers do what the handler does before the call (fault in and pin
//! the call's heap buffers, [`guard::prepare`]) and then call the C
//! library's own function with the thread's calls let through, so that
//! everything else about it (cancellation points, `errno`) is the C
//! library's. Calls the C library makes internally, and every other call,
//! still go through the handler.
//!
//! Without the guard (thread faults, or a process that is not paged) a
//! wrapper only calls the C library's function.

use std::sync::atomic::{AtomicUsize, Ordering};

use ccvm_runtime::guard;
use libc::{c_int, c_void, iovec, msghdr, off_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

/// The C library's functions, by the index each wrapper names, found with
/// `dlsym(RTLD_NEXT)` when the library starts.
const NAMES: [&str; 18] = [
    "read\0",
    "write\0",
    "pread\0",
    "pread64\0",
    "pwrite\0",
    "pwrite64\0",
    "readv\0",
    "writev\0",
    "recv\0",
    "recvfrom\0",
    "send\0",
    "sendto\0",
    "recvmsg\0",
    "sendmsg\0",
    "poll\0",
    "epoll_wait\0",
    "close\0",
    "syscall\0",
];
#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: AtomicUsize = AtomicUsize::new(0);
static REAL: [AtomicUsize; 18] = [UNRESOLVED; 18];

/// Finds the C library's functions (call once, as the process starts,
/// before any wrapper runs in a signal handler).
pub fn resolve() {
    for (name, slot) in NAMES.iter().zip(&REAL) {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the next
        // definition after this library's.
        let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
        slot.store(f as usize, Ordering::Relaxed);
    }
}

/// The C library's function at `index`, resolving it if `resolve` has not
/// run yet.
fn real(index: usize) -> usize {
    match REAL[index].load(Ordering::Relaxed) {
        0 => {
            resolve();
            REAL[index].load(Ordering::Relaxed)
        }
        f => f,
    }
}

macro_rules! wrap {
    ($index:expr, $name:ident, $nr:expr, ($($arg:ident: $ty:ty),*) -> $ret:ty, [$($karg:expr),*]) => {
        #[doc = concat!("`", stringify!($name), "`, its heap buffers brought into memory first.")]
        ///
        /// # Safety
        ///
        /// The C library's contract for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            let mut args = [0u64; 6];
            for (slot, value) in args.iter_mut().zip([$($karg as u64),*]) {
                *slot = value;
            }
            let _prepared = guard::prepare($nr, args);
            match real($index) {
                0 => {
                    // SAFETY: the system call the function makes, with
                    // the caller's arguments.
                    unsafe { libc::syscall($nr, $($karg),*) as $ret }
                }
                f => {
                    // SAFETY: the C library's function of this name and
                    // signature.
                    let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(f) };
                    // SAFETY: the caller's arguments, passed on.
                    unsafe { f($($arg),*) }
                }
            }
        }
    };
}

wrap!(0, read, libc::SYS_read, (fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t, [fd, buf, n]);
wrap!(1, write, libc::SYS_write, (fd: c_int, buf: *const c_void, n: size_t) -> ssize_t, [fd, buf, n]);
wrap!(2, pread, libc::SYS_pread64, (fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t, [fd, buf, n, off]);
wrap!(3, pread64, libc::SYS_pread64, (fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t, [fd, buf, n, off]);
wrap!(4, pwrite, libc::SYS_pwrite64, (fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t, [fd, buf, n, off]);
wrap!(5, pwrite64, libc::SYS_pwrite64, (fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t, [fd, buf, n, off]);
wrap!(6, readv, libc::SYS_readv, (fd: c_int, iov: *const iovec, count: c_int) -> ssize_t, [fd, iov, count]);
wrap!(7, writev, libc::SYS_writev, (fd: c_int, iov: *const iovec, count: c_int) -> ssize_t, [fd, iov, count]);
wrap!(8, recv, libc::SYS_recvfrom, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t, [fd, buf, n, flags]);
wrap!(9, recvfrom, libc::SYS_recvfrom,
    (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t,
    [fd, buf, n, flags, addr, len]);
wrap!(10, send, libc::SYS_sendto, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t, [fd, buf, n, flags]);
wrap!(11, sendto, libc::SYS_sendto,
    (fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t,
    [fd, buf, n, flags, addr, len]);
wrap!(12, recvmsg, libc::SYS_recvmsg, (fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t, [fd, msg, flags]);
wrap!(13, sendmsg, libc::SYS_sendmsg, (fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t, [fd, msg, flags]);
wrap!(14, poll, libc::SYS_poll, (fds: *mut pollfd, n: libc::nfds_t, timeout: c_int) -> c_int, [fds, n, timeout]);
wrap!(15, epoll_wait, libc::SYS_epoll_wait,
    (epfd: c_int, events: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int,
    [epfd, events, max, timeout]);

/// `close`, except that ccvm's own descriptors stay open: closing one
/// fails with `EBADF`, as if it were not open (see `ccvm_runtime::fds`).
///
/// # Safety
///
/// The C library's contract for `close`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if ccvm_runtime::fds::is_ours(fd) {
        return c_result(-(libc::EBADF as i64));
    }
    match real(16) {
        // SAFETY: the system call `close` makes.
        0 => c_result(unsafe { real_syscall(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0]) }),
        f => {
            // SAFETY: the C library's `close`.
            let f: unsafe extern "C" fn(c_int) -> c_int = unsafe { std::mem::transmute(f) };
            // SAFETY: the caller's argument.
            unsafe { f(fd) }
        }
    }
}

/// System call `nr` through the C library's own `syscall` (not the one
/// below), as the kernel returns it: a negative errno on failure.
///
/// # Safety
///
/// The call's own contract.
unsafe fn real_syscall(nr: libc::c_long, a: [u64; 6]) -> i64 {
    match real(17) {
        0 => -(libc::ENOSYS as i64),
        g => {
            // SAFETY: the C library's `syscall`.
            let g: unsafe extern "C" fn(libc::c_long, u64, u64, u64, u64, u64, u64) -> libc::c_long =
                unsafe { std::mem::transmute(g) };
            // SAFETY: the caller's.
            match unsafe { g(nr, a[0], a[1], a[2], a[3], a[4], a[5]) } {
                // SAFETY: errno is thread-local.
                -1 => -(unsafe { *libc::__errno_location() } as i64),
                r => r,
            }
        }
    }
}

/// A kernel result as the C library returns it: -1 with `errno` set.
fn c_result(r: i64) -> c_int {
    if r < 0 {
        // SAFETY: errno is thread-local.
        unsafe { *libc::__errno_location() = -r as c_int };
        return -1;
    }
    r as c_int
}

/// `dup2`, `dup3` or `dup` (`nr`) with ccvm's own descriptors out of its
/// way: one at `new` is moved first, and `old` naming one fails with
/// `EBADF`, as if it were not open (see `ccvm_runtime::fds`).
fn dup_call(nr: libc::c_long, old: c_int, new: c_int, flags: c_int) -> c_int {
    let args = [old as u64, new as u64, flags as u64, 0, 0, 0];
    // SAFETY: the program's own call, as asked.
    let call = &mut || unsafe { real_syscall(nr, args) };
    c_result(match nr {
        libc::SYS_dup if ccvm_runtime::fds::is_ours(old) => -(libc::EBADF as i64),
        libc::SYS_dup => call(),
        _ => ccvm_runtime::fds::dup_onto(old, new, call),
    })
}

/// `dup2`, moving ccvm's descriptor out of the way first.
///
/// # Safety
///
/// The C library's contract for `dup2`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    dup_call(libc::SYS_dup2, old, new, 0)
}

/// `dup3`, moving ccvm's descriptor out of the way first.
///
/// # Safety
///
/// The C library's contract for `dup3`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    dup_call(libc::SYS_dup3, old, new, flags)
}

/// `dup`, refusing ccvm's own descriptors.
///
/// # Safety
///
/// The C library's contract for `dup`.
#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    dup_call(libc::SYS_dup, old, 0, 0)
}

/// `close_range`, skipping ccvm's own descriptors.
///
/// # Safety
///
/// The C library's contract for `close_range`.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int {
    let r = ccvm_runtime::fds::close_range_around(first, last, flags as u32, &mut |a, b, f| {
        // SAFETY: closing the program's own descriptors, as asked.
        unsafe { real_syscall(libc::SYS_close_range, [a as u64, b as u64, f as u64, 0, 0, 0]) }
    });
    c_result(r)
}

/// `closefrom`, skipping ccvm's own descriptors.
///
/// # Safety
///
/// The C library's contract for `closefrom`.
#[no_mangle]
pub unsafe extern "C" fn closefrom(first: c_int) {
    // SAFETY: as for close_range.
    unsafe { close_range(first.max(0) as libc::c_uint, libc::c_uint::MAX, 0) };
}

/// The C library's `syscall`, except that `close`, `close_range` and the
/// `dup` calls made through it leave ccvm's descriptors alone, as the
/// functions above do,
/// and `mremap`, `madvise`, `mprotect` and `munmap` are made as this
/// library's own (see [`crate::vm`]).
/// (Declared with six arguments: on x86-64 a variadic call passes them in
/// the same registers and stack slot.)
///
/// # Safety
///
/// The C library's contract for `syscall`.
#[no_mangle]
pub unsafe extern "C" fn syscall(nr: libc::c_long, a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> libc::c_long {
    match nr {
        // SAFETY: the caller's arguments, as `close` takes them.
        libc::SYS_close => return unsafe { close(a as c_int) } as libc::c_long,
        // SAFETY: as `close_range` takes them.
        libc::SYS_close_range => return unsafe { close_range(a as u32, b as u32, c as c_int) } as libc::c_long,
        libc::SYS_dup | libc::SYS_dup2 | libc::SYS_dup3 => {
            return dup_call(nr, a as c_int, b as c_int, c as c_int) as libc::c_long;
        }
        // Not `mmap`: ccvm's own code maps memory straight from the kernel
        // through `syscall` (`ccvm_store::chunks::map_anonymous`).
        libc::SYS_madvise | libc::SYS_mprotect | libc::SYS_munmap | libc::SYS_mremap => {
            return match crate::vm::memory_call(nr, [a, b, c, d, e, f]) {
                r if r < 0 && r > -4096 => {
                    // SAFETY: errno is thread-local.
                    unsafe { *libc::__errno_location() = -r as c_int };
                    -1
                }
                r => r,
            };
        }
        _ => {}
    }
    match real(17) {
        0 => {
            // SAFETY: errno is thread-local.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            -1
        }
        g => {
            // SAFETY: the C library's `syscall`, called with the same
            // registers.
            let g: unsafe extern "C" fn(libc::c_long, u64, u64, u64, u64, u64, u64) -> libc::c_long =
                unsafe { std::mem::transmute(g) };
            // SAFETY: the caller's arguments.
            unsafe { g(nr, a, b, c, d, e, f) }
        }
    }
}

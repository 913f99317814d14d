//! The C library's most frequent system-call wrappers, replaced so that a
//! guarded program's reads and writes skip the guard's SIGSYS round trip.
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
const NAMES: [&str; 16] = [
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
];
#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: AtomicUsize = AtomicUsize::new(0);
static REAL: [AtomicUsize; 16] = [UNRESOLVED; 16];

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

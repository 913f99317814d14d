//! Which memory each system call hands to the kernel: the buffers the
//! guard faults in before the call (x86-64 Linux numbering).
//!
//! # Choices
//!
//! * The calls that take user buffers are listed with their sizes: a
//!   buffer and its length argument, a fixed-size structure, a path, an
//!   `iovec` array, a `msghdr`, the pointer arrays of `execve`, the sizes
//!   encoded in an `ioctl` request. The access is the kernel's: a buffer
//!   the kernel writes is touched with a write, so that a page mapped as
//!   the shared zero page (write-protected) is made writable first.
//! * A path is at most 4096 bytes: its page and the next are touched,
//!   rather than scanning for its end.
//! * Every other argument that points into the region has its page
//!   touched (a read), so that a call not listed still finds the memory
//!   it was pointed at; memory-management calls (`mmap`, `munmap`,
//!   `madvise`…) are left out, since their addresses name pages to change,
//!   not data to copy.
//! * Structures outside the region that lead to region buffers (an
//!   `iovec` array on the stack) are read through the kernel
//!   (`process_vm_readv`), so that a bad pointer fails the call with
//!   `EFAULT` as it would have, instead of crashing the guard.
//! * Not covered: memory the kernel touches after the call returns
//!   (`io_uring` and AIO buffers, completed by kernel workers, whose setup
//!   calls the guard refuses; a `vmsplice`d page, which may be read after
//!   it is evicted). A program that needs those runs with
//!   `--fault-mode thread`.

// The C library's call numbers are lower-case constants, matched here.
#![allow(non_upper_case_globals)]

use libc::*;

/// How the kernel uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The kernel reads it.
    Read,
    /// The kernel writes it (or reads and writes).
    Write,
}
use Access::{Read as R, Write as W};

/// The longest path the kernel takes, with its terminating zero.
const PATH: usize = 4096;
/// `struct stat`, `struct statfs`, `struct rusage`, `struct statx`.
const STAT: usize = 144;
const STATFS: usize = 120;
const RUSAGE: usize = 144;
const STATX: usize = 256;
const TIMESPEC: usize = 16;
const ITIMERSPEC: usize = 32;
const SIGSET: usize = 8;
const SIGINFO: usize = 128;
/// `struct epoll_event` is packed on x86-64.
const EPOLL_EVENT: usize = 12;
/// Entries of an `iovec`, `msghdr` or pointer array taken at most (the
/// kernel's own limit for `iovec`s; more fails the call anyway).
const MAX_ENTRIES: usize = 1024;

/// Reads what the memory-reading function `peek` can, or `None`.
pub(crate) type Peek<'a> = &'a dyn Fn(usize, &mut [u8]) -> bool;

fn peek_u64(peek: Peek, addr: usize) -> Option<u64> {
    let mut b = [0u8; 8];
    peek(addr, &mut b).then(|| u64::from_ne_bytes(b))
}

fn peek_u32(peek: Peek, addr: usize) -> Option<u32> {
    let mut b = [0u8; 4];
    peek(addr, &mut b).then(|| u32::from_ne_bytes(b))
}

/// Calls `f(address, length, access)` for each buffer system call `nr`
/// with arguments `a` hands to the kernel. `peek` reads user memory
/// (structures that lead to further buffers), after `f` has seen it.
pub(crate) fn buffers(nr: i64, a: &[u64; 6], peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) {
    let families: [Family; 5] = [
        reads_and_writes,
        paths_and_stats,
        attributes,
        waits_and_clocks,
        process_state,
    ];
    // Each family says whether `nr` is one of its calls.
    let _ = families.iter().any(|family| family(nr, a, peek, f));
}

/// One family of calls: whether `nr` is one of them, after calling `f`
/// for each of its buffers.
type Family = fn(i64, &[u64; 6], Peek, &mut dyn FnMut(usize, usize, Access)) -> bool;

/// Buffers of reads, writes, sockets and pipes.
fn reads_and_writes(nr: i64, a: &[u64; 6], peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) -> bool {
    let p = |i: usize| a[i] as usize;
    let n = |i: usize| a[i] as usize;
    let path = |f: &mut dyn FnMut(usize, usize, Access), i: usize| f(p(i), PATH, R);
    match nr {
        SYS_read | SYS_pread64 | SYS_getdents | SYS_getdents64 => f(p(1), n(2), W),
        SYS_write | SYS_pwrite64 => f(p(1), n(2), R),
        SYS_getrandom | SYS_getcwd => f(p(0), n(1), W),
        SYS_readlink => {
            path(f, 0);
            f(p(1), n(2), W)
        }
        SYS_readlinkat => {
            path(f, 1);
            f(p(2), n(3), W)
        }
        SYS_readv | SYS_preadv | SYS_preadv2 | SYS_process_vm_readv => iovecs(p(1), n(2), W, peek, f),
        SYS_writev | SYS_pwritev | SYS_pwritev2 | SYS_vmsplice | SYS_process_vm_writev => {
            iovecs(p(1), n(2), R, peek, f)
        }
        SYS_sendto => {
            f(p(1), n(2), R);
            f(p(4), n(5), R)
        }
        SYS_recvfrom => {
            f(p(1), n(2), W);
            sized_by(p(4), p(5), peek, f)
        }
        SYS_sendmsg => msghdr(p(1), R, peek, f),
        SYS_recvmsg => msghdr(p(1), W, peek, f),
        SYS_sendmmsg | SYS_recvmmsg => {
            let access = if nr == SYS_sendmmsg { R } else { W };
            let count = n(2).min(MAX_ENTRIES);
            // struct mmsghdr: a msghdr (56 bytes) and the length sent or
            // received, padded to 64.
            f(p(1), count * 64, W);
            for i in 0..count {
                msghdr(p(1) + i * 64, access, peek, f);
            }
            if nr == SYS_recvmmsg {
                f(p(4), TIMESPEC, R)
            }
        }
        SYS_connect | SYS_bind => f(p(1), n(2), R),
        SYS_accept | SYS_accept4 | SYS_getsockname | SYS_getpeername => sized_by(p(1), p(2), peek, f),
        SYS_setsockopt => f(p(3), n(4), R),
        SYS_getsockopt => sized_by(p(3), p(4), peek, f),
        SYS_socketpair => f(p(3), 8, W),
        SYS_pipe | SYS_pipe2 => f(p(0), 8, W),
        _ => return false,
    }
    true
}

/// Paths, and the structures `stat` and its kin fill.
fn paths_and_stats(nr: i64, a: &[u64; 6], peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) -> bool {
    let p = |i: usize| a[i] as usize;
    let n = |i: usize| a[i] as usize;
    let path = |f: &mut dyn FnMut(usize, usize, Access), i: usize| f(p(i), PATH, R);
    match nr {
        SYS_stat | SYS_lstat => {
            path(f, 0);
            f(p(1), STAT, W)
        }
        SYS_fstat => f(p(1), STAT, W),
        SYS_newfstatat => {
            path(f, 1);
            f(p(2), STAT, W)
        }
        SYS_statx => {
            path(f, 1);
            f(p(4), STATX, W)
        }
        SYS_statfs => {
            path(f, 0);
            f(p(1), STATFS, W)
        }
        SYS_fstatfs => f(p(1), STATFS, W),
        SYS_open | SYS_creat | SYS_access | SYS_chdir | SYS_mkdir | SYS_rmdir | SYS_unlink | SYS_chmod | SYS_chown
        | SYS_lchown | SYS_truncate | SYS_chroot | SYS_acct | SYS_memfd_create | SYS_umount2 => path(f, 0),
        SYS_rename | SYS_link | SYS_symlink => {
            path(f, 0);
            path(f, 1)
        }
        SYS_openat
        | SYS_mkdirat
        | SYS_mknodat
        | SYS_fchownat
        | SYS_unlinkat
        | SYS_fchmodat
        | SYS_faccessat
        | SYS_faccessat2
        | SYS_inotify_add_watch => path(f, 1),
        SYS_renameat | SYS_renameat2 | SYS_linkat => {
            path(f, 1);
            path(f, 3)
        }
        SYS_symlinkat => {
            path(f, 0);
            path(f, 2)
        }
        SYS_openat2 => {
            path(f, 1);
            f(p(2), n(3), R)
        }
        SYS_utimensat => {
            path(f, 1);
            f(p(2), 2 * TIMESPEC, R)
        }
        SYS_utimes => {
            path(f, 0);
            f(p(1), 32, R)
        }
        SYS_execve => {
            path(f, 0);
            strings(p(1), peek, f);
            strings(p(2), peek, f)
        }
        SYS_execveat => {
            path(f, 1);
            strings(p(2), peek, f);
            strings(p(3), peek, f)
        }
        SYS_mount => {
            path(f, 0);
            path(f, 1);
            path(f, 2);
            path(f, 4)
        }
        _ => return false,
    }
    true
}

/// Extended attributes: names, and values read to set or written to get.
fn attributes(nr: i64, a: &[u64; 6], peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) -> bool {
    let _ = peek;
    let p = |i: usize| a[i] as usize;
    let n = |i: usize| a[i] as usize;
    let path = |f: &mut dyn FnMut(usize, usize, Access), i: usize| f(p(i), PATH, R);
    match nr {
        SYS_setxattr | SYS_lsetxattr | SYS_fsetxattr | SYS_getxattr | SYS_lgetxattr | SYS_fgetxattr => {
            // The file's path (not for the descriptor forms), the
            // attribute's name, and its value: read to set, written to get.
            if !matches!(nr, SYS_fsetxattr | SYS_fgetxattr) {
                path(f, 0);
            }
            path(f, 1);
            let setting = matches!(nr, SYS_setxattr | SYS_lsetxattr | SYS_fsetxattr);
            f(p(2), n(3), if setting { R } else { W })
        }
        SYS_listxattr | SYS_llistxattr => {
            path(f, 0);
            f(p(1), n(2), W)
        }
        SYS_flistxattr => f(p(1), n(2), W),
        SYS_removexattr | SYS_lremovexattr => {
            path(f, 0);
            path(f, 1)
        }
        SYS_fremovexattr => path(f, 1),
        _ => return false,
    }
    true
}

/// Descriptor sets, events, times, futexes and child statuses.
fn waits_and_clocks(nr: i64, a: &[u64; 6], peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) -> bool {
    let _ = peek;
    let p = |i: usize| a[i] as usize;
    let n = |i: usize| a[i] as usize;
    match nr {
        SYS_poll => f(p(0), n(1) * 8, W),
        SYS_ppoll => {
            f(p(0), n(1) * 8, W);
            f(p(2), TIMESPEC, R);
            f(p(3), SIGSET, R)
        }
        SYS_select | SYS_pselect6 => {
            let set = n(0).div_ceil(64) * 8;
            for i in 1..4 {
                f(p(i), set, W);
            }
            if nr == SYS_select {
                f(p(4), TIMESPEC, W)
            } else {
                f(p(4), TIMESPEC, R);
                f(p(5), 16, R)
            }
        }
        SYS_epoll_wait | SYS_epoll_pwait | SYS_epoll_pwait2 => {
            f(p(1), n(2).min(1 << 20) * EPOLL_EVENT, W);
            match nr {
                SYS_epoll_pwait => f(p(4), SIGSET, R),
                SYS_epoll_pwait2 => {
                    f(p(3), TIMESPEC, R);
                    f(p(4), SIGSET, R)
                }
                _ => {}
            }
        }
        SYS_epoll_ctl => f(p(3), EPOLL_EVENT, R),
        SYS_nanosleep => {
            f(p(0), TIMESPEC, R);
            f(p(1), TIMESPEC, W)
        }
        SYS_clock_nanosleep => {
            f(p(2), TIMESPEC, R);
            f(p(3), TIMESPEC, W)
        }
        SYS_clock_gettime | SYS_clock_getres => f(p(1), TIMESPEC, W),
        SYS_clock_settime => f(p(1), TIMESPEC, R),
        SYS_gettimeofday => {
            f(p(0), 16, W);
            f(p(1), 8, W)
        }
        SYS_time => f(p(0), 8, W),
        SYS_futex => {
            f(p(0), 4, W);
            // The command, without FUTEX_PRIVATE_FLAG and the clock flag.
            match a[1] & 0x7f {
                // WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2:
                // the fourth argument is a timeout.
                0 | 6 | 9 | 11 | 13 => f(p(3), TIMESPEC, R),
                _ => {}
            }
            // REQUEUE, CMP_REQUEUE, WAKE_OP, WAIT_REQUEUE_PI,
            // CMP_REQUEUE_PI: a second futex word.
            if matches!(a[1] & 0x7f, 3 | 4 | 5 | 11 | 12) {
                f(p(4), 4, W)
            }
        }
        SYS_wait4 => {
            f(p(1), 4, W);
            f(p(3), RUSAGE, W)
        }
        SYS_waitid => {
            f(p(2), SIGINFO, W);
            f(p(4), RUSAGE, W)
        }
        _ => return false,
    }
    true
}

/// The process's own state: limits, identities, signals, devices, IPC and timers.
fn process_state(nr: i64, a: &[u64; 6], peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) -> bool {
    let _ = peek;
    let p = |i: usize| a[i] as usize;
    let n = |i: usize| a[i] as usize;
    match nr {
        SYS_uname => f(p(0), 390, W),
        SYS_sysinfo => f(p(0), 112, W),
        SYS_times => f(p(0), 32, W),
        SYS_getrusage => f(p(1), RUSAGE, W),
        SYS_getrlimit => f(p(1), 16, W),
        SYS_setrlimit => f(p(1), 16, R),
        SYS_prlimit64 => {
            f(p(2), 16, R);
            f(p(3), 16, W)
        }
        SYS_getgroups => f(p(1), n(0).min(65536) * 4, W),
        SYS_setgroups => f(p(1), n(0).min(65536) * 4, R),
        SYS_sched_getaffinity => f(p(2), n(1), W),
        SYS_sched_setaffinity => f(p(2), n(1), R),
        SYS_getresuid | SYS_getresgid => (0..3).for_each(|i| f(p(i), 4, W)),
        SYS_getcpu => {
            f(p(0), 4, W);
            f(p(1), 4, W)
        }
        SYS_rt_sigpending => f(p(0), SIGSET, W),
        SYS_rt_sigtimedwait => {
            f(p(0), SIGSET, R);
            f(p(1), SIGINFO, W);
            f(p(2), TIMESPEC, R)
        }
        SYS_rt_sigqueueinfo => f(p(2), SIGINFO, R),
        SYS_rt_sigsuspend => f(p(0), SIGSET, R),
        SYS_sigaltstack => {
            f(p(0), 24, R);
            f(p(1), 24, W)
        }
        SYS_ioctl => {
            // _IOC: direction in bits 30-31 (1 write, 2 read, from the
            // caller's side), size in bits 16-29.
            let request = a[1] as u32;
            let (dir, size) = (request >> 30, ((request >> 16) & 0x3fff) as usize);
            if dir != 0 && size != 0 {
                f(p(2), size, if dir & 2 != 0 { W } else { R })
            }
        }
        SYS_fcntl => match a[1] as i32 {
            F_GETLK | F_SETLK | F_SETLKW | F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW => f(p(2), 32, W),
            // F_SETOWN_EX, F_GETOWN_EX: a struct f_owner_ex.
            15 | 16 => f(p(2), 8, W),
            _ => {}
        },
        SYS_sendfile => f(p(2), 8, W),
        SYS_splice | SYS_copy_file_range => {
            f(p(1), 8, W);
            f(p(3), 8, W)
        }
        SYS_prctl if matches!(a[0] as i32, PR_SET_NAME | PR_GET_NAME) => f(p(1), 16, W),
        SYS_mincore => f(p(2), n(1).div_ceil(4096), W),
        SYS_capget | SYS_capset => {
            f(p(0), 8, W);
            f(p(1), 24, W)
        }
        SYS_msgsnd => f(p(1), n(2) + 8, R),
        SYS_msgrcv => f(p(1), n(2) + 8, W),
        SYS_semop => f(p(1), n(2).min(MAX_ENTRIES) * 6, R),
        SYS_setitimer | SYS_timer_settime | SYS_timerfd_settime => {
            let (new, old) = if nr == SYS_setitimer { (1, 2) } else { (2, 3) };
            f(p(new), ITIMERSPEC, R);
            f(p(old), ITIMERSPEC, W)
        }
        SYS_getitimer | SYS_timer_gettime | SYS_timerfd_gettime => f(p(1), ITIMERSPEC, W),
        SYS_timer_create => {
            f(p(1), 64, R);
            f(p(2), 4, W)
        }
        _ => return false,
    }
    true
}

/// Whether call `nr` names pages to change rather than data to copy, so
/// that its arguments are not buffers.
pub(crate) fn manages_memory(nr: i64) -> bool {
    matches!(
        nr,
        SYS_mmap
            | SYS_mprotect
            | SYS_munmap
            | SYS_mremap
            | SYS_msync
            | SYS_madvise
            | SYS_mlock
            | SYS_munlock
            | SYS_mlock2
            | SYS_remap_file_pages
            | SYS_pkey_mprotect
            | SYS_process_madvise
            | SYS_mincore
    )
}

/// A buffer whose size the kernel reads from (and writes back to) the
/// `u32` at `len_at`.
fn sized_by(buf: usize, len_at: usize, peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) {
    if len_at == 0 {
        return;
    }
    f(len_at, 4, W);
    if let Some(len) = peek_u32(peek, len_at) {
        f(buf, len as usize, W)
    }
}

/// `count` `struct iovec`s at `iov`, and the buffers they name.
fn iovecs(iov: usize, count: usize, access: Access, peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) {
    let count = count.min(MAX_ENTRIES);
    f(iov, count * 16, R);
    for i in 0..count {
        if let (Some(base), Some(len)) = (peek_u64(peek, iov + i * 16), peek_u64(peek, iov + i * 16 + 8)) {
            f(base as usize, len as usize, access)
        }
    }
}

/// A `struct msghdr` at `msg` and what it names: the address, the
/// `iovec`s and the control data.
fn msghdr(msg: usize, access: Access, peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) {
    // The kernel writes back the lengths and flags of a received message.
    f(msg, 56, access);
    let field = |o: usize| peek_u64(peek, msg + o).map(|v| v as usize);
    if let (Some(name), Some(namelen)) = (field(0), peek_u32(peek, msg + 8)) {
        f(name, namelen as usize, access)
    }
    if let (Some(iov), Some(count)) = (field(16), field(24)) {
        iovecs(iov, count, access, peek, f)
    }
    if let (Some(control), Some(len)) = (field(32), field(40)) {
        f(control, len, access)
    }
}

/// A null-terminated array of strings at `array` (`argv`, `envp`).
fn strings(array: usize, peek: Peek, f: &mut dyn FnMut(usize, usize, Access)) {
    for i in 0..MAX_ENTRIES * 64 {
        f(array + i * 8, 8, R);
        match peek_u64(peek, array + i * 8) {
            Some(0) | None => return,
            Some(s) => f(s as usize, PATH, R),
        }
    }
}

#[cfg(test)]
mod tests;

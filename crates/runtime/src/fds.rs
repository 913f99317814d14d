//! ccvm's own descriptors, out of the program's way.
//!
//! A paged program shares its descriptor table with the pager: the
//! userfaultfd, the swap file and the helper's lifeline are descriptors of
//! the program's process. A daemon that closes every descriptor from 3 up,
//! or a `close(3)` followed by an `open`, would stop the pager or hand it
//! the program's file as its swap file. So ccvm's descriptors are:
//!
//! * placed high ([`raise`]: the lowest free number from 1000, or from 64
//!   below the soft limit of open files when that is lower) and
//!   close-on-exec, where a program rarely names a number;
//! * recorded here, so that the guard (and, in thread mode, the preloaded
//!   library's `close`, `close_range` and `closefrom`) can make a close
//!   that names one fail with `EBADF`, as if it were not open, and a
//!   range close skip it ([`is_ours`], [`close_range_around`]).
//!
//! # Choices
//!
//! * A record is a number with the file's device and inode: a number
//!   ccvm has closed and the program reused is recognised as the
//!   program's (its identity differs) and dropped from the record.
//! * Not done: a `dup2` onto one of ccvm's numbers is made as asked, and
//!   replaces ccvm's file (moving ccvm's descriptor first needs every user
//!   of the number to look it up here; the high numbers make it rare).

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};

const SLOTS: usize = 16;
#[allow(clippy::declare_interior_mutable_const)]
const NONE: AtomicI32 = AtomicI32::new(-1);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static FD: [AtomicI32; SLOTS] = [NONE; SLOTS];
static DEV: [AtomicU64; SLOTS] = [ZERO; SLOTS];
static INO: [AtomicU64; SLOTS] = [ZERO; SLOTS];

/// The lowest number ccvm's descriptors are moved to.
fn floor() -> i32 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur.min(i32::MAX as u64) as i32
    } else {
        1024
    };
    (soft - 64).clamp(3, 1000)
}

fn identity(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: a zeroed stat is a valid buffer; fstat checks the number.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// Moves `fd` to a high number, close-on-exec, and records it as ccvm's.
/// Where it cannot be moved it is kept where it is, and recorded.
pub(crate) fn raise(fd: OwnedFd) -> OwnedFd {
    let raw = fd.into_raw_fd();
    // SAFETY: duplicating a descriptor we own.
    let high = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, floor()) };
    let kept = if high >= 0 {
        // SAFETY: the original, now duplicated.
        unsafe { libc::close(raw) };
        high
    } else {
        raw
    };
    record(kept);
    // SAFETY: the descriptor kept is ours alone.
    unsafe { OwnedFd::from_raw_fd(kept) }
}

fn record(fd: RawFd) {
    let Some((dev, ino)) = identity(fd) else { return };
    for i in 0..SLOTS {
        let current = FD[i].load(Relaxed);
        let stale = current >= 0 && identity(current) != Some((DEV[i].load(Relaxed), INO[i].load(Relaxed)));
        if (current < 0 || stale || current == fd) && FD[i].compare_exchange(current, fd, Relaxed, Relaxed).is_ok() {
            DEV[i].store(dev, Relaxed);
            INO[i].store(ino, Relaxed);
            return;
        }
    }
}

/// Whether `fd` is one of ccvm's descriptors (still the file ccvm opened).
pub fn is_ours(fd: RawFd) -> bool {
    if fd < 0 {
        return false;
    }
    (0..SLOTS).any(|i| FD[i].load(Relaxed) == fd && identity(fd) == Some((DEV[i].load(Relaxed), INO[i].load(Relaxed))))
}

/// ccvm's descriptors in `[first, last]`, in increasing order, at most
/// `SLOTS` of them.
fn ours_within(first: u32, last: u32) -> ([RawFd; SLOTS], usize) {
    let mut found = [0; SLOTS];
    let mut n = 0;
    for slot in &FD {
        let fd = slot.load(Relaxed);
        if fd >= 0 && (first..=last).contains(&(fd as u32)) && is_ours(fd) {
            found[n] = fd;
            n += 1;
        }
    }
    found[..n].sort_unstable();
    (found, n)
}

/// `close_range(first, last, flags)` made through `call` (which makes the
/// system call with the three arguments and returns the kernel's result)
/// for each part of the range that holds none of ccvm's descriptors.
pub fn close_range_around(first: u32, last: u32, flags: u32, call: &mut dyn FnMut(u32, u32, u32) -> i64) -> i64 {
    let (ours, n) = ours_within(first, last);
    let mut from = first;
    for &fd in &ours[..n] {
        let fd = fd as u32;
        if fd > from {
            let r = call(from, fd - 1, flags);
            if r < 0 {
                return r;
            }
        }
        from = fd + 1;
    }
    if from <= last {
        return call(from, last, flags);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_descriptor_is_high_ours_and_skipped_by_a_range_close() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = raise(OwnedFd::from(file));
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        assert!(raw >= floor(), "{raw}");
        assert!(is_ours(raw));
        // SAFETY: reading a descriptor's flags.
        assert_ne!(unsafe { libc::fcntl(raw, libc::F_GETFD) } & libc::FD_CLOEXEC, 0);
        let mut calls = Vec::new();
        let r = close_range_around(3, u32::MAX, 0, &mut |a, b, f| {
            calls.push((a, b, f));
            0
        });
        assert_eq!(r, 0);
        let r = raw as u32;
        // Other tests in this process raise descriptors of their own, which
        // the ranges skip too: only the ends are fixed.
        assert!(
            calls.iter().any(|&(a, _, _)| a == 3) && calls.iter().any(|&(a, b, _)| a > r && b == u32::MAX),
            "{calls:?}"
        );
        assert!(calls.iter().all(|&(a, b, _)| !(a..=b).contains(&r)), "{calls:?}");
        drop(fd);
        // Closed by ccvm and reused by someone else: no longer ours.
        let other = std::fs::File::open("/proc/self/stat").unwrap();
        let other_raw = std::os::fd::AsRawFd::as_raw_fd(&other);
        if other_raw == raw {
            assert!(!is_ours(raw));
        }
    }
}

//! ccvm's own descriptors, out of the program's way.
//!
//! A paged program shares its descriptor table with the pager: the
//! userfaultfd, the swap file and the helper's lifeline are descriptors of
//! the program's process. A daemon that closes every descriptor from 3 up,
//! or a `close(3)` followed by an `open`, would stop the pager or hand it
//! the program's file as its swap file. So ccvm's descriptors are:
//!
//! * placed high (`raise`: the lowest free number from 1000, or from 64
//!   below the soft limit of open files when that is lower) and
//!   close-on-exec, where a program rarely names a number;
//! * held as [`Held`] values that know their descriptor by its slot in a
//!   record here, not by its number, so that the number can change: a
//!   `dup2` or `dup3` onto one of them first moves it to another free
//!   number ([`make_room`]), and the program's call then does what it
//!   asked;
//! * hidden from the program's closes: the guard (and, in thread mode, the
//!   preloaded library's `close`, `close_range`, `closefrom`, `dup2` and
//!   `dup3`) make a close that names one fail with `EBADF`, as if it were
//!   not open, and a range close skip it ([`is_ours`],
//!   [`close_range_around`]).
//!
//! # Choices
//!
//! * A record is a number with the file's device and inode: a number
//!   ccvm has closed and the program reused is recognised as the
//!   program's (its identity differs).
//! * A move must not race a call that read the old number: every call ccvm
//!   makes on one of its descriptors reads the number through [`InUse`],
//!   which counts the calls under way, and [`make_room`] publishes the new
//!   number and waits until no call that may hold the old one is left
//!   before the program's call replaces it. Without that, a swap-file
//!   write already given the old number would land in the program's file.
//! * When no number from the floor up to the limit of open files is free,
//!   the move cannot be made and the program's `dup2` fails with `EMFILE`
//!   (the kernel's answer for a full table) rather than take ccvm's file.

use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::SeqCst};

const SLOTS: usize = 16;
#[allow(clippy::declare_interior_mutable_const)]
const NONE: AtomicI32 = AtomicI32::new(-1);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
/// Each slot's current number (-1: free), the number it was raised to,
/// and its file's identity.
static FD: [AtomicI32; SLOTS] = [NONE; SLOTS];
static FIRST: [AtomicI32; SLOTS] = [NONE; SLOTS];
static DEV: [AtomicU64; SLOTS] = [ZERO; SLOTS];
static INO: [AtomicU64; SLOTS] = [ZERO; SLOTS];
/// Calls under way on one of ccvm's descriptors (see [`InUse`]).
static IN_USE: AtomicUsize = AtomicUsize::new(0);
/// Taken by one move at a time.
static MOVING: AtomicBool = AtomicBool::new(false);

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

/// One of ccvm's descriptors. Its number may change while it is held (a
/// program's `dup2` onto it moves it, see [`make_room`]), so a call made
/// on it takes the number from [`Held::in_use`]. Dropping it closes the
/// descriptor under its current number.
#[derive(Debug)]
pub struct Held {
    /// The record's slot, or the number itself when every slot was taken
    /// (then it cannot be moved, as before there were slots).
    slot: Result<usize, RawFd>,
}

impl Held {
    /// The current number, for a call under way until the value drops.
    pub fn in_use(&self) -> InUse {
        IN_USE.fetch_add(1, SeqCst);
        InUse(self.raw())
    }

    /// The current number, for a wait (`poll`) or a report: a move may
    /// change it at any time, so a loop reads it again on every turn.
    pub fn raw(&self) -> RawFd {
        match self.slot {
            Ok(i) => FD[i].load(SeqCst),
            Err(fd) => fd,
        }
    }

    /// The descriptor as a [`File`], for a call under way until the value
    /// drops.
    pub fn file(&self) -> FileInUse {
        let fd = self.in_use();
        // SAFETY: an open descriptor of ours; ManuallyDrop never closes it.
        let file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd.0) });
        FileInUse { file, _fd: fd }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let fd = match self.slot {
            Ok(i) => {
                let _one = Mover::take();
                let fd = FD[i].swap(-1, SeqCst);
                FIRST[i].store(-1, SeqCst);
                fd
            }
            Err(fd) => fd,
        };
        if fd >= 0 {
            // SAFETY: our descriptor, under its current number.
            unsafe { libc::close(fd) };
        }
    }
}

/// A call under way on one of ccvm's descriptors: until it drops, the
/// number it gives stays the descriptor's.
#[derive(Debug)]
pub struct InUse(RawFd);

impl InUse {
    /// The number.
    pub fn fd(&self) -> RawFd {
        self.0
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        IN_USE.fetch_sub(1, SeqCst);
    }
}

/// A [`Held`] descriptor as a file, for one call.
#[derive(Debug)]
pub struct FileInUse {
    file: ManuallyDrop<File>,
    _fd: InUse,
}

impl std::ops::Deref for FileInUse {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

/// One move (or release of a slot) at a time.
struct Mover;

impl Mover {
    fn take() -> Mover {
        while MOVING.swap(true, SeqCst) {
            std::thread::yield_now();
        }
        Mover
    }
}

impl Drop for Mover {
    fn drop(&mut self) {
        MOVING.store(false, SeqCst);
    }
}

/// One of ccvm's descriptors that names this process itself (its
/// `/proc/self` file, its pidfd): opened on first use, and again in a
/// forked child, which is another process.
pub(crate) struct OwnProcessFd {
    /// The descriptor, with the pid of the process that opened it.
    held: Option<(u32, Held)>,
}

impl OwnProcessFd {
    /// Nothing opened yet.
    pub const fn new() -> OwnProcessFd {
        OwnProcessFd { held: None }
    }

    /// The descriptor for this process, opened (and [`raise`]d) with
    /// `open` if there is none yet or it was another process's; `None` if
    /// `open` fails.
    pub fn get(&mut self, open: impl FnOnce() -> Option<OwnedFd>) -> Option<&Held> {
        let pid = std::process::id();
        if self.held.as_ref().is_none_or(|(p, _)| *p != pid) {
            self.held = open().map(|fd| (pid, raise(fd)));
        }
        self.held.as_ref().map(|(_, held)| held)
    }
}

/// Moves `fd` to a high number, close-on-exec, and records it as ccvm's.
/// Where it cannot be moved it is kept where it is, and recorded.
pub(crate) fn raise(fd: OwnedFd) -> Held {
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
    Held { slot: record(kept) }
}

fn record(fd: RawFd) -> Result<usize, RawFd> {
    let Some((dev, ino)) = identity(fd) else { return Err(fd) };
    let _one = Mover::take();
    for i in 0..SLOTS {
        if FD[i].load(SeqCst) < 0 {
            DEV[i].store(dev, SeqCst);
            INO[i].store(ino, SeqCst);
            FIRST[i].store(fd, SeqCst);
            FD[i].store(fd, SeqCst);
            return Ok(i);
        }
    }
    Err(fd)
}

/// The current number of the descriptor ccvm raised to `first` (for a
/// thread that was handed the number, not the [`Held`] value).
pub(crate) fn current(first: RawFd) -> RawFd {
    (0..SLOTS)
        .find(|&i| FIRST[i].load(SeqCst) == first && FD[i].load(SeqCst) >= 0)
        .map_or(first, |i| FD[i].load(SeqCst))
}

/// Before the program's `dup2` or `dup3` onto `target`: if `target` is one
/// of ccvm's descriptors, moves it to another free number (from the same
/// floor as `raise`) and waits until no call ccvm made with the old
/// number is under way. The program's call may then replace `target`.
///
/// Returns whether it moved one: the old number then duplicates ccvm's
/// file until the program's call replaces it.
///
/// # Errors
///
/// `EMFILE` when no number is free to move it to; the program's call must
/// then fail with it, leaving ccvm's descriptor where it was.
pub fn make_room(target: RawFd) -> Result<bool, i32> {
    if !is_ours(target) {
        return Ok(false);
    }
    let _one = Mover::take();
    let Some(i) = (0..SLOTS).find(|&i| FD[i].load(SeqCst) == target) else {
        return Ok(false);
    };
    // SAFETY: duplicating our own descriptor.
    let moved = unsafe { libc::fcntl(target, libc::F_DUPFD_CLOEXEC, floor()) };
    let moved = if moved >= 0 {
        moved
    } else {
        // SAFETY: as above, anywhere free.
        unsafe { libc::fcntl(target, libc::F_DUPFD_CLOEXEC, 3) }
    };
    if moved < 0 {
        return Err(libc::EMFILE);
    }
    FD[i].store(moved, SeqCst);
    // A call that read `target` counted itself first; once none is under
    // way, every later call reads `moved`. A call cannot be left waiting
    // on this thread (ccvm's calls finish before their handler returns),
    // so the wait is bounded only against a program that calls `dup2`
    // from inside ccvm's own handler.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while IN_USE.load(SeqCst) != 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    // The old number now only duplicates `moved`; the program's call
    // replaces it (closing it here first would let another thread's
    // `open` take the number before the program's call does).
    Ok(true)
}

/// A `dup2` or `dup3` onto `target` made through `call` (which makes the
/// system call and returns the kernel's result), with ccvm's descriptor
/// moved out of the way first ([`make_room`]). `old` naming one of ccvm's
/// descriptors fails with `EBADF`, as if it were not open.
pub fn dup_onto(old: RawFd, target: RawFd, call: &mut dyn FnMut() -> i64) -> i64 {
    if is_ours(old) {
        return -(libc::EBADF as i64);
    }
    match make_room(target) {
        Err(e) => -(e as i64),
        Ok(moved) => {
            let r = call();
            if r < 0 && moved {
                // The call failed and left the old number duplicating
                // ccvm's file: close it, as the call would have.
                // SAFETY: a duplicate of ours, no longer recorded.
                unsafe { libc::close(target) };
            }
            r
        }
    }
}

/// Whether `fd` is one of ccvm's descriptors (still the file ccvm opened).
pub fn is_ours(fd: RawFd) -> bool {
    if fd < 0 {
        return false;
    }
    (0..SLOTS).any(|i| FD[i].load(SeqCst) == fd && identity(fd) == Some((DEV[i].load(SeqCst), INO[i].load(SeqCst))))
}

/// ccvm's descriptors in `[first, last]`, in increasing order, at most
/// `SLOTS` of them.
fn ours_within(first: u32, last: u32) -> ([RawFd; SLOTS], usize) {
    let mut found = [0; SLOTS];
    let mut n = 0;
    for slot in &FD {
        let fd = slot.load(SeqCst);
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
        let raw = fd.raw();
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

    #[test]
    fn a_dup_onto_a_held_descriptor_moves_it_first_and_the_program_gets_its_file() {
        let null = raise(OwnedFd::from(std::fs::File::open("/dev/null").unwrap()));
        let before = null.raw();
        let program = std::fs::File::open("/proc/self/stat").unwrap();
        let theirs = std::os::fd::AsRawFd::as_raw_fd(&program);
        // SAFETY: the program's dup2, as the guard makes it.
        let r = dup_onto(theirs, before, &mut || unsafe { libc::dup2(theirs, before) } as i64);
        assert_eq!(r, before as i64);
        let after = null.raw();
        assert_ne!(after, before, "ccvm's descriptor stayed where the program's landed");
        assert_eq!(
            identity(before),
            identity(theirs),
            "the program's number is not its file"
        );
        assert_ne!(identity(after), identity(theirs));
        assert!(is_ours(after) && !is_ours(before));
        // Reads through the held value reach /dev/null at its new number.
        let mut byte = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut &*null.file(), &mut byte).unwrap(), 0);
        // A dup of ccvm's own descriptor is refused, as if it were not open.
        assert_eq!(dup_onto(after, before, &mut || 0), -(libc::EBADF as i64));
        // SAFETY: the program's duplicate at `before`.
        unsafe { libc::close(before) };
        drop(null);
        assert_eq!(
            identity(after),
            None,
            "dropping the held value closes its current number"
        );
    }
}

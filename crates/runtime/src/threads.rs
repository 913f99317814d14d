//! Whether the paged process runs threads besides the one faulting, read
//! from `/proc/self/stat` every [`REFRESH`] calls.
//!
//! Why the pager asks: moving a frame out of a page table
//! (`UFFDIO_MOVE`) flushes the page from the TLB of every CPU where a
//! thread of the process runs, one interrupt per page. On this 2-CPU
//! machine, with a second thread spinning on the other CPU, a move took
//! 19.4 µs against 0.93 µs with none, while `UFFDIO_COPY` into a missing
//! page (which flushes nothing) took 0.75 µs either way
//! (`docs/results.md`, "Frames moved while other threads run"). So with
//! other threads the pager maps pages in by copying, frees the spare
//! frames that then pile up in batches, one flush for each batch (see
//! `crate::frames`), and lets evicted pages leave in batches too (see the
//! pager's `together` module).
//!
//! Choices: ccvm's own threads in the process (the fault-handling thread
//! of `FaultMode::Thread`, the thread of a process tree's shared budget)
//! are not counted: they sleep but for short turns. The count includes
//! the program's threads that sleep, which a flush skips;
//! for them copying costs about 0.5 µs a page more than moving (a copy,
//! 1.08 µs, and a share of a batched free, 0.36, against a move's 0.94),
//! little next to the 19 µs a move costs while one of them runs.
//! Reading the count costs a `pread` of a few hundred bytes: every
//! [`REFRESH`] faults it is a few nanoseconds a fault. The file is opened
//! again in a forked child, whose `/proc/self` is another process.

use std::os::fd::{FromRawFd, OwnedFd};

use crate::fds::OwnProcessFd;

/// Calls between two readings.
pub(crate) const REFRESH: u32 = 256;

/// The last count read, and when to read it again.
pub(crate) struct ThreadWatch {
    /// `/proc/self/stat`.
    stat: OwnProcessFd,
    until: u32,
    others: bool,
}

impl ThreadWatch {
    /// A watch that reads the count at its first call.
    pub fn new() -> ThreadWatch {
        ThreadWatch {
            stat: OwnProcessFd::new(),
            until: 0,
            others: false,
        }
    }

    /// Whether the process had threads besides the caller and `own`
    /// threads of ccvm's (which sleep but for short turns) when last read.
    pub fn others(&mut self, own: usize) -> bool {
        if self.until == 0 {
            self.until = REFRESH;
            self.others = self.count().is_some_and(|n| n > 1 + own);
        } else {
            self.until -= 1;
        }
        self.others
    }

    /// The process's thread count; `None` if it cannot be read.
    fn count(&mut self) -> Option<usize> {
        let fd = self.stat.get(open_stat)?.in_use();
        let mut buf = [0u8; 1024];
        // SAFETY: a descriptor we hold, read into our own buffer.
        let n = unsafe { libc::pread(fd.fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        threads_of(buf.get(..usize::try_from(n).ok()?)?)
    }
}

/// Opens `/proc/self/stat` without allocating (the pager may run in a
/// signal handler).
fn open_stat() -> Option<OwnedFd> {
    // SAFETY: a valid C string; the descriptor returned is ours.
    let fd = unsafe { libc::open(c"/proc/self/stat".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    // SAFETY: a new descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The thread count (field 20) of a `/proc/PID/stat` line. The command
/// name (field 2) may hold spaces and parentheses, so the fields are
/// counted from the last `)`.
///
/// ```text
/// 42 (a (b) c) S 1 ... : after ") ", field 3 is the state, 20 the count
/// ```
fn threads_of(stat: &[u8]) -> Option<usize> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(17)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = b"42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 7 0 123 4096 10 0 0 0 0";
        assert_eq!(threads_of(line), Some(7));
        assert_eq!(threads_of(b"42 (x) S 1"), None);
        assert_eq!(threads_of(b"no parenthesis"), None);
    }

    #[test]
    fn a_second_thread_is_seen() {
        let mut watch = ThreadWatch::new();
        let before = watch.count().expect("this process's stat reads");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        assert_eq!(watch.count(), Some(before + 1));
        assert!(ThreadWatch::new().others(0), "two threads at least are running");
        assert!(!ThreadWatch::new().others(before), "none beyond those counted");
        tx.send(()).unwrap();
        other.join().unwrap().unwrap();
    }
}

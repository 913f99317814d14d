//! Read-ahead from the compression cache and the swap file: when faults
//! walk through a region in order, the pages after the faulting one are
//! decompressed (or read) and mapped before the program reaches them. Runs
//! of first touches are read ahead the same way, as zeros.
//!
//! A cache fault costs the program a signal delivery and return besides
//! the decompression and the map (`docs/kernel.md`, "What a cache fault
//! costs", breaks it down). A page read
//! ahead pays only the decompression and the map, and when the program
//! then touches it nothing faults. The kernel reads ahead from swap
//! devices (`vm.page-cluster`) but not from zram, whose reads it treats
//! as synchronous; ccvm's cache is in the faulting process, so reading
//! ahead from it is cheap.
//!
//! # Choices
//!
//! * Only runs are read ahead: [`Streams`] remembers where the last few
//!   runs of faults would continue, and a fault there doubles the run's
//!   window (2, 4, … up to the configured most); any other fault starts a
//!   new run with no read-ahead. A program that jumps about (hashindex)
//!   thus reads nothing ahead, and one that scans (graph's edge lists)
//!   soon reads whole windows, as the kernel's file read-ahead does.
//! * Several runs at once ([`STREAMS`]), because programs scan a few
//!   arrays side by side.
//! * A page read ahead is a fault for the policy (`touch` from the level
//!   the faulting page came from: the cache, the disk, or new): its
//!   recency is the fault's, and the policy's costs count its
//!   decompression or read. Pages of the window that are elsewhere are
//!   left as they are.
//! * After a disk fault, the window's pages that lie in one written
//!   cluster of the swap file are read in one request
//!   (`SwapFile::read_ahead`), and only those are mapped: a scan evicts
//!   its pages in order, so they lie side by side, and one 4–32 KiB read
//!   costs about what one page's does. Pages elsewhere on disk are not
//!   read: that would be a guess that costs I/O of its own. graph 128M at
//!   `--ram 113M`: 65,540 disk faults became 17,332, and the run 3.70 s
//!   became 2.90 s (`ccvm run --workload graph --size 128M --ram 113M`).
//! * Off while tracing: a trace records the program's references, and a
//!   page read ahead is one the program did not (yet) make.

/// The window most runs reach, in pages. The window doubles only while a
/// run goes on, so the cap matters only for long runs: 32 took a CPython
/// cache from 24.3 and 25.2 s to 22.2 and 21.3 s (`ccvm exec --ram 178M
/// --readahead N -- python3 docs/programs/kvcache.py`, N = 8 and 32,
/// alternating), left graph within its noise (`ccvm run --workload graph
/// --size 256M --ram 200M`: 14.5 and 13.6 s against 12.7 and 14.8 s) and
/// hashindex, whose probes form no runs, alike (`--size 128M --ram 72M`:
/// 4.02 s against 3.82 s). The kernel's swap read-ahead
/// (`vm.page-cluster` 3) reads 8.
pub const DEFAULT_WINDOW: usize = 32;

/// Runs of faults followed at once.
const STREAMS: usize = 8;

#[derive(Clone, Copy, Default)]
struct Run {
    /// The page a fault continuing this run would hit (0: unused slot).
    next: usize,
    /// Pages read ahead when it last continued.
    window: usize,
}

/// The runs of faults seen lately. See the module docs.
pub(crate) struct Streams {
    runs: [Run; STREAMS],
    /// The slot a new run replaces next (round robin).
    replace: usize,
    most: usize,
}

impl Streams {
    /// Follows runs, reading at most `most` pages ahead.
    pub fn new(most: usize) -> Streams {
        Streams {
            runs: [Run::default(); STREAMS],
            replace: 0,
            most,
        }
    }

    /// A cache fault or first touch on `page`: the number of pages after
    /// it to read ahead (0 when it continues no run).
    pub fn fault(&mut self, page: usize) -> usize {
        if self.most == 0 {
            return 0;
        }
        match self.runs.iter_mut().find(|r| r.next != 0 && r.next == page) {
            Some(run) => {
                run.window = (run.window * 2).clamp(2, self.most);
                run.next = page + run.window + 1;
                run.window
            }
            None => {
                self.runs[self.replace] = Run {
                    next: page + 1,
                    window: 0,
                };
                self.replace = (self.replace + 1) % STREAMS;
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_reads_ahead_in_doubling_windows() {
        let mut s = Streams::new(8);
        assert_eq!(s.fault(100), 0);
        assert_eq!(s.fault(101), 2); // 102, 103 read ahead
        assert_eq!(s.fault(104), 4); // 105..=108
        assert_eq!(s.fault(109), 8);
        assert_eq!(s.fault(118), 8);
    }

    #[test]
    fn random_faults_read_nothing_ahead() {
        let mut s = Streams::new(8);
        let mut x = 12345usize;
        let mut ahead = 0;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ahead += s.fault((x >> 33) % 1_000_000);
        }
        assert!(ahead < 20, "read {ahead} pages ahead on random faults");
    }

    #[test]
    fn interleaved_scans_are_followed_separately() {
        let mut s = Streams::new(4);
        let (mut a, mut b) = (1000, 5000);
        let mut ahead = 0;
        for _ in 0..10 {
            let wa = s.fault(a);
            let wb = s.fault(b);
            ahead += wa + wb;
            a += wa + 1;
            b += wb + 1;
        }
        // After two faults each, both runs read 4 ahead per fault.
        assert_eq!(ahead, 2 * (2 + 4 * 8));
    }

    #[test]
    fn zero_turns_it_off() {
        let mut s = Streams::new(0);
        assert_eq!(s.fault(1), 0);
        assert_eq!(s.fault(2), 0);
    }
}

//! Which resident pages were written lately, read from the kernel's page
//! tables: the reference bits of a CLOCK over uncompressed pages.
//!
//! A mechanism that sees only faults replaces resident pages in the order
//! they faulted in, so a page a program uses all the time leaves memory
//! once per pass of that order and faults straight back. The kernel keeps
//! such pages by their accessed bits. userfaultfd offers the nearest thing
//! to those bits that a process may read of itself: with asynchronous
//! write protection (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7), protecting a
//! page only marks it, the kernel lifts the mark on the page's next write
//! without a fault reaching ccvm, and one `PAGEMAP_SCAN` reports the
//! pages written since and protects them again. Each page the scan reports
//! is told to the policy as a touch of a resident page
//! ([`Level::Uncompressed`](ccvm_policy::Level)), which makes it the
//! newest: replacement becomes second-chance over writes.
//!
//! # Choices
//!
//! * Writes, not reads: no interface shows a process its accessed bits
//!   page by page (`smaps` counts them per mapping; read a 64 KiB chunk at
//!   a time they kept no better pages, `docs/results.md`).
//!   A page only read is replaced in fault order, as before. Interpreters
//!   and managed runtimes write what they read (reference counts, mark
//!   bits), so for them a write bit is an access bit.
//! * A scan every half turn of the resident pages (`resident / 2` faults,
//!   at least [`MIN_INTERVAL`]), as a CLOCK's hand needs one bit per page
//!   per turn. Each scan costs a page-table walk (about 20 ns a resident
//!   page, measured on 50,000 pages) and each page written after it one
//!   write-protect fault that the kernel resolves alone (about 1 µs), so
//!   scanning more often buys little order and costs faults.
//! * Mappings a program puts over part of the region (the JVM maps some
//!   fixed-address pages of its own) are not under asynchronous write
//!   protection. The scan skips them, where asking the kernel to refuse
//!   such a range ended every scan of node's and the JVM's heaps at the
//!   first, and with it the write scans they had asked for.
//! * Only present pages are matched (`PAGE_IS_PRESENT` with
//!   `PAGE_IS_WRITTEN`): write-protecting a hole leaves a marker in its
//!   page-table entry, and `UFFDIO_MOVE` refuses to map a page over one.
//! * Asynchronous protection stops no writer, so eviction must move frames
//!   (`UFFDIO_MOVE`): the runtime asks for it only then, and never maps
//!   reads of untouched pages as a protected zero page.

use std::os::fd::{FromRawFd, OwnedFd};

use ccvm_codec::PAGE_SIZE;
use nix::errno::Errno;

/// Fewest faults between two scans.
pub const MIN_INTERVAL: usize = 256;

/// Page-table entries matched per call (the kernel stops when its output
/// is full and says where).
const REGIONS: usize = 512;

const SCAN_WP_MATCHING: u64 = 1 << 0;
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_PRESENT: u64 = 1 << 3;

#[repr(C)]
struct ScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

nix::ioctl_readwrite!(ioctl_pagemap_scan, b'f', 16, ScanArg);

/// The write bits of one region's pages (see the module docs).
pub(crate) struct WriteScan {
    pagemap: crate::fds::Held,
    regions: Vec<PageRegion>,
    /// Pages brought in since the last scan, as a bit set and a list (to
    /// clear the set): their fault, not a later write, marked them.
    fresh: Vec<u64>,
    fresh_list: Vec<usize>,
    /// One past the highest page brought in: where a scan ends.
    end: usize,
    /// Faults since the last scan.
    since: usize,
    /// Scans made, and pages they found written.
    pub scans: u64,
    pub written: u64,
}

impl WriteScan {
    /// Opens this process's page map; `None` if it cannot.
    pub fn open() -> Option<WriteScan> {
        let path = c"/proc/self/pagemap";
        // SAFETY: a valid C string; the descriptor is ours.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(WriteScan {
            pagemap: crate::fds::raise(fd),
            regions: vec![PageRegion::default(); REGIONS],
            fresh: Vec::new(),
            fresh_list: Vec::new(),
            end: 0,
            since: 0,
            scans: 0,
            written: 0,
        })
    }

    /// A fault (or read-ahead) brought page `page` in.
    pub fn fault(&mut self, page: usize) {
        self.since += 1;
        self.end = self.end.max(page + 1);
        let (word, bit) = (page / 64, 1u64 << (page % 64));
        if word >= self.fresh.len() {
            self.fresh.resize((word + 1).next_power_of_two(), 0);
        }
        if self.fresh[word] & bit == 0 {
            self.fresh[word] |= bit;
            self.fresh_list.push(page);
        }
    }

    /// Whether a scan is due with `resident` pages in memory.
    pub fn due(&self, resident: usize) -> bool {
        self.since >= (resident / 2).max(MIN_INTERVAL)
    }

    /// Calls `written` with the index (from `base`) of every present page
    /// of the region at `base`, up to the highest brought in, written since it was last
    /// scanned, and marks them all unwritten again. Pages brought in since
    /// the last scan are marked but not reported: the fault that brought
    /// one in already made it the newest.
    ///
    /// # Errors
    ///
    /// The ioctl's: `ENOTTY` or `EINVAL` on a kernel without
    /// `PAGEMAP_SCAN`. Parts of the range not under asynchronous write
    /// protection are skipped, not an error (see the module docs).
    pub fn scan(&mut self, base: usize, mut written: impl FnMut(usize)) -> Result<(), Errno> {
        self.since = 0;
        self.scans += 1;
        let end = (base + self.end * PAGE_SIZE) as u64;
        let mut start = base as u64;
        while start < end {
            let mut arg = ScanArg {
                size: std::mem::size_of::<ScanArg>() as u64,
                flags: SCAN_WP_MATCHING,
                start,
                end,
                walk_end: 0,
                vec: self.regions.as_mut_ptr() as u64,
                vec_len: self.regions.len() as u64,
                max_pages: 0,
                category_inverted: 0,
                category_mask: PAGE_IS_WRITTEN | PAGE_IS_PRESENT,
                category_anyof_mask: 0,
                return_mask: PAGE_IS_WRITTEN,
            };
            // SAFETY: PAGEMAP_SCAN on our page map with a valid argument
            // whose output vector holds `vec_len` regions.
            let n = unsafe { ioctl_pagemap_scan(self.pagemap.in_use().fd(), &mut arg) }? as usize;
            for r in &self.regions[..n.min(REGIONS)] {
                let first = (r.start as usize - base) / PAGE_SIZE;
                let last = (r.end as usize - base) / PAGE_SIZE;
                for page in first..last {
                    let fresh = self.fresh.get(page / 64).is_some_and(|w| w & (1 << (page % 64)) != 0);
                    if !fresh {
                        self.written += 1;
                        written(page);
                    }
                }
            }
            if arg.walk_end <= start {
                break;
            }
            start = arg.walk_end;
        }
        for page in self.fresh_list.drain(..) {
            self.fresh[page / 64] = 0;
        }
        Ok(())
    }
}

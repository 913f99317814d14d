//! The swap file: pages that leave the compression cache, still
//! compressed, or pages evicted uncompressed when compression is off.
//!
//! # Choices
//!
//! * The file is opened with `O_TMPFILE | O_DIRECT`, mode 0600: it has no
//!   name, so it vanishes when closed (also when the process dies), and
//!   the kernel's page cache does not stand in for the disk.
//! * Writes are clustered: pages going out are packed into a 64 KiB
//!   buffer, each at an offset rounded up to the direct-I/O alignment (512
//!   bytes where the device allows it, else 4096, found by trying), and
//!   the buffer is written in one request when full, as paper 000's
//!   compressed pages are written to disk in batches. A compressed page of
//!   1.5 KiB thus costs 1.5 KiB of disk bandwidth, and a page still in the
//!   buffer when it is faulted back is served from it without I/O.
//! * Reads are single requests of the page's aligned length.
//! * A cluster's space is reused once none of its pages is live. Partly
//!   live clusters are cleaned as in a log-structured file system: when the
//!   clusters in use hold more than twice the live data (plus four clusters
//!   of slack), the cluster with the fewest live bytes is read in one
//!   request, its live pages are checked and appended to the cluster being
//!   filled, and it is freed. The caller learns each moved page's new slot.
//!   So the file stays within about twice the live data however long the
//!   churn, for at most one cluster read per cluster written.
//! * How the page is kept, its length and a CRC-32 of the payload live in
//!   the [`SwapSlot`] in memory, not in the file: a record then cannot
//!   vouch for itself, a stale or misplaced block is caught as surely as
//!   a flipped bit, and a raw page needs no extra block for a header. Every
//!   read is checked against it; a mismatch is reported as corruption,
//!   never returned as data. Same-filled pages from the store need no disk
//!   at all: their value stays in the slot.
//! * A forked child shares the file with its parent (see
//!   `crate::pager`'s fork module): each reads the slots it held at the
//!   fork from the same clusters, so those clusters are *frozen* in both
//!   processes: neither writes them again, neither cleans them, and a
//!   frozen cluster whose pages are all gone is left as dead space rather
//!   than reused (the file grows instead; disk, not memory). New clusters
//!   come from a counter that the whole process tree shares (one page of
//!   shared memory made with the file), so no two processes ever fill the
//!   same cluster. Clusters free at the fork stay the parent's.

use ccvm_codec::PAGE_SIZE;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccvm_store::Stored;

use crate::aligned::AlignedBuf;
use crate::delay::wait;

mod clean;
mod fork;

const CLUSTER: usize = 64 * 1024;

/// Why the swap file failed.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    /// The file could not be created.
    #[error("cannot create a swap file in {dir}: {source}; choose another directory with --swap-dir")]
    Create {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The directory's file system does not take direct I/O (tmpfs).
    #[error(
        "cannot create a swap file in {dir}: its file system does not take O_DIRECT files (tmpfs does not); \
         choose a directory on a disk with --swap-dir"
    )]
    NoDirectIo {
        /// The directory.
        dir: PathBuf,
    },
    /// The disk is full.
    #[error("swap file in {dir}: no space left on the device; free space or choose another --swap-dir")]
    Full {
        /// The directory.
        dir: PathBuf,
    },
    /// A read or write failed.
    #[error("swap file in {dir}: {op} failed at offset {offset}: {source}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// "read" or "write".
        op: &'static str,
        /// Byte offset in the file.
        offset: u64,
        /// The cause.
        source: io::Error,
    },
    /// A record read back does not match what was written.
    #[error("swap file in {dir}: page {page} is corrupt at offset {offset} ({what}); its data cannot be trusted")]
    Corrupt {
        /// The directory.
        dir: PathBuf,
        /// The page.
        page: u64,
        /// Byte offset in the file.
        offset: u64,
        /// What did not match.
        what: &'static str,
    },
}

/// Where a page is on disk and what it must read back as, in 16 bytes:
/// the pager keeps one for every page on disk (it was 32 bytes with a
/// whole [`Stored`] inside). A same-filled page has no place on disk:
/// its cluster is `u32::MAX` and its word is kept in `offset` and `crc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SwapSlot {
    cluster: u32,
    offset: u32,
    crc: u32,
    /// [`RAW`], [`SAME`] or the compressed length.
    kind: u32,
}

/// `SwapSlot::kind` of a page stored raw.
const RAW: u32 = u32::MAX;
/// `SwapSlot::kind` of a same-filled page.
const SAME: u32 = u32::MAX - 1;

impl SwapSlot {
    /// A slot told apart by `n`, for tests of tables that keep slots.
    #[cfg(test)]
    pub(crate) fn for_tests(n: u32) -> SwapSlot {
        SwapSlot {
            cluster: n,
            offset: n,
            crc: n,
            kind: RAW,
        }
    }

    /// How the page is kept.
    fn stored(&self) -> Stored {
        match self.kind {
            RAW => Stored::Raw,
            SAME => Stored::Same(u64::from(self.offset) | u64::from(self.crc) << 32),
            n => Stored::Compressed(n as usize),
        }
    }

    fn kind_of(stored: Stored) -> u32 {
        match stored {
            Stored::Raw => RAW,
            Stored::Same(_) => SAME,
            Stored::Compressed(n) => n as u32,
        }
    }

    fn is_same(&self) -> bool {
        self.kind == SAME
    }

    /// Bytes of the page in the file (before rounding).
    fn payload_len(&self) -> usize {
        match self.stored() {
            Stored::Same(_) => 0,
            Stored::Compressed(n) => n,
            Stored::Raw => PAGE_SIZE,
        }
    }
}

/// A `u32` counter in a page of shared memory, which forked children
/// share with their parent (see the module docs).
struct SharedCounter(std::ptr::NonNull<std::sync::atomic::AtomicU32>);

// SAFETY: the counter is an atomic in memory that lives as long as the
// process (the page is never unmapped: a forked child may hold it too).
unsafe impl Send for SharedCounter {}

impl SharedCounter {
    fn new(first: u32) -> io::Result<SharedCounter> {
        let p = ccvm_store::chunks::map_anonymous(PAGE_SIZE, libc::MAP_SHARED).ok_or_else(io::Error::last_os_error)?;
        let counter = p.cast::<std::sync::atomic::AtomicU32>();
        // SAFETY: the page just mapped, zeroed and aligned.
        unsafe { (*counter).store(first, std::sync::atomic::Ordering::Relaxed) };
        Ok(SharedCounter(
            std::ptr::NonNull::new(counter).expect("mmap does not return null"),
        ))
    }

    /// The next value, for this process alone.
    fn take(&self) -> u32 {
        // SAFETY: see the type's Send.
        unsafe { self.0.as_ref() }.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// I/O counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SwapStats {
    /// Write requests (whole clusters).
    pub writes: u64,
    /// Clusters cleaned (their live pages moved, the cluster freed).
    pub cleaned: u64,
    /// Pages the cleaner moved.
    pub pages_moved: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Read requests.
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Pages served from the write buffer, without I/O.
    pub buffer_hits: u64,
    /// Pages served from a span read ahead with an earlier page
    /// (`SwapFile::read_ahead`), without I/O of their own.
    pub span_hits: u64,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Direct-I/O granularity in use, bytes.
    pub alignment: u64,
}

pub(crate) struct SwapFile {
    file: crate::fds::Held,
    dir: PathBuf,
    align: usize,
    /// Live pages per cluster, with their slots.
    members: Vec<Vec<(u64, SwapSlot)>>,
    /// Live bytes per cluster (payloads rounded to the alignment).
    live_bytes: Vec<u32>,
    total_live: u64,
    free_clusters: Vec<u32>,
    /// Clusters live at a fork, never written or cleaned again (see the
    /// module docs); indexed like `members`.
    frozen: Vec<bool>,
    /// Clusters this process owns and has not given up as dead: the
    /// clusters in use are these less the free ones.
    owned: u64,
    /// The tree's count of clusters made (see the module docs).
    next_cluster: SharedCounter,
    /// Reads whole clusters for the cleaner; taken while it moves pages.
    clean_buf: Option<AlignedBuf>,
    /// The cluster being filled, and its buffer.
    current: u32,
    pending: AlignedBuf,
    pending_len: usize,
    read_buf: AlignedBuf,
    /// Bytes read ahead: `span[..end - start]` holds bytes `start..end`
    /// of cluster `cluster`, until that cluster is written again.
    span: AlignedBuf,
    span_at: Option<(u32, u32, u32)>,
    latency: Duration,
    pub stats: SwapStats,
}

/// The file's direct-I/O offset alignment as its file system states it
/// (`statx`, Linux 6.1+; 0 if the file takes no direct I/O), rounded up
/// to 512 and to at most a page; `None` if the kernel does not say, and
/// the caller then probes with writes. Asking costs no I/O, which matters
/// since every paged process makes a swap file.
fn direct_io_alignment(fd: i32) -> Option<usize> {
    // SAFETY: a plain-data struct, written by the kernel.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an open descriptor, an empty path with AT_EMPTY_PATH, and a
    // buffer of the kernel's struct.
    let rc = unsafe { libc::statx(fd, c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut st) };
    if rc != 0 || st.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    match st.stx_dio_offset_align as usize {
        0 => Some(0),
        a if a <= 512 => Some(512),
        a if a <= PAGE_SIZE && st.stx_dio_mem_align as usize <= PAGE_SIZE => Some(a.next_power_of_two()),
        _ => None,
    }
}

impl SwapFile {
    /// Creates an unnamed swap file in `dir`; `latency` is added to every
    /// read from the device.
    pub fn create(dir: &Path, latency: Duration) -> Result<SwapFile, SwapError> {
        let create = |source: io::Error| {
            if source.raw_os_error() == Some(libc::EINVAL) {
                SwapError::NoDirectIo { dir: dir.to_owned() }
            } else {
                SwapError::Create {
                    dir: dir.to_owned(),
                    source,
                }
            }
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_DIRECT)
            .open(dir)
            .map_err(create)?;
        // Out of the program's way (see `crate::fds`).
        let file = crate::fds::raise(file.into());
        let read_buf = AlignedBuf::new(PAGE_SIZE);
        let align = match direct_io_alignment(file.raw()) {
            Some(0) => return Err(create(io::Error::from_raw_os_error(libc::EINVAL))),
            Some(align) => align,
            None => {
                // The smallest direct-I/O size the device takes: try 512.
                let align = match file.file().write_at(&read_buf[..512], 0) {
                    Ok(512) => 512,
                    _ => PAGE_SIZE,
                };
                file.file().write_at(&read_buf[..align], 0).map_err(create)?;
                align
            }
        };
        Ok(SwapFile {
            file,
            dir: dir.to_owned(),
            align,
            members: vec![Vec::new()],
            live_bytes: vec![0],
            total_live: 0,
            free_clusters: Vec::new(),
            frozen: vec![false],
            owned: 1,
            next_cluster: SharedCounter::new(1).map_err(create)?,
            clean_buf: Some(AlignedBuf::new(CLUSTER)),
            current: 0,
            pending: AlignedBuf::new(CLUSTER),
            pending_len: 0,
            read_buf,
            span: AlignedBuf::new(CLUSTER),
            span_at: None,
            latency,
            stats: SwapStats {
                alignment: align as u64,
                ..SwapStats::default()
            },
        })
    }

    /// The file descriptor (for diagnostics and tests).
    pub fn fd(&self) -> i32 {
        self.file.raw()
    }

    fn io_error(&self, op: &'static str, offset: u64, source: io::Error) -> SwapError {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            SwapError::Full { dir: self.dir.clone() }
        } else {
            SwapError::Io {
                dir: self.dir.clone(),
                op,
                offset,
                source,
            }
        }
    }

    /// Writes the cluster being filled and starts another.
    pub fn flush(&mut self) -> Result<(), SwapError> {
        if self.pending_len == 0 {
            return Ok(());
        }
        let offset = self.current as u64 * CLUSTER as u64;
        let len = self.pending_len;
        if let Err(e) = self.file.file().write_all_at(&self.pending[..len], offset) {
            return Err(self.io_error("write", offset, e));
        }
        self.stats.writes += 1;
        self.stats.bytes_written += len as u64;
        self.stats.file_bytes = self.stats.file_bytes.max(offset + CLUSTER as u64);
        self.current = match self.free_clusters.pop() {
            Some(c) => c,
            None => self.new_cluster(),
        };
        // The span read ahead from a cluster about to be rewritten is stale.
        if self.span_at.is_some_and(|(c, _, _)| c == self.current) {
            self.span_at = None;
        }
        self.pending_len = 0;
        Ok(())
    }

    /// A cluster no process of the tree has used, now this one's.
    fn new_cluster(&mut self) -> u32 {
        let c = self.next_cluster.take();
        let len = c as usize + 1;
        if self.members.len() < len {
            self.members.resize_with(len, Vec::new);
            self.live_bytes.resize(len, 0);
            self.frozen.resize(len, false);
        }
        self.owned += 1;
        c
    }

    /// Clusters in use: owned, less the free ones.
    fn clusters_in_use(&self) -> u64 {
        self.owned - self.free_clusters.len() as u64
    }

    /// Queues page `page`, kept as `stored` with `payload` (the stored
    /// bytes: 4096 for raw, the compressed length, or none for
    /// same-filled); it reaches the disk when its cluster fills.
    pub fn write(&mut self, page: u64, stored: Stored, payload: &[u8]) -> Result<SwapSlot, SwapError> {
        if let Stored::Same(word) = stored {
            return Ok(SwapSlot {
                cluster: u32::MAX,
                offset: word as u32,
                crc: (word >> 32) as u32,
                kind: SAME,
            });
        }
        let rounded = payload.len().next_multiple_of(self.align);
        if self.pending_len + rounded > CLUSTER {
            self.flush()?;
        }
        let at = self.pending_len;
        self.pending[at..at + payload.len()].copy_from_slice(payload);
        self.pending[at + payload.len()..at + rounded].fill(0);
        self.pending_len += rounded;
        let slot = SwapSlot {
            cluster: self.current,
            offset: at as u32,
            crc: crc32fast::hash(payload),
            kind: SwapSlot::kind_of(stored),
        };
        self.members[self.current as usize].push((page, slot));
        self.live_bytes[self.current as usize] += rounded as u32;
        self.total_live += rounded as u64;
        Ok(slot)
    }

    /// Reads ahead, in one request, the slots of `slots` that lie in the
    /// same written cluster as the first of them, so that [`Self::read`]
    /// serves them without I/O of their own; returns how many it covers.
    /// Pages a sequential scan evicted in order lie side by side in a
    /// cluster, so a fault that continues a scan reads its window's pages
    /// for about the price of one.
    ///
    /// # Errors
    ///
    /// The read's error.
    pub fn read_ahead(&mut self, slots: &[SwapSlot]) -> Result<usize, SwapError> {
        let Some(first) = slots.iter().find(|s| !s.is_same()) else {
            return Ok(0);
        };
        let cluster = first.cluster;
        if cluster == self.current {
            return Ok(0);
        }
        let mut covered = 0;
        let (mut start, mut end) = (u32::MAX, 0u32);
        for s in slots.iter().filter(|s| s.cluster == cluster && !s.is_same()) {
            start = start.min(s.offset);
            end = end.max(s.offset + s.payload_len() as u32);
            covered += 1;
        }
        if covered < 2 {
            return Ok(0);
        }
        let align = self.align as u32;
        let (start, end) = (start / align * align, end.next_multiple_of(align).min(CLUSTER as u32));
        let at = cluster as u64 * CLUSTER as u64 + start as u64;
        let started = Instant::now();
        if let Err(e) = self
            .file
            .file()
            .read_exact_at(&mut self.span[..(end - start) as usize], at)
        {
            return Err(self.io_error("read", at, e));
        }
        self.stats.reads += 1;
        self.stats.bytes_read += (end - start) as u64;
        self.span_at = Some((cluster, start, end));
        wait(self.latency.saturating_sub(started.elapsed()));
        Ok(covered)
    }

    /// Whether [`Self::read`] of `slot` would be served without I/O: from
    /// the span read ahead or the cluster being filled, or a same-filled
    /// page.
    pub fn holds_ahead(&self, slot: SwapSlot) -> bool {
        slot.is_same()
            || slot.cluster == self.current
            || self.span_at.is_some_and(|(c, start, end)| {
                c == slot.cluster && slot.offset >= start && slot.offset + slot.payload_len() as u32 <= end
            })
    }

    /// Frees page `page`'s `slot` without reading it (the program dropped
    /// the page).
    pub fn forget(&mut self, page: u64, slot: SwapSlot) {
        if !slot.is_same() {
            self.release(page, slot);
        }
    }

    /// Takes `page`'s `slot` out of its cluster's members.
    fn release(&mut self, page: u64, slot: SwapSlot) {
        let c = slot.cluster as usize;
        if let Some(i) = self.members[c].iter().position(|&(p, _)| p == page) {
            self.members[c].swap_remove(i);
            let rounded = slot.payload_len().next_multiple_of(self.align) as u32;
            self.live_bytes[c] -= rounded;
            self.total_live -= rounded as u64;
            if self.members[c].is_empty() && slot.cluster != self.current {
                if self.frozen[c] {
                    // Another process of the tree may still read it.
                    self.owned -= 1;
                } else {
                    self.free_clusters.push(slot.cluster);
                }
            }
        }
    }

    /// Reads page `page` back from `slot` into `out` (4096 bytes), checks
    /// it, frees the slot, and returns how it is kept: for
    /// [`Stored::Compressed`]`(n)` the payload is `out[..n]`.
    pub fn read(&mut self, page: u64, slot: SwapSlot, out: &mut [u8]) -> Result<Stored, SwapError> {
        if slot.is_same() {
            return Ok(slot.stored());
        }
        let payload = slot.payload_len();
        let started = Instant::now();
        let at = slot.cluster as u64 * CLUSTER as u64 + slot.offset as u64;
        let from_disk = slot.cluster != self.current;
        let in_span = self.span_at.and_then(|(c, start, end)| {
            (c == slot.cluster && slot.offset >= start && slot.offset + payload as u32 <= end)
                .then(|| (slot.offset - start) as usize)
        });
        if let (true, Some(o)) = (from_disk, in_span) {
            out[..payload].copy_from_slice(&self.span[o..o + payload]);
            self.stats.span_hits += 1;
        } else if from_disk {
            let len = payload.next_multiple_of(self.align);
            if let Err(e) = self.file.file().read_exact_at(&mut self.read_buf[..len], at) {
                return Err(self.io_error("read", at, e));
            }
            self.stats.reads += 1;
            self.stats.bytes_read += len as u64;
            out[..payload].copy_from_slice(&self.read_buf[..payload]);
        } else {
            let o = slot.offset as usize;
            out[..payload].copy_from_slice(&self.pending[o..o + payload]);
            self.stats.buffer_hits += 1;
        }
        if crc32fast::hash(&out[..payload]) != slot.crc {
            return Err(SwapError::Corrupt {
                dir: self.dir.clone(),
                page,
                offset: at,
                what: "checksum mismatch",
            });
        }
        self.release(page, slot);
        if from_disk && in_span.is_none() {
            wait(self.latency.saturating_sub(started.elapsed()));
        }
        Ok(slot.stored())
    }
}

#[cfg(test)]
mod tests;

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
//!   live clusters are not cleaned (no log cleaner yet), so the file can
//!   grow to several times the live data under long random churn; its size
//!   is reported.
//! * How the page is kept, its length and a CRC-32 of the payload live in
//!   the [`SwapSlot`] in memory, not in the file: a record then cannot
//!   vouch for itself, a stale or misplaced block is caught as surely as
//!   a flipped bit, and a raw page needs no extra block for a header. Every
//!   read is checked against it; a mismatch is reported as corruption,
//!   never returned as data. Same-filled pages from the store need no disk
//!   at all: their value stays in the slot.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccvm_store::Stored;

use crate::aligned::AlignedBuf;

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

/// Where a page is on disk and what it must read back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SwapSlot {
    cluster: u32,
    offset: u32,
    stored: Stored,
    crc: u32,
}

/// I/O counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwapStats {
    /// Write requests (whole clusters).
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Read requests.
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Pages served from the write buffer, without I/O.
    pub buffer_hits: u64,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Direct-I/O granularity in use, bytes.
    pub alignment: u64,
}

pub(crate) struct SwapFile {
    file: File,
    dir: PathBuf,
    align: usize,
    /// Live pages per cluster.
    live: Vec<u32>,
    free_clusters: Vec<u32>,
    /// The cluster being filled, and its buffer.
    current: u32,
    pending: AlignedBuf,
    pending_len: usize,
    read_buf: AlignedBuf,
    latency: Duration,
    pub stats: SwapStats,
}

impl SwapFile {
    /// Creates an unnamed swap file in `dir`; `latency` is added to every
    /// read from the device.
    pub fn create(dir: &Path, latency: Duration) -> Result<SwapFile, SwapError> {
        let create = |source| SwapError::Create {
            dir: dir.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_DIRECT)
            .open(dir)
            .map_err(create)?;
        let read_buf = AlignedBuf::new(4096);
        // The smallest direct-I/O size the device takes: try 512.
        let align = match file.write_at(&read_buf[..512], 0) {
            Ok(512) => 512,
            _ => 4096,
        };
        file.write_at(&read_buf[..align], 0).map_err(create)?;
        Ok(SwapFile {
            file,
            dir: dir.to_owned(),
            align,
            live: vec![0],
            free_clusters: Vec::new(),
            current: 0,
            pending: AlignedBuf::new(CLUSTER),
            pending_len: 0,
            read_buf,
            latency,
            stats: SwapStats {
                alignment: align as u64,
                ..SwapStats::default()
            },
        })
    }

    /// The file descriptor (for diagnostics and tests).
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
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
        if let Err(e) = self.file.write_all_at(&self.pending[..len], offset) {
            return Err(self.io_error("write", offset, e));
        }
        self.stats.writes += 1;
        self.stats.bytes_written += len as u64;
        self.stats.file_bytes = self.stats.file_bytes.max(offset + CLUSTER as u64);
        self.current = match self.free_clusters.pop() {
            Some(c) => c,
            None => {
                self.live.push(0);
                self.live.len() as u32 - 1
            }
        };
        self.pending_len = 0;
        Ok(())
    }

    /// Queues a page kept as `stored` with `payload` (the stored bytes:
    /// 4096 for raw, the compressed length, or none for same-filled); it
    /// reaches the disk when its cluster fills.
    pub fn write(&mut self, stored: Stored, payload: &[u8]) -> Result<SwapSlot, SwapError> {
        if let Stored::Same(_) = stored {
            return Ok(SwapSlot {
                cluster: u32::MAX,
                offset: 0,
                stored,
                crc: 0,
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
        self.live[self.current as usize] += 1;
        Ok(SwapSlot {
            cluster: self.current,
            offset: at as u32,
            stored,
            crc: crc32fast::hash(payload),
        })
    }

    /// Reads page `page` back from `slot` into `out` (4096 bytes), checks
    /// it, frees the slot, and returns how it is kept: for
    /// [`Stored::Compressed`]`(n)` the payload is `out[..n]`.
    pub fn read(&mut self, page: u64, slot: SwapSlot, out: &mut [u8]) -> Result<Stored, SwapError> {
        let payload = match slot.stored {
            Stored::Same(_) => return Ok(slot.stored),
            Stored::Compressed(n) => n,
            Stored::Raw => out.len(),
        };
        let started = Instant::now();
        let at = slot.cluster as u64 * CLUSTER as u64 + slot.offset as u64;
        let from_disk = slot.cluster != self.current;
        if from_disk {
            let len = payload.next_multiple_of(self.align);
            if let Err(e) = self.file.read_exact_at(&mut self.read_buf[..len], at) {
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
        let live = &mut self.live[slot.cluster as usize];
        *live -= 1;
        if *live == 0 && slot.cluster != self.current {
            self.free_clusters.push(slot.cluster);
        }
        if from_disk {
            wait(self.latency.saturating_sub(started.elapsed()));
        }
        Ok(slot.stored)
    }
}

/// Waits `d`: sleeping for long waits, spinning for short ones, where a
/// sleep would overshoot by its own wake-up latency.
fn wait(d: Duration) {
    if d >= Duration::from_micros(200) {
        std::thread::sleep(d);
    } else if !d.is_zero() {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

//! Reading a `.ccz` file: the checked index, and one page at a time.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccvm_codec::{Codec, PAGE_SIZE};
use ccvm_runtime::aligned::AlignedBuf;

use crate::format::{data_start, Entry, Header, Kind, ENTRY_BYTES, HEADER_BYTES};
use crate::PackError;

/// How pages are read from the file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReadOptions {
    /// Read with `O_DIRECT`: every page load goes to the disk, reading
    /// the 512-byte blocks its stored bytes cover, as a pager without a
    /// file cache would. Otherwise reads go through the page cache (and
    /// its read-ahead).
    pub direct: bool,
    /// Added to every read, to emulate a slower disk's access time.
    pub latency: Duration,
    /// Emulated transfer rate in bytes per second (0: the real disk's):
    /// every read also waits its bytes' transfer time.
    pub bandwidth: u64,
}

/// What reading pages cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Pages loaded.
    pub pages: u64,
    /// Reads of the file (a run of pages is one read).
    pub reads: u64,
    /// Of those, zero pages (no read).
    pub zero: u64,
    /// Bytes read from the file (whole blocks with `O_DIRECT`).
    pub bytes_read: u64,
    /// Time in reads, emulated delays included, in nanoseconds.
    pub read_ns: u64,
    /// Time decompressing and checking, in nanoseconds.
    pub decode_ns: u64,
}

/// Most pages [`Packed::read_run`] reads at once: 128 KiB of the
/// original, as the kernel's default read-ahead of a file.
pub const MAX_RUN: usize = 32;

/// Alignment of `O_DIRECT` reads: the logical block size of the disks
/// ccvm runs on.
const BLOCK: u64 = 512;

/// An open `.ccz` file with its checked index.
pub struct Packed {
    path: PathBuf,
    file: File,
    header: Header,
    entries: Vec<Entry>,
    codec: Box<dyn Codec>,
    options: ReadOptions,
    buf: AlignedBuf,
    stats: ReadStats,
}

impl Packed {
    /// Opens `path` and checks its header and every index entry.
    ///
    /// # Errors
    ///
    /// [`PackError::Io`] when the file cannot be read,
    /// [`PackError::Header`] or [`PackError::Page`] saying what is wrong
    /// with it, [`PackError::Codec`] for a codec this build lacks.
    pub fn open(path: &Path, options: ReadOptions) -> Result<Packed, PackError> {
        let io = |e: std::io::Error| PackError::Io(format!("{}: {e}", path.display()));
        let mut open = OpenOptions::new();
        open.read(true);
        if options.direct {
            open.custom_flags(libc::O_DIRECT);
        }
        let file = open.open(path).map_err(|e| {
            if options.direct && e.raw_os_error() == Some(libc::EINVAL) {
                PackError::Io(format!(
                    "{}: its file system does not take O_DIRECT reads (tmpfs does not); add --buffered",
                    path.display()
                ))
            } else {
                io(e)
            }
        })?;
        let file_bytes = file.metadata().map_err(io)?.len();
        // The header and index through a buffered descriptor: O_DIRECT
        // wants aligned buffers, and these are read once.
        let plain = File::open(path).map_err(io)?;
        let mut head = [0u8; HEADER_BYTES];
        let got = read_fully(&plain, &mut head, 0).map_err(io)?;
        let header = Header::decode(&head[..got])?;
        let start = data_start(header.pages);
        if start > file_bytes {
            return Err(PackError::Header(format!(
                "the index of {} pages needs {start} bytes; the file has {file_bytes}",
                header.pages
            )));
        }
        let mut index = vec![0u8; header.pages as usize * ENTRY_BYTES];
        plain.read_exact_at(&mut index, HEADER_BYTES as u64).map_err(io)?;
        if crc32fast::hash(&index) != header.index_crc {
            return Err(PackError::Header(
                "the index's CRC does not match: the file is damaged".into(),
            ));
        }
        let entries = index
            .chunks_exact(ENTRY_BYTES)
            .enumerate()
            .map(|(p, b)| Entry::decode(p as u64, b, start, file_bytes))
            .collect::<Result<Vec<_>, _>>()?;
        // Stored bytes lie end to end in page order (the format's rule),
        // so that a run of pages is one read.
        let mut next = start;
        for (p, e) in entries.iter().enumerate().filter(|(_, e)| e.kind != Kind::Zero) {
            if e.offset != next {
                return Err(PackError::Page {
                    page: p as u64,
                    offset: HEADER_BYTES as u64 + p as u64 * ENTRY_BYTES as u64,
                    what: format!("its bytes start at {} where the previous page's end ({next})", e.offset),
                });
            }
            next += e.stored as u64;
        }
        let codec = ccvm_codec::by_name(&header.codec)
            .map_err(|e| PackError::Codec(format!("{} was packed with {e}", path.display())))?;
        Ok(Packed {
            path: path.to_path_buf(),
            file,
            header,
            entries,
            codec,
            options,
            buf: AlignedBuf::new((MAX_RUN + 1) * PAGE_SIZE),
            stats: ReadStats::default(),
        })
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The original file's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.header.file_len
    }

    /// Pages in the file.
    pub fn pages(&self) -> u64 {
        self.header.pages
    }

    /// The codec of its compressed pages.
    pub fn codec(&self) -> &str {
        &self.header.codec
    }

    /// The index entry of page `page`, if there is such a page.
    pub fn entry(&self, page: u64) -> Option<&Entry> {
        self.entries.get(page as usize)
    }

    /// What reading cost so far.
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// Reads page `page` into `out`: its original 4096 bytes (a file's last
    /// page zero-padded), checked against the page's CRC.
    ///
    /// # Errors
    ///
    /// [`PackError::Page`] naming the page and file offset when the page
    /// does not exist, cannot be read, does not decode or fails its CRC.
    pub fn read_page(&mut self, page: u64, out: &mut [u8; PAGE_SIZE]) -> Result<(), PackError> {
        self.read_run(page, 1, |_, bytes| {
            out.copy_from_slice(bytes);
            Ok(())
        })
    }

    /// Reads pages `first..first + count` (at most `MAX_RUN`, cut at the
    /// file's end) with one read of the file, since their stored bytes lie
    /// end to end, and hands each page's original bytes, checked, to
    /// `each` in order.
    ///
    /// # Errors
    ///
    /// As [`Packed::read_page`], for the first page that fails; or the
    /// first error `each` returns.
    pub fn read_run(
        &mut self,
        first: u64,
        count: usize,
        mut each: impl FnMut(u64, &[u8; PAGE_SIZE]) -> Result<(), PackError>,
    ) -> Result<(), PackError> {
        if first >= self.header.pages {
            return Err(PackError::Page {
                page: first,
                offset: 0,
                what: format!("there is no such page (the file has {})", self.header.pages),
            });
        }
        let last = (first + count.clamp(1, MAX_RUN) as u64).min(self.header.pages);
        let run = &self.entries[first as usize..last as usize];
        // The run's stored bytes: from its first stored page to its last.
        let mut stored = run.iter().filter(|e| e.kind != Kind::Zero);
        let (first_stored, last_stored) = (stored.next(), stored.next_back());
        let (mut at, mut got) = (0, 0);
        if let Some(a) = first_stored {
            let b = last_stored.unwrap_or(a);
            let started = Instant::now();
            let (from, to) = (a.offset, b.offset + b.stored as u64);
            let (from, to) = if self.options.direct {
                (from / BLOCK * BLOCK, to.next_multiple_of(BLOCK))
            } else {
                (from, to)
            };
            let len = (to - from) as usize;
            // O_DIRECT reads whole blocks: one read, short only at the end
            // of the file (a second read there would start unaligned).
            let read = if self.options.direct {
                self.file.read_at(&mut self.buf[..len], from)
            } else {
                read_fully(&self.file, &mut self.buf[..len], from)
            };
            got = read.map_err(|e| PackError::Page {
                page: first,
                offset: a.offset,
                what: format!("cannot read {}: {e}", self.path.display()),
            })?;
            at = from;
            self.stats.reads += 1;
            self.stats.bytes_read += got as u64;
            let transfer = (got as u64 * 1_000_000_000)
                .checked_div(self.options.bandwidth)
                .unwrap_or(0);
            let emulated = self.options.latency + Duration::from_nanos(transfer);
            ccvm_runtime::delay::wait(emulated.saturating_sub(started.elapsed()));
            self.stats.read_ns += started.elapsed().as_nanos() as u64;
        }
        let mut page = [0u8; PAGE_SIZE];
        for (i, entry) in run.iter().enumerate() {
            let p = first + i as u64;
            let decoding = Instant::now();
            let bad = |what: String| PackError::Page {
                page: p,
                offset: entry.offset,
                what,
            };
            self.stats.pages += 1;
            if entry.kind == Kind::Zero {
                self.stats.zero += 1;
                page.fill(0);
            } else {
                let skip = (entry.offset - at) as usize;
                let Some(bytes) = self.buf[..got].get(skip..skip + entry.stored as usize) else {
                    return Err(bad(format!("the file ends before the page's {} bytes", entry.stored)));
                };
                match entry.kind {
                    Kind::Raw => page.copy_from_slice(bytes),
                    _ => self
                        .codec
                        .decompress(bytes, &mut page)
                        .map_err(|e| bad(format!("{} page does not decode: {e}", self.header.codec)))?,
                }
            }
            if crc32fast::hash(&page) != entry.crc {
                return Err(bad("the page's CRC does not match: the file is damaged".into()));
            }
            self.stats.decode_ns += decoding.elapsed().as_nanos() as u64;
            each(p, &page)?;
        }
        Ok(())
    }

    /// Reads every page, checking each; the first damaged page's error.
    ///
    /// # Errors
    ///
    /// As [`Packed::read_page`].
    pub fn verify(&mut self) -> Result<(), PackError> {
        (0..self.header.pages)
            .step_by(MAX_RUN)
            .try_for_each(|p| self.read_run(p, MAX_RUN, |_, _| Ok(())))
    }
}

/// Reads into `buf` from `at` until it is full or the file ends; the
/// bytes read.
fn read_fully(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

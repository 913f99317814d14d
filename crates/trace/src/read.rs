//! Reading traces, treating the file as untrusted.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::{Footer, Header, MAGIC, PAGE_SIZE, VERSION};

/// A trace that cannot be read: the file, where, and what is wrong, on
/// one line.
#[derive(Debug, Error)]
#[error("{}: {where_}: {what}", path.display())]
pub struct TraceError {
    /// The trace file.
    pub path: PathBuf,
    /// "header" or "record offset N".
    pub where_: String,
    /// What is wrong, and what to do when it is not obvious.
    pub what: String,
}

/// One thing a trace records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A reference at logical `time` (0, 1, 2, ...).
    Reference {
        /// Page number in the region.
        page: u64,
        /// A write.
        write: bool,
        /// References before this one.
        time: u64,
    },
    /// A page image seen for the first time; later [`Event::Image`]s name
    /// it by `id`.
    NewImage {
        /// Image number.
        id: u64,
        /// The 4096 bytes.
        bytes: Box<[u8]>,
    },
    /// `page` was compressed with content `id`.
    Image {
        /// Page number.
        page: u64,
        /// Image number.
        id: u64,
    },
    /// The program dropped `pages` pages from `page` on: they read as
    /// zeros, and hold nothing, until touched again.
    Discard {
        /// First page.
        page: u64,
        /// Pages dropped.
        pages: u64,
    },
}

type Stream = BufReader<zstd::stream::Decoder<'static, BufReader<Box<dyn Read>>>>;

/// Reads a trace file. See the [crate docs](crate) for the format.
pub struct TraceReader {
    path: PathBuf,
    header: Header,
    stream: Stream,
    offset: u64,
    time: u64,
    images: u64,
    footer: Option<Footer>,
    /// The file's format version (1 has no 'D' records).
    version: u32,
}

impl TraceReader {
    /// Opens `path` and reads its header.
    ///
    /// # Errors
    ///
    /// A [`TraceError`] if the file cannot be opened or is not a ccvm trace
    /// of this version.
    pub fn open(path: &Path) -> Result<TraceReader, TraceError> {
        let fail = |what: String| TraceError {
            path: path.to_owned(),
            where_: "header".into(),
            what,
        };
        let file = File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
        let meta = file.metadata().map_err(|e| fail(format!("cannot open: {e}")))?;
        if meta.is_dir() {
            return Err(fail("is a folder, not a trace; name a trace file in it".into()));
        }
        if !meta.is_file() {
            // A simulation reads its trace twice (references, then images).
            return Err(fail(
                "is not a regular file (a pipe or a device): traces are read more than once; save it to a file first"
                    .into(),
            ));
        }
        Self::from_reader(Box::new(file), path)
    }

    /// Reads a trace from any byte source; `path` names it in errors.
    ///
    /// # Errors
    ///
    /// As [`TraceReader::open`].
    pub fn from_reader(source: Box<dyn Read>, path: &Path) -> Result<TraceReader, TraceError> {
        let fail = |what: String| TraceError {
            path: path.to_owned(),
            where_: "header".into(),
            what,
        };
        let mut file = BufReader::new(source);
        let mut fixed = [0u8; 16];
        file.read_exact(&mut fixed)
            .map_err(|_| fail("too short to be a ccvm trace".into()))?;
        if &fixed[..8] != MAGIC {
            return Err(fail("not a ccvm trace (bad magic); make one with `ccvm trace`".into()));
        }
        let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
        if version != VERSION && version != 1 {
            return Err(fail(format!(
                "format version {version}; this ccvm reads versions 1 and {VERSION}"
            )));
        }
        let len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
        if len > 1 << 20 {
            return Err(fail(format!(
                "header of {len} bytes is implausible; the file is corrupt"
            )));
        }
        let mut json = vec![0; len];
        file.read_exact(&mut json)
            .map_err(|_| fail("truncated header".into()))?;
        let header: Header = serde_json::from_slice(&json).map_err(|e| fail(format!("bad header: {e}")))?;
        let decoder = zstd::stream::Decoder::with_buffer(file).map_err(|e| fail(format!("zstd: {e}")))?;
        Ok(TraceReader {
            path: path.to_owned(),
            header,
            stream: BufReader::with_capacity(1 << 16, decoder),
            offset: 0,
            time: 0,
            images: 0,
            footer: None,
            version,
        })
    }

    /// What was traced.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The end record, once [`next_event`](Self::next_event) has returned
    /// `None`.
    pub fn footer(&self) -> Option<Footer> {
        self.footer
    }

    fn error(&self, at: u64, what: impl Into<String>) -> TraceError {
        TraceError {
            path: self.path.clone(),
            where_: format!("record offset {at}"),
            what: what.into(),
        }
    }

    fn io_error(&self, at: u64, e: io::Error) -> TraceError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            self.error(at, "truncated: the trace ends before its end record")
        } else {
            self.error(at, format!("corrupt record stream ({e})"))
        }
    }

    fn byte(&mut self, at: u64) -> Result<u8, TraceError> {
        let mut b = [0u8];
        self.stream.read_exact(&mut b).map_err(|e| self.io_error(at, e))?;
        self.offset += 1;
        Ok(b[0])
    }

    fn varint(&mut self, at: u64) -> Result<u64, TraceError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(at)?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(at, "a number longer than 64 bits"))
    }

    /// The next event, or `None` after the end record.
    ///
    /// # Errors
    ///
    /// A [`TraceError`] naming the file and the record offset when the
    /// stream is truncated, corrupt, or inconsistent with its end record.
    pub fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        if self.footer.is_some() {
            return Ok(None);
        }
        let at = self.offset;
        let tag = self.byte(at)?;
        let event = match tag {
            b'R' => {
                let v = self.varint(at)?;
                let time = self.time;
                self.time += 1;
                Event::Reference {
                    page: v >> 1,
                    write: v & 1 == 1,
                    time,
                }
            }
            b'N' => {
                let id = self.varint(at)?;
                if id != self.images {
                    return Err(self.error(at, format!("image {id} out of order (expected {})", self.images)));
                }
                let mut bytes = vec![0u8; PAGE_SIZE].into_boxed_slice();
                self.stream.read_exact(&mut bytes).map_err(|e| self.io_error(at, e))?;
                self.offset += PAGE_SIZE as u64;
                self.images += 1;
                Event::NewImage { id, bytes }
            }
            b'I' => {
                let page = self.varint(at)?;
                let id = self.varint(at)?;
                if id >= self.images {
                    return Err(self.error(at, format!("image {id} used before it is stored")));
                }
                Event::Image { page, id }
            }
            b'D' if self.version >= 2 => {
                let page = self.varint(at)?;
                let pages = self.varint(at)?;
                if page.checked_add(pages).is_none() {
                    return Err(self.error(at, format!("dropped range of {pages} pages from page {page} overflows")));
                }
                Event::Discard { page, pages }
            }
            b'E' => {
                let footer = Footer {
                    run_time_ns: self.varint(at)?,
                    references: self.varint(at)?,
                    images: self.varint(at)?,
                };
                if footer.references != self.time || footer.images != self.images {
                    return Err(self.error(
                        at,
                        format!(
                            "end record counts {} references and {} images, the stream holds {} and {}",
                            footer.references, footer.images, self.time, self.images
                        ),
                    ));
                }
                let more = match self.stream.fill_buf() {
                    Ok(rest) => !rest.is_empty(),
                    Err(e) => return Err(self.io_error(at, e)),
                };
                if more {
                    return Err(self.error(self.offset, "bytes after the end record"));
                }
                self.footer = Some(footer);
                return Ok(None);
            }
            other => return Err(self.error(at, format!("unknown record type 0x{other:02x}"))),
        };
        Ok(Some(event))
    }
}

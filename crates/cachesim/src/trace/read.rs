//! Reading line traces, treating the bytes as untrusted.

use std::collections::HashMap;
use std::io::{self, Read};

use thiserror::Error;

use super::{Header, MAGIC, MAX_BLOCK, MAX_HEADER, MAX_LINE, VERSION};
use crate::LINE;

/// A trace that cannot be read: which, where, and what is wrong, on one
/// line.
#[derive(Debug, Error)]
#[error("{name}: {where_}: {what}")]
pub struct TraceError {
    /// The trace's name (its path).
    pub name: String,
    /// "header", or "block N" (from 0) and the offset in its records.
    pub where_: String,
    /// What is wrong.
    pub what: String,
}

/// One thing a trace records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A data reference.
    Reference {
        /// Line number (byte address / 64).
        line: u64,
        /// A write.
        write: bool,
        /// Instructions since the previous reference.
        instructions: u64,
    },
    /// `line` holds image `image` of [`LineTrace::images`] from now on.
    Contents {
        /// Line number.
        line: u64,
        /// Index into [`LineTrace::images`].
        image: u32,
    },
}

// Events pack into words: the top two bits say what a word is.
const READ: u64 = 0;
const WRITE: u64 = 1;
const CONTENTS: u64 = 2; // the next word is the image index
const INSTRUCTIONS: u64 = 3; // instructions alone, in the low 62 bits
const LINE_BITS: u32 = 41;
const GAP_BITS: u32 = 21;

/// A whole line trace in memory: events packed one word each (contents
/// two), and the distinct line images.
pub struct LineTrace {
    header: Header,
    words: Vec<u64>,
    images: Vec<[u8; LINE]>,
    references: u64,
    instructions: u64,
}

impl std::fmt::Debug for LineTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTrace")
            .field("header", &self.header)
            .field("references", &self.references)
            .field("instructions", &self.instructions)
            .field("images", &self.images.len())
            .finish()
    }
}

impl LineTrace {
    /// Reads a trace from `input`; `name` is used in errors.
    ///
    /// # Errors
    ///
    /// I/O errors, and anything malformed: bad magic or version, a
    /// header, block or record that breaks the format, a CRC that does not
    /// match, a missing end record or bytes after it, totals that differ
    /// from the records.
    pub fn read(mut input: impl Read, name: &str) -> Result<LineTrace, TraceError> {
        let errors = Errors { name };
        let header = read_header(&mut input, errors)?;
        let mut load = Loader {
            trace: LineTrace {
                header,
                words: Vec::new(),
                images: Vec::new(),
                references: 0,
                instructions: 0,
            },
            seen: HashMap::new(),
            contents: 0,
            previous: 0,
        };
        let mut blocks = Blocks {
            raw: vec![0u8; MAX_BLOCK],
            frame: Vec::new(),
            zstd: zstd::bulk::Decompressor::new().map_err(|e| errors.at("header", e.to_string()))?,
        };
        for block in 0u64.. {
            let here = format!("block {block}");
            let len = blocks.read(&mut input, errors, &here)?;
            let mut r = Records {
                bytes: &blocks.raw[..len],
                at: 0,
            };
            while r.at < len {
                let at = r.at;
                let bad = |what: String| errors.at(format!("block {block} offset {at}"), what);
                match r.byte().ok_or_else(|| bad("empty record".into()))? {
                    tag @ (b'R' | b'W') => load.reference(tag == b'W', &mut r).map_err(bad)?,
                    b'C' => load.contents(&mut r).map_err(bad)?,
                    b'E' => {
                        load.end(&mut r).map_err(bad)?;
                        if r.at != len {
                            return Err(bad("records after the end record".into()));
                        }
                        let mut more = [0u8; 1];
                        return match input.read(&mut more) {
                            Ok(0) => Ok(load.trace),
                            Ok(_) => Err(bad("bytes after the end record".into())),
                            Err(e) => Err(errors.io(&here, e)),
                        };
                    }
                    other => return Err(bad(format!("unknown record type {other:#04x}"))),
                }
            }
        }
        unreachable!("the block loop only ends by returning")
    }

    /// Reads the trace file at `path`.
    ///
    /// # Errors
    ///
    /// As [`LineTrace::read`], or the file cannot be opened.
    pub fn open(path: &std::path::Path) -> Result<LineTrace, TraceError> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| TraceError {
            name: name.clone(),
            where_: "open".into(),
            what: e.to_string(),
        })?;
        LineTrace::read(io::BufReader::with_capacity(1 << 20, file), &name)
    }

    /// What was traced.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Reference records.
    pub fn references(&self) -> u64 {
        self.references
    }

    /// Instructions in all.
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// The distinct line images, in order of first appearance.
    pub fn images(&self) -> &[[u8; LINE]] {
        &self.images
    }

    /// Bytes each image compresses to under `codec` (64 where it does not
    /// shrink), one entry per image.
    pub fn sizes(&self, codec: &mut dyn ccvm_codec::Codec) -> Vec<u8> {
        let mut out = [0u8; LINE];
        self.images
            .iter()
            .map(|l| codec.compress(l, &mut out).map_or(LINE, |n| n.min(LINE)) as u8)
            .collect()
    }

    /// The events in order.
    pub fn events(&self) -> Events<'_> {
        Events {
            words: &self.words,
            at: 0,
            pending: 0,
        }
    }
}

/// The events of a [`LineTrace`], in order.
pub struct Events<'a> {
    words: &'a [u64],
    at: usize,
    pending: u64,
}

impl Iterator for Events<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        loop {
            let w = *self.words.get(self.at)?;
            self.at += 1;
            let line = w & ((1 << LINE_BITS) - 1);
            match w >> 62 {
                CONTENTS => {
                    let image = self.words[self.at] as u32;
                    self.at += 1;
                    return Some(Event::Contents { line, image });
                }
                INSTRUCTIONS => self.pending += w & ((1 << 62) - 1),
                kind => {
                    let gap = (w >> LINE_BITS) & ((1 << GAP_BITS) - 1);
                    let instructions = gap + std::mem::take(&mut self.pending);
                    return Some(Event::Reference {
                        line,
                        write: kind == WRITE,
                        instructions,
                    });
                }
            }
        }
    }
}

/// Makes the errors of the trace named `name`.
#[derive(Clone, Copy)]
struct Errors<'a> {
    name: &'a str,
}

impl Errors<'_> {
    fn at(self, where_: impl Into<String>, what: impl Into<String>) -> TraceError {
        TraceError {
            name: self.name.to_string(),
            where_: where_.into(),
            what: what.into(),
        }
    }

    fn io(self, where_: &str, e: io::Error) -> TraceError {
        let what = if e.kind() == io::ErrorKind::UnexpectedEof {
            "the file ends early: truncated? record it again".to_string()
        } else {
            e.to_string()
        };
        self.at(where_, what)
    }
}

/// Reads and checks the fixed header and its JSON.
fn read_header(input: &mut impl Read, errors: Errors<'_>) -> Result<Header, TraceError> {
    let mut fixed = [0u8; 16];
    input.read_exact(&mut fixed).map_err(|e| errors.io("header", e))?;
    if &fixed[..8] != MAGIC {
        return Err(errors.at("header", "not a ccvm line trace (bad magic)"));
    }
    let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(errors.at("header", format!("format version {version}; this ccvm reads {VERSION}")));
    }
    let hlen = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
    if hlen > MAX_HEADER {
        return Err(errors.at("header", format!("header of {hlen} bytes (at most {MAX_HEADER})")));
    }
    let mut json = vec![0u8; hlen];
    input.read_exact(&mut json).map_err(|e| errors.io("header", e))?;
    serde_json::from_slice(&json).map_err(|e| errors.at("header", format!("bad header: {e}")))
}

/// Reads blocks: each a length, a compressed length and a CRC, then its
/// zstd frame.
struct Blocks {
    /// The last block's records.
    raw: Vec<u8>,
    frame: Vec<u8>,
    zstd: zstd::bulk::Decompressor<'static>,
}

impl Blocks {
    /// Reads the next block into `raw`, checked; returns its length.
    fn read(&mut self, input: &mut impl Read, errors: Errors<'_>, here: &str) -> Result<usize, TraceError> {
        let mut head = [0u8; 12];
        input.read_exact(&mut head).map_err(|e| errors.io(here, e))?;
        let word = |i: usize| u32::from_le_bytes(head[i..i + 4].try_into().expect("4 bytes")) as usize;
        let (len, zlen, crc) = (word(0), word(4), word(8) as u32);
        if len == 0 || len > MAX_BLOCK || zlen > 2 * MAX_BLOCK {
            return Err(errors.at(
                here,
                format!("block of {len} bytes ({zlen} compressed) is out of range"),
            ));
        }
        self.frame.resize(zlen, 0);
        input.read_exact(&mut self.frame).map_err(|e| errors.io(here, e))?;
        let n = self
            .zstd
            .decompress_to_buffer(&self.frame, &mut self.raw[..len])
            .map_err(|e| errors.at(here, format!("damaged: {e}")))?;
        if n != len || crc32fast::hash(&self.raw[..len]) != crc {
            return Err(errors.at(here, "damaged: its records do not match their CRC"));
        }
        Ok(len)
    }
}

/// A trace being built from its records; each method reads one record
/// (after its tag) and says what is wrong with it, if anything.
struct Loader {
    trace: LineTrace,
    /// Each distinct line image's index.
    seen: HashMap<[u8; LINE], u32>,
    contents: u64,
    /// The line of the last reference (references are delta-coded).
    previous: u64,
}

impl Loader {
    fn reference(&mut self, write: bool, r: &mut Records<'_>) -> Result<(), String> {
        let z = r.varint().ok_or("reference cut short")?;
        let gap = r.varint().ok_or("reference cut short")?;
        let delta = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let line = self.previous.wrapping_add(delta as u64);
        if line >= MAX_LINE {
            return Err("a reference beyond 47-bit addresses".into());
        }
        let trace = &mut self.trace;
        trace.instructions = trace
            .instructions
            .checked_add(gap)
            .ok_or("instruction count overflows")?;
        if gap >= 1 << GAP_BITS {
            trace.words.push(INSTRUCTIONS << 62 | gap.min((1 << 62) - 1));
        }
        let packed_gap = if gap >= 1 << GAP_BITS { 0 } else { gap };
        let kind = if write { WRITE } else { READ };
        trace.words.push(kind << 62 | packed_gap << LINE_BITS | line);
        trace.references += 1;
        self.previous = line;
        Ok(())
    }

    fn contents(&mut self, r: &mut Records<'_>) -> Result<(), String> {
        let line = r.varint().ok_or("contents cut short")?;
        if line >= MAX_LINE {
            return Err("contents beyond 47-bit addresses".into());
        }
        let bytes: [u8; LINE] = r.take(LINE).ok_or("contents cut short")?.try_into().expect("64");
        let next = self.trace.images.len() as u32;
        let image = *self.seen.entry(bytes).or_insert(next);
        if image == next {
            self.trace.images.push(bytes);
        }
        self.trace.words.push(CONTENTS << 62 | line);
        self.trace.words.push(image as u64);
        self.contents += 1;
        Ok(())
    }

    /// The end record: its totals must be what the records held.
    fn end(&mut self, r: &mut Records<'_>) -> Result<(), String> {
        let mut total = || r.varint().ok_or("end record cut short");
        let (refs, instr, cont) = (total()?, total()?, total()?);
        let t = &self.trace;
        if (refs, instr, cont) != (t.references, t.instructions, self.contents) {
            return Err(format!(
                "the end record counts {refs} references, {instr} instructions, {cont} contents; \
                 the records hold {}, {}, {}",
                t.references, t.instructions, self.contents
            ));
        }
        Ok(())
    }
}

struct Records<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Records<'a> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
}

//! Writing line traces.

use std::io::{self, Write};

use super::{Header, MAGIC, MAX_BLOCK, MAX_LINE, VERSION};
use crate::LINE;

/// Blocks are cut at this many bytes of records (well under [`MAX_BLOCK`]
/// so that one more record always fits).
const BLOCK_TARGET: usize = 256 << 10;

/// What a trace holds, counted as it is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Reference records.
    pub references: u64,
    /// Instructions counted between them.
    pub instructions: u64,
    /// Contents records.
    pub contents: u64,
}

/// Writes a line trace to any `Write`; see the [module docs](super) for
/// the format. [`LineTraceWriter::finish`] must be called: a trace without
/// its end record does not read.
///
/// ```
/// use ccvm_cachesim::trace::{Header, LineTrace, LineTraceWriter};
/// let header = Header { program: "demo".into(), args: vec![], method: "by hand".into() };
/// let mut w = LineTraceWriter::new(Vec::new(), &header).unwrap();
/// w.contents(5, &[7; 64]).unwrap();
/// w.reference(5, false, 3).unwrap();
/// let bytes = w.finish().unwrap();
/// let t = LineTrace::read(&bytes[..], "demo").unwrap();
/// assert_eq!((t.references(), t.instructions(), t.images().len()), (1, 3, 1));
/// ```
pub struct LineTraceWriter<W: Write> {
    out: W,
    raw: Vec<u8>,
    previous: u64,
    totals: Totals,
    zstd: zstd::bulk::Compressor<'static>,
}

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

impl<W: Write> LineTraceWriter<W> {
    /// Starts a trace: writes the magic, version and header.
    ///
    /// # Errors
    ///
    /// The writer's error.
    pub fn new(mut out: W, header: &Header) -> io::Result<Self> {
        let json = serde_json::to_vec(header).map_err(io::Error::other)?;
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&json)?;
        Ok(LineTraceWriter {
            out,
            raw: Vec::with_capacity(BLOCK_TARGET + 1024),
            previous: 0,
            totals: Totals::default(),
            zstd: zstd::bulk::Compressor::new(3)?,
        })
    }

    /// A read or write of `line` (byte address / 64), after `instructions`
    /// instructions since the previous reference.
    ///
    /// # Errors
    ///
    /// The writer's error, or a line at or above [`super::MAX_LINE`].
    pub fn reference(&mut self, line: u64, write: bool, instructions: u64) -> io::Result<()> {
        check_line(line)?;
        self.raw.push(if write { b'W' } else { b'R' });
        let delta = line.wrapping_sub(self.previous) as i64;
        varint(&mut self.raw, ((delta << 1) ^ (delta >> 63)) as u64);
        varint(&mut self.raw, instructions);
        self.previous = line;
        self.totals.references += 1;
        self.totals.instructions += instructions;
        self.maybe_flush()
    }

    /// `line` holds `bytes` from now on.
    ///
    /// # Errors
    ///
    /// As [`LineTraceWriter::reference`].
    pub fn contents(&mut self, line: u64, bytes: &[u8; LINE]) -> io::Result<()> {
        check_line(line)?;
        self.raw.push(b'C');
        varint(&mut self.raw, line);
        self.raw.extend_from_slice(bytes);
        self.totals.contents += 1;
        self.maybe_flush()
    }

    /// What has been written so far.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.raw.len() >= BLOCK_TARGET {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> io::Result<()> {
        debug_assert!(self.raw.len() <= MAX_BLOCK);
        if self.raw.is_empty() {
            return Ok(());
        }
        let frame = self.zstd.compress(&self.raw)?;
        self.out.write_all(&(self.raw.len() as u32).to_le_bytes())?;
        self.out.write_all(&(frame.len() as u32).to_le_bytes())?;
        self.out.write_all(&crc32fast::hash(&self.raw).to_le_bytes())?;
        self.out.write_all(&frame)?;
        self.raw.clear();
        Ok(())
    }

    /// Writes the end record and the last block; returns the writer.
    ///
    /// # Errors
    ///
    /// The writer's error.
    pub fn finish(mut self) -> io::Result<W> {
        let t = self.totals;
        self.raw.push(b'E');
        varint(&mut self.raw, t.references);
        varint(&mut self.raw, t.instructions);
        varint(&mut self.raw, t.contents);
        self.flush_block()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn check_line(line: u64) -> io::Result<()> {
    if line >= MAX_LINE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("line {line:#x} is beyond the format's 47-bit addresses"),
        ));
    }
    Ok(())
}

//! Writing traces.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::{Footer, Header, MAGIC, PAGE_SIZE, VERSION};

/// Writes a trace file. See the [crate docs](crate) for the format.
///
/// ```
/// use ccvm_trace::{Event, Header, TraceReader, TraceWriter};
/// let path = std::env::temp_dir().join(format!("doc-{}.trace", std::process::id()));
/// let header = Header { workload: "demo".into(), seed: 1, region_bytes: 8192, window_pages: 1 };
/// let mut w = TraceWriter::create(&path, &header)?;
/// w.reference(0, true)?;
/// w.image(0, &[7; 4096])?;
/// w.finish(1_000)?;
/// let mut r = TraceReader::open(&path)?;
/// assert_eq!(r.next_event()?, Some(Event::Reference { page: 0, write: true, time: 0 }));
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TraceWriter {
    out: zstd::stream::Encoder<'static, BufWriter<ccvm_output::OutputFile>>,
    seen: HashMap<u128, u64>,
    references: u64,
    scratch: Vec<u8>,
}

impl TraceWriter {
    /// Starts a trace for `path` and writes the header. Nothing replaces
    /// `path` until [`finish`](Self::finish): a trace that is dropped
    /// unfinished (a failed or interrupted run) leaves the previous file as
    /// it was (see `ccvm_output`; a link at `path` is refused).
    ///
    /// # Errors
    ///
    /// Any I/O error, or a target ccvm does not write to.
    pub fn create(path: &Path, header: &Header) -> io::Result<TraceWriter> {
        let mut file = BufWriter::new(ccvm_output::OutputFile::create(path)?);
        let json = serde_json::to_vec(header).map_err(io::Error::other)?;
        file.write_all(MAGIC)?;
        file.write_all(&VERSION.to_le_bytes())?;
        file.write_all(&(json.len() as u32).to_le_bytes())?;
        file.write_all(&json)?;
        let mut out = zstd::stream::Encoder::new(file, 3)?;
        out.include_checksum(true)?;
        Ok(TraceWriter {
            out,
            seen: HashMap::new(),
            references: 0,
            scratch: Vec::with_capacity(32),
        })
    }

    fn record(&mut self, tag: u8, values: &[u64]) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.push(tag);
        for &v in values {
            leb128::write::unsigned(&mut self.scratch, v)?;
        }
        self.out.write_all(&self.scratch)
    }

    /// Records a reference to `page` (a write if `write`).
    ///
    /// # Errors
    ///
    /// Any I/O error.
    pub fn reference(&mut self, page: u64, write: bool) -> io::Result<()> {
        self.references += 1;
        self.record(b'R', &[page << 1 | write as u64])
    }

    /// Records that `page` was compressed with content `image` (4096 bytes).
    ///
    /// # Errors
    ///
    /// Any I/O error.
    ///
    /// # Panics
    ///
    /// If `image` is not 4096 bytes.
    pub fn image(&mut self, page: u64, image: &[u8]) -> io::Result<()> {
        assert_eq!(image.len(), PAGE_SIZE, "a page image is {PAGE_SIZE} bytes");
        let hash = xxhash_rust::xxh3::xxh3_128(image);
        let next = self.seen.len() as u64;
        let id = *self.seen.entry(hash).or_insert(next);
        if id == next {
            self.record(b'N', &[id])?;
            self.out.write_all(image)?;
        }
        self.record(b'I', &[page, id])
    }

    /// Records that the program dropped `pages` pages from `page` on
    /// (`MADV_DONTNEED`, a freed block given back).
    ///
    /// # Errors
    ///
    /// Any I/O error.
    pub fn discard(&mut self, page: u64, pages: u64) -> io::Result<()> {
        self.record(b'D', &[page, pages])
    }

    /// Writes the end record with the workload's run time, closes the
    /// file and puts it in place.
    ///
    /// # Errors
    ///
    /// Any I/O error.
    pub fn finish(mut self, run_time_ns: u64) -> io::Result<Footer> {
        let footer = Footer {
            run_time_ns,
            references: self.references,
            images: self.seen.len() as u64,
        };
        self.record(b'E', &[footer.run_time_ns, footer.references, footer.images])?;
        self.out.finish()?.into_inner().map_err(|e| e.into_error())?.commit()?;
        Ok(footer)
    }
}

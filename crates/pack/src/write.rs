//! Packing: a file, page by page, into the `.ccz` format.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use ccvm_codec::{Codec, PAGE_SIZE};

use crate::format::{data_start, Entry, Header, Kind, CODEC_NAME_BYTES, ENTRY_BYTES};
use crate::PackError;

/// What packing a file did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackSummary {
    /// The original file's length.
    pub file_len: u64,
    /// The `.ccz` file's length, header and index included.
    pub packed_len: u64,
    /// Pages of each kind: zero, raw, compressed.
    pub zero: u64,
    /// Pages stored as they are (compression did not shrink them).
    pub raw: u64,
    /// Pages stored compressed.
    pub compressed: u64,
}

impl PackSummary {
    /// Original bytes per packed byte.
    pub fn ratio(&self) -> f64 {
        self.file_len as f64 / self.packed_len.max(1) as f64
    }
}

/// Packs `len` bytes read from `input` into `out` with `codec`.
///
/// # Errors
///
/// [`PackError::Io`] when reading or writing fails or `input` ends
/// before `len` bytes; [`PackError::Header`] for a codec name longer than
/// the header holds.
///
/// ```
/// use std::io::Cursor;
/// let data = b"some file contents ".repeat(500);
/// let mut out = Cursor::new(Vec::new());
/// let mut codec = ccvm_codec::by_name("exepack2").unwrap();
/// let summary = ccvm_pack::pack(&data[..], data.len() as u64, &mut out, codec.as_mut()).unwrap();
/// assert!(summary.packed_len < data.len() as u64);
/// ```
pub fn pack<W: Write + Seek>(
    mut input: impl Read,
    len: u64,
    out: &mut W,
    codec: &mut dyn Codec,
) -> Result<PackSummary, PackError> {
    let name = codec.name();
    if name.len() > CODEC_NAME_BYTES {
        return Err(PackError::Header(format!(
            "codec name '{name}' is longer than {CODEC_NAME_BYTES} bytes"
        )));
    }
    let io = |what: &'static str| move |e: std::io::Error| PackError::Io(format!("{what}: {e}"));
    let pages = len.div_ceil(PAGE_SIZE as u64);
    let start = data_start(pages);
    out.seek(SeekFrom::Start(start)).map_err(io("seeking past the index"))?;
    let mut w = BufWriter::with_capacity(1 << 20, &mut *out);
    let mut index = Vec::with_capacity(pages as usize * ENTRY_BYTES);
    let mut summary = PackSummary {
        file_len: len,
        ..PackSummary::default()
    };
    let mut page = [0u8; PAGE_SIZE];
    let mut packed = [0u8; PAGE_SIZE];
    let mut at = start;
    for p in 0..pages {
        let take = (len - p * PAGE_SIZE as u64).min(PAGE_SIZE as u64) as usize;
        page[take..].fill(0);
        input.read_exact(&mut page[..take]).map_err(io("reading the input"))?;
        let crc = crc32fast::hash(&page);
        let entry = if page.iter().all(|&b| b == 0) {
            summary.zero += 1;
            Entry {
                offset: 0,
                stored: 0,
                kind: Kind::Zero,
                crc,
            }
        } else {
            // A codec that cannot fit the page in less than a page says so;
            // the page is then stored raw.
            let (kind, bytes) = match codec.compress(&page, &mut packed[..PAGE_SIZE - 1]) {
                Ok(n) => (Kind::Compressed, &packed[..n]),
                Err(_) => (Kind::Raw, &page[..]),
            };
            w.write_all(bytes).map_err(io("writing the packed file"))?;
            let entry = Entry {
                offset: at,
                stored: bytes.len() as u16,
                kind,
                crc,
            };
            at += bytes.len() as u64;
            match kind {
                Kind::Raw => summary.raw += 1,
                _ => summary.compressed += 1,
            }
            entry
        };
        index.extend_from_slice(&entry.encode());
    }
    w.flush().map_err(io("writing the packed file"))?;
    drop(w);
    let header = Header {
        file_len: len,
        pages,
        codec: name.to_string(),
        index_crc: crc32fast::hash(&index),
    };
    out.seek(SeekFrom::Start(0)).map_err(io("seeking to the header"))?;
    out.write_all(&header.encode()).map_err(io("writing the header"))?;
    out.write_all(&index).map_err(io("writing the index"))?;
    out.flush().map_err(io("writing the packed file"))?;
    summary.packed_len = at;
    Ok(summary)
}

/// Packs the file at `src` into `dst` with `codec`, through a new file
/// beside `dst` renamed into place (see `ccvm_output`), so a failed pack
/// leaves no half-written `dst`, two packs to one `dst` leave one of them
/// whole, and a link at `dst` is refused. `src` and `dst` must be different
/// files, and `src` a regular file.
///
/// # Errors
///
/// [`PackError::Io`] naming the file that could not be read or written, or
/// why it cannot be packed.
pub fn pack_file(src: &Path, dst: &Path, codec: &mut dyn Codec) -> Result<PackSummary, PackError> {
    use std::os::unix::fs::MetadataExt;
    let input = File::open(src).map_err(|e| PackError::Io(format!("cannot open {}: {e}", src.display())))?;
    let meta = input
        .metadata()
        .map_err(|e| PackError::Io(format!("cannot stat {}: {e}", src.display())))?;
    if !meta.is_file() {
        return Err(PackError::Io(format!(
            "{} is not a regular file: pack files, not devices, FIFOs or folders",
            src.display()
        )));
    }
    if let Ok(d) = std::fs::metadata(dst) {
        if (d.dev(), d.ino()) == (meta.dev(), meta.ino()) {
            return Err(PackError::Io(format!(
                "{} is the file being packed: write the packed file elsewhere",
                dst.display()
            )));
        }
    }
    let len = meta.len();
    if len == 0 && (&input).read(&mut [0u8]).map_or(true, |n| n > 0) {
        return Err(PackError::Io(format!(
            "{} says it is empty but has contents (a /proc or /sys file): copy it to a regular file first",
            src.display()
        )));
    }
    let io = |e: ccvm_output::OutputError| PackError::Io(e.to_string());
    let mut out = ccvm_output::OutputFile::create(dst).map_err(io)?;
    let summary = pack(std::io::BufReader::with_capacity(1 << 20, input), len, &mut out, codec)?;
    out.commit().map_err(io)?;
    Ok(summary)
}

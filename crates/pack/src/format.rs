//! The `.ccz` format: a header, a per-page index, then each page's bytes.
//!
//! ```text
//! header, 64 bytes, little-endian
//!    0  magic        b"CCVMPACK"
//!    8  version      u32 = 1
//!   12  page size    u32 = 4096
//!   16  file length  u64   the original file's length in bytes
//!   24  pages        u64   = ceil(file length / 4096)
//!   32  codec        [u8; 16], the codec's name, NUL-padded
//!   48  index CRC    u32   CRC-32 of the whole index
//!   52  reserved     [u8; 8], zero
//!   60  header CRC   u32   CRC-32 of bytes 0..60
//! index, 16 bytes per page, from byte 64
//!    0  offset       u64   where the page's stored bytes start (0 for a zero page)
//!    8  stored       u16   how many bytes are stored (0 for a zero page)
//!   10  kind         u8    0 zero, 1 raw, 2 compressed
//!   11  reserved     u8    zero
//!   12  page CRC     u32   CRC-32 of the page's 4096 original bytes
//! data: each page's stored bytes end to end, in page order, not aligned
//! ```
//!
//! Choices, after paper 004 §2.2–3.2, which keeps a page-type per page of
//! an executable (valid, iterated, compressed, zero-filled):
//!
//! * A page is stored in whichever of three forms is smallest: zero (all
//!   zeros, nothing stored, recreated on demand), compressed (when the
//!   codec's output is shorter than the page), else raw. A file's last
//!   page is zero-padded to 4096 bytes before it is coded.
//! * One index entry per page, so the loader finds a page with one
//!   multiplication and reads it with one system call; 16 bytes per page
//!   is 0.4% of the original.
//! * Pages are not aligned in the file: a page's load reads only the disk
//!   blocks its stored bytes cover, which is where the saving comes from;
//!   and they lie end to end in page order, so that a run of pages is
//!   one read (the loader's read-ahead).
//! * Every entry carries the CRC of the original page, checked after each
//!   decompression, so a damaged file is caught at the page that is
//!   damaged, however the damage passed the decoder.
//! * Everything read is untrusted: the header and index are checked when
//!   the file is opened (offsets inside the data, lengths in range, kinds
//!   known), and each error names the page and the file offset.

use crate::PackError;
use ccvm_codec::PAGE_SIZE;

/// The first 8 bytes of every `.ccz` file.
pub const MAGIC: &[u8; 8] = b"CCVMPACK";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 64;
/// Bytes of one index entry.
pub const ENTRY_BYTES: usize = 16;
/// Longest codec name the header holds.
pub const CODEC_NAME_BYTES: usize = 16;

/// How one page is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// All zeros: nothing stored.
    Zero = 0,
    /// The page's 4096 bytes as they are.
    Raw = 1,
    /// The page compressed with the file's codec.
    Compressed = 2,
}

/// The header's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The original file's length in bytes.
    pub file_len: u64,
    /// Pages in the file: `file_len` rounded up to whole pages.
    pub pages: u64,
    /// The codec of compressed pages.
    pub codec: String,
    /// CRC-32 of the index bytes.
    pub index_crc: u32,
}

/// One page's index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// File offset of the stored bytes (0 for a zero page).
    pub offset: u64,
    /// Stored bytes (0 for a zero page, 4096 for a raw one).
    pub stored: u16,
    /// How the page is stored.
    pub kind: Kind,
    /// CRC-32 of the page's original 4096 bytes.
    pub crc: u32,
}

impl Header {
    /// The header's 64 bytes.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.file_len.to_le_bytes());
        b[24..32].copy_from_slice(&self.pages.to_le_bytes());
        let name = self.codec.as_bytes();
        b[32..32 + name.len().min(CODEC_NAME_BYTES)].copy_from_slice(&name[..name.len().min(CODEC_NAME_BYTES)]);
        b[48..52].copy_from_slice(&self.index_crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and checks a header.
    ///
    /// # Errors
    ///
    /// [`PackError::Header`] saying what is wrong: not a `.ccz` file, a
    /// version or page size this build does not read, a damaged header, a
    /// page count that does not match the length.
    pub fn decode(b: &[u8]) -> Result<Header, PackError> {
        let bad = |what: &str| Err(PackError::Header(what.to_string()));
        if b.len() < HEADER_BYTES {
            return bad("the file is shorter than a .ccz header (64 bytes)");
        }
        if &b[0..8] != MAGIC {
            return bad("not a .ccz file (no CCVMPACK magic)");
        }
        if crc32fast::hash(&b[..60]) != u32_at(b, 60) {
            return bad("the header's CRC does not match: the file is damaged");
        }
        if u32_at(b, 8) != VERSION {
            return bad(&format!("format version {} (this build reads {VERSION})", u32_at(b, 8)));
        }
        if u32_at(b, 12) as usize != PAGE_SIZE {
            return bad(&format!("page size {} (this build reads {PAGE_SIZE})", u32_at(b, 12)));
        }
        let file_len = u64_at(b, 16);
        let pages = u64_at(b, 24);
        if pages != file_len.div_ceil(PAGE_SIZE as u64) {
            return bad(&format!("{pages} pages for a file of {file_len} bytes"));
        }
        let name = &b[32..48];
        let end = name.iter().position(|&c| c == 0).unwrap_or(CODEC_NAME_BYTES);
        let name = &name[..end];
        if name.is_empty()
            || !name
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return bad("the codec name is not a name (letters, digits, - and _)");
        }
        let codec = String::from_utf8_lossy(name);
        Ok(Header {
            file_len,
            pages,
            codec: codec.to_string(),
            index_crc: u32_at(b, 48),
        })
    }
}

impl Entry {
    /// The entry's 16 bytes.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut b = [0u8; ENTRY_BYTES];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..10].copy_from_slice(&self.stored.to_le_bytes());
        b[10] = self.kind as u8;
        b[12..16].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Reads and checks page `page`'s entry, `b` being its 16 bytes, for a
    /// file of `file_bytes` whose data starts at `data_start`.
    ///
    /// # Errors
    ///
    /// [`PackError::Page`] naming the page and the entry's file offset: an
    /// unknown kind, a stored length that does not fit the kind, or bytes
    /// outside the data.
    pub fn decode(page: u64, b: &[u8], data_start: u64, file_bytes: u64) -> Result<Entry, PackError> {
        let at = HEADER_BYTES as u64 + page * ENTRY_BYTES as u64;
        let bad = |what: String| Err(PackError::Page { page, offset: at, what });
        let offset = u64_at(b, 0);
        let stored = u16::from_le_bytes([b[8], b[9]]);
        let kind = match b[10] {
            0 => Kind::Zero,
            1 => Kind::Raw,
            2 => Kind::Compressed,
            k => return bad(format!("unknown page kind {k} in the index")),
        };
        let fits = match kind {
            Kind::Zero => stored == 0 && offset == 0,
            Kind::Raw => stored as usize == PAGE_SIZE,
            Kind::Compressed => stored > 0 && (stored as usize) < PAGE_SIZE,
        };
        if !fits || b[11] != 0 {
            return bad(format!("a {kind:?} page with {stored} stored bytes at offset {offset}"));
        }
        if kind != Kind::Zero && (offset < data_start || offset.saturating_add(stored as u64) > file_bytes) {
            return bad(format!(
                "its {stored} bytes at offset {offset} lie outside the data ({data_start}..{file_bytes})"
            ));
        }
        Ok(Entry {
            offset,
            stored,
            kind,
            crc: u32_at(b, 12),
        })
    }
}

/// Where the data starts in a file of `pages` pages.
pub fn data_start(pages: u64) -> u64 {
    HEADER_BYTES as u64 + pages * ENTRY_BYTES as u64
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

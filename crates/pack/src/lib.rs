//! Compressed demand paging from files, after OS/2's Exepack2 pages
//! (paper 004): a file stored page by page compressed, and mapped so that
//! each page is read and decompressed when first touched.
//!
//! The primary abstraction is [`Mapping`]: read-only memory holding a
//! `.ccz` file's original bytes, loaded page by page through userfaultfd
//! from a [`Packed`] file. [`pack`] and [`pack_file`] write the format
//! (documented in the [`format`](mod@format) module), with any of ccvm's codecs.
//!
//! # Design
//!
//! The key decision is one compressed block per 4 KiB page, found through
//! a fixed-size index: a page fault costs one read of only that page's
//! stored bytes and one decompression, whatever was touched before, which
//! is what makes compression pay on demand paging (fewer bytes from the
//! disk per fault) where whole-file compression would make a sparse
//! access read and decompress everything before the page it wants.
//!
//! ```no_run
//! use std::path::Path;
//! use ccvm_pack::{pack_file, Mapping, Packed, ReadOptions};
//!
//! let mut codec = ccvm_codec::by_name("exepack2").unwrap();
//! pack_file(Path::new("/usr/bin/ls"), Path::new("/tmp/ls.ccz"), codec.as_mut())?;
//! let packed = Packed::open(Path::new("/tmp/ls.ccz"), ReadOptions::default())?;
//! let mapping = Mapping::new(packed)?;
//! assert_eq!(&mapping.as_slice()[..4], b"\x7fELF");
//! # Ok::<(), ccvm_pack::PackError>(())
//! ```
#![deny(missing_docs)]

mod cold;
pub mod format;
mod map;
mod read;
mod write;

pub use cold::{disk_bytes_read, drop_from_page_cache, PlainMapping};
pub use map::Mapping;
pub use read::{Packed, ReadOptions, ReadStats};
pub use write::{pack, pack_file, PackSummary};

/// What went wrong with a `.ccz` file; each message is one line that says
/// what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    /// Reading or writing a file failed.
    #[error("{0}")]
    Io(String),
    /// The header or index as a whole is wrong.
    #[error("not a usable .ccz file: {0}")]
    Header(String),
    /// One page is wrong.
    #[error("page {page} (file offset {offset}): {what}")]
    Page {
        /// The page's number in the original file.
        page: u64,
        /// The file offset of what is wrong (the page's data, or its
        /// index entry).
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The file's codec is not one this build has.
    #[error("{0}")]
    Codec(String),
    /// The mapping could not be made.
    #[error("cannot map the file: {0}")]
    Map(String),
}

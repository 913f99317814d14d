//! ccvm's trace format: every page reference a run was seen to make, and
//! the content of each page whenever it was compressed, so a simulator can
//! replay the run with any policy, memory size and codec.
//!
//! The primary abstractions are [`TraceWriter`] and [`TraceReader`].
//!
//! # Format, version 2
//!
//! ```text
//! magic     8 bytes   "CCVMTRC\0"
//! version   u32 LE    2 (version 1, the same without 'D', is read too)
//! hlen      u32 LE    length of the header
//! header    hlen bytes of JSON: a `Header`
//! records   one zstd frame (with its checksum) holding records:
//!   'R' varint(page << 1 | write)       a reference; logical time is the
//!                                       number of 'R' records before it
//!   'N' varint(id) 4096 bytes           a page image not seen before;
//!                                       ids count up from 0
//!   'I' varint(page) varint(id)         page was compressed with image id
//!   'D' varint(page) varint(pages)      the program dropped pages
//!                                       page..page + pages (their
//!                                       contents are zeros from now on)
//!   'E' varint(run_time_ns) varint(references) varint(images)
//!                                       the end: nothing may follow
//! ```
//!
//! Varints are unsigned LEB128. Offsets in errors count bytes of the
//! decompressed record stream.
//!
//! # Design
//!
//! Images are deduplicated by content (a 128-bit XXH3 hash), because a
//! page compressed again unchanged is the common case, and stored whole in
//! the compressed stream; compression sizes and codec times are computed
//! later by the simulator, once per image and codec, rather than fixed at
//! trace time. The end record carries the workload's own run time, which
//! the simulator needs to find where paging dominates; a trace without it
//! is truncated.
#![deny(missing_docs)]

mod read;
mod write;

pub use read::{Event, TraceError, TraceReader};
pub use write::TraceWriter;

use serde::{Deserialize, Serialize};

/// First bytes of every trace file.
pub const MAGIC: &[u8; 8] = b"CCVMTRC\0";
/// The format version this crate writes; it reads this one and 1.
pub const VERSION: u32 = 2;
/// Bytes per page image: ccvm's page (the one definition is the codec crate's).
pub use ccvm_codec::PAGE_SIZE;

/// What was traced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Workload name, or the program traced.
    pub workload: String,
    /// The workload's seed.
    pub seed: u64,
    /// Bytes of the traced region.
    pub region_bytes: u64,
    /// Uncompressed pages kept while tracing: references to these pages
    /// after their fault are not seen.
    pub window_pages: u64,
}

/// Totals written at the end of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footer {
    /// Wall time of the workload itself, without tracing, nanoseconds.
    pub run_time_ns: u64,
    /// References recorded.
    pub references: u64,
    /// Distinct page images stored.
    pub images: u64,
}

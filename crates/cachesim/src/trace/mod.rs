//! Line-level traces: the data references of a run, line by line, with the
//! instructions between them and the contents of each line whenever they
//! were seen to change, so that any cache organization and line codec can
//! be judged on them later.
//!
//! # Format, version 1
//!
//! ```text
//! magic    8 bytes   "CCVMLNT\0"
//! version  u32 LE    1
//! hlen     u32 LE    length of the header, at most 64 KiB
//! header   hlen bytes of JSON: a `Header`
//! blocks, each:
//!   raw      u32 LE  bytes of records in the block, 1 to 1 MiB
//!   zlen     u32 LE  bytes of the zstd frame that follows
//!   crc      u32 LE  CRC-32 of the records
//!   frame    zlen bytes: the records, zstd-compressed
//! records (none spans two blocks):
//!   'R' or 'W'  zigzag varint(line - previous line)
//!               varint(instructions since the previous reference)
//!                                       a read or a write of line `line`
//!                                       (byte address / 64)
//!   'C' varint(line) 64 bytes           the line's contents from here on
//!   'E' varint(references) varint(instructions) varint(contents)
//!                                       the end: the last record of the
//!                                       last block; nothing may follow
//! ```
//!
//! Varints are unsigned LEB128; the first reference's delta is from line 0.
//!
//! # Design
//!
//! A block carries its own CRC and its decompressed length, so a reader
//! never allocates more than the format allows and names the block that is
//! damaged; the end record makes truncation an error rather than a shorter
//! run. Contents are written only when they change, and deduplicated on
//! reading, so a codec compresses each distinct line image once per trace
//! ([`LineTrace::sizes`]) and the simulator's hot loop only looks sizes up.
//! References are whole lines: an access that spans two lines is two
//! references, and the access width is not kept, because no cache model
//! here needs it.

mod read;
mod write;

pub use read::{Event, Events, LineTrace, TraceError};
pub use write::{LineTraceWriter, Totals};

use serde::{Deserialize, Serialize};

/// First bytes of every line trace.
pub const MAGIC: &[u8; 8] = b"CCVMLNT\0";
/// The format version written and read here.
pub const VERSION: u32 = 1;
/// Most bytes of records in one block.
pub const MAX_BLOCK: usize = 1 << 20;
/// Most bytes of a header.
pub const MAX_HEADER: usize = 1 << 16;
/// Lines are numbered below this (byte addresses below 2^47, as x86-64
/// user space has them), so that a reference packs into one word.
pub const MAX_LINE: u64 = 1 << 41;

/// What was traced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The program (or built-in workload) traced.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How references and contents were obtained, and their limits.
    pub method: String,
}

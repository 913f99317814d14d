//! The compressed page store: where ccvm keeps compressed pages of many
//! sizes in memory (CRAMES's compressed RAM device, paper 003 chapter 3 and
//! §4.3, and what Linux's zram does with zsmalloc).
//!
//! The primary abstraction is [`Store`]: `put`, `get` and `remove` pages by
//! number through a mapping table of 16 bytes a page, and zram-style
//! statistics, safe to use from many threads. Under it, [`alloc`] holds the
//! slot allocators, behind one interface ([`alloc::SlotAllocator`]), that
//! place variable-sized compressed pages in fixed-size chunks of memory,
//! and [`chunks`] the source the chunks come from.
//!
//! # Design
//!
//! Allocators deal in *offsets*, not memory: a [`alloc::Slot`] names a chunk
//! and a byte range in it, and the store owns the chunks' bytes. That keeps
//! every allocator free of unsafe code and lets one set of tests check them
//! all against a plain model of which bytes are in use.
#![deny(missing_docs)]

pub mod alloc;
pub mod chunks;
mod store;
mod table;

pub use store::{encode, ConfigError, Stats, Store, StoreConfig, StoreError, Stored, COMPACTION_MOVES_PER_PUT};

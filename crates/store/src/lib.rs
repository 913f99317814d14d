//! The compressed page store: where ccvm keeps compressed pages of many
//! sizes in memory (CRAMES's compressed RAM device, paper 003 chapter 3 and
//! §4.3, and what Linux's zram does with zsmalloc).
//!
//! This crate is being built in layers. The first is [`alloc`]: slot
//! allocators behind one interface, [`alloc::SlotAllocator`], which place
//! variable-sized compressed pages in fixed-size chunks of memory. The
//! mapping table, growth, memory limit, compaction and statistics come next.
//!
//! # Design
//!
//! Allocators deal in *offsets*, not memory: a [`alloc::Slot`] names a chunk
//! and a byte range in it, and the store owns the chunks' bytes. That keeps
//! every allocator free of unsafe code and lets one set of tests check them
//! all against a plain model of which bytes are in use.
#![deny(missing_docs)]

pub mod alloc;

//! MEMMU (paper 003 chapter 5): more usable memory on a system without an
//! MMU, by keeping most data compressed in RAM and a few pages
//! uncompressed, with no faults to catch.
//!
//! The primary abstraction is [`Memmu`], the memory, reached through
//! typed [`Handle`]s to arrays allocated in it. RAM is split as the paper
//! splits it: a small uncompressed *working area* of page slots, the
//! *page table*, and the *compressed region*. Every page of every array
//! lives in one of three states: resident in a working slot, compressed
//! (or stored raw when it does not compress) in the compressed region, or
//! empty (all zeros, nothing stored). Touching a page that is not resident
//! brings it in, compressing the least recently used unpinned slot's page
//! out to make room.
//!
//! # Design
//!
//! The paper's compiler rewrites every load and store into a handle check,
//! an LRU update and an address translation, then removes most of them by
//! analysis. Here the compiler's part is Rust's type system:
//!
//! * [`Memmu::get`] and [`Memmu::set`] are the unoptimised access: each
//!   checks the handle, translates, brings the page in and updates the LRU
//!   order.
//! * [`Memmu::pin`] is the paper's *handle-check hoisting*: it brings a
//!   range of pages in once and returns a [`Pinned`] view that borrows the
//!   memory mutably, so no other access can evict those pages while the
//!   view lives, and its reads and writes need no check beyond an index
//!   bound: the borrow checker proves what the compiler's analysis would.
//! * A handle carries a generation, so a handle used after [`Memmu::free`]
//!   is an error ([`MemmuError::UseAfterFree`]), not a read of someone
//!   else's data.
//!
//! Choices the paper leaves open, and why:
//!
//! * Arrays start on a page boundary: a page belongs to one array, so
//!   freeing an array frees whole pages, and a pinned view's translation is
//!   one division.
//! * A page brought in gives its compressed block back at once (the paper
//!   merges free blocks on every decompression); an evicted page is
//!   compressed anew. An all-zero page is stored as nothing.
//! * When no free block holds a newly compressed page, the region is
//!   coalesced (every compressed page moved down in address order) and the
//!   allocation retried; if it still fails the access returns
//!   [`MemmuError::OutOfMemory`] and nothing has changed.
//! * The codec is any of ccvm's (a [`ccvm_codec::CodecId`]); Delta16 (the paper's, for 16-bit
//!   samples) is the default.
//!
//! ```
//! use ccvm_memmu::{Memmu, MemmuConfig};
//!
//! // 4 KiB of RAM offering 8 KiB of memory.
//! let mut m = Memmu::new(MemmuConfig { ram: 4096, page: 256, working_pages: 4, virtual_bytes: 8192, codec: "delta16".parse().unwrap() }).unwrap();
//! let h = m.alloc::<u16>(3000).unwrap(); // 6000 bytes, more than the RAM
//! for i in 0..3000 {
//!     m.set(h, i, 500 + (i % 7) as u16).unwrap();
//! }
//! // A pinned view per page: one check per page instead of per element.
//! let mut sum = 0u64;
//! for start in (0..3000).step_by(128) {
//!     let mut view = m.pin(h, start..(start + 128).min(3000)).unwrap();
//!     sum += view.iter().map(u64::from).sum::<u64>();
//! }
//! assert_eq!(sum, (0..3000).map(|i| 500 + (i % 7) as u64).sum());
//! assert!(m.stats().compressions > 0);
//! ```
#![deny(missing_docs)]

mod element;
mod memory;
mod pinned;
mod region;
pub mod workload;

pub use element::Element;
pub use memory::{Handle, Memmu, MemmuConfig, MemmuStats};
pub use pinned::Pinned;

/// What a MEMMU operation can fail with; each message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemmuError {
    /// The configuration cannot work.
    #[error("bad MEMMU configuration: {0}")]
    Config(String),
    /// The handle's array was freed.
    #[error("handle used after free (array {id}, freed)")]
    UseAfterFree {
        /// The array's number.
        id: u32,
    },
    /// An element index past the array's end.
    #[error("index {index} out of bounds for an array of {len} elements")]
    OutOfBounds {
        /// The index given.
        index: usize,
        /// The array's length.
        len: usize,
    },
    /// No virtual pages are left for a new array.
    #[error("no room for an array of {pages} pages: {free} of the virtual pages are free; free arrays or configure more virtual_bytes")]
    NoVirtualSpace {
        /// Pages asked for.
        pages: usize,
        /// Virtual pages free.
        free: usize,
    },
    /// The compressed region cannot take another page, even coalesced.
    #[error("out of memory: a page of {needed} bytes does not fit the compressed region ({free} bytes free after coalescing); free arrays or give more RAM")]
    OutOfMemory {
        /// Bytes the evicted page needs.
        needed: usize,
        /// Free bytes in the region.
        free: usize,
    },
    /// A pinned range needs more slots than the working area has.
    #[error("cannot pin {pages} pages at once: the working area has {slots} slots")]
    PinTooLarge {
        /// Pages asked for.
        pages: usize,
        /// Slots in the working area.
        slots: usize,
    },
}

//! Built-in workloads: real algorithms on real-shaped data, laid out in a
//! block of memory the caller gives (a managed region, or a plain vector),
//! each deterministic from a seed and ending with a checksum of its
//! result, so that paging is proven correct by comparing checksums.
//!
//! The primary abstraction is [`Workload`]: a name and a function from
//! (memory, seed) to a checksum; [`WORKLOADS`] lists them and [`by_name`]
//! finds one. Memory is carved with an [`Arena`].
//!
//! # Design
//!
//! Every data structure lives in the given memory, not in Rust's heap
//! (only small constant-size state does), so the memory the workload
//! touches is the memory being paged, and its size sets the footprint.
//! Each workload sizes its structures from the memory's length and uses
//! all of it.
#![deny(missing_docs)]

mod arena;
mod graph;
mod hashindex;
mod matmul;
mod objheap;
mod sortmerge;

pub use arena::Arena;

use rand_core::SeedableRng;
use rand_xorshift::XorShiftRng;

/// A built-in workload.
#[derive(Clone, Copy)]
pub struct Workload {
    /// Name, as the command line takes it.
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// Runs it in `memory` (at least [`MIN_BYTES`]) from `seed`; returns
    /// the checksum of its result.
    pub run: fn(memory: &mut [u8], seed: u64) -> u64,
}

impl Workload {
    /// Runs the workload in `size` bytes of plain memory (a vector, never
    /// paged): the reference checksum a paged run must match, and the
    /// time it took.
    ///
    /// # Panics
    ///
    /// If `size` is below [`MIN_BYTES`] (the workload's own check), or the
    /// vector cannot be allocated.
    ///
    /// ```
    /// let w = ccvm_workload::by_name("hashindex").unwrap();
    /// let (sum, _) = w.run_plain(1 << 20, 7);
    /// assert_eq!(sum, w.run_plain(1 << 20, 7).0);
    /// ```
    pub fn run_plain(&self, size: u64, seed: u64) -> (u64, std::time::Duration) {
        let mut memory = vec![0u8; size as usize];
        let t = std::time::Instant::now();
        let sum = (self.run)(&mut memory, seed);
        (sum, t.elapsed())
    }
}

/// The least memory a workload runs in.
pub const MIN_BYTES: usize = 1 << 20;

/// The workloads.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "hashindex",
        about: "symbol table: open-addressing hash index of identifier strings, inserts then lookups",
        run: hashindex::run,
    },
    Workload {
        name: "graph",
        about: "pointer-rich graph with power-law degrees: breadth-first search, then PageRank iterations",
        run: graph::run,
    },
    Workload {
        name: "graph-mt",
        about: "graph, with the PageRank iterations split over 4 threads (each adds into its own array)",
        run: graph::run_threaded,
    },
    Workload {
        name: "sortmerge",
        about: "64-byte records: sorted runs, then a k-way merge into a second array",
        run: sortmerge::run,
    },
    Workload {
        name: "matmul",
        about: "float64 matrix multiplication, blocked 64x64",
        run: matmul::run,
    },
    Workload {
        name: "objheap",
        about: "object heap: allocation, pointer updates and mark phases, garbage-collector like",
        run: objheap::run,
    },
];

/// The workload called `name`.
///
/// # Errors
///
/// An unknown name, with the known ones.
///
/// ```
/// let w = ccvm_workload::by_name("matmul").unwrap();
/// let mut memory = vec![0u8; 1 << 20];
/// let a = (w.run)(&mut memory, 7);
/// memory.fill(0);
/// assert_eq!(a, (w.run)(&mut memory, 7));
/// ```
pub fn by_name(name: &str) -> Result<Workload, String> {
    WORKLOADS.iter().find(|w| w.name == name).copied().ok_or_else(|| {
        let names: Vec<_> = WORKLOADS.iter().map(|w| w.name).collect();
        format!("unknown workload '{name}'; known: {}", names.join(", "))
    })
}

/// The random source of every workload (xorshift: fixed, documented
/// output for a seed, so checksums never change with a library update).
pub(crate) fn rng(seed: u64) -> XorShiftRng {
    XorShiftRng::seed_from_u64(seed)
}

/// Mixes a value into a running checksum.
pub(crate) fn mix(sum: u64, v: u64) -> u64 {
    (sum ^ v).wrapping_mul(0x100_0000_01b3).rotate_left(29)
}

//! A trace-driven cache-hierarchy simulator for compression below the
//! page: compressed L2 caches, memory-link compression and cooperative
//! migration on a chip multiprocessor (paper 003 chapters 6 and 7), and
//! full memory compression against a compressed disk cache (paper 002).
//!
//! The primary abstraction is [`Level`], one cache level as the
//! simulators drive it: [`Cache`] (a fixed organization: plain, segmented
//! or pair-matching) or [`AdaptiveCache`] (compression switched by
//! marginal performance gain). Around it: [`trace`], line-level traces
//! (the data references of a run with its instruction counts and the
//! contents of its lines) and [`record`], which records them from
//! unmodified programs under Valgrind's Lackey; [`system`], one core's
//! L1, L2, write-backs and memory link in cycles; [`cmp`], several cores
//! with private L2s that lend each other space; [`memory`], FMC against
//! CDC. [`Hierarchy`] is the minimal two-level model the synthetic
//! benchmark uses.
//!
//! # Design
//!
//! The key decision is that a level knows only compressed sizes, never
//! contents: compressing is the codec crate's business and is done once
//! per distinct line image of a trace, before the hot loop, so that a
//! simulated reference costs a tag search and, on a miss, a placement
//! (tens of millions of references a second on one core).
//!
//! Choices the paper leaves open: the segmented cache is assumed compacted
//! (a line fits whenever enough segments are free, as in the designs 003
//! compares with); a pair-matching miss first looks for a frame with room
//! as things are, and otherwise evicts the least recently used line and,
//! if the newcomer does not fit beside its partner, the partner too. Each
//! module states its own.
//!
//! ```
//! use ccvm_cachesim::{Cache, Config, Organization, Outcome};
//! let mut c = Cache::new(Config { size: 64 * 2, ways: 2, organization: Organization::PairMatching });
//! // One set of two frames: four half-size lines fit.
//! for line in 0..4 {
//!     assert!(matches!(c.access(line, 30), Outcome::Miss { ref evicted } if evicted.is_empty()));
//! }
//! assert_eq!(c.access(2, 30), Outcome::Hit { compressed: true });
//! ```
#![deny(missing_docs)]

mod adaptive;
mod cache;
pub mod cmp;
mod hierarchy;
pub mod memory;
pub mod record;
pub mod system;
pub mod trace;

pub use adaptive::{AdaptiveCache, Mode, Thresholds};
pub use cache::{Access, Cache, Config, Counts, Organization, Outcome, Victim, LINE, MAX_WAYS};
pub use hierarchy::{Hierarchy, Incompressible, Latencies, LineSizes, Report};

/// A cache level as the system simulator drives it: a [`Cache`] of fixed
/// organization, or an [`AdaptiveCache`].
pub trait Level {
    /// References `line` (a write marks it dirty), asking `size` for its
    /// compressed size only when it is filled; lines that leave the level
    /// are appended to `victims`.
    fn reference(&mut self, line: u64, write: bool, size: impl FnOnce() -> usize, victims: &mut Vec<Victim>) -> Access;
    /// Marks `line` dirty if held; whether it was.
    fn mark_dirty(&mut self, line: u64) -> bool;
    /// Takes `line` out, if held.
    fn remove(&mut self, line: u64) -> Option<Victim>;
    /// Counts so far.
    fn counts(&self) -> Counts;
    /// Lines held, and how many of them compressed.
    fn occupancy(&self) -> (usize, usize);
    /// Line frames in all.
    fn frames(&self) -> usize;
    /// The end of a marginal-gain period that measured `mpg` hits on LRU
    /// lines per instruction: an adaptive level sets its mode.
    fn end_period(&mut self, _mpg: f64, _thresholds: &Thresholds) {}
    /// The current [`Mode`] as 0, 1, 2 (fixed levels: 0).
    fn mode_index(&self) -> usize {
        0
    }
}

impl Level for Cache {
    fn reference(&mut self, line: u64, write: bool, size: impl FnOnce() -> usize, victims: &mut Vec<Victim>) -> Access {
        Cache::reference(self, line, write, size, victims)
    }
    fn mark_dirty(&mut self, line: u64) -> bool {
        Cache::mark_dirty(self, line)
    }
    fn remove(&mut self, line: u64) -> Option<Victim> {
        Cache::remove(self, line)
    }
    fn counts(&self) -> Counts {
        Cache::counts(self)
    }
    fn occupancy(&self) -> (usize, usize) {
        Cache::occupancy(self)
    }
    fn frames(&self) -> usize {
        Cache::frames(self)
    }
}

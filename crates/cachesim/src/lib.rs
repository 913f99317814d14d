//! A trace-driven cache-hierarchy simulator for compression below the
//! page (paper 003 chapter 6): set-associative LRU levels whose lines may
//! be stored compressed, segmented or pair-matched.
//!
//! The primary abstraction is [`Cache`], one level: `access` a line
//! number with the size its contents compress to, and it says hit or miss
//! and which lines left. [`Hierarchy`] puts an uncompressed L1 over an L2
//! of any [`Organization`] and counts cycles with [`Latencies`]; line
//! sizes come from a [`LineSizes`] (the trace's line contents under the
//! L2's codec).
//!
//! # Design
//!
//! The key decision is that a level knows only compressed sizes, never
//! contents: compressing is the codec crate's business and is done once
//! per distinct line image, outside the hot loop, so that a simulated
//! reference costs a tag search and, on a miss, a placement.
//!
//! Choices the paper leaves open: the segmented cache is assumed compacted
//! (a line fits whenever enough segments are free, as in the designs 003
//! compares with); a pair-matching miss first looks for a frame with room
//! as things are, and otherwise evicts the least recently used line and,
//! if the newcomer does not fit beside its partner, the partner too.
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

mod cache;
mod hierarchy;

pub use cache::{Cache, Config, Counts, Organization, Outcome, LINE, MAX_WAYS};
pub use hierarchy::{Hierarchy, Incompressible, Latencies, LineSizes, Report};

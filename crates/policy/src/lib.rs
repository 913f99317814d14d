//! Replacement and sizing policies for the compression cache: which page
//! leaves uncompressed memory, whether it is compressed or written to disk,
//! and which compressed page goes to disk to make room.
//!
//! The primary abstraction is [`Policy`]. A policy is a pure state machine
//! over page numbers: it is told what happened (a page was touched and
//! which [`Level`] served it, a page was compressed to so many bytes, the
//! compressed level is out of room) and answers with [`Action`]s for the
//! mechanism to carry out.
//!
//! # Design
//!
//! The policy owns the decisions and the mechanism owns the pages. The live
//! runtime (userfaultfd) and the trace-driven simulator are two mechanisms
//! driving the same `Policy` objects with the same events, so what the
//! simulator predicts is what the runtime does (paper 000 §3 sizes the
//! cache online from exactly these events). Every decision a mechanism
//! makes on its own (a page it could not store, a budget it found
//! exceeded) goes back through the policy too, so the two never drift.
//!
//! A mechanism that sees only faults sees no reference to a mapped page.
//! [`Traps`] says which uncompressed pages it keeps unmapped (the oldest
//! share), so that their references fault and reach the policy; the live
//! runtime and the simulator both drive it, so they see the same
//! references.
#![deny(missing_docs)]

mod adaptive;
mod fixed;
mod levels;
mod pool;
mod queue;
mod recency;
mod trap;

pub use adaptive::{Adaptive, Costs, FINE_TARGETS, SAFE_ALLOWANCE, TARGETS};
pub use fixed::FixedSplit;
pub use pool::Pool;
pub use trap::Traps;

/// Where a page is when it is touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Never touched before: served with zeros.
    New,
    /// In uncompressed memory (a reference the mechanism saw without a
    /// fault; the simulator replays these from traces).
    Uncompressed,
    /// In the compression cache.
    Compressed,
    /// On disk.
    Disk,
}

/// What the mechanism must do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Take the page out of uncompressed memory, compress it and keep it in
    /// the compression cache; then report its size with
    /// [`Policy::compressed`].
    Compress(u64),
    /// Take the page out of uncompressed memory and write it to disk as it
    /// is (compression is off).
    SwapOut(u64),
    /// Move the page from the compression cache to disk, still compressed.
    Spill(u64),
}

/// The memory a policy manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// RAM for uncompressed pages and the compression cache together, bytes.
    pub ram_bytes: u64,
    /// Bytes per page.
    pub page_size: u64,
}

/// A replacement and sizing policy. See the [crate docs](crate).
///
/// Invariant kept by every policy: after the actions of any call are
/// carried out, the uncompressed pages and the compressed bytes it has been
/// told of fit the [`Budget`].
pub trait Policy: Send {
    /// Short name, as the command line accepts it.
    fn name(&self) -> &'static str;

    /// `page` was touched and served from `from`; it is now uncompressed.
    /// Appends to `actions` what must leave uncompressed memory (or the
    /// compression cache) to make room for it.
    fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>);

    /// The mechanism carried out [`Action::Compress`] for `page`, which now
    /// takes `bytes` in the compression cache. Appends the spills needed to
    /// keep the cache within its share.
    fn compressed(&mut self, page: u64, bytes: u64, actions: &mut Vec<Action>);

    /// The mechanism found the compression cache full (its own bookkeeping
    /// or fragmentation exceeded what the policy counted): appends a spill
    /// of the page to move out first. Returns `false` if the cache is empty.
    fn make_room(&mut self, actions: &mut Vec<Action>) -> bool;

    /// The mechanism could not compress `page` into the cache after
    /// [`Action::Compress`] and wrote it to disk instead.
    fn swapped_instead(&mut self, page: u64);

    /// Pages per level: (uncompressed, compressed, on disk).
    fn occupancy(&self) -> (usize, usize, usize);

    /// Bytes the policy counts in the compression cache.
    fn compressed_bytes(&self) -> u64;

    /// The most bytes the compression cache may ever hold under this
    /// policy (the mechanism sizes its store's hard limit with it).
    fn cache_limit(&self) -> u64;

    /// The most uncompressed pages the policy may ever keep.
    fn uncompressed_limit(&self) -> usize;

    /// What the codec work just done took, ns, when the mechanism measured
    /// it: `compressions` compressions and `decompressions` decompressions
    /// since the last call (the simulator knows each page's times). A
    /// policy that keeps a ledger of its own cost (`adaptive-safe`) pays
    /// this instead of its estimate; the default ignores it.
    fn codec_time(&mut self, compressions: u32, decompressions: u32, ns: f64) {
        let _ = (compressions, decompressions, ns);
    }
}

/// What the policies are made with besides the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// The fixed split's share of uncompressed memory.
    pub uncompressed_share: f64,
    /// The adaptive policy's cost model.
    pub costs: Costs,
}

/// The policies by name, made for a budget.
///
/// # Errors
///
/// An unknown name, with the known ones.
pub fn by_name(name: &str, budget: Budget, params: Params) -> Result<Box<dyn Policy>, String> {
    match name {
        "fixed" => Ok(Box::new(FixedSplit::new(budget, params.uncompressed_share))),
        "none" => Ok(Box::new(FixedSplit::new(budget, 1.0))),
        "adaptive" => Ok(Box::new(Adaptive::new(budget, params.costs))),
        "adaptive-fine" => Ok(Box::new(Adaptive::with_targets(budget, params.costs, &FINE_TARGETS))),
        "adaptive-safe" => Ok(Box::new(
            Adaptive::new(budget, params.costs).with_allowance(SAFE_ALLOWANCE),
        )),
        "zswap" => Ok(Box::new(Pool::zswap(budget, 20))),
        "douglis" => Ok(Box::new(Pool::douglis(budget, 2.0))),
        _ if fixed_percent(name).is_some() => {
            let c = fixed_percent(name).expect("checked") as f64 / 100.0;
            Ok(Box::new(FixedSplit::new(budget, 1.0 - c)))
        }
        _ => Err(format!("unknown policy '{name}'; known: {}, fixedN", NAMES.join(", "))),
    }
}

/// `fixedN`: a fixed split with N% of memory compressed (N from 0 to 100),
/// e.g. `fixed23`.
fn fixed_percent(name: &str) -> Option<u32> {
    name.strip_prefix("fixed")?.parse().ok().filter(|&n| n <= 100)
}

/// Whether [`by_name`] knows `name` (one of [`NAMES`], or `fixedN`).
pub fn is_known(name: &str) -> bool {
    NAMES.contains(&name) || fixed_percent(name).is_some()
}

/// Names [`by_name`] accepts, besides `fixedN` (N% compressed).
/// `none` keeps no compression cache: every page evicted goes to disk
/// uncompressed (the baseline).
/// `adaptive` is paper 000 §3's cost/benefit sizing over the paper's
/// targets, `adaptive-fine` the same with 3% and 6% added, `adaptive-safe`
/// the paper's targets guarded to stay within 2% of plain LRU's paging cost
/// (and writing pages raw at 0%); `zswap` compresses
/// every evicted page into a pool capped at 20% of memory (zswap's default
/// `max_pool_percent`); `douglis` lets the caches compete by recency with a
/// bias of 2.
pub const NAMES: &[&str] = &[
    "fixed",
    "none",
    "adaptive",
    "adaptive-fine",
    "adaptive-safe",
    "zswap",
    "douglis",
];

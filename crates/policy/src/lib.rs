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
mod ager;
mod budget;
mod fixed;
mod levels;
mod lists;
mod miniature;
mod pages;
mod pool;
mod queue;
mod recency;
mod spec;
mod trap;

pub use adaptive::{Adaptive, Costs, FINE_TARGETS, SAFE_ALLOWANCE, SAFE_TARGETS, TARGETS};
pub use ager::Ager;
pub use budget::{Budget, Charge, RamSplit, ENTRY_BYTES, HUGE_THRESHOLD, SLACK_DIVISOR};
pub use fixed::FixedSplit;
pub use miniature::Miniatures;
pub use pool::Pool;
pub use spec::PolicySpec;
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
    /// If the page is uncompressed and mapped, unmap it but keep it, so
    /// that its next touch faults and reaches [`Policy::touch`] (as
    /// [`Level::Uncompressed`]); otherwise nothing (its next touch faults
    /// anyway). Asked only of a mechanism that said it sees only faults
    /// ([`Policy::faults_only`]); see [`Miniatures`]. The mechanism may
    /// also report the page's compressed size ([`Policy::measured`]).
    Watch(u64),
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

    /// The mechanism sees a touch of a mapped page only when it faults
    /// (the live runtime, and the simulator modelling it), and carries out
    /// [`Action::Watch`]. Called once, before the first touch. A policy
    /// that weighs what each share of memory compressed would cost
    /// (`adaptive-safe`) then measures it on a sample ([`Miniatures`])
    /// instead of predicting it from its recency order, which assumes LRU.
    /// The fixed split then replaces uncompressed pages by two lists with
    /// refault-distance activation rather than first in, first out. The
    /// default ignores it.
    fn faults_only(&mut self) {}

    /// The mechanism measured what a fault costs the program here, all in
    /// (means, ns): `cache_ns` from the compression cache, and `disk_ns`
    /// from disk once enough disk faults were measured (`None` before). A
    /// policy that weighs the two may price faults by them. The default
    /// ignores it.
    fn fault_service(&mut self, disk_ns: Option<f64>, cache_ns: f64) {
        let _ = (disk_ns, cache_ns);
    }

    /// The program dropped `page`'s contents (`MADV_DONTNEED`, or a freed
    /// block whose pages its allocator gave back): it leaves whichever
    /// level held it, takes no memory, and its next touch is
    /// [`Level::New`]. Nothing needs to move for it, so no action is asked.
    /// Kept counted instead, a freed buffer held frames of the budget (as
    /// uncompressed pages the policy believed resident) until fault order
    /// reached it, while live pages left in its place.
    fn discarded(&mut self, page: u64);

    /// The mechanism compressed a copy of resident page `page` as it
    /// carried out [`Action::Watch`], to `bytes`; the page stays where it
    /// was. A mechanism that cannot read the page there (or that records a
    /// trace, whose replay must make the same choices) does not tell. By
    /// default ignored.
    fn measured(&mut self, page: u64, bytes: u64) {
        let _ = (page, bytes);
    }

    /// Whether the policy would be told watched page `page`'s compressed
    /// size ([`Policy::measured`]): the mechanism measures only then, since
    /// measuring costs a compression. By default no.
    fn wants_size(&self, page: u64) -> bool {
        let _ = page;
        false
    }

    /// The mechanism saw resident page `page` referenced without a fault
    /// (a scan of the page tables found it written): it becomes the newest
    /// uncompressed page. By default a touch from
    /// [`Level::Uncompressed`].
    fn referenced(&mut self, page: u64, actions: &mut Vec<Action>) {
        self.touch(page, Level::Uncompressed, actions);
    }

    /// The mechanism's own memory grew or shrank: from now on the policy
    /// manages `ram_bytes` (what the mechanism's tables and buffers leave
    /// of its RAM budget). Pages over the new size move out at the next
    /// touches. The default keeps the size it was made with, and the
    /// mechanism makes room with [`Policy::make_room`] instead.
    fn set_ram(&mut self, ram_bytes: u64) {
        let _ = ram_bytes;
    }

    /// The mechanism holds more than its budget and [`Policy::make_room`]
    /// found the cache empty (its budget was cut at once, as when a forked
    /// process's share of a shared budget shrinks): appends the eviction
    /// of the oldest uncompressed page, into the cache if the policy has
    /// one, else to disk as it is. Returns `false` if no page is
    /// uncompressed. The default evicts nothing.
    fn shrink(&mut self, actions: &mut Vec<Action>) -> bool {
        let _ = actions;
        false
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

/// A policy's name, what it does, and how to make one: the table
/// [`by_name`], [`is_known`] and the command line's help read.
pub struct PolicyInfo {
    /// The name [`by_name`] accepts.
    pub name: &'static str,
    /// One line: what the policy does.
    pub about: &'static str,
    /// Makes one for a budget.
    pub make: fn(Budget, Params) -> Box<dyn Policy>,
}

/// The policy `ccvm run`, `ccvm exec` and the benchmarks use unless told
/// otherwise.
pub const DEFAULT_POLICY: &str = "adaptive-safe";

/// Every named policy. `fixedN` (a fixed split with N% compressed, N from 0
/// to 100) is accepted besides.
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "adaptive",
        about: "paper 000 §3: sizes the cache online by cost and benefit over the recency order",
        make: |b, p| Box::new(Adaptive::new(b, p.costs)),
    },
    PolicyInfo {
        name: "adaptive-fine",
        about: "adaptive with 3% and 6% added to the paper's targets",
        make: |b, p| Box::new(Adaptive::with_targets(b, p.costs, &FINE_TARGETS)),
    },
    PolicyInfo {
        name: "adaptive-safe",
        about: "adaptive guarded to stay within 2% of paging without a cache, writing pages raw at 0%; live, each share's cost is measured on a sample of pages (the default of `run` and `exec`)",
        make: |b, p| Box::new(Adaptive::with_targets(b, p.costs, &SAFE_TARGETS).with_allowance(SAFE_ALLOWANCE)),
    },
    PolicyInfo {
        name: "fixed",
        about: "a fixed split: the uncompressed share of memory given, the rest compressed",
        make: |b, p| Box::new(FixedSplit::new(b, p.uncompressed_share)),
    },
    PolicyInfo {
        name: "none",
        about: "no compression cache, every page evicted goes to disk uncompressed: the baseline",
        make: |b, _| Box::new(FixedSplit::new(b, 1.0)),
    },
    PolicyInfo {
        name: "zswap",
        about: "every evicted page compressed into a pool capped at 20% of memory, as zswap's max_pool_percent",
        make: |b, _| Box::new(Pool::zswap(b, 20)),
    },
    PolicyInfo {
        name: "ager",
        about: "OS/2's ager (paper 004): a clock over resident pages, an idle list reclaimed without I/O, and a buffer of 64-byte entries for the pages that compress that small",
        make: |b, _| Box::new(Ager::new(b)),
    },
    PolicyInfo {
        name: "douglis",
        about: "Douglis's compression cache: the levels compete by recency with a bias of 2",
        make: |b, _| Box::new(Pool::douglis(b, 2.0)),
    },
];

/// A policy name neither [`POLICIES`] nor `fixedN` knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", unknown_policy_message(.0))]
pub struct UnknownPolicy(pub String);

fn unknown_policy_message(name: &str) -> String {
    let n = name.strip_prefix("fixed").and_then(|n| n.parse::<u64>().ok());
    match n {
        Some(n) => format!("policy '{name}': a fixed split takes N from 0 to 100 (N% compressed), not {n}"),
        None => format!(
            "unknown policy '{name}'; known: {}, fixedN (N from 0 to 100: N% compressed)",
            names().join(", ")
        ),
    }
}

/// The policy called `name`, made for a budget.
///
/// # Errors
///
/// [`UnknownPolicy`], whose message lists the known names.
///
/// ```
/// use ccvm_policy::{Budget, Costs, Params};
/// let budget = Budget { ram_bytes: 1 << 20, page_size: 4096 };
/// let costs = Costs { disk_ns: 5e6, codec_ns: 1e5, compress_share: 0.5 };
/// let params = Params { uncompressed_share: 0.5, costs };
/// assert_eq!(ccvm_policy::by_name("fixed23", budget, params).unwrap().name(), "fixed");
/// assert!(ccvm_policy::by_name("lfu", budget, params).is_err());
/// ```
pub fn by_name(name: &str, budget: Budget, params: Params) -> Result<Box<dyn Policy>, UnknownPolicy> {
    if let Some(info) = POLICIES.iter().find(|p| p.name == name) {
        return Ok((info.make)(budget, params));
    }
    match fixed_percent(name) {
        Some(n) => Ok(Box::new(FixedSplit::new(budget, 1.0 - f64::from(n) / 100.0))),
        None => Err(UnknownPolicy(name.into())),
    }
}

/// `fixedN`: a fixed split with N% of memory compressed (N from 0 to 100),
/// e.g. `fixed23`.
fn fixed_percent(name: &str) -> Option<u32> {
    name.strip_prefix("fixed")?.parse().ok().filter(|&n| n <= 100)
}

/// Whether [`by_name`] knows `name` (one of [`POLICIES`], or `fixedN`).
pub fn is_known(name: &str) -> bool {
    POLICIES.iter().any(|p| p.name == name) || fixed_percent(name).is_some()
}

/// `name` if [`by_name`] knows it: a command line's value parser.
///
/// # Errors
///
/// [`UnknownPolicy`].
pub fn parse_name(name: &str) -> Result<String, UnknownPolicy> {
    if is_known(name) {
        Ok(name.into())
    } else {
        Err(UnknownPolicy(name.into()))
    }
}

/// The names of [`POLICIES`], in order.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|p| p.name).collect()
}

/// One paragraph for a command line's help: each policy and what it does.
pub fn help() -> String {
    let mut s = String::from("Policy.");
    for p in POLICIES {
        s.push_str(&format!(" {}: {}.", p.name, p.about));
    }
    s.push_str(" fixedN: a fixed split with N% of memory compressed.");
    s
}

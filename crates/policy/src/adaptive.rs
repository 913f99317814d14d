//! Paper 000 §3's adaptive sizing: an online cost/benefit analysis over
//! the recency order of pages, choosing how much of memory to keep
//! compressed.
//!
//! For each target compressed share c of memory (0, 10, 23, 37 and 50%,
//! as the paper's simulations), with M frames: the uncompressed region is
//! U = M(1 − c) frames, and the effective memory E = U + cM·r pages, where
//! r is the recent compression ratio. A touch at recency position p (pages
//! touched since the page's previous touch) is, under target c, a
//! compression-cache hit if U ≤ p < E, costing a compression and a
//! decompression, and a disk fault if p ≥ E. Decayed counts of both, per
//! target, give each target's paging cost; the cheapest wins.
//!
//! Choices, where the paper leaves room (the measurements behind each are
//! in `docs/results.md`, "Doing no harm", and `docs/results-builtin.md`):
//! * The targets are the paper's by default. [`FINE_TARGETS`] (policy
//!   `adaptive-fine`) adds 3% and 6%: just below a program's footprint the
//!   right cache holds a few pages, and 10% of memory is too much.
//! * Only "interesting" touches count and advance time: those that would
//!   be cache hits under some target (M/2 ≤ p < the largest E), as §3.2
//!   defines them. A touch beyond every target's reach, a first touch
//!   included, is a fault under all of them alike, so it cannot change the
//!   choice. Each interesting event multiplies the weight of all earlier
//!   ones by d, with d^M = 0.2 (the M-th most recent event weighs 20% of
//!   the newest), implemented by growing the increment.
//! * The target is chosen again only when a compressed or swapped page is
//!   touched, and memory moves between the levels on demand (§3.1), one
//!   page per fault: a fault compresses the oldest uncompressed page to
//!   make room for its own, and one more while more than the target's
//!   uncompressed frames are held; the oldest compressed pages spill while
//!   memory is over budget. Moving the whole way at once compresses up to
//!   half of memory on one fault, wasted when the next faults reverse the
//!   choice.
//! * Pages are compressed before they go to disk, as the paper assumes,
//!   so a 0% target compresses and spills at once.
//! * The ratio r is the page size over a moving average (weight 1/64) of
//!   the bytes each compressed page takes, clamped to [1, 4], or to
//!   [1, 16] for target sets that reach past half of memory.
//! * The recency order covers three memories' worth of pages, enough for
//!   E at a 50% share and a ratio of 4 (2.5 M) with room to spare. Wider
//!   targets reach further than it does; a touch beyond it is counted
//!   under none, so the analysis under-credits them (they are measured,
//!   not predicted, where it matters: live, on the miniatures).
//! * Cost model: `disk_ns` per disk fault, `codec_ns` per cache hit
//!   (compress plus decompress, or, live, the whole cost of a cache fault).
//!
//! **`adaptive-safe`** ([`Adaptive::with_allowance`]) is ccvm's guarded
//! variant, for issue 11's bound: at most 5% above plain LRU's paging time
//! at every memory size and disk cost. It differs as follows.
//! * **No harm: a running comparison with plain LRU.** The recency order
//!   says, for every touch, whether LRU over the same frames would have
//!   faulted (a page touched before, at position ≥ M), so the policy keeps
//!   LRU's paging cost beside its own: disk faults, plus each compression
//!   and decompression at the codec's own split of a round trip
//!   (`Costs::compress_share`), since codecs that compress several times
//!   slower than they decompress are undercharged by an even split.
//!   Compression is allowed only while its own total, plus the cost of one
//!   more disk fault, stays within 2% of LRU's ([`SAFE_ALLOWANCE`]);
//!   otherwise the target is 0 whatever the analysis says, at the next
//!   fault. The spare fault is there because the guard sees a fault's cost
//!   only once it is paid, and on a fast CPU one fault costs a thousand
//!   compressions: a program whose LRU run pays fewer than 50 faults is
//!   never compressed.
//! * Between faults the check is made before every compression too, since
//!   a program touching new pages pushes a page into the cache per touch.
//!   Past the allowance, room is made only as memory fills and oldest
//!   first: the cache's oldest pages are spilled, and only when it is
//!   empty do uncompressed pages go to disk as they are; sending the oldest
//!   uncompressed pages out while the cache kept older ones would evict
//!   pages LRU still holds. Setting the target to 0 at once instead would
//!   drain the cache on every small overrun and throw away what
//!   compression had invested before its hits came. Trying again needs no
//!   rule of its own: while off, the policy costs what LRU does, and the
//!   allowance grows with LRU's cost until the analysis may try a share
//!   again. 2% leaves room for the drain of what was compressed.
//! * **Its targets reach 90% of memory** ([`SAFE_TARGETS`]). The paper
//!   stops at half, where a cache at 4:1 reaches 2.5 M pages; pages that
//!   compress ten to one (sparse or zero-filled buffers, a loop of a few
//!   memories' worth) fit only in a cache that takes most of memory, and
//!   the guard, not the cap, keeps a wide share from doing harm. Shares
//!   past half are candidates only while pages compress 6 to 1 or better
//!   (the miniatures' docs say why).
//! * **The ledger pays what the codec took**, where the mechanism measures
//!   it ([`Policy::codec_time`]: the simulator knows each page's times),
//!   and the mean round trip where it does not (live): pages near a
//!   program's footprint need not be the mean page.
//! * **At the 0% target pages go to disk uncompressed**, all but one in
//!   64, which is compressed so that r stays known, and only out of half
//!   the allowance: compressing every page on its way to disk is what makes
//!   the paper's policy slower than LRU with a fast disk.
//! * r starts as a plain mean of the first 64 sizes (few are sampled), and
//!   when it moves 25% away from the ratio the counts were made under, the
//!   counts start again: they were classified with the wrong E. Once the
//!   cache holds 64 pages, r is its own mean page instead: on `ccvm bench
//!   faults`, whose pages come in runs by source, a run of incompressible
//!   pages through the moving average put r at 1, every share looked
//!   useless, and the cache stopped for the rest of the run.
//! * The samples taken at 0% are paid out of their own half of the
//!   allowance, not out of what earlier shares spent: with that debt
//!   counted, sampling stopped, and r kept the value it had when
//!   compression stopped.
//! * **The fitting share.** Besides its fixed targets, the policy weighs
//!   the share at which every page the program has fits in memory (the
//!   rest compressed at the cache's mean charge a page, less 1% of the
//!   frames for that mean's drift), recomputed at each choice. Past that
//!   share a bigger cache saves no disk fault and only turns uncompressed
//!   hits into cache faults, so the policy never keeps fewer uncompressed
//!   pages than it leaves, whatever the target; below it, the miniatures
//!   measure it as a split of its own. The fixed shares are steps of 10
//!   to 25% of memory, and a program's footprint falls between two of
//!   them, where the share below it pages to disk and the share above it
//!   takes needless cache faults (`docs/results.md`, "The policy's own
//!   memory, and the share at which a program fits").
//! * **Before any page comes back**, nothing prices a cache, and the
//!   policy had written every evicted page raw until the first fault from
//!   the cache or disk called its first choice. Now, on a mechanism that
//!   sees only faults, it takes the fitting share (when that share is not
//!   a wide one) from the moment memory fills, choosing again every 64
//!   evictions as the footprint grows, until a page returns and the
//!   miniatures' costs take over; the guard still applies. A program that
//!   allocates past memory before it reads anything back (the CPython
//!   cache building its dict) otherwise sent thousands of pages to disk
//!   raw and read them back later (`docs/results.md`, "A fitting cache
//!   from the start").
//! * **On a mechanism that sees only faults** (the live runtime, told by
//!   [`Policy::faults_only`]), the recency order holds only faults: it
//!   cannot say what running uncompressed would have cost, and the
//!   analysis over it assumes LRU, which fault-order replacement is not.
//!   There each target's split is measured instead, on a sample of pages
//!   ([`Miniatures`], whose module docs give the design): the cheapest
//!   split lately is the target (except that a cache of up to half of
//!   memory is never narrowed, only widened or dropped:
//!   [`Miniatures::best_from`]), and the 0% split's disk faults are the
//!   guard's baseline. The miniatures start when memory first fills. The
//!   guard then counts a compression as spent only once its page has left
//!   the cache: the splits have measured that the hits come, and charging
//!   the cache's whole content up front stopped every share before its
//!   first hit (`docs/results.md`, "Live: the splits measured on a
//!   sample, and no harm"). The run's own uncompressed pages are kept in
//!   two lists with refault-distance activation (`levels`), while the
//!   miniatures keep one queue: the splits are compared with each other
//!   alike, and the run pages less than the split it chose predicts.

use crate::levels::Levels;
use crate::miniature::Miniatures;
use crate::recency::Recency;
use crate::{Action, Budget, Level, Policy};

mod analysis;
mod fit;
mod guard;

/// The target compressed shares of memory, as paper 000's simulations.
pub const TARGETS: [f64; 5] = [0.0, 0.10, 0.23, 0.37, 0.50];

/// The paper's targets plus 3% and 6% (policy `adaptive-fine`): ccvm's
/// extension for sizes just below a program's footprint, where a 10% share
/// is already too big a step.
pub const FINE_TARGETS: [f64; 7] = [0.0, 0.03, 0.06, 0.10, 0.23, 0.37, 0.50];

/// The paper's targets plus 75% and 90% (policy `adaptive-safe`): pages
/// that compress ten to one fit a loop four times memory only in a cache
/// that holds most of it, and the kernel's compressed swap has no cap.
pub const SAFE_TARGETS: [f64; 7] = [0.0, 0.10, 0.23, 0.37, 0.50, 0.75, 0.90];

/// The highest compression ratio the analysis credits with the paper's
/// targets (up to half of memory compressed), and with wider ones.
const MAX_RATIO: f64 = 4.0;
const MAX_RATIO_WIDE: f64 = 16.0;

/// Room for every target of a target set.
const MAX_TARGETS: usize = 8;

/// Costs the analysis weighs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// Cost of a disk fault, nanoseconds.
    pub disk_ns: f64,
    /// Cost of a compression-cache hit, nanoseconds: a compression and a
    /// decompression.
    pub codec_ns: f64,
    /// The share of `codec_ns` that compressing takes (0 to 1; 0.5 when
    /// unknown). The paper's policy weighs whole round trips and ignores
    /// it; `adaptive-safe` charges a compression and a decompression
    /// separately, and for LZ4 or LZO, which compress 2 to 4 times slower
    /// than they decompress, an even split undercharged compression.
    pub compress_share: f64,
}

impl Costs {
    /// What compressing a page costs, nanoseconds.
    pub(crate) fn compress_ns(&self) -> f64 {
        self.codec_ns * self.compress_share.clamp(0.0, 1.0)
    }

    /// What decompressing a page costs, nanoseconds.
    pub(crate) fn decompress_ns(&self) -> f64 {
        self.codec_ns - self.compress_ns()
    }
}

/// The adaptive policy. See the module docs.
pub struct Adaptive {
    frames: usize,
    page_size: u64,
    ram: u64,
    costs: Costs,
    recency: Recency,
    targets: &'static [f64],
    /// The shares weighed: `targets`, then (`adaptive-safe`) the fitting
    /// share, which moves with the program's footprint.
    shares: [f64; MAX_TARGETS],
    n_shares: usize,
    /// The index of the fitting share in `shares`.
    fit: Option<usize>,
    /// Whether any page has come back from the cache or disk yet.
    refaulted: bool,
    hits: [f64; MAX_TARGETS],
    faults: [f64; MAX_TARGETS],
    weight: f64,
    decay: f64,
    avg_bytes: f64,
    /// Compressed sizes averaged into `avg_bytes`, up to 64.
    sizes_seen: u32,
    /// The ratio under which `hits` and `faults` were classified.
    counted_ratio: f64,
    /// (U, E) per target for the current ratio, kept up to date by
    /// `compressed`, since every touch consults them.
    bounds: [(usize, usize); MAX_TARGETS],
    /// The largest E: touches at or beyond it are faults under every target.
    reach: usize,
    target: usize,
    uncompressed_target: usize,
    levels: Levels,
    /// Plain LRU's paging cost over the same frames so far, ns.
    lru_cost: f64,
    /// With measured splits, `none`'s estimated paging cost so far, ns,
    /// each disk fault priced when it was estimated.
    none_cost: f64,
    /// `none`'s estimated disk faults already in `none_cost`.
    none_faults: f64,
    /// On a fault-only mechanism, each target's split measured on a
    /// sample of pages, weighed instead of the recency analysis and, for
    /// the 0% split, of `lru_cost`.
    minis: Option<Miniatures>,
    /// The mechanism sees only faults: the miniatures start when memory
    /// first fills.
    faults_only: bool,
    /// This policy's paging cost so far, ns, by the same model.
    own_cost: f64,
    /// How far above LRU's cost compression may take it (a share); `None`
    /// for the paper's policy, which neither guards nor writes pages raw.
    allowance: Option<f64>,
    /// Pages sent out of uncompressed memory so far.
    evictions: u64,
    /// What the ratio's samples at the 0% target cost, ns.
    sample_spent: f64,
    /// With measured splits: how much more than `none` the policy has
    /// spent while it compressed, ns, up to the last `choose` (see
    /// `harmful`).
    excess: f64,
    /// `spent()` and `baseline_cost()` at the last `choose`.
    last_spent: f64,
    last_base: f64,
    /// The policy's own cost and `none`'s estimate over the stretches at
    /// 0%, where the two are the same run: their quotient corrects the
    /// estimate (see `harmful`).
    off_spent: f64,
    off_base: f64,
    /// `baseline_cost()` when the current compressing stretch began.
    on_base: f64,
    /// `none`'s estimate's growth over the compressing stretches before
    /// the current one, ns.
    on_total: f64,
}

/// Steps of `none`'s estimate a compressing stretch takes before it is
/// judged by the allowance (see `Adaptive::harmful`).
const JUDGED_STEPS: f64 = 16.0;

/// At the 0% target, one page in this many is still compressed on its way
/// to disk, so that the ratio the analysis weighs stays current.
const RATIO_SAMPLE: u64 = 64;

/// How far above LRU's paging cost `adaptive-safe` may run before it turns
/// compression off (the module docs say why 2%).
pub const SAFE_ALLOWANCE: f64 = 0.02;

impl Adaptive {
    /// An adaptive policy over `budget` weighing `costs`; it starts with no
    /// compression cache.
    ///
    /// ```
    /// use ccvm_policy::{Action, Adaptive, Budget, Costs, Level, Policy};
    /// let budget = Budget { ram_bytes: 100 * 4096, page_size: 4096 };
    /// let mut p = Adaptive::new(budget, Costs { disk_ns: 5e6, codec_ns: 1e5, compress_share: 0.5 });
    /// let mut actions = Vec::new();
    /// for page in 0..101 {
    ///     p.touch(page, Level::New, &mut actions);
    /// }
    /// assert_eq!(actions, [Action::Compress(0)]);
    /// ```
    pub fn new(budget: Budget, costs: Costs) -> Self {
        Self::with_targets(budget, costs, &TARGETS)
    }

    /// An adaptive policy choosing among `targets` (compressed shares of
    /// memory, ascending from 0, such as [`FINE_TARGETS`]).
    ///
    /// # Panics
    ///
    /// If `targets` does not start at 0, is not ascending, reaches 1 or
    /// holds more than 8 shares.
    ///
    /// ```
    /// use ccvm_policy::{Adaptive, Budget, Costs, Policy, FINE_TARGETS};
    /// let budget = Budget { ram_bytes: 100 * 4096, page_size: 4096 };
    /// let p = Adaptive::with_targets(budget, Costs { disk_ns: 5e6, codec_ns: 1e5, compress_share: 0.5 }, &FINE_TARGETS);
    /// assert_eq!((p.name(), p.target_share()), ("adaptive-fine", 0.0));
    /// ```
    pub fn with_targets(budget: Budget, costs: Costs, targets: &'static [f64]) -> Self {
        assert!(
            targets.len() <= MAX_TARGETS
                && targets.first() == Some(&0.0)
                && targets.windows(2).all(|w| w[0] < w[1])
                && targets.iter().all(|&t| t < 1.0),
            "targets must ascend from 0 below 1, at most {MAX_TARGETS}: {targets:?}"
        );
        let frames = ((budget.ram_bytes / budget.page_size) as usize).max(2);
        let mut a = Adaptive {
            frames,
            page_size: budget.page_size,
            ram: budget.ram_bytes,
            costs,
            recency: Recency::new(3 * frames),
            targets,
            shares: std::array::from_fn(|i| targets.get(i).copied().unwrap_or(0.0)),
            n_shares: targets.len(),
            fit: None,
            refaulted: false,
            hits: [0.0; MAX_TARGETS],
            faults: [0.0; MAX_TARGETS],
            weight: 1.0,
            decay: 0.2f64.powf(1.0 / frames as f64),
            avg_bytes: budget.page_size as f64 / 2.0,
            sizes_seen: 64,
            counted_ratio: 2.0,
            bounds: [(0, 0); MAX_TARGETS],
            reach: 0,
            target: 0,
            uncompressed_target: frames,
            levels: Levels::default(),
            lru_cost: 0.0,
            none_cost: 0.0,
            none_faults: 0.0,
            minis: None,
            faults_only: false,
            own_cost: 0.0,
            allowance: None,
            evictions: 0,
            sample_spent: 0.0,
            excess: 0.0,
            last_spent: 0.0,
            last_base: 0.0,
            off_spent: 0.0,
            off_base: 0.0,
            on_base: 0.0,
            on_total: 0.0,
        };
        a.update_bounds();
        a
    }

    /// The guarded policy (`adaptive-safe`): the same analysis, allowed to
    /// run `share` above plain LRU's paging cost before it turns
    /// compression off, and writing pages to disk as they are at the 0%
    /// target (see the module docs; [`SAFE_ALLOWANCE`] is the default).
    ///
    /// ```
    /// use ccvm_policy::{Adaptive, Budget, Costs, Policy, SAFE_ALLOWANCE};
    /// let budget = Budget { ram_bytes: 100 * 4096, page_size: 4096 };
    /// let p = Adaptive::new(budget, Costs { disk_ns: 5e6, codec_ns: 1e5, compress_share: 0.5 }).with_allowance(SAFE_ALLOWANCE);
    /// assert_eq!((p.name(), p.target_share()), ("adaptive-safe", 0.0));
    /// ```
    pub fn with_allowance(mut self, share: f64) -> Self {
        self.allowance = Some(share);
        self.sizes_seen = 0;
        if self.n_shares < MAX_TARGETS {
            self.fit = Some(self.n_shares);
            self.n_shares += 1;
            self.update_bounds();
        }
        self
    }

    fn update_bounds(&mut self) {
        for t in 0..self.n_shares {
            self.bounds[t] = self.regions(t);
        }
        self.reach = self.bounds.iter().map(|b| b.1).max().unwrap_or(0);
    }

    /// The compressed share currently chosen.
    pub fn target_share(&self) -> f64 {
        self.shares[self.target]
    }

    /// Memory is full and the first page is about to leave: the
    /// miniatures start, holding the sampled pages resident now in the
    /// order they came (as each split would hold them, having evicted
    /// nothing yet). Started earlier, a split with less uncompressed
    /// memory would have the run watch pages that nothing will evict.
    fn start_miniatures(&mut self, actions: &mut Vec<Action>) {
        let mut m = Miniatures::new(self.frames, &self.shares[..self.n_shares], self.costs, self.ratio());
        if let Some(i) = self.fit {
            m.float(i);
        }
        for page in self.levels.uncompressed_oldest_first() {
            m.touch(page, Level::New, actions);
        }
        self.minis = Some(m);
        // The recency order is not read again, and its memory (about 50
        // bytes a frame) is charged to the budget.
        self.recency = Recency::new(1);
    }

    fn over_ram(&self) -> bool {
        self.levels.used(self.page_size) > self.ram
    }
}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        if self.allowance.is_some() {
            "adaptive-safe"
        } else if self.targets == FINE_TARGETS {
            "adaptive-fine"
        } else {
            "adaptive"
        }
    }

    fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>) {
        if self.faults_only && self.minis.is_none() && self.levels.uncompressed_len() >= self.frames {
            self.start_miniatures(actions);
        }
        match &mut self.minis {
            Some(m) => {
                // A watched page's touch is the miniatures' alone.
                let watched = m.touch(page, from, actions);
                self.sync_baseline();
                if watched {
                    return;
                }
            }
            None => {
                let p = self.recency.touch(page);
                self.record(p);
                if from != Level::New && p >= self.frames {
                    self.lru_cost += self.costs.disk_ns;
                }
            }
        }
        self.charge(from);
        if self.levels.touch(page, from) {
            self.own_cost += self.costs.decompress_ns();
        }
        if matches!(from, Level::Compressed | Level::Disk) {
            self.refaulted = true;
            self.choose();
        } else if !self.refaulted && from == Level::New && self.minis.is_some() && self.evictions.is_multiple_of(64) {
            self.choose();
        }
        // A page that came in may push one page out, plus one more while
        // the split moves toward the target; an uncompressed hit moves
        // nothing (the live runtime never sees those).
        let mut moves: u32 = if matches!(from, Level::Uncompressed) { 0 } else { 2 };
        if self.target != 0 && self.harmful() {
            // Past the allowance between faults (new pages arriving):
            // nothing more is compressed, and room is made only as memory
            // fills, oldest first: cached pages are spilled before any
            // uncompressed page (newer than all of them) goes to disk as
            // it is. The split waits for the next fault's choice.
            while self.over_ram() {
                if self.levels.spill_oldest(actions) {
                    continue;
                }
                match self.levels.pop_victim() {
                    Some(victim) => {
                        self.evictions += 1;
                        self.levels.on_disk(victim);
                        actions.push(Action::SwapOut(victim));
                    }
                    None => break,
                }
            }
            moves = 0;
        }
        let goal = self.uncompressed_goal();
        while self.levels.uncompressed_len() > goal && (moves > 0 || self.levels.uncompressed_len() > self.frames) {
            moves = moves.saturating_sub(1);
            let victim = self.levels.pop_victim().expect("over the target, so not empty");
            self.evictions += 1;
            // A sample costs a compression now and, if the page returns,
            // a decompression: the samples' own total stays within half
            // the allowance, so that they never stop the analysis from
            // trying a share. What earlier shares spent does not count
            // against them: without samples r would keep the value it had
            // when compression stopped.
            let raw = match self.allowance {
                None => false,
                Some(a) => {
                    !self.evictions.is_multiple_of(RATIO_SAMPLE)
                        || self.sample_spent + self.costs.codec_ns > self.baseline_cost() * a / 2.0
                }
            };
            if self.target == 0 && raw {
                self.levels.on_disk(victim);
                actions.push(Action::SwapOut(victim));
            } else {
                if self.target == 0 {
                    self.sample_spent += self.costs.codec_ns;
                }
                self.own_cost += self.costs.compress_ns();
                actions.push(Action::Compress(victim));
            }
        }
        while self.over_ram() && self.levels.spill_oldest(actions) {}
    }

    fn compressed(&mut self, page: u64, bytes: u64, actions: &mut Vec<Action>) {
        // (adaptive-safe) A plain mean of the first 64 sizes, then a moving
        // average: with one page in 64 sampled at 0%, the first guess must
        // not linger.
        self.sizes_seen = (self.sizes_seen + 1).min(64);
        self.avg_bytes += (bytes as f64 - self.avg_bytes) / self.sizes_seen as f64;
        // (adaptive-safe) Counts classified under a ratio 25% off the
        // current one say the wrong thing about every target (a hit at 2:1
        // is a fault at 1:1): start them again.
        let ratio = self.ratio();
        if self.allowance.is_some() && (ratio - self.counted_ratio).abs() > 0.25 * self.counted_ratio {
            self.hits = [0.0; MAX_TARGETS];
            self.faults = [0.0; MAX_TARGETS];
            self.weight = 1.0;
            self.counted_ratio = ratio;
        }
        self.update_bounds();
        if let Some(m) = &mut self.minis {
            m.set_ratio(ratio);
        }
        // The splits charge the page what the run's compression took.
        self.measured(page, bytes);
        self.levels.compressed(page, bytes);
        while self.over_ram() && self.levels.spill_oldest(actions) {}
    }

    crate::levels::delegate_to_levels!();

    fn discarded(&mut self, page: u64) {
        self.levels.forget(page);
        if let Some(m) = &mut self.minis {
            m.discarded(page);
        }
    }

    fn wants_size(&self, page: u64) -> bool {
        self.minis.as_ref().is_some_and(|m| m.wants_size(page))
    }

    fn measured(&mut self, page: u64, bytes: u64) {
        if let Some(m) = &mut self.minis {
            m.sized(page, bytes as f64 / self.page_size as f64);
        }
    }

    fn codec_time(&mut self, compressions: u32, decompressions: u32, ns: f64) {
        let estimated =
            f64::from(compressions) * self.costs.compress_ns() + f64::from(decompressions) * self.costs.decompress_ns();
        self.own_cost += ns - estimated;
    }

    fn cache_limit(&self) -> u64 {
        let widest = self.targets[self.targets.len() - 1];
        self.ram - (self.frames as f64 * (1.0 - widest)).floor() as u64 * self.page_size
    }

    fn referenced(&mut self, page: u64, actions: &mut Vec<Action>) {
        match &mut self.minis {
            Some(m) => {
                m.referenced(page, actions);
                self.sync_baseline();
                self.levels.touch(page, Level::Uncompressed);
            }
            None => self.touch(page, Level::Uncompressed, actions),
        }
    }

    fn fault_service(&mut self, disk_ns: Option<f64>, cache_ns: f64) {
        // A cache hit is priced at what a cache fault costs all in; a disk
        // fault at its own measure, never below a cache fault's, and at the
        // constant until it is measured.
        self.costs.codec_ns = cache_ns;
        if let Some(disk_ns) = disk_ns {
            self.costs.disk_ns = disk_ns;
        }
        self.costs.disk_ns = self.costs.disk_ns.max(cache_ns);
        if let Some(m) = &mut self.minis {
            m.set_costs(self.costs);
        }
    }

    fn faults_only(&mut self) {
        self.faults_only = self.allowance.is_some();
        if self.faults_only {
            self.levels.use_workingset();
        }
    }

    fn uncompressed_limit(&self) -> usize {
        self.frames
    }

    fn set_ram(&mut self, ram_bytes: u64) {
        // The recency order and decay keep the size they were made with:
        // the mechanism's share moves by a few percent. The miniatures
        // follow, since a few percent decide whether a program's
        // footprint fits (see `Miniatures::set_frames`).
        self.ram = ram_bytes;
        self.frames = ((ram_bytes / self.page_size) as usize).max(2);
        if let Some(m) = &mut self.minis {
            m.set_frames(self.frames);
        }
        self.update_bounds();
        self.update_fit();
        self.uncompressed_target = self.bounds[self.target].0.max(1);
    }
}

#[cfg(test)]
mod tests;

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
//!   them: on `ccvm bench faults` it fits at 43%, where 37% sent 2,330
//!   pages to disk and 50% took 8% more cache faults.
//! * **On a mechanism that sees only faults** (the live runtime, told by
//!   [`Policy::faults_only`]), the recency order holds only faults: it
//!   cannot say what running uncompressed would have cost, and the
//!   analysis over it assumes LRU, which fault-order replacement is not.
//!   There each target's split is measured instead, on a sample of pages
//!   ([`Miniatures`], whose module docs give the design): the cheapest
//!   split lately is the target, and the 0% split's disk faults are the
//!   guard's baseline. The miniatures start when memory first fills. The
//!   guard then counts a compression as spent only once its page has left
//!   the cache: the splits have measured that the hits come, and charging
//!   the cache's whole content up front stopped every share before its
//!   first hit (sortmerge live: 344 cache faults in a run where the
//!   paper's policy serves 10,000 from the cache).

use crate::levels::Levels;
use crate::miniature::{Miniatures, WIDE_ON_RATIO, WIDE_SHARE};
use crate::recency::Recency;
use crate::{Action, Budget, Level, Policy};

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

/// The adaptive policy. See the [module docs](self).
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

    fn ratio(&self) -> f64 {
        let wide = self.targets.last().is_some_and(|&t| t > WIDE_SHARE);
        let max = if wide { MAX_RATIO_WIDE } else { MAX_RATIO };
        // (adaptive-safe) The cache's own mean once it holds a few dozen
        // pages: a run of incompressible pages through a moving average
        // of 64 sizes made every share look useless and stopped the cache
        // (`ccvm bench faults`, whose real pages come in runs by source).
        let mean = match (self.allowance, self.levels.compressed_len()) {
            (Some(_), c) if c >= RATIO_SAMPLE as usize => self.levels.compressed_bytes() as f64 / c as f64,
            _ => self.avg_bytes,
        };
        (self.page_size as f64 / mean).clamp(1.0, max)
    }

    fn regions(&self, t: usize) -> (usize, usize) {
        let u = (self.frames as f64 * (1.0 - self.shares[t])).floor() as usize;
        let e = u + ((self.frames - u) as f64 * self.ratio()) as usize;
        (u, e)
    }

    /// Counts a touch at recency position `p` for every target.
    fn record(&mut self, p: usize) {
        let smallest = self.bounds[..self.n_shares].iter().map(|b| b.0).min().unwrap_or(0);
        if p < smallest || p >= self.reach {
            return;
        }
        self.weight /= self.decay;
        if self.weight > 1e200 {
            for x in self.hits.iter_mut().chain(self.faults.iter_mut()) {
                *x /= self.weight;
            }
            self.weight = 1.0;
        }
        for t in 0..self.n_shares {
            let (u, e) = self.bounds[t];
            if p >= e {
                self.faults[t] += self.weight;
            } else if p >= u {
                self.hits[t] += self.weight;
            }
        }
    }

    /// What paging without compression would have cost so far, ns: plain
    /// LRU read off the recency order, or, on a fault-only mechanism,
    /// `none` measured on a sample.
    fn baseline_cost(&self) -> f64 {
        match &self.minis {
            Some(_) => self.none_cost,
            None => self.lru_cost,
        }
    }

    /// Adds `none`'s disk faults estimated since the last call to its
    /// cost, at today's price of a disk fault. Repricing the whole
    /// estimate instead, when the runtime's measured price moved, moved
    /// the baseline under the guard's feet: a price falling from 300 to
    /// 130 µs made compression's past look like a loss of half of
    /// everything and stopped it for the rest of the run.
    fn sync_baseline(&mut self) {
        if let Some(m) = &self.minis {
            let faults = m.none_disk_faults();
            self.none_cost += (faults - self.none_faults) * self.costs.disk_ns;
            self.none_faults = faults;
        }
    }

    /// The guard's estimate of `none`'s disk faults so far, when it
    /// measures them on a sample (after [`Policy::faults_only`]).
    pub fn none_estimate(&self) -> Option<f64> {
        self.minis.as_ref().map(Miniatures::none_disk_faults)
    }

    /// This policy's paging cost so far, ns, less (with measured splits)
    /// the compression of the pages the cache holds now: an investment
    /// whose return, hits, the splits have measured but which has not yet
    /// come; it is counted once the page leaves the cache.
    fn spent(&self) -> f64 {
        match self.minis {
            Some(_) => self.own_cost - self.levels.compressed_len() as f64 * self.costs.compress_ns(),
            None => self.own_cost,
        }
    }

    /// Whether compression has so far cost more than the allowance over
    /// paging without it (then the target is 0).
    ///
    /// With measured splits, `none`'s cost is an estimate from a sample,
    /// a few percent off either way, while the policy's own cost is
    /// counted exactly: compared whole, an estimate 2.5% low kept graph at
    /// 0% for a whole run that the splits said a 50% cache would halve
    /// (`ccvm run --workload graph --size 128M --ram 110M`). So the two are
    /// compared only over the stretches in which the policy compressed (a
    /// target above 0), and there the estimate is corrected by what the
    /// stretches at 0% measured: at 0% the policy *is* `none`, up to the
    /// pages sampled for the ratio, so its own cost over them, divided by
    /// the estimate's, is the estimate's error on this program. The excess
    /// over the compressing stretches may reach the allowance of `none`'s
    /// whole cost.
    ///
    /// The estimate grows in steps (a sampled page's disk fault counts for
    /// the sampling rate's worth), so a stretch is judged by the allowance
    /// only once the estimate has taken [`JUDGED_STEPS`] steps in it;
    /// before that, by four times the allowance. Judged fault by fault, a
    /// one-fault stretch with no step looked like a pure loss, and graph
    /// at 110M turned compression on and off 13,000 times, never keeping
    /// it long enough to hit.
    ///
    /// Two more slacks bound what the guard may mistake for harm:
    /// * the estimate's sampling error: over compressing stretches in which
    ///   it took n steps, two standard errors, 2·√(n+1) steps. Without it,
    ///   the first stretch of a run, judged when `none` had taken two
    ///   steps, looked like a loss of a disk fault's worth per eviction
    ///   and kept compression off for the next 17,000 evictions of the
    ///   CPython cache (`docs/programs/kvcache.py` in 178 MiB), which went
    ///   to disk raw;
    /// * one fill of the target's cache: compressing pages that no touch
    ///   has yet called back is how a share is tried, and its cost is paid
    ///   back only when they return.
    ///
    /// Both are bounded in absolute terms, so the guard's promise becomes:
    /// no more than the allowance over `none`, plus the sampling error,
    /// plus one cache's worth of compressions.
    fn harmful(&self) -> bool {
        let Some(a) = self.allowance else {
            return false;
        };
        let Some(m) = &self.minis else {
            return self.spent() + self.costs.disk_ns > self.baseline_cost() * (1.0 + a);
        };
        let base = self.baseline_cost();
        let proving = self.target != 0 && base - self.on_base < JUDGED_STEPS * m.rate() as f64 * self.costs.disk_ns;
        // One sampled disk fault: the estimate's step.
        let step = m.rate() as f64 * self.costs.disk_ns;
        let steps = (self.on_total + if self.target != 0 { base - self.on_base } else { 0.0 }) / step;
        let noise = 2.0 * (steps + 1.0).sqrt() * step;
        let (u, e) = self.bounds[self.target.max(1)];
        let fill = (e - u) as f64 * self.costs.compress_ns();
        let allowed = if proving { 4.0 * a } else { a } * base + noise + fill;
        let excess = self.excess_now();
        excess > 0.0 && excess + self.costs.disk_ns > allowed
    }

    /// `excess`, with the stretch since the last `choose` if the policy
    /// compresses in it.
    fn excess_now(&self) -> f64 {
        if self.target == 0 {
            self.excess
        } else {
            self.excess + (self.spent() - self.last_spent) - (self.baseline_cost() - self.last_base) * self.correction()
        }
    }

    /// The factor that corrects `none`'s sampled estimate: own cost over
    /// the estimate at 0%, once the estimate has counted 64 disk faults
    /// there (1 before), within [0.5, 2].
    fn correction(&self) -> f64 {
        if self.off_base < 64.0 * self.costs.disk_ns {
            1.0
        } else {
            (self.off_spent / self.off_base).clamp(0.5, 2.0)
        }
    }

    /// Charges a touch served from `from` to the policy's own cost.
    fn charge(&mut self, from: Level) {
        match from {
            Level::Disk => self.own_cost += self.costs.disk_ns,
            Level::Compressed => self.own_cost += self.costs.decompress_ns(),
            Level::New | Level::Uncompressed => {}
        }
    }

    fn choose(&mut self) {
        self.update_fit();
        let cost = |t: usize| self.hits[t] * self.costs.codec_ns + self.faults[t] * self.costs.disk_ns;
        // Ties go to the smaller cache: compression must earn its keep.
        let best = match &self.minis {
            Some(m) => m.best_from(self.target),
            None => (0..self.n_shares)
                .filter(|&t| self.shares[t] <= WIDE_SHARE || self.ratio() >= WIDE_ON_RATIO || Some(t) == self.fit)
                .fold(0, |b, t| if cost(t) < cost(b) { t } else { b }),
        };
        if self.target == 0 {
            self.off_spent += self.spent() - self.last_spent;
            self.off_base += self.baseline_cost() - self.last_base;
        }
        self.excess = self.excess_now();
        self.last_spent = self.spent();
        self.last_base = self.baseline_cost();
        if self.target == 0 {
            self.on_base = self.last_base;
        }
        let best = if self.harmful() { 0 } else { best };
        if self.target != 0 && best == 0 {
            self.on_total += self.last_base - self.on_base;
        }
        self.target = best;
        self.uncompressed_target = self.bounds[best].0.max(1);
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

    /// Uncompressed frames to keep: the target's, or, with the guard
    /// (`adaptive-safe`), more if that many leave room in the cache for
    /// every other page the program has.
    fn uncompressed_goal(&self) -> usize {
        let goal = self.uncompressed_target.min(self.frames);
        if self.allowance.is_none() || self.target == 0 {
            return goal;
        }
        goal.max(self.fitting_uncompressed())
    }

    /// The most uncompressed frames with which the program's footprint so
    /// far (every page the policy knows) fits in memory, the rest
    /// compressed at the cache's mean charge a page, less 1% for that
    /// mean's drift. Past it, a bigger cache sends no page to disk that a
    /// smaller one would: it only turns uncompressed hits into cache
    /// faults.
    fn fitting_uncompressed(&self) -> usize {
        let (u, c, d) = self.levels.occupancy();
        let page = self.page_size as f64;
        let mean = match c {
            0 => page / self.ratio(),
            c => self.levels.compressed_bytes() as f64 / c as f64,
        };
        if mean >= page {
            return 0;
        }
        let fit = (self.ram as f64 - (u + c + d) as f64 * mean) / (page - mean);
        (fit - self.frames as f64 / 100.0).clamp(0.0, self.frames as f64) as usize
    }

    /// Moves the fitting share to where the program's footprint fits now
    /// (by half a percent or more), up to the widest target.
    fn update_fit(&mut self) {
        let Some(i) = self.fit else {
            return;
        };
        let widest = self.targets[self.targets.len() - 1];
        let share = (1.0 - self.fitting_uncompressed() as f64 / self.frames as f64).clamp(0.0, widest);
        if (share - self.shares[i]).abs() < 0.005 {
            return;
        }
        self.shares[i] = share;
        self.update_bounds();
        if let Some(m) = &mut self.minis {
            m.set_share(i, share);
        }
        if self.target == i {
            self.uncompressed_target = self.bounds[i].0.max(1);
        }
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
        self.levels.compressed(page, bytes);
        while self.over_ram() && self.levels.spill_oldest(actions) {}
    }

    crate::levels::delegate_to_levels!();

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

    fn fault_service(&mut self, disk_ns: f64, cache_ns: f64) {
        // A disk fault costs what a cache fault costs all in, plus what its
        // service takes beyond the cache's (see the runtime's measurement).
        self.costs.disk_ns = self.costs.codec_ns + (disk_ns - cache_ns).max(0.0);
        if let Some(m) = &mut self.minis {
            m.set_disk_ns(self.costs.disk_ns);
        }
    }

    fn faults_only(&mut self) {
        self.faults_only = self.allowance.is_some();
    }

    fn uncompressed_limit(&self) -> usize {
        self.frames
    }

    fn set_ram(&mut self, ram_bytes: u64) {
        // The recency order and decay keep the size they were made with:
        // the mechanism's share moves by a few percent. The miniatures
        // follow, since a few percent decide whether a program's
        // footprint fits (`ccvm bench faults`: sized at the start, the
        // 37% split fitted in the sample and spilled 400 pages live).
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
mod tests {
    use super::*;
    use crate::levels::testing::drive;

    use crate::levels::testing::PAGE;

    /// (disk faults, cache hits) over `refs`, every page compressing to
    /// `bytes`.
    fn replay(p: &mut Adaptive, refs: &[u64], bytes: u64) -> (u64, u64) {
        let d = drive(p, refs, bytes, 100 * PAGE);
        (d.disk, d.hits)
    }

    /// A policy over 100 pages with these disk and codec costs, ns.
    fn adaptive(disk_ns: f64, codec_ns: f64) -> Adaptive {
        Adaptive::new(
            budget(),
            Costs {
                disk_ns,
                codec_ns,
                compress_share: 0.5,
            },
        )
    }

    /// 130 pages touched at random in 100 frames, each compressing to
    /// 2,048 bytes: the footprint fits with 69 pages uncompressed (the
    /// other 61 in 31 frames' worth of cache, less 1% of the frames).
    /// The fixed targets either side are 23% (77 uncompressed, whose
    /// cache of 23 frames holds 46 of the 53 others: disk faults) and 37%
    /// (63 uncompressed: 6 more cache faults in every 130 touches).
    #[test]
    fn a_footprint_that_fits_keeps_the_most_uncompressed_pages_that_fit() {
        let mut x: u64 = 7;
        let refs: Vec<u64> = (0..40_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 33) % 130
            })
            .collect();
        for faults_only in [false, true] {
            let mut p = adaptive(5e6, 1e5).with_allowance(SAFE_ALLOWANCE);
            if faults_only {
                p.faults_only();
            }
            let warm = drive(&mut p, &refs[..20_000], 2048, 100 * PAGE).disk;
            let (uncompressed, _, on_disk) = p.occupancy();
            assert!(
                (66..=69).contains(&uncompressed),
                "{uncompressed} uncompressed (faults only: {faults_only})"
            );
            assert!(
                on_disk <= 2,
                "{on_disk} pages on disk after {warm} disk faults (faults only: {faults_only})"
            );
        }
    }

    fn budget() -> Budget {
        crate::levels::testing::budget(100)
    }

    #[test]
    fn a_loop_slightly_larger_than_memory_turns_compression_on() {
        // 130 pages cycled: LRU faults on every touch; with a 2:1 cache at
        // a 23% share or more, all of them fit.
        let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
        let mut p = adaptive(5e6, 1e5);
        let (disk, hits) = replay(&mut p, &refs, PAGE / 2);
        assert!(p.target_share() >= 0.23, "share {}", p.target_share());
        assert!(hits > disk * 5, "hits {hits}, disk {disk}");
    }

    /// The guard pays what the mechanism says the codec took: on a loop
    /// where compression pays at the estimated cost, compressions that
    /// each really cost a disk fault soon stop it.
    #[test]
    fn paid_codec_time_above_the_estimate_stops_compression_sooner() {
        let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
        let compressions = |paid_per_compression: Option<f64>| {
            let mut p = adaptive(5e6, 1e5).with_allowance(SAFE_ALLOWANCE);
            let mut level = std::collections::HashMap::new();
            let mut count = 0;
            for &r in &refs {
                let mut actions = Vec::new();
                p.touch(r, *level.get(&r).unwrap_or(&Level::New), &mut actions);
                level.insert(r, Level::Uncompressed);
                let mut i = 0;
                while i < actions.len() {
                    match actions[i] {
                        Action::Compress(v) => {
                            count += 1;
                            level.insert(v, Level::Compressed);
                            let mut more = Vec::new();
                            p.compressed(v, PAGE / 2, &mut more);
                            actions.extend(more);
                            if let Some(ns) = paid_per_compression {
                                p.codec_time(1, 0, ns);
                            }
                        }
                        Action::Spill(v) | Action::SwapOut(v) => {
                            level.insert(v, Level::Disk);
                        }
                        Action::Watch(_) => {}
                    }
                    i += 1;
                }
            }
            count
        };
        let estimated = compressions(None);
        let as_estimated = compressions(Some(0.5e5));
        let dear = compressions(Some(5e6));
        assert_eq!(as_estimated, estimated, "paying the estimate changes nothing");
        assert!(
            dear * 10 < estimated,
            "{dear} compressions at a disk fault each, {estimated} at the estimate"
        );
    }

    #[test]
    #[should_panic(expected = "targets must ascend from 0")]
    fn targets_must_ascend_from_zero() {
        Adaptive::with_targets(
            budget(),
            Costs {
                disk_ns: 1.0,
                codec_ns: 1.0,
                compress_share: 0.5,
            },
            &[0.1, 0.5],
        );
    }

    #[test]
    fn finer_targets_take_a_small_cache_where_ten_percent_is_too_much() {
        // 104 pages cycled in 100 frames at 2:1: every touch is at recency
        // 103. A 3% share (97 + 6 pages) falls 1 short, so all would
        // fault; 6% (94 + 12 pages) serves all from the cache, as 10% does,
        // with 4 more frames uncompressed: ties go to the smaller share.
        let refs: Vec<u64> = (0..60).flat_map(|_| 0..104u64).collect();
        let mut paper = adaptive(5e6, 1e5);
        replay(&mut paper, &refs, PAGE / 2);
        let mut fine = Adaptive::with_targets(
            budget(),
            Costs {
                disk_ns: 5e6,
                codec_ns: 1e5,
                compress_share: 0.5,
            },
            &FINE_TARGETS,
        );
        let (disk, hits) = replay(&mut fine, &refs, PAGE / 2);
        assert_eq!(paper.target_share(), 0.10);
        assert_eq!(fine.target_share(), 0.06);
        assert!(hits > 58 * 104 && disk < 2 * 104, "hits {hits}, disk {disk}");
    }

    #[test]
    fn only_touches_some_target_would_hit_are_events() {
        // 100 frames at 2:1: U runs from 50 (50%) to 100 (0%), E up to 150.
        let mut p = adaptive(5e6, 1e5);
        for position in [0, 49, 150, 400, crate::recency::BEYOND] {
            p.record(position);
            assert_eq!(
                (p.weight, p.hits, p.faults),
                (1.0, [0.0; MAX_TARGETS], [0.0; MAX_TARGETS]),
                "p = {position}"
            );
        }
        p.record(120);
        assert!(p.weight > 1.0, "the clock advances");
        assert_eq!(p.faults[0], p.weight, "beyond 100 frames: a fault at 0%");
        assert_eq!(p.hits[4], p.weight, "within 150 pages at 50%: a hit");
    }

    #[test]
    fn the_split_moves_one_page_per_fault() {
        // The first fault from disk already picks a compressed share, but
        // the uncompressed region shrinks one page per fault after it.
        let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
        let mut p = adaptive(5e6, 1e5);
        let d = drive(&mut p, &refs[..131], PAGE / 2, 100 * PAGE);
        assert!(p.target_share() > 0.0);
        assert_eq!(d.most_compressed_at_once, 2);
        assert_eq!(p.occupancy().0, 99, "one page moved");
        let mut p = adaptive(5e6, 1e5);
        let d = drive(&mut p, &refs, PAGE / 2, 100 * PAGE);
        assert_eq!(d.most_compressed_at_once, 2);
        assert_eq!(p.occupancy().0, p.uncompressed_target, "the split reached its target");
    }

    #[test]
    fn a_loop_that_fits_keeps_compression_off() {
        let refs: Vec<u64> = (0..60).flat_map(|_| 0..90u64).collect();
        let mut p = adaptive(5e6, 1e5);
        let (disk, hits) = replay(&mut p, &refs, PAGE / 2);
        assert_eq!(p.target_share(), 0.0);
        assert_eq!((disk, hits), (0, 0));
    }

    /// Plain LRU's disk faults over `frames` frames (first touches free).
    fn lru_faults(refs: &[u64], frames: usize) -> u64 {
        let mut order: Vec<u64> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut faults = 0;
        for &r in refs {
            match order.iter().position(|&x| x == r) {
                Some(i) => {
                    faults += u64::from(order.len() - 1 - i >= frames);
                    order.remove(i);
                }
                None => faults += u64::from(!seen.insert(r)),
            }
            order.push(r);
        }
        faults
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// `adaptive-safe`, on phases of loops and random touches over
        /// working sets around memory's size, pages compressing 1:1 to 4:1, disks from as
        /// cheap as the codec to 50 times dearer: the policy's paging cost
        /// (as the simulator charges it: disk faults, and the codec's
        /// compression and decompression costs, split at a random share
        /// from 0.2 to 0.9, per compression and per decompression, counting every
        /// spilled page as decompressed again) stays within 5% of
        /// plain LRU's, plus one codec round trip per frame for the drain.
        #[test]
        fn the_policy_never_costs_much_more_than_lru(
            phases in proptest::collection::vec((60u64..180, 0u64..3, 1u64..6000), 1..6),
            bytes in 1024u64..=4096,
            disk_per_codec in 1.0f64..50.0,
            compress_share in 0.2f64..0.9,
            seed in 0u64..1000,
        ) {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut refs = Vec::new();
            for (set, kind, len) in phases {
                for i in 0..len {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    refs.push(match kind {
                        0 => i % set,
                        1 => x % set,
                        _ => if x % 4 == 0 { x % (2 * set) } else { x % (set / 2) },
                    });
                }
            }
            let codec_ns = 1e5;
            let disk_ns = codec_ns * disk_per_codec;
            let costs = Costs { disk_ns, codec_ns, compress_share };
            let mut p = Adaptive::new(budget(), costs).with_allowance(SAFE_ALLOWANCE);
            let d = drive(&mut p, &refs, bytes, 100 * PAGE);
            let count = |f: fn(&Action) -> bool| d.actions.iter().filter(|a| f(a)).count() as f64;
            let compressions = count(|a| matches!(a, Action::Compress(_)));
            // Every spilled page decompressed once more, at most.
            let spills = count(|a| matches!(a, Action::Spill(_)));
            let own = d.disk as f64 * disk_ns
                + compressions * codec_ns * compress_share
                + (spills + d.hits as f64) * codec_ns * (1.0 - compress_share);
            let lru = lru_faults(&refs, 100) as f64 * disk_ns;
            proptest::prop_assert!(
                own <= 1.05 * lru + 100.0 * codec_ns,
                "own {own:.0} against LRU {lru:.0} ({} disk, {} hits, {compressions} compressions)",
                d.disk,
                d.hits
            );
        }
    }

    #[test]
    fn incompressible_pages_or_a_cheap_disk_keep_compression_off() {
        let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
        let mut p = adaptive(5e6, 1e5);
        replay(&mut p, &refs, PAGE);
        assert_eq!(p.target_share(), 0.0, "ratio 1 gains nothing");
        let mut p = adaptive(1e5, 5e6);
        replay(&mut p, &refs, PAGE / 2);
        assert_eq!(p.target_share(), 0.0, "codec dearer than disk");
    }
}

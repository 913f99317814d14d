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
//! Choices, where the paper leaves room:
//! * The targets are the paper's by default. [`FINE_TARGETS`] (policy
//!   `adaptive-fine`) adds 3% and 6%: just below a program's footprint the
//!   right cache holds a few pages, and 10% of memory is too much. At
//!   paper 000's CPU speed that took hashindex's mean paging-time
//!   reduction over its interesting region from 11% to 48% and objheap's
//!   from 0% to 30% (`docs/results.md`).
//! * Only "interesting" touches count and advance time: those that would
//!   be cache hits under some target (M/2 ≤ p < the largest E), as §3.2
//!   defines them. A touch beyond every target's reach, a first touch
//!   included, is a fault under all of them alike, so it cannot change the
//!   choice; it leaves the counts and the clock alone. Each interesting
//!   event multiplies the weight of all earlier ones by d, with d^M = 0.2
//!   (the M-th most recent event weighs 20% of the newest), implemented by
//!   growing the increment.
//! * The target is chosen again only when a compressed or swapped page is
//!   touched, and memory moves between the levels on demand (§3.1), one
//!   page per fault: a fault compresses the oldest uncompressed page to
//!   make room for its own, and one more while more than the target's
//!   uncompressed frames are held; the oldest compressed pages spill while
//!   memory is over budget. Moving the whole way at once compressed up to
//!   half of memory on one fault, wasted when the next faults reversed the
//!   choice. At paper 000's CPU speed, one page per fault brought graph's
//!   mean paging time over its interesting region from 1.95 to 1.61 times
//!   LRU's (`docs/results.md`). Pages are always compressed before they go
//!   to disk, as the paper assumes, so a 0% target compresses and spills
//!   at once.
//! * The ratio r is the page size over a moving average (weight 1/64) of
//!   the bytes each compressed page takes, clamped to [1, 4].
//! * The recency order covers three memories' worth of pages, enough for
//!   E at a 50% share and a ratio of 4 (2.5 M) with room to spare.
//! * Cost model: `disk_ns` per disk fault, `codec_ns` per cache hit
//!   (compress plus decompress, or, live, the whole cost of a cache fault).

use crate::levels::Levels;
use crate::recency::Recency;
use crate::{Action, Budget, Level, Policy};

/// The target compressed shares of memory, as paper 000's simulations.
pub const TARGETS: [f64; 5] = [0.0, 0.10, 0.23, 0.37, 0.50];

/// The paper's targets plus 3% and 6% (policy `adaptive-fine`): ccvm's
/// extension for sizes just below a program's footprint, where a 10% share
/// is already too big a step.
pub const FINE_TARGETS: [f64; 7] = [0.0, 0.03, 0.06, 0.10, 0.23, 0.37, 0.50];

/// Room for every target of a target set.
const MAX_TARGETS: usize = 8;

/// Costs the analysis weighs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// Cost of a disk fault, nanoseconds.
    pub disk_ns: f64,
    /// Cost of a compression-cache hit, nanoseconds.
    pub codec_ns: f64,
}

/// The adaptive policy. See the [module docs](self).
pub struct Adaptive {
    frames: usize,
    page_size: u64,
    ram: u64,
    costs: Costs,
    recency: Recency,
    targets: &'static [f64],
    hits: [f64; MAX_TARGETS],
    faults: [f64; MAX_TARGETS],
    weight: f64,
    decay: f64,
    avg_bytes: f64,
    /// (U, E) per target for the current ratio, kept up to date by
    /// `compressed`, since every touch consults them.
    bounds: [(usize, usize); MAX_TARGETS],
    /// The largest E: touches at or beyond it are faults under every target.
    reach: usize,
    target: usize,
    uncompressed_target: usize,
    levels: Levels,
}

impl Adaptive {
    /// An adaptive policy over `budget` weighing `costs`; it starts with no
    /// compression cache.
    ///
    /// ```
    /// use ccvm_policy::{Action, Adaptive, Budget, Costs, Level, Policy};
    /// let budget = Budget { ram_bytes: 100 * 4096, page_size: 4096 };
    /// let mut p = Adaptive::new(budget, Costs { disk_ns: 5e6, codec_ns: 1e5 });
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
    /// let p = Adaptive::with_targets(budget, Costs { disk_ns: 5e6, codec_ns: 1e5 }, &FINE_TARGETS);
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
            hits: [0.0; MAX_TARGETS],
            faults: [0.0; MAX_TARGETS],
            weight: 1.0,
            decay: 0.2f64.powf(1.0 / frames as f64),
            avg_bytes: budget.page_size as f64 / 2.0,
            bounds: [(0, 0); MAX_TARGETS],
            reach: 0,
            target: 0,
            uncompressed_target: frames,
            levels: Levels::default(),
        };
        a.update_bounds();
        a
    }

    fn update_bounds(&mut self) {
        for t in 0..self.targets.len() {
            self.bounds[t] = self.regions(t);
        }
        self.reach = self.bounds.iter().map(|b| b.1).max().unwrap_or(0);
    }

    /// The compressed share currently chosen.
    pub fn target_share(&self) -> f64 {
        self.targets[self.target]
    }

    fn ratio(&self) -> f64 {
        (self.page_size as f64 / self.avg_bytes).clamp(1.0, 4.0)
    }

    fn regions(&self, t: usize) -> (usize, usize) {
        let u = (self.frames as f64 * (1.0 - self.targets[t])).floor() as usize;
        let e = u + ((self.frames - u) as f64 * self.ratio()) as usize;
        (u, e)
    }

    /// Counts a touch at recency position `p` for every target.
    fn record(&mut self, p: usize) {
        let smallest = self.bounds[self.targets.len() - 1].0;
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
        for t in 0..self.targets.len() {
            let (u, e) = self.bounds[t];
            if p >= e {
                self.faults[t] += self.weight;
            } else if p >= u {
                self.hits[t] += self.weight;
            }
        }
    }

    fn choose(&mut self) {
        let cost = |t: usize| self.hits[t] * self.costs.codec_ns + self.faults[t] * self.costs.disk_ns;
        // Ties go to the smaller cache: compression must earn its keep.
        let best = (0..self.targets.len()).fold(0, |b, t| if cost(t) < cost(b) { t } else { b });
        self.target = best;
        self.uncompressed_target = self.bounds[best].0.max(1);
    }

    fn over_ram(&self) -> bool {
        self.levels.used(self.page_size) > self.ram
    }
}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        if self.targets == FINE_TARGETS {
            "adaptive-fine"
        } else {
            "adaptive"
        }
    }

    fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>) {
        let p = self.recency.touch(page);
        self.record(p);
        self.levels.touch(page, from);
        if matches!(from, Level::Compressed | Level::Disk) {
            self.choose();
        }
        // A page that came in may push one page out, plus one more while
        // the split moves toward the target; an uncompressed hit moves
        // nothing (the live runtime never sees those).
        let mut moves: u32 = if matches!(from, Level::Uncompressed) { 0 } else { 2 };
        while self.levels.uncompressed.len() > self.uncompressed_target.min(self.frames)
            && (moves > 0 || self.levels.uncompressed.len() > self.frames)
        {
            moves = moves.saturating_sub(1);
            let victim = self
                .levels
                .uncompressed
                .pop_oldest()
                .expect("over the target, so not empty");
            actions.push(Action::Compress(victim));
        }
        while self.over_ram() && self.levels.spill_oldest(actions) {}
    }

    fn compressed(&mut self, page: u64, bytes: u64, actions: &mut Vec<Action>) {
        self.avg_bytes += (bytes as f64 - self.avg_bytes) / 64.0;
        self.update_bounds();
        self.levels.compressed(page, bytes);
        while self.over_ram() && self.levels.spill_oldest(actions) {}
    }

    crate::levels::delegate_to_levels!();

    fn cache_limit(&self) -> u64 {
        self.ram - self.regions(self.targets.len() - 1).0 as u64 * self.page_size
    }

    fn uncompressed_limit(&self) -> usize {
        self.frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::levels::testing::drive;

    const PAGE: u64 = 4096;

    /// (disk faults, cache hits) over `refs`, every page compressing to
    /// `bytes`.
    fn replay(p: &mut Adaptive, refs: &[u64], bytes: u64) -> (u64, u64) {
        let d = drive(p, refs, bytes, 100 * PAGE);
        (d.disk, d.hits)
    }

    /// A policy over 100 pages with these disk and codec costs, ns.
    fn adaptive(disk_ns: f64, codec_ns: f64) -> Adaptive {
        Adaptive::new(budget(), Costs { disk_ns, codec_ns })
    }

    fn budget() -> Budget {
        Budget {
            ram_bytes: 100 * PAGE,
            page_size: PAGE,
        }
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

    #[test]
    #[should_panic(expected = "targets must ascend from 0")]
    fn targets_must_ascend_from_zero() {
        Adaptive::with_targets(
            budget(),
            Costs {
                disk_ns: 1.0,
                codec_ns: 1.0,
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

//! What each compressed share of memory would cost a program, measured
//! while it runs on a sample of its pages: how `adaptive-safe` sizes the
//! cache, and checks it does no harm, on a mechanism that sees only
//! faults.
//!
//! Paper 000 §3 predicts each share's cost from the recency order, which
//! assumes LRU replacement. A mechanism that sees only faults (the live
//! runtime) does not replace by LRU: uncompressed pages leave in the order
//! they faulted in, and a compression cache changes that order, since a
//! page served from it comes back as the newest. On a program whose
//! sweeps suit fault order, the cache then costs disk faults the analysis
//! never predicts, and the harm can come long after the cache was used
//! (`docs/results.md`, "Live: the splits measured on a sample"). Nor can
//! such a mechanism read what running uncompressed would have cost off its
//! recency order, since it never sees the touches that decide it.
//!
//! [`Miniatures`] measures both instead, as miniature simulation does for
//! caches: for each target share it runs that share's split (a FIFO of
//! uncompressed pages, as the mechanism keeps them, and an LRU compression
//! cache) over a hash-chosen sample of one page in S, with 1/S of the
//! memory, and keeps each split's decayed paging cost; the 0% split is the
//! no-cache run, and its disk faults, times S, estimate that run's. A
//! split changes nothing when it holds a touched page uncompressed (the
//! mechanism would not have seen the touch), so the only touches the
//! miniatures need are those of sampled pages some split no longer holds
//! uncompressed; when a split lets go of a page the run may hold mapped,
//! it asks the mechanism to *watch* it ([`Action::Watch`]): unmap it but
//! keep it, so that its next touch faults and is seen.
//!
//! Choices:
//! * S is a power of two chosen so that the miniatures keep at least 512
//!   frames (or all M, for a memory of fewer), and at most 64. An
//!   estimate's error falls as the sampled pages that fault grow, and
//!   every watched touch costs a fault: 512 frames is where the estimate
//!   came within a few percent live while the watching stayed a small
//!   share of the faults (`docs/results.md`, "Why the policy's and the
//!   helper's constants are what they are").
//! * Watching is bounded by thinning: once 512 watched touches have been
//!   seen at a rate, if they exceed one in eight of the run's faults, the
//!   rate doubles (down to 64 sampled frames). The pages the doubled rate
//!   still samples stay where they were in every split, so nothing is
//!   restarted; the hash makes the new sample a subset of the old. A
//!   watched touch costs a small fraction of a disk fault (the frame is
//!   moved back, nothing is decoded), so one watch per eight faults keeps
//!   the watching a small share of the paging.
//! * A watched page's touch tells the policy nothing else: the sampled
//!   pages are replaced as every other page is, so the run measured is the
//!   run that would have happened unwatched.
//! * Costs decay per sampled touch seen, so that the split's memory spans
//!   as many events as the paper's analysis weighs over a whole memory.
//! * Pages are sampled by a multiplicative hash of their number, not by
//!   address ranges, so that a program's regions are sampled alike.
//! * Each cached page is charged its own size: a split's cache holds its
//!   share of the sampled frames, and each page in it takes its compressed
//!   size as last told ([`Miniatures::sized`]: the run compressed it, or
//!   the mechanism measured a copy when it watched it,
//!   [`Policy::measured`](crate::Policy::measured)), or one over the
//!   ratio for a page never sized. A split with less uncompressed memory
//!   than the run caches pages the run still holds, so the run's ratio
//!   says nothing about them; sized by it, every split looked useless
//!   when a program's first evicted pages did not compress, and the run
//!   sent the compressible pages that followed to disk raw (`ccvm bench
//!   faults`: 1.73 s against 1.11 s sized; `docs/results.md`, "Watched
//!   pages measured for the splits"). The simulator does not measure, so
//!   its splits charge unsized pages the ratio, as the live runtime's did.
//! * Splits past half of memory compressed (`adaptive-safe`'s widest
//!   targets) run only while pages compress at least 6 to 1 (and stop
//!   below 5): at lower ratios the paper's shares already reach as far,
//!   and a split holding a tenth of memory uncompressed lets go of nearly
//!   every sampled page, so its watches thin the sample every split is
//!   judged on (kvcache at 178 MiB: sampling went from 1 page in 64 to 1 in
//!   256 and the run took a sixth longer). A split that starts running
//!   starts empty, at the highest cost of the others, and earns its way
//!   down as the costs decay.
//! * Each split is charged as the policy charges itself: a disk fault, a
//!   compression per page sent to the cache, a decompression per cache hit
//!   and per compressed page read back; the 0% split writes pages raw. A
//!   page's compression is charged when it leaves the cache (hit back or
//!   spilled), not when it enters: until then it is an investment whose
//!   return is not yet known, as the policy counts its own (see
//!   `Adaptive::spent`). Charged on entry, every compressing split looked
//!   dearer than 0% while a program filled its memory, before any page
//!   came back.
//! * The policy moves to the cheapest split only when the current one costs
//!   more by one standard error of the two costs (each a decayed count of
//!   sampled events): [`Miniatures::best_from`], since switching on noise
//!   moves the split back and forth (`docs/results.md`, "The start, the
//!   guard's noise, and the splits' own memory").
//! * Dropping the cache (a move to 0%) must also pay over a horizon of
//!   [`LONG_MEMORIES`] memories' worth of sampled touches, a second
//!   decayed cost kept beside the first. A program that allocates in
//!   bursts (node's V8 heap) makes the cache's splits pay a compression for
//!   every page they spill during a burst while the split without a cache
//!   pays nothing, and its disk faults come only later, when the program
//!   walks the data again: over one memory's worth the 0% split looked
//!   cheapest at each burst, the run dropped its cache, sent the next
//!   tens of thousands of pages to disk raw and faulted them back from
//!   the swap file, where the same miniatures' whole-run counts put the
//!   0% split at six times the 23% split's disk faults (`docs/results.md`,
//!   "node at 180M: dropping the cache on a burst"). Moving between caches
//!   of other sizes, and turning a cache on, stay on the short horizon:
//!   they move a page per fault. A move to a smaller cache (not to none)
//!   is not free, though: it sends to disk the pages the smaller cache
//!   cannot hold, and the recent costs that favour it do not see that.
//!   So a cache of up to half of memory only grows: the policy moves from
//!   it to a wider share, or to none by the long horizon and the guard,
//!   never to a narrower cache (the fitting share still follows the
//!   program's footprint down). Judged on the recent costs alone, node
//!   moved from a 23% cache to 10% near its end, when the last memory's
//!   worth of touches fell on recent pages, and its last collection read
//!   the spilled pages back from the swap file. A cache that is too big
//!   costs cache faults, a tenth of a disk fault each; one too small costs
//!   disk faults. Requiring instead that the smaller split had saved, over
//!   the long horizon, a disk fault's worth for every page it would spill
//!   gained about half as much (`docs/results.md`, "The default policy
//!   against a fixed 20% cache"). The wide shares, which run only while
//!   pages compress 6 to 1, still move down on the recent costs: stuck at
//!   three quarters of memory compressed, a program whose hot pages grew
//!   would fault them from the cache millions of times.
//! * One split may move: `adaptive-safe`'s fitting share (see
//!   `Adaptive`), set by [`Miniatures::set_share`]. It always runs, and
//!   its pages stay where they are when it moves. Every split is resized
//!   when the policy's memory changes ([`Miniatures::set_frames`]): the
//!   run's memory shrinks as ccvm's own tables grow, and splits sized at
//!   the start would then measure more memory than the run has, enough
//!   for a split that fits the sample to spill live.
//! * A page the program drops ([`Miniatures::discarded`]) leaves every
//!   split at no cost, as it leaves the run: it holds no memory in any of
//!   them, and its next touch is new to all. Kept where they were, dropped
//!   pages held the splits' frames as they had held the run's; measured
//!   against that (`docs/results.md`, "Dropped pages leave the books"),
//!   the two did about alike, and this is the one that mirrors the run.
//! * A small budget samples at least one page in [`MIN_RATE`] (down to the
//!   floor of frames): the splits' tables are charged to the budget they
//!   size, and at every page of a 3 MiB budget they took a quarter of it.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::queue::RecencyQueue;
use crate::{Action, Costs, Level};

mod cache;

use cache::ChargedCache;

/// Memories' worth of sampled touches the long costs span (weighing the
/// oldest at a fifth, as the short costs weigh one memory's worth).
const LONG_MEMORIES: f64 = 8.0;

/// The most pages sampled per page kept (see the module docs).
const MAX_RATE: u64 = 64;

/// The fewest pages sampled per page kept, where memory allows.
const MIN_RATE: u64 = 4;

/// Frames the miniatures keep at least, where memory allows.
const MIN_FRAMES: usize = 512;

/// The fewest frames the miniatures are thinned to.
const FLOOR_FRAMES: usize = 64;

/// Watched touches are kept to at most one per this many faults.
const FAULTS_PER_WATCH: u64 = 8;

/// Watched touches seen before their share is judged.
const WATCHES_JUDGED: u64 = 512;

/// Splits with more than this share compressed are wide: they run only
/// while the ratio is high (see the module docs).
pub(crate) const WIDE_SHARE: f64 = 0.5;

/// The ratio at which wide splits start running, and below which they stop.
pub(crate) const WIDE_ON_RATIO: f64 = 6.0;
const WIDE_OFF_RATIO: f64 = 5.0;

/// Which splits hold each sampled page on disk, and whether written
/// compressed: two bits per split (bit `2i` on disk in split `i`, bit
/// `2i + 1` compressed), one map for all. A map per split cost seven
/// entries per page the program ever evicted, charged to the RAM budget:
/// sqlite3 with a 17 MiB heap in 3 MiB, sampled at every page, held 0.8
/// MiB more than `none` and faulted a quarter more.
#[derive(Default)]
struct DiskBits(FxHashMap<u64, u16>);

/// The most splits [`DiskBits`] holds: two bits each.
const MAX_SPLITS: usize = u16::BITS as usize / 2;

impl DiskBits {
    /// Split `i`'s two bits.
    fn mask(i: usize) -> u16 {
        0b11 << (2 * i)
    }

    /// Whether split `i` held `page` on disk, and compressed; takes it off.
    fn take(&mut self, page: u64, i: usize) -> Option<bool> {
        let bits = self.0.get_mut(&page)?;
        if *bits & (1 << (2 * i)) == 0 {
            return None;
        }
        let compressed = *bits & (2 << (2 * i)) != 0;
        *bits &= !Self::mask(i);
        if *bits == 0 {
            self.0.remove(&page);
        }
        Some(compressed)
    }

    /// Split `i` writes `page` to disk.
    fn put(&mut self, page: u64, i: usize, compressed: bool) {
        *self.0.entry(page).or_default() |= (1 | u16::from(compressed) << 1) << (2 * i);
    }

    /// Split `i` holds nothing on disk.
    fn clear_split(&mut self, i: usize) {
        self.0.retain(|_, bits| {
            *bits &= !Self::mask(i);
            *bits != 0
        });
    }
}

/// What a split's events cost now: the costs, the decay's current weight,
/// and the sampling rate (each sampled disk fault stands for `rate`).
#[derive(Clone, Copy)]
struct Price {
    costs: Costs,
    weight: f64,
    long_weight: f64,
    rate: u64,
}

/// What each sampled page is charged in a cache, in pages: its own
/// compressed size where the mechanism has told it, else one over the
/// ratio.
struct Sizes<'a> {
    known: &'a FxHashMap<u64, f32>,
    fallback: f32,
}

impl Sizes<'_> {
    fn of(&self, page: u64) -> f32 {
        self.known.get(&page).copied().unwrap_or(self.fallback)
    }
}

/// One target share's split, over the sampled pages.
struct Split {
    /// Its place among the splits: its bits in [`DiskBits`].
    index: usize,
    share: f64,
    /// Whether the split runs (a wide split runs only at high ratios).
    active: bool,
    /// Sampled frames for uncompressed pages.
    uncompressed_cap: usize,
    /// Sampled pages' worth of memory the cache holds (its pages charged
    /// their sizes, see [`Sizes`]).
    compressed_cap: f64,
    /// Uncompressed pages in fault order (a touch of one is unseen).
    uncompressed: RecencyQueue,
    /// Cached pages, least recently used first.
    compressed: ChargedCache,
    /// Decayed paging cost, ns times the current weight.
    cost: f64,
    /// The same over [`LONG_MEMORIES`] memories' worth of touches, ns
    /// times the current long weight.
    long_cost: f64,
    /// Disk faults, each times the sampling rate when it was taken.
    disk_faults: f64,
}

impl Split {
    /// A touch of `page`; pushes onto `released` the pages it stops
    /// holding uncompressed.
    /// A touch of `page`; `seen` when the mechanism saw it although the
    /// page was mapped (a write scan's report), which reorders a split that
    /// holds it uncompressed, as the mechanism's own order is reordered.
    fn touch(
        &mut self,
        disk: &mut DiskBits,
        page: u64,
        seen: bool,
        price: &Price,
        sizes: &Sizes,
        released: &mut Vec<u64>,
    ) {
        let Price { costs, rate, .. } = *price;
        if self.uncompressed.contains(page) {
            if seen {
                self.uncompressed.push_newest(page);
            }
            return;
        }
        let mut ns = 0.0;
        if self.compressed.remove(page) {
            ns += costs.compress_ns() + costs.decompress_ns();
        } else if let Some(compressed) = disk.take(page, self.index) {
            self.disk_faults += rate as f64;
            ns += costs.disk_ns;
            if compressed {
                ns += costs.decompress_ns();
            }
        }
        self.uncompressed.push_newest(page);
        while self.uncompressed.len() > self.uncompressed_cap {
            let out = self.uncompressed.pop_oldest().expect("over its frames, so not empty");
            released.push(out);
            if self.compressed_cap > 0.0 {
                self.compressed.push_newest(out, sizes.of(out));
            } else {
                disk.put(out, self.index, false);
            }
        }
        self.trim(disk, price, ns);
    }

    /// Spills the oldest cached pages while the cache holds more than its
    /// share, and charges `ns` plus their compressions.
    fn trim(&mut self, disk: &mut DiskBits, price: &Price, mut ns: f64) {
        while self.compressed.charged() > self.compressed_cap + 1e-6 && self.compressed.len() > 0 {
            let out = self.compressed.pop_oldest().expect("not empty");
            ns += price.costs.compress_ns();
            disk.put(out, self.index, true);
        }
        self.cost += ns * price.weight;
        self.long_cost += ns * price.long_weight;
    }
}

/// Each target share's split run over a sample of pages. See the module
/// docs.
///
/// Invariant: every sampled page a split has stopped holding uncompressed,
/// and that has not been touched since, has been named in an
/// [`Action::Watch`].
///
/// ```
/// use ccvm_policy::{Action, Costs, Level, Miniatures};
/// let costs = Costs { disk_ns: 100e3, codec_ns: 20e3, compress_share: 0.5 };
/// // Two frames, small enough that every page is sampled; 0% and 50%.
/// let mut m = Miniatures::new(2, &[0.0, 0.5], costs, 2.0);
/// let mut watch = Vec::new();
/// for page in [0, 1, 2] {
///     m.touch(page, Level::New, &mut watch);
/// }
/// // The 0% split let page 0 go; the 50% one, holding one page
/// // uncompressed, pages 0 and 1.
/// assert_eq!(watch, [Action::Watch(0), Action::Watch(1)]);
/// assert!(m.touch(0, Level::Uncompressed, &mut watch)); // its watched touch
/// assert_eq!(m.none_disk_faults(), 1.0); // uncompressed, it came from disk
/// assert_eq!(m.best(), 1); // the cache served it for less
/// ```
pub struct Miniatures {
    rate: u64,
    frames: usize,
    costs: Costs,
    ratio: f64,
    splits: Vec<Split>,
    disk: DiskBits,
    watched: FxHashSet<u64>,
    released: Vec<u64>,
    weight: f64,
    decay: f64,
    long_weight: f64,
    long_decay: f64,
    /// Watched touches and faults seen at this rate.
    watches: u64,
    faults: u64,
    /// The split whose share the policy moves ([`Miniatures::float`]).
    floating: Option<usize>,
    /// Sampled pages' compressed sizes, in pages, as last told
    /// ([`Miniatures::sized`]).
    sizes: FxHashMap<u64, f32>,
}

impl Miniatures {
    /// Splits for each of `shares` (compressed shares of memory, starting
    /// at 0) over `frames` frames of memory, at compression ratio `ratio`.
    ///
    /// # Panics
    ///
    /// If `shares` does not start at 0, or has more than eight shares.
    pub fn new(frames: usize, shares: &[f64], costs: Costs, ratio: f64) -> Miniatures {
        assert_eq!(shares.first(), Some(&0.0), "the first split is the one without a cache");
        assert!(
            shares.len() <= MAX_SPLITS,
            "at most eight splits (two bits each in a u16)"
        );
        let mut rate = 1;
        while rate < MAX_RATE && frames / (2 * rate as usize) >= MIN_FRAMES {
            rate *= 2;
        }
        // The splits' tables are charged to the budget they size: a small
        // budget samples thinner, down to the floor (see the module docs).
        while rate < MIN_RATE && frames / (2 * rate as usize) >= FLOOR_FRAMES {
            rate *= 2;
        }
        let splits = shares
            .iter()
            .enumerate()
            .map(|(index, &share)| Split {
                index,
                share,
                active: share <= WIDE_SHARE || ratio >= WIDE_ON_RATIO,
                uncompressed_cap: 0,
                compressed_cap: 0.0,
                uncompressed: RecencyQueue::default(),
                compressed: ChargedCache::default(),
                cost: 0.0,
                long_cost: 0.0,
                disk_faults: 0.0,
            })
            .collect();
        let mut m = Miniatures {
            rate,
            frames,
            costs,
            ratio,
            splits,
            disk: DiskBits::default(),
            watched: FxHashSet::default(),
            released: Vec::new(),
            weight: 1.0,
            decay: 1.0,
            long_weight: 1.0,
            long_decay: 1.0,
            watches: 0,
            faults: 0,
            floating: None,
            sizes: FxHashMap::default(),
        };
        m.size_splits();
        m
    }

    /// Split `index`'s share will move ([`Miniatures::set_share`]): it
    /// always runs, whatever its share and the ratio.
    pub fn float(&mut self, index: usize) {
        self.floating = Some(index);
        self.splits[index].active = true;
    }

    /// Moves the floating split `index` to `share`; its pages stay where
    /// they are, and its caps change at once.
    pub fn set_share(&mut self, index: usize, share: f64) {
        debug_assert_eq!(Some(index), self.floating, "only the floating split moves");
        self.splits[index].share = share;
        self.size_splits();
    }

    /// The policy manages `frames` frames from now on: every split is
    /// resized, its pages staying where they are.
    pub fn set_frames(&mut self, frames: usize) {
        self.frames = frames;
        self.size_splits();
    }

    /// Prices faults at `costs` from now on; events already counted keep
    /// the price they were counted at.
    pub fn set_costs(&mut self, costs: Costs) {
        self.costs = costs;
    }

    /// Sizes every split, and the decay, for the current rate and ratio.
    fn size_splits(&mut self) {
        let rate = self.rate as f64;
        for s in &mut self.splits {
            s.uncompressed_cap = ((self.frames as f64 * (1.0 - s.share)) / rate).floor().max(1.0) as usize;
            s.compressed_cap = self.frames as f64 * s.share / rate;
        }
        let frames = self.frames.max(1) as f64;
        self.decay = 0.2f64.powf(rate / frames);
        self.long_decay = 0.2f64.powf(rate / (LONG_MEMORIES * frames));
    }

    /// Samples half as many pages: those the doubled rate still samples
    /// stay where they are in every split, the others are forgotten.
    fn thin(&mut self) {
        self.rate *= 2;
        let rate = self.rate;
        let keep = move |page: u64| sampled_at(page, rate);
        for s in &mut self.splits {
            s.uncompressed.retain(keep);
            s.compressed.retain(keep);
        }
        self.disk.0.retain(|&p, _| keep(p));
        self.sizes.retain(|&p, _| keep(p));
        self.size_splits();
        self.watches = 0;
        self.faults = 0;
    }

    /// One page in this many is sampled.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The compression ratio changed: each cache holds its share of memory
    /// times `ratio` pages.
    pub fn set_ratio(&mut self, ratio: f64) {
        // Told at every compression; a move under 0.1% changes no cap
        // by a page in a thousand.
        if (ratio - self.ratio).abs() < 1e-3 * self.ratio {
            return;
        }
        self.ratio = ratio;
        let active = || self.splits.iter().filter(|s| s.active);
        let highest = active().map(|s| s.cost).fold(0.0, f64::max);
        let highest_long = active().map(|s| s.long_cost).fold(0.0, f64::max);
        let floating = self.floating;
        for s in self
            .splits
            .iter_mut()
            .filter(|s| s.share > WIDE_SHARE && Some(s.index) != floating)
        {
            let run = if s.active {
                ratio >= WIDE_OFF_RATIO
            } else {
                ratio >= WIDE_ON_RATIO
            };
            if run != s.active {
                s.active = run;
                s.uncompressed = RecencyQueue::default();
                s.compressed = ChargedCache::default();
                self.disk.clear_split(s.index);
                s.cost = highest;
                s.long_cost = highest_long;
                s.disk_faults = 0.0;
            }
        }
        self.size_splits();
    }

    /// The mechanism served a touch of `page` from `from`. Appends an
    /// [`Action::Watch`] for each page a split lets go of. Returns whether
    /// this was only a watched page's touch (a page the run held mapped,
    /// `from` [`Level::Uncompressed`]), which the policy must not count as
    /// a reference of its own.
    pub fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>) -> bool {
        self.touch_seen(page, from, false, actions)
    }

    /// A write scan saw mapped page `page` written (see
    /// [`Policy::referenced`](crate::Policy::referenced)): a split holding
    /// it uncompressed makes it its newest, as the run does; one that does
    /// not pays the fault it would have taken.
    pub fn referenced(&mut self, page: u64, actions: &mut Vec<Action>) {
        self.touch_seen(page, Level::Uncompressed, true, actions);
    }

    /// The program dropped `page`'s contents: every split lets go of it
    /// without a cost (its next touch is new to them all), and it is no
    /// longer watched.
    pub fn discarded(&mut self, page: u64) {
        self.watched.remove(&page);
        if !sampled_at(page, self.rate) {
            return;
        }
        self.sizes.remove(&page);
        for s in &mut self.splits {
            s.uncompressed.remove(page);
            s.compressed.remove(page);
            let _ = self.disk.take(page, s.index);
        }
    }

    fn touch_seen(&mut self, page: u64, from: Level, seen: bool, actions: &mut Vec<Action>) -> bool {
        let watched = !seen && self.watched.remove(&page) && from == Level::Uncompressed;
        if watched {
            self.watches += 1;
        } else if !seen {
            self.faults += 1;
        }
        if self.watches >= WATCHES_JUDGED
            && self.watches * FAULTS_PER_WATCH > self.faults
            && self.frames / (2 * self.rate as usize) >= FLOOR_FRAMES
        {
            self.thin();
        }
        if !sampled_at(page, self.rate) {
            // A page watched before the sample was thinned.
            return watched;
        }
        self.weight /= self.decay;
        self.long_weight /= self.long_decay;
        if self.weight > 1e200 || self.long_weight > 1e200 {
            for s in &mut self.splits {
                s.cost /= self.weight;
                s.long_cost /= self.long_weight;
            }
            self.weight = 1.0;
            self.long_weight = 1.0;
        }
        let mut released = std::mem::take(&mut self.released);
        let price = self.price();
        let sizes = Sizes {
            known: &self.sizes,
            fallback: (1.0 / self.ratio) as f32,
        };
        for s in self.splits.iter_mut().filter(|s| s.active) {
            s.touch(&mut self.disk, page, seen, &price, &sizes, &mut released);
        }
        for p in released.drain(..) {
            if self.watched.insert(p) {
                actions.push(Action::Watch(p));
            }
        }
        self.released = released;
        watched
    }

    fn price(&self) -> Price {
        Price {
            costs: self.costs,
            weight: self.weight,
            long_weight: self.long_weight,
            rate: self.rate,
        }
    }

    /// `page` compresses to `share` of a page (the mechanism compressed
    /// it, or measured a copy of it): if it is sampled, every split that
    /// caches it charges it that from now on, and spills what no longer
    /// fits. Pages never sized are charged one over the ratio.
    pub fn sized(&mut self, page: u64, share: f64) {
        if !sampled_at(page, self.rate) {
            return;
        }
        let share = share.clamp(0.0, 1.0) as f32;
        self.sizes.insert(page, share);
        let price = self.price();
        for s in self.splits.iter_mut().filter(|s| s.active) {
            if s.compressed.recharge(page, share) {
                s.trim(&mut self.disk, &price, 0.0);
            }
        }
    }

    /// Whether `page` is sampled and its size is not known yet (see
    /// [`Miniatures::sized`]).
    pub fn wants_size(&self, page: u64) -> bool {
        sampled_at(page, self.rate) && !self.sizes.contains_key(&page)
    }

    /// The index of the cheapest split lately (ties go to the smaller
    /// cache: compression must earn its keep).
    pub fn best(&self) -> usize {
        (0..self.splits.len()).fold(0, |b, i| {
            if self.splits[i].active && self.splits[i].cost < self.splits[b].cost {
                i
            } else {
                b
            }
        })
    }

    /// The cheapest split lately, unless the split at index `current`
    /// costs no more than one standard error beyond it: each cost is a
    /// decayed count of sampled events, whose error grows as its square
    /// root (in disk faults' worth), and a switch on noise alone costs the
    /// moves to the new split and, often, the moves back. A move from a
    /// cache to the split without one must also be beyond the noise over
    /// the long horizon; from a cache of up to half of memory, no move is
    /// made to a smaller one (see the module docs).
    pub fn best_from(&self, current: usize) -> usize {
        let best = self.best();
        let Some(cur) = self.splits.get(current).filter(|s| s.active) else {
            return best;
        };
        let beyond_noise = |x: f64, y: f64| x - y > (x + y).sqrt();
        let unit = self.costs.disk_ns * self.weight;
        if !beyond_noise(cur.cost / unit, self.splits[best].cost / unit) {
            return current;
        }
        if best == 0 {
            let unit = self.costs.disk_ns * self.long_weight;
            if !beyond_noise(cur.long_cost / unit, self.splits[0].long_cost / unit) {
                return current;
            }
        } else if self.splits[best].share < cur.share && cur.share <= WIDE_SHARE {
            // A smaller cache spills what it cannot hold (see the module
            // docs): a cache up to half of memory only grows.
            return current;
        }
        best
    }

    /// The run without a cache: its disk faults so far, estimated (the 0%
    /// split's, each times the sampling rate it was taken at).
    pub fn none_disk_faults(&self) -> f64 {
        self.splits[0].disk_faults
    }
}

/// Whether `page` is sampled at one page in `rate` (a power of two): the
/// high bits of a multiplicative hash, so that neighbouring pages land
/// apart, and a page sampled at a rate is sampled at every lower one.
fn sampled_at(page: u64, rate: u64) -> bool {
    (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40).is_multiple_of(rate)
}

#[cfg(test)]
mod tests;

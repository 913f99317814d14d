//! Replaying a trace through a policy.

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::{Action, Level, Policy};

use crate::{CodecCosts, Trace};

/// The cost model of a simulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    /// Cost of reading a page from disk, nanoseconds (paper 000: 5 ms).
    pub disk_read_ns: f64,
    /// Cost of writing a page to disk; 0 as in paper 000 (writes overlap
    /// with computation).
    pub disk_write_ns: f64,
    /// Multiplies measured codec times (CPU speed relative to this one).
    pub cpu_factor: f64,
    /// Models the live runtime's trapped pages (`ccvm_policy::Traps`):
    /// with `Some(share)`, a reference to an uncompressed page reaches the
    /// policy only if that share of the oldest uncompressed pages holds it,
    /// as only those fault live; with `None` every reference does (exact
    /// recency), which equals the live runtime's traps off for a trace it
    /// recorded (its traces hold only what faulted). With `Some`, the
    /// policy is told it sees only faults (`Policy::faults_only`) and its
    /// watched pages' references reach it as a trapped page's would.
    pub trap_share: Option<f64>,
    /// Charge each compressed page the live store's slack share as well
    /// (`ccvm_policy::Charge::Slack`), as the live runtime's policy does;
    /// off, a page costs its compressed bytes and mapping entry only, as
    /// in paper 000's simulations.
    pub store_slack: bool,
}

impl SimConfig {
    /// How a compressed page is charged to the policy: with the store's
    /// slack when [`SimConfig::store_slack`] says so.
    pub fn charge(&self) -> ccvm_policy::Charge {
        if self.store_slack {
            ccvm_policy::Charge::Slack
        } else {
            ccvm_policy::Charge::Entry
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            disk_read_ns: 5e6,
            disk_write_ns: 0.0,
            cpu_factor: 1.0,
            trap_share: None,
            store_slack: false,
        }
    }
}

/// What a simulation counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SimResult {
    /// First touches.
    pub zero_faults: u64,
    /// Touches served from the compression cache.
    pub cache_hits: u64,
    /// Touches served from disk.
    pub disk_faults: u64,
    /// References to trapped or watched pages (with
    /// [`SimConfig::trap_share`]).
    pub trap_faults: u64,
    /// Pages compressed.
    pub compressions: u64,
    /// Pages decompressed (cache hits and compressed pages read from disk).
    pub decompressions: u64,
    /// Pages written to disk.
    pub disk_writes: u64,
    /// Codec time, nanoseconds (after the CPU factor).
    pub codec_ns: f64,
    /// Paging time: disk reads and writes plus codec time, nanoseconds.
    pub paging_ns: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum Where {
    New,
    Uncompressed,
    /// In the cache with this image.
    Compressed(u32),
    /// On disk: compressed with this image, or raw.
    Disk(Option<u32>),
}

/// Replays `trace` through `policy`, charging compressions with `costs`
/// (the codec the cache uses) and disk traffic as `config` says.
///
/// Every reference is given to the policy with the level the simulated
/// memory holds the page at; references to uncompressed pages too, so the
/// policy sees exact recency (the live runtime sees only faults).
pub fn simulate(trace: &Trace, costs: &CodecCosts, policy: &mut dyn Policy, config: &SimConfig) -> SimResult {
    let mut replay = Replay::new(trace, config);
    if replay.traps.is_some() {
        policy.faults_only();
    }
    let mut codec_ns = 0u64;
    for (t, &page) in trace.refs.iter().enumerate() {
        replay.discards_until(trace, t as u64, policy);
        replay.images_until(trace, t as u64 + 1);
        let mut work = Work::default();
        let Some(from) = replay.reference(page as usize, costs, &mut work) else {
            continue;
        };
        policy.touch(page as u64, from, &mut replay.actions);
        replay.carry_out(policy, costs, config, &mut work);
        if work.compressions + work.decompressions > 0 {
            codec_ns += work.paid;
            let paid = work.paid as f64 * config.cpu_factor;
            policy.codec_time(work.compressions, work.decompressions, paid);
        }
        if let Some(traps) = &mut replay.traps {
            traps.rebalance(&mut replay.to_trap);
            replay.to_trap.clear();
        }
    }
    let mut r = replay.result;
    r.codec_ns = codec_ns as f64 * config.cpu_factor;
    r.paging_ns = r.disk_faults as f64 * config.disk_read_ns + r.disk_writes as f64 * config.disk_write_ns + r.codec_ns;
    r
}

/// Codec work one reference causes, told to the policy as paid.
#[derive(Default)]
struct Work {
    compressions: u32,
    decompressions: u32,
    /// Nanoseconds, before the CPU factor.
    paid: u64,
}

/// The simulated memory: where each page is, and what it holds.
struct Replay {
    at: Vec<Where>,
    /// The newest image recorded for each page so far.
    image: Vec<u32>,
    /// Pages compressed before any image of theirs is recorded take their
    /// first one.
    first_image: Vec<u32>,
    /// The next of the trace's images to take.
    next_image: usize,
    /// The next of the trace's dropped ranges to carry out.
    next_discard: usize,
    result: SimResult,
    actions: Vec<Action>,
    traps: Option<ccvm_policy::Traps>,
    to_trap: Vec<u64>,
    /// Uncompressed pages the policy asked to watch (fault-only only).
    watched: Vec<bool>,
}

impl Replay {
    fn new(trace: &Trace, config: &SimConfig) -> Replay {
        let pages = trace
            .pages()
            .max(trace.refs.iter().map(|&p| p as usize + 1).max().unwrap_or(0));
        let mut first_image = vec![u32::MAX; pages];
        for &(_, page, id) in trace.images.iter().rev() {
            first_image[page as usize] = id;
        }
        Replay {
            at: vec![Where::New; pages],
            image: vec![u32::MAX; pages],
            first_image,
            next_image: 0,
            next_discard: 0,
            result: SimResult::default(),
            actions: Vec::new(),
            traps: config.trap_share.map(ccvm_policy::Traps::new),
            to_trap: Vec::new(),
            watched: vec![false; pages],
        }
    }

    /// Takes the images recorded up to time `time`: those recorded after
    /// reference t was counted (time t + 1) are the contents its evictions
    /// compressed.
    fn images_until(&mut self, trace: &Trace, time: u64) {
        while self.next_image < trace.images.len() && trace.images[self.next_image].0 <= time {
            let (_, p, id) = trace.images[self.next_image];
            self.image[p as usize] = id;
            self.next_image += 1;
        }
    }

    /// Carries out the ranges the program dropped before reference
    /// `time` (after `time` references): each page held leaves its level
    /// and the policy, and is new again, as the live runtime does.
    fn discards_until(&mut self, trace: &Trace, time: u64, policy: &mut dyn Policy) {
        while self.next_discard < trace.discards.len() && trace.discards[self.next_discard].0 <= time {
            let (_, first, pages) = trace.discards[self.next_discard];
            self.next_discard += 1;
            let start = (first as usize).min(self.at.len());
            let end = (first as usize).saturating_add(pages as usize).min(self.at.len());
            for p in start..end {
                match self.at[p] {
                    Where::New => continue,
                    Where::Uncompressed => {
                        if let Some(traps) = &mut self.traps {
                            traps.evicted(p as u64);
                        }
                    }
                    Where::Compressed(_) | Where::Disk(_) => {}
                }
                self.at[p] = Where::New;
                self.watched[p] = false;
                policy.discarded(p as u64);
            }
        }
    }

    /// A reference to page `p`: the level it is served from, with its
    /// codec work added to `work`, and the page now uncompressed; `None`
    /// when the policy does not see it (a mapped page, with traps).
    fn reference(&mut self, p: usize, costs: &CodecCosts, work: &mut Work) -> Option<Level> {
        let r = &mut self.result;
        let from = match self.at[p] {
            Where::New => {
                r.zero_faults += 1;
                Level::New
            }
            Where::Uncompressed => {
                if let Some(traps) = &mut self.traps {
                    // A mapped page's reference is not seen, unless the
                    // page is trapped or watched.
                    let was_watched = std::mem::take(&mut self.watched[p]);
                    if !traps.touch(p as u64) && !was_watched {
                        return None;
                    }
                    r.trap_faults += 1;
                }
                Level::Uncompressed
            }
            Where::Compressed(id) => {
                r.cache_hits += 1;
                r.decompressions += 1;
                work.decompressions += 1;
                work.paid += costs.decompress_ns.get(id as usize).copied().unwrap_or(0) as u64;
                Level::Compressed
            }
            Where::Disk(Some(id)) => {
                r.disk_faults += 1;
                r.decompressions += 1;
                work.decompressions += 1;
                work.paid += costs.decompress_ns[id as usize] as u64;
                Level::Disk
            }
            Where::Disk(None) => {
                r.disk_faults += 1;
                Level::Disk
            }
        };
        if let (Some(traps), false) = (&mut self.traps, from == Level::Uncompressed) {
            traps.resident(p as u64);
        }
        self.at[p] = Where::Uncompressed;
        // A watch left from before the page went out is void.
        self.watched[p] = false;
        Some(from)
    }

    /// Carries out the policy's actions, those its follow-ups add too.
    fn carry_out(&mut self, policy: &mut dyn Policy, costs: &CodecCosts, config: &SimConfig, work: &mut Work) {
        let mut i = 0;
        while i < self.actions.len() {
            match self.actions[i] {
                Action::Compress(v) => {
                    let bytes = self.compress(v as usize, costs, work);
                    // Follow-up spills join the end of the same list.
                    policy.compressed(v, config.charge().of(bytes), &mut self.actions);
                }
                Action::Spill(v) => {
                    let v = v as usize;
                    self.result.disk_writes += 1;
                    self.at[v] = match self.at[v] {
                        Where::Compressed(id) if id != u32::MAX => Where::Disk(Some(id)),
                        _ => Where::Disk(None),
                    };
                }
                Action::SwapOut(v) => {
                    self.result.disk_writes += 1;
                    self.at[v as usize] = Where::Disk(None);
                    if let Some(traps) = &mut self.traps {
                        traps.evicted(v);
                    }
                }
                Action::Watch(v) => {
                    if self.traps.is_some() && self.at[v as usize] == Where::Uncompressed {
                        self.watched[v as usize] = true;
                    }
                }
            }
            i += 1;
        }
        self.actions.clear();
    }

    /// Compresses page `v` with its current image (a page with none is
    /// held whole); returns its compressed bytes.
    fn compress(&mut self, v: usize, costs: &CodecCosts, work: &mut Work) -> usize {
        let id = if self.image[v] != u32::MAX {
            self.image[v]
        } else {
            self.first_image[v]
        };
        let bytes = if id == u32::MAX {
            PAGE_SIZE
        } else {
            work.paid += costs.compress_ns[id as usize] as u64;
            costs.size[id as usize] as usize
        };
        self.result.compressions += 1;
        work.compressions += 1;
        self.at[v] = Where::Compressed(id);
        if let Some(traps) = &mut self.traps {
            traps.evicted(v as u64);
        }
        bytes
    }
}

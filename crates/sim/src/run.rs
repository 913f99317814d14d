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
    let pages = trace
        .pages()
        .max(trace.refs.iter().map(|&p| p as usize + 1).max().unwrap_or(0));
    let mut at = vec![Where::New; pages];
    // The newest image recorded for each page so far.
    let mut image = vec![u32::MAX; pages];
    // Pages compressed before any image of theirs is recorded take their
    // first one.
    let mut first_image = vec![u32::MAX; pages];
    for &(_, page, id) in trace.images.iter().rev() {
        first_image[page as usize] = id;
    }
    let mut next_image = 0;
    let mut r = SimResult::default();
    let mut actions = Vec::new();
    let mut codec_ns = 0u64;
    let mut traps = config.trap_share.map(ccvm_policy::Traps::new);
    let mut to_trap = Vec::new();
    // Uncompressed pages the policy asked to watch (fault-only only).
    let mut watched = vec![false; pages];
    if traps.is_some() {
        policy.faults_only();
    }
    for (t, &page) in trace.refs.iter().enumerate() {
        // Images recorded after reference t was counted (time t + 1) are
        // the contents its evictions compressed.
        while next_image < trace.images.len() && trace.images[next_image].0 <= t as u64 + 1 {
            let (_, p, id) = trace.images[next_image];
            image[p as usize] = id;
            next_image += 1;
        }
        let p = page as usize;
        // Codec work this reference causes, told to the policy as paid.
        let (mut compressions, mut decompressions, mut paid) = (0u32, 0u32, 0u64);
        let from = match at[p] {
            Where::New => {
                r.zero_faults += 1;
                Level::New
            }
            Where::Uncompressed => {
                if let Some(traps) = &mut traps {
                    // A mapped page's reference is not seen, unless the
                    // page is trapped or watched.
                    let was_watched = std::mem::take(&mut watched[p]);
                    if !traps.touch(page as u64) && !was_watched {
                        continue;
                    }
                    r.trap_faults += 1;
                }
                Level::Uncompressed
            }
            Where::Compressed(id) => {
                r.cache_hits += 1;
                r.decompressions += 1;
                decompressions += 1;
                paid += costs.decompress_ns.get(id as usize).copied().unwrap_or(0) as u64;
                Level::Compressed
            }
            Where::Disk(Some(id)) => {
                r.disk_faults += 1;
                r.decompressions += 1;
                decompressions += 1;
                paid += costs.decompress_ns[id as usize] as u64;
                Level::Disk
            }
            Where::Disk(None) => {
                r.disk_faults += 1;
                Level::Disk
            }
        };
        if let (Some(traps), false) = (&mut traps, from == Level::Uncompressed) {
            traps.resident(page as u64);
        }
        at[p] = Where::Uncompressed;
        // A watch left from before the page went out is void.
        watched[p] = false;
        policy.touch(page as u64, from, &mut actions);
        let mut i = 0;
        while i < actions.len() {
            match actions[i] {
                Action::Compress(v) => {
                    let v = v as usize;
                    let id = if image[v] != u32::MAX { image[v] } else { first_image[v] };
                    let (bytes, id) = if id == u32::MAX {
                        (PAGE_SIZE as u64, u32::MAX)
                    } else {
                        paid += costs.compress_ns[id as usize] as u64;
                        (costs.size[id as usize] as u64, id)
                    };
                    r.compressions += 1;
                    compressions += 1;
                    at[v] = Where::Compressed(id);
                    if let Some(traps) = &mut traps {
                        traps.evicted(v as u64);
                    }
                    // Follow-up spills join the end of the same list.
                    policy.compressed(v as u64, config.charge().of(bytes as usize), &mut actions);
                }
                Action::Spill(v) => {
                    let v = v as usize;
                    r.disk_writes += 1;
                    at[v] = match at[v] {
                        Where::Compressed(id) if id != u32::MAX => Where::Disk(Some(id)),
                        _ => Where::Disk(None),
                    };
                }
                Action::SwapOut(v) => {
                    r.disk_writes += 1;
                    at[v as usize] = Where::Disk(None);
                    if let Some(traps) = &mut traps {
                        traps.evicted(v);
                    }
                }
                Action::Watch(v) => {
                    if traps.is_some() && at[v as usize] == Where::Uncompressed {
                        watched[v as usize] = true;
                    }
                }
            }
            i += 1;
        }
        actions.clear();
        if compressions + decompressions > 0 {
            codec_ns += paid;
            policy.codec_time(compressions, decompressions, paid as f64 * config.cpu_factor);
        }
        if let Some(traps) = &mut traps {
            traps.rebalance(&mut to_trap);
            to_trap.clear();
        }
    }
    r.codec_ns = codec_ns as f64 * config.cpu_factor;
    r.paging_ns = r.disk_faults as f64 * config.disk_read_ns + r.disk_writes as f64 * config.disk_write_ns + r.codec_ns;
    r
}

//! Cooperative compression and migration among the private L2s of a chip
//! multiprocessor (paper 003 chapter 7).
//!
//! Each core runs its own trace (a multiprogrammed mix) with a private L1
//! and a private [`AdaptiveCache`] L2; the cores share the memory link.
//! Cores advance in cycle order: the core furthest behind runs its next
//! reference. Four [`Cooperation`]s are compared, as 003 §7.5 does:
//! private L2s alone, adaptive compression alone, migration alone, and
//! both together. A line pushed out of a core's L2 may migrate, compressed,
//! to the L2 of the core whose marginal gain is lowest, if that is lower
//! than its own; the owner finds it there on its next miss (a directory
//! lookup and two network hops) and takes it back.
//!
//! Choices the paper leaves open: a migrated line enters the host's way-2
//! as its most recent line (it was in use by its owner); the directory is
//! exact and free; a line pushed out by a migrated one leaves the chip
//! (it does not migrate in turn); the chip's network is never congested.

use std::collections::HashMap;

use crate::adaptive::{AdaptiveCache, Thresholds};
use crate::cache::{Config, Victim};
use crate::system::{Core, Machine, OnChip, Run, Timing, L2};
use crate::trace::{LineTrace, MAX_LINE};
use crate::Level;

/// What the cores' L2s do to share capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cooperation {
    /// Private L2s, uncompressed, each on its own.
    Private,
    /// Each L2 compresses adaptively (003 §6.7), no migration.
    Compression,
    /// No compression of a core's own lines; lines leaving an L2 migrate
    /// when its marginal gain is above the first threshold.
    Migration,
    /// Both: compression by the first two thresholds, migration above the
    /// third (003 §7.4).
    Cooperative,
}

/// A chip of several cores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chip {
    /// Each core's L1 (plain).
    pub l1: Config,
    /// Bytes of each core's L2.
    pub l2_size: usize,
    /// Ways of each L2.
    pub ways: usize,
    /// Latencies.
    pub timing: Timing,
    /// Cycles of one hop on the chip's network (003 Table 6.4: 5).
    pub hop: u64,
    /// Lines cross the memory link compressed.
    pub link_compression: bool,
    /// The policy.
    pub cooperation: Cooperation,
    /// Compression thresholds.
    pub thresholds: Thresholds,
    /// Migration threshold of [`Cooperation::Cooperative`] (003 §7.5:
    /// 0.0001).
    pub t3: f64,
}

impl Chip {
    /// 003 §7.5's setting for `cooperation`: Table 6.4's latencies, 5-cycle
    /// hops, its three thresholds.
    pub fn paper(l1: Config, l2_size: usize, ways: usize, cooperation: Cooperation) -> Chip {
        Chip {
            l1,
            l2_size,
            ways,
            timing: Timing::PAPER,
            hop: 5,
            link_compression: false,
            cooperation,
            thresholds: Thresholds::PAPER,
            t3: 0.0001,
        }
    }
}

/// Runs each trace on its own core (with its images' `sizes`); each
/// core's counts, in order.
///
/// # Panics
///
/// As [`crate::system::simulate`]; more than 8 cores.
pub fn simulate_chip(traces: &[(&LineTrace, &[u8])], chip: &Chip) -> Vec<Run> {
    assert!(traces.len() <= 8, "at most 8 cores");
    let never = Thresholds {
        t1: f64::INFINITY,
        t2: f64::INFINITY,
    };
    let thresholds = match chip.cooperation {
        Cooperation::Private | Cooperation::Migration => never,
        _ => chip.thresholds,
    };
    let migrate_above = match chip.cooperation {
        Cooperation::Private | Cooperation::Compression => f64::INFINITY,
        Cooperation::Migration => chip.thresholds.t1,
        Cooperation::Cooperative => chip.t3,
    };
    let machine = Machine {
        l1: chip.l1,
        l2: L2::Adaptive {
            size: chip.l2_size,
            ways: chip.ways,
            thresholds,
        },
        timing: chip.timing,
        link_compression: chip.link_compression,
    };
    let mut cores: Vec<Core> = traces
        .iter()
        .enumerate()
        .map(|(i, (t, s))| Core::new(&machine, thresholds, t, s, i as u64))
        .collect();
    let mut l2s: Vec<AdaptiveCache> = (0..cores.len())
        .map(|_| AdaptiveCache::new(chip.l2_size, chip.ways))
        .collect();
    let mut directory: HashMap<u64, usize> = HashMap::new();
    let mut link = 0u64;
    let mut running: Vec<bool> = vec![true; cores.len()];
    let mut spilled: Vec<Victim> = Vec::new();
    // Each core's last marginal gain, as the directory sees it.
    let mut mpgs: Vec<f64> = vec![0.0; cores.len()];
    while let Some(i) = (0..cores.len())
        .filter(|&i| running[i])
        .min_by_key(|&i| cores[i].cycles())
    {
        let (before, rest) = l2s.split_at_mut(i);
        let (mine, after) = rest.split_first_mut().expect("core i");
        let mut view = Neighbours {
            me: i,
            before,
            after,
            directory: &mut directory,
            mpgs: &mpgs,
            migrate_above,
            hop: chip.hop,
            l2: chip.timing.l2,
            spilled: &mut spilled,
        };
        running[i] = cores[i].step(mine, &mut link, &mut view);
        // Lines a migration pushed out of a neighbour's L2 leave the chip,
        // through their own core (its L1 copy goes too).
        for v in spilled.drain(..) {
            let owner = (v.line / MAX_LINE) as usize;
            let mut no_migration = Neighbours {
                me: owner,
                before: &mut [],
                after: &mut [],
                directory: &mut directory,
                mpgs: &mpgs,
                migrate_above: f64::INFINITY,
                hop: chip.hop,
                l2: chip.timing.l2,
                spilled: &mut Vec::new(),
            };
            cores[owner].evict(v, &mut link, &mut no_migration);
        }
        mpgs[i] = cores[i].mpg;
    }
    cores.into_iter().zip(&l2s).map(|(c, l2)| c.finish(l2)).collect()
}

/// The chip as core `me` sees it.
struct Neighbours<'a> {
    me: usize,
    before: &'a mut [AdaptiveCache],
    after: &'a mut [AdaptiveCache],
    directory: &'a mut HashMap<u64, usize>,
    mpgs: &'a [f64],
    migrate_above: f64,
    hop: u64,
    l2: u64,
    spilled: &'a mut Vec<Victim>,
}

impl Neighbours<'_> {
    fn l2(&mut self, j: usize) -> &mut AdaptiveCache {
        if j < self.me {
            &mut self.before[j]
        } else {
            &mut self.after[j - self.me - 1]
        }
    }
}

impl OnChip for Neighbours<'_> {
    fn fetch(&mut self, key: u64) -> Option<(Victim, u64)> {
        let j = self.directory.remove(&key)?;
        let v = self
            .l2(j)
            .remove(key)
            .expect("the directory names the L2 holding a migrated line");
        // Request and reply, each a hop; the neighbour's L2 access.
        Some((v, 2 * self.hop + self.l2))
    }

    fn keep(&mut self, v: Victim) -> bool {
        let owner = (v.line / MAX_LINE) as usize;
        if owner != self.me {
            // A migrated line leaving its host leaves the chip.
            self.directory.remove(&v.line);
            return false;
        }
        let mine = self.mpgs[self.me];
        if mine < self.migrate_above {
            return false;
        }
        let target = (0..self.mpgs.len())
            .filter(|&j| j != self.me)
            .min_by(|&a, &b| self.mpgs[a].total_cmp(&self.mpgs[b]));
        let Some(j) = target.filter(|&j| self.mpgs[j] < mine) else {
            return false;
        };
        let mut out = Vec::new();
        self.l2(j).host(v, &mut out);
        self.directory.insert(v.line, j);
        for gone in out {
            let owner = (gone.line / MAX_LINE) as usize;
            if owner != j {
                self.directory.remove(&gone.line);
            }
            self.spilled.push(gone);
        }
        true
    }
}

//! A private two-level hierarchy: an L1 of uncompressed lines over an L2
//! that may store lines compressed, and memory behind them, with the
//! latencies that turn hits and misses into cycles.

use crate::cache::{Access, Cache, Config, Counts, Victim, LINE};

/// Where compressed sizes come from: the line's contents under the L2's
/// codec, as the trace holds them.
pub trait LineSizes {
    /// Bytes line `line` compresses to (64 or more: it does not).
    fn size(&mut self, line: u64) -> usize;
}

/// Every line uncompressible: what a plain L2 needs.
pub struct Incompressible;

impl LineSizes for Incompressible {
    fn size(&mut self, _line: u64) -> usize {
        LINE
    }
}

/// Latencies in cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latencies {
    /// An L1 hit.
    pub l1: u32,
    /// An L2 hit on an uncompressed line.
    pub l2: u32,
    /// Added to an L2 hit on a compressed line (decompression; 003 §6.6
    /// gives C-Pack's hardware as a few cycles).
    pub decompress: u32,
    /// A miss in both, served by memory.
    pub memory: u32,
}

/// What a run of references did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// References.
    pub references: u64,
    /// L1's counts.
    pub l1: Counts,
    /// L2's counts.
    pub l2: Counts,
    /// Cycles spent in the memory system.
    pub cycles: u64,
}

/// L1 over L2 over memory. The L2 sees the L1's misses only; the levels
/// are not kept inclusive (an L2 eviction leaves an L1 copy alone).
pub struct Hierarchy<S: LineSizes> {
    l1: Cache,
    l2: Cache,
    sizes: S,
    latencies: Latencies,
    report: Report,
    /// Lines the last reference pushed out, kept so no reference allocates.
    victims: Vec<Victim>,
}

impl<S: LineSizes> Hierarchy<S> {
    /// A cold hierarchy.
    ///
    /// # Panics
    ///
    /// As [`Cache::new`] for either level.
    pub fn new(l1: Config, l2: Config, sizes: S, latencies: Latencies) -> Self {
        Hierarchy {
            l1: Cache::new(l1),
            l2: Cache::new(l2),
            sizes,
            latencies,
            report: Report::default(),
            victims: Vec::new(),
        }
    }

    /// One reference to byte address `addr`.
    #[inline]
    pub fn access(&mut self, addr: u64) {
        let line = addr / LINE as u64;
        self.report.references += 1;
        let lat = self.latencies;
        self.report.cycles += lat.l1 as u64;
        self.victims.clear();
        if let Access::Hit { .. } = self.l1.reference(line, false, || LINE, &mut self.victims) {
            return;
        }
        let sizes = &mut self.sizes;
        match self.l2.reference(line, false, || sizes.size(line), &mut self.victims) {
            Access::Hit { compressed } => {
                self.report.cycles += lat.l2 as u64 + if compressed { lat.decompress as u64 } else { 0 };
            }
            Access::Miss => self.report.cycles += lat.l2 as u64 + lat.memory as u64,
        }
    }

    /// The counts so far.
    pub fn report(&self) -> Report {
        Report {
            l1: self.l1.counts(),
            l2: self.l2.counts(),
            ..self.report
        }
    }

    /// The L2, to look at its occupancy.
    pub fn l2(&self) -> &Cache {
        &self.l2
    }
}

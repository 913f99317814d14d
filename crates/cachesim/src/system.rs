//! A core's memory system driven by a line trace: an L1 over an inclusive
//! L2 (fixed or adaptive) over a memory link, with dirty lines written
//! back, bytes on the link counted (compressed or not), and the latencies
//! of paper 003's Table 6.4 turning it all into cycles.
//!
//! # The timing model, and its choices
//!
//! An in-order core at one instruction a cycle (003 §6.9: 1 GHz, in
//! order) stalls on each data reference for [`Timing::l1`] (none by
//! default: a pipelined L1), on an L1 miss for the L2's latency, plus [`Timing::decompress`] when the L2 holds the line
//! compressed, and on an L2 miss for memory: [`Timing::memory`] cycles,
//! then the line's transfer at [`Timing::bytes_per_cycle`] on a link that
//! is one resource: a transfer waits while the link is busy with an
//! earlier fetch or write-back. Write-backs do not stall the core (a
//! write buffer) but take the link. With link compression (003 §6.8) a
//! line moves as its compressed size under the L2's codec, and a fetched
//! compressed line is decompressed before use. The L2 is inclusive: a line
//! it evicts leaves the L1 too, its dirtiness joining the L2's. Lines are
//! sized when filled; a line made dirty is sized again, from its contents
//! at that moment, when it is written back. A line the trace has no
//! contents for counts as incompressible.

use std::collections::HashMap;

use crate::adaptive::{AdaptiveCache, Thresholds};
use crate::cache::{Access, Cache, Config, Counts, Organization, Victim, LINE};
use crate::trace::{Event, Events, LineTrace};
use crate::Level;

/// Latencies and rates, in core cycles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Cycles a reference stalls the core even when it hits the L1: 0
    /// for a pipeline that hides its L1's latency.
    pub l1: u64,
    /// An L2 hit on a line stored whole.
    pub l2: u64,
    /// Decompressing a line (003 Table 6.2: 8 cycles for C-Pack).
    pub decompress: u64,
    /// Memory's latency before the first byte.
    pub memory: u64,
    /// The memory link's bytes per cycle.
    pub bytes_per_cycle: u64,
    /// The marginal-gain period of an adaptive L2 (003: 10 million cycles).
    pub period: u64,
}

impl Timing {
    /// 003's Table 6.4: private L2 10 cycles, memory 80 cycles and 10
    /// bytes a cycle; C-Pack's 8-cycle decompression; a 10-million-cycle
    /// period. Its L1's 2 cycles are taken as hidden by the pipeline (an
    /// L1 hit does not stall), so that the base CPI is 1 as its in-order
    /// 1 GHz core's.
    pub const PAPER: Timing = Timing {
        l1: 0,
        l2: 10,
        decompress: 8,
        memory: 80,
        bytes_per_cycle: 10,
        period: 10_000_000,
    };
}

/// The L2 of a [`Machine`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum L2 {
    /// A fixed organization.
    Fixed(Config),
    /// Compression switched by marginal gain ([`AdaptiveCache`]).
    Adaptive {
        /// Bytes of frames.
        size: usize,
        /// Frames a set.
        ways: usize,
        /// When to compress.
        thresholds: Thresholds,
    },
}

/// One configuration to simulate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    /// The L1 data cache (plain).
    pub l1: Config,
    /// The L2.
    pub l2: L2,
    /// Latencies.
    pub timing: Timing,
    /// Lines cross the memory link compressed.
    pub link_compression: bool,
}

/// What a simulation counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Run {
    /// Data references.
    pub references: u64,
    /// Instructions.
    pub instructions: u64,
    /// Cycles in all.
    pub cycles: u64,
    /// The L1's counts.
    pub l1: Counts,
    /// The L2's counts.
    pub l2: Counts,
    /// Bytes fetched from memory over the link.
    pub bytes_read: u64,
    /// Bytes written back over the link.
    pub bytes_written: u64,
    /// Lines written back.
    pub writebacks: u64,
    /// Fills of lines the trace had no contents for.
    pub unknown: u64,
    /// L2 misses served from another core's L2 (a chip multiprocessor).
    pub remote_hits: u64,
    /// Mean, over samples at each period's end, of lines held per L2 frame.
    pub lines_per_frame: f64,
    /// Mean share of the L2's lines stored compressed, same samples.
    pub compressed_share: f64,
    /// Whole periods spent in each adaptive mode (off, way-2, both).
    pub periods: [u64; 3],
}

impl Run {
    /// Instructions per cycle.
    pub fn ipc(&self) -> f64 {
        self.instructions as f64 / self.cycles.max(1) as f64
    }

    /// L2 misses per thousand instructions.
    pub fn mpki(&self) -> f64 {
        self.l2.misses as f64 * 1000.0 / self.instructions.max(1) as f64
    }
}

/// Runs `trace` through `machine`; `sizes` gives each of the trace's
/// images' compressed size under the codec ([`LineTrace::sizes`]).
///
/// # Panics
///
/// If a level's shape is invalid (see [`Cache::new`]), or `sizes` is
/// shorter than the trace's images.
pub fn simulate(trace: &LineTrace, sizes: &[u8], machine: &Machine) -> Run {
    match machine.l2 {
        L2::Fixed(config) => alone(machine, Cache::new(config), trace, sizes),
        L2::Adaptive { size, ways, .. } => alone(machine, AdaptiveCache::new(size, ways), trace, sizes),
    }
}

fn alone<L: Level>(machine: &Machine, mut l2: L, trace: &LineTrace, sizes: &[u8]) -> Run {
    let thresholds = match machine.l2 {
        L2::Adaptive { thresholds, .. } => thresholds,
        L2::Fixed(_) => Thresholds::PAPER,
    };
    let mut core = Core::new(machine, thresholds, trace, sizes, 0);
    let mut link = 0;
    while core.step(&mut l2, &mut link, &mut Alone) {}
    core.finish(&l2)
}

/// The rest of the chip, as one core sees it: where a line missing from
/// its L2 may still be found, and where a line its L2 lets go may stay.
pub(crate) trait OnChip {
    /// Takes line `key` from elsewhere on chip: what it was, and the
    /// cycles beyond an L2 hit to bring it.
    fn fetch(&mut self, key: u64) -> Option<(Victim, u64)>;
    /// Line `v` leaves the core's L2; true when it stays on chip.
    fn keep(&mut self, v: Victim) -> bool;
}

/// A chip of one core.
struct Alone;

impl OnChip for Alone {
    fn fetch(&mut self, _key: u64) -> Option<(Victim, u64)> {
        None
    }
    fn keep(&mut self, _v: Victim) -> bool {
        false
    }
}

/// What line `key` (a core's tag and a line number) compresses to, from
/// its current image; `None` when the trace gave it no contents.
fn size_of(current: &HashMap<u64, u32>, sizes: &[u8], key: u64) -> Option<usize> {
    let line = key & (crate::trace::MAX_LINE - 1);
    current.get(&line).map(|&i| sizes[i as usize] as usize)
}

/// Occupies a link free from `*link` for `bytes` from `at`; when the
/// transfer ends.
fn transfer(link: &mut u64, at: u64, bytes: u64, per_cycle: u64) -> u64 {
    let start = at.max(*link);
    *link = start + bytes.div_ceil(per_cycle.max(1));
    *link
}

/// One core: its trace, L1, the contents of its lines, its counts and its
/// marginal-gain periods. Its L2 and the link are passed to each step, so
/// that cores of a chip can share them.
pub(crate) struct Core<'a> {
    timing: Timing,
    link_compression: bool,
    thresholds: Thresholds,
    l1: Cache,
    events: Events<'a>,
    sizes: &'a [u8],
    current: HashMap<u64, u32>,
    /// Ored into this core's line numbers, so cores' lines never collide.
    tag: u64,
    run: Run,
    next_period: u64,
    period_instructions: u64,
    period_lru: u64,
    samples: u64,
    /// The last period's marginal gain.
    pub mpg: f64,
    v1: Vec<Victim>,
    v2: Vec<Victim>,
}

impl<'a> Core<'a> {
    /// Core number `id` of a chip running `trace`.
    ///
    /// # Panics
    ///
    /// As [`simulate`].
    pub(crate) fn new(
        machine: &Machine,
        thresholds: Thresholds,
        trace: &'a LineTrace,
        sizes: &'a [u8],
        id: u64,
    ) -> Self {
        assert_eq!(machine.l1.organization, Organization::Plain, "the L1 is plain");
        assert!(sizes.len() >= trace.images().len(), "a size for every image");
        Core {
            timing: machine.timing,
            link_compression: machine.link_compression,
            thresholds,
            l1: Cache::new(machine.l1),
            events: trace.events(),
            sizes,
            current: HashMap::new(),
            tag: id << 41,
            run: Run::default(),
            next_period: machine.timing.period,
            period_instructions: 0,
            period_lru: 0,
            samples: 0,
            mpg: 0.0,
            v1: Vec::with_capacity(4),
            v2: Vec::with_capacity(2 * crate::MAX_WAYS),
        }
    }

    /// Cycles so far.
    pub(crate) fn cycles(&self) -> u64 {
        self.run.cycles
    }

    /// Runs the next reference; false when the trace has ended.
    pub(crate) fn step<L: Level>(&mut self, l2: &mut L, link: &mut u64, chip: &mut impl OnChip) -> bool {
        let t = self.timing;
        let (line, write, instructions) = loop {
            match self.events.next() {
                None => return false,
                Some(Event::Contents { line, image }) => {
                    self.current.insert(line, image);
                }
                Some(Event::Reference {
                    line,
                    write,
                    instructions,
                }) => break (line | self.tag, write, instructions),
            }
        };
        self.run.references += 1;
        self.run.instructions += instructions;
        self.period_instructions += instructions;
        self.run.cycles += instructions + t.l1;
        self.v1.clear();
        if let Access::Hit { .. } = self.l1.reference(line, write, || LINE, &mut self.v1) {
            return true;
        }
        for v in &self.v1 {
            // Inclusion keeps every L1 line in the L2.
            assert!(
                !v.dirty || l2.mark_dirty(v.line),
                "an L1 line missing from the inclusive L2"
            );
        }
        self.v2.clear();
        let mut fetched = None;
        let (current, sizes) = (&self.current, self.sizes);
        let access = l2.reference(
            line,
            false,
            || fetched.insert(size_of(current, sizes, line)).unwrap_or(LINE),
            &mut self.v2,
        );
        match access {
            Access::Hit { compressed } => {
                self.run.cycles += t.l2 + if compressed { t.decompress } else { 0 };
            }
            Access::Miss => match chip.fetch(line) {
                Some((v, extra)) => {
                    // From a neighbour's L2, compressed over the chip's network.
                    self.run.remote_hits += 1;
                    self.run.cycles += t.l2 + extra + if v.stored < LINE as u8 { t.decompress } else { 0 };
                    if v.dirty {
                        l2.mark_dirty(line);
                    }
                }
                None => {
                    // A plain L2 does not ask the size; the link may.
                    let fetched = fetched.unwrap_or_else(|| size_of(&self.current, self.sizes, line));
                    self.run.unknown += fetched.is_none() as u64;
                    let fetched = fetched.unwrap_or(LINE);
                    let compressed_link = self.link_compression && fetched < LINE;
                    let bytes = if compressed_link { fetched } else { LINE } as u64;
                    self.run.bytes_read += bytes;
                    let arrived = transfer(link, self.run.cycles + t.l2 + t.memory, bytes, t.bytes_per_cycle);
                    self.run.cycles = arrived + if compressed_link { t.decompress } else { 0 };
                }
            },
        }
        for k in 0..self.v2.len() {
            let v = self.v2[k];
            self.evict(v, link, chip);
        }
        if self.run.cycles >= self.next_period {
            self.next_period = self.run.cycles + t.period;
            let lru = l2.counts().lru_hits;
            self.mpg = (lru - self.period_lru) as f64 / self.period_instructions.max(1) as f64;
            self.sample(l2);
            self.run.periods[l2.mode_index()] += 1;
            l2.end_period(self.mpg, &self.thresholds);
            self.period_lru = lru;
            self.period_instructions = 0;
        }
        true
    }

    /// Line `v` left this core's L2: out of the L1 too, then kept on chip,
    /// or written back if dirty.
    pub(crate) fn evict(&mut self, mut v: Victim, link: &mut u64, chip: &mut impl OnChip) {
        if let Some(copy) = self.l1.remove(v.line) {
            v.dirty |= copy.dirty;
        }
        if chip.keep(v) || !v.dirty {
            return;
        }
        let bytes = if !self.link_compression {
            LINE
        } else if v.line & !(crate::trace::MAX_LINE - 1) == self.tag {
            size_of(&self.current, self.sizes, v.line).unwrap_or(LINE)
        } else {
            v.stored as usize // a neighbour's line: as it was stored here
        };
        self.run.writebacks += 1;
        self.run.bytes_written += bytes as u64;
        transfer(link, self.run.cycles, bytes as u64, self.timing.bytes_per_cycle);
    }

    fn sample<L: Level>(&mut self, l2: &L) {
        let (held, compressed) = l2.occupancy();
        if held == 0 {
            return;
        }
        self.samples += 1;
        self.run.lines_per_frame += held as f64 / l2.frames() as f64;
        self.run.compressed_share += compressed as f64 / held as f64;
    }

    /// The counts, once the trace has ended.
    pub(crate) fn finish<L: Level>(mut self, l2: &L) -> Run {
        self.sample(l2);
        if self.samples > 0 {
            self.run.lines_per_frame /= self.samples as f64;
            self.run.compressed_share /= self.samples as f64;
        }
        self.run.l1 = self.l1.counts();
        self.run.l2 = l2.counts();
        self.run
    }
}

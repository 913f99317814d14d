//! Full memory compression against a compressed disk cache (paper 002),
//! driven by a line trace.
//!
//! The core and its caches are the system simulator's ([`crate::system`],
//! a plain L2); what changes is what serves an L2 miss, at the same
//! physical memory:
//!
//! - [`Scheme::Base`]: uncompressed pages, LRU; a page not resident is a
//!   disk read.
//! - [`Scheme::ChipsetCache`] (002's "None"): the same memory behind an
//!   uncompressed chipset cache of blocks.
//! - [`Scheme::Fmc`] (MXT-like full memory compression): every resident
//!   page is held as compressed blocks, rounded up to whole sectors, so
//!   the memory holds as many pages as their compressed sizes allow; a
//!   chipset cache of uncompressed blocks sits in front, and a block
//!   missing from it is read and decompressed in line, by hardware.
//! - [`Scheme::Cdc`]: part of the memory holds pages compressed whole (a
//!   compressed disk cache); a page fault that finds its page there costs
//!   a software decompression and a short path instead of a disk read;
//!   every page evicted from uncompressed memory is compressed into it.
//!
//! # Choices
//!
//! 002 solves an analytic model of SPECweb99; this module replays traces
//! instead, so its numbers are for these programs at these memory sizes.
//! Page sizes are measured: each page's image is assembled from its lines'
//! contents (lines never seen are zeros) and compressed when it is brought
//! in (FMC, by blocks) or pushed out (CDC, whole). FMC's decompression is
//! hardware: [`Fmc::decompress`] cycles a block (003's C-Pack: 8 cycles a
//! 64-byte line); CDC's costs are the codec's measured times. Disk writes
//! are asynchronous and free, as 000 and 002 assume for reads' sake; the
//! translation tables of FMC are not charged.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::cache::{Access, Cache, Config, Organization, Victim, LINE};
use crate::trace::{Event, LineTrace};

/// Bytes of a page.
pub const PAGE: usize = 4096;

/// Full memory compression's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fmc {
    /// Bytes of the chipset cache.
    pub chipset: usize,
    /// Its hit latency in cycles (002: 50–75% of memory's).
    pub chipset_latency: u64,
    /// Bytes of a compression block (002: 256; MXT: 1024).
    pub block: usize,
    /// Bytes of the storage sectors blocks are rounded up to.
    pub sector: usize,
    /// Cycles to decompress a block in hardware.
    pub decompress: u64,
}

/// The compressed disk cache's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cdc {
    /// Bytes of physical memory given to compressed pages.
    pub bytes: usize,
    /// Cycles to decompress a page (measured).
    pub decompress: u64,
    /// Cycles to compress a page (measured).
    pub compress: u64,
    /// Cycles of the software path of a hit besides decompression.
    pub path: u64,
}

/// What serves an L2 miss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scheme {
    /// Uncompressed memory.
    Base,
    /// Uncompressed memory behind a chipset cache (the same shape as
    /// FMC's, no compression).
    ChipsetCache(Fmc),
    /// Full memory compression.
    Fmc(Fmc),
    /// A compressed disk cache.
    Cdc(Cdc),
}

/// One memory-system configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemorySystem {
    /// The L1 (plain).
    pub l1: Config,
    /// The L2 (plain).
    pub l2: Config,
    /// Physical memory in bytes.
    pub memory: usize,
    /// Memory's latency for a line, cycles.
    pub memory_latency: u64,
    /// A page read from disk, cycles.
    pub disk: u64,
    /// The scheme.
    pub scheme: Scheme,
}

/// What a run counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryRun {
    /// Data references.
    pub references: u64,
    /// Instructions.
    pub instructions: u64,
    /// Cycles.
    pub cycles: u64,
    /// L2 misses.
    pub l2_misses: u64,
    /// L2 misses served by the chipset cache.
    pub chipset_hits: u64,
    /// Page reads from disk (a page's first touch is not one: it is
    /// zero-filled).
    pub disk_reads: u64,
    /// Page faults served by the compressed disk cache.
    pub cdc_hits: u64,
    /// Pages the memory held at the end (its "real memory" in pages).
    pub pages_held: u64,
    /// Distinct pages referenced.
    pub footprint: u64,
}

impl MemoryRun {
    /// Instructions per cycle.
    pub fn ipc(&self) -> f64 {
        self.instructions as f64 / self.cycles.max(1) as f64
    }
}

/// Pages in recency order, each with the bytes it takes.
#[derive(Default)]
struct Lru {
    stamp: HashMap<u64, (u64, usize)>,
    order: BTreeMap<u64, u64>,
    bytes: usize,
}

impl Lru {
    fn touch(&mut self, page: u64, clock: u64) -> bool {
        match self.stamp.get_mut(&page) {
            Some((s, _)) => {
                self.order.remove(s);
                *s = clock;
                self.order.insert(clock, page);
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, page: u64, bytes: usize, clock: u64) {
        self.stamp.insert(page, (clock, bytes));
        self.order.insert(clock, page);
        self.bytes += bytes;
    }
    fn resize(&mut self, page: u64, bytes: usize) {
        if let Some((_, b)) = self.stamp.get_mut(&page) {
            self.bytes = self.bytes - *b + bytes;
            *b = bytes;
        }
    }
    fn remove(&mut self, page: u64) -> Option<usize> {
        let (s, b) = self.stamp.remove(&page)?;
        self.order.remove(&s);
        self.bytes -= b;
        Some(b)
    }
    fn pop_oldest(&mut self) -> Option<(u64, usize)> {
        let (_, page) = self.order.pop_first()?;
        let (_, b) = self.stamp.remove(&page).expect("ordered pages are stamped");
        self.bytes -= b;
        Some((page, b))
    }
}

/// Runs `trace` through `system`; `codec` sizes FMC's blocks or CDC's
/// pages (a codec that takes blocks of [`Fmc::block`] or [`PAGE`] bytes).
///
/// # Panics
///
/// As [`Cache::new`] for the levels and the chipset cache.
pub fn simulate_memory(trace: &LineTrace, codec: &mut dyn ccvm_codec::Codec, system: &MemorySystem) -> MemoryRun {
    let mut sim = MemorySim::new(trace, codec, system);
    for event in trace.events() {
        match event {
            Event::Contents { line, image } => {
                sim.current.insert(line, image);
                if sim.fmc_blocks.is_some() {
                    sim.stale.insert(line / (PAGE / LINE) as u64);
                }
            }
            Event::Reference {
                line,
                write,
                instructions,
            } => sim.reference(line, write, instructions),
        }
    }
    let mut run = sim.run;
    run.pages_held = (sim.resident.stamp.len() + sim.cdc.stamp.len()) as u64;
    run.footprint = sim.seen.len() as u64;
    run
}

/// The memory system's state during a run.
struct MemorySim<'a> {
    trace: &'a LineTrace,
    codec: &'a mut dyn ccvm_codec::Codec,
    system: &'a MemorySystem,
    run: MemoryRun,
    l1: Cache,
    l2: Cache,
    /// FMC's or the plain chipset cache's shape.
    chipset_shape: Option<Fmc>,
    /// The chipset cache holds blocks; a Cache of 64-byte frames numbered
    /// by block holds as many blocks as frames.
    chipset: Option<Cache>,
    /// Each line's current contents, as an image of the trace.
    current: HashMap<u64, u32>,
    resident: Lru,
    cdc: Lru,
    seen: HashSet<u64>,
    uncompressed_bytes: usize,
    cdc_bytes: usize,
    page_buf: Vec<u8>,
    out: Vec<u8>,
    /// FMC sizes a page when it comes in, and again when it is next
    /// touched after its contents changed (a fresh page is zeros and tiny
    /// at first): the block and sector, and the pages changed since.
    fmc_blocks: Option<(usize, usize)>,
    stale: HashSet<u64>,
    v1: Vec<Victim>,
    v2: Vec<Victim>,
    gone: Vec<Victim>,
    clock: u64,
}

impl<'a> MemorySim<'a> {
    fn new(trace: &'a LineTrace, codec: &'a mut dyn ccvm_codec::Codec, system: &'a MemorySystem) -> Self {
        let chipset_shape = match system.scheme {
            Scheme::Fmc(f) | Scheme::ChipsetCache(f) => Some(f),
            _ => None,
        };
        let chipset = chipset_shape.map(|f| {
            Cache::new(Config {
                size: (f.chipset / f.block).next_power_of_two().max(16) * LINE,
                ways: 16,
                organization: Organization::Plain,
            })
        });
        let (uncompressed_bytes, cdc_bytes) = match system.scheme {
            Scheme::Cdc(c) => (system.memory.saturating_sub(c.bytes), c.bytes),
            _ => (system.memory, 0),
        };
        let fmc_blocks = match system.scheme {
            Scheme::Fmc(f) => Some((f.block, f.sector)),
            _ => None,
        };
        MemorySim {
            trace,
            codec,
            system,
            run: MemoryRun::default(),
            l1: Cache::new(system.l1),
            l2: Cache::new(system.l2),
            chipset_shape,
            chipset,
            current: HashMap::new(),
            resident: Lru::default(),
            cdc: Lru::default(),
            seen: HashSet::new(),
            uncompressed_bytes,
            cdc_bytes,
            page_buf: vec![0u8; PAGE],
            out: vec![0u8; PAGE + PAGE / 2],
            fmc_blocks,
            stale: HashSet::new(),
            v1: Vec::new(),
            v2: Vec::new(),
            gone: Vec::new(),
            clock: 0,
        }
    }

    /// Bytes `page` takes compressed by blocks of `block` bytes, each
    /// rounded up to whole sectors of `sector` bytes.
    fn sized(&mut self, page: u64, block: usize, sector: usize) -> usize {
        for (i, chunk) in self.page_buf.chunks_mut(LINE).enumerate() {
            match self.current.get(&(page * (PAGE / LINE) as u64 + i as u64)) {
                Some(&img) => chunk.copy_from_slice(&self.trace.images()[img as usize]),
                None => chunk.fill(0),
            }
        }
        let (codec, out) = (&mut *self.codec, &mut self.out);
        self.page_buf
            .chunks(block)
            .map(|b| codec.compress(b, out).map_or(block, |n| n.min(block)).div_ceil(sector) * sector)
            .sum()
    }

    /// One data reference: the caches, then on an L2 miss its page and
    /// its line.
    fn reference(&mut self, line: u64, write: bool, instructions: u64) {
        let run = &mut self.run;
        run.references += 1;
        run.instructions += instructions;
        run.cycles += instructions;
        self.v1.clear();
        if let Access::Hit { .. } = self.l1.reference(line, write, || LINE, &mut self.v1) {
            return;
        }
        for v in &self.v1 {
            self.l2.mark_dirty(v.line);
        }
        self.v2.clear();
        self.run.cycles += crate::system::Timing::PAPER.l2;
        if let Access::Hit { .. } = self.l2.reference(line, false, || LINE, &mut self.v2) {
            return;
        }
        for v in &self.v2 {
            self.l1.remove(v.line);
        }
        self.run.l2_misses += 1;
        self.clock += 1;
        self.page_in(line / (PAGE / LINE) as u64);
        self.evict_over();
        self.line_from_memory(line);
    }

    /// The page of an L2 miss: resident, in the compressed disk cache, or
    /// on disk.
    fn page_in(&mut self, page: u64) {
        let first_touch = self.seen.insert(page);
        let was_resident = self.resident.touch(page, self.clock);
        if let (true, Some((block, sector))) = (was_resident, self.fmc_blocks) {
            if self.stale.remove(&page) {
                let bytes = self.sized(page, block, sector);
                self.resident.resize(page, bytes);
            }
        }
        if was_resident {
            return;
        }
        let bytes = match self.system.scheme {
            Scheme::Fmc(f) => self.sized(page, f.block, f.sector),
            _ => PAGE,
        };
        match (self.system.scheme, self.cdc.remove(page)) {
            // A page's first touch is a zero-filled page, not a read.
            _ if first_touch => {}
            (Scheme::Cdc(c), Some(_)) => {
                self.run.cdc_hits += 1;
                self.run.cycles += c.decompress + c.path;
            }
            _ => {
                self.run.disk_reads += 1;
                self.run.cycles += self.system.disk;
            }
        }
        self.resident.insert(page, bytes, self.clock);
    }

    /// Evicts the least recent pages until the resident ones fit; under
    /// CDC each is compressed into the disk cache.
    fn evict_over(&mut self) {
        while self.resident.bytes > self.uncompressed_bytes && self.resident.stamp.len() > 1 {
            let (old, _) = self.resident.pop_oldest().expect("more than one page");
            // Its blocks leave the chipset cache with it.
            if let (Some(cc), Some(f)) = (self.chipset.as_mut(), self.chipset_shape) {
                let per_page = (PAGE / f.block) as u64;
                for b in old * per_page..(old + 1) * per_page {
                    cc.remove(b);
                }
            }
            if let Scheme::Cdc(c) = self.system.scheme {
                self.run.cycles += c.compress;
                let size = self.sized(old, PAGE, 1);
                if size <= self.cdc_bytes {
                    self.cdc.insert(old, size, self.clock);
                }
                while self.cdc.bytes > self.cdc_bytes {
                    self.cdc.pop_oldest();
                }
            }
        }
    }

    /// The line of an L2 miss: from the chipset cache, or memory
    /// (decompressing its block in line under FMC).
    fn line_from_memory(&mut self, line: u64) {
        let system = self.system;
        match (system.scheme, self.chipset.as_mut()) {
            (Scheme::Fmc(f) | Scheme::ChipsetCache(f), Some(cc)) => {
                let block = line / (f.block / LINE) as u64;
                self.gone.clear();
                match cc.reference(block, false, || LINE, &mut self.gone) {
                    Access::Hit { .. } => {
                        self.run.chipset_hits += 1;
                        self.run.cycles += f.chipset_latency;
                    }
                    Access::Miss => {
                        let fmc = matches!(system.scheme, Scheme::Fmc(_));
                        self.run.cycles += system.memory_latency + if fmc { f.decompress } else { 0 };
                    }
                }
            }
            _ => self.run.cycles += system.memory_latency,
        }
    }
}

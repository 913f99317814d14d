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

use std::collections::{BTreeMap, HashMap};

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
    let mut run = MemoryRun::default();
    let mut l1 = Cache::new(system.l1);
    let mut l2 = Cache::new(system.l2);
    let chipset_shape = match system.scheme {
        Scheme::Fmc(f) | Scheme::ChipsetCache(f) => Some(f),
        _ => None,
    };
    // The chipset cache holds blocks; a Cache of 64-byte frames numbered
    // by block holds as many blocks as frames.
    let mut chipset = chipset_shape.map(|f| {
        Cache::new(Config {
            size: (f.chipset / f.block).next_power_of_two().max(16) * LINE,
            ways: 16,
            organization: Organization::Plain,
        })
    });
    let mut current: HashMap<u64, u32> = HashMap::new();
    let mut resident = Lru::default();
    let mut cdc = Lru::default();
    let mut seen: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let (uncompressed_bytes, cdc_bytes) = match system.scheme {
        Scheme::Cdc(c) => (system.memory.saturating_sub(c.bytes), c.bytes),
        _ => (system.memory, 0),
    };
    let mut page_buf = vec![0u8; PAGE];
    let mut out = vec![0u8; PAGE + PAGE / 2];
    let mut sized = |page: u64, current: &HashMap<u64, u32>, block: usize, sector: usize| -> usize {
        for (i, chunk) in page_buf.chunks_mut(LINE).enumerate() {
            match current.get(&(page * (PAGE / LINE) as u64 + i as u64)) {
                Some(&img) => chunk.copy_from_slice(&trace.images()[img as usize]),
                None => chunk.fill(0),
            }
        }
        page_buf
            .chunks(block)
            .map(|b| {
                codec
                    .compress(b, &mut out)
                    .map_or(block, |n| n.min(block))
                    .div_ceil(sector)
                    * sector
            })
            .sum()
    };
    // FMC sizes a page when it comes in, and again when it is next touched
    // after its contents changed (a fresh page is zeros and tiny at first).
    let fmc_blocks = match system.scheme {
        Scheme::Fmc(f) => Some((f.block, f.sector)),
        _ => None,
    };
    let mut stale: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let (mut v1, mut v2, mut gone) = (Vec::<Victim>::new(), Vec::<Victim>::new(), Vec::<Victim>::new());
    let l2_latency = crate::system::Timing::PAPER.l2;
    let mut clock = 0u64;
    for event in trace.events() {
        let (line, write, instructions) = match event {
            Event::Contents { line, image } => {
                current.insert(line, image);
                if fmc_blocks.is_some() {
                    stale.insert(line / (PAGE / LINE) as u64);
                }
                continue;
            }
            Event::Reference {
                line,
                write,
                instructions,
            } => (line, write, instructions),
        };
        run.references += 1;
        run.instructions += instructions;
        run.cycles += instructions;
        v1.clear();
        if let Access::Hit { .. } = l1.reference(line, write, || LINE, &mut v1) {
            continue;
        }
        for v in &v1 {
            l2.mark_dirty(v.line);
        }
        v2.clear();
        run.cycles += l2_latency;
        if let Access::Hit { .. } = l2.reference(line, false, || LINE, &mut v2) {
            continue;
        }
        for v in &v2 {
            l1.remove(v.line);
        }
        run.l2_misses += 1;
        clock += 1;
        // The page first: resident, in the compressed disk cache, or on disk.
        let page = line / (PAGE / LINE) as u64;
        let first_touch = seen.insert(page);
        let was_resident = resident.touch(page, clock);
        if let (true, Some((block, sector))) = (was_resident, fmc_blocks) {
            if stale.remove(&page) {
                resident.resize(page, sized(page, &current, block, sector));
            }
        }
        if !was_resident {
            let bytes = match system.scheme {
                Scheme::Fmc(f) => sized(page, &current, f.block, f.sector),
                _ => PAGE,
            };
            match (system.scheme, cdc.remove(page)) {
                // A page's first touch is a zero-filled page, not a read.
                _ if first_touch => {}
                (Scheme::Cdc(c), Some(_)) => {
                    run.cdc_hits += 1;
                    run.cycles += c.decompress + c.path;
                }
                _ => {
                    run.disk_reads += 1;
                    run.cycles += system.disk;
                }
            }
            resident.insert(page, bytes, clock);
        }
        {
            while resident.bytes > uncompressed_bytes && resident.stamp.len() > 1 {
                let (old, _) = resident.pop_oldest().expect("more than one page");
                // Its blocks leave the chipset cache with it.
                if let (Some(cc), Some(f)) = (chipset.as_mut(), chipset_shape) {
                    let per_page = (PAGE / f.block) as u64;
                    for b in old * per_page..(old + 1) * per_page {
                        cc.remove(b);
                    }
                }
                if let Scheme::Cdc(c) = system.scheme {
                    run.cycles += c.compress;
                    let size = sized(old, &current, PAGE, 1);
                    if size <= cdc_bytes {
                        cdc.insert(old, size, clock);
                    }
                    while cdc.bytes > cdc_bytes {
                        cdc.pop_oldest();
                    }
                }
            }
        }
        // Then the line: from the chipset cache, or memory (decompressing
        // its block in line under FMC).
        match (system.scheme, chipset.as_mut()) {
            (Scheme::Fmc(f) | Scheme::ChipsetCache(f), Some(cc)) => {
                let block = line / (f.block / LINE) as u64;
                gone.clear();
                match cc.reference(block, false, || LINE, &mut gone) {
                    Access::Hit { .. } => {
                        run.chipset_hits += 1;
                        run.cycles += f.chipset_latency;
                    }
                    Access::Miss => {
                        let fmc = matches!(system.scheme, Scheme::Fmc(_));
                        run.cycles += system.memory_latency + if fmc { f.decompress } else { 0 };
                    }
                }
            }
            _ => run.cycles += system.memory_latency,
        }
    }
    run.pages_held = (resident.stamp.len() + cdc.stamp.len()) as u64;
    run.footprint = seen.len() as u64;
    run
}

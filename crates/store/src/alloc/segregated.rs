//! Segregated power-of-two free lists: the simple power-of-two free-list
//! allocator and the McKusick–Karels allocator of paper 003 §3.3.2.3.
//!
//! Requests are rounded up to a power of two (32 bytes at least), and each
//! size has its own free list. Memory is *carved* in units: a free unit is
//! cut into blocks of the one size that needed it, and goes back to the
//! pool of free units when all its blocks are free again. The two
//! allocators differ in the unit: the simple free lists carve a whole chunk
//! for one size; McKusick–Karels carves a 4 KiB page, keeping a per-page
//! record of its size (their `kmemsizes`), so small sizes waste less.
//!
//! Choices: blocks larger than a unit take a run of whole units; freed
//! units are returned to the unit pool so that chunks can drain and be
//! given back (the 4.3BSD original kept them carved).

use std::collections::{BTreeMap, BTreeSet};

use super::{Slot, SlotAllocator};

const MIN_ORDER: u32 = 5;

/// A carved unit: the order of its blocks and how many are in use; or the
/// first unit of a run given to one large block.
#[derive(Clone, Copy)]
enum Unit {
    Carved { order: u32, used: u32 },
    Large { units: u32 },
}

/// Segregated-fit allocator. See the module docs.
pub struct Segregated {
    name: &'static str,
    chunk_size: usize,
    unit: usize,
    /// Units not carved, as (chunk, unit number).
    free_units: BTreeSet<(u32, u32)>,
    /// Units in use, by (chunk, unit number).
    units: BTreeMap<(u32, u32), Unit>,
    /// Free blocks of each order, as (chunk, offset).
    free: Vec<BTreeSet<(u32, u32)>>,
    /// Units in use per chunk held.
    chunks: BTreeMap<u32, u32>,
}

impl Segregated {
    /// The simple power-of-two free lists, carving whole chunks (`p2fl`).
    ///
    /// # Panics
    ///
    /// If `chunk_size` is not a power of two between 32 bytes and 1 GiB.
    pub fn power_of_two(chunk_size: usize) -> Self {
        Self::new("p2fl", chunk_size, chunk_size)
    }

    /// The McKusick–Karels allocator, carving 4 KiB pages (`mck2`; the
    /// whole chunk when chunks are smaller).
    ///
    /// # Panics
    ///
    /// As [`Segregated::power_of_two`].
    pub fn mckusick_karels(chunk_size: usize) -> Self {
        Self::new("mck2", chunk_size, chunk_size.min(4096))
    }

    fn new(name: &'static str, chunk_size: usize, unit: usize) -> Self {
        assert!(
            chunk_size.is_power_of_two() && (32..=1 << 30).contains(&chunk_size),
            "bad chunk size {chunk_size}"
        );
        let orders = chunk_size.trailing_zeros() as usize + 1;
        Segregated {
            name,
            chunk_size,
            unit,
            free_units: BTreeSet::new(),
            units: BTreeMap::new(),
            free: vec![BTreeSet::new(); orders],
            chunks: BTreeMap::new(),
        }
    }

    fn order_of(len: usize) -> u32 {
        len.next_power_of_two().trailing_zeros().max(MIN_ORDER)
    }

    fn units_per_chunk(&self) -> u32 {
        (self.chunk_size / self.unit) as u32
    }

    /// Takes a run of `n` free units in one chunk, aligned to `n`.
    fn take_units(&mut self, n: u32) -> Option<(u32, u32)> {
        let start = self
            .free_units
            .iter()
            .find(|&&(c, u)| u % n == 0 && (u..u + n).all(|v| self.free_units.contains(&(c, v))))
            .copied()?;
        for v in start.1..start.1 + n {
            self.free_units.remove(&(start.0, v));
        }
        *self.chunks.get_mut(&start.0).expect("unit of a held chunk") += n;
        Some(start)
    }

    fn give_units(&mut self, chunk: u32, first: u32, n: u32) {
        for v in first..first + n {
            self.free_units.insert((chunk, v));
        }
        *self.chunks.get_mut(&chunk).expect("unit of a held chunk") -= n;
    }
}

impl SlotAllocator for Segregated {
    fn name(&self) -> &'static str {
        self.name
    }

    fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    fn alloc(&mut self, len: usize) -> Option<Slot> {
        if len == 0 || len > self.chunk_size {
            return None;
        }
        let order = Self::order_of(len);
        let block = 1usize << order;
        if block >= self.unit {
            let n = (block / self.unit) as u32;
            let (chunk, first) = self.take_units(n)?;
            self.units.insert((chunk, first), Unit::Large { units: n });
            return Some(Slot {
                chunk,
                offset: first * self.unit as u32,
                len: len as u32,
            });
        }
        if self.free[order as usize].is_empty() {
            let (chunk, u) = self.take_units(1)?;
            self.units.insert((chunk, u), Unit::Carved { order, used: 0 });
            let base = u * self.unit as u32;
            for k in 0..(self.unit / block) as u32 {
                self.free[order as usize].insert((chunk, base + k * block as u32));
            }
        }
        let (chunk, offset) = self.free[order as usize].pop_first()?;
        match self.units.get_mut(&(chunk, offset / self.unit as u32)) {
            Some(Unit::Carved { used, .. }) => *used += 1,
            _ => unreachable!("a free block lies in a carved unit"),
        }
        Some(Slot {
            chunk,
            offset,
            len: len as u32,
        })
    }

    fn free(&mut self, slot: Slot) {
        let (chunk, offset) = (slot.chunk, slot.offset);
        let u = offset / self.unit as u32;
        match self.units.get_mut(&(chunk, u)).copied() {
            Some(Unit::Large { units }) => {
                self.units.remove(&(chunk, u));
                self.give_units(chunk, u, units);
            }
            Some(Unit::Carved { order, used }) => {
                self.free[order as usize].insert((chunk, offset));
                if used > 1 {
                    self.units.insert((chunk, u), Unit::Carved { order, used: used - 1 });
                } else {
                    // The whole unit is free: uncarve it.
                    let base = u * self.unit as u32;
                    let blocks = &mut self.free[order as usize];
                    let inside: Vec<_> = blocks
                        .range((chunk, base)..(chunk, base + self.unit as u32))
                        .copied()
                        .collect();
                    for b in inside {
                        blocks.remove(&b);
                    }
                    self.units.remove(&(chunk, u));
                    self.give_units(chunk, u, 1);
                }
            }
            None => panic!("freeing {slot:?}, which is not allocated"),
        }
    }

    fn add_chunk(&mut self, chunk: u32) {
        assert!(self.chunks.insert(chunk, 0).is_none(), "chunk {chunk} is already held");
        for u in 0..self.units_per_chunk() {
            self.free_units.insert((chunk, u));
        }
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        let (&chunk, _) = self.chunks.iter().rev().find(|(_, &n)| n == 0)?;
        self.chunks.remove(&chunk);
        for u in 0..self.units_per_chunk() {
            self.free_units.remove(&(chunk, u));
        }
        Some(chunk)
    }

    fn footprint(&self, len: usize) -> usize {
        1 << Self::order_of(len)
    }

    fn metadata_bytes(&self) -> usize {
        (self.free_units.len() + self.free.iter().map(|f| f.len()).sum::<usize>()) * 16 + self.units.len() * 24
    }
}

//! The buddy system: blocks of power-of-two sizes; a request takes the
//! smallest free block that fits, splitting larger ones in halves, and a
//! freed block merges with its buddy (the other half of its parent) while
//! that buddy is free too.
//!
//! Choices: the smallest block is 32 bytes (compressed pages are rarely
//! smaller, and smaller blocks only lengthen the free lists); a chunk is
//! one buddy heap, so the chunk size must be a power of two.

use std::collections::BTreeSet;

use super::{Slot, SlotAllocator};

const MIN_ORDER: u32 = 5;

/// Buddy-system allocator. See the module docs.
pub struct Buddy {
    max_order: u32,
    /// Free blocks of each order, as (chunk, offset).
    free: Vec<BTreeSet<(u32, u32)>>,
    /// Bytes in use per chunk held.
    used: std::collections::BTreeMap<u32, usize>,
}

impl Buddy {
    /// A buddy allocator over chunks of `chunk_size` bytes.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is not a power of two between 32 bytes and 1 GiB.
    pub fn new(chunk_size: usize) -> Self {
        assert!(
            chunk_size.is_power_of_two() && (32..=1 << 30).contains(&chunk_size),
            "bad chunk size {chunk_size}"
        );
        let max_order = chunk_size.trailing_zeros();
        Buddy {
            max_order,
            free: vec![BTreeSet::new(); max_order as usize + 1],
            used: Default::default(),
        }
    }

    fn order_of(len: usize) -> u32 {
        len.next_power_of_two().trailing_zeros().max(MIN_ORDER)
    }
}

impl SlotAllocator for Buddy {
    fn name(&self) -> &'static str {
        "buddy"
    }

    fn chunk_size(&self) -> usize {
        1 << self.max_order
    }

    fn alloc(&mut self, len: usize) -> Option<Slot> {
        if len == 0 || len > self.chunk_size() {
            return None;
        }
        let want = Self::order_of(len);
        let mut order = (want..=self.max_order).find(|&o| !self.free[o as usize].is_empty())?;
        let (chunk, offset) = self.free[order as usize].pop_first()?;
        while order > want {
            order -= 1;
            self.free[order as usize].insert((chunk, offset + (1 << order)));
        }
        *self.used.get_mut(&chunk).expect("block of a held chunk") += 1 << want;
        Some(Slot {
            chunk,
            offset,
            len: len as u32,
        })
    }

    fn free(&mut self, slot: Slot) {
        let mut order = Self::order_of(slot.len as usize);
        let (chunk, mut offset) = (slot.chunk, slot.offset);
        let used = self.used.get_mut(&chunk).expect("slot of a held chunk");
        *used = used.checked_sub(1 << order).expect("freeing more than is in use");
        while order < self.max_order && self.free[order as usize].remove(&(chunk, offset ^ (1 << order))) {
            offset &= !(1 << order);
            order += 1;
        }
        self.free[order as usize].insert((chunk, offset));
    }

    fn add_chunk(&mut self, chunk: u32) {
        let fresh = self.used.insert(chunk, 0).is_none();
        assert!(fresh, "chunk {chunk} is already held");
        self.free[self.max_order as usize].insert((chunk, 0));
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        let (&chunk, _) = self.used.iter().rev().find(|(_, &u)| u == 0)?;
        self.used.remove(&chunk);
        let whole = self.free[self.max_order as usize].remove(&(chunk, 0));
        debug_assert!(whole, "an empty chunk is one free block");
        Some(chunk)
    }

    fn footprint(&self, len: usize) -> usize {
        1 << Self::order_of(len)
    }

    fn metadata_bytes(&self) -> usize {
        self.free.iter().map(|f| f.len() * 16).sum::<usize>() + self.used.len() * 24
    }
}

/// The lazy buddy system (Lee and Barkley; Barkley and Lee, 1989): a buddy
/// system that does not coalesce every freed block at once. A freed block
/// stays *locally free* in its size's list, ready for the next request of
/// that size, while the size has slack; coalescing happens only as the
/// slack runs out, so a size that is freed and allocated in turn (as swap
/// traffic does) skips the split-and-merge work.
///
/// Rule (the variant bounded by two coalescing delays per size): with `A`
/// blocks of the size in use and `L` locally free, a freed block stays
/// local if `A - L >= 2`, is coalesced if `A - L == 1`, and is coalesced
/// together with one locally free block if `A - L <= 0`. Before empty
/// chunks are looked for, every locally free block is coalesced.
pub struct LazyBuddy {
    inner: Buddy,
    local: Vec<Vec<(u32, u32)>>,
    in_use: Vec<usize>,
}

impl LazyBuddy {
    /// A lazy buddy allocator over chunks of `chunk_size` bytes.
    ///
    /// # Panics
    ///
    /// As [`Buddy::new`].
    pub fn new(chunk_size: usize) -> Self {
        let inner = Buddy::new(chunk_size);
        let orders = inner.max_order as usize + 1;
        LazyBuddy {
            inner,
            local: vec![Vec::new(); orders],
            in_use: vec![0; orders],
        }
    }

    fn release(&mut self, order: u32, (chunk, offset): (u32, u32)) {
        self.inner.free(Slot {
            chunk,
            offset,
            len: 1 << order,
        });
    }
}

impl SlotAllocator for LazyBuddy {
    fn name(&self) -> &'static str {
        "lzbud"
    }

    fn chunk_size(&self) -> usize {
        self.inner.chunk_size()
    }

    fn alloc(&mut self, len: usize) -> Option<Slot> {
        if len == 0 || len > self.chunk_size() {
            return None;
        }
        let order = Buddy::order_of(len);
        let slot = match self.local[order as usize].pop() {
            Some((chunk, offset)) => Slot {
                chunk,
                offset,
                len: len as u32,
            },
            None => self.inner.alloc(len)?,
        };
        self.in_use[order as usize] += 1;
        Some(slot)
    }

    fn free(&mut self, slot: Slot) {
        let order = Buddy::order_of(slot.len as usize);
        let o = order as usize;
        let slack = self.in_use[o] as isize - self.local[o].len() as isize;
        self.in_use[o] -= 1;
        let block = (slot.chunk, slot.offset);
        if slack >= 2 {
            self.local[o].push(block);
        } else {
            self.release(order, block);
            if slack <= 0 {
                if let Some(other) = self.local[o].pop() {
                    self.release(order, other);
                }
            }
        }
    }

    fn add_chunk(&mut self, chunk: u32) {
        self.inner.add_chunk(chunk);
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        for order in 0..self.local.len() {
            while let Some(block) = self.local[order].pop() {
                self.release(order as u32, block);
            }
        }
        self.inner.pop_empty_chunk()
    }

    fn footprint(&self, len: usize) -> usize {
        self.inner.footprint(len)
    }

    fn metadata_bytes(&self) -> usize {
        // A locally free block is a free-list record like any other, at the
        // same 16 bytes: coalescing it (when chunks are looked for) must not
        // grow the books, or a store at its limit would pass it.
        self.inner.metadata_bytes() + self.local.iter().map(|l| l.len() * 16).sum::<usize>()
    }
}

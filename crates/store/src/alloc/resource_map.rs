//! The resource map: free space kept as a map of extents; first fit on
//! allocation, merging with both neighbours on free. Paper 003 §3.3.2.3
//! found it the most memory-efficient of the allocators it measured and,
//! with chunks of 16 KiB or more, as fast as the others: CRAMES's default.
//!
//! Choices: the map is kept per chunk, as a vector of extents sorted by
//! offset. A chunk holds a few dozen extents at most, so a linear first fit
//! and a shift on insert touch a few cache lines, where a global ordered
//! tree paid a pointer chase per level on every operation. First fit takes
//! the lowest-numbered chunk that fits, so the oldest chunks fill first and
//! the newest drain and are given back. Per chunk the map also keeps the
//! bytes in use and the longest free extent, so first fit skips every
//! chunk that cannot hold the slot; the longest extents are also kept per
//! group of 64 chunks, so a store of thousands of chunks finds the first
//! fit by scanning groups first. Chunks that become empty go on a list,
//! so giving them back never scans the chunks.
//!
//! # Best fit (`rm-best`, the store's default)
//!
//! The same map can place by best fit instead ([`ResourceMap::best_fit`]):
//! the slot goes to the smallest free extent that holds it, over all
//! chunks. Under churn first fit splits big extents for small slots and
//! leaves remnants too small for the next page: on `ccvm bench store
//! --pages 65536` (LZ4 pages, one remove and one put per step) the
//! store's free share rose to 8.4% with first fit and stayed under 1%
//! with best fit, without moving a page. Paper 003 measured first fit on
//! loads, not on churn.
//!
//! Best fit needs the extents ordered by length: a B-tree of (length,
//! chunk, offset), updated as extents are split and merged, so among
//! equals the lowest chunk wins, as in first fit, and pages gather in the
//! low chunks. Empty chunks are the longest extents, taken last, so they
//! still drain and are given back. Its memory follows the extents it
//! holds; two faster indexes with fixed memory were measured and dropped
//! (`docs/results.md`, "Best fit keeps the store whole under churn", has
//! both and the numbers).

use std::collections::BTreeSet;

use super::{round_up, Slot, SlotAllocator};

/// A free extent of one chunk: (offset, length).
type Extent = (u32, u32);

/// One held chunk's books.
#[derive(Default)]
struct ChunkBooks {
    /// Free extents sorted by offset; neighbours never touch (they merge).
    free: Vec<Extent>,
    /// Bytes in use.
    used: usize,
}

impl ChunkBooks {
    fn longest(&self) -> u32 {
        self.free.iter().map(|&(_, l)| l).max().unwrap_or(0)
    }
}

/// Resource-map allocator. See the module docs.
pub struct ResourceMap {
    chunk_size: usize,
    /// Per chunk number: its books, or `None` for chunks not held.
    chunks: Vec<Option<ChunkBooks>>,
    /// Per chunk number: the longest free extent (0 for chunks not held),
    /// kept in a flat array so first fit finds a chunk in one quick scan.
    longest: Vec<u32>,
    /// Per group of [`GROUP`] chunks: the longest free extent in it.
    group_longest: Vec<u32>,
    /// Chunks that were empty when listed (may have been used since).
    empties: Vec<u32>,
    /// Per chunk number: whether it is on `empties`.
    listed: Vec<bool>,
    /// Free extents over all chunks (for the bookkeeping estimate).
    extents: usize,
    /// Best fit only: every free extent as (length, chunk, offset).
    by_size: Option<BTreeSet<(u32, u32, u32)>>,
}

/// Bytes a key of best fit's size order takes: 12 in B-tree nodes of up
/// to 11 keys (with a parent link and counts, ~144 bytes a leaf) that are
/// about two-thirds full, plus the inner nodes.
const ORDER_BYTES: usize = 20;

/// Chunks per group of the two-level first fit.
const GROUP: usize = 64;

impl ResourceMap {
    /// A first-fit resource map over chunks of `chunk_size` bytes.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is not a positive multiple of 8 below 4 GiB.
    pub fn new(chunk_size: usize) -> Self {
        assert!(
            chunk_size > 0 && chunk_size.is_multiple_of(8) && chunk_size < u32::MAX as usize,
            "bad chunk size {chunk_size}"
        );
        ResourceMap {
            chunk_size,
            chunks: Vec::new(),
            longest: Vec::new(),
            group_longest: Vec::new(),
            empties: Vec::new(),
            listed: Vec::new(),
            extents: 0,
            by_size: None,
        }
    }

    /// A best-fit resource map over chunks of `chunk_size` bytes (see the
    /// module docs).
    ///
    /// # Panics
    ///
    /// If `chunk_size` is not a positive multiple of 8 below 4 GiB.
    ///
    /// ```
    /// use ccvm_store::alloc::{ResourceMap, SlotAllocator};
    /// let mut a = ResourceMap::best_fit(65536);
    /// a.add_chunk(0);
    /// let [x, _, y, _] = [1000, 8, 200, 8].map(|n| a.alloc(n).unwrap());
    /// a.free(x);
    /// a.free(y);
    /// // The 200-byte hole fits 200 bytes best; first fit would take x's.
    /// assert_eq!(a.alloc(200).unwrap().offset, y.offset);
    /// ```
    pub fn best_fit(chunk_size: usize) -> Self {
        ResourceMap {
            by_size: Some(BTreeSet::new()),
            ..Self::new(chunk_size)
        }
    }

    /// Records a free extent in the size order (best fit only).
    fn index(&mut self, chunk: u32, (offset, len): Extent) {
        if let Some(t) = &mut self.by_size {
            t.insert((len, chunk, offset));
        }
    }

    /// Removes a free extent from the size order (best fit only).
    fn unindex(&mut self, chunk: u32, (offset, len): Extent) {
        if let Some(t) = &mut self.by_size {
            let was = t.remove(&(len, chunk, offset));
            debug_assert!(was, "extent {offset}+{len} of chunk {chunk} was indexed");
        }
    }

    /// The chunk and extent index to place `need` bytes in, by the map's rule.
    fn choose(&mut self, need: u32) -> Option<(u32, usize)> {
        if let Some(t) = &self.by_size {
            let &(_, chunk, offset) = t.range((need, 0, 0)..).next()?;
            let free = &self.chunks[chunk as usize]
                .as_ref()
                .expect("an indexed chunk is held")
                .free;
            let i = free.partition_point(|&(o, _)| o < offset);
            debug_assert_eq!(free[i].0, offset, "the index names a free extent");
            return Some((chunk, i));
        }
        let chunk = self.first_fit(need)? as u32;
        let i = self
            .books(chunk)
            .free
            .iter()
            .position(|&(_, l)| l >= need)
            .expect("the longest extent fits");
        Some((chunk, i))
    }

    fn books(&mut self, chunk: u32) -> &mut ChunkBooks {
        self.chunks[chunk as usize].as_mut().expect("a chunk the map holds")
    }

    /// Sets a chunk's longest extent and its group's: first fit's index,
    /// which best fit neither reads nor keeps (it stays 0).
    fn set_longest(&mut self, chunk: usize, l: u32) {
        if self.by_size.is_some() {
            return;
        }
        let was = std::mem::replace(&mut self.longest[chunk], l);
        let g = chunk / GROUP;
        if l >= self.group_longest[g] {
            self.group_longest[g] = l;
        } else if was == self.group_longest[g] {
            let end = ((g + 1) * GROUP).min(self.longest.len());
            self.group_longest[g] = self.longest[g * GROUP..end].iter().copied().max().unwrap_or(0);
        }
    }

    /// The lowest-numbered chunk with a free extent of `need` bytes.
    fn first_fit(&self, need: u32) -> Option<usize> {
        let g = self.group_longest.iter().position(|&l| l >= need)?;
        let start = g * GROUP;
        let end = (start + GROUP).min(self.longest.len());
        let i = self.longest[start..end].iter().position(|&l| l >= need)?;
        Some(start + i)
    }

    fn list_if_empty(&mut self, chunk: u32) {
        let c = chunk as usize;
        if !self.listed[c] && self.chunks[c].as_ref().is_some_and(|b| b.used == 0) {
            self.listed[c] = true;
            self.empties.push(chunk);
        }
    }
}

impl SlotAllocator for ResourceMap {
    fn name(&self) -> &'static str {
        if self.by_size.is_some() {
            "rm-best"
        } else {
            "rm"
        }
    }

    fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    fn alloc(&mut self, len: usize) -> Option<Slot> {
        if len == 0 || len > self.chunk_size {
            return None;
        }
        let need = round_up(len) as u32;
        let (chunk, i) = self.choose(need)?;
        let was_longest = self.longest[chunk as usize];
        let books = self.books(chunk);
        let (offset, have) = books.free[i];
        let rest = (have > need).then_some((offset + need, have - need));
        match rest {
            Some(e) => books.free[i] = e,
            None => _ = books.free.remove(i),
        }
        books.used += need as usize;
        let removed = usize::from(rest.is_none());
        self.unindex(chunk, (offset, have));
        if let Some(e) = rest {
            self.index(chunk, e);
        }
        let books = self.books(chunk);
        if have == was_longest {
            let l = books.longest();
            self.set_longest(chunk as usize, l);
        }
        self.extents -= removed;
        Some(Slot {
            chunk,
            offset,
            len: len as u32,
        })
    }

    fn free(&mut self, slot: Slot) {
        let len = round_up(slot.len as usize) as u32;
        let books = self.books(slot.chunk);
        books.used = books
            .used
            .checked_sub(len as usize)
            .expect("freeing more than is in use");
        let free = &mut books.free;
        // Extents before index `i` start before the slot.
        let i = free.partition_point(|&(o, _)| o < slot.offset);
        let joins_prev = i > 0 && free[i - 1].0 + free[i - 1].1 == slot.offset;
        let joins_next = i < free.len() && slot.offset + len == free[i].0;
        // The extents the slot joins leave the size order; the merged one
        // enters it.
        let prev = joins_prev.then(|| free[i - 1]);
        let next = joins_next.then(|| free[i]);
        let (merged, added) = match (joins_prev, joins_next) {
            (true, true) => {
                let next = free.remove(i).1;
                free[i - 1].1 += len + next;
                (free[i - 1], -1)
            }
            (true, false) => {
                free[i - 1].1 += len;
                (free[i - 1], 0)
            }
            (false, true) => {
                free[i] = (slot.offset, len + free[i].1);
                (free[i], 0)
            }
            (false, false) => {
                free.insert(i, (slot.offset, len));
                (free[i], 1)
            }
        };
        for e in [prev, next].into_iter().flatten() {
            self.unindex(slot.chunk, e);
        }
        self.index(slot.chunk, merged);
        let merged = merged.1;
        self.extents = self.extents.wrapping_add_signed(added);
        let c = slot.chunk as usize;
        let l = self.longest[c].max(merged);
        self.set_longest(c, l);
        self.list_if_empty(slot.chunk);
    }

    fn add_chunk(&mut self, chunk: u32) {
        let c = chunk as usize;
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || None);
            self.longest.resize(c + 1, 0);
            self.listed.resize(c + 1, false);
            self.group_longest.resize(c / GROUP + 1, 0);
        }
        assert!(self.chunks[c].is_none(), "chunk {chunk} is already held");
        self.chunks[c] = Some(ChunkBooks {
            free: vec![(0, self.chunk_size as u32)],
            used: 0,
        });
        self.set_longest(c, self.chunk_size as u32);
        self.index(chunk, (0, self.chunk_size as u32));
        self.extents += 1;
        self.list_if_empty(chunk);
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        let chunk = loop {
            let c = self.empties.pop()? as usize;
            self.listed[c] = false;
            if self.chunks[c].as_ref().is_some_and(|b| b.used == 0) {
                break c;
            }
        };
        let books = self.chunks[chunk].take().expect("found held");
        debug_assert_eq!(
            books.free,
            [(0, self.chunk_size as u32)],
            "an empty chunk is one extent"
        );
        self.set_longest(chunk, 0);
        self.unindex(chunk as u32, (0, self.chunk_size as u32));
        self.extents -= books.free.len();
        Some(chunk as u32)
    }

    fn footprint(&self, len: usize) -> usize {
        round_up(len)
    }

    fn metadata_bytes(&self) -> usize {
        // An extent is 8 bytes in its vector (plus spare capacity, counted
        // at half again), and in best fit once more in the size order; a
        // chunk's books and longest-extent entry ~48.
        self.extents * self.books_per_free() + self.chunks.len() * 50
    }

    fn books_per_free(&self) -> usize {
        // A free adds at most one extent.
        if self.by_size.is_some() {
            12 + ORDER_BYTES
        } else {
            12
        }
    }
}

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
}

/// Chunks per group of the two-level first fit.
const GROUP: usize = 64;

impl ResourceMap {
    /// A resource map over chunks of `chunk_size` bytes.
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
        }
    }

    fn books(&mut self, chunk: u32) -> &mut ChunkBooks {
        self.chunks[chunk as usize].as_mut().expect("a chunk the map holds")
    }

    /// Sets a chunk's longest extent and its group's.
    fn set_longest(&mut self, chunk: usize, l: u32) {
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
        "rm"
    }

    fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    fn alloc(&mut self, len: usize) -> Option<Slot> {
        if len == 0 || len > self.chunk_size {
            return None;
        }
        let need = round_up(len) as u32;
        let chunk = self.first_fit(need)? as u32;
        let was_longest = self.longest[chunk as usize];
        let books = self.books(chunk);
        let i = books
            .free
            .iter()
            .position(|&(_, l)| l >= need)
            .expect("the longest extent fits");
        let (offset, have) = books.free[i];
        let removed = if have > need {
            books.free[i] = (offset + need, have - need);
            0
        } else {
            books.free.remove(i);
            1
        };
        books.used += need as usize;
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
        let (merged, added) = match (joins_prev, joins_next) {
            (true, true) => {
                let next = free.remove(i).1;
                free[i - 1].1 += len + next;
                (free[i - 1].1, -1)
            }
            (true, false) => {
                free[i - 1].1 += len;
                (free[i - 1].1, 0)
            }
            (false, true) => {
                free[i] = (slot.offset, len + free[i].1);
                (free[i].1, 0)
            }
            (false, false) => {
                free.insert(i, (slot.offset, len));
                (len, 1)
            }
        };
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
        self.extents -= books.free.len();
        Some(chunk as u32)
    }

    fn footprint(&self, len: usize) -> usize {
        round_up(len)
    }

    fn metadata_bytes(&self) -> usize {
        // An extent is 8 bytes in its vector (plus spare capacity, counted
        // at half again); a chunk's books and longest-extent entry ~48.
        self.extents * 12 + self.chunks.len() * 50
    }
}

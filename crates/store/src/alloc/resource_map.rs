//! The resource map: free space kept as a sorted map of extents; first fit
//! on allocation, merging with both neighbours on free. Paper 003 §3.3.2.3
//! found it the most memory-efficient of the allocators it measured and,
//! with chunks of 16 KiB or more, as fast as the others: CRAMES's default.
//!
//! Choices: extents are ordered by (chunk, offset), so first fit fills the
//! oldest chunks first and leaves the newest ones to drain and be given
//! back. Per chunk the map keeps the bytes in use (to find empty chunks)
//! and the longest free extent, so first fit skips every chunk that cannot
//! hold the slot instead of walking all of its extents.

use std::collections::BTreeMap;

use super::{round_up, Slot, SlotAllocator};

/// Resource-map allocator. See the [module docs](self).
pub struct ResourceMap {
    chunk_size: usize,
    /// Free extents: (chunk, offset) → length.
    free: BTreeMap<(u32, u32), u32>,
    /// Per chunk number: the longest free extent (0 for chunks not held),
    /// kept in a flat array so first fit finds a chunk in one quick scan.
    longest: Vec<u32>,
    /// Per chunk number: bytes in use, or `None` for chunks not held.
    used: Vec<Option<usize>>,
}

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
            free: BTreeMap::new(),
            longest: Vec::new(),
            used: Vec::new(),
        }
    }

    fn used(&mut self, chunk: u32) -> &mut usize {
        self.used[chunk as usize].as_mut().expect("a chunk the map holds")
    }

    fn extents(&self, chunk: u32) -> std::collections::btree_map::Range<'_, (u32, u32), u32> {
        self.free.range((chunk, 0)..=(chunk, u32::MAX))
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
        let chunk = self.longest.iter().position(|&l| l >= need)? as u32;
        let (&(_, offset), &have) = self
            .extents(chunk)
            .find(|(_, &l)| l >= need)
            .expect("the longest extent fits");
        self.free.remove(&(chunk, offset));
        if have > need {
            self.free.insert((chunk, offset + need), have - need);
        }
        *self.used(chunk) += need as usize;
        if have == self.longest[chunk as usize] {
            self.longest[chunk as usize] = self.extents(chunk).map(|(_, &l)| l).max().unwrap_or(0);
        }
        Some(Slot {
            chunk,
            offset,
            len: len as u32,
        })
    }

    fn free(&mut self, slot: Slot) {
        let (chunk, mut offset) = (slot.chunk, slot.offset);
        let mut len = round_up(slot.len as usize) as u32;
        let used = self.used(chunk);
        *used = used.checked_sub(len as usize).expect("freeing more than is in use");
        // Merge with the extent that follows, then with the one before.
        if let Some(next) = self.free.remove(&(chunk, offset + len)) {
            len += next;
        }
        if let Some((&(c, o), &l)) = self.free.range(..(chunk, offset)).next_back() {
            if c == chunk && o + l == offset {
                self.free.remove(&(c, o));
                offset = o;
                len += l;
            }
        }
        self.free.insert((chunk, offset), len);
        let longest = &mut self.longest[chunk as usize];
        *longest = (*longest).max(len);
    }

    fn add_chunk(&mut self, chunk: u32) {
        let c = chunk as usize;
        if self.used.len() <= c {
            self.used.resize(c + 1, None);
            self.longest.resize(c + 1, 0);
        }
        assert!(self.used[c].is_none(), "chunk {chunk} is already held");
        self.used[c] = Some(0);
        self.longest[c] = self.chunk_size as u32;
        self.free.insert((chunk, 0), self.chunk_size as u32);
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        let chunk = self.used.iter().rposition(|&u| u == Some(0))? as u32;
        self.used[chunk as usize] = None;
        self.longest[chunk as usize] = 0;
        let whole = self.free.remove(&(chunk, 0));
        debug_assert_eq!(whole, Some(self.chunk_size as u32), "an empty chunk is one extent");
        Some(chunk)
    }

    fn footprint(&self, len: usize) -> usize {
        round_up(len)
    }

    fn metadata_bytes(&self) -> usize {
        // A B-tree entry is about its key and value plus a share of a node.
        self.free.len() * 24 + self.used.len() * 20
    }
}

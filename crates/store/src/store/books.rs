//! The store's books under its lock: placing compressed bytes in chunks
//! (taking a chunk from the source when the allocator has no room and the
//! limit allows), the table entry and chunk member list of each page, what
//! a put would cost in memory, and the statistics those books give.

use ccvm_codec::PAGE_SIZE;

use super::compact::FRAGMENTED_ONE_IN;
use super::{Inner, Stats, StoreError, BOOKS_HEADROOM};
use crate::alloc::Slot;
use crate::table::{Entry, Place};

impl Inner {
    pub(super) fn bytes(&self, slot: Slot) -> &[u8] {
        let chunk = self.chunks[slot.chunk as usize].as_ref().expect("slot in a held chunk");
        &chunk[slot.offset as usize..(slot.offset + slot.len) as usize]
    }

    pub(super) fn metadata(&self) -> usize {
        let slots = self.table.len() - self.stats.same_pages as usize;
        self.alloc.metadata_bytes() + self.table.bytes() + self.member_bytes + slots * self.alloc.books_per_free()
    }

    pub(super) fn memory_used(&self) -> usize {
        self.held * self.chunk_size + self.metadata()
    }

    /// Whether one more chunk (and a put's headroom) stays within the limit.
    pub(super) fn may_grow(&self) -> bool {
        self.memory_used() + self.chunk_size + BOOKS_HEADROOM <= self.limit
    }

    /// Bytes the books would grow by if `page_no` were put in `chunk`
    /// (`None` for a same-filled page), plus [`BOOKS_HEADROOM`].
    pub(super) fn put_cost(&self, page_no: u64, chunk: Option<u32>) -> usize {
        let members = chunk.map_or(0, |c| {
            let list = self.members.get(c as usize);
            match list {
                Some(l) if l.len() < l.capacity() => 0,
                Some(l) => member_growth(l.capacity()),
                None => member_growth(0),
            }
        });
        let reserve = if chunk.is_some() {
            self.alloc.books_per_free()
        } else {
            0
        };
        self.table.insert_cost(page_no) + members + reserve + BOOKS_HEADROOM
    }

    /// Stores a same-filled page.
    pub(super) fn put_same(&mut self, page_no: u64, v: u64) -> Result<(), StoreError> {
        if self.memory_used() + self.put_cost(page_no, None) > self.limit {
            return Err(StoreError::Full { limit: self.limit });
        }
        self.insert(page_no, Place::Same(v));
        Ok(())
    }

    pub(super) fn add_chunk(&mut self) -> bool {
        let Some(memory) = self.source.request(self.chunk_size) else {
            return false;
        };
        let id = match self.chunks.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.chunks.push(None);
                self.chunks.len() - 1
            }
        };
        self.chunks[id] = Some(memory);
        self.alloc.add_chunk(id as u32);
        self.held += 1;
        self.note_peak();
        true
    }

    pub(super) fn note_peak(&mut self) {
        self.stats.mem_used_max = self.stats.mem_used_max.max(self.memory_used() as u64);
    }

    /// Finds a slot for `bytes` of page `page_no` and copies them in.
    pub(super) fn place(&mut self, page_no: u64, bytes: &[u8]) -> Result<Slot, StoreError> {
        let len = bytes.len();
        // The new entry's bookkeeping must fit too.
        if self.memory_used() + self.put_cost(page_no, None) > self.limit {
            return Err(StoreError::Full { limit: self.limit });
        }
        let mut compacted = false;
        let slot = loop {
            if let Some(slot) = self.alloc.alloc(len) {
                break slot;
            }
            // Failed for fragmentation (see `FRAGMENTED_ONE_IN`): gather
            // the free space rather than grow. Otherwise grow while the
            // limit allows, and compact only as the last resort, under the
            // same rate limit: a store held at its limit would otherwise
            // move every page on every put.
            let free = self.held * self.chunk_size - self.used;
            let fits_in_free = free >= self.alloc.footprint(len);
            let due = self.compaction_due();
            if !compacted && due && fits_in_free && free * FRAGMENTED_ONE_IN > self.held * self.chunk_size {
                compacted = true;
                self.compact();
                continue;
            }
            let may_grow = self.may_grow();
            if may_grow && self.add_chunk() {
                continue;
            }
            if !compacted && fits_in_free && due {
                compacted = true;
                self.compact();
                continue;
            }
            self.release_empty_chunks();
            return Err(if may_grow {
                StoreError::OutOfMemory
            } else {
                StoreError::Full { limit: self.limit }
            });
        };
        // Allocator bookkeeping may have grown with the slot, and the
        // chunk's member list may have to grow.
        if self.memory_used() + self.put_cost(page_no, Some(slot.chunk)) > self.limit {
            self.alloc.free(slot);
            self.release_empty_chunks();
            return Err(StoreError::Full { limit: self.limit });
        }
        let chunk = self.chunks[slot.chunk as usize].as_mut().expect("slot in a held chunk");
        chunk[slot.offset as usize..slot.offset as usize + len].copy_from_slice(bytes);
        self.note_slot(slot, true);
        Ok(slot)
    }

    /// Counts `slot` in (or out of) the store's and its chunk's bytes.
    pub(super) fn note_slot(&mut self, slot: Slot, placed: bool) {
        let f = self.alloc.footprint(slot.len as usize);
        let c = slot.chunk as usize;
        if self.chunk_used.len() <= c {
            self.chunk_used.resize(c + 1, 0);
        }
        if placed {
            self.used += f;
            self.chunk_used[c] += f;
        } else {
            self.used -= f;
            self.chunk_used[c] -= f;
        }
    }

    /// Records `place` for `page_no`, freeing what it replaces.
    pub(super) fn insert(&mut self, page_no: u64, place: Place) {
        let replaced = self.take(page_no);
        self.puts_since_compaction += 1;
        let member = place.slot().map_or(0, |slot| self.join(page_no, slot));
        self.table.insert(page_no, Entry { place, member });
        let s = &mut self.stats;
        match place {
            Place::Same(_) => s.same_pages += 1,
            Place::Compressed(slot) => s.compr_data_size += slot.len as u64,
            Place::Raw(slot) => {
                s.compr_data_size += slot.len as u64;
                s.huge_pages += 1;
            }
        }
        self.note_peak();
        if replaced {
            self.maybe_release();
        }
    }

    /// Forgets page `page_no` and frees its slot; whether it was stored.
    pub(super) fn take(&mut self, page_no: u64) -> bool {
        let Some(entry) = self.table.remove(page_no) else {
            return false;
        };
        let s = &mut self.stats;
        let slot = match entry.place {
            Place::Same(_) => {
                s.same_pages -= 1;
                return true;
            }
            Place::Compressed(slot) => slot,
            Place::Raw(slot) => {
                s.huge_pages -= 1;
                slot
            }
        };
        s.compr_data_size -= slot.len as u64;
        self.leave(slot, entry.member);
        self.note_slot(slot, false);
        self.alloc.free(slot);
        true
    }

    /// Lists `page` among the members of `slot`'s chunk; returns its index.
    pub(super) fn join(&mut self, page: u64, slot: Slot) -> u32 {
        let c = slot.chunk as usize;
        if self.members.len() <= c {
            self.members.resize_with(c + 1, Vec::new);
        }
        let list = &mut self.members[c];
        if list.len() == list.capacity() {
            let before = list.capacity();
            list.reserve_exact(member_growth(before) / 8);
            self.member_bytes += (list.capacity() - before) * 8;
        }
        list.push(page);
        (list.len() - 1) as u32
    }

    /// The entry of a page known to be stored.
    pub(super) fn entry(&self, page: u64) -> Entry {
        self.table.get(page).expect("a listed page has an entry")
    }

    /// Takes the member at `index` off `slot`'s chunk's list (its page's
    /// entry is gone or being moved).
    pub(super) fn leave(&mut self, slot: Slot, index: u32) {
        let list = &mut self.members[slot.chunk as usize];
        list.swap_remove(index as usize);
        if let Some(&moved) = list.get(index as usize) {
            self.table.set_member(moved, index);
        }
    }

    /// Requests the next chunk early once less than 1/8 of a chunk is free.
    pub(super) fn grow_ahead(&mut self) {
        let free = self.held * self.chunk_size - self.used;
        if free * 8 < self.chunk_size && self.may_grow() {
            self.add_chunk();
        }
    }

    pub(super) fn snapshot(&self) -> Stats {
        let held = self.held * self.chunk_size;
        Stats {
            pages: self.table.len() as u64,
            orig_data_size: (self.table.len() * PAGE_SIZE) as u64,
            mem_used_total: held as u64,
            metadata_bytes: self.metadata() as u64,
            fragmentation: if held == 0 {
                0.0
            } else {
                (held - self.used) as f64 / held as f64
            },
            ..self.stats.clone()
        }
    }
}

/// Bytes a member list of `capacity` records grows by when full: it
/// doubles, from 8 records.
pub(super) fn member_growth(capacity: usize) -> usize {
    capacity.max(8) * 8
}

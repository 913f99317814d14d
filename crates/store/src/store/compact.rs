//! Compaction and giving chunks back (paper 003 §5.3.3): gathering the
//! free space scattered between slots so that whole chunks empty and
//! return to their source. Each threshold that decides when is named once
//! here.

use ccvm_codec::PAGE_SIZE;

use super::{Inner, Store};
use crate::alloc::Slot;
use crate::table::Entry;

/// The most page moves compaction may cost per page put, on average: it
/// moves up to every stored page, so it runs at most once per
/// `pages / COMPACTION_MOVES_PER_PUT` puts. One move per put keeps it a
/// small part of a put (a move is a copy of the compressed bytes) while
/// still gathering free space often enough for a store at its limit.
pub const COMPACTION_MOVES_PER_PUT: usize = 1;

/// The least share of its chunk bytes a store must have free (scattered
/// between slots) for [`Store::compact_when_due`] to compact: below it a
/// compaction, which copies every stored page, would give back too little
/// memory to pay for itself. Measured on `ccvm run --workload hashindex
/// --size 256M --ram 134M`: compacting whenever the rate limit allowed
/// moved as many pages as were put (2.0M) and took a tenth of the run.
pub const COMPACTION_MIN_FREE: f64 = 1.0 / 16.0;

/// A put whose slot does not fit although more than one chunk byte in
/// `FRAGMENTED_ONE_IN` (4%) is free has failed for fragmentation: the
/// store gathers its free space (rate-limited as [`COMPACTION_MOVES_PER_PUT`]
/// says) before it grows. Lower than [`COMPACTION_MIN_FREE`], the bar for
/// compacting unasked, because here a put is waiting on it.
pub(super) const FRAGMENTED_ONE_IN: usize = 25;

impl Store {
    /// Like [`Store::compact`], but only when it pays: enough pages have
    /// been put since the last compaction for it to cost at most
    /// [`COMPACTION_MOVES_PER_PUT`] page moves per put, and at least
    /// `COMPACTION_MIN_FREE` of the chunk bytes held are free, so that
    /// it gives back that much memory. Returns the pages moved (0 if it
    /// did not run).
    pub fn compact_when_due(&self) -> usize {
        let mut inner = self.write();
        let held = inner.held * inner.chunk_size;
        let free = held - inner.used;
        if !inner.compaction_due() || (free as f64) < COMPACTION_MIN_FREE * held as f64 {
            return 0;
        }
        let moved = inner.compact();
        inner.release_empty_chunks();
        moved
    }

    /// Gives back one chunk by moving the slots of the emptiest one into
    /// the others' free space, when they can hold them; whether it did.
    /// The cheap alternative to [`Store::compact`] when the store must
    /// shrink by a little.
    pub fn reclaim_chunk(&self) -> bool {
        self.write().reclaim_chunk()
    }

    /// Re-places every slot to gather free space, returning pages moved.
    /// Runs by itself when an allocation fails for fragmentation.
    pub fn compact(&self) -> usize {
        let mut inner = self.write();
        let moved = inner.compact();
        inner.release_empty_chunks();
        moved
    }
}

impl Inner {
    /// Whether a compaction now costs at most [`COMPACTION_MOVES_PER_PUT`]
    /// moves per page put since the last one.
    pub(super) fn compaction_due(&self) -> bool {
        self.puts_since_compaction * COMPACTION_MOVES_PER_PUT >= self.table.len()
    }

    /// Moves every slot out of the held chunk with the fewest bytes in
    /// use and gives one chunk back; whether it did. Refuses (doing
    /// nothing) unless the other chunks' free space holds that chunk's
    /// bytes with a quarter to spare. Costs a copy of at most a chunk's
    /// bytes (its pages are listed per chunk), where a full compaction
    /// moves every page.
    pub(super) fn reclaim_chunk(&mut self) -> bool {
        let used_in = |c: usize| self.chunk_used.get(c).copied().unwrap_or(0);
        let Some(c) = (0..self.chunks.len())
            .filter(|&c| self.chunks[c].is_some())
            .min_by_key(|&c| used_in(c))
        else {
            return false;
        };
        let live = used_in(c);
        let free_elsewhere = self.held * self.chunk_size - self.used - (self.chunk_size - live);
        if self.held < 2 || free_elsewhere < live + live / 4 {
            return false;
        }
        let listed = std::mem::take(self.members.get_mut(c).unwrap_or(&mut Vec::new()));
        self.member_bytes -= listed.capacity() * 8;
        let moving: Vec<(u64, Slot)> = listed
            .into_iter()
            .map(|p| (p, self.entry(p).place.slot().expect("a member has a slot")))
            .collect();
        let mut bytes = Vec::with_capacity(live);
        for &(_, slot) in &moving {
            bytes.extend_from_slice(self.bytes(slot));
        }
        for &(_, slot) in &moving {
            self.note_slot(slot, false);
            self.alloc.free(slot);
        }
        // Any empty chunk will do: they are alike.
        let spare = self.alloc.pop_empty_chunk().expect("the emptied chunk is empty");
        let mut spare_back = false;
        let mut at = 0;
        for (page, old) in moving {
            let len = old.len as usize;
            let new = match self.alloc.alloc(len) {
                Some(s) => s,
                None => {
                    assert!(!spare_back, "a whole chunk holds any slot");
                    spare_back = true;
                    self.alloc.add_chunk(spare);
                    self.alloc.alloc(len).expect("an empty chunk holds any slot")
                }
            };
            let chunk = self.chunks[new.chunk as usize].as_mut().expect("slot in a held chunk");
            chunk[new.offset as usize..new.offset as usize + len].copy_from_slice(&bytes[at..at + len]);
            at += len;
            self.note_slot(new, true);
            let member = self.join(page, new);
            let place = self.entry(page).place.moved_to(new);
            self.table.update(page, Entry { place, member });
            self.stats.pages_compacted += 1;
        }
        if spare_back {
            return false;
        }
        let memory = self.chunks[spare as usize].take().expect("held chunk");
        self.source.give_back(memory);
        self.held -= 1;
        self.drop_members(spare);
        true
    }

    /// Frees the (empty) member list of a chunk given back.
    pub(super) fn drop_members(&mut self, chunk: u32) {
        if let Some(list) = self.members.get_mut(chunk as usize) {
            debug_assert!(list.is_empty(), "a chunk given back has no members");
            self.member_bytes -= list.capacity() * 8;
            *list = Vec::new();
        }
    }

    /// Looks for empty chunks only when two chunks' worth of bytes are free,
    /// the least for one to be empty beside the spare: the look is not free
    /// (and, for the lazy buddy, coalesces its lists).
    pub(super) fn maybe_release(&mut self) {
        if self.held * self.chunk_size - self.used >= 2 * self.chunk_size {
            self.release_empty_chunks();
        }
    }

    /// Returns empty chunks to the source, keeping one spare.
    pub(super) fn release_empty_chunks(&mut self) {
        let mut spare = None;
        while let Some(id) = self.alloc.pop_empty_chunk() {
            if spare.is_none() {
                spare = Some(id);
                continue;
            }
            let memory = self.chunks[id as usize].take().expect("held chunk");
            self.source.give_back(memory);
            self.held -= 1;
            self.drop_members(id);
        }
        if let Some(id) = spare {
            self.alloc.add_chunk(id);
        }
    }

    /// Frees and re-allocates every slot in (chunk, offset) order.
    pub(super) fn compact(&mut self) -> usize {
        let mut placed: Vec<(Slot, u64)> = self
            .table
            .iter()
            .filter_map(|(p, e)| e.place.slot().map(|s| (s, p)))
            .collect();
        placed.sort_by_key(|(s, _)| (s.chunk, s.offset));
        let mut moved = 0;
        let mut buf = [0u8; PAGE_SIZE];
        for (slot, page) in placed {
            let len = slot.len as usize;
            buf[..len].copy_from_slice(self.bytes(slot));
            self.alloc.free(slot);
            // The space just freed fits the slot again, so this succeeds.
            let new = self.alloc.alloc(len).expect("a freed slot fits again");
            if new != slot {
                self.note_slot(slot, false);
                self.note_slot(new, true);
                let chunk = self.chunks[new.chunk as usize].as_mut().expect("slot in a held chunk");
                chunk[new.offset as usize..new.offset as usize + len].copy_from_slice(&buf[..len]);
                let e = self.entry(page);
                self.table.update(
                    page,
                    Entry {
                        place: e.place.moved_to(new),
                        member: e.member,
                    },
                );
                moved += 1;
            }
        }
        self.rebuild_members();
        self.stats.pages_compacted += moved as u64;
        self.stats.compactions += 1;
        self.puts_since_compaction = 0;
        moved
    }

    /// Lists every page under its chunk again (after compaction moved many).
    pub(super) fn rebuild_members(&mut self) {
        self.members.iter_mut().for_each(Vec::clear);
        let mut placed: Vec<(u64, Entry)> = self.table.iter().filter(|(_, e)| e.place.slot().is_some()).collect();
        placed.sort_unstable_by_key(|&(p, _)| p);
        for (page, e) in placed {
            let member = self.join(page, e.place.slot().expect("filtered for a slot"));
            self.table.update(page, Entry { place: e.place, member });
        }
    }
}

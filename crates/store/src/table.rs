//! The mapping table (paper 003 §3.4.1.1): page number → how the page is
//! kept, in 16 bytes a page, as zram's table (a handle word and a flags
//! word per slot).
//!
//! # Choices
//!
//! * Direct-mapped in *leaves* of 256 entries (4 KiB each), found by the
//!   page number's upper bits in a small hash map. zram maps its whole
//!   device directly; ccvm's page numbers are a region's pages, dense but
//!   not known in advance, so leaves are made as pages arrive and freed
//!   when their last page goes. Dense page numbers then cost 16 bytes each
//!   plus 1/256 of a leaf's map record; scattered ones cost up to a leaf
//!   each, and [`Table::bytes`] counts exactly what is held.
//! * An entry packs the place into two words: the same-filled value, or
//!   the slot's chunk and offset, in the first; the kind, the slot length
//!   and the page's index in its chunk's member list in the second.
//!   Put order is not kept here: recency belongs to the policy, which keeps
//!   its own queues for the live runtime and the simulator alike.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::alloc::Slot;

/// Entries per leaf.
const LEAF: usize = 256;
const LEAF_SHIFT: u32 = LEAF.trailing_zeros();

/// Bytes of one entry.
pub const ENTRY_SIZE: usize = 16;

/// Bytes of a leaf with its record in the leaf map (key, pointer, count
/// and control byte, rounded up).
pub const LEAF_BYTES: usize = LEAF * ENTRY_SIZE + 32;

/// How a page is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Every 8-byte word of the page is this value.
    Same(u64),
    /// Compressed, in this slot.
    Compressed(Slot),
    /// Raw (it compressed too little), in this slot.
    Raw(Slot),
}

impl Place {
    /// The slot, unless the page is same-filled.
    pub fn slot(self) -> Option<Slot> {
        match self {
            Place::Compressed(s) | Place::Raw(s) => Some(s),
            Place::Same(_) => None,
        }
    }

    /// The same kind of place at `slot`.
    pub fn moved_to(self, slot: Slot) -> Place {
        match self {
            Place::Raw(_) => Place::Raw(slot),
            _ => Place::Compressed(slot),
        }
    }
}

/// A page's entry, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// How it is kept.
    pub place: Place,
    /// Its index in its chunk's member list (0 for same-filled pages).
    pub member: u32,
}

const EMPTY: u64 = 0;
const SAME: u64 = 1;
const COMPRESSED: u64 = 2;
const RAW: u64 = 3;

/// The packed form: `word` is the same-filled value or `chunk << 32 |
/// offset`; `meta` is the kind (bits 0-1), the slot length (bits 16-31)
/// and the member index (bits 32-63).
#[derive(Clone, Copy, Default)]
struct Packed {
    word: u64,
    meta: u64,
}

const _: () = assert!(std::mem::size_of::<Packed>() == ENTRY_SIZE);

impl Packed {
    fn pack(e: Entry) -> Packed {
        let (word, kind, len) = match e.place {
            Place::Same(v) => (v, SAME, 0),
            Place::Compressed(s) => ((s.chunk as u64) << 32 | s.offset as u64, COMPRESSED, s.len),
            Place::Raw(s) => ((s.chunk as u64) << 32 | s.offset as u64, RAW, s.len),
        };
        debug_assert!(len <= u16::MAX as u32, "a slot holds at most a page");
        Packed {
            word,
            meta: kind | (len as u64) << 16 | (e.member as u64) << 32,
        }
    }

    fn unpack(self) -> Option<Entry> {
        let slot = || Slot {
            chunk: (self.word >> 32) as u32,
            offset: self.word as u32,
            len: (self.meta >> 16) as u16 as u32,
        };
        let place = match self.meta & 3 {
            EMPTY => return None,
            SAME => Place::Same(self.word),
            COMPRESSED => Place::Compressed(slot()),
            _ => Place::Raw(slot()),
        };
        Some(Entry {
            place,
            member: (self.meta >> 32) as u32,
        })
    }
}

struct Leaf {
    entries: Box<[Packed; LEAF]>,
    live: u32,
}

/// A multiplicative hash of the leaf number: leaf numbers are small and
/// consecutive, so one multiply spreads them, where SipHash would cost a
/// tenth of a lookup.
#[derive(Default)]
struct LeafHasher(u64);

impl Hasher for LeafHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, n: u64) {
        let h = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

/// The mapping table. See the module docs.
#[derive(Default)]
pub struct Table {
    leaves: HashMap<u64, Leaf, BuildHasherDefault<LeafHasher>>,
    len: usize,
}

fn split(page: u64) -> (u64, usize) {
    (page >> LEAF_SHIFT, (page as usize) & (LEAF - 1))
}

impl Table {
    /// Pages held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes the table holds: its leaves and their records.
    pub fn bytes(&self) -> usize {
        self.leaves.len() * LEAF_BYTES
    }

    /// Bytes that inserting `page` would add to [`Table::bytes`].
    pub fn insert_cost(&self, page: u64) -> usize {
        if self.leaves.contains_key(&split(page).0) {
            0
        } else {
            LEAF_BYTES
        }
    }

    /// The entry of `page`.
    pub fn get(&self, page: u64) -> Option<Entry> {
        let (leaf, i) = split(page);
        self.leaves.get(&leaf)?.entries[i].unpack()
    }

    /// Whether `page` has an entry.
    pub fn contains(&self, page: u64) -> bool {
        self.get(page).is_some()
    }

    /// Sets the entry of `page`, which must have none.
    ///
    /// # Panics
    ///
    /// If `page` has an entry (a caller bug).
    pub fn insert(&mut self, page: u64, entry: Entry) {
        let (leaf, i) = split(page);
        let leaf = self.leaves.entry(leaf).or_insert_with(|| Leaf {
            entries: Box::new([Packed::default(); LEAF]),
            live: 0,
        });
        assert!(leaf.entries[i].unpack().is_none(), "page {page} already has an entry");
        leaf.entries[i] = Packed::pack(entry);
        leaf.live += 1;
        self.len += 1;
    }

    /// Replaces the entry of `page`, which must have one.
    ///
    /// # Panics
    ///
    /// If `page` has no entry (a caller bug).
    pub fn update(&mut self, page: u64, entry: Entry) {
        let (leaf, i) = split(page);
        let slot = self
            .leaves
            .get_mut(&leaf)
            .map(|l| &mut l.entries[i])
            .filter(|p| p.unpack().is_some())
            .unwrap_or_else(|| panic!("page {page} has no entry to update"));
        *slot = Packed::pack(entry);
    }

    /// Sets the member index in the entry of `page`, which must have one.
    ///
    /// # Panics
    ///
    /// If `page` has no entry (a caller bug).
    pub fn set_member(&mut self, page: u64, member: u32) {
        let (leaf, i) = split(page);
        let packed = self
            .leaves
            .get_mut(&leaf)
            .map(|l| &mut l.entries[i])
            .filter(|p| p.unpack().is_some())
            .unwrap_or_else(|| panic!("page {page} has no entry to update"));
        packed.meta = (packed.meta & u32::MAX as u64) | (member as u64) << 32;
    }

    /// Removes the entry of `page` and returns it; a leaf left empty is freed.
    pub fn remove(&mut self, page: u64) -> Option<Entry> {
        let (key, i) = split(page);
        let leaf = self.leaves.get_mut(&key)?;
        let entry = leaf.entries[i].unpack()?;
        leaf.entries[i] = Packed::default();
        leaf.live -= 1;
        if leaf.live == 0 {
            self.leaves.remove(&key);
        }
        self.len -= 1;
        Some(entry)
    }

    /// Every page and its entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Entry)> + '_ {
        self.leaves.iter().flat_map(|(&leaf, l)| {
            l.entries
                .iter()
                .enumerate()
                .filter_map(move |(i, p)| p.unpack().map(|e| ((leaf << LEAF_SHIFT) | i as u64, e)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(kind: u8, a: u64, len: u32, member: u32) -> Entry {
        let slot = Slot {
            chunk: (a >> 32) as u32,
            offset: a as u32,
            len,
        };
        let place = match kind % 3 {
            0 => Place::Same(a),
            1 => Place::Compressed(slot),
            _ => Place::Raw(slot),
        };
        Entry {
            place,
            member: if kind.is_multiple_of(3) { 0 } else { member },
        }
    }

    #[test]
    fn an_entry_is_sixteen_bytes_and_a_dense_table_about_that_per_page() {
        let mut t = Table::default();
        for p in 0..4096u64 {
            t.insert(p, entry(1, p * 100, 1000, p as u32));
        }
        assert_eq!(t.len(), 4096);
        t.set_member(7, 99);
        assert_eq!(t.get(7), Some(entry(1, 700, 1000, 99)));
        assert!(t.bytes() <= 4096 * 17, "{} bytes for 4096 pages", t.bytes());
        for p in 0..4096u64 {
            t.remove(p);
        }
        assert_eq!((t.len(), t.bytes()), (0, 0), "empty leaves are freed");
    }

    proptest! {
        /// The table against a `HashMap` under random inserts, updates and
        /// removals over clustered and scattered page numbers.
        #[test]
        fn table_matches_a_hashmap(ops in proptest::collection::vec(
            (0u8..4, prop_oneof![0u64..2000, any::<u64>()], 0u8..3, any::<u64>(), 0u32..=4096, any::<u32>()),
            1..400,
        )) {
            let mut t = Table::default();
            let mut model = HashMap::new();
            for (op, page, kind, a, len, member) in ops {
                let e = entry(kind, a, len, member);
                match op {
                    0 | 1 => {
                        if model.contains_key(&page) {
                            t.update(page, e);
                        } else {
                            prop_assert_eq!(t.insert_cost(page) > 0, !t.iter().any(|(p, _)| p >> 8 == page >> 8));
                            t.insert(page, e);
                        }
                        model.insert(page, e);
                    }
                    2 => prop_assert_eq!(t.remove(page), model.remove(&page)),
                    _ => prop_assert_eq!(t.get(page), model.get(&page).copied()),
                }
                prop_assert_eq!(t.len(), model.len());
            }
            let mut all: Vec<_> = t.iter().collect();
            all.sort_by_key(|&(p, _)| p);
            let mut want: Vec<_> = model.into_iter().collect();
            want.sort_by_key(|&(p, _)| p);
            prop_assert_eq!(all, want);
        }
    }
}

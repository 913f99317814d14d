//! Where each page is, and the pages of each memory level in recency
//! order: one 24-byte record a page, linked into doubly linked lists
//! through the records themselves.
//!
//! The lists were hash maps and deques before (about 80 bytes a page for
//! each list a page was in, plus a map of sizes and one of pages on disk),
//! and that memory is charged to the budget the policy sizes: on a 64 MiB
//! region it was 2.9 MiB of a 52 MiB budget, about 700 frames. A page is in
//! one place at a time, so one record a page, found in a [`PageMap`], holds
//! its place, its neighbours in its list, its compressed size and when it
//! was last evicted.

use crate::pages::PageMap;

/// Where a page is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Not known to the policy.
    Unknown = 0,
    /// Uncompressed, in the inactive list (the only list with one queue).
    Inactive = 1,
    /// Uncompressed, in the active list.
    Active = 2,
    /// In the compression cache.
    Compressed = 3,
    /// On disk, written as it was.
    DiskRaw = 4,
    /// On disk, written compressed.
    DiskCompressed = 5,
    /// Taken out of memory and not yet placed (a compression under way).
    Out = 6,
}

impl Place {
    const ALL: [Place; 7] = [
        Place::Unknown,
        Place::Inactive,
        Place::Active,
        Place::Compressed,
        Place::DiskRaw,
        Place::DiskCompressed,
        Place::Out,
    ];

    /// The list this place is, if it is one.
    fn list(self) -> Option<usize> {
        match self {
            Place::Inactive => Some(0),
            Place::Active => Some(1),
            Place::Compressed => Some(2),
            _ => None,
        }
    }
}

/// No neighbour.
const NONE: u64 = u64::MAX;
const PLACE_BITS: u32 = 3;
const SHADOW_BIT: u32 = 1 << PLACE_BITS;
const SIZE_SHIFT: u32 = PLACE_BITS + 1;
/// The largest compressed size a record holds (sizes are at most a page).
const MAX_SIZE: u64 = (1 << (32 - SIZE_SHIFT)) - 1;

/// One page's record. The default is a page not known.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Record {
    prev: u64,
    next: u64,
    /// Evictions counted when the page last left memory, if
    /// [`Record::shadow`] says there is one (wrapping: distances beyond
    /// 2^32 evictions read short, and none matters that far).
    shadow: u32,
    /// Place, shadow flag and compressed size.
    bits: u32,
}

impl Record {
    pub fn place(&self) -> Place {
        Place::ALL[(self.bits & (SHADOW_BIT - 1)) as usize]
    }

    fn with_place(mut self, place: Place) -> Record {
        self.bits = (self.bits & !(SHADOW_BIT - 1)) | place as u32;
        self
    }

    /// Bytes the page takes in the cache (while [`Place::Compressed`]).
    pub fn size(&self) -> u64 {
        u64::from(self.bits >> SIZE_SHIFT)
    }

    pub fn with_size(mut self, bytes: u64) -> Record {
        self.bits = (self.bits & ((1 << SIZE_SHIFT) - 1)) | ((bytes.min(MAX_SIZE) as u32) << SIZE_SHIFT);
        self
    }

    /// The eviction count when the page left, if it was recorded.
    pub fn shadow(&self) -> Option<u32> {
        (self.bits & SHADOW_BIT != 0).then_some(self.shadow)
    }

    pub fn with_shadow(mut self, shadow: Option<u32>) -> Record {
        match shadow {
            Some(s) => {
                self.shadow = s;
                self.bits |= SHADOW_BIT;
            }
            None => {
                self.shadow = 0;
                self.bits &= !SHADOW_BIT;
            }
        }
        self
    }
}

/// Records of every known page, and three lists through them: inactive,
/// active and compressed, each oldest first.
#[derive(Default)]
pub(crate) struct Lists {
    records: PageMap<Record>,
    /// Oldest and newest page of each list.
    ends: [(u64, u64); 3],
    lens: [usize; 3],
}

impl Lists {
    /// The record of `page` (the default if not known).
    pub fn record(&self, page: u64) -> Record {
        self.records.get(page)
    }

    /// Pages in `place`, which must be a list.
    pub fn len(&self, place: Place) -> usize {
        place.list().map_or(0, |l| self.lens[l])
    }

    /// The oldest page of list `place`.
    pub fn oldest(&self, place: Place) -> Option<u64> {
        let l = place.list()?;
        (self.lens[l] > 0).then_some(self.ends[l].0)
    }

    /// The pages of list `place`, oldest first.
    pub fn oldest_first(&self, place: Place) -> impl Iterator<Item = u64> + '_ {
        let mut at = place
            .list()
            .filter(|&l| self.lens[l] > 0)
            .map_or(NONE, |l| self.ends[l].0);
        std::iter::from_fn(move || {
            if at == NONE {
                return None;
            }
            let page = at;
            at = self.records.get(page).next;
            Some(page)
        })
    }

    /// Takes `page` out of its list, if it is in one; its record is left
    /// with no neighbours and its place unchanged, and returned.
    pub fn unlink(&mut self, page: u64) -> Record {
        let r = self.records.get(page);
        let Some(l) = r.place().list() else {
            return r;
        };
        match r.prev {
            NONE => self.ends[l].0 = r.next,
            p => self.records.update(p, |n| n.next = r.next),
        }
        match r.next {
            NONE => self.ends[l].1 = r.prev,
            n => self.records.update(n, |x| x.prev = r.prev),
        }
        self.lens[l] -= 1;
        let r = Record {
            prev: NONE,
            next: NONE,
            ..r
        };
        self.records.set(page, r);
        r
    }

    /// Puts `page`, taken out of any list by [`Lists::unlink`], in `place`
    /// with `record`'s other fields: at the newest end if `place` is a
    /// list. [`Place::Unknown`] forgets the page.
    pub fn place(&mut self, page: u64, record: Record, place: Place) {
        let mut r = record.with_place(place);
        if place == Place::Unknown {
            r = Record::default();
        }
        r.prev = NONE;
        r.next = NONE;
        if let Some(l) = place.list() {
            if self.lens[l] == 0 {
                self.ends[l] = (page, page);
            } else {
                let newest = self.ends[l].1;
                self.records.update(newest, |n| n.next = page);
                r.prev = newest;
                self.ends[l].1 = page;
            }
            self.lens[l] += 1;
        }
        self.records.set(page, r);
    }

    /// Moves `page` to `place` (the newest end of a list), keeping the
    /// rest of its record; returns the record it had.
    pub fn move_to(&mut self, page: u64, place: Place) -> Record {
        let r = self.unlink(page);
        self.place(page, r, place);
        r
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, VecDeque};

    use proptest::prelude::*;

    use super::*;

    const PLACES: [Place; 6] = [
        Place::Inactive,
        Place::Active,
        Place::Compressed,
        Place::DiskRaw,
        Place::DiskCompressed,
        Place::Unknown,
    ];

    proptest! {
        /// Against three deques and a map of places, under random moves.
        #[test]
        fn lists_match_deques(ops in proptest::collection::vec((0u64..200, 0usize..6, 0u64..5000), 1..3000)) {
            let mut lists = Lists::default();
            let mut model: [VecDeque<u64>; 3] = Default::default();
            let mut sizes: HashMap<u64, u64> = HashMap::new();
            for (page, p, size) in ops {
                // Pages 200 and up sit far from the rest, as in a trace.
                let page = if page >= 150 { page << 40 } else { page };
                for q in &mut model {
                    q.retain(|&x| x != page);
                }
                let place = PLACES[p];
                if let Some(l) = place.list() {
                    model[l].push_back(page);
                }
                let r = lists.unlink(page);
                lists.place(page, r.with_size(size), place);
                if place == Place::Unknown { sizes.remove(&page); } else { sizes.insert(page, size); }
                for (l, &list) in [Place::Inactive, Place::Active, Place::Compressed].iter().enumerate() {
                    prop_assert_eq!(lists.len(list), model[l].len());
                    prop_assert_eq!(lists.oldest(list), model[l].front().copied());
                }
            }
            for (l, &list) in [Place::Inactive, Place::Active, Place::Compressed].iter().enumerate() {
                prop_assert_eq!(lists.oldest_first(list).collect::<Vec<_>>(), model[l].iter().copied().collect::<Vec<_>>());
            }
            for (&page, &size) in &sizes {
                prop_assert_eq!(lists.record(page).size(), size);
            }
        }
    }

    #[test]
    fn a_record_keeps_its_fields_apart() {
        let r = Record::default()
            .with_size(4096)
            .with_shadow(Some(u32::MAX))
            .with_place(Place::DiskCompressed);
        assert_eq!(
            (r.place(), r.size(), r.shadow()),
            (Place::DiskCompressed, 4096, Some(u32::MAX))
        );
        let r = r.with_shadow(None).with_size(7);
        assert_eq!((r.place(), r.size(), r.shadow()), (Place::DiskCompressed, 7, None));
        assert_eq!(std::mem::size_of::<Record>(), 24);
    }
}

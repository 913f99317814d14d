//! A table of small per-page records, keyed by page number: the policies'
//! bookkeeping, in a few bytes a page rather than a hash-map entry's few
//! dozen.
//!
//! Page numbers are dense where it matters (the live runtime numbers a
//! region's pages from 0; a trace's heap is a few runs of consecutive
//! pages) but may be anywhere in `u64` (a trace's stack and libraries).
//! So the table is a radix of one level: leaves of [`LEAF`] consecutive
//! records, found by the leaf's number in an array for the first
//! [`DENSE_LEAVES`] leaves (the live runtime's pages, numbered from 0: an
//! index costs less than a hash on the fault path) and by a hash of it
//! beyond. A dense run costs the
//! record's size a page plus a leaf header per 64 pages; a lone page costs a
//! whole leaf, which is the price of keeping the records of dense runs
//! free of any key. A leaf is freed when its last record goes back to the
//! default, so a table holds only the leaves of pages it knows.

use rustc_hash::FxHashMap;

/// Records a leaf holds: pages `64k` to `64k + 63`.
pub(crate) const LEAF: usize = 64;

/// Leaves found by index: pages below 2^24 (64 GiB of 4 KiB pages). The
/// index grows to the highest leaf used, 8 bytes a leaf.
const DENSE_LEAVES: u64 = 1 << 18;

struct Leaf<T> {
    records: [T; LEAF],
    /// Records other than the default.
    used: u32,
}

/// Per-page records of type `T`; a page without one reads as
/// `T::default()`, and setting a page's record to the default forgets it.
pub(crate) struct PageMap<T> {
    dense: Vec<Option<Box<Leaf<T>>>>,
    sparse: FxHashMap<u64, Box<Leaf<T>>>,
}

impl<T> Default for PageMap<T> {
    fn default() -> Self {
        PageMap {
            dense: Vec::new(),
            sparse: FxHashMap::default(),
        }
    }
}

fn split(page: u64) -> (u64, usize) {
    (page / LEAF as u64, (page % LEAF as u64) as usize)
}

impl<T: Copy + Default + PartialEq> PageMap<T> {
    fn leaf(&self, key: u64) -> Option<&Leaf<T>> {
        if key < DENSE_LEAVES {
            self.dense.get(key as usize)?.as_deref()
        } else {
            self.sparse.get(&key).map(|l| &**l)
        }
    }

    fn leaf_mut(&mut self, key: u64) -> Option<&mut Leaf<T>> {
        if key < DENSE_LEAVES {
            self.dense.get_mut(key as usize)?.as_deref_mut()
        } else {
            self.sparse.get_mut(&key).map(|l| &mut **l)
        }
    }

    fn remove_leaf(&mut self, key: u64) {
        if key < DENSE_LEAVES {
            self.dense[key as usize] = None;
        } else {
            self.sparse.remove(&key);
        }
    }

    fn leaf_or_new(&mut self, key: u64) -> &mut Leaf<T> {
        let new = || {
            Box::new(Leaf {
                records: [T::default(); LEAF],
                used: 0,
            })
        };
        if key < DENSE_LEAVES {
            let i = key as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].get_or_insert_with(new)
        } else {
            self.sparse.entry(key).or_insert_with(new)
        }
    }

    /// The record of `page` (the default if it has none).
    pub fn get(&self, page: u64) -> T {
        let (leaf, i) = split(page);
        self.leaf(leaf).map_or_else(T::default, |l| l.records[i])
    }

    /// Sets the record of `page`; the default removes it.
    pub fn set(&mut self, page: u64, record: T) {
        let (key, i) = split(page);
        let empty = T::default();
        if record == empty {
            if let Some(leaf) = self.leaf_mut(key) {
                if leaf.records[i] != empty {
                    leaf.records[i] = empty;
                    leaf.used -= 1;
                    if leaf.used == 0 {
                        self.remove_leaf(key);
                    }
                }
            }
            return;
        }
        let leaf = self.leaf_or_new(key);
        if leaf.records[i] == empty {
            leaf.used += 1;
        }
        leaf.records[i] = record;
    }

    /// Changes the record of `page` in place through `f`.
    pub fn update(&mut self, page: u64, f: impl FnOnce(&mut T)) {
        let mut r = self.get(page);
        f(&mut r);
        self.set(page, r);
    }

    /// Leaves held.
    #[cfg(test)]
    fn leaves(&self) -> usize {
        self.dense.iter().flatten().count() + self.sparse.len()
    }

    /// Bytes the table holds (leaves and the indexes over them).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.dense.capacity() * std::mem::size_of::<Option<Box<Leaf<T>>>>()
            + self.sparse.capacity() * (std::mem::size_of::<(u64, Box<Leaf<T>>)>() + 1)
            + self.leaves() * std::mem::size_of::<Leaf<T>>()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn reads_as_a_hash_map_with_defaults(ops in proptest::collection::vec((0u64..300, 0u32..4), 1..2000), far in any::<u64>()) {
            let mut table: PageMap<u32> = PageMap::default();
            let mut model: HashMap<u64, u32> = HashMap::new();
            for (page, value) in ops {
                // Some pages far away, as a trace's stack would be.
                let page = if value == 3 { far.wrapping_add(page) } else { page };
                table.set(page, value);
                if value == 0 { model.remove(&page); } else { model.insert(page, value); }
                prop_assert_eq!(table.get(page), value);
            }
            for (&page, &value) in &model {
                prop_assert_eq!(table.get(page), value);
            }
            let leaves: std::collections::HashSet<u64> = model.keys().map(|p| p / LEAF as u64).collect();
            prop_assert_eq!(table.leaves(), leaves.len(), "a leaf with no record is freed");
        }
    }

    #[test]
    fn a_dense_run_costs_the_records_and_little_more() {
        let mut table: PageMap<u64> = PageMap::default();
        for page in 0..65_536 {
            table.set(page, page + 1);
        }
        let per_page = table.bytes() as f64 / 65_536.0;
        assert!((8.0..9.0).contains(&per_page), "{per_page} bytes a page");
        table.update(7, |r| *r = 0);
        assert_eq!(table.get(7), 0);
        assert_eq!(table.get(8), 9);
    }
}

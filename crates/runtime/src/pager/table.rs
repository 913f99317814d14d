//! The page-state table: where every page of the region is, with the
//! swap-file slots of those on disk beside it (see `disk`), and the counts
//! the budget reads (pages seen, pages resident).

use std::ops::{Index, IndexMut};

use super::disk::DiskSlots;
use crate::aligned::ZeroTable;

/// Where a page is: the four places of `ccvm_policy::Level` (`New`,
/// `Uncompressed`, `Compressed`, `Disk`, named as the policy and the
/// simulator name them), and three ways of being in one of them that only
/// the mechanism sees (`Trapped` and `Zero`, `Pending`).
///
/// repr(u8), New first: zeroed memory holds New pages (see `untouched`).
#[derive(Clone, Copy)]
#[repr(u8)]
pub(super) enum PageState {
    // Made only as zeroed memory, by `untouched`.
    #[allow(dead_code)]
    New = 0,
    /// Uncompressed and mapped in the region.
    Uncompressed,
    /// Uncompressed, its frame in its shadow slot: a touch faults.
    Trapped,
    /// Evicted, copied into the helper process's ring to be compressed
    /// there (see the `compressor` module); compressed as far as the
    /// policy knows.
    Pending,
    /// In the compression cache.
    Compressed,
    /// In the swap file, at the slot kept at this index of `disk`.
    Disk(u32),
    /// New, only read so far: mapped as the zero page, write-protected;
    /// holds no memory and is not in the policy.
    Zero,
}

// SAFETY: repr(u8) with `New` = 0 and plain-data fields: all-zero bytes
// are a `New` page.
unsafe impl crate::aligned::Zeroable for PageState {}

/// Where every page is. Indexed by page number.
pub(super) struct PageTable {
    states: ZeroTable<PageState>,
    /// The swap-file slots of the pages on disk.
    pub(super) disk: DiskSlots,
    /// Pages that have left `New`: the state table holds memory for them.
    pub(super) seen: usize,
    /// Pages mapped in the region (trapped ones included).
    pub(super) resident: usize,
}

impl PageTable {
    /// A table of `pages` pages, all `New`, holding no memory until used.
    pub(super) fn new(pages: usize) -> PageTable {
        PageTable {
            states: ZeroTable::new(pages),
            disk: DiskSlots::default(),
            seen: 0,
            resident: 0,
        }
    }

    /// The region's length in pages.
    pub(super) fn len(&self) -> usize {
        self.states.len()
    }
}

impl Index<usize> for PageTable {
    type Output = PageState;
    fn index(&self, page: usize) -> &PageState {
        &self.states[page]
    }
}

impl IndexMut<usize> for PageTable {
    fn index_mut(&mut self, page: usize) -> &mut PageState {
        &mut self.states[page]
    }
}

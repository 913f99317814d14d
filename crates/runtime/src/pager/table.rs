//! The page-state table: where every page of the region is, with the
//! swap-file slots of those on disk beside it (see `disk`), and the counts
//! the budget reads (pages seen, pages resident), and which stretches of
//! the table were ever written, so that walks over every page (at a fork)
//! skip the untouched bulk of a large region.

use std::ops::{Index, IndexMut, Range};

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
    /// Pages mapped in the region (trapped ones included).
    pub(super) resident: usize,
    /// One bit per `CHUNK` pages: set once any page of the chunk was
    /// written (so every page outside a set chunk is `New`).
    written: Vec<u64>,
}

/// Pages a bit of `PageTable::written` covers: one page of the state
/// table (8-byte states), so a walk reads only table pages that exist.
const CHUNK: usize = 512;

impl PageTable {
    /// A table of `pages` pages, all `New`, holding no memory until used.
    pub(super) fn new(pages: usize) -> PageTable {
        PageTable {
            states: ZeroTable::new(pages),
            disk: DiskSlots::default(),
            resident: 0,
            written: vec![0; pages.div_ceil(CHUNK).div_ceil(64)],
        }
    }

    /// The stretches of pages that may hold a page other than `New`, in
    /// order and disjoint: every page outside them is `New`. A walk over
    /// every page that skips `New` ones may walk these instead.
    pub(super) fn written_runs(&self) -> Vec<Range<usize>> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        for (w, &bits) in self.written.iter().enumerate() {
            let mut rest = bits;
            while rest != 0 {
                let chunk = w * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let run = chunk * CHUNK..((chunk + 1) * CHUNK).min(self.len());
                match runs.last_mut() {
                    Some(last) if last.end == run.start => last.end = run.end,
                    _ => runs.push(run),
                }
            }
        }
        runs
    }

    /// Bytes of the state table that hold memory: a page of it for each
    /// chunk any page of which left `New` (a page that goes back to `New`
    /// keeps its chunk's).
    pub(super) fn table_bytes(&self) -> u64 {
        let chunks: u32 = self.written.iter().map(|w| w.count_ones()).sum();
        u64::from(chunks) * (CHUNK * std::mem::size_of::<PageState>()) as u64
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
        let chunk = page / CHUNK;
        self.written[chunk / 64] |= 1 << (chunk % 64);
        &mut self.states[page]
    }
}

#[cfg(test)]
mod tests {
    use super::{PageState, PageTable, CHUNK};

    /// Every page a walk of `written_runs` skips is `New`, and the runs
    /// are ordered, disjoint and within the table, for writes anywhere
    /// (chunk edges, the last, partial chunk).
    #[test]
    fn written_runs_cover_every_page_that_left_new() {
        let len = 70 * CHUNK + 37;
        let mut table = PageTable::new(len);
        assert!(table.written_runs().is_empty());
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..400 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let page = match round % 4 {
                0 => (seed as usize) % len,
                1 => ((seed as usize) % 70) * CHUNK,
                2 => ((seed as usize) % 70) * CHUNK + CHUNK - 1,
                _ => len - 1,
            };
            table[page] = if round % 3 == 0 {
                PageState::Disk(round)
            } else {
                PageState::Zero
            };
            let runs = table.written_runs();
            for pair in runs.windows(2) {
                assert!(pair[0].end < pair[1].start, "runs {runs:?} not ordered and apart");
            }
            assert!(runs.last().is_some_and(|r| r.end <= len));
            let covered = |p: usize| runs.iter().any(|r| r.contains(&p));
            for p in 0..len {
                if !matches!(table[p], PageState::New) {
                    assert!(covered(p), "page {p} left New outside {runs:?}");
                }
            }
        }
    }
}

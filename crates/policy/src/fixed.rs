//! The fixed split: a set share of the RAM budget holds uncompressed pages,
//! the rest is the compression cache. With a share of 1 there is no cache
//! and evicted pages go to disk uncompressed (the baseline).
//!
//! Replacement is a segmented queue, the arrangement paper 000 §3.1 names
//! as one of the LRU approximations its adaptivity tolerates: uncompressed
//! pages leave in recency order as far as the mechanism sees it (a
//! simulator replaying every reference gets exact LRU), and the
//! compression cache is an exact LRU segment because every touch of a
//! compressed page faults. The oldest compressed page is the one spilled
//! to disk. A mechanism that sees only faults (the live runtime) gets the
//! two-list replacement of the `resident` module instead of first in,
//! first out, but for `none` (no cache), which stays in fault order as
//! the baseline `adaptive-safe` estimates.

use crate::levels::Levels;
use crate::{Action, Budget, Level, Policy};

/// The fixed-split policy. See the module docs.
pub struct FixedSplit {
    share: f64,
    page_size: u64,
    uncompressed_pages: usize,
    compressed_budget: u64,
    levels: Levels,
}

impl FixedSplit {
    /// A split of `budget` giving `uncompressed_share` (0 to 1) of it to
    /// uncompressed pages, at least one page.
    ///
    /// ```
    /// use ccvm_policy::{Action, Budget, FixedSplit, Level, Policy};
    /// let budget = Budget { ram_bytes: 4 * 4096, page_size: 4096 };
    /// let mut p = FixedSplit::new(budget, 0.5); // 2 pages + 8 KiB of cache
    /// let mut actions = Vec::new();
    /// for page in 0..3 {
    ///     p.touch(page, Level::New, &mut actions);
    /// }
    /// assert_eq!(actions, [Action::Compress(0)]);
    /// ```
    pub fn new(budget: Budget, uncompressed_share: f64) -> Self {
        let share = uncompressed_share.clamp(0.0, 1.0);
        let pages = ((budget.ram_bytes as f64 * share) / budget.page_size as f64).floor() as usize;
        let uncompressed_pages = pages.max(1);
        let compressed_budget = budget
            .ram_bytes
            .saturating_sub(uncompressed_pages as u64 * budget.page_size);
        FixedSplit {
            share,
            page_size: budget.page_size,
            uncompressed_pages,
            compressed_budget,
            levels: Levels::default(),
        }
    }

    /// Uncompressed pages allowed.
    pub fn uncompressed_pages(&self) -> usize {
        self.uncompressed_pages
    }

    /// Bytes allowed in the compression cache.
    pub fn compressed_budget(&self) -> u64 {
        self.compressed_budget
    }
}

impl Policy for FixedSplit {
    fn name(&self) -> &'static str {
        if self.compressed_budget == 0 {
            "none"
        } else {
            "fixed"
        }
    }

    fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>) {
        self.levels.touch(page, from);
        while self.levels.uncompressed_len() > self.uncompressed_pages {
            let victim = self.levels.pop_victim().expect("over the limit, so not empty");
            if self.compressed_budget == 0 {
                self.levels.on_disk(victim);
                actions.push(Action::SwapOut(victim));
            } else {
                actions.push(Action::Compress(victim));
            }
        }
    }

    fn compressed(&mut self, page: u64, bytes: u64, actions: &mut Vec<Action>) {
        self.levels.compressed(page, bytes);
        while self.levels.compressed_bytes() > self.compressed_budget && self.levels.spill_oldest(actions) {}
    }

    crate::levels::delegate_to_levels!();

    fn discarded(&mut self, page: u64) {
        self.levels.forget(page);
    }

    fn faults_only(&mut self) {
        // `none` stays in fault order: it is the baseline that
        // `adaptive-safe`'s guard estimates on its miniature splits.
        if self.compressed_budget > 0 {
            self.levels.use_workingset();
        }
    }

    fn cache_limit(&self) -> u64 {
        self.compressed_budget
    }

    fn uncompressed_limit(&self) -> usize {
        self.uncompressed_pages
    }

    fn set_ram(&mut self, ram_bytes: u64) {
        let none = self.compressed_budget == 0;
        let pages = ((ram_bytes as f64 * self.share) / self.page_size as f64).floor() as usize;
        self.uncompressed_pages = pages.max(1);
        self.compressed_budget = if none {
            0
        } else {
            ram_bytes.saturating_sub(self.uncompressed_pages as u64 * self.page_size)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::levels::testing::budget;

    #[test]
    fn no_compression_swaps_out_in_recency_order() {
        let mut p = FixedSplit::new(budget(2), 1.0);
        let mut a = Vec::new();
        p.touch(1, Level::New, &mut a);
        p.touch(2, Level::New, &mut a);
        p.touch(1, Level::Uncompressed, &mut a);
        p.touch(3, Level::New, &mut a);
        assert_eq!(a, [Action::SwapOut(2)]);
        assert_eq!(p.occupancy(), (2, 0, 1));
    }

    #[test]
    fn compressed_pages_spill_oldest_first_when_over_budget() {
        // 1 uncompressed page and 3 pages' worth of compressed bytes.
        let mut p = FixedSplit::new(budget(4), 0.25);
        let (mut a, mut spills) = (Vec::new(), Vec::new());
        for page in 0..5 {
            p.touch(page, Level::New, &mut a);
            for act in std::mem::take(&mut a) {
                if let Action::Compress(v) = act {
                    p.compressed(v, 5000, &mut spills);
                }
            }
        }
        // Pages 0..3 compressed at 5000 B each: only two fit in 12288 B.
        assert_eq!(spills, [Action::Spill(0), Action::Spill(1)]);
        assert_eq!(p.occupancy(), (1, 2, 2));
        assert_eq!(p.compressed_bytes(), 10_000);
        // Touching a compressed page makes it uncompressed again.
        a.clear();
        p.touch(2, Level::Compressed, &mut a);
        assert_eq!(a, [Action::Compress(4)]);
        assert_eq!(p.compressed_bytes(), 5000);
    }

    #[test]
    fn make_room_spills_the_oldest() {
        let mut p = FixedSplit::new(budget(8), 0.5);
        let mut a = Vec::new();
        p.compressed(7, 100, &mut a);
        p.compressed(9, 100, &mut a);
        assert!(p.make_room(&mut a));
        assert!(p.make_room(&mut a));
        assert!(!p.make_room(&mut a));
        assert_eq!(a, [Action::Spill(7), Action::Spill(9)]);
    }

    #[test]
    fn shrink_evicts_the_oldest_uncompressed_page_where_the_split_sends_it() {
        let mut p = FixedSplit::new(budget(8), 0.5);
        let mut a = Vec::new();
        for page in 0..4 {
            p.touch(page, Level::New, &mut a);
        }
        assert!(a.is_empty());
        // Into the cache, oldest first, until none is uncompressed.
        for page in 0..4 {
            assert!(p.shrink(&mut a));
            assert_eq!(a.pop(), Some(Action::Compress(page)));
            p.compressed(page, 100, &mut a);
        }
        assert!(!p.shrink(&mut a));
        assert_eq!(p.occupancy(), (0, 4, 0));
        // Without a cache, to disk as it is.
        let mut none = FixedSplit::new(budget(8), 1.0);
        none.touch(5, Level::New, &mut a);
        assert!(none.shrink(&mut a));
        assert_eq!(a, [Action::SwapOut(5)]);
        assert_eq!(none.occupancy(), (0, 0, 1));
    }
}

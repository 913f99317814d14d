//! The bookkeeping every policy keeps: uncompressed pages and the
//! compression cache each in recency order, what each cached page takes,
//! and which pages are on disk. Policies differ only in how much memory
//! each level may have; this is the part they share. It is kept in one
//! record a page ([`crate::lists`]).
//!
//! # Uncompressed pages in replacement order
//!
//! One recency queue, or two
//! lists with refault-distance activation, so that a loop over more pages
//! than memory holds does not flush the pages a program keeps using.
//!
//! A mechanism that sees only faults replaces uncompressed pages first in,
//! first out. Over a loop longer than memory (a tracing garbage collector's
//! pass over the heap, a scan of a table) that misses on every page of
//! every pass, whatever the memory, and it evicts a hot page once per
//! turn of the queue. The kernel's answer (its "workingset" detection)
//! needs no reference bits, only the faults ccvm sees: remember when each
//! evicted page left (a shadow entry, counted in evictions), and when it
//! comes back, call the evictions since its *refault distance*. A page
//! whose distance is small would have stayed with a little more memory:
//! it goes to the *active* list. Any other page, and every new page, goes
//! to the *inactive* list. Victims come from the inactive list, oldest
//! first; the active list may hold at most half the pages, and its oldest
//! page moves to the newest end of the inactive list when it grows past
//! that, keeping a second chance to be seen again.
//!
//! ## Choices
//!
//! * A page is activated when its distance is at most an eighth of the
//!   resident pages ([`ACTIVATE_WITHIN`]). The kernel compares with the
//!   active list's length, which also grows from reference bits; with
//!   faults alone an empty active list would never fill. A loop longer
//!   than memory refaults at a distance of its excess over memory, so
//!   loops up to 1.125 times memory still churn the active list; pages a
//!   program keeps using come back within far fewer evictions. An eighth
//!   and a quarter brought the same pages back on the CPython key-value
//!   cache (`ccvm exec --ram 178M --policy fixed20 -- python3
//!   docs/programs/kvcache.py`: 706,053 and 706,218 pages decompressed,
//!   against 862,995 with one queue); an eighth fewer in its lookups,
//!   where a looser bound activates cold pages that happen to return.
//! * A reference seen on a resident page (a simulator's touch, the
//!   runtime's write scans) activates it, as the kernel does for a page
//!   referenced on the inactive list.
//! * The fixed split with a cache and `adaptive-safe` use the two lists,
//!   and only on a mechanism that sees faults alone
//!   ([`crate::Policy::faults_only`]): a simulator that sees every
//!   reference keeps exact LRU, which the paper's results are stated for,
//!   and the policies' hand-worked counts with it. `none` stays in fault
//!   order: it is the baseline `adaptive-safe` estimates, and the
//!   miniature splits `adaptive-safe` sizes its cache by keep one queue
//!   too. With two lists in the miniatures as well, the CPython key-value
//!   cache at `--ram 178M` took 31.2, 32.4, 45.8 and 67.4 s against 27.9,
//!   29.1 and 30.0 s with one queue everywhere, its guard turning
//!   compression off for long stretches; with two lists in the run alone,
//!   the run's cache faults fell by 12% on Tcl's session table
//!   (`docs/programs/sessions.tcl`, `--ram 145M`), 15% on the key-value
//!   cache (`--ram 160M`) and 3% on perl's (`docs/programs/users.pl`,
//!   `--ram 170M`), and the built-in graph at 128 MiB in 100 MiB took a
//!   fifth fewer disk faults (`docs/results.md`, "Two lists in
//!   `adaptive-safe`'s run").
//! * A page the program drops leaves its level and loses its shadow entry
//!   ([`Levels::forget`]): its contents are gone, so its next touch is a
//!   new page's, not a refault.
//! * A shadow entry is 4 bytes of the evicted page's record
//!   ([`crate::lists`]), charged to the budget with ccvm's other tables.

use crate::lists::{Lists, Place, Record};
use crate::{Action, Level};

/// A page comes back active when at most this fraction of the resident
/// pages (1/8) were evicted since it left.
const ACTIVATE_WITHIN: usize = 8;

/// Every page's level, and the levels' recency orders. See the
/// module docs.
#[derive(Default)]
pub(crate) struct Levels {
    lists: Lists,
    compressed_bytes: u64,
    on_disk: usize,
    /// Evictions of uncompressed pages so far (counted with two lists).
    evictions: u64,
    workingset: bool,
}

impl Levels {
    /// From now on, two lists of uncompressed pages with refault-distance
    /// activation. Called before the first page comes in.
    pub fn use_workingset(&mut self) {
        debug_assert!(
            self.uncompressed_len() == 0,
            "the replacement changes before any page is in"
        );
        self.workingset = true;
    }

    /// `page` was touched and served from `from`: it leaves the cache or
    /// the disk and becomes the newest uncompressed page (or, an active
    /// page touched with two lists, keeps its place). Returns whether it
    /// came from disk compressed (so it was decompressed too).
    pub fn touch(&mut self, page: u64, from: Level) -> bool {
        let r = self.lists.record(page);
        let was = r.place();
        let decompressed = from == Level::Disk && was == Place::DiskCompressed;
        let active = self.workingset
            && match from {
                Level::Uncompressed => matches!(was, Place::Inactive | Place::Active),
                Level::Compressed | Level::Disk => r.shadow().is_some_and(|left| {
                    (self.evictions as u32).wrapping_sub(left) as usize <= self.uncompressed_len() / ACTIVATE_WITHIN
                }),
                Level::New => false,
            };
        if !active && was == Place::Active {
            return decompressed;
        }
        let r = self.lists.unlink(page);
        self.left(r);
        let place = if active { Place::Active } else { Place::Inactive };
        self.lists.place(page, r.with_shadow(None).with_size(0), place);
        while self.lists.len(Place::Active) > self.lists.len(Place::Inactive) {
            let demoted = self
                .lists
                .oldest(Place::Active)
                .expect("longer than the other, so not empty");
            self.lists.move_to(demoted, Place::Inactive);
        }
        decompressed
    }

    /// Counts `r`'s page out of the level it was in.
    fn left(&mut self, r: Record) {
        match r.place() {
            Place::Compressed => self.compressed_bytes -= r.size(),
            Place::DiskRaw | Place::DiskCompressed => self.on_disk -= 1,
            _ => {}
        }
    }

    /// `page` is now in the cache, taking `bytes`.
    pub fn compressed(&mut self, page: u64, bytes: u64) {
        let r = self.lists.unlink(page);
        self.left(r);
        let r = r.with_size(bytes);
        self.compressed_bytes += r.size();
        self.lists.place(page, r, Place::Compressed);
    }

    /// Sends the oldest cached page to disk; `false` if the cache is empty.
    pub fn spill_oldest(&mut self, actions: &mut Vec<Action>) -> bool {
        let Some(victim) = self.lists.oldest(Place::Compressed) else {
            return false;
        };
        let r = self.lists.unlink(victim);
        self.left(r);
        self.lists.place(victim, r.with_size(0), Place::DiskCompressed);
        self.on_disk += 1;
        actions.push(Action::Spill(victim));
        true
    }

    /// `page` went (or is sent) to disk without passing through the cache.
    pub fn on_disk(&mut self, page: u64) {
        let r = self.lists.unlink(page);
        self.left(r);
        self.lists.place(page, r.with_size(0), Place::DiskRaw);
        self.on_disk += 1;
    }

    /// `page`'s contents were dropped: it leaves its level (and any
    /// shadow entry goes with it), as a page never seen.
    pub fn forget(&mut self, page: u64) {
        let r = self.lists.unlink(page);
        self.left(r);
        self.lists.place(page, r, Place::Unknown);
    }

    /// Uncompressed pages.
    pub fn uncompressed_len(&self) -> usize {
        self.lists.len(Place::Inactive) + self.lists.len(Place::Active)
    }

    /// Pages in the cache.
    pub fn compressed_len(&self) -> usize {
        self.lists.len(Place::Compressed)
    }

    /// The next uncompressed page to leave, without taking it.
    pub fn peek_victim(&self) -> Option<u64> {
        self.lists
            .oldest(Place::Inactive)
            .or_else(|| self.lists.oldest(Place::Active))
    }

    /// Takes the next uncompressed page to leave, remembering when it left
    /// (with two lists); the caller says where it goes.
    pub fn pop_victim(&mut self) -> Option<u64> {
        let victim = self.peek_victim()?;
        let r = self.lists.unlink(victim);
        let shadow = self.workingset.then(|| {
            let s = self.evictions as u32;
            self.evictions += 1;
            s
        });
        self.lists.place(victim, r.with_shadow(shadow), Place::Out);
        Some(victim)
    }

    /// The uncompressed pages, next victim first.
    pub fn uncompressed_oldest_first(&self) -> impl Iterator<Item = u64> + '_ {
        self.lists
            .oldest_first(Place::Inactive)
            .chain(self.lists.oldest_first(Place::Active))
    }

    /// The oldest page in the cache.
    pub fn oldest_compressed(&self) -> Option<u64> {
        self.lists.oldest(Place::Compressed)
    }

    /// Bytes the uncompressed pages and the cache take together.
    pub fn used(&self, page_size: u64) -> u64 {
        self.uncompressed_len() as u64 * page_size + self.compressed_bytes
    }

    pub fn compressed_bytes(&self) -> u64 {
        self.compressed_bytes
    }

    /// Pages per level: (uncompressed, compressed, on disk).
    pub fn occupancy(&self) -> (usize, usize, usize) {
        (self.uncompressed_len(), self.compressed_len(), self.on_disk)
    }
}

/// The [`Policy`](crate::Policy) methods every policy answers from its
/// `levels` field alone: spilling and shrinking on demand, pages swapped
/// without the cache, occupancy and the cache's bytes.
macro_rules! delegate_to_levels {
    () => {
        fn make_room(&mut self, actions: &mut Vec<Action>) -> bool {
            self.levels.spill_oldest(actions)
        }

        fn shrink(&mut self, actions: &mut Vec<Action>) -> bool {
            let Some(victim) = self.levels.pop_victim() else {
                return false;
            };
            if self.cache_limit() > 0 {
                actions.push(Action::Compress(victim));
            } else {
                self.levels.on_disk(victim);
                actions.push(Action::SwapOut(victim));
            }
            true
        }

        fn swapped_instead(&mut self, page: u64) {
            self.levels.on_disk(page);
        }

        fn occupancy(&self) -> (usize, usize, usize) {
            self.levels.occupancy()
        }

        fn compressed_bytes(&self) -> u64 {
            self.levels.compressed_bytes()
        }
    };
}
pub(crate) use delegate_to_levels;

/// Drives a policy as a mechanism would, for the policies' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashMap;

    use crate::{Action, Budget, Level, Policy};

    /// The page size of the policies' tests.
    pub const PAGE: u64 = 4096;

    /// A budget of `pages` pages.
    pub fn budget(pages: u64) -> Budget {
        Budget {
            ram_bytes: pages * PAGE,
            page_size: PAGE,
        }
    }

    /// What a drive saw.
    pub struct Drive {
        /// Touches served from disk.
        pub disk: u64,
        /// Touches served from the cache.
        pub hits: u64,
        /// Every action, in order.
        pub actions: Vec<Action>,
        /// The most pages one touch compressed.
        pub most_compressed_at_once: usize,
    }

    /// Replays `refs` through `p`, compressing every page to `bytes` and
    /// checking after each reference that the policy stays within `ram`.
    pub fn drive(p: &mut dyn Policy, refs: &[u64], bytes: u64, ram: u64) -> Drive {
        let mut level: HashMap<u64, Level> = HashMap::new();
        let mut d = Drive {
            disk: 0,
            hits: 0,
            actions: Vec::new(),
            most_compressed_at_once: 0,
        };
        for &r in refs {
            let from = *level.get(&r).unwrap_or(&Level::New);
            match from {
                Level::Disk => d.disk += 1,
                Level::Compressed => d.hits += 1,
                _ => {}
            }
            let mut a = Vec::new();
            p.touch(r, from, &mut a);
            level.insert(r, Level::Uncompressed);
            let mut i = 0;
            while i < a.len() {
                match a[i] {
                    Action::Compress(v) => {
                        level.insert(v, Level::Compressed);
                        let mut more = Vec::new();
                        p.compressed(v, bytes, &mut more);
                        a.extend(more);
                    }
                    Action::Spill(v) | Action::SwapOut(v) => {
                        level.insert(v, Level::Disk);
                    }
                    Action::Watch(_) => {}
                }
                i += 1;
            }
            let compressed = a.iter().filter(|x| matches!(x, Action::Compress(_))).count();
            d.most_compressed_at_once = d.most_compressed_at_once.max(compressed);
            let (u, _, _) = p.occupancy();
            assert!(u as u64 * 4096 + p.compressed_bytes() <= ram, "over budget");
            d.actions.extend(a);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Levels {
        fn with_workingset() -> Levels {
            let mut r = Levels::default();
            r.use_workingset();
            r
        }

        fn is_uncompressed(&self, page: u64) -> bool {
            matches!(self.lists.record(page).place(), Place::Inactive | Place::Active)
        }
    }

    /// A scan of `scan` cold pages through `frames` frames, touching each
    /// of `hot` hot pages after every `every` cold ones, as a mechanism
    /// that sees only faults: how many touches of hot pages missed.
    fn hot_misses_under_a_scan(mut r: Levels, frames: usize, hot: u64, scan: u64, every: u64) -> u64 {
        let mut misses = 0;
        let mut seen = std::collections::HashSet::new();
        let mut touch = |r: &mut Levels, page: u64| -> bool {
            if r.is_uncompressed(page) {
                return false;
            }
            r.touch(
                page,
                if seen.insert(page) {
                    Level::New
                } else {
                    Level::Compressed
                },
            );
            while r.uncompressed_len() > frames {
                r.pop_victim();
            }
            true
        };
        for i in 0..scan {
            touch(&mut r, 1000 + i);
            if i % every == 0 {
                for h in 0..hot {
                    misses += u64::from(touch(&mut r, h));
                }
            }
        }
        misses
    }

    #[test]
    fn hot_pages_outlive_a_scan_in_two_lists_and_not_in_one() {
        // 10 hot pages touched after every 5th of 10,000 cold pages, in
        // 100 frames: one queue evicts each hot page once per turn of the
        // queue (about every 100 faults); two lists keep them active after
        // their first return.
        let one = hot_misses_under_a_scan(Levels::default(), 100, 10, 10_000, 5);
        let two = hot_misses_under_a_scan(Levels::with_workingset(), 100, 10, 10_000, 5);
        assert!(one >= 10 * (10_000 / 110), "{one}");
        assert!(two <= 2 * 10, "{two}");
    }

    #[test]
    fn pages_back_soon_after_eviction_are_kept_before_new_ones() {
        let mut r = Levels::with_workingset();
        for p in 0..16 {
            r.touch(p, Level::New);
        }
        assert_eq!(r.pop_victim(), Some(0));
        // One eviction since it left, within an eighth of 15: active.
        r.touch(0, Level::Compressed);
        for p in 16..20 {
            r.touch(p, Level::New);
        }
        let order: Vec<u64> = std::iter::from_fn(|| r.pop_victim()).collect();
        let mut want: Vec<u64> = (1..20).collect();
        want.push(0);
        assert_eq!(order, want);
    }

    #[test]
    fn pages_back_long_after_eviction_are_not_activated() {
        let mut r = Levels::with_workingset();
        for p in 0..16 {
            r.touch(p, Level::New);
        }
        for _ in 0..8 {
            r.pop_victim();
        }
        // Page 0 left 8 evictions ago, more than an eighth of 8 pages.
        r.touch(0, Level::Compressed);
        assert_eq!(r.uncompressed_oldest_first().last(), Some(0));
        assert_eq!(r.pop_victim(), Some(8), "the oldest inactive page goes first");
        assert!(r.lists.len(Place::Active) == 0);
    }

    #[test]
    fn the_active_list_holds_at_most_half() {
        let mut r = Levels::with_workingset();
        for p in 0..10 {
            r.touch(p, Level::New);
        }
        for p in 0..10 {
            r.touch(p, Level::Uncompressed);
        }
        assert!(
            r.lists.len(Place::Active) <= r.lists.len(Place::Inactive),
            "{} {}",
            r.lists.len(Place::Active),
            r.lists.len(Place::Inactive)
        );
        assert_eq!(r.uncompressed_len(), 10);
        let mut all: Vec<u64> = r.uncompressed_oldest_first().collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn one_queue_is_first_in_first_out_whatever_the_level() {
        let mut r = Levels::default();
        for p in 0..4 {
            r.touch(p, Level::New);
        }
        r.pop_victim();
        r.touch(0, Level::Compressed);
        let order: Vec<u64> = std::iter::from_fn(|| r.pop_victim()).collect();
        assert_eq!(order, [1, 2, 3, 0]);
    }
}

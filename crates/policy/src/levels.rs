//! The bookkeeping every policy keeps: uncompressed pages and the
//! compression cache each in recency order, what each cached page takes,
//! and which pages are on disk. Policies differ only in how much memory
//! each level may have; this is the part they share.

use rustc_hash::FxHashMap;

use crate::queue::RecencyQueue;
use crate::resident::Resident;
use crate::{Action, Level};

#[derive(Default)]
pub(crate) struct Levels {
    /// Uncompressed pages, oldest first.
    pub uncompressed: Resident,
    /// Pages in the compression cache, oldest first (exact LRU: every
    /// touch of a cached page takes it out).
    pub compressed: RecencyQueue,
    sizes: FxHashMap<u64, u64>,
    compressed_bytes: u64,
    /// Pages on disk, and whether each was written compressed.
    on_disk: FxHashMap<u64, bool>,
}

impl Levels {
    /// `page` was touched and served from `from`: it leaves the cache or
    /// the disk and becomes the newest uncompressed page. Returns whether
    /// it came from disk compressed (so it was decompressed too).
    pub fn touch(&mut self, page: u64, from: Level) -> bool {
        let mut decompressed = false;
        match from {
            Level::Compressed if self.compressed.remove(page) => {
                self.compressed_bytes -= self.sizes.remove(&page).unwrap_or(0);
            }
            Level::Disk => {
                decompressed = self.on_disk.remove(&page).unwrap_or(false);
            }
            _ => {}
        }
        self.uncompressed.touch(page, from);
        decompressed
    }

    /// `page` is now in the cache, taking `bytes`.
    pub fn compressed(&mut self, page: u64, bytes: u64) {
        self.compressed.push_newest(page);
        self.compressed_bytes += bytes;
        if let Some(old) = self.sizes.insert(page, bytes) {
            self.compressed_bytes -= old;
        }
    }

    /// Sends the oldest cached page to disk; `false` if the cache is empty.
    pub fn spill_oldest(&mut self, actions: &mut Vec<Action>) -> bool {
        match self.compressed.pop_oldest() {
            Some(victim) => {
                self.compressed_bytes -= self.sizes.remove(&victim).unwrap_or(0);
                self.on_disk.insert(victim, true);
                actions.push(Action::Spill(victim));
                true
            }
            None => false,
        }
    }

    /// `page` went (or is sent) to disk without passing through the cache.
    pub fn on_disk(&mut self, page: u64) {
        self.on_disk.insert(page, false);
    }

    /// Bytes the uncompressed pages and the cache take together.
    pub fn used(&self, page_size: u64) -> u64 {
        self.uncompressed.len() as u64 * page_size + self.compressed_bytes
    }

    pub fn compressed_bytes(&self) -> u64 {
        self.compressed_bytes
    }

    /// Pages per level: (uncompressed, compressed, on disk).
    pub fn occupancy(&self) -> (usize, usize, usize) {
        (self.uncompressed.len(), self.compressed.len(), self.on_disk.len())
    }
}

/// The [`Policy`](crate::Policy) methods every policy answers from its
/// `levels` field alone: spilling on demand, pages swapped without the
/// cache, occupancy and the cache's bytes.
macro_rules! delegate_to_levels {
    () => {
        fn make_room(&mut self, actions: &mut Vec<Action>) -> bool {
            self.levels.spill_oldest(actions)
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

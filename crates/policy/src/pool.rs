//! Two policies to compare the adaptive one with: compressing every
//! evicted page into a pool capped at a share of memory (Linux zswap's
//! way, with its `max_pool_percent`), and the two caches competing by
//! recency with a bias (Douglis's scheme, as paper 000 §2 describes it).
//!
//! Both keep uncompressed pages in recency order and the pool as an LRU
//! segment, as [`FixedSplit`](crate::FixedSplit) does; they differ in how
//! much memory the pool may take.
//!
//! * Zswap: the pool grows while it is under its cap; uncompressed pages
//!   get the rest of memory. Past the cap the oldest compressed page goes
//!   to disk.
//! * Douglis: when memory is short, the older of the two caches' least
//!   recently used pages loses its frame, with the compressed page's age
//!   divided by the bias (so a bias above 1 favours keeping compressed
//!   pages; the paper notes some bias is needed for the compressed cache to
//!   hold anything, since its pages are always older). Ages are in touches.

use rustc_hash::FxHashMap as HashMap;

use crate::levels::Levels;
use crate::{Action, Budget, Level, Policy};

/// Which of the two schemes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    Cap(u64),
    Bias(f64),
}

/// A compressed pool sized by a cap (zswap) or by biased recency
/// (Douglis). See the module docs.
pub struct Pool {
    rule: Rule,
    ram: u64,
    page_size: u64,
    now: u64,
    touched: HashMap<u64, u64>,
    levels: Levels,
}

impl Pool {
    fn new(budget: Budget, rule: Rule) -> Self {
        Pool {
            rule,
            ram: budget.ram_bytes,
            page_size: budget.page_size,
            now: 0,
            touched: HashMap::default(),
            levels: Levels::default(),
        }
    }

    /// Zswap: every evicted page is compressed into a pool of at most
    /// `max_pool_percent` of memory.
    ///
    /// ```
    /// use ccvm_policy::{Action, Budget, Level, Policy, Pool};
    /// let mut p = Pool::zswap(Budget { ram_bytes: 4 * 4096, page_size: 4096 }, 50);
    /// let mut a = Vec::new();
    /// for page in 0..5 { p.touch(page, Level::New, &mut a); }
    /// assert_eq!(a, [Action::Compress(0)]);
    /// ```
    pub fn zswap(budget: Budget, max_pool_percent: u32) -> Self {
        let cap = budget.ram_bytes * max_pool_percent.min(100) as u64 / 100;
        Pool::new(budget, Rule::Cap(cap))
    }

    /// Douglis's competing caches with `bias` (above 1 favours the
    /// compressed cache).
    pub fn douglis(budget: Budget, bias: f64) -> Self {
        Pool::new(budget, Rule::Bias(bias.max(1e-9)))
    }

    fn used(&self) -> u64 {
        self.levels.used(self.page_size)
    }

    fn age(&self, page: Option<u64>) -> Option<u64> {
        page.map(|p| self.now - self.touched.get(&p).copied().unwrap_or(0))
    }

    /// Frees memory until the pages held fit.
    fn fit(&mut self, actions: &mut Vec<Action>) {
        while self.used() > self.ram {
            let evict_uncompressed = match self.rule {
                Rule::Cap(_) => self.levels.uncompressed_len() != 0,
                Rule::Bias(bias) => {
                    let (u, c) = (self.levels.peek_victim(), self.levels.oldest_compressed());
                    match (self.age(u), self.age(c)) {
                        (Some(u), Some(c)) => u as f64 >= c as f64 / bias,
                        (Some(_), None) => true,
                        _ => false,
                    }
                }
            };
            // The page just touched stays.
            if evict_uncompressed && self.levels.uncompressed_len() > 1 {
                let v = self.levels.pop_victim().expect("not empty");
                actions.push(Action::Compress(v));
                // Its compressed size is charged when reported; stop here
                // so the mechanism can report it.
                return;
            }
            if !self.levels.spill_oldest(actions) {
                return;
            }
        }
    }
}

impl Policy for Pool {
    fn name(&self) -> &'static str {
        match self.rule {
            Rule::Cap(_) => "zswap",
            Rule::Bias(_) => "douglis",
        }
    }

    fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>) {
        self.now += 1;
        self.touched.insert(page, self.now);
        self.levels.touch(page, from);
        self.fit(actions);
    }

    fn compressed(&mut self, page: u64, bytes: u64, actions: &mut Vec<Action>) {
        self.levels.compressed(page, bytes);
        if let Rule::Cap(cap) = self.rule {
            while self.levels.compressed_bytes() > cap && self.levels.spill_oldest(actions) {}
        }
        self.fit(actions);
    }

    crate::levels::delegate_to_levels!();

    fn discarded(&mut self, page: u64) {
        self.levels.forget(page);
    }

    fn cache_limit(&self) -> u64 {
        match self.rule {
            Rule::Cap(cap) => cap,
            Rule::Bias(_) => self.ram - self.page_size,
        }
    }

    fn uncompressed_limit(&self) -> usize {
        (self.ram / self.page_size) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::levels::testing::drive;

    use crate::levels::testing::{budget, PAGE};

    /// Runs refs, compressing every page to `bytes`; returns all actions.
    fn run(p: &mut Pool, refs: &[u64], bytes: u64) -> Vec<Action> {
        let ram = p.ram;
        drive(p, refs, bytes, ram).actions
    }

    #[test]
    fn zswap_fills_its_pool_then_spills_the_oldest() {
        // 4 frames, pool capped at 50% = 2 frames = 4 pages of 2 KiB.
        let mut p = Pool::zswap(budget(4), 50);
        let a = run(&mut p, &[0, 1, 2, 3, 4, 5, 6, 7], 2048);
        // Pages 0.. are compressed as memory runs out; the pool holds four
        // of them at most, so the fifth compressed goes to disk first.
        let spills: Vec<_> = a.iter().filter(|x| matches!(x, Action::Spill(_))).collect();
        assert_eq!(spills.first(), Some(&&Action::Spill(0)));
        assert!(p.compressed_bytes() <= 2 * PAGE);
        assert_eq!(p.occupancy().0 + p.occupancy().1 + p.occupancy().2, 8);
    }

    #[test]
    fn douglis_without_bias_prefers_to_drop_compressed_pages() {
        // With bias 1, the compressed pages (always older) lose their
        // frames first: few pages stay compressed.
        let refs: Vec<u64> = (0..20).flat_map(|_| 0..6u64).collect();
        let mut unbiased = Pool::douglis(budget(4), 1.0);
        let a1 = run(&mut unbiased, &refs, 1024);
        let mut biased = Pool::douglis(budget(4), 8.0);
        let a2 = run(&mut biased, &refs, 1024);
        let spills = |a: &[Action]| a.iter().filter(|x| matches!(x, Action::Spill(_))).count();
        assert!(
            spills(&a2) < spills(&a1),
            "bias keeps more compressed: {} vs {}",
            spills(&a2),
            spills(&a1)
        );
    }
}

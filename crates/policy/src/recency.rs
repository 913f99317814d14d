//! The recency order of pages: where a touched page stood among all pages
//! by time of last touch, in O(log n), over the pages in memory and as many
//! again recently evicted (paper 000 §3 keeps "a comparable number" of
//! them).
//!
//! Method (Olken's, as a Fenwick tree over last-touch times): every touch
//! gets the next time stamp; a tree over time stamps holds a 1 at each
//! page's latest stamp, so the pages touched after a page's stamp, its
//! position, is a suffix sum. Stamps live in a window four times the
//! tracked depth; when it fills, the newest `depth` pages are renumbered
//! from 0 and the rest forgotten (their next touch counts as beyond the
//! depth), which costs O(depth log depth) once per 3 × depth touches.

use rustc_hash::FxHashMap as HashMap;

pub(crate) struct Recency {
    depth: usize,
    tree: Vec<u32>,
    stamp_of: HashMap<u64, usize>,
    cap: usize,
    now: usize,
    live: usize,
}

/// A page not seen within the tracked depth.
pub(crate) const BEYOND: usize = usize::MAX;

impl Recency {
    /// Tracks the `depth` most recently touched pages.
    pub fn new(depth: usize) -> Self {
        let depth = depth.max(1);
        let cap = 4 * depth;
        Recency {
            depth,
            tree: vec![0; cap + 1],
            stamp_of: HashMap::default(),
            cap,
            now: 0,
            live: 0,
        }
    }

    fn add(&mut self, stamp: usize, delta: i32) {
        let mut i = stamp + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Live stamps at or before `stamp`.
    fn prefix(&self, stamp: usize) -> usize {
        let (mut i, mut sum) = (stamp + 1, 0usize);
        while i > 0 {
            sum += self.tree[i] as usize;
            i &= i - 1;
        }
        sum
    }

    /// Records a touch of `page`; returns how many distinct pages were
    /// touched since its previous touch (0: it was the most recent), or
    /// [`BEYOND`] if it was not among the tracked pages.
    pub fn touch(&mut self, page: u64) -> usize {
        if self.now == self.cap {
            self.renumber();
        }
        let position = match self.stamp_of.get(&page) {
            Some(&s) => {
                let p = self.live - self.prefix(s);
                self.add(s, -1);
                self.live -= 1;
                if p < self.depth {
                    p
                } else {
                    BEYOND
                }
            }
            None => BEYOND,
        };
        let s = self.now;
        self.now += 1;
        self.stamp_of.insert(page, s);
        self.add(s, 1);
        self.live += 1;
        position
    }

    /// Keeps the newest `depth` pages, renumbered from 0.
    fn renumber(&mut self) {
        let mut keep: Vec<(usize, u64)> = self.stamp_of.iter().map(|(&p, &s)| (s, p)).collect();
        keep.sort_unstable();
        let drop = keep.len().saturating_sub(self.depth);
        self.tree.fill(0);
        self.stamp_of.clear();
        self.live = 0;
        self.now = 0;
        for &(_, page) in &keep[drop..] {
            let s = self.now;
            self.now += 1;
            self.stamp_of.insert(page, s);
            self.add(s, 1);
            self.live += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Positions by brute force: distinct pages touched since.
    fn model(history: &[u64], page: u64) -> Option<usize> {
        let last = history.iter().rposition(|&p| p == page)?;
        let mut seen: Vec<u64> = history[last + 1..].to_vec();
        seen.sort_unstable();
        seen.dedup();
        Some(seen.len())
    }

    #[test]
    fn hand_worked() {
        let mut r = Recency::new(10);
        assert_eq!(r.touch(1), BEYOND);
        assert_eq!(r.touch(2), BEYOND);
        assert_eq!(r.touch(3), BEYOND);
        assert_eq!(r.touch(1), 2);
        assert_eq!(r.touch(1), 0);
        assert_eq!(r.touch(2), 2);
    }

    proptest! {
        #[test]
        fn matches_brute_force(pages in proptest::collection::vec(0u64..40, 1..600), depth in 1usize..50) {
            let mut r = Recency::new(depth);
            let mut history = Vec::new();
            for &p in &pages {
                let want = match model(&history, p) {
                    Some(d) if d < depth => d,
                    _ => BEYOND,
                };
                let got = r.touch(p);
                // Renumbering may forget pages beyond the depth early, never
                // ones within it.
                prop_assert_eq!(got, want);
                history.push(p);
            }
        }
    }
}

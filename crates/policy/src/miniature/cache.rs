//! A split's compression cache over the sampled pages: an LRU queue whose
//! pages are charged their own compressed sizes, in pages, where those
//! are known (see the parent module's docs, "Each cached page is charged
//! its own size").

use rustc_hash::FxHashMap;

use crate::queue::RecencyQueue;

/// Cached pages, least recently used first, each with its charge.
///
/// Invariant: `charged` is the sum of `charges`, and `charges` holds
/// exactly the pages `queue` holds.
#[derive(Default)]
pub(super) struct ChargedCache {
    queue: RecencyQueue,
    charges: FxHashMap<u64, f32>,
    charged: f64,
}

impl ChargedCache {
    /// The pages' charges together, in pages.
    pub fn charged(&self) -> f64 {
        self.charged
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Caches `page` as the newest, charged `charge` pages.
    pub fn push_newest(&mut self, page: u64, charge: f32) {
        self.remove(page);
        self.queue.push_newest(page);
        self.charges.insert(page, charge);
        self.charged += f64::from(charge);
    }

    /// Takes `page` out; whether it was cached.
    pub fn remove(&mut self, page: u64) -> bool {
        match self.charges.remove(&page) {
            Some(charge) => {
                self.queue.remove(page);
                self.charged -= f64::from(charge);
                self.settle();
                true
            }
            None => false,
        }
    }

    /// Takes the least recently used page out.
    pub fn pop_oldest(&mut self) -> Option<u64> {
        let page = self.queue.pop_oldest()?;
        let charge = self.charges.remove(&page).expect("a queued page has a charge");
        self.charged -= f64::from(charge);
        self.settle();
        Some(page)
    }

    /// Charges cached `page` `charge` pages from now on; whether it is
    /// cached.
    pub fn recharge(&mut self, page: u64, charge: f32) -> bool {
        match self.charges.get_mut(&page) {
            Some(c) => {
                self.charged += f64::from(charge) - f64::from(*c);
                *c = charge;
                true
            }
            None => false,
        }
    }

    /// Keeps only the pages `keep` accepts, in their order.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        self.queue.retain(&keep);
        self.charges.retain(|&p, _| keep(p));
        self.charged = self.charges.values().map(|&c| f64::from(c)).sum();
    }

    /// Sums drift in floating point; an empty cache is charged nothing.
    fn settle(&mut self) {
        if self.charges.is_empty() {
            self.charged = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_follow_pushes_recharges_and_removals() {
        let mut c = ChargedCache::default();
        c.push_newest(1, 0.25);
        c.push_newest(2, 1.0);
        c.push_newest(3, 0.5);
        assert!((c.charged() - 1.75).abs() < 1e-9);
        assert!(c.recharge(2, 0.5));
        assert!(!c.recharge(9, 0.5), "not cached");
        assert!((c.charged() - 1.25).abs() < 1e-9);
        c.push_newest(1, 0.75); // moves to the newest end, recharged
        assert_eq!(c.pop_oldest(), Some(2));
        assert!(c.remove(3));
        assert!(!c.remove(3));
        assert_eq!((c.len(), c.charged()), (1, 0.75));
        c.retain(|p| p != 1);
        assert_eq!((c.len(), c.charged(), c.pop_oldest()), (0, 0.0, None));
    }
}

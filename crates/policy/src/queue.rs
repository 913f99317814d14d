//! A recency queue of page numbers: append at the newest end, take from
//! the oldest, move a page to the newest end, remove any page; all O(1)
//! amortized (a deque with lazy deletion: entries carry a sequence number
//! and are stale when the page's current number differs).

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

#[derive(Default)]
pub(crate) struct RecencyQueue {
    order: VecDeque<(u64, u64)>,
    seq: HashMap<u64, u64>,
    next: u64,
}

impl RecencyQueue {
    pub fn len(&self) -> usize {
        self.seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    /// Puts `page` at the newest end (moving it if present).
    pub fn push_newest(&mut self, page: u64) {
        let s = self.next;
        self.next += 1;
        self.seq.insert(page, s);
        self.order.push_back((s, page));
        // Keep stale entries from outnumbering live ones.
        if self.order.len() > 2 * self.seq.len() + 64 {
            let seq = &self.seq;
            self.order.retain(|&(s, p)| seq.get(&p) == Some(&s));
        }
    }

    /// The pages, oldest first.
    #[cfg(test)]
    pub fn oldest_first(&self) -> impl Iterator<Item = u64> + '_ {
        self.order
            .iter()
            .filter(|&&(s, p)| self.seq.get(&p) == Some(&s))
            .map(|&(_, p)| p)
    }

    /// Keeps only the pages `keep` accepts, in their order.
    pub fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        self.seq.retain(|&p, _| keep(p));
        let seq = &self.seq;
        self.order.retain(|&(s, p)| seq.get(&p) == Some(&s));
    }

    pub fn contains(&self, page: u64) -> bool {
        self.seq.contains_key(&page)
    }

    pub fn remove(&mut self, page: u64) -> bool {
        self.seq.remove(&page).is_some()
    }

    pub fn pop_oldest(&mut self) -> Option<u64> {
        while let Some((s, p)) = self.order.pop_front() {
            if self.seq.get(&p) == Some(&s) {
                self.seq.remove(&p);
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_with_moves_and_removals() {
        let mut q = RecencyQueue::default();
        for p in 0..5 {
            q.push_newest(p);
        }
        q.push_newest(1);
        q.remove(3);
        assert_eq!(q.len(), 4);
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_oldest()).collect();
        assert_eq!(order, [0, 2, 4, 1]);
    }

    #[test]
    fn stale_entries_are_trimmed() {
        let mut q = RecencyQueue::default();
        for i in 0..10_000 {
            q.push_newest(i % 10);
        }
        assert!(q.order.len() <= 2 * 10 + 65);
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_oldest()).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
    }
}

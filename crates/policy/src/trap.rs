//! Which uncompressed pages are trapped: how a mechanism that sees only
//! faults still sees references to the pages about to leave memory.
//!
//! Uncompressed pages form two segments, as in the kernel's active and
//! inactive lists and in the segmented FIFO of paper 000 §3.1: the newest
//! pages are mapped and their references go unseen (FIFO order); the
//! oldest `share` of them are *trapped*, unmapped but kept uncompressed,
//! so that a touch faults cheaply and the mechanism tells the policy
//! ([`Level::Uncompressed`](crate::Level::Uncompressed)), which moves the
//! page to the newest end. The policy's oldest page, the next to be
//! compressed, is then the least recently used of the trapped ones.
//!
//! [`Traps`] is the bookkeeping, shared by the live runtime (which moves
//! the pages it names out of and back into the program's mapping) and the
//! simulator (which gives the policy only the references a trapped page
//! would have faulted on), so both see the same references.
//!
//! Choice: the trapped segment is sized by a share of the pages resident
//! now, not of the policy's limit, so a policy that shrinks or grows
//! uncompressed memory keeps the same proportion trapped.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// Where a resident page is in the two segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seg {
    /// Mapped; references unseen.
    Active(u64),
    /// Unmapped; the next reference faults.
    Trapped(u64),
}

/// Trapped-segment bookkeeping. See the module docs.
///
/// Invariant: every resident page is in exactly one segment, and after
/// [`Traps::rebalance`] the trapped segment holds at least
/// `floor(share * resident)` pages (more only after mapped pages left
/// memory, until trapped ones leave: pages are never untrapped to shrink
/// it, which would cost a fault's worth of work for nothing).
///
/// ```
/// use ccvm_policy::Traps;
/// let mut t = Traps::new(0.5);
/// for page in 0..4 {
///     t.resident(page);
/// }
/// let mut trap = Vec::new();
/// t.rebalance(&mut trap);
/// assert_eq!(trap, [0, 1]); // the oldest half
/// assert!(t.is_trapped(0) && !t.is_trapped(3));
/// assert!(t.touch(0)); // a trapped page: the touch is seen
/// assert!(!t.touch(3)); // a mapped page: it is not
/// ```
#[derive(Debug, Default)]
pub struct Traps {
    share: f64,
    /// Per resident page: its segment, with the stamp of its queue entry.
    seg: FxHashMap<u64, Seg>,
    /// Mapped pages, oldest first (entries whose stamp is stale are skipped).
    active: VecDeque<(u64, u64)>,
    /// Trapped pages, oldest first (likewise).
    trapped: VecDeque<(u64, u64)>,
    trapped_count: usize,
    stamp: u64,
}

impl Traps {
    /// Traps `share` (0 to 1) of the resident pages.
    ///
    /// # Panics
    ///
    /// If `share` is not within 0 to 1.
    pub fn new(share: f64) -> Traps {
        assert!(
            (0.0..=1.0).contains(&share),
            "trap share {share} is not between 0 and 1"
        );
        Traps {
            share,
            ..Traps::default()
        }
    }

    /// The share of resident pages kept trapped.
    pub fn share(&self) -> f64 {
        self.share
    }

    fn next_stamp(&mut self) -> u64 {
        self.stamp += 1;
        self.stamp
    }

    /// `page` became resident and mapped (a fault served it): the newest
    /// active page.
    pub fn resident(&mut self, page: u64) {
        if let Some(Seg::Trapped(_)) = self.seg.get(&page) {
            self.trapped_count -= 1;
        }
        let s = self.next_stamp();
        self.seg.insert(page, Seg::Active(s));
        self.active.push_back((page, s));
    }

    /// A reference to resident `page`: whether it was trapped (the
    /// mechanism took a fault, and the policy is told). A trapped page is
    /// mapped again and becomes the newest active page.
    pub fn touch(&mut self, page: u64) -> bool {
        let trapped = self.is_trapped(page);
        if trapped {
            self.resident(page);
        }
        trapped
    }

    /// Whether `page` is trapped.
    pub fn is_trapped(&self, page: u64) -> bool {
        matches!(self.seg.get(&page), Some(Seg::Trapped(_)))
    }

    /// `page` left uncompressed memory (compressed or written out).
    pub fn evicted(&mut self, page: u64) {
        if let Some(Seg::Trapped(_)) = self.seg.remove(&page) {
            self.trapped_count -= 1;
        }
    }

    /// The mechanism could not trap `page` (it stays mapped and active).
    pub fn untrap(&mut self, page: u64) {
        if self.is_trapped(page) {
            self.resident(page);
        }
    }

    /// Pages resident now.
    pub fn len(&self) -> usize {
        self.seg.len()
    }

    /// Whether no page is resident.
    pub fn is_empty(&self) -> bool {
        self.seg.is_empty()
    }

    /// Trapped pages now.
    pub fn trapped(&self) -> usize {
        self.trapped_count
    }

    /// Traps the oldest active pages until the trapped segment has its
    /// share; appends them to `trap`, oldest first, for the mechanism to
    /// unmap.
    pub fn rebalance(&mut self, trap: &mut Vec<u64>) {
        let want = (self.share * self.seg.len() as f64).floor() as usize;
        while self.trapped_count < want {
            let Some((page, s)) = self.active.pop_front() else {
                break;
            };
            if self.seg.get(&page) != Some(&Seg::Active(s)) {
                continue;
            }
            let t = self.next_stamp();
            self.seg.insert(page, Seg::Trapped(t));
            self.trapped.push_back((page, t));
            self.trapped_count += 1;
            trap.push(page);
        }
        self.compact_queues();
    }

    /// Drops stale entries once they outnumber live ones, so the queues
    /// stay O(pages).
    fn compact_queues(&mut self) {
        if self.active.len() + self.trapped.len() > 2 * self.seg.len() + 64 {
            let seg = &self.seg;
            self.active.retain(|&(p, s)| seg.get(&p) == Some(&Seg::Active(s)));
            self.trapped.retain(|&(p, s)| seg.get(&p) == Some(&Seg::Trapped(s)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trapped_touch_moves_the_page_to_the_newest_end() {
        let mut t = Traps::new(0.5);
        let mut trap = Vec::new();
        for p in 0..6 {
            t.resident(p);
            t.rebalance(&mut trap);
        }
        assert_eq!(trap, [0, 1, 2]);
        assert_eq!(t.trapped(), 3);
        // Page 1 is touched: mapped again, newest; the oldest active page
        // (3) is trapped in its place.
        assert!(t.touch(1));
        trap.clear();
        t.rebalance(&mut trap);
        assert_eq!(trap, [3]);
        t.evicted(0);
        t.evicted(2);
        trap.clear();
        t.rebalance(&mut trap);
        // 4 resident (1, 3, 4, 5): two trapped (3 and the next oldest, 4).
        assert_eq!(trap, [4]);
        assert!(t.is_trapped(3) && t.is_trapped(4) && !t.is_trapped(1));
    }

    #[test]
    fn long_random_runs_keep_the_share_and_one_segment_per_page() {
        let mut t = Traps::new(0.3);
        let mut model: std::collections::HashSet<u64> = Default::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut trap = Vec::new();
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let p = (x >> 20) % 500;
            match x % 3 {
                0 if !model.contains(&p) => {
                    t.resident(p);
                    model.insert(p);
                }
                1 if model.contains(&p) => {
                    t.evicted(p);
                    model.remove(&p);
                }
                _ if model.contains(&p) => {
                    t.touch(p);
                }
                _ => {}
            }
            t.rebalance(&mut trap);
            assert_eq!(t.len(), model.len());
            assert!(t.trapped() >= (0.3 * model.len() as f64).floor() as usize);
            assert!(t.trapped() <= model.len());
            assert!(t.active.len() + t.trapped.len() <= 2 * model.len() + 64 + 1);
        }
    }
}

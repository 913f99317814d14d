//! OS/2's ager (paper 004 §2): a clock over the resident pages, an idle
//! list of aged pages still in memory, and a compression buffer of
//! fixed-size entries for the pages that compress very small.
//!
//! How OS/2 runs it: when free and idle frames run short, the ager walks
//! the resident pages in a circle. A page whose accessed bit is set has the
//! bit cleared and is passed over; one whose bit is clear is *aged*: it is
//! made not-present, zero-filled pages are freed to be recreated on
//! demand, pages that compress into one 64-byte entry go to the
//! compression buffer, and the rest join the idle list. A fault on an idle
//! page reclaims it without I/O; a fault that needs a frame when none is
//! free steals the first idle page, writing it to the swap file first if it
//! is dirty.
//!
//! # Choices
//!
//! * Aging here makes a page not-present ([`Action::Watch`] on a mechanism
//!   that sees only faults) and puts it on the idle list; it is compressed
//!   when its frame is stolen, not when it is aged: a ccvm page that has
//!   been compressed has left memory, and an idle page must still be in
//!   memory to be reclaimed without I/O. The pages that end in the buffer,
//!   on disk or back in use are the same; what differs is that OS/2 frees
//!   a compressible page's frame at aging, ahead of need.
//! * The buffer takes memory as its entries are used, up to 1/16 of it
//!   ([`BUFFER_SHARE`]), in entries of [`ENTRY_BYTES`] charged bytes: a
//!   page compressed to 64 bytes, as OS/2's entries hold, plus the 64
//!   bytes of bookkeeping and 1/8 of slack that ccvm charges every stored
//!   page. Pages charged more, or arriving when every entry is taken, go to
//!   disk compressed. A zero-filled page takes an entry too (it costs the
//!   store its bookkeeping), where OS/2 keeps nothing. The paper gives
//!   neither the buffer's size nor whether it is fixed; a fixed 1/16 made
//!   the ager page 80 times more than LRU at 94% of a CPython trace's
//!   footprint, the buffer holding almost nothing (pages rarely compress
//!   to 64 bytes) while taking frames from every page.
//! * The ager keeps the idle list at 1/8 of the frames ([`IDLE_SHARE`]),
//!   our choice for OS/2's unstated threshold: enough second chances to
//!   catch pages in use, few enough not to cost the clock its order.
//! * Dirty and clean pages are not told apart (ccvm sees no modified bit),
//!   so every stolen page goes through the buffer or to disk.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::queue::RecencyQueue;
use crate::{Action, Budget, Level, Policy};

/// Share of memory the compression buffer takes.
pub const BUFFER_SHARE: u64 = 16;
/// Charged bytes of one buffer entry: 64 compressed, 8 of slack, 64 of
/// bookkeeping.
pub const ENTRY_BYTES: u64 = 64 + 8 + 64;
/// The idle list is kept at 1 / `IDLE_SHARE` of the frames.
pub const IDLE_SHARE: usize = 8;

/// OS/2's ager as a policy. See the module docs.
pub struct Ager {
    ram: u64,
    page_size: u64,
    entries: usize,
    /// Resident, present pages in clock order (the hand at the front),
    /// with their accessed bits.
    ring: VecDeque<u64>,
    accessed: HashMap<u64, bool>,
    /// Aged pages, still in memory, oldest first.
    idle: RecencyQueue,
    /// Pages in the compression buffer, oldest first, and their charges.
    buffer: RecencyQueue,
    sizes: HashMap<u64, u64>,
    buffer_bytes: u64,
    on_disk: HashSet<u64>,
    /// Whether aged pages are made not-present ([`Action::Watch`]).
    watch: bool,
    /// Pages the program dropped while in the ring, still in it (see
    /// [`Policy::discarded`]).
    dropped: HashSet<u64>,
}

impl Ager {
    /// An ager for `budget`: a buffer of up to 1/`BUFFER_SHARE` of it,
    /// the rest, and what the buffer does not use, for frames.
    ///
    /// ```
    /// use ccvm_policy::{Action, Ager, Budget, Level, Policy};
    /// let mut p = Ager::new(Budget { ram_bytes: 32 * 4096, page_size: 4096 });
    /// let mut a = Vec::new();
    /// for page in 0..33 {
    ///     p.touch(page, Level::New, &mut a);
    /// }
    /// // 32 frames: the 33rd page steals the first aged page's frame.
    /// assert_eq!(a, [Action::Compress(0)]);
    /// // It fits an entry, whose memory then takes page 1's frame.
    /// p.compressed(0, 100, &mut a);
    /// assert_eq!(a, [Action::Compress(0), Action::Compress(1)]);
    /// assert_eq!(p.occupancy(), (31, 1, 0));
    /// ```
    pub fn new(budget: Budget) -> Self {
        let buffer = budget.ram_bytes / BUFFER_SHARE;
        Ager {
            ram: budget.ram_bytes,
            page_size: budget.page_size,
            entries: (buffer / ENTRY_BYTES) as usize,
            ring: VecDeque::new(),
            accessed: HashMap::default(),
            idle: RecencyQueue::default(),
            buffer: RecencyQueue::default(),
            sizes: HashMap::default(),
            buffer_bytes: 0,
            on_disk: HashSet::default(),
            watch: false,
            dropped: HashSet::default(),
        }
    }

    fn resident(&self) -> usize {
        self.accessed.len() + self.idle.len()
    }

    /// Frames for pages: memory less the buffer's used entries (one at
    /// least).
    fn frames(&self) -> usize {
        ((self.ram - self.buffer_bytes) / self.page_size).max(1) as usize
    }

    /// Steals frames until the resident pages fit in `frames`.
    fn fit(&mut self, frames: usize, actions: &mut Vec<Action>) {
        while self.resident() > frames {
            let before = self.resident();
            self.steal(actions);
            if self.resident() == before {
                break;
            }
        }
    }

    /// Moves the hand one page: clears a set accessed bit, or ages the page.
    fn age_one(&mut self, actions: &mut Vec<Action>) {
        let Some(page) = self.ring.pop_front() else {
            return;
        };
        if self.dropped.remove(&page) {
            // Dropped by the program since it joined the ring.
            return;
        }
        let bit = self.accessed.get_mut(&page).expect("a ring page has a bit");
        if *bit {
            *bit = false;
            self.ring.push_back(page);
        } else {
            self.accessed.remove(&page);
            self.idle.push_newest(page);
            if self.watch {
                actions.push(Action::Watch(page));
            }
        }
    }

    /// Takes the frame of the oldest idle page (aging pages first if none
    /// is idle): the page is compressed, and [`Policy::compressed`] places it.
    fn steal(&mut self, actions: &mut Vec<Action>) {
        // Two turns of the hand age every page.
        let mut steps = 2 * self.ring.len() + 1;
        while self.idle.is_empty() && steps > 0 {
            self.age_one(actions);
            steps -= 1;
        }
        if let Some(victim) = self.idle.pop_oldest() {
            actions.push(Action::Compress(victim));
        }
    }

    /// Runs the ager while free and idle frames together are below
    /// 1/[`IDLE_SHARE`] of the frames, as OS/2 wakes it.
    fn keep_idle(&mut self, actions: &mut Vec<Action>) {
        let frames = self.frames();
        let low = (frames / IDLE_SHARE).max(1);
        let mut steps = 2 * self.ring.len();
        while frames.saturating_sub(self.resident()) + self.idle.len() < low && self.ring.len() > 1 && steps > 0 {
            self.age_one(actions);
            steps -= 1;
        }
    }

    fn spill_oldest(&mut self, actions: &mut Vec<Action>) -> bool {
        let Some(page) = self.buffer.pop_oldest() else {
            return false;
        };
        self.buffer_bytes -= self.sizes.remove(&page).unwrap_or(0);
        self.on_disk.insert(page);
        actions.push(Action::Spill(page));
        true
    }
}

impl Policy for Ager {
    fn name(&self) -> &'static str {
        "ager"
    }

    fn touch(&mut self, page: u64, from: Level, actions: &mut Vec<Action>) {
        match from {
            Level::Compressed if self.buffer.remove(page) => {
                self.buffer_bytes -= self.sizes.remove(&page).unwrap_or(0);
            }
            Level::Disk => {
                self.on_disk.remove(&page);
            }
            _ => {}
        }
        if let Some(bit) = self.accessed.get_mut(&page) {
            *bit = true;
        } else if self.idle.remove(page) {
            // Reclaimed from the idle list, without I/O.
            self.ring.push_back(page);
            self.accessed.insert(page, true);
        } else {
            self.fit(self.frames() - 1, actions);
            if !self.dropped.remove(&page) {
                self.ring.push_back(page);
            }
            self.accessed.insert(page, true);
        }
        self.keep_idle(actions);
    }

    fn compressed(&mut self, page: u64, bytes: u64, actions: &mut Vec<Action>) {
        if bytes <= ENTRY_BYTES && self.buffer.len() < self.entries {
            self.buffer.push_newest(page);
            self.sizes.insert(page, bytes);
            self.buffer_bytes += bytes;
            // The entry's memory comes from the frames.
            self.fit(self.frames(), actions);
        } else {
            self.on_disk.insert(page);
            actions.push(Action::Spill(page));
        }
    }

    fn make_room(&mut self, actions: &mut Vec<Action>) -> bool {
        self.spill_oldest(actions)
    }

    fn swapped_instead(&mut self, page: u64) {
        self.on_disk.insert(page);
    }

    fn discarded(&mut self, page: u64) {
        // A page in the ring is left there, marked: the hand drops it when
        // it comes round (a search of the ring per page would cost a turn
        // of the hand for each), and a touch before that takes the place
        // back.
        if self.accessed.remove(&page).is_some() {
            self.dropped.insert(page);
        }
        self.idle.remove(page);
        if self.buffer.remove(page) {
            self.buffer_bytes -= self.sizes.remove(&page).unwrap_or(0);
        }
        self.on_disk.remove(&page);
    }

    fn occupancy(&self) -> (usize, usize, usize) {
        (self.resident(), self.buffer.len(), self.on_disk.len())
    }

    fn compressed_bytes(&self) -> u64 {
        self.buffer_bytes
    }

    fn cache_limit(&self) -> u64 {
        self.entries as u64 * ENTRY_BYTES
    }

    fn uncompressed_limit(&self) -> usize {
        (self.ram / self.page_size).max(1) as usize
    }

    fn faults_only(&mut self) {
        self.watch = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ager(frames_plus_buffer: u64) -> Ager {
        Ager::new(Budget {
            ram_bytes: frames_plus_buffer * 4096,
            page_size: 4096,
        })
    }

    #[test]
    fn the_clock_gives_touched_pages_a_second_chance() {
        // 16 pages of memory: 16 frames while the buffer (up to 30
        // entries) is empty; the ager keeps 2 frames free or idle.
        let mut p = ager(16);
        assert_eq!((p.frames(), p.entries), (16, 30));
        let mut a = Vec::new();
        for page in 0..16 {
            p.touch(page, Level::New, &mut a);
        }
        // The 15th page left one frame free: the hand cleared every bit on
        // its first turn and aged page 0; the 16th aged page 1.
        assert!(a.is_empty());
        assert_eq!(p.idle.oldest_first().collect::<Vec<_>>(), [0, 1]);
        // Page 0 is touched again: reclaimed from the idle list, no I/O;
        // the ager runs on and ages page 2, the next unreferenced one.
        p.touch(0, Level::Uncompressed, &mut a);
        assert!(a.is_empty());
        assert_eq!(p.idle.oldest_first().collect::<Vec<_>>(), [1, 2]);
        // A new page needs a frame: the oldest idle page's is stolen.
        p.touch(16, Level::New, &mut a);
        assert_eq!(a, [Action::Compress(1)]);
        a.clear();
        // Small: into the buffer, whose entry takes a frame, page 2's.
        p.compressed(1, 100, &mut a);
        assert_eq!(a, [Action::Compress(2)]);
        a.clear();
        // Large: to disk.
        p.compressed(2, 2000, &mut a);
        assert_eq!(a, [Action::Spill(2)]);
        assert_eq!(p.occupancy(), (15, 1, 1));
        // A buffered page comes back: its entry's memory is frames again.
        a.clear();
        p.touch(1, Level::Compressed, &mut a);
        assert_eq!(p.compressed_bytes(), 0);
        assert!(a.is_empty());
        assert_eq!(p.occupancy(), (16, 0, 1));
    }

    #[test]
    fn a_full_buffer_sends_small_pages_to_disk() {
        let mut p = ager(16);
        let mut a = Vec::new();
        for page in 0..100 {
            p.touch(page, Level::New, &mut a);
            for act in std::mem::take(&mut a) {
                match act {
                    Action::Compress(v) => p.compressed(v, 64, &mut a),
                    Action::Spill(_) | Action::Watch(_) | Action::SwapOut(_) => {}
                }
            }
            let (u, c, _) = p.occupancy();
            assert!(u <= p.frames() && c <= p.entries);
            assert!(u as u64 * 4096 + p.compressed_bytes() <= 16 * 4096);
        }
        assert_eq!(p.occupancy(), (15, 30, 55));
    }
}

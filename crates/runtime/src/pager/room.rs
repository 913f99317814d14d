//! Keeping the budget after each touch: the policy's evictions carried
//! out, ccvm's own memory charged (see `overhead`), the cache's chunks
//! given back before pages are spilled, a tree's share enforced (see
//! `tree`), and the pages that should be trapped parked in their shadow
//! slots.

use ccvm_codec::PAGE_SIZE;

use super::observe::Event;
use super::{overhead, PageState, Pager};
use crate::compressor::Helper;
use crate::frames::Frames;

impl Pager {
    /// Carries out the policy's evictions, keeps the budget, and traps the
    /// pages that now should be.
    pub(super) fn after_touch(&mut self) {
        self.run_actions();
        self.keep_within_ram();
        let Some(traps) = &mut self.traps else {
            return;
        };
        let mut to_trap = std::mem::take(&mut self.to_trap);
        traps.rebalance(&mut to_trap);
        for p in to_trap.drain(..) {
            if !self.park(p as usize) {
                self.traps.as_mut().expect("checked").untrap(p);
            }
        }
        self.to_trap = to_trap;
    }

    /// Moves resident page `page`'s frame into its shadow slot, keeping it
    /// uncompressed, so that its next touch faults (a trapped or watched
    /// page). Returns whether it moved (it needs a shadow, and the kernel
    /// may refuse).
    pub(super) fn park(&mut self, page: usize) -> bool {
        if self.pinned(page) {
            return false;
        }
        let addr = self.addr(page);
        let Some(frames) = &mut self.frames else {
            return false;
        };
        let parked = frames.park(&self.parts.uffd, page, addr).is_ok();
        if parked {
            self.pages[page] = PageState::Trapped;
        }
        parked
    }

    /// Whether a system call is using `page`, so that it must stay mapped
    /// (see `crate::pins`).
    pub(super) fn pinned(&self, page: usize) -> bool {
        crate::pins::holds(self.addr(page), PAGE_SIZE)
    }

    /// Keeps uncompressed pages plus the cache's real memory (slack and
    /// bookkeeping included) within the RAM budget.
    pub(super) fn keep_within_ram(&mut self) {
        if self.overhead.due() {
            self.overhead.set(overhead::Parts {
                states: self.pages.table_bytes(),
                spare: self.frames.as_ref().map_or(0, Frames::spare_bytes)
                    + self.helper.as_ref().map_or(0, |h| (h.frames_held() * PAGE_SIZE) as u64),
                helper: self.helper.as_ref().map_or(0, Helper::memory),
                store_books: self.parts.store.stats().metadata_bytes,
            });
            self.observers.observe(Event::Overhead(self.overhead.bytes));
        }
        self.consult_tree(false);
        if let Some(ram) = self
            .overhead
            .policy_ram(self.parts.split.policy_ram(self.share.allowance))
        {
            self.parts.policy.set_ram(ram);
        }
        let over = |p: &Pager| p.charge() > p.share.allowance;
        if !over(self) {
            return;
        }
        // Giving back a chunk or two is cheaper than spilling a page.
        while over(self) && self.parts.store.reclaim_chunk() {}
        self.parts.store.compact_when_due();
        while over(self) && self.parts.policy.make_room(&mut self.actions) {
            self.run_actions();
        }
        // A share of a tree's budget cut at once (see `tree`): uncompressed
        // pages leave too, each at most once (one that cannot leave is
        // kept mapped and comes back to the policy).
        if self.share.allowance < self.parts.split.ram_bytes {
            let mut tries = self.pages.resident;
            while over(self) && tries > 0 && self.parts.policy.shrink(&mut self.actions) {
                tries -= 1;
                self.run_actions();
                while over(self) && self.parts.policy.make_room(&mut self.actions) {
                    self.run_actions();
                }
            }
        }
    }
}

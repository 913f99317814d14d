//! What the pager does around a `fork`: the child of a paged process gets
//! the region's whole contents in place and runs unpaged.
//!
//! # Choices
//!
//! * A forked child does not inherit the userfaultfd registration, so a
//!   page that is not in its memory would read as zeros. Rather than share
//!   the parent's store and swap file with the child (both keep changing,
//!   and the child would need a snapshot of each), the child writes every
//!   page it holds compressed or in the swap file into place, from its own
//!   copy of the store and the swap file, which the parent leaves untouched
//!   until the child is done (the caller holds the pager meanwhile). The
//!   child then holds its whole region uncompressed and is not paged; a
//!   program it `exec`s starts paging afresh.
//! * Pages still in the helper's ring are compressed by the parent before
//!   the fork, because the ring is shared with the parent's helper.
//! * Trapped pages live in the shadow, which a child does not inherit
//!   (`MADV_DONTFORK`): they are mapped back before the fork. So are
//!   watched ones (`ccvm_policy::Action::Watch`), whose next touch then
//!   goes unseen: the policy's sample of what paging without a cache
//!   would cost misses at most one fault per page watched at the fork.

use super::{fatal, PageState, Pager, Target};
use crate::protections::FOREIGN;
use ccvm_codec::PAGE_SIZE;

/// `mprotect` of one page, straight to the kernel; whether it was done.
fn mprotect(addr: *mut u8, prot: i32) -> bool {
    // SAFETY: one page of the region, mapped in this process.
    unsafe {
        crate::guard::raw_syscall(
            libc::SYS_mprotect,
            [addr as u64, PAGE_SIZE as u64, prot as u64, 0, 0, 0],
        ) == 0
    }
}

impl Pager {
    /// Leaves no page in the helper's ring or trapped in the shadow, so
    /// that a child forked now needs neither.
    pub(crate) fn settle_for_fork(&mut self) {
        self.collect_finished();
        self.run_actions();
        while let Some(page) = self.helper.as_ref().and_then(|h| h.first_waiting()) {
            self.stats.faults_pending += 1;
            self.complete_pending(page as usize);
            self.run_actions();
        }
        for page in 0..self.state.len() {
            if matches!(self.state[page], PageState::Trapped) {
                self.map_page(page, Target::Frame(page));
                self.state[page] = PageState::Uncompressed;
                if let Some(traps) = &mut self.traps {
                    traps.untrap(page as u64);
                }
            }
        }
    }

    /// In a forked child: writes every page held compressed or in the swap
    /// file into its place in the region (which the child has unregistered)
    /// and forgets the helper, which is the parent's. Returns the pages
    /// written. Afterwards the pager must not be used.
    pub(crate) fn materialize_in_child(&mut self) -> usize {
        if let Some(helper) = self.helper.take() {
            // Dropping it would stop the parent's helper.
            std::mem::forget(helper);
        }
        let mut written = 0;
        for page in 0..self.state.len() {
            if matches!(
                self.state[page],
                PageState::New | PageState::Zero | PageState::Uncompressed
            ) {
                continue;
            }
            let addr = self.addr(page) as *mut u8;
            let prot = self.protections.of(page);
            if prot == FOREIGN {
                continue;
            }
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            // A page the program protected is opened for the write, then
            // given its protection back (the child has one thread here).
            let reprotect = prot != rw && mprotect(addr, rw);
            // SAFETY: a page of the region, which is mapped in the child
            // and not registered: a write allocates it.
            let out = unsafe { std::slice::from_raw_parts_mut(addr, PAGE_SIZE) };
            match self.state[page] {
                PageState::Compressed => {
                    if let Err(e) = self.parts.store.get(page as u64, out) {
                        fatal(e);
                    }
                }
                PageState::Disk(slot) => {
                    let stored = match self.parts.swap.read(page as u64, slot, &mut self.payload) {
                        Ok(s) => s,
                        Err(e) => fatal(e),
                    };
                    self.decode_into(page, stored, out);
                }
                PageState::Pending | PageState::Trapped => {
                    fatal(format!("page {page} was not settled before the fork"))
                }
                PageState::New | PageState::Zero | PageState::Uncompressed => continue,
            }
            if reprotect {
                mprotect(addr, prot);
            }
            self.state[page] = PageState::Uncompressed;
            written += 1;
        }
        written
    }
}

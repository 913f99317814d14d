//! Sizes of watched pages, for the policy's miniature splits.
//!
//! The miniatures (`ccvm_policy::Miniatures`) run each target split over
//! a sample of pages, and a split with less uncompressed memory than the
//! run pushes pages into its cache long before the run evicts them: the
//! run has never compressed those pages, so the split could only charge
//! them the ratio of the pages the run did compress. When the first pages
//! a program evicts do not compress (sqlite's table of hex keys, or `ccvm
//! bench faults`' first pages), that ratio is 1, every split looks
//! useless, and the run sends the pages that follow to disk raw.
//!
//! # Choice
//!
//! A split lets go of such a page by asking the mechanism to watch it,
//! which holds the page resident then; if the policy does not know the
//! page's size yet ([`Policy::wants_size`]), the pager compresses a copy
//! of it into a scratch buffer and tells the policy
//! ([`Policy::measured`]). Only in signal mode: the copy is read with
//! `process_vm_readv` on this process, which fails cleanly, with `EFAULT`,
//! if the page is not there after all; in thread mode the same read of a
//! missing page would wait for the handler thread, which may be this one.
//! Not while tracing, as read-ahead is not: the simulator replaying the
//! trace must make the same choices. A page is measured once until the run
//! compresses it or the program drops it, so the cost is one compression
//! per sampled page, not per watch.
//!
//! [`Policy::wants_size`]: ccvm_policy::Policy::wants_size
//! [`Policy::measured`]: ccvm_policy::Policy::measured

use super::Pager;
use crate::aligned::AlignedBuf;
use ccvm_codec::PAGE_SIZE;

/// Scratch for a copy of a page and its compressed form.
pub(super) struct Scratch {
    page: AlignedBuf,
    out: Vec<u8>,
}

impl Pager {
    /// Measures watched pages' sizes for the policy from now on (see the
    /// module docs).
    pub fn measure_watched(&mut self) {
        self.scratch = Some(Scratch {
            page: AlignedBuf::new(PAGE_SIZE),
            out: vec![0; 2 * PAGE_SIZE],
        });
    }

    /// Tells the policy resident page `page`'s compressed size, if it asks
    /// and the page can be read.
    pub(super) fn measure(&mut self, page: usize) {
        let Some(scratch) = &mut self.scratch else {
            return;
        };
        if !self.parts.policy.wants_size(page as u64) {
            return;
        }
        // The kernel checks the range and fails with EFAULT, without a
        // signal, where the page is not mapped.
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let addr = (self.parts.base + page * PAGE_SIZE) as u64;
        if !crate::compressor::read_from(pid, addr, &mut scratch.page) {
            return;
        }
        let bytes = self
            .parts
            .codec
            .compress(&scratch.page, &mut scratch.out)
            .unwrap_or(PAGE_SIZE);
        self.parts.policy.measured(page as u64, bytes.min(PAGE_SIZE) as u64);
        self.observers.observe(super::observe::Event::Measured);
    }
}

//! Serving a fault: one function per state the faulting page can be in,
//! then what every served fault shares: its service time recorded, the
//! page made resident, the reference traced and told to the policy, the
//! budget kept, and the pages after it read ahead when the fault
//! continues a run.

use std::time::Instant;

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::Level;

use super::{fatal, PageState, Pager, Target};
use crate::uffd::Fault;

impl Pager {
    /// Serves one fault, from an event (event mode) or a SIGBUS raised in
    /// the faulting thread.
    pub fn handle(&mut self, fault: Fault) {
        let page = fault.addr.wrapping_sub(self.parts.base) / PAGE_SIZE;
        if page >= self.state.len() {
            return;
        }
        if fault.write_protect && matches!(self.state[page], PageState::Zero) {
            self.serve(page, true);
        } else if fault.write_protect {
            self.stats.faults_repeat += 1;
            self.wake(page);
        } else {
            self.serve(page, fault.write);
        }
    }

    pub(super) fn wake(&self, page: usize) {
        if let Err(e) = self.parts.uffd.wake(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd wake: {e}"));
        }
    }

    pub(super) fn serve(&mut self, page: usize, write: bool) {
        let started = Instant::now();
        self.pinned_streak = 0;
        // Pages the helper finished, and the spills their sizes call for,
        // before this page's state is read: a spill may be of this page.
        self.collect_finished();
        self.run_actions();
        self.scan_if_due();
        // The window is set where the run detector has already seen this
        // fault; `None` from a state means the fault is served already.
        let served = match self.state[page] {
            PageState::Uncompressed => self.serve_mapped(page),
            PageState::Pending => self.serve_pending(page, write),
            PageState::Trapped => Some((self.serve_trapped(page), None)),
            PageState::New | PageState::Zero if !write && self.zero_reads => self.serve_zero_read(page),
            PageState::Zero => Some((self.serve_first_write(page), None)),
            PageState::New => Some((self.serve_new(page), None)),
            PageState::Compressed => Some((self.serve_cached(page), None)),
            PageState::Disk(i) => Some((self.serve_disk(page, i), None)),
        };
        let Some((from, window)) = served else {
            return;
        };
        self.record_service(from, started.elapsed().as_nanos() as u64);
        self.now_resident(page, from);
        if let Some(t) = &mut self.parts.trace {
            if let Err(e) = t.reference(page as u64, write) {
                fatal(format!("writing the trace: {e}"));
            }
        }
        self.parts.policy.touch(page as u64, from, &mut self.actions);
        self.after_touch();
        if matches!(from, Level::Compressed | Level::New | Level::Disk) {
            let window = window.unwrap_or_else(|| self.window(page));
            if window > 0 {
                self.read_ahead_after(page, window, from);
            }
        }
    }

    /// A resident page: mapped by another thread's fault meanwhile (the
    /// zero page is then refused), or dropped by the program itself
    /// (`MADV_DONTNEED`), which leaves zeros.
    pub(super) fn serve_mapped(&mut self, page: usize) -> Option<(Level, Option<usize>)> {
        self.stats.faults_repeat += 1;
        self.map_zero_page(page);
        None
    }

    /// A page still in the helper's ring: compressed here unless the helper
    /// finished it meanwhile, then served from where it now is.
    pub(super) fn serve_pending(&mut self, page: usize, write: bool) -> Option<(Level, Option<usize>)> {
        self.collect_finished();
        if matches!(self.state[page], PageState::Pending) {
            self.stats.faults_pending += 1;
            self.complete_pending(page);
        }
        self.run_actions();
        self.serve(page, write);
        None
    }

    /// A trapped or watched page: its frame is in its shadow slot, as it
    /// was left.
    pub(super) fn serve_trapped(&mut self, page: usize) -> Level {
        self.map_page(page, Target::Frame(page));
        if self.traps.as_ref().is_some_and(|t| t.is_trapped(page as u64)) {
            self.stats.faults_trap += 1;
        } else {
            self.stats.faults_watch += 1;
        }
        Level::Uncompressed
    }

    /// A read of a page never written: the zero page, write-protected,
    /// unless the read continues a run. Such a read is a scan, which as
    /// often as not writes what it reads: it gets zeros it can write, and
    /// the next pages read ahead, as a first write does.
    pub(super) fn serve_zero_read(&mut self, page: usize) -> Option<(Level, Option<usize>)> {
        let w = self.window(page);
        if w == 0 {
            self.map_zero_read(page);
            self.stats.faults_zero_read += 1;
            return None;
        }
        self.map_zeros(page);
        self.stats.faults_zero += 1;
        Some((Level::New, Some(w)))
    }

    /// The first write to a page only read so far: the retried write
    /// replaces the zero page with the kernel's own. If the program dropped
    /// the mapping meanwhile, the retry faults as missing and is served as
    /// resident (zeros).
    pub(super) fn serve_first_write(&mut self, page: usize) -> Level {
        if let Err(e) = self.parts.uffd.write_unprotect(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd write-unprotect: {e}"));
        }
        self.stats.faults_zero += 1;
        Level::New
    }

    /// A first touch that writes (or any first touch, reads not mapped as
    /// the zero page).
    pub(super) fn serve_new(&mut self, page: usize) -> Level {
        self.map_zeros(page);
        self.stats.faults_zero += 1;
        Level::New
    }

    /// A page in the compression cache.
    pub(super) fn serve_cached(&mut self, page: usize) -> Level {
        self.map_from_cache(page);
        self.stats.faults_cache += 1;
        Level::Compressed
    }

    /// A page in the swap file, at the slot kept at index `i`.
    pub(super) fn serve_disk(&mut self, page: usize, i: u32) -> Level {
        let slot = self.disk.take(i);
        self.map_from_disk(page, slot);
        self.stats.faults_disk += 1;
        Level::Disk
    }

    /// Records a fault served from `from` in `ns` nanoseconds: its
    /// latency histogram, and the service times told to the policy.
    pub(super) fn record_service(&mut self, from: Level, ns: u64) {
        let timer = match from {
            Level::New => &mut self.timers.zero,
            Level::Compressed => &mut self.timers.cache,
            Level::Uncompressed => &mut self.timers.trap,
            Level::Disk => &mut self.timers.disk,
        };
        timer.saturating_record(ns.max(1));
        if let Some(meter) = &mut self.costs {
            if matches!(from, Level::Disk | Level::Compressed) {
                meter.record(from == Level::Disk, ns);
            }
            if let Some((disk_ns, cache_ns)) = meter.due() {
                self.parts.policy.fault_service(disk_ns, cache_ns);
            }
        }
    }

    /// Pages to read ahead after a fault on `page` (see the `readahead`
    /// module), at most a quarter of the uncompressed pages: a window near
    /// their number would evict pages read ahead before they are touched.
    pub(super) fn window(&mut self, page: usize) -> usize {
        let w = self.streams.fault(page);
        w.min(self.parts.policy.uncompressed_limit() / 4)
    }

    /// Maps the pages among the `window` after `page` that are where the
    /// faulting page was (`from`: the cache, or never touched), each a
    /// touch for the policy (see the `readahead` module).
    pub(super) fn read_ahead_after(&mut self, page: usize, window: usize, from: Level) {
        let end = (page + window).min(self.state.len() - 1);
        if from == Level::Disk {
            // One read for the window's pages that lie side by side in the
            // swap file; the others are left where they are.
            let mut slots = std::mem::take(&mut self.ahead);
            slots.clear();
            slots.extend((page + 1..=end).filter_map(|p| match self.state[p] {
                PageState::Disk(i) => Some(self.disk.get(i)),
                _ => None,
            }));
            let read = self.parts.swap.read_ahead(&slots);
            self.ahead = slots;
            match read {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => fatal(e),
            }
        }
        for next in page + 1..=end {
            if !self.protections.read_write(next) {
                // Not committed, or not the program's to write.
                break;
            }
            // Evictions made for an earlier page of the window may have
            // spilled this one: its state is read afresh.
            match (self.state[next], from) {
                (PageState::Compressed, Level::Compressed) => {
                    self.map_from_cache(next);
                    self.stats.pages_read_ahead += 1;
                }
                (PageState::Disk(i), Level::Disk) if self.parts.swap.holds_ahead(self.disk.get(i)) => {
                    let slot = self.disk.take(i);
                    self.map_from_disk(next, slot);
                    self.stats.pages_read_ahead_disk += 1;
                }
                (PageState::New, Level::New) => {
                    self.map_zeros(next);
                    self.stats.pages_zero_ahead += 1;
                }
                _ => continue,
            }
            self.now_resident(next, from);
            self.parts.policy.touch(next as u64, from, &mut self.actions);
            self.after_touch();
        }
    }

    /// `page`, just mapped from level `from`, is resident.
    pub(super) fn now_resident(&mut self, page: usize, from: Level) {
        self.state[page] = PageState::Uncompressed;
        if let Some(scan) = &mut self.write_scan {
            scan.fault(page);
        }
        if from == Level::New {
            self.seen += 1;
        }
        match (&mut self.traps, from) {
            // A trapped or watched page was resident all along; it is
            // mapped again.
            (Some(traps), Level::Uncompressed) => {
                traps.touch(page as u64);
            }
            (None, Level::Uncompressed) => {}
            (traps, _) => {
                self.resident += 1;
                if let Some(traps) = traps {
                    traps.resident(page as u64);
                }
            }
        }
    }
}

//! Serving a fault: one function per state the faulting page can be in,
//! each saying how it served the fault, then what every served fault
//! shares: its service time told to the policy and, with the reference,
//! to the observers (see `observe`); the page made resident and its touch
//! told to the policy; the budget kept; and the pages after it read ahead
//! when the fault continues a run.

use std::time::Instant;

use ccvm_codec::PAGE_SIZE;
use ccvm_policy::Level;

use super::observe::{Event, Service};
use super::{fatal, PageState, Pager, Target};
use crate::uffd::Fault;

impl Pager {
    /// Serves one fault, from an event (event mode) or a SIGBUS raised in
    /// the faulting thread.
    pub fn handle(&mut self, fault: Fault) {
        let page = fault.addr.wrapping_sub(self.parts.base) / PAGE_SIZE;
        if page >= self.pages.len() {
            return;
        }
        if fault.write_protect && matches!(self.pages[page], PageState::Zero) {
            self.serve(page, true);
        } else if fault.write_protect {
            self.observers.observe(Event::Repeat);
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
        let served = match self.pages[page] {
            PageState::Uncompressed => self.serve_mapped(page),
            PageState::Pending => self.serve_pending(page, write),
            PageState::Trapped => Some((self.serve_trapped(page), None)),
            PageState::New | PageState::Zero if !write && self.zero_reads => self.serve_zero_read(page),
            PageState::Zero => Some((self.serve_first_write(page), None)),
            PageState::New => Some((self.serve_new(page), None)),
            PageState::Compressed => Some((self.serve_cached(page), None)),
            PageState::Disk(i) => Some((self.serve_disk(page, i), None)),
        };
        let Some((service, window)) = served else {
            return;
        };
        let ns = started.elapsed().as_nanos() as u64;
        let from = service.level();
        self.tell_costs(from, ns);
        self.observers.observe(Event::Served {
            page: page as u64,
            write,
            service,
            ns,
        });
        self.now_resident(page, from);
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
    pub(super) fn serve_mapped(&mut self, page: usize) -> Option<(Service, Option<usize>)> {
        self.observers.observe(Event::Repeat);
        self.map_zero_page(page);
        None
    }

    /// A page still in the helper's ring: compressed here unless the helper
    /// finished it meanwhile, then served from where it now is.
    pub(super) fn serve_pending(&mut self, page: usize, write: bool) -> Option<(Service, Option<usize>)> {
        self.collect_finished();
        if matches!(self.pages[page], PageState::Pending) {
            self.observers.observe(Event::Pending);
            self.complete_pending(page);
        }
        self.run_actions();
        self.serve(page, write);
        None
    }

    /// A trapped or watched page: its frame is in its shadow slot, as it
    /// was left.
    pub(super) fn serve_trapped(&mut self, page: usize) -> Service {
        let copied = self.traps.is_none() && self.may_batch() && self.copy_back_watched(page);
        if !copied {
            self.map_page(page, Target::Frame(page));
        }
        if self.traps.as_ref().is_some_and(|t| t.is_trapped(page as u64)) {
            Service::Trap
        } else {
            Service::Watch
        }
    }

    /// A read of a page never written: the zero page, write-protected,
    /// unless the read continues a run. Such a read is a scan, which as
    /// often as not writes what it reads: it gets zeros it can write, and
    /// the next pages read ahead, as a first write does.
    pub(super) fn serve_zero_read(&mut self, page: usize) -> Option<(Service, Option<usize>)> {
        let w = self.window(page);
        if w == 0 {
            self.map_zero_read(page);
            self.observers.observe(Event::ZeroRead);
            return None;
        }
        self.map_zeros(page);
        Some((Service::Zero, Some(w)))
    }

    /// The first write to a page only read so far: the retried write
    /// replaces the zero page with the kernel's own. If the program dropped
    /// the mapping meanwhile, the retry faults as missing and is served as
    /// resident (zeros).
    pub(super) fn serve_first_write(&mut self, page: usize) -> Service {
        if let Err(e) = self.parts.uffd.write_unprotect(self.addr(page), PAGE_SIZE) {
            fatal(format!("userfaultfd write-unprotect: {e}"));
        }
        Service::Zero
    }

    /// A first touch that writes (or any first touch, reads not mapped as
    /// the zero page).
    pub(super) fn serve_new(&mut self, page: usize) -> Service {
        self.map_zeros(page);
        Service::Zero
    }

    /// A page in the compression cache.
    pub(super) fn serve_cached(&mut self, page: usize) -> Service {
        self.map_from_cache(page);
        Service::Cache
    }

    /// A page in the swap file, at the slot kept at index `i`.
    pub(super) fn serve_disk(&mut self, page: usize, i: u32) -> Service {
        let slot = self.pages.disk.take(i);
        self.map_from_disk(page, slot);
        Service::Disk
    }

    /// Tells the policy, when it asked, what a fault served from `from`
    /// took (`ns`; see the `costs` module).
    pub(super) fn tell_costs(&mut self, from: Level, ns: u64) {
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
        let end = (page + window).min(self.pages.len() - 1);
        if from == Level::Disk {
            // One read for the window's pages that lie side by side in the
            // swap file; the others are left where they are.
            let mut slots = std::mem::take(&mut self.ahead);
            slots.clear();
            slots.extend((page + 1..=end).filter_map(|p| match self.pages[p] {
                PageState::Disk(i) => Some(self.pages.disk.get(i)),
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
            match (self.pages[next], from) {
                (PageState::Compressed, Level::Compressed) => {
                    self.map_from_cache(next);
                }
                (PageState::Disk(i), Level::Disk) if self.parts.swap.holds_ahead(self.pages.disk.get(i)) => {
                    let slot = self.pages.disk.take(i);
                    self.map_from_disk(next, slot);
                }
                (PageState::New, Level::New) => {
                    self.map_zeros(next);
                }
                _ => continue,
            }
            self.observers.observe(Event::ReadAhead(from));
            self.now_resident(next, from);
            self.parts.policy.touch(next as u64, from, &mut self.actions);
            self.after_touch();
        }
    }

    /// `page`, just mapped from level `from`, is resident.
    pub(super) fn now_resident(&mut self, page: usize, from: Level) {
        self.pages[page] = PageState::Uncompressed;
        if let Some(scan) = &mut self.write_scan {
            scan.fault(page);
        }
        match (&mut self.traps, from) {
            // A trapped or watched page was resident all along; it is
            // mapped again.
            (Some(traps), Level::Uncompressed) => {
                traps.touch(page as u64);
            }
            (None, Level::Uncompressed) => {}
            (traps, _) => {
                self.pages.resident += 1;
                if let Some(traps) = traps {
                    traps.resident(page as u64);
                }
            }
        }
    }
}

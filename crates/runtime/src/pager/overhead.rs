//! ccvm's own memory, charged to a region's RAM budget.
//!
//! The budget covers what paging makes the process hold beyond the
//! region's resident pages and the store: the tables the runtime grew
//! since the region was made (counted by [`crate::accounting`]), the state
//! of every page seen, spare frames, and the helper process with its ring.
//! Measuring it costs a read of `/proc`, so it is refreshed every
//! [`REFRESH`] faults; the tables grow by a few dozen bytes a fault, so
//! the charge lags by a few KiB at most.
//!
//! A process that counts no allocations (a test linking the runtime as a
//! library) is charged nothing, so that its page counts stay those of the
//! policy and the simulator alone.

/// Faults between two measurements.
pub(crate) const REFRESH: u32 = 512;

/// The charge and when to measure it again.
pub(crate) struct Overhead {
    /// Bytes the counting allocator held when the region was made; `None`
    /// when the process does not count.
    base: Option<usize>,
    /// The charge, bytes.
    pub bytes: u64,
    until_refresh: u32,
    /// The charge the policy was last resized for.
    told: u64,
    /// The RAM (budget less the store's reserve) it was last resized for.
    told_ram: u64,
}

/// The charge moves this much before the policy is resized.
const RESIZE_STEP: u64 = 256 << 10;

/// What the charge is made of, measured by the pager.
pub(crate) struct Parts {
    /// Bytes of the page-state table in use.
    pub states: u64,
    /// Spare frames held.
    pub spare: u64,
    /// The helper process and its ring.
    pub helper: u64,
    /// The store's books (mapping table, member lists, the allocator's
    /// records): allocated like ccvm's other tables, but already counted
    /// in the store's memory and charged per page to the policy, so left
    /// out here. Counted twice, they cost `ccvm bench faults` 4% more
    /// faults (docs/results.md, "The store's books counted once").
    pub store_books: u64,
}

impl Overhead {
    /// Counting from now, if the process counts, for a policy made for
    /// `ram` (the budget less the store's reserve).
    pub fn new(base: Option<usize>, ram: u64) -> Overhead {
        Overhead {
            base,
            bytes: 0,
            until_refresh: 0,
            told: 0,
            told_ram: ram,
        }
    }

    /// Whether the charge should be measured again now; counts a fault.
    pub fn due(&mut self) -> bool {
        if self.base.is_none() {
            return false;
        }
        if self.until_refresh == 0 {
            self.until_refresh = REFRESH;
            true
        } else {
            self.until_refresh -= 1;
            false
        }
    }

    /// Sets the charge from what was measured.
    pub fn set(&mut self, parts: Parts) {
        let (Some(base), Some(now)) = (self.base, crate::accounting::allocated()) else {
            return;
        };
        let tables = (now.saturating_sub(base) as u64).saturating_sub(parts.store_books);
        self.bytes = tables + parts.states + parts.spare + parts.helper;
    }
}

impl Overhead {
    /// What the policy should manage of `ram` (the budget less the store's
    /// reserve), if the charge or `ram` has moved enough since it was last
    /// told.
    pub fn policy_ram(&mut self, ram: u64) -> Option<u64> {
        if self.bytes.abs_diff(self.told) < RESIZE_STEP && ram.abs_diff(self.told_ram) < RESIZE_STEP {
            return None;
        }
        self.told = self.bytes;
        self.told_ram = ram;
        // Keep at least a sixteenth, so that paging goes on however large
        // the tables grow against a tiny budget.
        Some(ram.saturating_sub(self.bytes).max(ram / 16))
    }
}

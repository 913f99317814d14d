//! Where the pages on disk are: their swap-file slots, kept beside the
//! page-state table rather than in it.
//!
//! A slot is 16 bytes (`SwapSlot`); in the state table it made every
//! page's state 20 bytes, though most pages are never on disk (1.16 MiB
//! for the key-value cache's 57,000 pages, memory charged to the budget).
//! The state of a page on disk now holds an index into this table, so a
//! state is 8 bytes, and a page on disk costs 16 bytes more here.

use crate::swap::SwapSlot;

/// Slots of the pages on disk, by index; freed indices are reused.
#[derive(Default)]
pub(super) struct DiskSlots {
    slots: Vec<SwapSlot>,
    free: Vec<u32>,
}

impl DiskSlots {
    /// Keeps `slot`; its index.
    pub fn put(&mut self, slot: SwapSlot) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 pages on disk")
            }
        }
    }

    /// The slot kept at `i`.
    pub fn get(&self, i: u32) -> SwapSlot {
        self.slots[i as usize]
    }

    /// Replaces the slot kept at `i` (the page moved in the swap file).
    pub fn set(&mut self, i: u32, slot: SwapSlot) {
        self.slots[i as usize] = slot;
    }

    /// The slot kept at `i`, which is freed: the page is leaving disk.
    pub fn take(&mut self, i: u32) -> SwapSlot {
        self.free.push(i);
        self.slots[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_state_takes_eight_bytes() {
        assert_eq!(std::mem::size_of::<super::super::PageState>(), 8);
    }

    #[test]
    fn freed_indices_are_reused_and_others_keep_their_slots() {
        let slot = |n: u32| SwapSlot::for_tests(n);
        let mut d = DiskSlots::default();
        let (a, b) = (d.put(slot(1)), d.put(slot(2)));
        assert_eq!(d.take(a), slot(1));
        let c = d.put(slot(3));
        assert_eq!(c, a);
        d.set(b, slot(4));
        assert_eq!((d.get(b), d.get(c)), (slot(4), slot(3)));
    }
}

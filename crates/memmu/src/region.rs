//! The compressed region's free space: first fit, with free blocks merged
//! as they are freed (paper 003 §5.3: merging on every decompression,
//! coalescing when an allocation fails, which the `Memmu` does since it
//! must move pages and update their table entries).

use std::collections::BTreeMap;

/// Free blocks of a region of `len` bytes, by offset.
///
/// Invariant: blocks do not overlap or touch (touching blocks are merged).
#[derive(Debug, Clone)]
pub(crate) struct FreeList {
    blocks: BTreeMap<usize, usize>,
    free: usize,
}

impl FreeList {
    /// A wholly free region of `len` bytes.
    pub fn new(len: usize) -> Self {
        let mut blocks = BTreeMap::new();
        if len > 0 {
            blocks.insert(0, len);
        }
        FreeList { blocks, free: len }
    }

    /// Free bytes in all.
    pub fn free(&self) -> usize {
        self.free
    }

    /// The offset of `len` bytes taken from the first block that holds
    /// them, or `None` if no block does.
    pub fn alloc(&mut self, len: usize) -> Option<usize> {
        let (&at, &size) = self.blocks.iter().find(|(_, &size)| size >= len)?;
        self.blocks.remove(&at);
        if size > len {
            self.blocks.insert(at + len, size - len);
        }
        self.free -= len;
        Some(at)
    }

    /// Gives back `len` bytes at `at`, merging with the blocks beside them.
    pub fn release(&mut self, at: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.free += len;
        let (mut start, mut size) = (at, len);
        if let Some((&before, &before_len)) = self.blocks.range(..at).next_back() {
            debug_assert!(before + before_len <= at, "a double free at {at}");
            if before + before_len == at {
                self.blocks.remove(&before);
                start = before;
                size += before_len;
            }
        }
        if let Some(&after_len) = self.blocks.get(&(at + len)) {
            self.blocks.remove(&(at + len));
            size += after_len;
        }
        self.blocks.insert(start, size);
    }

    /// After coalescing: everything from `from` to `len` is one free block.
    pub fn reset_from(&mut self, from: usize, len: usize) {
        self.blocks.clear();
        if len > from {
            self.blocks.insert(from, len - from);
        }
        self.free = len - from;
    }
}

#[cfg(test)]
mod tests {
    use super::FreeList;

    #[test]
    fn first_fit_splits_and_release_merges() {
        let mut f = FreeList::new(100);
        assert_eq!((f.alloc(30), f.alloc(30), f.alloc(30)), (Some(0), Some(30), Some(60)));
        assert_eq!(f.alloc(20), None, "10 bytes are left");
        f.release(30, 30);
        assert_eq!(f.free(), 40);
        assert_eq!(f.alloc(40), None, "two blocks of 10 and 30 hold no 40");
        f.release(0, 30);
        assert_eq!(f.alloc(60), Some(0), "merged with the block after");
        f.release(0, 60);
        f.release(60, 30);
        assert_eq!((f.free(), f.alloc(100)), (100, Some(0)), "merged on both sides");
    }
}

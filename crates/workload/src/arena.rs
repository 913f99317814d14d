//! Carving typed arrays out of a block of memory.

/// Hands out consecutive, aligned, typed slices of a block of memory.
///
/// ```
/// let mut memory = vec![0u8; 4096];
/// let mut arena = ccvm_workload::Arena::new(&mut memory);
/// let words: &mut [u64] = arena.take(100);
/// words[99] = 1;
/// assert!(arena.remaining() <= 4096 - 800);
/// ```
pub struct Arena<'a> {
    rest: &'a mut [u8],
}

impl<'a> Arena<'a> {
    /// An arena over `memory`.
    pub fn new(memory: &'a mut [u8]) -> Self {
        Arena { rest: memory }
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The next `n` values of `T`, aligned for `T`.
    ///
    /// # Panics
    ///
    /// If fewer bytes remain (a workload sizing bug).
    pub fn take<T: bytemuck::Pod>(&mut self, n: usize) -> &'a mut [T] {
        let rest = std::mem::take(&mut self.rest);
        let skip = rest.as_ptr().align_offset(std::mem::align_of::<T>());
        let bytes = n * std::mem::size_of::<T>();
        assert!(skip + bytes <= rest.len(), "arena exhausted: {bytes} bytes wanted");
        let (mine, rest) = rest[skip..].split_at_mut(bytes);
        self.rest = rest;
        bytemuck::cast_slice_mut(mine)
    }
}

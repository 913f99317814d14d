//! Where chunk memory comes from: the [`ChunkSource`] a store requests
//! chunks from as it grows and gives them back to as it shrinks.

/// Supplies chunks of memory. A request may fail (memory is short, or a
/// test injects a failure); the store then stays as it was.
pub trait ChunkSource: Send + Sync {
    /// A zeroed chunk of `bytes` bytes, or `None` if none can be had.
    fn request(&mut self, bytes: usize) -> Option<Box<[u8]>>;
    /// Takes back a chunk the store no longer needs.
    fn give_back(&mut self, chunk: Box<[u8]>) {
        drop(chunk);
    }
}

/// Chunks from the heap; never fails short of the process running out.
///
/// Chunks are touched page by page when requested: zeroed heap memory is
/// mapped lazily, and without this the first put into each page of a chunk
/// would take the page fault. Requested ahead of need, a chunk's faults are
/// paid before any put waits on them.
#[derive(Default)]
pub struct HeapChunks;

impl ChunkSource for HeapChunks {
    fn request(&mut self, bytes: usize) -> Option<Box<[u8]>> {
        let mut chunk = vec![0u8; bytes].into_boxed_slice();
        for page in chunk.chunks_mut(4096) {
            // SAFETY: a valid, exclusively borrowed byte; volatile so the
            // store of a zero into zeroed memory is not optimised away.
            unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 0) };
        }
        Some(chunk)
    }
}

/// Chunks from the heap, except that the requests a schedule names fail:
/// for testing that a failed request leaves a store consistent.
pub struct FailingChunks {
    requests: u64,
    fails: fn(u64) -> bool,
}

impl FailingChunks {
    /// Request number `n` (from 0) fails when `fails(n)` is true.
    pub fn new(fails: fn(u64) -> bool) -> Self {
        FailingChunks { requests: 0, fails }
    }
}

impl ChunkSource for FailingChunks {
    fn request(&mut self, bytes: usize) -> Option<Box<[u8]>> {
        let n = self.requests;
        self.requests += 1;
        (!(self.fails)(n)).then(|| vec![0u8; bytes].into_boxed_slice())
    }
}

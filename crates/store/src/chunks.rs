//! Where chunk memory comes from: the [`ChunkSource`] a store requests
//! chunks from as it grows and gives them back to as it shrinks.
//!
//! # Why chunks are mapped, not allocated
//!
//! A store that shrinks must leave the process's resident memory, or the
//! memory a budget was shrunk for is held twice: once by the pages that
//! replaced the cache, once by the cache that no longer counts. Chunks from
//! the C heap did not leave: freed 16 KiB blocks stay mapped inside the
//! heap, so a process's resident memory kept the store's largest size
//! forever (`ccvm run --workload graph --size 64M --ram 40M` held 14.5 MB
//! of heap against a store of at most 12.7 MB, beside 40.7 MB of region
//! pages). [`MappedChunks`] maps memory from the kernel in slabs and
//! returns a chunk's pages (`MADV_DONTNEED`) the moment it is given back.
//! Slabs, not a mapping per chunk: a store of a gigabyte would otherwise
//! split into tens of thousands of mappings, past the kernel's limit on
//! them.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

/// Supplies chunks of memory. A request may fail (memory is short, or a
/// test injects a failure); the store then stays as it was.
pub trait ChunkSource: Send + Sync {
    /// A zeroed chunk of `bytes` bytes, or `None` if none can be had.
    fn request(&mut self, bytes: usize) -> Option<Chunk>;
    /// Takes back a chunk the store no longer needs.
    fn give_back(&mut self, chunk: Chunk);
}

/// A slab of mapped memory, unmapped when the last chunk of it and its
/// source are gone.
struct Slab {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the slab is plain memory; which bytes each holder may touch is
// settled by the chunks, each of which covers its own range.
unsafe impl Send for Slab {}
// SAFETY: as above; a shared slab is only read through its base address.
unsafe impl Sync for Slab {}

/// A fresh anonymous read-write mapping of `len` bytes with `flags`
/// (`MAP_PRIVATE` or `MAP_SHARED`, plus any of `MAP_NORESERVE` and the
/// like), made by system call: in a program paged by `ccvm exec` the C
/// library's `mmap` is the preloaded library's, which would serve private
/// memory from the paged heap. `None` if the kernel refuses. The caller
/// owns the mapping and unmaps it.
///
/// ```
/// let p = ccvm_store::chunks::map_anonymous(4096, libc::MAP_PRIVATE).unwrap();
/// // SAFETY: the page just mapped, read-write.
/// unsafe { *p.cast::<u8>() = 7; libc::munmap(p, 4096) };
/// ```
pub fn map_anonymous(len: usize, flags: libc::c_int) -> Option<*mut libc::c_void> {
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    let base = unsafe {
        libc::syscall(
            libc::SYS_mmap,
            std::ptr::null_mut::<libc::c_void>(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_ANONYMOUS,
            -1,
            0,
        ) as *mut libc::c_void
    };
    (base != libc::MAP_FAILED).then_some(base)
}

impl Slab {
    fn map(len: usize) -> Option<Slab> {
        let base = map_anonymous(len, libc::MAP_PRIVATE | libc::MAP_NORESERVE)?;
        Some(Slab {
            base: NonNull::new(base.cast()).expect("mmap does not return null"),
            len,
        })
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`; no chunk of it is left.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A chunk of memory a store holds: a range of a slab, page-aligned,
/// zeroed when handed out. Only its holder reads or writes its bytes.
pub struct Chunk {
    slab: Arc<Slab>,
    offset: usize,
    len: usize,
}

impl Chunk {
    fn ptr(&self) -> *mut u8 {
        // SAFETY: `offset + len` lies within the slab (set by `MappedChunks`).
        unsafe { self.slab.base.as_ptr().add(self.offset) }
    }
}

impl Deref for Chunk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the chunk's own range of a live slab; no other chunk
        // covers it while this one exists.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }
}

impl DerefMut for Chunk {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len) }
    }
}

/// Chunks mapped from the kernel in slabs of [`MappedChunks::SLAB`] bytes
/// (or one chunk, if larger); a chunk given back returns its pages to the
/// kernel at once and its range is handed out again before a new slab is
/// mapped. Requested chunks are touched page by page, so that their page
/// faults are paid when the store grows ahead of need, not by the put
/// that first writes each page.
#[derive(Default)]
pub struct MappedChunks {
    /// Chunks given back, (slab, offset), by size.
    free: Vec<(usize, Arc<Slab>, usize)>,
    /// The slab being carved, and how far.
    current: Option<(Arc<Slab>, usize)>,
}

impl MappedChunks {
    /// Bytes mapped at a time.
    pub const SLAB: usize = 2 << 20;
}

impl ChunkSource for MappedChunks {
    fn request(&mut self, bytes: usize) -> Option<Chunk> {
        let bytes = bytes.next_multiple_of(4096);
        let chunk = if let Some(i) = self.free.iter().position(|(len, _, _)| *len == bytes) {
            let (len, slab, offset) = self.free.swap_remove(i);
            Chunk { slab, offset, len }
        } else {
            let fits = |c: &Option<(Arc<Slab>, usize)>| c.as_ref().is_some_and(|(s, at)| at + bytes <= s.len);
            if !fits(&self.current) {
                self.current = Some((Arc::new(Slab::map(Self::SLAB.max(bytes))?), 0));
            }
            let (slab, at) = self.current.as_mut().expect("a slab with room");
            let chunk = Chunk {
                slab: slab.clone(),
                offset: *at,
                len: bytes,
            };
            *at += bytes;
            chunk
        };
        let mut chunk = chunk;
        for page in chunk.chunks_mut(4096) {
            // SAFETY: a valid, exclusively borrowed byte; volatile so the
            // store of a zero into zeroed memory is not optimised away.
            unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 0) };
        }
        Some(chunk)
    }

    fn give_back(&mut self, chunk: Chunk) {
        // SAFETY: the chunk's own page-aligned range, which nothing else
        // refers to once it is given back; it reads as zeros from now on.
        unsafe { libc::madvise(chunk.ptr().cast(), chunk.len, libc::MADV_DONTNEED) };
        let Chunk { slab, offset, len } = chunk;
        self.free.push((len, slab, offset));
    }
}

/// Mapped chunks, except that the requests a schedule names fail: for
/// testing that a failed request leaves a store consistent.
pub struct FailingChunks {
    requests: u64,
    fails: fn(u64) -> bool,
    chunks: MappedChunks,
}

impl FailingChunks {
    /// Request number `n` (from 0) fails when `fails(n)` is true.
    pub fn new(fails: fn(u64) -> bool) -> Self {
        FailingChunks {
            requests: 0,
            fails,
            chunks: MappedChunks::default(),
        }
    }
}

impl ChunkSource for FailingChunks {
    fn request(&mut self, bytes: usize) -> Option<Chunk> {
        let n = self.requests;
        self.requests += 1;
        if (self.fails)(n) {
            return None;
        }
        self.chunks.request(bytes)
    }

    fn give_back(&mut self, chunk: Chunk) {
        self.chunks.give_back(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of the pages at `ptr..ptr + len` are resident (mincore).
    fn resident_pages(ptr: *mut u8, len: usize) -> usize {
        let mut vec = vec![0u8; len / 4096];
        // SAFETY: a page-aligned range of a live mapping and a vector of one
        // byte a page.
        assert_eq!(unsafe { libc::mincore(ptr.cast(), len, vec.as_mut_ptr()) }, 0);
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn chunks_given_back_leave_resident_memory_and_come_back_zeroed() {
        let mut source = MappedChunks::default();
        let mut chunks: Vec<Chunk> = (0..256).map(|_| source.request(16 << 10).unwrap()).collect();
        for (i, c) in chunks.iter_mut().enumerate() {
            assert!(c.iter().all(|&b| b == 0));
            c.fill(i as u8 | 1);
        }
        let ranges: Vec<(*mut u8, usize)> = chunks.iter().map(|c| (c.ptr(), c.len)).collect();
        // The slabs stay mapped (the source holds the last one, the free
        // list the rest), so their pages can be asked about.
        assert_eq!(
            ranges.iter().map(|&(p, l)| resident_pages(p, l)).sum::<usize>(),
            256 * 4
        );
        for c in chunks.drain(..) {
            source.give_back(c);
        }
        assert_eq!(ranges.iter().map(|&(p, l)| resident_pages(p, l)).sum::<usize>(), 0);
        // Reused ranges read as zeros; chunks do not overlap.
        let mut again: Vec<Chunk> = (0..256).map(|_| source.request(16 << 10).unwrap()).collect();
        for (i, c) in again.iter_mut().enumerate() {
            assert!(c.iter().all(|&b| b == 0));
            c.fill(i as u8);
        }
        for (i, c) in again.iter().enumerate() {
            assert!(c.iter().all(|&b| b == i as u8));
        }
        // A chunk larger than a slab gets a slab of its own.
        let big = source.request(4 << 20).unwrap();
        assert_eq!(big.len(), 4 << 20);
    }
}

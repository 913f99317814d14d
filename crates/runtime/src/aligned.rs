//! Page-aligned heap buffers, as O_DIRECT and UFFDIO_COPY want them.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A zeroed, 4096-aligned buffer of fixed length.
///
/// A buffer of more than a page is its own anonymous mapping, so that its
/// pages hold memory only once written: the allocator would write zeros
/// over the whole of an aligned block (it has no aligned `calloc`), and
/// the swap file's 64 KiB cluster buffers, made in every paged process,
/// are used only once it pages to disk.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
    mapped: bool,
}

// SAFETY: the buffer is owned memory with no interior sharing.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes, aligned to a page.
    ///
    /// # Panics
    ///
    /// If `len` is 0 or the allocation fails.
    ///
    /// ```
    /// use ccvm_runtime::aligned::AlignedBuf;
    /// for len in [512, 4096, 65536] {
    ///     let mut b = AlignedBuf::new(len);
    ///     assert_eq!((b.as_ptr() as usize % 4096, b.len()), (0, len));
    ///     assert!(b.iter().all(|&x| x == 0));
    ///     b[len - 1] = 7;
    ///     assert_eq!(b[len - 1], 7);
    /// }
    /// ```
    pub fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len, ccvm_codec::PAGE_SIZE).expect("a sane buffer size");
        assert!(len > 0, "an empty aligned buffer");
        if len > ccvm_codec::PAGE_SIZE {
            if let Some(p) = crate::frames::map_small_pages(len) {
                let ptr = NonNull::new(p.cast()).expect("mmap does not return null");
                return AlignedBuf {
                    ptr,
                    layout,
                    mapped: true,
                };
            }
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf {
            ptr,
            layout,
            mapped: false,
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() initialized bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: the mapping `new` made, of this length.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.layout.size()) };
        } else {
            // SAFETY: allocated with this layout in `new`.
            unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
        }
    }
}

/// Types for which all-zero bytes are a valid value, so that a
/// [`ZeroTable`] of them can start as the kernel's zero pages.
///
/// # Safety
///
/// All-zero bytes must be a valid value of the type, and the type must
/// own nothing (no drop glue).
pub unsafe trait Zeroable: Copy {}

// SAFETY: false is 0.
unsafe impl Zeroable for bool {}
// SAFETY: 0 is an integer.
unsafe impl Zeroable for u8 {}

/// A table of `T` in its own anonymous mapping, all zero at the start.
///
/// Why not a `Vec`: the runtime's tables of a byte per page of a region
/// may cover gigabytes of address space (`ccvm exec`'s heap) of which few
/// pages are used. Mapped from the kernel, a table holds memory only where
/// it is written, and it stays out of the allocator that counts ccvm's own
/// memory against the RAM budget (see [`crate::accounting`]).
pub struct ZeroTable<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: owned memory with no interior sharing; T is plain data.
unsafe impl<T: Zeroable + Send> Send for ZeroTable<T> {}

impl<T: Zeroable> ZeroTable<T> {
    /// `len` zero values.
    ///
    /// # Panics
    ///
    /// If the kernel refuses the mapping (address space exhausted).
    ///
    /// ```
    /// let mut t = ccvm_runtime::aligned::ZeroTable::<bool>::new(1 << 20);
    /// assert!(!t[12345]);
    /// t[12345] = true;
    /// assert!(t[12345]);
    /// ```
    pub fn new(len: usize) -> Self {
        let bytes = (len * std::mem::size_of::<T>()).max(1);
        let p = crate::frames::map_small_pages(bytes)
            .unwrap_or_else(|| panic!("mapping a table of {len} entries: {}", std::io::Error::last_os_error()));
        ZeroTable {
            ptr: NonNull::new(p.cast()).expect("mmap does not return null"),
            len,
        }
    }
}

impl<T: Zeroable> Deref for ZeroTable<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the mapping holds len values, zero or written since.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for ZeroTable<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for ZeroTable<T> {
    fn drop(&mut self) {
        let bytes = (self.len * std::mem::size_of::<T>()).max(1);
        // SAFETY: the mapping made in `new`, of this length.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), bytes) };
    }
}

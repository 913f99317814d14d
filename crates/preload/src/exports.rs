//! The C library's malloc family, replaced (see the crate docs for what
//! goes to the heap and what is passed on; the mapping calls are in
//! [`crate::vm`]).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, size_t};

use crate::heap;

// The C library's own allocator, under the names it exports for
// allocators that replace it.
extern "C" {
    pub(crate) fn __libc_malloc(size: size_t) -> *mut c_void;
    pub(crate) fn __libc_calloc(n: size_t, size: size_t) -> *mut c_void;
    fn __libc_realloc(ptr: *mut c_void, size: size_t) -> *mut c_void;
    pub(crate) fn __libc_memalign(align: size_t, size: size_t) -> *mut c_void;
    pub(crate) fn __libc_free(ptr: *mut c_void);
}

const PAGE: usize = ccvm_runtime::PAGE_SIZE;

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// Counts bytes the C library gives instead of the heap.
fn unpaged(ptr: *mut c_void, size: usize) -> *mut c_void {
    if !ptr.is_null() && crate::started() {
        heap::UNPAGED.fetch_add(size, Ordering::Relaxed);
    }
    ptr
}

/// From the heap when it is up and has room, else from the C library
/// (and always for ccvm's own thread: see
/// [`ccvm_runtime::allocating_for_ccvm`]).
fn alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    if !ccvm_runtime::allocating_for_ccvm() {
        if let Some(p) = heap::alloc(size, align, zero) {
            return p.cast();
        }
    }
    // SAFETY: the C library's own allocator, with valid arguments.
    let p = unsafe {
        match (align <= 16, zero) {
            (true, false) => __libc_malloc(size),
            (true, true) => __libc_calloc(1, size),
            (false, _) => {
                let p = __libc_memalign(align, size);
                if zero && !p.is_null() {
                    p.cast::<u8>().write_bytes(0, size);
                }
                p
            }
        }
    };
    unpaged(p, size)
}

/// `malloc(3)`.
#[no_mangle]
pub extern "C" fn malloc(size: size_t) -> *mut c_void {
    alloc(size, 16, false)
}

/// `calloc(3)`.
#[no_mangle]
pub extern "C" fn calloc(n: size_t, size: size_t) -> *mut c_void {
    match n.checked_mul(size) {
        Some(bytes) => alloc(bytes, 16, true),
        None => {
            set_errno(libc::ENOMEM);
            std::ptr::null_mut()
        }
    }
}

/// `free(3)`.
///
/// # Safety
///
/// `ptr` is null or came from this allocator (or the C library's) and is
/// not used again.
#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut c_void) {
    if ptr.is_null() {
    } else if heap::contains(ptr.cast()) {
        // SAFETY: as the caller promises.
        unsafe { heap::free(ptr.cast()) }
    } else {
        // SAFETY: not ours, so the C library's.
        unsafe { __libc_free(ptr) }
    }
}

/// `cfree`, an old name of `free`.
///
/// # Safety
///
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn cfree(ptr: *mut c_void) {
    // SAFETY: as the caller promises.
    unsafe { free(ptr) }
}

/// `realloc(3)`.
///
/// # Safety
///
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn realloc(ptr: *mut c_void, size: size_t) -> *mut c_void {
    if ptr.is_null() {
        return malloc(size);
    }
    if size == 0 {
        // SAFETY: as the caller promises.
        unsafe { free(ptr) };
        return std::ptr::null_mut();
    }
    if !heap::contains(ptr.cast()) {
        // SAFETY: the C library's block.
        return unsafe { __libc_realloc(ptr, size) };
    }
    // SAFETY: a block of the heap.
    if let Some(p) = unsafe { heap::realloc(ptr.cast(), size) } {
        return p.cast();
    }
    // The heap is full: move the block out to the C library.
    // SAFETY: a block of the heap, at least `old` bytes long.
    let old = unsafe { heap::usable_size(ptr.cast()) };
    let new = alloc(size, 16, false);
    if new.is_null() {
        set_errno(libc::ENOMEM);
        return new;
    }
    // SAFETY: distinct blocks of at least these sizes.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), new.cast::<u8>(), old.min(size));
        heap::free(ptr.cast());
    }
    new
}

/// `reallocarray(3)`.
///
/// # Safety
///
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn reallocarray(ptr: *mut c_void, n: size_t, size: size_t) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: as the caller promises.
        Some(bytes) => unsafe { realloc(ptr, bytes) },
        None => {
            set_errno(libc::ENOMEM);
            std::ptr::null_mut()
        }
    }
}

fn aligned(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    alloc(size, align, false)
}

/// `posix_memalign(3)`.
///
/// # Safety
///
/// `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: size_t, size: size_t) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    let p = alloc(size, align, false);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: as the caller promises.
    unsafe { out.write(p) };
    0
}

/// `aligned_alloc(3)`.
#[no_mangle]
pub extern "C" fn aligned_alloc(align: size_t, size: size_t) -> *mut c_void {
    aligned(align, size)
}

/// `memalign(3)`.
#[no_mangle]
pub extern "C" fn memalign(align: size_t, size: size_t) -> *mut c_void {
    aligned(align, size)
}

/// `valloc(3)`.
#[no_mangle]
pub extern "C" fn valloc(size: size_t) -> *mut c_void {
    alloc(size, PAGE, false)
}

/// `pvalloc(3)`.
#[no_mangle]
pub extern "C" fn pvalloc(size: size_t) -> *mut c_void {
    alloc(size.next_multiple_of(PAGE).max(PAGE), PAGE, false)
}

/// `malloc_usable_size(3)`.
///
/// # Safety
///
/// As for [`free`], but the block stays in use.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(ptr: *mut c_void) -> size_t {
    if ptr.is_null() {
        return 0;
    }
    if heap::contains(ptr.cast()) {
        // SAFETY: as the caller promises.
        return unsafe { heap::usable_size(ptr.cast()) };
    }
    type Usable = unsafe extern "C" fn(*mut c_void) -> size_t;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let mut f = NEXT.load(Ordering::Relaxed);
    if f == 0 {
        // SAFETY: looking up the C library's own function by name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) } as usize;
        NEXT.store(f, Ordering::Relaxed);
    }
    if f == 0 {
        return 0;
    }
    // SAFETY: the C library's malloc_usable_size, on its own block.
    unsafe { std::mem::transmute::<usize, Usable>(f)(ptr) }
}

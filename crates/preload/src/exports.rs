//! The C library's allocation entry points, replaced: the malloc family
//! and anonymous `mmap`, `munmap` and `mremap` (see the crate docs for
//! what goes to the heap and what is passed on).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, off_t, size_t};

use crate::{heap, mappings};

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

/// From the heap when it is up and has room, else from the C library.
fn alloc(size: usize, align: usize, zero: bool) -> *mut c_void {
    if let Some(p) = heap::alloc(size, align, zero) {
        return p.cast();
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

/// Bytes of anonymous mappings passed to the kernel, by reason (see
/// `ccvm_runtime::UnpagedMappings`): reserved, fixed, stacks and huge
/// pages, shared, other protections.
pub static UNPAGED_MAPPINGS: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];

/// Counts an anonymous mapping the heap did not serve, by why.
fn count_unpaged(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int) {
    if fd != -1 || flags & libc::MAP_ANONYMOUS == 0 || len == 0 {
        return;
    }
    let reason = if flags & libc::MAP_NORESERVE != 0 || prot == libc::PROT_NONE {
        0
    } else if !addr.is_null() || flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0 {
        1
    } else if flags & (libc::MAP_STACK | libc::MAP_GROWSDOWN | libc::MAP_HUGETLB) != 0 {
        2
    } else if flags & libc::MAP_TYPE != libc::MAP_PRIVATE {
        3
    } else {
        4
    };
    UNPAGED_MAPPINGS[reason].fetch_add(len, Ordering::Relaxed);
}

/// Whether an `mmap` call asks for plain private memory that the heap can
/// give: anonymous, private, read-write, at no fixed address, not a huge
/// reservation (`MAP_NORESERVE`), not a stack.
fn heap_mappable(addr: *mut c_void, prot: c_int, flags: c_int, fd: c_int) -> bool {
    let refused = libc::MAP_FIXED
        | libc::MAP_FIXED_NOREPLACE
        | libc::MAP_GROWSDOWN
        | libc::MAP_STACK
        | libc::MAP_HUGETLB
        | libc::MAP_NORESERVE;
    addr.is_null()
        && fd == -1
        && prot == libc::PROT_READ | libc::PROT_WRITE
        && flags & libc::MAP_ANONYMOUS != 0
        && flags & libc::MAP_TYPE == libc::MAP_PRIVATE
        && flags & refused == 0
}

fn sys_mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void {
    // No buffer to bring in: straight to the kernel, past the guard's
    // SIGSYS round trip.
    let _allow = ccvm_runtime::guard::Allow::new();
    // SAFETY: the system call itself, with the caller's arguments.
    unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) as *mut c_void }
}

/// `mmap(2)`: plain private memory comes from the heap (zeroed,
/// page-aligned), anything else from the kernel.
#[no_mangle]
pub extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if len > 0 && heap_mappable(addr, prot, flags, fd) && crate::started() {
        let len = len.next_multiple_of(PAGE);
        if let Some(p) = heap::alloc(len, PAGE, true) {
            mappings::add(p as usize, len);
            return p.cast();
        }
    }
    if crate::started() {
        count_unpaged(addr, len, prot, flags, fd);
    }
    sys_mmap(addr, len, prot, flags, fd, off)
}

/// `mmap64`, the same as [`mmap`] on 64-bit Linux.
#[no_mangle]
pub extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    mmap(addr, len, prot, flags, fd, off)
}

/// `munmap(2)`: pages of heap mappings are marked unmapped, and a mapping
/// is freed once all of its pages are (see the `mappings` module).
///
/// # Safety
///
/// As for the system call: nothing uses the range afterwards.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    if heap::contains(addr.cast()) {
        if !(addr as usize).is_multiple_of(PAGE) {
            set_errno(libc::EINVAL);
            return -1;
        }
        for start in mappings::unmap(addr as usize, len) {
            // SAFETY: a block the heap handed out as a mapping, of which
            // the program has unmapped every page.
            unsafe { heap::free(start as *mut u8) };
        }
        return 0;
    }
    let _allow = ccvm_runtime::guard::Allow::new();
    // SAFETY: the system call itself.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int }
}

/// `madvise(2)`: heap pages given up (`MADV_DONTNEED`, `MADV_FREE`) read
/// back as zeros, copies in the cache or on disk included; `MADV_REMOVE`
/// fails with `EINVAL` as on any private anonymous memory; other advice on
/// the heap is accepted and ignored, and everything else goes to the
/// kernel.
///
/// # Safety
///
/// As for the system call.
#[no_mangle]
pub unsafe extern "C" fn madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    let _allow = ccvm_runtime::guard::Allow::new();
    if !heap::contains(addr.cast()) {
        // SAFETY: the system call itself (straight to the kernel: the
        // `syscall` of this library routes madvise here).
        return unsafe { ccvm_runtime::sys_madvise(addr, len, advice) };
    }
    if !(addr as usize).is_multiple_of(PAGE) {
        set_errno(libc::EINVAL);
        return -1;
    }
    match advice {
        libc::MADV_DONTNEED | libc::MADV_FREE => {
            if let Some(region) = crate::paged_region() {
                let offset = addr as usize - region.as_ptr() as usize;
                let end = (offset + len).min(region.len());
                region.discard(offset..end);
            } else {
                // A forked child's plain heap: the kernel's own.
                // SAFETY: the system call itself.
                return unsafe { ccvm_runtime::sys_madvise(addr, len, advice) };
            }
            0
        }
        libc::MADV_REMOVE => {
            set_errno(libc::EINVAL);
            -1
        }
        _ => 0,
    }
}

/// `mremap(2)`: a heap mapping shrinks in place or moves to a new heap
/// block (when `MREMAP_MAYMOVE` allows it).
///
/// # Safety
///
/// As for the system call.
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    // mremap is variadic in C; on x86-64 a fifth pointer argument is passed
    // as a fixed one would be, and read only when MREMAP_FIXED says the
    // caller passed it.
    if !heap::contains(old.cast()) {
        let new_addr = if flags & libc::MREMAP_FIXED != 0 {
            new_addr
        } else {
            std::ptr::null_mut()
        };
        let _allow = ccvm_runtime::guard::Allow::new();
        // SAFETY: the system call itself.
        return unsafe { libc::syscall(libc::SYS_mremap, old, old_len, new_len, flags, new_addr) as *mut c_void };
    }
    // Only a whole heap mapping can be remapped (the kernel must not move
    // pages out of the region).
    if mappings::len_of(old as usize).is_none_or(|len| old_len > len) || flags & libc::MREMAP_FIXED != 0 {
        set_errno(libc::EINVAL);
        return libc::MAP_FAILED;
    }
    if new_len <= old_len {
        // The tail is unmapped; the block goes when the rest does.
        let tail = new_len.next_multiple_of(PAGE);
        // SAFETY: the tail of this mapping.
        unsafe { munmap(old.cast::<u8>().add(tail).cast(), old_len.saturating_sub(tail)) };
        return old;
    }
    if flags & libc::MREMAP_MAYMOVE == 0 {
        set_errno(libc::ENOMEM);
        return libc::MAP_FAILED;
    }
    let new = mmap(
        std::ptr::null_mut(),
        new_len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if new == libc::MAP_FAILED {
        return new;
    }
    // SAFETY: the old mapping is at least `old_len` bytes, the new one
    // `new_len`, and they are distinct blocks.
    unsafe {
        std::ptr::copy_nonoverlapping(old.cast::<u8>(), new.cast::<u8>(), old_len.min(new_len));
        munmap(old, old_len);
    }
    new
}

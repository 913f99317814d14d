//! The mapping calls, replaced: `mmap`, `munmap`, `mremap`, `madvise` and
//! `mprotect`, with the kernel's semantics on heap memory.
//!
//! # Choices
//!
//! * Private anonymous mappings come from the heap whatever their
//!   protection, reservations (`PROT_NONE`, `MAP_NORESERVE`) included: V8
//!   and the JVM reserve their heaps that way, then commit parts with
//!   `mprotect` or with a fixed `mmap` over the reservation, and most of a
//!   managed program's memory would otherwise be left to the kernel. An
//!   address hint is not followed (the kernel need not either, and these
//!   programs fall back when it is not); fixed addresses outside the heap,
//!   `MAP_32BIT`, `MAP_LOCKED`, stacks and huge pages go to the kernel.
//! * A protection other than read-write is the kernel's
//!   ([`Region::protect`](ccvm_runtime::Region::protect)): a touch of a
//!   reserved page faults as the program expects, and the pager learns
//!   which pages it cannot move.
//! * A reservation's old contents are dropped, not zeroed by writing:
//!   writing a gigabyte would fault it all in. So are a large read-write
//!   mapping's (from [`ZERO_BY_WRITING`] bytes); a smaller one is zeroed as
//!   `calloc` zeroes, which is cheaper for small blocks reused.
//! * A fixed anonymous private `mmap` over heap pages the program holds
//!   drops them (they read back as zeros) and sets their protection: the
//!   kernel's outcome, without leaving the region; so does one over pages
//!   the program unmapped from a mapping it still holds part of. Over heap
//!   memory the program does not hold (another block's, perhaps) it fails
//!   with `ENOMEM` rather than overwrite it. Any other fixed mapping over held
//!   heap pages (a file, shared memory) is made by the kernel, and those
//!   pages leave the region until the program unmaps them; they then
//!   become anonymous heap memory again.
//! * Heap pages unmapped stay the heap's until their whole mapping is (see
//!   [`crate::mappings`]); protections are lifted and the pages dropped as
//!   they are unmapped.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, off_t, size_t};

use crate::{heap, mappings};

const PAGE: usize = ccvm_runtime::PAGE_SIZE;
/// Old contents of a new read-write mapping below this many bytes are
/// zeroed by writing; from it on, dropped.
const ZERO_BY_WRITING: usize = 128 << 10;
const RW: c_int = libc::PROT_READ | libc::PROT_WRITE;
const RWX: c_int = RW | libc::PROT_EXEC;
/// `PROT_SEM`, which Linux accepts and ignores on x86-64 (not in `libc`).
const PROT_SEM: c_int = 0x8;

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
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

/// Whether the mapping asked for is private anonymous memory with plain
/// protections, whatever its address.
fn private_anonymous(prot: c_int, flags: c_int, fd: c_int) -> bool {
    fd == -1 && prot & !RWX == 0 && flags & libc::MAP_ANONYMOUS != 0 && flags & libc::MAP_TYPE == libc::MAP_PRIVATE
}

/// Whether an `mmap` call asks for memory the heap can give: private,
/// anonymous, at no fixed address, not a stack, locked or low memory.
fn heap_mappable(prot: c_int, flags: c_int, fd: c_int) -> bool {
    let refused = libc::MAP_FIXED
        | libc::MAP_FIXED_NOREPLACE
        | libc::MAP_GROWSDOWN
        | libc::MAP_STACK
        | libc::MAP_HUGETLB
        | libc::MAP_LOCKED
        | libc::MAP_32BIT;
    private_anonymous(prot, flags, fd) && flags & refused == 0
}

fn sys_mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void {
    let args = [
        addr as u64,
        len as u64,
        prot as u64,
        flags as u64,
        fd as u64,
        off as u64,
    ];
    sys_mapping(libc::SYS_mmap, args)
}

/// [`sys`] for a call that returns an address: the address, or
/// `MAP_FAILED` with `errno` set.
fn sys_mapping(nr: libc::c_long, args: [u64; 6]) -> *mut c_void {
    match sys(nr, args) {
        Ok(p) => p as *mut c_void,
        Err(e) => {
            set_errno(e);
            libc::MAP_FAILED
        }
    }
}

/// A system call straight to the kernel (past the guard, and past this
/// library's own `syscall`, which routes mapping calls back here): its
/// result, or `Err(errno)`.
fn sys(nr: libc::c_long, args: [u64; 6]) -> Result<i64, c_int> {
    // SAFETY: the callers pass their own callers' arguments, or heap
    // pages, which this process maps.
    match unsafe { ccvm_runtime::guard::raw_syscall(nr, args) } {
        r if r < 0 => Err(-r as c_int),
        r => Ok(r),
    }
}

/// [`sys`] as the C library returns it: 0, or -1 with `errno` set.
fn sys_status(nr: libc::c_long, args: [u64; 6]) -> c_int {
    match sys(nr, args) {
        Ok(_) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// Byte offsets into the paged region of `addr..addr + len`, clipped to
/// it, with the region; `None` in a forked child, whose heap is plain
/// memory.
fn in_region(addr: usize, len: usize) -> Option<(&'static ccvm_runtime::Region, std::ops::Range<usize>)> {
    let region = crate::paged_region()?;
    let start = addr - region.as_ptr() as usize;
    Some((region, start..(start + len).min(region.len())))
}

/// Drops heap pages: they read back as zeros, and their copies in the
/// cache or on disk are forgotten.
pub(crate) fn drop_pages(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    match in_region(addr, len) {
        Some((region, range)) => region.discard(range),
        None => {
            // SAFETY: heap pages of this process, given up.
            unsafe { ccvm_runtime::sys_madvise(addr as *mut c_void, len, libc::MADV_DONTNEED) };
        }
    }
}

/// Sets the protection of heap pages (`prot` outside `RWX`: they now hold
/// another mapping).
fn protect_pages(addr: usize, len: usize, prot: c_int) -> Result<(), c_int> {
    match in_region(addr, len) {
        Some((region, range)) => region.protect(range, prot).map_err(|e| e as c_int),
        None if prot & !RWX != 0 => Ok(()),
        None => sys(libc::SYS_mprotect, [addr as u64, len as u64, prot as u64, 0, 0, 0]).map(drop),
    }
}

/// Makes heap pages plain read-write heap memory again.
fn unprotect_pages(addr: usize, len: usize) {
    let Some((region, range)) = in_region(addr, len) else {
        // A forked child's plain heap: the pages it protected, if any.
        let _ = sys(libc::SYS_mprotect, [addr as u64, len as u64, RW as u64, 0, 0, 0]);
        return;
    };
    if let Err(e) = region.unprotect(range) {
        // The heap cannot hand these pages out again safely.
        eprintln!("ccvm: giving heap pages back: errno {e}; stopping");
        // SAFETY: ends the process.
        unsafe { libc::_exit(ccvm_runtime::FATAL_EXIT) };
    }
}

/// A new mapping of `len` bytes from the heap, with protection `prot`;
/// `None` if the heap has no room (or the protection cannot be set).
fn map_from_heap(len: usize, prot: c_int) -> Option<*mut c_void> {
    let len = len.next_multiple_of(PAGE);
    let p = if prot == RW && len < ZERO_BY_WRITING {
        heap::alloc(len, PAGE, true)?
    } else {
        let (p, dirty) = heap::alloc_dirty(len, prot == RW)?;
        drop_pages(p as usize, dirty.next_multiple_of(PAGE));
        if prot != RW && protect_pages(p as usize, len, prot).is_err() {
            // SAFETY: the block just handed out, not used.
            unsafe { heap::free_mapping(p) };
            return None;
        }
        p
    };
    mappings::add(p as usize, len);
    Some(p.cast())
}

/// A fixed mapping over heap pages (see the module docs).
fn map_over_heap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void {
    let (start, len) = (addr as usize, len.next_multiple_of(PAGE));
    if !start.is_multiple_of(PAGE) {
        set_errno(libc::EINVAL);
        return libc::MAP_FAILED;
    }
    let refused = libc::MAP_GROWSDOWN | libc::MAP_HUGETLB | libc::MAP_LOCKED;
    let replace = flags & libc::MAP_FIXED_NOREPLACE == 0;
    if mappings::covers(start, len) {
        if !replace {
            set_errno(libc::EEXIST);
            return libc::MAP_FAILED;
        }
    } else if !private_anonymous(prot, flags, fd) || flags & refused != 0 {
        set_errno(libc::ENOMEM);
        return libc::MAP_FAILED;
    } else if let Err(e) = mappings::remap(start, len, replace) {
        // Pages the program unmapped, of a mapping not yet freed, are
        // mapped again; others may be another block's now.
        set_errno(e);
        return libc::MAP_FAILED;
    }
    if private_anonymous(prot, flags, fd) && flags & refused == 0 {
        unprotect_pages(start, len);
        drop_pages(start, len);
        return match protect_pages(start, len, prot) {
            Ok(()) => addr,
            Err(e) => {
                set_errno(e);
                libc::MAP_FAILED
            }
        };
    }
    drop_pages(start, len);
    let _ = protect_pages(start, len, -1);
    sys_mmap(addr, len, prot, flags, fd, off)
}

/// `mmap(2)`: private anonymous memory comes from the heap, fixed
/// mappings over the heap are made as the module docs say, and anything
/// else comes from the kernel.
#[no_mangle]
pub extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if len > 0 && crate::started() {
        if heap_mappable(prot, flags, fd) {
            if let Some(p) = map_from_heap(len, prot) {
                return p;
            }
        } else if flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0 && heap::contains(addr.cast()) {
            return map_over_heap(addr, len, prot, flags, fd, off);
        }
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

/// `munmap(2)`: pages of heap mappings are marked unmapped and made plain
/// heap memory again, and a mapping is freed once all of its pages are
/// (see the `mappings` module).
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
        let len = len.next_multiple_of(PAGE);
        let unmapped = mappings::unmap(addr as usize, len);
        unprotect_pages(addr as usize, len);
        for &(start, part) in &unmapped.within {
            drop_pages(start, part);
        }
        for (start, whole) in unmapped.freed {
            unprotect_pages(start, whole);
            // SAFETY: a block the heap handed out as a mapping, of which
            // the program has unmapped (and so dropped) every page.
            unsafe { heap::free_mapping(start as *mut u8) };
        }
        return 0;
    }
    sys_status(libc::SYS_munmap, [addr as u64, len as u64, 0, 0, 0, 0])
}

/// `mprotect(2)`: on heap pages, made by the kernel and told to the pager
/// (see the module docs).
///
/// # Safety
///
/// As for the system call.
#[no_mangle]
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    if heap::contains(addr.cast()) && len > 0 {
        if !(addr as usize).is_multiple_of(PAGE) || prot & !(RWX | PROT_SEM) != 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        return match protect_pages(addr as usize, len.next_multiple_of(PAGE), prot & RWX) {
            Ok(()) => 0,
            Err(e) => {
                set_errno(e);
                -1
            }
        };
    }
    sys_status(libc::SYS_mprotect, [addr as u64, len as u64, prot as u64, 0, 0, 0])
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
            drop_pages(addr as usize, len);
            0
        }
        libc::MADV_REMOVE => {
            set_errno(libc::EINVAL);
            -1
        }
        _ => 0,
    }
}

/// `mremap(2)`: pages of a heap mapping shrink in place, or move to a new
/// heap block (when `MREMAP_MAYMOVE` allows it), or to the fixed address
/// asked outside the heap (`MREMAP_FIXED`), taking their contents along.
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
        let args = [
            old as u64,
            old_len as u64,
            new_len as u64,
            flags as u64,
            new_addr as u64,
            0,
        ];
        return sys_mapping(libc::SYS_mremap, args);
    }
    // Pages of one heap mapping, still mapped, can be remapped: copied to
    // their new place (the kernel must not move pages out of the region)
    // and unmapped here; only read-write ones are copied.
    let protected = in_region(old as usize, old_len).is_some_and(|(region, range)| region.protected(range));
    let fixed = flags & libc::MREMAP_FIXED != 0;
    if old_len == 0
        || !(old as usize).is_multiple_of(PAGE)
        || !mappings::covers(old as usize, old_len)
        || (fixed && (flags & libc::MREMAP_MAYMOVE == 0 || heap::contains(new_addr.cast())))
    {
        set_errno(libc::EINVAL);
        return libc::MAP_FAILED;
    }
    if fixed {
        if protected {
            set_errno(libc::ENOMEM);
            return libc::MAP_FAILED;
        }
        // Outside the heap, at the address asked: plain memory, made as
        // the kernel would (replacing what was there), then filled.
        let new = sys_mmap(
            new_addr,
            new_len,
            RW,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        );
        if new == libc::MAP_FAILED {
            return new;
        }
        // SAFETY: the old pages are mapped heap memory, the new mapping is
        // `new_len` bytes outside the heap.
        return unsafe { move_contents(old, old_len, new, new_len) };
    }
    if new_len <= old_len {
        // The tail is unmapped; the block goes when the rest does.
        let tail = new_len.next_multiple_of(PAGE);
        // SAFETY: the tail of this mapping.
        unsafe { munmap(old.cast::<u8>().add(tail).cast(), old_len.saturating_sub(tail)) };
        return old;
    }
    if flags & libc::MREMAP_MAYMOVE == 0 || protected {
        set_errno(libc::ENOMEM);
        return libc::MAP_FAILED;
    }
    let new = mmap(
        std::ptr::null_mut(),
        new_len,
        RW,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if new == libc::MAP_FAILED {
        return new;
    }
    // SAFETY: the old mapping is at least `old_len` bytes, the new one
    // `new_len`, and they are distinct blocks.
    unsafe { move_contents(old, old_len, new, new_len) }
}

/// Copies what `old` holds into `new` and unmaps `old`, as the kernel's
/// `mremap` leaves the old range unmapped; returns `new`.
///
/// # Safety
///
/// `old` is `old_len` bytes of mapped heap memory, `new` is `new_len`
/// bytes of writable memory, and the two do not overlap.
unsafe fn move_contents(old: *mut c_void, old_len: size_t, new: *mut c_void, new_len: size_t) -> *mut c_void {
    // SAFETY: as the caller promises.
    unsafe {
        std::ptr::copy_nonoverlapping(old.cast::<u8>(), new.cast::<u8>(), old_len.min(new_len));
        munmap(old, old_len);
    }
    new
}

/// A memory call (`mmap`, `munmap`, `mprotect`, `mremap`, `madvise`) by
/// number, made as this library's function of that name makes it: what
/// the guard hands over for calls made without the C library, and what
/// this library's `syscall` does with them. Returns the result or
/// `-errno`, as the kernel does.
pub fn memory_call(nr: i64, a: [u64; 6]) -> i64 {
    let p = |i: usize| a[i] as *mut c_void;
    let (value, failed) = match nr {
        libc::SYS_mmap => {
            let r = mmap(
                p(0),
                a[1] as size_t,
                a[2] as c_int,
                a[3] as c_int,
                a[4] as c_int,
                a[5] as off_t,
            );
            (r as i64, r == libc::MAP_FAILED)
        }
        libc::SYS_mremap => {
            // SAFETY: the caller's arguments, as the system call takes them.
            let r = unsafe { mremap(p(0), a[1] as size_t, a[2] as size_t, a[3] as c_int, p(4)) };
            (r as i64, r == libc::MAP_FAILED)
        }
        libc::SYS_munmap => {
            // SAFETY: as above.
            let r = unsafe { munmap(p(0), a[1] as size_t) };
            (i64::from(r), r == -1)
        }
        libc::SYS_mprotect => {
            // SAFETY: as above.
            let r = unsafe { mprotect(p(0), a[1] as size_t, a[2] as c_int) };
            (i64::from(r), r == -1)
        }
        libc::SYS_madvise => {
            // SAFETY: as above.
            let r = unsafe { madvise(p(0), a[1] as size_t, a[2] as c_int) };
            (i64::from(r), r == -1)
        }
        _ => return -i64::from(libc::ENOSYS),
    };
    if failed {
        // SAFETY: this thread's errno, set by the call above.
        -i64::from(unsafe { *libc::__errno_location() })
    } else {
        value
    }
}

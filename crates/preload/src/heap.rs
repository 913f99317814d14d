//! The heap: size-class slabs ([`ccvm_sizeclass`]) for small objects and
//! a TLSF allocator ([`rlsf`]) for the rest, over the paged region, behind
//! one lock.
//!
//! # Choices
//!
//! * Small objects (at most [`ccvm_sizeclass::MAX_SMALL`] bytes, alignment at most 16) go
//!   to size-class slabs in the region's top quarter (`SMALL_SHARE`), without a
//!   header: under TLSF alone a 24-byte `malloc` took 64 bytes, and a
//!   perl program's lookups touched twice the pages they touch under the
//!   C library's allocator, which doubled its faults under the kernel's
//!   swap as under ccvm (`docs/kernel.md`, "The heap's allocator"). When
//!   the slabs' part is full, small objects go to TLSF too. Slabs that
//!   empty past a few kept are dropped (the pager forgets their pages),
//!   under the heap's lock: the pager's lock is always taken after it.
//! * TLSF, not a hand-written allocator: constant time per call, and it
//!   takes its pool as a plain range of memory, which is what a region is.
//!   One lock for all threads: the programs paged here spend their time in
//!   faults, not in malloc.
//! * Each block starts with a 16-byte header (size asked for, alignment),
//!   just before the pointer handed out, because `free` is not told either
//!   and TLSF needs the alignment to find its block. Blocks aligned beyond
//!   16 bytes give up their alignment in front of the pointer for it.
//! * Memory above the highest block ever handed out has never been written
//!   (apart from TLSF's header of the free remainder, right past it), so it
//!   is still zero: `calloc` and anonymous `mmap` clear only the part of a
//!   block below that mark, and a large fresh block is not touched at all,
//!   which would fault it in page by page.
//! * A large block freed gives its whole pages back (the pager forgets
//!   them, as for `MADV_DONTNEED`), as the C library's allocator unmaps a
//!   large chunk: kept, they were paged like live data. sqlite building
//!   two indexes frees a 32 MiB sort buffer twice; with the freed pages
//!   kept, its unpaged run under `ccvm exec` held 68 MiB (a memory
//!   cgroup's peak), now 61, against 55 without ccvm. Which blocks
//!   count as large follows the C library's sliding threshold (from 128
//!   KiB, raised to the size of each block given back, up to 32 MiB), so
//!   that a program freeing and taking the same large buffer in a loop
//!   pays the zero-fill faults once, not on every turn.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use ccvm_sizeclass::SizeClasses;

type Pool = rlsf::Tlsf<'static, u32, u32, 32, 32>;

/// The slabs of small objects take the top 1/`SMALL_SHARE` of the region:
/// address space only, so a generous share costs nothing.
const SMALL_SHARE: usize = 4;

/// Bytes of the header before every pointer handed out.
const HEADER: usize = 16;
/// Past the highest block handed out, TLSF has written the free
/// remainder's header (32 bytes, 16-byte aligned); beyond this margin
/// memory is untouched.
const FRESH_MARGIN: usize = 64;

/// The threshold a freed block's size must pass for its pages to be
/// given back, at first, and the most it slides to: the C library's bounds
/// for its own (`M_MMAP_THRESHOLD`'s default and its dynamic maximum on 64
/// bits). A block of the threshold's size is kept, as the C library serves
/// a request of the size it last unmapped from its heap.
const GIVE_BACK_MIN: usize = 128 << 10;
const GIVE_BACK_MAX: usize = 32 << 20;

#[repr(C)]
struct Header {
    size: usize,
    /// The alignment, with [`UNCOUNTED`] set for a block left out of the
    /// heap's use (a reservation).
    align: usize,
}

/// In a header's `align`: the block's size is not in the heap's use.
const UNCOUNTED: usize = 1 << (usize::BITS - 1);

/// The slabs, the TLSF pool and their accounts (`in_use` counts the
/// pool's blocks; the slabs count their own).
pub struct Heap {
    pool: Pool,
    small: SizeClasses,
    /// End of the highest block handed out so far.
    fresh: usize,
    in_use: usize,
    peak: usize,
    /// Freed blocks longer than this give their pages back (see the
    /// module docs).
    give_back_from: usize,
}

// SAFETY: the pool's pointers are into the region, which lives for the
// whole process; the heap is only used under its lock.
unsafe impl Send for Heap {}

static HEAP: Mutex<Option<Heap>> = Mutex::new(None);
static START: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// Bytes given out by the C library instead (see `ExecReport`).
pub static UNPAGED: AtomicUsize = AtomicUsize::new(0);

/// Makes the heap over `len` bytes at `start`, which it owns from now on.
///
/// # Safety
///
/// `start..start + len` is mapped, writable and used by nothing else for
/// the rest of the process.
pub unsafe fn init(start: *mut u8, len: usize) {
    let mut pool = Pool::new();
    // Page-aligned, so that slabs (whole pages) can be dropped exactly.
    let large = (len - len / SMALL_SHARE)
        .next_multiple_of(ccvm_runtime::PAGE_SIZE)
        .min(len);
    let block = NonNull::new(std::ptr::slice_from_raw_parts_mut(start, large)).expect("the region is not null");
    // SAFETY: as the caller promises; the two parts do not overlap.
    let small = unsafe {
        pool.insert_free_block_ptr(block);
        SizeClasses::new(start.add(large), len - large)
    };
    *lock() = Some(Heap {
        pool,
        small,
        fresh: start as usize,
        in_use: 0,
        peak: 0,
        give_back_from: GIVE_BACK_MIN,
    });
    START.store(start as usize, Ordering::Release);
    END.store(start as usize + len, Ordering::Release);
}

thread_local! {
    /// Whether this thread holds the heap's lock: a signal handler that
    /// allocates while its thread is inside the heap (a program's crash
    /// handler, say) is served by the C library instead of deadlocking.
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The heap's lock, marked held by this thread while it lives.
pub struct Guard(MutexGuard<'static, Option<Heap>>);

impl std::ops::Deref for Guard {
    type Target = Option<Heap>;
    fn deref(&self) -> &Option<Heap> {
        &self.0
    }
}

impl std::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Option<Heap> {
        &mut self.0
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        HELD.set(false);
    }
}

/// The heap's lock (held across `fork`, see the crate docs).
pub fn lock() -> Guard {
    let guard = HEAP.lock().unwrap_or_else(|e| e.into_inner());
    HELD.set(true);
    Guard(guard)
}

/// The heap's lock, unless this thread holds it already (then `None`).
fn try_lock() -> Option<Guard> {
    (!HELD.get()).then(lock)
}

/// Whether `ptr` is in the heap (so was handed out by it).
pub fn contains(ptr: *const u8) -> bool {
    let p = ptr as usize;
    p >= START.load(Ordering::Acquire) && p < END.load(Ordering::Acquire)
}

/// Most bytes allocated at once.
pub fn peak() -> usize {
    try_lock().and_then(|g| g.as_ref().map(|h| h.peak)).unwrap_or(0)
}

impl Heap {
    /// A block of `size` bytes aligned to `align` (a power of two), zeroed
    /// if `zero`; `None` if the heap has no room.
    fn alloc(&mut self, size: usize, align: usize, zero: bool) -> Option<*mut u8> {
        if align <= HEADER {
            if let Some(user) = self.small.alloc(size) {
                if zero {
                    // SAFETY: the object is at least `size` bytes long.
                    unsafe { user.write_bytes(0, size) };
                }
                self.note_peak();
                return Some(user);
            }
        }
        let (user, dirty) = self.alloc_dirty(size, align, true)?;
        if zero && dirty > 0 {
            // SAFETY: inside the block.
            unsafe { user.write_bytes(0, dirty) };
        }
        Some(user)
    }

    /// A block of `size` bytes aligned to `align`, not zeroed, with how
    /// many of its first bytes may hold old data (the rest is untouched
    /// memory, still zero); counted in the heap's use if `counted`.
    fn alloc_dirty(&mut self, size: usize, align: usize, counted: bool) -> Option<(*mut u8, usize)> {
        let align = align.max(HEADER);
        let layout = Layout::from_size_align(size.checked_add(align)?, align).ok()?;
        let block = self.pool.allocate(layout)?.as_ptr();
        // SAFETY: the block has `align` bytes before the user's part, the
        // last 16 of them for the header.
        let user = unsafe { block.add(align) };
        let (counted_size, flag) = if counted { (size, 0) } else { (0, UNCOUNTED) };
        // SAFETY: the header's 16 bytes lie in the block, before `user`.
        unsafe {
            user.sub(HEADER).cast::<Header>().write(Header {
                size,
                align: align | flag,
            })
        };
        let end = user as usize + size;
        let dirty = end.min(self.fresh + FRESH_MARGIN).saturating_sub(user as usize);
        self.fresh = self.fresh.max(end);
        self.in_use += counted_size;
        self.note_peak();
        Some((user, dirty))
    }

    /// Notes the bytes in use, small objects included, if most so far.
    fn note_peak(&mut self) {
        self.peak = self.peak.max(self.in_use + self.small.in_use());
    }

    fn header(user: *mut u8) -> *mut Header {
        // SAFETY (for callers): a pointer this heap handed out has its
        // header right before it.
        user.wrapping_sub(HEADER).cast()
    }

    /// Frees a block this heap handed out; a large one gives its pages
    /// back if `give_back` (a mapping's caller drops them itself).
    ///
    /// # Safety
    ///
    /// `user` came from this heap and is not used again.
    unsafe fn free(&mut self, user: *mut u8, give_back: bool) {
        if self.small.contains(user) {
            // SAFETY: as the caller promises.
            match unsafe { self.small.free(user) } {
                None => invalid("free", user),
                // Freed memory is not kept, compressed or written out.
                Some(freed) => {
                    if let Some((start, len)) = freed.released {
                        crate::vm::drop_pages(start as usize, len);
                    }
                }
            }
            return;
        }
        // SAFETY: as the caller promises.
        let Header { size, align } = unsafe { Self::header(user).read() };
        if align & UNCOUNTED == 0 {
            self.in_use -= size;
        }
        let align = align & !UNCOUNTED;
        // SAFETY: the block TLSF gave, with the alignment it was given.
        unsafe { self.pool.deallocate(NonNull::new_unchecked(user.sub(align)), align) };
        if give_back && size > self.give_back_from {
            self.give_back(user as usize, size);
        }
    }

    /// Gives back the whole pages of a freed block of `size` bytes at
    /// `user`, and slides the threshold up to it, as the C library does.
    /// TLSF keeps its free block's header at the block's start, before
    /// `user` and in the first bytes after it, and the next block's past
    /// its end: the pages given back hold neither.
    fn give_back(&mut self, user: usize, size: usize) {
        self.drop_inside(user, size);
        if size <= GIVE_BACK_MAX {
            self.give_back_from = self.give_back_from.max(size);
        }
    }

    /// Drops the whole pages of the freed `size` bytes at `at`, past the
    /// free block's header TLSF writes at their start.
    fn drop_inside(&self, at: usize, size: usize) {
        let page = ccvm_runtime::PAGE_SIZE;
        let start = (at + FRESH_MARGIN).next_multiple_of(page);
        let end = (at + size) / page * page;
        if end > start {
            crate::vm::drop_pages(start, end - start);
        }
    }

    /// Resizes a block, moving it if it must.
    ///
    /// # Safety
    ///
    /// `user` came from this heap.
    unsafe fn realloc(&mut self, user: *mut u8, size: usize) -> Option<*mut u8> {
        if self.small.contains(user) {
            let Some(old) = self.small.usable_size(user) else {
                invalid("realloc", user)
            };
            if SizeClasses::object_size(size) == Some(old) {
                return Some(user);
            }
            // SAFETY: as the caller promises; `old` bytes long.
            return unsafe { self.move_block(user, old, size, HEADER) };
        }
        // SAFETY: as the caller promises.
        let Header { size: old, align } = unsafe { Self::header(user).read() };
        if align == HEADER {
            // (a block left uncounted has UNCOUNTED set, so is not here)
            let layout = Layout::from_size_align(size.checked_add(HEADER)?, HEADER).ok()?;
            // SAFETY: a block of this pool with this alignment.
            let block = unsafe { self.pool.reallocate(NonNull::new_unchecked(user.sub(HEADER)), layout)? };
            // SAFETY: the new block is at least `HEADER + size` long.
            let moved = unsafe { block.as_ptr().add(HEADER) };
            // SAFETY: the header lies in the block, before `moved`.
            unsafe { Self::header(moved).write(Header { size, align }) };
            self.in_use = self.in_use - old + size;
            self.note_peak();
            self.fresh = self.fresh.max(moved as usize + size);
            // TLSF copied and freed a block it could not grow in place, or
            // freed the tail of one it shrank: a large block's pages left
            // behind are given back as `free` gives them (left, they were
            // compressed and written out as live data). The sliding
            // threshold is not applied: it spares a loop of `free` and
            // `malloc` of one size its zero-fill faults, and a grown
            // block's old place is not taken back at its old size.
            if old > GIVE_BACK_MIN {
                if moved != user {
                    self.drop_inside(user as usize, old);
                } else if size < old {
                    self.drop_inside(user as usize + size, old - size);
                }
            }
            return Some(moved);
        }
        // SAFETY: as the caller promises; `old` bytes long.
        unsafe { self.move_block(user, old, size, align & !UNCOUNTED) }
    }

    /// Moves a block of `old` bytes to a new one of `size` bytes aligned
    /// to `align`, freeing it; `None` (the block unchanged) if there is no
    /// room.
    ///
    /// # Safety
    ///
    /// `user` came from this heap, is at least `old` bytes long, and is
    /// not used again once moved.
    unsafe fn move_block(&mut self, user: *mut u8, old: usize, size: usize, align: usize) -> Option<*mut u8> {
        let new = self.alloc(size, align, false)?;
        // SAFETY: two distinct blocks, each at least this long.
        unsafe { std::ptr::copy_nonoverlapping(user, new, old.min(size)) };
        // SAFETY: `user` came from this heap and is not used again.
        unsafe { self.free(user, true) };
        Some(new)
    }
}

/// Stops the process on a pointer the heap never handed out, as the C
/// library's allocator does: going on would hand memory out twice.
fn invalid(call: &str, ptr: *mut u8) -> ! {
    eprintln!("ccvm: {call}({ptr:p}): not a block the heap handed out (a double free or a stray pointer); stopping");
    // SAFETY: ends the process.
    unsafe { libc::abort() }
}

/// A block from the heap; `None` if there is no heap (not started, or
/// never to start in this process) or no room in it.
pub fn alloc(size: usize, align: usize, zero: bool) -> Option<*mut u8> {
    try_lock()?.as_mut()?.alloc(size, align, zero)
}

/// A page-aligned block of `size` bytes for a mapping whose old contents
/// the caller drops itself (without touching them): the block, and how
/// many of its first bytes may hold old data. Counted in the heap's use
/// if `counted`.
pub fn alloc_dirty(size: usize, counted: bool) -> Option<(*mut u8, usize)> {
    try_lock()?
        .as_mut()?
        .alloc_dirty(size, ccvm_runtime::PAGE_SIZE, counted)
}

/// Frees a block of the heap.
///
/// # Safety
///
/// `ptr` was handed out by [`alloc`] or [`realloc`] and is not used again.
pub unsafe fn free(ptr: *mut u8) {
    // SAFETY: as the caller promises.
    unsafe { free_block(ptr, true) }
}

/// Frees the block of a mapping whose pages the caller has dropped.
///
/// # Safety
///
/// As for [`free`].
pub unsafe fn free_mapping(ptr: *mut u8) {
    // SAFETY: as the caller promises.
    unsafe { free_block(ptr, false) }
}

/// # Safety
///
/// As for [`free`].
unsafe fn free_block(ptr: *mut u8, give_back: bool) {
    // Re-entered from a signal handler: the block is left allocated.
    let Some(mut guard) = try_lock() else { return };
    if let Some(heap) = guard.as_mut() {
        // SAFETY: as the caller promises.
        unsafe { heap.free(ptr, give_back) }
    }
}

/// Resizes a block of the heap; `None` (the block unchanged) if there is
/// no room.
///
/// # Safety
///
/// As for [`free`].
pub unsafe fn realloc(ptr: *mut u8, size: usize) -> Option<*mut u8> {
    // SAFETY: as the caller promises.
    try_lock()?.as_mut().and_then(|heap| unsafe { heap.realloc(ptr, size) })
}

/// The size asked for when `ptr` was allocated.
///
/// # Safety
///
/// As for [`free`], but the block stays in use.
pub unsafe fn usable_size(ptr: *mut u8) -> usize {
    let Some(guard) = try_lock() else { return 0 };
    match guard.as_ref() {
        Some(heap) if heap.small.contains(ptr) => heap.small.usable_size(ptr).unwrap_or(0),
        // SAFETY: as the caller promises.
        _ => unsafe { Heap::header(ptr).read().size },
    }
}

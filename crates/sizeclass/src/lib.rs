//! Small objects in size-class slabs over a range of address space, with
//! no header per object: the part of `ccvm exec`'s paged heap that serves
//! the many small `malloc`s of interpreters and other programs.
//!
//! The primary abstraction is [`SizeClasses`]. Its range is cut into
//! slabs of [`SLAB_BYTES`]; each slab in use holds objects of one size
//! class (a multiple of [`GRAIN`] up to [`MAX_SMALL`]). An object's class
//! is found from its address alone, so `free` needs no header, and a
//! slab's free objects are chained through their own first bytes.
//!
//! # Key decision: pages, not bytes, are what a paged heap spends
//!
//! Under paging, what a program costs is the number of pages its working
//! set touches. A general allocator with a header per block (the heap's
//! TLSF with its own 16-byte header, rounded to 32 bytes) turned a 24-byte
//! `malloc` into 64 bytes, and placed a record's small pieces wherever a
//! free block of the right size lay. Under a memory limit that doubled
//! the pages a perl lookup touched, and with them the faults, for the
//! kernel's swap as for ccvm's (`docs/kernel.md`, "The heap's allocator").
//! Size classes give each object its size rounded up to 16 bytes, no
//! more, and keep objects allocated one after another side by side in
//! their class's slab, as the C library's allocator does for a program
//! that builds its data in order.
//!
//! # Other choices
//!
//! * A slab with room is taken from its class's list, most recently
//!   listed first, so the pages just used are reused; a slab whose last
//!   object is freed goes back to a pool shared by all classes, so a
//!   program that changes what it allocates does not strand memory in
//!   the classes it stopped using.
//! * Past [`KEEP_EMPTY`] empty slabs, a slab that empties is *released*:
//!   [`SizeClasses::free`] hands its range back to the caller, whose pages
//!   should be dropped (the paged heap forgets them, so that freed memory
//!   is neither kept nor compressed nor written out), and the slab is
//!   reused after the kept ones. A few are kept so that a class whose
//!   last object comes and goes does not drop and fault in a slab each
//!   time.
//! * A fresh slab is carved from its start as objects are asked for, so
//!   its pages are touched one by one, not all at once.
//! * Metadata (24 bytes a slab) lives outside the range, in the caller's
//!   allocator: the range is paged memory, and the allocator must be able
//!   to tell a free object from a used one without faulting its page in.
//!
//! ```
//! use ccvm_sizeclass::{SizeClasses, SLAB_BYTES};
//! let mut area = vec![0u128; 2 * SLAB_BYTES / 16];
//! // SAFETY: the vector outlives the allocator and is used by nothing else.
//! let mut small = unsafe { SizeClasses::new(area.as_mut_ptr().cast(), 2 * SLAB_BYTES) };
//! let a = small.alloc(24).unwrap();
//! let b = small.alloc(24).unwrap();
//! assert_eq!(b as usize - a as usize, 32); // side by side, no header
//! assert_eq!(small.usable_size(a), Some(32));
//! // SAFETY: `a` came from `small` and is not used again.
//! assert_eq!(unsafe { small.free(a) }.map(|f| f.object), Some(32));
//! assert_eq!(small.in_use(), 32);
//! ```

#![deny(missing_docs)]

/// Object sizes are multiples of this, which is also their alignment.
pub const GRAIN: usize = 16;
/// The largest object served; larger ones belong to a general allocator.
pub const MAX_SMALL: usize = 512;
/// Bytes of one slab.
pub const SLAB_BYTES: usize = 64 << 10;
/// Empty slabs kept as they are; past these, a slab that empties is
/// released (see [`Freed::released`]).
pub const KEEP_EMPTY: usize = 16;
const CLASSES: usize = MAX_SMALL / GRAIN;
const NONE: u32 = u32::MAX;

/// One slab's state, kept outside the paged range.
#[derive(Clone, Copy)]
struct Slab {
    /// Object size of the slab, in bytes.
    object: u32,
    /// Live objects.
    live: u32,
    /// Bytes from the slab's start handed out at least once.
    carved: u32,
    /// Offset of the first free object, chained through the objects.
    free: u32,
    /// Neighbours in the class's list of slabs with room.
    prev: u32,
    next: u32,
    /// Whether the slab is in its class's list.
    listed: bool,
}

/// What a [`SizeClasses::free`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freed {
    /// The object's size, bytes.
    pub object: usize,
    /// A slab emptied and released: its range (start, bytes), which the
    /// caller may drop (make read back as zeros). No live object lies in
    /// it until the allocator hands one out from it again.
    pub released: Option<(*mut u8, usize)>,
}

/// Small objects in slabs of one size class each, over a range of
/// memory the allocator owns.
///
/// Invariants: every object handed out lies in the range, is aligned to
/// [`GRAIN`], is at least as long as asked and overlaps no other live
/// object; a slab is in its class's list exactly when it is in use and
/// has room.
pub struct SizeClasses {
    base: usize,
    /// Slabs the range holds.
    capacity: usize,
    slabs: Vec<Slab>,
    /// Slabs with no live object, for any class: kept as they are (at
    /// most [`KEEP_EMPTY`]), and released.
    empty: Vec<u32>,
    released: Vec<u32>,
    /// Head of each class's list of slabs with room.
    partial: [u32; CLASSES],
    in_use: usize,
}

impl SizeClasses {
    /// An allocator over the `len` bytes at `base`, rounded in to whole
    /// slabs aligned to [`GRAIN`] (a range shorter than one slab serves
    /// nothing).
    ///
    /// # Safety
    ///
    /// The range is mapped, readable and writable, and used by nothing
    /// but this allocator (and the holders of the objects it hands out)
    /// for as long as the allocator lives.
    pub unsafe fn new(base: *mut u8, len: usize) -> SizeClasses {
        let start = (base as usize).next_multiple_of(GRAIN);
        let len = len.saturating_sub(start - base as usize);
        SizeClasses {
            base: start,
            capacity: (len / SLAB_BYTES).min(NONE as usize),
            slabs: Vec::new(),
            empty: Vec::new(),
            released: Vec::new(),
            partial: [NONE; CLASSES],
            in_use: 0,
        }
    }

    /// The object size serving `size` bytes, if it is small.
    pub fn object_size(size: usize) -> Option<usize> {
        (size <= MAX_SMALL).then(|| size.max(1).next_multiple_of(GRAIN))
    }

    /// Whether `ptr` lies in the slabs' range.
    pub fn contains(&self, ptr: *const u8) -> bool {
        let p = ptr as usize;
        p >= self.base && p < self.base + self.capacity * SLAB_BYTES
    }

    /// Bytes of the live objects (each counted at its object size).
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Bytes of the slabs ever carved: the memory the objects have
    /// touched at most.
    pub fn carved_bytes(&self) -> usize {
        self.slabs.len() * SLAB_BYTES
    }

    /// An object of at least `size` bytes, aligned to [`GRAIN`]; `None` if
    /// `size` is over [`MAX_SMALL`] or every slab is taken.
    pub fn alloc(&mut self, size: usize) -> Option<*mut u8> {
        let object = Self::object_size(size)?;
        let class = object / GRAIN - 1;
        if self.partial[class] == NONE {
            let s = self.take_slab(object)?;
            self.link(class, s);
        }
        let s = self.partial[class];
        let base = self.slab_start(s);
        let slab = &mut self.slabs[s as usize];
        let offset = if slab.free != NONE {
            let offset = slab.free;
            // SAFETY: a free object of this slab, in the range we own,
            // whose first four bytes hold the next free offset.
            slab.free = unsafe { ((base + offset as usize) as *const u32).read() };
            offset
        } else {
            let offset = slab.carved;
            slab.carved += slab.object;
            offset
        };
        slab.live += 1;
        let full = slab.free == NONE && slab.carved as usize + slab.object as usize > SLAB_BYTES;
        if full {
            self.unlink(class, s);
        }
        self.in_use += object;
        Some((base + offset as usize) as *mut u8)
    }

    /// Frees an object: its object size, and the range of its slab if the
    /// slab emptied and was released; `None` (nothing changed) if `ptr` is
    /// not the start of an object handed out.
    ///
    /// # Safety
    ///
    /// `ptr` is not an object freed since it was last handed out (a
    /// second `free` of it would hand it out twice), and is not used
    /// after this.
    pub unsafe fn free(&mut self, ptr: *mut u8) -> Option<Freed> {
        let (s, offset) = self.locate(ptr)?;
        let slab_start = self.slab_start(s);
        let slab = &mut self.slabs[s as usize];
        // SAFETY: an object of this slab, in the range we own, no longer
        // used by the program (as the caller promises).
        unsafe { (ptr as *mut u32).write(slab.free) };
        slab.free = offset;
        slab.live -= 1;
        let object = slab.object as usize;
        let class = object / GRAIN - 1;
        self.in_use -= object;
        let (live, listed) = (slab.live, slab.listed);
        let mut released = None;
        if live == 0 {
            if listed {
                self.unlink(class, s);
            }
            if self.empty.len() < KEEP_EMPTY {
                self.empty.push(s);
            } else {
                self.released.push(s);
                released = Some((slab_start as *mut u8, SLAB_BYTES));
            }
        } else if !listed {
            self.link(class, s);
        }
        debug_assert_eq!(slab_start + offset as usize, ptr as usize);
        Some(Freed { object, released })
    }

    /// The object size of the object at `ptr`, or `None` if `ptr` is not
    /// the start of an object carved from a slab in use.
    pub fn usable_size(&self, ptr: *const u8) -> Option<usize> {
        self.locate(ptr).map(|(s, _)| self.slabs[s as usize].object as usize)
    }

    /// The slab and offset of an object's start.
    fn locate(&self, ptr: *const u8) -> Option<(u32, u32)> {
        if !self.contains(ptr) {
            return None;
        }
        let at = ptr as usize - self.base;
        let s = at / SLAB_BYTES;
        let offset = (at % SLAB_BYTES) as u32;
        let slab = self.slabs.get(s)?;
        let whole = slab.live > 0 && offset < slab.carved && offset.is_multiple_of(slab.object);
        whole.then_some((s as u32, offset))
    }

    fn slab_start(&self, s: u32) -> usize {
        self.base + s as usize * SLAB_BYTES
    }

    /// An empty slab made over for objects of `object` bytes.
    fn take_slab(&mut self, object: usize) -> Option<u32> {
        let fresh = Slab {
            object: object as u32,
            live: 0,
            carved: 0,
            free: NONE,
            prev: NONE,
            next: NONE,
            listed: false,
        };
        match self.empty.pop().or_else(|| self.released.pop()) {
            Some(s) => {
                self.slabs[s as usize] = fresh;
                Some(s)
            }
            None if self.slabs.len() < self.capacity => {
                self.slabs.push(fresh);
                Some((self.slabs.len() - 1) as u32)
            }
            None => None,
        }
    }

    /// Puts slab `s` at the head of its class's list.
    fn link(&mut self, class: usize, s: u32) {
        let head = self.partial[class];
        if head != NONE {
            self.slabs[head as usize].prev = s;
        }
        self.set_links(s, head, true);
        self.partial[class] = s;
    }

    /// Takes slab `s` out of its class's list.
    fn unlink(&mut self, class: usize, s: u32) {
        let Slab { prev, next, .. } = self.slabs[s as usize];
        if prev == NONE {
            self.partial[class] = next;
        } else {
            self.slabs[prev as usize].next = next;
        }
        if next != NONE {
            self.slabs[next as usize].prev = prev;
        }
        self.set_links(s, NONE, false);
    }

    /// Slab `s` is first in its list (before `next`), or in none.
    fn set_links(&mut self, s: u32, next: u32, listed: bool) {
        let slab = &mut self.slabs[s as usize];
        slab.prev = NONE;
        slab.next = next;
        slab.listed = listed;
    }
}

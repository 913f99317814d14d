//! Slot allocators: placing compressed pages of many sizes in fixed-size
//! chunks of memory, the kernel-memory-allocation problem that paper 003
//! §3.3.2.3 studies for CRAMES.
//!
//! The primary abstraction is [`SlotAllocator`]. The store gives an
//! allocator chunks as it grows ([`SlotAllocator::add_chunk`]), asks it for
//! slots, frees them, and takes back chunks that have become empty
//! ([`SlotAllocator::pop_empty_chunk`]) to return their memory (§3.4.2).
//! Allocators are found by name through [`by_name`].
//!
//! The allocators are the five that paper 003 §3.3.2.3 compares: the
//! [resource map](ResourceMap) (first fit over free extents, merging
//! neighbours on free: CRAMES's default; ccvm's default is the same map
//! placing by best fit, `rm-best`, which churn does not fragment), the
//! simple power-of-two free lists and the McKusick–Karels allocator ([`Segregated`]), the
//! [buddy system](Buddy) and the [lazy buddy system](LazyBuddy); and a
//! size-class allocator in the manner of Linux's zsmalloc ([`SizeClasses`]).

mod buddy;
mod resource_map;
mod segregated;
mod size_class;

pub use buddy::{Buddy, LazyBuddy};
pub use resource_map::ResourceMap;
pub use segregated::Segregated;
pub use size_class::SizeClasses;

/// Where a compressed page lives: a byte range of one chunk.
///
/// Invariant: `offset + len <= chunk size`, and the range lies inside the
/// slot's footprint (see [`SlotAllocator::footprint`]), which no other live
/// slot overlaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    /// Chunk number, as given to [`SlotAllocator::add_chunk`].
    pub chunk: u32,
    /// Byte offset in the chunk.
    pub offset: u32,
    /// Bytes requested.
    pub len: u32,
}

/// Places variable-sized slots in chunks of one size.
///
/// Allocators manage offsets only; the caller owns the chunks' memory.
pub trait SlotAllocator: Send + Sync {
    /// The name [`by_name`] accepts.
    fn name(&self) -> &'static str;

    /// Size of every chunk, in bytes.
    fn chunk_size(&self) -> usize;

    /// Places `len` bytes (1 to [`chunk_size`](Self::chunk_size)) in the
    /// chunks held, or returns `None` when no free space fits (the caller
    /// may add a chunk and retry, or refuse the page).
    fn alloc(&mut self, len: usize) -> Option<Slot>;

    /// Frees a slot that [`alloc`](Self::alloc) returned and that has not
    /// been freed since.
    ///
    /// # Panics
    ///
    /// May panic if `slot` is not such a slot (a caller bug).
    fn free(&mut self, slot: Slot);

    /// Hands the allocator a new, empty chunk numbered `chunk` (a number
    /// not currently held).
    fn add_chunk(&mut self, chunk: u32);

    /// Removes a chunk in which no slot is in use and returns its number,
    /// so its memory can be given back; `None` if every chunk has slots.
    fn pop_empty_chunk(&mut self) -> Option<u32>;

    /// Bytes that a slot of `len` bytes occupies (its length rounded up to
    /// the allocator's granularity or size class).
    fn footprint(&self, len: usize) -> usize;

    /// Bytes of bookkeeping the allocator keeps, an estimate for the store's
    /// memory accounting.
    fn metadata_bytes(&self) -> usize;

    /// The most that one [`free`](Self::free) adds to
    /// [`metadata_bytes`](Self::metadata_bytes): the store reserves it for
    /// every slot, so that removing a page never takes it past its limit.
    fn books_per_free(&self) -> usize {
        16
    }
}

/// An allocator's name, what it is, and how to make one for a chunk size.
pub struct AllocatorInfo {
    /// The name [`by_name`] accepts.
    pub name: &'static str,
    /// One line about it.
    pub about: &'static str,
    /// Makes one for chunks of the given size.
    pub make: fn(usize) -> Box<dyn SlotAllocator>,
}

/// Every allocator, CRAMES's default first.
pub const ALLOCATORS: &[AllocatorInfo] = &[
    AllocatorInfo {
        name: "rm",
        about: "resource map: first fit over free extents, neighbours merged on free (CRAMES's default)",
        make: |chunk| Box::new(ResourceMap::new(chunk)),
    },
    AllocatorInfo {
        name: "rm-best",
        about: "resource map placing by best fit over all chunks (ccvm's default: it keeps churn from fragmenting the store)",
        make: |chunk| Box::new(ResourceMap::best_fit(chunk)),
    },
    AllocatorInfo {
        name: "p2fl",
        about: "simple power-of-two free lists, each chunk carved for one size",
        make: |chunk| Box::new(Segregated::power_of_two(chunk)),
    },
    AllocatorInfo {
        name: "mck2",
        about: "McKusick-Karels: power-of-two sizes, each 4 KiB page carved for one size",
        make: |chunk| Box::new(Segregated::mckusick_karels(chunk)),
    },
    AllocatorInfo {
        name: "buddy",
        about: "buddy system: power-of-two blocks split on demand, buddies merged on free",
        make: |chunk| Box::new(Buddy::new(chunk)),
    },
    AllocatorInfo {
        name: "lzbud",
        about: "lazy buddy system: freed blocks coalesced only as their size's slack runs out",
        make: |chunk| Box::new(LazyBuddy::new(chunk)),
    },
    AllocatorInfo {
        name: "zs",
        about: "size classes every 16 bytes in spans of 1-4 pages, as Linux's zsmalloc",
        make: |chunk| Box::new(SizeClasses::new(chunk)),
    },
];

/// Makes an allocator by name for chunks of `chunk_size` bytes.
///
/// # Errors
///
/// A one-line message listing the known names when `name` is not one.
///
/// # Panics
///
/// If the allocator cannot use that chunk size (see each allocator).
///
/// ```
/// let mut a = ccvm_store::alloc::by_name("rm", 65536).unwrap();
/// a.add_chunk(0);
/// let s = a.alloc(1000).unwrap();
/// assert_eq!((s.chunk, s.offset), (0, 0));
/// a.free(s);
/// assert_eq!(a.pop_empty_chunk(), Some(0));
/// ```
pub fn by_name(name: &str, chunk_size: usize) -> Result<Box<dyn SlotAllocator>, String> {
    ALLOCATORS
        .iter()
        .find(|a| a.name == name)
        .map(|a| (a.make)(chunk_size))
        .ok_or_else(|| {
            let names: Vec<_> = ALLOCATORS.iter().map(|a| a.name).collect();
            format!("unknown allocator '{name}': choose one of {}", names.join(", "))
        })
}

/// Smallest slot granularity: every footprint is a multiple of 8 bytes, so
/// slots start 8-byte aligned and copies into them are word copies.
pub(crate) const ALIGN: usize = 8;

#[inline]
pub(crate) fn round_up(len: usize) -> usize {
    len.div_ceil(ALIGN) * ALIGN
}

#[cfg(test)]
mod model_tests;

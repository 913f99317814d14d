//! The memory: working area, page table, compressed region, arrays.

use std::marker::PhantomData;
use std::ops::Range;

use ccvm_codec::Codec;

use crate::region::FreeList;
use crate::{Element, MemmuError, Pinned};

/// Bytes of RAM one page-table entry is charged: a 16-bit offset and a
/// 16-bit length suffice on the paper's 10 KiB node.
pub const TABLE_ENTRY_BYTES: usize = 4;

/// How a [`Memmu`] divides its RAM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemmuConfig {
    /// RAM in all: working area, page table and compressed region.
    pub ram: usize,
    /// Page size in bytes: a power of two from 16 to 65536.
    pub page: usize,
    /// Uncompressed page slots (the working area).
    pub working_pages: usize,
    /// Memory offered to arrays, in bytes (rounded down to pages); more
    /// than `ram` is the point.
    pub virtual_bytes: usize,
    /// Codec of compressed pages.
    pub codec: ccvm_codec::CodecId,
}

/// Where a virtual page's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    /// All zeros; nothing stored.
    Empty,
    /// In this working slot.
    Resident(usize),
    /// In the compressed region at `at`, `len` bytes (`len` equal to the
    /// page size: stored raw).
    Stored { at: usize, len: usize },
}

/// A typed array in a [`Memmu`]: its number and generation.
///
/// A handle is a plain value; it stays valid until its array is freed,
/// after which every use is [`MemmuError::UseAfterFree`].
pub struct Handle<T> {
    id: u32,
    generation: u32,
    _element: PhantomData<fn() -> T>,
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handle({}#{})", self.id, self.generation)
    }
}

#[derive(Debug, Clone)]
struct Array {
    generation: u32,
    live: bool,
    first: usize,
    pages: usize,
    len: usize,
}

/// What the memory has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemmuStats {
    /// Checked accesses ([`Memmu::get`], [`Memmu::set`]).
    pub checked: u64,
    /// Pins.
    pub pins: u64,
    /// Pages brought in from the compressed region.
    pub decompressions: u64,
    /// Pages compressed out of the working area.
    pub compressions: u64,
    /// Pages stored raw because they did not compress.
    pub raw: u64,
    /// Coalescings of the compressed region.
    pub coalesces: u64,
}

/// Compressed memory reached through handles. See the crate docs.
///
/// Invariants: a virtual page is resident in at most one slot, and a slot
/// holds at most one page; a stored page's bytes are exactly its block of
/// the region, which no other page's block overlaps.
pub struct Memmu {
    page: usize,
    /// log2 of `page`: translations shift instead of dividing.
    page_shift: u32,
    work: Vec<u8>,
    owner: Vec<Option<usize>>,
    /// Slots holding no page.
    free_slots: Vec<usize>,
    last_use: Vec<u64>,
    pub(crate) pinned: Vec<bool>,
    clock: u64,
    table: Vec<Page>,
    used: Vec<bool>,
    region: Vec<u8>,
    free: FreeList,
    arrays: Vec<Array>,
    spare_ids: Vec<u32>,
    codec: Box<dyn Codec>,
    scratch: Vec<u8>,
    stats: MemmuStats,
}

impl Memmu {
    /// A memory with nothing allocated.
    ///
    /// # Errors
    ///
    /// [`MemmuError::Config`] for a page size that is not a power of two
    /// from 16 to 65536, no working slots, no virtual page, RAM too small
    /// for the working area and page table.
    pub fn new(c: MemmuConfig) -> Result<Memmu, MemmuError> {
        let bad = |s: String| Err(MemmuError::Config(s));
        if !c.page.is_power_of_two() || !(16..=65536).contains(&c.page) {
            return bad(format!("page size {} is not a power of two from 16 to 65536", c.page));
        }
        if c.working_pages == 0 {
            return bad("the working area needs at least one page slot".into());
        }
        let pages = c.virtual_bytes / c.page;
        if pages == 0 {
            return bad(format!("virtual_bytes {} is less than a page", c.virtual_bytes));
        }
        let fixed = c.working_pages * c.page + pages * TABLE_ENTRY_BYTES;
        if c.ram <= fixed {
            return bad(format!(
                "{} bytes of RAM leave nothing for the compressed region after the working area and page table ({fixed} bytes)",
                c.ram
            ));
        }
        let codec = c.codec.make();
        let region = c.ram - fixed;
        Ok(Memmu {
            page: c.page,
            page_shift: c.page.trailing_zeros(),
            free_slots: (0..c.working_pages).rev().collect(),
            work: vec![0; c.working_pages * c.page],
            owner: vec![None; c.working_pages],
            last_use: vec![0; c.working_pages],
            pinned: vec![false; c.working_pages],
            clock: 0,
            table: vec![Page::Empty; pages],
            used: vec![false; pages],
            region: vec![0; region],
            free: FreeList::new(region),
            arrays: Vec::new(),
            spare_ids: Vec::new(),
            codec,
            scratch: vec![0; c.page],
            stats: MemmuStats::default(),
        })
    }

    /// The page size.
    pub fn page_size(&self) -> usize {
        self.page
    }

    /// Bytes of the compressed region.
    pub fn region_bytes(&self) -> usize {
        self.region.len()
    }

    /// Bytes of the compressed region in use.
    pub fn stored_bytes(&self) -> usize {
        self.region.len() - self.free.free()
    }

    /// What the memory has done so far.
    pub fn stats(&self) -> MemmuStats {
        self.stats
    }

    /// Allocates an array of `len` zeroed elements.
    ///
    /// # Errors
    ///
    /// [`MemmuError::NoVirtualSpace`] when no run of free virtual pages is
    /// long enough.
    pub fn alloc<T: Element>(&mut self, len: usize) -> Result<Handle<T>, MemmuError> {
        let pages = (len * T::SIZE).div_ceil(self.page);
        let first = self.find_pages(pages).ok_or(MemmuError::NoVirtualSpace {
            pages,
            free: self.used.iter().filter(|&&u| !u).count(),
        })?;
        self.used[first..first + pages].fill(true);
        let array = |generation| Array {
            generation,
            live: true,
            first,
            pages,
            len,
        };
        let (id, generation) = match self.spare_ids.pop() {
            Some(id) => {
                let generation = self.arrays[id as usize].generation;
                self.arrays[id as usize] = array(generation);
                (id, generation)
            }
            None => {
                self.arrays.push(array(0));
                (self.arrays.len() as u32 - 1, 0)
            }
        };
        Ok(Handle {
            id,
            generation,
            _element: PhantomData,
        })
    }

    fn find_pages(&self, n: usize) -> Option<usize> {
        if n == 0 {
            return Some(0);
        }
        let mut run = 0;
        for (p, &u) in self.used.iter().enumerate() {
            run = if u { 0 } else { run + 1 };
            if run == n {
                return Some(p + 1 - n);
            }
        }
        None
    }

    /// Frees the array: its pages' slots and blocks are given back, and
    /// its handle is no longer valid.
    ///
    /// # Errors
    ///
    /// [`MemmuError::UseAfterFree`] if it was freed already.
    pub fn free<T: Element>(&mut self, h: Handle<T>) -> Result<(), MemmuError> {
        let a = self.array(h)?.clone();
        for p in a.first..a.first + a.pages {
            match self.table[p] {
                Page::Resident(slot) => {
                    self.owner[slot] = None;
                    self.free_slots.push(slot);
                }
                Page::Stored { at, len } => self.free.release(at, len),
                Page::Empty => {}
            }
            self.table[p] = Page::Empty;
        }
        if a.pages > 0 {
            self.used[a.first..a.first + a.pages].fill(false);
        }
        let slot = &mut self.arrays[h.id as usize];
        slot.live = false;
        slot.generation = slot.generation.wrapping_add(1);
        self.spare_ids.push(h.id);
        Ok(())
    }

    /// The length of the handle's array.
    ///
    /// # Errors
    ///
    /// [`MemmuError::UseAfterFree`] if the array was freed.
    pub fn len<T: Element>(&self, h: Handle<T>) -> Result<usize, MemmuError> {
        Ok(self.array(h)?.len)
    }

    fn array<T>(&self, h: Handle<T>) -> Result<&Array, MemmuError> {
        self.arrays
            .get(h.id as usize)
            .filter(|a| a.live && a.generation == h.generation)
            .ok_or(MemmuError::UseAfterFree { id: h.id })
    }

    /// Element `index` of the array: the unoptimised access (handle check,
    /// translation, page brought in, LRU update).
    ///
    /// # Errors
    ///
    /// [`MemmuError::UseAfterFree`], [`MemmuError::OutOfBounds`], or
    /// [`MemmuError::OutOfMemory`] when making room for the page fails.
    pub fn get<T: Element>(&mut self, h: Handle<T>, index: usize) -> Result<T, MemmuError> {
        let at = self.locate(h, index)?;
        Ok(T::read(&self.work[at..at + T::SIZE]))
    }

    /// Sets element `index` of the array; as [`Memmu::get`].
    ///
    /// # Errors
    ///
    /// As [`Memmu::get`].
    pub fn set<T: Element>(&mut self, h: Handle<T>, index: usize, value: T) -> Result<(), MemmuError> {
        let at = self.locate(h, index)?;
        value.write(&mut self.work[at..at + T::SIZE]);
        Ok(())
    }

    /// The working-area byte offset of element `index`, its page resident.
    fn locate<T: Element>(&mut self, h: Handle<T>, index: usize) -> Result<usize, MemmuError> {
        self.stats.checked += 1;
        let a = self.array(h)?;
        if index >= a.len {
            return Err(MemmuError::OutOfBounds { index, len: a.len });
        }
        let byte = index * T::SIZE;
        let page = a.first + (byte >> self.page_shift);
        let slot = self.resident(page)?;
        self.clock += 1;
        self.last_use[slot] = self.clock;
        Ok((slot << self.page_shift) + (byte & (self.page - 1)))
    }

    /// Pins elements `range` of the array: their pages are brought in and
    /// stay resident while the returned view lives.
    ///
    /// # Errors
    ///
    /// [`MemmuError::UseAfterFree`], [`MemmuError::OutOfBounds`] for a
    /// range past the end, [`MemmuError::PinTooLarge`] for more pages than
    /// slots, [`MemmuError::OutOfMemory`] when making room fails (then
    /// nothing stays pinned).
    pub fn pin<T: Element>(&mut self, h: Handle<T>, range: Range<usize>) -> Result<Pinned<'_, T>, MemmuError> {
        self.pin_many(&[(h, range)])
    }

    /// Pins several ranges at once (of one array or several), for a loop
    /// that reads one array and writes another: view `k` of the result is
    /// `ranges[k]`. Pages shared by two ranges are pinned once.
    ///
    /// # Errors
    ///
    /// As [`Memmu::pin`], for all the ranges' pages together.
    pub fn pin_many<T: Element>(&mut self, ranges: &[(Handle<T>, Range<usize>)]) -> Result<Pinned<'_, T>, MemmuError> {
        self.stats.pins += 1;
        let per_page = self.page / T::SIZE;
        let mut wanted = Vec::new();
        let mut views = Vec::with_capacity(ranges.len());
        for (h, range) in ranges {
            let a = self.array(*h)?;
            if range.start > range.end || range.end > a.len {
                return Err(MemmuError::OutOfBounds {
                    index: range.end.max(range.start),
                    len: a.len,
                });
            }
            let pages = if range.is_empty() {
                0..0
            } else {
                range.start / per_page..(range.end - 1) / per_page + 1
            };
            views.push((wanted.len(), range.clone(), pages.start * per_page));
            wanted.extend(pages.map(|p| a.first + p));
        }
        let mut distinct = wanted.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() > self.owner.len() {
            return Err(MemmuError::PinTooLarge {
                pages: distinct.len(),
                slots: self.owner.len(),
            });
        }
        let mut pinned = Vec::with_capacity(distinct.len());
        for &p in &distinct {
            match self.resident(p) {
                Ok(slot) => {
                    self.pinned[slot] = true;
                    pinned.push(slot);
                }
                Err(e) => {
                    self.unpin(&pinned);
                    return Err(e);
                }
            }
        }
        self.clock += 1;
        for &s in &pinned {
            self.last_use[s] = self.clock;
        }
        let slots = wanted
            .iter()
            .map(|p| match self.table[*p] {
                Page::Resident(slot) => slot,
                _ => unreachable!("pinned pages are resident"),
            })
            .collect();
        Ok(Pinned::new(self, slots, pinned, views))
    }

    /// Unpins `slots` (a [`Pinned`] view ends).
    pub(crate) fn unpin(&mut self, slots: &[usize]) {
        for &s in slots {
            self.pinned[s] = false;
        }
    }

    /// The working area's bytes of slot `slot`.
    pub(crate) fn slot_bytes(&mut self, slot: usize) -> &mut [u8] {
        &mut self.work[slot * self.page..(slot + 1) * self.page]
    }

    /// The slot holding virtual page `page`, bringing it in if need be.
    fn resident(&mut self, page: usize) -> Result<usize, MemmuError> {
        if let Page::Resident(slot) = self.table[page] {
            return Ok(slot);
        }
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                let victim = (0..self.owner.len())
                    .filter(|&s| !self.pinned[s])
                    .min_by_key(|&s| self.last_use[s])
                    .ok_or(MemmuError::PinTooLarge {
                        pages: self.owner.len() + 1,
                        slots: self.owner.len(),
                    })?;
                self.evict(victim)?;
                victim
            }
        };
        let bytes = &mut self.work[slot * self.page..(slot + 1) * self.page];
        match self.table[page] {
            Page::Empty => bytes.fill(0),
            Page::Stored { at, len } => {
                let block = &self.region[at..at + len];
                if len == self.page {
                    bytes.copy_from_slice(block);
                } else {
                    self.stats.decompressions += 1;
                    self.codec
                        .decompress(block, bytes)
                        .unwrap_or_else(|e| unreachable!("MEMMU's own compressed page at {at} does not decode: {e}"));
                }
                self.free.release(at, len);
            }
            Page::Resident(_) => unreachable!("checked above"),
        }
        self.owner[slot] = Some(page);
        self.table[page] = Page::Resident(slot);
        Ok(slot)
    }

    /// Compresses slot `slot`'s page into the region, freeing the slot; on
    /// error nothing changes.
    fn evict(&mut self, slot: usize) -> Result<(), MemmuError> {
        let page = self.owner[slot].expect("an occupied slot");
        let bytes = &self.work[slot * self.page..(slot + 1) * self.page];
        if bytes.iter().all(|&b| b == 0) {
            self.table[page] = Page::Empty;
            self.owner[slot] = None;
            return Ok(());
        }
        let limit = self.page - 1;
        let len = match self.codec.compress(bytes, &mut self.scratch[..limit]) {
            Ok(n) => n,
            Err(_) => self.page,
        };
        let at = match self.free.alloc(len) {
            Some(at) => at,
            None => {
                self.coalesce();
                self.free.alloc(len).ok_or(MemmuError::OutOfMemory {
                    needed: len,
                    free: self.free.free(),
                })?
            }
        };
        if len == self.page {
            self.stats.raw += 1;
            self.region[at..at + len].copy_from_slice(&self.work[slot * self.page..(slot + 1) * self.page]);
        } else {
            self.region[at..at + len].copy_from_slice(&self.scratch[..len]);
        }
        self.stats.compressions += 1;
        self.table[page] = Page::Stored { at, len };
        self.owner[slot] = None;
        Ok(())
    }

    /// Moves every stored page down in address order, leaving one free
    /// block at the top of the region.
    fn coalesce(&mut self) {
        self.stats.coalesces += 1;
        let mut stored: Vec<(usize, usize)> = self
            .table
            .iter()
            .enumerate()
            .filter_map(|(p, e)| {
                matches!(e, Page::Stored { .. }).then_some((
                    match e {
                        Page::Stored { at, .. } => *at,
                        _ => 0,
                    },
                    p,
                ))
            })
            .collect();
        stored.sort_unstable();
        let mut cursor = 0;
        for (at, p) in stored {
            let Page::Stored { len, .. } = self.table[p] else {
                continue;
            };
            if at != cursor {
                self.region.copy_within(at..at + len, cursor);
            }
            self.table[p] = Page::Stored { at: cursor, len };
            cursor += len;
        }
        self.free.reset_from(cursor, self.region.len());
    }
}

//! Size classes in the manner of Linux's zsmalloc, the allocator behind
//! zram: classes every 16 bytes from 32 to 4096, each class packing its
//! objects end to end in *spans* of one to four 4 KiB pages, the span
//! length chosen per class to waste the least at the end of the span.
//!
//! A slot then wastes at most 15 bytes to rounding, and a class wastes at
//! most one partly used span, which is what lets zram keep memory within a
//! few per cent of the compressed bytes.
//!
//! Choices: a span is a run of contiguous pages of one chunk (zsmalloc
//! links separate pages and lets an object straddle two; contiguity gives
//! the same packing and keeps a slot one byte range); a span whose objects
//! are all free goes back to the chunk's free pages; slots larger than a
//! page (possible only with chunks above 4 KiB) take whole pages.

use std::collections::{BTreeMap, BTreeSet};

use super::{Slot, SlotAllocator};

const PAGE: usize = ccvm_codec::PAGE_SIZE;
const MIN_SIZE: usize = 32;
const STEP: usize = 16;
const MAX_SPAN_PAGES: usize = 4;

struct Class {
    size: usize,
    span_pages: usize,
    /// Free objects, as (chunk, offset).
    free: BTreeSet<(u32, u32)>,
}

/// Size-class allocator. See the [module docs](self).
pub struct SizeClasses {
    chunk_size: usize,
    classes: Vec<Class>,
    /// Pages not in any span, as (chunk, page).
    free_pages: BTreeSet<(u32, u32)>,
    /// Spans in use: (chunk, first page) → (class or usize::MAX for a large
    /// slot, pages, objects in use).
    spans: BTreeMap<(u32, u32), (usize, u32, u32)>,
    /// Pages in use per chunk held.
    chunks: BTreeMap<u32, u32>,
}

impl SizeClasses {
    /// A size-class allocator over chunks of `chunk_size` bytes.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is not a positive multiple of 4096 below 4 GiB.
    pub fn new(chunk_size: usize) -> Self {
        assert!(
            chunk_size >= PAGE && chunk_size.is_multiple_of(PAGE) && chunk_size < u32::MAX as usize,
            "bad chunk size {chunk_size}"
        );
        let max_pages = MAX_SPAN_PAGES.min(chunk_size / PAGE);
        let classes = (MIN_SIZE..=PAGE)
            .step_by(STEP)
            .map(|size| {
                // Fewest wasted bytes per span byte; ties to the shorter span.
                let span_pages = (1..=max_pages)
                    .min_by(|&a, &b| ((a * PAGE) % size * b).cmp(&((b * PAGE) % size * a)).then(a.cmp(&b)))
                    .unwrap_or(1);
                Class {
                    size,
                    span_pages,
                    free: BTreeSet::new(),
                }
            })
            .collect();
        SizeClasses {
            chunk_size,
            classes,
            free_pages: BTreeSet::new(),
            spans: BTreeMap::new(),
            chunks: BTreeMap::new(),
        }
    }

    fn class_of(len: usize) -> usize {
        (len.max(MIN_SIZE) - MIN_SIZE).div_ceil(STEP)
    }

    /// Takes `n` contiguous free pages of one chunk.
    fn take_pages(&mut self, n: u32) -> Option<(u32, u32)> {
        let start = self
            .free_pages
            .iter()
            .find(|&&(c, p)| (p..p + n).all(|q| self.free_pages.contains(&(c, q))))
            .copied()?;
        for q in start.1..start.1 + n {
            self.free_pages.remove(&(start.0, q));
        }
        *self.chunks.get_mut(&start.0).expect("page of a held chunk") += n;
        Some(start)
    }

    fn give_pages(&mut self, chunk: u32, first: u32, n: u32) {
        for q in first..first + n {
            self.free_pages.insert((chunk, q));
        }
        *self.chunks.get_mut(&chunk).expect("page of a held chunk") -= n;
    }

    /// The span holding byte `offset` of `chunk`.
    fn span_of(&self, chunk: u32, offset: u32) -> (u32, u32) {
        let page = offset / PAGE as u32;
        let (&key, _) = self.spans.range(..=(chunk, page)).next_back().expect("slot in a span");
        debug_assert_eq!(key.0, chunk);
        key
    }
}

impl SlotAllocator for SizeClasses {
    fn name(&self) -> &'static str {
        "zs"
    }

    fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    fn alloc(&mut self, len: usize) -> Option<Slot> {
        if len == 0 || len > self.chunk_size {
            return None;
        }
        if len > PAGE {
            let n = len.div_ceil(PAGE) as u32;
            let (chunk, first) = self.take_pages(n)?;
            self.spans.insert((chunk, first), (usize::MAX, n, 1));
            return Some(Slot {
                chunk,
                offset: first * PAGE as u32,
                len: len as u32,
            });
        }
        let c = Self::class_of(len);
        if self.classes[c].free.is_empty() {
            let (size, pages) = (self.classes[c].size, self.classes[c].span_pages);
            let (chunk, first) = self.take_pages(pages as u32)?;
            self.spans.insert((chunk, first), (c, pages as u32, 0));
            let base = first * PAGE as u32;
            for k in 0..(pages * PAGE / size) as u32 {
                self.classes[c].free.insert((chunk, base + k * size as u32));
            }
        }
        let (chunk, offset) = self.classes[c].free.pop_first()?;
        let span = self.span_of(chunk, offset);
        self.spans.get_mut(&span).expect("span").2 += 1;
        Some(Slot {
            chunk,
            offset,
            len: len as u32,
        })
    }

    fn free(&mut self, slot: Slot) {
        let span = self.span_of(slot.chunk, slot.offset);
        let (class, pages, used) = *self.spans.get(&span).expect("span");
        if class == usize::MAX || used == 1 {
            if class != usize::MAX {
                // The span is empty: take its objects off the free list.
                let (lo, hi) = (span.1 * PAGE as u32, (span.1 + pages) * PAGE as u32);
                let free = &mut self.classes[class].free;
                let inside: Vec<_> = free.range((span.0, lo)..(span.0, hi)).copied().collect();
                for o in inside {
                    free.remove(&o);
                }
            }
            self.spans.remove(&span);
            self.give_pages(span.0, span.1, pages);
            return;
        }
        self.classes[class].free.insert((slot.chunk, slot.offset));
        self.spans.get_mut(&span).expect("span").2 -= 1;
    }

    fn add_chunk(&mut self, chunk: u32) {
        assert!(self.chunks.insert(chunk, 0).is_none(), "chunk {chunk} is already held");
        for p in 0..(self.chunk_size / PAGE) as u32 {
            self.free_pages.insert((chunk, p));
        }
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        let (&chunk, _) = self.chunks.iter().rev().find(|(_, &n)| n == 0)?;
        self.chunks.remove(&chunk);
        for p in 0..(self.chunk_size / PAGE) as u32 {
            self.free_pages.remove(&(chunk, p));
        }
        Some(chunk)
    }

    fn footprint(&self, len: usize) -> usize {
        if len > PAGE {
            len.div_ceil(PAGE) * PAGE
        } else {
            self.classes[Self::class_of(len)].size
        }
    }

    fn metadata_bytes(&self) -> usize {
        (self.free_pages.len() + self.classes.iter().map(|c| c.free.len()).sum::<usize>()) * 16 + self.spans.len() * 32
    }
}

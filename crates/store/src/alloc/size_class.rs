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
//!
//! Every operation is a few array steps: each chunk maps its pages to the
//! spans on them, each span keeps a bitmap of its free objects, and each
//! class an ordered set of its spans with a free object. Objects are taken
//! from the lowest such span, at its lowest free object, and spans from
//! the lowest chunk with room, so that the store's compaction (free, then
//! allocate again, in address order) moves objects towards the front.

use std::collections::BTreeSet;

use super::{Slot, SlotAllocator};

const PAGE: usize = ccvm_codec::PAGE_SIZE;
const MIN_SIZE: usize = 32;
const STEP: usize = 16;
const MAX_SPAN_PAGES: usize = 4;
/// Objects a span can hold at most: four pages of the smallest class.
const MAX_OBJECTS: usize = MAX_SPAN_PAGES * PAGE / MIN_SIZE;
const WORDS: usize = MAX_OBJECTS / 64;
/// No span on a page.
const NONE: u32 = u32::MAX;
/// The class of a span holding one slot larger than a page.
const LARGE: u32 = u32::MAX;

/// Bookkeeping bytes counted per span, per class-set or open-chunk record,
/// and per chunk page (see [`SlotAllocator::metadata_bytes`]).
const SPAN_BYTES: usize = std::mem::size_of::<Span>();
const RECORD_BYTES: usize = 16;
const PAGE_BYTES: usize = 4;

struct Class {
    size: u32,
    span_pages: u32,
    objects: u32,
    /// Spans with a free object, as (chunk, first page, span).
    partial: BTreeSet<(u32, u32, u32)>,
}

struct Span {
    chunk: u32,
    first: u32,
    pages: u32,
    class: u32,
    used: u32,
    /// Bit k set: object k is free.
    free: [u64; WORDS],
}

struct Chunk {
    /// The span on each page, or [`NONE`].
    page_span: Vec<u32>,
    used_pages: u32,
    /// Whether it is in the allocator's `empties` list.
    listed: bool,
}

/// Size-class allocator. See the module docs.
pub struct SizeClasses {
    chunk_size: usize,
    classes: Vec<Class>,
    /// Spans by number; numbers in `spare_spans` are unused.
    spans: Vec<Span>,
    spare_spans: Vec<u32>,
    chunks: Vec<Option<Chunk>>,
    /// Held chunks with a free page.
    open: BTreeSet<u32>,
    /// Chunks that became empty (checked again when popped).
    empties: Vec<u32>,
    held: usize,
    live_spans: usize,
    partial_records: usize,
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
                    size: size as u32,
                    span_pages: span_pages as u32,
                    objects: (span_pages * PAGE / size) as u32,
                    partial: BTreeSet::new(),
                }
            })
            .collect();
        SizeClasses {
            chunk_size,
            classes,
            spans: Vec::new(),
            spare_spans: Vec::new(),
            chunks: Vec::new(),
            open: BTreeSet::new(),
            empties: Vec::new(),
            held: 0,
            live_spans: 0,
            partial_records: 0,
        }
    }

    fn class_of(len: usize) -> usize {
        (len.max(MIN_SIZE) - MIN_SIZE).div_ceil(STEP)
    }

    fn chunk(&mut self, c: u32) -> &mut Chunk {
        self.chunks[c as usize].as_mut().expect("a held chunk")
    }

    /// Takes `n` contiguous free pages of the lowest chunk that has them
    /// for a new span of `class`; returns the span's number.
    fn new_span(&mut self, n: u32, class: u32, objects: u32) -> Option<u32> {
        let (c, first) = self.open.iter().find_map(|&c| {
            let pages = &self.chunks[c as usize]
                .as_ref()
                .expect("an open chunk is held")
                .page_span;
            let mut run = 0;
            for (p, &s) in pages.iter().enumerate() {
                run = if s == NONE { run + 1 } else { 0 };
                if run == n {
                    return Some((c, p as u32 + 1 - n));
                }
            }
            None
        })?;
        let mut free = [0u64; WORDS];
        for k in 0..objects as usize {
            free[k / 64] |= 1 << (k % 64);
        }
        let span = Span {
            chunk: c,
            first,
            pages: n,
            class,
            used: 0,
            free,
        };
        let id = match self.spare_spans.pop() {
            Some(id) => {
                self.spans[id as usize] = span;
                id
            }
            None => {
                self.spans.push(span);
                (self.spans.len() - 1) as u32
            }
        };
        let pages_per_chunk = (self.chunk_size / PAGE) as u32;
        let chunk = self.chunk(c);
        chunk.page_span[first as usize..(first + n) as usize].fill(id);
        chunk.used_pages += n;
        if chunk.used_pages == pages_per_chunk {
            self.open.remove(&c);
        }
        self.live_spans += 1;
        Some(id)
    }

    /// Gives an empty span's pages back to its chunk.
    fn drop_span(&mut self, id: u32) {
        let (c, first, n) = {
            let s = &self.spans[id as usize];
            (s.chunk, s.first, s.pages)
        };
        let chunk = self.chunk(c);
        chunk.page_span[first as usize..(first + n) as usize].fill(NONE);
        chunk.used_pages -= n;
        let list = chunk.used_pages == 0 && !chunk.listed;
        chunk.listed |= list;
        self.open.insert(c);
        if list {
            self.empties.push(c);
        }
        self.spare_spans.push(id);
        self.live_spans -= 1;
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
            let id = self.new_span(n, LARGE, 1)?;
            let s = &mut self.spans[id as usize];
            s.used = 1;
            s.free = [0; WORDS];
            return Some(Slot {
                chunk: s.chunk,
                offset: s.first * PAGE as u32,
                len: len as u32,
            });
        }
        let c = Self::class_of(len);
        let id = match self.classes[c].partial.first() {
            Some(&(_, _, id)) => id,
            None => {
                let (pages, objects) = (self.classes[c].span_pages, self.classes[c].objects);
                let id = self.new_span(pages, c as u32, objects)?;
                let s = &self.spans[id as usize];
                self.classes[c].partial.insert((s.chunk, s.first, id));
                self.partial_records += 1;
                id
            }
        };
        let size = self.classes[c].size;
        let s = &mut self.spans[id as usize];
        let w = s
            .free
            .iter()
            .position(|&w| w != 0)
            .expect("a partial span has a free object");
        let k = w * 64 + s.free[w].trailing_zeros() as usize;
        s.free[w] &= s.free[w] - 1;
        s.used += 1;
        let slot = Slot {
            chunk: s.chunk,
            offset: s.first * PAGE as u32 + k as u32 * size,
            len: len as u32,
        };
        if s.used == self.classes[c].objects {
            let key = (s.chunk, s.first, id);
            self.classes[c].partial.remove(&key);
            self.partial_records -= 1;
        }
        Some(slot)
    }

    fn free(&mut self, slot: Slot) {
        let page = slot.offset as usize / PAGE;
        let id = self.chunks[slot.chunk as usize]
            .as_ref()
            .map(|c| c.page_span[page])
            .filter(|&id| id != NONE)
            .expect("a slot lies in a span");
        let s = &mut self.spans[id as usize];
        s.used -= 1;
        if s.class == LARGE {
            self.drop_span(id);
            return;
        }
        let class = &mut self.classes[s.class as usize];
        let k = (slot.offset - s.first * PAGE as u32) / class.size;
        debug_assert_eq!(s.free[k as usize / 64] >> (k % 64) & 1, 0, "freeing a free object");
        s.free[k as usize / 64] |= 1 << (k % 64);
        let key = (s.chunk, s.first, id);
        if s.used + 1 == class.objects {
            class.partial.insert(key);
            self.partial_records += 1;
        }
        if s.used == 0 {
            class.partial.remove(&key);
            self.partial_records -= 1;
            self.drop_span(id);
        }
    }

    fn add_chunk(&mut self, chunk: u32) {
        let c = chunk as usize;
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || None);
        }
        assert!(self.chunks[c].is_none(), "chunk {chunk} is already held");
        self.chunks[c] = Some(Chunk {
            page_span: vec![NONE; self.chunk_size / PAGE],
            used_pages: 0,
            listed: true,
        });
        self.open.insert(chunk);
        self.empties.push(chunk);
        self.held += 1;
    }

    fn pop_empty_chunk(&mut self) -> Option<u32> {
        while let Some(c) = self.empties.pop() {
            let Some(books) = self.chunks[c as usize].as_mut() else {
                continue;
            };
            books.listed = false;
            if books.used_pages == 0 {
                self.chunks[c as usize] = None;
                self.open.remove(&c);
                self.held -= 1;
                return Some(c);
            }
        }
        None
    }

    fn footprint(&self, len: usize) -> usize {
        if len > PAGE {
            len.div_ceil(PAGE) * PAGE
        } else {
            self.classes[Self::class_of(len)].size as usize
        }
    }

    fn metadata_bytes(&self) -> usize {
        // A free adds at most one record to a class's set (16 bytes) and
        // frees a span (more than that) when it empties it.
        self.live_spans * SPAN_BYTES
            + (self.partial_records + self.open.len()) * RECORD_BYTES
            + self.held * (self.chunk_size / PAGE * PAGE_BYTES + 32)
    }
}

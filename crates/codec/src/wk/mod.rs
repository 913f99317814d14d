//! The WK codecs of Wilson, Kaplan and Smaragdakis (paper 000, §2.3):
//! [`WkDm`] (direct-mapped dictionary) and [`Wk4x4`] (4 sets × 4 ways, LRU
//! within each set), and ccvm's [`WkDm256`], WKdm with a dictionary of 256
//! words.
//!
//! They model a block as 32-bit words against a dictionary of recently
//! seen words (16 in the paper's two) and give each word a 2-bit tag: zero
//! word, exact match (a dictionary index follows), partial match of the
//! upper 22 bits (the index and the 10 low bits follow) or miss (the whole
//! word follows). As in the paper, each kind of information goes to its
//! own segment and the segments are packed by a separate fast pass; the
//! codecs share that segment format and differ in how the dictionary is
//! searched and updated, and in how wide an index is.
//!
//! # Format
//!
//! ```text
//! byte 0      0 = segments follow, 1 = same-filled block (a 4-byte word follows)
//! tags        ceil(words/4) bytes, four 2-bit tags a byte, first tag in the low bits
//! indices     16-word dictionaries: ceil(matches/2) bytes, two 4-bit indices a
//!             byte, first in the low nibble; WkDm256: one byte per match
//! low bits    ceil(partials/3) little-endian u32s, three 10-bit fields each
//! full words  one little-endian u32 per miss
//! ```
//!
//! # Why a dictionary of 256 words
//!
//! The paper's 16 words fit a 4-bit index. Pages of today's heaps point
//! into more regions than that at once, and a word whose region has been
//! pushed out costs a whole 34-bit miss instead of a 16-bit partial match.
//! A size model over `corpus/large` (`--example wordlz_model`, its "no LZ"
//! rows) gives 1.962 with 16 words, 2.198 with 64, 2.193 with 256 and 2.084
//! with 1,024, as the index grows by two bits each step. 256 words with
//! byte-wide indices costs nothing in packing (no nibbles), keeps the
//! dictionary in 1 KiB of the first-level cache, and runs the same passes;
//! measured, it compresses `corpus/large` 2.181 against WKdm's 1.958.
//!
//! Choices the paper leaves open, and why:
//! * Segment lengths are not stored: they follow from the tag counts, which
//!   the decoder computes with popcounts over the packed tags. That saves a
//!   header and makes an inconsistent header impossible; the total length
//!   must then match exactly, which catches most corruption.
//! * The dictionary starts all zero, so small integers (upper 22 bits zero)
//!   match partially from the first word on.
//! * Padding bits and fields must be zero, so every block has one encoding.

mod avx2;
mod dm;
mod x4;

pub use dm::{WkDm, WkDm256, WkDmN};
pub use x4::Wk4x4;

use crate::{CompressError, DecodeError, MAX_BLOCK};

pub(crate) const ZERO: u32 = 0;
pub(crate) const MISS: u32 = 1;
pub(crate) const PARTIAL: u32 = 2;
pub(crate) const EXACT: u32 = 3;
pub(crate) const LOW_MASK: u32 = 0x3FF;

/// WKdm's dictionary slot, with `2^bits` slots, for zero words (and, when
/// decoding, exact matches): written, never read. Shared by the scalar and
/// AVX2 paths.
#[inline(always)]
pub(crate) const fn sink(bits: u32) -> u32 {
    1 << bits
}

/// WKdm's slot, with `2^bits` slots, that decoding misses and zero words
/// load from: never written, always 0.
#[inline(always)]
pub(crate) const fn zero_slot(bits: u32) -> u32 {
    (1 << bits) + 1
}

const FORMAT_SEGMENTS: u8 = 0;
const FORMAT_SAME: u8 = 1;
const MAX_WORDS: usize = MAX_BLOCK / 4;
/// Scratch entries beyond the largest count, so that vector passes may load
/// and store eight entries at any count without a bounds check.
const SLACK: usize = 8;

/// Multiplicative hash of a word's upper 22 bits: words that can match
/// partially always land in the same dictionary set.
#[inline(always)]
pub(crate) fn hash_upper(w: u32) -> u32 {
    (w >> 10).wrapping_mul(0x9E37_79B1)
}

/// The per-codec working memory: segment arrays sized once for the largest
/// block, so no call allocates.
pub(crate) struct Segments {
    /// Packed tags (encoder writes them here as it goes).
    pub(crate) tags: Box<[u8]>,
    /// One dictionary index per byte.
    pub(crate) idx: Box<[u8]>,
    /// Whether indices are packed a byte each (else two to a byte).
    byte_idx: bool,
    /// One 10-bit low field per entry.
    pub(crate) low: Box<[u32]>,
    /// One missed word per entry.
    pub(crate) full: Box<[u32]>,
    pub(crate) n_idx: usize,
    pub(crate) n_low: usize,
    pub(crate) n_full: usize,
}

impl Segments {
    /// Working memory for a format whose indices are packed a byte each
    /// (`byte_idx`) or two to a byte.
    pub(crate) fn new(byte_idx: bool) -> Self {
        Segments {
            tags: vec![0; MAX_WORDS / 4 + SLACK].into_boxed_slice(),
            idx: vec![0; MAX_WORDS + SLACK].into_boxed_slice(),
            byte_idx,
            low: vec![0; MAX_WORDS + SLACK].into_boxed_slice(),
            full: vec![0; MAX_WORDS + SLACK].into_boxed_slice(),
            n_idx: 0,
            n_low: 0,
            n_full: 0,
        }
    }

    /// Smallest possible output once `done` of `words` words are modelled:
    /// used for the early exit on blocks that will not compress.
    #[inline(always)]
    pub(crate) fn lower_bound(&self, words: usize, n_idx: usize, n_low: usize, n_full: usize) -> usize {
        let idx = if self.byte_idx { n_idx } else { n_idx / 2 };
        1 + words.div_ceil(4) + idx + n_low * 4 / 3 + n_full * 4
    }

    /// Bytes of `n_idx` packed indices.
    #[inline(always)]
    fn idx_bytes(&self, n_idx: usize) -> usize {
        if self.byte_idx {
            n_idx
        } else {
            n_idx.div_ceil(2)
        }
    }

    /// Packs the segments of a `words`-word block into `out`.
    pub(crate) fn pack(&mut self, words: usize, out: &mut [u8]) -> Result<usize, CompressError> {
        let tag_bytes = words.div_ceil(4);
        let idx_bytes = self.idx_bytes(self.n_idx);
        let low_words = self.n_low.div_ceil(3);
        let total = 1 + tag_bytes + idx_bytes + 4 * low_words + 4 * self.n_full;
        if total > out.len() {
            return Err(CompressError::DoesNotFit { budget: out.len() });
        }
        out[0] = FORMAT_SEGMENTS;
        let (tags_out, rest) = out[1..total].split_at_mut(tag_bytes);
        tags_out.copy_from_slice(&self.tags[..tag_bytes]);
        let (idx_out, rest) = rest.split_at_mut(idx_bytes);
        self.idx[self.n_idx] = 0;
        if self.byte_idx {
            idx_out.copy_from_slice(&self.idx[..idx_bytes]);
        } else {
            let done = if avx2::available() {
                // SAFETY: AVX2 is present; idx holds 2 * idx_bytes entries.
                unsafe { avx2::pack_nibbles(&self.idx, idx_out) }
            } else {
                0
            };
            for (o, pair) in idx_out[done..].iter_mut().zip(self.idx[2 * done..].chunks_exact(2)) {
                *o = pair[0] | pair[1] << 4;
            }
        }
        let (low_out, full_out) = rest.split_at_mut(4 * low_words);
        self.low[self.n_low] = 0;
        self.low[self.n_low + 1] = 0;
        for (o, t) in low_out.chunks_exact_mut(4).zip(self.low.chunks_exact(3)) {
            let v = t[0] | t[1] << 10 | t[2] << 20;
            o.copy_from_slice(&v.to_le_bytes());
        }
        for (o, w) in full_out.chunks_exact_mut(4).zip(self.full.iter()) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        Ok(total)
    }

    /// Validates `input` as the segments of a `words`-word block, unpacks
    /// indices, low bits and full words into scratch (with zeroed slack),
    /// and returns the packed tags.
    pub(crate) fn unpack<'a>(&mut self, input: &'a [u8], words: usize) -> Result<&'a [u8], DecodeError> {
        let tag_bytes = words.div_ceil(4);
        let tags = input.get(1..1 + tag_bytes).ok_or(DecodeError::Truncated)?;
        if !words.is_multiple_of(4) && tags[tag_bytes - 1] >> (2 * (words % 4)) != 0 {
            return Err(DecodeError::Corrupt("tag padding is not zero"));
        }
        let [n_exact, n_partial, n_miss] = if avx2::available() {
            // SAFETY: AVX2 and POPCNT are present.
            unsafe { avx2::count_tags(tags) }
        } else {
            count_tags(tags)
        };
        self.n_idx = (n_exact + n_partial) as usize;
        self.n_low = n_partial as usize;
        self.n_full = n_miss as usize;
        let idx_bytes = self.idx_bytes(self.n_idx);
        let low_words = self.n_low.div_ceil(3);
        let total = 1 + tag_bytes + idx_bytes + 4 * low_words + 4 * self.n_full;
        if input.len() < total {
            return Err(DecodeError::Truncated);
        }
        if input.len() > total {
            return Err(DecodeError::TrailingBytes(input.len() - total));
        }
        let rest = &input[1 + tag_bytes..];
        let (idx_in, rest) = rest.split_at(idx_bytes);
        if self.byte_idx {
            self.idx[..idx_bytes].copy_from_slice(idx_in);
        } else {
            let done = if avx2::available() {
                // SAFETY: AVX2 is present; idx has room for 2 * idx_bytes entries.
                unsafe { avx2::unpack_nibbles(idx_in, &mut self.idx) }
            } else {
                0
            };
            for (pair, &b) in self.idx[2 * done..].chunks_exact_mut(2).zip(&idx_in[done..]) {
                pair[0] = b & 15;
                pair[1] = b >> 4;
            }
            if self.n_idx % 2 == 1 && self.idx[self.n_idx] != 0 {
                return Err(DecodeError::Corrupt("index padding is not zero"));
            }
        }
        self.idx[self.n_idx] = 0;
        let (low_in, full_in) = rest.split_at(4 * low_words);
        for (t, b) in self.low.chunks_exact_mut(3).zip(low_in.chunks_exact(4)) {
            let v = u32::from_le_bytes(b.try_into().unwrap());
            if v >> 30 != 0 {
                return Err(DecodeError::Corrupt("low-bits word has its top bits set"));
            }
            t[0] = v & LOW_MASK;
            t[1] = v >> 10 & LOW_MASK;
            t[2] = v >> 20 & LOW_MASK;
        }
        if self.low[self.n_low..low_words * 3].iter().any(|&l| l != 0) {
            return Err(DecodeError::Corrupt("low-bits padding is not zero"));
        }
        self.low[self.n_low] = 0;
        for (w, b) in self.full.iter_mut().zip(full_in.chunks_exact(4)) {
            *w = u32::from_le_bytes(b.try_into().unwrap());
        }
        self.full[self.n_full] = 0;
        Ok(tags)
    }
}

/// Counts the exact (3), partial (2) and miss (1) tags of packed tags.
#[inline(always)]
pub(crate) fn count_tags(tags: &[u8]) -> [u32; 3] {
    let (mut n_exact, mut n_partial, mut n_miss) = (0u32, 0u32, 0u32);
    let mut count = |x: u64| {
        let lo = x & 0x5555_5555_5555_5555;
        let hi = (x >> 1) & 0x5555_5555_5555_5555;
        let exact = (lo & hi).count_ones();
        n_exact += exact;
        n_partial += hi.count_ones() - exact;
        n_miss += lo.count_ones() - exact;
    };
    let mut chunks = tags.chunks_exact(8);
    for c in &mut chunks {
        count(u64::from_le_bytes(c.try_into().unwrap()));
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    count(u64::from_le_bytes(last));
    [n_exact, n_partial, n_miss]
}

/// Start of every WK compression: checks the block length, and writes the
/// same-filled form if `block` is one word repeated. `Ok(None)` means the
/// block is to be modelled.
#[inline]
pub(crate) fn start_compress(block: &[u8], out: &mut [u8]) -> Result<Option<usize>, CompressError> {
    if !crate::valid_block_len(block.len()) {
        return Err(CompressError::BlockSize(block.len()));
    }
    let Some(w) = crate::same_filled_u32(block) else {
        return Ok(None);
    };
    if out.len() < 5 {
        return Err(CompressError::DoesNotFit { budget: out.len() });
    }
    out[0] = FORMAT_SAME;
    out[1..5].copy_from_slice(&w.to_le_bytes());
    Ok(Some(5))
}

/// Checks the header byte; fills a same-filled block and returns `true`, or
/// returns `false` when segments follow.
#[inline]
pub(crate) fn decompress_same(input: &[u8], block: &mut [u8]) -> Result<bool, DecodeError> {
    if !crate::valid_block_len(block.len()) {
        return Err(DecodeError::BlockSize(block.len()));
    }
    match input.first() {
        None => Err(DecodeError::Truncated),
        Some(&FORMAT_SEGMENTS) => Ok(false),
        Some(&FORMAT_SAME) => {
            let w = input.get(1..5).ok_or(DecodeError::Truncated)?;
            if input.len() > 5 {
                return Err(DecodeError::TrailingBytes(input.len() - 5));
            }
            for c in block.chunks_exact_mut(4) {
                c.copy_from_slice(w);
            }
            Ok(true)
        }
        Some(_) => Err(DecodeError::Corrupt("unknown WK block format")),
    }
}

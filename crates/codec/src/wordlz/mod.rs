//! WordLZ: ccvm's own codec for memory pages. An LZ77 coder whose
//! literals are 32-bit words coded against a WK-style dictionary, and
//! whose match finder looks only where the word model has failed.
//!
//! # Why this design
//!
//! Memory is written in aligned words, and two codec families each see
//! half of it. Word-dictionary codecs (WKdm) code pointers and small
//! integers that share their upper bits with a recent word in a few bits,
//! but miss records repeated many words apart and every string. LZ codecs
//! (LZ4, LZO) find those, but hash every byte position to do it and code
//! each unmatched byte as itself, so a pointer that differs from a recent
//! one in its low bits costs all its bytes. WordLZ keeps both: a block is a
//! sequence of *word tokens*, each coding the four bytes at the current
//! position against a 16-entry dictionary as WKdm does, interleaved with
//! LZ *matches*, copies of earlier bytes at any byte offset.
//!
//! What the corpus shows (`cargo run --release -p ccvm-codec --example
//! page_features`, one line per page; the means per file are in the
//! README's corpus section):
//! * Repeats are most of a heap page. Repeats of 8 bytes or more of an
//!   earlier word-aligned position, found at word-aligned positions, cover
//!   56% (JVM) to 77% (gcc) of the words of the heap files; found at any
//!   byte position (6 bytes or more), 70% to 91%.
//! * Strings and byte-packed records repeat at every alignment: on the
//!   sqlite page cache, aligned repeats cover 58% of the words and repeats
//!   at any position 76%; on CPython's heap 64% and 87%. So the finder
//!   looks up the current position always, and the three following byte
//!   positions when the word there is a dictionary miss, where only a
//!   byte-level match can pay. Positions are entered into the table once
//!   per token, and once per four bytes inside a match, not once per byte.
//! * Non-zero words that a 16-entry dictionary matches in their upper 20
//!   bits but not exactly are 36% of the float64 words and 31% of the
//!   JVM's, against 21% and 26% in their upper 22 bits (WKdm's choice). A
//!   4-bit index and 12 low bits also fill a 16-bit field exactly.
//!
//! # Format
//!
//! ```text
//! header   4 little-endian u16: lengths in bytes of seq, tags, idx, part
//! seq      sequences: a byte (w << 4 | l); if w = 15, bytes added to w
//!          until one is below 255; then, unless the w word tokens end the
//!          block, a little-endian u16 offset field, then (blocks up to
//!          16 KiB) its top 2 bits' count of literal bytes, and, if l = 15,
//!          bytes added to l the same way; the match is l + 6 bytes, from
//!          the offset (the field's low 14 bits in blocks up to 16 KiB, all
//!          16 above) back
//! tags     2-bit tags, four a byte, first in the low bits:
//!          0 zero word, 1 exact match, 2 partial match, 3 miss
//! idx      4-bit dictionary indices of exact matches, two a byte, first low
//! part     little-endian u16 per partial match: index | low 12 bits << 4
//! lit      the rest: a little-endian u32 per miss
//! ```
//!
//! A sequence is `w` word tokens, each four bytes at the current position
//! (which need not be aligned: a match may end anywhere), followed by up
//! to three literal bytes and one match. The block ends after the word tokens of a sequence or after a
//! match, exactly at its length; every stream must then be consumed
//! exactly. The dictionary starts all zero; a partial match or miss
//! replaces its slot, chosen by a multiplicative hash of the word's upper
//! 20 bits (the decoder computes it from the decoded word); zero words and
//! exact matches leave it as it was.
//!
//! Choices, and why:
//! * Streams apart (as WKdm's segments), so that each decodes with plain
//!   aligned loads, and a page of words without matches (floats) costs a
//!   sequence byte per 255 words.
//! * Minimum match of 6 bytes: a match costs at least 3 bytes of `seq`;
//!   over the corpus 5 and 7 gave ratios 2.203 and 2.212 against 6's 2.217
//!   (before literal bytes), 8 gave 2.191.
//! * Literal bytes: a match found at one of the three positions after a
//!   miss is preceded by the bytes before it, not by the miss word: three
//!   bytes at most instead of a tag and four. That took the sqlite pages
//!   from a ratio of 2.04 to 2.27. Offsets of blocks up to 16 KiB fit 14
//!   bits, so the count takes the field's top 2; larger blocks code the
//!   word instead.
//! * A match may end 1 to 3 bytes before the block's end; the last word
//!   token then codes the block's last four bytes, repeating the first of
//!   them (which must agree).
//! * The dictionary is WKdm's size: 16 entries, so the exact-match index is
//!   a nibble and the partial-match field 16 bits.
//! * The output is checked against the budget every 1 KiB of input, so a
//!   page that will not fit is abandoned early.
//! * One candidate per table entry. Keeping the entry's previous position
//!   too and taking the longer match raised the ratio on `corpus/large`
//!   from 2.292 to 2.316, but cost a third of the compression speed, the
//!   axis furthest from its target.
//! * The match table holds 4096 positions, hashed from the four bytes at
//!   each; a candidate is verified before use, so a collision costs a
//!   compare, never a wrong match.

mod decode;
mod encode;
#[cfg(test)]
mod tests;

use crate::{valid_block_len, Codec, CompressError, DecodeError, MAX_BLOCK};

/// Most word tokens a block can have (one per four bytes, and a last one
/// overlapping the end).
pub(crate) const MAX_TOKENS: usize = MAX_BLOCK / 4 + 1;
/// Shortest match, bytes.
pub(crate) const MIN_MATCH: usize = 6;
/// Blocks up to this long have literal bytes before matches: offsets then
/// take 14 bits and the literal count the top 2.
pub(crate) const LIT_BLOCK: usize = 16384;
/// Where the literal count sits in a match's 16-bit offset field.
pub(crate) const LIT_SHIFT: u32 = 14;
/// Bytes of the stream-length header.
pub(crate) const HEADER: usize = 8;
/// Low bits a partial match carries.
pub(crate) const LOW_BITS: u32 = 12;

/// The dictionary entry that zero words and exact matches store to:
/// written, never read.
pub(crate) const SINK: usize = 16;
/// The decoder's entry that zero words and misses load from: never
/// written, always 0.
pub(crate) const ZERO_SLOT: usize = 17;

/// The dictionary slot of non-zero word `w`: a multiplicative hash of its
/// upper 20 bits, so that words differing only in their low bits meet.
#[inline(always)]
pub(crate) fn slot(w: u32) -> usize {
    ((w >> LOW_BITS).wrapping_mul(0x9E37_79B1) >> 28) as usize
}

/// The little-endian word at byte `i` of `b` (any alignment).
#[inline(always)]
pub(crate) fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

/// WordLZ codec. See the [module docs](self) for the design and format.
///
/// ```
/// use ccvm_codec::{wordlz::WordLz, Codec};
/// let page: Vec<u8> = (0..1024u32).flat_map(|i| (0x5555_0000 + 8 * (i % 50)).to_le_bytes()).collect();
/// let mut codec = WordLz::new();
/// let mut packed = [0u8; 4096];
/// let n = codec.compress(&page, &mut packed).unwrap();
/// assert!(n < 400);
/// let mut back = [0u8; 4096];
/// codec.decompress(&packed[..n], &mut back).unwrap();
/// assert_eq!(&back[..], &page[..]);
/// ```
pub struct WordLz {
    enc: encode::Encoder,
    dec: decode::Scratch,
}

impl Default for WordLz {
    fn default() -> Self {
        Self::new()
    }
}

impl WordLz {
    /// A codec with working memory for the largest block.
    pub fn new() -> Self {
        WordLz {
            enc: encode::Encoder::new(),
            dec: decode::Scratch::new(),
        }
    }
}

impl Codec for WordLz {
    fn name(&self) -> &'static str {
        "wordlz"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        self.enc.compress(block, out)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        decode::decompress(input, block, &mut self.dec)
    }
}

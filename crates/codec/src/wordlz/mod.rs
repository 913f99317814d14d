//! WordLZ: ccvm's own codec for memory pages. An LZ77 coder over 32-bit
//! words, with a repeat offset, whose unmatched words are coded by WK with
//! a dictionary of 256 words ([`crate::wk::WkDm256`]).
//!
//! # Why this design
//!
//! Memory is written in aligned words, and two codec families each see
//! half of it. Word-dictionary codecs (WKdm) code pointers and small
//! integers that share their upper bits with a recent word in a few bits,
//! but miss records repeated many words apart. LZ codecs (LZ4, LZO) find
//! those, but hash every byte position to do it and code each unmatched
//! byte as itself, so a pointer that differs from a recent one in its low
//! bits costs all its bytes. WordLZ keeps both, each where it is cheap: a
//! greedy LZ parse over whole words finds the repeats, and the words it
//! leaves (the *word tokens*) are gathered and coded as one WK block, by
//! WKdm's vectorised coder with a 256-word dictionary ([`crate::wk::WkDm256`]).
//!
//! The choices below were made with a size model of the format
//! (`cargo run --release -p ccvm-codec --example wordlz_model`, ratios over
//! `corpus/large`, 54,000 pages of nine programs), then measured with the
//! codec itself (`ccvm bench codecs --corpus corpus/large`):
//! * **Words, not bytes.** Matches start, end and are measured in words,
//!   so the parse looks at a quarter of LZ4's positions, offsets and
//!   lengths count words, and every copy moves whole words. Strings at odd
//!   alignments are the loss: the sqlite page cache compresses to 1.93
//!   against LZ4's 2.43; the heaps gain more than that loses. Matches in
//!   8-byte units at 8-byte alignment would halve the positions, but the
//!   model gives 2.582; looking for matches at even words only, a match
//!   taking back one word token before it, 2.693 (measured: 4–5% faster
//!   round trips, a ratio of 2.547 with the 16-word dictionary of then).
//! * **A repeat offset.** A match may reuse the previous match's offset for
//!   one bit of its token instead of a 16-bit field; arrays of records
//!   repeat at their stride. The model: 2.749 with it, 2.485 without.
//! * **WK for the word tokens.** 2.749, against 2.149 with the words
//!   stored as they are: most unmatched words are pointers and small
//!   integers. Coding them as one block lets WKdm's AVX2 passes run over
//!   them, so a page of floats (no matches) costs about what WKdm costs.
//!   The dictionary has 256 words with byte-wide indices (`WkDm256`):
//!   the paper's 16 give 2.657, 64 with 6-bit indices 2.768 (for packing
//!   that bytes avoid); measured, 2.714 against 2.628, at the same speed.
//!   A WK coder of our own interleaved with the parse (one word token at a
//!   time, 20-bit partial matches) gave 2.721, but ran a round trip at
//!   0.54× LZ4's speed, against 0.67× this way with the same parse (one
//!   run each; the README says where the time goes now).
//! * **Shortest match two words.** One word: 2.590 (a match token costs
//!   more than a WK word); three: 2.769 in the model, but measured with
//!   the table keyed on pairs at 2.566 (with the 16-word dictionary: below
//!   LZO1X-1's 2.572) and keyed on three words at 2.609, neither faster
//!   by more than the noise between runs.
//! * **Positions inside matches are not indexed**: 2.749 against 2.738 when
//!   they are, and less work: the match that covered them usually repeats.
//! * **After 32 words without a match, only every fourth word is looked
//!   up** until the next match, as LZ4 speeds up through data it cannot
//!   compress; it cost a ratio of 2.628 instead of 2.634 (16-word dictionary), and saves 5–10%
//!   of the encoder's time.
//! * **Lookups from the table are verified**, so a hash collision costs a
//!   compare, never a wrong match; the table (up to 4,096 entries) is sized
//!   to about twice the block's words and cleared per block, so output
//!   depends on the block alone.
//!
//! # Format
//!
//! ```text
//! header  little-endian u16: bytes of seq; little-endian u16: word tokens T
//! seq     sequences, each: a token byte r << 5 | p << 4 | l;
//!         if r = 7, bytes added to r until one is below 255;
//!         then r word tokens are placed; if the block ends there, the
//!         sequence ends (p = l = 0); else, unless p = 1, a little-endian
//!         u16 offset in words (1 to the words decoded so far), which
//!         becomes the repeat offset; if l = 15, bytes added to l as above;
//!         the match copies l + 2 words from the repeat offset back
//! words   the T word tokens as one WkDm256 block of 4T bytes (absent if T = 0)
//! ```
//!
//! The repeat offset starts at one word, so a run of one repeated word
//! needs no offset. Every part must be consumed exactly: the sequences
//! must place all T word tokens and end at the block's end, and the WK
//! block must be exactly the rest of the input.

mod decode;
mod encode;
#[cfg(test)]
mod tests;

use crate::{valid_block_len, wk::WkDm256, Codec, CompressError, DecodeError, MAX_BLOCK};

/// Most word tokens a block can have.
const MAX_TOKENS: usize = MAX_BLOCK / 4;
/// Shortest match, words.
pub(crate) const MIN_MATCH: usize = 2;
/// Bytes of the header: the sequence stream's length and the word tokens'
/// count.
pub(crate) const HEADER: usize = 4;

/// WordLZ codec. See the module docs for the design and format.
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
    /// The word tokens: gathered when compressing, decoded when
    /// decompressing (with slack for the decoder's chunked copies).
    words: Box<[u8]>,
    /// Codes the word tokens, both ways (none: they are stored as they
    /// are, in the [`WordLz::lz_only`] variant).
    wk: Option<WkDm256>,
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
            words: vec![0; 4 * MAX_TOKENS + decode::SLACK].into_boxed_slice(),
            wk: Some(WkDm256::new()),
        }
    }

    /// WordLZ with its word tokens stored as they are, 4 bytes each, not
    /// WK-coded: a variant for measuring what the LZ part costs and
    /// gains on its own (its output is its own format, not WordLZ's). It is
    /// not in the codec registry; `--example codec_times` knows it as
    /// `wordlz-lz-only`.
    ///
    /// ```
    /// use ccvm_codec::{wordlz::WordLz, Codec};
    /// let page: Vec<u8> = (0..1024u32).flat_map(|i| (i % 50).to_le_bytes()).collect();
    /// let mut codec = WordLz::lz_only();
    /// let mut packed = [0u8; 4096];
    /// let n = codec.compress(&page, &mut packed).unwrap();
    /// // The 50 distinct words as they are, then a match of the rest.
    /// assert!(n > 4 * 50 && n < 4 * 60);
    /// let mut back = [0u8; 4096];
    /// codec.decompress(&packed[..n], &mut back).unwrap();
    /// assert_eq!(&back[..], &page[..]);
    /// ```
    pub fn lz_only() -> Self {
        WordLz {
            wk: None,
            ..Self::new()
        }
    }
}

impl Codec for WordLz {
    fn name(&self) -> &'static str {
        if self.wk.is_some() {
            "wordlz"
        } else {
            "wordlz-lz-only"
        }
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        self.enc.compress(block, out, &mut self.words, self.wk.as_mut())
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        decode::decompress(input, block, &mut self.words, self.wk.as_mut())
    }
}

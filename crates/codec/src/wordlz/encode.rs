//! WordLZ's encoder: a greedy pass over the block's words, then one WKdm
//! block of the words it left.
//!
//! At each word the parse checks, together, the repeat offset (one 8-byte
//! compare, no table) and the match table's candidate for the 8 bytes
//! there, and branches once on the outcome; failing both, the word becomes
//! a word token, copied aside. The sequences are written as the parse goes;
//! the word tokens are coded when it ends, all at once, so that WKdm's
//! vector passes run over them.
//!
//! The block is first copied into a buffer of fixed size with zero bytes
//! after it, and every index into that buffer is masked to its size: the
//! compiler then proves each read in bounds, and the loop carries no
//! bounds checks.

use super::{HEADER, MIN_MATCH};
use crate::{wk::WkDm256, Codec, CompressError, MAX_BLOCK};

/// Most match-table entries (a power of two): 8 KiB of `u16`.
const TABLE_BITS: u32 = 12;
/// Words without a match after which the parse looks up only the first of
/// every [`STRIDE`] words, as LZ4 speeds up through data it cannot
/// compress.
const QUIET: usize = 32;
/// Words taken per lookup once the parse is quiet.
const STRIDE: usize = 4;
/// Bytes each copy of word tokens moves, whatever the count (1 to 4 words).
const TOKEN_COPY: usize = 16;
/// Zero bytes after the copied block: room for a token copy at its last
/// word.
const PAD: usize = TOKEN_COPY;

/// The block, copied into a buffer of fixed size.
struct Source<'a>(&'a [u8; MAX_BLOCK + PAD]);

impl Source<'_> {
    /// The eight bytes at word `k` (any `k`, even one that wrapped below
    /// zero; masked into the buffer).
    #[inline(always)]
    fn pair(&self, k: usize) -> u64 {
        let i = k.wrapping_mul(4) & (MAX_BLOCK - 1);
        u64::from_le_bytes(self.0[i..i + 8].try_into().expect("8 bytes"))
    }

    /// The [`TOKEN_COPY`] bytes at word `k` (any `k`; masked into the
    /// buffer).
    #[inline(always)]
    fn quad(&self, k: usize) -> [u8; TOKEN_COPY] {
        let i = k.wrapping_mul(4) & (MAX_BLOCK - 1);
        self.0[i..i + TOKEN_COPY].try_into().expect("TOKEN_COPY bytes")
    }

    /// Words equal at `a..` and `c..`, `a < c`, counting from `c` up to word
    /// `end`.
    #[inline(always)]
    fn common_words(&self, mut a: usize, mut c: usize, end: usize) -> usize {
        let start = c;
        while c + 2 <= end {
            let diff = self.pair(a) ^ self.pair(c);
            if diff != 0 {
                return c - start + usize::from(diff as u32 == 0);
            }
            a += 2;
            c += 2;
        }
        if c < end && self.pair(a) as u32 == self.pair(c) as u32 {
            c += 1;
        }
        c - start
    }
}

/// The encoder's own working memory (the match table, the sequence stream
/// and the block's copy), sized once for the largest block.
pub(crate) struct Encoder {
    table: Box<[u16; 1 << TABLE_BITS]>,
    seq: Box<[u8]>,
    src: Box<[u8; MAX_BLOCK + PAD]>,
}

/// Appends `v` to `seq` at `at` as bytes of 255 and a last byte below 255;
/// returns the new end.
#[cold]
fn put_ext(seq: &mut [u8], mut at: usize, mut v: usize) -> usize {
    while v >= 255 {
        seq[at] = 255;
        at += 1;
        v -= 255;
    }
    seq[at] = v as u8;
    at + 1
}

/// The sequence stream under construction.
struct Seq<'a> {
    bytes: &'a mut [u8],
    len: usize,
    /// Word tokens since the last match.
    run: usize,
}

impl Seq<'_> {
    /// Writes the sequence that ends in a match of `len` words, `off` words
    /// back (the repeat offset when `rep`).
    #[inline(always)]
    fn put_match(&mut self, rep: bool, off: usize, len: usize) {
        let l = len - MIN_MATCH;
        self.put_token(rep, l);
        if !rep {
            self.bytes[self.len..self.len + 2].copy_from_slice(&(off as u16).to_le_bytes());
            self.len += 2;
        }
        if l >= 15 {
            self.len = put_ext(self.bytes, self.len, l - 15);
        }
    }

    /// Writes a sequence's token and the extension of its word count, and
    /// starts a new count.
    #[inline(always)]
    fn put_token(&mut self, rep: bool, l: usize) {
        self.bytes[self.len] = (self.run.min(7) << 5 | usize::from(rep) << 4 | l.min(15)) as u8;
        self.len += 1;
        if self.run >= 7 {
            self.len = put_ext(self.bytes, self.len, self.run - 7);
        }
        self.run = 0;
    }
}

/// Word tokens gathered for WKdm, in a buffer with room for a block's words
/// and [`TOKEN_COPY`] bytes more.
struct Tokens<'a> {
    bytes: &'a mut [u8],
    count: usize,
}

impl Tokens<'_> {
    /// Appends `words` (1 to 4) words of the block from word `k`, copying
    /// [`TOKEN_COPY`] bytes whatever the count: the bytes past the last
    /// appended word are overwritten by the next appends or lie past the
    /// tokens.
    #[inline(always)]
    fn take(&mut self, src: &Source, k: usize, words: usize) {
        let at = (4 * self.count) & (MAX_BLOCK - 1);
        self.bytes[at..at + TOKEN_COPY].copy_from_slice(&src.quad(k));
        self.count += words;
    }
}

impl Encoder {
    pub(crate) fn new() -> Self {
        Encoder {
            table: vec![0; 1 << TABLE_BITS]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("TABLE entries")),
            seq: vec![0; 2 * MAX_BLOCK].into_boxed_slice(),
            src: vec![0; MAX_BLOCK + PAD]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("MAX_BLOCK + PAD bytes")),
        }
    }

    /// Compresses `b` into `out`, gathering the word tokens in `words`
    /// (room for a block's words and [`TOKEN_COPY`] bytes more) for `wk` to
    /// code (or, without `wk`, to store as they are).
    pub(crate) fn compress(
        &mut self,
        b: &[u8],
        out: &mut [u8],
        words: &mut [u8],
        wk: Option<&mut WkDm256>,
    ) -> Result<usize, CompressError> {
        let n = b.len() / 4;
        let budget = out.len();
        let too_big = Err(CompressError::DoesNotFit { budget });
        // A table about twice the block's words: smaller blocks clear and
        // touch less of it, and stay in the first-level cache.
        let bits = (usize::BITS - n.leading_zeros() + 1).clamp(8, TABLE_BITS);
        let table = &mut self.table[..];
        table[..1 << bits].fill(0);
        self.src[..b.len()].copy_from_slice(b);
        self.src[b.len()..b.len() + PAD].fill(0);
        let src = Source(&self.src);
        let mut seq = Seq {
            bytes: &mut self.seq,
            len: 0,
            run: 0,
        };
        let words = &mut words[..MAX_BLOCK + TOKEN_COPY];
        let mut tokens = Tokens { bytes: words, count: 0 };
        let mut rep = 1;
        let mut k = 0;
        let mut quiet_at = QUIET;
        // A match needs two words; the last word is a token if reached.
        while k + MIN_MATCH <= n {
            let x = src.pair(k);
            let h = (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize;
            let h = h & ((1 << TABLE_BITS) - 1);
            let j = usize::from(table[h]);
            table[h] = k as u16;
            // Both checks, then one branch: an entry is an earlier word (or
            // 0, unset), and a repeat offset past the block's start reads a
            // masked index, never out of bounds.
            let rep_hit = (k >= rep) & (src.pair(k.wrapping_sub(rep)) == x);
            let table_hit = (j < k) & (src.pair(j) == x);
            if rep_hit | table_hit {
                let off = if rep_hit { rep } else { k - j };
                let len = MIN_MATCH + src.common_words(k - off + 2, k + 2, n);
                seq.put_match(rep_hit, off, len);
                if HEADER + seq.len + tokens.count / 4 > budget {
                    return too_big;
                }
                rep = off;
                k += len;
                quiet_at = k + QUIET;
                continue;
            }
            // No match: this word, and once quiet the next few, are tokens.
            let take = if k >= quiet_at { STRIDE.min(n - k) } else { 1 };
            tokens.take(&src, k, take);
            seq.run += take;
            k += take;
        }
        if k < n {
            tokens.take(&src, k, n - k);
            seq.run += n - k;
        }
        if seq.run > 0 {
            seq.put_token(false, 0);
        }
        let (seq_len, at) = (seq.len, HEADER + seq.len);
        let count = tokens.count;
        if at > budget {
            return too_big;
        }
        out[..2].copy_from_slice(&(seq_len as u16).to_le_bytes());
        out[2..4].copy_from_slice(&(count as u16).to_le_bytes());
        out[HEADER..at].copy_from_slice(&self.seq[..seq_len]);
        if count == 0 {
            return Ok(at);
        }
        let tokens = &words[..4 * count];
        let Some(wk) = wk else {
            // Measuring the LZ part alone: the word tokens as they are.
            let end = at + tokens.len();
            out.get_mut(at..end)
                .ok_or(CompressError::DoesNotFit { budget })?
                .copy_from_slice(tokens);
            return Ok(end);
        };
        let packed = wk.compress(tokens, &mut out[at..]);
        Ok(at + packed.map_err(|_| CompressError::DoesNotFit { budget })?)
    }
}

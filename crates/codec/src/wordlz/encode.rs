//! WordLZ's encoder: a greedy pass over the block's words, then one WKdm
//! block of the words it left.
//!
//! At each word the parse tries, in order, the repeat offset (one 8-byte
//! compare, no table), then the match table's candidate for the 8 bytes
//! there; failing both, the word becomes a word token, copied aside. The
//! sequences are written as the parse goes; the word tokens are coded when
//! it ends, all at once, so that WKdm's vector passes run over them.

use super::{HEADER, MIN_MATCH};
use crate::{wk::WkDm, word_at, Codec, CompressError, MAX_BLOCK};

/// Most match-table entries (a power of two): 8 KiB of `u16`.
const TABLE_BITS: u32 = 12;
/// Words without a match after which only every fourth word is looked up.
const QUIET: usize = 32;
/// Words between two checks of the output against the budget.
const CHECK_EVERY: usize = 256;

/// The match table's slot for the eight bytes `x`.
#[inline(always)]
fn table_slot(x: u64) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TABLE_BITS)) as usize
}

/// The block, read as words.
struct Source<'a>(&'a [u8]);

impl Source<'_> {
    /// The eight bytes at word `k`.
    #[inline(always)]
    fn pair(&self, k: usize) -> u64 {
        u64::from_le_bytes(self.0[4 * k..4 * k + 8].try_into().expect("8 bytes"))
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
        if c < end && word_at(self.0, a) == word_at(self.0, c) {
            c += 1;
        }
        c - start
    }
}

/// The encoder's own working memory (the match table and the sequence
/// stream), sized once for the largest block.
pub(crate) struct Encoder {
    table: Box<[u16; 1 << TABLE_BITS]>,
    seq: Box<[u8]>,
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

impl Encoder {
    pub(crate) fn new() -> Self {
        Encoder {
            table: vec![0; 1 << TABLE_BITS]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("TABLE entries")),
            seq: vec![0; 2 * MAX_BLOCK].into_boxed_slice(),
        }
    }

    /// Compresses `b` into `out`, gathering the word tokens in `words`
    /// (room for a block's words) for `wk` to code.
    pub(crate) fn compress(
        &mut self,
        b: &[u8],
        out: &mut [u8],
        words: &mut [u8],
        wk: &mut WkDm,
    ) -> Result<usize, CompressError> {
        let n = b.len() / 4;
        let budget = out.len();
        let too_big = Err(CompressError::DoesNotFit { budget });
        // A table about twice the block's words: smaller blocks clear and
        // touch less of it, and stay in the first-level cache.
        let bits = (usize::BITS - n.leading_zeros() + 1).clamp(8, TABLE_BITS);
        let mask = (1 << bits) - 1;
        let table = &mut self.table[..=mask];
        table.fill(0);
        let src = Source(b);
        let mut seq = Seq {
            bytes: &mut self.seq,
            len: 0,
            run: 0,
        };
        let mut tokens = 0;
        let mut rep = 1;
        let mut k = 0;
        let mut check = CHECK_EVERY;
        let mut busy_until = QUIET;
        while k < n {
            if k >= check {
                // Each word token takes at least its 2-bit tag.
                if HEADER + seq.len + tokens / 4 > budget {
                    return too_big;
                }
                check = k + CHECK_EVERY;
            }
            if k + MIN_MATCH <= n && (k < busy_until || k % 4 == 0) {
                let x = src.pair(k);
                if k >= rep && src.pair(k - rep) == x {
                    let len = MIN_MATCH + src.common_words(k - rep + 2, k + 2, n);
                    seq.put_match(true, rep, len);
                    k += len;
                    busy_until = k + QUIET;
                    continue;
                }
                let h = table_slot(x) >> (TABLE_BITS - bits);
                let j = usize::from(table[h]);
                table[h] = k as u16;
                // `&`, not `&&`: an entry is always an earlier word (or 0,
                // unset), so the load is in bounds, and one branch on the
                // outcome, nearly always false, predicts better than two.
                if (j < k) & (src.pair(j) == x) {
                    let len = MIN_MATCH + src.common_words(j + 2, k + 2, n);
                    rep = k - j;
                    seq.put_match(false, rep, len);
                    k += len;
                    busy_until = k + QUIET;
                    continue;
                }
            }
            words[4 * tokens..4 * tokens + 4].copy_from_slice(&b[4 * k..4 * k + 4]);
            tokens += 1;
            seq.run += 1;
            k += 1;
        }
        if seq.run > 0 {
            seq.put_token(false, 0);
        }
        let (seq_len, at) = (seq.len, HEADER + seq.len);
        if at > budget {
            return too_big;
        }
        out[..2].copy_from_slice(&(seq_len as u16).to_le_bytes());
        out[2..4].copy_from_slice(&(tokens as u16).to_le_bytes());
        out[HEADER..at].copy_from_slice(&self.seq[..seq_len]);
        if tokens == 0 {
            return Ok(at);
        }
        let packed = wk.compress(&words[..4 * tokens], &mut out[at..]);
        Ok(at + packed.map_err(|_| CompressError::DoesNotFit { budget })?)
    }
}

//! WordLZ's encoder: one pass over the block, word tokens and matches
//! written to separate streams, concatenated behind the header at the end.
//!
//! A word token is coded without a branch on its kind (which the processor
//! could not predict): its tag, dictionary index, partial field and literal
//! are all written at their streams' cursors, and each cursor advances only
//! for the kinds that use its stream; tags and indices are written a byte
//! each and packed two and four to a byte at the end.

use super::{slot, word, HEADER, LIT_BLOCK, LIT_SHIFT, LOW_BITS, MAX_TOKENS, MIN_MATCH, SINK};
use crate::{CompressError, MAX_BLOCK};

/// Match-table entries (a power of two).
const TABLE: usize = 4096;
/// Input bytes between two checks of the output against the budget.
const CHECK_EVERY: usize = 1024;

/// The match table's slot for the four bytes `x`.
#[inline(always)]
fn table_slot(x: u32) -> usize {
    (x.wrapping_mul(0x9E37_79B1) >> 20) as usize
}

/// Bytes equal in `b[a..]` and `b[c..]`, `a < c`, up to the end of `b`.
#[inline(always)]
fn common(b: &[u8], mut a: usize, mut c: usize) -> usize {
    let start = c;
    while c + 8 <= b.len() {
        let x = u64::from_le_bytes(b[a..a + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[c..c + 8].try_into().expect("8 bytes"));
        let diff = x ^ y;
        if diff != 0 {
            return c - start + (diff.trailing_zeros() / 8) as usize;
        }
        a += 8;
        c += 8;
    }
    while c < b.len() && b[a] == b[c] {
        a += 1;
        c += 1;
    }
    c - start
}

/// Working memory: the match table and the streams, sized once for the
/// largest block (with room for the unconditional writes past each
/// cursor).
pub(crate) struct Encoder {
    table: Box<[u16; TABLE]>,
    seq: Box<[u8]>,
    /// One byte per word token: its tag.
    tags: Box<[u8]>,
    /// One byte per exact match: its index.
    idx: Box<[u8]>,
    part: Box<[u8]>,
    lit: Box<[u8]>,
}

/// A match found off the word grid.
struct Shifted {
    start: usize,
    src: usize,
    len: usize,
}

/// Cursors of one block's encoding.
#[derive(Default)]
struct Cursors {
    seq: usize,
    tokens: usize,
    exacts: usize,
    part: usize,
    lit: usize,
    /// Word tokens since the last match.
    run: usize,
}

impl Cursors {
    /// Bytes the output takes so far.
    fn size(&self) -> usize {
        HEADER + self.seq + self.tokens.div_ceil(4) + self.exacts.div_ceil(2) + self.part + self.lit
    }
}

impl Encoder {
    pub(crate) fn new() -> Self {
        let buf = |len: usize| vec![0u8; len + 8].into_boxed_slice();
        Encoder {
            table: vec![0; TABLE]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("TABLE entries")),
            seq: buf(2 * MAX_BLOCK),
            tags: buf(MAX_TOKENS),
            idx: buf(MAX_TOKENS),
            part: buf(2 * MAX_TOKENS),
            lit: buf(4 * MAX_TOKENS),
        }
    }

    pub(crate) fn compress(&mut self, b: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        let n = b.len();
        let budget = out.len();
        self.table.fill(0);
        let mut c = Cursors::default();
        let mut dict = [0u32; SINK + 1];
        let mut i = 0;
        let mut check = CHECK_EVERY;
        while i < n {
            if i >= check {
                if c.size() > budget {
                    return Err(CompressError::DoesNotFit { budget });
                }
                check = i + CHECK_EVERY;
            }
            // Fewer than four bytes left after a match: the last token codes
            // the block's last four bytes, the first of them again.
            let x = word(b, i.min(n - 4));
            // A match here: the table's candidate for these four bytes.
            if n - i >= MIN_MATCH {
                let h = table_slot(x);
                let j = usize::from(self.table[h]);
                self.table[h] = i as u16;
                if j < i && word(b, j) == x {
                    let len = 4 + common(b, j + 4, i + 4);
                    if len >= MIN_MATCH {
                        i = self.put_match(b, &mut c, i, 0, j, len);
                        continue;
                    }
                }
            }
            // A miss: only a match at a byte position can code these bytes
            // for less, so the next three positions are looked up too.
            let miss = x != 0 && (dict[slot(x)] ^ x) >> LOW_BITS != 0;
            let shifted = if miss { self.shifted_match(b, i) } else { None };
            match shifted {
                // It starts in this word: no word token, the bytes before it
                // as literals (where the block is short enough for them).
                Some(m) if m.start == i || n <= LIT_BLOCK => {
                    i = self.put_match(b, &mut c, i, m.start - i, m.src, m.len);
                }
                // Else the word, then the rest of the match.
                Some(m) if m.start + m.len >= i + 4 + MIN_MATCH => {
                    self.put_word(&mut dict, &mut c, x);
                    let skip = i + 4 - m.start;
                    i = self.put_match(b, &mut c, i + 4, 0, m.src + skip, m.len - skip);
                }
                _ => {
                    self.put_word(&mut dict, &mut c, x);
                    i = (i + 4).min(n);
                }
            }
        }
        if c.run > 0 {
            self.put_seq_head(&mut c, 0);
        }
        if c.size() > budget {
            return Err(CompressError::DoesNotFit { budget });
        }
        Ok(self.finish(&c, out))
    }

    /// Codes word `x` as a token, without branching on its kind.
    #[inline(always)]
    fn put_word(&mut self, dict: &mut [u32; SINK + 1], c: &mut Cursors, x: u32) {
        let s = slot(x);
        let d = dict[s];
        let zero = x == 0;
        let exact = d == x && !zero;
        let partial = !zero && !exact && (d ^ x) >> LOW_BITS == 0;
        let miss = !zero && !exact && !partial;
        // 0 zero, 1 exact, 2 partial, 3 miss.
        let tag = (!zero as u8) * (3 - exact as u8 - ((d ^ x) >> LOW_BITS == 0) as u8);
        // Zero words and exact matches leave the dictionary as it was.
        dict[if zero || exact { SINK } else { s }] = x;
        self.tags[c.tokens] = tag;
        c.tokens += 1;
        c.run += 1;
        self.idx[c.exacts] = s as u8;
        c.exacts += exact as usize;
        let field = s as u16 | ((x & ((1 << LOW_BITS) - 1)) as u16) << 4;
        self.part[c.part..c.part + 2].copy_from_slice(&field.to_le_bytes());
        c.part += 2 * partial as usize;
        self.lit[c.lit..c.lit + 4].copy_from_slice(&x.to_le_bytes());
        c.lit += 4 * miss as usize;
    }

    /// The longest match that starts at one of the three byte positions
    /// after `i` (a miss), extended back as far as `i`, if any.
    fn shifted_match(&self, b: &[u8], i: usize) -> Option<Shifted> {
        let n = b.len();
        let mut best: Option<Shifted> = None;
        for s in 1..4 {
            let at = i + s;
            if at + MIN_MATCH > n {
                break;
            }
            let y = word(b, at);
            let j = usize::from(self.table[table_slot(y)]);
            if j < at && word(b, j) == y {
                let mut back = 0;
                while back < s && back < j && b[j - back - 1] == b[at - back - 1] {
                    back += 1;
                }
                let m = Shifted {
                    start: at - back,
                    src: j - back,
                    len: 4 + common(b, j + 4, at + 4) + back,
                };
                if best.as_ref().is_none_or(|o| m.start + m.len > o.start + o.len) {
                    best = Some(m);
                }
            }
        }
        best.filter(|m| m.len >= MIN_MATCH)
    }

    /// Writes `lits` literal bytes at `i` and a match of `len` bytes after
    /// them from `j`; returns the position after it. Positions inside the
    /// match are entered into the table every four bytes.
    fn put_match(&mut self, b: &[u8], c: &mut Cursors, i: usize, lits: usize, j: usize, len: usize) -> usize {
        let start = i + lits;
        let l = len - MIN_MATCH;
        self.put_seq_head(c, l);
        let off = (start - j) as u16 | (lits as u16) << LIT_SHIFT;
        self.seq[c.seq..c.seq + 2].copy_from_slice(&off.to_le_bytes());
        c.seq += 2;
        self.seq[c.seq..c.seq + lits].copy_from_slice(&b[i..start]);
        c.seq += lits;
        if l >= 15 {
            self.put_ext(c, l - 15);
        }
        let end = start + len;
        let mut p = i + 4;
        while p + 4 <= end {
            self.table[table_slot(word(b, p))] = p as u16;
            p += 4;
        }
        end
    }

    /// Writes a sequence's first byte and the extension of its word count,
    /// and starts a new count.
    fn put_seq_head(&mut self, c: &mut Cursors, l: usize) {
        self.seq[c.seq] = (c.run.min(15) << 4 | l.min(15)) as u8;
        c.seq += 1;
        if c.run >= 15 {
            self.put_ext(c, c.run - 15);
        }
        c.run = 0;
    }

    /// Appends `v` as bytes of 255 and a last byte below 255.
    fn put_ext(&mut self, c: &mut Cursors, mut v: usize) {
        while v >= 255 {
            self.seq[c.seq] = 255;
            c.seq += 1;
            v -= 255;
        }
        self.seq[c.seq] = v as u8;
        c.seq += 1;
    }

    /// Header and streams into `out`, which has room for them; returns the
    /// bytes written.
    fn finish(&self, c: &Cursors, out: &mut [u8]) -> usize {
        let lens = [c.seq, c.tokens.div_ceil(4), c.exacts.div_ceil(2), c.part];
        for (k, len) in lens.iter().enumerate() {
            out[2 * k..2 * k + 2].copy_from_slice(&(*len as u16).to_le_bytes());
        }
        let mut at = HEADER;
        out[at..at + c.seq].copy_from_slice(&self.seq[..c.seq]);
        at += c.seq;
        for (k, four) in self.tags[..c.tokens].chunks(4).enumerate() {
            out[at + k] = four.iter().enumerate().fold(0, |acc, (t, &tag)| acc | tag << (2 * t));
        }
        at += lens[1];
        for (k, two) in self.idx[..c.exacts].chunks(2).enumerate() {
            out[at + k] = two[0] | two.get(1).map_or(0, |&i| i << 4);
        }
        at += lens[2];
        out[at..at + c.part].copy_from_slice(&self.part[..c.part]);
        at += c.part;
        out[at..at + c.lit].copy_from_slice(&self.lit[..c.lit]);
        at += c.lit;
        debug_assert_eq!(at, c.size());
        at
    }
}

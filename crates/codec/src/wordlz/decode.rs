//! WordLZ's decoder. The input is untrusted: every read is checked, and
//! every inconsistency is a [`DecodeError`].
//!
//! A word token is decoded without a branch on its kind, as WKdm's
//! decoder does: the next index, partial field and literal are read
//! whatever the tag, the word is `(dict[load] & mask) | value` with the
//! load slot, mask and value picked by the tag, it is stored to the slot
//! the tag picks (a sink for the kinds that leave the dictionary alone),
//! and each stream's cursor advances only for the kinds that use it. Reads
//! past a stream's end give zeros; the cursors are checked against the
//! stream lengths at the end, so such a block is refused.

use super::{slot, HEADER, LIT_BLOCK, LIT_SHIFT, LOW_BITS, MAX_TOKENS, MIN_MATCH, SINK, ZERO_SLOT};
use std::hint::select_unpredictable;

use crate::DecodeError;

/// The masks of the word kinds, by tag: zero, exact, partial, miss.
const MASK: [u32; 4] = [0, !0, !((1 << LOW_BITS) - 1), 0];

/// A byte stream read by a cursor (the sequence stream).
struct Seq<'a> {
    s: &'a [u8],
    at: usize,
}

impl Seq<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let v = *self.s.get(self.at).ok_or(DecodeError::Truncated)?;
        self.at += 1;
        Ok(v)
    }

    #[inline(always)]
    fn u16(&mut self) -> Result<u16, DecodeError> {
        let v = self.s.get(self.at..self.at + 2).ok_or(DecodeError::Truncated)?;
        self.at += 2;
        Ok(u16::from_le_bytes([v[0], v[1]]))
    }

    /// A length extension: bytes added while they are 255.
    fn ext(&mut self) -> Result<usize, DecodeError> {
        let mut v = 0usize;
        loop {
            let b = self.byte()?;
            v += usize::from(b);
            if b < 255 {
                return Ok(v);
            }
        }
    }
}

/// Entries of each scratch array: a power of two above the most word
/// tokens a block's tags can give, so that a cursor masked by
/// `SCRATCH - 1` is the cursor itself for every valid block and indexing
/// needs no bounds check.
const SCRATCH: usize = 32768;
const _: () = assert!(SCRATCH >= 4 * MAX_TOKENS.div_ceil(4) + 4);

/// The decoder's working memory: the streams of the word tokens unpacked
/// into arrays, and the decoded words.
pub(crate) struct Scratch {
    words: Box<[u32; SCRATCH]>,
    idx: Box<[u8; SCRATCH]>,
    part: Box<[u16; SCRATCH]>,
    lit: Box<[u32; SCRATCH]>,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        Scratch {
            words: boxed(),
            idx: boxed(),
            part: boxed(),
            lit: boxed(),
        }
    }
}

/// A zeroed array on the heap (not built on the stack first).
fn boxed<T: Copy + Default, const N: usize>() -> Box<[T; N]> {
    vec![T::default(); N]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("N entries"))
}

/// Decodes `input` into `block` (a valid block length).
pub(crate) fn decompress(input: &[u8], block: &mut [u8], scratch: &mut Scratch) -> Result<(), DecodeError> {
    let n = block.len();
    if input.len() < HEADER {
        return Err(DecodeError::Truncated);
    }
    let len = |k: usize| usize::from(u16::from_le_bytes([input[2 * k], input[2 * k + 1]]));
    let mut cut = [HEADER; 5];
    for k in 0..4 {
        cut[k + 1] = cut[k] + len(k);
    }
    if cut[4] > input.len() {
        return Err(DecodeError::Corrupt("stream lengths exceed the input"));
    }
    let tags = &input[cut[1]..cut[2]];
    if tags.len() > (n / 4 + 1).div_ceil(4) {
        return Err(DecodeError::Corrupt("more word tokens than the block has words"));
    }
    // Pass 1: every word token, in order (the dictionary sees only them).
    let (idx, part, lit) = (&input[cut[2]..cut[3]], &input[cut[3]..cut[4]], &input[cut[4]..]);
    if part.len() % 2 != 0
        || lit.len() % 4 != 0
        || 2 * idx.len() > SCRATCH
        || part.len() > 2 * SCRATCH
        || lit.len() > 4 * SCRATCH
    {
        return Err(DecodeError::Corrupt("stream lengths do not fit the block"));
    }
    let Scratch {
        words,
        idx: ix,
        part: pa,
        lit: li,
    } = scratch;
    for (k, &b) in idx.iter().enumerate() {
        ix[2 * k] = b & 15;
        ix[2 * k + 1] = b >> 4;
    }
    for (d, v) in pa.iter_mut().zip(part.chunks_exact(2)) {
        *d = u16::from_le_bytes([v[0], v[1]]);
    }
    for (d, v) in li.iter_mut().zip(lit.chunks_exact(4)) {
        *d = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
    }
    let mut c = Cursors::default();
    let mut dict = [0u32; 32];
    for (k, &four) in tags.iter().enumerate() {
        for t in 0..4 {
            words[(4 * k + t) & (SCRATCH - 1)] = next_word(&mut dict, four >> (2 * t) & 3, ix, pa, li, &mut c);
        }
    }
    let used = [c.exacts.div_ceil(2), 2 * c.part, 4 * c.lit];
    let have = [idx.len(), part.len(), lit.len()];
    if used.iter().zip(&have).any(|(u, h)| u > h) {
        return Err(DecodeError::Truncated);
    }
    let left: usize = have.iter().zip(&used).map(|(h, u)| h - u).sum();
    if left > 0 {
        return Err(DecodeError::TrailingBytes(left));
    }
    // Pass 2: the sequences place the words and copy the matches.
    let mut seq = Seq {
        s: &input[cut[0]..cut[1]],
        at: 0,
    };
    let mut tokens = 0;
    let mut pos = 0;
    while pos < n {
        let head = seq.byte()?;
        let mut run = usize::from(head >> 4);
        if run == 15 {
            run += seq.ext()?;
        }
        if run > (n - pos).div_ceil(4) || tokens + run > 4 * tags.len() {
            return Err(DecodeError::Corrupt("more word tokens than the tags give"));
        }
        // All but a last token that would overlap the block's end.
        let whole = run.min((n - pos) / 4);
        for (out, w) in block[pos..pos + 4 * whole]
            .chunks_exact_mut(4)
            .zip(&words[tokens..tokens + whole])
        {
            out.copy_from_slice(&w.to_le_bytes());
        }
        pos += 4 * whole;
        tokens += whole;
        if run > whole {
            // A match left the end unaligned: the last token codes the
            // block's last four bytes, overlapping what came before.
            let bytes = words[tokens].to_le_bytes();
            tokens += 1;
            let at = n - 4;
            if block[at..pos] != bytes[..pos - at] {
                return Err(DecodeError::Corrupt("the last word disagrees with the bytes before it"));
            }
            block[at..].copy_from_slice(&bytes);
            pos = n;
        }
        if pos == n {
            if head & 15 != 0 {
                return Err(DecodeError::Corrupt("a match length after the last word"));
            }
            break;
        }
        let mut off = usize::from(seq.u16()?);
        if n <= LIT_BLOCK {
            // Up to three literal bytes, then the match.
            let lits = off >> LIT_SHIFT;
            off &= (1 << LIT_SHIFT) - 1;
            if lits > n - pos {
                return Err(DecodeError::Corrupt("literal bytes run past the block"));
            }
            for k in 0..lits {
                block[pos + k] = seq.byte()?;
            }
            pos += lits;
        }
        let mut l = usize::from(head & 15);
        if l == 15 {
            l += seq.ext()?;
        }
        let len = l + MIN_MATCH;
        if off == 0 || off > pos {
            return Err(DecodeError::Corrupt("match offset reaches before the block"));
        }
        if len > n - pos {
            return Err(DecodeError::Corrupt("match runs past the block"));
        }
        copy_match(block, pos, off, len);
        pos += len;
    }
    // The tags' padding decodes as zero words, which no sequence uses.
    if tokens.div_ceil(4) != tags.len() || words[tokens..4 * tags.len()].iter().any(|&w| w != 0) {
        return Err(DecodeError::Corrupt("tags left over after the last word"));
    }
    if seq.at < seq.s.len() {
        return Err(DecodeError::TrailingBytes(seq.s.len() - seq.at));
    }
    Ok(())
}

/// Stream cursors of the word pass, in entries of the scratch arrays.
#[derive(Default)]
struct Cursors {
    exacts: usize,
    part: usize,
    lit: usize,
}

/// Decodes the next word token (see the module docs).
#[inline(always)]
fn next_word(
    dict: &mut [u32; 32],
    t: u8,
    idx: &[u8; SCRATCH],
    part: &[u16; SCRATCH],
    lit: &[u32; SCRATCH],
    c: &mut Cursors,
) -> u32 {
    const M: usize = SCRATCH - 1;
    let t = usize::from(t & 3);
    let i = usize::from(idx[c.exacts & M]);
    let f = part[c.part & M];
    let l = lit[c.lit & M];
    let ps = usize::from(f & 15);
    // Selects, not branches: the tags of a block are not predictable.
    let (exact, partial, miss) = (t == 1, t == 2, t == 3);
    let load = select_unpredictable(exact, i, select_unpredictable(partial, ps, ZERO_SLOT));
    let value = select_unpredictable(miss, l, select_unpredictable(partial, u32::from(f >> 4), 0));
    let w = dict[load & 31] & MASK[t] | value;
    // A miss stores to the slot of its literal, known before the load.
    let store = select_unpredictable(miss, slot(l), select_unpredictable(partial, ps, SINK));
    dict[store & 31] = w;
    c.exacts += usize::from(exact);
    c.part += usize::from(partial);
    c.lit += usize::from(miss);
    w
}

/// Copies `len` bytes ending at `pos + len` from `off` bytes back, which
/// may overlap what it writes (a run when `off < len`). The caller has
/// checked `off <= pos` and `pos + len <= block.len()`.
#[inline(always)]
fn copy_match(block: &mut [u8], pos: usize, off: usize, len: usize) {
    let src = pos - off;
    if off >= 8 {
        // Eight bytes at a time, each read whole before it is written: a
        // source eight or more bytes back is never one this copy writes
        // before reading it.
        // The last chunk overlaps the one before it rather than going byte
        // by byte; a match of 6 or 7 bytes is two overlapping chunks of 4.
        fn copy<const W: usize>(block: &mut [u8], from: usize, to: usize) {
            let v: [u8; W] = block[from..from + W].try_into().expect("W bytes");
            block[to..to + W].copy_from_slice(&v);
        }
        if len < 8 {
            copy::<4>(block, src, pos);
            copy::<4>(block, src + len - 4, pos + len - 4);
            return;
        }
        let mut k = 0;
        while k + 8 <= len {
            copy::<8>(block, src + k, pos + k);
            k += 8;
        }
        if k < len {
            copy::<8>(block, src + len - 8, pos + len - 8);
        }
        return;
    }
    // A run: the pattern of `off` bytes repeats. Its first bytes one by
    // one, until a whole number of periods (`d`, at least 8) is written;
    // then eight at a time from `d` back, which holds the same bytes.
    let d = off * 8usize.div_ceil(off);
    let head = d.min(len);
    for k in 0..head {
        block[pos + k] = block[src + k];
    }
    let mut k = head;
    while k + 8 <= len {
        let v: [u8; 8] = block[pos + k - d..pos + k - d + 8].try_into().expect("8 bytes");
        block[pos + k..pos + k + 8].copy_from_slice(&v);
        k += 8;
    }
    while k < len {
        block[pos + k] = block[pos + k - d];
        k += 1;
    }
}

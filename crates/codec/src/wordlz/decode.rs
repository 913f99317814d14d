//! WordLZ's decoder: the word tokens first, all at once by WKdm's decoder,
//! then the sequences, which place them and copy the matches. The input is
//! untrusted: every inconsistency is a [`DecodeError`].
//!
//! Most sequences are short: a few word tokens and a match of at most 16
//! words, far enough from the block's end. Those take a fast path that
//! copies a fixed 32 bytes of tokens and 64 bytes of match whatever the
//! lengths, so the copies have no loop and no branch on the lengths; the
//! bytes written past a sequence's end are overwritten by the next ones.
//! Everything else (extension bytes, offsets under four words, the last
//! words of the block, and every inconsistent sequence) goes the general
//! way, which checks each field and names what is wrong.

use super::{HEADER, MIN_MATCH};
use std::hint::select_unpredictable;

use crate::{wk::WkDm256, Codec, DecodeError};

/// The sequence stream, read by a cursor.
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

/// Decodes `input` into `block` (a valid block length), decoding the word
/// tokens with `wk` (or, without it, copying them as they are) into `words`
/// (room for a block's words and [`SLACK`] bytes more).
pub(crate) fn decompress(
    input: &[u8],
    block: &mut [u8],
    words: &mut [u8],
    wk: Option<&mut WkDm256>,
) -> Result<(), DecodeError> {
    let n = block.len() / 4;
    if input.len() < HEADER {
        return Err(DecodeError::Truncated);
    }
    let seq_len = usize::from(u16::from_le_bytes([input[0], input[1]]));
    let tokens = usize::from(u16::from_le_bytes([input[2], input[3]]));
    let Some(seq) = input.get(HEADER..HEADER + seq_len) else {
        return Err(DecodeError::Corrupt("sequence stream longer than the input"));
    };
    if tokens > n {
        return Err(DecodeError::Corrupt("more word tokens than the block has words"));
    }
    let wk_in = &input[HEADER + seq_len..];
    match (wk, tokens) {
        (_, 0) if !wk_in.is_empty() => return Err(DecodeError::TrailingBytes(wk_in.len())),
        (_, 0) => {}
        (Some(wk), _) => wk.decompress(wk_in, &mut words[..4 * tokens])?,
        (None, _) if wk_in.len() == 4 * tokens => words[..4 * tokens].copy_from_slice(wk_in),
        (None, _) => return Err(DecodeError::Corrupt("word tokens' bytes differ from their count")),
    }
    let mut seq = Seq { s: seq, at: 0 };
    let mut rep = 1;
    let mut pos = 0;
    let mut taken = 0;
    while pos < n {
        if let Some(step) = fast_sequence(&mut seq, block, words, pos, taken, tokens, rep) {
            (pos, taken, rep) = step;
            continue;
        }
        let head = seq.byte()?;
        let mut run = usize::from(head >> 5);
        if run == 7 {
            run += seq.ext()?;
        }
        if run > n - pos || run > tokens - taken {
            return Err(DecodeError::Corrupt(
                "more word tokens than the block or the header has",
            ));
        }
        copy_words(block, 4 * pos, words, 4 * taken, 4 * run);
        taken += run;
        pos += run;
        if pos == n {
            if head & 31 != 0 {
                return Err(DecodeError::Corrupt("a match after the last word"));
            }
            break;
        }
        // The offset, read whether it is there or not and taken without a
        // branch: whether a match repeats the last offset is not
        // predictable.
        let explicit = head & 16 == 0;
        let off = seq
            .s
            .get(seq.at..seq.at + 2)
            .map(|v| usize::from(u16::from_le_bytes([v[0], v[1]])));
        if explicit && off.is_none() {
            return Err(DecodeError::Truncated);
        }
        rep = select_unpredictable(explicit, off.unwrap_or(0), rep);
        seq.at += 2 * usize::from(explicit);
        let mut l = usize::from(head & 15);
        if l == 15 {
            l += seq.ext()?;
        }
        let len = l + MIN_MATCH;
        if rep == 0 || rep > pos {
            return Err(DecodeError::Corrupt("match offset reaches before the block"));
        }
        if len > n - pos {
            return Err(DecodeError::Corrupt("match runs past the block"));
        }
        copy_match(block, 4 * pos, 4 * rep, 4 * len);
        pos += len;
    }
    if taken < tokens {
        return Err(DecodeError::Corrupt("word tokens left over after the last sequence"));
    }
    if seq.at < seq.s.len() {
        return Err(DecodeError::TrailingBytes(seq.s.len() - seq.at));
    }
    Ok(())
}

/// Most match words a sequence on the fast path has (`l` below 15).
const FAST_MATCH: usize = 14 + MIN_MATCH;
/// Words a sequence on the fast path may write from its start: at most 6
/// word tokens and a match of at most [`FAST_MATCH`] words.
const FAST_SPAN: usize = 6 + FAST_MATCH;

/// Decodes the next sequence at `pos` if it is a common one that can be
/// copied in chunks of fixed size without checks on its lengths: no
/// extension bytes, [`FAST_SPAN`] words of room in the block, a match
/// offset of at least four words, and counts consistent with the header.
/// Returns the new position, word tokens taken and repeat offset; `None`
/// (having read nothing) for any other sequence, which the general path
/// then decodes or reports.
#[inline(always)]
fn fast_sequence(
    seq: &mut Seq,
    block: &mut [u8],
    words: &[u8],
    pos: usize,
    taken: usize,
    tokens: usize,
    rep: usize,
) -> Option<(usize, usize, usize)> {
    let s = seq.s.get(seq.at..seq.at + 3)?;
    let head = s[0];
    let (run, l) = (usize::from(head >> 5), usize::from(head & 15));
    let explicit = head & 16 == 0;
    let off = select_unpredictable(explicit, usize::from(u16::from_le_bytes([s[1], s[2]])), rep);
    let at = pos + run;
    if run == 7 || l == 15 || pos + FAST_SPAN > block.len() / 4 || taken + run > tokens || off < 4 || off > at {
        return None;
    }
    // The word tokens: SLACK bytes (at least the 6 words of a run), of
    // which those past the run are garbage that the match then overwrites.
    let (from, to) = (4 * taken, 4 * pos);
    let v: [u8; SLACK] = words[from..from + SLACK].try_into().expect("SLACK bytes");
    block[to..to + SLACK].copy_from_slice(&v);
    // The match: FAST_MATCH words in chunks of WILD bytes, each read whole
    // from at least WILD bytes back, so from bytes already final; those
    // past its end are garbage that later sequences overwrite.
    let (src, dst) = (4 * (at - off), 4 * at);
    for c in (0..4 * FAST_MATCH).step_by(WILD) {
        let v: [u8; WILD] = block[src + c..src + c + WILD].try_into().expect("WILD bytes");
        block[dst + c..dst + c + WILD].copy_from_slice(&v);
    }
    seq.at += 1 + 2 * usize::from(explicit);
    Some((at + l + MIN_MATCH, taken + run, off))
}

/// Bytes a copy may write past its end: copies go in chunks of this size
/// where the block has room for the last chunk's overrun (which later
/// sequences then overwrite).
pub(crate) const WILD: usize = 16;

/// Bytes of slack after the word tokens' buffer, for the fast path's
/// fixed copies.
pub(crate) const SLACK: usize = 32;

/// Copies `len` bytes of the decoded word tokens at `from` to `to` in
/// `block`. The caller has checked both ranges; `words` has [`WILD`] bytes
/// of slack.
#[inline(always)]
fn copy_words(block: &mut [u8], to: usize, words: &[u8], from: usize, len: usize) {
    if to + len + WILD <= block.len() {
        let mut k = 0;
        while k < len {
            let v: [u8; WILD] = words[from + k..from + k + WILD].try_into().expect("WILD bytes");
            block[to + k..to + k + WILD].copy_from_slice(&v);
            k += WILD;
        }
    } else {
        block[to..to + len].copy_from_slice(&words[from..from + len]);
    }
}

/// Copies `len` bytes (at least 8) ending at `pos + len` from `off` bytes
/// back, which may overlap what it writes (a run when `off < len`); `off`
/// and `len` are multiples of 4. The caller has checked `off <= pos` and
/// `pos + len <= block.len()`.
#[inline(always)]
fn copy_match(block: &mut [u8], pos: usize, off: usize, len: usize) {
    let src = pos - off;
    if off >= WILD && pos + len + WILD <= block.len() {
        // Whole chunks, each read before it is written and from at least a
        // chunk back, so from bytes already final.
        let mut k = 0;
        while k < len {
            let v: [u8; WILD] = block[src + k..src + k + WILD].try_into().expect("WILD bytes");
            block[pos + k..pos + k + WILD].copy_from_slice(&v);
            k += WILD;
        }
        return;
    }
    fn copy8(block: &mut [u8], from: usize, to: usize) {
        let v: [u8; 8] = block[from..from + 8].try_into().expect("8 bytes");
        block[to..to + 8].copy_from_slice(&v);
    }
    if off == 4 {
        // The previous word, repeated.
        let v: [u8; 4] = block[src..pos].try_into().expect("4 bytes");
        let two = (u64::from(u32::from_le_bytes(v)) * 0x1_0000_0001).to_le_bytes();
        let mut k = 0;
        while k + 8 <= len {
            block[pos + k..pos + k + 8].copy_from_slice(&two);
            k += 8;
        }
        if k < len {
            block[pos + k..pos + len].copy_from_slice(&v);
        }
        return;
    }
    // Eight bytes at a time, each read whole before it is written: a
    // source eight or more bytes back is never one this copy writes before
    // reading it. An odd word at the end is the last eight bytes again,
    // overlapping what was just written with the same values.
    let mut k = 0;
    while k + 8 <= len {
        copy8(block, src + k, pos + k);
        k += 8;
    }
    if k < len {
        copy8(block, src + len - 8, pos + len - 8);
    }
}

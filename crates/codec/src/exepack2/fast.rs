//! A fast encoder for the Exepack2 format: one hash probe per position,
//! greedy, as LZ4's compressor searches, writing the same tokens.
//!
//! Why it exists: on pages of thirteen programs (`ccvm bench codecs
//! --corpus corpus/large --corpus corpus/text`) the Exepack2 *format*
//! holds pages at least as small as LZ4's on every program, and smaller
//! than LZO1X-1's over all of them, even when the match search is cut to
//! one probe (LZO1X-1 stays ahead on three programs); its ratio came from the
//! format (three-byte matches, two-byte tokens carrying their literals,
//! run tokens), not from the link-time encoder's 32-deep chains. The
//! link-time encoder ([`Exepack2`](super::Exepack2)) is kept as the paper
//! describes it.
//!
//! Choices:
//!
//! * The hash table holds 16-bit positions and is never cleared: a stale
//!   entry from an earlier block is only a candidate, and a candidate is
//!   used only when it lies before the position, within the 4095-byte
//!   window, and its three bytes equal the position's in this block, so a
//!   stale one is either a true match or skipped. Clearing 8 KiB per page
//!   would cost as much as compressing a compressible page.
//! * A match is extended eight bytes at a time with no length limit; the
//!   format's tokens cover at most 66 bytes, so a long match is written as
//!   a chain of tokens at the same offset, and a match one byte back (a
//!   run of one byte) longer than a string token becomes run tokens.
//! * After a run of misses the step grows (one more byte per 64 misses),
//!   so an incompressible page costs a fraction of a probe per byte.

use super::{decode, Out, MAX_OFFSET};
use crate::lzmatch::{common, read32};
use crate::{valid_block_len, Codec, CompressError, DecodeError};

const HASH_BITS: u32 = 12;

/// Exepack2 with a fast greedy encoder; decodes as [`Exepack2`](super::Exepack2).
///
/// ```
/// use ccvm_codec::{exepack2::Exepack2Fast, Codec};
/// let page: Vec<u8> = b"the page and the pager ".iter().cycle().take(4096).copied().collect();
/// let mut codec = Exepack2Fast::new();
/// let mut packed = vec![0u8; 4096];
/// let n = codec.compress(&page, &mut packed).unwrap();
/// assert!(n < 300); // a 66-byte copy per three-byte token
/// let mut back = vec![0u8; 4096];
/// codec.decompress(&packed[..n], &mut back).unwrap();
/// assert_eq!(back, page);
/// ```
pub struct Exepack2Fast {
    // A fixed length lets the compiler see that a hash indexes it.
    table: Box<[u16; 1 << HASH_BITS]>,
}

impl Default for Exepack2Fast {
    fn default() -> Self {
        Self::new()
    }
}

impl Exepack2Fast {
    /// Makes the encoder with its (8 KiB) hash table.
    pub fn new() -> Self {
        Exepack2Fast {
            table: Box::new([0; 1 << HASH_BITS]),
        }
    }
}

#[inline(always)]
fn hash(v: u32) -> usize {
    ((v & 0xff_ffff).wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// The string token for `rem` bytes at `offset` after `nr` (at most 15)
/// literals: (length used, kind 1 short, 2 mid or 3 long), or `None` when
/// no token saves a byte. The cheapest token that covers the most, as the
/// link-time encoder's `choose` picks, written as tests for speed.
#[inline(always)]
fn token(nr: usize, rem: usize, offset: usize) -> Option<(usize, u8)> {
    if rem <= 10 && nr <= 3 && offset <= 511 {
        (rem >= 3).then_some((rem, 1))
    } else if rem <= 6 && nr == 0 {
        (rem >= 3).then_some((rem, 2))
    } else if rem >= 4 {
        Some((rem.min(66), 3))
    } else {
        None
    }
}

/// Writes the literals `lits` and a match of `len` bytes at `offset` after
/// them; returns how many of the `len` bytes the tokens cover (all but at
/// most two, which the caller leaves as literals), or 0, writing nothing,
/// when no token would save a byte.
#[inline(always)]
fn put_match(out: &mut Out, lits: &[u8], len: usize, offset: usize, fill: u8) -> Result<usize, CompressError> {
    if offset == 1 && len > 10 {
        // A run: 3 bytes per 255 instead of 3 per 66.
        out.roots(lits)?;
        let mut left = len;
        while left > 0 {
            let k = left.min(255);
            out.put(&[0, k as u8, fill])?;
            left -= k;
        }
        return Ok(len);
    }
    let carried = if lits.len() > 15 { 0 } else { lits.len() };
    if token(carried, len, offset).is_none() {
        return Ok(0);
    }
    let mut lits = lits;
    if lits.len() > 15 {
        out.roots(lits)?;
        lits = &[];
    }
    let mut done = 0;
    while let Some((used, kind)) = token(lits.len(), len - done, offset) {
        out.string(kind, lits, used, offset)?;
        lits = &[];
        done += used;
    }
    debug_assert!(lits.is_empty(), "the first token carries the literals");
    Ok(done)
}

impl Codec for Exepack2Fast {
    fn name(&self) -> &'static str {
        "exepack2-fast"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let n = block.len();
        let mut out = Out { buf: out, len: 0 };
        let (mut i, mut lit, mut misses) = (0usize, 0usize, 0usize);
        while i + 4 <= n {
            let v = read32(block, i);
            let h = hash(v);
            let cand = self.table[h] as usize;
            self.table[h] = i as u16;
            if cand < i && i - cand <= MAX_OFFSET && (read32(block, cand) ^ v) & 0xff_ffff == 0 {
                let len = 3 + common(block, cand + 3, i + 3);
                let used = put_match(&mut out, &block[lit..i], len, i - cand, block[i])?;
                if used == 0 {
                    i += 1;
                    continue;
                }
                // The positions a short match covers become candidates (on
                // heaps the next match often starts inside it); of a long
                // one, its first and last few, so a run costs no more than
                // a short match.
                let end = (i + used).min(n - 3);
                for p in i + 1..end.min(i + 8) {
                    self.table[hash(read32(block, p))] = p as u16;
                }
                for p in end.saturating_sub(3).max(i + 8)..end {
                    self.table[hash(read32(block, p))] = p as u16;
                }
                i += used;
                lit = i;
                misses = 0;
            } else {
                misses += 1;
                i += 1 + (misses >> 6);
            }
        }
        out.roots(&block[lit..n])?;
        out.put(&[0, 0, 0])?;
        Ok(out.len)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        decode(input, block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exepack2::Exepack2;

    fn round_trip(block: &[u8]) -> usize {
        let mut codec = Exepack2Fast::new();
        let mut packed = vec![0u8; block.len() * 2 + 64];
        let n = codec.compress(block, &mut packed).unwrap();
        let mut back = vec![0u8; block.len()];
        Exepack2::new().decompress(&packed[..n], &mut back).unwrap();
        assert_eq!(back, block);
        n
    }

    /// Hand-worked: "abcabcabcabc" is three literals then one short
    /// token (offset 3, length 9) carrying them, then the end code.
    #[test]
    fn hand_worked_short_token() {
        let block = b"abcabcabcabc";
        let mut packed = [0u8; 64];
        let n = Exepack2Fast::new().compress(block, &mut packed).unwrap();
        // short: 01 | nroots 3 << 2 | (9 - 3) << 4 | 3 << 7 = 0x01ed
        assert_eq!(&packed[..n], &[0xed, 0x01, b'a', b'b', b'c', 0, 0, 0]);
    }

    /// Hand-worked: a page of one byte is one literal, then runs of 255
    /// (the rest, 4095 bytes, is sixteen runs of 255 and one of 15).
    #[test]
    fn hand_worked_runs() {
        let block = [7u8; 4096];
        let mut packed = [0u8; 128];
        let n = Exepack2Fast::new().compress(&block, &mut packed).unwrap();
        let mut want = vec![1 << 2, 7];
        for _ in 0..16 {
            want.extend([0, 255, 7]);
        }
        want.extend([0, 15, 7, 0, 0, 0]);
        assert_eq!(&packed[..n], &want[..]);
    }

    #[test]
    fn stale_table_entries_are_harmless() {
        let mut codec = Exepack2Fast::new();
        let mut packed = vec![0u8; 8192];
        let mut back = vec![0u8; 4096];
        let mut seed = 1u64;
        for round in 0..200 {
            let page: Vec<u8> = (0..4096)
                .map(|k| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if (k / 64 + round) % 3 == 0 {
                        (seed >> 59) as u8
                    } else {
                        b"page fault "[k % 11]
                    }
                })
                .collect();
            let len = [4096, 64, 1024, 4][round % 4];
            let n = codec.compress(&page[..len], &mut packed).unwrap();
            codec.decompress(&packed[..n], &mut back[..len]).unwrap();
            assert_eq!(back[..len], page[..len], "round {round}");
        }
    }

    #[test]
    fn long_matches_and_far_offsets_round_trip() {
        let mut block = vec![0u8; 65536];
        for (k, b) in block.iter_mut().enumerate() {
            *b = ((k * 7919) >> 3) as u8 ^ (k / 5000) as u8;
        }
        block.copy_within(100..4000, 60000);
        round_trip(&block);
        round_trip(&block[..4096]);
    }

    #[test]
    fn too_small_budget_is_an_error() {
        let block: Vec<u8> = (0..4096u32).map(|k| (k.wrapping_mul(2654435761) >> 24) as u8).collect();
        let mut packed = [0u8; 100];
        assert!(matches!(
            Exepack2Fast::new().compress(&block, &mut packed),
            Err(CompressError::DoesNotFit { .. })
        ));
    }
}

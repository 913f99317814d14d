//! OS/2's iterated-data pages (paper 004, §2.2): a page as a sequence of
//! iteration records, each a byte pattern and how many times it repeats.
//!
//! # Format
//!
//! ```text
//! repeat until the block is full:
//!   u16 LE  iterations (>= 1)
//!   u16 LE  pattern length (>= 1)
//!   pattern bytes
//! ```
//!
//! Bytes that do not repeat travel as records of one iteration. The
//! encoder is greedy: at each position it tries patterns of 1 to 16 bytes
//! and takes the one that saves the most bytes, when that saving pays for
//! the record (and, inside a literal run, for splitting it).

use crate::{valid_block_len, Codec, CompressError, DecodeError};

const MAX_PATTERN: usize = 16;
const RECORD: usize = 4;

/// OS/2 iterated-data codec. See the module docs.
#[derive(Default)]
pub struct Iterated;

impl Iterated {
    /// Makes an iterated-data codec (it needs no working memory).
    pub fn new() -> Self {
        Iterated
    }
}

fn record(out: &mut [u8], o: &mut usize, iterations: usize, pattern: &[u8]) -> Result<(), CompressError> {
    let end = *o + RECORD + pattern.len();
    let budget = out.len();
    let dst = out.get_mut(*o..end).ok_or(CompressError::DoesNotFit { budget })?;
    dst[..2].copy_from_slice(&(iterations as u16).to_le_bytes());
    dst[2..4].copy_from_slice(&(pattern.len() as u16).to_le_bytes());
    dst[4..].copy_from_slice(pattern);
    *o = end;
    Ok(())
}

fn literals(out: &mut [u8], o: &mut usize, bytes: &[u8]) -> Result<(), CompressError> {
    bytes.chunks(u16::MAX as usize).try_for_each(|c| record(out, o, 1, c))
}

impl Codec for Iterated {
    fn name(&self) -> &'static str {
        "iterated"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let n = block.len();
        let (mut i, mut lit, mut o) = (0usize, 0usize, 0usize);
        while i < n {
            let mut best = (0usize, 0usize, 0usize); // (saving, k, reps)
            for k in 1..=MAX_PATTERN.min((n - i) / 2) {
                if block[i + k] != block[i] || block[i..i + k] != block[i + k..i + 2 * k] {
                    continue;
                }
                let mut reps = 2;
                while reps < u16::MAX as usize
                    && i + (reps + 1) * k <= n
                    && block[i..i + k] == block[i + reps * k..i + (reps + 1) * k]
                {
                    reps += 1;
                }
                let saving = (reps * k).saturating_sub(RECORD + k);
                if saving > best.0 {
                    best = (saving, k, reps);
                }
            }
            let split_cost = if lit < i { RECORD } else { 0 };
            if best.0 > split_cost {
                literals(out, &mut o, &block[lit..i])?;
                let (_, k, reps) = best;
                record(out, &mut o, reps, &block[i..i + k])?;
                i += reps * k;
                lit = i;
            } else {
                i += 1;
            }
            if o > out.len() {
                return Err(CompressError::DoesNotFit { budget: out.len() });
            }
        }
        literals(out, &mut o, &block[lit..n])?;
        Ok(o)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let (mut i, mut o) = (0usize, 0usize);
        while o < block.len() {
            let h = input.get(i..i + RECORD).ok_or(DecodeError::Truncated)?;
            let iterations = u16::from_le_bytes([h[0], h[1]]) as usize;
            let len = u16::from_le_bytes([h[2], h[3]]) as usize;
            if iterations == 0 || len == 0 {
                return Err(DecodeError::Corrupt("iteration record with zero count or length"));
            }
            let pattern = input.get(i + RECORD..i + RECORD + len).ok_or(DecodeError::Truncated)?;
            let dst = block
                .get_mut(o..o + iterations * len)
                .ok_or(DecodeError::Corrupt("iteration record runs past the block"))?;
            for c in dst.chunks_exact_mut(len) {
                c.copy_from_slice(pattern);
            }
            i += RECORD + len;
            o += iterations * len;
        }
        if i != input.len() {
            return Err(DecodeError::TrailingBytes(input.len() - i));
        }
        Ok(())
    }
}

//! WK4x4: the WK model with a 4-set × 4-way dictionary, LRU within a set.
//!
//! A word's set is chosen by the hash of its upper 22 bits, so every word
//! that could match it partially lives in that set; the four ways are kept
//! in recency order (way 0 most recent). The index written is the matched
//! entry's position *before* it moves to the front, which the decoder knows
//! too, so both sides keep identical dictionaries.

use super::{decompress_same, hash_upper, start_compress, Segments, EXACT, LOW_MASK, MISS, PARTIAL, ZERO};
use crate::{Codec, CompressError, DecodeError};

/// WK4x4 codec (paper 000, §2.3). See the [module docs](super) for the format.
pub struct Wk4x4 {
    seg: Segments,
}

impl Default for Wk4x4 {
    fn default() -> Self {
        Self::new()
    }
}

impl Wk4x4 {
    /// Makes a WK4x4 codec with working memory for the largest block.
    pub fn new() -> Self {
        Wk4x4 {
            seg: Segments::new(false),
        }
    }
}

#[inline(always)]
fn set_of(w: u32) -> usize {
    (hash_upper(w) >> 30) as usize
}

/// Moves way `way` of `set` to the front, storing `w` there.
#[inline(always)]
fn touch(set: &mut [u32; 4], way: usize, w: u32) {
    set.copy_within(0..way, 1);
    set[0] = w;
}

impl Codec for Wk4x4 {
    fn name(&self) -> &'static str {
        "wk4x4"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if let Some(n) = start_compress(block, out)? {
            return Ok(n);
        }
        let words = block.len() / 4;
        let budget = out.len();
        let seg = &mut self.seg;
        let mut dict = [[0u32; 4]; 4];
        let (mut ni, mut nl, mut nf) = (0usize, 0usize, 0usize);
        let mut tag_acc = 0u64;
        for (i, c) in block.chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let tag = if w == 0 {
                ZERO
            } else {
                let s = set_of(w);
                let set = &mut dict[s];
                if let Some(way) = set.iter().position(|&d| d == w) {
                    seg.idx[ni] = (s * 4 + way) as u8;
                    ni += 1;
                    touch(set, way, w);
                    EXACT
                } else if let Some(way) = set.iter().position(|&d| (d ^ w) >> 10 == 0) {
                    seg.idx[ni] = (s * 4 + way) as u8;
                    ni += 1;
                    seg.low[nl] = w & LOW_MASK;
                    nl += 1;
                    touch(set, way, w);
                    PARTIAL
                } else {
                    seg.full[nf] = w;
                    nf += 1;
                    touch(set, 3, w);
                    MISS
                }
            };
            tag_acc |= (tag as u64) << (2 * (i & 31));
            if i & 31 == 31 {
                seg.tags[i / 32 * 8..i / 32 * 8 + 8].copy_from_slice(&tag_acc.to_le_bytes());
                tag_acc = 0;
                if seg.lower_bound(words, ni, nl, nf) > budget {
                    return Err(CompressError::DoesNotFit { budget });
                }
            }
        }
        if !words.is_multiple_of(32) {
            let at = words / 32 * 8;
            seg.tags[at..at + 8].copy_from_slice(&tag_acc.to_le_bytes());
        }
        seg.n_idx = ni;
        seg.n_low = nl;
        seg.n_full = nf;
        seg.pack(words, out)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if decompress_same(input, block)? {
            return Ok(());
        }
        let words = block.len() / 4;
        let tags = self.seg.unpack(input, words)?;
        let seg = &self.seg;
        let mut dict = [[0u32; 4]; 4];
        let (mut ni, mut nl, mut nf) = (0usize, 0usize, 0usize);
        for (i, out) in block.chunks_exact_mut(4).enumerate() {
            let t = (tags[i >> 2] >> ((i & 3) * 2)) as u32 & 3;
            let w = match t {
                ZERO => 0,
                MISS => {
                    let w = seg.full[nf];
                    nf += 1;
                    touch(&mut dict[set_of(w)], 3, w);
                    w
                }
                _ => {
                    let x = seg.idx[ni] as usize;
                    ni += 1;
                    let (set, way) = (&mut dict[x >> 2], x & 3);
                    let w = if t == PARTIAL {
                        nl += 1;
                        (set[way] & !LOW_MASK) | seg.low[nl - 1]
                    } else {
                        set[way]
                    };
                    touch(set, way, w);
                    w
                }
            };
            out.copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }
}

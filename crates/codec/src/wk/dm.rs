//! WKdm: the WK model with a 16-word direct-mapped dictionary.
//!
//! The modelling loop is branch-free: every word computes its tag with
//! compares, writes a candidate entry to every segment and advances each
//! segment's count by 0 or 1. Real pages mix tags unpredictably, so a
//! branch per word would mispredict about every other word; here the only
//! loop-carried dependence is through the 16-entry dictionary.

use super::{compress_same, decompress_same, hash_upper, Segments, EXACT, LOW_MASK, MISS, PARTIAL};
use crate::{valid_block_len, Codec, CompressError, DecodeError};

/// WKdm codec (paper 000, §2.3). See the [module docs](super) for the format.
pub struct WkDm {
    seg: Segments,
}

impl Default for WkDm {
    fn default() -> Self {
        Self::new()
    }
}

impl WkDm {
    /// Makes a WKdm codec with working memory for the largest block.
    pub fn new() -> Self {
        WkDm {
            seg: Segments::new(),
        }
    }
}

#[inline(always)]
fn slot(w: u32) -> usize {
    (hash_upper(w) >> 28) as usize
}

impl Codec for WkDm {
    fn name(&self) -> &'static str {
        "wkdm"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        if let Some(r) = compress_same(block, out) {
            return r;
        }
        let words = block.len() / 4;
        let budget = out.len();
        let seg = &mut self.seg;
        let (idx, low, full) = (&mut seg.idx[..], &mut seg.low[..], &mut seg.full[..]);
        let mut dict = [0u32; 16];
        let (mut ni, mut nl, mut nf) = (0usize, 0usize, 0usize);
        let mut tag_acc = 0u64;
        for (i, c) in block.chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let h = slot(w);
            let d = dict[h];
            let nonzero = w != 0;
            let exact = w == d;
            let partial = (w ^ d) >> 10 == 0;
            let tag = nonzero as u32 * (MISS + partial as u32 + exact as u32);
            idx[ni] = h as u8;
            ni += (nonzero & partial) as usize;
            low[nl] = (w & LOW_MASK) as u16;
            nl += (nonzero & partial & !exact) as usize;
            full[nf] = w;
            nf += (nonzero & !partial) as usize;
            dict[h] = if nonzero { w } else { d };
            tag_acc |= (tag as u64) << (2 * (i & 31));
            if i & 31 == 31 {
                seg.tags[i / 32 * 8..i / 32 * 8 + 8].copy_from_slice(&tag_acc.to_le_bytes());
                tag_acc = 0;
                if Segments::lower_bound(words, ni, nl, nf) > budget {
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
        let (idx, low, full) = (&seg.idx[..], &seg.low[..], &seg.full[..]);
        let mut dict = [0u32; 16];
        let (mut ni, mut nl, mut nf) = (0usize, 0usize, 0usize);
        for (i, out) in block.chunks_exact_mut(4).enumerate() {
            let t = (tags[i >> 2] >> ((i & 3) * 2)) as u32 & 3;
            let f = full[nf];
            let l = low[nl] as u32;
            let is_miss = t == MISS;
            let h = if is_miss { slot(f) } else { idx[ni] as usize };
            let d = dict[h];
            // Select without branches: masks pick the word's source by tag.
            let m_full = 0u32.wrapping_sub(is_miss as u32);
            let m_low = 0u32.wrapping_sub((t == PARTIAL) as u32) & LOW_MASK;
            let m_dict = 0u32.wrapping_sub((t >= PARTIAL) as u32) & !m_low;
            let w = (f & m_full) | (l & m_low) | (d & m_dict);
            dict[h] = if t != 0 { w } else { d };
            nf += is_miss as usize;
            nl += (t == PARTIAL) as usize;
            ni += (t >= PARTIAL) as usize;
            out.copy_from_slice(&w.to_le_bytes());
        }
        debug_assert!(ni == seg.n_idx && nl == seg.n_low && nf == seg.n_full);
        let _ = EXACT;
        Ok(())
    }
}

//! WKdm: the WK model with a direct-mapped dictionary, of 16 words as in
//! the paper ([`WkDm`]) or of 256 ([`WkDm256`], ccvm's; see the [module
//! docs](super) for why).
//!
//! # How it is made fast
//!
//! A direct-mapped dictionary has one property that matters: the entry a
//! word is compared with is simply the last earlier non-zero word with the
//! same hash. So the modelling splits into passes, only one of them serial:
//!
//! 1. hash every word to its slot (zero words go to an extra "sink" slot
//!    that is never read, so no later pass needs a branch for them);
//! 2. serially, record each word's candidate `dict[slot]` and store the word
//!    there: two loads and two stores a word, no data-dependent branch;
//! 3. classify every word against its candidate, pack the 2-bit tags and
//!    compact the indices, low bits and missed words into their segments.
//!
//! Decompression mirrors it: a vector pass expands the segments into
//! per-word (load slot, store slot, value, mask), then a serial pass
//! computes `w = (dict[load] & mask) | value` and stores `w` to
//! `dict[store]`. Exact matches leave the dictionary as it was, so they
//! store to the sink, and misses and zeros load from a slot that is never
//! written: a word then waits for an earlier word's store only when it
//! reads a slot that a recent miss or partial match wrote, which keeps the
//! serial pass from becoming one long chain of store-to-load forwarding.
//!
//! Passes 1 and 3 and the expansion run eight words at a time with AVX2
//! when the processor has it (chosen at run time, see [`super::avx2`]);
//! the scalar versions here run elsewhere, and for the last words of a
//! block that is not a multiple of eight words. Both produce the same bytes.
//! Pages are modelled 128 words at a time so a page that will not fit the
//! budget is abandoned early.

use super::{decompress_same, hash_upper, sink, start_compress, zero_slot, Segments, LOW_MASK, MISS, PARTIAL};
use crate::{Codec, CompressError, DecodeError};
/// Words modelled between two early-exit checks (128 lets the hybrid leave
/// a page for LZ4 after an eighth of it).
const CHUNK: usize = 128;

/// Dictionary slot of a word (below `2^BITS`), or the sink for zero.
#[inline(always)]
pub(crate) fn slot<const BITS: u32>(w: u32) -> u32 {
    if w == 0 {
        sink(BITS)
    } else {
        hash_upper(w) >> (32 - BITS)
    }
}

/// Entries of the dictionary array: room for the largest dictionary, its
/// sink and its zero slot, a power of two so that masked indices need no
/// bounds check.
const DICT: usize = 512;

/// The paper's WKdm (paper 000, §2.3): a dictionary of 16 words.
pub type WkDm = WkDmN<4>;

/// WKdm with a dictionary of 256 words and byte-wide indices: ccvm's, for
/// the reason in the [module docs](super).
pub type WkDm256 = WkDmN<8>;

/// WKdm with a direct-mapped dictionary of `2^BITS` words (`BITS` is 4, the
/// paper's, or 8). See the [module docs](super) for the format.
///
/// ```
/// use ccvm_codec::{wk::{WkDm, WkDm256}, Codec};
/// // Pointers into 40 regions: more than 16 words can remember.
/// let page: Vec<u8> = (0..1024u32).flat_map(|i| (0x7F00_0000 + (i * 7 % 40 << 12) + i % 8).to_le_bytes()).collect();
/// let mut out = [0u8; 8192];
/// let small = WkDm::new().compress(&page, &mut out).unwrap();
/// let mut codec = WkDm256::new();
/// let n = codec.compress(&page, &mut out).unwrap();
/// assert!(n < small);
/// let mut back = [0u8; 4096];
/// codec.decompress(&out[..n], &mut back).unwrap();
/// assert_eq!(&back[..], &page[..]);
/// ```
pub struct WkDmN<const BITS: u32> {
    pub(crate) seg: Segments,
    /// Per-word scratch: slots and candidates (compress), or load and store
    /// slots (`load | store << 16`), values and masks (decompress).
    pub(crate) lane_a: Box<[u32]>,
    pub(crate) lane_b: Box<[u32]>,
    pub(crate) lane_c: Box<[u32]>,
    /// The dictionary (its first `2 << BITS` entries).
    dict: Box<[u32; DICT]>,
    avx2: bool,
}

impl<const BITS: u32> Default for WkDmN<BITS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const BITS: u32> WkDmN<BITS> {
    /// Slots of the dictionary array in use: the dictionary, its sink and
    /// its zero slot, rounded up to a power of two (an index mask).
    const MASK: u32 = (2 << BITS) - 1;

    /// Makes a WKdm codec with working memory for the largest block, using
    /// AVX2 if this processor has it. A `BITS` other than 4 or 8 does not
    /// compile.
    pub fn new() -> Self {
        Self::with_simd(super::avx2::available())
    }

    /// Makes a WKdm codec that uses AVX2 only if `simd` is true and the
    /// processor has it (the scalar path exists for other machines and for
    /// checking that both produce the same bytes).
    pub fn with_simd(simd: bool) -> Self {
        const { assert!(BITS == 4 || BITS == 8, "WKdm's dictionary has 16 or 256 words") };
        let lane = || vec![0u32; crate::MAX_BLOCK / 4 + 8].into_boxed_slice();
        WkDmN {
            seg: Segments::new(BITS == 8),
            lane_a: lane(),
            lane_b: lane(),
            lane_c: lane(),
            dict: Box::new([0; DICT]),
            avx2: simd && super::avx2::available(),
        }
    }

    /// Like [`Codec::compress`], but also gives up, after each 128 words, when
    /// the output extrapolated from the words so far exceeds `projected_limit`
    /// bytes: the hybrid codec's cheap test that a page is LZ4's kind.
    pub(crate) fn compress_projected(
        &mut self,
        block: &[u8],
        out: &mut [u8],
        projected_limit: usize,
    ) -> Result<usize, CompressError> {
        if let Some(n) = start_compress(block, out)? {
            return Ok(n);
        }
        let words = block.len() / 4;
        let budget = out.len();
        let (slots, prev) = (&mut self.lane_a[..], &mut self.lane_b[..]);
        let seg = &mut self.seg;
        (seg.n_idx, seg.n_low, seg.n_full) = (0, 0, 0);
        let dict = &mut self.dict;
        dict[..=Self::MASK as usize].fill(0);
        for from in (0..words).step_by(CHUNK) {
            let to = (from + CHUNK).min(words);
            let vec_to = if self.avx2 { from + (to - from) / 8 * 8 } else { from };
            if vec_to > from {
                // SAFETY: AVX2 is present (checked when the codec was made);
                // the ranges are within the block and the scratch arrays.
                unsafe { super::avx2::hash::<BITS>(block, slots, from, vec_to) };
            }
            hash_scalar::<BITS>(block, slots, vec_to, to);
            candidates::<BITS>(block, slots, prev, dict, from, to);
            if vec_to > from {
                // SAFETY: as above; segment arrays have 8 entries of slack.
                unsafe { super::avx2::classify(block, slots, prev, seg, from, vec_to) };
            }
            classify_scalar(block, slots, prev, seg, vec_to, to);
            let bound = seg.lower_bound(words, seg.n_idx, seg.n_low, seg.n_full);
            let variable = bound - seg.lower_bound(words, 0, 0, 0);
            if bound > budget || (bound + variable * (words - to) / to) > projected_limit {
                return Err(CompressError::DoesNotFit { budget });
            }
        }
        seg.pack(words, out)
    }
}

/// Pass 1, scalar: slots of words `from..to`.
fn hash_scalar<const BITS: u32>(block: &[u8], slots: &mut [u32], from: usize, to: usize) {
    for (s, c) in slots[from..to].iter_mut().zip(block[from * 4..to * 4].chunks_exact(4)) {
        *s = slot::<BITS>(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
}

/// Pass 2: each word's candidate, updating the dictionary.
#[inline(always)]
fn candidates<const BITS: u32>(
    block: &[u8],
    slots: &[u32],
    prev: &mut [u32],
    dict: &mut [u32; DICT],
    from: usize,
    to: usize,
) {
    let words = block[from * 4..to * 4].chunks_exact(4);
    for ((&h, p), c) in slots[from..to].iter().zip(prev[from..to].iter_mut()).zip(words) {
        let h = (h & WkDmN::<BITS>::MASK) as usize;
        *p = dict[h];
        dict[h] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

/// Pass 3, scalar: classifies words `from..to` (`from` a multiple of 8),
/// writing tags and appending to the segments.
fn classify_scalar(block: &[u8], slots: &[u32], prev: &[u32], seg: &mut Segments, from: usize, to: usize) {
    let (mut ni, mut nl, mut nf) = (seg.n_idx, seg.n_low, seg.n_full);
    let mut i = from;
    while i < to {
        let end = (i + 8).min(to);
        let mut tags = 0u16;
        for j in i..end {
            let c = &block[j * 4..j * 4 + 4];
            let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let d = prev[j];
            let nonzero = w != 0;
            let exact = w == d;
            let partial = (w ^ d) >> 10 == 0;
            let tag = nonzero as u32 * (MISS + partial as u32 + exact as u32);
            tags |= (tag as u16) << (2 * (j - i));
            seg.idx[ni] = slots[j] as u8;
            ni += (nonzero & partial) as usize;
            seg.low[nl] = w & LOW_MASK;
            nl += (nonzero & partial & !exact) as usize;
            seg.full[nf] = w;
            nf += (nonzero & !partial) as usize;
        }
        seg.tags[i / 4..i / 4 + 2].copy_from_slice(&tags.to_le_bytes());
        i = end;
    }
    (seg.n_idx, seg.n_low, seg.n_full) = (ni, nl, nf);
}

/// Expansion, scalar: per-word slots (`load | store << 16`), value and
/// mask for words `from..to`.
fn expand_scalar<const BITS: u32>(
    tags: &[u8],
    seg: &Segments,
    counts: &mut [usize; 3],
    lanes: [&mut [u32]; 3],
    from: usize,
    to: usize,
) {
    let [ni, nl, nf] = counts;
    let [slots, values, masks] = lanes;
    for i in from..to {
        let t = (tags[i >> 2] >> ((i & 3) * 2)) as u32 & 3;
        let f = seg.full[*nf];
        let x = seg.idx[*ni] as u32;
        let (h, v, m) = match t {
            0 => (zero_slot(BITS) | sink(BITS) << 16, 0, 0),
            MISS => (zero_slot(BITS) | slot::<BITS>(f) << 16, f, 0),
            PARTIAL => (x | x << 16, seg.low[*nl], !LOW_MASK),
            _ => (x | sink(BITS) << 16, 0, !0),
        };
        *nf += (t == MISS) as usize;
        *nl += (t == PARTIAL) as usize;
        *ni += (t >= PARTIAL) as usize;
        (slots[i], values[i], masks[i]) = (h, v, m);
    }
}

impl<const BITS: u32> Codec for WkDmN<BITS> {
    fn name(&self) -> &'static str {
        if BITS == 4 {
            "wkdm"
        } else {
            "wkdm256"
        }
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        self.compress_projected(block, out, usize::MAX)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if decompress_same(input, block)? {
            return Ok(());
        }
        let words = block.len() / 4;
        let tags = self.seg.unpack(input, words)?;
        let mut counts = [0usize; 3];
        let vec_to = if self.avx2 { words / 8 * 8 } else { 0 };
        if vec_to > 0 {
            // SAFETY: AVX2 is present; unpack validated the counts against
            // the tags, and segment arrays have 8 entries of slack.
            unsafe {
                super::avx2::expand::<BITS>(
                    tags,
                    &self.seg,
                    &mut counts,
                    &mut self.lane_a,
                    &mut self.lane_b,
                    &mut self.lane_c,
                    vec_to,
                )
            };
        }
        let lanes = [&mut self.lane_a[..], &mut self.lane_b[..], &mut self.lane_c[..]];
        expand_scalar::<BITS>(tags, &self.seg, &mut counts, lanes, vec_to, words);
        let dict = &mut self.dict;
        dict[..=Self::MASK as usize].fill(0);
        let lanes = self.lane_a.iter().zip(self.lane_b.iter()).zip(self.lane_c.iter());
        for (out, ((&h, &v), &m)) in block.chunks_exact_mut(4).zip(lanes) {
            let w = (dict[(h & Self::MASK) as usize] & m) | v;
            dict[(h >> 16 & Self::MASK) as usize] = w;
            out.copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 and scalar paths write the same bytes for every page.
    #[test]
    fn simd_and_scalar_agree_on_the_corpus() {
        agree::<4>();
        agree::<8>();
    }

    fn agree<const BITS: u32>() {
        let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
        let (mut simd, mut scalar) = (WkDmN::<BITS>::with_simd(true), WkDmN::<BITS>::with_simd(false));
        let (mut a, mut b) = (vec![0u8; 8192], vec![0u8; 8192]);
        let mut back = vec![0u8; 4096];
        for page in files.iter().flat_map(|f| f.pages()) {
            let n = simd.compress(page, &mut a).unwrap();
            let m = scalar.compress(page, &mut b).unwrap();
            assert_eq!(a[..n], b[..m]);
            scalar.decompress(&a[..n], &mut back).unwrap();
            assert_eq!(back, page);
            simd.decompress(&a[..n], &mut back).unwrap();
            assert_eq!(back, page);
        }
    }
}

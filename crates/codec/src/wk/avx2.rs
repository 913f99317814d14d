//! AVX2 versions of WKdm's vector passes (see [`super::dm`]), eight words at
//! a time: hashing, classification with tag packing and segment compaction
//! ("left-packing" the selected lanes with a permutation looked up by the
//! lane mask), and the decoder's expansion (the inverse permutation).
//!
//! Every function here requires AVX2 (callers check [`available`]) and
//! relies on the segment arrays having at least 8 entries of slack past
//! any count, so that full-width loads and stores stay in bounds.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::{sink, zero_slot, Segments, LOW_MASK};

/// Whether this processor runs the AVX2 paths (which also use POPCNT,
/// present on every AVX2 processor).
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// For each 8-bit lane mask, the permutation moving the selected lanes to
/// the front, in order.
const LEFT_PACK: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut j, mut k) = (0, 0);
        while j < 8 {
            if m >> j & 1 == 1 {
                t[m][k] = j as u32;
                k += 1;
            }
            j += 1;
        }
        m += 1;
    }
    t
};

/// For each 8-bit lane mask, the permutation giving each selected lane the
/// next unread entry (the number of selected lanes before it).
const EXPAND: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut j, mut k) = (0, 0);
        while j < 8 {
            if m >> j & 1 == 1 {
                t[m][j] = k;
                k += 1;
            }
            j += 1;
        }
        m += 1;
    }
    t
};

/// Bit `j` of the index moved to bit `2j`: interleaves two 8-bit masks into
/// eight 2-bit tags.
const SPREAD: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut m = 0;
    while m < 256 {
        let mut j = 0;
        while j < 8 {
            t[m] |= ((m as u16 >> j) & 1) << (2 * j);
            j += 1;
        }
        m += 1;
    }
    t
};

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
fn mask_of(v: __m256i) -> usize {
    _mm256_movemask_ps(_mm256_castsi256_ps(v)) as usize
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
fn slots<const BITS: u32>(w: __m256i) -> __m256i {
    let h = _mm256_srl_epi32(
        _mm256_mullo_epi32(_mm256_srli_epi32(w, 10), _mm256_set1_epi32(0x9E37_79B1u32 as i32)),
        _mm_cvtsi32_si128(32 - BITS as i32),
    );
    let z = _mm256_cmpeq_epi32(w, _mm256_setzero_si256());
    _mm256_blendv_epi8(h, _mm256_set1_epi32(sink(BITS) as i32), z)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
fn perm(m: usize, table: &[[u32; 8]; 256]) -> __m256i {
    // SAFETY: a table row is eight u32s, the 32 bytes the load reads.
    unsafe { _mm256_loadu_si256(table[m].as_ptr() as *const __m256i) }
}

/// Pass 1: slots of words `from..to` (`to - from` a multiple of 8) in a
/// dictionary of `2^BITS` words.
///
/// # Safety
///
/// AVX2 must be available; `to * 4 <= block.len()` and `to <= slots.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
pub(crate) unsafe fn hash<const BITS: u32>(block: &[u8], slots_out: &mut [u32], from: usize, to: usize) {
    // SAFETY: every load and store is of words below `to`, within `block` and `slots_out` as the caller guarantees.
    unsafe {
        debug_assert!(to * 4 <= block.len() && to <= slots_out.len() && (to - from).is_multiple_of(8));
        let mut i = from;
        while i < to {
            let w = _mm256_loadu_si256(block.as_ptr().add(i * 4) as *const __m256i);
            _mm256_storeu_si256(slots_out.as_mut_ptr().add(i) as *mut __m256i, slots::<BITS>(w));
            i += 8;
        }
    }
}

/// Pass 3: classifies words `from..to` (`from` and `to - from` multiples of
/// 8), writing tags and appending to the segments.
///
/// # Safety
///
/// AVX2 must be available; the ranges lie within `block`, `slots` and
/// `prev`; the segment arrays have 8 entries of slack past `to` entries.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
pub(crate) unsafe fn classify(
    block: &[u8],
    slots_in: &[u32],
    prev: &[u32],
    seg: &mut Segments,
    from: usize,
    to: usize,
) {
    // SAFETY: loads are of words below `to`, within `block`, `slots_in` and `prev`; stores go to `tags` below `to / 4` and to the segments, whose 8 entries of slack take a full-width store past their counts, as the caller guarantees.
    unsafe {
        debug_assert!(to * 4 <= block.len() && to <= prev.len() && to <= slots_in.len() && from.is_multiple_of(8));
        let (mut ni, mut nl, mut nf) = (seg.n_idx, seg.n_low, seg.n_full);
        debug_assert!(seg.full.len() >= nf + (to - from) + 8);
        let zero = _mm256_setzero_si256();
        let low_mask = _mm256_set1_epi32(LOW_MASK as i32);
        // Low byte of each 32-bit lane to the first four bytes of its 128-bit half.
        let bytes = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
            -1, -1, -1, -1,
        );
        let halves = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
        let mut i = from;
        while i < to {
            let w = _mm256_loadu_si256(block.as_ptr().add(i * 4) as *const __m256i);
            let d = _mm256_loadu_si256(prev.as_ptr().add(i) as *const __m256i);
            let x = _mm256_xor_si256(w, d);
            let m_zero = mask_of(_mm256_cmpeq_epi32(w, zero));
            let m_exact = mask_of(_mm256_cmpeq_epi32(x, zero)) & !m_zero;
            let m_match = mask_of(_mm256_cmpeq_epi32(_mm256_srli_epi32(x, 10), zero)) & !m_zero;
            let m_miss = !(m_match | m_zero) & 0xFF;
            let m_partial = m_match & !m_exact;
            let tags = SPREAD[m_miss | m_exact] | SPREAD[m_match] << 1;
            seg.tags
                .as_mut_ptr()
                .add(i / 4)
                .cast::<[u8; 2]>()
                .write_unaligned(tags.to_le_bytes());

            let full = _mm256_permutevar8x32_epi32(w, perm(m_miss, &LEFT_PACK));
            _mm256_storeu_si256(seg.full.as_mut_ptr().add(nf) as *mut __m256i, full);
            nf += m_miss.count_ones() as usize;

            let low = _mm256_permutevar8x32_epi32(_mm256_and_si256(w, low_mask), perm(m_partial, &LEFT_PACK));
            _mm256_storeu_si256(seg.low.as_mut_ptr().add(nl) as *mut __m256i, low);
            nl += m_partial.count_ones() as usize;

            let h = _mm256_loadu_si256(slots_in.as_ptr().add(i) as *const __m256i);
            let idx = _mm256_permutevar8x32_epi32(h, perm(m_match, &LEFT_PACK));
            let idx = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(idx, bytes), halves);
            _mm_storel_epi64(
                seg.idx.as_mut_ptr().add(ni) as *mut __m128i,
                _mm256_castsi256_si128(idx),
            );
            ni += m_match.count_ones() as usize;
            i += 8;
        }
        (seg.n_idx, seg.n_low, seg.n_full) = (ni, nl, nf);
    }
}

/// Expansion for words `0..to` (`to` a multiple of 8), for a dictionary of
/// `2^BITS` words: per-word load and store slots (`load | store << 16`),
/// value and mask, from the segments.
///
/// # Safety
///
/// AVX2 must be available; `tags` holds at least `to / 4` bytes; the
/// segment counts are consistent with the tags (as `Segments::unpack`
/// checks) and the segment arrays have 8 entries of slack; the lane arrays
/// hold `to` entries.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
pub(crate) unsafe fn expand<const BITS: u32>(
    tags: &[u8],
    seg: &Segments,
    counts: &mut [usize; 3],
    slots_out: &mut [u32],
    values: &mut [u32],
    masks: &mut [u32],
    to: usize,
) {
    // SAFETY: stores are of lanes below `to`, which the lane arrays hold; segment loads stay within the counts the tags imply plus the 8 entries of slack, as the caller guarantees.
    unsafe {
        debug_assert!(tags.len() * 4 >= to && slots_out.len() >= to && values.len() >= to && masks.len() >= to);
        let [mut ni, mut nl, mut nf] = *counts;
        let shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        let three = _mm256_set1_epi32(3);
        let not_low = _mm256_set1_epi32(!LOW_MASK as i32);
        let zero_sink = _mm256_set1_epi32((zero_slot(BITS) | sink(BITS) << 16) as i32);
        let sink = _mm256_set1_epi32((sink(BITS) << 16) as i32);
        let mut i = 0;
        while i < to {
            let bits = u16::from_le_bytes([tags[i / 4], tags[i / 4 + 1]]) as i32;
            let t = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(bits), shifts), three);
            let is_zero = _mm256_cmpeq_epi32(t, _mm256_setzero_si256());
            let is_miss = _mm256_cmpeq_epi32(t, _mm256_set1_epi32(1));
            let is_partial = _mm256_cmpeq_epi32(t, _mm256_set1_epi32(2));
            let is_exact = _mm256_cmpeq_epi32(t, three);
            let (m_miss, m_partial, m_exact) = (mask_of(is_miss), mask_of(is_partial), mask_of(is_exact));
            let m_match = m_partial | m_exact;

            let f = _mm256_loadu_si256(seg.full.as_ptr().add(nf) as *const __m256i);
            let f = _mm256_and_si256(_mm256_permutevar8x32_epi32(f, perm(m_miss, &EXPAND)), is_miss);
            nf += m_miss.count_ones() as usize;
            let l = _mm256_loadu_si256(seg.low.as_ptr().add(nl) as *const __m256i);
            let l = _mm256_and_si256(_mm256_permutevar8x32_epi32(l, perm(m_partial, &EXPAND)), is_partial);
            nl += m_partial.count_ones() as usize;
            let x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(seg.idx.as_ptr().add(ni) as *const __m128i));
            let x = _mm256_permutevar8x32_epi32(x, perm(m_match, &EXPAND));
            ni += m_match.count_ones() as usize;

            // Partial: x | x << 16; exact: x | sink << 16; miss: zero slot | slot << 16.
            let stored = _mm256_blendv_epi8(_mm256_slli_epi32(x, 16), sink, is_exact);
            let h = _mm256_or_si256(x, stored);
            let miss = _mm256_or_si256(
                _mm256_set1_epi32(zero_slot(BITS) as i32),
                _mm256_slli_epi32(slots::<BITS>(f), 16),
            );
            let h = _mm256_blendv_epi8(h, miss, is_miss);
            let h = _mm256_blendv_epi8(h, zero_sink, is_zero);
            let v = _mm256_or_si256(f, l);
            let m = _mm256_or_si256(_mm256_and_si256(not_low, is_partial), is_exact);
            _mm256_storeu_si256(slots_out.as_mut_ptr().add(i) as *mut __m256i, h);
            _mm256_storeu_si256(values.as_mut_ptr().add(i) as *mut __m256i, v);
            _mm256_storeu_si256(masks.as_mut_ptr().add(i) as *mut __m256i, m);
            i += 8;
        }
        *counts = [ni, nl, nf];
    }
}

/// Packs index bytes (each below 16) two to a byte, first in the low
/// nibble: `dst[j] = src[2j] | src[2j + 1] << 4` for every `j` of `dst`,
/// 16 output bytes at a time, the rest left to the caller.
/// Returns how many output bytes were written.
///
/// # Safety
///
/// AVX2 must be available; `src.len() >= 2 * dst.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
pub(crate) unsafe fn pack_nibbles(src: &[u8], dst: &mut [u8]) -> usize {
    // SAFETY: reads 32 bytes at `2j` and writes 16 at `j` only while `j + 16 <= dst.len()`, and `src` is twice as long as `dst`.
    unsafe {
        debug_assert!(src.len() >= 2 * dst.len());
        let weights = _mm256_set1_epi16(0x1001); // bytes 1 and 16: lo + 16 * hi
        let mut j = 0;
        while j + 16 <= dst.len() {
            let v = _mm256_loadu_si256(src.as_ptr().add(2 * j) as *const __m256i);
            let pairs = _mm256_maddubs_epi16(v, weights);
            let packed = _mm256_packus_epi16(pairs, pairs);
            let packed = _mm256_permute4x64_epi64(packed, 0b1000);
            _mm_storeu_si128(dst.as_mut_ptr().add(j) as *mut __m128i, _mm256_castsi256_si128(packed));
            j += 16;
        }
        j
    }
}

/// Unpacks nibbles two to a byte: `dst[2j] = src[j] & 15`,
/// `dst[2j + 1] = src[j] >> 4`, 16 input bytes at a time, the rest left to
/// the caller. Returns how many input bytes were unpacked.
///
/// # Safety
///
/// AVX2 must be available; `dst.len() >= 2 * src.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
pub(crate) unsafe fn unpack_nibbles(src: &[u8], dst: &mut [u8]) -> usize {
    // SAFETY: reads 16 bytes at `j` and writes 32 at `2j` only while `j + 16 <= src.len()`, and `dst` is twice as long as `src`.
    unsafe {
        debug_assert!(dst.len() >= 2 * src.len());
        let low4 = _mm_set1_epi8(15);
        let mut j = 0;
        while j + 16 <= src.len() {
            let v = _mm_loadu_si128(src.as_ptr().add(j) as *const __m128i);
            let lo = _mm_and_si128(v, low4);
            let hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
            _mm_storeu_si128(dst.as_mut_ptr().add(2 * j) as *mut __m128i, _mm_unpacklo_epi8(lo, hi));
            _mm_storeu_si128(
                dst.as_mut_ptr().add(2 * j + 16) as *mut __m128i,
                _mm_unpackhi_epi8(lo, hi),
            );
            j += 16;
        }
        j
    }
}

/// [`super::count_tags`] compiled with the POPCNT instruction.
///
/// # Safety
///
/// AVX2 and POPCNT must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
pub(crate) unsafe fn count_tags(tags: &[u8]) -> [u32; 3] {
    super::count_tags(tags)
}

/// Stand-ins for other architectures: never called, as [`available`] is false.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn hash<const BITS: u32>(_: &[u8], _: &mut [u32], _: usize, _: usize) {
    unreachable!("no AVX2 on this architecture")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn classify(_: &[u8], _: &[u32], _: &[u32], _: &mut Segments, _: usize, _: usize) {
    unreachable!("no AVX2 on this architecture")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn count_tags(_: &[u8]) -> [u32; 3] {
    unreachable!("no AVX2 on this architecture")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn pack_nibbles(_: &[u8], _: &mut [u8]) -> usize {
    unreachable!("no AVX2 on this architecture")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn unpack_nibbles(_: &[u8], _: &mut [u8]) -> usize {
    unreachable!("no AVX2 on this architecture")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn expand<const BITS: u32>(
    _: &[u8],
    _: &Segments,
    _: &mut [usize; 3],
    _: &mut [u32],
    _: &mut [u32],
    _: &mut [u32],
    _: usize,
) {
    unreachable!("no AVX2 on this architecture")
}

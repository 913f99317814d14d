//! PageLz: ccvm's LZ77 page format, every sequence in two bytes when it
//! can be, decoded with LZ4's few wide copies.
//!
//! A block is a list of *sequences*, each some literal bytes and then a
//! copy of earlier output, as in LZ4. What differs is the sequence's
//! header: two bytes, little-endian, that hold the copy's offset and a
//! 4-bit code for the sequence's shape:
//!
//! ```text
//! header  u16 LE: bits 0-11 offset (1..4095), bits 12-15 code
//! code 0..14      (literals, copy length) = PAIRS[code]; the literals follow
//! code 15         escape: a byte t follows, literals = t >> 4 and
//!                 copy length = (t & 15) + 4; a field at 15 goes on in
//!                 bytes that add 0..255 each, the last one below 255
//!                 (the literals' bytes first, then the length's); then the
//!                 literals
//! offset 0        only with code 15 and t & 15 == 0: the last sequence,
//!                 its literals end the block
//! ```
//!
//! Copies may overlap their own output (offset below length).
//!
//! Why this shape: on memory pages most sequences are short, and over a
//! quarter of them tile 8-byte words: one literal byte then a 7-byte copy
//! (a pointer whose low byte differs), a whole word or two copied. LZ4
//! spends three bytes on each (a token and a 16-bit offset). A page needs
//! 12 bits of offset, and the other four name the fifteen commonest
//! (literals, length) pairs, so those sequences cost two bytes. The pairs
//! are the fifteen commonest of a greedy parse of 13 programs' pages
//! (`corpus/large`, `corpus/text`). Judged leave-one-program-out (each
//! program coded with the fifteen commonest pairs of the other twelve, by
//! the `pagelz_pairs` example) the ratio is 2.292 over all thirteen
//! against the shipped table's 2.298, at most 3.5% lower on one program
//! (python-dict), and at or above LZ4 on every one: the pairs are the
//! shapes of 8-byte words that every 64-bit program's heap has.
//! Matches are four bytes at least, as in LZ4: a three-byte match saves
//! too little to pay for the longer matches it hides.

mod encode;

pub use encode::PageLz;

use std::ptr;

use crate::{valid_block_len, DecodeError};

/// Largest copy offset: the header's 12 bits.
pub const MAX_OFFSET: usize = 4095;

/// Shortest copy.
pub const MIN_MATCH: usize = 4;

/// Code of the escape (and end) header.
pub const ESCAPE: u8 = 15;

/// (literals, copy length) of codes 0 to 14, the format's fixed table.
///
/// ```
/// // One literal byte and a 7-byte copy (a pointer with a new low byte) is code 1.
/// assert_eq!(ccvm_codec::pagelz::PAIRS[1], (1, 7));
/// ```
pub const PAIRS: [(u8, u8); 15] = [
    (0, 4),
    (1, 7),
    (0, 8),
    (2, 6),
    (1, 4),
    (0, 5),
    (0, 16),
    (0, 7),
    (1, 15),
    (2, 4),
    (0, 6),
    (0, 24),
    (4, 4),
    (3, 5),
    (5, 7),
];

/// Literal counts below this, and copy lengths below [`CODE_LENS`], are
/// looked up in [`CODE`]: every count an escape's shape byte holds
/// without continuation bytes, so that the encoder's common path has one
/// lookup and no branch on the escape.
pub(crate) const CODE_LITS: usize = 15;
/// See [`CODE_LITS`].
pub(crate) const CODE_LENS: usize = 32;

/// The code of a (literals, length) pair, [`ESCAPE`] when it has none:
/// `CODE[lits * CODE_LENS + len]`.
pub(crate) const CODE: [u8; CODE_LITS * CODE_LENS] = {
    let mut t = [ESCAPE; CODE_LITS * CODE_LENS];
    let mut c = 0;
    while c < PAIRS.len() {
        let (l, m) = PAIRS[c];
        t[l as usize * CODE_LENS + m as usize] = c as u8;
        c += 1;
    }
    t
};

/// Codes 0 to 14 as `literals | length << 4`, for the decoder's fast
/// path (one load; entry 15, the escape, is never used).
const CODED: [u16; 16] = {
    let mut t = [0u16; 16];
    let mut c = 0;
    while c < PAIRS.len() {
        t[c] = PAIRS[c].0 as u16 | (PAIRS[c].1 as u16) << 4;
        c += 1;
    }
    t
};

/// No code 0..14 has the literal count or copy length at which an
/// escape's field goes on in further bytes, so the decoder's fast path
/// tests those values without testing for the escape.
const _: () = {
    let mut c = 0;
    while c < PAIRS.len() {
        assert!(PAIRS[c].0 < 15 && PAIRS[c].1 as usize != 15 + MIN_MATCH);
        c += 1;
    }
};

/// Reads a length field's continuation bytes from `input` at `*i`: the
/// sum of bytes up to and including the first below 255.
#[inline]
fn more(input: &[u8], i: &mut usize) -> Result<usize, DecodeError> {
    let mut sum = 0;
    loop {
        let b = *input.get(*i).ok_or(DecodeError::Truncated)?;
        *i += 1;
        sum += b as usize;
        if b < 255 {
            return Ok(sum);
        }
    }
}

/// Decodes one PageLz block of `input` into `block`.
///
/// # Errors
///
/// [`DecodeError`] when `input` is not a whole block of `block`'s length.
pub(crate) fn decode(input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
    if !valid_block_len(block.len()) {
        return Err(DecodeError::BlockSize(block.len()));
    }
    let (mut i, mut o) = (0usize, 0usize);
    loop {
        if i + 20 <= input.len() && o + 64 <= block.len() {
            if let Some((next_i, next_o)) = fast_sequence(input, block, i, o) {
                (i, o) = (next_i, next_o);
                continue;
            }
        }
        match sequence(input, block, i, o)? {
            Some((next_i, next_o)) => (i, o) = (next_i, next_o),
            None => return Ok(()),
        }
    }
}

/// Decodes the sequence at `i` into `o` when it is a common one: each
/// length field with one continuation byte at most, a copy from 8 bytes
/// back or more or a run of a 1-, 2- or 4-byte pattern, and 16 bytes of
/// input and 48 of output to spare past it. Returns `None`, having written
/// nothing the exact path will not write again, for any other sequence.
/// Needs `i + 20 <= input.len()` and `o + 64 <= block.len()`.
///
/// The literals are 16-byte copies, and a copy from 8 bytes back or more
/// is two 8-byte chunks whatever its length (up to 16) and offset, so
/// that no branch depends on a short sequence's exact shape; the bytes
/// written past the sequence's end are written again by the ones after
/// it. (Two 16-byte chunks for offsets of 16 or more, a branch on the
/// offset's class, decoded the corpus 8% slower; three or four 8-byte
/// chunks, reading bytes that recent stores only partly cover, 3% and
/// 10% slower.)
#[inline(always)]
fn fast_sequence(input: &[u8], block: &mut [u8], i: usize, o: usize) -> Option<(usize, usize)> {
    assert!(i + 20 <= input.len() && o + 64 <= block.len());
    let (src, dst) = (input.as_ptr(), block.as_mut_ptr());
    // SAFETY: the header, its byte and two continuation bytes lie within
    // `i..i + 5`, and the literals, read in 16-byte chunks, within
    // `i + 4 + lits + 16` when they are long (tested) and `i + 20` when
    // not; every write to `block` lies within `d + max(len, 16) + 16`,
    // which the `d + len + 48` test keeps inside it, and its reads start
    // at `d - offset >= 0`. The pointers come from live slices and no
    // reference to the bytes is held meanwhile.
    unsafe {
        let h = u16::from_le_bytes([*src.add(i), *src.add(i + 1)]) as usize;
        let (code, offset, t) = (h >> 12, h & MAX_OFFSET, *src.add(i + 2) as usize);
        // Both readings of the shape, then a select: no branch on the
        // escape, which a processor cannot predict (two sequences in five
        // escape).
        let escape = code == ESCAPE as usize;
        let coded = *CODED.get_unchecked(code) as usize;
        let mut lits = std::hint::select_unpredictable(escape, t >> 4, coded & 15);
        let mut len = std::hint::select_unpredictable(escape, (t & 15) + MIN_MATCH, coded >> 4);
        let mut i = i + 2 + escape as usize;
        // Only an escape's fields reach these values (checked where PAIRS is),
        // so the test needs no branch on the escape itself.
        if (lits == 15) | (len == 15 + MIN_MATCH) {
            if lits == 15 {
                let more = *src.add(i);
                lits += more as usize;
                i += 1;
                if more == 255 || i + lits + 16 > input.len() {
                    return None;
                }
            }
            if len == 15 + MIN_MATCH {
                let more = *src.add(i);
                if more == 255 {
                    return None;
                }
                len += more as usize;
                i += 1;
            }
        }
        let d = o + lits;
        if offset == 0 || offset > d || d + len + 48 > block.len() {
            return None;
        }
        copy16(src.add(i), dst.add(o));
        let mut k = 16;
        while k < lits {
            copy16(src.add(i + k), dst.add(o + k));
            keep_loop();
            k += 16;
        }
        let (from, to) = (dst.add(d - offset) as *const u8, dst.add(d));
        if offset >= 8 {
            // Two 8-byte chunks whatever the offset class, so that no
            // branch depends on it for the short copies that most are.
            copy8(from, to);
            copy8(from.add(8), to.add(8));
            let mut k = 16;
            while k < len {
                copy8(from.add(k), to.add(k));
                keep_loop();
                k += 8;
            }
        } else {
            let pattern = match offset {
                1 => *from as u64 * 0x0101_0101_0101_0101,
                2 => ptr::read_unaligned(from as *const u16) as u64 * 0x0001_0001_0001_0001,
                4 => ptr::read_unaligned(from as *const u32) as u64 * 0x0000_0001_0000_0001,
                _ => return None,
            };
            let wide = pattern as u128 | (pattern as u128) << 64;
            let mut k = 0;
            loop {
                ptr::write_unaligned(to.add(k) as *mut u128, wide);
                k += 16;
                if k >= len {
                    break;
                }
            }
        }
        Some((i + lits, d + len))
    }
}

/// Keeps a copy loop a loop of the fast path's own. Without it the
/// compiler turns the long-literal loop into a call of `memcpy` and the
/// long-copy loop into a vectorized one with overlap tests; the registers
/// those need made it keep the output position on the stack, on every
/// sequence's path. An empty `asm!` counts as a side effect, which such
/// rewrites must keep, and emits nothing.
#[inline(always)]
fn keep_loop() {
    // SAFETY: no instruction; it reads and writes nothing.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) }
}

/// Copies 8 bytes, unaligned.
///
/// # Safety
///
/// `from` readable and `to` writable for 8 bytes; when both lie in one
/// buffer, the source ends at or before the destination.
#[inline(always)]
unsafe fn copy8(from: *const u8, to: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe { ptr::write_unaligned(to as *mut u64, ptr::read_unaligned(from as *const u64)) }
}

/// Copies 16 bytes, unaligned.
///
/// # Safety
///
/// `from` readable and `to` writable for 16 bytes; when both lie in one
/// buffer, the source ends at or before the destination.
#[inline(always)]
unsafe fn copy16(from: *const u8, to: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe { ptr::write_unaligned(to as *mut [u8; 16], ptr::read_unaligned(from as *const [u8; 16])) }
}

/// Decodes the sequence at `i` into `o` exactly, checking every field:
/// the next positions, or `None` after the end sequence.
#[inline(never)]
fn sequence(input: &[u8], block: &mut [u8], mut i: usize, mut o: usize) -> Result<Option<(usize, usize)>, DecodeError> {
    let n = block.len();
    let h = match input.get(i..i + 2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]) as usize,
        None => return Err(DecodeError::Truncated),
    };
    i += 2;
    let (code, offset) = ((h >> 12) as u8, h & MAX_OFFSET);
    let (mut lits, mut len);
    if code != ESCAPE {
        let (l, m) = PAIRS[code as usize];
        (lits, len) = (l as usize, m as usize);
        if offset == 0 {
            return Err(DecodeError::Corrupt("a copy of offset 0"));
        }
    } else {
        let t = *input.get(i).ok_or(DecodeError::Truncated)? as usize;
        i += 1;
        (lits, len) = (t >> 4, t & 15);
        if lits == 15 {
            lits += more(input, &mut i)?;
        }
        if len == 15 {
            len += more(input, &mut i)?;
        }
        if offset == 0 {
            if len != 0 {
                return Err(DecodeError::Corrupt("the end sequence has a copy"));
            }
            let src = input.get(i..i + lits).ok_or(DecodeError::Truncated)?;
            if lits != n - o {
                return Err(DecodeError::Corrupt("the block ends at the wrong length"));
            }
            block[o..].copy_from_slice(src);
            return match input.len() - (i + lits) {
                0 => Ok(None),
                extra => Err(DecodeError::TrailingBytes(extra)),
            };
        }
        len += MIN_MATCH;
    }
    let src = input.get(i..i + lits).ok_or(DecodeError::Truncated)?;
    block
        .get_mut(o..o + lits)
        .ok_or(DecodeError::Corrupt("literals run past the block"))?
        .copy_from_slice(src);
    i += lits;
    o += lits;
    if offset > o {
        return Err(DecodeError::Corrupt("copy reaches before the block"));
    }
    if len > n - o {
        return Err(DecodeError::Corrupt("copy runs past the block"));
    }
    copy_match(block, o, offset, len);
    Ok(Some((i, o + len)))
}

/// Copies `len` bytes from `offset` back to `o` within `block`, where
/// `0 < offset <= o` and `o + len <= block.len()`.
///
/// Away from the block's end the copy moves 16-byte chunks, each reading
/// only bytes already written: directly when the source lies 16 bytes
/// back or more, and otherwise (a run of a short pattern) after writing
/// the first 16 bytes one by one, from a multiple of the offset of at
/// least 16 back, which holds the same pattern.
#[inline(always)]
fn copy_match(block: &mut [u8], o: usize, offset: usize, len: usize) {
    let n = block.len();
    if o + len + 16 > n {
        if offset >= len {
            block.copy_within(o - offset..o - offset + len, o);
        } else {
            for j in o..o + len {
                block[j] = block[j - offset];
            }
        }
        return;
    }
    let (mut k, mut back) = (0, offset);
    if offset < 16 {
        while k < 16.min(len) {
            block[o + k] = block[o + k - offset];
            k += 1;
        }
        // The smallest multiple of the offset of at least 16 (no
        // division: it costs more than the loop).
        while back < 16 {
            back += offset;
        }
    }
    while k < len {
        let s = o + k - back;
        let chunk: [u8; 16] = block[s..s + 16].try_into().expect("16 bytes");
        block[o + k..o + k + 16].copy_from_slice(&chunk);
        k += 16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, CompressError};

    fn packed(block: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; block.len() * 2 + 64];
        let n = PageLz::new().compress(block, &mut out).unwrap();
        out.truncate(n);
        let mut back = vec![0u8; block.len()];
        decode(&out, &mut back).unwrap();
        assert_eq!(back, block);
        out
    }

    /// Hand-worked: four literals and an 8-byte copy from 4 back is an
    /// escape (no code has that shape): header 0xf004, shape byte 0x44,
    /// the literals; then the end (header 0xf000, shape byte 0).
    #[test]
    fn hand_worked_escape() {
        assert_eq!(
            packed(b"abcdabcdabcd"),
            [0x04, 0xf0, 0x44, b'a', b'b', b'c', b'd', 0x00, 0xf0, 0x00]
        );
    }

    /// Hand-worked: a word, the same word, and the word with its low byte
    /// changed. The second is an escape (8 literals, a copy of 8 from 8
    /// back); the third, one literal and a 7-byte copy from 16 back, is
    /// code 1: the header 0x1010 and the literal, three bytes.
    #[test]
    fn hand_worked_coded_pair() {
        let word = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let mut block = Vec::new();
        block.extend(word);
        block.extend(word);
        block.extend([9, 2, 3, 4, 5, 6, 7, 8]);
        let want = [
            [0x08, 0xf0, 0x84].as_slice(),
            &word,
            &[0x10, 0x10, 9],
            &[0x00, 0xf0, 0x00],
        ]
        .concat();
        assert_eq!(packed(&block), want);
    }

    /// Hand-worked: a zero page is one literal and a copy of 4095 from 1
    /// back, whose length goes on in fifteen bytes of 255 and one of 251
    /// (4095 = 4 + 15 + 15 * 255 + 251).
    #[test]
    fn hand_worked_zero_page() {
        let mut want = vec![0x01, 0xf0, 0x1f];
        want.extend([255; 15]);
        want.extend([251, 0, 0x00, 0xf0, 0x00]);
        assert_eq!(packed(&[0u8; 4096]), want);
    }

    #[test]
    fn the_code_table_inverts_the_pairs() {
        for (c, &(l, m)) in PAIRS.iter().enumerate() {
            assert_eq!(CODE[l as usize * CODE_LENS + m as usize] as usize, c);
            assert_eq!(CODED[c], l as u16 | (m as u16) << 4);
        }
        assert_eq!(CODE.iter().filter(|&&c| c != ESCAPE).count(), PAIRS.len());
    }

    /// Runs of every short pattern (the decoder's pattern and chunk
    /// copies), of many lengths, placed from the block's start to its end
    /// (where the exact path takes over).
    #[test]
    fn patterns_of_every_period_round_trip_anywhere() {
        let mut seed = 7u32;
        for period in 1..=20usize {
            for len in [5usize, 9, 17, 31, 33, 64, 300, 1000] {
                for at in [0usize, 13, 4096 - 64 - len - period, 4096 - len - period] {
                    let mut block: Vec<u8> = (0..4096)
                        .map(|_| {
                            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                            (seed >> 24) as u8
                        })
                        .collect();
                    for k in 0..len + period {
                        block[at + k] = block[at + k % period];
                    }
                    packed(&block);
                }
            }
        }
    }

    #[test]
    fn long_literals_and_copies_and_far_offsets_round_trip() {
        let mut block = vec![0u8; 65536];
        for (k, b) in block.iter_mut().enumerate() {
            *b = ((k * 7919) >> 3) as u8 ^ (k / 5000) as u8 ^ (k.wrapping_mul(2_654_435_761) >> 13) as u8;
        }
        block.copy_within(100..4000, 60000);
        block.copy_within(10_000..10_300, 10_300 + 4095 - 300);
        packed(&block);
        packed(&block[..4096]);
        packed(&block[60000 - 2048..60000 + 2048]);
    }

    /// The next state of a 64-bit linear congruential generator.
    fn next(seed: u64) -> u64 {
        seed.wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407)
    }

    #[test]
    fn stale_table_entries_are_harmless() {
        let mut codec = PageLz::new();
        let (mut out, mut back) = (vec![0u8; 8192], vec![0u8; 4096]);
        let mut seed = 1u64;
        for round in 0..300 {
            let page: Vec<u8> = (0..4096)
                .map(|k| {
                    seed = next(seed);
                    if (k / 64 + round) % 3 == 0 {
                        (seed >> 59) as u8
                    } else {
                        b"page fault "[k % 11]
                    }
                })
                .collect();
            let len = [4096, 64, 1024, 4, 2048][round % 5];
            let n = codec.compress(&page[..len], &mut out).unwrap();
            codec.decompress(&out[..n], &mut back[..len]).unwrap();
            assert_eq!(back[..len], page[..len], "round {round}");
        }
    }

    /// The encoder's common path writes a few bytes past what it keeps;
    /// with a budget of exactly the block's packed size it must still
    /// write the same block, and with a byte less refuse.
    #[test]
    fn an_exact_budget_is_enough_and_a_byte_less_is_not() {
        let mut seed = 3u64;
        for round in 0..400 {
            let words: Vec<u64> = (0..512)
                .map(|k| {
                    seed = next(seed);
                    match (k + round) % 7 {
                        0 | 1 => 0x7f3a_0000_1000 + 16 * (seed >> 58),
                        2 => seed >> (round % 64),
                        3 => u64::from_le_bytes(*b"heap key"),
                        _ => k as u64,
                    }
                })
                .collect();
            let page: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let want = packed(&page);
            // A fresh table each time, so that the parse is `packed`'s.
            let mut out = vec![0u8; want.len()];
            assert_eq!(PageLz::new().compress(&page, &mut out), Ok(want.len()), "round {round}");
            assert_eq!(out, want, "round {round}");
            assert!(matches!(
                PageLz::new().compress(&page, &mut out[..want.len() - 1]),
                Err(CompressError::DoesNotFit { .. })
            ));
        }
    }

    #[test]
    fn too_small_a_budget_is_an_error() {
        let block: Vec<u8> = (0..4096u32)
            .map(|k| (k.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let mut out = [0u8; 100];
        assert!(matches!(
            PageLz::new().compress(&block, &mut out),
            Err(CompressError::DoesNotFit { .. })
        ));
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut block = [0u8; 4];
        let cases: [(&[u8], DecodeError); 6] = [
            (&[0x00, 0x10, 9], DecodeError::Corrupt("a copy of offset 0")),
            (&[0x00, 0xf0, 0x01], DecodeError::Corrupt("the end sequence has a copy")),
            (
                &[0x00, 0xf0, 0x20, 1, 2],
                DecodeError::Corrupt("the block ends at the wrong length"),
            ),
            (&[0x00, 0xf0, 0x40, 1, 2, 3, 4, 5], DecodeError::TrailingBytes(1)),
            (&[0x05, 0x10, 1], DecodeError::Corrupt("copy reaches before the block")),
            (&[0x00, 0xf0, 0x40, 1, 2], DecodeError::Truncated),
        ];
        for (input, want) in cases {
            assert_eq!(decode(input, &mut block), Err(want), "{input:x?}");
        }
    }
}

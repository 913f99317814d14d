//! BDI, Base-Delta-Immediate compression (Pekhimenko et al., 2012): a
//! cache-line codec that stores a line as one base and small deltas.
//!
//! The block is coded line by line (64 bytes; the last line may be
//! shorter). A line is read as `n` elements of `B` bytes (8, 4 or 2,
//! little-endian); each element is coded as a `D`-byte signed delta either
//! from the line's base or from zero (the "immediate"), one mask bit
//! saying which. Each line starts with a byte naming its encoding:
//!
//! ```text
//! 0        all zero                      (nothing follows)
//! 1        one 8-byte value repeated     (the value)
//! 2..=7    base B, deltas D: (8,1) (8,2) (8,4) (4,1) (4,2) (2,1)
//!          then the base (B bytes), the mask (ceil(n/8) bytes, bit i for
//!          element i: 1 = from the base), the deltas (n x D bytes)
//! 8        the line as it is
//! ```
//!
//! Choices: the base is the first element that is not itself a small
//! value (zero when all are); the smallest encoding that fits wins, ties
//! to the lower number; mask bits past the last element must be zero; an
//! encoding whose element size does not divide the line's length is not
//! used (a last line of 4 bytes can only be zero, (4,·), (2,1) or raw).

use crate::{valid_block_len, Codec, CompressError, DecodeError};

const LINE: usize = 64;

/// (base bytes, delta bytes) of encodings 2..=7.
const SHAPES: [(usize, usize); 6] = [(8, 1), (8, 2), (8, 4), (4, 1), (4, 2), (2, 1)];

/// BDI codec. See the module docs.
#[derive(Default)]
pub struct Bdi;

impl Bdi {
    /// Makes a BDI codec (it keeps no state).
    pub fn new() -> Self {
        Bdi
    }
}

#[inline]
fn element(line: &[u8], i: usize, b: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..b].copy_from_slice(&line[i * b..i * b + b]);
    u64::from_le_bytes(v)
}

/// Whether `v`, a `b`-byte value, is a `d`-byte signed value sign-extended.
#[inline]
fn fits(v: u64, b: usize, d: usize) -> bool {
    let shift = 64 - 8 * b as u32;
    let s = ((v << shift) as i64) >> shift;
    let half = 1i64 << (8 * d as u32 - 1);
    (-half..half).contains(&s)
}

#[inline]
fn mask_of(b: usize) -> u64 {
    if b == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * b)) - 1
    }
}

/// The payload size of line `line` under shape `(b, d)`, with its base,
/// or `None` if some element fits neither way.
fn shape_size(line: &[u8], b: usize, d: usize) -> Option<(usize, u64)> {
    if !line.len().is_multiple_of(b) {
        return None;
    }
    let n = line.len() / b;
    let m = mask_of(b);
    let mut base = None;
    for i in 0..n {
        let v = element(line, i, b);
        if fits(v, b, d) {
            continue;
        }
        let base = *base.get_or_insert(v);
        if !fits(v.wrapping_sub(base) & m, b, d) {
            return None;
        }
    }
    Some((b + n.div_ceil(8) + n * d, base.unwrap_or(0)))
}

/// Codes one line into `out`; the bytes written, or `None` if `out` is
/// too short.
fn encode_line(line: &[u8], out: &mut [u8]) -> Option<usize> {
    let put = |out: &mut [u8], at: usize, bytes: &[u8]| -> Option<()> {
        out.get_mut(at..at + bytes.len())?.copy_from_slice(bytes);
        Some(())
    };
    if line.iter().all(|&x| x == 0) {
        put(out, 0, &[0])?;
        return Some(1);
    }
    if line.len().is_multiple_of(8) && line.chunks_exact(8).all(|c| c == &line[..8]) {
        put(out, 0, &[1])?;
        put(out, 1, &line[..8])?;
        return Some(9);
    }
    let best = SHAPES
        .iter()
        .enumerate()
        .filter_map(|(k, &(b, d))| shape_size(line, b, d).map(|(size, base)| (size, k, base)))
        .min_by_key(|&(size, k, _)| (size, k));
    match best {
        Some((size, k, base)) if size < line.len() => {
            let (b, d) = SHAPES[k];
            let n = line.len() / b;
            put(out, 0, &[2 + k as u8])?;
            put(out, 1, &base.to_le_bytes()[..b])?;
            let m = mask_of(b);
            let mut mask = [0u8; 4];
            let deltas = 1 + b + n.div_ceil(8);
            for i in 0..n {
                let v = element(line, i, b);
                let delta = if fits(v, b, d) {
                    v
                } else {
                    mask[i / 8] |= 1 << (i % 8);
                    v.wrapping_sub(base) & m
                };
                put(out, deltas + i * d, &delta.to_le_bytes()[..d])?;
            }
            put(out, 1 + b, &mask[..n.div_ceil(8)])?;
            Some(1 + size)
        }
        _ => {
            put(out, 0, &[8])?;
            put(out, 1, line)?;
            Some(1 + line.len())
        }
    }
}

/// Decodes one line from the front of `input`; the bytes read.
fn decode_line(input: &[u8], line: &mut [u8]) -> Result<usize, DecodeError> {
    let take = |at: usize, len: usize| input.get(at..at + len).ok_or(DecodeError::Truncated);
    match *input.first().ok_or(DecodeError::Truncated)? {
        0 => {
            line.fill(0);
            Ok(1)
        }
        1 => {
            if !line.len().is_multiple_of(8) {
                return Err(DecodeError::Corrupt(
                    "a repeated 8-byte value in a line that is not whole 8-byte values",
                ));
            }
            let v = take(1, 8)?;
            line.chunks_exact_mut(8).for_each(|c| c.copy_from_slice(v));
            Ok(9)
        }
        k @ 2..=7 => {
            let (b, d) = SHAPES[k as usize - 2];
            if !line.len().is_multiple_of(b) {
                return Err(DecodeError::Corrupt("an element size that does not divide the line"));
            }
            let n = line.len() / b;
            let base = element(take(1, b)?, 0, b);
            let mask = take(1 + b, n.div_ceil(8))?;
            if !n.is_multiple_of(8) && mask[n / 8] >> (n % 8) != 0 {
                return Err(DecodeError::Corrupt("mask bits past the last element"));
            }
            let deltas = take(1 + b + n.div_ceil(8), n * d)?;
            let m = mask_of(b);
            for i in 0..n {
                let delta = element(deltas, i, d);
                let shift = 64 - 8 * d as u32;
                let delta = (((delta << shift) as i64) >> shift) as u64;
                let from_base = mask[i / 8] >> (i % 8) & 1 == 1;
                let v = if from_base { base.wrapping_add(delta) } else { delta } & m;
                line[i * b..i * b + b].copy_from_slice(&v.to_le_bytes()[..b]);
            }
            Ok(1 + b + n.div_ceil(8) + n * d)
        }
        8 => {
            line.copy_from_slice(take(1, line.len())?);
            Ok(1 + line.len())
        }
        _ => Err(DecodeError::Corrupt("unknown BDI line encoding")),
    }
}

impl Codec for Bdi {
    fn name(&self) -> &'static str {
        "bdi"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let mut at = 0;
        for line in block.chunks(LINE) {
            let budget = out.len();
            at += out
                .get_mut(at..)
                .and_then(|rest| encode_line(line, rest))
                .ok_or(CompressError::DoesNotFit { budget })?;
        }
        Ok(at)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let mut at = 0;
        for line in block.chunks_mut(LINE) {
            at += decode_line(input.get(at..).unwrap_or(&[]), line)?;
        }
        if at != input.len() {
            return Err(DecodeError::TrailingBytes(input.len() - at));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(line: &[u8]) -> usize {
        let mut out = [0u8; 128];
        let n = Bdi.compress(line, &mut out).unwrap();
        let mut back = vec![0u8; line.len()];
        Bdi.decompress(&out[..n], &mut back).unwrap();
        assert_eq!(back, line);
        n
    }

    fn of_u64(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn each_encoding_takes_its_bytes() {
        assert_eq!(size(&[0; 64]), 1);
        assert_eq!(size(&of_u64(&[0xDEAD_BEEF_0000_0001; 8])), 9);
        // Pointers into one region with small integers among them: base 8,
        // deltas of 1 byte, mask: 1 + 8 + 1 + 8 = 18 bytes.
        let p = 0x7F12_3456_7000u64;
        assert_eq!(size(&of_u64(&[p, p + 8, 3, p + 16, p + 100, 0, p - 5, 7])), 18);
        // Deltas of 2 bytes: 1 + 8 + 1 + 16.
        assert_eq!(size(&of_u64(&[p, p + 1000, p - 2000, 5, p, p, p + 30_000, 1])), 26);
        // Random words: raw, 65 bytes.
        let noise: Vec<u8> = (0..64u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect();
        assert_eq!(size(&noise), 65);
        // A 4-byte last line: base 4, delta 1, 1 + 4 + 1 + 1 = 7 > 4 + 1: raw.
        assert_eq!(size(&[9, 0, 0, 0]), 5);
    }

    #[test]
    fn stray_mask_bits_and_unknown_encodings_are_refused() {
        let mut line = [0u8; 64];
        assert!(matches!(Bdi.decompress(&[9], &mut line), Err(DecodeError::Corrupt(_))));
        // (8,1) with 8 elements has no spare mask bits; (4,1) on a 4-byte
        // line has 7.
        let mut short = [0u8; 4];
        assert!(matches!(
            Bdi.decompress(&[5, 1, 0, 0, 0, 0b10, 0], &mut short),
            Err(DecodeError::Corrupt(_))
        ));
        assert!(Bdi.decompress(&[5, 1, 0, 0, 0, 0b01, 0], &mut short).is_ok());
    }
}

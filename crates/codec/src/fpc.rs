//! FPC, Frequent Pattern Compression (Alameldeen and Wood, 2004): the
//! cache-line codec that paper 003 §6 compares C-Pack with.
//!
//! Each 32-bit word gets a 3-bit prefix naming the pattern it matches,
//! then only the bits the pattern leaves open:
//!
//! ```text
//! 000 + 3    a run of 1..8 zero words (the field is the run length - 1)
//! 001 + 4    a 4-bit value, sign-extended
//! 010 + 8    an 8-bit value, sign-extended
//! 011 + 16   a 16-bit value, sign-extended
//! 100 + 16   the upper halfword, the lower one zero
//! 101 + 16   two halfwords, each an 8-bit value sign-extended (low byte of each)
//! 110 + 8    a byte repeated four times
//! 111 + 32   the word as it is
//! ```
//!
//! One LSB-first bit stream, prefix first; the last byte is zero-padded.
//! Choices the description leaves open: words are little-endian, as memory
//! is on the machines ccvm runs on; where two patterns fit, the shorter
//! wins, and among equals the lower prefix; a zero word always starts or
//! extends a run.

use crate::bits::{BitReader, BitWriter};
use crate::{valid_block_len, word_at, Codec, CompressError, DecodeError};

/// FPC codec. See the module docs.
#[derive(Default)]
pub struct Fpc;

impl Fpc {
    /// Makes an FPC codec (it keeps no state).
    pub fn new() -> Self {
        Fpc
    }
}

/// Whether `w` is a `bits`-bit value sign-extended to 32 bits.
#[inline]
fn fits_signed(w: u32, bits: u32) -> bool {
    let v = w as i32;
    v >> (bits - 1) == 0 || v >> (bits - 1) == -1
}

/// Sign-extends the low `bits` bits of `v`.
#[inline]
fn extend(v: u32, bits: u32) -> u32 {
    (((v << (32 - bits)) as i32) >> (32 - bits)) as u32
}

/// The (prefix, data bits, data) a non-zero word is coded with.
#[inline]
fn pattern(w: u32) -> (u32, u32, u32) {
    if fits_signed(w, 4) {
        (0b001, 4, w & 0xF)
    } else if fits_signed(w, 8) {
        (0b010, 8, w & 0xFF)
    } else if w == (w & 0xFF) * 0x0101_0101 {
        (0b110, 8, w & 0xFF)
    } else if fits_signed(w, 16) {
        (0b011, 16, w & 0xFFFF)
    } else if w & 0xFFFF == 0 {
        (0b100, 16, w >> 16)
    } else if halfword_byte(w & 0xFFFF) && halfword_byte(w >> 16) {
        (0b101, 16, (w & 0xFF) | (w >> 16 & 0xFF) << 8)
    } else {
        (0b111, 32, w)
    }
}

/// Whether the halfword `h` is a byte sign-extended to 16 bits.
#[inline]
fn halfword_byte(h: u32) -> bool {
    let v = h as u16 as i16;
    v >> 7 == 0 || v >> 7 == -1
}

impl Codec for Fpc {
    fn name(&self) -> &'static str {
        "fpc"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let words = block.len() / 4;
        let mut bits = BitWriter::new(out);
        let mut i = 0;
        while i < words {
            let w = word_at(block, i);
            if w == 0 {
                let run = (i..words.min(i + 8)).take_while(|&j| word_at(block, j) == 0).count();
                bits.put(0b000, 3)?;
                bits.put(run as u32 - 1, 3)?;
                i += run;
                continue;
            }
            let (prefix, n, data) = pattern(w);
            bits.put(prefix, 3)?;
            bits.put(data, n)?;
            i += 1;
        }
        bits.finish()
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let words = block.len() / 4;
        let mut bits = BitReader::new(input);
        let mut i = 0;
        while i < words {
            let w = match bits.get(3)? {
                0b000 => {
                    let run = bits.get(3)? as usize + 1;
                    if i + run > words {
                        return Err(DecodeError::Corrupt("a zero run goes past the block"));
                    }
                    block[i * 4..(i + run) * 4].fill(0);
                    i += run;
                    continue;
                }
                0b001 => extend(bits.get(4)?, 4),
                0b010 => extend(bits.get(8)?, 8),
                0b011 => extend(bits.get(16)?, 16),
                0b100 => bits.get(16)? << 16,
                0b101 => {
                    let d = bits.get(16)?;
                    (extend(d & 0xFF, 8) & 0xFFFF) | (extend(d >> 8, 8) & 0xFFFF) << 16
                }
                0b110 => bits.get(8)? * 0x0101_0101,
                _ => bits.get(32)?,
            };
            block[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            i += 1;
        }
        bits.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(words: &[u32]) -> usize {
        crate::round_trip_size(&mut Fpc, words)
    }

    #[test]
    fn each_pattern_takes_its_bits() {
        // Hand-counted: prefix 3 bits + data, padded to whole bytes.
        assert_eq!(size(&[0; 16]), 2, "two runs of 8: 2 x 6 bits");
        assert_eq!(size(&[0xFFFF_FFFE]), 1, "-2 in 4 bits: 7 bits");
        assert_eq!(size(&[0x7F]), 2, "127 in 8 bits: 11 bits");
        assert_eq!(size(&[0x4141_4141]), 2, "repeated byte: 11 bits");
        assert_eq!(size(&[0xFFFF_8000]), 3, "-32768 in 16 bits: 19 bits");
        assert_eq!(size(&[0x1234_0000]), 3, "upper halfword: 19 bits");
        assert_eq!(size(&[0x0012_FF80]), 3, "two sign-extended bytes: 19 bits");
        assert_eq!(size(&[0x1234_5678]), 5, "uncompressed: 35 bits");
        assert_eq!(size(&[0, 5, 0, 0]), 3, "run, 4-bit, run: 6 + 7 + 6 = 19 bits");
    }
}

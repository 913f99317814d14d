//! Delta16, MEMMU's compressor for 16-bit sensor samples (paper 003, §5.4,
//! Algorithm 2).
//!
//! The block is read as little-endian 16-bit samples. The first is written
//! raw; each later one as its difference from the previous sample in a
//! MAXBITS-bit two's-complement field, or, when the difference does not fit,
//! as an escape (the MAGIC_CODE) followed by the raw sample. The encoder
//! gives up as soon as its output would be larger than the input.
//!
//! # Format
//!
//! ```text
//! byte 0   MAXBITS (2..=15)
//! bits     LSB first: first sample (16 bits), then per sample a MAXBITS-bit
//!          field: a delta in -(2^(MAXBITS-1) - 1) ..= 2^(MAXBITS-1) - 1, or
//!          the escape 2^(MAXBITS-1) (the field's most negative value)
//!          followed by the raw 16-bit sample
//! ```
//!
//! Choices the paper leaves open: "log2 δ ≤ MAXBITS" is read as "δ fits a
//! signed MAXBITS-bit field", with the field's most negative value reserved
//! as MAGIC_CODE so no separate flag bit is needed; MAXBITS travels in the
//! first byte so any Delta16 decoder reads any Delta16 block. Samples wrap
//! modulo 2^16, so every input round-trips.

use crate::bits::{BitReader, BitWriter};
use crate::{valid_block_len, Codec, CompressError, DecodeError};

/// Delta16 codec. See the module docs.
pub struct Delta16 {
    max_bits: u32,
}

impl Default for Delta16 {
    /// MAXBITS = 6, the paper's choice (95% of its sound deltas fit).
    fn default() -> Self {
        Delta16 { max_bits: 6 }
    }
}

impl Delta16 {
    /// A Delta16 codec writing `max_bits`-bit deltas.
    ///
    /// # Panics
    ///
    /// If `max_bits` is not in 2..=15.
    ///
    /// ```
    /// use ccvm_codec::{delta16::Delta16, Codec};
    /// let samples: Vec<u8> = (0..2048u16).flat_map(|i| (500 + i % 7).to_le_bytes()).collect();
    /// let mut out = [0u8; 4096];
    /// let n = Delta16::new(4).compress(&samples, &mut out).unwrap();
    /// assert!(n < 1100);
    /// ```
    pub fn new(max_bits: u32) -> Self {
        assert!((2..=15).contains(&max_bits), "MAXBITS must be 2..=15, not {max_bits}");
        Delta16 { max_bits }
    }
}

impl Codec for Delta16 {
    fn name(&self) -> &'static str {
        "delta16"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let m = self.max_bits;
        let escape = 1u32 << (m - 1);
        let max_delta = escape as i32 - 1;
        let field = (1u32 << m) - 1;
        // Early termination: never let the output grow past the input.
        let full = CompressError::DoesNotFit { budget: out.len() };
        let limit = out.len().min(block.len());
        let (head, body) = out[..limit].split_first_mut().ok_or(full)?;
        *head = m as u8;
        let mut bits = BitWriter::new(body);
        let mut put = |v, n| bits.put(v, n).map_err(|_| full);
        let mut samples = block.chunks_exact(2).map(|s| u16::from_le_bytes([s[0], s[1]]));
        let mut prev = samples.next().unwrap_or(0);
        put(prev as u32, 16)?;
        for s in samples {
            let delta = s.wrapping_sub(prev) as i16 as i32;
            if delta.abs() <= max_delta {
                put(delta as u32 & field, m)?;
            } else {
                put(escape, m)?;
                put(s as u32, 16)?;
            }
            prev = s;
        }
        Ok(1 + bits.finish().map_err(|_| full)?)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let (&m, body) = input.split_first().ok_or(DecodeError::Truncated)?;
        let m = m as u32;
        if !(2..=15).contains(&m) {
            return Err(DecodeError::Corrupt("MAXBITS out of range"));
        }
        let escape = 1u32 << (m - 1);
        let mut bits = BitReader::new(body);
        let mut out = block.chunks_exact_mut(2);
        let mut prev = bits.get(16)? as u16;
        if let Some(first) = out.next() {
            first.copy_from_slice(&prev.to_le_bytes());
        }
        for o in out {
            let f = bits.get(m)?;
            let s = if f == escape {
                bits.get(16)? as u16
            } else {
                // Sign-extend the m-bit field.
                let delta = ((f << (32 - m)) as i32) >> (32 - m);
                prev.wrapping_add(delta as u16)
            };
            o.copy_from_slice(&s.to_le_bytes());
            prev = s;
        }
        bits.finish()
    }
}

//! Least-significant-bit-first bit streams shared by the codecs whose
//! formats are variable-length codes (PBPM, C-Pack, Delta16).
//!
//! The writer checks the caller's budget as it goes, so a block that will
//! not fit is abandoned as soon as it overflows. The reader refills 64 bits
//! at a time while at least 8 input bytes remain and byte by byte at the
//! end, so it never reads out of bounds; running out of input is
//! [`DecodeError::Truncated`].

use crate::{CompressError, DecodeError};

/// Writes values of up to 32 bits, least significant bit first.
pub(crate) struct BitWriter<'a> {
    out: &'a mut [u8],
    pos: usize,
    acc: u64,
    bits: u32,
}

impl<'a> BitWriter<'a> {
    pub(crate) fn new(out: &'a mut [u8]) -> Self {
        BitWriter {
            out,
            pos: 0,
            acc: 0,
            bits: 0,
        }
    }

    /// Appends the low `n` bits of `v` (`n <= 32`; `v < 2^n`).
    #[inline(always)]
    pub(crate) fn put(&mut self, v: u32, n: u32) -> Result<(), CompressError> {
        debug_assert!(n <= 32 && (n == 32 || v >> n == 0));
        self.acc |= (v as u64) << self.bits;
        self.bits += n;
        if self.bits >= 32 {
            let Some(dst) = self.out.get_mut(self.pos..self.pos + 4) else {
                return Err(CompressError::DoesNotFit { budget: self.out.len() });
            };
            dst.copy_from_slice(&(self.acc as u32).to_le_bytes());
            self.pos += 4;
            self.acc >>= 32;
            self.bits -= 32;
        }
        Ok(())
    }

    /// Bits written so far.
    #[inline]
    pub(crate) fn bit_len(&self) -> usize {
        self.pos * 8 + self.bits as usize
    }

    /// Flushes the last partial byte (padded with zero bits) and returns the
    /// number of bytes written.
    pub(crate) fn finish(mut self) -> Result<usize, CompressError> {
        let tail = self.bits.div_ceil(8) as usize;
        let budget = self.out.len();
        let dst = self
            .out
            .get_mut(self.pos..self.pos + tail)
            .ok_or(CompressError::DoesNotFit { budget })?;
        dst.copy_from_slice(&self.acc.to_le_bytes()[..tail]);
        self.pos += tail;
        Ok(self.pos)
    }
}

/// Reads values of up to 32 bits, least significant bit first.
pub(crate) struct BitReader<'a> {
    inp: &'a [u8],
    pos: usize,
    acc: u64,
    bits: u32,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(inp: &'a [u8]) -> Self {
        BitReader {
            inp,
            pos: 0,
            acc: 0,
            bits: 0,
        }
    }

    #[inline(always)]
    fn refill(&mut self) {
        if let Some(b) = self.inp.get(self.pos..self.pos + 8) {
            let v = u64::from_le_bytes(b.try_into().unwrap());
            self.acc |= v << self.bits;
            let take = (63 - self.bits) / 8;
            self.pos += take as usize;
            self.bits += take * 8;
        } else {
            while self.bits <= 56 && self.pos < self.inp.len() {
                self.acc |= (self.inp[self.pos] as u64) << self.bits;
                self.pos += 1;
                self.bits += 8;
            }
        }
    }

    /// Returns the next `n` bits (`n <= 32`) without consuming them; bits
    /// beyond the end of input read as zero.
    #[inline(always)]
    pub(crate) fn peek(&mut self, n: u32) -> u32 {
        if self.bits < n {
            self.refill();
        }
        (self.acc & ((1u64 << n) - 1)) as u32
    }

    /// Consumes `n` bits that were peeked.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] if fewer than `n` bits remain.
    #[inline(always)]
    pub(crate) fn skip(&mut self, n: u32) -> Result<(), DecodeError> {
        if self.bits < n {
            self.refill();
            if self.bits < n {
                return Err(DecodeError::Truncated);
            }
        }
        self.acc >>= n;
        self.bits -= n;
        Ok(())
    }

    /// Reads and consumes the next `n` bits (`n <= 32`).
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] if fewer than `n` bits remain.
    #[inline(always)]
    pub(crate) fn get(&mut self, n: u32) -> Result<u32, DecodeError> {
        let v = self.peek(n);
        self.skip(n)?;
        Ok(v)
    }

    /// Checks that only zero padding bits (fewer than 8) remain.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        let left = (self.inp.len() - self.pos) + (self.bits / 8) as usize;
        if left > 0 {
            return Err(DecodeError::TrailingBytes(left));
        }
        if self.acc != 0 {
            return Err(DecodeError::Corrupt("non-zero padding bits"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_mixed_widths() {
        let fields: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| {
                let n = 1 + (i * 7) % 32;
                let v = i.wrapping_mul(2654435761) & (((1u64 << n) - 1) as u32);
                (v, n)
            })
            .collect();
        let mut buf = vec![0u8; 20000];
        let mut w = BitWriter::new(&mut buf);
        for &(v, n) in &fields {
            w.put(v, n).unwrap();
        }
        let bits = w.bit_len();
        let len = w.finish().unwrap();
        assert_eq!(len, bits.div_ceil(8));
        let mut r = BitReader::new(&buf[..len]);
        for &(v, n) in &fields {
            assert_eq!(r.get(n).unwrap(), v);
        }
        r.finish().unwrap();
        assert_eq!(r.get(8), Err(DecodeError::Truncated));
    }

    #[test]
    fn writer_reports_overflow() {
        let mut buf = [0u8; 3];
        let mut w = BitWriter::new(&mut buf);
        w.put(0xFFFF, 16).unwrap();
        w.put(0xFF, 8).unwrap();
        assert!(w.put(0xFF, 8).is_err());
        let mut buf = [0u8; 3];
        let mut w = BitWriter::new(&mut buf);
        w.put(0xFFFFFF, 24).unwrap();
        w.put(1, 1).unwrap();
        assert!(w.finish().is_err());
    }
}

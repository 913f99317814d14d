//! LZRW1 (Ross Williams, 1991): the fast LZ77 compressor that the earlier
//! compressed-caching studies (Douglis's among them) used, and that paper
//! 000 compares the WK codecs against.
//!
//! A 4096-entry hash table of the last position seen for each hash of three
//! bytes proposes one match candidate per item; a match of 3 to 18 bytes at
//! an offset of 1 to 4095 becomes a two-byte copy item, anything else a
//! literal byte. Items come in groups of 16 behind a 16-bit control word.
//!
//! # Format
//!
//! ```text
//! repeat: u16 LE control word (bit k set = item k is a copy), then 16 items
//!   literal: 1 byte
//!   copy:    2 bytes: (offset >> 8) << 4 | (length - 3), offset & 0xFF
//! ```
//!
//! Williams' format begins with a 4-byte flag saying whether the block was
//! stored raw; here the caller keeps raw blocks (see [`crate::Codec`]), so
//! the flag is dropped. Control bits for items past the end must be zero.

use crate::{valid_block_len, Codec, CompressError, DecodeError};

const HASH_SIZE: usize = 4096;
const MAX_OFFSET: usize = 4095;
const MAX_LEN: usize = 18;

/// LZRW1 codec. See the module docs.
pub struct Lzrw1 {
    table: Box<[u32; HASH_SIZE]>,
}

impl Default for Lzrw1 {
    fn default() -> Self {
        Self::new()
    }
}

impl Lzrw1 {
    /// Makes an LZRW1 codec with its hash table.
    pub fn new() -> Self {
        Lzrw1 {
            table: Box::new([0; HASH_SIZE]),
        }
    }
}

#[inline(always)]
fn hash(p: &[u8]) -> usize {
    let v = (((p[0] as u32) << 4 ^ p[1] as u32) << 4) ^ p[2] as u32;
    (40543u32.wrapping_mul(v) >> 4) as usize & (HASH_SIZE - 1)
}

impl Codec for Lzrw1 {
    fn name(&self) -> &'static str {
        "lzrw1"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let budget = out.len();
        let full = CompressError::DoesNotFit { budget };
        // Positions are stored +1 so that 0 means "none".
        self.table.fill(0);
        let n = block.len();
        let (mut i, mut o) = (0usize, 0usize);
        while i < n {
            let ctrl_at = o;
            if o + 2 > budget {
                return Err(full);
            }
            o += 2;
            let mut ctrl = 0u16;
            for k in 0..16 {
                if i >= n {
                    break;
                }
                let (mut len, mut offset) = (0usize, 0usize);
                if i + 3 <= n {
                    let h = hash(&block[i..]);
                    let cand = self.table[h] as usize;
                    self.table[h] = i as u32 + 1;
                    if cand > 0 && i - (cand - 1) <= MAX_OFFSET {
                        let c = cand - 1;
                        let max = MAX_LEN.min(n - i);
                        while len < max && block[c + len] == block[i + len] {
                            len += 1;
                        }
                        offset = i - c;
                    }
                }
                if len >= 3 {
                    if o + 2 > budget {
                        return Err(full);
                    }
                    out[o] = ((offset >> 8) << 4) as u8 | (len - 3) as u8;
                    out[o + 1] = offset as u8;
                    o += 2;
                    ctrl |= 1 << k;
                    i += len;
                } else {
                    if o >= budget {
                        return Err(full);
                    }
                    out[o] = block[i];
                    o += 1;
                    i += 1;
                }
            }
            out[ctrl_at..ctrl_at + 2].copy_from_slice(&ctrl.to_le_bytes());
        }
        Ok(o)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let n = block.len();
        let (mut i, mut o) = (0usize, 0usize);
        while o < n {
            let c = input.get(i..i + 2).ok_or(DecodeError::Truncated)?;
            let ctrl = u16::from_le_bytes([c[0], c[1]]);
            i += 2;
            for k in 0..16 {
                if o >= n {
                    if ctrl >> k != 0 {
                        return Err(DecodeError::Corrupt("control bits set past the end"));
                    }
                    break;
                }
                if ctrl >> k & 1 == 0 {
                    block[o] = *input.get(i).ok_or(DecodeError::Truncated)?;
                    i += 1;
                    o += 1;
                } else {
                    let c = input.get(i..i + 2).ok_or(DecodeError::Truncated)?;
                    i += 2;
                    let offset = ((c[0] as usize) >> 4) << 8 | c[1] as usize;
                    let len = (c[0] & 15) as usize + 3;
                    if offset == 0 || offset > o {
                        return Err(DecodeError::Corrupt("copy reaches before the block"));
                    }
                    if len > n - o {
                        return Err(DecodeError::Corrupt("copy runs past the block"));
                    }
                    for j in o..o + len {
                        block[j] = block[j - offset];
                    }
                    o += len;
                }
            }
        }
        if i != input.len() {
            return Err(DecodeError::TrailingBytes(input.len() - i));
        }
        Ok(())
    }
}

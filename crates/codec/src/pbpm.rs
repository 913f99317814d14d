//! PBPM, pattern-based partial match (paper 003, §4.2, Table 4.1 and
//! Algorithm 1).
//!
//! Each 32-bit word is coded as the first that applies of: zero (`zzzz`),
//! one low byte (`zzzx`), bytes 0 and 2 (`zxzx`), then a search of a
//! 16-entry two-way set-associative dictionary (8 sets, LRU in each set)
//! for a full match, a match of the upper three bytes (`mmmx`) or of the
//! upper two (`mmxx`); otherwise the whole word (`xxxx`). Partial matches
//! and misses insert the word into the least recently used way of its set.
//!
//! # Format
//!
//! As in Algorithm 1, three streams: TAPE (the codes), INDX (4-bit
//! dictionary indices) and DATA (literal bytes).
//!
//! ```text
//! u16 LE   length of TAPE in bytes
//! u16 LE   number of indices in INDX
//! TAPE     codes, LSB first: 00 zzzz, 01 xxxx, 10 mmmm, then 11 + 2 more bits:
//!          00 zzzx, 01 mmxx, 10 mmmx, 11 zxzx (the sizes of Table 4.1)
//! INDX     two indices a byte, first in the low nibble; index = set * 2 + way
//! DATA     the rest: zzzx and mmmx give byte 0; zxzx bytes 0 and 2;
//!          mmxx bytes 0-1; xxxx all four (little-endian)
//! ```
//!
//! Choices the paper leaves open: the set is chosen by looking the word's
//! third byte (bits 16-23, the byte every partial match shares) up in a
//! fixed table of pseudo-random set numbers, as §4.2.2 describes; a full
//! match also refreshes its way's recency; the dictionary starts zeroed.

use crate::bits::{BitReader, BitWriter};
use crate::{valid_block_len, word_at, Codec, CompressError, DecodeError, MAX_BLOCK};

const SETS: usize = 8;

/// The static hash table: third byte → set, pseudo-random but fixed
/// (an xorshift sequence), so encoder and decoder agree.
const SET_OF_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut x: u32 = 0x2545_F491;
    let mut i = 0;
    while i < 256 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        t[i] = (x >> 29) as u8;
        i += 1;
    }
    t
};

// Kinds, in the order of the decoder's table.
const K_ZZZZ: u8 = 0;
const K_XXXX: u8 = 1;
const K_MMMM: u8 = 2;
const K_ZZZX: u8 = 3;
const K_MMXX: u8 = 4;
const K_MMMX: u8 = 5;
const K_ZXZX: u8 = 6;

/// (kind, code bits) for every 4-bit peek of the tape.
const DECODE: [(u8, u32); 16] = {
    let mut t = [(0u8, 0u32); 16];
    let mut v = 0;
    while v < 16 {
        t[v] = match v & 3 {
            0 => (K_ZZZZ, 2),
            1 => (K_XXXX, 2),
            2 => (K_MMMM, 2),
            _ => (K_ZZZX + (v >> 2) as u8, 4),
        };
        v += 1;
    }
    t
};

/// Two-way dictionary with one LRU bit per set.
struct Dict {
    ways: [[u32; 2]; SETS],
    lru: [u8; SETS],
}

impl Dict {
    fn new() -> Self {
        Dict {
            ways: [[0; 2]; SETS],
            lru: [0; SETS],
        }
    }

    #[inline(always)]
    fn set_of(w: u32) -> usize {
        SET_OF_BYTE[(w >> 16 & 0xFF) as usize] as usize
    }

    #[inline(always)]
    fn insert(&mut self, set: usize, w: u32) {
        let victim = self.lru[set] as usize;
        self.ways[set][victim] = w;
        self.lru[set] = 1 - victim as u8;
    }
}

/// PBPM codec. See the module docs.
pub struct Pbpm {
    tape: Box<[u8]>,
    idx: Box<[u8]>,
    data: Box<[u8]>,
}

impl Default for Pbpm {
    fn default() -> Self {
        Self::new()
    }
}

impl Pbpm {
    /// Makes a PBPM codec with working memory for the largest block.
    pub fn new() -> Self {
        Pbpm {
            tape: vec![0; MAX_BLOCK / 8 + 16].into_boxed_slice(),
            idx: vec![0; MAX_BLOCK / 4 + 2].into_boxed_slice(),
            data: vec![0; MAX_BLOCK + 8].into_boxed_slice(),
        }
    }
}

impl Codec for Pbpm {
    fn name(&self) -> &'static str {
        "pbpm"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let budget = out.len();
        let words = block.len() / 4;
        let mut dict = Dict::new();
        let mut tape = BitWriter::new(&mut self.tape);
        let (idx, data) = (&mut self.idx[..], &mut self.data[..]);
        let (mut ni, mut nd) = (0usize, 0usize);
        for i in 0..words {
            let w = word_at(block, i);
            if w == 0 {
                tape.put(0b00, 2)?;
            } else if w >> 8 == 0 {
                tape.put(0b0011, 4)?;
                data[nd] = w as u8;
                nd += 1;
            } else if w & 0xFF00_FF00 == 0 {
                tape.put(0b1111, 4)?;
                data[nd] = w as u8;
                data[nd + 1] = (w >> 16) as u8;
                nd += 2;
            } else {
                let set = Dict::set_of(w);
                let [d0, d1] = dict.ways[set];
                let (x0, x1) = (w ^ d0, w ^ d1);
                if x0 == 0 || x1 == 0 {
                    let way = (x0 != 0) as usize;
                    tape.put(0b10, 2)?;
                    idx[ni] = (set * 2 + way) as u8;
                    ni += 1;
                    dict.lru[set] = 1 - way as u8;
                } else if x0 >> 8 == 0 || x1 >> 8 == 0 {
                    tape.put(0b1011, 4)?;
                    idx[ni] = (set * 2 + (x0 >> 8 != 0) as usize) as u8;
                    ni += 1;
                    data[nd] = w as u8;
                    nd += 1;
                    dict.insert(set, w);
                } else if x0 >> 16 == 0 || x1 >> 16 == 0 {
                    tape.put(0b0111, 4)?;
                    idx[ni] = (set * 2 + (x0 >> 16 != 0) as usize) as u8;
                    ni += 1;
                    data[nd..nd + 2].copy_from_slice(&(w as u16).to_le_bytes());
                    nd += 2;
                    dict.insert(set, w);
                } else {
                    tape.put(0b01, 2)?;
                    data[nd..nd + 4].copy_from_slice(&w.to_le_bytes());
                    nd += 4;
                    dict.insert(set, w);
                }
            }
            if i & 63 == 63 && 4 + tape.bit_len() / 8 + ni / 2 + nd > budget {
                return Err(CompressError::DoesNotFit { budget });
            }
        }
        let tape_len = tape.finish()?;
        let idx_len = ni.div_ceil(2);
        let total = 4 + tape_len + idx_len + nd;
        if total > budget {
            return Err(CompressError::DoesNotFit { budget });
        }
        out[0..2].copy_from_slice(&(tape_len as u16).to_le_bytes());
        out[2..4].copy_from_slice(&(ni as u16).to_le_bytes());
        out[4..4 + tape_len].copy_from_slice(&self.tape[..tape_len]);
        idx[ni] = 0;
        for (o, p) in out[4 + tape_len..4 + tape_len + idx_len]
            .iter_mut()
            .zip(idx.chunks_exact(2))
        {
            *o = p[0] | p[1] << 4;
        }
        out[4 + tape_len + idx_len..total].copy_from_slice(&data[..nd]);
        Ok(total)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let header = input.get(..4).ok_or(DecodeError::Truncated)?;
        let tape_len = u16::from_le_bytes([header[0], header[1]]) as usize;
        let n_idx = u16::from_le_bytes([header[2], header[3]]) as usize;
        let idx_end = 4 + tape_len + n_idx.div_ceil(2);
        if input.len() < idx_end {
            return Err(DecodeError::Truncated);
        }
        let mut tape = BitReader::new(&input[4..4 + tape_len]);
        let idx = &input[4 + tape_len..idx_end];
        let data = &input[idx_end..];
        let mut dict = Dict::new();
        let (mut ni, mut nd) = (0usize, 0usize);
        let next_index = |ni: &mut usize| -> Result<usize, DecodeError> {
            if *ni >= n_idx {
                return Err(DecodeError::Corrupt("more dictionary indices used than stored"));
            }
            let v = idx[*ni / 2] >> (4 * (*ni & 1)) & 15;
            *ni += 1;
            Ok(v as usize)
        };
        for out in block.chunks_exact_mut(4) {
            let (kind, len) = DECODE[tape.peek(4) as usize];
            tape.skip(len)?;
            let need = [0usize, 4, 0, 1, 2, 1, 2][kind as usize];
            let bytes = data.get(nd..nd + need).ok_or(DecodeError::Truncated)?;
            nd += need;
            let w = match kind {
                K_ZZZZ => 0,
                K_ZZZX => bytes[0] as u32,
                K_ZXZX => bytes[0] as u32 | (bytes[1] as u32) << 16,
                K_XXXX => {
                    let w = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                    dict.insert(Dict::set_of(w), w);
                    w
                }
                _ => {
                    let x = next_index(&mut ni)?;
                    let (set, way) = (x >> 1, x & 1);
                    let d = dict.ways[set][way];
                    match kind {
                        K_MMMM => {
                            dict.lru[set] = 1 - way as u8;
                            d
                        }
                        K_MMMX => {
                            let w = (d & !0xFF) | bytes[0] as u32;
                            dict.insert(set, w);
                            w
                        }
                        K_MMXX => {
                            let w = (d & !0xFFFF) | u16::from_le_bytes([bytes[0], bytes[1]]) as u32;
                            dict.insert(set, w);
                            w
                        }
                        _ => unreachable!("kinds are 0..=6"),
                    }
                }
            };
            out.copy_from_slice(&w.to_le_bytes());
        }
        tape.finish()?;
        if ni != n_idx || (n_idx % 2 == 1 && idx[n_idx / 2] >> 4 != 0) {
            return Err(DecodeError::Corrupt("dictionary index count does not match"));
        }
        if nd != data.len() {
            return Err(DecodeError::TrailingBytes(data.len() - nd));
        }
        Ok(())
    }
}

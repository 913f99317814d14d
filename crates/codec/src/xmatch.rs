//! X-Match (Kjelsø, Gooch and Jones, 1996): the dictionary line codec with
//! partial matches that paper 003 §6.9.2 compares C-Pack with, and that
//! paper 002 assumes for full memory compression.
//!
//! The block is read as 4-byte tuples. A move-to-front dictionary holds the
//! last 16 distinct tuples (64 bytes, 003's dictionary size); a tuple that
//! agrees with an entry in at least two byte positions is a match, coded
//! as where the entry is, which bytes agree, and the bytes that do not:
//!
//! ```text
//! 1 + 32                      a miss: the tuple as it is
//! 0 + location + type + bytes a match:
//!     location   ceil(log2 n) bits, n the entries in the dictionary now
//!                (0 bits while it holds one)
//!     type       00         all four bytes agree; at location 0 (the
//!                           previous tuple again) 3 more bits follow:
//!                           how many more tuples repeat it, 0 to 7
//!                01 + 2     three agree; the field is the byte that differs
//!                1 + 3      two agree; the field indexes the pairs
//!                           (0,1) (0,2) (0,3) (1,2) (1,3) (2,3); 6, 7 invalid
//!     bytes      the differing bytes, 8 bits each, lowest position first
//! ```
//!
//! After each tuple the tuple itself goes to the front of the dictionary;
//! the entry it matched leaves (so entries stay distinct), or on a miss the
//! oldest entry leaves when all 16 are used. One LSB-first bit stream, the
//! last byte zero-padded; tuples are little-endian.
//!
//! Choices the description leaves open: among matching entries the one
//! agreeing in most bytes wins, and among equals the most recent; the
//! match types are coded with a fixed prefix code ordered by how much each
//! saves (the original's Huffman code was fitted to its own data); and
//! X-MatchPRO's run-length coding of repeated tuples is a 3-bit count after
//! a full match of the front entry, so that the zero words that fill
//! memory lines cost 9 bits per run of up to 8, as in FPC.

use crate::bits::{BitReader, BitWriter};
use crate::{valid_block_len, word_at, Codec, CompressError, DecodeError};

/// Dictionary entries.
const ENTRIES: usize = 16;

/// Byte positions that agree, for each two-byte match type.
const PAIRS: [u8; 6] = [0b0011, 0b0101, 0b1001, 0b0110, 0b1010, 0b1100];

/// X-Match codec. See the module docs.
#[derive(Default)]
pub struct XMatch;

impl XMatch {
    /// Makes an X-Match codec (its dictionary lives for one block).
    pub fn new() -> Self {
        XMatch
    }
}

/// Bits of a location among `n` entries.
#[inline]
fn location_bits(n: usize) -> u32 {
    usize::BITS - (n.max(1) - 1).leading_zeros()
}

/// Which byte positions of `a` and `b` agree, as a 4-bit mask.
#[inline]
fn agree(a: u32, b: u32) -> u8 {
    let x = a ^ b;
    (0..4).fold(0, |m, i| m | (((x >> (8 * i)) & 0xFF == 0) as u8) << i)
}

/// A move-to-front dictionary of distinct tuples.
struct Dictionary {
    tuples: [u32; ENTRIES],
    n: usize,
}

impl Dictionary {
    fn new() -> Self {
        Dictionary {
            tuples: [0; ENTRIES],
            n: 0,
        }
    }

    /// Puts `t` in front, dropping entry `matched` (or the oldest when full).
    #[inline]
    fn update(&mut self, t: u32, matched: Option<usize>) {
        let last = match matched {
            Some(i) => i,
            None if self.n < ENTRIES => {
                self.n += 1;
                self.n - 1
            }
            None => ENTRIES - 1,
        };
        self.tuples.copy_within(0..last, 1);
        self.tuples[0] = t;
    }
}

impl Codec for XMatch {
    fn name(&self) -> &'static str {
        "xmatch"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let mut bits = BitWriter::new(out);
        let mut dict = Dictionary::new();
        let words = block.len() / 4;
        let mut i = 0;
        while i < words {
            let t = word_at(block, i);
            i += 1;
            // The entry agreeing in most bytes; the most recent among equals.
            let mut best: Option<(usize, u8)> = None;
            for (k, &e) in dict.tuples[..dict.n].iter().enumerate() {
                let m = agree(t, e);
                if m.count_ones() >= 2 && best.is_none_or(|(_, b)| m.count_ones() > b.count_ones()) {
                    best = Some((k, m));
                    if m == 0b1111 {
                        break;
                    }
                }
            }
            match best {
                None => {
                    bits.put(1, 1)?;
                    bits.put(t, 32)?;
                }
                Some((k, mask)) => {
                    bits.put(0, 1)?;
                    bits.put(k as u32, location_bits(dict.n))?;
                    match mask.count_ones() {
                        4 if k == 0 => {
                            bits.put(0b00, 2)?;
                            let more = (i..words.min(i + 7)).take_while(|&j| word_at(block, j) == t).count();
                            bits.put(more as u32, 3)?;
                            i += more;
                        }
                        4 => bits.put(0b00, 2)?,
                        3 => {
                            bits.put(0b10, 2)?; // "01" LSB-first
                            bits.put((!mask & 0xF).trailing_zeros(), 2)?;
                        }
                        _ => {
                            bits.put(1, 1)?;
                            let index = PAIRS.iter().position(|&p| p == mask).expect("a two-byte mask");
                            bits.put(index as u32, 3)?;
                        }
                    }
                    for b in 0..4 {
                        if mask & (1 << b) == 0 {
                            bits.put(t >> (8 * b) & 0xFF, 8)?;
                        }
                    }
                }
            }
            dict.update(t, best.map(|(k, _)| k));
        }
        bits.finish()
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let mut bits = BitReader::new(input);
        let mut dict = Dictionary::new();
        let words = block.len() / 4;
        let mut i = 0;
        while i < words {
            let mut repeats = 0;
            let (t, matched) = if bits.get(1)? == 1 {
                (bits.get(32)?, None)
            } else {
                if dict.n == 0 {
                    return Err(DecodeError::Corrupt("a match before any tuple"));
                }
                let k = bits.get(location_bits(dict.n))? as usize;
                if k >= dict.n {
                    return Err(DecodeError::Corrupt("a match location past the dictionary"));
                }
                let mask = if bits.get(1)? == 0 {
                    if bits.get(1)? == 0 {
                        if k == 0 {
                            repeats = bits.get(3)? as usize;
                        }
                        0b1111
                    } else {
                        0b1111 & !(1u8 << bits.get(2)?)
                    }
                } else {
                    *PAIRS
                        .get(bits.get(3)? as usize)
                        .ok_or(DecodeError::Corrupt("an unknown match type"))?
                };
                let mut t = dict.tuples[k];
                for b in 0..4 {
                    if mask & (1 << b) == 0 {
                        t = t & !(0xFF << (8 * b)) | bits.get(8)? << (8 * b);
                    }
                }
                (t, Some(k))
            };
            if i + 1 + repeats > words {
                return Err(DecodeError::Corrupt("a run of repeated tuples goes past the block"));
            }
            for j in i..=i + repeats {
                block[j * 4..j * 4 + 4].copy_from_slice(&t.to_le_bytes());
            }
            i += 1 + repeats;
            dict.update(t, matched);
        }
        bits.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(words: &[u32]) -> usize {
        crate::round_trip_size(&mut XMatch, words)
    }

    #[test]
    fn each_kind_takes_its_bits() {
        // Hand-counted, padded to whole bytes.
        assert_eq!(size(&[0x1234_5678]), 5, "a miss: 33 bits");
        assert_eq!(size(&[7, 7]), 5, "miss 33 + a run: 1 + 0 location bits + 2 + 3 = 39");
        assert_eq!(size(&[0x1234_5678, 0x1234_56FF]), 6, "33 + (1 + 0 + 4 + 8) = 46");
        assert_eq!(size(&[0x1234_5678, 0x12FF_FF78]), 7, "33 + (1 + 0 + 4 + 16) = 54 bits");
        // Two entries: locations take a bit; the older one is at 1.
        assert_eq!(
            size(&[0xAAAA_AAAA, 0x5555_5555, 0xAAAA_AAAA]),
            9,
            "33 + 33 + (1 + 1 + 2) = 70"
        );
        assert_eq!(size(&[0; 16]), 6, "33 + runs of 8 and 7: 2 x 6 = 45 bits");
        assert_eq!(
            size(&[3, 4, 4, 4]),
            7,
            "33 + (1 + 0 + 4 + 8) + a run (1 + 1 + 2 + 3) = 53 bits"
        );
    }

    #[test]
    fn a_matched_entry_moves_to_the_front_without_duplicates() {
        let mut d = Dictionary::new();
        for t in [1, 2, 3] {
            d.update(t, None);
        }
        d.update(1, Some(2));
        assert_eq!(&d.tuples[..d.n], &[1, 3, 2]);
        for t in 10..30 {
            d.update(t, None);
        }
        assert_eq!(d.n, ENTRIES);
        assert_eq!(d.tuples[0], 29);
    }

    #[test]
    fn bad_streams_are_errors() {
        let mut block = [0u8; 8];
        // A match first.
        assert!(XMatch.decompress(&[0], &mut block).is_err());
        // A miss, then a two-byte match of type 7.
        let mut w = [0u8; 16];
        let mut b = BitWriter::new(&mut w);
        b.put(1, 1).unwrap();
        b.put(5, 32).unwrap();
        b.put(0, 1).unwrap();
        b.put(1, 1).unwrap();
        b.put(7, 3).unwrap();
        let n = b.finish().unwrap();
        assert!(matches!(
            XMatch.decompress(&w[..n], &mut block),
            Err(DecodeError::Corrupt(_))
        ));
    }
}

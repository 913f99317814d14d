//! PageLz's encoder: greedy, one hash probe per position, as LZ4's.
//!
//! Choices:
//!
//! * The hash table holds 16-bit positions and is never cleared (LZ4
//!   clears its 16 KiB on every call): a stale
//!   entry from an earlier block is used only when it lies before the
//!   position, within the window, and its four bytes equal the
//!   position's, so it is either a true match in this block or skipped.
//! * A match found is extended backwards into the pending literals and
//!   forwards eight bytes at a time.
//! * After a match, only the position two before its end becomes a
//!   candidate, as in LZ4: adding all of its positions was slower and,
//!   displacing older candidates, left pages larger (2.285 against 2.293
//!   overall on the 13 programs).
//! * Whether a candidate matches is one branch, taken only on a match: the
//!   tests that it lies before the position, within the window, and holds
//!   the same four bytes are combined without branches. A stale entry lies
//!   at or after the position half the time on a page unlike the last, and
//!   a branch on that alone, unpredictable, doubled the time spent on an
//!   incompressible page.
//! * After 64 misses in a row the step grows by a byte, and again every
//!   64 misses, so an incompressible page costs a fraction of a probe per
//!   byte.

use super::{decode, CODE, CODE_LENS, CODE_LITS, ESCAPE, MAX_OFFSET, MIN_MATCH};
use std::ptr;

use crate::lzmatch::common;
use crate::{valid_block_len, Codec, CompressError, DecodeError};

const HASH_BITS: u32 = 13;

/// PageLz codec. See the [module docs](super).
///
/// ```
/// use ccvm_codec::{pagelz::PageLz, Codec};
/// let page: Vec<u8> = (0..512u64).flat_map(|k| (0x7f00_0000_1000 + 16 * k).to_le_bytes()).collect();
/// let mut codec = PageLz::new();
/// let mut packed = vec![0u8; 4096];
/// let n = codec.compress(&page, &mut packed).unwrap();
/// assert!(n < 1600); // about 3 bytes a pointer: a literal byte and a 7-byte copy
/// let mut back = vec![0u8; 4096];
/// codec.decompress(&packed[..n], &mut back).unwrap();
/// assert_eq!(back, page);
/// ```
pub struct PageLz {
    // A fixed length lets the compiler see that a hash indexes it.
    table: Box<[u16; 1 << HASH_BITS]>,
}

impl Default for PageLz {
    fn default() -> Self {
        Self::new()
    }
}

impl PageLz {
    /// Makes the codec with its (16 KiB) hash table, LZ4's size for blocks this small.
    pub fn new() -> Self {
        PageLz {
            table: Box::new([0; 1 << HASH_BITS]),
        }
    }
}

/// The little-endian 32-bit value at byte `at` of `block`, read without a
/// bounds check (the probe loop's hottest read).
///
/// # Safety
///
/// `at + 4 <= block.len()`.
#[inline(always)]
unsafe fn read32(block: &[u8], at: usize) -> u32 {
    debug_assert!(at + 4 <= block.len());
    // SAFETY: the caller's contract.
    unsafe { ptr::read_unaligned(block.as_ptr().add(at) as *const u32) }
}

#[inline(always)]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// Continuation bytes a length field of `v` needs after its nibble.
#[inline(always)]
fn more_bytes(v: usize) -> usize {
    if v < 15 {
        0
    } else {
        (v - 15) / 255 + 1
    }
}

/// Output cursor with the caller's budget.
struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Writer<'_> {
    /// Writes the sequence of literals `block[from..to]` and a copy of
    /// `len` bytes from `offset` back (offset 0 and length 0: the end).
    ///
    /// Most sequences take a path with no branch on the escape, which two
    /// sequences in five take and a processor cannot predict: it writes
    /// the shape byte and one continuation byte whatever the code, then
    /// the literals over what is not needed. Not for the end sequence
    /// ([`Writer::exact_sequence`]).
    ///
    /// # Panics
    ///
    /// When `len` is below [`MIN_MATCH`].
    #[inline(always)]
    fn sequence(
        &mut self,
        block: &[u8],
        from: usize,
        to: usize,
        len: usize,
        offset: usize,
    ) -> Result<(), CompressError> {
        let lits = to - from;
        let o = self.len;
        if lits < CODE_LITS && len < CODE_LENS && o + 20 <= self.buf.len() && from + 16 <= block.len() {
            let code = CODE[lits * CODE_LENS + len];
            let escape = code == ESCAPE;
            let m = len - MIN_MATCH;
            // One continuation byte at most: `m < CODE_LENS - MIN_MATCH`.
            let long = escape & (m >= 15);
            let out = self.buf.as_mut_ptr();
            // SAFETY: the writes lie within `o..o + 20` (the header, two
            // bytes after it, 16 bytes of literals from `o + 4` at most),
            // inside `buf`; the literals' 16-byte read lies in `block`.
            // `block` and `buf` are distinct slices.
            unsafe {
                ptr::write_unaligned(
                    out.add(o) as *mut [u8; 2],
                    ((code as u16) << 12 | offset as u16).to_le_bytes(),
                );
                *out.add(o + 2) = (lits << 4 | m.min(15)) as u8;
                *out.add(o + 3) = m.wrapping_sub(15) as u8;
                let at = o + 2 + escape as usize + long as usize;
                ptr::write_unaligned(
                    out.add(at) as *mut [u8; 16],
                    ptr::read_unaligned(block.as_ptr().add(from) as *const [u8; 16]),
                );
                self.len = at + lits;
            }
            return Ok(());
        }
        self.exact_sequence(block, from, to, len, offset)
    }

    /// [`Writer::sequence`] for any shape and budget, and the end.
    #[inline(never)]
    fn exact_sequence(
        &mut self,
        block: &[u8],
        from: usize,
        to: usize,
        len: usize,
        offset: usize,
    ) -> Result<(), CompressError> {
        let lits = to - from;
        let code = if lits < CODE_LITS && len < CODE_LENS {
            CODE[lits * CODE_LENS + len]
        } else {
            ESCAPE
        };
        let budget = self.buf.len();
        let m = len.saturating_sub(MIN_MATCH);
        let need = 2
            + lits
            + if code == ESCAPE {
                1 + more_bytes(lits) + more_bytes(m)
            } else {
                0
            };
        if self.len + need > budget {
            return Err(CompressError::DoesNotFit { budget });
        }
        let (out, mut o) = (self.buf.as_mut_ptr(), self.len);
        // SAFETY: the bytes written are the `need` counted above, which
        // fit in `buf` from `len`; the 16-byte literal copy is taken only
        // when 16 bytes fit in `buf` and lie in `block`. `block` and `buf`
        // are distinct slices.
        unsafe {
            ptr::write_unaligned(
                out.add(o) as *mut [u8; 2],
                ((code as u16) << 12 | offset as u16).to_le_bytes(),
            );
            o += 2;
            if code == ESCAPE {
                *out.add(o) = (lits.min(15) << 4 | m.min(15)) as u8;
                o += 1;
                for field in [lits, m] {
                    if field >= 15 {
                        let mut v = field - 15;
                        while v >= 255 {
                            *out.add(o) = 255;
                            o += 1;
                            v -= 255;
                        }
                        *out.add(o) = v as u8;
                        o += 1;
                    }
                }
            }
            if lits <= 16 && from + 16 <= block.len() && o + 16 <= budget {
                ptr::write_unaligned(
                    out.add(o) as *mut [u8; 16],
                    ptr::read_unaligned(block.as_ptr().add(from) as *const [u8; 16]),
                );
            } else {
                ptr::copy_nonoverlapping(block.as_ptr().add(from), out.add(o), lits);
            }
        }
        self.len = o + lits;
        Ok(())
    }
}

impl Codec for PageLz {
    fn name(&self) -> &'static str {
        "pagelz"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let n = block.len();
        let mut w = Writer { buf: out, len: 0 };
        let (mut i, mut anchor, mut misses) = (0usize, 0usize, 0usize);
        while i + MIN_MATCH <= n {
            // SAFETY: `i + 4 <= n`.
            let v = unsafe { read32(block, i) };
            let h = hash(v);
            let cand = self.table[h] as usize;
            self.table[h] = i as u16;
            // One branch, taken only on a match: a stale candidate (at
            // or after `i`, half of them on a page unlike the last) would
            // otherwise mislead the branch predictor on every probe.
            let far = (i.wrapping_sub(cand).wrapping_sub(1) >= MAX_OFFSET) as u32;
            // SAFETY: `min(cand, i) + 4 <= i + 4 <= n`.
            if (unsafe { read32(block, cand.min(i)) } ^ v) | far == 0 {
                let (mut s, mut c) = (i, cand);
                while s > anchor && c > 0 && block[s - 1] == block[c - 1] {
                    s -= 1;
                    c -= 1;
                }
                let end = i + MIN_MATCH + common(block, cand + MIN_MATCH, i + MIN_MATCH);
                w.sequence(block, anchor, s, end - s, s - c)?;
                // As LZ4 does, the position two before the match's end
                // becomes a candidate; more of the match's positions would
                // cost time and displace older candidates that match more.
                if end + 2 <= n {
                    let p = end - 2;
                    // SAFETY: `p + 4 = end + 2 <= n`.
                    self.table[hash(unsafe { read32(block, p) })] = p as u16;
                }
                i = end;
                anchor = end;
                misses = 0;
            } else {
                misses += 1;
                i += 1 + (misses >> 6);
            }
        }
        w.exact_sequence(block, anchor, n, 0, 0)?;
        Ok(w.len)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        decode(input, block)
    }
}

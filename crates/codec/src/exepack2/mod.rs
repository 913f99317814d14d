//! Exepack2, the LZ77/LZSS derivative that OS/2 adopted for compressed
//! executable pages (paper 004, §3.2).
//!
//! Byte-granular tokens with a 2-bit type in the low bits of the first byte:
//!
//! ```text
//! 00 nRoots   byte0 = n << 2 (n = 1..63): n literal bytes follow   (pure root)
//!             00 count byte: count (1..255) copies of byte        (repeated byte)
//!             00 00 00: end of block                              (end code)
//! 01 short    u16 LE: bits 2-3 nroots (0..3), 4-6 length-3 (3..10), 7-15 offset (1..511)
//! 10 mid      u16 LE: bits 2-3 length-3 (3..6), 4-15 offset (1..4095)
//! 11 long     u24 LE: bits 2-5 nroots (0..15), 6-11 length-3 (3..66), 12-23 offset (1..4095)
//! ```
//!
//! A string token's nroots literal bytes follow its header and are output
//! before the copy; the offset counts back from the output position after
//! them. Copies may overlap their own output (offset < length), as in LZ77.
//!
//! Choices the paper leaves open: the long string's layout is read off the
//! description (nroots in bits 2-5, length in 6-11, offset in 12-23); the
//! end code is three zero bytes, as the text says (one diagram shows two);
//! the encoder, which OS/2 ran at link time, favours ratio over speed: it
//! walks hash chains 32 deep and picks, for each match, the token that
//! saves the most bytes.

mod fast;

pub use fast::Exepack2Fast;

use crate::{valid_block_len, Codec, CompressError, DecodeError, MAX_BLOCK};

const HASH_BITS: u32 = 12;
const MAX_OFFSET: usize = 4095;
const CHAIN_DEPTH: usize = 32;

/// Exepack2 codec. See the module docs.
pub struct Exepack2 {
    head: Box<[u32]>,
    prev: Box<[u32]>,
}

impl Default for Exepack2 {
    fn default() -> Self {
        Self::new()
    }
}

impl Exepack2 {
    /// Makes an Exepack2 codec with its hash chains.
    pub fn new() -> Self {
        Exepack2 {
            head: vec![0; 1 << HASH_BITS].into_boxed_slice(),
            prev: vec![0; MAX_BLOCK].into_boxed_slice(),
        }
    }

    #[inline]
    fn insert(&mut self, block: &[u8], pos: usize) {
        if pos + 3 <= block.len() {
            let h = hash3(&block[pos..]);
            self.prev[pos] = self.head[h];
            self.head[h] = pos as u32 + 1;
        }
    }

    /// Longest match for `pos` within the window: (length, offset).
    fn find(&self, block: &[u8], pos: usize) -> (usize, usize) {
        if pos + 3 > block.len() {
            return (0, 0);
        }
        let max = 66.min(block.len() - pos);
        let mut best = (0, 0);
        let mut cand = self.head[hash3(&block[pos..])] as usize;
        for _ in 0..CHAIN_DEPTH {
            if cand == 0 || pos - (cand - 1) > MAX_OFFSET {
                break;
            }
            let c = cand - 1;
            let len = block[c..]
                .iter()
                .zip(&block[pos..pos + max])
                .take_while(|(a, b)| a == b)
                .count();
            if len > best.0 {
                best = (len, pos - c);
                if len == max {
                    break;
                }
            }
            cand = self.prev[c] as usize;
        }
        best
    }
}

#[inline(always)]
fn hash3(p: &[u8]) -> usize {
    let v = (p[0] as u32) << 16 | (p[1] as u32) << 8 | p[2] as u32;
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// Output cursor with the caller's budget.
struct Out<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Out<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> Result<(), CompressError> {
        let end = self.len + bytes.len();
        let budget = self.buf.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(CompressError::DoesNotFit { budget })?
            .copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }

    /// A string token of `kind` (1 short, 2 mid, 3 long) carrying the
    /// roots `lits` and a copy of `len` bytes from `offset` back, the
    /// fields fitting the kind (see the module docs).
    #[inline]
    fn string(&mut self, kind: u8, lits: &[u8], len: usize, offset: usize) -> Result<(), CompressError> {
        let (r, l, o) = (lits.len() as u32, (len - 3) as u32, offset as u32);
        let header = match kind {
            1 => 1 | r << 2 | l << 4 | o << 7,
            2 => 2 | l << 2 | o << 4,
            _ => 3 | r << 2 | l << 6 | o << 12,
        };
        self.put(&header.to_le_bytes()[..2 + (kind == 3) as usize])?;
        self.put(lits)
    }

    /// Pure-root tokens for `lits`, 63 bytes at most each.
    fn roots(&mut self, lits: &[u8]) -> Result<(), CompressError> {
        for c in lits.chunks(63) {
            self.put(&[(c.len() as u8) << 2])?;
            self.put(c)?;
        }
        Ok(())
    }
}

/// The best string token for a match of `len` at `offset` after `lits`
/// pending literal bytes (at most 15): (header bytes, length used, kind).
fn choose(lits: usize, len: usize, offset: usize) -> Option<(usize, usize, u8)> {
    let mut options = [None; 3];
    if offset <= 511 && lits <= 3 {
        options[0] = Some((2, len.min(10), 1u8));
    }
    if lits == 0 {
        options[1] = Some((2, len.min(6), 2));
    }
    options[2] = Some((3, len.min(66), 3));
    options
        .into_iter()
        .flatten()
        .filter(|&(cost, used, _)| used >= 3 && used > cost)
        .max_by_key(|&(cost, used, _)| (used - cost, usize::MAX - cost))
}

impl Codec for Exepack2 {
    fn name(&self) -> &'static str {
        "exepack2"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        self.head.fill(0);
        let n = block.len();
        let mut out = Out { buf: out, len: 0 };
        let (mut i, mut lit) = (0usize, 0usize);
        while i < n {
            let b = block[i];
            let run = block[i..n.min(i + 255)].iter().take_while(|&&x| x == b).count();
            if run >= 5 {
                out.roots(&block[lit..i])?;
                out.put(&[0, run as u8, b])?;
                for p in i..i + run {
                    self.insert(block, p);
                }
                i += run;
                lit = i;
                continue;
            }
            let (len, offset) = self.find(block, i);
            if len >= 3 {
                if i - lit > 15 {
                    out.roots(&block[lit..i])?;
                    lit = i;
                }
                if let Some((_, used, kind)) = choose(i - lit, len, offset) {
                    out.string(kind, &block[lit..i], used, offset)?;
                    for p in i..i + used {
                        self.insert(block, p);
                    }
                    i += used;
                    lit = i;
                    continue;
                }
            }
            self.insert(block, i);
            i += 1;
        }
        out.roots(&block[lit..n])?;
        out.put(&[0, 0, 0])?;
        Ok(out.len)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        decode(input, block)
    }
}

/// Decodes one Exepack2 block of `input` into `block`, whichever encoder
/// made it (the format is one; see the module docs).
///
/// # Errors
///
/// [`DecodeError`] when `input` is not a whole block of `block`'s length.
pub(crate) fn decode(input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
    if !valid_block_len(block.len()) {
        return Err(DecodeError::BlockSize(block.len()));
    }
    let n = block.len();
    let (mut i, mut o) = (0usize, 0usize);
    let byte = |i: usize| input.get(i).copied().ok_or(DecodeError::Truncated);
    loop {
        let b0 = byte(i)? as u32;
        let (nroots, len, offset);
        match b0 & 3 {
            0 if b0 != 0 => {
                let k = (b0 >> 2) as usize;
                let src = input.get(i + 1..i + 1 + k).ok_or(DecodeError::Truncated)?;
                let dst = block
                    .get_mut(o..o + k)
                    .ok_or(DecodeError::Corrupt("literals run past the block"))?;
                dst.copy_from_slice(src);
                i += 1 + k;
                o += k;
                continue;
            }
            0 => {
                let (count, fill) = (byte(i + 1)? as usize, byte(i + 2)?);
                i += 3;
                if count == 0 {
                    if o != n {
                        return Err(DecodeError::Truncated);
                    }
                    if i != input.len() {
                        return Err(DecodeError::TrailingBytes(input.len() - i));
                    }
                    return Ok(());
                }
                block
                    .get_mut(o..o + count)
                    .ok_or(DecodeError::Corrupt("run goes past the block"))?
                    .fill(fill);
                o += count;
                continue;
            }
            1 => {
                let v = b0 | (byte(i + 1)? as u32) << 8;
                i += 2;
                (nroots, len, offset) = ((v >> 2 & 3) as usize, (v >> 4 & 7) as usize + 3, (v >> 7) as usize);
            }
            2 => {
                let v = b0 | (byte(i + 1)? as u32) << 8;
                i += 2;
                (nroots, len, offset) = (0, (v >> 2 & 3) as usize + 3, (v >> 4) as usize);
            }
            _ => {
                let v = b0 | (byte(i + 1)? as u32) << 8 | (byte(i + 2)? as u32) << 16;
                i += 3;
                (nroots, len, offset) = ((v >> 2 & 15) as usize, (v >> 6 & 63) as usize + 3, (v >> 12) as usize);
            }
        }
        (i, o) = roots_and_copy(input, i, block, o, Token { nroots, len, offset })?;
    }
}

/// A token's roots (literal bytes) and copy, as its header gave them.
struct Token {
    nroots: usize,
    len: usize,
    offset: usize,
}

/// Writes `token`'s roots (read at `input[i..]`) and then its copy at
/// `block[o..]`; returns the positions after them.
#[inline(always)]
fn roots_and_copy(
    input: &[u8],
    mut i: usize,
    block: &mut [u8],
    mut o: usize,
    token: Token,
) -> Result<(usize, usize), DecodeError> {
    let Token { nroots, len, offset } = token;
    let n = block.len();
    // Fast path, far from both ends: the roots (at most 15) as one
    // 16-byte copy, and a copy whose source lies at least 8 bytes
    // back as 8-byte chunks, each reading only bytes already
    // written; the bytes written past the token's end are
    // overwritten by the tokens after it. The exact path below
    // does the same near the ends and for short offsets.
    if i + 16 <= input.len() && o + 16 + 72 <= n {
        block[o..o + 16].copy_from_slice(&input[i..i + 16]);
        i += nroots;
        o += nroots;
        if offset == 0 || offset > o {
            return Err(DecodeError::Corrupt("copy reaches before the block"));
        }
        if offset >= 8 {
            let mut k = 0;
            while k < len {
                let chunk: [u8; 8] = block[o - offset + k..o - offset + k + 8].try_into().expect("8 bytes");
                block[o + k..o + k + 8].copy_from_slice(&chunk);
                k += 8;
            }
            o += len;
            return Ok((i, o));
        }
        for j in o..o + len {
            block[j] = block[j - offset];
        }
        o += len;
        return Ok((i, o));
    }
    let src = input.get(i..i + nroots).ok_or(DecodeError::Truncated)?;
    block
        .get_mut(o..o + nroots)
        .ok_or(DecodeError::Corrupt("literals run past the block"))?
        .copy_from_slice(src);
    i += nroots;
    o += nroots;
    if offset == 0 || offset > o {
        return Err(DecodeError::Corrupt("copy reaches before the block"));
    }
    if len > n - o {
        return Err(DecodeError::Corrupt("copy runs past the block"));
    }
    if offset >= len {
        block.copy_within(o - offset..o - offset + len, o);
    } else {
        for j in o..o + len {
            block[j] = block[j - offset];
        }
    }
    o += len;
    Ok((i, o))
}

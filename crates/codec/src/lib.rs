//! Codecs for in-memory data: the compressors that ccvm's compression cache
//! runs on pages (and, for C-Pack, on cache lines).
//!
//! The primary abstraction is the [`Codec`] trait: compress one block into a
//! caller's buffer within a size budget, and decompress it back into a
//! caller's block. Codecs are found by name through [`by_name`], so the
//! command line and the other crates can pick one at run time.
//!
//! Implemented here, from the papers: [`wk::WkDm`] and [`wk::Wk4x4`]
//! (Wilson, Kaplan and Smaragdakis 1999, §2.3), [`lzrw1::Lzrw1`] (Williams
//! 1991), [`pbpm::Pbpm`] (Yang, dissertation §4.2), [`cpack::CPack`] (§6.6),
//! the cache-line codecs it is compared with, [`fpc::Fpc`] (Alameldeen and
//! Wood 2004), [`bdi::Bdi`] (Pekhimenko et al. 2012) and [`xmatch::XMatch`]
//! (Kjelsø, Gooch and Jones 1996),
//! [`delta16::Delta16`] (§5.4), [`exepack2::Exepack2`] (with a fast
//! greedy encoder for its format, [`exepack2::Exepack2Fast`]) and
//! [`iterated::Iterated`] (Wynn and Wu 2000, §3.2 and §2.2), ccvm's own
//! [`wordlz::WordLz`] (LZ matches with WK-coded literal words),
//! [`pagelz::PageLz`] (LZ77 whose commonest sequences on pages take two
//! bytes) and [`hybrid::Hybrid`] (WKdm with an LZ4 fallback), and baselines that wrap
//! the reference C libraries ([`baseline`]: LZ4, LZO1X-1, zstd).
//!
//! # Design
//!
//! A codec is a *stateful object used by one thread at a time*
//! (`compress(&mut self, ..)`): it owns the working memory it needs (LZO's
//! work area, zstd's context, WKdm's segment arrays), allocated once when it
//! is made. That keeps every call free of heap allocation, which matters on
//! a page-fault path, and lets callers that need parallelism simply make one
//! codec per thread.
//!
//! Decoders treat their input as untrusted: every malformed input yields a
//! [`DecodeError`], never a panic or an out-of-bounds access.
//!
//! ```
//! use ccvm_codec::by_name;
//! let mut codec = by_name("wkdm").unwrap();
//! let page: Vec<u8> = (0..4096u32).map(|i| (i / 64) as u8).collect();
//! let mut packed = [0u8; 4096];
//! let n = codec.compress(&page, &mut packed).unwrap();
//! let mut back = [0u8; 4096];
//! codec.decompress(&packed[..n], &mut back).unwrap();
//! assert_eq!(&back[..], &page[..]);
//! ```
#![deny(missing_docs)]

pub mod baseline;
pub mod bdi;
mod bits;
mod codec_id;
pub mod copy;
pub mod cpack;
pub mod delta16;
mod error;
pub mod exepack2;
pub mod fpc;
pub mod hybrid;
pub mod iterated;
mod lzmatch;
pub mod lzrw1;
pub mod pagelz;
pub mod pbpm;
mod registry;
mod same_filled;
pub mod wk;
pub mod wordlz;
pub mod xmatch;

pub use codec_id::{CodecId, UnknownCodec};
pub use error::{CompressError, DecodeError};
pub use registry::{by_name, names, CodecInfo, CODECS, DEFAULT_CODEC};
pub use same_filled::{same_filled_u32, same_filled_u64};

/// Size of a memory page, the block size of most of ccvm.
pub const PAGE_SIZE: usize = 4096;

/// Largest block any codec accepts (16 pages). Blocks are limited so that
/// formats can count words in 16 bits and codecs can size their working
/// memory once.
pub const MAX_BLOCK: usize = 65536;

/// A block compressor.
///
/// # Contract
///
/// * Blocks are 4 to [`MAX_BLOCK`] bytes long, a multiple of 4 (words of 32
///   bits); other lengths give [`CompressError::BlockSize`] or
///   [`DecodeError::BlockSize`].
/// * `compress` writes at most `out.len()` bytes and returns how many; if the
///   result would not fit it returns [`CompressError::DoesNotFit`] (the caller
///   then keeps the block raw). The contents of `out` are unspecified after
///   an error.
/// * `decompress` is given exactly the bytes `compress` returned and a block
///   of the original length; it fills the whole block or returns an error.
///   It never panics and never reads or writes out of bounds, whatever the
///   input.
/// * Neither call allocates on the heap.
pub trait Codec: Send {
    /// The name the codec is found by (see [`by_name`]).
    fn name(&self) -> &'static str;

    /// Compresses `block` into `out`, returning the compressed length.
    ///
    /// # Errors
    ///
    /// [`CompressError::BlockSize`] for a block of unsupported length,
    /// [`CompressError::DoesNotFit`] when the output would exceed `out.len()`.
    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError>;

    /// Decompresses `input` into `block`, which has the original length.
    ///
    /// # Errors
    ///
    /// A [`DecodeError`] describing the first inconsistency found when the
    /// input is not a valid compressed block of `block.len()` bytes.
    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError>;
}

/// Checks a block length against the [`Codec`] contract.
#[inline]
pub(crate) fn valid_block_len(len: usize) -> bool {
    (4..=MAX_BLOCK).contains(&len) && len.is_multiple_of(4)
}

/// Reads the little-endian 32-bit word at word index `i` of `block`.
#[inline(always)]
pub(crate) fn word_at(block: &[u8], i: usize) -> u32 {
    let b = &block[i * 4..i * 4 + 4];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Compresses `words` (little-endian) with `codec`, checks the round trip,
/// and returns the compressed bytes: the hand-counted size tests' helper.
#[cfg(test)]
pub(crate) fn round_trip_size(codec: &mut dyn Codec, words: &[u32]) -> usize {
    let block: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut out = [0u8; 512];
    let n = codec.compress(&block, &mut out).unwrap();
    let mut back = vec![0u8; block.len()];
    codec.decompress(&out[..n], &mut back).unwrap();
    assert_eq!(back, block);
    n
}

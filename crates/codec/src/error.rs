//! The two error types of the [`crate::Codec`] contract.

use thiserror::Error;

/// Why a block was not compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CompressError {
    /// The compressed form would be larger than the caller's budget; keep
    /// the block uncompressed.
    #[error("compressed block does not fit in {budget} bytes")]
    DoesNotFit {
        /// The budget that was exceeded (`out.len()`).
        budget: usize,
    },
    /// The block's length is not a multiple of 4 between 4 and
    /// [`crate::MAX_BLOCK`] bytes (or, for a codec with a stricter rule, not
    /// one it accepts).
    #[error("block of {0} bytes is not supported (need a multiple of 4 between 4 and 65536)")]
    BlockSize(usize),
}

/// Why a compressed block could not be decoded. Every variant means the
/// input is not what the codec wrote for a block of that length.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before the block was complete.
    #[error("compressed data is truncated")]
    Truncated,
    /// The input decodes to a block but has bytes left over.
    #[error("compressed data has {0} unexpected trailing bytes")]
    TrailingBytes(usize),
    /// The input is malformed; the text says how.
    #[error("compressed data is corrupt: {0}")]
    Corrupt(&'static str),
    /// The output block's length is not supported by the codec.
    #[error("block of {0} bytes is not supported (need a multiple of 4 between 4 and 65536)")]
    BlockSize(usize),
}

//! The null codec: the block as it is. It is the "no compression" control
//! of experiments: a compression cache with this codec is an uncompressed
//! cache of the same size, run by the same mechanism, so comparing the two
//! isolates what compression itself is worth.

use crate::{valid_block_len, Codec, CompressError, DecodeError};

/// Copies blocks unchanged. See the module docs.
///
/// ```
/// use ccvm_codec::{copy::Copy, Codec};
/// let block = [7u8; 64];
/// let mut out = [0u8; 64];
/// assert_eq!(Copy.compress(&block, &mut out).unwrap(), 64);
/// let mut back = [0u8; 64];
/// Copy.decompress(&out, &mut back).unwrap();
/// assert_eq!(back, block);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct Copy;

impl Codec for Copy {
    fn name(&self) -> &'static str {
        "copy"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let budget = out.len();
        let dst = out.get_mut(..block.len()).ok_or(CompressError::DoesNotFit { budget })?;
        dst.copy_from_slice(block);
        Ok(block.len())
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        match input.len().cmp(&block.len()) {
            std::cmp::Ordering::Less => Err(DecodeError::Truncated),
            std::cmp::Ordering::Greater => Err(DecodeError::TrailingBytes(input.len() - block.len())),
            std::cmp::Ordering::Equal => {
                block.copy_from_slice(input);
                Ok(())
            }
        }
    }
}

//! ccvm's hybrid codec: WKdm first, LZ4 for blocks WKdm leaves large, in the
//! manner of macOS's memory compressor.
//!
//! Word-dictionary codecs miss what LZ finds (strings, and records repeated
//! many words apart), and LZ misses what WKdm finds (pointers and small
//! integers that share only their upper bits). WKdm is cheap, so it always
//! runs; when its output is above a threshold the block is likely one of
//! the former kind and LZ4 is tried too, keeping the smaller result.
//!
//! # Format
//!
//! ```text
//! byte 0   0 = a WKdm block follows, 1 = an LZ4 block follows
//! ```
//!
//! The threshold is a share of the block size: `threshold_per_4k` bytes per
//! 4096. Its default was tuned on the project corpus with `ccvm bench
//! codecs` (see the README's results).

use crate::baseline::{lz4_compress, lz4_decompress};
use crate::wk::WkDm;
use crate::{valid_block_len, Codec, CompressError, DecodeError, MAX_BLOCK, PAGE_SIZE};

/// Default threshold: WKdm outputs above this many bytes per 4 KiB also try LZ4.
pub const DEFAULT_THRESHOLD: usize = 1024;

/// Hybrid WKdm/LZ4 codec. See the [module docs](self).
pub struct Hybrid {
    wk: WkDm,
    scratch: Box<[u8]>,
    threshold_per_4k: usize,
}

impl Default for Hybrid {
    fn default() -> Self {
        Self::new()
    }
}

impl Hybrid {
    /// A hybrid with the [`DEFAULT_THRESHOLD`].
    pub fn new() -> Self {
        Self::with_threshold(DEFAULT_THRESHOLD)
    }

    /// A hybrid that tries LZ4 when WKdm's output exceeds
    /// `threshold_per_4k` bytes per 4096 bytes of block.
    ///
    /// ```
    /// use ccvm_codec::{hybrid::Hybrid, Codec};
    /// let text = b"the quick brown fox jumps over the lazy dog. ".repeat(92);
    /// let page = &text[..4096];
    /// let mut out = [0u8; 4096];
    /// let n = Hybrid::with_threshold(0).compress(page, &mut out).unwrap();
    /// assert_eq!(out[0], 1, "text is LZ4's kind of data");
    /// assert!(n < 300);
    /// ```
    pub fn with_threshold(threshold_per_4k: usize) -> Self {
        Hybrid {
            wk: WkDm::new(),
            scratch: vec![0; MAX_BLOCK].into_boxed_slice(),
            threshold_per_4k,
        }
    }
}

impl Codec for Hybrid {
    fn name(&self) -> &'static str {
        "hybrid"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let budget = out.len();
        let (head, body) = out
            .split_first_mut()
            .ok_or(CompressError::DoesNotFit { budget })?;
        let wk = self.wk.compress(block, body).ok();
        let threshold = self.threshold_per_4k * block.len() / PAGE_SIZE;
        if let Some(n) = wk.filter(|&n| n <= threshold) {
            *head = 0;
            return Ok(1 + n);
        }
        let lz_budget = wk
            .unwrap_or(body.len())
            .min(body.len())
            .min(self.scratch.len());
        match lz4_compress(block, &mut self.scratch[..lz_budget], 1) {
            Ok(m) if wk.is_none_or(|n| m < n) => {
                *head = 1;
                body[..m].copy_from_slice(&self.scratch[..m]);
                Ok(1 + m)
            }
            _ => match wk {
                Some(n) => {
                    *head = 0;
                    Ok(1 + n)
                }
                None => Err(CompressError::DoesNotFit { budget }),
            },
        }
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        match input.split_first() {
            None => Err(DecodeError::Truncated),
            Some((0, rest)) => self.wk.decompress(rest, block),
            Some((1, rest)) => lz4_decompress(rest, block),
            Some(_) => Err(DecodeError::Corrupt("unknown hybrid block kind")),
        }
    }
}

//! ccvm's hybrid codec: WKdm first, an LZ codec (LZ4, or ccvm's PageLz) for
//! blocks WKdm leaves large, in the manner of macOS's memory compressor.
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
//! byte 0   0 = a WKdm block follows, 1 = an LZ4 block, 2 = a PageLz block
//! ```
//!
//! `hybrid` falls back on LZ4 and `hybrid-pagelz` on PageLz; either
//! decodes the other's blocks.
//!
//! The rule has two thresholds, in bytes of WKdm output per 4096 bytes of
//! block: at or below *keep* WKdm's output is kept; above *abort* (judged
//! from the words modelled so far, so WKdm stops early) the block goes to
//! LZ4 alone, unless LZ4 cannot compress it at all, when WKdm is run to the
//! end after all; in between both run and the smaller wins. The defaults were
//! chosen on the project corpus with the `tune_hybrid` and `page_features`
//! examples of this crate: LZ4 beats WKdm on about two pages in three there,
//! so a hybrid can only match LZ4's ratio by sending most pages to LZ4, and
//! what it saves is WKdm's speed on the third that WKdm does well.

use crate::baseline::{lz4_compress, lz4_decompress};
use crate::pagelz::{self, PageLz};
use crate::wk::WkDm;
use crate::{valid_block_len, Codec, CompressError, DecodeError, MAX_BLOCK, PAGE_SIZE};

/// Default keep threshold: WKdm outputs up to this many bytes per 4 KiB are kept.
pub const DEFAULT_KEEP: usize = 1408;
/// Default abort threshold: when WKdm's output, extrapolated from the words
/// modelled so far, exceeds this many bytes per 4 KiB, WKdm stops and the
/// page goes to LZ4 alone.
pub const DEFAULT_ABORT: usize = 1920;

/// Hybrid WKdm/LZ codec. See the module docs.
pub struct Hybrid {
    wk: WkDm,
    /// The LZ codec for pages WKdm leaves large: `None` for LZ4.
    pagelz: Option<PageLz>,
    scratch: Box<[u8]>,
    keep_per_4k: usize,
    abort_per_4k: usize,
}

impl Default for Hybrid {
    fn default() -> Self {
        Self::new()
    }
}

impl Hybrid {
    /// A hybrid with the default thresholds ([`DEFAULT_KEEP`], [`DEFAULT_ABORT`]).
    pub fn new() -> Self {
        Self::with_thresholds(DEFAULT_KEEP, DEFAULT_ABORT)
    }

    /// A hybrid that keeps WKdm's output up to `keep_per_4k` bytes per 4096
    /// bytes of block, tries LZ4 too (keeping the smaller) above that, and
    /// abandons WKdm for LZ4 alone when WKdm's projected output exceeds
    /// `abort_per_4k`.
    ///
    /// ```
    /// use ccvm_codec::{hybrid::Hybrid, Codec};
    /// let text = b"the quick brown fox jumps over the lazy dog. ".repeat(92);
    /// let page = &text[..4096];
    /// let mut out = [0u8; 4096];
    /// let n = Hybrid::with_thresholds(0, 0).compress(page, &mut out).unwrap();
    /// assert_eq!(out[0], 1, "text is LZ4's kind of data");
    /// assert!(n < 300);
    /// ```
    pub fn with_thresholds(keep_per_4k: usize, abort_per_4k: usize) -> Self {
        Hybrid {
            wk: WkDm::new(),
            pagelz: None,
            // LZ4 may expand incompressible data by up to n/255 + 16 bytes.
            scratch: vec![0; MAX_BLOCK + MAX_BLOCK / 255 + 16].into_boxed_slice(),
            keep_per_4k,
            abort_per_4k: abort_per_4k.max(keep_per_4k),
        }
    }
}

impl Hybrid {
    /// A hybrid with the default thresholds that falls back on
    /// [`PageLz`] instead of LZ4: name `hybrid-pagelz`.
    pub fn with_pagelz() -> Self {
        Self::with_pagelz_thresholds(DEFAULT_KEEP, DEFAULT_ABORT)
    }

    /// A hybrid with the given thresholds (as [`Hybrid::with_thresholds`])
    /// that falls back on [`PageLz`] instead of LZ4.
    ///
    /// ```
    /// use ccvm_codec::{hybrid::Hybrid, Codec};
    /// let text = b"the quick brown fox jumps over the lazy dog. ".repeat(92);
    /// let mut out = [0u8; 4096];
    /// let n = Hybrid::with_pagelz_thresholds(0, 0).compress(&text[..4096], &mut out).unwrap();
    /// assert_eq!(out[0], 2, "text is PageLz's kind of data");
    /// assert!(n < 300);
    /// ```
    pub fn with_pagelz_thresholds(keep_per_4k: usize, abort_per_4k: usize) -> Self {
        Hybrid {
            pagelz: Some(PageLz::new()),
            ..Self::with_thresholds(keep_per_4k, abort_per_4k)
        }
    }
}

impl Codec for Hybrid {
    fn name(&self) -> &'static str {
        if self.pagelz.is_some() {
            "hybrid-pagelz"
        } else {
            "hybrid"
        }
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let budget = out.len();
        let (head, body) = out.split_first_mut().ok_or(CompressError::DoesNotFit { budget })?;
        let scale = |per_4k: usize| per_4k * block.len() / PAGE_SIZE;
        let wk = self.wk.compress_projected(block, body, scale(self.abort_per_4k)).ok();
        if let Some(n) = wk.filter(|&n| n <= scale(self.keep_per_4k)) {
            *head = 0;
            return Ok(1 + n);
        }
        let lz_budget = wk.unwrap_or(body.len()).min(body.len()).min(self.scratch.len());
        let (kind, lz) = match &mut self.pagelz {
            None => (1, lz4_compress(block, &mut self.scratch[..lz_budget], 1)),
            Some(c) => (2, c.compress(block, &mut self.scratch[..lz_budget])),
        };
        match lz {
            Ok(m) if wk.is_none_or(|n| m < n) => {
                *head = kind;
                body[..m].copy_from_slice(&self.scratch[..m]);
                Ok(1 + m)
            }
            _ => {
                // WKdm's own result, or, if it stopped early on a projection
                // LZ4 has not borne out, WKdm run to the end: blocks of
                // numbers that share upper bits (floats, counters) defeat
                // LZ4 entirely and still compress by a third under WKdm.
                let n = match wk {
                    Some(n) => n,
                    None => self
                        .wk
                        .compress(block, body)
                        .map_err(|_| CompressError::DoesNotFit { budget })?,
                };
                *head = 0;
                Ok(1 + n)
            }
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
            Some((2, rest)) => pagelz::decode(rest, block),
            Some(_) => Err(DecodeError::Corrupt("unknown hybrid block kind")),
        }
    }
}

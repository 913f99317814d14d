//! Baseline compressors through crates that wrap the reference C libraries:
//! LZ4 (`lz4-sys`, liblz4 1.10), LZO1X-1 (`lzo-sys`, LZO 2.10) and zstd
//! (`zstd`, libzstd). They are what the papers' codecs are measured against,
//! and LZ4 is the fallback half of the [hybrid](crate::hybrid).
//!
//! Linux's zram also offers LZO-RLE, a kernel-only variant of LZO1X-1 with a
//! run-length extension; upstream LZO (and so every LZO crate) does not have
//! it, so ccvm does not offer it either.

use std::ffi::{c_char, c_int, c_void};

use crate::{valid_block_len, Codec, CompressError, DecodeError, MAX_BLOCK};

/// LZ4 block compression at a given acceleration (1 is LZ4's default;
/// higher is faster and compresses less).
pub struct Lz4 {
    acceleration: i32,
    name: &'static str,
}

impl Lz4 {
    /// LZ4 with the library's default acceleration (1): name `lz4`.
    pub fn new() -> Self {
        Lz4 {
            acceleration: 1,
            name: "lz4",
        }
    }

    /// LZ4 with acceleration 8, as fast modes are used for swap: name `lz4-fast`.
    pub fn fast() -> Self {
        Lz4 {
            acceleration: 8,
            name: "lz4-fast",
        }
    }
}

impl Default for Lz4 {
    fn default() -> Self {
        Self::new()
    }
}

/// Compresses with liblz4; shared with the hybrid codec.
pub(crate) fn lz4_compress(block: &[u8], out: &mut [u8], acceleration: i32) -> Result<usize, CompressError> {
    let cap = out.len().min(i32::MAX as usize) as c_int;
    // SAFETY: the pointers and lengths describe live, non-overlapping slices;
    // liblz4 writes at most `cap` bytes to `out`.
    let n = unsafe {
        lz4_sys::LZ4_compress_fast(
            block.as_ptr() as *const c_char,
            out.as_mut_ptr() as *mut c_char,
            block.len() as c_int,
            cap,
            acceleration,
        )
    };
    if n <= 0 {
        return Err(CompressError::DoesNotFit { budget: out.len() });
    }
    Ok(n as usize)
}

/// Decompresses with liblz4's bounds-checked decoder; shared with the hybrid.
pub(crate) fn lz4_decompress(input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
    if input.len() > i32::MAX as usize {
        return Err(DecodeError::Corrupt("LZ4 input too large"));
    }
    // SAFETY: LZ4_decompress_safe never reads beyond `input.len()` bytes nor
    // writes beyond `block.len()` bytes, whatever the input.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            input.as_ptr() as *const c_char,
            block.as_mut_ptr() as *mut c_char,
            input.len() as c_int,
            block.len() as c_int,
        )
    };
    if n < 0 {
        return Err(DecodeError::Corrupt("LZ4 decoder rejected the block"));
    }
    if n as usize != block.len() {
        return Err(DecodeError::Truncated);
    }
    Ok(())
}

impl Codec for Lz4 {
    fn name(&self) -> &'static str {
        self.name
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        lz4_compress(block, out, self.acceleration)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        lz4_decompress(input, block)
    }
}

/// LZO1X-1, the compressor of CRAMES and of Linux's zram for many years.
pub struct Lzo1x1 {
    work: Box<[u64]>,
    scratch: Box<[u8]>,
}

impl Lzo1x1 {
    /// Makes an LZO1X-1 codec with its work memory.
    pub fn new() -> Self {
        // SAFETY: lzo_init only checks the library's build configuration.
        let ok = unsafe { lzo_sys::lzoconf::lzo_init() };
        assert_eq!(ok, 0, "liblzo failed its self-check");
        let work_bytes = lzo_sys::lzo1x::LZO1X_1_MEM_COMPRESS as usize;
        Lzo1x1 {
            work: vec![0u64; work_bytes.div_ceil(8)].into_boxed_slice(),
            // LZO1X writes up to len + len/16 + 64 + 3 bytes and takes no
            // output bound, so it compresses into scratch of that size.
            scratch: vec![0u8; MAX_BLOCK + MAX_BLOCK / 16 + 67].into_boxed_slice(),
        }
    }
}

impl Default for Lzo1x1 {
    fn default() -> Self {
        Self::new()
    }
}

impl Codec for Lzo1x1 {
    fn name(&self) -> &'static str {
        "lzo1x-1"
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let mut n = self.scratch.len();
        // SAFETY: scratch holds the worst-case output for a block of at most
        // MAX_BLOCK bytes; work holds LZO1X_1_MEM_COMPRESS bytes.
        let rc = unsafe {
            lzo_sys::lzo1x::lzo1x_1_compress(
                block.as_ptr(),
                block.len(),
                self.scratch.as_mut_ptr(),
                &mut n,
                self.work.as_mut_ptr() as *mut c_void,
            )
        };
        if rc != 0 || n > out.len() {
            return Err(CompressError::DoesNotFit { budget: out.len() });
        }
        out[..n].copy_from_slice(&self.scratch[..n]);
        Ok(n)
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        let mut n = block.len();
        // SAFETY: the _safe decoder checks both input and output bounds.
        let rc = unsafe {
            lzo_sys::lzo1x::lzo1x_decompress_safe(
                input.as_ptr(),
                input.len(),
                block.as_mut_ptr(),
                &mut n,
                std::ptr::null_mut(),
            )
        };
        match rc {
            0 if n == block.len() => Ok(()),
            0 => Err(DecodeError::Truncated),
            -4 => Err(DecodeError::Truncated),
            -8 => Err(DecodeError::TrailingBytes(0)),
            _ => Err(DecodeError::Corrupt("LZO decoder rejected the block")),
        }
    }
}

/// zstd at a given level, with a compression and a decompression context
/// kept for the codec's life. It calls libzstd through `zstd-safe`, whose
/// errors are plain codes, so that no call allocates, failing ones included.
pub struct Zstd {
    level: i32,
    cctx: zstd::zstd_safe::CCtx<'static>,
    dctx: zstd::zstd_safe::DCtx<'static>,
    name: &'static str,
}

impl Zstd {
    /// zstd at `level` 1 (`zstd-1`) or 3 (`zstd-3`); other levels are named `zstd`.
    ///
    /// # Panics
    ///
    /// If libzstd cannot allocate its contexts.
    pub fn new(level: i32) -> Self {
        let name = match level {
            1 => "zstd-1",
            3 => "zstd-3",
            _ => "zstd",
        };
        Zstd {
            level,
            cctx: zstd::zstd_safe::CCtx::create(),
            dctx: zstd::zstd_safe::DCtx::create(),
            name,
        }
    }

    /// The compression level.
    pub fn level(&self) -> i32 {
        self.level
    }
}

impl Codec for Zstd {
    fn name(&self) -> &'static str {
        self.name
    }

    fn compress(&mut self, block: &[u8], out: &mut [u8]) -> Result<usize, CompressError> {
        if !valid_block_len(block.len()) {
            return Err(CompressError::BlockSize(block.len()));
        }
        let budget = out.len();
        self.cctx
            .compress(out, block, self.level)
            .map_err(|_| CompressError::DoesNotFit { budget })
    }

    fn decompress(&mut self, input: &[u8], block: &mut [u8]) -> Result<(), DecodeError> {
        if !valid_block_len(block.len()) {
            return Err(DecodeError::BlockSize(block.len()));
        }
        match self.dctx.decompress(block, input) {
            Ok(n) if n == block.len() => Ok(()),
            Ok(_) => Err(DecodeError::Truncated),
            Err(_) => Err(DecodeError::Corrupt("zstd decoder rejected the block")),
        }
    }
}

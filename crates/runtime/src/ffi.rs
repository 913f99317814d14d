//! The C interface (`include/ccvm.h`): regions for C programs. Every
//! function checks its pointers; errors come back as a null region and a
//! one-line reason, never as a panic across the boundary.

use std::ffi::{c_char, c_void, CStr};
use std::time::Duration;

use crate::{Region, RuntimeConfig};

/// Settings of a region, as `ccvm_config` in the header.
#[repr(C)]
pub struct CcvmConfig {
    /// RAM for uncompressed pages and the cache.
    pub ram_bytes: u64,
    /// Share of `ram_bytes` kept uncompressed.
    pub uncompressed_share: f64,
    /// Policy name, or null for the default.
    pub policy: *const c_char,
    /// Codec name, or null for the default.
    pub codec: *const c_char,
    /// Swap directory, or null for the temp directory.
    pub swap_dir: *const c_char,
    /// Added to each swap read, nanoseconds.
    pub disk_latency_ns: u64,
}

/// Counters, as `ccvm_stats` in the header.
#[repr(C)]
#[derive(Default)]
pub struct CcvmStats {
    /// First touches.
    pub faults_zero: u64,
    /// Faults served from the cache.
    pub faults_cache: u64,
    /// Faults served from the swap file.
    pub faults_disk: u64,
    /// Pages compressed.
    pub pages_compressed: u64,
    /// Pages decompressed.
    pub pages_decompressed: u64,
    /// Swap bytes written.
    pub swap_bytes_written: u64,
    /// Swap bytes read.
    pub swap_bytes_read: u64,
    /// Bytes of the pages compressed.
    pub bytes_in: u64,
    /// Bytes they compressed to.
    pub bytes_out: u64,
}

/// Fills `config` with the defaults.
///
/// # Safety
///
/// `config` is null or points to a writable `ccvm_config`.
#[no_mangle]
pub unsafe extern "C" fn ccvm_config_default(config: *mut CcvmConfig) {
    let d = RuntimeConfig::default();
    // SAFETY: null or a writable `ccvm_config`, as the caller guarantees.
    if let Some(c) = unsafe { config.as_mut() } {
        *c = CcvmConfig {
            ram_bytes: d.ram_bytes,
            uncompressed_share: d.uncompressed_share,
            policy: std::ptr::null(),
            codec: std::ptr::null(),
            swap_dir: std::ptr::null(),
            disk_latency_ns: 0,
        };
    }
}

/// Copies `msg` into the caller's buffer, NUL-terminated, truncated to fit.
unsafe fn report(msg: &str, err: *mut c_char, err_len: usize) {
    if err.is_null() || err_len == 0 {
        return;
    }
    let n = msg.len().min(err_len - 1);
    // SAFETY: `err` is writable for `err_len` bytes (the caller's promise)
    // and `n + 1 <= err_len`; `msg` cannot overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), err.cast::<u8>(), n);
        *err.add(n) = 0;
    }
}

unsafe fn text(p: *const c_char, what: &str) -> Result<Option<String>, String> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: a non-null string is NUL-terminated (the caller's promise).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map(|s| Some(s.to_owned()))
        .map_err(|_| format!("{what} is not UTF-8"))
}

unsafe fn config_from(c: &CcvmConfig) -> Result<RuntimeConfig, String> {
    let d = RuntimeConfig::default();
    // SAFETY: the config's strings are null or NUL-terminated (the
    // caller's promise, passed on).
    let (policy, codec, swap_dir) = unsafe {
        (
            text(c.policy, "policy")?,
            text(c.codec, "codec")?,
            text(c.swap_dir, "swap_dir")?,
        )
    };
    Ok(RuntimeConfig {
        ram_bytes: c.ram_bytes,
        uncompressed_share: c.uncompressed_share,
        policy: match policy {
            Some(name) => ccvm_policy::PolicySpec::by_name(&name).map_err(|e| e.to_string())?,
            None => d.policy.clone(),
        },
        codec: match codec {
            Some(name) => ccvm_codec::CodecId::by_name(&name).map_err(|e| e.to_string())?,
            None => d.codec,
        },
        swap_dir: swap_dir.map(Into::into),
        disk_latency: Duration::from_nanos(c.disk_latency_ns),
        ..d
    })
}

/// Makes a region; null with a reason in `err` on failure.
///
/// # Safety
///
/// `config` is null (defaults) or a valid `ccvm_config` whose strings are
/// null or NUL-terminated; `err` is null or writable for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ccvm_region_new(
    bytes: usize,
    config: *const CcvmConfig,
    err: *mut c_char,
    err_len: usize,
) -> *mut Region {
    // SAFETY: null or a valid `ccvm_config` whose strings are null or
    // NUL-terminated, as the caller guarantees.
    let config = match unsafe { config.as_ref() } {
        // SAFETY: as above.
        Some(c) => unsafe { config_from(c) },
        None => Ok(RuntimeConfig::default()),
    };
    let made = std::panic::catch_unwind(|| config.and_then(|c| Region::new(bytes, c).map_err(|e| e.to_string())));
    match made {
        Ok(Ok(region)) => Box::into_raw(Box::new(region)),
        Ok(Err(msg)) => {
            // SAFETY: `err` is null or writable for `err_len` bytes.
            unsafe { report(&msg, err, err_len) };
            std::ptr::null_mut()
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { report("internal error while making the region", err, err_len) };
            std::ptr::null_mut()
        }
    }
}

/// The region's first byte, or null for a null region.
///
/// # Safety
///
/// `region` is null or from [`ccvm_region_new`] and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn ccvm_region_base(region: *const Region) -> *mut c_void {
    // SAFETY: null or a live region, as the caller guarantees.
    unsafe { region.as_ref() }.map_or(std::ptr::null_mut(), |r| r.as_ptr().cast())
}

/// The region's length in bytes (0 for a null region).
///
/// # Safety
///
/// As [`ccvm_region_base`].
#[no_mangle]
pub unsafe extern "C" fn ccvm_region_len(region: *const Region) -> usize {
    // SAFETY: null or a live region, as the caller guarantees.
    unsafe { region.as_ref() }.map_or(0, Region::len)
}

/// Copies the region's counters into `out`.
///
/// # Safety
///
/// As [`ccvm_region_base`]; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn ccvm_region_stats(region: *const Region, out: *mut CcvmStats) {
    // SAFETY: null or a live region, and null or a writable `ccvm_stats`,
    // as the caller guarantees.
    let (Some(r), Some(out)) = (unsafe { region.as_ref() }, unsafe { out.as_mut() }) else {
        return;
    };
    let s = r.stats();
    *out = CcvmStats {
        faults_zero: s.faults_zero,
        faults_cache: s.faults_cache,
        faults_disk: s.faults_disk,
        pages_compressed: s.pages_compressed,
        pages_decompressed: s.pages_decompressed,
        swap_bytes_written: s.swap.bytes_written,
        swap_bytes_read: s.swap.bytes_read,
        bytes_in: s.bytes_in,
        bytes_out: s.bytes_out,
    };
}

/// Stops paging and frees the region.
///
/// # Safety
///
/// `region` is null or from [`ccvm_region_new`] and not yet freed; no
/// thread uses its memory any more.
#[no_mangle]
pub unsafe extern "C" fn ccvm_region_free(region: *mut Region) {
    if !region.is_null() {
        // SAFETY: from `ccvm_region_new`'s Box and not yet freed.
        drop(unsafe { Box::from_raw(region) });
    }
}

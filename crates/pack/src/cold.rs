//! What a cold load needs, for measuring one: a file's pages dropped from
//! the page cache, the bytes this process has read from disks, and the
//! baseline a packed file is measured against, the same file mapped as it
//! is ([`PlainMapping`]), which the kernel pages in from the disk itself.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Drops `path`'s pages from the page cache, so that the next read goes to
/// the disk. The file's pages must be clean and unmapped for the kernel to
/// drop them, as a file just written and closed is once it is synced.
///
/// # Errors
///
/// If the file cannot be opened or the kernel refuses the advice.
pub fn drop_from_page_cache(path: &Path) -> std::io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: fadvise on our open descriptor.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Bytes this process has read from disks so far (`read_bytes` of
/// `/proc/self/io`); 0 where the kernel does not count them.
pub fn disk_bytes_read() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("read_bytes: ").and_then(|v| v.trim().parse().ok()))
        })
        .unwrap_or(0)
}

/// A file mapped read-only as it is (`mmap`, `MAP_PRIVATE`): the kernel
/// reads each page from the disk when it is first touched. Unmapped on
/// drop.
///
/// ```no_run
/// let m = ccvm_pack::PlainMapping::open(std::path::Path::new("/usr/bin/ls"))?;
/// assert_eq!(&m.as_slice()[..4], b"\x7fELF");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct PlainMapping {
    base: *mut libc::c_void,
    len: usize,
}

impl PlainMapping {
    /// Maps the whole of `path`.
    ///
    /// # Errors
    ///
    /// If it cannot be opened or mapped; an empty file cannot be mapped.
    pub fn open(path: &Path) -> std::io::Result<PlainMapping> {
        let f = File::open(path)?;
        let len = usize::try_from(f.metadata()?.len()).unwrap_or(usize::MAX);
        if len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an empty file cannot be mapped",
            ));
        }
        // SAFETY: a private read-only mapping of a file we opened; the
        // mapping keeps the file, so the descriptor may close.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(PlainMapping { base, len })
    }

    /// The file's bytes, read from the disk as they are touched.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping holds `len` readable bytes until it is
        // dropped, and the slice borrows it. (A file truncated meanwhile by
        // another process would make a touch past its end SIGBUS, as with
        // any mapped file.)
        unsafe { std::slice::from_raw_parts(self.base as *const u8, self.len) }
    }
}

impl Drop for PlainMapping {
    fn drop(&mut self) {
        // SAFETY: our mapping, no longer borrowed.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_reads_as_the_file_and_a_dropped_one_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..3 * 4096 + 17).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        drop_from_page_cache(&path).unwrap();
        assert_eq!(PlainMapping::open(&path).unwrap().as_slice(), &bytes[..]);
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        assert!(PlainMapping::open(&dir.path().join("empty")).is_err());
        assert!(drop_from_page_cache(&dir.path().join("missing")).is_err());
    }
}

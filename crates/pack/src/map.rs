//! Mapping a `.ccz` file: read-only memory whose pages are read and
//! decompressed on first touch, through userfaultfd.
//!
//! Choices:
//!
//! * Anonymous private memory, read-only, registered for missing-page
//!   faults; a handler thread reads each faulted page from the file,
//!   decompresses it into a buffer and maps it with `UFFDIO_COPY`, as
//!   OS/2's loader reads an Exepack2 page into a resident buffer and
//!   decompresses it into the page frame (paper 004 §4.2). Zero pages are
//!   mapped to the shared zero page without a read.
//! * Read-ahead: faults that walk forward through the file load a window
//!   of following pages with one read, doubling up to `MAX_RUN` pages,
//!   as the kernel reads ahead in a mapped file; a fault elsewhere loads
//!   its page alone. Without it a sequential load pays one disk access
//!   per page where plain `mmap` pays one per 128 KiB.
//! * A handler thread (userfaultfd's event mode), not the faulting thread:
//!   faults may be taken by any thread of the program, and by the kernel on
//!   its behalf (a `write(2)` from the mapping), which the SIGBUS mode
//!   cannot serve.
//! * A page that cannot be loaded (the file damaged since it was opened,
//!   a read error) ends the process with one line naming the file, the
//!   page and the offset, as the kernel ends a program with SIGBUS when a
//!   page of its mapped file cannot be read: the access has no other way
//!   to fail. [`Packed::verify`] checks every page beforehand.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ccvm_codec::PAGE_SIZE;
use ccvm_runtime::aligned::AlignedBuf;
use ccvm_runtime::uffd::{wait_for_fault, Uffd};

use crate::read::{Packed, ReadStats, MAX_RUN};
use crate::PackError;

/// A `.ccz` file mapped read-only: its bytes are [`Mapping::as_slice`],
/// each page loaded when first touched.
///
/// Invariant: while the mapping lives, its handler thread serves every
/// fault in `[base, base + len)`; dropping the mapping stops the thread
/// and unmaps the memory.
pub struct Mapping {
    base: *mut u8,
    len: usize,
    file_len: usize,
    stop: Option<OwnedFd>,
    handler: Option<JoinHandle<()>>,
    stats: Arc<Mutex<ReadStats>>,
}

// SAFETY: the memory is read-only and its faults are served for any
// thread; the raw pointer is never written through.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access is reading only.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `packed`, reading ahead up to `MAX_RUN` pages.
    ///
    /// # Errors
    ///
    /// [`PackError::Map`] when userfaultfd is unavailable or the memory
    /// cannot be mapped or registered.
    pub fn new(packed: Packed) -> Result<Mapping, PackError> {
        Self::with_readahead(packed, MAX_RUN)
    }

    /// Maps `packed`, reading ahead at most `readahead` pages (clamped to
    /// 1..=`MAX_RUN`; 1 reads only the page faulted).
    ///
    /// # Errors
    ///
    /// As [`Mapping::new`].
    pub fn with_readahead(packed: Packed, readahead: usize) -> Result<Mapping, PackError> {
        let readahead = readahead.clamp(1, MAX_RUN);
        let file_len =
            usize::try_from(packed.file_len()).map_err(|_| PackError::Map("the file is too large".into()))?;
        let len = packed.pages() as usize * PAGE_SIZE;
        let stats = Arc::new(Mutex::new(ReadStats::default()));
        if len == 0 {
            return Ok(Mapping {
                base: std::ptr::null_mut(),
                len,
                file_len,
                stop: None,
                handler: None,
                stats,
            });
        }
        let uffd = Uffd::open(false).map_err(|e| PackError::Map(e.to_string()))?;
        // SAFETY: a new anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(PackError::Map(format!(
                "mmap of {len} bytes: {}",
                std::io::Error::last_os_error()
            )));
        }
        let unmap = || {
            // SAFETY: the mapping made above, not yet handed out.
            unsafe { libc::munmap(base, len) };
        };
        if let Err(e) = uffd.register_missing(base as usize, len) {
            unmap();
            return Err(PackError::Map(format!("registering the mapping with userfaultfd: {e}")));
        }
        // SAFETY: eventfd with valid flags.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            unmap();
            return Err(PackError::Map(format!("eventfd: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: a new descriptor we own.
        let stop = unsafe { OwnedFd::from_raw_fd(efd) };
        let stop_fd = stop.as_raw_fd();
        let shared = Arc::clone(&stats);
        let start = base as usize;
        let handler = std::thread::Builder::new()
            .name("ccz-loader".into())
            .spawn(move || serve(uffd, packed, start, stop_fd, readahead, &shared))
            .map_err(|e| {
                unmap();
                PackError::Map(format!("starting the loader thread: {e}"))
            })?;
        Ok(Mapping {
            base: base.cast(),
            len,
            file_len,
            stop: Some(stop),
            handler: Some(handler),
            stats,
        })
    }

    /// The file's bytes. Touching a page the first time loads it.
    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `base` maps `len >= file_len` readable bytes for as long
        // as `self` lives; faults in it are served by the handler thread.
        unsafe { std::slice::from_raw_parts(self.base, self.file_len) }
    }

    /// What loading pages cost so far: as of the last fault served, which
    /// the handler finishes just after the faulting thread goes on.
    pub fn stats(&self) -> ReadStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Unmaps the file and returns what loading its pages cost, exactly.
    pub fn finish(mut self) -> ReadStats {
        self.stop();
        self.stats()
    }

    /// Stops the handler thread (once).
    fn stop(&mut self) {
        // The eventfd stays open until the thread has ended, so that its
        // number is not reused under the thread's poll.
        let stop = self.stop.take();
        if let Some(stop) = &stop {
            let one = 1u64;
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe { libc::write(stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
        if let Some(h) = self.handler.take() {
            let _ = h.join();
        }
        drop(stop);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        self.stop();
        if self.len > 0 {
            // SAFETY: our mapping; no reference into it outlives `self`.
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
    }
}

/// The handler thread: serves faults until `stop` is signalled.
fn serve(uffd: Uffd, mut packed: Packed, base: usize, stop: i32, readahead: usize, stats: &Mutex<ReadStats>) {
    let mut ahead = ReadAhead::new(packed.pages() as usize, readahead);
    let mut buf = AlignedBuf::new(PAGE_SIZE);
    loop {
        match wait_for_fault(uffd.raw(), stop, -1) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => fatal(&packed, format!("poll: {e}")),
        }
        loop {
            let fault = match uffd.read_fault() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => fatal(&packed, format!("reading userfaultfd: {e}")),
            };
            let addr = fault.addr & !(PAGE_SIZE - 1);
            let page = (addr - base) / PAGE_SIZE;
            let count = ahead.run(page);
            if count == 0 {
                // Mapped by an earlier fault's run while this one queued.
                let _ = uffd.wake(addr, PAGE_SIZE);
                continue;
            }
            let read = packed.read_run(page as u64, count, |p, bytes| {
                let at = base + p as usize * PAGE_SIZE;
                let mapped = if bytes.iter().all(|&b| b == 0) {
                    uffd.zeropage(at, PAGE_SIZE)
                } else {
                    buf.copy_from_slice(bytes);
                    // SAFETY: `buf` holds one page; `at` is a page of the
                    // registered range.
                    unsafe { uffd.copy(buf.as_ptr(), at, PAGE_SIZE) }
                };
                match mapped {
                    // EEXIST: another fault on the page was served first.
                    Err(e) if e as i32 == libc::EEXIST => uffd.wake(at, PAGE_SIZE).map_err(|e| e.to_string()),
                    other => other.map_err(|e| e.to_string()),
                }
                .map_err(|e| PackError::Map(format!("mapping page {p}: {e}")))
            });
            if let Err(e) = read {
                fatal(&packed, e.to_string());
            }
            *stats.lock().unwrap_or_else(|e| e.into_inner()) = packed.stats();
        }
    }
}

/// Which pages a fault loads: the faulted page, and while faults walk
/// forward through the file, a window of the pages after it that doubles
/// with each fault continuing the walk, up to the limit, as the kernel
/// reads ahead in a file. A fault elsewhere loads one page, so sparse
/// access reads no more than it touches.
struct ReadAhead {
    loaded: Vec<bool>,
    next: usize,
    window: usize,
    limit: usize,
}

impl ReadAhead {
    fn new(pages: usize, limit: usize) -> Self {
        ReadAhead {
            loaded: vec![false; pages],
            next: usize::MAX,
            window: 1,
            limit,
        }
    }

    /// Pages to load from `page` on (0 if it is loaded), marked loaded.
    fn run(&mut self, page: usize) -> usize {
        if self.loaded[page] {
            return 0;
        }
        self.window = if page == self.next {
            (self.window * 2).min(self.limit)
        } else {
            1
        };
        let count = self.loaded[page..]
            .iter()
            .take(self.window)
            .take_while(|&&l| !l)
            .count();
        self.loaded[page..page + count].fill(true);
        self.next = page + count;
        count
    }
}

/// Ends the process: see the module docs.
fn fatal(packed: &Packed, what: String) -> ! {
    eprintln!("ccvm: {}: {what}; stopping", packed.path().display());
    // Outputs being written are not left half-staged (signal-safe).
    ccvm_output::remove_staged();
    // SAFETY: _exit ends the process at once.
    unsafe { libc::_exit(ccvm_runtime::FATAL_EXIT) }
}

#[cfg(test)]
mod tests {
    use super::ReadAhead;

    #[test]
    fn the_window_doubles_along_a_walk_and_resets_elsewhere() {
        let mut r = ReadAhead::new(100, 8);
        assert_eq!(r.run(10), 1, "a first fault loads its page");
        assert_eq!(r.run(11), 2, "a fault after it doubles the window");
        assert_eq!(r.run(13), 4);
        assert_eq!(r.run(17), 8);
        assert_eq!(r.run(25), 8, "the window stops at the limit");
        assert_eq!(r.run(12), 0, "a loaded page is not loaded again");
        assert_eq!(r.run(50), 1, "a fault elsewhere starts over");
        assert_eq!(r.run(8), 1);
        assert_eq!(r.run(9), 1, "a walk stops before a loaded page");
        assert_eq!(r.run(99), 1);
        let mut s = ReadAhead::new(6, 32);
        assert_eq!(
            (s.run(0), s.run(1), s.run(3)),
            (1, 2, 3),
            "a run stops at the file's end"
        );
    }
}

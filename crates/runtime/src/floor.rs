//! The floor under any pager built on userfaultfd's signal faults: a
//! region served by a pager that only traps and moves frames.
//!
//! Every fault of ccvm's signal mode pays the kernel's fault entry, the
//! SIGBUS it raises, the handler's return, and two `UFFDIO_MOVE`s (the
//! page in, a victim out). A [`FloorRegion`] pays exactly those and
//! nothing else: no compression (a victim's frame waits, uncompressed, in
//! a shadow mapping), no store, no policy beyond a first-in first-out ring
//! of the resident pages. Its cost per fault is therefore a lower bound on
//! what a fault can cost any pager of this design, whatever its codec and
//! policy; `ccvm bench faults` prints it beside the kernel's and ccvm's.
//!
//! # Choices
//!
//! * The pager runs in the faulting thread's SIGBUS handler, as ccvm's
//!   does. It touches only its preallocated ring and the userfaultfd, so
//!   the handler allocates nothing and takes no lock.
//! * One floor region at a time in a process, touched by one thread: the
//!   handler finds it through one static pointer, and a second fault on
//!   the region from another thread meanwhile would race the first.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicPtr, Ordering};

use ccvm_codec::PAGE_SIZE;

use crate::uffd::Uffd;

/// What the SIGBUS handler works on.
struct Floor {
    uffd: Uffd,
    base: usize,
    shadow: usize,
    pages: usize,
    /// Resident pages, oldest first; never grows past its capacity.
    resident: VecDeque<u32>,
    faults: u64,
    /// The first error a move returned, as an errno (0: none).
    error: i32,
}

static FLOOR: AtomicPtr<Floor> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo; FLOOR points at the
    // region's state for as long as the handler is installed, and only the
    // one thread that touches the region reaches it (see the module docs).
    unsafe {
        let addr = (*info).si_addr() as usize;
        let f = FLOOR.load(Ordering::Acquire);
        if f.is_null() || addr < (*f).base || addr >= (*f).base + (*f).pages * PAGE_SIZE {
            // Not ours: die of it as the program would have.
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
            return;
        }
        let f = &mut *f;
        let page = (addr - f.base) / PAGE_SIZE;
        if let Some(victim) = f.resident.pop_front() {
            let v = victim as usize * PAGE_SIZE;
            if let Err(e) = f.uffd.move_pages(f.shadow + v, f.base + v, PAGE_SIZE) {
                f.error = e as i32;
            }
        }
        let p = page * PAGE_SIZE;
        if let Err(e) = f.uffd.move_pages(f.base + p, f.shadow + p, PAGE_SIZE) {
            f.error = e as i32;
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
            return;
        }
        f.resident.push_back(page as u32);
        f.faults += 1;
    }
}

/// An anonymous private mapping of `len` bytes.
fn map(len: usize) -> io::Result<usize> {
    // SAFETY: a fresh private anonymous mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// A region holding a copy of some data, with only some of its pages in
/// memory, served by trap and moves alone (see the module docs). Dropping
/// it puts the previous SIGBUS action back and unmaps it.
///
/// ```no_run
/// let data = vec![7u8; 64 * 4096];
/// let region = ccvm_runtime::floor::FloorRegion::new(&data, 16)?;
/// // SAFETY: the region's 64 pages are readable, and this thread alone
/// // touches them.
/// let first = unsafe { region.as_ptr().read_volatile() };
/// assert_eq!(first, 7);
/// assert_eq!(region.finish()?, 1, "page 0 was not resident: one fault");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct FloorRegion {
    state: *mut Floor,
    len: usize,
    /// The SIGBUS action before this region's, once the handler is in.
    old: Option<libc::sigaction>,
}

impl FloorRegion {
    /// A copy of `data`'s whole pages, of which the last `resident` (at
    /// least one) are in memory and the rest wait in the shadow.
    ///
    /// # Errors
    ///
    /// A kernel without userfaultfd's SIGBUS mode or `UFFDIO_MOVE`, a
    /// mapping or move that failed, or another floor region alive in this
    /// process.
    pub fn new(data: &[u8], resident: usize) -> io::Result<FloorRegion> {
        let pages = data.len() / PAGE_SIZE;
        if pages == 0 {
            return Err(io::Error::other("a floor region needs at least one page of data"));
        }
        let uffd = Uffd::open(true).map_err(|e| io::Error::other(format!("opening a userfaultfd: {e}")))?;
        if !uffd.can_move() {
            return Err(io::Error::other("this kernel has no UFFDIO_MOVE (Linux 6.8)"));
        }
        let len = pages * PAGE_SIZE;
        let base = map(len)?;
        let shadow = match map(len) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: the mapping just made, not yet used.
                unsafe { libc::munmap(base as *mut libc::c_void, len) };
                return Err(e);
            }
        };
        // SAFETY: the mapping just made holds `len` bytes, as many as
        // data's whole pages.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base as *mut u8, len) };
        let mut region = FloorRegion {
            state: Box::into_raw(Box::new(Floor {
                uffd,
                base,
                shadow,
                pages,
                resident: VecDeque::new(),
                faults: 0,
                error: 0,
            })),
            len,
            old: None,
        };
        // SAFETY: just made; the handler cannot see it before it is
        // published below.
        let floor = unsafe { &mut *region.state };
        floor.resident = park_all_but(floor, resident.clamp(1, pages))?;
        if FLOOR
            .compare_exchange(std::ptr::null_mut(), region.state, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(io::Error::other("another floor region is alive in this process"));
        }
        region.old = Some(install_handler());
        Ok(region)
    }

    /// The region's first byte. Reading or writing its pages is the
    /// caller's unsafe business: one thread at a time (see the module
    /// docs), within [`FloorRegion::pages`] pages.
    pub fn as_ptr(&self) -> *mut u8 {
        // SAFETY: the state lives as long as the region.
        unsafe { (*self.state).base as *mut u8 }
    }

    /// The region's length in pages (one at least).
    pub fn pages(&self) -> usize {
        self.len / PAGE_SIZE
    }

    /// Ends the region: the faults it served.
    ///
    /// # Errors
    ///
    /// The first move that failed while it served them.
    pub fn finish(self) -> io::Result<u64> {
        self.uninstall();
        // SAFETY: the handler is out; the state is ours alone.
        let (faults, error) = unsafe { ((*self.state).faults, (*self.state).error) };
        if error != 0 {
            return Err(io::Error::other(format!(
                "a move failed: {}",
                io::Error::from_raw_os_error(error)
            )));
        }
        Ok(faults)
    }

    /// Puts the previous SIGBUS action back and unpublishes the state.
    fn uninstall(&self) {
        if let Some(old) = &self.old {
            // SAFETY: restores the action saved by `install_handler`.
            unsafe { libc::sigaction(libc::SIGBUS, old, std::ptr::null_mut()) };
            FLOOR.store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

impl Drop for FloorRegion {
    fn drop(&mut self) {
        self.uninstall();
        // SAFETY: made by Box::into_raw in `new`, unreachable from the
        // handler now; its mappings are ours and no longer used.
        unsafe {
            let floor = Box::from_raw(self.state);
            for start in [floor.base, floor.shadow] {
                libc::munmap(start as *mut libc::c_void, self.len);
            }
        }
    }
}

/// Registers the region and its shadow, and moves all pages but the last
/// `resident` to the shadow; returns the resident ones, oldest first.
fn park_all_but(f: &Floor, resident: usize) -> io::Result<VecDeque<u32>> {
    let len = f.pages * PAGE_SIZE;
    for start in [f.base, f.shadow] {
        f.uffd
            .register_missing(start, len)
            .map_err(|e| io::Error::other(format!("registering the region: {e}")))?;
    }
    let mut ring = VecDeque::with_capacity(resident);
    for page in 0..f.pages {
        if page < f.pages - resident {
            let p = page * PAGE_SIZE;
            f.uffd
                .move_pages(f.shadow + p, f.base + p, PAGE_SIZE)
                .map_err(|e| io::Error::other(format!("moving page {page} out: {e}")))?;
        } else {
            ring.push_back(page as u32);
        }
    }
    Ok(ring)
}

/// Installs `on_sigbus` for SIGBUS; returns the action it replaced.
fn install_handler() -> libc::sigaction {
    // SAFETY: all-zero sigactions are valid; this one is filled before use,
    // with a handler of the SA_SIGINFO signature.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGBUS, &act, &mut old);
        old
    }
}

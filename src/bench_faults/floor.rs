//! The floor under any pager built on userfaultfd's signal faults: the
//! same touches served by a pager that only traps and moves frames.
//!
//! Every fault of ccvm's signal mode pays the kernel's fault entry, the
//! SIGBUS it raises, the handler's return, and two `UFFDIO_MOVE`s (the
//! page in, a victim out). This run pays exactly those and nothing else:
//! no compression (a victim's frame waits, uncompressed, in a shadow
//! mapping), no store, no policy beyond a first-in first-out ring of the
//! resident pages. Its cost per fault is therefore a lower bound on what a
//! fault can cost any pager of this design, whatever its codec and policy;
//! `bench faults` prints it beside the kernel's and ccvm's so that the gap
//! between ccvm and the floor, and between the floor and the kernel, are
//! read from one run.
//!
//! The pager runs in the faulting thread's SIGBUS handler, as ccvm's does.
//! It touches only its preallocated ring and the userfaultfd, so the
//! handler allocates nothing and takes no lock; the benchmark's child has
//! one thread, so nothing else can fault on the region meanwhile.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Instant;

use anyhow::{bail, Context};
use ccvm_codec::PAGE_SIZE;
use ccvm_runtime::uffd::Uffd;

use super::{touch, Run};

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
    // SAFETY: the kernel passes a valid siginfo; FLOOR points at the run's
    // state for as long as the handler is installed, and only this thread
    // touches it (see the module docs).
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
fn map(len: usize) -> anyhow::Result<usize> {
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
        bail!("mmap: {}", std::io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// The touches with `resident` of the region's pages in memory, served by
/// trap and moves alone (see the module docs).
///
/// # Errors
///
/// A kernel without userfaultfd's SIGBUS mode or `UFFDIO_MOVE`, or a move
/// that failed.
pub(super) fn run(data: &[u8], resident: usize, touches: usize, seed: u64) -> anyhow::Result<Run> {
    let pages = data.len() / PAGE_SIZE;
    let resident = resident.clamp(1, pages);
    let uffd = Uffd::open(true).context("opening a userfaultfd in SIGBUS mode")?;
    if !uffd.can_move() {
        bail!("this kernel has no UFFDIO_MOVE (Linux 6.8)");
    }
    let base = map(data.len())?;
    let shadow = map(data.len())?;
    // SAFETY: the mapping just made, as long as data.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base as *mut u8, data.len()) };
    for start in [base, shadow] {
        uffd.register_missing(start, data.len())
            .map_err(|e| anyhow::anyhow!("registering the region: {e}"))?;
    }
    // The pages beyond the resident ones start in the shadow.
    let mut ring = VecDeque::with_capacity(resident);
    for page in 0..pages {
        if page < pages - resident {
            let p = page * PAGE_SIZE;
            uffd.move_pages(shadow + p, base + p, PAGE_SIZE)
                .map_err(|e| anyhow::anyhow!("moving page {page} out: {e}"))?;
        } else {
            ring.push_back(page as u32);
        }
    }
    let state = Box::into_raw(Box::new(Floor {
        uffd,
        base,
        shadow,
        pages,
        resident: ring,
        faults: 0,
        error: 0,
    }));
    FLOOR.store(state, Ordering::Release);
    // SAFETY: an all-zero sigaction is valid, and is filled below.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installs a handler for SIGBUS with SA_SIGINFO; the old
    // action is put back below.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGBUS, &act, &mut old);
    }
    let started = Instant::now();
    // SAFETY: the region's pages, each present or served by the handler.
    let checksum = unsafe { touch(base as *mut u64, pages, touches, seed) };
    let wall_s = started.elapsed().as_secs_f64();
    // SAFETY: puts the previous action back; then no handler can see FLOOR.
    unsafe { libc::sigaction(libc::SIGBUS, &old, std::ptr::null_mut()) };
    FLOOR.store(std::ptr::null_mut(), Ordering::Release);
    // SAFETY: made by Box::into_raw above and no longer reachable.
    let state = unsafe { Box::from_raw(state) };
    for start in [base, shadow] {
        // SAFETY: our own mappings, no longer used.
        unsafe { libc::munmap(start as *mut libc::c_void, data.len()) };
    }
    if state.error != 0 {
        bail!("a move failed: {}", std::io::Error::from_raw_os_error(state.error));
    }
    Ok(Run {
        wall_s,
        faults: state.faults,
        disk_faults: 0,
        checksum,
    })
}

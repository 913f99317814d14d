//! A guarded call: the buffers it hands the kernel (see the `calls`
//! module) found, pinned and faulted in, then the call made from the
//! exempt code and the pins released.

use std::sync::atomic::Ordering::Relaxed;

use super::{
    calls, in_region, installed, raw, set_selector, Allow, ALLOW, BLOCK, CALLS, CALLS_WITH_BUFFERS, END, PAGES_TOUCHED,
    PIN_LIMIT, START,
};
use crate::pins::{self, Pin};

/// Reads `out.len()` bytes at `addr`: directly inside the region (a
/// fault there is served), through the kernel elsewhere, so that a bad
/// pointer is an error, not a crash.
pub(super) fn peek(addr: usize, out: &mut [u8]) -> bool {
    if wholly_in_region(addr, out.len()) {
        // SAFETY: inside the region, which is mapped read-write for its
        // whole length (a missing page faults and is served).
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
        return true;
    }
    through_kernel(addr, out.as_mut_ptr(), out.len(), false)
}

/// Writes `bytes` at `addr` as `peek` reads.
pub(super) fn poke(addr: usize, bytes: &[u8]) -> bool {
    if wholly_in_region(addr, bytes.len()) {
        // SAFETY: inside the region, mapped read-write.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        return true;
    }
    through_kernel(addr, bytes.as_ptr().cast_mut(), bytes.len(), true)
}

pub(super) fn wholly_in_region(addr: usize, len: usize) -> bool {
    in_region(addr) && addr.checked_add(len).is_some_and(|e| e <= END.load(Relaxed))
}

/// Copies `len` bytes between `local` and the program's `addr` through the
/// kernel (`process_vm_writev` to write, `process_vm_readv` to read), which
/// checks `addr`; whether all were copied.
pub(super) fn through_kernel(addr: usize, local: *mut u8, len: usize, write: bool) -> bool {
    let local = libc::iovec {
        iov_base: local.cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the kernel checks the remote range; the local one is the
    // caller's buffer of `len` bytes.
    let n = unsafe {
        if write {
            libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
        }
    };
    n == len as isize
}

/// Touches every page of `[start, end)` (inside the region) as `access`:
/// a read, or a write that stores what it read.
pub(crate) fn touch(start: usize, end: usize, access: calls::Access) {
    for page in (start & !(crate::PAGE_SIZE - 1)..end).step_by(crate::PAGE_SIZE) {
        // A page the program made read-only is only read, and one it made
        // unreadable (or mapped something else over) is left to the
        // kernel, which fails the call or faults on it as it would unpaged.
        let (readable, writable) = crate::protections::access(page);
        if !readable {
            continue;
        }
        // SAFETY: a page of the region, mapped readable; an atomic byte
        // is valid for any bits, and a compare-exchange of a value with
        // itself changes nothing a concurrent writer stored.
        let byte = unsafe { &*(page as *const std::sync::atomic::AtomicU8) };
        let v = byte.load(Relaxed);
        if access == calls::Access::Write && writable {
            let _ = byte.compare_exchange(v, v, Relaxed, Relaxed);
        }
    }
}

/// The region buffers of one call: pinned, and touched.
pub(super) struct Held {
    pins: [Option<Pin>; 16],
    ranges: [(usize, usize, calls::Access); 16],
    count: usize,
    pinned_bytes: usize,
    any: bool,
}

impl Held {
    pub(super) fn new() -> Held {
        Held {
            pins: [const { None }; 16],
            ranges: [(0, 0, calls::Access::Read); 16],
            count: 0,
            pinned_bytes: 0,
            any: false,
        }
    }

    /// Takes the part of `[addr, addr + len)` inside the region.
    pub(super) fn take(&mut self, addr: usize, len: usize, access: calls::Access) {
        let (lo, hi) = (START.load(Relaxed), END.load(Relaxed));
        let start = addr.max(lo);
        let end = addr.saturating_add(len).min(hi);
        if start >= end {
            return;
        }
        self.any = true;
        let (first, last) = (start & !(crate::PAGE_SIZE - 1), end.next_multiple_of(crate::PAGE_SIZE));
        if self.count < self.pins.len() && self.pinned_bytes + (last - first) <= PIN_LIMIT.load(Relaxed) {
            if let Some(pin) = pins::pin(first, last) {
                self.pins[self.count] = Some(pin);
                self.ranges[self.count] = (start, end, access);
                self.count += 1;
                self.pinned_bytes += last - first;
            }
        }
        PAGES_TOUCHED.fetch_add(((last - first) / crate::PAGE_SIZE) as u64, Relaxed);
        touch(start, end, access);
    }

    /// Touches the pinned ranges again, after every eviction decided
    /// before their pins has been carried out.
    pub(super) fn settle(&self) {
        crate::signal::settle();
        for &(start, end, access) in &self.ranges[..self.count] {
            touch(start, end, access);
        }
    }
}

/// A call about to be made by a wrapper of the C library's function (no
/// SIGSYS round trip): its region buffers are resident and pinned, and
/// this thread's calls are let through, until this is dropped.
#[must_use = "the buffers are unpinned when this is dropped"]
pub struct Prepared {
    _held: Held,
    _allow: Allow,
}

/// Prepares call `nr` with `args` (x86-64 numbering, arguments as the
/// kernel takes them) to be made through the C library, as the SIGSYS
/// handler would before making it: for wrappers of frequent calls, which
/// then cost about a tenth of an intercepted call. Does nothing when the
/// guard is not installed.
pub fn prepare(nr: i64, args: [u64; 6]) -> Prepared {
    let allow = Allow::new();
    // Inside the guard's or the pager's own code (the pager's swap-file
    // reads), calls are the runtime's, with no region buffers.
    let held = if installed() && allow.previous == BLOCK {
        CALLS.fetch_add(1, Relaxed);
        buffers_in(nr, args)
    } else {
        Held::new()
    };
    Prepared {
        _held: held,
        _allow: allow,
    }
}

/// The region buffers of call `nr`, pinned and touched.
pub(super) fn buffers_in(nr: i64, args: [u64; 6]) -> Held {
    let mut held = Held::new();
    if !calls::manages_memory(nr) {
        calls::buffers(nr, &args, &peek, &mut |addr, len, access| held.take(addr, len, access));
        // Any other argument that points into the region: its page.
        for &a in &args {
            if in_region(a as usize) {
                held.take(a as usize, 1, calls::Access::Read);
            }
        }
    }
    if held.any {
        held.settle();
        CALLS_WITH_BUFFERS.fetch_add(1, Relaxed);
    }
    held
}

/// Makes call `nr` with `args` for the program, its region buffers
/// resident and pinned until it returns.
pub(super) fn guarded_call(nr: i64, args: [u64; 6]) -> i64 {
    let held = buffers_in(nr, args);
    // Blocked while the call runs, so that a handler run inside it (a
    // signal that interrupts a blocking read) is guarded too.
    set_selector(BLOCK);
    // SAFETY: the program's own call, with its own arguments.
    let r = unsafe { raw::syscall(nr, args) };
    set_selector(ALLOW);
    drop(held);
    r
}

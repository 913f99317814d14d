//! userfaultfd, the few operations the runtime (and the `.ccz` loader of
//! `ccvm-pack`) needs.
//!
//! The kernel interface is small and stable (`linux/userfaultfd.h`: the API
//! handshake since Linux 4.3, write protection of anonymous memory since
//! 5.7), so the structures are declared here and the ioctls made with
//! `nix`. The `userfaultfd` crate would do the same through bindings that
//! `bindgen` generates at build time, which needs libclang on the build
//! machine; a fresh machine has no libclang, and ccvm must build there.

use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;

const UFFD_API: u64 = 0xAA;
const EVENT_PAGEFAULT: u8 = 0x12;
const FLAG_WRITE: u64 = 1 << 0;
const FLAG_WP: u64 = 1 << 1;
const REGISTER_MISSING: u64 = 1 << 0;
const REGISTER_WP: u64 = 1 << 1;
const WRITEPROTECT_WP: u64 = 1 << 0;
const WRITEPROTECT_DONTWAKE: u64 = 1 << 1;
/// `UFFD_FEATURE_SIGBUS`: faults raise SIGBUS in the faulting thread
/// instead of queuing an event (Linux 4.14).
const FEATURE_SIGBUS: u64 = 1 << 7;
/// `UFFD_FEATURE_MOVE`: `UFFDIO_MOVE` of anonymous pages (Linux 6.8).
const FEATURE_MOVE: u64 = 1 << 16;
/// `UFFD_FEATURE_WP_ASYNC`: the kernel lifts write protection itself on a
/// write, and `PAGEMAP_SCAN` reports the pages written since (Linux 6.7).
const FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFDIO_COPY_MODE_DONTWAKE` and `UFFDIO_ZEROPAGE_MODE_DONTWAKE`.
const MODE_DONTWAKE: u64 = 1 << 0;
/// Bits of the ioctls a registration allows: wake, copy, zeropage, writeprotect.
const NEEDED_IOCTLS: u64 = 1 << 0x02 | 1 << 0x03 | 1 << 0x04 | 1 << 0x06;

#[repr(C)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
struct Move {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    moved: i64,
}

#[repr(C)]
struct Zeropage {
    range: Range,
    mode: u64,
    zeropage: i64,
}

#[repr(C)]
struct Writeprotect {
    range: Range,
    mode: u64,
}

/// The ioctls, in a private module: `nix` declares them `pub`.
mod ioctls {
    use super::{Api, Copy, Move, Range, Register, Writeprotect, Zeropage};
    nix::ioctl_readwrite!(ioctl_api, 0xAA, 0x3F, Api);
    nix::ioctl_readwrite!(ioctl_register, 0xAA, 0x00, Register);
    nix::ioctl_read!(ioctl_wake, 0xAA, 0x02, Range);
    nix::ioctl_readwrite!(ioctl_copy, 0xAA, 0x03, Copy);
    nix::ioctl_readwrite!(ioctl_zeropage, 0xAA, 0x04, Zeropage);
    nix::ioctl_readwrite!(ioctl_move, 0xAA, 0x05, Move);
    nix::ioctl_readwrite!(ioctl_writeprotect, 0xAA, 0x06, Writeprotect);
}
use ioctls::*;

/// A page fault the kernel reports.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    /// The faulting address.
    pub addr: usize,
    /// A write access.
    pub write: bool,
    /// A write to a write-protected page (else: a missing page).
    pub write_protect: bool,
}

/// A userfaultfd descriptor, non-blocking.
pub struct Uffd {
    fd: crate::fds::Held,
    /// Faults raise SIGBUS in the faulting thread: nobody sleeps in the
    /// kernel, so mapping a page need not wake anyone.
    sigbus: bool,
    /// The kernel moves pages between registered ranges (`UFFDIO_MOVE`).
    can_move: bool,
    /// Write protection is lifted by the kernel on a write, without a
    /// fault reaching us (see [`Uffd::open_with`]).
    writes_async: bool,
}

/// Why a userfaultfd could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UffdError {
    /// Neither the system call nor /dev/userfaultfd gave a descriptor.
    #[error(
        "userfaultfd is not available (system call: {syscall}; /dev/userfaultfd: {device}): run as root, or \
         `sysctl vm.unprivileged_userfaultfd=1`, or give this user read-write access to /dev/userfaultfd"
    )]
    Unavailable {
        /// Why the system call failed.
        syscall: String,
        /// Why the device failed.
        device: String,
    },
    /// The API handshake failed.
    #[error("userfaultfd's API handshake (UFFDIO_API) failed: {0}")]
    Api(String),
    /// SIGBUS mode was asked of a kernel without it.
    #[error("the kernel lacks UFFD_FEATURE_SIGBUS (Linux 4.14); use --fault-mode thread")]
    NoSigbus,
}

impl Uffd {
    /// Opens a userfaultfd that also handles faults the kernel takes on the
    /// program's behalf (a read(2) into a region): through the system
    /// call, or failing that through /dev/userfaultfd. With `sigbus`,
    /// faults raise SIGBUS in the faulting thread instead of queuing events.
    ///
    /// # Errors
    ///
    /// [`UffdError`]: neither way gave a descriptor, the API handshake
    /// failed, or SIGBUS mode was asked of a kernel without it.
    pub fn open(sigbus: bool) -> Result<Uffd, UffdError> {
        Self::open_with(sigbus, false)
    }

    /// [`Uffd::open`], and with `write_scan`, where the kernel offers both
    /// `UFFDIO_MOVE` and asynchronous write protection, asks for the
    /// latter ([`Uffd::writes_async`]): protection then only marks pages
    /// so that `PAGEMAP_SCAN` can tell which were written since (see the
    /// `written` module). Eviction must then move frames: evicting by
    /// write-protect and copy would no longer stop a writer.
    ///
    /// # Errors
    ///
    /// As [`Uffd::open`].
    pub fn open_with(sigbus: bool, write_scan: bool) -> Result<Uffd, UffdError> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: the userfaultfd system call with valid flags.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as RawFd;
        let fd = if fd >= 0 {
            // SAFETY: a new descriptor we own.
            unsafe { OwnedFd::from_raw_fd(fd) }
        } else {
            let syscall_err = std::io::Error::last_os_error();
            let dev = OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/userfaultfd")
                .map_err(|device| UffdError::Unavailable {
                    syscall: syscall_err.to_string(),
                    device: device.to_string(),
                })?;
            // USERFAULTFD_IOC_NEW takes the new descriptor's flags.
            let request = nix::request_code_none!(0xAA, 0x00);
            // SAFETY: the device's one ioctl, with an integer argument.
            let fd = unsafe { libc::ioctl(dev.as_raw_fd(), request, flags) };
            if fd < 0 {
                return Err(UffdError::Unavailable {
                    syscall: syscall_err.to_string(),
                    device: std::io::Error::last_os_error().to_string(),
                });
            }
            // SAFETY: a new descriptor we own.
            unsafe { OwnedFd::from_raw_fd(fd) }
        };
        let features = if sigbus { FEATURE_SIGBUS } else { 0 };
        // The API handshake may be made once per descriptor, so ask what
        // the kernel offers first through a scratch descriptor.
        let offered = Self::offered_features();
        let wanted = if write_scan && offered & (FEATURE_MOVE | FEATURE_WP_ASYNC) == FEATURE_MOVE | FEATURE_WP_ASYNC {
            FEATURE_MOVE | FEATURE_WP_ASYNC
        } else {
            offered & FEATURE_MOVE
        };
        let mut api = Api {
            api: UFFD_API,
            features: features | wanted,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API on our descriptor with a valid struct.
        unsafe { ioctl_api(fd.as_raw_fd(), &mut api) }.map_err(|e| UffdError::Api(e.to_string()))?;
        if api.features & features != features {
            return Err(UffdError::NoSigbus);
        }
        let can_move = api.features & FEATURE_MOVE != 0;
        // The handshake reports every feature the kernel has; only those
        // asked for are on.
        let writes_async = can_move && wanted & FEATURE_WP_ASYNC != 0;
        // Out of the program's way (see `crate::fds`).
        let fd = crate::fds::raise(fd);
        Ok(Uffd {
            fd,
            sigbus,
            can_move,
            writes_async,
        })
    }

    /// Whether write protection is asynchronous: a write lifts it without
    /// a fault, and protecting a page only starts watching it for writes.
    pub fn writes_async(&self) -> bool {
        self.writes_async
    }

    /// The features this kernel offers (0 if it cannot say).
    fn offered_features() -> u64 {
        // SAFETY: the userfaultfd system call with valid flags.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as RawFd;
        if fd < 0 {
            return 0;
        }
        // SAFETY: a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut api = Api {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API on our descriptor with a valid struct.
        match unsafe { ioctl_api(fd.as_raw_fd(), &mut api) } {
            Ok(_) => api.features,
            Err(_) => 0,
        }
    }

    /// Whether [`Uffd::move_pages`] is available.
    pub fn can_move(&self) -> bool {
        self.can_move
    }

    /// Registers `[start, start + len)` for missing-page faults only, as a
    /// destination for [`Uffd::move_pages`].
    pub fn register_missing(&self, start: usize, len: usize) -> Result<(), Errno> {
        let mut r = Register {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode: REGISTER_MISSING,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER with a valid struct.
        unsafe { ioctl_register(self.fd.in_use().fd(), &mut r) }.map(drop)
    }

    /// Moves the pages mapped at `[src, src + len)` to `[dst, dst + len)`,
    /// atomically for each page: after it, the source is missing and the
    /// destination maps the same page frame, with no copy. Both ranges are
    /// registered with this descriptor; the destination is not mapped.
    ///
    /// # Errors
    ///
    /// `EBUSY` if a page is shared (after fork) or pinned; `EEXIST` if the
    /// destination is mapped; `ENOENT` if the source is not.
    ///
    /// An error is checked against the page tables before it is returned:
    /// Linux 6.18 has been seen to complete a move, retry it internally
    /// (when a lock it wanted was contended by another thread) and report
    /// the retry's `EEXIST`. A move whose destination is now wholly mapped
    /// and whose source wholly unmapped has happened, whatever the error,
    /// and is reported as done. The caller must be the only one moving
    /// pages into or out of both ranges, so that nothing else can have
    /// produced that state.
    pub fn move_pages(&self, dst: usize, src: usize, len: usize) -> Result<(), Errno> {
        let mut m = Move {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode: self.mode(),
            moved: 0,
        };
        // SAFETY: UFFDIO_MOVE with a valid struct; the kernel checks both ranges.
        match unsafe { ioctl_move(self.fd.in_use().fd(), &mut m) } {
            Ok(_) => Ok(()),
            Err(_) if mapped(dst, len) == Some(true) && mapped(src, len) == Some(false) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The descriptor's current number, for poll(2) (it changes when a
    /// program's `dup2` lands on it: see `crate::fds`).
    pub fn raw(&self) -> RawFd {
        self.fd.raw()
    }

    /// Registers `[start, start + len)` for missing-page and write-protect
    /// faults; `false` if the kernel cannot (before Linux 5.7).
    pub fn register(&self, start: usize, len: usize) -> bool {
        let mut r = Register {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode: REGISTER_MISSING | REGISTER_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER with a valid struct.
        let ok = unsafe { ioctl_register(self.fd.in_use().fd(), &mut r) }.is_ok();
        ok && r.ioctls & NEEDED_IOCTLS == NEEDED_IOCTLS
    }

    /// Maps a copy of `src` (one page, ours) at `dst` and wakes its waiters
    /// (in event mode; in SIGBUS mode nobody waits).
    ///
    /// # Safety
    ///
    /// `src` is valid for `len` bytes; `dst` is a registered range.
    pub unsafe fn copy(&self, src: *const u8, dst: usize, len: usize) -> Result<(), Errno> {
        let mut c = Copy {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode: self.mode(),
            copy: 0,
        };
        // SAFETY: `src` is valid for `len` bytes (the caller's promise) and
        // the kernel checks that `dst` is registered.
        unsafe { ioctl_copy(self.fd.in_use().fd(), &mut c) }.map(drop)
    }

    /// Maps the zero page at `dst` and wakes its waiters.
    pub fn zeropage(&self, dst: usize, len: usize) -> Result<(), Errno> {
        let mut z = Zeropage {
            range: Range {
                start: dst as u64,
                len: len as u64,
            },
            mode: self.mode(),
            zeropage: 0,
        };
        // SAFETY: UFFDIO_ZEROPAGE with a valid struct; the kernel checks the range.
        unsafe { ioctl_zeropage(self.fd.in_use().fd(), &mut z) }.map(drop)
    }

    fn mode(&self) -> u64 {
        if self.sigbus {
            MODE_DONTWAKE
        } else {
            0
        }
    }

    /// Wakes threads waiting on faults in the range.
    pub fn wake(&self, start: usize, len: usize) -> Result<(), Errno> {
        if self.sigbus {
            return Ok(());
        }
        let mut r = Range {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_WAKE with a valid struct.
        unsafe { ioctl_wake(self.fd.in_use().fd(), &mut r) }.map(drop)
    }

    /// Write-protects the range, without waking anyone.
    pub fn write_protect(&self, start: usize, len: usize) -> Result<(), Errno> {
        self.writeprotect(start, len, WRITEPROTECT_WP)
    }

    /// Lifts write protection from the range, waking the threads waiting
    /// on it (in event mode; in SIGBUS mode nobody waits).
    pub fn write_unprotect(&self, start: usize, len: usize) -> Result<(), Errno> {
        self.writeprotect(start, len, if self.sigbus { WRITEPROTECT_DONTWAKE } else { 0 })
    }

    fn writeprotect(&self, start: usize, len: usize, mode: u64) -> Result<(), Errno> {
        let mut w = Writeprotect {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode,
        };
        // SAFETY: UFFDIO_WRITEPROTECT with a valid struct.
        unsafe { ioctl_writeprotect(self.fd.in_use().fd(), &mut w) }.map(drop)
    }

    /// The next page fault, or `None` when none is pending. Other events
    /// (none are requested) are skipped.
    pub fn read_fault(&self) -> Result<Option<Fault>, Errno> {
        loop {
            let mut msg = [0u8; 32];
            // SAFETY: reading one 32-byte uffd_msg into our buffer.
            let n = unsafe { libc::read(self.fd.in_use().fd(), msg.as_mut_ptr().cast(), msg.len()) };
            if n < 0 {
                return match Errno::last() {
                    Errno::EAGAIN => Ok(None),
                    Errno::EINTR => continue,
                    e => Err(e),
                };
            }
            if n != 32 || msg[0] != EVENT_PAGEFAULT {
                continue;
            }
            let flags = u64::from_ne_bytes(msg[8..16].try_into().expect("8 bytes"));
            let addr = u64::from_ne_bytes(msg[16..24].try_into().expect("8 bytes"));
            return Ok(Some(Fault {
                addr: addr as usize,
                write: flags & FLAG_WRITE != 0,
                write_protect: flags & FLAG_WP != 0,
            }));
        }
    }
}

/// Waits until a fault may be pending on the userfaultfd `uffd` or the
/// descriptor `stop` is readable, or `timeout_ms` passes (-1: no limit).
/// Returns whether `stop` is readable; a wait cut short by a signal
/// returns `false`, as a timeout does.
///
/// # Errors
///
/// What `poll(2)` fails with, but `EINTR`.
pub fn wait_for_fault(uffd: RawFd, stop: RawFd, timeout_ms: i32) -> std::io::Result<bool> {
    let pollfd = |fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let mut fds = [pollfd(uffd), pollfd(stop)];
    // SAFETY: fds is a valid array of two pollfd.
    if unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) } < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(fds[1].revents & libc::POLLIN != 0)
}

/// Whether every page of `[addr, addr + len)` is mapped (`Some(true)`),
/// none is (`Some(false)`), or some are (`None`), by `mincore(2)`, which
/// for anonymous memory reports exactly whether a page table entry maps a
/// frame. `None` also if the call fails.
pub(crate) fn mapped(addr: usize, len: usize) -> Option<bool> {
    let pages = len.div_ceil(ccvm_codec::PAGE_SIZE);
    // On the stack, a chunk at a time: this runs in signal handlers, where
    // the allocator (the program's, in `ccvm exec`) may not be entered.
    let mut vec = [0u8; 64];
    let mut present = 0;
    for first in (0..pages).step_by(vec.len()) {
        let n = (pages - first).min(vec.len());
        let at = addr + first * ccvm_codec::PAGE_SIZE;
        // SAFETY: `vec` has a byte for each of the n pages mincore reports.
        if unsafe { libc::mincore(at as *mut libc::c_void, n * ccvm_codec::PAGE_SIZE, vec.as_mut_ptr()) } != 0 {
            return None;
        }
        present += vec[..n].iter().filter(|&&b| b & 1 != 0).count();
    }
    match present {
        0 => Some(false),
        n if n == pages => Some(true),
        _ => None,
    }
}

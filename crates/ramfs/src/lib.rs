//! A compressed RAM filesystem, as CRAMES keeps its RAM filesystem
//! compressed (paper 003 §3): file blocks live in ccvm's compressed page
//! [`Store`](ccvm_store::Store), which grows and shrinks with them up to a
//! hard memory limit; the tree is served to the kernel through FUSE.
//!
//! The primary abstraction is [`Fs`]: inodes and directories in memory,
//! each file's 4 KiB blocks in the store under `inode << 32 | block`,
//! every operation a result or an errno. [`mount`] serves an `Fs` at a
//! directory with the `fuser` crate.
//!
//! # Design
//!
//! * The key decision: the store holds file data only, page by page, so
//!   the filesystem inherits the store's codecs, allocators, compaction and
//!   exact memory accounting, and the limit given to `ccvm mount --size`
//!   is the store's memory limit, all counted. A write whose block does
//!   not fit fails with `ENOSPC` (after one compaction), the blocks before
//!   it written: a short write, as a full disk gives.
//! * A block of zeros is not stored (a hole), so sparse and zero-filled
//!   files cost nothing, and truncation gives blocks back at once.
//! * Names, attributes and directories are small and stay uncompressed
//!   in the process's memory, outside the limit, as CRAMES keeps its
//!   filesystem's metadata in the kernel.
//! * One lock around the whole `Fs`: FUSE requests cost microseconds of
//!   round trip; the lock is not where the time goes.
//!
//! ```
//! use std::ffi::OsStr;
//! use ccvm_ramfs::{Fs, Kind, ROOT};
//! let store = ccvm_store::Store::new(ccvm_store::StoreConfig::default()).unwrap();
//! let mut fs = Fs::new(store, u64::MAX, 0, 0);
//! let ino = fs.make(ROOT, OsStr::new("a.txt"), Kind::File, 0o644, 0, 0).unwrap().ino;
//! fs.write(ino, 10_000, b"hello").unwrap();
//! assert_eq!(fs.read(ino, 9_998, 10).unwrap(), b"\0\0hello");
//! ```
#![deny(missing_docs)]

mod fs;
mod fuse;

use std::path::Path;
use std::sync::{Arc, Mutex};

pub use fs::{Errno, Fs, Inode, Kind, SetAttr, Usage, ROOT};

/// Serves `fs` at `dir` until the filesystem is unmounted
/// (`umount DIR`), then returns what it held at the end.
///
/// # Errors
///
/// One line: FUSE is not available (no `/dev/fuse`), `dir` is missing,
/// not a directory or not empty, or the mount itself failed.
pub fn mount(fs: Fs, dir: &Path) -> Result<Usage, String> {
    check_mount_point(dir)?;
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("ccvm".into()),
        fuser::MountOption::Subtype("ccvm".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    // Two event loops, each with its own descriptor: while one waits on
    // the kernel, the other serves (the lock is held only inside an
    // operation).
    config.n_threads = Some(2);
    config.clone_fd = true;
    let last = Arc::new(Mutex::new(fs.usage()));
    let mounted = fuse::Mounted {
        fs: Mutex::new(fs),
        last: Arc::clone(&last),
    };
    let session =
        fuser::Session::new(mounted, dir, &config).map_err(|e| format!("cannot mount on {}: {e}", dir.display()))?;
    session.run().map_err(|e| format!("serving {}: {e}", dir.display()))?;
    let usage = *last.lock().unwrap_or_else(|e| e.into_inner());
    Ok(usage)
}

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT unmount `dir` (lazily), which ends
/// the session (SIGKILL cannot be caught: the next mount says what to do):
/// the signals are blocked in every thread and taken by one that waits.
/// Call it before [`mount`], from the thread that will mount, so that the
/// threads serving the filesystem inherit the mask.
///
/// # Errors
///
/// If the signals cannot be blocked, or `dir` holds a NUL byte.
pub fn unmount_on_signal(dir: &Path) -> Result<(), String> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: a path with a NUL byte cannot be mounted on", dir.display()))?;
    // SAFETY: a zeroed sigset initialised by sigemptyset and filled.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::sigaddset(&mut set, sig);
        }
        set
    };
    // SAFETY: blocking four signals in this thread; threads made after
    // inherit the mask.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
        return Err("cannot block SIGINT, SIGTERM, SIGHUP and SIGQUIT".into());
    }
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: waiting for one of the blocked signals.
        unsafe { libc::sigwait(&set, &mut sig) };
        // SAFETY: a lazy unmount of our mount point.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
    });
    Ok(())
}

/// Checks that `dir` can be mounted on: FUSE is there, and `dir` is an
/// empty directory.
///
/// # Errors
///
/// One line saying which of these is not so.
pub fn check_mount_point(dir: &Path) -> Result<(), String> {
    if !Path::new("/dev/fuse").exists() {
        return Err(
            "FUSE is not available on this machine (no /dev/fuse): load the fuse module or run where it is".into(),
        );
    }
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Err(format!(
            "cannot open /dev/fuse ({e}): mounting needs root, or read-write access to /dev/fuse and fusermount3"
        ));
    }
    let meta = std::fs::metadata(dir).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOTCONN) {
            // A filesystem whose server was killed is still mounted there.
            format!(
                "cannot mount on {}: a filesystem whose server ended is still mounted there; \
                 `umount -l {0}` (or `fusermount -u {0}`) first",
                dir.display()
            )
        } else {
            format!("cannot mount on {}: {e}", dir.display())
        }
    })?;
    if !meta.is_dir() {
        return Err(format!("cannot mount on {}: not a directory", dir.display()));
    }
    let mut entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    if entries.next().is_some() {
        return Err(format!("cannot mount on {}: the directory is not empty", dir.display()));
    }
    Ok(())
}

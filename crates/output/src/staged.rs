//! The staged files of this process, listed where a signal handler can
//! remove them: an interrupted run leaves neither a replaced output nor a
//! stray `.partial` file.

use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Slots for staged paths. More outputs staged at once than this are still
/// written correctly; only their cleanup on a signal is not promised.
const SLOTS: usize = 64;

static STAGED: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];

/// A staged path's place in the list, cleared when dropped.
#[derive(Debug)]
pub(crate) struct Listed(Option<usize>);

/// Lists `path` until the returned value is dropped.
pub(crate) fn list(path: &Path) -> Listed {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return Listed(None);
    };
    // Never freed: a handler may be reading it on another thread when the
    // slot is cleared. A few bytes an output, once.
    let ptr = c.into_raw();
    for (i, slot) in STAGED.iter().enumerate() {
        if slot
            .compare_exchange(null_mut(), ptr, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Listed(Some(i));
        }
    }
    Listed(None)
}

impl Drop for Listed {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            STAGED[i].store(null_mut(), Ordering::Release);
        }
    }
}

/// Removes every file this process is staging now. Async-signal-safe (it
/// only loads atomics and calls `unlink`): for a handler of SIGINT, SIGTERM
/// or SIGHUP that then ends the process.
pub fn remove_staged() {
    for slot in &STAGED {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: `p` is a NUL-terminated path that is never freed.
            unsafe { libc::unlink(p) };
        }
    }
}

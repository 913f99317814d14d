//! Word on long work: a spinner with the time so far, and a watch on the
//! disk a long output is written to. Both draw on standard error, and only
//! when it is a terminal: never into `--json` or `--csv` output, never into
//! a paged program's output.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner saying `what` is under way and for how long, ticking on its
/// own thread; cleared when dropped.
pub struct Activity(ProgressBar);

/// Starts an [`Activity`] (hidden unless standard error is a terminal).
pub fn activity(what: impl Into<String>) -> Activity {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("template"));
    bar.set_message(what.into());
    bar.enable_steady_tick(Duration::from_millis(200));
    Activity(bar)
}

impl Activity {
    /// Says what is under way now.
    pub fn set(&self, what: impl Into<String>) {
        self.0.set_message(what.into());
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// The space left for an unprivileged writer on `dir`'s file system.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(s.blocks_available() as u64 * s.fragment_size() as u64)
}

/// Watches the free space of the file system an output of unknown size
/// is being written to, and warns once (on standard error) when it falls
/// below [`DiskWatch::LOW`]: a trace can outgrow the disk long before it
/// ends. Stops when dropped.
pub struct DiskWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DiskWatch {
    /// Free space below which the watch warns.
    pub const LOW: u64 = 1 << 30;

    /// Watches the folder `output` is written in.
    pub fn new(output: &Path) -> DiskWatch {
        let dir: PathBuf = match output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let target = output.to_path_buf();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                if free_bytes(&dir).is_some_and(|f| f < Self::LOW) {
                    eprintln!(
                        "ccvm: warning: under 1 GiB is left on the disk of {} while it is written; Ctrl-C stops \
                         the run and keeps the previous file",
                        target.display()
                    );
                    return;
                }
                std::thread::park_timeout(Duration::from_millis(500));
            }
        });
        DiskWatch {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for DiskWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

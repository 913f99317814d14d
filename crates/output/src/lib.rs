//! The one way ccvm writes an output file: all or nothing, and never
//! through a link.
//!
//! Every report, trace, packed file, figure and table that a ccvm command
//! writes goes through [`OutputFile`], and every folder of outputs through
//! [`OutputDir`]. The primary abstraction is [`OutputFile`]: a [`Write`](std::io::Write)
//! whose bytes reach the named path only when [`OutputFile::commit`]
//! succeeds.
//!
//! # Design
//!
//! A regular file (or a name not yet taken) is written to a new file beside
//! it, created with `O_CREAT | O_EXCL` under an unguessable name, and renamed
//! over the target at commit. That one decision closes three holes at once:
//!
//! - **links:** a symbolic link planted at the target is refused up front,
//!   and one planted after the check is replaced by the rename, never
//!   followed, so nobody else's file is ever written;
//! - **partial outputs:** a failed or interrupted run leaves the previous
//!   output as it was (the staged file is removed when the value is dropped
//!   without a commit);
//! - **concurrent writers:** two runs writing one target each stage their
//!   own file; the last rename wins whole, neither can interleave.
//!
//! A target that is not a regular file (`/dev/null`, a terminal, a FIFO,
//! `/dev/stdout`) cannot be replaced, so it is checked with `lstat` and
//! written in place; a block device or a folder is refused. `/dev/stdout`,
//! `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` name this process's own
//! descriptors and write to a duplicate of the descriptor, whatever it is
//! open on (a shell's `> file` included).
//!
//! An interrupted command removes what it was staging before it dies of
//! the signal ([`interrupt`]); while it waits for a program of the user's,
//! the signal is forwarded to the program instead.
//!
//! New files get mode `0666` less the umask, like any program's output;
//! files that must stay private (swap files, which hold a program's memory)
//! use [`private_file`], mode `0600` from the moment they exist, and a cache
//! that other programs load code from lives in a [`private_dir`].
//!
//! ```
//! use std::io::Write;
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("report.txt");
//! let mut out = ccvm_output::OutputFile::create(&path)?;
//! writeln!(out, "all or nothing")?;
//! assert!(!path.exists(), "nothing reaches the target before commit");
//! out.commit()?;
//! assert_eq!(std::fs::read_to_string(&path)?, "all or nothing\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod dir;
mod file;
pub mod interrupt;
mod private;
mod staged;

pub use dir::OutputDir;
pub use file::{private_file, write, OutputFile};
pub use private::{holds, private_dir};
pub use staged::remove_staged;

use std::path::PathBuf;

/// Why an output could not be written. Each message names the path and
/// says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The target is a symbolic link: ccvm does not write through links.
    #[error(
        "{}: is a symbolic link; ccvm does not write through links (remove it, or name the file it points to)",
        .0.display()
    )]
    Link(PathBuf),
    /// The target exists and is not something an output can go to.
    #[error("{}: is {}; name a regular file, a FIFO or a character device", .path.display(), .what)]
    NotWritable {
        /// The target.
        path: PathBuf,
        /// What it is ("a folder", "a block device").
        what: &'static str,
    },
    /// A folder that must be this user's alone is not.
    #[error("{}: {why}; remove it, or point TMPDIR at a folder of your own", .path.display())]
    NotPrivate {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// An I/O error while doing `action` on `path`.
    #[error("{action} {}: {source}", .path.display())]
    Io {
        /// What was being done ("creating", "writing").
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl OutputError {
    pub(crate) fn io(action: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> OutputError {
        let path = path.to_path_buf();
        move |source| OutputError::Io { action, path, source }
    }
}

impl From<OutputError> for std::io::Error {
    fn from(e: OutputError) -> std::io::Error {
        match e {
            OutputError::Io { ref source, .. } => std::io::Error::new(source.kind(), e.to_string()),
            other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
        }
    }
}

//! [`OutputFile`]: staged and renamed for regular files, in place for
//! devices and FIFOs.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::OutputError;

/// An output on its way to `path`. Bytes written go to a staged file (for a
/// regular target) or straight to the target (a device, a FIFO, a
/// descriptor); [`commit`](Self::commit) renames the staged file into place.
/// Dropped without a commit, the staged file is removed and the target is
/// left as it was.
#[derive(Debug)]
pub struct OutputFile {
    target: PathBuf,
    sink: Sink,
}

#[derive(Debug)]
enum Sink {
    /// Field order matters: the file is removed before it leaves the list.
    Staged(tempfile::NamedTempFile, crate::staged::Listed),
    InPlace(File),
}

/// Where an output goes, from what the target is now.
enum Kind {
    Staged,
    InPlace,
    Descriptor(RawFd),
}

/// The descriptor a path names when it names one of this process's own:
/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`.
fn own_descriptor(path: &Path) -> Option<RawFd> {
    let s = path.to_str()?;
    match s {
        "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => s
            .strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse().ok()),
    }
}

fn classify(path: &Path) -> Result<Kind, OutputError> {
    if let Some(fd) = own_descriptor(path) {
        return Ok(Kind::Descriptor(fd));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kind::Staged),
        Err(e) => return Err(OutputError::io("checking", path)(e)),
    };
    let t = meta.file_type();
    if t.is_symlink() {
        Err(OutputError::Link(path.to_path_buf()))
    } else if t.is_file() {
        Ok(Kind::Staged)
    } else if t.is_dir() {
        Err(OutputError::NotWritable {
            path: path.to_path_buf(),
            what: "a folder",
        })
    } else if t.is_block_device() {
        Err(OutputError::NotWritable {
            path: path.to_path_buf(),
            what: "a block device",
        })
    } else {
        Ok(Kind::InPlace)
    }
}

/// The folder a staged file for `path` goes in.
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl OutputFile {
    /// Prepares an output to `path`. Nothing is written to `path` itself
    /// before [`commit`](Self::commit) unless it is a device, a FIFO or one
    /// of this process's descriptors.
    ///
    /// # Errors
    ///
    /// [`OutputError::Link`] if `path` is a symbolic link,
    /// [`OutputError::NotWritable`] if it is a folder or a block device,
    /// [`OutputError::Io`] if its folder cannot take a new file.
    pub fn create(path: impl AsRef<Path>) -> Result<OutputFile, OutputError> {
        let target = path.as_ref().to_path_buf();
        let sink = match classify(&target)? {
            Kind::Staged => {
                let name = target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                // The target's extension is kept last, for libraries that
                // choose a format by it (a PNG encoder).
                let ext = target
                    .extension()
                    .map(|e| format!(".{}", e.to_string_lossy()))
                    .unwrap_or_default();
                let staged = tempfile::Builder::new()
                    .prefix(&format!(".{name}."))
                    .suffix(&format!(".partial{ext}"))
                    .permissions(std::fs::Permissions::from_mode(0o666))
                    .tempfile_in(parent(&target))
                    .map_err(OutputError::io("creating a file beside", &target))?;
                let listed = crate::staged::list(staged.path());
                Sink::Staged(staged, listed)
            }
            Kind::InPlace => {
                let file = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(&target)
                    .map_err(OutputError::io("opening", &target))?;
                // Whatever was checked may have been swapped since: a regular
                // file here is never written in place.
                let meta = file.metadata().map_err(OutputError::io("checking", &target))?;
                if meta.file_type().is_file() || meta.file_type().is_block_device() {
                    return Err(OutputError::NotWritable {
                        path: target,
                        what: "changed while being opened",
                    });
                }
                Sink::InPlace(file)
            }
            Kind::Descriptor(fd) => Sink::InPlace(duplicate(fd).map_err(OutputError::io("opening", &target))?),
        };
        Ok(OutputFile { target, sink })
    }

    /// The path the output is for.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The path bytes go to now: the staged file, or the target itself when
    /// it is written in place. For libraries that open a path themselves.
    pub fn staging_path(&self) -> &Path {
        match &self.sink {
            Sink::Staged(t, _) => t.path(),
            Sink::InPlace(_) => &self.target,
        }
    }

    fn file(&mut self) -> &mut File {
        match &mut self.sink {
            Sink::Staged(t, _) => t.as_file_mut(),
            Sink::InPlace(f) => f,
        }
    }

    /// Makes the output the target's: flushes it to disk and renames the
    /// staged file over the target (replacing, never following, whatever is
    /// there by then).
    ///
    /// # Errors
    ///
    /// [`OutputError::Io`] if the data cannot be flushed or the rename fails;
    /// the target is then left as it was.
    pub fn commit(self) -> Result<(), OutputError> {
        let OutputFile { target, sink } = self;
        match sink {
            Sink::Staged(staged, _listed) => {
                staged
                    .as_file()
                    .sync_all()
                    .map_err(OutputError::io("writing", &target))?;
                staged
                    .persist(&target)
                    .map_err(|e| OutputError::io("renaming into", &target)(e.error))?;
            }
            Sink::InPlace(mut f) => f.flush().map_err(OutputError::io("writing", &target))?,
        }
        Ok(())
    }
}

impl OutputFile {
    /// Makes the finished file `done` the output instead of what was
    /// written here: renamed over the target (it must be on the target's
    /// file system, e.g. made in its folder), or copied into a target
    /// written in place. For outputs that another process wrote whole.
    ///
    /// # Errors
    ///
    /// [`OutputError::Io`] if the rename or the copy fails; the target is
    /// then left as it was (or, written in place, holds what was copied).
    pub fn commit_from(self, done: &Path) -> Result<(), OutputError> {
        let OutputFile { target, sink } = self;
        match sink {
            Sink::Staged(staged, _listed) => {
                std::fs::rename(done, &target).map_err(OutputError::io("renaming into", &target))?;
                drop(staged);
            }
            Sink::InPlace(mut f) => {
                let mut from = File::open(done).map_err(OutputError::io("reading", done))?;
                io::copy(&mut from, &mut f).map_err(OutputError::io("writing", &target))?;
            }
        }
        Ok(())
    }
}

/// A duplicate of this process's descriptor `fd`, close-on-exec.
fn duplicate(fd: RawFd) -> io::Result<File> {
    // SAFETY: F_DUPFD_CLOEXEC only reads `fd` and returns a new descriptor or -1.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a descriptor just made, owned by nothing else.
    Ok(unsafe { File::from_raw_fd(new) })
}

/// Seeking moves within what is being written (a staged file or the target
/// written in place); it fails on a FIFO or a terminal.
impl io::Seek for OutputFile {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        self.file().seek(pos)
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

/// Writes `bytes` to `path` whole, the [`OutputFile`] way.
///
/// # Errors
///
/// As [`OutputFile::create`] and [`OutputFile::commit`], or a write error.
pub fn write(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), OutputError> {
    let mut out = OutputFile::create(path.as_ref())?;
    out.write_all(bytes)
        .map_err(OutputError::io("writing", path.as_ref()))?;
    out.commit()
}

/// A new file in `dir` that only this user can read or write (mode `0600`
/// from the moment it exists, under an unguessable name, `O_EXCL`), for
/// files that hold a program's memory. It is removed when the returned
/// value is dropped.
///
/// # Errors
///
/// [`OutputError::Io`] if `dir` cannot take a new file.
pub fn private_file(dir: &Path, prefix: &str) -> Result<tempfile::NamedTempFile, OutputError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(OutputError::io("creating a file in", dir))
}

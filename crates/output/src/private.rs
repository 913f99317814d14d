//! Folders and files that only this user can read or write.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::OutputError;

/// Makes sure `path` is a folder that this user owns and nobody else can
/// enter (mode `0700`), making it if it does not exist. The folder is
/// opened without following a link (`O_NOFOLLOW | O_DIRECTORY`) and judged
/// by what the open descriptor is, so a link or a folder that another user
/// made first (in a shared folder such as `/tmp`) is refused, never used.
///
/// # Errors
///
/// [`OutputError::NotPrivate`] naming what is wrong and what to do, or
/// [`OutputError::Io`] if the folder cannot be made or opened.
///
/// ```
/// let tmp = tempfile::tempdir()?;
/// let mine = tmp.path().join("cache");
/// ccvm_output::private_dir(&mine)?;
/// std::fs::set_permissions(&mine, std::os::unix::fs::PermissionsExt::from_mode(0o777))?;
/// assert!(ccvm_output::private_dir(&mine).is_err(), "a folder others may write is refused");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn private_dir(path: &Path) -> Result<(), OutputError> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(OutputError::io("creating", path)(e)),
    }
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => OutputError::NotPrivate {
                path: path.to_path_buf(),
                why: "is not a folder (a link or a file is there)".into(),
            },
            _ => OutputError::io("opening", path)(e),
        })?;
    let meta = dir.metadata().map_err(OutputError::io("checking", path))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(OutputError::NotPrivate {
            path: path.to_path_buf(),
            why: format!("belongs to uid {}, not to you (uid {me})", meta.uid()),
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(OutputError::NotPrivate {
            path: path.to_path_buf(),
            why: format!(
                "has mode {:o}: other users may change what is in it",
                meta.permissions().mode() & 0o777
            ),
        });
    }
    Ok(())
}

/// Whether `path` is a regular file, not a link, owned by this user, that
/// holds exactly `bytes`.
pub fn holds(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Read;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    match f.metadata() {
        Ok(m) if m.is_file() && m.uid() == me && m.len() == bytes.len() as u64 => {}
        _ => return false,
    }
    let mut have = Vec::with_capacity(bytes.len());
    f.read_to_end(&mut have).is_ok() && have == bytes
}

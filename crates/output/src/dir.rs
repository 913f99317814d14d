//! [`OutputDir`]: a folder of outputs that a failed run does not leave
//! behind empty.

use std::path::{Path, PathBuf};

use crate::{OutputError, OutputFile};

/// A folder that outputs go in (`--out DIR`). If this value made the folder
/// and is dropped before [`keep`](Self::keep), it removes the folder again,
/// but only while it is empty: nothing else in it is ever deleted.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    made: bool,
}

impl OutputDir {
    /// Uses the folder `path`, making it (and its parents) if it does not
    /// exist.
    ///
    /// # Errors
    ///
    /// [`OutputError::Link`] if `path` is a symbolic link owned by another
    /// user (a link planted in a shared folder such as `/tmp`), or
    /// [`OutputError::NotWritable`] if it exists and is not a folder, or
    /// [`OutputError::Io`] if it cannot be made.
    ///
    /// ```
    /// let tmp = tempfile::tempdir()?;
    /// let dir = ccvm_output::OutputDir::create(tmp.path().join("results"))?;
    /// let path = dir.path().to_path_buf();
    /// drop(dir); // a run that failed before writing anything
    /// assert!(!path.exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(path: impl AsRef<Path>) -> Result<OutputDir, OutputError> {
        use std::os::unix::fs::MetadataExt;
        let path = path.as_ref().to_path_buf();
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                // SAFETY: geteuid cannot fail.
                let me = unsafe { libc::geteuid() };
                if m.uid() != me || !path.is_dir() {
                    return Err(OutputError::Link(path));
                }
                Ok(OutputDir { path, made: false })
            }
            Ok(m) if m.is_dir() => Ok(OutputDir { path, made: false }),
            Ok(_) => Err(OutputError::NotWritable {
                path,
                what: "not a folder",
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&path).map_err(OutputError::io("creating", &path))?;
                Ok(OutputDir { path, made: true })
            }
            Err(e) => Err(OutputError::io("checking", &path)(e)),
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An output named `name` in the folder (see [`OutputFile::create`]).
    ///
    /// # Errors
    ///
    /// As [`OutputFile::create`].
    pub fn file(&self, name: &str) -> Result<OutputFile, OutputError> {
        OutputFile::create(self.path.join(name))
    }

    /// Keeps the folder whatever it holds.
    pub fn keep(mut self) {
        self.made = false;
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if self.made {
            // Fails, as it should, unless the folder is empty.
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

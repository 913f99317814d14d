//! Loads folders of memory pages: the test and benchmark data of ccvm.
//!
//! The primary abstraction is [`PageFile`]: one file of whole 4096-byte
//! pages, read into memory. A corpus is a folder of such files
//! ([`load_dir`]); a file whose name ends in `.zst` is decompressed first,
//! so the project's own corpus (real pages captured from real programs by
//! `corpus/capture.py`) can be committed compactly while any folder of raw
//! page dumps works too.
//!
//! Every problem (missing folder, empty folder, a file whose size is not a
//! multiple of 4096, unreadable or corrupt data) is a [`CorpusError`] whose
//! message is one line naming the file and what to do.
//!
//! ```
//! let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
//! assert!(files.iter().all(|f| f.data.len() % ccvm_corpus::PAGE_SIZE == 0));
//! ```
#![deny(missing_docs)]

pub mod sensor;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Size of one page in a corpus file: ccvm's page (the one definition is
/// the codec crate's).
pub use ccvm_codec::PAGE_SIZE;

/// Why a corpus could not be loaded.
#[derive(Debug, Error)]
pub enum CorpusError {
    /// The folder does not exist or is not a folder.
    #[error("corpus folder {0} does not exist or is not a folder: pass --corpus with a folder of page files")]
    NoFolder(PathBuf),
    /// The folder holds no page files.
    #[error("corpus folder {0} has no page files: add files of whole 4096-byte pages (raw or .zst)")]
    Empty(PathBuf),
    /// A file's size is not a whole number of pages.
    #[error("{path}: {len} bytes is not a multiple of 4096: a corpus file must hold whole pages")]
    NotPages {
        /// The file.
        path: PathBuf,
        /// Its (decompressed) size.
        len: usize,
    },
    /// A file is empty.
    #[error("{0}: file is empty: a corpus file must hold at least one page")]
    EmptyFile(PathBuf),
    /// A file could not be read or decompressed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// One corpus file: whole pages, in file order.
#[derive(Debug, Clone)]
pub struct PageFile {
    /// The file name without `.zst` and without `.pages`.
    pub name: String,
    /// Where it was read from.
    pub path: PathBuf,
    /// The pages, concatenated; the length is a positive multiple of
    /// [`PAGE_SIZE`].
    pub data: Vec<u8>,
}

impl PageFile {
    /// The pages of the file.
    pub fn pages(&self) -> std::slice::ChunksExact<'_, u8> {
        self.data.chunks_exact(PAGE_SIZE)
    }

    /// How many pages the file holds.
    pub fn page_count(&self) -> usize {
        self.data.len() / PAGE_SIZE
    }
}

/// The project's bundled corpus folder (`corpus/pages` in the repository).
pub fn default_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus/pages");
    dir.canonicalize().unwrap_or(dir)
}

/// Loads one page file, decompressing it if its name ends in `.zst`.
///
/// # Errors
///
/// [`CorpusError::Io`] if it cannot be read or decompressed,
/// [`CorpusError::EmptyFile`] or [`CorpusError::NotPages`] if it does not
/// hold whole pages.
pub fn load_file(path: &Path) -> Result<PageFile, CorpusError> {
    let io = |source| CorpusError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = fs::read(path).map_err(io)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (data, stem) = match file_name.strip_suffix(".zst") {
        Some(stem) => {
            let mut data = Vec::new();
            zstd::stream::read::Decoder::new(&raw[..])
                .and_then(|mut d| d.read_to_end(&mut data))
                .map_err(io)?;
            (data, stem)
        }
        None => (raw, file_name.as_str()),
    };
    if data.is_empty() {
        return Err(CorpusError::EmptyFile(path.to_path_buf()));
    }
    if data.len() % PAGE_SIZE != 0 {
        return Err(CorpusError::NotPages {
            path: path.to_path_buf(),
            len: data.len(),
        });
    }
    let name = stem.strip_suffix(".pages").unwrap_or(stem).to_string();
    Ok(PageFile {
        name,
        path: path.to_path_buf(),
        data,
    })
}

/// Loads every regular, non-hidden file of `dir`, sorted by name.
///
/// # Errors
///
/// [`CorpusError::NoFolder`] or [`CorpusError::Empty`] for a bad folder,
/// and the errors of [`load_file`] for the first bad file.
pub fn load_dir(dir: impl AsRef<Path>) -> Result<Vec<PageFile>, CorpusError> {
    let dir = dir.as_ref();
    let entries = fs::read_dir(dir).map_err(|_| CorpusError::NoFolder(dir.to_path_buf()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    if paths.is_empty() {
        return Err(CorpusError::Empty(dir.to_path_buf()));
    }
    paths.sort();
    paths.iter().map(|p| load_file(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_corpus_loads() {
        let files = load_dir(default_dir()).unwrap();
        assert!(files.len() >= 6);
        for f in &files {
            assert!(f.page_count() >= 1000, "{}", f.name);
            assert!(!f.name.ends_with(".pages"));
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let tmp = std::env::temp_dir().join(format!("ccvm-corpus-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        let e = load_dir(&tmp).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        fs::create_dir_all(&tmp).unwrap();
        let e = load_dir(&tmp).unwrap_err().to_string();
        assert!(e.contains("has no page files"), "{e}");
        fs::write(tmp.join("odd.bin"), vec![0u8; 4097]).unwrap();
        let e = load_dir(&tmp).unwrap_err().to_string();
        assert!(
            e.contains("odd.bin") && e.contains("4097 bytes is not a multiple of 4096"),
            "{e}"
        );
        fs::write(tmp.join("odd.bin"), b"not zstd").unwrap();
        fs::rename(tmp.join("odd.bin"), tmp.join("odd.zst")).unwrap();
        let e = load_dir(&tmp).unwrap_err().to_string();
        assert!(e.contains("odd.zst"), "{e}");
        assert!(!e.contains('\n'));
        fs::remove_dir_all(&tmp).unwrap();
    }
}

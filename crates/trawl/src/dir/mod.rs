//! The machinery of an index directory, the same for every kind and knowing none of them:
//! the envelope every trawl file shares ([`file`](mod@file)), the manifest that lists an index's files
//! ([`manifest`]), atomic commits and the directory's locks ([`txn`]) and the contract a
//! kind's files meet to be described and verified ([`component`]).
//!
//! Which files an index holds is what its manifest lists; which files in a directory are
//! trawl's is what their own bytes say ([`is_index_file`]): nothing here names a kind's files.

pub mod bytes;
pub mod component;
pub mod file;
pub mod manifest;
pub mod txn;

use std::path::{Path, PathBuf};

pub use component::{Component, Named, Verified};
pub use file::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
pub use manifest::{
    BuildRecord, IvfRecord, KindName, Manifest, ManifestFile, RecallPoint, RecallRecord, LOG_FILE,
    MANIFEST_FILE,
};

/// Why a directory's files do not make one index.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// A file is damaged, truncated, missing or of the wrong kind.
    #[error(transparent)]
    File(#[from] FileError),
    /// The files do not belong together (mixed builds, a file the manifest does not list).
    #[error("{}: {reason}", dir.display())]
    Mismatch {
        /// The directory.
        dir: PathBuf,
        /// What disagrees.
        reason: String,
    },
}

impl DirError {
    /// What kind of failure this is.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::File(f) => f.kind(),
            Self::Mismatch { .. } => crate::ErrorKind::Corrupt,
        }
    }
}

/// Whether the file `name` in `dir` is an index file written by trawl: its name ends in
/// `.trawl` and its first bytes are trawl's magic (`TRAWL`, which begins the magic of every
/// trawl file format). The manifest and the write-ahead log are index files too; a lock file
/// (`.trawl.lock`) and a directory are not.
pub fn is_index_file(dir: &Path, name: &str) -> bool {
    use std::io::Read;
    if !name.ends_with(".trawl") || name.starts_with('.') {
        return false;
    }
    let path = dir.join(name);
    if !path.is_file() {
        return false;
    }
    let mut magic = [0u8; 5];
    std::fs::File::open(&path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"TRAWL")
}

/// The index files in `dir` ([`is_index_file`]) other than the manifest and the write-ahead
/// log, sorted by name.
pub fn index_files(dir: &Path) -> Result<Vec<String>, FileError> {
    let io = |e: std::io::Error| FileError::new(dir, e.into());
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name != MANIFEST_FILE && name != LOG_FILE && is_index_file(dir, &name) {
            v.push(name);
        }
    }
    v.sort();
    Ok(v)
}

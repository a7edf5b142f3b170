//! Why an operation on a live index failed.

use std::path::PathBuf;

use crate::dir::txn::TxnError;
use crate::kinds::graph::updates::wal::WalError;
use crate::kinds::graph::{IndexBuildError, OpenError};
use crate::search::SearchError;
use crate::ErrorKind;

/// Why an operation on a live index failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The call is wrong (shapes, ids, values): nothing was changed.
    #[error("{0}")]
    InvalidInput(String),
    /// The update delta's memory budget is full: nothing was changed; merge first.
    #[error(
        "the update delta holds {held} vectors and its memory budget ({limit} bytes, {per} \
         per vector with its growth) takes {most}: {asked} more do not fit; merge (`trawl \
         merge`, `index.merge()`) to empty it, or open with a larger memory_budget"
    )]
    DeltaFull {
        /// Vectors in the delta now.
        held: usize,
        /// Vectors the call adds.
        asked: usize,
        /// Vectors the budget holds.
        most: u64,
        /// The budget, bytes.
        limit: u64,
        /// Bytes per vector it is counted at.
        per: u64,
    },
    /// The index was opened read-only.
    #[error("{}: the index is open read-only: open it for writing to change it", dir.display())]
    ReadOnly {
        /// The index directory.
        dir: PathBuf,
    },
    /// Opening the index failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The write-ahead log could not be read or written.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// Another process writes the index, or the directory could not be written.
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// Writing the merged version failed.
    #[error(transparent)]
    Merge(#[from] IndexBuildError),
    /// A search failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// A bug in trawl: please report it.
    #[error("internal error: {0}")]
    Internal(String),
    /// The log holds an operation the index cannot apply (damaged or foreign log).
    #[error("{}: {reason}", path.display())]
    BadLog {
        /// The log file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl LiveError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidInput(_) | Self::ReadOnly { .. } | Self::DeltaFull { .. } => {
                ErrorKind::InvalidInput
            }
            Self::Open(e) => e.kind(),
            Self::Wal(e) => e.kind(),
            Self::Txn(e) => e.kind(),
            Self::Merge(e) => e.kind(),
            Self::Search(e) => e.kind(),
            Self::BadLog { .. } => ErrorKind::Corrupt,
            Self::Internal(_) => ErrorKind::Internal,
        }
    }
}

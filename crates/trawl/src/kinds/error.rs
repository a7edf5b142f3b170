//! [`Error`]: the one error type of the index-kind contract.

use crate::kinds::graph::updates::live::LiveError;
use crate::kinds::graph::OpenError;
use crate::kinds::sharded::ShardError;
use crate::search::SearchError;
use crate::ErrorKind;

/// Why opening, searching or describing an index of any kind failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The call is wrong (a parameter of another kind, queries of the wrong shape).
    #[error("{0}")]
    InvalidInput(String),
    /// Opening the index failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A search failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// An operation on the index's updates failed.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// An operation on a sharded index failed.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// A build failed.
    #[error(transparent)]
    Build(#[from] crate::kinds::graph::IndexBuildError),
}

impl From<crate::dir::FileError> for Error {
    fn from(e: crate::dir::FileError) -> Self {
        Self::Open(e.into())
    }
}

impl From<crate::dir::DirError> for Error {
    fn from(e: crate::dir::DirError) -> Self {
        Self::Open(e.into())
    }
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidInput(_) => ErrorKind::InvalidInput,
            Self::Open(e) => e.kind(),
            Self::Search(e) => e.kind(),
            Self::Live(e) => e.kind(),
            Self::Shard(e) => e.kind(),
            Self::Build(e) => e.kind(),
        }
    }
}

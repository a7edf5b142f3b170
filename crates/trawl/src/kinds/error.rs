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
    /// The memory budget cannot hold what the index needs.
    #[error(transparent)]
    Budget(#[from] crate::kinds::plan::PlanError),
}

impl From<crate::kinds::graph::plan::GraphPlanError> for Error {
    fn from(e: crate::kinds::graph::plan::GraphPlanError) -> Self {
        match e {
            crate::kinds::graph::plan::GraphPlanError::Open(e) => Self::Open(e),
            crate::kinds::graph::plan::GraphPlanError::Plan(e) => Self::Budget(e),
        }
    }
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
            Self::Budget(_) => ErrorKind::InvalidInput,
        }
    }
}

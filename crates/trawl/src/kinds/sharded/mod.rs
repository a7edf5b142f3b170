//! Sharded indexes: the data split into `S` partitions by balanced k-means, each partition an
//! ordinary trawl index in its own directory, and a shard manifest (`shards.trawl`) that ties
//! them together (centroids, each shard's global ids, the build id of each shard's index).
//!
//! **Partitioning** ([`partition`]): k-means with `S` centroids on a seeded sample (normalised
//! vectors for cosine), then every vector goes to its nearest centroid unless that partition
//! is full: the capacity is `⌈(1 + slack) · n / S⌉`, and vectors are placed in decreasing order
//! of how much they lose by moving (second-nearest minus nearest centroid distance), so the few
//! that overflow are the ones on a boundary anyway. Optional replication: a vector also joins
//! its second-nearest partition when `dist(v, c₂) ≤ (1 + ε) · dist(v, c₁)` (L2 distances, not
//! squared), so queries near a boundary find it in either shard.
//!
//! **Searching** ([`ShardedIndex`]): each query goes to its `probe` nearest partitions by
//! centroid distance (all by default), each shard searches as a single index would, local ids
//! map to global ids, and the per-shard top-k lists merge by exact distance (ties by id; a
//! replicated vector found in two shards counts once). Statistics (pages, hops, …) add up over
//! the shards a query visited.
//!
//! **Files**: `DIR/shards.trawl` (magic `TRAWLSHD`, version 1; a JSON header, then the centroids
//! and the id lists, see [`manifest`]) and `DIR/shard-000/`, `DIR/shard-001/`, … each a complete
//! index. The manifest is written last; opening checks that every shard's index is the build
//! the manifest recorded, so a shard rebuilt or replaced behind its back is refused.
//!
//! **Updates** are not supported: a sharded search does not replay the shards' write-ahead
//! logs, so opening a shard's directory for writing (insert, delete, upsert, merge) is
//! refused, and so is opening a sharded index one of whose shards' logs holds operations not
//! merged into its files (see [`crate::kinds::member`]). Rebuild the sharded index from the updated data.

mod build;
pub mod kind;
pub mod manifest;
mod partition;
pub mod plan;
mod search;

pub use build::{
    build_shard, build_sharded_index, finish_sharded_index, plan_shards, shard_dir_name,
    SHARD_PLAN_FILE,
};
pub use build::{ShardBuildReport, ShardPlanReport};
pub use manifest::{ShardEntry, ShardManifest, SHARD_MANIFEST_FILE};
pub use partition::{partition, Partition};
pub use search::ShardedIndex;

use crate::data::DataError;
use crate::dir::FileError;
use crate::kinds::graph::updates::wal::WalError;
use crate::kinds::graph::{IndexBuildError, OpenError};
use crate::progress::Cancelled;
use crate::search::SearchError;

/// How to split the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShardParams {
    /// Number of partitions `S` (≥ 1).
    pub shards: usize,
    /// Balance: a partition holds at most `⌈(1 + slack) · n / S⌉` primary vectors.
    pub slack: f64,
    /// Boundary replication's ε (0 = none): a vector also joins its second-nearest partition
    /// when `dist(v, c₂) ≤ (1 + ε) · dist(v, c₁)`.
    pub epsilon: f64,
    /// Seed of the sample and the k-means.
    pub seed: u64,
}

impl Default for ShardParams {
    fn default() -> Self {
        Self {
            shards: 2,
            slack: 0.1,
            epsilon: 0.0,
            seed: 0x5_4a2d,
        }
    }
}

impl ShardParams {
    /// Checks the parameters against `n` vectors.
    pub fn validate(&self, n: usize) -> Result<(), ShardError> {
        if self.shards == 0 {
            return Err(ShardError::InvalidParams(
                "shards must be at least 1".into(),
            ));
        }
        if self.shards > n {
            return Err(ShardError::InvalidParams(format!(
                "{} shards for {n} vectors: need at least one vector per shard",
                self.shards
            )));
        }
        if self.shards > MAX_SHARDS {
            return Err(ShardError::InvalidParams(format!(
                "{} shards is above the limit of {MAX_SHARDS}",
                self.shards
            )));
        }
        if !(self.slack.is_finite() && self.slack >= 0.0) {
            return Err(ShardError::InvalidParams(format!(
                "slack {} must be a finite number ≥ 0",
                self.slack
            )));
        }
        if !(self.epsilon.is_finite() && self.epsilon >= 0.0) {
            return Err(ShardError::InvalidParams(format!(
                "epsilon {} must be a finite number ≥ 0",
                self.epsilon
            )));
        }
        Ok(())
    }
}

/// Most shards one manifest holds.
pub const MAX_SHARDS: usize = 4096;

/// Why a sharded build, open or search failed.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// A parameter is out of range.
    #[error("invalid shard parameters: {0}")]
    InvalidParams(String),
    /// The input vectors are unusable.
    #[error(transparent)]
    Data(#[from] DataError),
    /// Building one shard's index failed.
    #[error("building shard {shard}: {source}")]
    Build {
        /// The shard.
        shard: usize,
        /// Why.
        source: IndexBuildError,
    },
    /// Opening one shard's index failed.
    #[error("opening shard {shard}: {source}")]
    Open {
        /// The shard.
        shard: usize,
        /// Why.
        source: OpenError,
    },
    /// Searching one shard failed.
    #[error("searching shard {shard}: {source}")]
    Search {
        /// The shard.
        shard: usize,
        /// Why.
        source: SearchError,
    },
    /// The shard manifest, a plan file or a shard is missing, damaged or from another build.
    #[error(transparent)]
    File(#[from] FileError),
    /// A shard's write-ahead log could not be read.
    #[error("shard {shard}: {source}")]
    Log {
        /// The shard.
        shard: usize,
        /// Why.
        source: WalError,
    },
    /// A shard's write-ahead log holds operations not merged into its files (written through
    /// the shard's directory, by a trawl that did not refuse it): a sharded search would not
    /// see them.
    #[error(
        "shard {shard}: {} holds {ops} logged update(s) not merged into the shard's files; a \
         sharded search does not apply its shards' logs and updates to sharded indexes are not \
         supported: rebuild the sharded index from the updated data (`trawl shard build`)",
        path.display()
    )]
    UnmergedLog {
        /// The shard.
        shard: usize,
        /// The shard's log, `wal.trawl`.
        path: std::path::PathBuf,
        /// Operations logged after the last merge.
        ops: usize,
    },
    /// The shards do not agree with the manifest or with each other.
    #[error("{0}")]
    Mismatch(String),
    /// The query batch does not fit the index (dimension, element type).
    #[error("{0}")]
    BadQuery(String),
    /// k-means or I/O outside a shard failed.
    #[error("{0}")]
    Other(String),
    /// Cancelled through [`crate::progress::Control`].
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl ShardError {
    /// What kind of failure this is.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Cancelled(_) => crate::ErrorKind::Cancelled,
            Self::Data(e) => e.kind(),
            Self::Build { source, .. } => source.kind(),
            Self::Open { source, .. } => source.kind(),
            Self::Search { source, .. } => source.kind(),
            Self::File(e) => e.kind(),
            Self::Log { source, .. } => source.kind(),
            Self::UnmergedLog { .. } => crate::ErrorKind::Corrupt,
            Self::Mismatch(_) => crate::ErrorKind::Corrupt,
            Self::Other(_) => crate::ErrorKind::Internal,
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

#[cfg(test)]
mod tests;

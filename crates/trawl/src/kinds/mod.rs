//! The contract of an index kind: [`IndexKind`], which every kind implements (open, search
//! rows into [`Hits`], describe, its size), and [`AnyIndex`], the delegating enum the CLI,
//! Python and every later feature reach all kinds through. Parameters stay typed per kind
//! ([`IndexKind::Params`]); [`KindParams`] carries them through [`AnyIndex`].
//!
//! The kinds: [`GraphIndex`] (a Vamana graph on disk; updates are its capability, not a kind
//! of their own), [`crate::kinds::ivf::IvfIndex`] (FusionANNS), [`crate::kinds::sharded::ShardedIndex`]
//! (graph indexes of partitions, searched and merged), [`crate::kinds::flat::FlatIndex`] (the
//! vectors on disk, searched exactly).

mod any;
pub mod build;
pub mod common;
mod error;
pub mod flat;
pub mod graph;
pub(crate) mod growing;
mod hits;
pub mod info;
pub mod ivf;
pub mod member;
pub mod named;
mod open_plan;
pub mod options;
pub mod plan;
pub mod sharded;
pub mod slot_file;
mod verify;

pub use crate::data::Queries;
pub use any::{kind_of, open, AnyIndex};
pub use build::{build_with, BuildOptions, Built};
pub use error::Error;
pub use graph::kind::GraphIndex;
pub use hits::{Hits, RangeHits, HOLE};
pub use open_plan::plan_memory;
pub use options::{open_with, OpenReport, Options};
pub use plan::{MemoryPlan, PlanError, PlanItem};
pub use sharded::kind::ShardedParams;

use std::path::Path;

use crate::filter::QueryFilter;
use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::{IndexInfo, KindName, OpenOptions};

/// How a batch search runs: threads, and queries each thread keeps in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Search threads (1 = the calling thread's work on one thread).
    pub threads: usize,
    /// Queries each thread keeps in flight (1 = one at a time).
    pub interleave: usize,
}

/// `threads` threads, one query at a time on each.
impl From<usize> for Run {
    fn from(threads: usize) -> Self {
        Self {
            threads,
            interleave: 1,
        }
    }
}

impl Default for Run {
    fn default() -> Self {
        Self {
            threads: 1,
            interleave: 1,
        }
    }
}

/// One index kind: how it opens, searches and describes itself.
pub trait IndexKind: Sized + Send + Sync {
    /// The kind's search parameters.
    type Params: Clone + std::fmt::Debug;

    /// Opens the index of this kind in `dir`.
    fn open_dir(dir: &Path, opts: OpenOptions) -> Result<Self, Error>;

    /// The kind's name.
    fn kind(&self) -> KindName;

    /// Vectors a search can return.
    fn n(&self) -> usize;

    /// Dimension.
    fn dim(&self) -> usize;

    /// Element type.
    fn dtype(&self) -> DType;

    /// Metric.
    fn metric(&self) -> Metric;

    /// Searches every query: `params.k` results per query, nearest first, missing ones
    /// [`HOLE`]; a query with a filter (`filter`) returns only vectors that match it.
    fn search<T: Element>(
        &self,
        queries: Queries<'_, T>,
        params: &Self::Params,
        run: Run,
        filter: &QueryFilter<'_>,
    ) -> Result<Hits, Error>;

    /// Range search: every vector whose exact distance to a query is at most `radius`,
    /// nearest first, with no cap (a query may have none, or thousands); a query with a
    /// filter returns only vectors that match it. The radius is finite (checked by
    /// [`check_radius`]); a negative one is meaningful for inner product and finds nothing
    /// with the other metrics. Every result is verified by its exact distance.
    fn range_search<T: Element>(
        &self,
        queries: Queries<'_, T>,
        radius: f32,
        params: &Self::Params,
        run: Run,
        filter: &QueryFilter<'_>,
    ) -> Result<RangeHits, Error>;

    /// Its description.
    fn info(&self) -> Result<IndexInfo, Error>;

    /// Bytes held in memory at search time.
    fn memory_bytes(&self) -> u64;

    /// Bytes on disk of the files searched.
    fn disk_bytes(&self) -> u64;

    /// The I/O engine a search thread gets (opened to describe it).
    fn engine_info(&self) -> Result<crate::io::EngineInfo, Error>;

    /// Reads every file of the index whole and checks it (each page against its checksum,
    /// each file against the manifest); the first damaged file ends the check with an error
    /// naming it.
    fn verify(&self, ctl: &crate::progress::Control) -> Result<VerifyReport, Error>;
}

/// Checks a range search's radius: a finite number. NaN and an infinite radius are errors
/// naming the value (to ask for every vector, give a radius beyond the largest distance).
pub fn check_radius(radius: f32) -> Result<(), Error> {
    if radius.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "range search radius {radius}: expected a finite number (a negative radius finds \
             nothing but with inner product; 0 finds exact duplicates)"
        )))
    }
}

pub use crate::dir::component::VerifiedFile;
pub use verify::VerifyReport;

/// Search parameters of any kind, for [`AnyIndex::search`].
#[derive(Debug, Clone)]
pub enum KindParams {
    /// Of a graph index.
    Graph(crate::kinds::graph::search::SearchParams),
    /// Of an IVF index.
    Ivf(crate::kinds::ivf::IvfSearchParams),
    /// Of a sharded index.
    Sharded(ShardedParams),
    /// Of a flat index.
    Flat(flat::FlatParams),
}

impl KindParams {
    /// Results per query.
    pub fn k(&self) -> usize {
        match self {
            Self::Graph(p) => p.k,
            Self::Ivf(p) => p.k,
            Self::Sharded(p) => p.graph.k,
            Self::Flat(p) => p.k,
        }
    }

    /// The kind these parameters are for.
    pub fn kind(&self) -> KindName {
        match self {
            Self::Graph(_) => KindName::Graph,
            Self::Ivf(_) => KindName::Ivf,
            Self::Sharded(_) => KindName::Sharded,
            Self::Flat(_) => KindName::Flat,
        }
    }
}

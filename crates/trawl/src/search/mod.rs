//! What every kind's search shares: the error ([`SearchError`]), the query checks
//! ([`check_query_values`]), the per-query statistics every search counts its work in exactly
//! ([`QueryStats`]: pages read, read requests, bytes, cache hits, round trips, nodes expanded,
//! PQ and exact distance computations, time waiting for reads and time computing) and the
//! runner every batch search runs on ([`runner`]). The graph kind's strategies are in
//! [`crate::kinds::graph::search`].

pub mod rerank;
pub mod runner;
mod stats;

pub use runner::{BatchOutput, Cursor, AUTO_SPIN_US, MAX_SEARCH_THREADS};
pub(crate) use stats::stop as stop_part;
pub use stats::{
    FilterStats, FlashStats, IoStats, IvfStats, PartStats, QueryStats, RerankStats, TraversalStats,
};

use crate::dir::FileError;
use crate::io::IoError;
use crate::ErrorKind;

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A query's filter does not fit the index's attributes (an unknown field, a label key
    /// compared by order, …), or the index's attributes are damaged.
    #[error("query {query}: {source}")]
    Filter {
        /// The query.
        query: usize,
        /// What is wrong.
        source: crate::filter::FilterError,
    },
    /// `k` is zero or above `l`: ask for at least one result and use `l ≥ k`.
    #[error("invalid k = {k} for list size L = {l} (need 1 ≤ k ≤ L)")]
    InvalidK {
        /// Results asked for.
        k: usize,
        /// List size.
        l: usize,
    },
    /// `k` is larger than the number of indexed vectors.
    #[error("k = {k} is larger than the {n} indexed vectors")]
    KTooLarge {
        /// Results asked for.
        k: usize,
        /// Indexed vectors.
        n: u64,
    },
    /// The beam width is zero or larger than the searcher's queue depth.
    #[error("beam width {beam_width} must be between 1 and {max}")]
    InvalidBeamWidth {
        /// Requested width.
        beam_width: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A list size (the search's `L`, or the entry index's) above what a search allows.
    #[error("{what} {value} is more than {max}")]
    ListTooLarge {
        /// Which list (`list size L`, `entry list size`).
        what: &'static str,
        /// Requested size.
        value: usize,
        /// Largest allowed.
        max: usize,
    },
    /// An entry-index search was asked of an index with no entry index in memory: built
    /// without one, or opened without it (`load_entry` off, or a memory plan that left it on
    /// disk).
    #[error(
        "this index has no entry index in memory (built without one, opened without it, or a \
         memory budget whose plan left it on disk: `trawl info DIR --plan BUDGET` shows the \
         plan): search with entry_list = 0, or rebuild it with one / give it the budget"
    )]
    NoEntryIndex,
    /// A search option that the chosen strategy or index does not support.
    #[error("unsupported search option: {0}")]
    Unsupported(String),
    /// PipeSearch parameters out of range.
    #[error("invalid PipeSearch parameters: {0}")]
    InvalidPipe(String),
    /// Re-rank parameters out of range.
    #[error("invalid re-rank parameters: {0}")]
    InvalidRerank(String),
    /// The query's dimension differs from the index's.
    #[error("query has dimension {got}, the index has {expected}")]
    DimMismatch {
        /// Index dimension.
        expected: usize,
        /// Query dimension.
        got: usize,
    },
    /// The query's element type differs from the index's.
    #[error("query elements are {got}, the index holds {expected}")]
    DTypeMismatch {
        /// Index element type.
        expected: &'static str,
        /// Query element type.
        got: &'static str,
    },
    /// The query holds NaN or infinity.
    #[error("query {row} holds a non-finite value")]
    NonFiniteQuery {
        /// Query row (0 for a single query).
        row: usize,
    },
    /// The query is so long that distances to it could overflow `f32` (squared norm at or
    /// above [`crate::data::MAX_SQUARED_NORM`], 2^100).
    #[error(
        "query {row} is too large: its squared norm {norm_sq:e} is not below 2^100 (about \
         1.27e30), so distances to it could overflow 32-bit floats; scale it down"
    )]
    QueryTooLarge {
        /// Query row (0 for a single query).
        row: usize,
        /// Its squared norm.
        norm_sq: f64,
    },
    /// A read failed (device error, short read: the index file changed under us).
    #[error(transparent)]
    Io(#[from] IoError),
    /// A page read from the index does not match its checksum or holds an impossible record.
    #[error("{}: page {page} is corrupt ({detail}); rebuild the index", path.display())]
    Corrupt {
        /// The index file.
        path: std::path::PathBuf,
        /// The page.
        page: u64,
        /// What was wrong.
        detail: String,
    },
    /// An index file could not be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// The query batch is empty or malformed.
    #[error("{0}")]
    BadBatch(String),
    /// An invariant of the search does not hold: a bug in trawl, not a problem with the
    /// index or the call.
    #[error("internal error: {0} (a bug: please report it)")]
    Internal(String),
    /// The accelerator of an IVF index failed.
    #[error(transparent)]
    Accel(#[from] crate::accel::AccelError),
}

impl SearchError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Io(e) => e.kind(),
            Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::File(e) => e.kind(),
            Self::Internal(_) => ErrorKind::Internal,
            Self::Accel(e) => e.kind(),
            Self::Filter { source, .. } => source.kind(),
            Self::InvalidK { .. }
            | Self::KTooLarge { .. }
            | Self::InvalidBeamWidth { .. }
            | Self::ListTooLarge { .. }
            | Self::NoEntryIndex
            | Self::Unsupported(_)
            | Self::InvalidPipe(_)
            | Self::InvalidRerank(_)
            | Self::DimMismatch { .. }
            | Self::DTypeMismatch { .. }
            | Self::NonFiniteQuery { .. }
            | Self::QueryTooLarge { .. }
            | Self::BadBatch(_) => ErrorKind::InvalidInput,
        }
    }
}

/// Refuses query `row` when it holds NaN or ±inf, or is too long for exact `f32` distances
/// ([`crate::data::row_fault`]).
pub fn check_query_values<T: crate::kernels::Element>(
    query: &[T],
    row: usize,
) -> Result<(), SearchError> {
    match crate::data::row_fault(query) {
        None => Ok(()),
        Some(crate::data::RowFault::NonFinite { .. }) => Err(SearchError::NonFiniteQuery { row }),
        Some(crate::data::RowFault::TooLarge { norm_sq }) => {
            Err(SearchError::QueryTooLarge { row, norm_sq })
        }
    }
}

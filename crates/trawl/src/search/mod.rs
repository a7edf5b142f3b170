//! Search over a disk index: parameters, per-query statistics, errors, and the strategies.
//!
//! - [`beam`]: DiskANN's beam search — PQ codes in memory guide a best-first traversal that
//!   reads up to `W` records per round trip; the full-precision vectors read on the way re-rank
//!   the final top-k.
//! - [`pipe`]: PipeANN's PipeSearch — up to `W` reads stay in flight while the records that
//!   have arrived are explored; the width follows a fixed, static or dynamic policy.
//! - [`Searcher`]: one thread's engine and query state machines, and the loop that runs one
//!   query at a time or several interleaved (throughput mode).
//! - [`cache`]: the static node cache (records kept in memory), chosen by BFS from the entry
//!   point or by visit frequency over sample queries.
//!
//! Every search counts its work exactly in [`QueryStats`]: pages read, read requests, bytes,
//! cache hits, round trips, nodes expanded, PQ and exact distance computations, time waiting
//! for reads and time computing.

pub mod beam;
pub mod cache;
pub mod entry;
mod explore;
pub mod list_cache;
pub mod pipe;
pub mod rerank;
mod searcher;
pub mod width;

pub use beam::BeamQuery;
pub use cache::{CachePolicy, NodeCache};
pub use list_cache::ListCache;
pub use pipe::{PipeParams, WidthController, WidthPolicy};
pub use rerank::RerankParams;
pub use searcher::{ResultSink, Searcher, MAX_INTERLEAVE};
pub use width::WidthSchedule;

use std::ops::AddAssign;

use crate::io::IoError;
use crate::layout::FileError;

/// Default beam width (reads per round trip), DiskANN's usual setting.
pub const DEFAULT_BEAM_WIDTH: usize = 4;

/// How a query walks the graph.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Strategy {
    /// DiskANN's beam search: rounds of up to `W` reads, each round explored before the next.
    #[default]
    Beam,
    /// PipeANN's pipelined search ([`pipe`]): reads stay in flight while arrived records are
    /// explored.
    Pipe(PipeParams),
}

impl Strategy {
    /// `"beam"` or `"pipe"`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Beam => "beam",
            Self::Pipe(_) => "pipe",
        }
    }
}

/// Parameters of one search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchParams {
    /// Results wanted, `1 ≤ k ≤ l`.
    pub k: usize,
    /// Candidate list size `L`: larger is slower and more accurate.
    pub l: usize,
    /// Beam width `W`: records read per round trip, `1 ≤ W ≤` the searcher's queue depth
    /// (beam search only; PipeSearch's width is in [`PipeParams`]).
    pub beam_width: usize,
    /// Beam search or PipeSearch.
    pub strategy: Strategy,
    /// List size of the in-memory entry-index search whose results seed the candidate list
    /// (PipeANN uses 10); 0 starts from the medoid alone. Needs an index built with an entry
    /// index.
    pub entry_list: usize,
    /// Beam search: widen the beam by explored position (OctopusANN's DynamicWidth), capped by
    /// `beam_width`; `None` keeps the width fixed at `beam_width`.
    pub dynamic_width: Option<WidthSchedule>,
    /// Beam search: compute the exact distance of every record on each page read, offer them
    /// to the candidate list and the result set, and expand any of them later from the page
    /// already read, without another read (Starling's in-page search, OctopusANN's PageSearch).
    pub page_search: bool,
    /// Decoupled layout: how the full-precision vectors are fetched and the result re-ranked
    /// ([`rerank`]). Ignored by the page-packed layouts, whose records carry their vectors.
    pub rerank: RerankParams,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self {
            k: 10,
            l: 100,
            beam_width: DEFAULT_BEAM_WIDTH,
            strategy: Strategy::Beam,
            entry_list: 0,
            dynamic_width: None,
            page_search: false,
            rerank: RerankParams::default(),
        }
    }
}

/// What one query did. Summed over queries with `+=`; every field is an exact count except the
/// times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueryStats {
    /// 4 KiB pages read from the file.
    pub pages_read: u64,
    /// Read requests issued (one per distinct page run; a request may carry several pages when
    /// a record spans pages).
    pub io_requests: u64,
    /// Bytes read from the file (`pages_read × 4096`).
    pub bytes_read: u64,
    /// Nodes expanded from the in-memory cache instead of the file.
    pub cache_hits: u64,
    /// Beam search: round trips, iterations that expanded at least one node (DiskANN's
    /// "hops"). PipeSearch: times the search had nothing to issue or explore and waited for a
    /// read (its stalls on the device).
    pub hops: u64,
    /// Nodes expanded (records whose neighbours were scored).
    pub nodes_expanded: u64,
    /// PQ (approximate) distance computations.
    pub pq_distances: u64,
    /// Full-precision distance computations on records read or cached.
    pub exact_distances: u64,
    /// Full-precision distance computations in the in-memory entry index.
    pub entry_distances: u64,
    /// Nanoseconds spent blocked waiting for reads.
    pub io_wait_ns: u64,
    /// Nanoseconds of the whole query (`io_wait_ns` included).
    pub total_ns: u64,
    /// Reads none of whose records were explored (PipeSearch's speculative reads that turned
    /// out useless; always 0 for beam search, which explores every record it reads).
    pub wasted_reads: u64,
    /// Σ over the time a read was in flight of (reads in flight × nanoseconds).
    pub inflight_time_ns: u64,
    /// Σ over the same time of (pipeline width × nanoseconds); `inflight_time_ns /
    /// width_time_ns` is the pipeline occupancy (PipeANN's I/O pipeline utilisation).
    pub width_time_ns: u64,
    /// Records on the pages read (every record a read brought into memory, whether the search
    /// used it or not).
    pub records_read: u64,
    /// Nodes expanded from a page this query had already read (PageSearch), without a read.
    pub page_hits: u64,
    /// Decoupled layout: reads of the vector file (each one page; included in `io_requests`
    /// and `pages_read`, the rest of which are graph reads).
    pub vector_reads: u64,
    /// Decoupled layout: vector reads issued during the traversal (phase-1 prefetch).
    pub prefetched: u64,
    /// Decoupled layout: re-rank batches processed.
    pub rerank_batches: u64,
    /// Decoupled layout: nanoseconds decoding neighbour lists (Elias-Fano).
    pub list_decode_ns: u64,
    /// Decoupled layout: nanoseconds decoding vectors (Huffman, XOR) for the re-rank.
    pub vector_decode_ns: u64,
}

impl QueryStats {
    /// Nanoseconds not spent waiting for reads.
    pub fn compute_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.io_wait_ns)
    }

    /// I/O utilisation `U_io` (OctopusANN Eq. 3) at record level: nodes expanded from read
    /// pages over the records those pages held (0 without reads). Reading a page for one of its
    /// records and ignoring the others lowers it; PageSearch and PageShuffle raise it.
    pub fn io_utilisation(&self) -> f64 {
        if self.records_read == 0 {
            0.0
        } else {
            self.nodes_expanded.saturating_sub(self.cache_hits) as f64 / self.records_read as f64
        }
    }

    /// Mean reads in flight over the mean width while reads were in flight (0 without reads).
    pub fn occupancy(&self) -> f64 {
        if self.width_time_ns == 0 {
            0.0
        } else {
            self.inflight_time_ns as f64 / self.width_time_ns as f64
        }
    }
}

impl AddAssign for QueryStats {
    fn add_assign(&mut self, o: Self) {
        self.pages_read += o.pages_read;
        self.io_requests += o.io_requests;
        self.bytes_read += o.bytes_read;
        self.cache_hits += o.cache_hits;
        self.hops += o.hops;
        self.nodes_expanded += o.nodes_expanded;
        self.pq_distances += o.pq_distances;
        self.exact_distances += o.exact_distances;
        self.entry_distances += o.entry_distances;
        self.io_wait_ns += o.io_wait_ns;
        self.total_ns += o.total_ns;
        self.wasted_reads += o.wasted_reads;
        self.inflight_time_ns += o.inflight_time_ns;
        self.width_time_ns += o.width_time_ns;
        self.records_read += o.records_read;
        self.page_hits += o.page_hits;
        self.vector_reads += o.vector_reads;
        self.prefetched += o.prefetched;
        self.rerank_batches += o.rerank_batches;
        self.list_decode_ns += o.list_decode_ns;
        self.vector_decode_ns += o.vector_decode_ns;
    }
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
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
    /// An entry-index search was asked of an index built without one.
    #[error("this index has no entry index: rebuild it with one, or search with entry_list = 0")]
    NoEntryIndex,
    /// A search option that the chosen strategy or index does not support.
    #[error("unsupported search option: {0}")]
    Unsupported(String),
    /// PipeSearch parameters out of range.
    #[error("invalid PipeSearch parameters: {0}")]
    InvalidPipe(String),
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
}

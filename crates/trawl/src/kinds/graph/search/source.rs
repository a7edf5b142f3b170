//! The narrow views a search strategy reads an index through. Strategies are written once
//! over these traits and know nothing of index directories or file names:
//!
//! - [`GraphSpace`]: the shape (n, dimension, element type, metric, entry point), the PQ
//!   distance source ([`PqSource`]) and the entry index — what every layout shares;
//! - [`GraphSource`]: a graph in pages — where a node's page is, how many nodes a page holds,
//!   how a read is checked, and how a node is expanded from page bytes or from memory;
//! - [`VectorSource`] (the shared re-rank stage's, [`crate::search::rerank`]): full-precision
//!   vectors in pages of their own, which the decoupled layout's re-rank
//!   ([`crate::kinds::graph::search::rerank`]) reads.
//!
//! The implementations are the layout readers of [`crate::kinds::graph::search::layouts`]. A searcher matches the
//! layout once per batch and runs a loop monomorphised for it, so the per-node calls are
//! static.

use std::path::Path;

use crate::io::Completion;
use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::layout::packed::RecordView;
use crate::kinds::graph::search::explore::Frontier;
use crate::quant::pq::PqCodes;
use crate::quant::{QuantQuery, Quantiser};
use crate::search::{QueryStats, SearchError};

use crate::kinds::graph::search::entry::EntryIndex;

/// Where the PQ codes of the nodes are.
#[derive(Debug, Clone, Copy)]
pub enum PqCodesAt<'a> {
    /// Every node's code in memory.
    Memory(&'a PqCodes),
    /// In the records, beside each neighbour id (All-in-Storage): only the entry point's code
    /// is in memory.
    Records {
        /// The entry point's (medoid's) code.
        medoid: &'a [u8],
    },
}

/// PQ distances: the quantiser (for a query's table) and where the codes are.
#[derive(Debug, Clone, Copy)]
pub struct PqSource<'a> {
    /// The quantiser.
    pub quantizer: &'a Quantiser,
    /// The codes.
    pub codes: PqCodesAt<'a>,
}

impl PqSource<'_> {
    /// The codes in memory (`None` when they live in the records).
    #[inline]
    pub fn in_memory(&self) -> Option<&PqCodes> {
        match self.codes {
            PqCodesAt::Memory(c) => Some(c),
            PqCodesAt::Records { .. } => None,
        }
    }

    /// PQ distance of node `id` under `table`. With the codes in the records only the entry
    /// point is scored this way.
    #[inline]
    pub fn distance(&self, table: &QuantQuery, id: u32) -> f32 {
        match self.codes {
            PqCodesAt::Memory(codes) => table.distance(codes.code(id as usize)),
            PqCodesAt::Records { medoid } => table.distance(medoid),
        }
    }
}

/// Which nodes a search may return: a node deleted at epoch `d` (its stamp in `dead`; 0 =
/// never deleted) is hidden from searches at epoch `d` and later, but still traversed (its
/// list keeps the graph connected until a merge repairs it). The stamps only grow between
/// merges, so a search reading them at its own epoch sees one consistent set of deletions
/// however many are acknowledged while it runs.
#[derive(Debug, Clone, Copy)]
pub struct LiveFilter<'a> {
    /// Deletion stamp per node.
    pub dead: &'a [std::sync::atomic::AtomicU32],
    /// The epoch the search reads at.
    pub epoch: u32,
}

/// Which nodes a query may return (the others are still traversed): the nodes a live index
/// has not deleted, those matching a query's filter, or both.
pub trait ResultFilter: Sync {
    /// Whether query `query` (as the query stream numbers it) may return node `id`.
    fn keep(&self, query: usize, id: u32) -> bool;

    /// Whether a re-rank from a vector file reads only the nodes it keeps (a query's filter:
    /// the others' vectors would be read for nothing). `false` (the live index's deletions)
    /// re-ranks every expanded node and filters the results.
    fn prunes_rerank(&self) -> bool {
        false
    }

    /// Appends to `out` more entry points of query `query` (a label-aware graph's start
    /// nodes of the labels its filter requires), searched beside the medoid or the entry
    /// index's seeds. None by default.
    fn seeds(&self, _query: usize, _out: &mut Vec<u32>) {}

    /// The only nodes query `query`'s traversal may enter (`None`: every node): on a
    /// label-aware graph, the nodes carrying a label the filter requires, whose subgraph the
    /// build keeps connected from the labels' start nodes (Filtered-DiskANN's filtered
    /// search). The seeds are kept to these nodes too.
    fn gate(&self, _query: usize) -> Option<&roaring::RoaringBitmap> {
        None
    }
}

impl ResultFilter for LiveFilter<'_> {
    #[inline]
    fn keep(&self, _query: usize, id: u32) -> bool {
        self.visible(id)
    }
}

impl LiveFilter<'_> {
    /// Whether `id` is visible at this filter's epoch (ids past the table are not).
    #[inline]
    pub fn visible(&self, id: u32) -> bool {
        self.dead.get(id as usize).is_some_and(|d| {
            let d = d.load(std::sync::atomic::Ordering::Acquire);
            d == 0 || d > self.epoch
        })
    }
}

/// What every graph layout shares: the shape, the PQ distances and the entry index.
#[derive(Debug, Clone, Copy)]
pub struct GraphSpace<'a> {
    /// Indexed vectors.
    pub n: usize,
    /// Dimension.
    pub dim: usize,
    /// Element type.
    pub dtype: DType,
    /// Metric.
    pub metric: Metric,
    /// The entry point.
    pub medoid: u32,
    /// PQ distances.
    pub pq: PqSource<'a>,
    /// The in-memory entry index, when the index has one.
    pub entry: Option<&'a EntryIndex>,
}

impl GraphSpace<'_> {
    /// Checks one query vector: element type, dimension, finite values.
    pub fn check_query<T: Element>(&self, query: &[T]) -> Result<(), SearchError> {
        if T::DTYPE != self.dtype {
            return Err(SearchError::DTypeMismatch {
                expected: self.dtype.name(),
                got: T::DTYPE.name(),
            });
        }
        if query.len() != self.dim {
            return Err(SearchError::DimMismatch {
                expected: self.dim,
                got: query.len(),
            });
        }
        crate::search::check_query_values(query, 0)
    }
}

/// Nodes a query expands from memory rather than a read (the static node cache's records are
/// looked up when expanded; the list cache's lists are copied at once, since another thread
/// may evict them before the node is expanded).
#[derive(Debug, Default)]
pub struct Held {
    /// `(id, degree, offset in bytes)`; degree and offset are 0 for records.
    entries: Vec<(u32, u16, u32)>,
    bytes: Vec<u8>,
    buf: Vec<u8>,
}

impl Held {
    /// Forgets every held node.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
    }

    /// Held nodes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no node is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `i`-th held node.
    pub fn id(&self, i: usize) -> u32 {
        self.entries[i].0
    }

    /// Holds `id` with nothing copied (its data stays where it is).
    pub fn push_id(&mut self, id: u32) {
        self.entries.push((id, 0, 0));
    }

    /// Holds `id` with a copy of `data` (its coded list) and its degree.
    pub fn push_copy(&mut self, id: u32, degree: u16, data: &[u8]) {
        self.entries.push((id, degree, self.bytes.len() as u32));
        self.bytes.extend_from_slice(data);
    }

    /// A scratch buffer to copy into before [`Held::push_copy`].
    pub fn scratch(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Moves the scratch buffer's bytes in as `id`'s copy.
    pub fn push_scratch(&mut self, id: u32, degree: u16) {
        self.entries.push((id, degree, self.bytes.len() as u32));
        self.bytes.extend_from_slice(&self.buf);
    }

    /// The degree and copied bytes of held node `id`.
    pub fn copy_of(&self, id: u32) -> Option<(usize, &[u8])> {
        let i = self.entries.iter().position(|e| e.0 == id)?;
        let (_, degree, at) = self.entries[i];
        let end = self
            .entries
            .get(i + 1)
            .map_or(self.bytes.len(), |e| e.2 as usize);
        Some((usize::from(degree), &self.bytes[at as usize..end]))
    }
}

/// What a strategy needs to expand one node.
pub struct Expand<'e, T> {
    /// The query.
    pub query: &'e [T],
    /// Scratch for decoding a vector.
    pub scratch: &'e mut Vec<T>,
    /// The query's counters.
    pub stats: &'e mut QueryStats,
    /// A node the query must neither expand nor return: the query's own node when an index
    /// searches its own vectors as held-out queries (the recall monitor). Beam search and
    /// PipeSearch honour it.
    pub hidden: Option<u32>,
    /// The query's number in the stream, and the filter of the nodes it may return, when the
    /// re-rank reads only those ([`ResultFilter::prunes_rerank`]).
    pub keep: Option<(usize, &'e dyn ResultFilter)>,
}

impl<T> std::fmt::Debug for Expand<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expand")
            .field("dim", &self.query.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A graph stored in pages, as a traversal reads it.
pub trait GraphSource: Sync {
    /// Whether expanding a node also gives its full-precision vector (records); `false`
    /// means the vectors are read apart and re-ranked ([`VectorSource`]).
    const RECORDS: bool;

    /// Whether a search node is a page of vectors (the page-node layout) rather than one
    /// vector: entry points map to their pages ([`GraphSource::node_of`]), and a hidden vector
    /// is left out of the results rather than out of the traversal.
    const PAGE_NODES: bool = false;

    /// The search node of vector `id`: itself, or on the page-node layout its page
    /// (`u32::MAX` when it has none).
    #[inline]
    fn node_of(&self, id: u32) -> u32 {
        id
    }

    /// The list distance of entry point `id` (search node `node`) under the query's table,
    /// and the codes scored for it: the vector's code distance, or on the page-node layout its
    /// page's (the nearest code among the page's vectors).
    #[inline]
    fn seed_distance(
        &self,
        space: &GraphSpace<'_>,
        table: &QuantQuery,
        id: u32,
        _node: u32,
    ) -> (f32, u64) {
        (space.pq.distance(table, id), 1)
    }

    /// The file, for error messages.
    fn path(&self) -> &Path;

    /// First page of `id`'s node.
    fn locate(&self, id: u32) -> u64;

    /// Pages one node read takes.
    fn pages_per_read(&self) -> u32;

    /// Nodes on the page (or page run) starting at `page`.
    fn nodes_on_page(&self, page: u64) -> u64;

    /// Checks a read that landed from `page` (page checksums, when the layout checks whole
    /// reads).
    fn check_read(&self, page: u64, bytes: &[u8]) -> Result<(), SearchError>;

    /// If `id` can be expanded from memory, holds it in `held` and returns `true`.
    fn hold(&self, id: u32, held: &mut Held) -> bool;

    /// Expands `id` from memory, after [`GraphSource::hold`] (counted as a cache hit).
    fn expand_held<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        held: &Held,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError>;

    /// Starts loading what expanding `id` from `bytes` will touch in memory (its neighbours'
    /// PQ codes), before the read is checked and expanded, so the cache misses overlap that
    /// work. A hint: bytes not yet checked may be damaged, and nothing here reads through
    /// them. None by default.
    #[inline]
    fn prefetch_expansion(&self, _space: &GraphSpace<'_>, _id: u32, _bytes: &[u8]) {}

    /// Expands `id` from `bytes`, the pages read from `page` on.
    fn expand<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError>;

    /// The page records PageSearch reads ([`NoRecords`] where pages hold none).
    type Records: PageRecords;

    /// The records of the pages, for PageSearch (`None` for layouts whose pages hold no
    /// records; PageSearch is refused there when the parameters are checked).
    fn page_records(&self) -> Option<&Self::Records>;
}

/// A layout whose pages hold whole records — a node's full-precision vector beside its
/// neighbour list — for strategies that take a record as it is rather than expanding it into
/// a frontier: the flash search computes the exact distance on the host and hands the list to
/// the accelerator's step.
pub trait RecordSource: GraphSource {
    /// Longest neighbour list a record holds.
    fn max_degree(&self) -> usize;

    /// `id`'s record from `bytes`, the read from `page` (already passed
    /// [`GraphSource::check_read`]).
    fn record<'b>(
        &self,
        id: u32,
        page: u64,
        bytes: &'b [u8],
    ) -> Result<RecordView<'b>, SearchError>;
}

/// The [`PageRecords`] of a layout whose pages hold no records: no value of it exists.
#[derive(Debug)]
pub enum NoRecords {}

impl PageRecords for NoRecords {
    fn ids_on_page(&self, _: u64, _: &mut Vec<u32>) {
        match *self {}
    }
    fn offset(&self, _: u32) -> usize {
        match *self {}
    }
    fn record_bytes(&self) -> usize {
        match *self {}
    }
    fn record<'a>(&self, _: u32, _: &'a [u8]) -> Result<RecordView<'a>, String> {
        match *self {}
    }
    fn decode<'a>(&self, _: u32, _: &'a [u8]) -> Result<RecordView<'a>, String> {
        match *self {}
    }
}

/// Pages that hold whole records (vector and neighbours), read record by record: what
/// PageSearch scores.
pub trait PageRecords {
    /// Ids of the records on `page`.
    fn ids_on_page(&self, page: u64, out: &mut Vec<u32>);
    /// Byte offset of `id`'s record within the bytes read for its page.
    fn offset(&self, id: u32) -> usize;
    /// Bytes of one record.
    fn record_bytes(&self) -> usize;
    /// `id`'s record within the bytes read for its page.
    fn record<'a>(&self, id: u32, bytes: &'a [u8]) -> Result<RecordView<'a>, String>;
    /// `id`'s record from a copy of its bytes.
    fn decode<'a>(&self, id: u32, rec: &'a [u8]) -> Result<RecordView<'a>, String>;
}

pub use crate::search::rerank::NO_KEY;

#[cfg(doc)]
use crate::search::rerank::VectorSource;

/// Tag bit of vector reads (the low 32 bits of a tag are a lane's read index).
pub(crate) const VECTOR_TAG: u64 = 1 << 31;

/// Whether completion `c` is a vector read.
#[inline]
pub(crate) fn is_vector_read(c: &Completion) -> bool {
    c.tag & VECTOR_TAG != 0
}

//! Search over a disk graph: parameters, the strategies and the narrow views they read the
//! index through (the statistics, errors and runner every kind shares: [`crate::search`]). Nothing here knows about index directories
//! or file names: [`crate::kinds::graph`] opens the files and hands a searcher an [`IndexView`].
//!
//! - [`source`]: the views — [`GraphSpace`] (shape, PQ distances, entry index),
//!   [`GraphSource`] (a graph in pages); the vectors in pages the re-rank reads are the
//!   shared stage's [`crate::search::rerank::VectorSource`];
//! - [`layouts`]: [`LayoutReader`], one variant per disk layout, implementing the views;
//! - [`machine`]: the query state machine contract ([`QueryMachine`], [`Traversal`],
//!   [`Reranked`]);
//! - [`beam`]: DiskANN's beam search — PQ codes in memory guide a best-first traversal that
//!   reads up to `W` nodes per round trip;
//! - [`pipe`]: PipeANN's PipeSearch — up to `W` reads stay in flight while the nodes that
//!   have arrived are explored; the width follows a fixed, static or dynamic policy;
//! - [`rerank`]: the decoupled layout's re-rank from a vector file (DecoupleVS), built from
//!   the shared re-rank stage ([`crate::search::rerank`]);
//! - [`Searcher`]: one thread's engine and query machines, and the loop (poll → route → step)
//!   that runs one query at a time or several interleaved (throughput mode);
//! - [`cache`], [`list_cache`]: the static node cache and the decoupled layout's list cache;
//! - [`entry`]: the in-memory entry index.
//!
//! Every search counts its work exactly in [`crate::search::QueryStats`]: pages read, read requests, bytes,
//! cache hits, round trips, nodes expanded, PQ and exact distance computations, time waiting
//! for reads and time computing.

pub mod beam;
pub mod cache;
pub mod entry;
mod explore;
pub mod flash;
pub mod layouts;
pub mod list_cache;
pub mod machine;
pub mod page_nodes;
mod params;
pub mod pipe;
pub mod rerank;
pub mod scan;
mod searcher;
pub mod source;
pub mod width;

pub use beam::BeamQuery;
pub use cache::{CachePolicy, NodeCache, WarmProgress, FILL_CHUNK};
pub(crate) use explore::corrupt as corrupt_page;
pub use explore::Frontier;
pub use flash::{FlashParams, Grain};
pub use layouts::{DecoupledLayout, LayoutReader, RecordLayout};
pub use list_cache::{ListCache, PinnedBuilder, PinnedLists};
pub use machine::{GraphView, QueryMachine, Reranked, Traversal, Turn};
pub use page_nodes::{PageCache, PageLayout};
pub use params::{
    BeamParams, Capabilities, RangeSpec, SearchConfig, SearchParams, Strategy, DEFAULT_BEAM_WIDTH,
    DEFAULT_RANGE_SLACK, DEFAULT_RANGE_WIDTH, MAX_LIST,
};
pub use pipe::{PipeParams, PipeQuery, WidthController, WidthPolicy};
pub use rerank::RerankParams;
pub use searcher::{IndexView, ResultSink, Searcher, MAX_INTERLEAVE};
pub use source::{
    Expand, GraphSource, GraphSpace, Held, LiveFilter, PageRecords, PqCodesAt, PqSource,
    RecordSource, ResultFilter,
};
pub use width::WidthSchedule;

#[cfg(test)]
mod pipe_tests;
#[cfg(test)]
mod tests;

//! Vamana graph build (robust prune, back-edges, a build in parts under a memory budget) and
//! in-memory graph search.
//!
//! - [`params`]: [`VamanaParams`] → [`VamanaConfig`], [`BuildError`]; defaults in [`defaults`].
//! - [`store`]: [`VectorStore`], the distance oracle (borrows vectors, keeps norms only).
//! - [`adjacency`]: the concurrent build-time [`SlotGraph`] and the compact [`Graph`].
//! - [`queue`]: search scratch (sorted candidate list, visited bit set).
//! - [`prune`]: robust prune (DiskANN's iterated-α `occlude_list`), and its label-aware form.
//! - [`labels`]: the points' labels and start nodes of a label-aware build (FilteredVamana).
//! - [`build`](mod@build): the in-memory Vamana build ([`build()`]) and [`BuildStats`].
//! - `budget`: the build under a memory budget, in overlapping k-means parts.
//! - [`search`](mod@search): greedy search ([`search()`], [`search_batch`]) and [`recall_at_k`].
//! - [`file`](mod@file): graph file format (`TRAWLGRF`).
//!
//! Not here: the graph index on disk ([`crate::kinds::graph`]: its layouts and strategies).

pub mod adjacency;
mod budget;
pub mod build;
pub mod connectivity;
pub mod defaults;
pub mod file;
pub mod labels;
pub mod params;
pub mod prune;
mod query_edges;
pub mod queue;
pub mod search;
pub mod store;

pub use adjacency::{Adjacency, Graph, SlotGraph};
pub use build::{
    build, build_labelled, build_with_queries, estimate_bytes, link_query_neighbours, random_links,
    BuildStats,
};
pub use labels::BuildLabels;
pub use params::{BuildError, VamanaConfig, VamanaParams, VisitOrder, MAX_BUILD_L};
pub use prune::{robust_prune, robust_prune_labelled, PruneLimits, PruneScratch};
pub use search::{
    recall_at_k, search, search_batch, SearchScratch, SearchStats, VamanaSearchError,
};
pub use store::{Probe, VectorStore};

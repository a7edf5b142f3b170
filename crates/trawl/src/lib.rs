//! trawl: a disk-resident approximate-nearest-neighbour (ANN) vector search engine.
//!
//! The crate is organised in layers; each folder depends only on the ones above it in this list
//! (see `ARCHITECTURE.md` at the repository root):
//!
//! - [`kernels`]: element types, metrics, SIMD distances with runtime dispatch, k-means.
//! - [`data`]: vector and ground-truth file formats, in-memory and memory-mapped matrices.
//! - [`synth`]: seeded synthetic data (anisotropic Gaussian mixtures).
//! - [`exact`]: exact k-nearest-neighbour ground truth.
//! - [`quant`]: vector quantisers (product quantisation, OPQ, scalar refinement codes).
//! - [`io`]: page reads with O_DIRECT through io_uring or pread ([`io::IoEngine`]).
//! - [`accel`]: the accelerator of the IVF filter stage and the flash search (CPU, `wgpu` GPU).
//! - [`vamana`]: Vamana graph build, robust prune, in-memory search.
//! - [`dir`]: an index directory's machinery, knowing no kind: file envelopes (magic, version,
//!   checksum), the manifest, atomic commits, file components.
//! - [`filter`]: attributes of the vectors (labels, numeric fields), the filter language,
//!   predicates.
//! - [`search`]: what every kind's search shares: errors, per-query statistics, the runner.
//! - [`kinds`]: the index kinds and their one contract: [`kinds::AnyIndex`] over
//!   [`kinds::graph`] (the disk graph, [`kinds::graph::DiskIndex`]), [`kinds::ivf`],
//!   [`kinds::sharded`] and [`kinds::flat`]; options and builds of every kind.
//! - [`error`]: [`ErrorKind`], the kind of every error the library returns.
//! - [`mem`]: placement of large build arrays (transparent huge pages).
//! - [`progress`]: progress reporting and cancellation, passed explicitly to long operations.

pub mod accel;
pub mod data;
pub mod dir;
pub mod error;
pub mod exact;
pub mod filter;
pub mod io;
pub mod kernels;
pub mod kinds;
pub mod mem;
pub mod progress;
pub mod quant;
pub mod search;
pub mod synth;
pub mod vamana;

pub use error::ErrorKind;
pub use kernels::{DType, Element, Metric};

//! trawl: a disk-resident approximate-nearest-neighbour (ANN) vector search engine.
//!
//! The crate is organised in layers; each folder depends only on the ones above it in this list
//! (see `ARCHITECTURE.md` at the repository root):
//!
//! - [`kernels`]: element types, metrics, SIMD distances with runtime dispatch, k-means.
//! - [`data`]: vector and ground-truth file formats, in-memory and memory-mapped matrices.
//! - [`synth`]: seeded synthetic data (anisotropic Gaussian mixtures).
//! - [`exact`]: exact k-nearest-neighbour ground truth.
//! - [`quant`]: vector quantisers (product quantisation).
//! - [`graph`]: Vamana graph build, robust prune, in-memory search.
//! - [`io`]: page reads with O_DIRECT through io_uring or pread ([`io::IoEngine`]).
//! - [`layout`]: on-disk formats: file envelopes (magic, version, checksum), the page-packed index.
//! - [`search`]: search over a disk index (beam search, static cache, per-query statistics).
//! - [`index`]: the disk index directory: [`index::build_index`], [`index::DiskIndex`].
//! - [`error`]: [`ErrorKind`], the kind of every error the library returns.
//! - [`mem`]: placement of large build arrays (transparent huge pages).
//! - [`progress`]: progress reporting and cancellation, passed explicitly to long operations.

pub mod accel;
pub mod data;
pub mod dir;
pub mod error;
pub mod exact;
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

//! The re-rank stage: candidates ordered by an approximate (PQ) distance are re-ranked by
//! their exact distances, read from full-precision vectors that live in pages of their own,
//! in mini-batches, until a stop rule says the top-`K` has settled. Two systems re-rank this
//! way and both are built from the parts here:
//!
//! - the decoupled graph layout (DecoupleVS §3.4,
//!   [`crate::kinds::graph::search::rerank::Rerank`]): the candidates are the nodes the graph
//!   traversal expanded, their vectors prefetched while it runs; it stops by the batches'
//!   benefit or by an error bound;
//! - the IVF kind (FusionANNS Algorithm 1, [`crate::kinds::ivf::search`]): the candidates are
//!   the filter stage's top-`n`; it stops once the top-`K` stayed stable for `β` batches.
//!
//! The parts:
//!
//! - [`VectorSource`] / [`VectorView`]: where a vector is (its page), how one read of it is
//!   checked and how it is decoded — the decoupled layout's compressed vector file and the IVF
//!   kind's bucket-ordered vector file implement it;
//! - [`TopK`]: the exact top-`K`, which knows which of its entries the current batch brought;
//! - [`StopRule`] / [`Stop`]: the stop rules as policies over the batches' outcomes
//!   ([`BatchOutcome`]) — [`StopRule::Benefit`] (DecoupleVS), [`StopRule::Bound`] (an error
//!   bound on the PQ distances), [`StopRule::Stable`] (FusionANNS) and
//!   [`StopRule::Exhaustive`];
//! - [`PageBuffer`]: the pages a query has read, kept so that no page is read twice for one
//!   query.
//!
//! What differs between the two is when reads are issued, which belongs to each kind's query
//! loop: the graph's re-rank is a query machine interleaved with a traversal in the graph
//! searcher's lanes; the IVF's re-ranks are flights fed by the accelerator's filter stage.

mod pages;
mod stop;
mod topk;

pub use pages::PageBuffer;
pub use stop::{BatchOutcome, Stop, StopRule};
pub use topk::TopK;

use crate::kernels::Metric;
use crate::search::SearchError;

/// No vector key: the vector is found by its id.
pub const NO_KEY: u32 = u32::MAX;

/// Full-precision vectors in pages of their own, as the re-rank reads them: where a vector
/// is, what one read of it is, and how it is decoded from the read.
pub trait VectorSource: Sync {
    /// Page of `id`'s vector, in the engine's page space (`key`: the vector key the graph
    /// list carried, where the layout keeps one — [`NO_KEY`] where it keeps none; where
    /// the vectors are not in id order, it says where the vector is).
    fn vector_page(&self, id: u32, key: u32) -> u64;
    /// Page of `id`'s vector and its place in the read, for [`VectorSource::decode_at`]
    /// (default: the page and 0, decoded by [`VectorSource::decode_vector`]). A source whose
    /// vectors sit at fixed places says where here, so a read's vectors are found without
    /// looking them up again.
    #[inline]
    fn locate(&self, id: u32, key: u32) -> (u64, usize) {
        (self.vector_page(id, key), 0)
    }
    /// Pages one vector read takes, from [`VectorSource::vector_page`] on (1 by default).
    #[inline]
    fn pages_per_read(&self) -> u32 {
        1
    }
    /// Vectors on `page` (engine page space).
    fn vectors_on_page(&self, page: u64) -> u64;
    /// Checks a read that landed from `page` (page checksums, where the source checks whole
    /// reads; nothing by default).
    #[inline]
    fn check_read(&self, _page: u64, _bytes: &[u8]) -> Result<(), SearchError> {
        Ok(())
    }
    /// Decodes `id`'s vector from `bytes`, the read from `page`, into `out` (its bytes).
    fn decode_vector(
        &self,
        id: u32,
        key: u32,
        page: u64,
        bytes: &[u8],
        out: &mut [u8],
    ) -> Result<(), SearchError>;
    /// Decodes `id`'s vector from `bytes`, the read from `page`, at place `at` (what
    /// [`VectorSource::locate`] gave) into `out` (default: [`VectorSource::decode_vector`]).
    #[inline]
    fn decode_at(
        &self,
        id: u32,
        key: u32,
        page: u64,
        _at: usize,
        bytes: &[u8],
        out: &mut [u8],
    ) -> Result<(), SearchError> {
        self.decode_vector(id, key, page, bytes, out)
    }
    /// The ids of the vectors on `page`, in order, `u32::MAX` for an empty place — for
    /// re-ranking a page's other vectors with it (none by default); the `j`-th sits at place
    /// `j × vector bytes` of the page's read ([`VectorSource::decode_at`]).
    #[inline]
    fn ids_on_page(&self, _page: u64) -> &[u32] {
        &[]
    }
    /// In-memory refinement codes of the vectors, by slot, that order the re-rank in place of
    /// the PQ distances (none by default).
    fn refine(&self) -> Option<&crate::quant::sq::RefineCodes> {
        None
    }
}

/// Vectors in pages as the re-rank sees them: the source and what an exact distance needs.
#[derive(Debug)]
pub struct VectorView<'v, V> {
    /// Metric of the exact distances.
    pub metric: Metric,
    /// Dimension.
    pub dim: usize,
    /// The vector pages.
    pub vectors: &'v V,
}

//! The IVF index kind (FusionANNS): a small in-memory graph over cluster centroids, posting
//! lists of ids only, every vector's PQ code on an accelerator ([`crate::accel`]), and the
//! full-precision vectors on disk in buckets by their nearest centroid, read only for the
//! re-rank.
//!
//! | file | what | in memory at search time |
//! |---|---|---|
//! | `ivf.trawl` | centroids, centroid graph, posting lists ([`file`](mod@file)) | all |
//! | `ivf-vectors.trawl` | vectors in bucketed 4 KiB pages, id → slot table ([`SlotFile`](crate::kinds::slot_file::SlotFile)) | the slot table (4 B/vector), page checksums |
//! | `ivf-vectors-by-id.trawl` (optional) | the same vectors by id (ablation baseline) | as above |
//! | `pq.trawl`, `pq-codes.trawl` | PQ quantiser and codes | all (on the accelerator's device) |
//!
//! A query ([`search`]): the centroid graph gives the `nprobe` nearest lists; their ids are
//! gathered; the accelerator deduplicates them, scores each by PQ-ADC and keeps the `top_n`;
//! the heuristic re-rank (Algorithm 1) reads their vectors in mini-batches, merging reads of
//! one page within a batch and keeping every page read for the rest of the query, and stops
//! when the top-k has not changed enough for `beta` batches in a row.

mod build;
pub(crate) mod cluster;
pub mod file;
pub mod files;
mod filtered;
pub(crate) mod kind;
mod open;
mod pages;
mod params;
pub mod plan;
pub mod range;
mod score;
pub mod search;

pub use build::{build_ivf, build_ivf_with_attrs, IvfBuildReport};
pub use open::{IvfIndex, IvfMemory, IvfVectorLayout};
pub use params::{IvfSearchParams, MAX_IVF_PARAM};
pub use search::IvfSearcher;

/// File name of the bucketed vector file.
pub const VECTORS_FILE: &str = "ivf-vectors.trawl";
/// File name of the by-id vector file (the bucket layout's ablation baseline).
pub const VECTORS_BY_ID_FILE: &str = "ivf-vectors-by-id.trawl";

use crate::kernels::Metric;
use crate::kinds::graph::IndexBuildError;
use crate::quant::pq::PqParams;
use crate::vamana::VamanaParams;

/// Parameters of [`build_ivf`].
#[derive(Debug, Clone)]
pub struct IvfParams {
    /// Distance to index for.
    pub metric: Metric,
    /// Target posting-list size before replication: the lists number about `n / list_size`
    /// (FusionANNS: lists ≈ 10% of the vectors).
    pub list_size: usize,
    /// Boundary replication's ε: a vector joins list `i` when `dist(v, c_i) ≤ (1 + ε) ·
    /// dist(v, c_1)` (distances, not squared).
    pub epsilon: f32,
    /// Most lists a vector joins (FusionANNS and SPANN: 8).
    pub max_replicas: usize,
    /// List size of the centroid-graph search that finds a vector's candidate lists.
    pub assign_l: usize,
    /// The centroid graph.
    pub centroid_graph: VamanaParams,
    /// PQ parameters.
    pub pq: PqParams,
    /// The quantiser of the filter stage: PQ (from `pq`) or RaBitQ.
    pub quant: crate::quant::QuantKind,
    /// Seed of the clustering.
    pub seed: u64,
    /// Also write the vectors in id order (`ivf-vectors-by-id.trawl`), the bucket layout's
    /// ablation baseline.
    pub by_id_file: bool,
}

/// Default [`IvfParams::list_size`].
pub const DEFAULT_LIST_SIZE: usize = 10;
/// Default [`IvfParams::epsilon`]: on GloVe-400K (list size 10, 48 PQ bytes) ε = 0.25 gave the
/// most QPS at recall@10 0.90 and 0.95 of 0.1, 0.25 and 0.4 (replication 3.4 / 6.5 / 7.5).
pub const DEFAULT_EPSILON: f32 = 0.25;
/// Default [`IvfParams::max_replicas`].
pub const DEFAULT_MAX_REPLICAS: usize = 8;

impl Default for IvfParams {
    fn default() -> Self {
        Self {
            metric: Metric::L2,
            list_size: DEFAULT_LIST_SIZE,
            epsilon: DEFAULT_EPSILON,
            max_replicas: DEFAULT_MAX_REPLICAS,
            assign_l: 32,
            centroid_graph: VamanaParams {
                r: 32,
                l: 64,
                // The IVF kind's measured configuration (id order, as every IVF figure in
                // bench/results was taken); the block order of graph builds is not measured
                // on centroid graphs yet.
                order: crate::vamana::VisitOrder::Ids,
                ..VamanaParams::default()
            },
            pq: PqParams::default(),
            quant: crate::quant::QuantKind::Pq,
            seed: 1,
            by_id_file: false,
        }
    }
}

impl IvfParams {
    /// Largest leaf of the clustering: a quarter above the target.
    pub fn max_leaf(&self) -> usize {
        (self.list_size + self.list_size.div_ceil(4)).max(1)
    }

    /// Checks the parameters against `n` vectors of `dim` dimensions.
    pub fn validate(&self, n: usize, dim: usize) -> Result<(), IndexBuildError> {
        let bad = |s: String| Err(IndexBuildError::InvalidParams(s));
        if n == 0 || dim == 0 {
            return bad(format!("nothing to index ({n} vectors of dimension {dim})"));
        }
        if n >= u32::MAX as usize {
            return bad(format!("{n} vectors: the IVF index holds fewer than 2^32"));
        }
        if self.list_size == 0 || self.list_size > 1 << 20 {
            return bad(format!(
                "list size {} must be in 1..=1048576",
                self.list_size
            ));
        }
        if !(0.0..=100.0).contains(&self.epsilon) {
            return bad(format!("epsilon {} must be in 0..=100", self.epsilon));
        }
        if !(1..=64).contains(&self.max_replicas) {
            return bad(format!(
                "max replicas {} must be in 1..=64",
                self.max_replicas
            ));
        }
        if self.assign_l == 0 || self.assign_l > crate::vamana::MAX_BUILD_L {
            return bad(format!(
                "assignment list size {} out of range",
                self.assign_l
            ));
        }
        if self.pq.bytes_per_vector == 0 {
            return bad("PQ bytes per vector must be at least 1".into());
        }
        self.centroid_graph.validate()?;
        Ok(())
    }
}

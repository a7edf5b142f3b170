//! Ground truth: the exact `k` nearest neighbours of each query.

/// The `k` nearest base ids of each of `nq` queries, nearest first, with their distances.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundTruth {
    /// Number of queries.
    pub nq: usize,
    /// Neighbours per query.
    pub k: usize,
    /// Row-major `nq × k` base ids.
    pub ids: Vec<u32>,
    /// Row-major `nq × k` distances (trawl's distance of the metric, see [`crate::kernels`]).
    pub dists: Vec<f32>,
}

impl GroundTruth {
    /// Ids of query `q`.
    pub fn ids(&self, q: usize) -> &[u32] {
        &self.ids[q * self.k..(q + 1) * self.k]
    }
    /// Distances of query `q`.
    pub fn dists(&self, q: usize) -> &[f32] {
        &self.dists[q * self.k..(q + 1) * self.k]
    }
}

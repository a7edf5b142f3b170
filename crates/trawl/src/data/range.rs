//! Range results: every vector within a radius of each query, a variable number per query
//! ([`RangeResults`]), and their file, big-ann-benchmarks' range format.

/// Every result within a radius, per query: query `q`'s results are
/// `ids[lims[q]..lims[q + 1]]` (with `dists` alongside), nearest first, ties by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangeResults {
    /// `nq + 1` offsets into `ids` / `dists`, from 0 to the total.
    pub lims: Vec<usize>,
    /// Ids (row numbers).
    pub ids: Vec<u64>,
    /// Exact distances.
    pub dists: Vec<f32>,
}

impl RangeResults {
    /// No query yet.
    pub fn new() -> Self {
        Self {
            lims: vec![0],
            ids: Vec::new(),
            dists: Vec::new(),
        }
    }

    /// Queries.
    pub fn nq(&self) -> usize {
        self.lims.len().saturating_sub(1)
    }

    /// Results over all queries.
    pub fn total(&self) -> usize {
        self.ids.len()
    }

    /// Query `q`'s ids.
    pub fn ids_of(&self, q: usize) -> &[u64] {
        &self.ids[self.lims[q]..self.lims[q + 1]]
    }

    /// Query `q`'s distances.
    pub fn dists_of(&self, q: usize) -> &[f32] {
        &self.dists[self.lims[q]..self.lims[q + 1]]
    }

    /// Appends one query's results (nearest first).
    pub fn push(&mut self, hits: impl IntoIterator<Item = (u64, f32)>) {
        if self.lims.is_empty() {
            self.lims.push(0);
        }
        for (id, d) in hits {
            self.ids.push(id);
            self.dists.push(d);
        }
        self.lims.push(self.ids.len());
    }
}

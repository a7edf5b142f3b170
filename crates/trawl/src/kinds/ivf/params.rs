//! The parameters of an IVF search and their checks.

use crate::search::SearchError;

/// Parameters of an IVF search.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IvfSearchParams {
    /// Results per query.
    pub k: usize,
    /// Posting lists probed (`m`).
    pub nprobe: usize,
    /// List size of the centroid-graph search (0: `max(2 · nprobe, 32)`).
    pub centroid_l: usize,
    /// Candidates kept by the filter stage for the re-rank (`n`).
    pub top_n: usize,
    /// Re-rank mini-batch size.
    pub batch: usize,
    /// Change-rate threshold ε of the early stop.
    pub epsilon: f32,
    /// Batches in a row below ε that stop the re-rank (β).
    pub beta: usize,
    /// Early stop on (off: re-rank all `top_n`).
    pub heuristic: bool,
    /// Intra-batch page merging on.
    pub page_merge: bool,
    /// Inter-batch page buffer on.
    pub page_buffer: bool,
    /// Page-mate scoring on: a page read for a candidate has every vector on it re-ranked
    /// (they are bucket-mates of the candidate, so often near the query), at no extra read.
    pub page_mates: bool,
    /// Queries per accelerator job in a batch search.
    pub accel_batch: usize,
    /// With RaBitQ codes: a candidate whose lower bound (its estimate less `skip_eps` times
    /// the scale of its error) is beyond the current `K`-th exact distance is not re-ranked
    /// (counted in `rerank_skipped`); 0: never skip. PQ codes have no bound.
    pub skip_eps: f32,
}

impl Default for IvfSearchParams {
    fn default() -> Self {
        Self {
            k: 10,
            nprobe: 32,
            centroid_l: 0,
            top_n: 200,
            // With page-mate scoring the first batch already fills the top k; batches of 2
            // with β = 2 stop after fewer reads than batches of 4 at the same recall on
            // GloVe-400K and gen-1M (bench/results/ivf-*).
            batch: 2,
            epsilon: 0.1,
            beta: 2,
            heuristic: true,
            page_merge: true,
            page_buffer: true,
            page_mates: true,
            accel_batch: 1,
            skip_eps: crate::kinds::graph::search::rerank::DEFAULT_SKIP_EPS,
        }
    }
}

/// Largest `nprobe`, `top_n`, `batch` or centroid list size accepted.
pub const MAX_IVF_PARAM: usize = 1 << 20;

impl IvfSearchParams {
    /// The centroid-graph list size used.
    pub fn centroid_list(&self) -> usize {
        if self.centroid_l == 0 {
            (2 * self.nprobe).max(32)
        } else {
            self.centroid_l.max(self.nprobe)
        }
    }

    /// Checks the parameters for an index of `n` vectors and `nlist` lists.
    pub fn validate(&self, n: usize, nlist: usize) -> Result<(), SearchError> {
        let bad = |s: String| Err(SearchError::InvalidRerank(s));
        if self.k == 0 {
            return Err(SearchError::InvalidK {
                k: 0,
                l: self.top_n,
            });
        }
        if self.k > n {
            return Err(SearchError::KTooLarge {
                k: self.k,
                n: n as u64,
            });
        }
        for (what, v) in [
            ("nprobe", self.nprobe),
            ("top_n", self.top_n),
            ("re-rank batch", self.batch),
            ("accel batch", self.accel_batch),
        ] {
            if v == 0 || v > MAX_IVF_PARAM {
                return bad(format!("{what} {v} must be between 1 and {MAX_IVF_PARAM}"));
            }
        }
        if self.nprobe > nlist {
            return bad(format!(
                "nprobe {} exceeds the index's {nlist} lists",
                self.nprobe
            ));
        }
        if self.centroid_l > MAX_IVF_PARAM {
            return bad(format!("centroid list size {} too large", self.centroid_l));
        }
        if self.top_n < self.k {
            return Err(SearchError::InvalidK {
                k: self.k,
                l: self.top_n,
            });
        }
        if !(0.0..=1.0).contains(&self.epsilon) {
            return bad(format!("epsilon {} must be in 0..=1", self.epsilon));
        }
        if self.beta == 0 {
            return bad("beta must be at least 1".into());
        }
        Ok(())
    }
}

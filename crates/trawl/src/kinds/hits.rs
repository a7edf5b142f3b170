//! [`Hits`]: the results of a batch search, of every kind.

use crate::search::QueryStats;

/// Id of a missing result (fewer than `k` vectors reachable), and of a free slot in an
/// updatable graph index's id map (`ids.trawl`): no vector ever has it.
pub const HOLE: u64 = u64::MAX;

/// Results of a batch search: `nq × k` ids (missing ones [`HOLE`]) and exact distances,
/// nearest first per query, with per-query statistics and the batch's wall time.
#[derive(Debug, Clone, Default)]
pub struct Hits {
    /// Results per query.
    pub k: usize,
    /// Row-major ids.
    pub ids: Vec<u64>,
    /// Row-major distances.
    pub dists: Vec<f32>,
    /// Per-query statistics.
    pub stats: Vec<QueryStats>,
    /// Seconds for the whole batch.
    pub wall_secs: f64,
}

impl Hits {
    /// Queries.
    pub fn nq(&self) -> usize {
        self.stats.len()
    }

    /// The statistics summed over queries.
    pub fn total(&self) -> QueryStats {
        let mut t = QueryStats::default();
        for s in &self.stats {
            t += *s;
        }
        t
    }

    /// Query `q`'s ids.
    pub fn ids_of(&self, q: usize) -> &[u64] {
        &self.ids[q * self.k..(q + 1) * self.k]
    }

    /// Query `q`'s distances.
    pub fn dists_of(&self, q: usize) -> &[f32] {
        &self.dists[q * self.k..(q + 1) * self.k]
    }

    /// The ids as 32-bit row numbers (a missing result is `u32::MAX`), as ground-truth and
    /// result files store them; the error is the first id that does not fit.
    pub fn ids_u32(&self) -> Result<Vec<u32>, u64> {
        self.ids
            .iter()
            .map(|&id| match id {
                HOLE => Ok(u32::MAX),
                id => u32::try_from(id).ok().filter(|&x| x != u32::MAX).ok_or(id),
            })
            .collect()
    }
}

impl From<crate::kinds::graph::BatchOutput> for Hits {
    /// A batch of row numbers (`u32::MAX` missing) as ids.
    fn from(b: crate::kinds::graph::BatchOutput) -> Self {
        Self {
            k: b.k,
            ids: b
                .ids
                .iter()
                .map(|&i| if i == u32::MAX { HOLE } else { u64::from(i) })
                .collect(),
            dists: b.dists,
            stats: b.stats,
            wall_secs: b.wall_secs,
        }
    }
}

impl From<crate::kinds::graph::updates::live::LiveBatch> for Hits {
    fn from(b: crate::kinds::graph::updates::live::LiveBatch) -> Self {
        Self {
            k: b.k,
            ids: b.ids,
            dists: b.dists,
            stats: b.stats,
            wall_secs: b.wall_secs,
        }
    }
}

/// Results of a batch range search: every vector within the radius of each query, nearest
/// first (ties by id), however many, with per-query statistics and the batch's wall time.
#[derive(Debug, Clone, Default)]
pub struct RangeHits {
    /// The results (`lims`, `ids`, `dists`).
    pub results: crate::data::RangeResults,
    /// Per-query statistics.
    pub stats: Vec<QueryStats>,
    /// Seconds for the whole batch.
    pub wall_secs: f64,
}

impl RangeHits {
    /// Queries.
    pub fn nq(&self) -> usize {
        self.stats.len()
    }

    /// The statistics summed over queries.
    pub fn total(&self) -> QueryStats {
        let mut t = QueryStats::default();
        for s in &self.stats {
            t += *s;
        }
        t
    }

    /// Query `q`'s ids.
    pub fn ids_of(&self, q: usize) -> &[u64] {
        self.results.ids_of(q)
    }

    /// Query `q`'s distances.
    pub fn dists_of(&self, q: usize) -> &[f32] {
        self.results.dists_of(q)
    }

    /// Keeps at most `max` results per query, the nearest.
    pub fn truncate_each(&mut self, max: usize) {
        let r = &self.results;
        let mut out = crate::data::RangeResults::new();
        for q in 0..r.nq() {
            let (ids, ds) = (r.ids_of(q), r.dists_of(q));
            let n = ids.len().min(max);
            out.push(ids[..n].iter().copied().zip(ds[..n].iter().copied()));
        }
        self.results = out;
    }

    /// From per-query results with their statistics.
    pub fn from_lists<I: Copy + Into<u64>>(
        lists: Vec<Vec<(I, f32)>>,
        stats: Vec<QueryStats>,
        wall_secs: f64,
    ) -> Self {
        let mut results = crate::data::RangeResults::new();
        for l in lists {
            results.push(l.into_iter().map(|(id, d)| (id.into(), d)));
        }
        Self {
            results,
            stats,
            wall_secs,
        }
    }
}

impl TryFrom<crate::kinds::graph::BatchOutput> for RangeHits {
    type Error = crate::kinds::Error;
    /// A range search's batch of row numbers as ids.
    fn try_from(b: crate::kinds::graph::BatchOutput) -> Result<Self, Self::Error> {
        let lists = b.ranged.ok_or_else(|| {
            crate::kinds::Error::Search(crate::search::SearchError::Internal(
                "a top-k batch where a range search was run".into(),
            ))
        })?;
        Ok(Self::from_lists(lists, b.stats, b.wall_secs))
    }
}

impl TryFrom<crate::kinds::graph::updates::live::LiveBatch> for RangeHits {
    type Error = crate::kinds::Error;
    fn try_from(b: crate::kinds::graph::updates::live::LiveBatch) -> Result<Self, Self::Error> {
        let lists = b.ranged.ok_or_else(|| {
            crate::kinds::Error::Search(crate::search::SearchError::Internal(
                "a top-k batch where a range search was run".into(),
            ))
        })?;
        Ok(Self::from_lists(lists, b.stats, b.wall_secs))
    }
}

//! Greedy best-first search over a graph held in memory, used by the build (to find each
//! point's candidates) and by callers ([`search`], [`search_batch`]), plus [`recall_at_k`].

use rayon::prelude::*;

use crate::data::{GroundTruth, Matrix};
use crate::kernels::Element;
use crate::vamana::adjacency::{Adjacency, Graph};
use crate::vamana::queue::{CandidateList, Neighbor, VisitedSet};
use crate::vamana::store::{Probe, VectorStore};
use crate::ErrorKind;

/// Counters of one search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Nodes expanded (neighbour lists read).
    pub hops: u64,
    /// Distances computed.
    pub distance_computations: u64,
}

/// Why a search was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VamanaSearchError {
    /// `k` is zero or larger than `l`: ask for at least one result and use `l ≥ k`.
    #[error("invalid k = {k} for list size l = {l} (need 1 ≤ k ≤ l)")]
    InvalidK {
        /// Results asked for.
        k: usize,
        /// Search list size.
        l: usize,
    },
    /// The query dimension differs from the indexed vectors': check the query file.
    #[error("query has dimension {got}, index has {expected}")]
    DimMismatch {
        /// Index dimension.
        expected: usize,
        /// Query dimension.
        got: usize,
    },
    /// The graph and the vector store disagree on the number of points.
    #[error("graph has {graph} nodes but the store holds {store} vectors")]
    SizeMismatch {
        /// Graph nodes.
        graph: usize,
        /// Stored vectors.
        store: usize,
    },
}

impl VamanaSearchError {
    /// Every variant is the caller's: [`ErrorKind::InvalidInput`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// Reusable buffers of one search thread.
#[derive(Debug, Clone, Default)]
pub struct SearchScratch {
    pub(crate) list: CandidateList,
    pub(crate) visited: VisitedSet,
    pub(crate) expanded: Vec<Neighbor>,
    nbrs: Vec<u32>,
    fresh: Vec<u32>,
    fresh_dists: Vec<f32>,
}

impl SearchScratch {
    /// Scratch for graphs of up to `n` nodes (grows on demand).
    pub fn new(n: usize) -> Self {
        Self {
            visited: VisitedSet::new(n),
            ..Self::default()
        }
    }
}

/// Greedy search from `start` with list size `l`. Leaves the final list in `scratch.list` and,
/// when `keep_expanded`, every expanded node in `scratch.expanded`.
pub(crate) fn greedy<T: Element, A: Adjacency>(
    adj: &A,
    store: &VectorStore<'_, T>,
    probe: &Probe<'_, T>,
    start: u32,
    l: usize,
    keep_expanded: bool,
    s: &mut SearchScratch,
) -> SearchStats {
    greedy_where(adj, store, probe, start, l, keep_expanded, s, |_| true)
}

/// [`greedy`] through the nodes `accept` takes only (the others are never scored, listed or
/// expanded): a search of one label's subgraph (FilteredVamana's `FilteredGreedySearch`).
/// `start` is taken as it is.
#[allow(clippy::too_many_arguments)]
pub(crate) fn greedy_where<T: Element, A: Adjacency>(
    adj: &A,
    store: &VectorStore<'_, T>,
    probe: &Probe<'_, T>,
    start: u32,
    l: usize,
    keep_expanded: bool,
    s: &mut SearchScratch,
    accept: impl Fn(u32) -> bool,
) -> SearchStats {
    s.list.reset(l);
    s.visited.reset(adj.node_count());
    s.expanded.clear();
    let mut stats = SearchStats::default();
    s.visited.insert(start);
    s.list.insert(start, store.dist(probe, start));
    stats.distance_computations += 1;
    while let Some(c) = s.list.pop_unexpanded() {
        if keep_expanded {
            s.expanded.push(c);
        }
        stats.hops += 1;
        adj.neighbors_into(c.id, &mut s.nbrs);
        s.fresh.clear();
        for &id in &s.nbrs {
            if s.visited.insert(id) && accept(id) {
                s.fresh.push(id);
            }
        }
        store.dist_batch(probe, &s.fresh, &mut s.fresh_dists);
        for (&id, &d) in s.fresh.iter().zip(&s.fresh_dists) {
            // A candidate that enters the list may be expanded soon: start loading its list.
            if s.list.insert(id, d) {
                adj.prefetch(id);
            }
        }
        stats.distance_computations += s.fresh.len() as u64;
    }
    stats
}

fn check(
    graph: &Graph,
    store: &VectorStore<'_, impl Element>,
    qdim: usize,
    k: usize,
    l: usize,
) -> Result<(), VamanaSearchError> {
    if k == 0 || k > l {
        return Err(VamanaSearchError::InvalidK { k, l });
    }
    if qdim != store.dim() {
        return Err(VamanaSearchError::DimMismatch {
            expected: store.dim(),
            got: qdim,
        });
    }
    if graph.n() != store.n() {
        return Err(VamanaSearchError::SizeMismatch {
            graph: graph.n(),
            store: store.n(),
        });
    }
    Ok(())
}

/// The `k` nearest neighbours of `query` found by a greedy search with list size `l` from the
/// graph's medoid, nearest first, with trawl's native distances.
pub fn search<T: Element>(
    graph: &Graph,
    store: &VectorStore<'_, T>,
    query: &[T],
    k: usize,
    l: usize,
    scratch: &mut SearchScratch,
) -> Result<(Vec<(u32, f32)>, SearchStats), VamanaSearchError> {
    check(graph, store, query.len(), k, l)?;
    let probe = store.query(query);
    let stats = greedy(graph, store, &probe, graph.medoid(), l, false, scratch);
    let hits = scratch
        .list
        .iter()
        .take(k)
        .map(|n| (n.id, n.dist))
        .collect();
    Ok((hits, stats))
}

/// Searches every row of `queries` in parallel; returns row-major `nq × k` ids (padded with
/// `u32::MAX` when the graph holds fewer than `k` reachable nodes) and the summed stats.
pub fn search_batch<T: Element>(
    graph: &Graph,
    store: &VectorStore<'_, T>,
    queries: &Matrix<T>,
    k: usize,
    l: usize,
) -> Result<(Vec<u32>, SearchStats), VamanaSearchError> {
    check(graph, store, queries.dim(), k, l)?;
    let mut ids = vec![u32::MAX; queries.n() * k];
    let stats = ids
        .par_chunks_mut(k)
        .enumerate()
        .map_init(
            || SearchScratch::new(graph.n()),
            |scratch, (q, out)| {
                let probe = store.query(queries.row(q));
                let st = greedy(graph, store, &probe, graph.medoid(), l, false, scratch);
                for (o, n) in out.iter_mut().zip(scratch.list.iter()) {
                    *o = n.id;
                }
                st
            },
        )
        .reduce(SearchStats::default, |a, b| SearchStats {
            hops: a.hops + b.hops,
            distance_computations: a.distance_computations + b.distance_computations,
        });
    Ok((ids, stats))
}

/// Mean recall@k of row-major `nq × k` result ids against `truth`: `|found ∩ true top-k| / k`
/// per query. Uses the first `k` columns of `truth` (which must have `truth.k ≥ k`); returns
/// `None` when the shapes disagree.
pub fn recall_at_k(found: &[u32], k: usize, truth: &GroundTruth) -> Option<f64> {
    if k == 0 || truth.k < k || found.len() != truth.nq * k || truth.nq == 0 {
        return None;
    }
    let mut hit = 0usize;
    for q in 0..truth.nq {
        let t = &truth.ids(q)[..k];
        hit += found[q * k..(q + 1) * k]
            .iter()
            .filter(|id| t.contains(id))
            .count();
    }
    Some(hit as f64 / (truth.nq * k) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_intersection() {
        let truth = GroundTruth {
            nq: 2,
            k: 3,
            ids: vec![1, 2, 3, 4, 5, 6],
            dists: vec![0.0; 6],
        };
        assert_eq!(recall_at_k(&[3, 2, 9, 4, 8, 7], 3, &truth), Some(0.5));
        assert_eq!(recall_at_k(&[1, 4], 1, &truth), Some(1.0));
        assert_eq!(recall_at_k(&[1], 1, &truth), None);
    }
}

//! The growing-k baseline of range search: a top-k search with `k` (and the list size with
//! it, keeping the ratio the caller gave) doubled until the `k`-th distance is beyond the
//! radius — what a top-k engine offers a user who needs every vector
//! within a radius (Milvus's DiskANN range search grows `k` the same way). trawl's own range
//! search ([`crate::kinds::IndexKind::range_search`]) is measured against it.

use std::time::Instant;

use crate::filter::{Expr, Filters, QueryFilter};
use crate::kernels::Element;
use crate::kinds::graph::search::MAX_LIST;
use crate::kinds::ivf::MAX_IVF_PARAM;
use crate::kinds::{AnyIndex, Error, KindParams, Queries, RangeHits, Run, HOLE};
use crate::search::QueryStats;

/// `params` with `k` results, the list (graph) and candidate count (IVF) grown by the same
/// factor as `k` from `params`' own, and at least `k`; `None` when the kind's limits do not
/// allow `k`.
fn with_k(params: &KindParams, k: usize) -> Option<KindParams> {
    let mut p = params.clone();
    let grow = |x: usize| (x as u64 * k as u64 / params.k().max(1) as u64) as usize;
    match &mut p {
        KindParams::Graph(g)
        | KindParams::Sharded(crate::kinds::ShardedParams { graph: g, .. }) => {
            let l = grow(g.l).max(k);
            if l > MAX_LIST {
                return None;
            }
            g.k = k;
            g.l = l;
        }
        KindParams::Ivf(i) => {
            let n = grow(i.top_n).max(k);
            if n > MAX_IVF_PARAM {
                return None;
            }
            i.k = k;
            i.top_n = n;
        }
        KindParams::Flat(f) => f.k = k,
    }
    Some(p)
}

/// See [`AnyIndex::range_search_growing`].
pub(crate) fn range_search_growing<T: Element>(
    ix: &AnyIndex,
    queries: Queries<'_, T>,
    radius: f32,
    params: &KindParams,
    run: Run,
    filter: &QueryFilter<'_>,
) -> Result<RangeHits, Error> {
    let t0 = Instant::now();
    let (nq, dim, n) = (queries.n(), queries.dim(), ix.n());
    let mut lists: Vec<Vec<(u64, f32)>> = vec![Vec::new(); nq];
    let mut stats = vec![QueryStats::default(); nq];
    let mut pending: Vec<usize> = (0..nq).collect();
    let mut k = params.k().clamp(1, n.max(1));
    let mut rows: Vec<T> = Vec::new();
    let mut sub_filters: Vec<Option<Expr>> = Vec::new();
    while !pending.is_empty() {
        let p = with_k(params, k).ok_or_else(|| {
            Error::InvalidInput(format!(
                "growing-k range search: k = {k} is beyond the kind's largest list"
            ))
        })?;
        rows.clear();
        sub_filters.clear();
        for &q in &pending {
            rows.extend_from_slice(queries.row(q));
            sub_filters.push(filter.filters.get(q).cloned());
        }
        let sub = Queries::new(&rows, dim)
            .ok_or_else(|| Error::InvalidInput("queries of dimension 0".into()))?;
        let f = QueryFilter {
            filters: if filter.is_none() {
                Filters::None
            } else {
                Filters::PerQuery(&sub_filters)
            },
            params: filter.params,
        };
        let hits = ix.search(sub, &p, run, &f)?;
        let mut still = Vec::new();
        for (j, &q) in pending.iter().enumerate() {
            stats[q] += hits.stats[j];
            let (ids, ds) = (hits.ids_of(j), hits.dists_of(j));
            let found = ids.iter().take_while(|&&id| id != HOLE).count();
            // Settled: fewer than k came back (nothing more to find), the k-th is beyond the
            // radius, or k already covers every vector.
            if found < k || ds[k - 1].is_nan() || ds[k - 1] > radius || k >= n {
                lists[q] = ids[..found]
                    .iter()
                    .zip(&ds[..found])
                    .filter(|h| *h.1 <= radius)
                    .map(|(&id, &d)| (id, d))
                    .collect();
            } else {
                still.push(q);
            }
        }
        pending = still;
        k = (k * 2).min(n.max(1));
    }
    Ok(RangeHits::from_lists(
        lists,
        stats,
        t0.elapsed().as_secs_f64(),
    ))
}

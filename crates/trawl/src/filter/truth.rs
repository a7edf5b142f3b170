//! Exact filtered ground truth: per query, the `k` nearest of the rows its filter matches, by
//! the metric's exact distance (ties by id), missing ones `u32::MAX` / `+∞` — what
//! `trawl gt --filter` writes and what filtered recall is measured against.

use rayon::prelude::*;

use crate::data::{GroundTruth, Matrix};
use crate::filter::{Attributes, FilterError, Filters, Predicate};
use crate::kernels::{self, Element, Metric};

/// The exact filtered `k` nearest neighbours of every query of `queries` in `base`, whose
/// rows' attributes are `attrs`.
pub fn knn_filtered<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    k: usize,
    metric: Metric,
    attrs: &Attributes,
    filters: Filters<'_>,
) -> Result<GroundTruth, FilterError> {
    if base.dim() != queries.dim() {
        return Err(FilterError::Attrs(format!(
            "queries of dimension {} for a base of {}",
            queries.dim(),
            base.dim()
        )));
    }
    if attrs.n() as usize != base.n() {
        return Err(FilterError::Attrs(format!(
            "attributes of {} vectors for a base of {}",
            attrs.n(),
            base.n()
        )));
    }
    let nq = queries.n();
    filters.check(nq).map_err(FilterError::Attrs)?;
    let mut preds = Vec::with_capacity(nq);
    for q in 0..nq {
        preds.push(match filters.get(q) {
            Some(e) => Some(Predicate::compile(e, attrs)?),
            None => None,
        });
    }
    let rows: Vec<(Vec<u32>, Vec<f32>)> = (0..nq)
        .into_par_iter()
        .map(|q| {
            let query = queries.row(q);
            let mut best: Vec<(f32, u32)> = match &preds[q] {
                Some(p) => p
                    .collect()
                    .iter()
                    .map(|r| (kernels::distance(metric, query, base.row(r as usize)), r))
                    .collect(),
                None => (0..base.n() as u32)
                    .map(|r| (kernels::distance(metric, query, base.row(r as usize)), r))
                    .collect(),
            };
            let cmp = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            if best.len() > k {
                best.select_nth_unstable_by(k, cmp);
                best.truncate(k);
            }
            best.sort_unstable_by(cmp);
            let mut ids: Vec<u32> = best.iter().map(|b| b.1).collect();
            let mut dists: Vec<f32> = best.iter().map(|b| b.0).collect();
            ids.resize(k, u32::MAX);
            dists.resize(k, f32::INFINITY);
            (ids, dists)
        })
        .collect();
    let mut gt = GroundTruth {
        nq,
        k,
        ids: Vec::with_capacity(nq * k),
        dists: Vec::with_capacity(nq * k),
    };
    for (ids, dists) in rows {
        gt.ids.extend(ids);
        gt.dists.extend(dists);
    }
    Ok(gt)
}

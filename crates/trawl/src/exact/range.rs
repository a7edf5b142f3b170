//! Exact range search (range ground truth): every base vector within a radius of each query.
//!
//! The base is visited in blocks of 4096 rows, in order (so a memory-mapped base
//! larger than RAM streams from disk); within a block, queries run in parallel on rayon's current
//! pool, each scanning the block's rows in order. Every distance that decides membership is
//! [`crate::kernels::distance`] of the query and the base row, so the results (and their
//! distance bits) match what the index searches compute. Only the results grow: there is no
//! `n × nq` distance matrix.

use rayon::prelude::*;

use crate::data::{Matrix, RangeResults};
use crate::exact::{ExactError, Input};
use crate::kernels::{distance, Element, Metric};
use crate::progress::Control;

/// Base vectors per block: the unit of sequential reading, progress and cancellation.
const BASE_BLOCK: usize = 4096;

/// Queries per parallel task.
const QUERY_BLOCK: usize = 8;

/// A result while it is collected: distance and base row.
type Hit = (f32, u32);

/// Every base vector within `radius` of each query under `metric`: query `q`'s results are the
/// base rows `i` with `distance(metric, query q, row i) <= radius`
/// ([`crate::kernels::distance`], trawl's distances: squared L2, negated inner product,
/// `1 − cos`), sorted by `(distance, id)` ascending (`−0` equals `+0`), with those distances.
/// The output does not depend on the number of threads. Runs on rayon's current pool, shows a
/// progress bar over base blocks and honours cancellation.
///
/// # Radius
/// - It must be finite: NaN or ±∞ is an [`ExactError::NonFiniteRadius`].
/// - It may be negative. Inner-product distances are negated dot products, so a radius of `−t`
///   returns the vectors whose dot product with the query is at least `t`. L2 and cosine
///   distances are never negative: a negative radius gives no results.
/// - A radius of 0 returns the vectors at distance exactly 0: with L2, the exact duplicates of
///   the query (and, for f32, vectors whose squared differences all underflow to 0).
///
/// Distances that overflow (`+∞`) or are NaN are never within a finite radius. An empty base
/// gives every query zero results; no queries give empty results.
///
/// # Errors
/// [`ExactError::NonFiniteRadius`]; [`ExactError::DimMismatch`] when base and queries differ in
/// dimension; [`ExactError::TooManyVectors`] for a base beyond 32-bit ids;
/// [`ExactError::NonFinite`] when the queries or the base hold NaN or ±∞ (the first offending
/// query, or the first offending base row of the first block holding one);
/// [`ExactError::Cancelled`].
pub fn range_search<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    metric: Metric,
    radius: f32,
    ctl: &Control,
) -> Result<RangeResults, ExactError> {
    validate(base, queries, radius)?;
    let n = base.n();
    let mut hits: Vec<Vec<Hit>> = vec![Vec::new(); queries.n()];
    let bar = ctl.bar("range ground truth", n.div_ceil(BASE_BLOCK) as u64);
    for start in (0..n).step_by(BASE_BLOCK) {
        ctl.check()?;
        let end = (start + BASE_BLOCK).min(n);
        if let Some(row) = (start..end)
            .into_par_iter()
            .find_first(|&i| !base.row(i).iter().all(|x| x.is_finite()))
        {
            return Err(ExactError::NonFinite {
                input: Input::Base,
                row,
            });
        }
        hits.par_chunks_mut(QUERY_BLOCK)
            .enumerate()
            .for_each(|(b, lists)| {
                for (r, list) in lists.iter_mut().enumerate() {
                    let q = queries.row(b * QUERY_BLOCK + r);
                    for i in start..end {
                        let d = distance(metric, q, base.row(i));
                        if d <= radius {
                            list.push((d, i as u32)); // i < n ≤ u32::MAX (validated)
                        }
                    }
                }
            });
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(collect(hits))
}

/// The checks made before any distance is computed.
fn validate<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    radius: f32,
) -> Result<(), ExactError> {
    if !radius.is_finite() {
        return Err(ExactError::NonFiniteRadius(radius.to_string()));
    }
    if base.dim() != queries.dim() {
        return Err(ExactError::DimMismatch {
            base: base.dim(),
            queries: queries.dim(),
        });
    }
    if u32::try_from(base.n()).is_err() {
        return Err(ExactError::TooManyVectors { n: base.n() });
    }
    if let Some(row) = queries
        .rows()
        .position(|r| !r.iter().all(|x| x.is_finite()))
    {
        return Err(ExactError::NonFinite {
            input: Input::Queries,
            row,
        });
    }
    Ok(())
}

/// Sorts each query's hits by `(distance, id)` and concatenates them, releasing each list once
/// copied.
fn collect(mut hits: Vec<Vec<Hit>>) -> RangeResults {
    // Hits are within a finite radius, hence never NaN; `+ 0.0` makes −0 equal +0.
    hits.par_iter_mut().for_each(|list| {
        list.sort_unstable_by(|a, b| (a.0 + 0.0).total_cmp(&(b.0 + 0.0)).then(a.1.cmp(&b.1)));
    });
    let total = hits.iter().map(Vec::len).sum();
    let mut out = RangeResults {
        lims: Vec::with_capacity(hits.len() + 1),
        ids: Vec::with_capacity(total),
        dists: Vec::with_capacity(total),
    };
    out.lims.push(0);
    for list in hits {
        out.push(list.into_iter().map(|(d, id)| (u64::from(id), d)));
    }
    out
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod range_tests;

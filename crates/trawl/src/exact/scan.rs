//! The exact pass: every distance computed with the element type's exact kernels.
//!
//! Used for `u8`/`i8` (whose kernels are exact integer arithmetic) and, for f32, for the few
//! queries the fast pass could not certify. Base blocks are visited in order; for cosine the
//! block's norms are computed once (in parallel) and combined with
//! [`crate::kernels::cosine_from_parts`] exactly as [`crate::kernels::distance`] does, so the
//! distances are bit-identical to it.

use rayon::prelude::*;

use crate::data::Matrix;
use crate::exact::topk::{order_key, TopK};
use crate::exact::{ExactError, Input, Plan};
use crate::kernels::{cosine_from_parts, Element, Metric};
use crate::progress::Control;

/// Norms of rows `start..start + rows` into `out` (cosine only); the first non-finite row is an
/// error.
fn block_norms<T: Element>(
    base: &Matrix<T>,
    start: usize,
    metric: Metric,
    out: &mut [f32],
) -> Result<(), usize> {
    let bad = out
        .par_iter_mut()
        .enumerate()
        .filter_map(|(j, nsq)| {
            let row = base.row(start + j);
            if metric == Metric::Cosine {
                *nsq = T::norm_sq(row);
            }
            (!row.iter().all(|x| x.is_finite())).then_some(start + j)
        })
        .min();
    match bad {
        Some(row) => Err(row),
        None => Ok(()),
    }
}

/// Runs the exact pass for queries `qidx`, keeping the `k` nearest of each.
pub(crate) fn pass<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    qidx: &[usize],
    metric: Metric,
    k: usize,
    plan: &Plan,
    ctl: &Control,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<TopK>, ExactError> {
    let qnorms: Vec<f32> = qidx.iter().map(|&qi| T::norm_sq(queries.row(qi))).collect();
    let mut heaps = vec![TopK::new(k); qidx.len()];
    let mut bnorms = vec![0.0f32; plan.block_rows];
    for start in (0..base.n()).step_by(plan.block_rows) {
        ctl.check()?;
        let rows = plan.block_rows.min(base.n() - start);
        let bn = &mut bnorms[..rows];
        block_norms(base, start, metric, bn).map_err(|row| ExactError::NonFinite {
            input: Input::Base,
            row,
        })?;
        let bn = &*bn;
        heaps
            .par_chunks_mut(plan.query_block)
            .enumerate()
            .for_each(|(b, hs)| {
                for (r, h) in hs.iter_mut().enumerate() {
                    let i = b * plan.query_block + r;
                    let q = queries.row(qidx[i]);
                    for (j, &nb) in bn.iter().enumerate() {
                        let row = base.row(start + j);
                        let d = match metric {
                            Metric::L2 => T::l2_sq(q, row),
                            Metric::InnerProduct => -T::dot(q, row),
                            Metric::Cosine => cosine_from_parts(T::dot(q, row), qnorms[i], nb),
                        };
                        h.push(order_key(d), (start + j) as u32, d);
                    }
                }
            });
        bar.inc(1);
    }
    Ok(heaps)
}

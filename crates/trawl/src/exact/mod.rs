//! Exact k-nearest-neighbour search (ground truth): blocked, multi-threaded, memory bounded.
//!
//! This module owns [`knn`], its parameters and its error type. Distances are trawl's native
//! distances (see [`crate::kernels`]); each query's neighbours are sorted by `(distance, id)`
//! ascending, so equal distances are ordered by the smaller id and the output is deterministic,
//! whatever the number of threads or the block sizes.
//!
//! # How it works
//!
//! The base is visited block by block, in order (sequential access, so a memory-mapped base larger
//! than RAM streams from disk); only one block and the per-query candidate lists are resident.
//! Within a block, query blocks run in parallel on rayon's current pool.
//!
//! - **f32** (`fast.rs`): the expansion `‖q‖² + ‖b‖² − 2 q·b` (and its IP / cosine analogues)
//!   with a register-blocked AVX-512 micro-kernel on a packed copy of the block. It keeps
//!   `k + rerank_margin` candidates per query by approximate key, computes their exact distance
//!   with [`crate::kernels::distance`] as they enter, and reports the best `k` by exact distance.
//!   A query is then *certified*: its `k`-th exact distance must lie below the worst kept key
//!   minus a rounding bound (`fast::slack`), which proves no discarded point can be nearer.
//!   Queries that fail (heavy ties, huge norms, overflow) are redone by the exact pass.
//! - **u8 / i8** (`scan.rs`): exact integer kernels directly in the blocked loop.
//!
//! Memory: `ExactParams::memory_budget_bytes` bounds the working set (one base block plus the
//! per-query candidate lists); when the lists of all queries do not fit, queries are processed in
//! chunks, each chunk making its own pass over the base. The returned [`GroundTruth`]
//! (`nq × k` ids and distances) is not counted.
//!
//! Non-finite values (NaN, ±∞) in the queries or the base are rejected. Finite inputs whose
//! distances overflow get `inf` or `NaN` distances; `NaN` orders like `+∞`.

mod fast;
pub mod range;
mod scan;
mod tile;
pub(crate) mod topk;

#[cfg(test)]
mod tests;

use std::fmt;

use crate::data::{GroundTruth, Matrix};
use crate::kernels::{Element, Metric};
use crate::progress::{Cancelled, Control};
use topk::{Cand, TopK};

pub use range::range_search;

/// Tuning of [`knn`]. The defaults suit any data; see the fields for what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactParams {
    /// Upper bound on the working memory (one base block plus per-query candidate lists), bytes.
    /// The base block shrinks and queries are processed in chunks to fit. Default 1 GiB.
    pub memory_budget_bytes: usize,
    /// Queries per parallel task (rounded up to a multiple of 8 on the f32 path). Default 64.
    pub query_block: usize,
    /// Base vectors per block (the unit of sequential reading and of progress). Default 4096.
    pub base_block: usize,
    /// Extra candidates kept per query by the f32 path for exact re-ranking. Default 16.
    pub rerank_margin: usize,
}

impl Default for ExactParams {
    fn default() -> Self {
        Self {
            memory_budget_bytes: 1 << 30,
            query_block: 64,
            base_block: 4096,
            rerank_margin: 16,
        }
    }
}

/// Which input a [`ExactError::NonFinite`] refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// The base vectors.
    Base,
    /// The query vectors.
    Queries,
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Input::Base => "base",
            Input::Queries => "query",
        })
    }
}

/// Why [`knn`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExactError {
    /// `k` was zero: ask for at least one neighbour.
    #[error("k must be at least 1")]
    KZero,
    /// More neighbours were asked for than the base holds: lower `k` to at most `n`.
    #[error("k = {k} is larger than the base ({n} vectors)")]
    KTooLarge {
        /// Requested neighbours.
        k: usize,
        /// Base size.
        n: usize,
    },
    /// Base and queries have different dimensions: the files do not belong together.
    #[error("dimension mismatch: base vectors have {base} dimensions, queries have {queries}")]
    DimMismatch {
        /// Base dimension.
        base: usize,
        /// Query dimension.
        queries: usize,
    },
    /// The base holds no vectors: there is nothing to search.
    #[error("the base is empty")]
    EmptyBase,
    /// There are no queries: nothing to compute.
    #[error("there are no queries")]
    EmptyQueries,
    /// Ids are 32-bit: split a base of more than `u32::MAX` vectors.
    #[error("the base has {n} vectors, more than 32-bit ids can address")]
    TooManyVectors {
        /// Base size.
        n: usize,
    },
    /// An input holds NaN or an infinity: clean the data (the distance would be meaningless).
    #[error("{input} vector {row} holds a non-finite value (NaN or infinity)")]
    NonFinite {
        /// Which input.
        input: Input,
        /// Row index of the first offending vector found.
        row: usize,
    },
    /// The radius of a range search is NaN or infinite: give a finite radius.
    #[error("the radius must be a finite number, not {0}")]
    NonFiniteRadius(String),
    /// A block size was zero: use positive block sizes.
    #[error("invalid parameter: {0} must be positive")]
    ZeroParam(&'static str),
    /// The memory budget cannot hold one base vector and one query's candidates: raise it.
    #[error("memory budget of {budget} bytes is too small; at least {needed} bytes are needed")]
    BudgetTooSmall {
        /// The budget given.
        budget: usize,
        /// The smallest budget that works.
        needed: usize,
    },
    /// The operation was cancelled through its [`Control`]; nothing to report.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl ExactError {
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) when cancelled; every other
    /// variant is the caller's: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Cancelled(_) => crate::ErrorKind::Cancelled,
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

/// Block sizes derived from the parameters and the memory budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Base vectors per block.
    pub block_rows: usize,
    /// Queries per parallel task.
    pub query_block: usize,
    /// Queries per pass over the base.
    pub query_chunk: usize,
}

impl Plan {
    fn new<T: Element>(
        n: usize,
        dim: usize,
        nq: usize,
        cap: usize,
        fast: bool,
        p: &ExactParams,
    ) -> Result<Self, ExactError> {
        for (v, name) in [(p.query_block, "query_block"), (p.base_block, "base_block")] {
            if v == 0 {
                return Err(ExactError::ZeroParam(name));
            }
        }
        let elem = std::mem::size_of::<T>();
        // A base row: its data as read (or packed copy, f32) plus its norm / coefficients.
        let row_bytes = if fast { 4 * dim + 8 } else { elem * dim + 4 };
        // A query: its candidate list plus its padded copy and coefficients (f32).
        let query_bytes = cap * std::mem::size_of::<Cand>()
            + std::mem::size_of::<TopK>()
            + if fast { 4 * dim + 8 } else { 4 };
        let min_rows = if fast { tile::NR } else { 1 };
        let needed = row_bytes * min_rows + query_bytes;
        let budget = p.memory_budget_bytes;
        if budget < needed {
            return Err(ExactError::BudgetTooSmall { budget, needed });
        }
        let block_rows = p
            .base_block
            .min(n)
            .min(((budget / 2) / row_bytes).max(min_rows));
        let query_chunk = ((budget - block_rows * row_bytes) / query_bytes).clamp(1, nq);
        Ok(Self {
            block_rows,
            query_block: p.query_block,
            query_chunk,
        })
    }
}

fn validate<T: Element>(base: &Matrix<T>, queries: &Matrix<T>, k: usize) -> Result<(), ExactError> {
    if base.n() == 0 {
        return Err(ExactError::EmptyBase);
    }
    if queries.n() == 0 {
        return Err(ExactError::EmptyQueries);
    }
    if base.dim() != queries.dim() {
        return Err(ExactError::DimMismatch {
            base: base.dim(),
            queries: queries.dim(),
        });
    }
    if k == 0 {
        return Err(ExactError::KZero);
    }
    if k > base.n() {
        return Err(ExactError::KTooLarge { k, n: base.n() });
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

/// The exact `k` nearest base vectors of every query under `metric`.
///
/// Row `q` of the result lists base ids sorted by `(distance, id)` ascending with their exact
/// distances (bit-identical to [`crate::kernels::distance`] of query and base row). Runs on
/// rayon's current pool, shows a progress bar over base blocks and honours cancellation.
///
/// # Errors
/// See [`ExactError`]: empty inputs, dimension mismatch, `k` of zero or above the base size,
/// non-finite values, a zero block size, a budget below one row, cancellation.
pub fn knn<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    k: usize,
    metric: Metric,
    params: &ExactParams,
    ctl: &Control,
) -> Result<GroundTruth, ExactError> {
    knn_with_stats(base, queries, k, metric, params, ctl).map(|(gt, _)| gt)
}

/// What [`knn_with_stats`] did besides computing the result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExactStats {
    /// Passes over the base (one per query chunk, plus the exact re-runs).
    pub base_passes: usize,
    /// f32 queries the fast pass could not certify, recomputed by the exact pass.
    pub exact_reruns: usize,
}

/// [`knn`], also returning how the work went (passes over the base, exact re-runs).
///
/// # Errors
/// As [`knn`].
pub fn knn_with_stats<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    k: usize,
    metric: Metric,
    params: &ExactParams,
    ctl: &Control,
) -> Result<(GroundTruth, ExactStats), ExactError> {
    validate(base, queries, k)?;
    let (n, nq, dim) = (base.n(), queries.n(), base.dim());
    let use_fast = fast::is_f32::<T>();
    let cap = if use_fast {
        (k + params.rerank_margin).min(n)
    } else {
        k
    };
    let plan = Plan::new::<T>(n, dim, nq, cap, use_fast, params)?;
    let blocks = n.div_ceil(plan.block_rows) as u64;
    let bar = ctl.bar(
        "ground truth",
        blocks * nq.div_ceil(plan.query_chunk) as u64,
    );
    let mut gt = GroundTruth {
        nq,
        k,
        ids: vec![0; nq * k],
        dists: vec![0.0; nq * k],
    };
    let mut stats = ExactStats::default();
    for c0 in (0..nq).step_by(plan.query_chunk) {
        let qidx: Vec<usize> = (c0..(c0 + plan.query_chunk).min(nq)).collect();
        stats.base_passes += 1;
        let lists = if use_fast {
            let (lists, reruns) =
                fast_chunk(base, queries, &qidx, k, metric, cap, &plan, ctl, &bar)?;
            stats.exact_reruns += reruns;
            stats.base_passes += usize::from(reruns > 0);
            lists
        } else {
            scan::pass(base, queries, &qidx, metric, k, &plan, ctl, &bar)?
                .into_iter()
                .map(TopK::into_sorted_by_dist)
                .collect()
        };
        for (&qi, list) in qidx.iter().zip(lists) {
            for (slot, c) in list.iter().take(k).enumerate() {
                gt.ids[qi * k + slot] = c.id;
                gt.dists[qi * k + slot] = c.dist;
            }
        }
    }
    bar.finish_and_clear();
    Ok((gt, stats))
}

/// The f32 path for one chunk: fast pass, certification, exact pass for uncertified queries.
fn fast_chunk<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    qidx: &[usize],
    k: usize,
    metric: Metric,
    cap: usize,
    plan: &Plan,
    ctl: &Control,
    bar: &indicatif::ProgressBar,
) -> Result<(Vec<Vec<Cand>>, usize), ExactError> {
    let n = base.n();
    let fp = fast::pass(base, queries, qidx, metric, cap, plan, ctl, bar)?;
    let mut redo = Vec::new();
    let mut lists = Vec::with_capacity(qidx.len());
    for (r, heap) in fp.heaps.into_iter().enumerate() {
        let (full, len, tau) = (heap.is_full(), heap.len(), heap.threshold());
        let list = heap.into_sorted_by_dist();
        let certified = if cap == n || !full {
            len == n
        } else {
            let qn = T::norm_sq(queries.row(qidx[r])).sqrt();
            let e = fast::slack(metric, base.dim(), qn, fp.max_base_norm);
            topk::order_key(list[k - 1].dist) < tau - e
        };
        if !certified {
            redo.push(r);
        }
        lists.push(list);
    }
    if !redo.is_empty() {
        let ridx: Vec<usize> = redo.iter().map(|&r| qidx[r]).collect();
        bar.inc_length(n.div_ceil(plan.block_rows) as u64);
        let exact = scan::pass(base, queries, &ridx, metric, k, plan, ctl, bar)?;
        for (&r, heap) in redo.iter().zip(exact) {
            lists[r] = heap.into_sorted_by_dist();
        }
    }
    Ok((lists, redo.len()))
}

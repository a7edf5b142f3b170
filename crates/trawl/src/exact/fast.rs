//! The f32 fast pass: norms expansion with a packed, register-blocked micro-kernel.
//!
//! Each base block is packed once (in parallel) into panels of [`NR`] rows, dimension-major, with
//! per-row key coefficients; then query blocks are processed in parallel, each task sweeping the
//! panels of the block against its query tiles of [`MR`] rows. Keys approximate the distance:
//!
//! | metric | key | qscale | bscale | boff | qoff |
//! |---|---|---|---|---|---|
//! | L2 | `‖q‖² + ‖b‖² − 2 q·b` | `−2` | `1` | `‖b‖²` | `‖q‖²` |
//! | IP | `−q·b` | `−1` | `1` | `0` | `0` |
//! | cosine | `1 − q·b / (‖q‖ ‖b‖)` | `−1/‖q‖` | `1/‖b‖` | `0` | `1` |
//!
//! (a zero vector gets scale `0`, so its cosine key is exactly `1`, as the exact distance).
//! Candidates enter the lists by key; at the end of each block, the ones that entered during the
//! block and survived get their exact distance from [`crate::kernels::distance`] (the block is
//! still in cache), so the final re-ranking never touches the base again. The caller checks afterwards, with [`slack`], that no point outside
//! the kept candidates can belong to the exact top k.

use rayon::prelude::*;

use crate::data::Matrix;
use crate::exact::tile::{PanelCoef, TileCoef, TileKernel, TileOut, MR, NR};
use crate::exact::topk::TopK;
use crate::exact::{ExactError, Input, Plan};
use crate::kernels::{distance, Element, Metric};
use crate::progress::Control;

/// Views an f32-typed row as `&[f32]` (the caller checked `T::DTYPE == F32` and the layout).
#[inline]
pub(crate) fn as_f32<T: Element>(row: &[T]) -> &[f32] {
    bytemuck::cast_slice(row)
}

/// Whether `T` can take the f32 fast path.
pub(crate) fn is_f32<T: Element>() -> bool {
    T::DTYPE == crate::DType::F32
        && std::mem::size_of::<T>() == 4
        && std::mem::align_of::<T>().is_multiple_of(std::mem::align_of::<f32>())
}

/// Bound on `|approximate key − exact distance|` for a query of norm `qn` against base vectors of
/// norm at most `bn`, in `dim` dimensions (twice the textbook `γ_d` bound of both computations).
pub(crate) fn slack(metric: Metric, dim: usize, qn: f32, bn: f32) -> f32 {
    let g = 2.0 * (dim as f32 + 8.0) * f32::EPSILON;
    match metric {
        Metric::L2 => g * (qn + bn) * (qn + bn),
        Metric::InnerProduct => g * qn * bn,
        Metric::Cosine => g * 4.0,
    }
}

/// Query tiles of one chunk: padded rows and per-query key coefficients.
struct QueryTiles {
    /// `ntiles` tiles of `MR` rows, each packed dimension-major (`dim × MR`); padding rows are
    /// zero.
    rows: Vec<f32>,
    qscale: Vec<f32>,
    qoff: Vec<f32>,
}

fn query_tiles<T: Element>(queries: &Matrix<T>, qidx: &[usize], metric: Metric) -> QueryTiles {
    let dim = queries.dim();
    let padded = qidx.len().div_ceil(MR) * MR;
    let mut rows = vec![0.0f32; padded * dim];
    let mut qscale = vec![0.0f32; padded];
    let mut qoff = vec![0.0f32; padded];
    for (r, &qi) in qidx.iter().enumerate() {
        let q = queries.row(qi);
        let (tile, i) = (r / MR, r % MR);
        for (t, &x) in as_f32(q).iter().enumerate() {
            rows[tile * MR * dim + t * MR + i] = x;
        }
        let nsq = T::norm_sq(q);
        (qscale[r], qoff[r]) = match metric {
            Metric::L2 => (-2.0, nsq),
            Metric::InnerProduct => (-1.0, 0.0),
            Metric::Cosine => (-inv_norm(nsq), 1.0),
        };
    }
    QueryTiles { rows, qscale, qoff }
}

#[inline]
fn inv_norm(nsq: f32) -> f32 {
    if nsq > 0.0 {
        1.0 / nsq.sqrt()
    } else {
        0.0
    }
}

/// The packed current base block.
struct Packed {
    data: Vec<f32>,
    coef: Vec<PanelCoef>,
}

/// Packs rows `start..start + rows` of the base; returns the largest row norm, or the first row
/// holding a non-finite value.
fn pack<T: Element>(
    base: &Matrix<T>,
    start: usize,
    rows: usize,
    metric: Metric,
    packed: &mut Packed,
) -> Result<f32, usize> {
    let dim = base.dim();
    let npan = rows.div_ceil(NR);
    let data = &mut packed.data[..npan * NR * dim];
    let coef = &mut packed.coef[..npan];
    let (bad, max_norm) = data
        .par_chunks_mut(NR * dim)
        .zip(coef.par_iter_mut())
        .enumerate()
        .map(|(p, (panel, pc))| {
            let mut bad = None;
            let mut max_nsq = 0.0f32;
            for j in 0..NR {
                let id = start + p * NR + j;
                if id >= start + rows {
                    pc.bscale[j] = 0.0;
                    pc.boff[j] = f32::INFINITY;
                    (0..dim).for_each(|t| panel[t * NR + j] = 0.0);
                    continue;
                }
                let row = as_f32(base.row(id));
                if bad.is_none() && !row.iter().all(|x| x.is_finite()) {
                    bad = Some(id);
                }
                for (t, &x) in row.iter().enumerate() {
                    panel[t * NR + j] = x;
                }
                let nsq = T::norm_sq(base.row(id));
                max_nsq = max_nsq.max(nsq);
                (pc.bscale[j], pc.boff[j]) = match metric {
                    Metric::L2 => (1.0, nsq),
                    Metric::InnerProduct => (1.0, 0.0),
                    Metric::Cosine => (inv_norm(nsq), 0.0),
                };
            }
            (bad, max_nsq)
        })
        .reduce(|| (None, 0.0f32), |a, b| (opt_min(a.0, b.0), a.1.max(b.1)));
    match bad {
        Some(row) => Err(row),
        None => Ok(max_norm.sqrt()),
    }
}

fn opt_min(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Everything a query-block task reads.
struct BlockCtx<'a, T: Element> {
    base: &'a Matrix<T>,
    queries: &'a Matrix<T>,
    qidx: &'a [usize],
    metric: Metric,
    tiles: &'a QueryTiles,
    packed: &'a Packed,
    start: usize,
    npan: usize,
    kernel: TileKernel,
}

/// Sweeps one base block against the query tiles `tile0..` whose heaps are `heaps`.
fn process_block<T: Element>(cx: &BlockCtx<'_, T>, tile0: usize, heaps: &mut [TopK]) {
    let dim = cx.base.dim();
    let ntiles = heaps.len().div_ceil(MR);
    let mut out = TileOut::default();
    for p in 0..cx.npan {
        let panel = &cx.packed.data[p * NR * dim..(p + 1) * NR * dim];
        let pc = &cx.packed.coef[p];
        for t in 0..ntiles {
            let g = tile0 + t; // global tile index within the chunk
            let mut tc = TileCoef {
                qscale: [0.0; MR],
                thr: [f32::NEG_INFINITY; MR],
            };
            for i in 0..MR {
                if let Some(h) = heaps.get(t * MR + i) {
                    tc.qscale[i] = cx.tiles.qscale[g * MR + i];
                    tc.thr[i] = h.threshold() - cx.tiles.qoff[g * MR + i];
                }
            }
            let q = &cx.tiles.rows[g * MR * dim..(g + 1) * MR * dim];
            cx.kernel.run(q, panel, dim, pc, &tc, &mut out);
            for i in 0..MR {
                let mut mask = out.masks[i];
                while mask != 0 {
                    let j = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    let r = t * MR + i;
                    let key = out.keys[i][j] + cx.tiles.qoff[g * MR + i];
                    let id = cx.start + p * NR + j;
                    // the exact distance is filled in at the end of the block
                    heaps[r].push(key, id as u32, f32::NAN);
                }
            }
        }
    }
    for (r, h) in heaps.iter_mut().enumerate() {
        let q_row = cx.queries.row(cx.qidx[tile0 * MR + r]);
        for (id, d) in h.dists_mut() {
            if id as usize >= cx.start {
                *d = distance(cx.metric, q_row, cx.base.row(id as usize));
            }
        }
    }
}

/// Result of the fast pass over one chunk of queries.
pub(crate) struct FastPass {
    /// One candidate list per query of the chunk, ordered by approximate key.
    pub heaps: Vec<TopK>,
    /// Largest base vector norm seen (for [`slack`]).
    pub max_base_norm: f32,
}

/// Runs the fast pass for queries `qidx`, keeping `cap` candidates each.
pub(crate) fn pass<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    qidx: &[usize],
    metric: Metric,
    cap: usize,
    plan: &Plan,
    ctl: &Control,
    bar: &indicatif::ProgressBar,
) -> Result<FastPass, ExactError> {
    let dim = base.dim();
    let tiles = query_tiles(queries, qidx, metric);
    let mut heaps = vec![TopK::new(cap); qidx.len()];
    let max_pan = plan.block_rows.div_ceil(NR);
    let mut packed = Packed {
        data: vec![0.0; max_pan * NR * dim],
        coef: vec![
            PanelCoef {
                bscale: [0.0; NR],
                boff: [0.0; NR],
            };
            max_pan
        ],
    };
    let kernel = TileKernel::detect();
    let qb_tiles = plan.query_block.div_ceil(MR);
    let mut max_base_norm = 0.0f32;
    for start in (0..base.n()).step_by(plan.block_rows) {
        ctl.check()?;
        let rows = plan.block_rows.min(base.n() - start);
        let norm =
            pack(base, start, rows, metric, &mut packed).map_err(|row| ExactError::NonFinite {
                input: Input::Base,
                row,
            })?;
        max_base_norm = max_base_norm.max(norm);
        let cx = BlockCtx {
            base,
            queries,
            qidx,
            metric,
            tiles: &tiles,
            packed: &packed,
            start,
            npan: rows.div_ceil(NR),
            kernel,
        };
        heaps
            .par_chunks_mut(qb_tiles * MR)
            .enumerate()
            .for_each(|(b, hs)| process_block(&cx, b * qb_tiles, hs));
        bar.inc(1);
    }
    Ok(FastPass {
        heaps,
        max_base_norm,
    })
}

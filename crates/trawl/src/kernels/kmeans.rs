//! k-means clustering (k-means++ initialisation, Lloyd iterations), used by product
//! quantisation, the memory-budget graph build, the sharded index and the IVF index; and the
//! balanced, capacity-bounded assignment of points to clusters those three share
//! ([`assign_balanced`]).
//!
//! - **Sampling**: at most [`KMeansParams::max_sample`] points, a seeded uniform sample.
//! - **Initialisation**: k-means++ (D² sampling, seeded) on a sample of at most 64 points per
//!   cluster; the distance updates run in parallel.
//! - **Lloyd iterations**: parallel assignment, then a reduction over fixed chunks of points
//!   summed in chunk order, so a given seed gives bit-identical centroids whatever the number of
//!   threads. Stops early once no assignment changes.
//! - **Empty clusters**: an empty cluster takes the point of the largest cluster that lies
//!   farthest from its centroid (splitting the largest cluster).
//!
//! Assignment uses a centroid table stored transposed (dimension-major), so that one point is
//! compared against a block of centroids with element-wise vector operations: `Σⱼ (xⱼ − cⱼ)²`
//! is accumulated for a whole block of centroids at once. This is exact (no `‖x‖² + ‖c‖² − 2x·c`
//! cancellation), independent of the SIMD width, and fast for both small subspace dimensions
//! (PQ) and large `k`.

use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::progress::{Cancelled, Control};

/// Parameters of [`train`].
#[derive(Debug, Clone)]
pub struct KMeansParams {
    /// Number of clusters.
    pub k: usize,
    /// Maximum Lloyd iterations.
    pub max_iters: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Train on at most this many points (a seeded uniform sample).
    pub max_sample: usize,
}

impl Default for KMeansParams {
    fn default() -> Self {
        Self {
            k: 256,
            max_iters: 12,
            seed: 0,
            max_sample: 256 * 1024,
        }
    }
}

/// Trained centroids, row-major `k × dim`.
#[derive(Debug, Clone)]
pub struct KMeans {
    /// Row-major centroids.
    pub centroids: Vec<f32>,
    /// Dimension of each centroid.
    pub dim: usize,
    /// Number of centroids.
    pub k: usize,
}

/// Why k-means could not run.
#[derive(Debug, thiserror::Error)]
pub enum KMeansError {
    /// Fewer points than clusters, `dim == 0` or `k == 0`, a length not a multiple of `dim`, or
    /// a non-finite value. Fix the input or lower `k`.
    #[error("invalid k-means input: {0}")]
    InvalidInput(String),
    /// Cancelled through [`Control`]; nothing was produced.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl KMeansError {
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) or
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::InvalidInput(_) => crate::ErrorKind::InvalidInput,
            Self::Cancelled(_) => crate::ErrorKind::Cancelled,
        }
    }
}

/// Points per reduction chunk at least; the chunking depends only on `n`, never on threads.
const MIN_CHUNK: usize = 2048;
/// k-means++ seeds from a sample of at most this many points per cluster: D² sampling costs
/// `k` passes over its input, and Lloyd iterations on the full sample follow anyway.
const INIT_POINTS_PER_CLUSTER: usize = 64;
/// Centroids compared per block in [`TransposedCentroids::nearest`].
const BLOCK: usize = 256;

/// Clusters the row-major `data` (`data.len() / dim` points) into `params.k` centroids.
pub fn train(
    data: &[f32],
    dim: usize,
    params: &KMeansParams,
    ctl: &Control,
) -> Result<KMeans, KMeansError> {
    train_with(data, dim, params, ctl, ctl.shows_progress())
}

/// [`train`] with the progress bars switched off when `bars` is false (for callers that draw
/// their own bar around many small runs).
pub(crate) fn train_with(
    data: &[f32],
    dim: usize,
    params: &KMeansParams,
    ctl: &Control,
    bars: bool,
) -> Result<KMeans, KMeansError> {
    validate(data, dim, params)?;
    let n = data.len() / dim;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let sampled;
    let points: &[f32] = if n > params.max_sample.max(params.k) {
        sampled = sample_rows(data, dim, params.max_sample.max(params.k), &mut rng);
        &sampled
    } else {
        data
    };
    let quiet = Control::silent();
    let bar_ctl = if bars { ctl } else { &quiet };
    let init_n = (INIT_POINTS_PER_CLUSTER * params.k).min(points.len() / dim);
    let init_sample;
    let init_points: &[f32] = if init_n < points.len() / dim {
        init_sample = sample_rows(points, dim, init_n, &mut rng);
        &init_sample
    } else {
        points
    };
    let mut km = plus_plus(init_points, dim, params.k, &mut rng, ctl, bar_ctl)?;
    lloyd(&mut km, points, params.max_iters, ctl, bar_ctl)?;
    Ok(km)
}

/// Up to `iters` Lloyd iterations from `km`'s centroids (a warm start: no seeding, no bars).
/// `points` must have `km.dim` columns and be finite (not checked).
pub(crate) fn refine(
    km: &mut KMeans,
    points: &[f32],
    iters: usize,
    ctl: &Control,
) -> Result<(), KMeansError> {
    lloyd(km, points, iters, ctl, &Control::silent())
}

/// `count` rows of `data` drawn uniformly without replacement, kept in index order.
fn sample_rows(data: &[f32], dim: usize, count: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    let mut idx = sample(rng, data.len() / dim, count).into_vec();
    idx.sort_unstable();
    let mut s = Vec::with_capacity(idx.len() * dim);
    for i in idx {
        s.extend_from_slice(&data[i * dim..(i + 1) * dim]);
    }
    s
}

fn validate(data: &[f32], dim: usize, params: &KMeansParams) -> Result<(), KMeansError> {
    if dim == 0 || !data.len().is_multiple_of(dim) || params.k == 0 {
        return Err(KMeansError::InvalidInput(format!(
            "dim {dim}, {} values, k {}",
            data.len(),
            params.k
        )));
    }
    let n = data.len() / dim;
    if n < params.k {
        return Err(KMeansError::InvalidInput(format!(
            "{n} points for k = {}",
            params.k
        )));
    }
    if let Some(pos) = data.iter().position(|v| !v.is_finite()) {
        return Err(KMeansError::InvalidInput(format!(
            "non-finite value in point {}",
            pos / dim
        )));
    }
    Ok(())
}

/// Fixed reduction chunk size for `n` points (a function of `n` only).
fn chunk_len(n: usize) -> usize {
    MIN_CHUNK.max(n.div_ceil(64))
}

/// Squared L2 distance; an inlined loop for the tiny dimensions of PQ subspaces, the dispatched
/// SIMD kernel otherwise.
#[inline]
fn l2(a: &[f32], b: &[f32]) -> f32 {
    if a.len() < 16 {
        a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
    } else {
        <f32 as crate::kernels::Element>::l2_sq(a, b)
    }
}

/// k-means++: the first centre uniform, each next one drawn with probability ∝ D².
fn plus_plus(
    points: &[f32],
    dim: usize,
    k: usize,
    rng: &mut ChaCha8Rng,
    ctl: &Control,
    bar_ctl: &Control,
) -> Result<KMeans, KMeansError> {
    let n = points.len() / dim;
    let chunk = chunk_len(n);
    let bar = bar_ctl.bar("k-means++", k as u64);
    let mut centroids = Vec::with_capacity(k * dim);
    let mut chosen = vec![false; n];
    let first = rng.gen_range(0..n);
    chosen[first] = true;
    centroids.extend_from_slice(&points[first * dim..(first + 1) * dim]);
    let mut min_d = vec![f32::INFINITY; n];
    let mut chunk_sums = vec![0f64; n.div_ceil(chunk)];
    for c in 1..k {
        if c % 16 == 0 {
            ctl.check()?;
        }
        let last = &centroids[(c - 1) * dim..c * dim];
        min_d
            .par_chunks_mut(chunk)
            .zip(points.par_chunks(chunk * dim))
            .zip(chunk_sums.par_iter_mut())
            .for_each(|((ds, xs), sum)| {
                let mut s = 0f64;
                for (d, x) in ds.iter_mut().zip(xs.chunks_exact(dim)) {
                    *d = d.min(l2(x, last));
                    s += f64::from(*d);
                }
                *sum = s;
            });
        let next = draw_d2(&min_d, &chunk_sums, chunk, &chosen, rng);
        chosen[next] = true;
        centroids.extend_from_slice(&points[next * dim..(next + 1) * dim]);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(KMeans { centroids, dim, k })
}

/// Draws an index with probability ∝ `weights`; uniform over unchosen points when all are zero
/// (more clusters than distinct points).
fn draw_d2(
    weights: &[f32],
    chunk_sums: &[f64],
    chunk: usize,
    chosen: &[bool],
    rng: &mut ChaCha8Rng,
) -> usize {
    let total: f64 = chunk_sums.iter().sum();
    if total > 0.0 {
        let mut target = rng.gen::<f64>() * total;
        for (ci, &s) in chunk_sums.iter().enumerate() {
            if target < s || ci + 1 == chunk_sums.len() {
                let start = ci * chunk;
                let end = (start + chunk).min(weights.len());
                let mut last_positive = None;
                for (i, &w) in weights[start..end].iter().enumerate() {
                    if w > 0.0 {
                        last_positive = Some(start + i);
                        target -= f64::from(w);
                        if target < 0.0 {
                            return start + i;
                        }
                    }
                }
                if let Some(i) = last_positive {
                    return i;
                }
            } else {
                target -= s;
            }
        }
    }
    let free: Vec<usize> = (0..chosen.len()).filter(|&i| !chosen[i]).collect();
    if free.is_empty() {
        rng.gen_range(0..chosen.len())
    } else {
        free[rng.gen_range(0..free.len())]
    }
}

/// Per-chunk partial sums of one Lloyd step.
struct Partial {
    sums: Vec<f64>,
    counts: Vec<usize>,
    changed: usize,
}

/// Lloyd iterations until `max_iters` or no assignment changes.
fn lloyd(
    km: &mut KMeans,
    points: &[f32],
    max_iters: usize,
    ctl: &Control,
    bar_ctl: &Control,
) -> Result<(), KMeansError> {
    let (dim, k) = (km.dim, km.k);
    let n = points.len() / dim;
    let chunk = chunk_len(n);
    let mut assign = vec![u32::MAX; n];
    let mut dist = vec![0f32; n];
    let bar = bar_ctl.bar("k-means", max_iters as u64);
    for _ in 0..max_iters {
        ctl.check()?;
        let table = TransposedCentroids::new(km);
        let partials: Vec<Partial> = assign
            .par_chunks_mut(chunk)
            .zip(dist.par_chunks_mut(chunk))
            .zip(points.par_chunks(chunk * dim))
            .map(|((a, d), xs)| assign_chunk(&table, xs, a, d))
            .collect();
        let mut sums = vec![0f64; k * dim];
        let mut counts = vec![0usize; k];
        let mut changed = 0;
        for p in &partials {
            for (s, v) in sums.iter_mut().zip(&p.sums) {
                *s += v;
            }
            for (c, v) in counts.iter_mut().zip(&p.counts) {
                *c += v;
            }
            changed += p.changed;
        }
        for c in 0..k {
            if counts[c] > 0 {
                let inv = 1.0 / counts[c] as f64;
                for j in 0..dim {
                    km.centroids[c * dim + j] = (sums[c * dim + j] * inv) as f32;
                }
            }
        }
        fix_empty(km, points, &mut assign, &mut dist, &mut counts);
        bar.inc(1);
        if changed == 0 {
            break;
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Assigns one chunk of points and returns its partial sums.
fn assign_chunk(
    table: &TransposedCentroids,
    xs: &[f32],
    assign: &mut [u32],
    dist: &mut [f32],
) -> Partial {
    let (dim, k) = (table.dim, table.k);
    let mut p = Partial {
        sums: vec![0f64; k * dim],
        counts: vec![0; k],
        changed: 0,
    };
    for ((x, a), d) in xs.chunks_exact(dim).zip(assign.iter_mut()).zip(dist) {
        let (c, dd) = table.nearest(x);
        if *a != c as u32 {
            p.changed += 1;
            *a = c as u32;
        }
        *d = dd;
        p.counts[c] += 1;
        for (s, v) in p.sums[c * dim..(c + 1) * dim].iter_mut().zip(x) {
            *s += f64::from(*v);
        }
    }
    p
}

/// Gives every empty cluster the point of the currently largest cluster farthest from its
/// centroid. Deterministic: clusters and points are scanned in index order.
fn fix_empty(
    km: &mut KMeans,
    points: &[f32],
    assign: &mut [u32],
    dist: &mut [f32],
    counts: &mut [usize],
) {
    let dim = km.dim;
    for e in 0..km.k {
        if counts[e] != 0 {
            continue;
        }
        let big = (0..km.k).max_by_key(|&c| (counts[c], usize::MAX - c));
        let Some(big) = big.filter(|&c| counts[c] > 1) else {
            return;
        };
        let far = (0..assign.len())
            .filter(|&i| assign[i] == big as u32)
            .max_by(|&i, &j| dist[i].total_cmp(&dist[j]).then(j.cmp(&i)));
        let Some(far) = far else { return };
        km.centroids[e * dim..(e + 1) * dim].copy_from_slice(&points[far * dim..(far + 1) * dim]);
        assign[far] = e as u32;
        dist[far] = 0.0;
        counts[big] -= 1;
        counts[e] = 1;
    }
}

/// Centroids stored dimension-major (`dim × k`) for block-wise nearest-centroid search.
#[derive(Debug, Clone)]
pub(crate) struct TransposedCentroids {
    /// `t[j * k + c]` is coordinate `j` of centroid `c`.
    t: Vec<f32>,
    dim: usize,
    k: usize,
}

impl TransposedCentroids {
    /// Transposes the centroids of `km`.
    pub(crate) fn new(km: &KMeans) -> Self {
        Self::from_rows(&km.centroids, km.dim, km.k)
    }

    /// Transposes row-major `k × dim` centroids.
    pub(crate) fn from_rows(rows: &[f32], dim: usize, k: usize) -> Self {
        debug_assert_eq!(rows.len(), dim * k);
        let mut t = vec![0f32; dim * k];
        for (c, row) in rows.chunks_exact(dim).enumerate() {
            for (j, v) in row.iter().enumerate() {
                t[j * k + c] = *v;
            }
        }
        Self { t, dim, k }
    }

    /// Index and squared L2 distance of the centroid nearest to `x` (first one on ties).
    #[inline]
    pub(crate) fn nearest(&self, x: &[f32]) -> (usize, f32) {
        debug_assert_eq!(x.len(), self.dim);
        let mut best = (0usize, f32::INFINITY);
        let mut start = 0;
        while start < self.k {
            let len = BLOCK.min(self.k - start);
            let (i, d) = block_nearest(&self.t, self.k, start, len, x);
            if d < best.1 {
                best = (start + i, d);
            }
            start += len;
        }
        best
    }
}

/// Nearest of centroids `start..start + len` of the transposed table `t` (`k` columns): the
/// first index (relative to `start`) of the minimum of `‖x − c‖²`.
#[inline]
fn block_nearest(t: &[f32], k: usize, start: usize, len: usize, x: &[f32]) -> (usize, f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd_level() >= 2 {
            // SAFETY: AVX-512F was detected at run time by `simd_level`.
            return unsafe { block_avx512(t, k, start, len, x) };
        }
        if simd_level() == 1 {
            // SAFETY: AVX2 and FMA were detected at run time by `simd_level`.
            return unsafe { block_avx2(t, k, start, len, x) };
        }
    }
    block_generic(t, k, start, len, x)
}

/// Lanes of the vectorised argmin.
const LANES: usize = 16;
/// Centroids whose distances stay in registers while the dimensions are summed.
const TILE: usize = 64;

/// The portable body. Each distance is summed over the dimensions in order with separate
/// multiply and add, so every instruction set gives the same bits. Whole tiles of [`TILE`]
/// centroids keep their sums in registers and feed a branch-free per-lane argmin (lane `l`
/// tracks the first minimum among indices `≡ l (mod LANES)`); the tail is done one by one.
#[inline(always)]
fn block_generic(t: &[f32], k: usize, start: usize, len: usize, x: &[f32]) -> (usize, f32) {
    let mut bv = [f32::INFINITY; LANES];
    let mut bi = [0u32; LANES];
    let full = len - len % TILE;
    for tile in (0..full).step_by(TILE) {
        let mut acc = [[0f32; LANES]; TILE / LANES];
        for (j, &xj) in x.iter().enumerate() {
            let off = j * k + start + tile;
            let row: &[f32; TILE] = t[off..off + TILE].try_into().expect("TILE values");
            for (g, a) in acc.iter_mut().enumerate() {
                for l in 0..LANES {
                    let d = xj - row[g * LANES + l];
                    a[l] += d * d;
                }
            }
        }
        for (g, a) in acc.iter().enumerate() {
            let base = (tile + g * LANES) as u32;
            for l in 0..LANES {
                let better = a[l] < bv[l];
                bv[l] = if better { a[l] } else { bv[l] };
                bi[l] = if better { base + l as u32 } else { bi[l] };
            }
        }
    }
    let mut best = (0usize, f32::INFINITY);
    for l in 0..LANES {
        let i = bi[l] as usize;
        if bv[l] < best.1 || (bv[l] == best.1 && i < best.0) {
            best = (i, bv[l]);
        }
    }
    for i in full..len {
        let mut d2 = 0f32;
        for (j, &xj) in x.iter().enumerate() {
            let d = xj - t[j * k + start + i];
            d2 += d * d;
        }
        if d2 < best.1 {
            best = (i, d2);
        }
    }
    best
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn block_avx512(t: &[f32], k: usize, start: usize, len: usize, x: &[f32]) -> (usize, f32) {
    block_generic(t, k, start, len, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block_avx2(t: &[f32], k: usize, start: usize, len: usize, x: &[f32]) -> (usize, f32) {
    block_generic(t, k, start, len, x)
}

/// 2 = AVX-512F, 1 = AVX2+FMA, 0 = neither; detected once.
#[cfg(target_arch = "x86_64")]
fn simd_level() -> u8 {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<u8> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        if std::is_x86_feature_detected!("avx512f") {
            2
        } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            1
        } else {
            0
        }
    })
}

impl KMeans {
    /// Index and squared L2 distance of the centroid nearest to `x`.
    pub fn nearest(&self, x: &[f32]) -> (usize, f32) {
        let mut best = (0, f32::INFINITY);
        for (c, cen) in self.centroids.chunks_exact(self.dim).enumerate() {
            let d = l2(x, cen);
            if d < best.1 {
                best = (c, d);
            }
        }
        best
    }

    /// Indices of the `m` centroids nearest to `x`, nearest first (ties by index).
    pub fn nearest_m(&self, x: &[f32], m: usize) -> Vec<usize> {
        let mut all: Vec<(f32, usize)> = self
            .centroids
            .chunks_exact(self.dim)
            .enumerate()
            .map(|(c, cen)| (l2(x, cen), c))
            .collect();
        let m = m.min(all.len());
        let cmp = |a: &(f32, usize), b: &(f32, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if m > 0 && m < all.len() {
            all.select_nth_unstable_by(m - 1, cmp);
            all.truncate(m);
        }
        all.sort_by(cmp);
        all.into_iter().take(m).map(|(_, c)| c).collect()
    }

    /// Nearest centroid of every row of `data` (row-major, `dim` wide), in parallel.
    pub fn assign(&self, data: &[f32]) -> Vec<u32> {
        let table = TransposedCentroids::new(self);
        data.par_chunks(self.dim)
            .map(|x| table.nearest(x).0 as u32)
            .collect()
    }

    /// Sum of squared distances of every row of `data` to its nearest centroid (the k-means
    /// objective), summed in a fixed order.
    pub fn inertia(&self, data: &[f32]) -> f64 {
        let table = TransposedCentroids::new(self);
        let parts: Vec<f64> = data
            .par_chunks(chunk_len(data.len() / self.dim.max(1)) * self.dim)
            .map(|xs| {
                xs.chunks_exact(self.dim)
                    .map(|x| f64::from(table.nearest(x).1))
                    .sum()
            })
            .collect();
        parts.iter().sum()
    }
}

/// A balanced, capacity-bounded assignment of `n` points to parts — the one the IVF index's
/// clustering, the sharded index's partition and the memory-budget graph build share.
///
/// Points are placed in order of how much they lose by not getting their first choice
/// (`loss`, largest first; ties by point id, so the result does not depend on the sort), each
/// taking the first part of its ranked choices (`ranked` fills them, nearest first) that has
/// room (fewer than `cap` points in `sizes`) and that `allowed` accepts; when none does, the
/// first of its full order of preference (`fallback` fills it; left empty when `ranked` already
/// gave every part) that does, else the part `default` names. A placement counts in `sizes`
/// when `allowed` accepts it (a second copy of a point in a part it already holds does not).
/// Returns each point's part.
#[allow(clippy::too_many_arguments)]
pub fn assign_balanced(
    n: usize,
    cap: usize,
    sizes: &mut [usize],
    loss: impl Fn(usize) -> f32 + Sync,
    mut ranked: impl FnMut(usize, &mut Vec<u32>),
    mut fallback: impl FnMut(usize, &mut Vec<u32>),
    allowed: impl Fn(usize, u32) -> bool,
    mut default: impl FnMut(usize) -> u32,
) -> Vec<u32> {
    use rayon::prelude::*;
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.par_sort_unstable_by(|&a, &b| {
        loss(b as usize)
            .total_cmp(&loss(a as usize))
            .then(a.cmp(&b))
    });
    let mut out = vec![u32::MAX; n];
    let mut choices = Vec::new();
    for &p in &order {
        let p = p as usize;
        let fits = |c: u32, sizes: &[usize]| {
            (c as usize) < sizes.len() && sizes[c as usize] < cap && allowed(p, c)
        };
        choices.clear();
        ranked(p, &mut choices);
        let mut pick = choices.iter().copied().find(|&c| fits(c, sizes));
        if pick.is_none() {
            choices.clear();
            fallback(p, &mut choices);
            pick = choices.iter().copied().find(|&c| fits(c, sizes));
        }
        let pick = pick.unwrap_or_else(|| default(p));
        if (pick as usize) < sizes.len() && allowed(p, pick) {
            sizes[pick as usize] += 1;
        }
        out[p] = pick;
    }
    out
}

#[cfg(test)]
mod tests;

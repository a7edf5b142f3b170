//! Optimised product quantisation (OPQ): an orthogonal rotation applied to the (prepared)
//! vectors before they are cut into subspaces.
//!
//! Plain PQ cuts dimensions `0..w`, `w..2w`, … into subspaces as they come; when the variance
//! is spread unevenly, or correlated dimensions land in different subspaces, the codebooks waste
//! centroids. OPQ (Ge et al., non-parametric variant) learns an orthogonal `R` that, with the
//! codebooks, minimises the reconstruction error of `R x`: it alternates (1) codebooks for the
//! rotated sample, (2) the rotation that best maps the sample onto its reconstructions — the
//! orthogonal Procrustes problem, solved by the polar factor of `Σ yᵢ xᵢᵀ`.
//!
//! A rotation preserves L2 distances and inner products, so every metric's table stays exact
//! in the rotated space: the query is rotated once per query (`dim²` multiply-adds) and the
//! rest of the search is unchanged. The polar factor is computed here without an external
//! linear-algebra library, by one-sided Jacobi (Hestenes) in `f64`.

use rayon::prelude::*;

use crate::kernels::Element;

/// Largest deviation of `R Rᵀ` from the identity a loaded rotation may have (the trained one
/// is orthogonal to `f32` rounding, ~1e-6).
pub(crate) const ORTHO_TOLERANCE: f32 = 1e-3;

/// An orthogonal `dim × dim` matrix `R`, row-major; a vector `x` maps to `R x`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rotation {
    dim: usize,
    rows: Vec<f32>,
}

impl Rotation {
    /// Wraps a row-major `dim × dim` matrix; `None` unless it is finite and orthogonal
    /// (`‖R Rᵀ − I‖_max ≤ 1e-3`).
    pub fn from_rows(dim: usize, rows: Vec<f32>) -> Option<Self> {
        if dim == 0 || rows.len() != dim.checked_mul(dim)? || !rows.iter().all(|v| v.is_finite()) {
            return None;
        }
        let ortho = (0..dim).into_par_iter().all(|i| {
            let ri = &rows[i * dim..(i + 1) * dim];
            rows.chunks_exact(dim).enumerate().all(|(j, rj)| {
                let want = if i == j { 1.0 } else { 0.0 };
                (<f32 as Element>::dot(ri, rj) - want).abs() <= ORTHO_TOLERANCE
            })
        });
        ortho.then_some(Self { dim, rows })
    }

    /// The identity of `dim` dimensions.
    pub fn identity(dim: usize) -> Self {
        let mut rows = vec![0f32; dim * dim];
        for i in 0..dim {
            rows[i * dim + i] = 1.0;
        }
        Self { dim, rows }
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The matrix, row-major.
    pub fn rows(&self) -> &[f32] {
        &self.rows
    }

    /// `out = R x` (`x` and `out` of length `dim`).
    #[inline]
    pub fn apply(&self, x: &[f32], out: &mut [f32]) {
        for (o, row) in out.iter_mut().zip(self.rows.chunks_exact(self.dim)) {
            *o = <f32 as Element>::dot(row, x);
        }
    }

    /// `out = Rᵀ y`, the inverse map (`y` and `out` of length `dim`).
    pub fn apply_transpose(&self, y: &[f32], out: &mut [f32]) {
        out.fill(0.0);
        for (&yi, row) in y.iter().zip(self.rows.chunks_exact(self.dim)) {
            for (o, &r) in out.iter_mut().zip(row) {
                *o += yi * r;
            }
        }
    }

    /// The rotation that best maps `xs` onto `ys` (row-major, `n × dim` each): the orthogonal
    /// `R` minimising `Σ ‖R xᵢ − yᵢ‖²`, i.e. the polar factor of `Σ yᵢ xᵢᵀ`.
    pub(crate) fn procrustes(dim: usize, xs: &[f32], ys: &[f32]) -> Self {
        // Fixed chunks summed in order, so the result never depends on the thread count.
        const CHUNK: usize = 8192;
        let partials: Vec<Vec<f32>> = xs
            .par_chunks(CHUNK * dim)
            .zip(ys.par_chunks(CHUNK * dim))
            .map(|(xc, yc)| {
                // Σ y xᵀ over the chunk: row a of the result gains y[a]·x.
                let mut acc = vec![0f32; dim * dim];
                for (x, y) in xc.chunks_exact(dim).zip(yc.chunks_exact(dim)) {
                    for (row, &ya) in acc.chunks_exact_mut(dim).zip(y) {
                        for (r, &xb) in row.iter_mut().zip(x) {
                            *r += ya * xb;
                        }
                    }
                }
                acc
            })
            .collect();
        let mut cross = vec![0f64; dim * dim];
        for p in &partials {
            cross
                .iter_mut()
                .zip(p)
                .for_each(|(c, &v)| *c += f64::from(v));
        }
        let p = polar(&cross, dim);
        Self {
            dim,
            rows: p.into_iter().map(|v| v as f32).collect(),
        }
    }
}

/// The orthogonal polar factor `U Vᵀ` of the row-major `d × d` matrix `a = U Σ Vᵀ`: the
/// orthogonal matrix nearest to `a` in Frobenius norm. Directions where `a` is (numerically)
/// singular are completed to an orthonormal basis, so the result is always orthogonal.
pub(crate) fn polar(a: &[f64], d: usize) -> Vec<f64> {
    // One-sided Jacobi on the columns of `a`: w[k] is column k (kept as a row, contiguous),
    // v[k] is column k of V. Rotating column pairs until all are orthogonal leaves
    // A V = U Σ, so w[k] = σₖ uₖ.
    let mut w = vec![0f64; d * d];
    for i in 0..d {
        for k in 0..d {
            w[k * d + i] = a[i * d + k];
        }
    }
    let mut v = vec![0f64; d * d];
    for k in 0..d {
        v[k * d + k] = 1.0;
    }
    for _sweep in 0..60 {
        let mut rotated = false;
        for p in 0..d {
            for q in p + 1..d {
                let (wp, wq) = pair(&mut w, d, p, q);
                let alpha = dot(wp, wp);
                let beta = dot(wq, wq);
                let gamma = dot(wp, wq);
                if gamma == 0.0 || gamma.abs() <= 1e-15 * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                rotate(wp, wq, c, s);
                let (vp, vq) = pair(&mut v, d, p, q);
                rotate(vp, vq, c, s);
            }
        }
        if !rotated {
            break;
        }
    }
    // uₖ = w[k] / σₖ; directions with σₖ ≈ 0 have no defined uₖ and are filled in below.
    let sigma: Vec<f64> = w.chunks_exact(d).map(|r| dot(r, r).sqrt()).collect();
    let smax = sigma.iter().copied().fold(0.0, f64::max);
    let mut missing = Vec::new();
    for (k, row) in w.chunks_exact_mut(d).enumerate() {
        if sigma[k] > smax * 1e-10 && sigma[k] > 0.0 {
            row.iter_mut().for_each(|x| *x /= sigma[k]);
        } else {
            missing.push(k);
        }
    }
    // Complete the basis: for each missing direction, the first coordinate axis that keeps
    // enough norm after projecting out every unit vector so far (twice, for rounding).
    let mut unit: Vec<bool> = (0..d).map(|k| !missing.contains(&k)).collect();
    let mut axis = 0;
    for &k in &missing {
        while axis < d {
            let mut cand = vec![0f64; d];
            cand[axis] = 1.0;
            axis += 1;
            for _ in 0..2 {
                for (u, _) in w.chunks_exact(d).zip(&unit).filter(|(_, &ok)| ok) {
                    let c = dot(&cand, u);
                    cand.iter_mut().zip(u).for_each(|(x, &u)| *x -= c * u);
                }
            }
            let n = dot(&cand, &cand).sqrt();
            if n > 0.5 {
                cand.iter_mut().for_each(|x| *x /= n);
                w[k * d..(k + 1) * d].copy_from_slice(&cand);
                unit[k] = true;
                break;
            }
        }
    }
    // U Vᵀ: entry (i, j) = Σₖ uₖ[i] vₖ[j].
    let mut out = vec![0f64; d * d];
    for (u, vk) in w.chunks_exact(d).zip(v.chunks_exact(d)) {
        for (row, &ui) in out.chunks_exact_mut(d).zip(u) {
            row.iter_mut().zip(vk).for_each(|(o, &vj)| *o += ui * vj);
        }
    }
    out
}

/// Rows `p < q` of a row-major `d`-column matrix, both mutable.
fn pair(m: &mut [f64], d: usize, p: usize, q: usize) -> (&mut [f64], &mut [f64]) {
    let (lo, hi) = m.split_at_mut(q * d);
    (&mut lo[p * d..(p + 1) * d], &mut hi[..d])
}

/// `(x, y) ← (c x − s y, s x + c y)`.
fn rotate(x: &mut [f64], y: &mut [f64], c: f64, s: f64) {
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        let (xa, yb) = (*a, *b);
        *a = c * xa - s * yb;
        *b = s * xa + c * yb;
    }
}

/// `⟨x, y⟩` with four independent accumulators (so the loop runs in vector lanes).
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += a[l] * b[l];
        }
    }
    let tail: f64 = xr.iter().zip(yr).map(|(a, b)| a * b).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

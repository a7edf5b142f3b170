//! [`VectorStore`]: the distance oracle of the graph build and search.
//!
//! It borrows the vectors (never copies or normalises them: peak memory is judged) and keeps one
//! `f32` per vector where the metric needs it:
//!
//! | metric | kept per vector | distance between stored points (build) | query distance |
//! |---|---|---|---|
//! | L2 | nothing | `‖a − b‖²` | `‖q − b‖²` |
//! | cosine | `1/‖x‖` (0 for a zero vector) | `1 − ⟨a,b⟩/(‖a‖‖b‖)` | `1 − ⟨q,b⟩/(‖q‖‖b‖)` |
//! | inner product | `‖x‖²` | `2M² − 2⟨a,b⟩ − 2·e(a)·e(b)` | `−⟨q, b⟩` |
//!
//! For cosine the inverse norm is kept so a distance costs one dot product and two
//! multiplications (no square root, no division); a zero vector gets distance 1 to everything,
//! as in [`crate::kernels::cosine_from_parts`].
//!
//! For inner product the build uses the Euclidean distance of the MIPS-to-L2 lift
//! `x ↦ (x, e(x))`, `e(x) = √(M² − ‖x‖²)` with `M` the largest norm, computed from the dot
//! product and the kept norms without materialising the lift. A query lifted to `(q, 0)` ranks
//! base points exactly as `−⟨q, b⟩` does, so the graph built on the lift serves inner-product
//! search with the native distance, and robust prune sees a true metric (negative
//! inner-product "distances" break its occlusion rule).

use crate::kernels::{Element, Metric};

/// Rows prefetched ahead of a batch of distance computations ([`VectorStore::dist_batch`]).
/// Measured on a 400K × 50 f32 build (random rows, 4 cache lines each): 4 ahead leaves the
/// core waiting on memory, 8–12 keeps enough lines in flight; beyond 16 the prefetches stall
/// on the line-fill buffers.
pub const PREFETCH_AHEAD: usize = 8;

/// `1/√s`, or 0 when `s` is not positive.
#[inline]
fn inverse_norm(norm_sq: f32) -> f32 {
    if norm_sq > 0.0 {
        1.0 / norm_sq.sqrt()
    } else {
        0.0
    }
}

/// Borrowed vectors plus the per-vector norms their metric needs.
#[derive(Debug)]
pub struct VectorStore<'a, T: Element> {
    data: &'a [T],
    dim: usize,
    n: usize,
    metric: Metric,
    norms: std::borrow::Cow<'a, [f32]>,
    lift: std::borrow::Cow<'a, [f32]>,
    max_norm_sq: f32,
}

/// A vector prepared for distance computations against a [`VectorStore`].
#[derive(Debug, Clone, Copy)]
pub struct Probe<'q, T: Element> {
    vec: &'q [T],
    /// Cosine: `1/‖x‖`; otherwise unused.
    inv_norm: f32,
    /// `Some(e(x))` for a stored point under inner product (build distance), else `None`.
    lift: Option<f32>,
}

impl<'a, T: Element> VectorStore<'a, T> {
    /// Wraps row-major `data` of `dim`-element vectors. Returns `None` when `dim` is zero or
    /// does not divide the length.
    pub fn new(data: &'a [T], dim: usize, metric: Metric) -> Option<Self> {
        use rayon::prelude::*;
        if dim == 0 || !data.len().is_multiple_of(dim) {
            return None;
        }
        let n = data.len() / dim;
        let norms: Vec<f32> = match metric {
            Metric::L2 => Vec::new(),
            Metric::Cosine => data
                .par_chunks_exact(dim)
                .with_min_len(1024)
                .map(|x| inverse_norm(T::norm_sq(x)))
                .collect(),
            Metric::InnerProduct => data
                .par_chunks_exact(dim)
                .with_min_len(1024)
                .map(T::norm_sq)
                .collect(),
        };
        let (lift, max_norm_sq) = if metric == Metric::InnerProduct {
            let m = norms.iter().copied().fold(0f32, f32::max);
            (norms.iter().map(|&s| (m - s).max(0.0).sqrt()).collect(), m)
        } else {
            (Vec::new(), 0.0)
        };
        Some(Self {
            data,
            dim,
            n,
            metric,
            norms: norms.into(),
            lift: lift.into(),
            max_norm_sq,
        })
    }

    /// Wraps row-major `data` with norms kept by the caller ([`VectorStore::row_norm`] of
    /// every row; for inner product also the lifts `sqrt(max_norm_sq − norm)` and the largest
    /// squared norm), so a store over a growing set of vectors costs nothing to make. Returns
    /// `None` when the shapes disagree.
    pub fn from_parts(
        data: &'a [T],
        dim: usize,
        metric: Metric,
        norms: &'a [f32],
        lift: &'a [f32],
        max_norm_sq: f32,
    ) -> Option<Self> {
        if dim == 0 || !data.len().is_multiple_of(dim) {
            return None;
        }
        let n = data.len() / dim;
        let want = |v: &[f32], on: bool| if on { v.len() == n } else { v.is_empty() };
        if !want(norms, metric != Metric::L2) || !want(lift, metric == Metric::InnerProduct) {
            return None;
        }
        Some(Self {
            data,
            dim,
            n,
            metric,
            norms: norms.into(),
            lift: lift.into(),
            max_norm_sq,
        })
    }

    /// The norm value [`VectorStore::new`] keeps for a row under `metric`: `1/‖x‖` for
    /// cosine, `‖x‖²` for inner product (unused for L2).
    pub fn row_norm(metric: Metric, row: &[T]) -> f32 {
        match metric {
            Metric::Cosine => inverse_norm(T::norm_sq(row)),
            _ => T::norm_sq(row),
        }
    }

    /// Wraps a matrix.
    pub fn from_matrix(m: &'a crate::data::Matrix<T>, metric: Metric) -> Self {
        // A matrix always has a non-zero dimension that divides its length.
        Self::new(m.as_slice(), m.dim(), metric).expect("matrix shape is valid")
    }

    /// Number of vectors.
    #[inline]
    pub fn n(&self) -> usize {
        self.n
    }

    /// Elements per vector.
    #[inline]
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The metric.
    #[inline]
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Vector `i` (panics when `i >= n`: an internal invariant).
    #[inline]
    pub fn row(&self, i: usize) -> &'a [T] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Bytes this store allocated (the norms), not counting the borrowed vectors.
    pub fn heap_bytes(&self) -> usize {
        match (&self.norms, &self.lift) {
            (std::borrow::Cow::Owned(a), std::borrow::Cow::Owned(b)) => {
                (a.capacity() + b.capacity()) * 4
            }
            _ => (self.norms.len() + self.lift.len()) * 4,
        }
    }

    /// Stored point `i` as a probe for build distances.
    #[inline]
    pub fn point(&self, i: u32) -> Probe<'a, T> {
        let i = i as usize;
        Probe {
            vec: self.row(i),
            inv_norm: match self.metric {
                Metric::Cosine => self.norms[i],
                _ => 0.0,
            },
            lift: self.lift.get(i).copied(),
        }
    }

    /// An external query (its length must be `dim`, checked by the caller) as a probe for
    /// native distances.
    #[inline]
    pub fn query<'q>(&self, q: &'q [T]) -> Probe<'q, T> {
        let inv_norm = match self.metric {
            Metric::Cosine => inverse_norm(T::norm_sq(q)),
            _ => 0.0,
        };
        Probe {
            vec: q,
            inv_norm,
            lift: None,
        }
    }

    /// Distance from `p` to stored point `j` (see the module table).
    #[inline]
    pub fn dist(&self, p: &Probe<'_, T>, j: u32) -> f32 {
        let j = j as usize;
        let b = self.row(j);
        match self.metric {
            Metric::L2 => T::l2_sq(p.vec, b),
            Metric::Cosine => 1.0 - T::dot(p.vec, b) * p.inv_norm * self.norms[j],
            Metric::InnerProduct => {
                let dot = T::dot(p.vec, b);
                match p.lift {
                    Some(e) => {
                        (2.0 * self.max_norm_sq - 2.0 * dot - 2.0 * e * self.lift[j]).max(0.0)
                    }
                    None => -dot,
                }
            }
        }
    }

    /// Distances from `p` to every stored point of `ids`, written to `out` (replacing its
    /// contents), with the rows prefetched [`PREFETCH_AHEAD`] ahead of the computation.
    #[inline]
    pub fn dist_batch(&self, p: &Probe<'_, T>, ids: &[u32], out: &mut Vec<f32>) {
        out.clear();
        for &id in ids.iter().take(PREFETCH_AHEAD) {
            self.prefetch(id);
        }
        for (m, &id) in ids.iter().enumerate() {
            if let Some(&next) = ids.get(m + PREFETCH_AHEAD) {
                self.prefetch(next);
            }
            out.push(self.dist(p, id));
        }
    }

    /// The per-vector value the build distance combines with a raw kernel result (see
    /// [`Self::pair_from_raw`]): `1/‖x‖` for cosine, the lift `e(x)` for inner product, 0 for L2.
    #[inline]
    pub fn pair_aux(&self, i: u32) -> f32 {
        match self.metric {
            Metric::L2 => 0.0,
            Metric::Cosine => self.norms[i as usize],
            Metric::InnerProduct => self.lift[i as usize],
        }
    }

    /// Whether the build distance starts from a squared L2 (`true`) or an inner product.
    #[inline]
    pub fn pair_is_l2(&self) -> bool {
        self.metric == Metric::L2
    }

    /// The build distance between two stored points from the raw kernel result `raw` (squared
    /// L2 or inner product, see [`Self::pair_is_l2`]) and their [`Self::pair_aux`] values; the
    /// same formula as [`Self::dist_points`].
    #[inline]
    pub fn pair_from_raw(&self, raw: f32, aux_a: f32, aux_b: f32) -> f32 {
        match self.metric {
            Metric::L2 => raw,
            Metric::Cosine => 1.0 - raw * aux_a * aux_b,
            Metric::InnerProduct => {
                (2.0 * self.max_norm_sq - 2.0 * raw - 2.0 * aux_a * aux_b).max(0.0)
            }
        }
    }

    /// Build distance between stored points `i` and `j`.
    #[inline]
    pub fn dist_points(&self, i: u32, j: u32) -> f32 {
        self.dist(&self.point(i), j)
    }

    /// Hints the CPU to start loading vector `j` (no effect on other architectures).
    #[inline]
    pub fn prefetch(&self, j: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let start = j as usize * self.dim;
            if start + self.dim > self.data.len() {
                return;
            }
            let bytes = self.dim * std::mem::size_of::<T>();
            let base = self.data[start..].as_ptr().cast::<i8>();
            let mut off = 0;
            while off < bytes.min(512) {
                // SAFETY: prefetch never faults; `base + off` stays inside row `j` (off < bytes).
                unsafe { _mm_prefetch(base.wrapping_add(off), _MM_HINT_T0) };
                off += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::distance;

    fn data() -> Vec<f32> {
        (0..40).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3).collect()
    }

    #[test]
    fn native_query_distances() {
        let d = data();
        for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
            let s = VectorStore::new(&d, 4, metric).unwrap();
            let q = [0.5f32, -1.0, 2.0, 0.25];
            for j in 0..10u32 {
                let want = distance(metric, &q, s.row(j as usize));
                let got = s.dist(&s.query(&q), j);
                assert!((want - got).abs() < 1e-5, "{metric} {j}: {want} vs {got}");
            }
        }
    }

    #[test]
    fn ip_build_distance_is_lifted_l2() {
        let d = data();
        let s = VectorStore::new(&d, 4, Metric::InnerProduct).unwrap();
        let lift = |i: usize| {
            let mut v: Vec<f32> = s.row(i).to_vec();
            v.push(s.lift[i]);
            v
        };
        for i in 0..10u32 {
            for j in 0..10u32 {
                let want = crate::kernels::scalar::l2_f32(&lift(i as usize), &lift(j as usize));
                assert!((s.dist_points(i, j) - want).abs() < 1e-4);
            }
        }
        assert!(VectorStore::new(&d, 3, Metric::L2).is_none());
    }
}

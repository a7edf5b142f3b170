//! Seeded synthetic data (`trawl gen`): an anisotropic Gaussian mixture with a low intrinsic
//! dimension, and held-out queries drawn from the same mixture.
//!
//! The model, drawn once from `seed`:
//!
//! - a global per-dimension scale `g_j = (1 + π(j))^(−dim_decay)` for a random permutation `π`,
//!   so a few dimensions carry most of the variance, as in real embeddings;
//! - `clusters` components with Zipf-like weights `w_c ∝ (c + 1)^(−zipf)`;
//! - per component a centre `μ_c = centre_spread · N(0, 1) ⊙ g` and `latent_dim` random sparse
//!   directions `b_{c,l}` (Gaussian entries kept with probability `density`, times `g`, unit
//!   norm) with power-law scales `λ_l = (1 + l)^(−spectrum_decay)`, jittered per component.
//!
//! A point of component `c` is `μ_c + Σ_l z_l λ_l b_{c,l} + noise · N(0, 1) ⊙ g` with
//! `z ~ N(0, I)`: each cluster is a thin, randomly oriented ellipsoid, so the data has a low
//! intrinsic dimension and a relative contrast like real embeddings (see [`relative_contrast`]).
//!
//! **Integer types.** u8 and i8 data use one affine map for all values: the 0.1 % and 99.9 %
//! quantiles `lo`, `hi` of a fixed pilot sample are mapped to the ends of the type's range,
//! `t = (x − lo) / (hi − lo)`, u8: `round(255 t)`, i8: `round(255 t) − 128`, clamped to the
//! range.
//!
//! **Determinism.** Rows are generated in blocks of [`BLOCK_ROWS`]; block `b` of the base set
//! uses ChaCha8 seeded with `seed` on stream `2⁴⁰ + b` (queries: `2⁴¹ + b`), so the output is
//! identical for a given seed whatever the number of threads.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use crate::data::{DataError, Format, Matrix, VectorFileInfo, VectorWriter};
use crate::kernels::{DType, Element};
use crate::progress::{Cancelled, Control};

/// Rows per independently seeded block.
pub const BLOCK_ROWS: usize = 1024;
const STREAM_MODEL: u64 = 0;
const STREAM_PILOT: u64 = 1;
const STREAM_BASE: u64 = 1 << 40;
const STREAM_QUERY: u64 = 1 << 41;

/// What to generate. [`SynthParams::new`] fills the shape knobs with defaults that give data
/// with a relative contrast like real embeddings.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthParams {
    /// Base vectors.
    pub n: usize,
    /// Held-out queries.
    pub nq: usize,
    /// Dimension.
    pub dim: usize,
    /// Element type.
    pub dtype: DType,
    /// Mixture components (default 64).
    pub clusters: usize,
    /// Seed of everything.
    pub seed: u64,
    /// Latent directions per component (default `min(dim, 24)`).
    pub latent_dim: usize,
    /// Power-law exponent of the latent scales (default 0.7).
    pub spectrum_decay: f32,
    /// Power-law exponent of the per-dimension scales (default 0.25).
    pub dim_decay: f32,
    /// Fraction of non-zero entries in each latent direction (default 0.3).
    pub density: f32,
    /// Scale of the component centres relative to the leading latent scale (default 1.0).
    pub centre_spread: f32,
    /// Isotropic noise relative to the leading latent scale (default 0.05).
    pub noise: f32,
    /// Zipf exponent of the component weights (default 0.8).
    pub zipf: f32,
}

impl SynthParams {
    /// `n` base and `nq` query vectors of `dim` `dtype` elements, with default shape knobs.
    pub fn new(n: usize, nq: usize, dim: usize, dtype: DType, seed: u64) -> Self {
        Self {
            n,
            nq,
            dim,
            dtype,
            clusters: 64,
            seed,
            latent_dim: dim.min(24),
            spectrum_decay: 0.7,
            dim_decay: 0.25,
            density: 0.3,
            centre_spread: 1.0,
            noise: 0.05,
            zipf: 0.8,
        }
    }

    fn check(&self) -> Result<(), SynthError> {
        let bad = |m: &str| Err(SynthError::InvalidParams(m.to_string()));
        if self.dim == 0 || self.dim > i32::MAX as usize {
            return bad("dim must be between 1 and 2³¹−1");
        }
        if self.clusters == 0 || self.latent_dim == 0 {
            return bad("clusters and latent_dim must be positive");
        }
        let model = self.clusters.checked_mul(self.latent_dim + 1);
        if model
            .and_then(|m| m.checked_mul(self.dim))
            .is_none_or(|m| m > 1 << 28)
        {
            return bad("clusters × (latent_dim + 1) × dim exceeds 2²⁸ model parameters");
        }
        if self.n.checked_mul(self.dim).is_none() || self.nq.checked_mul(self.dim).is_none() {
            return bad("n × dim overflows");
        }
        let knobs = [
            self.spectrum_decay,
            self.dim_decay,
            self.centre_spread,
            self.noise,
            self.zipf,
        ];
        if knobs.iter().any(|k| !k.is_finite() || *k < 0.0) {
            return bad("shape knobs must be finite and non-negative");
        }
        if !(self.density > 0.0 && self.density <= 1.0) {
            return bad("density must be in (0, 1]");
        }
        Ok(())
    }
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The parameters are out of range; fix them.
    #[error("invalid synthetic-data parameters: {0}")]
    InvalidParams(String),
    /// Writing the output failed (disk full, permissions); see the inner error.
    #[error(transparent)]
    Data(#[from] DataError),
    /// Cancelled through the [`Control`].
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl SynthError {
    /// Bad parameters are [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput); a
    /// write's failure keeps its own kind.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::InvalidParams(_) => crate::ErrorKind::InvalidInput,
            Self::Data(e) => e.kind(),
            Self::Cancelled(_) => crate::ErrorKind::Cancelled,
        }
    }
}

/// The drawn mixture.
#[derive(Debug)]
struct Mixture {
    dim: usize,
    latent: usize,
    /// Cumulative component weights, last = 1.
    cdf: Vec<f32>,
    /// `clusters × dim` centres.
    centres: Vec<f32>,
    /// `clusters × latent × dim` scaled latent directions.
    basis: Vec<f32>,
    /// Per-dimension noise standard deviation.
    noise: Vec<f32>,
    /// Affine map `x · a + b` to the integer range (identity for f32).
    affine: (f32, f32),
}

impl Mixture {
    fn new(p: &SynthParams) -> Self {
        let mut rng = block_rng(p.seed, STREAM_MODEL);
        let (dim, latent) = (p.dim, p.latent_dim);
        let mut perm: Vec<usize> = (0..dim).collect();
        for i in (1..dim).rev() {
            perm.swap(i, rng.gen_range(0..=i));
        }
        let g: Vec<f32> = perm
            .iter()
            .map(|&r| (1.0 + r as f32).powf(-p.dim_decay))
            .collect();
        let weights: Vec<f32> = (0..p.clusters)
            .map(|c| (1.0 + c as f32).powf(-p.zipf))
            .collect();
        let total: f32 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<f32> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        // Scale so that the data has O(1) values whatever the dimension.
        let unit = 1.0 / (g.iter().map(|x| x * x).sum::<f32>() / dim as f32).sqrt();
        let mut centres = Vec::with_capacity(p.clusters * dim);
        let mut basis = Vec::with_capacity(p.clusters * latent * dim);
        for _ in 0..p.clusters {
            centres.extend(
                g.iter()
                    .map(|gj| p.centre_spread * gj * unit * normal(&mut rng)),
            );
            for l in 0..latent {
                let jitter = rng.gen_range(0.5f32..1.5);
                let scale = (1.0 + l as f32).powf(-p.spectrum_decay) * jitter;
                let mut dir: Vec<f32> = g
                    .iter()
                    .map(|gj| {
                        let keep = rng.gen::<f32>() < p.density;
                        if keep {
                            gj * normal(&mut rng)
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let norm = dir.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                let k = scale * (dim as f32).sqrt() / norm;
                dir.iter_mut().for_each(|x| *x *= k);
                basis.extend(dir);
            }
        }
        let noise = g.iter().map(|gj| p.noise * gj * unit).collect();
        let mut m = Mixture {
            dim,
            latent,
            cdf,
            centres,
            basis,
            noise,
            affine: (1.0, 0.0),
        };
        if p.dtype != DType::F32 {
            m.affine = m.pilot_affine(p.seed);
        }
        m
    }

    /// The affine map of the module docs, from 4096 pilot rows.
    fn pilot_affine(&self, seed: u64) -> (f32, f32) {
        let mut rng = block_rng(seed, STREAM_PILOT);
        let mut vals = vec![0f32; 4096 * self.dim];
        for row in vals.chunks_exact_mut(self.dim) {
            self.sample(&mut rng, row);
        }
        vals.sort_unstable_by(f32::total_cmp);
        let at = |q: f64| vals[((vals.len() - 1) as f64 * q) as usize];
        let (lo, hi) = (at(0.001), at(0.999));
        let a = 255.0 / (hi - lo).max(1e-12);
        (a, -lo * a)
    }

    /// One f32 row.
    fn sample(&self, rng: &mut ChaCha8Rng, out: &mut [f32]) {
        let u: f32 = rng.gen();
        let c = self.cdf.partition_point(|&x| x < u).min(self.cdf.len() - 1);
        let d = self.dim;
        for ((o, n), m) in out.iter_mut().zip(&self.noise).zip(&self.centres[c * d..]) {
            *o = m + n * normal(rng);
        }
        let base = c * self.latent * d;
        for dir in self.basis[base..base + self.latent * d].chunks_exact(d) {
            let z = normal(rng);
            for (o, b) in out.iter_mut().zip(dir) {
                *o += z * b;
            }
        }
    }

    /// Fills `out` (whole rows of block `block` on `stream`) with rows of type `T`.
    fn fill<T: Element>(&self, seed: u64, stream: u64, out: &mut [T]) {
        let mut rng = block_rng(seed, stream);
        let d = self.dim;
        match T::DTYPE {
            DType::F32 => {
                for row in bytemuck::cast_slice_mut::<T, f32>(out).chunks_exact_mut(d) {
                    self.sample(&mut rng, row);
                }
            }
            DType::U8 | DType::I8 => {
                let shift = if T::DTYPE == DType::I8 { 128.0 } else { 0.0 };
                let (a, b) = self.affine;
                let mut tmp = vec![0f32; d];
                for row in bytemuck::cast_slice_mut::<T, u8>(out).chunks_exact_mut(d) {
                    self.sample(&mut rng, &mut tmp);
                    for (o, x) in row.iter_mut().zip(&tmp) {
                        let v = ((x * a + b).round().clamp(0.0, 255.0) - shift) as i32;
                        *o = v as u8; // two's complement: i8 values reinterpret exactly
                    }
                }
            }
        }
    }
}

fn block_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

#[inline]
fn normal(rng: &mut ChaCha8Rng) -> f32 {
    StandardNormal.sample(rng)
}

/// Generates `params.n` base and `params.nq` query vectors in memory (in parallel, identical
/// for every thread count). `T` must be `params.dtype`.
pub fn generate<T: Element>(params: &SynthParams) -> Result<(Matrix<T>, Matrix<T>), SynthError> {
    params.check()?;
    if T::DTYPE != params.dtype {
        return Err(SynthError::InvalidParams(format!(
            "dtype is {} but {} was requested",
            params.dtype,
            T::DTYPE
        )));
    }
    let model = Mixture::new(params);
    let make = |rows: usize, stream: u64| {
        let mut data = vec![T::default(); rows * params.dim];
        data.par_chunks_mut(BLOCK_ROWS * params.dim)
            .enumerate()
            .for_each(|(b, chunk)| model.fill(params.seed, stream + b as u64, chunk));
        Matrix::from_vec(data, params.dim).unwrap_or_else(|| unreachable!("dim ≥ 1"))
    };
    Ok((make(params.n, STREAM_BASE), make(params.nq, STREAM_QUERY)))
}

/// Streams the base set to `base_path` and the queries (when `query_path` is given and
/// `nq > 0`) to `query_path`, in `format`, in parallel batches of blocks with bounded memory.
/// The bytes are identical to [`generate`]'s output for the same parameters.
pub fn generate_to_file(
    params: &SynthParams,
    base_path: &Path,
    query_path: Option<&Path>,
    format: Format,
    ctl: &Control,
) -> Result<(VectorFileInfo, Option<VectorFileInfo>), SynthError> {
    params.check()?;
    let model = Mixture::new(params);
    let go = |path: &Path, rows: usize, stream: u64, phase: &str| match params.dtype {
        DType::F32 => stream_file::<f32>(&model, params, path, rows, stream, format, ctl, phase),
        DType::U8 => stream_file::<u8>(&model, params, path, rows, stream, format, ctl, phase),
        DType::I8 => stream_file::<i8>(&model, params, path, rows, stream, format, ctl, phase),
    };
    let base = go(base_path, params.n, STREAM_BASE, "gen base")?;
    let queries = match query_path {
        Some(q) if params.nq > 0 => Some(go(q, params.nq, STREAM_QUERY, "gen queries")?),
        _ => None,
    };
    Ok((base, queries))
}

fn stream_file<T: Element>(
    model: &Mixture,
    p: &SynthParams,
    path: &Path,
    rows: usize,
    stream: u64,
    format: Format,
    ctl: &Control,
    phase: &str,
) -> Result<VectorFileInfo, SynthError> {
    let mut w = VectorWriter::create(path, format, T::DTYPE, p.dim)?;
    let block_elems = BLOCK_ROWS * p.dim;
    // About 64 MiB per batch, at least one block per thread.
    let per_batch = (64usize << 20) / (block_elems * std::mem::size_of::<T>());
    let per_batch = per_batch.max(rayon::current_num_threads()).max(1);
    let blocks = rows.div_ceil(BLOCK_ROWS);
    let bar = ctl.bar(phase, rows as u64);
    let mut buf: Vec<T> = Vec::new();
    for first in (0..blocks).step_by(per_batch) {
        ctl.check()?;
        let start = first * BLOCK_ROWS;
        let end = ((first + per_batch) * BLOCK_ROWS).min(rows);
        buf.clear();
        buf.resize((end - start) * p.dim, T::default());
        buf.par_chunks_mut(block_elems)
            .enumerate()
            .for_each(|(i, chunk)| model.fill(p.seed, stream + (first + i) as u64, chunk));
        w.write_rows(&buf)?;
        bar.inc((end - start) as u64);
    }
    bar.finish_and_clear();
    Ok(w.finish()?)
}

/// Relative contrast: the mean over queries of (mean Euclidean distance to the base points) /
/// (Euclidean distance to the `k`-th nearest base point). About 1.05 for i.i.d. Gaussian data
/// in 128 dimensions, 1.5–3 for real embeddings. Brute force: use a few hundred queries.
pub fn relative_contrast(base: &Matrix<f32>, queries: &Matrix<f32>, k: usize) -> f32 {
    let k = k.clamp(1, base.n().max(1));
    let per_query: Vec<f32> = queries
        .rows()
        .collect::<Vec<_>>()
        .par_iter()
        .map(|q| {
            let mut d: Vec<f32> = base.rows().map(|b| f32::l2_sq(q, b).sqrt()).collect();
            let mean = d.iter().map(|&x| x as f64).sum::<f64>() / d.len().max(1) as f64;
            let (_, kth, _) = d.select_nth_unstable_by(k - 1, f32::total_cmp);
            (mean / (*kth as f64).max(1e-30)) as f32
        })
        .collect();
    per_query.iter().sum::<f32>() / per_query.len().max(1) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(dtype: DType) -> SynthParams {
        SynthParams::new(3000, 50, 24, dtype, 7)
    }

    #[test]
    fn same_seed_same_data_and_queries_are_held_out() {
        let p = small(DType::F32);
        let (a, qa) = generate::<f32>(&p).unwrap();
        let (b, qb) = generate::<f32>(&p).unwrap();
        assert_eq!(a, b);
        assert_eq!(qa, qb);
        assert_eq!((a.n(), a.dim(), qa.n()), (3000, 24, 50));
        let (c, _) = generate::<f32>(&SynthParams { seed: 8, ..p }).unwrap();
        assert_ne!(a, c);
        for q in qa.rows() {
            assert!(a.rows().all(|r| r != q), "a query is a copy of a base row");
        }
        assert!(a.as_slice().iter().all(|x| x.is_finite()));
    }

    #[test]
    fn integer_types_use_the_range() {
        let (u, _) = generate::<u8>(&small(DType::U8)).unwrap();
        let (lo, hi) = (u.as_slice().iter().min(), u.as_slice().iter().max());
        assert!(*lo.unwrap() < 40 && *hi.unwrap() > 215, "{lo:?} {hi:?}");
        let (i, _) = generate::<i8>(&small(DType::I8)).unwrap();
        let v: Vec<i8> = i.into_vec();
        // Same model and affine map: i8 = u8 − 128.
        assert!(v
            .iter()
            .zip(u.as_slice())
            .all(|(&s, &b)| s as i32 == b as i32 - 128));
    }

    #[test]
    fn bad_params_are_rejected() {
        let mut p = small(DType::F32);
        p.dim = 0;
        assert!(matches!(
            generate::<f32>(&p),
            Err(SynthError::InvalidParams(_))
        ));
        let p = small(DType::U8);
        assert!(matches!(
            generate::<f32>(&p),
            Err(SynthError::InvalidParams(_))
        ));
        let mut p = small(DType::F32);
        p.density = 0.0;
        assert!(generate::<f32>(&p).is_err());
    }

    #[test]
    fn contrast_is_like_real_embeddings() {
        let p = SynthParams::new(5000, 40, 64, DType::F32, 3);
        let (base, queries) = generate::<f32>(&p).unwrap();
        let rc = relative_contrast(&base, &queries, 10);
        assert!(rc > 1.4, "relative contrast {rc}");
        let mut rng = block_rng(1, 0);
        let iid: Vec<f32> = (0..5040 * 64).map(|_| normal(&mut rng)).collect();
        let iid = Matrix::from_vec(iid, 64).unwrap();
        let rc_iid = relative_contrast(&iid.slice_rows(0, 5000), &iid.slice_rows(5000, 40), 10);
        assert!(rc_iid < 1.3, "i.i.d. contrast {rc_iid}");
    }
}

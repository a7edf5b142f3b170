//! Learning the PQ codebooks: a seeded sample, converted to `f32` (normalised for cosine), with
//! OPQ rotated by a learned rotation, then one k-means per subspace.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use rayon::prelude::*;

use crate::data::Matrix;
use crate::kernels::kmeans::{self, KMeans, KMeansParams};
use crate::kernels::{Element, Metric};
use crate::progress::Control;
use crate::quant::pq::encode::Encoder;
use crate::quant::pq::{
    prepare, subspace_bounds, PqError, PqParams, ProductQuantizer, Rotation, MAX_CENTROIDS,
    OPQ_SAMPLE,
};

impl ProductQuantizer {
    /// Trains `params.bytes_per_vector` codebooks on (a sample of) `data` for `metric`.
    ///
    /// Deterministic for a given seed, whatever the number of threads.
    pub fn train<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        params: &PqParams,
        ctl: &Control,
    ) -> Result<Self, PqError> {
        let dim = data.dim();
        let m = params.bytes_per_vector;
        if m == 0 || m > dim {
            return Err(PqError::BadCodeSize {
                bytes_per_vector: m,
                dim,
            });
        }
        if params.max_sample == 0 {
            return Err(PqError::ZeroSample);
        }
        if data.n() == 0 {
            return Err(PqError::NoTrainingData);
        }
        let mut points = sample_rows(data, metric, params)?;
        let n = points.len() / dim;
        let ks = n.min(MAX_CENTROIDS);
        let bounds = subspace_bounds(dim, m);
        let rotation = if params.opq_iters > 0 {
            let r = fit_rotation(&points, dim, &bounds, ks, params, ctl)?;
            rotate_rows(&r, &mut points);
            Some(r)
        } else {
            None
        };
        let bar = ctl.bar("PQ codebooks", m as u64);
        let centroids = train_books(
            &points,
            dim,
            &bounds,
            ks,
            params.iters,
            params.seed,
            ctl,
            &|| bar.inc(1),
        )?;
        bar.finish_and_clear();
        Ok(
            ProductQuantizer::from_parts(metric, dim, bounds, ks, centroids, rotation)
                .expect("trained parts are consistent"),
        )
    }
}

/// One k-means per subspace on the prepared `points` (`ks` centroids, `iters` Lloyd
/// iterations, seeded per subspace); the codebooks subspace after subspace.
#[allow(clippy::too_many_arguments)]
fn train_books(
    points: &[f32],
    dim: usize,
    bounds: &[usize],
    ks: usize,
    iters: usize,
    seed: u64,
    ctl: &Control,
    done_one: &dyn Fn(),
) -> Result<Vec<f32>, PqError> {
    let mut centroids = Vec::with_capacity(ks * dim);
    let mut sub = Vec::new();
    for (s, w) in bounds.windows(2).enumerate() {
        ctl.check()?;
        let (lo, hi) = (w[0], w[1]);
        subspace(points, dim, lo, hi, &mut sub);
        let kp = KMeansParams {
            k: ks,
            max_iters: iters,
            seed: subspace_seed(seed, s),
            max_sample: usize::MAX,
        };
        let km = kmeans::train_with(&sub, hi - lo, &kp, ctl, false)?;
        centroids.extend_from_slice(&km.centroids);
        done_one();
    }
    Ok(centroids)
}

/// Columns `lo..hi` of the row-major `points` into `sub`.
fn subspace(points: &[f32], dim: usize, lo: usize, hi: usize, sub: &mut Vec<f32>) {
    sub.clear();
    for row in points.chunks_exact(dim) {
        sub.extend_from_slice(&row[lo..hi]);
    }
}

/// Rows rotated per parallel task.
const ROTATE_ROWS_PER_TASK: usize = 512;

/// `row ← R row` for every row of `points`.
fn rotate_rows(r: &Rotation, points: &mut [f32]) {
    let dim = r.dim();
    points
        .par_chunks_mut(ROTATE_ROWS_PER_TASK * dim)
        .for_each(|chunk| {
            let mut tmp = vec![0f32; dim];
            for row in chunk.chunks_exact_mut(dim) {
                tmp.copy_from_slice(row);
                r.apply(&tmp, row);
            }
        });
}

/// Lloyd iterations the first OPQ alternation runs from k-means++ seeds, and the later ones
/// from the previous codebooks.
const OPQ_FIRST_ITERS: usize = 8;
const OPQ_REFINE_ITERS: usize = 4;

/// OPQ (non-parametric): alternately fits codebooks to the rotated sample and the rotation
/// that best maps the sample onto its reconstructions (orthogonal Procrustes), starting from
/// the identity; `params.opq_iters` alternations on at most [`OPQ_SAMPLE`] prepared vectors.
fn fit_rotation(
    points: &[f32],
    dim: usize,
    bounds: &[usize],
    ks: usize,
    params: &PqParams,
    ctl: &Control,
) -> Result<Rotation, PqError> {
    let n = points.len() / dim;
    let xs: Vec<f32> = if n > OPQ_SAMPLE {
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ 0x0b7a_07a7);
        let mut idx = sample(&mut rng, n, OPQ_SAMPLE).into_vec();
        idx.sort_unstable();
        idx.iter()
            .flat_map(|&i| &points[i * dim..(i + 1) * dim])
            .copied()
            .collect()
    } else {
        points.to_vec()
    };
    let bar = ctl.bar("OPQ rotation", params.opq_iters as u64);
    let mut rot = Rotation::identity(dim);
    let mut books: Option<Vec<f32>> = None;
    let mut rotated = xs.clone();
    let mut sub = Vec::new();
    for _ in 0..params.opq_iters {
        ctl.check()?;
        rotated.copy_from_slice(&xs);
        rotate_rows(&rot, &mut rotated);
        let cents = match books.take() {
            None => train_books(
                &rotated,
                dim,
                bounds,
                ks,
                OPQ_FIRST_ITERS,
                params.seed,
                ctl,
                &|| {},
            )?,
            Some(mut c) => {
                for w in bounds.windows(2) {
                    ctl.check()?;
                    let (lo, hi) = (w[0], w[1]);
                    subspace(&rotated, dim, lo, hi, &mut sub);
                    let mut km = KMeans {
                        centroids: c[ks * lo..ks * hi].to_vec(),
                        dim: hi - lo,
                        k: ks,
                    };
                    kmeans::refine(&mut km, &sub, OPQ_REFINE_ITERS, ctl)?;
                    c[ks * lo..ks * hi].copy_from_slice(&km.centroids);
                }
                c
            }
        };
        let pq = ProductQuantizer::from_parts(Metric::L2, dim, bounds.to_vec(), ks, cents, None)
            .expect("trained parts are consistent");
        // The reconstruction of every rotated sample vector, in the rotated space.
        let enc = Encoder::new(&pq);
        let mut recon = vec![0f32; rotated.len()];
        recon
            .par_chunks_mut(ROTATE_ROWS_PER_TASK * dim)
            .zip(rotated.par_chunks(ROTATE_ROWS_PER_TASK * dim))
            .for_each(|(ys, xs)| {
                let mut code = vec![0u8; pq.m()];
                for (y, x) in ys.chunks_exact_mut(dim).zip(xs.chunks_exact(dim)) {
                    enc.encode_prepared(x, &mut code);
                    for (w, &c) in bounds.windows(2).zip(&code) {
                        let width = w[1] - w[0];
                        let at = ks * w[0] + usize::from(c) * width;
                        y[w[0]..w[1]].copy_from_slice(&pq.centroids()[at..at + width]);
                    }
                }
            });
        rot = Rotation::procrustes(dim, &xs, &recon);
        books = Some(pq.centroids().to_vec());
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(rot)
}

/// A distinct, well-mixed seed per subspace (splitmix64 of the pair).
fn subspace_seed(seed: u64, s: usize) -> u64 {
    let mut z = seed ^ (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// At most `max_sample` rows (seeded, in index order) as prepared `f32` rows.
fn sample_rows<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &PqParams,
) -> Result<Vec<f32>, PqError> {
    let (n, dim) = (data.n(), data.dim());
    let rows: Vec<usize> = if n > params.max_sample {
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
        let mut idx = sample(&mut rng, n, params.max_sample).into_vec();
        idx.sort_unstable();
        idx
    } else {
        (0..n).collect()
    };
    let mut out = vec![0f32; rows.len() * dim];
    // In increasing row order, dropping a mapped source's pages behind (see
    // `Matrix::gather_rows`).
    let mut released = 0usize;
    for (o, &r) in out.chunks_exact_mut(dim).zip(&rows) {
        if !prepare(metric, data.row(r), o) {
            return Err(PqError::NonFinite { row: r });
        }
        if r >= released + crate::data::matrix::RELEASE_ROWS {
            data.release_rows(released, r);
            released = r;
        }
    }
    data.release_rows(released, n);
    Ok(out)
}

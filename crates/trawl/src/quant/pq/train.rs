//! Learning the PQ codebooks: a seeded sample, converted to `f32` (normalised for cosine), then
//! one k-means per subspace.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{prepare, subspace_bounds, PqError, PqParams, ProductQuantizer, MAX_CENTROIDS};
use crate::data::Matrix;
use crate::kernels::kmeans::{self, KMeansParams};
use crate::kernels::{Element, Metric};
use crate::progress::Control;

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
        let points = sample_rows(data, metric, params)?;
        let n = points.len() / dim;
        let ks = n.min(MAX_CENTROIDS);
        let bounds = subspace_bounds(dim, m);
        let bar = ctl.bar("PQ codebooks", m as u64);
        let mut centroids = Vec::with_capacity(ks * dim);
        let mut sub = Vec::new();
        for s in 0..m {
            ctl.check()?;
            let (lo, hi) = (bounds[s], bounds[s + 1]);
            sub.clear();
            for row in points.chunks_exact(dim) {
                sub.extend_from_slice(&row[lo..hi]);
            }
            let kp = KMeansParams {
                k: ks,
                max_iters: params.iters,
                seed: subspace_seed(params.seed, s),
                max_sample: usize::MAX,
            };
            let km = kmeans::train_with(&sub, hi - lo, &kp, ctl, false)?;
            centroids.extend_from_slice(&km.centroids);
            bar.inc(1);
        }
        bar.finish_and_clear();
        Ok(
            ProductQuantizer::from_parts(metric, dim, bounds, ks, centroids)
                .expect("trained parts are consistent"),
        )
    }
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
    for (o, &r) in out.chunks_exact_mut(dim).zip(&rows) {
        if !prepare(metric, data.row(r), o) {
            return Err(PqError::NonFinite { row: r });
        }
    }
    Ok(out)
}

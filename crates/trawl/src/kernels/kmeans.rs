//! k-means clustering (k-means++ initialisation, Lloyd iterations), used by product
//! quantisation and by the sharded graph build.
//!
//! PLACEHOLDER implementation (plain random init, serial Lloyd); the real one replaces it with
//! the same API.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

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
    /// Fewer points than clusters, `dim == 0` or `k == 0`, or a length not a multiple of `dim`.
    #[error("invalid k-means input: {0}")]
    InvalidInput(String),
    /// Cancelled through [`Control`].
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

/// Clusters the row-major `data` (`data.len() / dim` points) into `params.k` centroids.
pub fn train(
    data: &[f32],
    dim: usize,
    params: &KMeansParams,
    ctl: &Control,
) -> Result<KMeans, KMeansError> {
    if dim == 0 || data.len() % dim != 0 || params.k == 0 {
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
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut centroids = Vec::with_capacity(params.k * dim);
    for i in sample(&mut rng, n, params.k) {
        centroids.extend_from_slice(&data[i * dim..(i + 1) * dim]);
    }
    let mut km = KMeans {
        centroids,
        dim,
        k: params.k,
    };
    for _ in 0..params.max_iters {
        ctl.check()?;
        let mut sums = vec![0f64; params.k * dim];
        let mut counts = vec![0usize; params.k];
        for x in data.chunks_exact(dim) {
            let (c, _) = km.nearest(x);
            counts[c] += 1;
            for (s, v) in sums[c * dim..(c + 1) * dim].iter_mut().zip(x) {
                *s += f64::from(*v);
            }
        }
        for c in 0..params.k {
            if counts[c] > 0 {
                for j in 0..dim {
                    km.centroids[c * dim + j] = (sums[c * dim + j] / counts[c] as f64) as f32;
                }
            }
        }
    }
    Ok(km)
}

impl KMeans {
    /// Index and squared L2 distance of the centroid nearest to `x`.
    pub fn nearest(&self, x: &[f32]) -> (usize, f32) {
        let mut best = (0, f32::INFINITY);
        for (c, cen) in self.centroids.chunks_exact(self.dim).enumerate() {
            let d = <f32 as crate::kernels::Element>::l2_sq(x, cen);
            if d < best.1 {
                best = (c, d);
            }
        }
        best
    }

    /// Indices of the `m` centroids nearest to `x`, nearest first.
    pub fn nearest_m(&self, x: &[f32], m: usize) -> Vec<usize> {
        let mut all: Vec<(f32, usize)> = self
            .centroids
            .chunks_exact(self.dim)
            .enumerate()
            .map(|(c, cen)| (<f32 as crate::kernels::Element>::l2_sq(x, cen), c))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all.into_iter().take(m).map(|(_, c)| c).collect()
    }
}

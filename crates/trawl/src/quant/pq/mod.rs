//! Product quantisation (PQ) with 8-bit codes and asymmetric distance computation (ADC).
//!
//! A vector of `dim` values is cut into `M` contiguous subspaces (`M` = bytes per vector); the
//! subspace widths differ by at most one (the first `dim mod M` subspaces are one wider). Each
//! subspace has its own codebook of up to 256 centroids learned by k-means
//! ([`crate::kernels::kmeans`]); a vector's code is the index of the nearest centroid in every
//! subspace, one byte each.
//!
//! **Metrics.** For [`Metric::L2`] and [`Metric::InnerProduct`] the raw vectors are quantised
//! (for inner product the table holds `−⟨q_s, c⟩` per subspace, and their sum is exactly the
//! negated inner product with the reconstructed vector). For [`Metric::Cosine`] vectors are
//! normalised to unit length before training and encoding, the query is normalised too, and
//! the distance is `½‖q̂ − x̃‖²` where `x̃` is the reconstruction of the normalised vector (it is
//! not renormalised); for unit vectors that is `1 − cos`. A zero vector stays zero (its PQ
//! distance is `½`, not the kernels' 1: PQ distances only guide traversal).
//!
//! **No centring.** DiskANN subtracts the data mean before PQ. k-means is translation
//! equivariant, and trawl's assignment computes `Σ (xⱼ − cⱼ)²` directly (no `‖x‖² + ‖c‖² − 2x·c`
//! cancellation), so centring changes nothing but rounding; it is not done.
//!
//! **Small training sets.** With fewer than 256 training points (after sampling), every
//! subspace gets as many centroids as there are points, and codes range over `0..ks`
//! ([`ProductQuantizer::centroids_per_subspace`]). Zero points is an error.
//!
//! Parts: `train.rs` learns the codebooks, `encode.rs` makes codes ([`PqCodes`]), `table.rs`
//! builds per-query tables ([`QueryTable`]), [`mod@file`] saves and loads both (byte layouts in its
//! docs).

mod encode;
pub mod file;
mod rotation;
mod table;
mod train;

pub use encode::PqCodes;
pub use file::{PQ_CODES_MAGIC, PQ_CODES_VERSION, PQ_MAGIC, PQ_VERSION};
pub use rotation::Rotation;
pub use table::{QuantTable, QueryTable};

use crate::data::Matrix;
use crate::kernels::kmeans::KMeansError;
use crate::kernels::{Element, Metric};
use crate::progress::{Cancelled, Control};
use crate::quant::Quantizer;

/// Most centroids per subspace (8-bit codes).
pub const MAX_CENTROIDS: usize = 256;

/// Parameters of [`ProductQuantizer::train`].
#[derive(Debug, Clone)]
pub struct PqParams {
    /// Bytes per code = number of subspaces `M`; `1 ≤ M ≤ dim`. More bytes, smaller error.
    pub bytes_per_vector: usize,
    /// Train on at most this many vectors (a seeded uniform sample). Default 256 Ki.
    pub max_sample: usize,
    /// Lloyd iterations per subspace (k-means stops earlier once assignments settle).
    pub iters: usize,
    /// Seed of the sample and of every codebook's k-means.
    pub seed: u64,
    /// OPQ: alternations of codebook training and rotation fitting before the final codebooks
    /// (0 = plain PQ, no rotation). [`OPQ_ITERS`] is a good value; each costs a few k-means
    /// iterations on at most [`OPQ_SAMPLE`] vectors plus a `dim × dim` polar decomposition.
    pub opq_iters: usize,
}

/// Alternations of OPQ training `trawl build --opq` runs.
pub const OPQ_ITERS: usize = 8;
/// Most vectors OPQ fits its rotation on (a seeded subsample of the PQ training sample).
pub const OPQ_SAMPLE: usize = 65_536;

impl Default for PqParams {
    fn default() -> Self {
        Self {
            bytes_per_vector: 32,
            max_sample: 256 * 1024,
            iters: 12,
            seed: 0,
            opq_iters: 0,
        }
    }
}

/// Why a PQ operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PqError {
    /// `bytes_per_vector` is zero or larger than the dimension: choose `1 ≤ M ≤ dim`.
    #[error("bytes per vector {bytes_per_vector} must be between 1 and the dimension {dim}")]
    BadCodeSize {
        /// Requested `M`.
        bytes_per_vector: usize,
        /// Vector dimension.
        dim: usize,
    },
    /// `max_sample` is zero: allow at least one training vector.
    #[error("max_sample must be at least 1")]
    ZeroSample,
    /// The training matrix is empty: PQ needs at least one vector.
    #[error("no training vectors")]
    NoTrainingData,
    /// A vector, query or code has the wrong length for this quantiser: check the data file.
    #[error("{what} has length {found}, expected {expected}")]
    LengthMismatch {
        /// What was checked (`"vector"`, `"query"`, `"code"`, `"output"`).
        what: &'static str,
        /// Expected length.
        expected: usize,
        /// Found length.
        found: usize,
    },
    /// A vector holds NaN or infinity: clean the data.
    #[error("vector {row} holds a non-finite value")]
    NonFinite {
        /// Row index in the input.
        row: usize,
    },
    /// A code byte names a centroid this quantiser does not have: the codes belong to another
    /// quantiser.
    #[error("code byte {value} at position {position} is not below {centroids} centroids")]
    BadCode {
        /// Byte position in the code.
        position: usize,
        /// The byte.
        value: u8,
        /// Centroids per subspace.
        centroids: usize,
    },
    /// Cancelled through [`Control`]; nothing was produced.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
    /// k-means refused its input. PQ validates before calling it, so this is a bug: report it.
    #[error("k-means failed inside PQ training: {0}")]
    KMeans(KMeansError),
}

impl PqError {
    /// What kind of failure this is: cancelled, a bug (k-means refusing validated input), or
    /// unusable input.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Cancelled(_) => crate::ErrorKind::Cancelled,
            Self::KMeans(_) => crate::ErrorKind::Internal,
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

impl From<KMeansError> for PqError {
    fn from(e: KMeansError) -> Self {
        match e {
            KMeansError::Cancelled(c) => PqError::Cancelled(c),
            other => PqError::KMeans(other),
        }
    }
}

/// A trained product quantiser: `M` codebooks of `ks ≤ 256` centroids each.
#[derive(Debug, Clone)]
pub struct ProductQuantizer {
    metric: Metric,
    dim: usize,
    /// Subspace boundaries, `M + 1` values from 0 to `dim`.
    bounds: Vec<usize>,
    /// Centroids per subspace.
    ks: usize,
    /// Codebooks: subspace `s` at `ks * bounds[s]`, `ks × width(s)` row-major.
    centroids: Vec<f32>,
    /// The same codebooks dimension-major: subspace `s` at `ks * bounds[s]`, `width(s) × ks`
    /// (a dimension's values of all centroids contiguous), so a distance table row is filled
    /// by vector operations over the centroids.
    by_dim: Vec<f32>,
    /// OPQ's rotation, applied after [`prepare`]; `None` for plain PQ.
    rotation: Option<Rotation>,
}

/// Boundaries of `m` contiguous subspaces of `dim` whose widths differ by at most one.
pub fn subspace_bounds(dim: usize, m: usize) -> Vec<usize> {
    let (q, r) = (dim / m.max(1), dim % m.max(1));
    let mut b = Vec::with_capacity(m + 1);
    b.push(0);
    for s in 0..m {
        b.push(b[s] + q + usize::from(s < r));
    }
    b
}

impl ProductQuantizer {
    /// Assembles a quantiser from parts; `None` if they are inconsistent.
    pub(crate) fn from_parts(
        metric: Metric,
        dim: usize,
        bounds: Vec<usize>,
        ks: usize,
        centroids: Vec<f32>,
        rotation: Option<Rotation>,
    ) -> Option<Self> {
        let ok = dim >= 1
            && rotation.as_ref().is_none_or(|r| r.dim() == dim)
            && bounds.len() >= 2
            && bounds.len() - 1 <= dim
            && bounds.first() == Some(&0)
            && bounds.last() == Some(&dim)
            && bounds.windows(2).all(|w| w[0] < w[1])
            && (1..=MAX_CENTROIDS).contains(&ks)
            && centroids.len() == ks.checked_mul(dim)?
            && centroids.iter().all(|v| v.is_finite());
        if !ok {
            return None;
        }
        let mut by_dim = vec![0f32; centroids.len()];
        for w in bounds.windows(2) {
            let (at, width) = (ks * w[0], w[1] - w[0]);
            for e in 0..ks {
                for d in 0..width {
                    by_dim[at + d * ks + e] = centroids[at + e * width + d];
                }
            }
        }
        Some(Self {
            metric,
            dim,
            bounds,
            ks,
            centroids,
            by_dim,
            rotation,
        })
    }

    /// OPQ's rotation (vectors are quantised as `R x` after `prepare`); `None` for plain PQ.
    pub fn rotation(&self) -> Option<&Rotation> {
        self.rotation.as_ref()
    }

    /// [`prepare`] then, with OPQ, the rotation: `out` is what the codebooks quantise. `tmp`
    /// is scratch of length `dim` (used only with a rotation). `false` if a value is not
    /// finite.
    #[inline]
    pub(crate) fn prepare_rotated<T: Element>(
        &self,
        x: &[T],
        tmp: &mut [f32],
        out: &mut [f32],
    ) -> bool {
        match &self.rotation {
            None => prepare(self.metric, x, out),
            Some(r) => {
                let ok = prepare(self.metric, x, tmp);
                r.apply(tmp, out);
                ok
            }
        }
    }

    /// The metric the quantiser was trained for.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of subspaces `M` = bytes per code.
    pub fn m(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Centroids per subspace (256 unless trained on fewer points).
    pub fn centroids_per_subspace(&self) -> usize {
        self.ks
    }

    /// Subspace boundaries: subspace `s` covers dimensions `bounds[s]..bounds[s + 1]`.
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// The codebook of subspace `s`, `ks × width` row-major.
    pub fn codebook(&self, s: usize) -> &[f32] {
        &self.centroids[self.ks * self.bounds[s]..self.ks * self.bounds[s + 1]]
    }

    /// All codebooks, subspace after subspace.
    pub fn centroids(&self) -> &[f32] {
        &self.centroids
    }

    /// Bytes the quantiser holds in memory for search: the codebooks (once; the
    /// dimension-major copy is a cache of them, counted too) and the OPQ rotation.
    pub fn heap_bytes(&self) -> u64 {
        let rot = self.rotation.as_ref().map_or(0, |r| r.rows().len());
        ((self.centroids.len() + self.by_dim.len() + rot) * 4) as u64
    }

    /// The vector a code stands for (for cosine: the reconstruction of the normalised vector;
    /// with OPQ, mapped back through the rotation's transpose).
    pub fn decode(&self, code: &[u8], out: &mut [f32]) -> Result<(), PqError> {
        match &self.rotation {
            None => self.decode_rotated(code, out),
            Some(r) => {
                let mut y = vec![0f32; self.dim];
                self.check_len("output", self.dim, out.len())?;
                self.decode_rotated(code, &mut y)?;
                r.apply_transpose(&y, out);
                Ok(())
            }
        }
    }

    /// The reconstruction in the quantised (rotated, with OPQ) space.
    pub(crate) fn decode_rotated(&self, code: &[u8], out: &mut [f32]) -> Result<(), PqError> {
        self.check_len("code", self.m(), code.len())?;
        self.check_len("output", self.dim, out.len())?;
        for (s, &c) in code.iter().enumerate() {
            if usize::from(c) >= self.ks {
                return Err(PqError::BadCode {
                    position: s,
                    value: c,
                    centroids: self.ks,
                });
            }
            let (lo, hi) = (self.bounds[s], self.bounds[s + 1]);
            let w = hi - lo;
            let cent = &self.codebook(s)[usize::from(c) * w..(usize::from(c) + 1) * w];
            out[lo..hi].copy_from_slice(cent);
        }
        Ok(())
    }

    fn check_len(&self, what: &'static str, expected: usize, found: usize) -> Result<(), PqError> {
        if expected == found {
            Ok(())
        } else {
            Err(PqError::LengthMismatch {
                what,
                expected,
                found,
            })
        }
    }
}

/// Converts a vector to `f32` into `out`, normalised for cosine; `false` if a value is not
/// finite.
pub(crate) fn prepare<T: Element>(metric: Metric, x: &[T], out: &mut [f32]) -> bool {
    let mut finite = true;
    for (o, v) in out.iter_mut().zip(x) {
        finite &= v.is_finite();
        *o = v.to_f32();
    }
    if metric == Metric::Cosine && finite {
        let norm = <f32 as Element>::norm_sq(out).sqrt();
        if norm > 0.0 {
            let inv = 1.0 / norm;
            out.iter_mut().for_each(|v| *v *= inv);
        }
    }
    finite
}

impl Quantizer for ProductQuantizer {
    type Params = PqParams;
    type Codes = PqCodes;
    type Table = QueryTable;
    type Error = PqError;

    fn train<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        params: &PqParams,
        ctl: &Control,
    ) -> Result<Self, PqError> {
        ProductQuantizer::train(data, metric, params, ctl)
    }

    fn encode<T: Element>(&self, data: &Matrix<T>, ctl: &Control) -> Result<PqCodes, PqError> {
        ProductQuantizer::encode(self, data, ctl)
    }

    fn query_table<T: Element>(&self, query: &[T]) -> Result<QueryTable, PqError> {
        ProductQuantizer::query_table(self, query)
    }
}

#[cfg(test)]
mod tests;

//! RaBitQ codes: Extended RaBitQ with `B = 1…8` bits per dimension, an unbiased distance
//! estimator and its probabilistic error bound.
//!
//! References: RaBitQ (J. Gao, C. Long, SIGMOD 2024, arXiv 2405.12497, "RQ" below) and
//! Extended RaBitQ (J. Gao et al., SIGMOD 2025, arXiv 2409.09913, "ERQ").
//!
//! **Normalisation** (RQ §3.1.1). A data vector `o_r` (for cosine: normalised first) is
//! centred on the quantiser's centroid `c` (the mean of a training sample) and scaled to a unit
//! vector `o = (o_r − c)/‖o_r − c‖`. Distances decompose (RQ eq. 2) as
//! `‖o_r − q_r‖² = ‖o_r − c‖² + ‖q_r − c‖² − 2‖o_r − c‖·⟨q_r − c, o⟩`, so estimating the inner
//! product `⟨q, o⟩` of a unit data vector with a (centred) query is enough.
//!
//! **Rotation** ([`rotation`]). Every vector is rotated by one random orthogonal `P` in a space
//! padded to `D` = the next multiple of 64 dimensions; `o′ = P o`, `q′ = P (q_r − c)`.
//!
//! **Codebook and code** (ERQ §3.1). The codebook is the grid `G = {−(2^B−1)/2 + u :
//! u = 0…2^B−1}^D` scaled onto the unit sphere; a vector's code is the grid point `y` whose
//! direction is closest to `o′` (the largest `⟨y/‖y‖, o′⟩`), found exactly by enumerating the
//! critical rescaling factors `t` at which `round(t·o′)` changes ([`encode`]). For `B = 1` the
//! grid is `{±½}^D` and the code is the signs of `o′`, RaBitQ's bi-valued codebook (RQ §3.1.2).
//! The stored code is `u = y + (2^B−1)/2 ∈ [0, 2^B−1]^D`.
//!
//! **Estimator** (RQ Theorem 3.2, eq. 12; ERQ §3.2). With `x̄ = y/‖y‖`,
//! `⟨o′, q′⟩ ≈ ⟨x̄, q′⟩ / ⟨x̄, o′⟩ = ⟨y, q′⟩ / ⟨y, o′⟩`, unbiased over the random rotation.
//!
//! **Error bound** (RQ Theorem 3.2, eq. 15; ERQ Theorem 3.2 for `B` bits): with probability at
//! least `1 − 2·exp(−c₀ ε₀²)`,
//! `|⟨x̄, q′⟩/⟨x̄, o′⟩ − ⟨o′, q′⟩| ≤ ‖q′‖ · √((1 − ⟨x̄, o′⟩²)/⟨x̄, o′⟩²) · ε₀/√(D − 1)`.
//! The constant `c₀` is not given, so the bound's confidence at a given `ε₀` is not either;
//! but the error term is `tan θ · ⟨x̄, e⟩` for a unit `e` orthogonal to `o′` and uniform
//! under the random rotation (RQ Lemma 3.1), whose coordinate is close to `N(0, 1/(D − 1))`:
//! the bound at `ε₀` holds with probability about `2Φ(ε₀) − 1` — 94.3 % at the papers' default
//! `ε₀ = 1.9` ([`EPSILON0`]), 99.7 % at 3. The tests measure this coverage on random and real
//! data. The estimate returns the scale `σ = f_err·‖q′‖` and callers choose `ε₀`.
//!
//! **Query quantisation** (RQ §3.3.1, eq. 18). `q′` is quantised to [`query_bits`]-bit unsigned
//! integers `q_u = ⌊(q′ − v_l)/Δ + r⌋` with randomised rounding (`r` uniform in `[0, 1)`,
//! which keeps `Δ·q_u + v_l` an unbiased estimate of `q′`), so `⟨u, q′⟩` becomes an integer
//! dot product computed on bit planes with AND and popcount (RQ eq. 20–22, generalised from
//! one data bit plane to `B`): `⟨u, q_u⟩ = Σ_p Σ_b 2^{p+b} popcount(u_p ∧ q_{u,b})`.
//!
//! **Metrics.** Every metric uses the same query preparation `q′ = P(q_r − c)`; the distance is
//! `f_add + q_const + f_rescale · ⟨y, q′⟩` with per-vector factors stored after the code and
//! per-query constants:
//!
//! | metric | `f_add` | `f_rescale` | `q_const` | distance |
//! |---|---|---|---|---|
//! | L2 | `‖o_r − c‖²` | `−2‖o_r − c‖/⟨y, o′⟩` | `‖q_r − c‖²` | `‖o_r − q_r‖²` |
//! | inner product | `−⟨o_r − c, c⟩` | `−‖o_r − c‖/⟨y, o′⟩` | `−⟨q_r, c⟩` | `−⟨o_r, q_r⟩` |
//! | cosine | `½‖ô − c‖²` | `−‖ô − c‖/⟨y, o′⟩` | `½‖q̂ − c‖²` | `½‖ô − q̂‖² = 1 − cos` |
//!
//! (inner product: `⟨o_r, q_r⟩ = ⟨o_r − c, q_r − c⟩ + ⟨o_r − c, c⟩ + ⟨q_r, c⟩`, and the first
//! term is the estimated one; centring the query as well as the data keeps the error, which
//! scales with `‖q′‖ = ‖q_r − c‖`, the same as for L2.) The third factor `f_err` is
//! `|f_rescale|·⟨y, o′⟩·√((1 − ⟨x̄, o′⟩²)/⟨x̄, o′⟩²)/√(D − 1)`, so that the bound on a distance
//! is `ε₀ · f_err · ‖q′‖` (RQ eq. 16 scaled by the distance's factor).
//!
//! **Code bytes** ([`RaBitQuantizer::code_bytes`]): `B` bit planes of `D/8` bytes each, the most
//! significant first (plane 0 is the 1-bit RaBitQ code: the signs), then the factors from which
//! `f_add`, `f_rescale` and `f_err` follow ([`factors`]: 8 bytes for L2 and cosine with
//! `B ≤ 4`, up to 16) — `B·D/8 + 8` bytes for a 1–4-bit L2 or cosine code. The codes of an index are a flat
//! `n × code_bytes` matrix like PQ's ([`crate::quant::pq::PqCodes`]), so every layout that
//! keeps PQ codes (in memory, beside neighbour ids in All-in-Storage records, in the write-ahead
//! log) keeps RaBitQ codes unchanged.

pub mod encode;
pub mod factors;
pub mod fastscan;
pub mod file;
pub mod kernels;
pub mod query;
pub mod rotation;

pub use query::RbqQuery;
pub use rotation::{padded_dim, FhtRotation};

use crate::data::Matrix;
use crate::kernels::{Element, Metric};
use crate::progress::{Cancelled, Control};

/// The papers' confidence parameter `ε₀` of the error bound (RQ Theorem 3.2, §5.1).
pub const EPSILON0: f32 = 1.9;

/// The bound's approximate confidence at `eps`: `2Φ(eps) − 1` (module docs).
pub fn confidence(eps: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26 for erf(eps/√2), absolute error below 1.5e-7.
    let x = eps.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    1.0 - poly * (-x * x).exp()
}
/// Bits per coordinate of the quantised query for `B`-bit codes: `B + 4`. The query's
/// rounding adds an error of about `Δ/2` per unit of `⟨y, q′⟩` (`Δ` its step) that the bound
/// does not count; the codes' own error shrinks as `2^−B`, so the query's step must shrink with
/// it (RQ Theorem 3.3 gives `B_q = 4` for `B = 1`; with `B_q = 8` fixed, the bound at `ε₀ = 1.9`
/// held for only 73 % of pairs at `B = 8`).
pub fn query_bits(bits: u8) -> u32 {
    u32::from(bits) + 4
}
/// Most bits per dimension.
pub const MAX_BITS: u8 = 8;
/// Largest magnitude of a centroid value: the squares of a 65,536-dimensional centroid's
/// values still sum to a finite `f32` (a forged quantiser file beyond it is refused).
pub const MAX_CENTROID_VALUE: f32 = 1.0e15;
/// Most training vectors the centroid is the mean of.
const CENTROID_SAMPLE: usize = 1 << 18;

/// Parameters of [`RaBitQuantizer::train`].
#[derive(Debug, Clone)]
pub struct RbqParams {
    /// Bits per dimension, `1…8`.
    pub bits: u8,
    /// Seed of the rotation.
    pub seed: u64,
    /// Rounds of the rotation.
    pub rounds: usize,
}

impl Default for RbqParams {
    fn default() -> Self {
        Self {
            bits: 4,
            seed: 0,
            rounds: rotation::DEFAULT_ROUNDS,
        }
    }
}

/// Why a RaBitQ operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RbqError {
    /// Bits per dimension outside `1…8`.
    #[error("RaBitQ bits per dimension {0} must be between 1 and 8")]
    BadBits(u8),
    /// The training matrix is empty.
    #[error("no training vectors")]
    NoTrainingData,
    /// A vector, query or code has the wrong length for this quantiser.
    #[error("{what} has length {found}, expected {expected}")]
    LengthMismatch {
        /// What was checked.
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
    /// The query's distance terms overflow `f32`: its values (or the centroid's) are too
    /// large.
    #[error("the query's values are too large: its distance terms overflow 32-bit floats")]
    Overflow,
    /// Cancelled through [`Control`]; nothing was produced.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl RbqError {
    /// What kind of failure this is.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Cancelled(_) => crate::ErrorKind::Cancelled,
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

/// A trained RaBitQ quantiser: the centroid, the rotation and the bits per dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct RaBitQuantizer {
    metric: Metric,
    bits: u8,
    centroid: Vec<f32>,
    rotation: FhtRotation,
}

impl RaBitQuantizer {
    /// Assembles a quantiser from parts; `None` if they are inconsistent.
    pub fn from_parts(
        metric: Metric,
        bits: u8,
        centroid: Vec<f32>,
        rotation: FhtRotation,
    ) -> Option<Self> {
        let ok = (1..=MAX_BITS).contains(&bits)
            && centroid.len() == rotation.dim()
            && centroid.iter().all(|v| v.abs() <= MAX_CENTROID_VALUE);
        ok.then_some(Self {
            metric,
            bits,
            centroid,
            rotation,
        })
    }

    /// Learns the centroid (the mean of at most 256 Ki evenly spaced rows, normalised first
    /// for cosine) and draws the rotation from `params.seed`.
    pub fn train<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        params: &RbqParams,
        ctl: &Control,
    ) -> Result<Self, RbqError> {
        if !(1..=MAX_BITS).contains(&params.bits) {
            return Err(RbqError::BadBits(params.bits));
        }
        if data.n() == 0 {
            return Err(RbqError::NoTrainingData);
        }
        let dim = data.dim();
        let step = data.n().div_ceil(CENTROID_SAMPLE).max(1);
        let mut sum = vec![0f64; dim];
        let mut buf = vec![0f32; dim];
        let mut count = 0u64;
        for row in (0..data.n()).step_by(step) {
            if count.is_multiple_of(4096) {
                ctl.check()?;
            }
            if !crate::quant::pq::prepare(metric, data.row(row), &mut buf) {
                return Err(RbqError::NonFinite { row });
            }
            sum.iter_mut()
                .zip(&buf)
                .for_each(|(s, &v)| *s += f64::from(v));
            count += 1;
        }
        let centroid = sum.iter().map(|s| (s / count as f64) as f32).collect();
        let rotation = FhtRotation::random(dim, params.rounds.max(1), params.seed);
        // Only a centroid value beyond ±1e15 makes the parts inconsistent.
        Self::from_parts(metric, params.bits, centroid, rotation).ok_or(RbqError::Overflow)
    }

    /// The metric the codes estimate.
    pub fn metric(&self) -> Metric {
        self.metric
    }
    /// Input dimension.
    pub fn dim(&self) -> usize {
        self.rotation.dim()
    }
    /// Padded (rotated) dimension `D`.
    pub fn pad(&self) -> usize {
        self.rotation.pad()
    }
    /// Bits per dimension `B`.
    pub fn bits(&self) -> u8 {
        self.bits
    }
    /// The centroid.
    pub fn centroid(&self) -> &[f32] {
        &self.centroid
    }
    /// The rotation.
    pub fn rotation(&self) -> &FhtRotation {
        &self.rotation
    }
    /// Bytes of one bit plane (`D/8`).
    pub fn plane_bytes(&self) -> usize {
        self.pad() / 8
    }
    /// Bytes of one code: `B` planes and the factors ([`factors`]).
    pub fn code_bytes(&self) -> usize {
        usize::from(self.bits) * self.plane_bytes() + self.factors().bytes()
    }

    /// The layout of the per-vector factors.
    pub fn factors(&self) -> factors::FactorLayout {
        factors::FactorLayout::of(self.metric, self.bits, self.pad())
    }
    /// Heap bytes of the quantiser.
    pub fn heap_bytes(&self) -> u64 {
        (self.centroid.len() * 4 + self.rotation.signs().len() * 8) as u64
    }

    /// `x` as `f32` (normalised for cosine) minus the centroid, into `out`; `false` if a value
    /// is not finite.
    pub(crate) fn centre<T: Element>(&self, x: &[T], out: &mut [f32]) -> bool {
        if !crate::quant::pq::prepare(self.metric, x, out) {
            return false;
        }
        out.iter_mut()
            .zip(&self.centroid)
            .for_each(|(v, c)| *v -= c);
        true
    }

    /// `⟨a, b⟩` in `f64` then rounded: the factors' inner products.
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| f64::from(x) * f64::from(y))
            .sum::<f64>() as f32
    }

    /// `−⟨r, c⟩`, the inner-product metric's `f_add` for `r = o_r − c` (0 for the others).
    fn neg_rc(&self, r: &[f32]) -> f32 {
        match self.metric {
            Metric::InnerProduct => -Self::dot(r, &self.centroid),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests;

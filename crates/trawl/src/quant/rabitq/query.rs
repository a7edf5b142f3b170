//! A query prepared for RaBitQ codes: rotated, quantised to [`query_bits`]-bit integers and cut
//! into bit planes, with the constants of its metric (module docs of [`crate::quant::rabitq`]).
//!
//! The estimate of one code is integer arithmetic (AND and popcount over the planes, exact)
//! followed by a fixed sequence of `f32` operations ([`RbqQuery::estimate`]), which a GPU kernel
//! repeats bit for bit.

use crate::kernels::Element;
use crate::quant::rabitq::factors::FactorLayout;
use crate::quant::rabitq::{query_bits, RaBitQuantizer, RbqError};
use crate::quant::DistanceTable;

/// The seed of the randomised rounding of a query's coordinates (fixed: a query's estimates do
/// not change from one search to the next).
const ROUNDING_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// Header words of [`RbqQuery::gpu_words`].
pub const GPU_HEADER: usize = 16;

/// A query prepared for estimating distances to RaBitQ codes.
#[derive(Debug, Clone, Default)]
pub struct RbqQuery {
    /// Bits per data dimension `B`.
    bits: u32,
    /// 64-bit words per plane (`D/64`).
    words: usize,
    /// Bits per query coordinate ([`query_bits`]).
    qbits: u32,
    /// `qbits × words`: plane `b` holds bit `b` of every `q_u`.
    planes: Vec<u64>,
    /// `Δ`, the quantisation step of the query.
    delta: f32,
    /// `v_l`, the smallest rotated coordinate.
    low: f32,
    /// `Σ q_u`.
    sum_q: u64,
    /// `D`.
    pad: u64,
    /// How the codes' factors are laid out.
    factors: FactorLayout,
    /// The integer kernel's version.
    level: crate::quant::rabitq::kernels::Level,
    /// The metric's per-query constant.
    q_const: f32,
    /// `‖q′‖`.
    q_norm: f32,
}

impl RbqQuery {
    /// Bytes of one code this query scores.
    pub fn code_bytes(&self) -> usize {
        self.bits as usize * self.words * 8 + self.factors.bytes()
    }

    /// `⟨u, q_u⟩` and `Σ u` of `code`: AND and popcount over the bit planes
    /// ([`crate::quant::rabitq::kernels`]).
    #[inline]
    pub fn integer_parts(&self, code: &[u8]) -> (u64, u64) {
        crate::quant::rabitq::kernels::integer_parts(
            self.level,
            code,
            &self.planes,
            self.words,
            self.bits as usize,
            self.qbits as usize,
        )
    }

    /// The estimated distance to the vector with `code` and the scale `σ` of its error: the
    /// true distance lies in `[est − ε₀σ, est + ε₀σ]` with the confidence of RaBitQ's
    /// Theorem 3.2 at `ε₀` (about `2Φ(ε₀) − 1`: module docs), up to the query's quantisation.
    #[inline]
    pub fn estimate(&self, code: &[u8]) -> (f32, f32) {
        let (ip, sum_u) = self.integer_parts(code);
        self.finish(code, ip, sum_u)
    }

    /// The `f32` part of [`RbqQuery::estimate`], from the integer parts.
    #[inline]
    pub fn finish(&self, code: &[u8], ip: u64, sum_u: u64) -> (f32, f32) {
        self.finish_factors(&code[self.bits as usize * self.words * 8..], ip, sum_u)
    }

    /// [`RbqQuery::finish`] from the code's factors alone (the bytes after its planes).
    #[inline]
    pub fn finish_factors(&self, factors: &[u8], ip: u64, sum_u: u64) -> (f32, f32) {
        let (f_add, f_rescale, f_err) = self.factors.read(factors);
        let two_h = (1u64 << self.bits) - 1;
        // 2⟨y, q_u⟩ and 2 Σ y, exact integers: y = u − (2^B − 1)/2.
        let a = 2 * ip as i64 - (two_h * self.sum_q) as i64;
        let b = 2 * sum_u as i64 - (two_h * self.pad) as i64;
        // ⟨y, q′⟩ ≈ Δ ⟨y, q_u⟩ + v_l Σ y.
        let y_q = 0.5 * self.delta * a as f32 + 0.5 * self.low * b as f32;
        let est = (f_add + self.q_const) + f_rescale * y_q;
        (est, f_err * self.q_norm)
    }

    /// The estimated distance from the code's factors and its integer parts: bit for bit
    /// [`RbqQuery::finish_factors`]'s estimate, without the error's scale.
    #[inline]
    pub fn distance_factors(&self, factors: &[u8], ip: u64, sum_u: u64) -> f32 {
        let (f_add, f_rescale) = self.factors.read_estimate(factors);
        let two_h = (1u64 << self.bits) - 1;
        let a = 2 * ip as i64 - (two_h * self.sum_q) as i64;
        let b = 2 * sum_u as i64 - (two_h * self.pad) as i64;
        let y_q = 0.5 * self.delta * a as f32 + 0.5 * self.low * b as f32;
        (f_add + self.q_const) + f_rescale * y_q
    }

    /// The query's bit planes (`planes[b·words + w]`, least significant plane first), words
    /// per plane and bits per value (FastScan builds its tables from them).
    pub fn query_planes(&self) -> (&[u64], usize, u32) {
        (&self.planes, self.words, self.qbits)
    }

    /// Words of [`RbqQuery::gpu_words`].
    pub fn gpu_len(&self) -> usize {
        GPU_HEADER + self.qbits as usize * self.words * 2
    }

    /// Whether every integer of an estimate converts to `f32` exactly and fits the GPU
    /// kernel's `u32` / `i32` arithmetic: `2·D·(2^B − 1)·(2^{B_q} − 1) < 2^24`.
    pub fn gpu_exact(&self) -> bool {
        let most =
            2u128 * u128::from(self.pad) * ((1u128 << self.bits) - 1) * ((1u128 << self.qbits) - 1);
        most < 1 << 24
    }

    /// Appends the query as the GPU kernel reads it (`accel/gpu/score_rbq.wgsl`): a header of
    /// 16 words (`B`, words of 32 bits per plane, `B_q`, flags — 1: half-float factors, 2:
    /// inner product —, `Σ q_u`, `D`, 0, 0, then the `f32` bits of `Δ/2`, `v_l/2`, `q_const`,
    /// the layout's `add`, `scale`, 0, the factors' word offset in a code, 0) and the query's
    /// bit planes as 32-bit words.
    pub fn gpu_words(&self, out: &mut Vec<u32>) {
        let (compact, ip, add, scale, _) = self.factors.parts();
        let w32 = (self.words * 2) as u32;
        let flags = u32::from(compact) | (u32::from(ip) << 1);
        out.extend_from_slice(&[
            self.bits,
            w32,
            self.qbits,
            flags,
            self.sum_q as u32,
            self.pad as u32,
            0,
            0,
            (0.5 * self.delta).to_bits(),
            (0.5 * self.low).to_bits(),
            self.q_const.to_bits(),
            add.to_bits(),
            scale.to_bits(),
            0,
            self.bits * w32,
            0,
        ]);
        for &w in &self.planes {
            out.push(w as u32);
            out.push((w >> 32) as u32);
        }
    }

    /// Bits per data dimension `B` of the codes this query scores.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The estimated distance only.
    #[inline]
    pub fn distance(&self, code: &[u8]) -> f32 {
        let (ip, sum_u) = self.integer_parts(code);
        self.distance_factors(&code[self.bits as usize * self.words * 8..], ip, sum_u)
    }
}

impl DistanceTable for RbqQuery {
    fn code_bytes(&self) -> usize {
        RbqQuery::code_bytes(self)
    }
    fn distance(&self, code: &[u8]) -> f32 {
        RbqQuery::distance(self, code)
    }
}

impl RaBitQuantizer {
    /// The prepared query of `query`.
    pub fn query<T: Element>(&self, query: &[T]) -> Result<RbqQuery, RbqError> {
        let mut q = RbqQuery::default();
        self.fill_query(query, &mut q)?;
        Ok(q)
    }

    /// Prepares `query` into `out` (reusing its buffers).
    pub fn fill_query<T: Element>(&self, query: &[T], out: &mut RbqQuery) -> Result<(), RbqError> {
        self.check_len("query", self.dim(), query.len())?;
        let mut centred = vec![0f32; self.dim()];
        if !self.centre(query, &mut centred) {
            return Err(RbqError::NonFinite { row: 0 });
        }
        let pad = self.pad();
        let mut rot = vec![0f32; pad];
        self.rotation.apply(&centred, &mut rot);
        let norm_sq = Self::dot(&centred, &centred);
        out.q_const = match self.metric {
            crate::kernels::Metric::L2 => norm_sq,
            crate::kernels::Metric::InnerProduct => {
                // −⟨q_r, c⟩ = −⟨q_r − c, c⟩ − ‖c‖².
                -Self::dot(&centred, &self.centroid) - Self::dot(&self.centroid, &self.centroid)
            }
            crate::kernels::Metric::Cosine => 0.5 * norm_sq,
        };
        out.q_norm = norm_sq.sqrt();
        if !(out.q_const.is_finite() && norm_sq.is_finite() && rot.iter().all(|v| v.is_finite())) {
            return Err(RbqError::Overflow);
        }
        let (lo, hi) = rot
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                (l.min(v), h.max(v))
            });
        let qbits = query_bits(self.bits);
        let levels = ((1u32 << qbits) - 1) as f32;
        let delta = if hi > lo { (hi - lo) / levels } else { 1.0 };
        out.bits = u32::from(self.bits);
        out.factors = self.factors();
        out.level = crate::quant::rabitq::kernels::level();
        out.words = pad / 64;
        out.delta = delta;
        out.low = lo;
        out.pad = pad as u64;
        out.planes.clear();
        out.qbits = qbits;
        out.planes.resize(qbits as usize * out.words, 0);
        let mut rng = ROUNDING_SEED;
        let mut sum = 0u64;
        for (j, &v) in rot.iter().enumerate() {
            // xorshift64*: a uniform r in [0, 1) per coordinate.
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            let r = (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u32 << 24) as f32;
            let qu = (((v - lo) / delta + r).floor()).clamp(0.0, levels) as u64;
            sum += qu;
            for b in 0..qbits as usize {
                out.planes[b * out.words + j / 64] |= ((qu >> b) & 1) << (j % 64);
            }
        }
        out.sum_q = sum;
        Ok(())
    }
}

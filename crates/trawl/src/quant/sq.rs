//! Scalar-quantised refinement codes: every vector as `dim` codes of 4 or 8 bits (per
//! dimension a uniform grid over the values seen), held in memory beside the PQ codes.
//!
//! They sharpen the distance estimates that order a decoupled layout's re-rank: its vectors
//! are read from disk in the order of these estimates, and the error-bound stop
//! ([`crate::kinds::graph::search::RerankParams::bound`]) sees a far smaller error than coarse PQ's, so
//! fewer vectors are read for the same recall. They never produce a result distance: every
//! result is re-ranked by its full-precision vector.
//!
//! Distances use one weighted sum per vector: with `v̂_d = a_d + c_d · s_d` (grid offset and
//! step per dimension), `⟨q, v̂⟩ = Σ q_d a_d + Σ (q_d s_d) c_d`; the query's weights
//! `q_d s_d` and constant come first ([`RefineCodes::prepare`]), and the squared norm of each
//! reconstruction is stored (4 bytes per vector) for L2 and cosine.
//!
//! 4-bit codes hold dimension `j` in the low nibble of byte `j` and dimension `j + ⌈dim/2⌉`
//! in its high nibble, so a vector's sum runs over bytes with two weight streams.

use crate::kernels::Metric;

/// Bits per dimension a refinement code may use.
pub const REFINE_BITS: [u8; 2] = [4, 8];

/// Per-dimension value ranges, learned from the vectors before they are coded.
#[derive(Debug, Clone)]
pub struct RangeBuilder {
    lo: Vec<f32>,
    hi: Vec<f32>,
    seen: u64,
}

impl RangeBuilder {
    /// Ranges over `dim` dimensions, empty.
    pub fn new(dim: usize) -> Self {
        Self {
            lo: vec![f32::INFINITY; dim],
            hi: vec![f32::NEG_INFINITY; dim],
            seen: 0,
        }
    }
    /// Widens the ranges to hold `v` (`dim` values; non-finite values are skipped).
    pub fn observe(&mut self, v: &[f32]) {
        for ((l, h), &x) in self.lo.iter_mut().zip(&mut self.hi).zip(v) {
            if x.is_finite() {
                *l = l.min(x);
                *h = h.max(x);
            }
        }
        self.seen += 1;
    }
    /// Vectors observed.
    pub fn seen(&self) -> u64 {
        self.seen
    }
}

/// Refinement codes of `n` vectors.
#[derive(Debug, Clone)]
pub struct RefineCodes {
    dim: usize,
    bits: u8,
    metric: Metric,
    /// Grid offset `a_d` (the centre of cell 0) and step `s_d` per dimension.
    offset: Vec<f32>,
    step: Vec<f32>,
    code_bytes: usize,
    codes: Vec<u8>,
    /// `|v̂|²` of every vector.
    norms: Vec<f32>,
    /// The CPU has AVX2 and FMA: the sums run in the 8-lane build.
    wide: bool,
}

/// One query's side of the refined distances.
#[derive(Debug, Clone, Default)]
pub struct RefineQuery {
    /// `q_d s_d`, laid out as the codes are (4 bits: low-nibble dimensions, then high).
    w: Vec<f32>,
    /// `Σ q_d a_d`.
    c0: f32,
    /// `|q|²`.
    qn2: f32,
}

impl RefineCodes {
    /// Empty codes for `n` vectors of `dim` dimensions at `bits` per dimension (4 or 8) on the
    /// grids of `ranges`; fill them with [`RefineCodes::set`].
    pub fn new(ranges: &RangeBuilder, bits: u8, metric: Metric, n: usize) -> Result<Self, String> {
        if !REFINE_BITS.contains(&bits) {
            return Err(format!(
                "refinement codes take 4 or 8 bits per dimension, not {bits}"
            ));
        }
        let dim = ranges.lo.len();
        if dim == 0 {
            return Err("refinement codes need at least one dimension".into());
        }
        let levels = f32::from(if bits == 4 { 15u8 } else { 255u8 });
        let mut offset = Vec::with_capacity(dim);
        let mut step = Vec::with_capacity(dim);
        for (&l, &h) in ranges.lo.iter().zip(&ranges.hi) {
            let (l, h) = if l.is_finite() && h.is_finite() && h >= l {
                (l, h)
            } else {
                (0.0, 0.0)
            };
            let s = (h - l) / levels;
            offset.push(l);
            step.push(s);
        }
        let code_bytes = if bits == 4 { dim.div_ceil(2) } else { dim };
        Ok(Self {
            dim,
            bits,
            metric,
            offset,
            step,
            code_bytes,
            codes: vec![0; n * code_bytes],
            norms: vec![0.0; n],
            wide: wide_cpu(),
        })
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.norms.len()
    }
    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.norms.is_empty()
    }
    /// Bits per dimension.
    pub fn bits(&self) -> u8 {
        self.bits
    }
    /// Bytes of one vector's code (its norm aside).
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }
    /// Memory held: codes, norms and grids.
    pub fn heap_bytes(&self) -> u64 {
        (self.codes.len() + 4 * self.norms.len() + 8 * self.dim) as u64
    }

    /// The grids (offset and step per dimension), the codes (`len() · code_bytes()`) and
    /// the reconstructions' squared norms, as [`RefineCodes::from_parts`] takes them.
    pub fn parts(&self) -> (&[f32], &[f32], &[u8], &[f32]) {
        (&self.offset, &self.step, &self.codes, &self.norms)
    }

    /// Codes of `bits` per dimension from their parts ([`RefineCodes::parts`]); the lengths
    /// must agree (`dim` grid values each, `codes.len()` a multiple of the code bytes and
    /// `norms` one per code) and every grid value be finite with a step ≥ 0.
    pub fn from_parts(
        bits: u8,
        metric: Metric,
        offset: Vec<f32>,
        step: Vec<f32>,
        codes: Vec<u8>,
        norms: Vec<f32>,
    ) -> Result<Self, String> {
        if !REFINE_BITS.contains(&bits) {
            return Err(format!(
                "refinement codes take 4 or 8 bits per dimension, not {bits}"
            ));
        }
        let dim = offset.len();
        if dim == 0 || step.len() != dim {
            return Err(format!(
                "{} grid offsets and {} steps: one of each per dimension",
                offset.len(),
                step.len()
            ));
        }
        if offset.iter().any(|o| !o.is_finite())
            || step.iter().any(|s| !(s.is_finite() && *s >= 0.0))
        {
            return Err("a grid offset or step is not finite, or a step is negative".into());
        }
        let code_bytes = if bits == 4 { dim.div_ceil(2) } else { dim };
        if codes.len() != norms.len() * code_bytes {
            return Err(format!(
                "{} code bytes for {} vectors of {code_bytes} B",
                codes.len(),
                norms.len()
            ));
        }
        Ok(Self {
            dim,
            bits,
            metric,
            offset,
            step,
            code_bytes,
            codes,
            norms,
            wide: wide_cpu(),
        })
    }

    fn cell(&self, d: usize, x: f32) -> u8 {
        let max = if self.bits == 4 { 15.0 } else { 255.0 };
        let s = self.step[d];
        if s <= 0.0 || !x.is_finite() {
            return 0;
        }
        ((x - self.offset[d]) / s).round().clamp(0.0, max) as u8
    }

    /// Codes vector `i` (`dim` values).
    pub fn set(&mut self, i: usize, v: &[f32]) {
        let cb = self.code_bytes;
        let half = cb;
        let mut norm = 0.0f32;
        let mut code = vec![0u8; cb];
        for (d, &x) in v.iter().enumerate().take(self.dim) {
            let c = self.cell(d, x);
            let r = self.offset[d] + f32::from(c) * self.step[d];
            norm += r * r;
            if self.bits == 8 {
                code[d] = c;
            } else if d < half {
                code[d] |= c;
            } else {
                code[d - half] |= c << 4;
            }
        }
        self.codes[i * cb..(i + 1) * cb].copy_from_slice(&code);
        self.norms[i] = norm;
    }

    /// Copies vector `j`'s code from `other` (codes on the same grids) into slot `i`.
    pub fn copy_from(&mut self, i: usize, other: &RefineCodes, j: usize) {
        let cb = self.code_bytes;
        if let (Some(src), Some(&norm)) =
            (other.codes.get(j * cb..(j + 1) * cb), other.norms.get(j))
        {
            self.codes[i * cb..(i + 1) * cb].copy_from_slice(src);
            self.norms[i] = norm;
        }
    }

    /// Prepares `q` (`dim` values) for [`RefineCodes::distance`].
    pub fn prepare(&self, q: &[f32], out: &mut RefineQuery) {
        out.w.clear();
        let pad = if self.bits == 4 {
            2 * self.code_bytes
        } else {
            self.dim
        };
        out.w.resize(pad, 0.0);
        let mut c0 = 0.0f32;
        let mut qn2 = 0.0f32;
        for (d, &x) in q.iter().enumerate().take(self.dim) {
            out.w[d] = x * self.step[d];
            c0 += x * self.offset[d];
            qn2 += x * x;
        }
        out.c0 = c0;
        out.qn2 = qn2;
    }

    /// Hints the CPU to load vector `i`'s code and norm: a batch of estimates prefetched
    /// first overlaps its cache misses.
    #[inline]
    pub fn prefetch(&self, i: usize) {
        let cb = self.code_bytes;
        if let Some(code) = self.codes.get(i * cb..(i + 1) * cb) {
            crate::mem::prefetch_read(code);
            crate::mem::prefetch_read(bytemuck::cast_slice(&self.norms[i..i + 1]));
        }
    }

    /// The estimated distance (of this codes' metric) from the prepared query to vector `i`.
    #[inline]
    pub fn distance(&self, q: &RefineQuery, i: usize) -> f32 {
        let cb = self.code_bytes;
        let Some(code) = self.codes.get(i * cb..(i + 1) * cb) else {
            return f32::INFINITY;
        };
        let dot = q.c0 + self.weighted(code, &q.w);
        let vn2 = self.norms[i];
        match self.metric {
            Metric::L2 => (q.qn2 - 2.0 * dot + vn2).max(0.0),
            Metric::InnerProduct => -dot,
            Metric::Cosine => {
                let den = (q.qn2 * vn2).sqrt();
                if den > 0.0 {
                    1.0 - dot / den
                } else {
                    1.0
                }
            }
        }
    }
}

impl RefineCodes {
    /// `Σ w_d c_d` of one code: the AVX2 build when the CPU has it.
    #[inline]
    fn weighted(&self, code: &[u8], w: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only when the CPU reports AVX2 and FMA.
            return unsafe { weighted_avx2(self.bits, code, w) };
        }
        weighted_any(self.bits, code, w)
    }
}

/// Whether the CPU runs [`weighted_avx2`].
fn wide_cpu() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// [`weighted_any`] compiled for AVX2 + FMA (the same code, vectorised 8 lanes wide).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn weighted_avx2(bits: u8, code: &[u8], w: &[f32]) -> f32 {
    weighted_any(bits, code, w)
}

/// `Σ w_d c_d` of one code of `bits` per dimension (`w` laid out as the code).
#[inline(always)]
fn weighted_any(bits: u8, code: &[u8], w: &[f32]) -> f32 {
    if bits == 8 {
        weighted8(code, w)
    } else {
        let (lo, hi) = w.split_at(code.len());
        weighted4(code, lo, hi)
    }
}

/// `Σ w_j c_j` over 8-bit codes, eight running sums (vectorised by the compiler).
#[inline(always)]
fn weighted8(code: &[u8], w: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut cc = code.chunks_exact(8);
    let mut wc = w.chunks_exact(8);
    for (c, w) in (&mut cc).zip(&mut wc) {
        for k in 0..8 {
            acc[k] += f32::from(c[k]) * w[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (&c, &w) in cc.remainder().iter().zip(wc.remainder()) {
        s += f32::from(c) * w;
    }
    s
}

/// `Σ lo_j (c_j & 15) + hi_j (c_j >> 4)` over 4-bit codes packed two per byte.
#[inline(always)]
fn weighted4(code: &[u8], lo: &[f32], hi: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut cc = code.chunks_exact(8);
    let mut lc = lo.chunks_exact(8);
    let mut hc = hi.chunks_exact(8);
    for ((c, l), h) in (&mut cc).zip(&mut lc).zip(&mut hc) {
        for k in 0..8 {
            acc[k] += f32::from(c[k] & 15) * l[k] + f32::from(c[k] >> 4) * h[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for ((&c, &l), &h) in cc
        .remainder()
        .iter()
        .zip(lc.remainder())
        .zip(hc.remainder())
    {
        s += f32::from(c & 15) * l + f32::from(c >> 4) * h;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::distance;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn data(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                (0..dim)
                    .map(|d| rng.gen_range(-1.0..1.0) * (1.0 + d as f32 * 0.1))
                    .collect()
            })
            .collect()
    }

    fn codes(v: &[Vec<f32>], bits: u8, metric: Metric) -> RefineCodes {
        let mut r = RangeBuilder::new(v[0].len());
        for x in v {
            r.observe(x);
        }
        let mut c = RefineCodes::new(&r, bits, metric, v.len()).unwrap();
        for (i, x) in v.iter().enumerate() {
            c.set(i, x);
        }
        c
    }

    /// The estimate equals the exact distance to the reconstruction, for every metric, both
    /// widths and odd dimensions; and it is within the grid's error bound of the distance to
    /// the vector itself (a coordinate is off by at most half a step: for inner product
    /// `|Δ| ≤ Σ |q_d| s_d / 2`; for L2, with `e = |v − v̂| ≤ √Σ (s_d/2)²`,
    /// `|Δ| ≤ e (2 √d + e)`).
    #[test]
    fn estimates_match_the_reconstruction_and_stay_within_the_grid_bound() {
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            for bits in [4u8, 8] {
                for dim in [1usize, 7, 33] {
                    let v = data(200, dim, 3);
                    let q = data(5, dim, 4);
                    let c = codes(&v, bits, metric);
                    let mut rq = RefineQuery::default();
                    let e = c.step.iter().map(|s| s * s / 4.0).sum::<f32>().sqrt();
                    for qv in &q {
                        c.prepare(qv, &mut rq);
                        let ip_bound: f32 =
                            qv.iter().zip(&c.step).map(|(x, s)| x.abs() * s / 2.0).sum();
                        for (i, x) in v.iter().enumerate() {
                            let rec: Vec<f32> = (0..dim)
                                .map(|d| {
                                    let cell = c.cell(d, x[d]);
                                    c.offset[d] + f32::from(cell) * c.step[d]
                                })
                                .collect();
                            let want = distance(metric, qv.as_slice(), rec.as_slice());
                            let got = c.distance(&rq, i);
                            assert!(
                                (got - want).abs() <= 1e-3 * (1.0 + want.abs()),
                                "{metric:?} {bits} bits dim {dim}: {got} vs {want}"
                            );
                            let exact = distance(metric, qv.as_slice(), x.as_slice());
                            let slack = 1e-3 * (1.0 + exact.abs());
                            match metric {
                                Metric::InnerProduct => assert!(
                                    (got - exact).abs() <= ip_bound + slack,
                                    "{bits} bits dim {dim}: {got} vs {exact} (bound {ip_bound})"
                                ),
                                Metric::L2 => {
                                    let bound = e * (2.0 * exact.sqrt() + e);
                                    assert!(
                                        (got - exact).abs() <= bound + slack,
                                        "{bits} bits dim {dim}: {got} vs {exact} (bound {bound})"
                                    );
                                }
                                Metric::Cosine => {}
                            }
                        }
                    }
                }
            }
        }
    }

    /// The AVX2 build (when the CPU has it) and the portable sums agree.
    #[test]
    fn both_builds_of_the_sum_agree() {
        for bits in [4u8, 8] {
            for dim in [3usize, 16, 100] {
                let v = data(50, dim, 9);
                let c = codes(&v, bits, Metric::L2);
                let mut rq = RefineQuery::default();
                c.prepare(&v[0], &mut rq);
                for i in 0..v.len() {
                    let code = &c.codes[i * c.code_bytes..(i + 1) * c.code_bytes];
                    let (a, b) = (c.weighted(code, &rq.w), weighted_any(bits, code, &rq.w));
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "{bits} {dim}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_widths_and_empty_ranges_are_refused_or_harmless() {
        let r = RangeBuilder::new(4);
        assert!(RefineCodes::new(&r, 3, Metric::L2, 1).is_err());
        assert!(RefineCodes::new(&RangeBuilder::new(0), 4, Metric::L2, 1).is_err());
        // No vector observed: a zero grid, finite estimates.
        let mut c = RefineCodes::new(&r, 4, Metric::L2, 2).unwrap();
        c.set(0, &[1.0, f32::NAN, 2.0, 3.0]);
        let mut q = RefineQuery::default();
        c.prepare(&[1.0, 1.0, 1.0, 1.0], &mut q);
        assert_eq!(c.distance(&q, 0), 4.0);
        assert_eq!(c.distance(&q, 7), f32::INFINITY);
        assert_eq!(c.heap_bytes(), 2 * 2 + 2 * 4 + 32);
    }
}

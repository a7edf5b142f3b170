//! Encoding vectors into RaBitQ codes: the exact search for the closest grid direction
//! (ERQ §3.1, the enumeration of critical rescaling factors) and the per-vector factors.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use crate::data::Matrix;
use crate::kernels::Element;
use crate::progress::Control;
use crate::quant::pq::PqCodes;
use crate::quant::rabitq::{RaBitQuantizer, RbqError};

/// Rows per parallel encoding task (fixed, so the work split never depends on threads).
const ROWS_PER_TASK: usize = 1024;

/// An event of the enumeration: coordinate `j` moves to level `k` at rescaling `t`.
#[derive(Clone, Copy)]
pub(crate) struct Event {
    t: f32,
    j: u32,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Reversed, so the max-heap pops the smallest `t` (ties: the smallest `j`).
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.j.cmp(&self.j))
    }
}

/// Scratch space of one encoder thread.
#[derive(Default)]
pub(crate) struct Scratch {
    centred: Vec<f32>,
    rotated: Vec<f32>,
    levels: Vec<u8>,
    heap: Vec<Event>,
}

/// The levels `k_j ∈ [0, K − 1]` (`K = 2^{B−1}`) of `|y_j| = k_j + ½` maximising
/// `⟨y, |o|⟩/‖y‖` over rescalings `t > 0` with `k_j(t) = min(⌊t·|o_j|⌋, K − 1)` (ERQ §3.1:
/// the code for a fixed `t` is the rounding of `t·o` onto the grid; the best `t` is one of the
/// critical values `k/|o_j|` at which a coordinate changes level, and walking them in order
/// updates `⟨y, |o|⟩` and `‖y‖²` in O(1) each: O(D·K·log D) in all). Writes the levels into
/// `levels` and returns `⟨y, |o|⟩` and `‖y‖²` of the best code.
pub(crate) fn best_levels(
    abs: &[f32],
    k_max: u32,
    levels: &mut [u8],
    buf: &mut Vec<Event>,
) -> (f64, f64) {
    levels.fill(0);
    let mut ip: f64 = abs.iter().map(|&a| 0.5 * f64::from(a)).sum();
    let mut sq: f64 = 0.25 * abs.len() as f64;
    if k_max <= 1 {
        return (ip, sq);
    }
    buf.clear();
    for (j, &a) in abs.iter().enumerate() {
        if a > 0.0 {
            buf.push(Event {
                t: 1.0 / a,
                j: j as u32,
            });
        }
    }
    let mut heap = BinaryHeap::from(std::mem::take(buf));
    // The best prefix of the event sequence: replayed at the end.
    let (mut best, mut best_events, mut events) = (ip / sq.sqrt(), 0usize, 0usize);
    let mut order = Vec::new();
    while let Some(Event { j, .. }) = heap.pop() {
        let ju = j as usize;
        let k = u32::from(levels[ju]) + 1;
        // Level k − 1 + ½ → k + ½: ⟨y, |o|⟩ grows by |o_j|, ‖y‖² by 2k.
        ip += f64::from(abs[ju]);
        sq += 2.0 * f64::from(k);
        levels[ju] = k as u8;
        order.push(j);
        events += 1;
        let cos = ip / sq.sqrt();
        if cos > best {
            (best, best_events) = (cos, events);
        }
        if k + 1 < k_max {
            heap.push(Event {
                t: (k + 1) as f32 / abs[ju],
                j,
            });
        }
    }
    *buf = heap.into_vec();
    levels.fill(0);
    for &j in &order[..best_events] {
        levels[j as usize] += 1;
    }
    let ip = abs
        .iter()
        .zip(levels.iter())
        .map(|(&a, &k)| (f64::from(k) + 0.5) * f64::from(a))
        .sum();
    let sq = levels.iter().map(|&k| (f64::from(k) + 0.5).powi(2)).sum();
    (ip, sq)
}

impl RaBitQuantizer {
    /// Encodes one prepared vector (`centred` = `x − c`, `dim` values) into `out`
    /// ([`RaBitQuantizer::code_bytes`]).
    pub(crate) fn encode_centred(&self, s: &mut Scratch, out: &mut [u8]) {
        let pad = self.pad();
        let bits = u32::from(self.bits);
        s.rotated.resize(pad, 0.0);
        self.rotation.apply(&s.centred, &mut s.rotated);
        let norm = Self::dot(&s.centred, &s.centred).sqrt();
        let neg_rc = self.neg_rc(&s.centred);
        let layout = self.factors();
        let planes = usize::from(self.bits) * self.plane_bytes();
        out.fill(0);
        if norm == 0.0 || !norm.is_finite() {
            // The vector is the centroid: every estimate is the exact `f_add + q_const`.
            layout.write(&mut out[planes..], 0.0, neg_rc, 0.0, 0.0);
            return;
        }
        let inv = 1.0 / norm;
        s.rotated.iter_mut().for_each(|v| *v *= inv);
        let abs: Vec<f32> = s.rotated.iter().map(|v| v.abs()).collect();
        s.levels.resize(pad, 0);
        let k_max = 1u32 << (bits - 1);
        let (ip, sq) = best_levels(&abs, k_max, &mut s.levels, &mut s.heap);
        // u = K + k for positive coordinates, K − 1 − k for the others (y = u − (2^B − 1)/2).
        let pb = self.plane_bytes();
        for (j, (&v, &k)) in s.rotated.iter().zip(s.levels.iter()).enumerate() {
            let u = if v > 0.0 {
                k_max + u32::from(k)
            } else {
                k_max - 1 - u32::from(k)
            };
            for p in 0..bits {
                if (u >> (bits - 1 - p)) & 1 == 1 {
                    out[p as usize * pb + j / 8] |= 1 << (j % 8);
                }
            }
        }
        // ⟨y, o′⟩ = Σ |y_j|·|o′_j| (signs agree); ⟨x̄, o′⟩ = that / ‖y‖.
        let cos = (ip / sq.sqrt()).min(1.0);
        let tan = ((1.0 - cos * cos).max(0.0)).sqrt() / cos;
        layout.write(
            &mut out[planes..],
            norm,
            neg_rc,
            (1.0 / ip) as f32,
            tan as f32,
        );
    }

    /// Encodes one vector into `out` (`code_bytes()` long).
    pub fn encode_one<T: Element>(&self, x: &[T], out: &mut [u8]) -> Result<(), RbqError> {
        self.check_len("vector", self.dim(), x.len())?;
        self.check_len("code", self.code_bytes(), out.len())?;
        let mut s = Scratch {
            centred: vec![0.0; self.dim()],
            ..Scratch::default()
        };
        if !self.centre(x, &mut s.centred) {
            return Err(RbqError::NonFinite { row: 0 });
        }
        self.encode_centred(&mut s, out);
        Ok(())
    }

    /// Encodes every row of `data` in parallel into `n × code_bytes` contiguous bytes.
    pub fn encode<T: Element>(&self, data: &Matrix<T>, ctl: &Control) -> Result<PqCodes, RbqError> {
        self.check_len("vector", self.dim(), data.dim())?;
        let m = self.code_bytes();
        let mut codes = vec![0u8; data.n() * m];
        let bar = ctl.bar("RaBitQ encode", data.n() as u64);
        codes
            .par_chunks_mut(ROWS_PER_TASK * m)
            .enumerate()
            .try_for_each(|(t, out)| {
                ctl.check()?;
                let mut s = Scratch {
                    centred: vec![0.0; self.dim()],
                    ..Scratch::default()
                };
                for (i, o) in out.chunks_exact_mut(m).enumerate() {
                    let row = t * ROWS_PER_TASK + i;
                    if !self.centre(data.row(row), &mut s.centred) {
                        return Err(RbqError::NonFinite { row });
                    }
                    self.encode_centred(&mut s, o);
                }
                let rows = out.len() / m;
                data.release_rows(t * ROWS_PER_TASK, t * ROWS_PER_TASK + rows);
                bar.inc(rows as u64);
                Ok(())
            })?;
        bar.finish_and_clear();
        Ok(PqCodes::from_vec(codes, m, 256).expect("every byte is below 256"))
    }

    pub(crate) fn check_len(
        &self,
        what: &'static str,
        expected: usize,
        found: usize,
    ) -> Result<(), RbqError> {
        if expected == found {
            Ok(())
        } else {
            Err(RbqError::LengthMismatch {
                what,
                expected,
                found,
            })
        }
    }
}

impl RaBitQuantizer {
    /// The vector `code` approximates, into `out` (`dim` values): `c + ‖r‖·Pᵀ(y/‖y‖)`, `‖r‖`
    /// read from the factors. For cosine it is the normalised vector's approximation.
    pub fn decode(&self, code: &[u8], out: &mut [f32]) -> Result<(), RbqError> {
        self.check_len("code", self.code_bytes(), code.len())?;
        self.check_len("output", self.dim(), out.len())?;
        let (pad, bits, pb) = (self.pad(), usize::from(self.bits), self.plane_bytes());
        let half = ((1u32 << bits) - 1) as f32 / 2.0;
        let mut y = vec![0f32; pad];
        for (j, v) in y.iter_mut().enumerate() {
            let mut u = 0u32;
            for p in 0..bits {
                u = (u << 1) | u32::from(code[p * pb + j / 8] >> (j % 8) & 1);
            }
            *v = u as f32 - half;
        }
        let y_norm = Self::dot(&y, &y).sqrt();
        let (r_norm, ..) = self.factors().stored(&code[bits * pb..]);
        let mut back = vec![0f32; self.dim()];
        self.rotation.apply_transpose(&y, &mut back);
        let k = if y_norm > 0.0 && r_norm.is_finite() {
            r_norm / y_norm
        } else {
            0.0
        };
        for ((o, b), c) in out.iter_mut().zip(&back).zip(&self.centroid) {
            *o = c + k * b;
        }
        Ok(())
    }
}

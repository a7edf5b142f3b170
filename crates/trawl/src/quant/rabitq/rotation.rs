//! The random orthogonal rotation of RaBitQ: rounds of random sign flips and fast
//! Walsh–Hadamard transforms over a dimension padded to a multiple of 64.
//!
//! RaBitQ (Gao & Long, SIGMOD'24, §3.1.2) draws a random orthogonal matrix `P` and quantises
//! `P⁻¹ o`; its analysis assumes `P` is uniform over the orthogonal group. A dense `P` costs
//! `D²` per vector and per query; trawl uses the structured rotation common to the RaBitQ
//! implementations instead: `rounds` times, flip the signs of the coordinates by a random
//! ±1 diagonal and apply the normalised Hadamard transform `H/√n` to the first `n` and then to
//! the last `n` coordinates, `n` the largest power of two not above the padded dimension
//! (when the padded dimension is a power of two both windows are the whole vector and one
//! transform is applied). Every step is orthogonal, so the product is: distances and inner
//! products are kept exactly (up to `f32` rounding), which the tests check; how close the
//! coordinates come to those of a uniform rotation is what the estimator's error bound
//! needs, and the tests check the bound's coverage empirically.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Rounds of signs and transforms [`FhtRotation::random`] draws.
pub const DEFAULT_ROUNDS: usize = 4;

/// A structured random rotation of `pad`-dimensional space (`pad` a multiple of 64) applied to
/// vectors of `dim ≤ pad` values, zero-padded.
#[derive(Debug, Clone, PartialEq)]
pub struct FhtRotation {
    dim: usize,
    pad: usize,
    /// `rounds × pad / 64` words: bit `j` of round `r` set = coordinate `j` is negated.
    signs: Vec<u64>,
}

/// The padded dimension of `dim`: the next multiple of 64 (at least 64).
pub fn padded_dim(dim: usize) -> usize {
    dim.max(1).div_ceil(64) * 64
}

impl FhtRotation {
    /// A rotation drawn from `seed`, with `rounds` rounds.
    pub fn random(dim: usize, rounds: usize, seed: u64) -> Self {
        let pad = padded_dim(dim);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7261_6269_7471_u64);
        let signs = (0..rounds * pad / 64).map(|_| rng.gen::<u64>()).collect();
        Self { dim, pad, signs }
    }

    /// Assembles a rotation from its parts; `None` when inconsistent.
    pub fn from_parts(dim: usize, pad: usize, signs: Vec<u64>) -> Option<Self> {
        let ok = dim >= 1
            && pad == padded_dim(dim)
            && !signs.is_empty()
            && signs.len().is_multiple_of(pad / 64);
        ok.then_some(Self { dim, pad, signs })
    }

    /// Input dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Output (padded) dimension.
    pub fn pad(&self) -> usize {
        self.pad
    }

    /// Rounds.
    pub fn rounds(&self) -> usize {
        self.signs.len() / (self.pad / 64)
    }

    /// The sign words, round-major.
    pub fn signs(&self) -> &[u64] {
        &self.signs
    }

    /// `out = P x` for `x` of `dim` values (`out` has `pad`).
    pub fn apply(&self, x: &[f32], out: &mut [f32]) {
        debug_assert!(x.len() >= self.dim && out.len() >= self.pad);
        let out = &mut out[..self.pad];
        out[..self.dim].copy_from_slice(&x[..self.dim]);
        out[self.dim..].fill(0.0);
        let n = window(self.pad);
        for round in self.signs.chunks_exact(self.pad / 64) {
            flip(out, round);
            fwht(&mut out[..n]);
            if n < self.pad {
                let start = self.pad - n;
                fwht(&mut out[start..]);
            }
        }
    }

    /// `out = Pᵀ y` (the inverse): `y` has `pad` values, `out` the first `dim` of the result
    /// (the rest are those of the padding and are dropped).
    pub fn apply_transpose(&self, y: &[f32], out: &mut [f32]) {
        let mut buf = y[..self.pad].to_vec();
        let n = window(self.pad);
        for round in self.signs.chunks_exact(self.pad / 64).rev() {
            if n < self.pad {
                let start = self.pad - n;
                fwht(&mut buf[start..]);
            }
            fwht(&mut buf[..n]);
            flip(&mut buf, round);
        }
        out[..self.dim].copy_from_slice(&buf[..self.dim]);
    }
}

/// The largest power of two not above `pad`.
fn window(pad: usize) -> usize {
    1usize << (usize::BITS - 1 - pad.leading_zeros())
}

fn flip(v: &mut [f32], words: &[u64]) {
    for (chunk, &w) in v.chunks_exact_mut(64).zip(words) {
        for (j, x) in chunk.iter_mut().enumerate() {
            // Negation by the sign bit: exact, branch-free.
            let bit = ((w >> j) & 1) as u32;
            *x = f32::from_bits(x.to_bits() ^ (bit << 31));
        }
    }
}

/// The normalised fast Walsh–Hadamard transform of `v` (length a power of two), in place;
/// `H/√n` is symmetric and orthogonal, so it is its own inverse.
fn fwht(v: &mut [f32]) {
    let n = v.len();
    let mut h = 1;
    while h < n {
        for block in v.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (x, y) in a.iter_mut().zip(b.iter_mut()) {
                let (s, d) = (*x + *y, *x - *y);
                *x = s;
                *y = d;
            }
        }
        h *= 2;
    }
    let scale = 1.0 / (n as f32).sqrt();
    v.iter_mut().for_each(|x| *x *= scale);
}

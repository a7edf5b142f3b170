//! The per-vector factors stored after a RaBitQ code's bit planes, and how the estimator's
//! `f_add`, `f_rescale` and `f_err` are made from them.
//!
//! What is stored is what does not follow from the metric: `‖r‖` (`r = o_r − c`), `1/⟨y, o′⟩`,
//! `tan θ` (`cos θ = ⟨x̄, o′⟩`) and, for inner product only, `−⟨r, c⟩`:
//!
//! | metric | bytes, `B ≤ 4` | bytes, `B > 4` | `f_add` | `f_rescale` | `f_err` |
//! |---|---:|---:|---|---|---|
//! | L2 | 8 | 12 | `‖r‖²` | `−2‖r‖/⟨y, o′⟩` | `2‖r‖ tan θ/√(D − 1)` |
//! | cosine | 8 | 12 | `½‖r‖²` | `−‖r‖/⟨y, o′⟩` | `‖r‖ tan θ/√(D − 1)` |
//! | inner product | 12 | 16 | `−⟨r, c⟩` | `−‖r‖/⟨y, o′⟩` | `‖r‖ tan θ/√(D − 1)` |
//!
//! `‖r‖` and `−⟨r, c⟩` are `f32`. `1/⟨y, o′⟩` and `tan θ` scale the estimated term and its
//! bound, not the vector's length, so their relative precision is what matters: with `B ≤ 4`
//! they are IEEE half floats (relative error `2⁻¹¹`, two orders of magnitude below the
//! estimator's own error at 4 bits, ~1/√D · 2⁻⁴), which saves 4 bytes per vector — 20–40 % of a
//! 1-bit code of 64–128 dimensions; with more bits, whose estimates are finer, `f32`.
//! Field order: `‖r‖`, then `−⟨r, c⟩` (inner product), then `1/⟨y, o′⟩`, then `tan θ`.

use crate::kernels::Metric;

/// How a quantiser's factors are laid out ([`FactorLayout::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FactorLayout {
    /// Half floats for `1/⟨y, o′⟩` and `tan θ`.
    compact: bool,
    /// `−⟨r, c⟩` is stored (inner product).
    ip: bool,
    /// `f_add`'s multiple of `‖r‖²` (1 for L2, ½ for cosine; unused for inner product).
    add: f32,
    /// `f_rescale`'s and `f_err`'s multiple of `‖r‖` (2 for L2, 1 otherwise).
    scale: f32,
    /// `1/√(D − 1)`.
    inv_sqrt: f32,
}

impl FactorLayout {
    /// The layout of `metric`, `bits` bits per dimension and padded dimension `pad`.
    pub fn of(metric: Metric, bits: u8, pad: usize) -> Self {
        let (add, scale) = match metric {
            Metric::L2 => (1.0, 2.0),
            Metric::Cosine => (0.5, 1.0),
            Metric::InnerProduct => (0.0, 1.0),
        };
        Self {
            compact: bits <= 4,
            ip: metric == Metric::InnerProduct,
            add,
            scale,
            inv_sqrt: 1.0 / ((pad.max(2) - 1) as f32).sqrt(),
        }
    }

    /// `(compact, inner product, add, scale, 1/√(D − 1))`: what a GPU kernel needs to repeat
    /// [`FactorLayout::read`].
    pub fn parts(&self) -> (bool, bool, f32, f32, f32) {
        (self.compact, self.ip, self.add, self.scale, self.inv_sqrt)
    }

    /// Bytes of the factors.
    pub fn bytes(&self) -> usize {
        4 + if self.ip { 4 } else { 0 } + if self.compact { 4 } else { 8 }
    }

    /// Writes `‖r‖`, `−⟨r, c⟩`, `1/⟨y, o′⟩` and `tan θ` into `out` (`bytes()` long).
    pub fn write(&self, out: &mut [u8], norm: f32, neg_rc: f32, inv_yo: f32, tan: f32) {
        out[..4].copy_from_slice(&norm.to_le_bytes());
        let mut at = 4;
        if self.ip {
            out[4..8].copy_from_slice(&neg_rc.to_le_bytes());
            at = 8;
        }
        if self.compact {
            out[at..at + 2].copy_from_slice(&f16_from_f32(inv_yo).to_le_bytes());
            out[at + 2..at + 4].copy_from_slice(&f16_from_f32(tan).to_le_bytes());
        } else {
            out[at..at + 4].copy_from_slice(&inv_yo.to_le_bytes());
            out[at + 4..at + 8].copy_from_slice(&tan.to_le_bytes());
        }
    }

    /// The stored values: `(‖r‖, −⟨r, c⟩ or 0, 1/⟨y, o′⟩, tan θ)`.
    #[inline]
    pub fn stored(&self, f: &[u8]) -> (f32, f32, f32, f32) {
        let f32_at = |i: usize| f32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
        let norm = f32_at(0);
        let (neg_rc, at) = if self.ip { (f32_at(4), 8) } else { (0.0, 4) };
        let (inv_yo, tan) = if self.compact {
            (
                f32_from_f16(u16::from_le_bytes([f[at], f[at + 1]])),
                f32_from_f16(u16::from_le_bytes([f[at + 2], f[at + 3]])),
            )
        } else {
            (f32_at(at), f32_at(at + 4))
        };
        (norm, neg_rc, inv_yo, tan)
    }

    /// `(f_add, f_rescale)` of the factors `f`: [`FactorLayout::read`] without the error's
    /// factor (the same `f32` operations, so the same values).
    #[inline]
    pub fn read_estimate(&self, f: &[u8]) -> (f32, f32) {
        let f32_at = |i: usize| f32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
        let norm = f32_at(0);
        let (f_add, at) = if self.ip {
            (f32_at(4), 8)
        } else {
            (self.add * (norm * norm), 4)
        };
        let inv_yo = if self.compact {
            f32_from_f16(u16::from_le_bytes([f[at], f[at + 1]]))
        } else {
            f32_at(at)
        };
        (f_add, -((self.scale * norm) * inv_yo))
    }

    /// `(f_add, f_rescale, f_err)` of the factors `f`.
    #[inline]
    pub fn read(&self, f: &[u8]) -> (f32, f32, f32) {
        let (norm, neg_rc, inv_yo, tan) = self.stored(f);
        let f_add = if self.ip {
            neg_rc
        } else {
            self.add * (norm * norm)
        };
        let n = self.scale * norm;
        (f_add, -(n * inv_yo), (n * tan) * self.inv_sqrt)
    }
}

/// `x` as an IEEE 754 half float, rounded to nearest even (overflow to ±∞).
pub fn f16_from_f32(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x007f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let (h, rem, half) = (m >> shift, m & ((1 << shift) - 1), 1u32 << (shift - 1));
        let r = h + u32::from(rem > half || (rem == half && h & 1 == 1));
        return sign | r as u16;
    }
    let h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    // A carry out of the mantissa moves to the next exponent (or ∞): still the nearest.
    let h = h + u32::from(rem > 0x1000 || (rem == 0x1000 && h & 1 == 1));
    sign | h as u16
}

/// The `f32` value of the half float `h` (exact).
pub fn f32_from_f16(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    if exp == 0 {
        let v = man as f32 * (1.0 / (1u32 << 24) as f32);
        return if sign != 0 { -v } else { v };
    }
    if exp == 0x1f {
        return f32::from_bits(sign | 0x7f80_0000 | (man << 13));
    }
    f32::from_bits(sign | ((exp + 112) << 23) | (man << 13))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats_round_trip_and_round_to_nearest() {
        for h in 0..=u16::MAX {
            let x = f32_from_f16(h);
            if x.is_nan() {
                assert!(f32_from_f16(f16_from_f32(x)).is_nan());
            } else {
                assert_eq!(f16_from_f32(x), h, "{h:#06x} = {x}");
            }
        }
        assert_eq!(f32_from_f16(f16_from_f32(1.0 / 3.0)), 0.333_251_95);
        assert_eq!(f16_from_f32(1.0e6), 0x7c00);
        assert_eq!(f16_from_f32(1.0e-9), 0);
        // Halfway between 1 and the next half float rounds to the even one (1).
        assert_eq!(f16_from_f32(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f16_from_f32(1.0 + 3.0 / 2048.0), 0x3c02);
    }
}

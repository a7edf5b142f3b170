//! Element types, metrics and distance kernels.
//!
//! Distances are computed natively for each metric, smaller is nearer:
//!
//! | metric | distance returned |
//! |---|---|
//! | [`Metric::L2`] | squared Euclidean distance `Σ (aᵢ − bᵢ)²` |
//! | [`Metric::InnerProduct`] | `−⟨a, b⟩` (the negated inner product) |
//! | [`Metric::Cosine`] | `1 − ⟨a, b⟩ / (‖a‖ ‖b‖)`; `1` when either vector is zero |
//!
//! # Implementations and dispatch
//!
//! Every kernel has a scalar reference in [`scalar`] (f64 accumulation for floats, exact i64
//! for integers). SIMD versions live in one file per instruction set: `x86_64/avx2.rs`
//! (AVX2 + FMA) and `x86_64/avx512.rs` (AVX-512 F + BW + VNNI). Each file hands out its
//! [`dispatch::Kernels`] table of function pointers only after run-time feature detection.
//! [`dispatch::kernels`] picks the best table once per process (`avx512` > `avx2` > `scalar`,
//! capped by the `TRAWL_KERNELS` environment variable) and caches it in a `OnceLock`, so each
//! call through [`Element`] costs one atomic load and one indirect call. Hot loops may fetch
//! `kernels()` once and call the function pointer directly, or use the one-to-many kernels
//! (`l2_f32_many`, `dot_f32_many`: one query against contiguous rows, the kernel inlined into
//! the row loop). Cosine uses one fused pass (`dot_norms_f32`) for the dot product and both
//! norms. [`dispatch::available`] lists every table the CPU supports; the shared test suite
//! (`kernels/tests.rs`) runs each against the scalar reference.
//!
//! # Exactness and accuracy
//!
//! - **u8 / i8**: exact for every length. SIMD kernels sum blocks of at most 2¹⁵ elements in
//!   wrapping i32 lanes — the true block total is below 2³¹ in magnitude (`2¹⁵ × 255² < 2³¹`),
//!   so the wrapped total is exact — and add blocks in i64. The exact i64 result is rounded
//!   once to `f32` (exact up to 2²⁴), identically to the scalar reference, so every table
//!   returns bit-identical integer distances.
//! - **f32**: SIMD kernels accumulate in f32 across several independent vector accumulators
//!   (a different summation order from the f64 reference). The error is within the standard
//!   bound `(n + 2) · ε · Σ|termᵢ|` (ε = `f32::EPSILON`), plus subnormal underflow; the tests
//!   check exactly that bound.
//! - Slices must have equal lengths: debug builds assert it; release builds compute over the
//!   shorter one and never read out of bounds.

pub mod dispatch;
pub mod kmeans;
pub mod scalar;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;

use std::fmt;
use std::str::FromStr;

/// The element type of stored vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// Unsigned byte.
    U8,
    /// Signed byte.
    I8,
}

impl DType {
    /// Bytes per element.
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::U8 | DType::I8 => 1,
        }
    }

    /// Short lowercase name: `f32`, `u8`, `i8`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::U8 => "u8",
            DType::I8 => "i8",
        }
    }

    /// Stable on-disk code of the type (used in trawl file headers).
    pub const fn code(self) -> u8 {
        match self {
            DType::F32 => 0,
            DType::U8 => 1,
            DType::I8 => 2,
        }
    }

    /// Inverse of [`DType::code`].
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(DType::F32),
            1 => Some(DType::U8),
            2 => Some(DType::I8),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "float" => Ok(DType::F32),
            "u8" | "uint8" => Ok(DType::U8),
            "i8" | "int8" => Ok(DType::I8),
            other => Err(format!(
                "unknown element type `{other}` (expected f32, u8 or i8)"
            )),
        }
    }
}

/// The similarity measure of an index. See the module docs for the distance each returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Metric {
    /// Squared Euclidean distance.
    L2,
    /// Negated inner product (maximum inner product search).
    InnerProduct,
    /// Cosine distance, `1 − cos(a, b)`.
    Cosine,
}

impl Metric {
    /// Short name: `l2`, `ip`, `cosine`.
    pub const fn name(self) -> &'static str {
        match self {
            Metric::L2 => "l2",
            Metric::InnerProduct => "ip",
            Metric::Cosine => "cosine",
        }
    }

    /// Stable on-disk code.
    pub const fn code(self) -> u8 {
        match self {
            Metric::L2 => 0,
            Metric::InnerProduct => 1,
            Metric::Cosine => 2,
        }
    }

    /// Inverse of [`Metric::code`].
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Metric::L2),
            1 => Some(Metric::InnerProduct),
            2 => Some(Metric::Cosine),
            _ => None,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "l2" | "euclidean" | "sqeuclidean" => Ok(Metric::L2),
            "ip" | "inner_product" | "innerproduct" | "mips" | "dot" => Ok(Metric::InnerProduct),
            "cosine" | "cos" | "angular" => Ok(Metric::Cosine),
            other => Err(format!(
                "unknown metric `{other}` (expected l2, ip or cosine)"
            )),
        }
    }
}

/// A vector element type with distance kernels.
///
/// The kernels require `a.len() == b.len()`; callers validate dimensions once at the API
/// boundary. Debug builds assert it; release builds compute over the shorter length, never
/// read out of bounds.
pub trait Element:
    Copy + Send + Sync + fmt::Debug + PartialEq + bytemuck::Pod + Default + 'static
{
    /// The runtime tag of this type.
    const DTYPE: DType;

    /// Squared Euclidean distance.
    fn l2_sq(a: &[Self], b: &[Self]) -> f32;

    /// Inner product `⟨a, b⟩` (exact integer accumulation for `u8`/`i8`).
    fn dot(a: &[Self], b: &[Self]) -> f32;

    /// Squared norm `⟨a, a⟩`.
    fn norm_sq(a: &[Self]) -> f32 {
        Self::dot(a, a)
    }

    /// `(⟨a, b⟩, ⟨a, a⟩, ⟨b, b⟩)`, the parts of the cosine distance (one pass for f32).
    fn dot_norms(a: &[Self], b: &[Self]) -> (f32, f32, f32) {
        (Self::dot(a, b), Self::norm_sq(a), Self::norm_sq(b))
    }

    /// Conversion to `f32` (exact for `u8`/`i8`).
    fn to_f32(self) -> f32;

    /// Whether the value is finite (always true for integer types).
    fn is_finite(self) -> bool {
        true
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline]
    fn l2_sq(a: &[f32], b: &[f32]) -> f32 {
        (dispatch::kernels().l2_f32)(a, b)
    }
    #[inline]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        (dispatch::kernels().dot_f32)(a, b)
    }
    #[inline]
    fn dot_norms(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
        (dispatch::kernels().dot_norms_f32)(a, b)
    }
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
    #[inline]
    fn l2_sq(a: &[u8], b: &[u8]) -> f32 {
        (dispatch::kernels().l2_u8)(a, b)
    }
    #[inline]
    fn dot(a: &[u8], b: &[u8]) -> f32 {
        (dispatch::kernels().dot_u8)(a, b)
    }
    #[inline]
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
}

impl Element for i8 {
    const DTYPE: DType = DType::I8;
    #[inline]
    fn l2_sq(a: &[i8], b: &[i8]) -> f32 {
        (dispatch::kernels().l2_i8)(a, b)
    }
    #[inline]
    fn dot(a: &[i8], b: &[i8]) -> f32 {
        (dispatch::kernels().dot_i8)(a, b)
    }
    #[inline]
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
}

/// Cosine distance from an inner product and the two squared norms; `1` if either is zero.
///
/// The denominator is formed in f64 so huge or tiny norms neither overflow nor underflow, and
/// the result is clamped to `[0, 2]` (rounding can push `|cos|` slightly past 1).
#[inline]
pub fn cosine_from_parts(dot: f32, norm_sq_a: f32, norm_sq_b: f32) -> f32 {
    let denom = (f64::from(norm_sq_a) * f64::from(norm_sq_b)).sqrt();
    if denom > 0.0 {
        (1.0 - f64::from(dot) / denom).clamp(0.0, 2.0) as f32
    } else {
        1.0
    }
}

/// The distance of `metric` between `a` and `b` (see the module docs for its definition).
#[inline]
pub fn distance<T: Element>(metric: Metric, a: &[T], b: &[T]) -> f32 {
    match metric {
        Metric::L2 => T::l2_sq(a, b),
        Metric::InnerProduct => -T::dot(a, b),
        Metric::Cosine => {
            let (dot, na, nb) = T::dot_norms(a, b);
            cosine_from_parts(dot, na, nb)
        }
    }
}

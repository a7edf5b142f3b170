//! AVX2 + FMA kernels (Haswell / Zen 1 and later).
//!
//! f32: four independent 8-lane FMA accumulators (32 elements per step), then whole vectors,
//! then a scalar tail of at most 7 elements.
//!
//! Integers: exact. Values are widened to 16 bits and multiplied pairwise with `vpmaddwd` into
//! wrapping i32 lanes; each block of at most [`INT_BLOCK`] elements has a true sum below 2³¹ in
//! magnitude, so the wrapped lane total equals it, and blocks (plus the scalar tail, summed in
//! `i64`) are added in `i64`. Any length is exact; only the final rounding to `f32` is inexact.
//!
//! The `#[target_feature]` functions are reachable only through [`table`], which returns the
//! table only after run-time detection of AVX2 and FMA.

use std::arch::x86_64::*;

use crate::kernels::dispatch::Kernels;
use crate::kernels::scalar;

/// Elements per exactly-summed i32 block: `32768 × 255² < 2³¹`.
pub const INT_BLOCK: usize = 1 << 15;

static TABLE: Kernels = Kernels {
    name: "avx2",
    l2_f32,
    dot_f32,
    dot_norms_f32,
    l2_f32_many,
    dot_f32_many,
    l2_f32_cols,
    dot_f32_cols,
    l2_u8,
    dot_u8,
    l2_i8,
    dot_i8,
};

/// Whether this CPU has every feature the AVX2 kernels use.
pub fn detected() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The AVX2 table, if this CPU supports it.
pub fn table() -> Option<&'static Kernels> {
    detected().then_some(&TABLE)
}

// ---------------------------------------------------------------------------------------------
// Safe entry points (only reachable through `TABLE`, handed out after detection).

fn l2_f32_cols(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    // SAFETY: only reachable through `TABLE` after detecting avx2 and fma.
    unsafe { l2_f32_cols_tf(x, cols, stride, out) }
}

fn dot_f32_cols(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    // SAFETY: only reachable through `TABLE` after detecting avx2 and fma.
    unsafe { dot_f32_cols_tf(x, cols, stride, out) }
}

/// The scalar column kernel compiled for AVX2: its inner loop runs along `out`, which the
/// compiler vectorises 8 columns wide (bounds-checked, so any shape is safe).
#[target_feature(enable = "avx2,fma")]
fn l2_f32_cols_tf(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    scalar::l2_f32_cols(x, cols, stride, out);
}

/// See [`l2_f32_cols_tf`].
#[target_feature(enable = "avx2,fma")]
fn dot_f32_cols_tf(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    scalar::dot_f32_cols(x, cols, stride, out);
}

fn l2_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: this fn is only reachable through `TABLE`, returned by `table()` after detecting
    // avx2 and fma.
    unsafe { l2_f32_tf(a, b) }
}

fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { dot_f32_tf(a, b) }
}

fn dot_norms_f32(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { dot_norms_f32_tf(a, b) }
}

fn l2_f32_many(query: &[f32], rows: &[f32], out: &mut [f32]) {
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { l2_f32_many_tf(query, rows, out) }
}

fn dot_f32_many(query: &[f32], rows: &[f32], out: &mut [f32]) {
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { dot_f32_many_tf(query, rows, out) }
}

fn l2_u8(a: &[u8], b: &[u8]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { l2_u8_tf(a, b) as f32 }
}

fn dot_u8(a: &[u8], b: &[u8]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { dot_u8_tf(a, b) as f32 }
}

fn l2_i8(a: &[i8], b: &[i8]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { l2_i8_tf(a, b) as f32 }
}

fn dot_i8(a: &[i8], b: &[i8]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`).
    unsafe { dot_i8_tf(a, b) as f32 }
}

// ---------------------------------------------------------------------------------------------
// f32

/// Loads four consecutive 8-lane vectors (32 floats) from `p`.
///
/// # Safety
/// `p..p + 32` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load4(p: *const f32) -> [__m256; 4] {
    // SAFETY: the caller guarantees 32 readable floats at `p`.
    let v0 = unsafe { _mm256_loadu_ps(p) };
    // SAFETY: as above, offset 8 < 32.
    let v1 = unsafe { _mm256_loadu_ps(p.wrapping_add(8)) };
    // SAFETY: as above, offset 16 < 32.
    let v2 = unsafe { _mm256_loadu_ps(p.wrapping_add(16)) };
    // SAFETY: as above, offset 24 < 32.
    let v3 = unsafe { _mm256_loadu_ps(p.wrapping_add(24)) };
    [v0, v1, v2, v3]
}

/// Loads `s[i..i + 8]`.
///
/// # Safety
/// `i + 8 <= s.len()`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load1(s: &[f32], i: usize) -> __m256 {
    // SAFETY: the caller guarantees i + 8 <= s.len().
    unsafe { _mm256_loadu_ps(s.as_ptr().wrapping_add(i)) }
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum4(acc: [__m256; 4]) -> f32 {
    hsum(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn l2_f32_tf(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n <= a.len().
        let x = unsafe { load4(pa.wrapping_add(i)) };
        // SAFETY: i + 32 <= n <= b.len().
        let y = unsafe { load4(pb.wrapping_add(i)) };
        for k in 0..4 {
            let d = _mm256_sub_ps(x[k], y[k]);
            acc[k] = _mm256_fmadd_ps(d, d, acc[k]);
        }
        i += 32;
    }
    // Fewer than 32 left: up to three whole vectors, one per accumulator.
    for (k, acc) in acc.iter_mut().enumerate().take(3) {
        let o = i + 8 * k;
        if o + 8 <= n {
            // SAFETY: o + 8 <= n <= a.len().
            let x = unsafe { load1(a, o) };
            // SAFETY: o + 8 <= n <= b.len().
            let y = unsafe { load1(b, o) };
            let d = _mm256_sub_ps(x, y);
            *acc = _mm256_fmadd_ps(d, d, *acc);
        }
    }
    i += (n - i) / 8 * 8;
    let tail: f32 = a[i..n]
        .iter()
        .zip(&b[i..n])
        .map(|(x, y)| (x - y) * (x - y))
        .sum();
    hsum4(acc) + tail
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn dot_f32_tf(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n <= a.len().
        let x = unsafe { load4(pa.wrapping_add(i)) };
        // SAFETY: i + 32 <= n <= b.len().
        let y = unsafe { load4(pb.wrapping_add(i)) };
        for k in 0..4 {
            acc[k] = _mm256_fmadd_ps(x[k], y[k], acc[k]);
        }
        i += 32;
    }
    // Fewer than 32 left: up to three whole vectors, one per accumulator.
    for (k, acc) in acc.iter_mut().enumerate().take(3) {
        let o = i + 8 * k;
        if o + 8 <= n {
            // SAFETY: o + 8 <= n <= a.len().
            let x = unsafe { load1(a, o) };
            // SAFETY: o + 8 <= n <= b.len().
            let y = unsafe { load1(b, o) };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
    }
    i += (n - i) / 8 * 8;
    let tail: f32 = a[i..n].iter().zip(&b[i..n]).map(|(x, y)| x * y).sum();
    hsum4(acc) + tail
}

#[target_feature(enable = "avx2,fma")]
fn dot_norms_f32_tf(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
    let n = a.len().min(b.len());
    let z = _mm256_setzero_ps();
    let (mut ab, mut aa, mut bb) = ([z; 2], [z; 2], [z; 2]);
    let mut i = 0;
    while i + 8 <= n {
        for k in 0..2 {
            let o = i + 8 * k;
            if o + 8 <= n {
                // SAFETY: o + 8 <= n <= a.len().
                let x = unsafe { load1(a, o) };
                // SAFETY: o + 8 <= n <= b.len().
                let y = unsafe { load1(b, o) };
                ab[k] = _mm256_fmadd_ps(x, y, ab[k]);
                aa[k] = _mm256_fmadd_ps(x, x, aa[k]);
                bb[k] = _mm256_fmadd_ps(y, y, bb[k]);
            }
        }
        i += 16;
    }
    i = i.min(n - n % 8);
    let (mut tab, mut taa, mut tbb) = (0f32, 0f32, 0f32);
    for (&x, &y) in a[i..n].iter().zip(&b[i..n]) {
        tab += x * y;
        taa += x * x;
        tbb += y * y;
    }
    let r = |v: [__m256; 2]| hsum(_mm256_add_ps(v[0], v[1]));
    (r(ab) + tab, r(aa) + taa, r(bb) + tbb)
}

/// One-to-many L2: the kernel is inlined into the row loop (no indirect call per row).
#[target_feature(enable = "avx2,fma")]
fn l2_f32_many_tf(query: &[f32], rows: &[f32], out: &mut [f32]) {
    scalar::many(query, rows, out, |q, r| l2_f32_tf(q, r));
}

/// One-to-many inner product (see [`l2_f32_many_tf`]).
#[target_feature(enable = "avx2,fma")]
fn dot_f32_many_tf(query: &[f32], rows: &[f32], out: &mut [f32]) {
    scalar::many(query, rows, out, |q, r| dot_f32_tf(q, r));
}

// ---------------------------------------------------------------------------------------------
// Integers

/// Loads 32 bytes at `s[i..i + 32]`.
///
/// # Safety
/// `i + 32 <= s.len()`, and `T` is one byte wide.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_bytes<T: Copy>(s: &[T], i: usize) -> __m256i {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    // SAFETY: the caller guarantees i + 32 <= s.len() one-byte elements.
    unsafe { _mm256_loadu_si256(s.as_ptr().wrapping_add(i).cast()) }
}

/// Adds `|x − y|²` of 32 unsigned bytes into two i32 accumulators.
#[inline]
#[target_feature(enable = "avx2")]
fn sq_absdiff_u8(x: __m256i, y: __m256i, acc: &mut [__m256i; 2]) {
    sq_u8(
        _mm256_sub_epi8(_mm256_max_epu8(x, y), _mm256_min_epu8(x, y)),
        acc,
    );
}

/// Adds the squares of 32 unsigned bytes into two i32 accumulators.
#[inline]
#[target_feature(enable = "avx2")]
fn sq_u8(d: __m256i, acc: &mut [__m256i; 2]) {
    let z = _mm256_setzero_si256();
    let lo = _mm256_unpacklo_epi8(d, z);
    let hi = _mm256_unpackhi_epi8(d, z);
    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(lo, lo));
    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(hi, hi));
}

/// Wrapping horizontal sum; exact when the true total fits in i32 (guaranteed per block).
#[inline]
#[target_feature(enable = "avx2")]
fn hsum_i32(acc: [__m256i; 2]) -> i64 {
    let v = _mm256_add_epi32(acc[0], acc[1]);
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    i64::from(_mm_cvtsi128_si32(s))
}

/// Runs `step` over 32-byte chunks in exact i32 blocks; returns the sum and the chunked length.
#[inline]
#[target_feature(enable = "avx2")]
fn int_blocks<T: Copy>(
    a: &[T],
    b: &[T],
    mut step: impl FnMut(__m256i, __m256i, &mut [__m256i; 2]),
) -> (i64, usize) {
    let n = a.len().min(b.len());
    let full = n - n % 32;
    let (mut total, mut i) = (0i64, 0);
    while i < full {
        let end = (i + INT_BLOCK).min(full);
        let mut acc = [_mm256_setzero_si256(); 2];
        while i < end {
            // SAFETY: i + 32 <= full <= a.len().
            let x = unsafe { load_bytes(a, i) };
            // SAFETY: i + 32 <= full <= b.len().
            let y = unsafe { load_bytes(b, i) };
            step(x, y, &mut acc);
            i += 32;
        }
        total += hsum_i32(acc);
    }
    (total, full)
}

#[target_feature(enable = "avx2")]
fn l2_u8_tf(a: &[u8], b: &[u8]) -> i64 {
    let n = a.len().min(b.len());
    let (s, i) = int_blocks(a, b, |x, y, acc| sq_absdiff_u8(x, y, acc));
    s + scalar::l2_u8_exact(&a[i..n], &b[i..n])
}

#[target_feature(enable = "avx2")]
fn l2_i8_tf(a: &[i8], b: &[i8]) -> i64 {
    let n = a.len().min(b.len());
    // max − min of signed bytes is |x − y| in 0..=255, exact as an unsigned byte.
    let (s, i) = int_blocks(a, b, |x, y, acc| {
        sq_u8(
            _mm256_sub_epi8(_mm256_max_epi8(x, y), _mm256_min_epi8(x, y)),
            acc,
        )
    });
    s + scalar::l2_i8_exact(&a[i..n], &b[i..n])
}

#[target_feature(enable = "avx2")]
fn dot_u8_tf(a: &[u8], b: &[u8]) -> i64 {
    let n = a.len().min(b.len());
    let z = _mm256_setzero_si256();
    let (s, i) = int_blocks(a, b, |x, y, acc| {
        let (xl, yl) = (_mm256_unpacklo_epi8(x, z), _mm256_unpacklo_epi8(y, z));
        let (xh, yh) = (_mm256_unpackhi_epi8(x, z), _mm256_unpackhi_epi8(y, z));
        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(xl, yl));
        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(xh, yh));
    });
    s + scalar::dot_u8_exact(&a[i..n], &b[i..n])
}

#[target_feature(enable = "avx2")]
fn dot_i8_tf(a: &[i8], b: &[i8]) -> i64 {
    let n = a.len().min(b.len());
    let (s, i) = int_blocks(a, b, |x, y, acc| {
        let xl = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(x));
        let yl = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(y));
        let xh = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(x));
        let yh = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(y));
        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(xl, yl));
        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(xh, yh));
    });
    s + scalar::dot_i8_exact(&a[i..n], &b[i..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inner kernels (no debug assertion) use the shorter length and read nothing past it.
    #[test]
    fn kernels_avx2_mismatched_lengths_use_the_shorter() {
        if !detected() {
            return;
        }
        let af: Vec<f32> = (0..300).map(|i| i as f32 * 0.5 - 40.0).collect();
        let au: Vec<u8> = (0..300).map(|i| (i * 7 % 256) as u8).collect();
        let ai: Vec<i8> = au.iter().map(|&x| x as i8).collect();
        for (la, lb) in [(300, 37), (5, 300), (129, 128), (0, 17)] {
            let m = la.min(lb);
            let (fa, fb) = (&af[..la], &af[300 - lb..]);
            let want = scalar_ref::l2_f32(&fa[..m], &fb[..m]);
            // SAFETY: `detected()` returned true above.
            let got = unsafe { l2_f32_tf(fa, fb) };
            assert!(
                (got - want).abs() <= want * 1e-5,
                "{la} {lb}: {got} vs {want}"
            );
            let (ua, ub) = (&au[..la], &au[300 - lb..]);
            // SAFETY: `detected()` returned true above.
            let got = unsafe { dot_u8_tf(ua, ub) };
            assert_eq!(got, scalar_ref::dot_u8_exact(&ua[..m], &ub[..m]));
            let (ia, ib) = (&ai[..la], &ai[300 - lb..]);
            // SAFETY: `detected()` returned true above.
            let got = unsafe { l2_i8_tf(ia, ib) };
            assert_eq!(got, scalar_ref::l2_i8_exact(&ia[..m], &ib[..m]));
        }
    }

    use crate::kernels::scalar as scalar_ref;
}

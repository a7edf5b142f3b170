//! AVX-512 kernels (F + BW + VNNI, i.e. Ice Lake / Zen 4 and later).
//!
//! f32: four independent 16-lane FMA accumulators (64 elements per step), then whole vectors,
//! then one masked load for the tail — no scalar tail, no read past either slice.
//!
//! Integers: exact. Each block of at most [`INT_BLOCK`] elements is summed in wrapping i32
//! lanes (`vpdpwssd` on 16-bit widened values, `vpdpbusd` for i8 inner products); the block's
//! true sum is below 2³¹ in magnitude, so the wrapped lane total equals it, and blocks are
//! added in `i64`. Any length is therefore exact; only the final rounding to `f32` is inexact.
//!
//! The `#[target_feature]` functions are reachable only through [`table`], which returns the
//! table only after run-time detection of every feature they use.

use std::arch::x86_64::*;

use crate::kernels::dispatch::Kernels;
use crate::kernels::scalar;

/// Elements per exactly-summed i32 block: `32768 × 255² < 2³¹`, the largest per-element
/// magnitude of any integer kernel here (u8 squared difference / u8 product).
pub const INT_BLOCK: usize = 1 << 15;

static TABLE: Kernels = Kernels {
    name: "avx512",
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

/// Whether this CPU has every feature the AVX-512 kernels use.
pub fn detected() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// The AVX-512 table, if this CPU supports it.
pub fn table() -> Option<&'static Kernels> {
    detected().then_some(&TABLE)
}

// ---------------------------------------------------------------------------------------------
// Safe entry points (only reachable through `TABLE`, handed out after detection).

fn l2_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: this fn is only reachable through `TABLE`, returned by `table()` after detecting
    // avx512f/bw/vnni.
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

fn l2_f32_cols(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    if !scalar::cols_shape_ok(x, cols, stride, out) {
        return scalar::l2_f32_cols(x, cols, stride, out);
    }
    // SAFETY: only reachable through `TABLE` after feature detection (see `l2_f32`); the shape
    // was checked just above.
    unsafe { cols_tf::<true>(x, cols, stride, out) }
}

fn dot_f32_cols(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    if !scalar::cols_shape_ok(x, cols, stride, out) {
        return scalar::dot_f32_cols(x, cols, stride, out);
    }
    // SAFETY: as in `l2_f32_cols`.
    unsafe { cols_tf::<false>(x, cols, stride, out) }
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

/// Loads four consecutive 16-lane vectors (64 floats) from `p`.
///
/// # Safety
/// `p..p + 64` must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load4(p: *const f32) -> [__m512; 4] {
    // SAFETY: the caller guarantees 64 readable floats at `p`.
    let v0 = unsafe { _mm512_loadu_ps(p) };
    // SAFETY: as above, offset 16 < 64.
    let v1 = unsafe { _mm512_loadu_ps(p.wrapping_add(16)) };
    // SAFETY: as above, offset 32 < 64.
    let v2 = unsafe { _mm512_loadu_ps(p.wrapping_add(32)) };
    // SAFETY: as above, offset 48 < 64.
    let v3 = unsafe { _mm512_loadu_ps(p.wrapping_add(48)) };
    [v0, v1, v2, v3]
}

/// Loads `s[i..i + 16]`, zero-filling lanes at or past `n`; reads nothing at or past `n`.
///
/// # Safety
/// `n <= s.len()` and `i < n`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_masked(s: &[f32], i: usize, n: usize) -> __m512 {
    let rem = (n - i).min(16);
    let mask: __mmask16 = ((1u32 << rem) - 1) as u16;
    // SAFETY: masked-off lanes are not accessed; lanes i..i+rem < n <= s.len() are in bounds.
    unsafe { _mm512_maskz_loadu_ps(mask, s.as_ptr().wrapping_add(i)) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn hsum4(acc: [__m512; 4]) -> f32 {
    let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(s)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn l2_f32_tf(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n <= a.len().
        let x = unsafe { load4(pa.wrapping_add(i)) };
        // SAFETY: i + 64 <= n <= b.len().
        let y = unsafe { load4(pb.wrapping_add(i)) };
        for k in 0..4 {
            let d = _mm512_sub_ps(x[k], y[k]);
            acc[k] = _mm512_fmadd_ps(d, d, acc[k]);
        }
        i += 64;
    }
    // Fewer than 64 left: up to four (masked) vectors, one per accumulator.
    for (k, acc) in acc.iter_mut().enumerate() {
        let o = i + 16 * k;
        if o < n {
            // SAFETY: o < n <= a.len() and n <= b.len().
            let x = unsafe { load_masked(a, o, n) };
            // SAFETY: as above.
            let y = unsafe { load_masked(b, o, n) };
            let d = _mm512_sub_ps(x, y);
            *acc = _mm512_fmadd_ps(d, d, *acc);
        }
    }
    hsum4(acc)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn dot_f32_tf(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n <= a.len().
        let x = unsafe { load4(pa.wrapping_add(i)) };
        // SAFETY: i + 64 <= n <= b.len().
        let y = unsafe { load4(pb.wrapping_add(i)) };
        for k in 0..4 {
            acc[k] = _mm512_fmadd_ps(x[k], y[k], acc[k]);
        }
        i += 64;
    }
    // Fewer than 64 left: up to four (masked) vectors, one per accumulator.
    for (k, acc) in acc.iter_mut().enumerate() {
        let o = i + 16 * k;
        if o < n {
            // SAFETY: o < n <= a.len() and n <= b.len().
            let x = unsafe { load_masked(a, o, n) };
            // SAFETY: as above.
            let y = unsafe { load_masked(b, o, n) };
            *acc = _mm512_fmadd_ps(x, y, *acc);
        }
    }
    hsum4(acc)
}

#[target_feature(enable = "avx512f")]
fn dot_norms_f32_tf(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
    let n = a.len().min(b.len());
    let z = _mm512_setzero_ps();
    let (mut ab, mut aa, mut bb) = ([z; 2], [z; 2], [z; 2]);
    let mut i = 0;
    while i < n {
        for k in 0..2 {
            let o = i + 16 * k;
            if o < n {
                // SAFETY: o < n <= a.len() and n <= b.len().
                let x = unsafe { load_masked(a, o, n) };
                // SAFETY: as above.
                let y = unsafe { load_masked(b, o, n) };
                ab[k] = _mm512_fmadd_ps(x, y, ab[k]);
                aa[k] = _mm512_fmadd_ps(x, x, aa[k]);
                bb[k] = _mm512_fmadd_ps(y, y, bb[k]);
            }
        }
        i += 32;
    }
    let r = |v: [__m512; 2]| _mm512_reduce_add_ps(_mm512_add_ps(v[0], v[1]));
    (r(ab), r(aa), r(bb))
}

/// One-to-many L2: the kernel is inlined into the row loop (no indirect call per row).
#[target_feature(enable = "avx512f")]
fn l2_f32_many_tf(query: &[f32], rows: &[f32], out: &mut [f32]) {
    scalar::many(query, rows, out, |q, r| l2_f32_tf(q, r));
}

/// One-to-many inner product (see [`l2_f32_many_tf`]).
#[target_feature(enable = "avx512f")]
fn dot_f32_many_tf(query: &[f32], rows: &[f32], out: &mut [f32]) {
    scalar::many(query, rows, out, |q, r| dot_f32_tf(q, r));
}

/// Column kernel (squared L2 when `L2`, else inner product): 64 columns per step in four
/// accumulators, one broadcast element of `x` per dimension, then masked 16-column steps.
///
/// # Safety
/// [`scalar::cols_shape_ok`] holds for the arguments.
#[target_feature(enable = "avx512f")]
unsafe fn cols_tf<const L2: bool>(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32]) {
    let m = out.len();
    let pc = cols.as_ptr();
    let po = out.as_mut_ptr();
    let step = |acc: __m512, xk: __m512, c: __m512| {
        if L2 {
            let d = _mm512_sub_ps(xk, c);
            _mm512_fmadd_ps(d, d, acc)
        } else {
            _mm512_fmadd_ps(xk, c, acc)
        }
    };
    let mut j = 0;
    while j + 64 <= m {
        let mut acc = [_mm512_setzero_ps(); 4];
        for (k, &xk) in x.iter().enumerate() {
            let xk = _mm512_set1_ps(xk);
            // SAFETY: k < x.len() and j + 64 <= m, so k·stride + j + 64 <= (len−1)·stride + m
            // <= cols.len() by the shape contract.
            let c = unsafe { load4(pc.wrapping_add(k * stride + j)) };
            for q in 0..4 {
                acc[q] = step(acc[q], xk, c[q]);
            }
        }
        for (q, a) in acc.iter().enumerate() {
            // SAFETY: j + 16q + 16 <= j + 64 <= m = out.len().
            unsafe { _mm512_storeu_ps(po.wrapping_add(j + 16 * q), *a) };
        }
        j += 64;
    }
    while j < m {
        let rem = (m - j).min(16);
        let mask: __mmask16 = ((1u32 << rem) - 1) as u16;
        let mut acc = _mm512_setzero_ps();
        for (k, &xk) in x.iter().enumerate() {
            // SAFETY: only lanes j..j+rem <= m are read, inside cols by the shape contract.
            let c = unsafe { _mm512_maskz_loadu_ps(mask, pc.wrapping_add(k * stride + j)) };
            acc = step(acc, _mm512_set1_ps(xk), c);
        }
        // SAFETY: only lanes j..j+rem <= out.len() are written.
        unsafe { _mm512_mask_storeu_ps(po.wrapping_add(j), mask, acc) };
        j += 16;
    }
}

// ---------------------------------------------------------------------------------------------
// Integers

/// Loads the 64 bytes at `s[i..i + 64]`.
///
/// # Safety
/// `i + 64 <= s.len()`, and `T` is one byte wide.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn load_bytes<T: Copy>(s: &[T], i: usize) -> __m512i {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    // SAFETY: the caller guarantees i + 64 <= s.len() one-byte elements.
    unsafe { _mm512_loadu_si512(s.as_ptr().wrapping_add(i).cast()) }
}

/// Loads the bytes `s[i..n]` (fewer than 64), zero-filling the other lanes; reads nothing else.
///
/// # Safety
/// `i < n <= s.len()`, `n - i < 64`, and `T` is one byte wide.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn load_bytes_masked<T: Copy>(s: &[T], i: usize, n: usize) -> __m512i {
    debug_assert_eq!(std::mem::size_of::<T>(), 1);
    let mask: __mmask64 = (1u64 << (n - i)) - 1;
    // SAFETY: only lanes i..n, all below s.len(), are accessed.
    unsafe { _mm512_maskz_loadu_epi8(mask, s.as_ptr().wrapping_add(i).cast()) }
}

/// Runs `step` over 64-byte chunks (the last one zero-padded, which every step maps to 0) in
/// exact i32 blocks of at most [`INT_BLOCK`] elements; each block's two accumulators are
/// merged by `merge` and reduced. The block's true total fits in i32, so the wrapping lane
/// arithmetic gives it exactly; blocks are added in i64.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn int_blocks<T: Copy>(
    a: &[T],
    b: &[T],
    mut step: impl FnMut(__m512i, __m512i, &mut [__m512i; 2]),
    merge: impl Fn(__m512i, __m512i) -> __m512i,
) -> i64 {
    let n = a.len().min(b.len());
    let (mut total, mut i) = (0i64, 0);
    while i < n {
        let end = (i + INT_BLOCK).min(n);
        let mut acc = [_mm512_setzero_si512(); 2];
        while i + 64 <= end {
            // SAFETY: i + 64 <= end <= n <= a.len().
            let x = unsafe { load_bytes(a, i) };
            // SAFETY: i + 64 <= end <= n <= b.len().
            let y = unsafe { load_bytes(b, i) };
            step(x, y, &mut acc);
            i += 64;
        }
        if i < end {
            // SAFETY: i < end <= n <= a.len(), and end - i < 64.
            let x = unsafe { load_bytes_masked(a, i, end) };
            // SAFETY: i < end <= n <= b.len(), and end - i < 64.
            let y = unsafe { load_bytes_masked(b, i, end) };
            step(x, y, &mut acc);
            i = end;
        }
        total += i64::from(_mm512_reduce_add_epi32(merge(acc[0], acc[1])));
    }
    total
}

/// Adds the squares of 64 unsigned bytes into two i32 accumulators.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn sq_u8(d: __m512i, acc: &mut [__m512i; 2]) {
    let z = _mm512_setzero_si512();
    let lo = _mm512_unpacklo_epi8(d, z);
    let hi = _mm512_unpackhi_epi8(d, z);
    acc[0] = _mm512_dpwssd_epi32(acc[0], lo, lo);
    acc[1] = _mm512_dpwssd_epi32(acc[1], hi, hi);
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn l2_u8_tf(a: &[u8], b: &[u8]) -> i64 {
    int_blocks(
        a,
        b,
        |x, y, acc| {
            sq_u8(
                _mm512_sub_epi8(_mm512_max_epu8(x, y), _mm512_min_epu8(x, y)),
                acc,
            )
        },
        |p, q| _mm512_add_epi32(p, q),
    )
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn l2_i8_tf(a: &[i8], b: &[i8]) -> i64 {
    // max − min of signed bytes is |x − y| in 0..=255, exact as an unsigned byte.
    int_blocks(
        a,
        b,
        |x, y, acc| {
            sq_u8(
                _mm512_sub_epi8(_mm512_max_epi8(x, y), _mm512_min_epi8(x, y)),
                acc,
            )
        },
        |p, q| _mm512_add_epi32(p, q),
    )
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn dot_u8_tf(a: &[u8], b: &[u8]) -> i64 {
    let z = _mm512_setzero_si512();
    int_blocks(
        a,
        b,
        |x, y, acc| {
            let (xl, yl) = (_mm512_unpacklo_epi8(x, z), _mm512_unpacklo_epi8(y, z));
            let (xh, yh) = (_mm512_unpackhi_epi8(x, z), _mm512_unpackhi_epi8(y, z));
            acc[0] = _mm512_dpwssd_epi32(acc[0], xl, yl);
            acc[1] = _mm512_dpwssd_epi32(acc[1], xh, yh);
        },
        |p, q| _mm512_add_epi32(p, q),
    )
}

/// `⟨a, b⟩ = ⟨a + 128, b⟩ − ⟨128, b⟩`, both with unsigned bytes on the left for `vpdpbusd`
/// (`a + 128` is `a ^ 0x80`; the byte `0x80` is 128 unsigned). Padding lanes have `b = 0`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn dot_i8_tf(a: &[i8], b: &[i8]) -> i64 {
    let x80 = _mm512_set1_epi8(i8::MIN);
    int_blocks(
        a,
        b,
        |x, y, acc| {
            acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_xor_si512(x, x80), y);
            acc[1] = _mm512_dpbusd_epi32(acc[1], x80, y);
        },
        |p, q| _mm512_sub_epi32(p, q),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inner kernels (no debug assertion) use the shorter length and read nothing past it.
    #[test]
    fn kernels_avx512_mismatched_lengths_use_the_shorter() {
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

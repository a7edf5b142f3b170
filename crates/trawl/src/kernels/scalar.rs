//! Scalar reference kernels: the specification every SIMD kernel is tested against.
//!
//! Floats accumulate in `f64` here so the reference is more accurate than any kernel under test;
//! integer kernels accumulate exactly in `i64` (the `*_exact` helpers, which the SIMD kernels
//! also use for their short tails), and the exact sum is rounded to `f32` once at the end.

/// Squared L2 distance of two f32 slices.
pub fn l2_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = f64::from(x) - f64::from(y);
            d * d
        })
        .sum::<f64>() as f32
}

/// Inner product of two f32 slices.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum::<f64>() as f32
}

/// Inner product and both squared norms of two f32 slices: `(⟨a, b⟩, ⟨a, a⟩, ⟨b, b⟩)`.
pub fn dot_norms_f32(a: &[f32], b: &[f32]) -> (f32, f32, f32) {
    debug_assert_eq!(a.len(), b.len());
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    (ab as f32, aa as f32, bb as f32)
}

/// Applies `f` to the query and each row of `rows` (`d = query.len()` floats each), writing
/// `out`; see [`ManyFn`](crate::kernels::dispatch::ManyFn) for the length contract.
#[inline]
pub fn many(
    query: &[f32],
    rows: &[f32],
    out: &mut [f32],
    mut f: impl FnMut(&[f32], &[f32]) -> f32,
) {
    let d = query.len();
    if d == 0 {
        out.fill(0.0);
        return;
    }
    debug_assert_eq!(rows.len(), out.len() * d);
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(d)) {
        *o = f(query, row);
    }
}

/// Squared L2 distance of `query` to each row of `rows`.
pub fn l2_f32_many(query: &[f32], rows: &[f32], out: &mut [f32]) {
    many(query, rows, out, l2_f32);
}

/// Inner product of `query` with each row of `rows`.
pub fn dot_f32_many(query: &[f32], rows: &[f32], out: &mut [f32]) {
    many(query, rows, out, dot_f32);
}

/// Whether a column-kernel call satisfies the [`crate::kernels::dispatch::ColsFn`] shape contract.
#[inline]
pub fn cols_shape_ok(x: &[f32], cols: &[f32], stride: usize, out: &[f32]) -> bool {
    out.len() <= stride
        && (x.is_empty()
            || (x.len() - 1)
                .checked_mul(stride)
                .and_then(|v| v.checked_add(out.len()))
                .is_some_and(|need| need <= cols.len()))
}

#[inline]
fn cols(x: &[f32], cols: &[f32], stride: usize, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    out.fill(0.0);
    for (k, &xk) in x.iter().enumerate() {
        let start = k.saturating_mul(stride).min(cols.len());
        let col = &cols[start..(start + out.len()).min(cols.len())];
        for (o, &c) in out.iter_mut().zip(col) {
            *o += f(xk, c);
        }
    }
}

/// Squared L2 of `x` to every column of the dimension-major block `cols` (see
/// [`crate::kernels::dispatch::ColsFn`]).
#[inline]
pub fn l2_f32_cols(x: &[f32], c: &[f32], stride: usize, out: &mut [f32]) {
    cols(x, c, stride, out, |a, b| (a - b) * (a - b));
}

/// Inner product of `x` with every column of the dimension-major block `cols` (see
/// [`crate::kernels::dispatch::ColsFn`]).
#[inline]
pub fn dot_f32_cols(x: &[f32], c: &[f32], stride: usize, out: &mut [f32]) {
    cols(x, c, stride, out, |a, b| a * b);
}

/// Exact squared L2 distance of two u8 slices.
pub fn l2_u8_exact(a: &[u8], b: &[u8]) -> i64 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = i64::from(x) - i64::from(y);
            d * d
        })
        .sum()
}

/// Exact inner product of two u8 slices.
pub fn dot_u8_exact(a: &[u8], b: &[u8]) -> i64 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i64::from(x) * i64::from(y))
        .sum()
}

/// Exact squared L2 distance of two i8 slices.
pub fn l2_i8_exact(a: &[i8], b: &[i8]) -> i64 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = i64::from(x) - i64::from(y);
            d * d
        })
        .sum()
}

/// Exact inner product of two i8 slices.
pub fn dot_i8_exact(a: &[i8], b: &[i8]) -> i64 {
    debug_assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i64::from(x) * i64::from(y))
        .sum()
}

/// Squared L2 distance of two u8 slices (the exact sum, rounded once to f32).
pub fn l2_u8(a: &[u8], b: &[u8]) -> f32 {
    l2_u8_exact(a, b) as f32
}

/// Inner product of two u8 slices (the exact sum, rounded once to f32).
pub fn dot_u8(a: &[u8], b: &[u8]) -> f32 {
    dot_u8_exact(a, b) as f32
}

/// Squared L2 distance of two i8 slices (the exact sum, rounded once to f32).
pub fn l2_i8(a: &[i8], b: &[i8]) -> f32 {
    l2_i8_exact(a, b) as f32
}

/// Inner product of two i8 slices (the exact sum, rounded once to f32).
pub fn dot_i8(a: &[i8], b: &[i8]) -> f32 {
    dot_i8_exact(a, b) as f32
}

//! The shared kernel test suite: every table in [`dispatch::available`] against the scalar
//! reference, on irregular lengths and edge values.
//!
//! Integer kernels must match the reference bit for bit. f32 kernels must be within the
//! standard floating-point summation bound derived from the magnitudes of the terms (see
//! [`f32_bound`]), not a tuned tolerance.

use proptest::collection::vec;
use proptest::prelude::*;

use crate::kernels::dispatch::{available, Kernels};
use crate::kernels::{cosine_from_parts, distance, scalar, Element, Metric};

/// Lengths around every unroll width and block boundary of the SIMD kernels.
const SPECIFIC_LENS: &[usize] = &[
    1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 960, 1000, 4099,
];

/// Proptest cases: fewer under Miri, which interprets every lane of every kernel.
const fn cases(native: u32) -> u32 {
    if cfg!(miri) {
        4
    } else {
        native
    }
}

fn lengths() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..=300, prop::sample::select(SPECIFIC_LENS)]
}

/// Rigorous bound on `|kernel − exact|` for a sum of `n` terms with absolute values summing to
/// `sum_abs`, computed in f32 in any order: each term has at most two roundings (the difference
/// and the product, or one with FMA) and the sum at most `n − 1`, each of relative size
/// `ε/2`, so `(n + 2) · ε · Σ|tᵢ|` covers them with a factor-of-two margin for second-order
/// terms; each of the at most `3n` operations may also lose up to `2⁻¹⁵⁰` to underflow.
/// The reference's own rounding to f32 adds `ε/2 · Σ|tᵢ|` at most.
fn f32_bound(n: usize, sum_abs: f64) -> f64 {
    let n = n as f64;
    let eps = f64::from(f32::EPSILON);
    (n + 3.0) * eps * sum_abs + 3.0 * (n + 1.0) * 2f64.powi(-150)
}

fn assert_close(what: &str, k: &Kernels, got: f32, want: f32, bound: f64) {
    let err = (f64::from(got) - f64::from(want)).abs();
    assert!(
        err <= bound,
        "{} {what}: got {got:e}, reference {want:e}, |err| {err:e} > bound {bound:e}",
        k.name
    );
}

/// One f32 element: zero, or a uniform mantissa times `2^e` with `e` in `exps`.
fn f32_elem(lo: i32, hi: i32) -> impl Strategy<Value = f32> {
    prop_oneof![
        1 => Just(0.0f32),
        8 => (-1.0f32..1.0, lo..=hi).prop_map(|(m, e)| m * 2f32.powi(e)),
    ]
}

/// Two equal-length f32 vectors whose exponents share one range: all zeros, tiny (squares are
/// subnormal), unit, large, or mixed magnitudes from 2⁻⁶⁰ to 2⁴⁸ (sums stay below f32::MAX).
fn f32_pair() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    let ranges = vec![(0, 0), (-72, -66), (-10, 10), (40, 48), (-60, 48)];
    (lengths(), prop::sample::select(ranges))
        .prop_flat_map(|(n, (lo, hi))| (vec(f32_elem(lo, hi), n), vec(f32_elem(lo, hi), n)))
}

fn u8_elem() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(255u8), any::<u8>()]
}

fn i8_elem() -> impl Strategy<Value = i8> {
    prop_oneof![Just(i8::MIN), Just(i8::MAX), Just(0i8), any::<i8>()]
}

fn u8_pair() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    lengths().prop_flat_map(|n| (vec(u8_elem(), n), vec(u8_elem(), n)))
}

fn i8_pair() -> impl Strategy<Value = (Vec<i8>, Vec<i8>)> {
    lengths().prop_flat_map(|n| (vec(i8_elem(), n), vec(i8_elem(), n)))
}

fn sum_abs(a: &[f32], b: &[f32], term: impl Fn(f64, f64) -> f64) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| term(f64::from(x), f64::from(y)).abs())
        .sum()
}

/// Checks every f32 kernel of every table on one pair.
fn check_f32(a: &[f32], b: &[f32]) {
    let n = a.len();
    let l2_bound = f32_bound(n, sum_abs(a, b, |x, y| (x - y) * (x - y)));
    let dot_bound = f32_bound(n, sum_abs(a, b, |x, y| x * y));
    let aa_bound = f32_bound(n, sum_abs(a, a, |x, y| x * y));
    let bb_bound = f32_bound(n, sum_abs(b, b, |x, y| x * y));
    let (rab, raa, rbb) = scalar::dot_norms_f32(a, b);
    for k in available() {
        assert_close(
            "l2_f32",
            k,
            (k.l2_f32)(a, b),
            scalar::l2_f32(a, b),
            l2_bound,
        );
        assert_close(
            "dot_f32",
            k,
            (k.dot_f32)(a, b),
            scalar::dot_f32(a, b),
            dot_bound,
        );
        let (ab, aa, bb) = (k.dot_norms_f32)(a, b);
        assert_close("dot_norms_f32.0", k, ab, rab, dot_bound);
        assert_close("dot_norms_f32.1", k, aa, raa, aa_bound);
        assert_close("dot_norms_f32.2", k, bb, rbb, bb_bound);
    }
}

fn check_u8(a: &[u8], b: &[u8]) {
    for k in available() {
        let (l2, dot) = ((k.l2_u8)(a, b), (k.dot_u8)(a, b));
        assert_eq!(
            l2.to_bits(),
            scalar::l2_u8(a, b).to_bits(),
            "{} l2_u8",
            k.name
        );
        assert_eq!(
            dot.to_bits(),
            scalar::dot_u8(a, b).to_bits(),
            "{} dot_u8",
            k.name
        );
    }
}

fn check_i8(a: &[i8], b: &[i8]) {
    for k in available() {
        let (l2, dot) = ((k.l2_i8)(a, b), (k.dot_i8)(a, b));
        assert_eq!(
            l2.to_bits(),
            scalar::l2_i8(a, b).to_bits(),
            "{} l2_i8",
            k.name
        );
        assert_eq!(
            dot.to_bits(),
            scalar::dot_i8(a, b).to_bits(),
            "{} dot_i8",
            k.name
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn kernels_f32_match_reference((a, b) in f32_pair()) {
        check_f32(&a, &b);
    }

    #[test]
    fn kernels_f32_near_equal_vectors(a in lengths().prop_flat_map(|n| vec(-1e3f32..1e3, n))) {
        // Cancellation-heavy l2: b differs from a by one ulp-scale nudge per element.
        let b: Vec<f32> = a.iter().map(|x| x * (1.0 + f32::EPSILON)).collect();
        check_f32(&a, &b);
    }

    #[test]
    fn kernels_u8_match_reference_exactly((a, b) in u8_pair()) {
        check_u8(&a, &b);
    }

    #[test]
    fn kernels_i8_match_reference_exactly((a, b) in i8_pair()) {
        check_i8(&a, &b);
    }

    #[test]
    fn kernels_distance_metrics((a, b) in f32_pair()) {
        let n = a.len();
        prop_assert_eq!(distance(Metric::L2, &a, &b), f32::l2_sq(&a, &b));
        prop_assert_eq!(distance(Metric::InnerProduct, &a, &b), -f32::dot(&a, &b));
        // Cosine against an f64 evaluation of the same formula.
        let (ab, aa, bb) = scalar::dot_norms_f32(&a, &b);
        let want = cosine_from_parts(ab, aa, bb);
        let got = distance(Metric::Cosine, &a, &b);
        prop_assert!((0.0..=2.0).contains(&got), "cosine {got} out of range");
        if aa == 0.0 || bb == 0.0 {
            prop_assert_eq!(got, 1.0);
        } else {
            // Relative errors of dot and norms (bounded as in f32_bound) propagate into cos.
            let rel = f32_bound(n, sum_abs(&a, &b, |x, y| x * y)) / (f64::from(aa) * f64::from(bb)).sqrt()
                + 2.0 * (n as f64 + 3.0) * f64::from(f32::EPSILON);
            prop_assert!(f64::from((got - want).abs()) <= rel + 4.0 * f64::from(f32::EPSILON),
                "cosine {got} vs {want}, allowed {rel:e}");
        }
    }
}

#[test]
fn kernels_all_lengths_extreme_integers() {
    // Under Miri: every length through two 32-byte vectors, then around the longer steps.
    let lengths: Vec<usize> = if cfg!(miri) {
        (0..=70).chain([127, 128, 129, 255, 256, 257]).collect()
    } else {
        (0..=300).collect()
    };
    for n in lengths {
        let (lo, hi) = (vec![0u8; n], vec![255u8; n]);
        check_u8(&lo, &hi);
        check_u8(&hi, &hi);
        let (lo, hi) = (vec![i8::MIN; n], vec![i8::MAX; n]);
        check_i8(&lo, &hi);
        check_i8(&lo, &lo);
        check_i8(&hi, &hi);
    }
}

/// Long all-extreme vectors whose sums overflow i32 many times over: results must be the
/// exact integer, rounded once to f32.
#[test]
fn kernels_long_extreme_integers_are_exact() {
    // Under Miri only the first length past one exact block of 2¹⁵ elements.
    let lengths: &[usize] = if cfg!(miri) {
        &[32_769]
    } else {
        &[32_767, 32_768, 32_769, 70_000, 100_003]
    };
    for &n in lengths {
        let n64 = n as i64;
        let (u0, u255) = (vec![0u8; n], vec![255u8; n]);
        let (imin, imax) = (vec![i8::MIN; n], vec![i8::MAX; n]);
        for k in available() {
            assert_eq!(
                (k.l2_u8)(&u0, &u255),
                (n64 * 255 * 255) as f32,
                "{}",
                k.name
            );
            assert_eq!(
                (k.dot_u8)(&u255, &u255),
                (n64 * 255 * 255) as f32,
                "{}",
                k.name
            );
            assert_eq!((k.dot_u8)(&u0, &u255), 0.0, "{}", k.name);
            assert_eq!(
                (k.l2_i8)(&imin, &imax),
                (n64 * 255 * 255) as f32,
                "{}",
                k.name
            );
            assert_eq!(
                (k.dot_i8)(&imin, &imin),
                (n64 * 128 * 128) as f32,
                "{}",
                k.name
            );
            assert_eq!(
                (k.dot_i8)(&imin, &imax),
                (-n64 * 128 * 127) as f32,
                "{}",
                k.name
            );
            assert_eq!(
                (k.dot_i8)(&imax, &imax),
                (n64 * 127 * 127) as f32,
                "{}",
                k.name
            );
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "generates 10⁵ ChaCha values, too slow under Miri; the multi-block path runs in \
              kernels_long_extreme_integers_are_exact"
)]
fn kernels_long_random_integers_are_exact() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for n in [65_537, 131_101] {
        let a: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        let b: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        check_u8(&a, &b);
        let a: Vec<i8> = (0..n).map(|_| rng.gen()).collect();
        let b: Vec<i8> = (0..n).map(|_| rng.gen()).collect();
        check_i8(&a, &b);
    }
}

#[test]
fn kernels_f32_specific_lengths_and_zeros() {
    for &n in SPECIFIC_LENS {
        let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        check_f32(&a, &b);
        check_f32(&vec![0.0; n], &b);
        for k in available() {
            assert_eq!((k.l2_f32)(&a, &a), 0.0, "{} n={n}", k.name);
            assert_eq!((k.dot_f32)(&vec![0.0; n], &b), 0.0, "{} n={n}", k.name);
        }
    }
}

#[test]
fn kernels_empty_vectors() {
    for k in available() {
        assert_eq!((k.l2_f32)(&[], &[]), 0.0);
        assert_eq!((k.dot_f32)(&[], &[]), 0.0);
        assert_eq!((k.dot_norms_f32)(&[], &[]), (0.0, 0.0, 0.0));
        assert_eq!((k.l2_u8)(&[], &[]), 0.0);
        assert_eq!((k.dot_i8)(&[], &[]), 0.0);
    }
}

#[test]
fn kernels_distance_sign_conventions_and_cosine_edges() {
    let a = [1.0f32, 2.0, 3.0];
    let b = [4.0f32, -5.0, 6.0];
    assert_eq!(distance(Metric::L2, &a, &b), 9.0 + 49.0 + 9.0);
    assert_eq!(distance(Metric::InnerProduct, &a, &b), -(4.0 - 10.0 + 18.0));
    // Cosine: zero vectors give 1, identical 0, opposite 2, orthogonal 1.
    let z = [0.0f32; 3];
    assert_eq!(distance(Metric::Cosine, &z, &a), 1.0);
    assert_eq!(distance(Metric::Cosine, &a, &z), 1.0);
    assert_eq!(distance(Metric::Cosine, &z, &z), 1.0);
    assert!(distance(Metric::Cosine, &a, &a).abs() < 1e-6);
    let neg: Vec<f32> = a.iter().map(|x| -x).collect();
    assert!((distance(Metric::Cosine, &a, &neg) - 2.0).abs() < 1e-6);
    assert!((distance(Metric::Cosine, &[1.0f32, 0.0], &[0.0, 3.0]) - 1.0).abs() < 1e-7);
    // Huge and tiny norms neither overflow nor underflow the cosine denominator.
    let big = [3e18f32, 4e18];
    let tiny = [3e-19f32, 4e-19];
    assert!(distance(Metric::Cosine, &big, &big).abs() < 1e-6);
    assert!(distance(Metric::Cosine, &tiny, &[6e-19f32, 8e-19]).abs() < 1e-6);
}

#[test]
fn kernels_distance_integer_types() {
    let a = [255u8, 0, 10];
    let b = [0u8, 255, 10];
    assert_eq!(distance(Metric::L2, &a, &b), 2.0 * 65025.0);
    assert_eq!(distance(Metric::InnerProduct, &a, &b), -100.0);
    assert_eq!(distance(Metric::Cosine, &[0u8; 3], &b), 1.0);
    let c = [-128i8, 127, 0];
    let d = [127i8, -128, 5];
    assert_eq!(distance(Metric::L2, &c, &d), 2.0 * 65025.0 + 25.0);
    assert_eq!(distance(Metric::InnerProduct, &c, &d), 2.0 * 16256.0);
    assert!((distance(Metric::Cosine, &c, &c)).abs() < 1e-6);
    assert_eq!(u8::dot_norms(&a, &b), (100.0, 65125.0, 65125.0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    /// One-to-many kernels equal the one-to-one kernel of the same table, row by row.
    #[test]
    fn kernels_many_match_single(
        (d, rows) in (0usize..=70, 0usize..=9)
            .prop_flat_map(|(d, r)| (Just(d), vec(-100.0f32..100.0, (r + 1) * d))),
    ) {
        let (q, rows) = rows.split_at(d);
        let n = rows.len().checked_div(d).unwrap_or(5);
        for k in available() {
            let mut out = vec![f32::NAN; n];
            (k.l2_f32_many)(q, rows, &mut out);
            let want: Vec<f32> = (0..n).map(|i| if d == 0 { 0.0 } else {
                (k.l2_f32)(q, &rows[i * d..(i + 1) * d]) }).collect();
            prop_assert_eq!(&out, &want, "{} l2", k.name);
            (k.dot_f32_many)(q, rows, &mut out);
            let want: Vec<f32> = (0..n).map(|i| if d == 0 { 0.0 } else {
                (k.dot_f32)(q, &rows[i * d..(i + 1) * d]) }).collect();
            prop_assert_eq!(&out, &want, "{} dot", k.name);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    /// Column kernels equal the one-to-one scalar reference on each column, for every table,
    /// odd dimensions and column counts on both sides of the 16- and 64-lane steps.
    #[test]
    fn kernels_cols_match_scalar_reference(
        (d, m, pad, data) in (0usize..=70, 0usize..=150, 0usize..=5)
            .prop_flat_map(|(d, m, pad)| (Just(d), Just(m), Just(pad),
                vec(-100.0f32..100.0, d + d * (m + pad)))),
    ) {
        let (x, cols) = data.split_at(d);
        let stride = m + pad;
        let column = |t: usize| -> Vec<f32> { (0..d).map(|k| cols[k * stride + t]).collect() };
        for k in available() {
            let mut out = vec![f32::NAN; m];
            (k.l2_f32_cols)(x, cols, stride, &mut out);
            for (t, &got) in out.iter().enumerate() {
                let want = scalar::l2_f32(x, &column(t));
                prop_assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0),
                    "{} l2 col {}: {} vs {}", k.name, t, got, want);
            }
            (k.dot_f32_cols)(x, cols, stride, &mut out);
            for (t, &got) in out.iter().enumerate() {
                let want = scalar::dot_f32(x, &column(t));
                let scale: f32 = x.iter().zip(column(t)).map(|(a, b)| (a * b).abs()).sum();
                prop_assert!((got - want).abs() <= 1e-4 * scale.max(1.0),
                    "{} dot col {}: {} vs {}", k.name, t, got, want);
            }
        }
    }
}

/// A block too short for its shape never reads out of bounds: every table falls back to the
/// scalar reference, which cuts the columns short.
#[test]
fn kernels_cols_bad_shape_is_safe() {
    let x = [1.0f32; 5];
    let cols = vec![2.0f32; 17];
    for k in available() {
        let mut out = vec![f32::NAN; 8];
        (k.dot_f32_cols)(&x, &cols, 4, &mut out);
        assert!(out.iter().all(|v| v.is_finite()), "{}", k.name);
        let mut out = vec![f32::NAN; 8];
        (k.l2_f32_cols)(&x, &cols, 8, &mut out);
        assert_eq!(
            out[0], 3.0,
            "{}: 2 full dimensions + 1 of 17 elements",
            k.name
        );
        let mut ok = vec![0.0f32; 4];
        (k.dot_f32_cols)(&x, &cols[..16], 4, &mut ok);
        assert_eq!(ok, [8.0; 4], "{}: exact fit", k.name);
    }
}

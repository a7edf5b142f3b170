//! Tests of [`knn`] against brute force with full sorts.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::exact::*;
use crate::kernels::{cosine_from_parts, distance, scalar};

/// Element types with a scalar reference kernel.
trait Reference: Element {
    fn ref_l2(a: &[Self], b: &[Self]) -> f32;
    fn ref_dot(a: &[Self], b: &[Self]) -> f32;
    /// A random element; `small` draws from a tiny range so that ties and duplicates abound.
    fn random(rng: &mut ChaCha8Rng, small: bool) -> Self;
}

impl Reference for f32 {
    fn ref_l2(a: &[f32], b: &[f32]) -> f32 {
        scalar::l2_f32(a, b)
    }
    fn ref_dot(a: &[f32], b: &[f32]) -> f32 {
        scalar::dot_f32(a, b)
    }
    fn random(rng: &mut ChaCha8Rng, small: bool) -> f32 {
        if small {
            f32::from(rng.gen_range(-2i8..=2))
        } else {
            rng.gen_range(-1.0f32..1.0)
        }
    }
}

impl Reference for u8 {
    fn ref_l2(a: &[u8], b: &[u8]) -> f32 {
        scalar::l2_u8(a, b)
    }
    fn ref_dot(a: &[u8], b: &[u8]) -> f32 {
        scalar::dot_u8(a, b)
    }
    fn random(rng: &mut ChaCha8Rng, small: bool) -> u8 {
        if small {
            rng.gen_range(0..3)
        } else {
            rng.gen()
        }
    }
}

impl Reference for i8 {
    fn ref_l2(a: &[i8], b: &[i8]) -> f32 {
        scalar::l2_i8(a, b)
    }
    fn ref_dot(a: &[i8], b: &[i8]) -> f32 {
        scalar::dot_i8(a, b)
    }
    fn random(rng: &mut ChaCha8Rng, small: bool) -> i8 {
        if small {
            rng.gen_range(-1..=1)
        } else {
            rng.gen()
        }
    }
}

fn ref_distance<T: Reference>(metric: Metric, a: &[T], b: &[T]) -> f32 {
    match metric {
        Metric::L2 => T::ref_l2(a, b),
        Metric::InnerProduct => -T::ref_dot(a, b),
        Metric::Cosine => cosine_from_parts(T::ref_dot(a, b), T::ref_dot(a, a), T::ref_dot(b, b)),
    }
}

/// Full-sort brute force with distance function `f`, ordered by `(distance, id)`.
fn brute<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    k: usize,
    f: impl Fn(&[T], &[T]) -> f32,
) -> GroundTruth {
    let mut gt = GroundTruth {
        nq: queries.n(),
        k,
        ids: Vec::new(),
        dists: Vec::new(),
    };
    for q in queries.rows() {
        let mut all: Vec<(f32, u32)> = base
            .rows()
            .enumerate()
            .map(|(i, b)| (f(q, b), i as u32))
            .collect();
        all.sort_by(|a, b| {
            topk::order_key(a.0)
                .total_cmp(&topk::order_key(b.0))
                .then(a.1.cmp(&b.1))
        });
        for &(d, i) in &all[..k] {
            gt.ids.push(i);
            gt.dists.push(d);
        }
    }
    gt
}

/// Random matrix; with `dup`, every third row repeats an earlier one.
fn random_matrix<T: Reference>(
    rng: &mut ChaCha8Rng,
    n: usize,
    dim: usize,
    small: bool,
    dup: bool,
) -> Matrix<T> {
    let mut data: Vec<T> = (0..n * dim).map(|_| T::random(rng, small)).collect();
    if dup {
        for i in (3..n).step_by(3) {
            let src = rng.gen_range(0..i);
            data.copy_within(src * dim..(src + 1) * dim, i * dim);
        }
    }
    Matrix::from_vec(data, dim).unwrap()
}

fn params(query_block: usize, base_block: usize) -> ExactParams {
    ExactParams {
        query_block,
        base_block,
        ..ExactParams::default()
    }
}

/// Checks `got` against both brute forces: exactly against the dispatched kernel (the
/// documented contract), and against the scalar reference (exact for integers, to a rounding
/// tolerance for f32).
fn check<T: Reference>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    k: usize,
    metric: Metric,
    got: &GroundTruth,
) {
    let want = brute(base, queries, k, |a, b| distance(metric, a, b));
    assert_eq!(got.ids, want.ids, "{metric} {} k={k}", T::DTYPE);
    assert_eq!(
        got.dists.iter().map(|d| d.to_bits()).collect::<Vec<_>>(),
        want.dists.iter().map(|d| d.to_bits()).collect::<Vec<_>>()
    );
    let reference = brute(base, queries, k, |a, b| ref_distance(metric, a, b));
    if T::DTYPE != crate::DType::F32 {
        assert_eq!(got, &reference);
        return;
    }
    for q in 0..queries.n() {
        for (slot, (&g, &r)) in got.dists(q).iter().zip(reference.dists(q)).enumerate() {
            let scale = 1.0
                + r.abs()
                    .max(ref_distance(metric, queries.row(q), queries.row(q)).abs());
            assert!(
                (g.is_nan() && r.is_nan()) || g == r || (g - r).abs() <= 1e-4 * scale,
                "q{q} slot{slot}: {g} vs {r}"
            );
        }
    }
}

fn run_case<T: Reference>(
    seed: u64,
    n: usize,
    nq: usize,
    dim: usize,
    k: usize,
    small: bool,
    p: &ExactParams,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let base = random_matrix::<T>(&mut rng, n, dim, small, true);
    let queries = random_matrix::<T>(&mut rng, nq, dim, small, false);
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let got = knn(&base, &queries, k, metric, p, &Control::silent()).unwrap();
        check(&base, &queries, k, metric, &got);
    }
}

fn run_all_types(
    seed: u64,
    n: usize,
    nq: usize,
    dim: usize,
    k: usize,
    small: bool,
    p: &ExactParams,
) {
    run_case::<f32>(seed, n, nq, dim, k, small, p);
    run_case::<u8>(seed, n, nq, dim, k, small, p);
    run_case::<i8>(seed, n, nq, dim, k, small, p);
}

#[test]
fn matches_brute_force_default_blocks() {
    run_all_types(1, 700, 19, 33, 10, false, &ExactParams::default());
    run_all_types(2, 300, 9, 128, 100, false, &ExactParams::default());
}

#[test]
fn matches_brute_force_with_ties_and_duplicates() {
    run_all_types(3, 200, 13, 5, 7, true, &ExactParams::default());
    run_all_types(4, 120, 11, 2, 30, true, &params(3, 3));
}

#[test]
fn k_equal_to_n_and_k_one() {
    run_all_types(5, 45, 10, 7, 45, false, &params(3, 8));
    run_all_types(6, 45, 10, 7, 1, true, &params(1, 1));
    run_all_types(7, 1, 3, 4, 1, false, &ExactParams::default());
}

#[test]
fn tiny_blocks_exercise_tiling_edges() {
    for (qb, bb) in [(1, 1), (3, 3), (1, 33), (9, 31), (17, 65)] {
        run_all_types(8, 97, 21, 17, 9, false, &params(qb, bb));
    }
}

#[test]
fn odd_dimensions() {
    for dim in [1, 3, 15, 16, 17, 31, 65] {
        run_all_types(9 + dim as u64, 150, 10, dim, 12, false, &params(8, 64));
    }
}

#[test]
fn portable_kernel_end_to_end() {
    crate::exact::tile::FORCE_PORTABLE.with(|f| f.set(true));
    assert_eq!(
        crate::exact::tile::TileKernel::detect(),
        crate::exact::tile::TileKernel::Portable
    );
    run_case::<f32>(21, 333, 17, 19, 10, false, &params(8, 100));
    run_case::<f32>(22, 150, 9, 4, 20, true, &params(3, 7));
    crate::exact::tile::FORCE_PORTABLE.with(|f| f.set(false));
}

#[test]
fn identical_base_rows_are_ordered_by_id() {
    let dim = 8;
    let base = Matrix::from_vec(vec![0.5f32; 50 * dim], dim).unwrap();
    let queries = Matrix::from_vec(vec![0.25f32; 3 * dim], dim).unwrap();
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let (gt, stats) = knn_with_stats(
            &base,
            &queries,
            10,
            metric,
            &params(8, 7),
            &Control::silent(),
        )
        .unwrap();
        for q in 0..3 {
            assert_eq!(gt.ids(q), (0..10).collect::<Vec<u32>>().as_slice());
        }
        // every query is a tie at the k-th place: the fast pass cannot certify, the exact pass runs
        assert_eq!(stats.exact_reruns, 3, "{metric}");
        check(&base, &queries, 10, metric, &gt);
    }
}

#[test]
fn zero_vectors_have_cosine_distance_one() {
    let dim = 4;
    let mut data = vec![1.0f32; 6 * dim];
    data[2 * dim..3 * dim].fill(0.0);
    let base = Matrix::from_vec(data, dim).unwrap();
    let q = Matrix::from_vec(vec![0.0f32, 0.0, 0.0, 0.0, -1.0, -1.0, -1.0, -1.0], dim).unwrap();
    let gt = knn(
        &base,
        &q,
        6,
        Metric::Cosine,
        &ExactParams::default(),
        &Control::silent(),
    )
    .unwrap();
    assert_eq!(gt.dists(0), &[1.0; 6]);
    assert_eq!(gt.ids(0), &[0, 1, 2, 3, 4, 5]);
    assert_eq!(gt.ids(1)[0], 2);
    assert_eq!(gt.dists(1)[0], 1.0);
    assert_eq!(gt.dists(1)[1], 2.0);
}

#[test]
fn fast_path_certifies_typical_queries() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let base = random_matrix::<f32>(&mut rng, 3000, 24, false, false);
    let queries = random_matrix::<f32>(&mut rng, 40, 24, false, false);
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let (gt, stats) = knn_with_stats(
            &base,
            &queries,
            10,
            metric,
            &ExactParams::default(),
            &Control::silent(),
        )
        .unwrap();
        assert_eq!(stats.exact_reruns, 0, "{metric}");
        assert_eq!(stats.base_passes, 1);
        check(&base, &queries, 10, metric, &gt);
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let base = random_matrix::<f32>(&mut rng, 900, 20, true, true);
    let queries = random_matrix::<f32>(&mut rng, 37, 20, true, false);
    let bbase = random_matrix::<u8>(&mut rng, 900, 20, true, true);
    let bq = random_matrix::<u8>(&mut rng, 37, 20, true, false);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let p = params(8, 100);
            let c = Control::silent();
            let f = knn(&base, &queries, 25, Metric::L2, &p, &c).unwrap();
            let b = knn(&bbase, &bq, 25, Metric::Cosine, &p, &c).unwrap();
            (f, b)
        })
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn small_budget_processes_queries_in_chunks() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let base = random_matrix::<f32>(&mut rng, 500, 16, false, false);
    let queries = random_matrix::<f32>(&mut rng, 30, 16, false, false);
    let p = ExactParams {
        memory_budget_bytes: 8 * 1024,
        ..ExactParams::default()
    };
    let (gt, stats) =
        knn_with_stats(&base, &queries, 20, Metric::L2, &p, &Control::silent()).unwrap();
    assert!(stats.base_passes > 1, "{stats:?}");
    check(&base, &queries, 20, Metric::L2, &gt);
    let bq = random_matrix::<i8>(&mut rng, 30, 16, false, false);
    let bb = random_matrix::<i8>(&mut rng, 500, 16, false, false);
    let (gt, stats) =
        knn_with_stats(&bb, &bq, 20, Metric::InnerProduct, &p, &Control::silent()).unwrap();
    assert!(stats.base_passes > 1, "{stats:?}");
    check(&bb, &bq, 20, Metric::InnerProduct, &gt);
}

#[test]
fn bad_input_gives_typed_errors() {
    let m = |n: usize, dim: usize| Matrix::from_vec(vec![1.0f32; n * dim], dim).unwrap();
    let p = ExactParams::default();
    let c = Control::silent();
    let l2 = Metric::L2;
    assert_eq!(
        knn(&m(5, 4), &m(2, 4), 6, l2, &p, &c),
        Err(ExactError::KTooLarge { k: 6, n: 5 })
    );
    assert_eq!(
        knn(&m(5, 4), &m(2, 4), 0, l2, &p, &c),
        Err(ExactError::KZero)
    );
    assert_eq!(
        knn(&m(5, 4), &m(2, 3), 1, l2, &p, &c),
        Err(ExactError::DimMismatch {
            base: 4,
            queries: 3
        })
    );
    assert_eq!(
        knn(&m(0, 4), &m(2, 4), 1, l2, &p, &c),
        Err(ExactError::EmptyBase)
    );
    assert_eq!(
        knn(&m(5, 4), &m(0, 4), 1, l2, &p, &c),
        Err(ExactError::EmptyQueries)
    );
    let zero_q = ExactParams {
        query_block: 0,
        ..p.clone()
    };
    assert_eq!(
        knn(&m(5, 4), &m(2, 4), 1, l2, &zero_q, &c),
        Err(ExactError::ZeroParam("query_block"))
    );
    let zero_b = ExactParams {
        base_block: 0,
        ..p.clone()
    };
    assert_eq!(
        knn(&m(5, 4), &m(2, 4), 1, l2, &zero_b, &c),
        Err(ExactError::ZeroParam("base_block"))
    );
    let tiny = ExactParams {
        memory_budget_bytes: 10,
        ..p.clone()
    };
    assert!(matches!(
        knn(&m(5, 4), &m(2, 4), 1, l2, &tiny, &c),
        Err(ExactError::BudgetTooSmall { budget: 10, .. })
    ));
}

#[test]
fn non_finite_values_are_rejected_with_their_row() {
    let c = Control::silent();
    let p = params(8, 3);
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut data = vec![1.0f32; 10 * 4];
        data[7 * 4 + 2] = bad;
        data[9 * 4] = bad;
        let with_bad = Matrix::from_vec(data, 4).unwrap();
        let good = Matrix::from_vec(vec![1.0f32; 10 * 4], 4).unwrap();
        for metric in [Metric::L2, Metric::Cosine] {
            assert_eq!(
                knn(&with_bad, &good, 2, metric, &p, &c),
                Err(ExactError::NonFinite {
                    input: Input::Base,
                    row: 7
                })
            );
            assert_eq!(
                knn(&good, &with_bad, 2, metric, &p, &c),
                Err(ExactError::NonFinite {
                    input: Input::Queries,
                    row: 7
                })
            );
        }
    }
}

#[test]
fn overflowing_distances_are_defined() {
    // finite inputs whose squared distances overflow: all distances are +inf, order by id
    let base = Matrix::from_vec(vec![3e38f32, -3e38, 3e38, -3e38, -3e38, 3e38], 2).unwrap();
    let q = Matrix::from_vec(vec![-3e38f32, 3e38], 2).unwrap();
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let gt = knn(
            &base,
            &q,
            3,
            metric,
            &ExactParams::default(),
            &Control::silent(),
        )
        .unwrap();
        check(&base, &q, 3, metric, &gt);
    }
}

#[test]
fn cancellation_stops_with_cancelled() {
    let base = Matrix::from_vec(vec![1.0f32; 100 * 4], 4).unwrap();
    let flag = Arc::new(AtomicBool::new(true));
    let c = Control::silent().with_cancel_flag(flag);
    for metric in [Metric::L2, Metric::Cosine] {
        assert_eq!(
            knn(&base, &base, 3, metric, &ExactParams::default(), &c),
            Err(ExactError::Cancelled(Cancelled))
        );
    }
    let bytes = Matrix::from_vec(vec![1u8; 100 * 4], 4).unwrap();
    assert_eq!(
        knn(&bytes, &bytes, 3, Metric::L2, &ExactParams::default(), &c),
        Err(ExactError::Cancelled(Cancelled))
    );
    assert_eq!(
        ExactError::Cancelled(Cancelled).kind(),
        crate::ErrorKind::Cancelled
    );
    assert_eq!(ExactError::KZero.kind(), crate::ErrorKind::InvalidInput);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_shapes_match_brute_force(
        seed in any::<u64>(),
        n in 1usize..80,
        nq in 1usize..12,
        dim in 1usize..20,
        k_frac in 0.0f64..1.0,
        qb in 1usize..12,
        bb in 1usize..40,
        small in any::<bool>(),
    ) {
        let k = 1 + ((n - 1) as f64 * k_frac) as usize;
        run_all_types(seed, n, nq, dim, k, small, &params(qb, bb));
    }
}

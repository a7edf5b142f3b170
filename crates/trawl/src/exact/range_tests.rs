//! Tests of [`range_search`] against a naive double loop.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::progress::Cancelled;

const METRICS: [Metric; 3] = [Metric::L2, Metric::InnerProduct, Metric::Cosine];

/// Element types the tests draw at random.
trait Gen: Element {
    /// A random element; `small` draws from a tiny range so that ties and duplicates abound.
    fn random(rng: &mut ChaCha8Rng, small: bool) -> Self;
}

impl Gen for f32 {
    fn random(rng: &mut ChaCha8Rng, small: bool) -> f32 {
        if small {
            f32::from(rng.gen_range(-2i8..=2))
        } else {
            rng.gen_range(-1.0f32..1.0)
        }
    }
}

impl Gen for u8 {
    fn random(rng: &mut ChaCha8Rng, small: bool) -> u8 {
        if small {
            rng.gen_range(0..3)
        } else {
            rng.gen()
        }
    }
}

impl Gen for i8 {
    fn random(rng: &mut ChaCha8Rng, small: bool) -> i8 {
        if small {
            rng.gen_range(-1..=1)
        } else {
            rng.gen()
        }
    }
}

fn random_matrix<T: Gen>(rng: &mut ChaCha8Rng, n: usize, dim: usize, small: bool) -> Matrix<T> {
    let data: Vec<T> = (0..n * dim).map(|_| T::random(rng, small)).collect();
    Matrix::from_vec(data, dim).unwrap()
}

/// Every `(distance, id)` of every query, in base order: the naive double loop.
fn all_distances<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    metric: Metric,
) -> Vec<Vec<(f32, u64)>> {
    queries
        .rows()
        .map(|q| {
            base.rows()
                .enumerate()
                .map(|(i, row)| (crate::kernels::distance(metric, q, row), i as u64))
                .collect()
        })
        .collect()
}

/// The naive range search over precomputed distances.
fn naive(all: &[Vec<(f32, u64)>], radius: f32) -> RangeResults {
    let mut out = RangeResults::new();
    for per_query in all {
        let mut hits: Vec<(f32, u64)> = per_query
            .iter()
            .copied()
            .filter(|&(d, _)| d <= radius)
            .collect();
        hits.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
        out.push(hits.into_iter().map(|(d, id)| (id, d)));
    }
    out
}

/// Equality including the bits of every distance.
fn assert_same(got: &RangeResults, want: &RangeResults, what: &str) {
    assert_eq!(got.lims, want.lims, "{what}: lims");
    assert_eq!(got.ids, want.ids, "{what}: ids");
    let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got.dists), bits(&want.dists), "{what}: distances");
}

fn search<T: Element>(b: &Matrix<T>, q: &Matrix<T>, m: Metric, r: f32) -> RangeResults {
    range_search(b, q, m, r, &Control::silent()).unwrap()
}

/// Radii from below the smallest distance to above the largest, through a few quantiles.
fn radii(all: &[Vec<(f32, u64)>]) -> Vec<f32> {
    let mut d: Vec<f32> = all.iter().flatten().map(|&(d, _)| d).collect();
    d.sort_by(f32::total_cmp);
    let at = |p: f64| d[((d.len() - 1) as f64 * p) as usize];
    vec![
        d[0] - 1.0,
        d[0],
        at(0.002),
        at(0.05),
        at(0.3),
        d[d.len() - 1],
    ]
}

fn check_type<T: Gen>(seed: u64, small: bool) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Two base blocks, the second one partial; a query count that is no multiple of the block.
    let base = random_matrix::<T>(&mut rng, BASE_BLOCK + 517, 9, small);
    let queries = random_matrix::<T>(&mut rng, 13, 9, small);
    for metric in METRICS {
        let all = all_distances(&base, &queries, metric);
        let mut sizes = Vec::new();
        for radius in radii(&all) {
            let got = search(&base, &queries, metric, radius);
            let what = format!("{:?} {metric} radius {radius}", T::DTYPE);
            assert_same(&got, &naive(&all, radius), &what);
            sizes.push(got.total());
        }
        assert_eq!(sizes[0], 0, "{metric}: below the smallest distance");
        assert!(sizes[1] >= 1, "{metric}: the smallest distance is found");
        assert_eq!(sizes[5], base.n() * queries.n(), "{metric}: everything");
    }
}

#[test]
fn matches_the_naive_loop_for_every_metric_and_type() {
    check_type::<f32>(1, false);
    check_type::<f32>(2, true);
    check_type::<u8>(3, false);
    check_type::<u8>(4, true);
    check_type::<i8>(5, false);
    check_type::<i8>(6, true);
}

#[test]
fn radius_zero_finds_exact_duplicates() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut base = random_matrix::<f32>(&mut rng, 300, 6, false).into_vec();
    // Rows 10, 50, 299 are copies of row 3; row 7 of row 200.
    for dst in [10, 50, 299] {
        base.copy_within(3 * 6..4 * 6, dst * 6);
    }
    base.copy_within(200 * 6..201 * 6, 7 * 6);
    let base = Matrix::from_vec(base, 6).unwrap();
    let mut q = base.row(3).to_vec();
    q.extend_from_slice(base.row(200));
    q.extend_from_slice(&[5.0; 6]); // far from everything
    let queries = Matrix::from_vec(q, 6).unwrap();
    let got = search(&base, &queries, Metric::L2, 0.0);
    assert_eq!(got.ids_of(0), &[3, 10, 50, 299]);
    assert_eq!(got.ids_of(1), &[7, 200]);
    assert!(got.ids_of(2).is_empty());
    assert!(got.dists.iter().all(|&d| d == 0.0));
    for metric in METRICS {
        let all = all_distances(&base, &queries, metric);
        assert_same(
            &search(&base, &queries, metric, 0.0),
            &naive(&all, 0.0),
            &format!("{metric}"),
        );
    }
    // Integer duplicates too.
    let bytes = Matrix::from_vec(vec![1u8, 2, 3, 9, 9, 9, 1, 2, 3], 3).unwrap();
    let bq = Matrix::from_vec(vec![1u8, 2, 3], 3).unwrap();
    assert_eq!(search(&bytes, &bq, Metric::L2, 0.0).ids, vec![0, 2]);
}

#[test]
fn negative_radius_selects_large_inner_products_only() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let base = random_matrix::<i8>(&mut rng, 700, 8, false);
    let queries = random_matrix::<i8>(&mut rng, 5, 8, false);
    let radius = -3000.0;
    let got = search(&base, &queries, Metric::InnerProduct, radius);
    assert!(got.total() > 0 && got.total() < base.n() * queries.n());
    for q in 0..queries.n() {
        let dots = base
            .rows()
            .enumerate()
            .filter(|(_, row)| {
                let dot: i32 = row
                    .iter()
                    .zip(queries.row(q))
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
                dot >= 3000
            })
            .count();
        assert_eq!(got.ids_of(q).len(), dots);
        assert!(got.dists_of(q).windows(2).all(|w| w[0] <= w[1]));
    }
    let all = all_distances(&base, &queries, Metric::InnerProduct);
    assert_same(&got, &naive(&all, radius), "ip");
    for metric in [Metric::L2, Metric::Cosine] {
        let r = search(&base, &queries, metric, -1e-6);
        assert_eq!(r.total(), 0, "{metric}");
        assert_eq!(r.nq(), queries.n());
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let base = random_matrix::<f32>(&mut rng, BASE_BLOCK + 100, 12, true);
    let queries = random_matrix::<f32>(&mut rng, 37, 12, true);
    let bbase = random_matrix::<u8>(&mut rng, 900, 12, true);
    let bq = random_matrix::<u8>(&mut rng, 21, 12, true);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            (
                search(&base, &queries, Metric::L2, 12.0),
                search(&base, &queries, Metric::Cosine, 0.4),
                search(&bbase, &bq, Metric::InnerProduct, -20.0),
            )
        })
    };
    let one = run(1);
    assert!(one.0.total() > 0 && one.1.total() > 0 && one.2.total() > 0);
    for threads in [2, 3, 8] {
        let other = run(threads);
        assert_same(&other.0, &one.0, "l2");
        assert_same(&other.1, &one.1, "cosine");
        assert_same(&other.2, &one.2, "ip");
    }
}

#[test]
fn empty_inputs_give_empty_results() {
    let base = Matrix::from_vec(vec![0.5f32; 40], 4).unwrap();
    let none = Matrix::from_vec(Vec::<f32>::new(), 4).unwrap();
    let r = search(&base, &none, Metric::L2, 1.0);
    assert_eq!(r, RangeResults::new());
    let r = search(&none, &base, Metric::L2, 1.0);
    assert_eq!(r.nq(), 10);
    assert_eq!(r.total(), 0);
}

#[test]
fn bad_radius_and_inputs_are_errors() {
    let base = Matrix::from_vec(vec![0.5f32; 40], 4).unwrap();
    let c = Control::silent();
    for radius in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let err = range_search(&base, &base, Metric::L2, radius, &c).unwrap_err();
        assert!(matches!(err, ExactError::NonFiniteRadius(_)), "{err}");
        assert!(err.to_string().contains("radius"), "{err}");
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    }
    let q3 = Matrix::from_vec(vec![0.5f32; 6], 3).unwrap();
    assert_eq!(
        range_search(&base, &q3, Metric::L2, 1.0, &c),
        Err(ExactError::DimMismatch {
            base: 4,
            queries: 3
        })
    );
    let mut bad_q = vec![0.5f32; 12];
    bad_q[9] = f32::NAN;
    let bad_q = Matrix::from_vec(bad_q, 4).unwrap();
    assert_eq!(
        range_search(&base, &bad_q, Metric::L2, 1.0, &c),
        Err(ExactError::NonFinite {
            input: Input::Queries,
            row: 2
        })
    );
    // A non-finite base row in the second block is found (and reported by its row).
    let n = BASE_BLOCK + 50;
    let mut big = vec![0.25f32; n * 2];
    big[2 * (BASE_BLOCK + 7) + 1] = f32::INFINITY;
    big[2 * (BASE_BLOCK + 9)] = f32::NAN;
    let big = Matrix::from_vec(big, 2).unwrap();
    let q = Matrix::from_vec(vec![0.0f32; 2], 2).unwrap();
    assert_eq!(
        range_search(&big, &q, Metric::Cosine, 1.0, &c),
        Err(ExactError::NonFinite {
            input: Input::Base,
            row: BASE_BLOCK + 7
        })
    );
}

#[test]
fn cancellation_stops_with_cancelled() {
    let base = Matrix::from_vec(vec![1.0f32; 100 * 4], 4).unwrap();
    let c = Control::silent().with_cancel_flag(Arc::new(AtomicBool::new(true)));
    assert_eq!(
        range_search(&base, &base, Metric::L2, 1.0, &c),
        Err(ExactError::Cancelled(Cancelled))
    );
}

//! Range search: every vector within a radius, on every kind, equals exact range ground truth
//! (`trawl::exact::range_search`) at generous settings — ids and distance bits — for every
//! metric; radius edge cases behave as documented; the growing-k baseline agrees.

mod common;

use common::{build, data};
use trawl::data::{Matrix, RangeResults};
use trawl::filter::QueryFilter;
use trawl::kinds::flat::build_flat;
use trawl::kinds::graph::OpenOptions;
use trawl::kinds::{open, AnyIndex, Options, RangeHits, Run};
use trawl::progress::Control;
use trawl::{Element, Metric};

/// The median over queries of the distance to the `j`-th nearest (1-based).
fn radius_at<T: Element>(base: &Matrix<T>, q: &Matrix<T>, metric: Metric, j: usize) -> f32 {
    let p = trawl::exact::ExactParams::default();
    let gt = trawl::exact::knn(base, q, j, metric, &p, &Control::silent()).unwrap();
    let mut d: Vec<f32> = (0..gt.nq).map(|i| gt.dists[i * gt.k + j - 1]).collect();
    d.sort_by(f32::total_cmp);
    d[d.len() / 2]
}

fn exact<T: Element>(base: &Matrix<T>, q: &Matrix<T>, metric: Metric, r: f32) -> RangeResults {
    trawl::exact::range_search(base, q, metric, r, &Control::silent()).unwrap()
}

/// `got` equals `want`: per query the same ids with the same distance bits, in order.
fn assert_same(got: &RangeHits, want: &RangeResults, what: &str) {
    assert_eq!(got.nq(), want.nq(), "{what}");
    for q in 0..want.nq() {
        assert_eq!(got.ids_of(q), want.ids_of(q), "{what}: query {q}");
        let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(got.dists_of(q)),
            bits(want.dists_of(q)),
            "{what}: query {q}"
        );
    }
}

fn search(ix: &AnyIndex, o: &Options, q: &Matrix<f32>, r: f32) -> RangeHits {
    let p = o.range_params(ix, 10, r).unwrap();
    ix.range_search((q).into(), r, &p, Run::from(2), &QueryFilter::none(), None)
        .unwrap()
}

fn generous() -> Options {
    Options {
        l: Some(200),
        range_slack: 1.0,
        ..Options::default()
    }
}

#[test]
fn graph_and_flat_equal_exact_range_truth_for_every_metric() {
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let (base, q) = data::<f32>(3_000, 30, 24, 7);
        let r = radius_at(&base, &q, metric, 20);
        let want = exact(&base, &q, metric, r);
        let counts: Vec<usize> = (0..want.nq()).map(|i| want.ids_of(i).len()).collect();
        assert!(
            counts.iter().any(|&c| c > 20) && counts.iter().any(|&c| c < 20),
            "{counts:?}"
        );
        let gdir = tempfile::tempdir().unwrap();
        build(&base, gdir.path(), metric, 8);
        let fdir = tempfile::tempdir().unwrap();
        build_flat(&base, fdir.path(), metric, &Control::silent()).unwrap();
        let flat = open(fdir.path(), OpenOptions::default()).unwrap();
        assert_same(
            &search(&flat, &generous(), &q, r),
            &want,
            &format!("flat {metric:?}"),
        );
        let graph = open(gdir.path(), OpenOptions::default()).unwrap();
        for strategy in ["beam", "pipe"] {
            let o = Options {
                strategy: strategy.into(),
                ..generous()
            };
            let got = search(&graph, &o, &q, r);
            assert_same(&got, &want, &format!("graph {strategy} {metric:?}"));
            // Every result came from a page read or the cache: the reads are counted.
            assert!(got.total().io.pages_read > 0);
        }
        // The growing-k baseline: each round a top-k search with L = max(200, k), so it is
        // approximate where a query has hundreds of results; what it returns is exact.
        let p = generous().params(&graph, 10).unwrap();
        let grown = graph
            .range_search_growing((&q).into(), r, &p, Run::from(1), &QueryFilter::none())
            .unwrap();
        let (mut hit, mut all) = (0usize, 0usize);
        for i in 0..want.nq() {
            let truth: std::collections::HashSet<u64> = want.ids_of(i).iter().copied().collect();
            assert!(
                grown.ids_of(i).iter().all(|id| truth.contains(id)),
                "{metric:?}"
            );
            hit += grown.ids_of(i).len();
            all += truth.len();
        }
        assert!(
            hit as f64 >= 0.9 * all as f64,
            "growing-k {metric:?}: {hit} of {all}"
        );
    }
}

#[test]
fn radius_edge_cases_are_documented_answers() {
    let (mut base, _) = data::<f32>(2_000, 1, 16, 3);
    // Query 0 is a base vector that is there twice: radius 0 finds exactly those two.
    let dup: Vec<f32> = base.row(5).to_vec();
    let mut rows = base.as_slice().to_vec();
    rows.extend_from_slice(&dup);
    base = Matrix::from_vec(rows, 16).unwrap();
    let q = Matrix::from_vec(dup.clone(), 16).unwrap();
    let gdir = tempfile::tempdir().unwrap();
    build(&base, gdir.path(), Metric::L2, 8);
    let fdir = tempfile::tempdir().unwrap();
    build_flat(&base, fdir.path(), Metric::L2, &Control::silent()).unwrap();
    for dir in [gdir.path(), fdir.path()] {
        let ix = open(dir, OpenOptions::default()).unwrap();
        let zero = search(&ix, &generous(), &q, 0.0);
        assert_eq!(zero.ids_of(0), &[5, 2_000]);
        assert!(zero.dists_of(0).iter().all(|&d| d == 0.0));
        // A negative radius finds nothing with L2 distances.
        assert_eq!(search(&ix, &generous(), &q, -1.0).results.total(), 0);
        // NaN and infinite radii are errors naming the value.
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let e = generous()
                .range_params(&ix, 10, bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("radius"), "{e}");
            let p = generous().params(&ix, 10).unwrap();
            let e = ix
                .range_search(
                    (&q).into(),
                    bad,
                    &p,
                    Run::from(1),
                    &QueryFilter::none(),
                    None,
                )
                .unwrap_err()
                .to_string();
            assert!(e.contains("finite"), "{e}");
        }
        // max_results keeps the nearest.
        let p = generous().range_params(&ix, 10, 1e9).unwrap();
        let capped = ix
            .range_search(
                (&q).into(),
                1e9,
                &p,
                Run::from(1),
                &QueryFilter::none(),
                Some(7),
            )
            .unwrap();
        assert_eq!(capped.ids_of(0).len(), 7);
        assert_eq!(&capped.ids_of(0)[..2], &[5, 2_000]);
    }
}

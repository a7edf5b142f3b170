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
    search_k(ix, o, q, r, 10)
}

/// With `k`: the decoupled layout re-ranks at least the `k` nearest by code.
fn search_k(ix: &AnyIndex, o: &Options, q: &Matrix<f32>, r: f32, k: usize) -> RangeHits {
    let p = o.range_params(ix, k, r).unwrap();
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

/// Ids of `r`'s query `q` in a set.
fn set_of(r: &RangeResults, q: usize) -> std::collections::HashSet<u64> {
    r.ids_of(q).iter().copied().collect()
}

#[test]
fn decoupled_and_sharded_equal_exact_range_truth() {
    use trawl::kinds::graph::layout::decoupled::vectors::VectorParams;
    use trawl::kinds::graph::IndexLayout;
    let (base, q) = data::<f32>(4_000, 30, 24, 9);
    let r = radius_at(&base, &q, Metric::L2, 30);
    let want = exact(&base, &q, Metric::L2, r);
    // The decoupled layout re-ranks every candidate within the code-space radius from the
    // vector file, and at least the k nearest by code (the 8-byte codes of 24 dimensions are
    // coarse: a query with few results may have them all beyond twice the radius by code);
    // with k = L it re-ranks every node it expands, as the packed layout does.
    let ddir = tempfile::tempdir().unwrap();
    build(&base, ddir.path(), Metric::L2, 8);
    common::open(ddir.path())
        .write_decoupled(&VectorParams::default(), &Control::silent())
        .unwrap();
    let o = OpenOptions {
        layout: IndexLayout::Decoupled,
        ..OpenOptions::default()
    };
    let dec = open(ddir.path(), o).unwrap();
    for strategy in ["beam", "pipe"] {
        let opts = Options {
            strategy: strategy.into(),
            layout: IndexLayout::Decoupled,
            l: Some(600),
            ..generous()
        };
        let got = search_k(&dec, &opts, &q, r, 600);
        assert_same(&got, &want, &format!("decoupled {strategy}"));
        assert!(
            got.total().rerank.vector_reads > 0,
            "vectors read from their own file"
        );
    }
    // Sharded: every shard's results merged, a replicated vector once.
    let sdir = tempfile::tempdir().unwrap();
    let sp = trawl::kinds::sharded::ShardParams {
        shards: 3,
        ..Default::default()
    };
    let ip = common::params(Metric::L2, 8);
    trawl::kinds::sharded::build_sharded_index(&base, sdir.path(), &sp, &ip, &Control::silent())
        .unwrap();
    let sh = open(sdir.path(), OpenOptions::default()).unwrap();
    assert_same(&search(&sh, &generous(), &q, r), &want, "sharded");
    // Visiting one shard per query finds a subset, every result exact.
    let one = Options {
        probe: 1,
        ..generous()
    };
    let part = search(&sh, &one, &q, r);
    for i in 0..q.n() {
        assert!(set_of(&part.results, i).is_subset(&set_of(&want, i)));
    }
}

#[test]
fn a_live_index_answers_with_its_inserts_and_without_its_deletes() {
    use trawl::kinds::graph::updates::live::{Access, LiveIndex};
    let dim = 24;
    let (all, q) = data::<f32>(5_000, 30, dim, 13);
    let base = Matrix::from_vec(all.as_slice()[..4_000 * dim].to_vec(), dim).unwrap();
    let dir = tempfile::tempdir().unwrap();
    build(&base, dir.path(), Metric::L2, 8);
    let live = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    let new_ids: Vec<u64> = (0..1_000).map(|i| 100_000 + i).collect();
    live.insert(Some(&new_ids), &all.as_slice()[4_000 * dim..])
        .unwrap();
    let gone: Vec<u64> = (0..4_000)
        .step_by(7)
        .chain((100_000..101_000).step_by(5))
        .collect();
    live.delete(&gone).unwrap();
    drop(live);
    // The live set, by id: rows 0..4000 keep their ids, the new rows theirs.
    let r = radius_at(&all, &q, Metric::L2, 25);
    let full = exact(&all, &q, Metric::L2, r);
    let id_of = |row: u64| {
        if row < 4_000 {
            row
        } else {
            100_000 + row - 4_000
        }
    };
    let dead: std::collections::HashSet<u64> = gone.iter().copied().collect();
    let ix = open(dir.path(), OpenOptions::default()).unwrap();
    let got = search(&ix, &generous(), &q, r);
    for i in 0..q.n() {
        let want: Vec<(u64, u32)> = full
            .ids_of(i)
            .iter()
            .zip(full.dists_of(i))
            .map(|(&row, d)| (id_of(row), d.to_bits()))
            .filter(|(id, _)| !dead.contains(id))
            .collect();
        let mut have: Vec<(u64, u32)> = got
            .ids_of(i)
            .iter()
            .zip(got.dists_of(i))
            .map(|(&id, d)| (id, d.to_bits()))
            .collect();
        let mut want = want;
        want.sort();
        have.sort();
        assert_eq!(have, want, "query {i}");
    }
}

#[test]
fn a_filter_keeps_only_matching_results_within_the_radius() {
    use std::sync::Arc;
    use trawl::filter::{AttrsBuilder, CmpOp, Expr, Filters, Value};
    let n = 3_000;
    let (base, q) = data::<f32>(n, 30, 16, 17);
    let mut b = AttrsBuilder::new(n).unwrap();
    for row in 0..n as u32 {
        b.add_label(row, &format!("L{}", row % 4)).unwrap();
    }
    let attrs = Arc::new(b.finish().unwrap());
    let e = Expr::Cmp {
        field: "label".into(),
        op: CmpOp::Eq,
        value: Value::Str("L1".into()),
    };
    let r = radius_at(&base, &q, Metric::L2, 40);
    let all = exact(&base, &q, Metric::L2, r);
    let gdir = tempfile::tempdir().unwrap();
    let mut params = common::params(Metric::L2, 8);
    params.attrs = Some(attrs.clone());
    trawl::kinds::graph::build_index(&base, gdir.path(), &params, &Control::silent()).unwrap();
    let fdir = tempfile::tempdir().unwrap();
    trawl::kinds::flat::build_flat_with_attrs(
        &base,
        fdir.path(),
        Metric::L2,
        Some(&attrs),
        &Control::silent(),
    )
    .unwrap();
    let f = QueryFilter {
        filters: Filters::All(&e),
        params: Default::default(),
    };
    for dir in [gdir.path(), fdir.path()] {
        let ix = open(dir, OpenOptions::default()).unwrap();
        let p = generous().range_params(&ix, 10, r).unwrap();
        let got = ix
            .range_search((&q).into(), r, &p, Run::from(2), &f, None)
            .unwrap();
        for i in 0..q.n() {
            let want: Vec<u64> = all
                .ids_of(i)
                .iter()
                .copied()
                .filter(|id| id % 4 == 1)
                .collect();
            assert_eq!(got.ids_of(i), &want[..], "{}: query {i}", dir.display());
        }
    }
}

#[test]
fn a_query_with_fifty_thousand_results_gets_them_all() {
    // No cap: the elastic list's overflow heap grows with the result, nothing else does.
    let (base, q) = data::<f32>(60_000, 2, 8, 21);
    let r = radius_at(&base, &q, Metric::L2, 55_000);
    let want = exact(&base, &q, Metric::L2, r);
    assert!(want.ids_of(0).len() >= 50_000, "{}", want.ids_of(0).len());
    let gdir = tempfile::tempdir().unwrap();
    build(&base, gdir.path(), Metric::L2, 8);
    let graph = open(gdir.path(), OpenOptions::default()).unwrap();
    let got = search(&graph, &generous(), &q, r);
    for i in 0..q.n() {
        let (g, w) = (set_of(&got.results, i), set_of(&want, i));
        assert!(g.is_subset(&w));
        assert!(
            g.len() as f64 >= 0.999 * w.len() as f64,
            "{} of {}",
            g.len(),
            w.len()
        );
    }
    // max_results caps at the nearest, in order.
    let p = generous().range_params(&graph, 10, r).unwrap();
    let capped = graph
        .range_search(
            (&q).into(),
            r,
            &p,
            Run::from(1),
            &QueryFilter::none(),
            Some(100),
        )
        .unwrap();
    assert_eq!(capped.ids_of(0), &got.ids_of(0)[..100]);
}

#[test]
fn an_index_smaller_than_k_is_range_searched() {
    let (base, q) = data::<f32>(5, 2, 8, 23);
    let fdir = tempfile::tempdir().unwrap();
    build_flat(&base, fdir.path(), Metric::L2, &Control::silent()).unwrap();
    let flat = open(fdir.path(), OpenOptions::default()).unwrap();
    let got = search(&flat, &generous(), &q, 1e30);
    assert_eq!(got.ids_of(0).len(), 5);
    assert_same(&got, &exact(&base, &q, Metric::L2, 1e30), "5 vectors");
    // A graph index of 5 vectors: k = 10 would be refused by a top-k search.
    let gdir = tempfile::tempdir().unwrap();
    build(&base, gdir.path(), Metric::L2, 4);
    let graph = open(gdir.path(), OpenOptions::default()).unwrap();
    let got = search(&graph, &generous(), &q, 1e30);
    assert_same(
        &got,
        &exact(&base, &q, Metric::L2, 1e30),
        "5 vectors, graph",
    );
}

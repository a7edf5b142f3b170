//! Range search of an IVF index against brute force on the same vectors: every metric, the
//! adaptive probe, filters, counters and bad inputs.

use std::path::Path;

use crate::data::{Matrix, Queries};
use crate::filter::{
    AttrsBuilder, CmpOp, Expr, FilterError, FilterParams, Filters, Plan, QueryFilter, Value,
};
use crate::kinds::graph::OpenOptions;
use crate::kinds::ivf::{build_ivf_with_attrs, IvfIndex, IvfParams, IvfSearchParams};
use crate::kinds::Run;
use crate::progress::Control;
use crate::quant::pq::PqParams;
use crate::search::{BatchOutput, SearchError};
use crate::synth::{generate, SynthParams};
use crate::{DType, Metric};

const N: usize = 3_000;
const NQ: usize = 12;
const DIM: usize = 16;

type Hits = Vec<(u32, f32)>;

fn data(seed: u64) -> (Matrix<f32>, Matrix<f32>) {
    generate::<f32>(&SynthParams::new(N, NQ, DIM, DType::F32, seed)).unwrap()
}

/// An index of `base` in `dir`: one-dimensional PQ subspaces, so code distances are close.
fn build(base: &Matrix<f32>, dir: &Path, metric: Metric, labels: bool) -> IvfIndex {
    let params = IvfParams {
        metric,
        pq: PqParams {
            bytes_per_vector: DIM,
            ..PqParams::default()
        },
        ..IvfParams::default()
    };
    build_with(base, dir, &params, labels)
}

fn build_with(base: &Matrix<f32>, dir: &Path, params: &IvfParams, labels: bool) -> IvfIndex {
    let attrs = labels.then(|| {
        let mut b = AttrsBuilder::new(N).unwrap();
        for row in 0..N as u32 {
            b.add_label(row, &format!("L{}", row % 4)).unwrap();
        }
        b.finish().unwrap()
    });
    build_ivf_with_attrs(base, dir, params, attrs.as_ref(), &Control::silent()).unwrap();
    IvfIndex::open(dir, OpenOptions::default()).unwrap()
}

fn label(l: &str) -> Expr {
    Expr::Cmp {
        field: "label".into(),
        op: CmpOp::Eq,
        value: Value::Str(l.into()),
    }
}

/// Every vector within `radius` of each query that `keep` keeps, by `(distance, id)`.
fn brute(
    base: &Matrix<f32>,
    q: &Matrix<f32>,
    metric: Metric,
    radius: f32,
    keep: impl Fn(u32) -> bool,
) -> Vec<Hits> {
    (0..q.n())
        .map(|r| {
            let mut h: Hits = (0..base.n() as u32)
                .filter(|&id| keep(id))
                .map(|id| {
                    (
                        id,
                        crate::kernels::distance(metric, q.row(r), base.row(id as usize)),
                    )
                })
                .filter(|&(_, d)| d <= radius)
                .collect();
            h.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            h
        })
        .collect()
}

/// The median over queries of the distance to the `rank`-th nearest vector.
fn radius_at(base: &Matrix<f32>, q: &Matrix<f32>, metric: Metric, rank: usize) -> f32 {
    let mut at: Vec<f32> = brute(base, q, metric, f32::INFINITY, |_| true)
        .iter()
        .map(|h| h[rank].1)
        .collect();
    at.sort_unstable_by(f32::total_cmp);
    at[at.len() / 2]
}

fn bits(h: &[(u32, f32)]) -> Vec<(u32, u32)> {
    h.iter().map(|&(id, d)| (id, d.to_bits())).collect()
}

fn run(
    ix: &IvfIndex,
    q: &Matrix<f32>,
    radius: f32,
    p: &IvfSearchParams,
    f: &QueryFilter<'_>,
) -> Result<BatchOutput, SearchError> {
    let r = Run {
        threads: 2,
        interleave: 1,
    };
    ix.range_search_batch(Queries::from(q), radius, p, r, f)
}

fn all_lists(ix: &IvfIndex) -> IvfSearchParams {
    IvfSearchParams {
        nprobe: ix.meta().nlist(),
        ..IvfSearchParams::default()
    }
}

#[test]
fn every_metric_equals_brute_force() {
    for (i, metric) in [Metric::L2, Metric::InnerProduct, Metric::Cosine]
        .into_iter()
        .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let (base, q) = data(11 + i as u64);
        let ix = build(&base, dir.path(), metric, false);
        let radius = radius_at(&base, &q, metric, 60);
        let want = brute(&base, &q, metric, radius, |_| true);
        let total: usize = want.iter().map(Vec::len).sum();
        assert!((NQ * 5..=NQ * 400).contains(&total), "{metric:?}: {total}");
        let none = QueryFilter::none();
        // Every list probed: exactly brute force.
        let out = run(&ix, &q, radius, &all_lists(&ix), &none).unwrap();
        for r in 0..NQ {
            assert_eq!(
                bits(&out.hits_of(r)),
                bits(&want[r]),
                "{metric:?} query {r}"
            );
        }
        // The adaptive probe from a few lists: exact hits, nearly all of them.
        let few = IvfSearchParams {
            nprobe: 4,
            ..IvfSearchParams::default()
        };
        let out = run(&ix, &q, radius, &few, &none).unwrap();
        let mut found = 0;
        for r in 0..NQ {
            let got = bits(&out.hits_of(r));
            let truth = bits(&want[r]);
            assert!(
                got.iter().all(|h| truth.contains(h)),
                "{metric:?} query {r}"
            );
            assert!(got.windows(2).all(|w| w[0].0 != w[1].0));
            found += got.len();
            assert!(out.stats[r].ivf.lists_probed >= 4);
        }
        let recall = found as f64 / total as f64;
        assert!(recall >= 0.9, "{metric:?}: recall {recall:.3}");
        // The same search again: the same hits and the same work.
        let again = run(&ix, &q, radius, &few, &none).unwrap();
        for r in 0..NQ {
            assert_eq!(bits(&again.hits_of(r)), bits(&out.hits_of(r)));
            assert_eq!(again.stats[r].ivf, out.stats[r].ivf);
            assert_eq!(again.stats[r].io.pages_read, out.stats[r].io.pages_read);
        }
        // A radius below every distance finds nothing; below 0 with L2, no code is within
        // it either, so nothing is read (the widened code radius of a negative inner-product
        // radius may still admit a candidate to check).
        let below = brute(&base, &q, metric, f32::INFINITY, |_| true)
            .iter()
            .map(|h| h[0].1)
            .fold(f32::INFINITY, f32::min)
            - 1.0;
        let out = run(&ix, &q, below, &all_lists(&ix), &none).unwrap();
        for r in 0..NQ {
            assert!(out.hits_of(r).is_empty(), "{metric:?} query {r}");
            if metric == Metric::L2 {
                assert_eq!(out.stats[r].io.pages_read, 0);
            }
        }
    }
}

#[test]
fn rabitq_codes_find_nearly_every_result_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data(3);
    let params = IvfParams {
        quant: crate::quant::QuantKind::RaBitQ { bits: 4 },
        ..IvfParams::default()
    };
    let ix = build_with(&base, dir.path(), &params, false);
    let radius = radius_at(&base, &q, Metric::L2, 60);
    let want = brute(&base, &q, Metric::L2, radius, |_| true);
    let p = IvfSearchParams {
        nprobe: 8,
        ..IvfSearchParams::default()
    };
    let out = run(&ix, &q, radius, &p, &QueryFilter::none()).unwrap();
    let (mut found, mut total) = (0, 0);
    for r in 0..NQ {
        let got = bits(&out.hits_of(r));
        let truth = bits(&want[r]);
        assert!(got.iter().all(|h| truth.contains(h)), "query {r}");
        found += got.len();
        total += truth.len();
    }
    let recall = found as f64 / total as f64;
    assert!(recall >= 0.9, "recall {recall:.3}");
}

#[test]
fn a_filter_restricts_the_results_under_every_plan() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data(5);
    let ix = build(&base, dir.path(), Metric::L2, true);
    let radius = radius_at(&base, &q, Metric::L2, 120);
    let e = label("L1");
    let want = brute(&base, &q, Metric::L2, radius, |id| id % 4 == 1);
    assert!(want.iter().map(Vec::len).sum::<usize>() >= NQ * 5);
    for plan in [
        None,
        Some(Plan::Inline),
        Some(Plan::Scan),
        Some(Plan::Exact),
    ] {
        let f = QueryFilter {
            filters: Filters::All(&e),
            params: FilterParams {
                plan,
                ..FilterParams::default()
            },
        };
        let out = run(&ix, &q, radius, &all_lists(&ix), &f).unwrap();
        for r in 0..NQ {
            assert_eq!(bits(&out.hits_of(r)), bits(&want[r]), "{plan:?} query {r}");
            let st = out.stats[r].filter;
            assert_eq!(st.plan_inline + st.plan_scan + st.plan_exact, 1);
            assert_eq!(st.matches, (N / 4) as u64);
        }
    }
    // Per-query filters: an unfiltered query gets every vector within the radius.
    let per: Vec<Option<Expr>> = (0..NQ).map(|r| (r % 2 == 0).then(|| e.clone())).collect();
    let f = QueryFilter {
        filters: Filters::PerQuery(&per),
        params: FilterParams::default(),
    };
    let every = brute(&base, &q, Metric::L2, radius, |_| true);
    let out = run(&ix, &q, radius, &all_lists(&ix), &f).unwrap();
    for r in 0..NQ {
        let w = if r % 2 == 0 { &want[r] } else { &every[r] };
        assert_eq!(bits(&out.hits_of(r)), bits(w), "query {r}");
    }
}

#[test]
fn counters_add_up_and_bad_inputs_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data(7);
    let ix = build(&base, dir.path(), Metric::L2, false);
    let radius = radius_at(&base, &q, Metric::L2, 40);
    let none = QueryFilter::none();
    let p = IvfSearchParams {
        nprobe: 8,
        page_mates: false,
        ..IvfSearchParams::default()
    };
    let out = run(&ix, &q, radius, &p, &none).unwrap();
    let per_read = ix.vectors().geometry().pages_per_vector as u64;
    for (r, st) in out.stats.iter().enumerate() {
        // Without page mates every candidate is read once: by its own read or a merged one.
        assert_eq!(
            st.traversal.exact_distances,
            st.io.io_requests + st.ivf.pages_merged
        );
        assert_eq!(st.io.pages_read, st.io.io_requests * per_read);
        assert_eq!(st.io.bytes_read, st.io.pages_read * 4096);
        assert_eq!(st.rerank.vector_reads, st.io.io_requests);
        assert!(st.traversal.exact_distances >= out.hits_of(r).len() as u64);
        assert!(st.ivf.candidates >= st.ivf.candidates_unique);
        assert_eq!(st.traversal.pq_distances, st.ivf.candidates_unique);
        assert!(st.ivf.lists_probed >= 8 && st.ivf.centroid_distances > 0);
    }
    // Page mates only add exact results.
    let mates = IvfSearchParams {
        page_mates: true,
        ..p
    };
    let more = run(&ix, &q, radius, &mates, &none).unwrap();
    for r in 0..NQ {
        let with = bits(&more.hits_of(r));
        assert!(bits(&out.hits_of(r)).iter().all(|h| with.contains(h)));
    }
    // Bad inputs.
    let all = all_lists(&ix);
    let e = run(&ix, &q, f32::NAN, &all, &none).unwrap_err();
    assert!(matches!(e, SearchError::Unsupported(_)), "{e}");
    let bad = IvfSearchParams {
        nprobe: ix.meta().nlist() + 1,
        ..all
    };
    assert!(matches!(
        run(&ix, &q, radius, &bad, &none),
        Err(SearchError::InvalidRerank(_))
    ));
    let short = Matrix::from_vec(vec![0.0f32; 2 * (DIM - 1)], DIM - 1).unwrap();
    assert!(matches!(
        run(&ix, &short, radius, &all, &none),
        Err(SearchError::DimMismatch { .. })
    ));
    let mut v = q.as_slice().to_vec();
    v[3 * DIM] = f32::NAN;
    let nan = Matrix::from_vec(v, DIM).unwrap();
    assert!(run(&ix, &nan, radius, &all, &none).is_err());
    let bytes = vec![0u8; DIM];
    let e = ix
        .range_search_batch(
            Queries::new(&bytes, DIM).unwrap(),
            radius,
            &all,
            Run::from(1),
            &none,
        )
        .unwrap_err();
    assert!(matches!(e, SearchError::DTypeMismatch { .. }), "{e}");
    // A filter on an index without attributes.
    let e = label("L1");
    let f = QueryFilter {
        filters: Filters::All(&e),
        params: FilterParams::default(),
    };
    assert!(matches!(
        run(&ix, &q, radius, &all, &f),
        Err(SearchError::Filter {
            source: FilterError::NoAttributes,
            ..
        })
    ));
}

//! `trawl gt --radius`: exact range ground truth, checked against a naive double loop, and the
//! option combinations it refuses.

mod common;

use std::path::Path;

use common::{fails, ok, s};
use trawl::data::{read_matrix_any, read_range_results, AnyMatrix, Matrix, RangeResults};
use trawl::kernels::distance;
use trawl::{Element, Metric};

/// Every `(distance, id)` of each query, in base order.
fn all_distances<T: Element>(
    base: &Matrix<T>,
    queries: &Matrix<T>,
    m: Metric,
) -> Vec<Vec<(f32, u64)>> {
    queries
        .rows()
        .map(|q| {
            base.rows()
                .enumerate()
                .map(|(i, row)| (distance(m, q, row), i as u64))
                .collect()
        })
        .collect()
}

fn distances(base: &Path, queries: &Path, m: Metric) -> Vec<Vec<(f32, u64)>> {
    match (
        read_matrix_any(base).unwrap(),
        read_matrix_any(queries).unwrap(),
    ) {
        (AnyMatrix::F32(b), AnyMatrix::F32(q)) => all_distances(&b, &q, m),
        (AnyMatrix::U8(b), AnyMatrix::U8(q)) => all_distances(&b, &q, m),
        (AnyMatrix::I8(b), AnyMatrix::I8(q)) => all_distances(&b, &q, m),
        _ => panic!("element types differ"),
    }
}

/// The naive range search: filter, then sort by (distance, id).
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

/// The distance below which a fraction `p` of all query-base pairs lie.
fn quantile(all: &[Vec<(f32, u64)>], p: f64) -> f32 {
    let mut d: Vec<f32> = all.iter().flatten().map(|&(d, _)| d).collect();
    d.sort_by(f32::total_cmp);
    d[((d.len() - 1) as f64 * p) as usize]
}

fn gen(dir: &Path, ext: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let base = dir.join(format!("base.{ext}"));
    let queries = dir.join(format!("queries.{ext}"));
    ok(&[
        "gen",
        s(&base),
        "--queries",
        s(&queries),
        "-n",
        "5000",
        "--nq",
        "40",
        "--dim",
        "16",
    ]);
    (base, queries)
}

/// Runs `trawl gt --radius` and checks the file against the naive computation; returns stdout.
fn check(base: &Path, queries: &Path, metric: &str, radius: f32, out: &Path) -> String {
    let r = format!("--radius={radius}");
    let stdout = ok(&[
        "gt",
        s(base),
        s(queries),
        "--metric",
        metric,
        &r,
        "-o",
        s(out),
        "--threads",
        "2",
    ]);
    let m: Metric = metric.parse().unwrap();
    let want = naive(&distances(base, queries, m), radius);
    let got = read_range_results(out).unwrap();
    assert_eq!(got.lims, want.lims, "{metric} {radius}");
    assert_eq!(got.ids, want.ids, "{metric} {radius}");
    let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got.dists), bits(&want.dists), "{metric} {radius}");
    let summary = format!("40 queries, {} results", want.total());
    assert!(stdout.contains(&summary), "{stdout}");
    assert!(
        stdout.contains("median") && stdout.contains("p99"),
        "{stdout}"
    );
    stdout
}

#[test]
fn range_ground_truth_matches_the_naive_loop() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("range.bin");
    let (base, queries) = gen(dir.path(), "fbin");
    for (metric, m) in [
        ("l2", Metric::L2),
        ("cosine", Metric::Cosine),
        ("ip", Metric::InnerProduct),
    ] {
        let all = distances(&base, &queries, m);
        for p in [0.001, 0.02] {
            check(&base, &queries, metric, quantile(&all, p), &out);
        }
    }
    // Inner-product radii are negative here (the distances are negated dot products).
    let all = distances(&base, &queries, Metric::InnerProduct);
    let r = quantile(&all, 0.01);
    assert!(r < 0.0, "{r}");
    // Also as two words (`--radius -X`).
    ok(&[
        "gt",
        s(&base),
        s(&queries),
        "--metric",
        "ip",
        "--radius",
        &r.to_string(),
        "-o",
        s(&out),
    ]);
    assert_eq!(read_range_results(&out).unwrap(), naive(&all, r));
    // A radius below every distance: every query has no result.
    let stdout = check(&base, &queries, "l2", -1.0, &out);
    assert!(stdout.contains("40 queries with none"), "{stdout}");
}

#[test]
fn range_ground_truth_of_byte_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("range.bin");
    let (base, queries) = gen(dir.path(), "u8bin");
    let all = distances(&base, &queries, Metric::L2);
    check(&base, &queries, "l2", quantile(&all, 0.01), &out);
    check(&base, &queries, "l2", 0.0, &out);
}

#[test]
fn radius_refuses_filters_and_non_finite_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("range.bin");
    let (base, queries) = gen(dir.path(), "fbin");
    let labels = dir.path().join("labels.txt");
    std::fs::write(&labels, "a\n".repeat(5000)).unwrap();
    let common = [
        "gt",
        s(&base),
        s(&queries),
        "--metric",
        "l2",
        "-o",
        s(&out),
        "--radius",
        "1",
    ];
    for extra in [
        vec!["--filter", "a"],
        vec!["--labels", s(&labels)],
        vec!["--attrs", s(&labels)],
        vec!["--filters", s(&labels)],
    ] {
        let args: Vec<&str> = common.iter().copied().chain(extra).collect();
        let err = fails(&args);
        assert!(
            err.contains("--radius") && err.contains("cannot be used with"),
            "{err}"
        );
    }
    for bad in ["nan", "inf", "-inf", "x"] {
        let r = format!("--radius={bad}");
        let err = fails(&[
            "gt",
            s(&base),
            s(&queries),
            "--metric",
            "l2",
            "-o",
            s(&out),
            &r,
        ]);
        assert!(err.contains("radius") || err.contains("number"), "{err}");
    }
    assert!(!out.exists());
}

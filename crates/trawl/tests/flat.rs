//! The flat kind: exact search over the vectors on disk equals exact ground truth (ids and
//! distance bits) for every metric and element type, whatever the threads and the engine; its
//! reads are counted exactly; damaged files are clear errors; it opens, describes and verifies
//! itself through the index-kind contract.

mod common;

use std::path::Path;

use common::{data, truth};
use trawl::data::Matrix;
use trawl::filter::QueryFilter;
use trawl::io::EngineKind;
use trawl::kinds::flat::{build_flat, FlatIndex, FlatParams, FILE_NAME};
use trawl::kinds::graph::{KindName, OpenOptions};
use trawl::kinds::{open, AnyIndex, IndexKind, Run};
use trawl::progress::Control;
use trawl::{Element, ErrorKind, Metric};

fn opts(engine: EngineKind) -> OpenOptions {
    OpenOptions {
        engine,
        ..OpenOptions::default()
    }
}

fn exact_everywhere<T: Element>(metric: Metric, dim: usize, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<T>(3_000, 40, dim, seed);
    let rep = build_flat(&base, dir.path(), metric, &Control::silent()).unwrap();
    assert_eq!((rep.n, rep.dim), (3_000, dim));
    let gt = truth(&base, &q, metric);
    let mut first: Option<Vec<u64>> = None;
    for engine in [EngineKind::Auto, EngineKind::Pread, EngineKind::Memory] {
        let ix = FlatIndex::open(dir.path(), opts(engine)).unwrap();
        for threads in [1, 2, 3] {
            let run = Run {
                threads,
                interleave: 1,
            };
            let out = ix
                .search(
                    (&q).into(),
                    &FlatParams { k: 10 },
                    run,
                    &QueryFilter::none(),
                )
                .unwrap();
            let what = format!("{metric:?} {} {engine:?} {threads}", T::DTYPE.name());
            for qi in 0..q.n() {
                let want: Vec<u64> = gt.ids[qi * 10..qi * 10 + 10]
                    .iter()
                    .map(|&i| u64::from(i))
                    .collect();
                assert_eq!(out.ids_of(qi), &want[..], "{what}: query {qi}");
                for (a, b) in out
                    .dists_of(qi)
                    .iter()
                    .zip(&gt.dists[qi * 10..qi * 10 + 10])
                {
                    assert_eq!(a.to_bits(), b.to_bits(), "{what}: query {qi} distances");
                }
            }
            match &first {
                None => first = Some(out.ids.clone()),
                Some(f) => assert_eq!(f, &out.ids, "{what}"),
            }
            // Every page read once per batch, counted once; every query scored every vector.
            let t = out.total();
            let pages = ix.vectors().geometry().data_pages;
            assert_eq!(t.io.pages_read, pages, "{what}");
            assert_eq!(
                t.io.io_requests * ix.vectors().geometry().pages_per_vector as u64,
                pages
            );
            assert_eq!(t.io.bytes_read, pages * 4096);
            assert!(out
                .stats
                .iter()
                .all(|s| s.traversal.exact_distances == 3_000));
        }
    }
}

#[test]
fn exact_for_every_metric_and_dtype() {
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        exact_everywhere::<f32>(metric, 24, 5);
        exact_everywhere::<u8>(metric, 24, 6);
        exact_everywhere::<i8>(metric, 24, 7);
    }
    // Vectors larger than a page (one read of several pages per vector).
    exact_everywhere::<f32>(Metric::L2, 1_100, 8);
}

#[test]
fn opens_describes_and_verifies_through_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(2_000, 5, 16, 9);
    build_flat(&base, dir.path(), Metric::Cosine, &Control::silent()).unwrap();
    let ix = open(dir.path(), OpenOptions::default()).unwrap();
    assert!(matches!(ix, AnyIndex::Flat(_)));
    assert_eq!(ix.kind(), KindName::Flat);
    assert_eq!((ix.n(), ix.dim(), ix.metric()), (2_000, 16, Metric::Cosine));
    let info = ix.info().unwrap();
    assert_eq!(info.kind, KindName::Flat);
    assert_eq!(info.files.len(), 1);
    assert_eq!(info.files[0].name, FILE_NAME);
    let rep = ix.verify(&Control::silent()).unwrap();
    assert!(rep.files[0].checked.contains("data pages"), "{rep:?}");
    // Search parameters of another kind are refused.
    let p =
        trawl::kinds::KindParams::Graph(trawl::kinds::graph::search::SearchParams::beam(10, 20, 4));
    let e = ix
        .search((&q).into(), &p, Run::default(), &QueryFilter::none())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // The options layer resolves flat parameters and refuses what a flat index lacks.
    let o = trawl::kinds::Options::default();
    assert!(matches!(
        o.params(&ix, 7).unwrap(),
        trawl::kinds::KindParams::Flat(FlatParams { k: 7 })
    ));
    let w = trawl::kinds::Options {
        writable: true,
        ..Default::default()
    };
    let e = trawl::kinds::open_with(dir.path(), &w, &Control::silent()).unwrap_err();
    assert!(e.to_string().contains("do not take updates"), "{e}");
    // The graph kind's commands (entry, layout, insert, merge open the graph files) name it.
    let e = trawl::kinds::graph::DiskIndex::open(dir.path(), OpenOptions::default()).unwrap_err();
    assert!(e.to_string().contains("this is a flat index"), "{e}");
    let e = trawl::kinds::graph::updates::live::LiveIndex::open(
        dir.path(),
        OpenOptions::default(),
        trawl::kinds::graph::updates::live::Access::ReadWrite,
    )
    .unwrap_err();
    assert!(e.to_string().contains("this is a flat index"), "{e}");
}

#[test]
fn bad_queries_and_parameters_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(500, 1, 8, 10);
    build_flat(&base, dir.path(), Metric::L2, &Control::silent()).unwrap();
    let ix = FlatIndex::open(dir.path(), OpenOptions::default()).unwrap();
    let p = |k| FlatParams { k };
    let q = Matrix::from_vec(vec![0.5f32; 8], 8).unwrap();
    for (k, needle) in [(0, "k = 0"), (501, "k = 501")] {
        let e = ix
            .search((&q).into(), &p(k), Run::default(), &QueryFilter::none())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains(needle), "{e}");
    }
    let wrong = Matrix::from_vec(vec![0.5f32; 9], 9).unwrap();
    let e = ix
        .search((&wrong).into(), &p(3), Run::default(), &QueryFilter::none())
        .unwrap_err();
    assert!(e.to_string().contains("dimension"), "{e}");
    let nan = Matrix::from_vec(vec![f32::NAN; 8], 8).unwrap();
    let e = ix
        .search((&nan).into(), &p(3), Run::default(), &QueryFilter::none())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let bytes = Matrix::from_vec(vec![1u8; 8], 8).unwrap();
    let e = ix
        .search((&bytes).into(), &p(3), Run::default(), &QueryFilter::none())
        .unwrap_err();
    assert!(e.to_string().contains("u8"), "{e}");
    // Nothing to index, or NaN in the data.
    let d2 = tempfile::tempdir().unwrap();
    let mut nan_base = base.as_slice().to_vec();
    nan_base[17] = f32::NAN;
    let nan_base = Matrix::from_vec(nan_base, 8).unwrap();
    let e = build_flat(&nan_base, d2.path(), Metric::L2, &Control::silent()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(!d2.path().join(FILE_NAME).exists());
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

#[test]
fn damaged_or_truncated_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(1_000, 3, 16, 11);
    build_flat(&base, dir.path(), Metric::L2, &Control::silent()).unwrap();
    let path = dir.path().join(FILE_NAME);
    let keep = std::fs::read(&path).unwrap();
    // A data page: open succeeds, the search and verify name the file and page.
    flip(&path, 4096 * 3 + 100);
    let ix = FlatIndex::open(dir.path(), OpenOptions::default()).unwrap();
    let e = ix
        .search(
            (&q).into(),
            &FlatParams { k: 5 },
            Run::default(),
            &QueryFilter::none(),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains(FILE_NAME), "{e}");
    let e = IndexKind::verify(&ix, &Control::silent()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    drop(ix);
    // The header, or a truncated file: open refuses, naming the file.
    std::fs::write(&path, &keep).unwrap();
    flip(&path, 30);
    let e = FlatIndex::open(dir.path(), OpenOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains(FILE_NAME), "{e}");
    std::fs::write(&path, &keep[..keep.len() - 4096]).unwrap();
    let e = FlatIndex::open(dir.path(), OpenOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    // Intact, it opens again.
    std::fs::write(&path, &keep).unwrap();
    FlatIndex::open(dir.path(), OpenOptions::default()).unwrap();
}

//! The index manifest: written by every operation that writes index files, checked at open,
//! optional for indexes built before it existed.

mod common;

use std::path::Path;

use common::{build, data, params};
use trawl::kinds::graph::{
    DiskIndex, IndexLayout, KindName, Manifest, OpenError, OpenOptions, MANIFEST_FILE,
};
use trawl::kinds::{open as open_any, AnyIndex, IndexKind as _};
use trawl::progress::Control;
use trawl::{ErrorKind, Metric};

fn open(dir: &Path, layout: IndexLayout) -> Result<DiskIndex, OpenError> {
    DiskIndex::open(
        dir,
        OpenOptions {
            layout,
            ..OpenOptions::default()
        },
    )
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden-index")
}

#[test]
fn an_index_built_before_manifests_opens_read_only() {
    let dir = fixture();
    assert!(!dir.join(MANIFEST_FILE).exists());
    let before: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let AnyIndex::Graph(ix) = open_any(&dir, OpenOptions::default()).unwrap() else {
        panic!("a graph index opens as a graph index");
    };
    let info = ix.info().unwrap();
    assert_eq!(info.kind, KindName::Graph);
    assert!(!info.manifest);
    assert!(info.files.is_empty() && info.build.is_none());
    assert_eq!(info.layouts, ["packed"]);
    assert_eq!((info.n, info.dim, info.r), (1_000, 16, 16));
    let q = data::<f32>(1_000, 5, 16, 77).1;
    let out = ix
        .search(
            (&q).into(),
            &trawl::kinds::graph::search::SearchParams::beam(10, 20, 4),
            trawl::kinds::Run::default(),
            &trawl::filter::QueryFilter::none(),
        )
        .unwrap();
    assert!(out.ids.iter().all(|&id| id < 1_000));
    drop(ix);
    let after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "opening wrote into the index directory");

    // The next write into it (here a layout) records a manifest for it.
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    let ix = open(tmp.path(), IndexLayout::Packed).unwrap();
    ix.write_layout(
        IndexLayout::Shuffled,
        &Default::default(),
        &Control::silent(),
    )
    .unwrap();
    let m = Manifest::load_if_present(tmp.path()).unwrap().unwrap();
    assert_eq!(m.layouts, ["packed", "shuffle"]);
    assert!(
        m.build.is_none(),
        "no build record for an index built before manifests"
    );
    assert!(open(tmp.path(), IndexLayout::Shuffled).is_ok());
}

#[test]
fn the_build_report_and_info_count_the_same_bytes_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(1_500, 1, 16, 9);
    let report = trawl::kinds::graph::build_index(
        &base,
        dir.path(),
        &params(Metric::L2, 8),
        &Control::silent(),
    )
    .unwrap();
    let ix = open(dir.path(), IndexLayout::Packed).unwrap();
    let db = ix.disk_bytes();
    assert!(db.hot > 0, "the hot-node order is counted");
    assert_eq!(report.disk_bytes, db.total());
    assert_eq!(ix.info().unwrap().disk_bytes.total, report.disk_bytes);
}

#[test]
fn a_build_records_its_files_layouts_and_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(2_000, 1, 16, 5);
    build(&base, dir.path(), Metric::L2, 8);
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_eq!(m.kind, KindName::Graph);
    assert_eq!(
        (m.n, m.dim, m.dtype.as_str(), m.metric.as_str()),
        (2_000, 16, "f32", "l2")
    );
    assert_eq!(m.layouts, ["packed"]);
    let names: Vec<&str> = m.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "pq.trawl",
            "pq-codes.trawl",
            "packed.trawl",
            "entry.trawl",
            "hot.trawl"
        ]
    );
    for f in &m.files {
        let len = std::fs::metadata(dir.path().join(&f.name)).unwrap().len();
        assert_eq!(f.bytes, len, "{}", f.name);
    }
    let b = m.build.clone().unwrap();
    assert_eq!((b.r, b.l, b.pq_bytes), (32, 64, 8));
    let ix = open(dir.path(), IndexLayout::Packed).unwrap();
    for layout in [
        IndexLayout::Shuffled,
        IndexLayout::AllInStorage,
        IndexLayout::Decoupled,
        IndexLayout::Pages,
    ] {
        ix.write_layout(layout, &Default::default(), &Control::silent())
            .unwrap();
    }
    let info = ix.info().unwrap();
    assert!(info.manifest);
    assert_eq!(
        info.layouts,
        ["packed", "shuffle", "ais", "decoupled", "pages"]
    );
    assert_eq!(
        info.build,
        Some(b),
        "the build record survives later writes"
    );
    assert!(info.files.iter().any(|f| f.role == "vectors"));
    let json = serde_json::to_value(&info).unwrap();
    for key in [
        "n",
        "dim",
        "R",
        "pq_bytes",
        "layout",
        "disk_bytes",
        "memory_bytes",
    ] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
    assert_eq!(json["disk_bytes"]["total"], info.disk_bytes.total);
    for layout in IndexLayout::ALL {
        assert!(open(dir.path(), layout).is_ok(), "{layout:?}");
    }
}

#[test]
fn files_of_another_build_are_refused() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    // Same shape, different data: every file but the data is alike.
    build(&data::<f32>(2_000, 1, 16, 5).0, a.path(), Metric::L2, 8);
    build(&data::<f32>(2_000, 1, 16, 6).0, b.path(), Metric::L2, 8);
    for dir in [a.path(), b.path()] {
        open(dir, IndexLayout::Packed)
            .unwrap()
            .write_layout(
                IndexLayout::Decoupled,
                &Default::default(),
                &Control::silent(),
            )
            .unwrap();
    }
    // A vector file copied from the other index: same n × dim, so only the manifest tells.
    std::fs::copy(
        b.path().join("vectors.trawl"),
        a.path().join("vectors.trawl"),
    )
    .unwrap();
    let e = open(a.path(), IndexLayout::Decoupled).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(
        e.to_string()
            .contains("vectors.trawl is not the file this index was built with"),
        "{e}"
    );
    // The packed layout does not read it and still opens.
    assert!(open(a.path(), IndexLayout::Packed).is_ok());
}

#[test]
fn a_rebuild_leaves_the_old_layouts_out() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(2_000, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    open(dir.path(), IndexLayout::Packed)
        .unwrap()
        .write_layout(
            IndexLayout::Shuffled,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
    build(&data::<f32>(2_000, 1, 16, 9).0, dir.path(), Metric::L2, 8);
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_eq!(
        m.layouts,
        ["packed"],
        "the shuffled file is of the old build"
    );
    // The rebuild's commit removed it.
    assert!(!dir.path().join(IndexLayout::Shuffled.file_name()).exists());
    let e = open(dir.path(), IndexLayout::Shuffled).unwrap_err();
    assert!(
        e.to_string().contains("packed-shuffled.trawl is missing"),
        "{e}"
    );
}

#[test]
fn a_damaged_manifest_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_000, 1, 8, 5).0, dir.path(), Metric::L2, 4);
    let path = dir.path().join(MANIFEST_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let e = open(dir.path(), IndexLayout::Packed).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("manifest.trawl"), "{e}");
    std::fs::write(&path, &bytes[..20]).unwrap();
    let e = open(dir.path(), IndexLayout::Packed).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
}

//! Streaming updates against bad input: log records (with valid checksums) that the API would
//! have refused, vector maps that break the slot invariants, and values so large that squared
//! distances overflow `f32`. Each is refused with an error naming the file (or the input),
//! by opening, replay and `--verify` alike; nothing is applied or committed.

mod common;

use std::path::Path;

use common::{build, data};
use trawl::data::Matrix;
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex};
use trawl::kinds::graph::updates::segments::{VectorMap, GONE};
use trawl::kinds::graph::updates::wal::{LogOp, LogVectors, LogWriter};
use trawl::kinds::graph::{verify_index, DiskIndex, IndexLayout, Manifest, OpenOptions};
use trawl::progress::Control;
use trawl::search::SearchError;
use trawl::{ErrorKind, Metric};

const DIM: usize = 16;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn f32_vectors(rows: &[f32], dim: usize) -> LogVectors {
    LogVectors::from_rows(rows, dim)
}

fn insert(ids: &[u64], rows: &[f32], dim: usize) -> LogOp {
    LogOp::Insert {
        ids: ids.to_vec(),
        vectors: f32_vectors(rows, dim),
        attrs: None,
    }
}

#[test]
fn replay_and_verify_refuse_records_the_api_would_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let built = tmp.path().join("built");
    let (base, _) = data::<f32>(1_500, 1, DIM, 3);
    build(&base, &built, Metric::L2, 8);
    let row = |r: usize| base.row(r).to_vec();
    let mut nan = row(1);
    nan[3] = f32::NAN;
    let cases: Vec<(&str, LogOp, String)> = vec![
        (
            "the same id twice",
            insert(&[90_000, 90_000], &[row(1), row(2)].concat(), DIM),
            "id 90000 appears twice in one operation".into(),
        ),
        (
            "an id the index holds",
            insert(&[5], &row(1), DIM),
            "inserts id 5, which the index already holds".into(),
        ),
        (
            "the id an earlier record inserted",
            insert(&[90_001], &row(1), DIM),
            "inserts id 90001, which the index already holds".into(),
        ),
        (
            "a delete of an unknown id",
            LogOp::Delete { ids: vec![123_456] },
            "deletes id 123456, which the index does not hold".into(),
        ),
        (
            "a delete of one id twice",
            LogOp::Delete { ids: vec![9, 9] },
            "id 9 appears twice in one operation".into(),
        ),
        (
            "the reserved id",
            insert(&[u64::MAX], &row(1), DIM),
            format!("id {} is reserved", u64::MAX),
        ),
        (
            "the wrong dimension",
            insert(&[90_002], &row(1)[..DIM - 1], DIM - 1),
            format!("vectors of f32 × {} for an index of f32 × {DIM}", DIM - 1),
        ),
        (
            "the wrong element type",
            LogOp::Upsert {
                ids: vec![90_002],
                vectors: LogVectors::from_rows(&[7u8; DIM], DIM),
                attrs: None,
            },
            format!("vectors of u8 × {DIM} for an index of f32 × {DIM}"),
        ),
        (
            "a NaN",
            insert(&[90_002], &nan, DIM),
            "the vector of id 90002: component 3 is not finite (NaN)".into(),
        ),
        (
            "components of 1e30",
            insert(&[90_002], &[1e30; DIM], DIM),
            "the vector of id 90002: its squared norm".into(),
        ),
    ];
    for (k, (what, op, want)) in cases.into_iter().enumerate() {
        let dir = tmp.path().join(format!("case{k}"));
        copy_dir(&built, &dir);
        // Record 1 is fine (id 90001 beside row 1); record 2 is the bad one.
        let mut w = LogWriter::create(&dir.join("wal.trawl"), 0).unwrap();
        w.append(&[insert(&[90_001], &row(1), DIM), op], true)
            .unwrap();
        drop(w);
        let want = format!("wal.trawl: record 2: {want}");
        for access in [Access::ReadOnly, Access::ReadWrite] {
            let e = LiveIndex::open(&dir, OpenOptions::default(), access).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&dir.join("wal.trawl").display().to_string()) && msg.contains(&want),
                "{what} ({access:?}): {msg}"
            );
        }
        let e = verify_index(&dir, &Control::silent()).unwrap_err();
        assert!(e.to_string().contains(&want), "{what}: verify: {e}");
        assert!(!dir.join("ids.trawl").exists(), "{what}: nothing merged");
    }
    // The good record alone replays (the control of the cases above).
    let dir = tmp.path().join("good");
    copy_dir(&built, &dir);
    let mut w = LogWriter::create(&dir.join("wal.trawl"), 0).unwrap();
    w.append(&[insert(&[90_001], &row(1), DIM)], true).unwrap();
    drop(w);
    let ix = LiveIndex::open(&dir, OpenOptions::default(), Access::ReadOnly).unwrap();
    assert!(ix.contains(90_001) && ix.contains(5) && ix.len() == 1_501);
    drop(ix);
    let r = verify_index(&dir, &Control::silent()).unwrap();
    let wal = r.files.iter().find(|f| f.name == "wal.trawl").unwrap();
    assert!(wal.checked.contains("1 operations not merged"), "{wal:?}");
}

/// Rewrites the manifest so that it records `name`'s current size and header checksum (a
/// forger who recomputed every checksum).
fn reseal_manifest(dir: &Path, name: &str) {
    let mut m = Manifest::load_if_present(dir).unwrap().unwrap();
    let bytes = std::fs::read(dir.join(name)).unwrap();
    let f = m.files.iter_mut().find(|f| f.name == name).unwrap();
    f.bytes = bytes.len() as u64;
    f.checksum = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    m.write_to(&dir.join("manifest.trawl")).unwrap();
}

#[test]
fn a_vector_map_that_breaks_the_slot_invariants_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let merged = tmp.path().join("merged");
    let (all, _) = data::<f32>(1_600, 1, DIM, 4);
    let base = Matrix::from_vec(all.as_slice()[..1_500 * DIM].to_vec(), DIM).unwrap();
    build(&base, &merged, Metric::L2, 8);
    DiskIndex::open(&merged, OpenOptions::default())
        .unwrap()
        .write_layout(
            IndexLayout::Decoupled,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
    let opts = OpenOptions {
        layout: IndexLayout::Decoupled,
        ..OpenOptions::default()
    };
    {
        let ix = LiveIndex::open(&merged, opts, Access::ReadWrite).unwrap();
        ix.delete(&[3, 4]).unwrap();
        ix.insert(None, &all.as_slice()[1_500 * DIM..1_510 * DIM])
            .unwrap();
        ix.merge(2, &Control::silent()).unwrap();
    }
    let map = VectorMap::load(&merged).unwrap().unwrap();
    assert!(
        map.slots[3..5].iter().all(|&s| s != GONE),
        "freed slots reused"
    );
    let cases: Vec<(&str, VectorMap, String)> = vec![
        (
            "two slots sharing one vector",
            {
                let mut m = map.clone();
                m.slots[1] = m.slots[0];
                m
            },
            format!(
                "two slots point at one vector (segment {}, vector {})",
                map.slots[0].0, map.slots[0].1
            ),
        ),
        (
            "a live slot without a vector",
            {
                let mut m = map.clone();
                m.slots[0] = GONE;
                m
            },
            "slot 0 holds id 0 but has no vector".into(),
        ),
    ];
    for (k, (what, forged, want)) in cases.into_iter().enumerate() {
        let dir = tmp.path().join(format!("case{k}"));
        copy_dir(&merged, &dir);
        forged.save(&dir.join("vmap.trawl")).unwrap();
        reseal_manifest(&dir, "vmap.trawl");
        let named = |e: &dyn std::fmt::Display| {
            let m = e.to_string();
            assert!(
                m.contains(&dir.join("vmap.trawl").display().to_string()) && m.contains(&want),
                "{what}: {m}"
            );
        };
        named(&DiskIndex::open(&dir, opts).unwrap_err());
        named(&LiveIndex::open(&dir, opts, Access::ReadOnly).unwrap_err());
        named(&verify_index(&dir, &Control::silent()).unwrap_err());
    }
    // The map as merged passes the same checks.
    verify_index(&merged, &Control::silent()).unwrap();
}

#[test]
fn vectors_whose_squared_distances_would_overflow_are_refused_at_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ix");
    let (base, _) = data::<f32>(1_200, 1, DIM, 6);
    // A build refuses them (the first offending row named).
    let mut huge = base.as_slice().to_vec();
    huge[37 * DIM..38 * DIM].fill(3e38);
    let e = trawl::kinds::graph::build_index(
        &Matrix::from_vec(huge, DIM).unwrap(),
        &dir,
        &common::params(Metric::L2, 8),
        &Control::silent(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("row 37 is too large"), "{e}");
    build(&base, &dir, Metric::L2, 8);
    let ix = LiveIndex::open(&dir, OpenOptions::default(), Access::ReadWrite).unwrap();
    // An insert refuses them and changes nothing.
    for v in [1e30f32, 3e38, 1e16] {
        let e = ix.insert(Some(&[90_000]), &[v; DIM]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(
            e.to_string().contains("vector 0: its squared norm"),
            "{v}: {e}"
        );
        assert!(!ix.contains(90_000));
    }
    // A query too.
    let e = ix
        .search_rows(&[1e30f32; DIM], &SearchParams::beam(1, 32, 4), 1, 1)
        .unwrap_err();
    assert!(
        matches!(e, SearchError::QueryTooLarge { row: 0, .. }),
        "{e}"
    );
    // Just below the bound (16 × 1e28 = 1.6e29 < 2^100): stored and found at distance 0
    // before a merge; after it, every distance returned is finite and exact (the outlier may
    // or may not be reached through PQ distances trained on ordinary vectors: approximate
    // search, not overflow).
    let big = [1e14f32; DIM];
    ix.insert(Some(&[90_000]), &big).unwrap();
    let p = SearchParams::beam(3, 32, 4);
    let out = ix.search_rows(&big, &p, 1, 1).unwrap();
    assert_eq!((out.ids[0], out.dists[0]), (90_000, 0.0));
    ix.merge(2, &Control::silent()).unwrap();
    assert!(ix.contains(90_000));
    for q in [big, [-1e14f32; DIM]] {
        let out = ix.search_rows(&q, &p, 1, 1).unwrap();
        for (&id, &d) in out.ids.iter().zip(&out.dists) {
            let v: Vec<f32> = if id == 90_000 {
                big.to_vec()
            } else {
                base.row(id as usize).to_vec()
            };
            let exact: f32 = q.iter().zip(&v).map(|(a, b)| (a - b) * (a - b)).sum();
            assert!(
                d.is_finite() && (d - exact).abs() <= exact * 1e-5,
                "{id}: {d} vs {exact}"
            );
        }
    }
}

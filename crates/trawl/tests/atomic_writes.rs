//! Writes into an index directory are atomic: a build, layout or entry write that fails (bad
//! parameters, cancellation, another writer) leaves the old index as it was; a stale layout of
//! an old graph disappears with the rebuild; leftovers of a dead writer are cleaned up by the
//! next command; and `verify_index` reads every file of the index.

mod common;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::{build, data, params};
use trawl::dir::txn::{Txn, COMMIT_DIR, STAGING_DIR};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::{
    build_index, verify_index, DiskIndex, IndexLayout, Manifest, OpenOptions, MANIFEST_FILE,
};
use trawl::progress::Control;
use trawl::{ErrorKind, Metric};

fn open(dir: &Path, layout: IndexLayout) -> DiskIndex {
    DiskIndex::open(
        dir,
        OpenOptions {
            layout,
            ..OpenOptions::default()
        },
    )
    .unwrap()
}

/// Ids and distances of a few searches: equal before and after means the same index.
fn answers(dir: &Path) -> (Vec<u32>, Vec<f32>) {
    let q = data::<f32>(1_500, 8, 16, 3).1;
    let out = open(dir, IndexLayout::Packed)
        .search_batch(&q, &SearchParams::beam(10, 20, 4), 1)
        .unwrap();
    (out.ids, out.dists)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn file_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".trawl"))
        .map(|n| {
            let b = std::fs::read(dir.join(&n)).unwrap();
            (n, b)
        })
        .collect()
}

#[test]
fn a_build_with_bad_parameters_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    let before = file_bytes(dir.path());
    let base = data::<f32>(1_500, 1, 16, 6).0;
    type Set = Box<dyn Fn(&mut trawl::kinds::graph::IndexParams)>;
    let bad: [(&str, Set); 6] = [
        ("r", Box::new(|p| p.graph.r = 0)),
        ("l", Box::new(|p| p.graph.l = 0)),
        ("l", Box::new(|p| p.graph.l = 4_000_000_000)),
        ("alpha", Box::new(|p| p.graph.alpha = 0.5)),
        (
            "memory_budget",
            Box::new(|p| p.graph.memory_budget_bytes = Some(0)),
        ),
        (
            "entry degree",
            Box::new(|p| p.entry.as_mut().unwrap().r = u32::MAX as usize),
        ),
    ];
    for (name, set) in bad {
        let mut p = params(Metric::L2, 8);
        set(&mut p);
        let e = build_index(&base, dir.path(), &p, &Control::silent()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{name}: {e}");
        assert!(e.to_string().contains(name), "{name}: {e}");
        assert_eq!(file_bytes(dir.path()), before, "{name}: files changed");
        assert!(!dir.path().join(STAGING_DIR).exists());
    }
    open(dir.path(), IndexLayout::Packed);
}

#[test]
fn a_cancelled_build_leaves_the_old_index() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    let before = file_bytes(dir.path());
    let answers_before = answers(dir.path());
    // Cancelled from the start: the build fails in its first cancellable phase, after the
    // staging directory is made (PQ training checks the flag).
    let flag = Arc::new(AtomicBool::new(true));
    let ctl = Control::silent().with_cancel_flag(flag);
    let e = build_index(
        &data::<f32>(1_500, 1, 16, 9).0,
        dir.path(),
        &params(Metric::L2, 8),
        &ctl,
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    assert_eq!(file_bytes(dir.path()), before);
    assert!(!dir.path().join(STAGING_DIR).exists());
    assert_eq!(answers(dir.path()), answers_before);
}

#[test]
fn a_second_writer_is_refused_while_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    let before = file_bytes(dir.path());
    let held = Txn::begin(dir.path()).unwrap();
    let e = build_index(
        &data::<f32>(1_500, 1, 16, 9).0,
        dir.path(),
        &params(Metric::L2, 8),
        &Control::silent(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Storage, "{e}");
    assert!(e.to_string().contains("another trawl process"), "{e}");
    // Readers still open the index while a writer runs.
    open(dir.path(), IndexLayout::Packed);
    drop(held);
    assert_eq!(file_bytes(dir.path()), before);
    assert!(!dir.path().join(STAGING_DIR).exists());
}

#[test]
fn a_dead_writers_staging_directory_is_removed_by_the_next_reader() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    let before = file_bytes(dir.path());
    // What a writer killed before its commit leaves: a staging directory with partial files.
    let staging = dir.path().join(STAGING_DIR);
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("pq.trawl"), b"partial").unwrap();
    std::fs::write(staging.join(".packed.trawl.tmp"), b"partial").unwrap();
    open(dir.path(), IndexLayout::Packed);
    assert!(!staging.exists());
    assert_eq!(file_bytes(dir.path()), before);
}

#[test]
fn a_decided_commit_is_finished_by_the_next_reader() {
    // Index A in `dir`; index B built elsewhere plays the staged files of a commit that was
    // decided (renamed to .trawl-commit) when its writer died, with A's shuffled layout stale.
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    open(dir.path(), IndexLayout::Packed)
        .write_layout(
            IndexLayout::Shuffled,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
    let other = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 9).0, other.path(), Metric::L2, 8);
    let answers_b = answers(other.path());
    let commit = dir.path().join(COMMIT_DIR);
    std::fs::create_dir(&commit).unwrap();
    for name in listing(other.path()) {
        if name.ends_with(".trawl") {
            std::fs::copy(other.path().join(&name), commit.join(&name)).unwrap();
        }
    }
    // Killed half-way through the roll forward: the PQ files already moved.
    for name in ["pq.trawl", "pq-codes.trawl"] {
        std::fs::rename(commit.join(name), dir.path().join(name)).unwrap();
    }
    assert_eq!(answers(dir.path()), answers_b);
    assert!(!commit.exists());
    assert!(
        !dir.path().join(IndexLayout::Shuffled.file_name()).exists(),
        "the old build's layout is gone"
    );
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_eq!(m, Manifest::load_if_present(other.path()).unwrap().unwrap());
    verify_index(dir.path(), &Control::silent()).unwrap();
}

#[test]
fn every_build_has_its_own_id_kept_by_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, dir.path(), Metric::L2, 8);
    let id1 = Manifest::load_if_present(dir.path())
        .unwrap()
        .unwrap()
        .build_id;
    assert_eq!(id1.len(), 16);
    let mut ix = open(dir.path(), IndexLayout::Packed);
    ix.write_layout(
        IndexLayout::AllInStorage,
        &Default::default(),
        &Control::silent(),
    )
    .unwrap();
    ix.rebuild_entry(&Default::default(), 1, &Control::silent())
        .unwrap();
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_eq!(m.build_id, id1);
    assert_eq!(m.layouts, ["packed", "ais"]);
    build(&data::<f32>(1_500, 1, 16, 6).0, dir.path(), Metric::L2, 8);
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_ne!(m.build_id, id1);
    assert_eq!(m.layouts, ["packed"]);
}

/// Flips one byte at `at` (from the end when negative) of `dir/name`.
fn flip(dir: &Path, name: &str, at: i64) {
    let path = dir.join(name);
    let mut b = std::fs::read(&path).unwrap();
    let i = if at < 0 {
        (b.len() as i64 + at) as usize
    } else {
        at as usize
    };
    b[i] ^= 0x5a;
    std::fs::write(&path, b).unwrap();
}

/// Every file of an index with every layout and an entry index (the manifest aside).
const EVERY_FILE: [&str; 8] = [
    "packed.trawl",
    "packed-shuffled.trawl",
    "packed-ais.trawl",
    "graph.trawl",
    "vectors.trawl",
    "pq.trawl",
    "pq-codes.trawl",
    "entry.trawl",
];

#[test]
fn verify_reads_every_file_of_the_index() {
    let src = tempfile::tempdir().unwrap();
    build(&data::<f32>(1_500, 1, 16, 5).0, src.path(), Metric::L2, 8);
    let ix = open(src.path(), IndexLayout::Packed);
    for l in [IndexLayout::Shuffled, IndexLayout::AllInStorage] {
        ix.write_layout(l, &Default::default(), &Control::silent())
            .unwrap();
    }
    ix.write_decoupled(&Default::default(), &Control::silent())
        .unwrap();
    drop(ix);
    let rep = verify_index(src.path(), &Control::silent()).unwrap();
    let names: Vec<&str> = rep.files.iter().map(|f| f.name.as_str()).collect();
    for n in EVERY_FILE.iter().chain([&MANIFEST_FILE]) {
        assert!(names.contains(n), "{n} not verified: {names:?}");
    }
    // A damaged byte in any file is found and the file named: one in the middle of the file,
    // past the header page (a data page of every paged file; the payload of every envelope
    // file).
    for name in EVERY_FILE {
        let dir = tempfile::tempdir().unwrap();
        for f in listing(src.path()) {
            std::fs::copy(src.path().join(&f), dir.path().join(&f)).unwrap();
        }
        // Past the header page of paged files, inside the payload of envelope files.
        let len = std::fs::metadata(dir.path().join(name)).unwrap().len() as i64;
        flip(dir.path(), name, (len / 2).max(4096 + 100).min(len - 1));
        let e = verify_index(dir.path(), &Control::silent()).unwrap_err();
        assert!(e.to_string().contains(name), "{name}: {e}");
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{name}: {e}");
    }
}

#[test]
fn a_vector_file_of_another_index_is_refused_by_open_and_verify() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for (dir, seed) in [(&a, 5), (&b, 6)] {
        build(
            &data::<f32>(1_500, 1, 16, seed).0,
            dir.path(),
            Metric::L2,
            8,
        );
        open(dir.path(), IndexLayout::Packed)
            .write_decoupled(&Default::default(), &Control::silent())
            .unwrap();
    }
    let own = std::fs::read(a.path().join("vectors.trawl")).unwrap();
    std::fs::copy(
        b.path().join("vectors.trawl"),
        a.path().join("vectors.trawl"),
    )
    .unwrap();
    let e = DiskIndex::open(
        a.path(),
        OpenOptions {
            layout: IndexLayout::Decoupled,
            ..OpenOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("vectors.trawl"), "{e}");
    let e = verify_index(a.path(), &Control::silent()).unwrap_err();
    assert!(e.to_string().contains("vectors.trawl"), "{e}");
    std::fs::write(a.path().join("vectors.trawl"), own).unwrap();
    verify_index(a.path(), &Control::silent()).unwrap();
    // The entry index is optional to a search (the index opens without it), but a file the
    // manifest lists that is gone fails verification.
    std::fs::remove_file(a.path().join("entry.trawl")).unwrap();
    assert!(DiskIndex::open(a.path(), OpenOptions::default())
        .unwrap()
        .entry()
        .is_none());
    let e = verify_index(a.path(), &Control::silent()).unwrap_err();
    assert!(e.to_string().contains("entry.trawl is missing"), "{e}");
}

#[test]
fn a_build_replacing_another_kind_removes_its_files_and_keeps_files_not_trawls() {
    let dir = tempfile::tempdir().unwrap();
    let base = data::<f32>(1_500, 1, 16, 5).0;
    build(&base, dir.path(), Metric::L2, 8);
    let answers_before = answers(dir.path());
    // Beside the index: the user's own files, one of them named like an index file but not
    // written by trawl (no TRAWL magic).
    std::fs::write(dir.path().join("notes.trawl"), b"my notes").unwrap();
    std::fs::write(dir.path().join("base.fbin"), b"data").unwrap();
    let graph_files = listing(dir.path());
    assert!(
        graph_files.contains(&"packed.trawl".to_string()),
        "{graph_files:?}"
    );
    trawl::kinds::flat::build_flat(&base, dir.path(), Metric::L2, &Control::silent()).unwrap();
    let now = listing(dir.path());
    // The graph's files are gone (the flat manifest does not list them), the user's stay.
    for gone in ["packed.trawl", "pq.trawl", "pq-codes.trawl", "entry.trawl"] {
        assert!(!now.contains(&gone.to_string()), "{gone} left: {now:?}");
    }
    for kept in [
        "notes.trawl",
        "base.fbin",
        "flat-vectors.trawl",
        MANIFEST_FILE,
    ] {
        assert!(now.contains(&kept.to_string()), "{kept} missing: {now:?}");
    }
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_eq!(m.kind, trawl::kinds::graph::KindName::Flat);
    // And back: the flat index's vector file goes with the next graph build.
    build(&base, dir.path(), Metric::L2, 8);
    let again = listing(dir.path());
    assert!(
        !again.contains(&"flat-vectors.trawl".to_string()),
        "{again:?}"
    );
    assert!(again.contains(&"notes.trawl".to_string()), "{again:?}");
    // A whole graph index again: every file checks out and it answers as many queries.
    verify_index(dir.path(), &Control::silent()).unwrap();
    let (ids, _) = answers(dir.path());
    assert_eq!(ids.len(), answers_before.0.len());
    assert!(ids.iter().all(|&id| id < 1_500), "{ids:?}");
}

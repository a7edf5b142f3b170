//! Every command that writes an index, run on an index with unmerged updates (inserts and
//! deletes acknowledged into its write-ahead log, no merge since): the updates must survive it
//! (searches find the inserted vectors by id and never the deleted one, before and after the
//! next merge), or the command must refuse with a clear message and change nothing. Also
//! `trawl bench` on an updated index (ids, not slot numbers; unmerged inserts searched).

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok, s, write_fbin};

struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    base: PathBuf,
    /// A built index, never updated (copied for every case).
    built: PathBuf,
    /// Two new vectors (ids 7000000 and 7000001), beside base rows 10 and 20.
    new: PathBuf,
    ids: PathBuf,
    /// Base row 7, whose id the cases delete.
    row7: PathBuf,
}

const DIM: usize = 24;

fn base_row(base: &[u8], r: usize) -> Vec<f32> {
    base[8 + r * DIM * 4..8 + (r + 1) * DIM * 4]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `trawl build DATA DIR` with this file's parameters, then `extra`.
fn build_args<'a>(data: &'a Path, dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "build",
        s(data),
        s(dir),
        "--metric",
        "l2",
        "-R",
        "24",
        "-L",
        "48",
        "--pq-bytes",
        "8",
        "--threads",
        "2",
    ];
    v.extend_from_slice(extra);
    v
}

fn setup(extra: &[&str]) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let base = dir.join("base.fbin");
    ok(&["gen", s(&base), "-n", "2000", "--dim", "24", "--seed", "5"]);
    let built = dir.join("built");
    ok(&build_args(&base, &built, extra));
    let bytes = std::fs::read(&base).unwrap();
    let shifted = |r: usize| -> Vec<f32> { base_row(&bytes, r).iter().map(|v| v + 1e-3).collect() };
    let new = dir.join("new.fbin");
    write_fbin(&new, 2, DIM as u32, &[shifted(10), shifted(20)].concat());
    let ids = dir.join("ids.txt");
    std::fs::write(&ids, "7000000\n7000001\n").unwrap();
    let row7 = dir.join("row7.fbin");
    write_fbin(&row7, 1, DIM as u32, &base_row(&bytes, 7));
    Setup {
        _tmp: tmp,
        dir,
        base,
        built,
        new,
        ids,
        row7,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The ids `trawl search` returns for `queries` (k results each), with `extra` options.
fn search_ids(ix: &Path, queries: &Path, k: usize, extra: &[&str]) -> Vec<u32> {
    let res = ix.with_extension("res");
    let k = k.to_string();
    let args = [
        "search",
        s(ix),
        "--queries",
        s(queries),
        "-k",
        &k,
        "-L",
        "40",
        "-o",
        s(&res),
    ];
    ok(&[&args[..], extra].concat());
    let b = std::fs::read(&res).unwrap();
    let (nq, kk) = (
        u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize,
        u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize,
    );
    (0..nq * kk)
        .map(|i| u32::from_le_bytes(b[8 + 4 * i..12 + 4 * i].try_into().unwrap()))
        .collect()
}

/// Inserts the two new vectors and deletes id 7, without a merge.
fn update(st: &Setup, ix: &Path) {
    let out = ok(&["insert", s(ix), s(&st.new), "--ids", s(&st.ids)]);
    assert!(out.contains("inserted 2 vectors"), "{out}");
    let out = ok(&["delete", s(ix), "--id", "7"]);
    assert!(
        out.contains("deleted 1 ids") || out.contains("deleted 1 id"),
        "{out}"
    );
}

/// The updates are all there: both inserted ids found first, id 7 never returned.
fn assert_updates_kept(st: &Setup, ix: &Path, extra: &[&str], what: &str) {
    assert_eq!(
        search_ids(ix, &st.new, 1, extra),
        vec![7_000_000, 7_000_001],
        "{what}: the inserted vectors"
    );
    let near7 = search_ids(ix, &st.row7, 10, extra);
    assert!(
        !near7.contains(&7) && near7.len() == 10,
        "{what}: the deleted id 7 came back: {near7:?}"
    );
}

#[test]
fn every_writer_keeps_unmerged_updates() {
    let st = setup(&[]);
    // (name, the command's arguments after the index directory, the layout to search after)
    let writers: [(&str, &[&str], &[&str]); 6] = [
        ("entry", &["entry"], &[]),
        ("entry --ratio", &["entry", "--ratio", "0.05"], &[]),
        (
            "layout --shuffle",
            &["layout", "--shuffle"],
            &["--layout", "shuffle"],
        ),
        ("layout --ais", &["layout", "--ais"], &["--layout", "ais"]),
        (
            "layout --decoupled",
            &["layout", "--decoupled"],
            &["--layout", "decoupled"],
        ),
        ("merge", &["merge"], &[]),
    ];
    for (k, (name, cmd, layout)) in writers.iter().enumerate() {
        let ix = st.dir.join(format!("case{k}"));
        copy_dir(&st.built, &ix);
        update(&st, &ix);
        assert_updates_kept(&st, &ix, &[], &format!("{name}: before"));
        let mut args = vec![cmd[0], s(&ix)];
        args.extend_from_slice(&cmd[1..]);
        ok(&args);
        assert!(
            ix.join("wal.trawl").is_file(),
            "{name}: the write-ahead log was removed"
        );
        assert_updates_kept(&st, &ix, &[], &format!("{name}: after, packed"));
        if !layout.is_empty() {
            assert_updates_kept(&st, &ix, layout, &format!("{name}: after, {layout:?}"));
        }
        let out = ok(&["info", s(&ix), "--verify"]);
        assert!(out.contains("wal.trawl"), "{name}: {out}");
        let pending = if *name == "merge" { 0 } else { 2 };
        assert!(
            out.contains(&format!(
                "updates: 2001 live vectors; {pending} logged operations not merged yet"
            )),
            "{name}: {out}"
        );
        // A writer that reopens the index sees the same state, and a merge folds it in.
        let out = ok(&["merge", s(&ix)]);
        assert!(
            out.contains("1 deleted") || *name == "merge",
            "{name}: {out}"
        );
        assert_updates_kept(&st, &ix, &[], &format!("{name}: after a merge"));
        ok(&["info", s(&ix), "--verify"]);
    }
}

#[test]
fn a_build_over_unmerged_updates_is_refused_and_changes_nothing() {
    let st = setup(&[]);
    let ix = st.dir.join("ix");
    copy_dir(&st.built, &ix);
    update(&st, &ix);
    let wal = std::fs::read(ix.join("wal.trawl")).unwrap();
    for extra in [&[][..], &["--kind", "ivf"][..]] {
        let e = fails(&build_args(&st.base, &ix, extra));
        assert!(
            e.contains(&format!(
                "{}: its write-ahead log wal.trawl holds 2 acknowledged updates not merged yet",
                ix.display()
            )) && e.contains("trawl merge"),
            "{extra:?}: {e}"
        );
        assert_eq!(std::fs::read(ix.join("wal.trawl")).unwrap(), wal);
        assert_updates_kept(&st, &ix, &[], &format!("after a refused build {extra:?}"));
    }
    // Once merged, the log holds nothing pending: a rebuild replaces the index and its log.
    ok(&["merge", s(&ix)]);
    ok(&build_args(&st.base, &ix, &[]));
    assert!(!ix.join("wal.trawl").exists() && !ix.join("ids.trawl").exists());
    assert_eq!(search_ids(&ix, &st.row7, 1, &[]), vec![7]);
}

/// A ground-truth file (DiskANN format) with one id per query.
fn write_gt(path: &Path, ids: &[u32]) {
    let mut b = Vec::new();
    b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for id in ids {
        b.extend_from_slice(&id.to_le_bytes());
    }
    for _ in ids {
        b.extend_from_slice(&0f32.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

fn bench_recall(ix: &Path, queries: &Path, gt: &Path) -> f64 {
    let json = ix.with_extension("json");
    ok(&[
        "bench",
        s(ix),
        "--queries",
        s(queries),
        "--gt",
        s(gt),
        "-k",
        "1",
        "-L",
        "40",
        "--json",
        s(&json),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    v["rows"][0]["recall"].as_f64().unwrap()
}

#[test]
fn bench_on_an_updated_index_reports_ids_and_searches_unmerged_inserts() {
    let st = setup(&[]);
    let ix = st.dir.join("ix");
    copy_dir(&st.built, &ix);
    update(&st, &ix);
    let gt = st.dir.join("gt.bin");
    write_gt(&gt, &[7_000_000, 7_000_001]);
    assert_eq!(bench_recall(&ix, &st.new, &gt), 1.0, "unmerged inserts");
    ok(&["merge", s(&ix)]);
    // After the merge the slots are not the ids: base row 10's vector keeps id 10.
    let row10 = st.dir.join("row10.fbin");
    let bytes = std::fs::read(&st.base).unwrap();
    write_fbin(&row10, 1, DIM as u32, &base_row(&bytes, 10));
    let gt10 = st.dir.join("gt10.bin");
    write_gt(&gt10, &[10]);
    assert_eq!(bench_recall(&ix, &st.new, &gt), 1.0, "merged inserts");
    assert_eq!(bench_recall(&ix, &row10, &gt10), 1.0, "a base vector");
}

#[test]
fn a_decoupled_index_with_every_vector_deleted_merges_and_opens() {
    let st = setup(&["--decoupled"]);
    let ix = st.dir.join("ix");
    copy_dir(&st.built, &ix);
    // Every id: 0..2000.
    let all = st.dir.join("all.txt");
    std::fs::write(
        &all,
        (0..2000).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .unwrap();
    ok(&["delete", s(&ix), "--ids", s(&all)]);
    let out = ok(&["merge", s(&ix), "--decoupled"]);
    assert!(out.contains("2000 deleted"), "{out}");
    ok(&["info", s(&ix), "--verify"]);
    assert!(search_ids(&ix, &st.row7, 3, &[])
        .iter()
        .all(|&id| id == u32::MAX));
    // It takes new vectors again.
    ok(&["insert", s(&ix), s(&st.new), "--ids", s(&st.ids)]);
    assert_eq!(search_ids(&ix, &st.new, 1, &[]), vec![7_000_000, 7_000_001]);
    ok(&["merge", s(&ix)]);
    assert_eq!(search_ids(&ix, &st.new, 1, &[]), vec![7_000_000, 7_000_001]);
    ok(&["info", s(&ix), "--verify"]);
}

#[test]
fn an_ivf_index_refuses_every_graph_writer_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base = dir.join("base.fbin");
    ok(&["gen", s(&base), "-n", "2000", "--dim", "16"]);
    let ix = dir.join("ivf");
    ok(&[
        "build",
        s(&base),
        s(&ix),
        "--kind",
        "ivf",
        "--metric",
        "l2",
        "--pq-bytes",
        "8",
    ]);
    let new = dir.join("new.fbin");
    write_fbin(&new, 1, 16, &[0.5; 16]);
    for args in [
        &["insert", s(&ix), s(&new)][..],
        &["delete", s(&ix), "--id", "3"],
        &["merge", s(&ix)],
        &["entry", s(&ix)],
        &["layout", s(&ix), "--shuffle"],
    ] {
        let e = fails(args);
        assert!(
            e.contains("this is an IVF index; this operation works on graph indexes only"),
            "{args:?}: {e}"
        );
    }
    assert!(!ix.join("wal.trawl").exists());
    ok(&["info", s(&ix), "--verify"]);
}

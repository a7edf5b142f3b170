//! Filtered search from the command line: `build --labels --attrs`, `gt --filters`,
//! `search` / `bench` with `--filter` / `--filters`, and the bad inputs each refused with a
//! clear message and nothing written.

mod common;

use common::{fails, ok};

fn write_inputs(dir: &std::path::Path, n: usize) {
    let mut labels = String::new();
    let mut attrs = String::new();
    for i in 0..n {
        labels.push_str(&format!("L{},lang={}\n", i % 10, ["en", "de"][i % 2]));
        attrs.push_str(&format!("{{\"year\": {}}}\n", 1990 + i % 40));
    }
    std::fs::write(dir.join("labels.txt"), labels).unwrap();
    std::fs::write(dir.join("attrs.jsonl"), attrs).unwrap();
}

#[test]
fn build_gt_search_and_bench_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    ok(&[
        "gen",
        &p("base.fbin"),
        "--queries",
        &p("q.fbin"),
        "-n",
        "3000",
        "--nq",
        "20",
        "--dim",
        "16",
    ]);
    write_inputs(dir.path(), 3000);
    ok(&[
        "build",
        &p("base.fbin"),
        &p("idx"),
        "--metric",
        "l2",
        "-R",
        "24",
        "-L",
        "48",
        "--pq-bytes",
        "8",
        "--labels",
        &p("labels.txt"),
        "--attrs",
        &p("attrs.jsonl"),
    ]);
    let filters = "label = \"L3\"\nlang = \"en\" AND year >= 2020\n\nlabel IN (\"L1\", \"L2\") OR year < 1992\n";
    std::fs::write(dir.path().join("filters.txt"), filters.repeat(5)).unwrap();
    ok(&[
        "gt",
        &p("base.fbin"),
        &p("q.fbin"),
        "-k",
        "10",
        "--metric",
        "l2",
        "-o",
        &p("gt.bin"),
        "--filters",
        &p("filters.txt"),
        "--labels",
        &p("labels.txt"),
        "--attrs",
        &p("attrs.jsonl"),
    ]);
    for plan in ["auto", "inline", "scan", "exact"] {
        let out = ok(&[
            "bench",
            &p("idx"),
            "--queries",
            &p("q.fbin"),
            "--gt",
            &p("gt.bin"),
            "--filters",
            &p("filters.txt"),
            "--filter-plan",
            plan,
            "--list-sizes",
            "64",
        ]);
        // The recall column of the one row: every plan finds the filtered neighbours.
        let row = out.lines().last().unwrap();
        let recall: f64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(recall >= 0.9, "{plan}: {out}");
    }
    ok(&[
        "search",
        &p("idx"),
        "--queries",
        &p("q.fbin"),
        "-k",
        "5",
        "--filter",
        "label = \"L7\"",
    ]);
    let v = ok(&["info", &p("idx"), "--verify"]);
    assert!(v.contains("attrs.trawl"), "{v}");
    let i = ok(&["info", &p("idx")]);
    assert!(
        i.contains("attributes in memory:") && i.contains("6000 label occurrences"),
        "{i}"
    );

    // Bad filters: the position and the field named.
    let e = fails(&[
        "search",
        &p("idx"),
        "--queries",
        &p("q.fbin"),
        "--filter",
        "year >= AND x",
    ]);
    assert!(e.contains("column"), "{e}");
    let e = fails(&[
        "search",
        &p("idx"),
        "--queries",
        &p("q.fbin"),
        "--filter",
        "tenant = 3",
    ]);
    assert!(e.contains("unknown field"), "{e}");
    let e = fails(&[
        "search",
        &p("idx"),
        "--queries",
        &p("q.fbin"),
        "--filters",
        &p("labels.txt"),
    ]);
    assert!(e.contains("labels.txt"), "{e}");
}

#[test]
fn bad_attribute_files_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    ok(&[
        "gen",
        &p("base.fbin"),
        "-n",
        "500",
        "--nq",
        "1",
        "--dim",
        "8",
    ]);
    write_inputs(dir.path(), 499);
    let e = fails(&[
        "build",
        &p("base.fbin"),
        &p("idx"),
        "--metric",
        "l2",
        "--labels",
        &p("labels.txt"),
    ]);
    assert!(e.contains("499 lines but the data has 500"), "{e}");
    write_inputs(dir.path(), 500);
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"year\": 1}\n".repeat(499) + "{\"year\": NaN}\n",
    )
    .unwrap();
    let e = fails(&[
        "build",
        &p("base.fbin"),
        &p("idx"),
        "--metric",
        "l2",
        "--attrs",
        &p("bad.jsonl"),
    ]);
    assert!(e.contains("line 500"), "{e}");
    std::fs::write(dir.path().join("bad.txt"), "a,b\n".repeat(499) + "x\ny\n").unwrap();
    let e = fails(&[
        "build",
        &p("base.fbin"),
        &p("idx"),
        "--metric",
        "l2",
        "--labels",
        &p("bad.txt"),
    ]);
    assert!(e.contains("501 lines"), "{e}");
    assert!(!dir.path().join("idx").join("manifest.trawl").exists());
}

/// The ids of a results file (`search -o`: u32 nq, u32 k, then the ids).
fn result_ids(path: &std::path::Path) -> Vec<u32> {
    let b = std::fs::read(path).unwrap();
    let w = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
    let (nq, k) = (w(0) as usize, w(1) as usize);
    (0..nq * k).map(|i| w(2 + i)).collect()
}

#[test]
fn inserted_vectors_carry_their_labels_through_the_log_and_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    ok(&[
        "gen",
        &p("base.fbin"),
        "--queries",
        &p("q.fbin"),
        "-n",
        "1000",
        "--nq",
        "5",
        "--dim",
        "8",
    ]);
    ok(&[
        "gen",
        &p("more.fbin"),
        "-n",
        "200",
        "--nq",
        "1",
        "--dim",
        "8",
        "--seed",
        "9",
    ]);
    write_inputs(dir.path(), 1000);
    ok(&[
        "build",
        &p("base.fbin"),
        &p("idx"),
        "--metric",
        "l2",
        "--pq-bytes",
        "8",
        "--labels",
        &p("labels.txt"),
        "--attrs",
        &p("attrs.jsonl"),
    ]);
    std::fs::write(dir.path().join("new.txt"), "fresh,lang=fr\n".repeat(200)).unwrap();
    std::fs::write(
        dir.path().join("new.jsonl"),
        "{\"year\": 2030}\n".repeat(200),
    )
    .unwrap();
    let out = ok(&[
        "insert",
        &p("idx"),
        &p("more.fbin"),
        "--labels",
        &p("new.txt"),
        "--attrs",
        &p("new.jsonl"),
    ]);
    assert!(out.contains("assigned ids 1000..=1199"), "{out}");
    ok(&["delete", &p("idx"), "--id", "1000,1001,1002"]);
    let search = |filter: &str| {
        ok(&[
            "search",
            &p("idx"),
            "--queries",
            &p("q.fbin"),
            "-k",
            "5",
            "--filter",
            filter,
            "-o",
            &p("res.bin"),
        ]);
        result_ids(&dir.path().join("res.bin"))
    };
    for round in ["unmerged", "merged"] {
        for f in ["label = \"fresh\"", "lang = \"fr\" AND year > 2029"] {
            let ids = search(f);
            assert_eq!(ids.len(), 25, "{round}");
            assert!(
                ids.iter().all(|&i| (1003..1200).contains(&i)),
                "{round}, {f}: {ids:?}"
            );
        }
        let ids = search("year < 2030");
        assert!(ids.iter().all(|&i| i < 1000), "{round}: {ids:?}");
        if round == "unmerged" {
            let out = ok(&["merge", &p("idx")]);
            assert!(out.contains("197 inserted"), "{out}");
        }
    }
    // A name used the other way round is refused, nothing logged.
    std::fs::write(dir.path().join("clash.txt"), "year=2020\n".repeat(200)).unwrap();
    let e = fails(&[
        "insert",
        &p("idx"),
        &p("more.fbin"),
        "--labels",
        &p("clash.txt"),
    ]);
    assert!(e.contains("\"year\""), "{e}");
    let v = ok(&["info", &p("idx"), "--verify"]);
    assert!(v.contains("attrs.trawl"), "{v}");
}

/// Writes a one-column `.npy` file of `descr` holding `bytes` (`n` values).
fn write_npy(path: &std::path::Path, descr: &str, n: usize, bytes: &[u8]) {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}");
    let mut head = dict.into_bytes();
    while (10 + head.len() + 1) % 64 != 0 {
        head.push(b' ');
    }
    head.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(head.len() as u16).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(bytes);
    std::fs::write(path, out).unwrap();
}

#[test]
fn numpy_columns_are_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    ok(&[
        "gen",
        &p("base.fbin"),
        "--queries",
        &p("q.fbin"),
        "-n",
        "600",
        "--nq",
        "4",
        "--dim",
        "8",
    ]);
    let score: Vec<u8> = (0..600).flat_map(|i| (i as f64).to_le_bytes()).collect();
    write_npy(&dir.path().join("score.npy"), "<f8", 600, &score);
    let rank: Vec<u8> = (0..600i32).flat_map(|i| (600 - i).to_le_bytes()).collect();
    write_npy(&dir.path().join("r.npy"), "<i4", 600, &rank);
    let flag: Vec<u8> = (0..600).map(|i| u8::from(i % 2 == 0)).collect();
    write_npy(&dir.path().join("flag.npy"), "|b1", 600, &flag);
    ok(&[
        "build",
        &p("base.fbin"),
        &p("idx"),
        "--metric",
        "l2",
        "--pq-bytes",
        "8",
        "--attrs",
        &p("score.npy"),
        "--attrs",
        &format!("rank={}", p("r.npy")),
        "--attrs",
        &p("flag.npy"),
    ]);
    ok(&[
        "search",
        &p("idx"),
        "--queries",
        &p("q.fbin"),
        "-k",
        "5",
        "--filter",
        "score >= 300 AND flag = \"true\" AND rank > 100",
        "-o",
        &p("res.bin"),
    ]);
    let ids = result_ids(&dir.path().join("res.bin"));
    assert_eq!(ids.len(), 20);
    assert!(
        ids.iter().all(|&i| (300..500).contains(&i) && i % 2 == 0),
        "{ids:?}"
    );
    // A NaN, a column of the wrong length: errors naming the file, nothing written.
    let mut bad = score.clone();
    bad[8 * 7..8 * 8].copy_from_slice(&f64::NAN.to_le_bytes());
    write_npy(&dir.path().join("nan.npy"), "<f8", 600, &bad);
    let e = fails(&[
        "build",
        &p("base.fbin"),
        &p("idx2"),
        "--metric",
        "l2",
        "--attrs",
        &p("nan.npy"),
    ]);
    assert!(
        e.contains("nan.npy") && e.contains("not a finite number"),
        "{e}"
    );
    write_npy(&dir.path().join("short.npy"), "<f8", 599, &score[..599 * 8]);
    let e = fails(&[
        "build",
        &p("base.fbin"),
        &p("idx2"),
        "--metric",
        "l2",
        "--attrs",
        &p("short.npy"),
    ]);
    assert!(e.contains("599 values but the data has 600"), "{e}");
    assert!(!dir.path().join("idx2").join("manifest.trawl").exists());
}

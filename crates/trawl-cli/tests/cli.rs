//! End-to-end tests of the `trawl` binary: the main pipeline on small data, and the bad-input
//! suite (every case must fail with a clear message, never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn trawl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .arg("--quiet")
        .args(args)
        .output()
        .expect("the trawl binary runs")
}

fn ok(args: &[&str]) -> String {
    let out = trawl(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "trawl {args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command that must fail; returns its error message after checking it is not a panic.
fn fails(args: &[&str]) -> String {
    let out = trawl(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "trawl {args:?} should fail");
    assert!(
        !stderr.contains("panicked"),
        "trawl {args:?} panicked: {stderr}"
    );
    assert!(
        stderr.starts_with("error: "),
        "trawl {args:?}: unexpected stderr {stderr}"
    );
    stderr
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn write_fbin(path: &Path, n: u32, dim: u32, values: &[f32]) {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&n.to_le_bytes());
    bytes.extend_from_slice(&dim.to_le_bytes());
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

struct Data {
    _dir: tempfile::TempDir,
    base: PathBuf,
    queries: PathBuf,
    gt: PathBuf,
    graph: PathBuf,
}

fn pipeline(metric: &str) -> Data {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.fbin");
    let queries = dir.path().join("queries.fbin");
    let gt = dir.path().join("gt.bin");
    let graph = dir.path().join("graph.trawl");
    ok(&[
        "gen",
        s(&base),
        "--queries",
        s(&queries),
        "-n",
        "3000",
        "--nq",
        "50",
        "--dim",
        "24",
    ]);
    ok(&[
        "gt",
        s(&base),
        s(&queries),
        "-k",
        "20",
        "--metric",
        metric,
        "-o",
        s(&gt),
    ]);
    ok(&[
        "graph",
        "build",
        s(&base),
        s(&graph),
        "--metric",
        metric,
        "-R",
        "64",
        "-L",
        "100",
    ]);
    Data {
        _dir: dir,
        base,
        queries,
        gt,
        graph,
    }
}

#[test]
fn pipeline_reaches_high_recall_and_writes_json() {
    for metric in ["l2", "cosine", "ip"] {
        let d = pipeline(metric);
        let json = d.graph.with_extension("json");
        ok(&[
            "graph",
            "search",
            s(&d.base),
            s(&d.graph),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "--metric",
            metric,
            "-k",
            "10",
            "-L",
            "10,200",
            "--json",
            s(&json),
        ]);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        let recall = rows[1]["recall"].as_f64().unwrap();
        // Inner product needs the longest list of the three (no triangle inequality).
        assert!(recall >= 0.95, "{metric}: recall@10 at L=200 is {recall}");
        assert!(rows[1]["qps"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn info_describes_every_kind_of_file() {
    let d = pipeline("l2");
    let out = ok(&["info", s(&d.base)]);
    assert!(
        out.contains("vectors: 3000") && out.contains("dim:     24"),
        "{out}"
    );
    let out = ok(&["info", s(&d.gt)]);
    assert!(
        out.contains("ground truth") && out.contains("k:       20"),
        "{out}"
    );
    let out = ok(&["info", s(&d.graph)]);
    assert!(
        out.contains("Vamana graph") && out.contains("nodes:   3000"),
        "{out}"
    );
}

#[test]
fn bad_inputs_give_clear_errors() {
    let d = pipeline("l2");
    let dir = d.graph.parent().unwrap().to_path_buf();

    // k larger than the base.
    let err = fails(&[
        "gt",
        s(&d.base),
        s(&d.queries),
        "-k",
        "5000",
        "--metric",
        "l2",
        "-o",
        "/dev/null",
    ]);
    assert!(err.contains("5000") && err.contains("3000"), "{err}");

    // Wrong dimensions between base and queries.
    let other = dir.join("other.fbin");
    write_fbin(&other, 2, 7, &[0.5; 14]);
    let err = fails(&[
        "gt",
        s(&d.base),
        s(&other),
        "-k",
        "1",
        "--metric",
        "l2",
        "-o",
        "/dev/null",
    ]);
    assert!(err.contains("24") && err.contains('7'), "{err}");

    // NaN and infinite values are rejected with their row.
    for bad in [f32::NAN, f32::INFINITY] {
        let mut values = vec![1.0f32; 4 * 8];
        values[2 * 8 + 3] = bad;
        let path = dir.join("nan.fbin");
        write_fbin(&path, 4, 8, &values);
        let err = fails(&[
            "graph",
            "build",
            s(&path),
            s(&dir.join("g")),
            "--metric",
            "l2",
        ]);
        assert!(err.contains("row 2") || err.contains("row: 2"), "{err}");
    }

    // Empty and truncated files.
    let empty = dir.join("empty.fbin");
    std::fs::write(&empty, b"").unwrap();
    let err = fails(&["info", s(&empty)]);
    assert!(err.contains("empty.fbin"), "{err}");
    let bytes = std::fs::read(&d.base).unwrap();
    let cut = dir.join("cut.fbin");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let err = fails(&[
        "graph",
        "build",
        s(&cut),
        s(&dir.join("g")),
        "--metric",
        "l2",
    ]);
    assert!(err.contains("cut.fbin"), "{err}");

    // A missing file, a damaged graph, bad parameters.
    let err = fails(&["info", "/nonexistent/file.fbin"]);
    assert!(err.contains("/nonexistent/file.fbin"), "{err}");
    let mut graph = std::fs::read(&d.graph).unwrap();
    let mid = graph.len() / 2;
    graph[mid] ^= 0xff;
    let damaged = dir.join("damaged.trawl");
    std::fs::write(&damaged, graph).unwrap();
    let err = fails(&[
        "graph",
        "search",
        s(&d.base),
        s(&damaged),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "--metric",
        "l2",
    ]);
    assert!(err.contains("checksum"), "{err}");
    let err = fails(&[
        "graph",
        "build",
        s(&d.base),
        s(&dir.join("g")),
        "--metric",
        "l2",
        "-R",
        "0",
    ]);
    assert!(err.contains("`r`") && err.contains('0'), "{err}");
    let err = fails(&[
        "graph",
        "build",
        s(&d.base),
        s(&dir.join("g")),
        "--metric",
        "l2",
        "--alpha",
        "0.5",
    ]);
    assert!(err.contains("alpha") || err.contains('α'), "{err}");
    let err = fails(&[
        "graph",
        "search",
        s(&d.base),
        s(&d.graph),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "--metric",
        "l2",
        "-k",
        "50",
    ]);
    assert!(err.contains("50"), "{err}");
    let err = fails(&["gen", s(&dir.join("x.txt")), "-n", "10"]);
    assert!(err.contains("x.txt"), "{err}");
}

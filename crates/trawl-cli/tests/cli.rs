//! End-to-end tests of the `trawl` binary: the main pipeline on small data, and the bad-input
//! suite (every case must fail with a clear message, never a panic).

mod common;

use std::path::{Path, PathBuf};

use common::{fails, ok, s, write_fbin};

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

/// Builds a small disk index of `d.base` at `ix` (L2, R = 32, L = 64, 12 PQ bytes, 2 threads)
/// with `extra` build flags; returns the command's output.
fn build_disk_index(d: &Data, ix: &Path, extra: &[&str]) -> String {
    let args = [
        "build",
        s(&d.base),
        s(ix),
        "--metric",
        "l2",
        "-R",
        "32",
        "-L",
        "64",
        "--pq-bytes",
        "12",
        "--threads",
        "2",
    ];
    ok(&[&args[..], extra].concat())
}

#[test]
fn disk_index_build_bench_search_info() {
    let d = pipeline("l2");
    let ix = d.graph.parent().unwrap().join("index");
    let report = ix.with_extension("report.json");
    let out = build_disk_index(&d, &ix, &["--report", s(&report)]);
    assert!(out.contains("built disk index over 3000 × 24"), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(r["disk_bytes"].as_u64().unwrap() > 0);
    assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0);
    let json = ix.with_extension("bench.json");
    let csv = ix.with_extension("bench.csv");
    let out = ok(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "-k",
        "10",
        "-L",
        "10,80",
        "--threads",
        "2",
        "--cache-nodes",
        "50",
        "--json",
        s(&json),
        "--csv",
        s(&csv),
    ]);
    assert!(out.contains("recall@10"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["L"].as_u64(), Some(80));
    let recall = rows[1]["recall"].as_f64().unwrap();
    assert!(recall >= 0.95, "recall@10 at L=80 is {recall}");
    for key in ["qps", "pages_per_query", "ios_per_query"] {
        assert!(rows[1][key].as_f64().unwrap() > 0.0, "{key}");
    }
    for key in ["mean", "p50", "p99", "p999"] {
        assert!(rows[1]["latency_us"][key].as_f64().unwrap() > 0.0, "{key}");
    }
    assert_eq!(v["engine"]["direct"].as_bool(), Some(true));
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 3);
    // PipeSearch seeded by the entry index, two queries interleaved per thread.
    let pipe_json = ix.with_extension("pipe.json");
    ok(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "-L",
        "80",
        "--strategy",
        "pipe",
        "--entry-list",
        "10",
        "--interleave",
        "2",
        "--threads",
        "2",
        "--json",
        s(&pipe_json),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pipe_json).unwrap()).unwrap();
    let row = &v["rows"][0];
    assert!(row["recall"].as_f64().unwrap() >= 0.95, "{row}");
    let occ = row["occupancy"].as_f64().unwrap();
    assert!(occ > 0.0 && occ <= 1.0, "{row}");
    assert!(row["wasted_reads_per_query"].as_f64().unwrap() >= 0.0);
    assert_eq!(v["strategy"].as_str(), Some("pipe"));
    assert!(v["entry_nodes"].as_u64().unwrap() > 0);
    // Bad PipeSearch and throughput-mode options are refused with a message.
    let q = ["--queries", s(&d.queries), "--gt", s(&d.gt)];
    let err = fails(
        &[
            &["bench", s(&ix)],
            &q[..],
            &["--strategy", "pipe", "--pipe-max-width", "0"],
        ]
        .concat(),
    );
    assert!(err.contains("--pipe-max-width 0"), "{err}");
    let err = fails(&[&["bench", s(&ix)], &q[..], &["--interleave", "0"]].concat());
    assert!(err.contains("interleave"), "{err}");
    let err = fails(&[&["bench", s(&ix)], &q[..], &["--strategy", "wide"]].concat());
    assert!(err.contains("wide"), "{err}");
    let err = fails(&[
        "build",
        s(&d.base),
        s(&ix.with_extension("bad")),
        "--metric",
        "l2",
        "--entry-ratio",
        "2",
    ]);
    assert!(err.contains("--entry-ratio"), "{err}");
    // search writes results in the ground-truth format.
    let res = ix.with_extension("res.bin");
    let out = ok(&[
        "search",
        s(&ix),
        "--queries",
        s(&d.queries),
        "-k",
        "10",
        "-L",
        "80",
        "--gt",
        s(&d.gt),
        "-o",
        s(&res),
        "--engine",
        "pread",
    ]);
    assert!(out.contains("recall@10"), "{out}");
    let info = ok(&["info", s(&res)]);
    assert!(
        info.contains("queries: 50") && info.contains("k:       10"),
        "{info}"
    );
    let info = ok(&["info", s(&ix), "--verify"]);
    assert!(
        info.contains("page-packed")
            && info.contains("pq-codes.trawl")
            && info.contains("entry.trawl")
            && info.contains("match their checksums"),
        "{info}"
    );
    // Bad input: k above L, a missing index, a damaged index, queries of another dimension.
    let err = fails(&[&["bench", s(&ix)], &q[..], &["-k", "10", "-L", "5"]].concat());
    assert!(err.contains("k = 10"), "{err}");
    let err = fails(&[&["bench", s(&d.base)], &q[..]].concat());
    assert!(err.contains("not an index directory"), "{err}");
    let other = ix.parent().unwrap().join("q7.fbin");
    write_fbin(&other, 2, 7, &[0.5; 14]);
    let err = fails(&["search", s(&ix), "--queries", s(&other)]);
    assert!(err.contains("dimension"), "{err}");
    let packed = ix.join("packed.trawl");
    let bytes = std::fs::read(&packed).unwrap();
    std::fs::write(&packed, &bytes[..bytes.len() - 4096]).unwrap();
    let err = fails(&[&["bench", s(&ix)], &q[..]].concat());
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn quickstart_runs_on_a_small_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&[
        "quickstart",
        "--dir",
        s(dir.path()),
        "-n",
        "3000",
        "--nq",
        "40",
        "--dim",
        "16",
        "--pq-bytes",
        "8",
    ]);
    assert!(out.contains("recall@10") && out.contains("pages"), "{out}");
    assert!(dir.path().join("index/packed.trawl").exists());
    assert!(dir.path().join("bench.json").exists());
}

/// The design-space commands: `entry` (MemGraph by visit frequency), `layout` (PageShuffle and
/// All-in-Storage), the search switches, and `bench --ablation` with its three outputs.
#[test]
fn design_space_entry_layout_and_ablation() {
    let d = pipeline("l2");
    let ix = d.graph.parent().unwrap().join("octo");
    build_disk_index(
        &d,
        &ix,
        &["--entry-ratio", "0.01", "--entry-sampling", "freq"],
    );
    let out = ok(&[
        "entry",
        s(&ix),
        "--ratio",
        "0.02",
        "--degree",
        "16",
        "--build-list",
        "32",
        "--sampling",
        "uniform",
    ]);
    assert!(out.contains("60 nodes (uniform sampling"), "{out}");
    fails(&["entry", s(&ix), "--ratio", "0"]);
    let report = ix.with_extension("layout.json");
    let out = ok(&[
        "layout",
        s(&ix),
        "--shuffle",
        "--ais",
        "--report",
        s(&report),
    ]);
    assert!(
        out.contains("packed-shuffled.trawl") && out.contains("OR(G)"),
        "{out}"
    );
    assert!(out.contains("packed-ais.trawl"), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let sh = &r[0]["shuffle"];
    assert!(sh["or_final"].as_f64().unwrap() > sh["or_identity"].as_f64().unwrap());
    fails(&["layout", s(&ix)]);
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            s(&ix),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "-L",
            "20,40",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    bench(&[
        "--layout",
        "shuffle",
        "--page-search",
        "--dynamic-width",
        "-W",
        "16",
    ]);
    bench(&["--layout", "ais"]);
    bench(&["--dynamic-width", "2:4,8", "-W", "8", "--entry-list", "10"]);
    let bad = fails(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "--strategy",
        "pipe",
        "--dynamic-width",
    ]);
    assert!(bad.contains("beam-search option"), "{bad}");
    // PageSearch runs inside PipeSearch too (on the PageShuffle layout it saves reads).
    bench(&["--layout", "shuffle", "--strategy", "pipe", "--page-search"]);
    let bad = fails(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "--dynamic-width",
        "4,x",
    ]);
    assert!(bad.contains("width schedule"), "{bad}");
    let out_dir = ix.with_extension("ablation");
    let out = bench(&[
        "--threads",
        "2",
        "-W",
        "8",
        "--ablation",
        "--ablation-out",
        s(&out_dir),
        "--ablation-configs",
        "Baseline,PageSearch,C5,AllInStorage",
    ]);
    assert!(out.contains("recall@10 = 0.90"), "{out}");
    let csv = std::fs::read_to_string(out_dir.join("ablation.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4 * 2, "{csv}");
    assert!(csv.starts_with("config,L,recall,qps"));
    for name in ["Baseline", "PageSearch", "C5", "AllInStorage"] {
        assert!(csv.contains(&format!("\n{name},")), "{name} missing: {csv}");
    }
    let md = std::fs::read_to_string(out_dir.join("ablation.md")).unwrap();
    assert!(md.contains("| C5 |"), "{md}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("ablation.json")).unwrap())
            .unwrap();
    assert_eq!(j["runs"].as_array().unwrap().len(), 4);
    let bad = fails(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "--ablation",
        "--ablation-configs",
        "Nope",
        "--ablation-out",
        s(&out_dir),
    ]);
    assert!(bad.contains("unknown ablation configuration"), "{bad}");
}

#[test]
fn decoupled_layout_build_info_search_without_the_packed_file() {
    let d = pipeline("l2");
    let ix = d.graph.parent().unwrap().join("dvs");
    let report = ix.with_extension("report.json");
    let out = build_disk_index(&d, &ix, &["--decoupled", "--report", s(&report)]);
    assert!(
        out.contains("decoupled layout: graph.trawl") && out.contains("× packed.trawl"),
        "{out}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let dr = &r["decoupled"]["decoupled"];
    assert!(dr["graph_bytes"].as_u64().unwrap() < dr["lists_raw_bytes"].as_u64().unwrap());
    // The refinement codes are written with the layout, with what they save.
    assert_eq!(
        dr["refine_bytes"].as_u64().unwrap(),
        std::fs::metadata(ix.join("refine.trawl")).unwrap().len()
    );
    assert!(dr["refine_savings"]["pages_without"].as_f64().unwrap() > 0.0);
    // Each list size of a --fresh-queries sweep searches queries of its own.
    let bench = |extra: &[&'static str]| -> Vec<String> {
        let mut args: Vec<&str> = vec![
            "bench",
            s(&ix),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "--layout",
            "decoupled",
            "-L",
            "20,40",
            "--fresh-queries",
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(String::from).collect()
    };
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let json = ix.with_extension("fresh.json");
    let mut args = bench(&["--max-queries", "25", "--refine-bits", "8"]);
    args.extend(["--json".to_string(), s(&json).to_string()]);
    ok(&strs(&args));
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(b["fresh_queries"], true);
    assert_eq!(b["queries"], 25);
    assert_eq!(b["rows"].as_array().unwrap().len(), 2);
    assert_eq!(b["refine"]["from_file"], true, "{b}");
    let short = fails(&strs(&bench(&["--max-queries", "30"])));
    assert!(short.contains("need 60 queries"), "{short}");
    let info = ok(&["info", s(&ix)]);
    assert!(
        info.contains("decoupled layout (--layout decoupled)"),
        "{info}"
    );
    let g = ok(&["info", s(&ix.join("graph.trawl")), "--verify"]);
    assert!(
        g.contains("decoupled graph") && g.contains("verify:"),
        "{g}"
    );
    let v = ok(&["info", s(&ix.join("vectors.trawl")), "--verify"]);
    assert!(v.contains("all 3000 vectors decode"), "{v}");
    let search = |extra: &[&str]| {
        let out = ix.with_extension(format!("res{}.bin", extra.len()));
        let mut args = vec![
            "search",
            s(&ix),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "-L",
            "40",
            "-o",
            s(&out),
        ];
        args.extend_from_slice(extra);
        ok(&args);
        std::fs::read(&out).unwrap()
    };
    // Re-ranking every candidate gives the packed layout's results, byte for byte.
    let packed = search(&[]);
    let full = search(&["--layout", "decoupled", "--rerank-threshold", "0"]);
    assert_eq!(packed, full);
    // Without packed.trawl the decoupled layout still opens, searches and describes itself.
    std::fs::remove_file(ix.join("packed.trawl")).unwrap();
    let again = search(&["--layout", "decoupled", "--rerank-threshold", "0"]);
    assert_eq!(packed, again);
    let info = ok(&["info", s(&ix)]);
    assert!(info.contains("the decoupled layout only"), "{info}");
    assert!(info.contains("refine.trawl"), "{info}");
    // Without --layout, an index left with the decoupled layout alone is searched on it.
    let auto = search(&["--rerank-threshold", "0"]);
    assert_eq!(packed, auto);
    // Asking for another layout it does not have names the file.
    let bad = fails(&[
        "search",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--layout",
        "shuffle",
    ]);
    assert!(bad.contains("packed-shuffled.trawl"), "{bad}");
}

#[test]
fn insert_delete_merge_and_search_by_id() {
    let d = pipeline("l2");
    let ix = d.graph.parent().unwrap().join("index");
    build_disk_index(&d, &ix, &[]);
    let dir = d.graph.parent().unwrap();
    // Two new vectors beside base rows 10 and 20, with chosen ids.
    let new = dir.join("new.fbin");
    let base = std::fs::read(&d.base).unwrap();
    let row = |r: usize| -> Vec<f32> {
        base[8 + r * 96..8 + (r + 1) * 96]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) + 1e-3)
            .collect()
    };
    let values = [row(10), row(20)].concat();
    write_fbin(&new, 2, 24, &values);
    let ids = dir.join("ids.txt");
    std::fs::write(&ids, "7000000\n7000001\n").unwrap();
    let out = ok(&["insert", s(&ix), s(&new), "--ids", s(&ids)]);
    assert!(
        out.contains("inserted 2 vectors") && out.contains("3002 live"),
        "{out}"
    );
    // Searching for them finds them by id, before any merge.
    let res = dir.join("res.bin");
    let search = |res: &Path| {
        ok(&[
            "search",
            s(&ix),
            "--queries",
            s(&new),
            "-k",
            "1",
            "-L",
            "20",
            "-o",
            s(res),
        ]);
        let gt = std::fs::read(res).unwrap();
        (
            u32::from_le_bytes(gt[8..12].try_into().unwrap()),
            u32::from_le_bytes(gt[12..16].try_into().unwrap()),
        )
    };
    assert_eq!(search(&res), (7_000_000, 7_000_001));
    // The same id again is refused; with --upsert it replaces.
    let e = fails(&["insert", s(&ix), s(&new), "--ids", s(&ids)]);
    assert!(e.contains("already in the index"), "{e}");
    let out = ok(&["delete", s(&ix), "--id", "7000001,5"]);
    assert!(
        out.contains("deleted 2 ids") && out.contains("3000 live"),
        "{out}"
    );
    let e = fails(&["delete", s(&ix), "--id", "5"]);
    assert!(e.contains("not in the index"), "{e}");
    let (first, second) = search(&res);
    assert_eq!(first, 7_000_000);
    assert_ne!(second, 7_000_001);
    let report = dir.join("merge.json");
    let out = ok(&["merge", s(&ix), "--report", s(&report)]);
    assert!(out.contains("1 deleted, 1 inserted"), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["slots"], 3000);
    assert_eq!(search(&res).0, 7_000_000);
    let out = ok(&["info", s(&ix), "--verify"]);
    assert!(out.contains("ids.trawl"), "{out}");
}

#[test]
fn a_decoupled_merge_keeps_only_the_decoupled_layout() {
    let d = pipeline("l2");
    let ix = d.graph.parent().unwrap().join("index");
    build_disk_index(&d, &ix, &["--decoupled"]);
    let dir = d.graph.parent().unwrap();
    let new = dir.join("new.fbin");
    let base = std::fs::read(&d.base).unwrap();
    // 50 new vectors beside base rows 0..50.
    let values: Vec<f32> = base[8..8 + 50 * 96]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()) + 1e-3)
        .collect();
    write_fbin(&new, 50, 24, &values);
    let out = ok(&["insert", s(&ix), s(&new)]);
    assert!(out.contains("assigned ids 3000..=3049"), "{out}");
    ok(&["delete", s(&ix), "--id", "1,2,3"]);
    let out = ok(&["merge", s(&ix), "--decoupled", "--gc-threshold", "0.5"]);
    assert!(
        out.contains("3 deleted, 50 inserted")
            && out.contains("graph rewritten")
            && out.contains("vectors-000001.trawl written (50 vectors"),
        "{out}"
    );
    assert!(!ix.join("packed.trawl").exists() && ix.join("vmap.trawl").exists());
    // The next writer and the searches find the decoupled layout on their own.
    ok(&["insert", s(&ix), s(&new)]);
    let out = ok(&["merge", s(&ix)]);
    assert!(out.contains("vectors-000002.trawl written"), "{out}");
    let res = dir.join("res.bin");
    ok(&[
        "search",
        s(&ix),
        "--queries",
        s(&new),
        "-k",
        "3",
        "-o",
        s(&res),
    ]);
    let gt = std::fs::read(&res).unwrap();
    let first = u32::from_le_bytes(gt[8..12].try_into().unwrap());
    assert!(
        first == 3000 || first == 3050,
        "row 0's twin is new id 3000 or 3050, got {first}"
    );
    let out = ok(&["info", s(&ix), "--verify"]);
    assert!(
        out.contains("vmap.trawl")
            && out.contains("vectors-000002.trawl")
            && !out.contains("packed.trawl "),
        "{out}"
    );
    let e = fails(&["merge", s(&ix), "--gc-threshold", "1.5"]);
    assert!(e.contains("share between 0 and 1"), "{e}");
}

#[test]
fn opq_build_is_recorded_and_searches_as_well() {
    let d = pipeline("l2");
    let root = d.graph.parent().unwrap();
    let (plain, opq) = (root.join("plain"), root.join("opq"));
    build_disk_index(&d, &plain, &[]);
    let report = root.join("opq-report.json");
    build_disk_index(&d, &opq, &["--opq", "--report", s(&report)]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["pq_opq"].as_bool(), Some(true));
    let info = ok(&["info", s(&opq)]);
    assert!(info.contains("12 PQ bytes (OPQ)"), "{info}");
    let info = ok(&["info", s(&plain)]);
    assert!(!info.contains("(OPQ)"), "{info}");
    // Same graph settings, same L: the rotated PQ must not search worse than plain PQ by more
    // than sampling noise (it ranks neighbours at least as well on this data).
    let recall = |ix: &Path| {
        let json = ix.with_extension("bench.json");
        ok(&[
            "bench",
            s(ix),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "-k",
            "10",
            "-L",
            "40",
            "--json",
            s(&json),
        ]);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        v["rows"][0]["recall"].as_f64().unwrap()
    };
    let (rp, ro) = (recall(&plain), recall(&opq));
    assert!(ro >= 0.9, "OPQ recall@10 at L=40 is {ro}");
    assert!(ro >= rp - 0.03, "OPQ recall {ro} vs plain {rp}");
}

#[test]
fn sharded_build_search_bench_info_and_probe() {
    let d = pipeline("l2");
    let root = d.graph.parent().unwrap();
    let (single, sharded) = (root.join("single"), root.join("sharded"));
    build_disk_index(&d, &single, &[]);
    let report = root.join("shard-report.json");
    let out = ok(&[
        "shard",
        "build",
        s(&d.base),
        s(&sharded),
        "--shards",
        "3",
        "--metric",
        "l2",
        "-R",
        "32",
        "-L",
        "64",
        "--pq-bytes",
        "12",
        "--threads",
        "2",
        "--report",
        s(&report),
    ]);
    assert!(out.contains("into 3 shards"), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let counts: Vec<u64> = r["plan"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 3000);
    assert_eq!(r["shard_reports"].as_array().unwrap().len(), 3);
    for s in 0..3 {
        assert!(sharded
            .join(format!("shard-{s:03}/manifest.trawl"))
            .is_file());
    }
    let info = ok(&["info", s(&sharded)]);
    assert!(info.contains("3000 × 24 f32 (l2), 3 shards"), "{info}");
    assert!(info.contains("every shard matches"), "{info}");
    let bench = |ix: &Path, probe: &str| {
        let json = root.join(format!("bench-{probe}.json"));
        ok(&[
            "bench",
            s(ix),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "-k",
            "10",
            "-L",
            "40",
            "--probe",
            probe,
            "--json",
            s(&json),
        ]);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (
            v["rows"][0]["recall"].as_f64().unwrap(),
            v["rows"][0]["pages_per_query"].as_f64().unwrap(),
        )
    };
    let (r_single, _) = bench(&single, "0");
    let (r_all, pages_all) = bench(&sharded, "0");
    let (r_one, pages_one) = bench(&sharded, "1");
    assert!(r_all >= 0.9, "sharded recall@10 at L=40 is {r_all}");
    assert!(
        r_all >= r_single - 0.01,
        "sharded {r_all} vs single {r_single}"
    );
    assert!(pages_one < pages_all, "{pages_one} vs {pages_all}");
    assert!(r_one <= r_all + 1e-9);
    // `trawl search` writes global ids: recall of the written results equals the bench's.
    let res = root.join("res.bin");
    let out = ok(&[
        "search",
        s(&sharded),
        "--queries",
        s(&d.queries),
        "-k",
        "10",
        "-L",
        "40",
        "--gt",
        s(&d.gt),
        "-o",
        s(&res),
    ]);
    assert!(out.contains(&format!("recall@10: {r_all:.4}")), "{out}");
    // Bad input: clear errors.
    let e = fails(&[
        "shard",
        "build",
        s(&d.base),
        s(&root.join("x")),
        "--shards",
        "0",
        "--metric",
        "l2",
    ]);
    assert!(e.contains("shards must be at least 1"), "{e}");
    let e = fails(&[
        "shard",
        "build",
        s(&d.base),
        s(&root.join("x")),
        "--shards",
        "2",
        "--metric",
        "l2",
        "--kind",
        "ivf",
    ]);
    assert!(e.contains("graph indexes"), "{e}");
    let e = fails(&[
        "bench",
        s(&sharded),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "--strategy",
        "flash",
    ]);
    assert!(e.contains("not supported on a sharded index"), "{e}");
    // A shard rebuilt behind the manifest's back is refused.
    build_disk_index(&d, &sharded.join("shard-001"), &[]);
    let e = fails(&["info", s(&sharded)]);
    assert!(
        e.contains("shard 1") && e.contains("rebuilt or replaced"),
        "{e}"
    );
}

/// Issue 39: a sharded index never applies a shard's write-ahead log, so updates through a
/// shard's directory are refused (nothing logged), a shard whose log holds unmerged operations
/// (an older trawl's) is refused by name, and a forged `shards.trawl` (counts far beyond the
/// file, directories escaping the folder) fails cleanly, naming the file.
#[test]
fn sharded_indexes_refuse_shard_updates_unmerged_logs_and_forged_manifests() {
    use common::fails_cleanly;
    use trawl::kinds::sharded::{ShardManifest, SHARD_MANIFEST_FILE};
    let dir = tempfile::tempdir().unwrap();
    let (base, queries, sh) = (
        dir.path().join("base.fbin"),
        dir.path().join("q.fbin"),
        dir.path().join("sh"),
    );
    ok(&[
        "gen",
        s(&base),
        "--queries",
        s(&queries),
        "-n",
        "600",
        "--nq",
        "5",
        "--dim",
        "8",
    ]);
    ok(&[
        "shard",
        "build",
        s(&base),
        s(&sh),
        "--shards",
        "2",
        "--metric",
        "l2",
        "-R",
        "16",
        "-L",
        "32",
        "--pq-bytes",
        "4",
    ]);
    let shard0 = sh.join("shard-000");
    let man = sh.join(SHARD_MANIFEST_FILE);
    let refused = |e: &str, path: &Path| {
        assert!(
            e.contains(&format!(
                "{}: this directory is shard 0 of a sharded index ({}): updates to sharded \
                 indexes are not supported",
                path.display(),
                man.display()
            )),
            "{e}"
        );
    };
    let ids = dir.path().join("ids.txt");
    std::fs::write(&ids, "0\n").unwrap();
    let one = dir.path().join("one.fbin");
    write_fbin(&one, 1, 8, &[0.5; 8]);
    for path in [shard0.clone(), shard0.join(".")] {
        refused(&fails_cleanly(&["delete", s(&path), "--id", "0"]), &path);
        refused(&fails_cleanly(&["insert", s(&path), s(&one)]), &path);
        refused(
            &fails_cleanly(&["insert", s(&path), s(&one), "--ids", s(&ids), "--upsert"]),
            &path,
        );
        refused(&fails_cleanly(&["merge", s(&path)]), &path);
    }
    assert!(!shard0.join("wal.trawl").exists(), "nothing was logged");
    let search = [
        "search",
        s(&sh),
        "--queries",
        s(&queries),
        "-k",
        "1",
        "-L",
        "16",
    ];
    ok(&search);
    ok(&["info", s(&sh), "--verify"]);
    // An older trawl's acknowledged delete through the shard: the sharded search refuses it.
    let log = shard0.join("wal.trawl");
    let mut w = trawl::kinds::graph::updates::wal::LogWriter::create(&log, 0).unwrap();
    w.append(
        &[trawl::kinds::graph::updates::wal::LogOp::Delete { ids: vec![0] }],
        true,
    )
    .unwrap();
    drop(w);
    let want = format!(
        "shard 0: {} holds 1 logged update(s) not merged into the shard's files",
        log.display()
    );
    for e in [
        fails_cleanly(&search),
        fails_cleanly(&["info", s(&sh), "--verify"]),
    ] {
        assert!(e.contains(&want), "{e}");
        assert!(
            e.contains("updates to sharded indexes are not supported"),
            "{e}"
        );
    }
    std::fs::remove_file(&log).unwrap();
    // Forged counts (an abort or a capacity-overflow panic before) and escaping directories.
    let good = std::fs::read(&man).unwrap();
    let forge = |edit: &dyn Fn(&mut trawl::kinds::sharded::manifest::ShardHeader)| {
        let mut m = ShardManifest::load(&man).unwrap();
        edit(&mut m.header);
        m.save(&man).unwrap();
    };
    for n in [1_000_000_000_000_000u64, 1 << 40, 1 << 63] {
        forge(&|h| h.n = n);
        let want = format!(
            "{}: invalid content: n = {n} vectors, but the shards hold only 600 ids",
            man.display()
        );
        for e in [
            fails_cleanly(&["info", s(&sh), "--verify"]),
            fails_cleanly(&["info", s(&man)]),
            fails_cleanly(&search),
        ] {
            assert!(e.contains(&want), "{e}");
        }
        std::fs::write(&man, &good).unwrap();
    }
    let outside = dir.path().join("x");
    std::fs::create_dir_all(&outside).unwrap();
    for bad in ["../x", s(&outside), "sub/shard-001"] {
        forge(&|h| h.shards[1].dir = bad.to_string());
        let want = format!(
            "{}: invalid content: shard 1's directory {bad:?} is not a plain name inside the \
             sharded index's folder",
            man.display()
        );
        for e in [
            fails_cleanly(&["info", s(&sh), "--verify"]),
            fails_cleanly(&search),
        ] {
            assert!(e.contains(&want), "{e}");
        }
        std::fs::write(&man, &good).unwrap();
    }
    ok(&["info", s(&sh), "--verify"]);
}

#[test]
fn accel_bench_measures_both_stages_and_refuses_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("accel.json");
    let require_gpu = std::env::var("TRAWL_REQUIRE_GPU").as_deref() == Ok("1");
    let mut args = vec![
        "accel-bench",
        "--accel",
        "cpu,gpu",
        "-n",
        "5000",
        "--m",
        "12",
        "--batches",
        "2,8",
        "--cands",
        "300",
        "--top-n",
        "20",
        "--slots",
        "4,16",
        "--list",
        "8",
        "--degree",
        "8",
        "--query-steps",
        "4",
        "--seconds",
        "0",
        "--threads",
        "2",
        "--json",
        s(&json),
    ];
    if require_gpu {
        args.push("--require-gpu");
    }
    ok(&args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["threads"], 2);
    assert!(v["adapters"].is_array());
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);
    let gpu = v["skipped"].as_array().unwrap().is_empty();
    assert!(gpu || !require_gpu);
    let backends: &[&str] = if gpu { &["cpu", "gpu"] } else { &["cpu"] };
    let filter = v["filter"]["points"].as_array().unwrap();
    assert_eq!(filter.len(), 2 * backends.len());
    for (p, (batch, backend)) in filter.iter().zip(
        [2, 8]
            .iter()
            .flat_map(|b| backends.iter().map(move |k| (*b, *k))),
    ) {
        assert_eq!(p["batch"], batch);
        assert_eq!(p["backend"], backend);
        assert!(p["reps"].as_u64().unwrap() >= 3);
        // Random ids among 5000: each query scores between 1 and 300 distinct candidates.
        let per_query =
            p["distances_per_s"].as_f64().unwrap() / p["queries_per_s"].as_f64().unwrap();
        assert!((1.0..=300.0).contains(&per_query), "{p}");
        if backend == "gpu" {
            assert_eq!(p["equal_to_cpu"], true, "{p}");
        }
    }
    let flash = v["flash"]["points"].as_array().unwrap();
    assert_eq!(flash.len(), 2 * backends.len());
    for p in flash {
        assert!(p["steps"].as_u64().unwrap() >= 4, "{p}");
        // Each expansion scores at most its 8 neighbours plus a new query's start node.
        let per = p["distances_per_s"].as_f64().unwrap() / p["expansions_per_s"].as_f64().unwrap();
        assert!(per > 0.0 && per <= 9.0, "{p}");
        if p["backend"] == "gpu" {
            assert_eq!(p["equal_to_cpu"], true, "{p}");
        }
    }

    let base = [
        "accel-bench",
        "--accel",
        "cpu",
        "-n",
        "100",
        "--seconds",
        "0",
    ];
    for (extra, want) in [
        (&["--stages", "filters"][..], "unknown stage"),
        (&["--batches", "0"][..], "between 1 and"),
        (&["--slots", "70000"][..], "between 1 and"),
        (&["--cands", "0"][..], "--cands"),
        (&["--seconds", "NaN"][..], "--seconds"),
        (&["--m", "0"][..], "--m"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let err = fails(&args);
        assert!(err.contains(want), "{args:?}: {err}");
    }

    let info: serde_json::Value =
        serde_json::from_str(&ok(&["info", "--accel", "cpu", "--json"])).unwrap();
    assert_eq!(info["backend"], "cpu");
    assert!(info["adapters"].is_array());
}

#[test]
fn a_memory_budget_is_planned_printed_and_held() {
    let d = pipeline("l2");
    let ix = d.graph.parent().unwrap().join("index");
    build_disk_index(&d, &ix, &[]);
    let plan = ok(&["info", s(&ix), "--plan", "8M", "--threads", "2"]);
    assert!(
        plan.contains("memory plan for a budget of 8.0 MiB"),
        "{plan}"
    );
    assert!(
        plan.contains("pq_codes") && plan.contains("node_cache"),
        "{plan}"
    );
    let json = ok(&["info", s(&ix), "--plan", "8M", "--json"]);
    let p: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        p["cache_nodes"].as_u64(),
        Some(3000),
        "8 MiB holds every node: {json}"
    );
    let err = fails(&["info", s(&ix), "--plan", "10K"]);
    assert!(err.contains("below this index's minimum"), "{err}");
    let err = fails(&["info", s(&ix), "--plan", "lots"]);
    assert!(err.contains("not a size"), "{err}");
    ok(&["layout", s(&ix), "--shuffle"]);
    // With every node cached the pick is packed (no reads either way, and no PageSearch to
    // pay for); with part of them, the layout the plan names — searched as planned.
    let shuffle_min: serde_json::Value = serde_json::from_str(&ok(&[
        "info",
        s(&ix),
        "--plan",
        "8M",
        "--layout",
        "shuffle",
        "--json",
    ]))
    .unwrap();
    let part = (shuffle_min["minimum"].as_u64().unwrap() + (96 << 10)).to_string();
    for budget in ["8M", part.as_str()] {
        let text = ok(&["info", s(&ix), "--plan", budget, "--layout", "auto"]);
        assert!(text.contains("picked by the planner"), "{text}");
        let p: serde_json::Value = serde_json::from_str(&ok(&[
            "info",
            s(&ix),
            "--plan",
            budget,
            "--layout",
            "auto",
            "--json",
        ]))
        .unwrap();
        let picked = p["layout"].as_str().unwrap().to_string();
        if budget == "8M" {
            assert_eq!(picked, "packed", "{text}");
        }
        let out_auto = ix.with_extension("auto.json");
        ok(&[
            "bench",
            s(&ix),
            "--queries",
            s(&d.queries),
            "--gt",
            s(&d.gt),
            "-L",
            "40",
            "--memory-budget",
            budget,
            "--layout",
            "auto",
            "--json",
            s(&out_auto),
        ]);
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out_auto).unwrap()).unwrap();
        assert_eq!(
            (r["layout"].as_str(), r["page_search"].as_bool()),
            (Some(picked.as_str()), Some(picked == "shuffle")),
            "{r}"
        );
    }
    let err = fails(&[
        "search",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--layout",
        "auto",
    ]);
    assert!(err.contains("memory budget"), "{err}");
    let out_json = ix.with_extension("budget.json");
    ok(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "-k",
        "10",
        "-L",
        "40",
        "--memory-budget",
        "1M",
        "--warm",
        "background",
        "--json",
        s(&out_json),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    let text = r.to_string();
    assert!(text.contains("\"memory_plan\""), "{text}");
    let err = fails(&[
        "bench",
        s(&ix),
        "--queries",
        s(&d.queries),
        "--gt",
        s(&d.gt),
        "-L",
        "40",
        "--memory-budget",
        "10K",
    ]);
    assert!(err.contains("below this index's minimum"), "{err}");
}

//! The CLI as a careless user drives it: out-of-range sizes, PQ wider than the data, NaN in
//! either input file, a failed rebuild over a good index, an interrupted command. Each must be
//! a clear error naming the flag or file — never a panic, an abort or a damaged index.

mod common;

use std::path::Path;
use std::process::Command;

use common::{fails_cleanly as fails, ok, s, write_fbin};

/// `trawl build DATA IX --metric l2 -R 8 -L 16` followed by `extra`.
fn small_build<'a>(data: &'a Path, ix: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "build",
        s(data),
        s(ix),
        "--metric",
        "l2",
        "-R",
        "8",
        "-L",
        "16",
    ];
    a.extend_from_slice(extra);
    a
}

fn index_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".trawl"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn sizes_and_parameters_out_of_range_are_named_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("b.fbin");
    let q = tmp.path().join("q.fbin");
    let ix = tmp.path().join("ix");
    ok(&[
        "gen",
        s(&base),
        "--queries",
        s(&q),
        "-n",
        "1000",
        "--nq",
        "5",
        "--dim",
        "32",
    ]);
    ok(&[
        "build",
        s(&base),
        s(&ix),
        "--metric",
        "l2",
        "-R",
        "12",
        "-L",
        "24",
        "--pq-bytes",
        "8",
    ]);
    let before = index_files(&ix);
    let search = |extra: &[&str]| {
        let mut a = vec!["search", s(&ix), "--queries", s(&q), "-k", "10"];
        a.extend_from_slice(extra);
        fails(&a)
    };
    for (flags, want) in [
        (
            &["-L", "4294967295"][..],
            "list size L 4294967295 is more than",
        ),
        (&["-L", "9223372036854775808"][..], "list size L"),
        (&["--entry-list", "1000000000"][..], "entry list size"),
        (&["-W", "100000"][..], "-W 100000 must be between 1 and"),
        (&["-W", "0"][..], "-W 0"),
        (
            &[
                "--strategy",
                "pipe",
                "--pipe-max-width",
                "9223372036854775807",
            ][..],
            "--pipe-max-width",
        ),
    ] {
        let e = search(flags);
        assert!(e.contains(want), "{flags:?}: {e}");
    }
    let e = fails(&["entry", s(&ix), "--degree", "4294967295"]);
    assert!(e.contains("--degree 4294967295"), "{e}");
    let e = fails(&["entry", s(&ix), "--build-list", "0"]);
    assert!(e.contains("--build-list 0"), "{e}");
    // A rebuild with a bad parameter writes nothing: the old index is intact.
    let build = |extra: &[&str]| {
        let mut a = vec!["build", s(&base), s(&ix), "--metric", "l2"];
        a.extend_from_slice(extra);
        fails(&a)
    };
    for (flags, want) in [
        (&["-R", "0"][..], "-R 0"),
        (&["-L", "0"][..], "-L 0"),
        (&["-L", "4000000000"][..], "-L 4000000000"),
        (&["--alpha", "0.5"][..], "--alpha 0.5"),
        (&["--alpha", "NaN"][..], "--alpha NaN"),
        (&["--memory-budget-gb", "0"][..], "--memory-budget-gb 0"),
        (&["--memory-budget-gb=-1"][..], "--memory-budget-gb -1"),
        (
            &["--pq-bytes", "64"][..],
            "--pq-bytes 64 is more than the dimension",
        ),
        (&["--entry-degree", "0"][..], "--entry-degree 0"),
        (&["--visit-order", "blocks:0"][..], "blocks:0"),
        (&["--visit-order", "sorted"][..], "sorted"),
    ] {
        let e = build(flags);
        assert!(e.contains(want), "{flags:?}: {e}");
        assert_eq!(index_files(&ix), before, "{flags:?} changed the index");
    }
    ok(&["info", s(&ix), "--verify"]);
    // Without --pq-bytes, data of fewer dimensions than the default gets one byte per
    // dimension.
    let small = tmp.path().join("small.fbin");
    ok(&["gen", s(&small), "-n", "300", "--dim", "8"]);
    let ix8 = tmp.path().join("ix8");
    ok(&[
        "build",
        s(&small),
        s(&ix8),
        "--metric",
        "l2",
        "-R",
        "8",
        "-L",
        "16",
    ]);
    let info = ok(&["info", s(&ix8), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["pq_bytes"], 8);
    // A query sample of another dimension is refused before anything is written; one of the
    // data's shape is recorded and shown.
    let wrong = tmp.path().join("wrong.fbin");
    ok(&["gen", s(&wrong), "-n", "10", "--dim", "16"]);
    let before8 = index_files(&ix8);
    let e = fails(&small_build(&small, &ix8, &["--query-sample", s(&wrong)]));
    assert!(
        e.contains("--query-sample") && e.contains("dimension"),
        "{e}"
    );
    assert_eq!(index_files(&ix8), before8);
    let sample = tmp.path().join("sample.fbin");
    ok(&["gen", s(&sample), "-n", "40", "--dim", "8", "--seed", "5"]);
    let ixq = tmp.path().join("ixq");
    let out = ok(&small_build(&small, &ixq, &["--query-sample", s(&sample)]));
    assert!(
        out.contains("query sample: the nearest points of 40 queries"),
        "{out}"
    );
    assert!(ok(&["info", s(&ixq)]).contains("query sample of 40"));
    ok(&["info", s(&ixq), "--verify"]);
    // The build's visit order is recorded and shown.
    assert!(
        ok(&["info", s(&ix8)]).contains("visit order blocks:64"),
        "{}",
        ok(&["info", s(&ix8)])
    );
}

#[test]
fn non_finite_values_name_their_file() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.fbin");
    let bad = tmp.path().join("bad.fbin");
    let mut v: Vec<f32> = (0..200 * 4).map(|i| (i % 17) as f32).collect();
    write_fbin(&good, 200, 4, &v);
    v[37 * 4 + 2] = f32::NAN;
    write_fbin(&bad, 200, 4, &v);
    let ix = tmp.path().join("ix");
    let e = fails(&[
        "build",
        s(&bad),
        s(&ix),
        "--metric",
        "l2",
        "-R",
        "8",
        "-L",
        "16",
    ]);
    assert!(e.contains("bad.fbin") && e.contains("37"), "{e}");
    assert!(!ix.join("packed.trawl").exists());
    ok(&[
        "build",
        s(&good),
        s(&ix),
        "--metric",
        "l2",
        "-R",
        "8",
        "-L",
        "16",
    ]);
    let e = fails(&["search", s(&ix), "--queries", s(&bad), "-k", "5"]);
    assert!(e.contains("bad.fbin") && e.contains("37"), "{e}");
    let e = fails(&[
        "gt",
        s(&good),
        s(&bad),
        "-k",
        "5",
        "--metric",
        "l2",
        "-o",
        s(&tmp.path().join("gt.bin")),
    ]);
    assert!(e.contains("bad.fbin"), "{e}");
}

#[test]
fn an_interrupted_command_cleans_up_after_itself() {
    let tmp = tempfile::tempdir().unwrap();
    // `gen` writing a large file, interrupted with SIGINT: exit 130, no temporary file.
    let out = tmp.path().join("big.fbin");
    let child = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["--quiet", "gen", s(&out), "-n", "20000000", "--dim", "64"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it is writing (its temporary file exists), then interrupt it.
    let tmp_file = tmp.path().join("big.fbin.tmp");
    let t0 = std::time::Instant::now();
    while !tmp_file.exists() && t0.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(tmp_file.exists(), "gen never started writing");
    // SAFETY: kill(2) with our own child's pid and SIGINT; no memory is passed.
    let rc = unsafe { libc_kill(child.id() as i32, 2) };
    assert_eq!(rc, 0, "kill(SIGINT) failed");
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

//! The service over HTTP, the real `trawl serve` process on loopback: every endpoint, every
//! error path (each with its documented status and message, the server serving on after it),
//! the API keys' scopes, the queue's 429, fairness between a huge batch and single queries,
//! timeouts, and the graceful shutdown.

mod server;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use server::{graph_index, npy, npy_f32, values, Resp, Server};
use trawl::kinds::{open_with, Options, Run};

const DIM: usize = 16;
const N: usize = 3000;
const READ: &str = "read:rrrrrrrrrrrrrrrrrrrr";
const WRITE: &str = "write:wwwwwwwwwwwwwwwwwwww";
const RK: (&str, &str) = ("x-api-key", "rrrrrrrrrrrrrrrrrrrr");
const WK: (&str, &str) = ("authorization", "Bearer wwwwwwwwwwwwwwwwwwww");

fn keys(dir: &Path) -> String {
    let p = dir.join("keys.txt");
    std::fs::write(&p, format!("# test keys\n{READ}\n{WRITE}\n")).unwrap();
    p.to_str().unwrap().to_string()
}

fn ids_of(v: &Value) -> Vec<Vec<u64>> {
    v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect()
        })
        .collect()
}

/// The in-process results of `queries` (the index opened read-only beside the server).
fn in_process(dir: &Path, queries: &[f32], k: usize, l: usize) -> Vec<Vec<u64>> {
    let o = Options {
        l: Some(l),
        ..Options::default()
    };
    let (ix, _) = open_with(dir, &o, &trawl::progress::Control::silent()).unwrap();
    let m = trawl::data::Matrix::from_vec(queries.to_vec(), DIM).unwrap();
    let p = o.params(&ix, k).unwrap();
    let h = ix
        .search(
            (&m).into(),
            &p,
            Run::default(),
            &trawl::filter::QueryFilter::none(),
        )
        .unwrap();
    (0..h.nq()).map(|q| h.ids_of(q).to_vec()).collect()
}

fn ok(r: &Resp) -> Value {
    assert!(
        r.status < 300,
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

#[test]
fn every_endpoint_answers_as_documented() {
    let t = tempfile::tempdir().unwrap();
    graph_index(t.path(), "ix", N, DIM, true);
    let dir = t.path().join("ix");
    let k = keys(t.path());
    let s = Server::start(
        &["ix=".to_string() + dir.to_str().unwrap()]
            .iter()
            .map(String::as_str)
            .chain(["--api-keys", &k])
            .collect::<Vec<_>>(),
        &t.path().join("log"),
    );
    s.wait_ready();
    assert_eq!(ok(&s.get("/healthz", &[]))["status"], "ok");
    let ready = ok(&s.get("/readyz", &[]));
    assert_eq!(ready["indexes"]["ix"]["state"], "ready");
    // The document served is the one in the repository, and it describes every route.
    let doc = s.get("/openapi.json", &[]);
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/openapi.json"
    ))
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&doc.body), file);
    let doc: Value = serde_json::from_str(&file).unwrap();
    for (m, p, scope) in trawl_serve::routes::ROUTES {
        let op = &doc["paths"][p][m.to_ascii_lowercase()];
        assert!(op.is_object(), "{m} {p} is not in docs/openapi.json");
        assert_eq!(
            op.get("security").is_some(),
            scope.is_none(),
            "{m} {p}: public routes say security: []"
        );
    }
    assert_eq!(doc["paths"].as_object().unwrap().len(), 14);

    let list = ok(&s.get("/indexes", &[RK]));
    assert_eq!(list["indexes"][0]["name"], "ix");
    assert_eq!(list["indexes"][0]["n"], N);
    assert_eq!(list["indexes"][0]["writable"], true);
    let info = ok(&s.get("/indexes/ix", &[RK]));
    assert_eq!(info["info"]["dim"], DIM);
    assert_eq!(info["merge"]["state"], "idle");

    // Search: JSON batch, one vector, .npy and raw bodies, binary answers — all equal to the
    // in-process search.
    let queries: Vec<f32> = values(99, 5 * DIM);
    let rows: Vec<Vec<f32>> = queries.chunks(DIM).map(<[f32]>::to_vec).collect();
    let want = in_process(&dir, &queries, 5, 40);
    let body = json!({"vectors": rows, "k": 5, "params": {"L": 40}});
    let got = ok(&s.post("/indexes/ix/search", &[RK], &body));
    assert_eq!(ids_of(&got), want);
    assert_eq!(got["stats"]["queries"], 5);
    assert!(got["stats"]["pages_read"].as_u64().unwrap() > 0);
    let one = ok(&s.post(
        "/indexes/ix/search",
        &[RK],
        &json!({"vector": rows[0], "k": 5, "params": {"L": 40}}),
    ));
    let one_ids: Vec<u64> = one["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(one_ids, want[0]);
    let npy_body = npy_f32(&queries, &format!("(5, {DIM})"));
    let r = s.request(
        "POST",
        "/indexes/ix/search?k=5&L=40",
        &[RK, ("content-type", "application/x-npy")],
        &npy_body,
    );
    assert_eq!(ids_of(&ok(&r)), want);
    let raw: Vec<u8> = queries.iter().flat_map(|x| x.to_le_bytes()).collect();
    let shape = format!("5,{DIM}");
    let r = s.request(
        "POST",
        "/indexes/ix/search?k=5&L=40",
        &[
            RK,
            ("content-type", "application/octet-stream"),
            ("x-trawl-dtype", "float32"),
            ("x-trawl-shape", &shape),
            ("accept", "application/octet-stream"),
        ],
        &raw,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-trawl-shape"), Some("5,5"));
    let ids: Vec<u64> = r.body[..5 * 5 * 8]
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ids.chunks(5).map(<[u64]>::to_vec).collect::<Vec<_>>(), want);
    let d0 = f32::from_le_bytes(r.body[5 * 5 * 8..5 * 5 * 8 + 4].try_into().unwrap());
    assert_eq!(
        Some(d0 as f64),
        got["distances"][0][0].as_f64().map(|x| x as f32 as f64)
    );

    // Filters: text, JSON form, one per query; every result matches.
    let f = ok(&s.post(
        "/indexes/ix/search",
        &[RK],
        &json!({"vectors": rows, "k": 5, "filter": "label = \"a\""}),
    ));
    assert!(ids_of(&f).iter().flatten().all(|id| id % 3 == 0));
    let f = ok(&s.post(
        "/indexes/ix/search",
        &[RK],
        &json!({"vectors": rows[..2], "k": 5, "filter": [{"label": "even"}, "label = \"odd\""]}),
    ));
    let f = ids_of(&f);
    assert!(f[0].iter().all(|id| id % 2 == 0) && f[1].iter().all(|id| id % 2 == 1));
    let r = s.request(
        "POST",
        "/indexes/ix/search?k=3&filter=label%20%3D%20%22odd%22",
        &[RK, ("content-type", "application/x-npy")],
        &npy_f32(&queries[..DIM], &format!("({DIM},)")),
    );
    let r = ok(&r);
    assert!(r["ids"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x.as_u64().unwrap() % 2 == 1));

    // Writes: insert (JSON, assigned ids; binary, given ids), found at distance 0; upsert;
    // delete; contains.
    let new: Vec<f32> = values(5, 2 * DIM);
    let ins = ok(&s.post(
        "/indexes/ix/insert",
        &[WK],
        &json!({"vectors": [new[..DIM], new[DIM..]], "labels": [["odd"], ["even", "a"]]}),
    ));
    let new_ids: Vec<u64> = ins["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(new_ids, vec![N as u64, N as u64 + 1]);
    let hit = ok(&s.post(
        "/indexes/ix/search",
        &[RK],
        &json!({"vector": new[DIM..], "k": 1, "filter": "label = \"a\""}),
    ));
    assert_eq!(hit["ids"][0], N + 1);
    assert_eq!(hit["distances"][0], 0.0);
    let more = values(6, DIM);
    let r = s.request(
        "POST",
        "/indexes/ix/insert?ids=77777",
        &[WK, ("content-type", "application/x-npy")],
        &npy_f32(&more, &format!("(1, {DIM})")),
    );
    assert_eq!(ok(&r)["ids"], json!([77777]));
    let up = ok(&s.post(
        "/indexes/ix/upsert",
        &[WK],
        &json!({"ids": [0], "vectors": [more]}),
    ));
    assert_eq!(up["ids"], json!([0]));
    let hit = ok(&s.post(
        "/indexes/ix/search",
        &[RK],
        &json!({"vector": more, "k": 2}),
    ));
    let mut two: Vec<u64> = hit["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    two.sort_unstable();
    assert_eq!(two, vec![0, 77777]);
    assert_eq!(
        ok(&s.post("/indexes/ix/delete", &[WK], &json!({"ids": [77777, 5]})))["deleted"],
        2
    );
    let c = ok(&s.post(
        "/indexes/ix/contains",
        &[RK],
        &json!({"ids": [77777, 5, 6, N, 999_999]}),
    ));
    assert_eq!(c["present"], json!([false, false, true, true, false]));
    assert_eq!(
        ok(&s.post("/indexes/ix/flush", &[WK], &json!({})))["flushed"],
        true
    );

    // Merge in the background, searches going on; then its report.
    let m = s.post("/indexes/ix/merge", &[WK], &json!({"threads": 1}));
    assert_eq!(m.status, 202, "{}", String::from_utf8_lossy(&m.body));
    let t0 = Instant::now();
    let status = loop {
        ok(&s.post(
            "/indexes/ix/search",
            &[RK],
            &json!({"vector": more, "k": 1}),
        ));
        let st = ok(&s.get("/indexes/ix/merge", &[RK]));
        if st["merge"]["state"] != "running" {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status["merge"]["state"], "done", "{status}");
    // Inserted: N, N + 1 and the new vector of 0 (77777 came and went before the merge);
    // deleted from the disk files: the old vector of 0, and 5.
    assert_eq!(status["merge"]["report"]["inserted"], 3, "{status}");
    assert_eq!(status["merge"]["report"]["deleted"], 2, "{status}");
    let c = ok(&s.post(
        "/indexes/ix/contains",
        &[RK],
        &json!({"ids": [0, 5, N + 1]}),
    ));
    assert_eq!(c["present"], json!([true, false, true]));
    let v = ok(&s.request("POST", "/indexes/ix/verify", &[WK], b""));
    assert!(!v["files"].as_array().unwrap().is_empty(), "{v}");

    // Metrics: requests by endpoint and code, the searches' I/O, the log, the merge.
    let m = s.get("/metrics", &[RK]);
    assert_eq!(m.status, 200);
    let text = String::from_utf8_lossy(&m.body);
    for needle in [
        "trawl_requests_total{code=\"200\",endpoint=\"/indexes/{name}/search\"}",
        "trawl_request_duration_seconds_bucket{endpoint=\"/indexes/{name}/search\"",
        "trawl_pages_read_total{index=\"ix\"}",
        "trawl_search_queue_requests 0",
        "trawl_in_flight_requests 1",
        "trawl_merges_total{index=\"ix\",result=\"ok\"} 1",
        "trawl_wal_bytes{index=\"ix\"}",
        "trawl_written_vectors_total{index=\"ix\",op=\"insert\"} 3",
        "trawl_cache_hit_ratio{index=\"ix\"}",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from /metrics:\n{text}"
        );
    }
    assert!(r_header_id(&s));
    assert!(s.terminate().success());
}

/// Every answer carries a request id: the client's when it sent one.
fn r_header_id(s: &Server) -> bool {
    let r = s.get("/healthz", &[("x-request-id", "abc-123")]);
    let fresh = s.get("/healthz", &[]);
    r.header("x-request-id") == Some("abc-123")
        && fresh.header("x-request-id").is_some_and(|v| !v.is_empty())
}

#[test]
fn every_error_path_gives_its_status_and_the_server_keeps_serving() {
    let t = tempfile::tempdir().unwrap();
    graph_index(t.path(), "ix", 500, DIM, false);
    let dir = t.path().join("ix");
    let k = keys(t.path());
    let s = Server::start(
        &[
            dir.to_str().unwrap(),
            "--api-keys",
            &k,
            "--max-body-mb",
            "0.05",
            "--max-vectors",
            "50",
            "--max-k",
            "100",
        ],
        &t.path().join("log"),
    );
    s.wait_ready();
    let q = values(1, DIM);
    let good = json!({"vector": q, "k": 3});
    let js = ("content-type", "application/json");
    let npy_ct = ("content-type", "application/x-npy");
    let mut nan = q.clone();
    nan[3] = f32::NAN;
    let big = vec![0u8; 60_000];
    // (method, path, headers, body, status, what the message says)
    type Case<'a> = (
        &'a str,
        &'a str,
        Vec<(&'a str, &'a str)>,
        Vec<u8>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            b"{\"vector\": [1, 2".to_vec(),
            400,
            "malformed JSON",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            b"[1, 2]".to_vec(),
            400,
            "must be a JSON object",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": [1.0, 2.0]}).to_string().into_bytes(),
            400,
            "dimension 2; the index has 16",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, npy_ct],
            npy("|u1", &format!("(1, {DIM})"), &[0; DIM]),
            400,
            "the vectors are u8, the index holds f32",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, npy_ct],
            npy_f32(&nan, &format!("({DIM},)")),
            400,
            "query 0 holds a non-finite value",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "k": 101}).to_string().into_bytes(),
            400,
            "k = 101 must be between 1 and 100",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "k": 0}).to_string().into_bytes(),
            400,
            "k = 0",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            big.clone(),
            413,
            "larger than the limit",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vectors": vec![q.clone(); 51]})
                .to_string()
                .into_bytes(),
            413,
            "51 vectors in one request; the limit is 50",
        ),
        (
            "POST",
            "/indexes/nope/search",
            vec![RK, js],
            good.to_string().into_bytes(),
            404,
            "no index named \"nope\"",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "filter": "label = "})
                .to_string()
                .into_bytes(),
            400,
            "filter:",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "filter": "label = \"a\""})
                .to_string()
                .into_bytes(),
            400,
            "attributes",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "params": {"beam": 4}})
                .to_string()
                .into_bytes(),
            400,
            "unknown search parameter \"beam\"",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "params": {"L": -1}})
                .to_string()
                .into_bytes(),
            400,
            "L = -1",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, js],
            json!({"vector": q, "kk": 3}).to_string().into_bytes(),
            400,
            "unknown field \"kk\"",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, ("content-type", "text/plain")],
            b"hi".to_vec(),
            415,
            "Content-Type",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![RK, ("content-type", "application/octet-stream")],
            vec![0; 64],
            400,
            "X-Trawl-Dtype",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![js],
            good.to_string().into_bytes(),
            401,
            "an API key is required",
        ),
        (
            "POST",
            "/indexes/ix/search",
            vec![("x-api-key", "not-a-key-at-all-really"), js],
            good.to_string().into_bytes(),
            401,
            "not valid",
        ),
        (
            "POST",
            "/indexes/ix/insert",
            vec![RK, js],
            json!({"vector": q}).to_string().into_bytes(),
            403,
            "this request needs write",
        ),
        (
            "POST",
            "/indexes/ix/delete",
            vec![WK, js],
            json!({"ids": [100000]}).to_string().into_bytes(),
            400,
            "not in the index; nothing was deleted",
        ),
        (
            "POST",
            "/indexes/ix/insert",
            vec![WK, js],
            json!({"vector": q, "ids": [1]}).to_string().into_bytes(),
            400,
            "1",
        ),
        (
            "POST",
            "/indexes/ix/upsert",
            vec![WK, js],
            json!({"vector": q}).to_string().into_bytes(),
            400,
            "upsert needs \"ids\"",
        ),
        (
            "GET",
            "/indexes/ix/search",
            vec![RK],
            vec![],
            405,
            "GET is not allowed",
        ),
        (
            "GET",
            "/nothing",
            vec![RK],
            vec![],
            404,
            "no endpoint GET /nothing",
        ),
        (
            "GET",
            "/metrics",
            vec![],
            vec![],
            401,
            "an API key is required",
        ),
    ];
    for (method, path, headers, body, status, msg) in &cases {
        let r = s.request(method, path, headers, body);
        assert_eq!(
            r.status,
            *status,
            "{method} {path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        if *status != 405 && *status != 404 || path.contains("nope") || path.contains("nothing") {
            assert!(
                r.message().contains(msg),
                "{method} {path}: {:?} does not say {msg:?}",
                r.message()
            );
        }
        // The server serves on.
        let after = s.post("/indexes/ix/search", &[RK], &good);
        assert_eq!(after.status, 200, "after {method} {path}");
    }
    // The keys' scopes: a write key reads too.
    assert_eq!(s.post("/indexes/ix/search", &[WK], &good).status, 200);
    assert!(s.terminate().success());
}

#[test]
fn a_read_only_or_ivf_index_refuses_writes_and_a_public_address_needs_keys() {
    let t = tempfile::tempdir().unwrap();
    graph_index(t.path(), "ix", 400, DIM, false);
    let dir = t.path().join("ix");
    // Every kind served side by side by name: graph (read-only), IVF, flat.
    let base = t.path().join("ix.fbin");
    for (kind, name) in [("ivf", "iv"), ("flat", "fl")] {
        let d = t.path().join(name);
        server::trawl_ok(&[
            "build",
            base.to_str().unwrap(),
            d.to_str().unwrap(),
            "--metric",
            "l2",
            "--kind",
            kind,
            "--pq-bytes",
            "8",
        ]);
    }
    let args = [
        format!("g={}", dir.display()),
        format!("iv={}", t.path().join("iv").display()),
        format!("fl={}", t.path().join("fl").display()),
    ];
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.push("--read-only");
    let s = Server::start(&a, &t.path().join("log"));
    s.wait_ready();
    let q = values(2, DIM);
    let exact = ok(&s.post("/indexes/fl/search", &[], &json!({"vector": q, "k": 5})));
    for (name, l) in [("g", 64), ("iv", 16)] {
        let r = ok(&s.post(
            &format!("/indexes/{name}/search"),
            &[],
            &json!({"vector": q, "k": 5, "params": {"L": l}}),
        ));
        assert_eq!(r["ids"][0], exact["ids"][0], "{name}: {r}");
    }
    let list = ok(&s.get("/indexes", &[]));
    let kinds: Vec<&str> = list["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["flat", "graph", "ivf"]);
    let r = s.post("/indexes/g/insert", &[], &json!({"vector": q}));
    assert_eq!(r.status, 400);
    assert!(r.message().contains("read-only"), "{}", r.message());
    assert_eq!(s.post("/indexes/g/merge", &[], &json!({})).status, 400);
    let r = s.post("/indexes/iv/delete", &[], &json!({"ids": [1]}));
    assert_eq!(r.status, 400);
    assert!(
        r.message()
            .contains("is a IVF index: only graph indexes take"),
        "{}",
        r.message()
    );
    assert!(s.terminate().success());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["serve", dir.to_str().unwrap(), "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to serve 0.0.0.0:0 without API keys"),
        "{err}"
    );
    let s = Server::start(
        &[dir.to_str().unwrap(), "--listen", "0.0.0.0:0", "--insecure"],
        &t.path().join("log2"),
    );
    s.wait_ready();
    assert!(s.terminate().success());
    // Keys from the environment.
    let s = Server::start_env(
        &[dir.to_str().unwrap()],
        &t.path().join("log3"),
        &[("TRAWL_API_KEYS", "read:rrrrrrrrrrrrrrrrrrrr")],
    );
    s.wait_ready();
    assert_eq!(s.get("/indexes", &[]).status, 401);
    assert_eq!(s.get("/indexes", &[RK]).status, 200);
    assert!(s.terminate().success());
}

/// A server whose every read takes `lat_us` (the simulated device), with one search thread.
fn slow_server(t: &Path, extra: &[&str], lat_us: u32) -> Server {
    graph_index(t, "ix", 2000, DIM, false);
    let dir = t.join("ix");
    let engine = format!("sim:{lat_us}");
    let mut args = vec![
        dir.to_str().unwrap(),
        "--engine",
        &engine,
        "--search-threads",
        "1",
    ];
    args.extend_from_slice(extra);
    let s = Server::start(&args, &t.join("log"));
    s.wait_ready();
    s
}

#[test]
fn a_full_queue_answers_429_with_retry_after_and_nothing_else() {
    let t = tempfile::tempdir().unwrap();
    let s = slow_server(t.path(), &["--queue", "2"], 2000);
    let addr = s.addr.clone();
    let body = json!({"vectors": vec![values(3, DIM); 4], "k": 5}).to_string();
    let answers: Vec<Resp> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..12)
            .map(|_| {
                let (addr, body) = (&addr, &body);
                sc.spawn(move || {
                    server::request(
                        addr,
                        "POST",
                        "/indexes/ix/search",
                        &[("content-type", "application/json")],
                        body.as_bytes(),
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = answers.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&Resp> = answers.iter().filter(|r| r.status == 429).collect();
    assert_eq!(
        ok + refused.len(),
        12,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(
        ok >= 3 && !refused.is_empty(),
        "{ok} answered, {} refused",
        refused.len()
    );
    for r in refused {
        assert!(r
            .header("retry-after")
            .is_some_and(|v| v.parse::<u64>().is_ok_and(|s| s >= 1)));
        assert!(r.message().contains("queue is full"), "{}", r.message());
    }
    assert!(s.terminate().success());
}

#[test]
fn a_huge_batch_does_not_starve_single_queries_and_timeouts_answer_408() {
    let t = tempfile::tempdir().unwrap();
    let s = slow_server(t.path(), &["--chunk", "4", "--request-timeout", "20"], 1000);
    let addr = s.addr.clone();
    let batch = json!({"vectors": vec![values(3, DIM); 200], "k": 5}).to_string();
    let one = json!({"vector": values(4, DIM), "k": 5}).to_string();
    let (batch_done, one_done) = std::thread::scope(|sc| {
        let b = sc.spawn(|| {
            let r = server::request(
                &addr,
                "POST",
                "/indexes/ix/search",
                &[("content-type", "application/json")],
                batch.as_bytes(),
            );
            assert_eq!(r.status, 200);
            Instant::now()
        });
        std::thread::sleep(Duration::from_millis(100));
        let o = sc.spawn(|| {
            let r = server::request(
                &addr,
                "POST",
                "/indexes/ix/search",
                &[("content-type", "application/json")],
                one.as_bytes(),
            );
            assert_eq!(r.status, 200);
            Instant::now()
        });
        (b.join().unwrap(), o.join().unwrap())
    });
    assert!(
        one_done < batch_done,
        "the single query waited for the whole batch"
    );
    assert!(s.terminate().success());
    let t2 = tempfile::tempdir().unwrap();
    let s = slow_server(t2.path(), &["--request-timeout", "0.2"], 20_000);
    let r = s.post(
        "/indexes/ix/search",
        &[],
        &json!({"vectors": vec![values(3, DIM); 20], "k": 5}),
    );
    assert_eq!(r.status, 408, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.message().contains("--request-timeout"));
    assert!(s.terminate().success());
}

#[test]
fn sigterm_finishes_requests_in_flight_syncs_the_log_and_exits_zero() {
    let t = tempfile::tempdir().unwrap();
    let s = slow_server(t.path(), &[], 2000);
    let ins = s.post(
        "/indexes/ix/insert",
        &[],
        &json!({"vector": values(8, DIM), "ids": [424242]}),
    );
    assert_eq!(ins.status, 200);
    let addr = s.addr.clone();
    let body = json!({"vectors": vec![values(3, DIM); 30], "k": 5}).to_string();
    let h = std::thread::spawn(move || {
        server::request(
            &addr,
            "POST",
            "/indexes/ix/search",
            &[("content-type", "application/json")],
            body.as_bytes(),
        )
    });
    std::thread::sleep(Duration::from_millis(150));
    let log = s.log.clone();
    let status = s.terminate();
    let r = h.join().unwrap();
    assert_eq!(r.status, 200, "the request in flight was not finished");
    assert_eq!(ids_of(&r.json()).len(), 30);
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(log).unwrap();
    assert!(
        text.contains("log synced") && text.contains("stopped"),
        "{text}"
    );
    // The insert is there after a restart.
    let s = Server::start(
        &[t.path().join("ix").to_str().unwrap()],
        &t.path().join("log2"),
    );
    s.wait_ready();
    let c = s.post("/indexes/ix/contains", &[], &json!({"ids": [424242]}));
    assert_eq!(c.json()["present"], json!([true]));
    assert!(s.terminate().success());
}

#[test]
fn trawl_search_remote_answers_as_the_local_search_over_http_and_https() {
    let t = tempfile::tempdir().unwrap();
    graph_index(t.path(), "ix", 1500, DIM, false);
    let dir = t.path().join("ix");
    let q = t.path().join("q.fbin");
    server::write_fbin(&q, DIM, &values(31, 20 * DIM));
    let local = t.path().join("local.bin");
    let p = |x: &Path| x.to_str().unwrap().to_string();
    server::trawl_ok(&[
        "search",
        &p(&dir),
        "--queries",
        &p(&q),
        "-k",
        "5",
        "-L",
        "40",
        "--strategy",
        "pipe",
        "-o",
        &p(&local),
    ]);
    let tls = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/tests/data/tls");
    let k = keys(t.path());
    for secure in [false, true] {
        let mut args = vec![p(&dir), "--api-keys".into(), k.clone()];
        if secure {
            args.extend([
                "--tls-cert".into(),
                format!("{tls}/cert.pem"),
                "--tls-key".into(),
                format!("{tls}/key.pem"),
            ]);
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let s = Server::start(&a, &t.path().join("log"));
        s.wait_ready_with(secure);
        let url = format!("{}://{}", if secure { "https" } else { "http" }, s.addr);
        let remote = t.path().join("remote.bin");
        let mut cmd = vec![
            "search",
            "ix",
            "--remote",
            &url,
            "--api-key",
            "rrrrrrrrrrrrrrrrrrrr",
            "--queries",
        ];
        let (qs, rs) = (p(&q), p(&remote));
        let ca = format!("{tls}/ca.pem");
        cmd.extend([
            qs.as_str(),
            "-k",
            "5",
            "-L",
            "40",
            "--strategy",
            "pipe",
            "-o",
            rs.as_str(),
        ]);
        if secure {
            cmd.extend(["--ca-cert", ca.as_str()]);
        }
        let out = server::trawl_ok(&cmd);
        assert!(out.contains(&format!("served by {url}")), "{out}");
        assert_eq!(
            std::fs::read(&remote).unwrap(),
            std::fs::read(&local).unwrap(),
            "{url}"
        );
        // A wrong key is the server's 401, as an error.
        let bad = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args([
                "search",
                "ix",
                "--remote",
                &url,
                "--api-key",
                "nonono-nonono-nonono",
                "--queries",
                &qs,
            ])
            .args(if secure {
                vec!["--ca-cert", ca.as_str()]
            } else {
                vec![]
            })
            .output()
            .unwrap();
        assert!(!bad.status.success());
        assert!(
            String::from_utf8_lossy(&bad.stderr).contains("HTTP 401: the API key is not valid"),
            "{}",
            String::from_utf8_lossy(&bad.stderr)
        );
        assert!(s.terminate().success());
    }
}

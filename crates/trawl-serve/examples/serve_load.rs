//! The service's load benchmark (run by `bench/serve.py`): in-process searches and the same
//! searches through a running `trawl serve`, alternated, then an overload of many clients.
//!
//! ```text
//! serve_load URL NAME INDEX_DIR QUERIES.fbin OUT.json [key=value ...]
//!   k=10 L=64 threads=2 reps=3 batch=500 connections=2 singles=300
//!   clients=64 overload_secs=10 backoff_ms=10 engine=auto
//! ```
//!
//! - **batch**: every query in-process on `threads` threads, against the binary endpoint
//!   (`.npy` bodies of `batch` queries on `connections` keep-alive connections, raw answers):
//!   QPS each, `reps` pairs alternated.
//! - **single**: `singles` queries one at a time on one thread in-process, and one at a time
//!   on one keep-alive connection: latency percentiles each, alternated.
//! - **overload**, twice: `clients` keep-alive clients sending single queries for
//!   `overload_secs`; after a `429` a client waits the server's `Retry-After` (first run) or
//!   `backoff_ms` (second run: an impatient client), jittered ±50%. Counts of every status,
//!   timeouts and connection errors, and the latency percentiles of the admitted (`200`)
//!   requests.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use trawl::data::{AnyMatrix, Matrix};
use trawl::filter::QueryFilter;
use trawl::kinds::{open_with, AnyIndex, Options, Run};
use trawl::progress::Control;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    host: String,
    /// The last answer's `Server-Timing` (queue, search) in ms.
    timing: (f64, f64),
}

impl Conn {
    fn open(host: &str) -> Res<Self> {
        let s = TcpStream::connect(host)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            r: BufReader::new(s.try_clone()?),
            w: s,
            host: host.to_string(),
            timing: (0.0, 0.0),
        })
    }

    /// POSTs `body`; returns the status, the `Retry-After` header (seconds, 0 without) and
    /// the body.
    fn post(&mut self, path: &str, ctype: &str, body: &[u8]) -> Res<(u16, f64, Vec<u8>)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {ctype}\r\nAccept: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        self.w.write_all(head.as_bytes())?;
        self.w.write_all(body)?;
        let mut line = String::new();
        self.r.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .ok_or("no status line")?
            .parse()?;
        let (mut len, mut retry) = (0usize, 0.0f64);
        loop {
            line.clear();
            self.r.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => len = v.trim().parse()?,
                    "retry-after" => retry = v.trim().parse().unwrap_or(0.0),
                    "server-timing" => self.timing = server_timing(v),
                    _ => {}
                }
            }
        }
        let mut buf = vec![0u8; len];
        self.r.read_exact(&mut buf)?;
        Ok((status, retry, buf))
    }
}

/// `queue;dur=X, search;dur=Y` → `(X, Y)`.
fn server_timing(v: &str) -> (f64, f64) {
    let mut t = (0.0, 0.0);
    for part in v.split(',') {
        let (name, dur) = part.trim().split_once(";dur=").unwrap_or(("", "0"));
        let d = dur.parse().unwrap_or(0.0);
        match name {
            "queue" => t.0 = d,
            "search" => t.1 = d,
            _ => {}
        }
    }
    t
}

fn npy(rows: &[f32], n: usize, dim: usize) -> Vec<u8> {
    let payload: Vec<u8> = rows.iter().flat_map(|x| x.to_le_bytes()).collect();
    trawl_serve::body::encode_npy("<f4", &format!("({n}, {dim})"), &payload)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    pct(&mut v, 0.5)
}

struct Cfg {
    host: String,
    name: String,
    k: usize,
    l: usize,
    threads: usize,
    reps: usize,
    batch: usize,
    connections: usize,
    singles: usize,
    clients: usize,
    overload_secs: f64,
    backoff_ms: f64,
    /// Microseconds the in-process single queries pause between queries (as a served query
    /// pauses for the round trip), 0: none.
    gap_us: f64,
}

impl Cfg {
    fn path(&self) -> String {
        format!("/indexes/{}/search?k={}&L={}", self.name, self.k, self.l)
    }
}

fn in_process_batch(ix: &AnyIndex, o: &Options, q: &Matrix<f32>, c: &Cfg) -> Res<f64> {
    let p = o.params(ix, c.k)?;
    let run = Run {
        threads: c.threads,
        interleave: 1,
    };
    let t = Instant::now();
    ix.search(q.into(), &p, run, &QueryFilter::none())?;
    Ok(q.n() as f64 / t.elapsed().as_secs_f64())
}

fn remote_batch(q: &Matrix<f32>, c: &Cfg) -> Res<f64> {
    let dim = q.dim();
    let chunks: Vec<(usize, usize)> = (0..q.n())
        .step_by(c.batch)
        .map(|a| (a, (a + c.batch).min(q.n())))
        .collect();
    let bodies: Vec<Vec<u8>> = chunks
        .iter()
        .map(|&(a, b)| npy(&q.as_slice()[a * dim..b * dim], b - a, dim))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|s| -> Res<()> {
        let hs: Vec<_> = (0..c.connections)
            .map(|_| {
                s.spawn(|| -> Result<(), String> {
                    let mut conn = Conn::open(&c.host).map_err(|e| e.to_string())?;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(b) = bodies.get(i) else {
                            return Ok(());
                        };
                        let (st, _, _) = conn
                            .post(&c.path(), "application/x-npy", b)
                            .map_err(|e| e.to_string())?;
                        if st != 200 {
                            return Err(format!("batch answered {st}"));
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| "a client thread panicked")??;
        }
        Ok(())
    })?;
    Ok(q.n() as f64 / t.elapsed().as_secs_f64())
}

fn in_process_single(ix: &AnyIndex, o: &Options, q: &Matrix<f32>, c: &Cfg) -> Res<Vec<f64>> {
    let p = o.params(ix, c.k)?;
    let dim = q.dim();
    let mut lat = Vec::with_capacity(c.singles);
    for i in 0..c.singles {
        let row = &q.as_slice()[(i % q.n()) * dim..(i % q.n() + 1) * dim];
        let one = trawl::data::Queries::new(row, dim).ok_or("a row")?;
        if c.gap_us > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(c.gap_us / 1e6));
        }
        let t = Instant::now();
        ix.search(one, &p, Run::default(), &QueryFilter::none())?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(lat)
}

/// Latencies (ms) and the server's own queue and search times of each.
fn remote_single(q: &Matrix<f32>, c: &Cfg) -> Res<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let dim = q.dim();
    let mut conn = Conn::open(&c.host)?;
    let mut lat = Vec::with_capacity(c.singles);
    let (mut queue, mut search) = (Vec::new(), Vec::new());
    for i in 0..c.singles {
        let row = &q.as_slice()[(i % q.n()) * dim..(i % q.n() + 1) * dim];
        let body = npy(row, 1, dim);
        let t = Instant::now();
        let (st, _, _) = conn.post(&c.path(), "application/x-npy", &body)?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        queue.push(conn.timing.0);
        search.push(conn.timing.1);
        if st != 200 {
            return Err(format!("single answered {st}").into());
        }
    }
    Ok((lat, queue, search))
}

/// The overload: `(status or error → count, admitted latencies in ms, requests per second)`.
/// After a 429 a client waits the `Retry-After` the server gave (`honor`), or `backoff_ms`.
fn overload(q: &Matrix<f32>, c: &Cfg, honor: bool) -> (BTreeMap<String, u64>, Vec<f64>, f64) {
    let dim = q.dim();
    let end = Instant::now() + Duration::from_secs_f64(c.overload_secs);
    let results: Vec<(BTreeMap<String, u64>, Vec<f64>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..c.clients)
            .map(|t| {
                s.spawn(move || {
                    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
                    let mut lat = Vec::new();
                    let mut conn: Option<Conn> = None;
                    let mut rng = 0x9E37_79B9u64.wrapping_mul(t as u64 + 1) | 1;
                    let mut i = t * 7919;
                    while Instant::now() < end {
                        let row = &q.as_slice()[(i % q.n()) * dim..(i % q.n() + 1) * dim];
                        i += 1;
                        let body = npy(row, 1, dim);
                        if conn.is_none() {
                            conn = Conn::open(&c.host).ok();
                        }
                        let Some(cn) = conn.as_mut() else {
                            *counts.entry("connect_error".into()).or_default() += 1;
                            continue;
                        };
                        let t0 = Instant::now();
                        match cn.post(&c.path(), "application/x-npy", &body) {
                            Ok((st, retry, _)) => {
                                *counts.entry(st.to_string()).or_default() += 1;
                                if st == 200 {
                                    lat.push(t0.elapsed().as_secs_f64() * 1e3);
                                } else if st == 429 {
                                    rng ^= rng << 13;
                                    rng ^= rng >> 7;
                                    rng ^= rng << 17;
                                    let jitter = 0.5 + (rng % 1000) as f64 / 1000.0;
                                    let secs = if honor { retry } else { c.backoff_ms / 1e3 };
                                    let left = end.saturating_duration_since(Instant::now());
                                    std::thread::sleep(
                                        Duration::from_secs_f64(secs * jitter).min(left),
                                    );
                                }
                            }
                            Err(e) => {
                                let kind = if e.to_string().contains("timed out")
                                    || e.to_string().contains("would block")
                                {
                                    "timeout"
                                } else {
                                    "io_error"
                                };
                                *counts.entry(kind.into()).or_default() += 1;
                                conn = None;
                            }
                        }
                    }
                    (counts, lat)
                })
            })
            .collect();
        hs.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let mut counts = BTreeMap::new();
    let mut lat = Vec::new();
    for (c, l) in results {
        for (k, v) in c {
            *counts.entry(k).or_default() += v;
        }
        lat.extend(l);
    }
    let total: u64 = counts.values().sum();
    (counts, lat, total as f64 / c.overload_secs)
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        return Err(
            "usage: serve_load URL NAME INDEX_DIR QUERIES.fbin OUT.json [key=value ...]".into(),
        );
    }
    let kv: BTreeMap<&str, &str> = args[5..].iter().filter_map(|a| a.split_once('=')).collect();
    let num = |k: &str, d: f64| kv.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    let c = Cfg {
        host: args[0]
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string(),
        name: args[1].clone(),
        k: num("k", 10.0) as usize,
        l: num("L", 64.0) as usize,
        threads: num("threads", 2.0) as usize,
        reps: num("reps", 3.0) as usize,
        batch: num("batch", 500.0) as usize,
        connections: num("connections", 2.0) as usize,
        singles: num("singles", 300.0) as usize,
        clients: num("clients", 64.0) as usize,
        overload_secs: num("overload_secs", 10.0),
        backoff_ms: num("backoff_ms", 10.0),
        gap_us: num("gap_us", 0.0),
    };
    let q = match trawl::data::read::read_matrix_any(Path::new(&args[3]))? {
        AnyMatrix::F32(m) => m,
        _ => return Err("the queries must be float32".into()),
    };
    let mut o = Options {
        l: Some(c.l),
        ..Options::default()
    };
    if let Some(e) = kv.get("engine") {
        o.engine = e.parse()?;
    }
    let (ix, _) = open_with(Path::new(&args[2]), &o, &Control::silent())?;
    let (mut bi, mut br, mut si, mut sr) = (vec![], vec![], vec![], vec![]);
    let (mut lat_in, mut lat_remote) = (vec![], vec![]);
    let (mut sq, mut ss) = (vec![], vec![]);
    for rep in 0..c.reps {
        eprintln!("rep {rep}: batch");
        bi.push(in_process_batch(&ix, &o, &q, &c)?);
        br.push(remote_batch(&q, &c)?);
        eprintln!("rep {rep}: single");
        let mut a = in_process_single(&ix, &o, &q, &c)?;
        let (mut b, mut bq, mut bs) = remote_single(&q, &c)?;
        sq.push(pct(&mut bq, 0.5));
        ss.push(pct(&mut bs, 0.5));
        si.push(pct(&mut a, 0.5));
        sr.push(pct(&mut b, 0.5));
        lat_in.extend(a);
        lat_remote.extend(b);
    }
    let unloaded_p99 = pct(&mut lat_remote.clone(), 0.99);
    let mut phases = Vec::new();
    for honor in [true, false] {
        eprintln!(
            "overload: {} clients for {} s (honor Retry-After: {honor})",
            c.clients, c.overload_secs
        );
        let (counts, mut admitted, rps) = overload(&q, &c, honor);
        phases.push(json!({
            "clients": c.clients, "secs": c.overload_secs,
            "backoff": if honor { "Retry-After".to_string() } else { format!("{} ms", c.backoff_ms) },
            "counts": counts, "requests_per_sec": rps,
            "admitted_per_sec": admitted.len() as f64 / c.overload_secs,
            "admitted_p50_ms": pct(&mut admitted, 0.5), "admitted_p99_ms": pct(&mut admitted, 0.99),
            "admitted_p99_over_unloaded_p99": pct(&mut admitted, 0.99) / unloaded_p99,
            "admitted_latency_ms": admitted,
        }));
    }
    let out = json!({
        "k": c.k, "L": c.l, "threads": c.threads, "reps": c.reps, "batch": c.batch,
        "connections": c.connections, "nq": q.n(), "singles": c.singles,
        "batch_qps_in_process": bi, "batch_qps_remote": br,
        "batch_ratio_median": median(br.clone()) / median(bi.clone()),
        "single_p50_ms_in_process": si, "single_p50_ms_remote": sr,
        "single_p50_overhead_ms": median(sr.clone()) - median(si.clone()),
        "single_server_queue_p50_ms": sq, "single_server_search_p50_ms": ss,
        "single_latency_ms_in_process": lat_in, "single_latency_ms_remote": lat_remote.clone(),
        "unloaded_p50_ms": pct(&mut lat_remote.clone(), 0.5), "unloaded_p99_ms": unloaded_p99,
        "overload": phases,
    });
    std::fs::write(&args[4], serde_json::to_string_pretty(&out)?)?;
    Ok(())
}

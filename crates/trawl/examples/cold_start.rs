//! Cold start of an index: open → first result, the latency of the first queries after open
//! (while a background cache fill may still run), then the steady state (the cache full):
//! the same queries' latency and a batch's QPS and recall. One JSON object on stdout.
//!
//! ```text
//! cargo run --release --example cold_start -- INDEX QUERIES GT [--cache-nodes K]
//!     [--memory-budget BYTES] [--warm wait|background] [-L 40] [--first 1000]
//!     [--threads 2] [--reps 3] [--drop-caches]
//! ```
//!
//! `--drop-caches` (root) writes 3 to `/proc/sys/vm/drop_caches` after the queries are read
//! and before the index is opened, so the open reads its files from the device.

use std::path::PathBuf;
use std::time::Instant;

use trawl::data::groundtruth::read_ground_truth;
use trawl::data::read_matrix;
use trawl::filter::QueryFilter;
use trawl::kinds::{open_with, Options, Queries, Run};
use trawl::progress::Control;

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return 0.0;
    }
    s[((s.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut pos = Vec::new();
    let mut o = Options::default();
    let (mut l, mut first, mut threads, mut reps, mut drop_caches) =
        (40usize, 1000usize, 2, 3, false);
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--cache-nodes" => o.cache_nodes = val(i).parse()?,
            "--memory-budget" => o.memory_budget = Some(trawl::kinds::plan::parse_bytes(&val(i))?),
            "--warm" => o.warm_background = val(i) == "background",
            "-L" => l = val(i).parse()?,
            "--first" => first = val(i).parse()?,
            "--threads" => threads = val(i).parse()?,
            "--reps" => reps = val(i).parse()?,
            "--drop-caches" => {
                drop_caches = true;
                i += 1;
                continue;
            }
            other if other.starts_with("--") => return Err(format!("unknown flag {other}").into()),
            other => {
                pos.push(PathBuf::from(other));
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let [dir, qpath, gtpath] = pos.as_slice() else {
        return Err("usage: cold_start INDEX QUERIES GT [flags]".into());
    };
    let q = read_matrix::<f32>(qpath)?;
    let gt = read_ground_truth(gtpath)?;
    let dim = q.dim();
    let first = first.min(q.n());
    o.threads = threads;
    o.l = Some(l);
    if drop_caches {
        std::process::Command::new("sync").status()?;
        std::fs::write("/proc/sys/vm/drop_caches", "3")?;
    }
    let t0 = Instant::now();
    let (ix, report) = open_with(dir, &o, &Control::silent())?;
    let open_secs = t0.elapsed().as_secs_f64();
    let params = o.params(&ix, 10)?;
    let one = |i: usize| -> Result<f64, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let qs = Queries::new(q.row(i), dim).ok_or("query shape")?;
        ix.search(qs, &params, Run::default(), &QueryFilter::none())?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    let mut cold = Vec::with_capacity(first);
    let mut at = Vec::with_capacity(first);
    let mut first_result = 0.0;
    for i in 0..first {
        cold.push(one(i)?);
        at.push(t0.elapsed().as_secs_f64());
        if i == 0 {
            first_result = t0.elapsed().as_secs_f64();
        }
    }
    let cold_done = t0.elapsed().as_secs_f64();
    let warm_at = loop {
        let p = ix.warm_progress();
        if p.done() {
            break t0.elapsed().as_secs_f64();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let mut steady = Vec::with_capacity(first);
    for i in 0..first {
        steady.push(one(i)?);
    }
    let mut qps = Vec::new();
    let mut recall = 0.0;
    for _ in 0..reps {
        let hits = ix.search(
            Queries::from(&q),
            &params,
            Run {
                threads,
                interleave: 1,
            },
            &QueryFilter::none(),
        )?;
        qps.push(q.n() as f64 / hits.wall_secs);
        let mut found = 0usize;
        for r in 0..q.n() {
            let truth = &gt.ids[r * gt.k..r * gt.k + 10];
            found += hits.ids[r * 10..(r + 1) * 10]
                .iter()
                .filter(|&&id| truth.contains(&(id as u32)))
                .count();
        }
        recall = found as f64 / (q.n() * 10) as f64;
    }
    let window: Vec<f64> = cold.chunks(100).map(|c| percentile(c, 0.5)).collect();
    println!(
        "{}",
        serde_json::json!({
            "index": dir, "cache_nodes": report.cache.nodes, "warm_background": o.warm_background,
            "memory_budget": o.memory_budget, "plan": report.plan, "l": l,
            "open_secs": open_secs, "first_result_secs": first_result,
            "cold_secs": cold_done, "warm_done_secs": warm_at,
            "cold_p50_ms": percentile(&cold, 0.5), "cold_p99_ms": percentile(&cold, 0.99),
            "cold_p50_per_100_ms": window, "cold_ms": cold, "cold_at_secs": at,
            "steady_p50_ms": percentile(&steady, 0.5), "steady_p99_ms": percentile(&steady, 0.99),
            "qps": qps, "qps_median": percentile(&qps, 0.5), "recall": recall,
            "peak_rss_bytes": trawl::mem::peak_rss_bytes(),
        })
    );
    Ok(())
}

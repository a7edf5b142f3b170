//! Range search from the command line: `trawl search --radius` and `trawl bench --radius`
//! (every vector within the radius; the ground truth in big-ann-benchmarks' range format,
//! `trawl gt --radius`).

use std::collections::HashSet;

use anyhow::{bail, Result};
use serde::Serialize;
use trawl::data::matrix::AnyMatrix;
use trawl::data::RangeResults;
use trawl::kinds::RangeHits;
use trawl::progress::Control;

use super::bench::{percentile, process_cpu, BenchArgs, Latency};
use super::*;

/// Range search of `q` at `radius` with the search flags (list size `l`): trawl's range
/// search, or the growing-k baseline (`baseline`).
pub(crate) fn range_at(
    ix: &AnyIndex,
    q: &AnyMatrix,
    radius: f32,
    k: usize,
    l: Option<usize>,
    o: &SearchOptions,
    baseline: bool,
) -> Result<RangeHits> {
    let opts = o.options(l);
    if q.dim() != ix.dim() {
        bail!(
            "the queries have dimension {}, the index {}",
            q.dim(),
            ix.dim()
        );
    }
    let filter = o.filter.query_filter(q.n())?;
    let run = opts.run();
    if baseline {
        let p = opts.params(ix, k).map_err(flag_names)?;
        return Ok(match q {
            AnyMatrix::F32(m) => ix.range_search_growing(m.into(), radius, &p, run, &filter),
            AnyMatrix::U8(m) => ix.range_search_growing(m.into(), radius, &p, run, &filter),
            AnyMatrix::I8(m) => ix.range_search_growing(m.into(), radius, &p, run, &filter),
        }?);
    }
    let p = opts.range_params(ix, k, radius).map_err(flag_names)?;
    Ok(ix.range_search_matrix(q, radius, &p, run, &filter, None)?)
}

/// Range results as the range file stores them (32-bit ids).
pub(crate) fn to_results(h: &RangeHits) -> RangeResults {
    h.results.clone()
}

/// How well `got` matches the exact `truth`: mean per-query recall (a query with no true
/// result counts 1), overall recall (found / true over all queries), results per query.
/// Every returned result must be in the truth — precision is 1 by construction (each
/// result is checked by its exact distance) — and an error says otherwise.
pub(crate) fn range_recall(got: &RangeHits, truth: &RangeResults) -> Result<(f64, f64, f64)> {
    let nq = got.nq();
    if truth.nq() < nq {
        bail!(
            "the range ground truth has {} queries, the search {nq}",
            truth.nq()
        );
    }
    let (mut sum, mut found, mut all) = (0.0, 0usize, 0usize);
    for q in 0..nq {
        let t: HashSet<u64> = truth.ids_of(q).iter().copied().collect();
        let g = got.ids_of(q);
        let wrong: Vec<u64> = g.iter().copied().filter(|id| !t.contains(id)).collect();
        if !wrong.is_empty() {
            bail!(
                "query {q}: {} results are not within the radius by the ground truth (first: \
                 id {}): precision below 1 — is the ground truth for this radius and metric?",
                wrong.len(),
                wrong[0]
            );
        }
        sum += if t.is_empty() {
            1.0
        } else {
            g.len() as f64 / t.len() as f64
        };
        found += g.len();
        all += t.len();
    }
    let overall = if all == 0 {
        1.0
    } else {
        found as f64 / all as f64
    };
    Ok((
        sum / nq.max(1) as f64,
        overall,
        found as f64 / nq.max(1) as f64,
    ))
}

/// The distribution of results per query: min, median, p90, p99, max, and how many have none.
pub(crate) fn count_spread(r: &RangeResults, nq: usize) -> serde_json::Value {
    let mut c: Vec<f64> = (0..nq.min(r.nq()))
        .map(|q| r.ids_of(q).len() as f64)
        .collect();
    c.sort_by(f64::total_cmp);
    serde_json::json!({
        "min": c.first().copied().unwrap_or(0.0),
        "median": percentile(&c, 0.5),
        "p90": percentile(&c, 0.9),
        "p99": percentile(&c, 0.99),
        "max": c.last().copied().unwrap_or(0.0),
        "zero": c.iter().filter(|&&x| x == 0.0).count(),
        "mean": c.iter().sum::<f64>() / c.len().max(1) as f64,
    })
}

/// One row of a range bench: a list size, trawl's range search or the baseline.
#[derive(Debug, Clone, Serialize)]
pub struct RangeRow {
    #[serde(rename = "L")]
    pub l: usize,
    /// `range` (trawl) or `growing-k` (the baseline).
    pub method: String,
    /// Mean per-query recall.
    pub recall: f64,
    /// Results found / true results, over all queries.
    pub overall_recall: f64,
    /// Always 1 (checked).
    pub precision: f64,
    pub results_per_query: f64,
    pub qps: f64,
    pub latency_us: Latency,
    pub pages_per_query: f64,
    pub ios_per_query: f64,
    pub hops_per_query: f64,
    pub nodes_expanded_per_query: f64,
    pub exact_distances_per_query: f64,
    pub vector_reads_per_query: f64,
    pub lists_probed_per_query: f64,
    pub cpu_us_per_query: f64,
}

fn row_of(
    l: usize,
    method: &str,
    h: &RangeHits,
    truth: &RangeResults,
    cpu: f64,
) -> Result<RangeRow> {
    let (recall, overall_recall, results_per_query) = range_recall(h, truth)?;
    let nq = h.nq().max(1) as f64;
    let t = h.total();
    let per = |x: u64| x as f64 / nq;
    let mut lat: Vec<f64> = h.stats.iter().map(|s| s.total_ns as f64 / 1e3).collect();
    lat.sort_by(f64::total_cmp);
    Ok(RangeRow {
        l,
        method: method.into(),
        recall,
        overall_recall,
        precision: 1.0,
        results_per_query,
        qps: nq / h.wall_secs,
        latency_us: Latency {
            mean: lat.iter().sum::<f64>() / nq,
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            p999: percentile(&lat, 0.999),
        },
        pages_per_query: per(t.io.pages_read),
        ios_per_query: per(t.io.io_requests),
        hops_per_query: per(t.traversal.hops),
        nodes_expanded_per_query: per(t.traversal.nodes_expanded),
        exact_distances_per_query: per(t.traversal.exact_distances),
        vector_reads_per_query: per(t.rerank.vector_reads),
        lists_probed_per_query: per(t.ivf.lists_probed),
        cpu_us_per_query: cpu * 1e6 / nq,
    })
}

/// `trawl bench --radius`: per list size, trawl's range search (and with `--range-baseline`
/// the growing-k baseline right after it, on the same queries) against the range ground
/// truth of `--gt`.
pub fn bench_range(args: &BenchArgs, radius: f32, ctl: &Control) -> Result<serde_json::Value> {
    if args.l.is_empty() {
        bail!("give at least one list size with -L");
    }
    let (ix, mut info) = super::open(&args.index_dir, &args.opts, ctl)?;
    let mut queries = crate::runtime::read_vectors(&args.queries)?;
    if let Some(m) = args.max_queries {
        if m == 0 {
            bail!("--max-queries must be at least 1");
        }
        queries = match queries {
            AnyMatrix::F32(q) => AnyMatrix::F32(q.slice_rows(0, m)),
            AnyMatrix::U8(q) => AnyMatrix::U8(q.slice_rows(0, m)),
            AnyMatrix::I8(q) => AnyMatrix::I8(q.slice_rows(0, m)),
        };
    }
    let truth = trawl::data::read_range_results(&args.gt)?;
    let nq = queries.n();
    let mut rows = Vec::new();
    let methods: &[bool] = if args.range_baseline {
        &[false, true]
    } else {
        &[false]
    };
    for &l in &args.l {
        for &baseline in methods {
            let cpu0 = process_cpu();
            let h = range_at(&ix, &queries, radius, args.k, Some(l), &args.opts, baseline)?;
            let cpu1 = process_cpu();
            let cpu = (cpu1.0 - cpu0.0) + (cpu1.1 - cpu0.1);
            let method = if baseline { "growing-k" } else { "range" };
            rows.push(row_of(l, method, &h, &truth, cpu)?);
        }
    }
    println!(
        "range search, radius {radius}: {nq} queries; true results per query {}",
        count_spread(&truth, nq)
    );
    println!(
        "{:>6} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "L", "method", "recall", "overall", "res/q", "QPS", "pages/q", "p50 µs", "p99 µs"
    );
    for r in &rows {
        println!(
            "{:>6} {:>10} {:>8.4} {:>8.4} {:>9.1} {:>9.1} {:>9.1} {:>9.0} {:>9.0}",
            r.l,
            r.method,
            r.recall,
            r.overall_recall,
            r.results_per_query,
            r.qps,
            r.pages_per_query,
            r.latency_us.p50,
            r.latency_us.p99
        );
    }
    info["radius"] = radius.into();
    info["k"] = args.k.into();
    info["queries"] = nq.into();
    info["true_results"] = count_spread(&truth, nq);
    info["peak_rss_bytes"] = crate::runtime::peak_rss_bytes().into();
    info["rows"] = serde_json::to_value(&rows)?;
    if let Some(path) = &args.json {
        crate::runtime::write_json(path, &info)?;
    }
    Ok(info)
}

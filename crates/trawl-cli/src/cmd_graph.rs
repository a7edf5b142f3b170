//! `trawl graph build|search`: in-memory Vamana graphs and their quality.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rayon::prelude::*;
use serde::Serialize;
use trawl::data::matrix::AnyMatrix;
use trawl::data::{GroundTruth, Matrix};
use trawl::progress::Control;
use trawl::vamana::{self, Graph, SearchScratch, VamanaParams, VectorStore, VisitOrder};
use trawl::{Element, Metric};

use crate::runtime::{human_bytes, peak_rss_bytes, with_threads, write_json};

/// `trawl graph …`
#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// Build a Vamana graph over a vector file and save it.
    Build(GraphBuildArgs),
    /// Search a saved graph in memory and report recall, QPS and latency per list size.
    Search(GraphSearchArgs),
}

/// Arguments of `trawl graph build`.
#[derive(Debug, Args)]
pub struct GraphBuildArgs {
    /// Vector file (.fbin/.u8bin/.i8bin, .fvecs/.bvecs, .npy).
    pub data: PathBuf,
    /// Output graph file.
    pub out: PathBuf,
    /// Distance: l2, ip or cosine.
    #[arg(long, value_parser = crate::parse_metric)]
    pub metric: Metric,
    /// Maximum out-degree R.
    #[arg(short = 'R', long = "max-degree", default_value_t = VamanaParams::default().r)]
    pub r: usize,
    /// Build search list size L.
    #[arg(short = 'L', long = "list-size", default_value_t = VamanaParams::default().l)]
    pub l: usize,
    /// Pruning factor α (≥ 1).
    #[arg(long, default_value_t = VamanaParams::default().alpha)]
    pub alpha: f32,
    /// Most candidates considered by one prune.
    #[arg(long, default_value_t = VamanaParams::default().max_candidates)]
    pub max_candidates: usize,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Memory budget in GiB; a build whose estimate passes 31/32 of it is sharded.
    #[arg(long)]
    pub memory_budget_gb: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = VamanaParams::default().seed)]
    pub seed: u64,
    /// The order points are linked in: `blocks:N` (the default), `random` or `ids`.
    #[arg(long, default_value_t = VamanaParams::default().order)]
    pub visit_order: VisitOrder,
    /// Write a JSON build report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Arguments of `trawl graph search`.
#[derive(Debug, Args)]
pub struct GraphSearchArgs {
    /// The vector file the graph was built on.
    pub data: PathBuf,
    /// The graph file.
    pub graph: PathBuf,
    /// Query vectors (same element type and dimension as the data).
    #[arg(long)]
    pub queries: PathBuf,
    /// Ground truth (DiskANN/big-ann .bin or .ivecs).
    #[arg(long)]
    pub gt: PathBuf,
    /// Distance: l2, ip or cosine (the one the graph was built with).
    #[arg(long, value_parser = crate::parse_metric)]
    pub metric: Metric,
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 10)]
    pub k: usize,
    /// Comma-separated list sizes to sweep.
    #[arg(short = 'L', long = "list-sizes", default_value = "10,20,40,80,160", value_delimiter = ',',
          value_parser = clap::value_parser!(u64).range(1..))]
    pub l: Vec<u64>,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Write the sweep as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Machine-readable build report.
#[derive(Debug, Serialize)]
pub struct BuildReport {
    /// Points indexed.
    pub n: usize,
    /// Dimension.
    pub dim: usize,
    /// Seconds spent in the graph build itself.
    pub build_secs: f64,
    /// Seconds including reading the data and saving the graph.
    pub total_secs: f64,
    /// Peak resident set size of the process.
    pub peak_rss_bytes: u64,
    /// Bytes of the saved graph file.
    pub graph_bytes: u64,
    /// Average out-degree.
    pub avg_degree: f64,
    /// Largest out-degree.
    pub max_degree: usize,
    /// Shards the build was split into (1 = unsharded).
    pub shards: usize,
    /// Distance evaluations during the build.
    pub distance_computations: u64,
    /// Threads used.
    pub threads: usize,
}

/// One row of a search sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// List size.
    #[serde(rename = "L")]
    pub l: usize,
    /// Mean recall@k.
    pub recall: f64,
    /// Queries per second over the whole batch.
    pub qps: f64,
    /// Mean per-query latency in microseconds.
    pub mean_latency_us: f64,
    /// Median latency.
    pub p50_latency_us: f64,
    /// 99th percentile latency.
    pub p99_latency_us: f64,
    /// Mean hops (nodes expanded) per query.
    pub hops: f64,
    /// Mean distance computations per query.
    pub distance_computations: f64,
}

pub fn run(cmd: GraphCommand, ctl: &Control) -> Result<()> {
    match cmd {
        GraphCommand::Build(args) => build(&args, ctl).map(|_| ()),
        GraphCommand::Search(args) => {
            let rows = search(&args)?;
            print_sweep(&rows, args.k);
            if let Some(path) = &args.json {
                write_json(path, &serde_json::json!({ "k": args.k, "rows": rows }))?;
            }
            Ok(())
        }
    }
}

/// Builds and saves a graph; returns the report.
pub fn build(args: &GraphBuildArgs, ctl: &Control) -> Result<BuildReport> {
    let t0 = Instant::now();
    let data = crate::runtime::read_vectors(&args.data)?;
    let params = VamanaParams {
        r: args.r,
        l: args.l,
        alpha: args.alpha,
        max_candidates: args.max_candidates,
        seed: args.seed,
        order: args.visit_order,
        memory_budget_bytes: args
            .memory_budget_gb
            .map(|g| (g * (1u64 << 30) as f64) as u64),
        ..VamanaParams::default()
    };
    let (graph, stats, threads) = with_threads(args.threads, || -> Result<_> {
        let (g, s) = match &data {
            AnyMatrix::F32(m) => {
                trawl::data::validate_finite(m)?;
                vamana::build(m, args.metric, &params, ctl)?
            }
            AnyMatrix::U8(m) => vamana::build(m, args.metric, &params, ctl)?,
            AnyMatrix::I8(m) => vamana::build(m, args.metric, &params, ctl)?,
        };
        Ok((g, s, rayon::current_num_threads()))
    })??;
    let graph_bytes = graph.save(&args.out)?;
    let report = BuildReport {
        n: data.n(),
        dim: data.dim(),
        build_secs: stats.wall_secs,
        total_secs: t0.elapsed().as_secs_f64(),
        peak_rss_bytes: peak_rss_bytes(),
        graph_bytes,
        avg_degree: stats.avg_degree,
        max_degree: stats.max_degree,
        shards: stats.shards,
        distance_computations: stats.distance_computations,
        threads,
    };
    println!(
        "built graph over {} × {} in {:.2} s ({} thread(s), {} shard(s)); avg degree {:.1}, max {}; \
         peak RSS {}; graph file {} ({})",
        report.n,
        report.dim,
        report.build_secs,
        report.threads,
        report.shards,
        report.avg_degree,
        report.max_degree,
        human_bytes(report.peak_rss_bytes),
        args.out.display(),
        human_bytes(report.graph_bytes),
    );
    if let Some(path) = &args.report {
        write_json(path, &report)?;
    }
    Ok(report)
}

/// Runs the list-size sweep.
pub fn search(args: &GraphSearchArgs) -> Result<Vec<SweepRow>> {
    let data = crate::runtime::read_vectors(&args.data)?;
    let queries = crate::runtime::read_vectors(&args.queries)?;
    let gt = trawl::data::groundtruth::read_ground_truth(&args.gt)?;
    let graph = Graph::load(&args.graph)?;
    with_threads(args.threads, || match (&data, &queries) {
        (AnyMatrix::F32(d), AnyMatrix::F32(q)) => sweep(&graph, d, q, &gt, args),
        (AnyMatrix::U8(d), AnyMatrix::U8(q)) => sweep(&graph, d, q, &gt, args),
        (AnyMatrix::I8(d), AnyMatrix::I8(q)) => sweep(&graph, d, q, &gt, args),
        _ => bail!(
            "queries are {} but the data is {}: element types must match",
            queries.dtype(),
            data.dtype()
        ),
    })?
}

fn sweep<T: Element>(
    graph: &Graph,
    data: &Matrix<T>,
    queries: &Matrix<T>,
    gt: &GroundTruth,
    args: &GraphSearchArgs,
) -> Result<Vec<SweepRow>> {
    if graph.n() != data.n() {
        bail!(
            "the graph has {} nodes but the data has {} vectors",
            graph.n(),
            data.n()
        );
    }
    if queries.dim() != data.dim() {
        bail!(
            "queries have dimension {} but the data has {}",
            queries.dim(),
            data.dim()
        );
    }
    if gt.nq < queries.n() {
        bail!(
            "ground truth covers {} queries but there are {}",
            gt.nq,
            queries.n()
        );
    }
    if gt.k < args.k {
        bail!(
            "ground truth has {} neighbours per query, fewer than k = {}",
            gt.k,
            args.k
        );
    }
    // Searched in memory, as the build does: a mapped base is copied in (onto huge pages)
    // before any timing, so the first list size does not pay the page faults.
    let resident = data.resident_copy();
    let store = VectorStore::new(
        resident.as_deref().unwrap_or(data.as_slice()),
        data.dim(),
        args.metric,
    )
    .context("vector shape")?;
    let mut rows = Vec::new();
    for &l in &args.l {
        let l = usize::try_from(l).context("list size too large")?;
        rows.push(sweep_one(graph, &store, queries, gt, args.k, l)?);
    }
    Ok(rows)
}

/// Searches every query at list size `l`, timing each one.
pub fn sweep_one<T: Element>(
    graph: &Graph,
    store: &VectorStore<'_, T>,
    queries: &Matrix<T>,
    gt: &GroundTruth,
    k: usize,
    l: usize,
) -> Result<SweepRow> {
    let t0 = Instant::now();
    let results: Vec<_> = (0..queries.n())
        .into_par_iter()
        .map_init(
            || SearchScratch::new(graph.n()),
            |scratch, q| {
                let t = Instant::now();
                let r = vamana::search(graph, store, queries.row(q), k, l, scratch);
                r.map(|(hits, stats)| (hits, stats, t.elapsed().as_secs_f64() * 1e6))
            },
        )
        .collect::<Result<_, _>>()?;
    let wall = t0.elapsed().as_secs_f64();
    let nq = queries.n().max(1) as f64;
    let mut found = Vec::with_capacity(queries.n() * k);
    let mut lat = Vec::with_capacity(queries.n());
    let (mut hops, mut dists) = (0u64, 0u64);
    for (hits, stats, us) in &results {
        found.extend(hits.iter().map(|h| h.0));
        found.resize(found.len() + k - hits.len(), u32::MAX);
        lat.push(*us);
        hops += stats.hops;
        dists += stats.distance_computations;
    }
    let truth = GroundTruth {
        nq: queries.n(),
        k: gt.k,
        ids: gt.ids[..queries.n() * gt.k].to_vec(),
        dists: Vec::new(),
    };
    let recall = vamana::recall_at_k(&found, k, &truth).unwrap_or(0.0);
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Ok(SweepRow {
        l,
        recall,
        qps: nq / wall,
        mean_latency_us: lat.iter().sum::<f64>() / nq,
        p50_latency_us: pct(0.5),
        p99_latency_us: pct(0.99),
        hops: hops as f64 / nq,
        distance_computations: dists as f64 / nq,
    })
}

/// Prints a sweep as a table.
pub fn print_sweep(rows: &[SweepRow], k: usize) {
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "L",
        format!("recall@{k}"),
        "QPS",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "hops",
        "dists"
    );
    for r in rows {
        println!(
            "{:>6} {:>10.4} {:>10.0} {:>10.1} {:>10.1} {:>10.1} {:>8.1} {:>8.0}",
            r.l,
            r.recall,
            r.qps,
            r.mean_latency_us,
            r.p50_latency_us,
            r.p99_latency_us,
            r.hops,
            r.distance_computations
        );
    }
}

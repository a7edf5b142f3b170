//! `trawl shard build`, and searching a sharded index from `trawl search` / `trawl bench`
//! (they detect the shard manifest in the directory).

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use trawl::data::matrix::AnyMatrix;
use trawl::data::{GroundTruth, Matrix};
use trawl::progress::Control;
use trawl::shard::{build_sharded_index, ShardParams, ShardedIndex};
use trawl::Element;

use super::bench::{process_cpu, BenchRow};
use super::build::{check_args, index_params, BuildArgs};
use super::{open_options, resolve_layout, SearchOptions};
use crate::cmd_graph::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes, with_threads};

/// `trawl shard …`.
#[derive(Debug, Subcommand)]
pub enum ShardCommand {
    /// Partition the data by balanced k-means into --shards shards, build each as an ordinary
    /// graph index in OUT/shard-NNN, and write the shard manifest OUT/shards.trawl (centroids,
    /// each shard's ids and build id). `trawl search` and `trawl bench` search it (all shards
    /// or, with --probe P, each query's P nearest).
    Build(ShardBuildArgs),
}

/// Arguments of `trawl shard build`: the partition, then every flag of `trawl build`, applied
/// to each shard.
#[derive(Debug, Args)]
pub struct ShardBuildArgs {
    /// Number of shards.
    #[arg(long)]
    pub shards: usize,
    /// Balance: a shard holds at most ⌈(1 + slack) · n / shards⌉ vectors (before replication).
    #[arg(long, default_value_t = ShardParams::default().slack)]
    pub slack: f64,
    /// Boundary replication (0 = none): a vector also joins its second-nearest shard when its
    /// distance to that centroid is at most (1 + ε) times its distance to the nearest.
    #[arg(long, default_value_t = 0.0)]
    pub epsilon: f64,
    #[command(flatten)]
    pub build: BuildArgs,
}

/// Runs `trawl shard …`.
pub fn run(cmd: &ShardCommand, ctl: &Control) -> Result<()> {
    match cmd {
        ShardCommand::Build(args) => build(args, ctl).map(|_| ()),
    }
}

/// `trawl shard build`.
pub fn build(args: &ShardBuildArgs, ctl: &Control) -> Result<trawl::shard::ShardBuildReport> {
    let t0 = Instant::now();
    let b = &args.build;
    check_args(b)?;
    if b.kind != "graph" {
        bail!(
            "--kind {}: the shards of a sharded index are graph indexes",
            b.kind
        );
    }
    if b.decoupled {
        bail!("--decoupled is not supported by `trawl shard build` (write it per shard with `trawl layout`)");
    }
    let shard_params = ShardParams {
        shards: args.shards,
        slack: args.slack,
        epsilon: args.epsilon,
        seed: b.seed,
    };
    if let Some(q) = &b.query_sample {
        bail!(
            "--query-sample {}: a sharded build takes no query sample yet (build each shard \
             with `trawl build --query-sample`, or leave it out)",
            q.display()
        );
    }
    let data = if b.memory_budget_gb.is_some() {
        crate::runtime::map_vectors(&b.data)?
    } else {
        crate::runtime::read_vectors(&b.data)?
    };
    shard_params
        .validate(data.n())
        .map_err(|e| anyhow::anyhow!("--shards/--slack/--epsilon: {e}"))?;
    let params = index_params(b, data.dim())?;
    let dir = &b.index_dir;
    let (mut report, threads) = with_threads(b.threads, || -> Result<_> {
        let r = match &data {
            AnyMatrix::F32(m) => build_sharded_index(m, dir, &shard_params, &params, ctl)?,
            AnyMatrix::U8(m) => build_sharded_index(m, dir, &shard_params, &params, ctl)?,
            AnyMatrix::I8(m) => build_sharded_index(m, dir, &shard_params, &params, ctl)?,
        };
        Ok((r, rayon::current_num_threads()))
    })??;
    report.total_secs = t0.elapsed().as_secs_f64();
    let rss = peak_rss_bytes();
    let p = &report.plan;
    println!(
        "partitioned {} vectors into {} shards in {:.1} s: sizes {:?}, {:.1}% in their nearest shard, {:.3} copies per vector",
        p.n,
        p.shards,
        p.secs,
        p.counts,
        100.0 * p.in_nearest_share,
        p.replication
    );
    for (s, r) in report.shard_reports.iter().enumerate() {
        println!(
            "  shard {s:>3}: {} vectors in {:.1} s (PQ {:.1} s, graph {:.1} s, avg degree {:.1}), {} on disk",
            r.n,
            r.total_secs,
            r.pq_secs,
            r.graph_secs,
            r.avg_degree,
            human_bytes(r.disk_bytes)
        );
    }
    println!(
        "built sharded index in {} in {:.1} s with {threads} thread(s): {} on disk; peak RSS {}",
        dir.display(),
        report.total_secs,
        human_bytes(report.disk_bytes),
        human_bytes(rss)
    );
    if let Some(path) = &b.report {
        let mut v = serde_json::to_value(&report)?;
        v["peak_rss_bytes"] = rss.into();
        v["threads"] = threads.into();
        write_json(path, &v)?;
    }
    Ok(report)
}

/// Opens the sharded index in `dir` for `search` / `bench` (the node cache of `--cache-nodes`
/// is split over the shards in proportion to their sizes); returns it and the run description.
pub fn open(
    dir: &Path,
    o: &SearchOptions,
    ctl: &Control,
) -> Result<(ShardedIndex, serde_json::Value)> {
    if o.strategy == "flash" {
        bail!("--strategy flash is not supported on a sharded index");
    }
    if o.refine_bits > 0 || o.list_pin > 0.0 {
        bail!("--refine-bits and --list-pin are not supported on a sharded index");
    }
    let mut opts = open_options(o);
    opts.layout = resolve_layout(&dir.join(trawl::shard::shard_dir_name(0)), opts.layout);
    let t_load = Instant::now();
    let mut ix =
        ShardedIndex::open(dir, opts).with_context(|| format!("opening {}", dir.display()))?;
    let n = ix.n().max(1);
    let mut cached = 0;
    if o.cache_nodes > 0 {
        for s in ix.shards_mut() {
            let share = (o.cache_nodes as u128 * s.n() as u128 / n as u128) as usize;
            cached += s
                .load_cache(share, o.cache_policy, o.threads.max(1), ctl)?
                .nodes;
        }
    }
    let load_secs = t_load.elapsed().as_secs_f64();
    let engine = ix.shards()[0].searcher()?.engine().info();
    let h = &ix.manifest().header;
    println!(
        "sharded index {}: {} × {} {} ({}) in {} shards {:?}, {} engine{}, probe {}; {} cached nodes",
        dir.display(),
        ix.n(),
        ix.dim(),
        ix.dtype().name(),
        ix.metric().name(),
        h.shards.len(),
        h.shards.iter().map(|e| e.count).collect::<Vec<_>>(),
        engine.name,
        if engine.direct { ", O_DIRECT" } else { ", buffered (page cache)" },
        if o.probe == 0 || o.probe >= h.shards.len() {
            "all".to_string()
        } else {
            o.probe.to_string()
        },
        cached
    );
    let info = serde_json::json!({
        "index": dir.display().to_string(),
        "kind": "sharded",
        "n": ix.n(), "dim": ix.dim(), "dtype": ix.dtype().name(), "metric": ix.metric().name(),
        "shards": h.shards.len(),
        "shard_counts": h.shards.iter().map(|e| e.count).collect::<Vec<_>>(),
        "epsilon": h.epsilon, "slack": h.slack, "replicas": h.replicas,
        "probe": o.probe,
        "memory_bytes": ix.memory_bytes(), "disk_bytes": ix.disk_bytes(),
        "cache_nodes": cached,
        "engine": {"name": engine.name, "direct": engine.direct, "registered_buffers": engine.registered_buffers},
        "strategy": o.strategy, "beam_width": o.beam_width, "threads": o.threads,
        "interleave": o.interleave, "page_search": o.page_search,
        "load_secs": load_secs, "passes_per_L": 1, "warmup": false,
    });
    Ok((ix, info))
}

/// One batch over a sharded index.
pub fn search<T: Element>(
    ix: &ShardedIndex,
    q: &Matrix<T>,
    k: usize,
    l: usize,
    o: &SearchOptions,
) -> Result<trawl::index::BatchOutput> {
    let p = o.params(k, l)?;
    if q.dim() != ix.dim() {
        bail!(
            "the queries have dimension {}, the index {}",
            q.dim(),
            ix.dim()
        );
    }
    Ok(ix.search_rows(q.as_slice(), &p, o.threads, o.interleave, o.probe)?)
}

/// The bench sweep over a sharded index. A query's latency is the sum of its per-shard
/// searches (the shards are searched one after the other in this process).
pub fn run_sweep<T: Element>(
    ix: &ShardedIndex,
    queries: &Matrix<T>,
    gt: &GroundTruth,
    k: usize,
    ls: &[usize],
    o: &SearchOptions,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for &l in ls {
        let cpu0 = process_cpu();
        let out = search(ix, queries, k, l, o)?;
        let mut row = BenchRow::of_batch(l, &out, gt, k);
        row.set_cpu(cpu0, out.stats.len());
        rows.push(row);
    }
    Ok(rows)
}

/// [`search`] over any element type.
pub fn search_any(
    ix: &ShardedIndex,
    q: &AnyMatrix,
    k: usize,
    l: usize,
    o: &SearchOptions,
) -> Result<trawl::index::BatchOutput> {
    match q {
        AnyMatrix::F32(q) => search(ix, q, k, l, o),
        AnyMatrix::U8(q) => search(ix, q, k, l, o),
        AnyMatrix::I8(q) => search(ix, q, k, l, o),
    }
}

/// [`run_sweep`] over any element type.
pub fn run_sweep_any(
    ix: &ShardedIndex,
    q: &AnyMatrix,
    gt: &GroundTruth,
    k: usize,
    ls: &[usize],
    o: &SearchOptions,
) -> Result<Vec<BenchRow>> {
    match q {
        AnyMatrix::F32(q) => run_sweep(ix, q, gt, k, ls, o),
        AnyMatrix::U8(q) => run_sweep(ix, q, gt, k, ls, o),
        AnyMatrix::I8(q) => run_sweep(ix, q, gt, k, ls, o),
    }
}

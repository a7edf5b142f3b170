//! `trawl shard build`, and searching a sharded index from `trawl search` / `trawl bench`
//! (they detect the shard manifest in the directory).

use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use trawl::data::matrix::AnyMatrix;
use trawl::kinds::sharded::{build_sharded_index, ShardParams};
use trawl::progress::Control;

use super::build::{index_params, BuildArgs};
use crate::runtime::write_json;
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
pub fn build(
    args: &ShardBuildArgs,
    ctl: &Control,
) -> Result<trawl::kinds::sharded::ShardBuildReport> {
    let t0 = Instant::now();
    let b = &args.build;
    if b.kind != trawl::kinds::graph::KindName::Graph {
        bail!(
            "--kind {}: the shards of a sharded index are graph indexes",
            b.kind.name()
        );
    }
    b.options()?;
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
    let mut params = index_params(b, data.dim())?;
    // Every vector's attributes; each shard keeps its own rows'.
    params.attrs = super::build::read_attributes(b.labels.as_deref(), &b.attrs, data.n())?;
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

//! Building a sharded index in three steps, so a cluster can run the middle one in parallel:
//! [`plan_shards`] partitions and writes the plan (`shards.plan.trawl`: the manifest without
//! build ids), [`build_shard`] builds one shard's index from the plan and the data, and
//! [`finish_sharded_index`] records every shard's build id in `shards.trawl`.
//! [`build_sharded_index`] runs all three in this process.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::data::Matrix;
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::{Element, Metric};
use crate::kinds::graph::{build_index, IndexBuildReport, IndexParams, Manifest};
use crate::kinds::sharded::manifest::{
    ShardEntry, ShardHeader, ShardManifest, SHARD_MANIFEST_FILE,
};
use crate::kinds::sharded::partition::partition;
use crate::kinds::sharded::{ShardError, ShardParams};
use crate::progress::Control;

/// File name of the plan a sharded build writes before building the shards.
pub const SHARD_PLAN_FILE: &str = "shards.plan.trawl";

/// Directory name of shard `s`.
pub fn shard_dir_name(s: usize) -> String {
    format!("shard-{s:03}")
}

/// What [`plan_shards`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShardPlanReport {
    /// Vectors.
    pub n: usize,
    /// Shards.
    pub shards: usize,
    /// Vectors per shard (with replicas).
    pub counts: Vec<u64>,
    /// Share of vectors in their nearest partition.
    pub in_nearest_share: f64,
    /// Copies per vector on average (1 without replication).
    pub replication: f64,
    /// Seconds to partition and write the plan.
    pub secs: f64,
}

/// What [`build_sharded_index`] did and produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShardBuildReport {
    /// The partition.
    pub plan: ShardPlanReport,
    /// Each shard's build report.
    pub shard_reports: Vec<IndexBuildReport>,
    /// Bytes on disk of the whole sharded index (every shard and the manifest).
    pub disk_bytes: u64,
    /// Seconds of the whole build.
    pub total_secs: f64,
}

fn file_err(path: &Path, msg: impl Into<String>) -> ShardError {
    ShardError::File(FileError::new(path, FileErrorKind::Invalid(msg.into())))
}

/// Partitions `data` into `params.shards` shards and writes the plan into `dir` (created if
/// missing).
pub fn plan_shards<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &ShardParams,
    dir: &Path,
    ctl: &Control,
) -> Result<ShardPlanReport, ShardError> {
    let t0 = Instant::now();
    let p = partition(data, metric, params, ctl)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| ShardError::File(FileError::new(dir, FileErrorKind::Io(e))))?;
    let counts: Vec<u64> = p.members.iter().map(|m| m.len() as u64).collect();
    let header = ShardHeader {
        written_by: env!("CARGO_PKG_VERSION").to_string(),
        n: data.n() as u64,
        dim: data.dim(),
        dtype: T::DTYPE.name().to_string(),
        metric: metric.name().to_string(),
        slack: params.slack,
        epsilon: params.epsilon,
        seed: params.seed,
        in_nearest: p.in_nearest as u64,
        replicas: p.replicas as u64,
        shards: counts
            .iter()
            .enumerate()
            .map(|(s, &count)| ShardEntry {
                dir: shard_dir_name(s),
                count,
                build_id: String::new(),
            })
            .collect(),
    };
    let n = data.n();
    let plan = ShardManifest {
        header,
        centroids: p.centroids,
        ids: p.members,
    };
    plan.save(&dir.join(SHARD_PLAN_FILE))?;
    Ok(ShardPlanReport {
        n,
        shards: counts.len(),
        in_nearest_share: p.in_nearest as f64 / n.max(1) as f64,
        replication: counts.iter().sum::<u64>() as f64 / n.max(1) as f64,
        counts,
        secs: t0.elapsed().as_secs_f64(),
    })
}

/// Builds shard `shard` of the plan in `dir` from `data` (the same data the plan was made
/// from: its shape and metric are checked) into `dir/shard-NNN`.
pub fn build_shard<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    shard: usize,
    params: &IndexParams,
    ctl: &Control,
) -> Result<IndexBuildReport, ShardError> {
    let plan_path = dir.join(SHARD_PLAN_FILE);
    let plan = ShardManifest::load(&plan_path)?;
    let h = &plan.header;
    if h.n != data.n() as u64 || h.dim != data.dim() || h.dtype != T::DTYPE.name() {
        return Err(ShardError::Mismatch(format!(
            "the plan is for {} × {} {}, the data is {} × {} {}",
            h.n,
            h.dim,
            h.dtype,
            data.n(),
            data.dim(),
            T::DTYPE.name()
        )));
    }
    if h.metric != params.metric.name() {
        return Err(ShardError::Mismatch(format!(
            "the plan was partitioned for metric {}, the build asks for {}",
            h.metric, params.metric
        )));
    }
    let ids = plan.ids.get(shard).ok_or_else(|| {
        ShardError::InvalidParams(format!("shard {shard} of a plan of {}", plan.ids.len()))
    })?;
    let dim = data.dim();
    let m = Matrix::from_vec(data.gather_rows(ids), dim)
        .ok_or_else(|| ShardError::Mismatch(format!("shard {shard} has no vectors")))?;
    let shard_dir = dir.join(&h.shards[shard].dir);
    // The shard's rows' attributes, renumbered as its vectors are.
    let mut params = params.clone();
    if let Some(a) = &params.attrs {
        let sub = a
            .select(ids)
            .map_err(|e| ShardError::InvalidParams(format!("shard {shard}'s attributes: {e}")))?;
        params.attrs = Some(std::sync::Arc::new(sub));
    }
    build_index(&m, &shard_dir, &params, ctl).map_err(|source| ShardError::Build { shard, source })
}

/// Writes `dir/shards.trawl` from the plan and the build ids of the shards' indexes (all
/// must be built). Returns the manifest.
pub fn finish_sharded_index(dir: &Path) -> Result<ShardManifest, ShardError> {
    let plan_path = dir.join(SHARD_PLAN_FILE);
    let mut m = ShardManifest::load(&plan_path)?;
    for (s, e) in m.header.shards.iter_mut().enumerate() {
        let sdir: PathBuf = dir.join(&e.dir);
        let man = Manifest::load_if_present(&sdir)
            .map_err(|e| ShardError::Open {
                shard: s,
                source: e.into(),
            })?
            .ok_or_else(|| file_err(&sdir, format!("shard {s} is not built (no manifest)")))?;
        if man.n != e.count || man.dim != m.header.dim || man.metric != m.header.metric {
            return Err(ShardError::Mismatch(format!(
                "shard {s} holds {} × {} ({}), the plan {} × {} ({})",
                man.n, man.dim, man.metric, e.count, m.header.dim, m.header.metric
            )));
        }
        if man.build_id.is_empty() {
            return Err(file_err(
                &sdir,
                format!("shard {s}'s manifest has no build id"),
            ));
        }
        e.build_id = man.build_id;
    }
    m.save(&dir.join(SHARD_MANIFEST_FILE))?;
    Ok(m)
}

/// Partitions `data` and builds every shard here, one after the other, then the manifest.
pub fn build_sharded_index<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    shard_params: &ShardParams,
    params: &IndexParams,
    ctl: &Control,
) -> Result<ShardBuildReport, ShardError> {
    let t0 = Instant::now();
    params
        .validate(data.dim())
        .map_err(|source| ShardError::Build { shard: 0, source })?;
    let plan = plan_shards(data, params.metric, shard_params, dir, ctl)?;
    let bar = ctl.bar("shard builds", plan.shards as u64);
    let mut shard_reports = Vec::with_capacity(plan.shards);
    for s in 0..plan.shards {
        ctl.check()?;
        shard_reports.push(build_shard(data, dir, s, params, ctl)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    finish_sharded_index(dir)?;
    let mut disk_bytes = std::fs::metadata(dir.join(SHARD_MANIFEST_FILE)).map_or(0, |m| m.len());
    disk_bytes += shard_reports.iter().map(|r| r.disk_bytes).sum::<u64>();
    Ok(ShardBuildReport {
        plan,
        shard_reports,
        disk_bytes,
        total_secs: t0.elapsed().as_secs_f64(),
    })
}

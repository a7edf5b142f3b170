//! The IVF index kind in `trawl build | search | bench | info`.

use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use trawl::accel::AccelKind;
use trawl::data::matrix::AnyMatrix;
use trawl::ivf::{IvfParams, IvfSearchParams, IvfVectorLayout};
use trawl::progress::Control;
use trawl::quant::pq::{PqParams, OPQ_ITERS};

use super::build::{BuildArgs, DEFAULT_PQ_BYTES};
use crate::cmd_graph::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes, with_threads};

/// `trawl build --kind ivf` options.
#[derive(Debug, Args, Clone)]
pub struct IvfBuildArgs {
    /// IVF: target posting-list size before replication (lists ≈ n / size).
    #[arg(long, default_value_t = trawl::ivf::DEFAULT_LIST_SIZE)]
    pub ivf_list_size: usize,
    /// IVF: boundary replication's ε — a vector joins list i when dist(v, c_i) ≤ (1 + ε) ·
    /// dist(v, c_1).
    #[arg(long, default_value_t = trawl::ivf::DEFAULT_EPSILON)]
    pub ivf_epsilon: f32,
    /// IVF: most lists a vector joins.
    #[arg(long, default_value_t = trawl::ivf::DEFAULT_MAX_REPLICAS)]
    pub ivf_max_replicas: usize,
    /// IVF: also write the vectors in id order (ivf-vectors-by-id.trawl), the bucket
    /// layout's ablation baseline (`--ivf-vectors by_id`).
    #[arg(long)]
    pub by_id_vectors: bool,
}

impl Default for IvfBuildArgs {
    fn default() -> Self {
        Self {
            ivf_list_size: trawl::ivf::DEFAULT_LIST_SIZE,
            ivf_epsilon: trawl::ivf::DEFAULT_EPSILON,
            ivf_max_replicas: trawl::ivf::DEFAULT_MAX_REPLICAS,
            by_id_vectors: false,
        }
    }
}

/// `trawl search/bench` options of the IVF kind (`-L` is the number of lists probed).
#[derive(Debug, Args, Clone)]
pub struct IvfSearchArgs {
    /// IVF: candidates the filter stage keeps for the re-rank (n); 0 = max(10·k, 4·nprobe).
    #[arg(long, default_value_t = 0)]
    pub rerank_n: usize,
    /// IVF: re-rank mini-batch size.
    #[arg(long, default_value_t = IvfSearchParams::default().batch)]
    pub ivf_batch: usize,
    /// IVF: the early stop's change-rate threshold ε (0 re-ranks all n).
    #[arg(long, default_value_t = IvfSearchParams::default().epsilon)]
    pub ivf_epsilon: f32,
    /// IVF: batches in a row below ε that stop the re-rank (β).
    #[arg(long, default_value_t = IvfSearchParams::default().beta)]
    pub ivf_beta: usize,
    /// IVF: re-rank all n (no early stop).
    #[arg(long)]
    pub no_heuristic: bool,
    /// IVF: one read per vector, even for vectors on one page (no intra-batch merging).
    #[arg(long)]
    pub no_page_merge: bool,
    /// IVF: no page buffer across mini-batches (a page may be read again).
    #[arg(long)]
    pub no_page_buffer: bool,
    /// IVF: re-rank only the candidates, not the other vectors on the pages read for them
    /// (page-mate scoring off).
    #[arg(long)]
    pub no_page_mates: bool,
    /// IVF: list size of the centroid-graph search (0 = max(2·nprobe, 32)).
    #[arg(long, default_value_t = 0)]
    pub centroid_list: usize,
    /// The accelerator of an IVF index's filter stage and of the flash strategy's steps: cpu,
    /// gpu (wgpu; an error without an adapter) or auto (the GPU when one is found).
    #[arg(long, default_value = "cpu", value_parser = |s: &str| s.parse::<AccelKind>())]
    pub accel: AccelKind,
    /// IVF: queries per accelerator job (0 = 1 on the CPU, 32 on a GPU).
    #[arg(long, default_value_t = 0)]
    pub accel_batch: usize,
    /// IVF: vector file the re-rank reads: bucket (by nearest centroid) or by_id.
    #[arg(long, default_value = "bucket", value_parser = |s: &str| s.parse::<IvfVectorLayout>())]
    pub ivf_vectors: IvfVectorLayout,
}

impl Default for IvfSearchArgs {
    fn default() -> Self {
        let p = IvfSearchParams::default();
        Self {
            rerank_n: 0,
            ivf_batch: p.batch,
            ivf_epsilon: p.epsilon,
            ivf_beta: p.beta,
            no_heuristic: false,
            no_page_merge: false,
            no_page_buffer: false,
            no_page_mates: false,
            centroid_list: 0,
            accel: AccelKind::Cpu,
            accel_batch: 0,
            ivf_vectors: IvfVectorLayout::Bucket,
        }
    }
}

/// `trawl build --kind ivf`.
pub fn build(args: &BuildArgs, ctl: &Control) -> Result<trawl::ivf::IvfBuildReport> {
    let t0 = Instant::now();
    let iv = &args.ivf;
    if iv.ivf_list_size == 0 {
        bail!("--ivf-list-size must be at least 1");
    }
    if !(iv.ivf_epsilon.is_finite() && iv.ivf_epsilon >= 0.0) {
        bail!(
            "--ivf-epsilon {} must be a finite value ≥ 0",
            iv.ivf_epsilon
        );
    }
    if !(1..=64).contains(&iv.ivf_max_replicas) {
        bail!(
            "--ivf-max-replicas {} must be between 1 and 64",
            iv.ivf_max_replicas
        );
    }
    let data = crate::runtime::read_vectors(&args.data)?;
    let dim = data.dim();
    let pq_bytes = match args.pq_bytes {
        Some(b) if b > dim => bail!("--pq-bytes {b} is more than the dimension ({dim})"),
        Some(0) => bail!("--pq-bytes must be at least 1"),
        Some(b) => b,
        None => DEFAULT_PQ_BYTES.min(dim),
    };
    let params = IvfParams {
        metric: args.metric,
        list_size: iv.ivf_list_size,
        epsilon: iv.ivf_epsilon,
        max_replicas: iv.ivf_max_replicas,
        pq: PqParams {
            bytes_per_vector: pq_bytes,
            seed: args.seed,
            opq_iters: if args.opq { OPQ_ITERS } else { 0 },
            ..PqParams::default()
        },
        seed: args.seed,
        by_id_file: iv.by_id_vectors,
        ..IvfParams::default()
    };
    let dir = &args.index_dir;
    let (mut rep, threads) = with_threads(args.threads, || -> Result<_> {
        let r = match &data {
            AnyMatrix::F32(m) => trawl::ivf::build_ivf(m, dir, &params, ctl)?,
            AnyMatrix::U8(m) => trawl::ivf::build_ivf(m, dir, &params, ctl)?,
            AnyMatrix::I8(m) => trawl::ivf::build_ivf(m, dir, &params, ctl)?,
        };
        Ok((r, rayon::current_num_threads()))
    })??;
    rep.total_secs = t0.elapsed().as_secs_f64();
    rep.peak_rss_bytes = peak_rss_bytes();
    println!(
        "built IVF index over {} × {} {} ({}) in {:.1} s with {threads} thread(s): clustering {:.1} s, \
         centroid graph {:.1} s, assignment {:.1} s, PQ {:.1} s, vectors {:.1} s; peak RSS {}",
        rep.n, rep.dim, rep.dtype, rep.metric, rep.total_secs, rep.cluster_secs, rep.graph_secs,
        rep.assign_secs, rep.pq_secs, rep.vectors_secs, human_bytes(rep.peak_rss_bytes)
    );
    println!(
        "{} lists ({:.1}% of n, mean {:.1} ids, longest {}), replication {:.2} ({} vectors in more \
         than one list), {} vectors per page, {} pages {:.1}% full",
        rep.nlist,
        100.0 * rep.list_ratio,
        rep.mean_list,
        rep.max_list,
        rep.replication,
        rep.replicated_vectors,
        rep.vectors_per_page,
        rep.vector_pages,
        100.0 * rep.page_fill
    );
    println!(
        "on disk in {}: ivf.trawl {}, ivf-vectors.trawl {}{}, pq.trawl {}, pq-codes.trawl {} ({} B \
         per vector), manifest.trawl {}; total {}",
        dir.display(),
        human_bytes(rep.ivf_bytes),
        human_bytes(rep.vectors_bytes),
        if rep.vectors_by_id_bytes > 0 {
            format!(", ivf-vectors-by-id.trawl {}", human_bytes(rep.vectors_by_id_bytes))
        } else {
            String::new()
        },
        human_bytes(rep.pq_bytes),
        human_bytes(rep.pq_codes_bytes),
        rep.pq_bytes_per_vector,
        human_bytes(rep.manifest_bytes),
        human_bytes(rep.disk_bytes)
    );
    if let Some(path) = &args.report {
        let mut v = serde_json::to_value(&rep)?;
        v["threads"] = threads.into();
        v["kind"] = "ivf".into();
        write_json(path, &v)?;
    }
    Ok(rep)
}

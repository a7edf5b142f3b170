//! `trawl build`: a disk index from a vector file.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use trawl::data::matrix::AnyMatrix;
use trawl::graph::{VamanaParams, VisitOrder};
use trawl::index::{self, DiskIndex, IndexParams, OpenOptions};
use trawl::layout::decoupled::vectors::VectorParams;
use trawl::progress::Control;
use trawl::quant::pq::{PqParams, OPQ_ITERS};
use trawl::search::entry::{EntryParams, EntrySampling};
use trawl::Metric;

use crate::cmd_graph::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes, with_threads};

/// PQ bytes per vector when `--pq-bytes` is not given (fewer for data of fewer dimensions).
pub const DEFAULT_PQ_BYTES: usize = 32;

/// Arguments of `trawl build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Vector file (.fbin/.u8bin/.i8bin, .fvecs/.bvecs, .npy).
    pub data: PathBuf,
    /// Index directory to create (files inside are replaced).
    pub index_dir: PathBuf,
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
    /// PQ bytes per vector kept in memory at search time (≤ dimension; default 32, or the
    /// dimension when it is smaller).
    #[arg(long)]
    pub pq_bytes: Option<usize>,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Memory budget of the graph build in GiB; a build whose estimate passes 31/32 of it (the
    /// rest is kept for the process around it) is sharded. With a budget, a
    /// .fbin/.u8bin/.i8bin/.npy input is memory-mapped rather than read into memory, and each
    /// pass drops the pages behind it: the file must not change while the build runs.
    #[arg(long)]
    pub memory_budget_gb: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = VamanaParams::default().seed)]
    pub seed: u64,
    /// The order the graph build links its points in: `blocks:N` (blocks of N consecutive
    /// ids in a seeded random order, the default), `random`, or `ids` (DiskANN's, fastest
    /// and worst when the ids are grouped by region, e.g. rows appended cluster by cluster).
    #[arg(long, default_value_t = VamanaParams::default().order.to_string())]
    pub visit_order: String,
    /// A sample of the queries the index will serve (a vector file of the data's element type
    /// and dimension, e.g. from a query log): the exact 10 nearest points of each are linked to
    /// one another in the graph (query-aware edges), for queries that lie away from the data,
    /// whose neighbours sit in regions the graph does not otherwise connect. Not stored. Such
    /// queries also need finer codes to choose between nearly tied candidates: with
    /// `--pq-bytes 64` as well, recall@10 at L 64 on gen-1M live sets of whole clusters rose from
    /// 0.935–0.957 to 0.991–0.997 (`bench/results/recall-stability.md`).
    #[arg(long)]
    pub query_sample: Option<PathBuf>,
    /// Fill neighbour lists up to R after pruning with the nearest candidates the prune left
    /// out (DiskANN's disk build does; off by default: measured on GloVe-400K, the pruned graph
    /// reads as many pages per query at equal recall and computes fewer PQ distances).
    #[arg(long)]
    pub saturate: bool,
    /// Optimised PQ: learn an orthogonal rotation of the vectors together with the PQ
    /// codebooks (8 alternations on at most 64 Ki vectors), for a lower quantisation error and
    /// better-ranked neighbours at the same code size; costs dim² multiply-adds per query.
    #[arg(long)]
    pub opq: bool,
    /// Share of the vectors sampled into the in-memory entry index (0 = no entry index).
    #[arg(long, default_value_t = EntryParams::default().ratio)]
    pub entry_ratio: f64,
    /// Maximum degree of the entry index's sample graph.
    #[arg(long, default_value_t = EntryParams::default().r)]
    pub entry_degree: usize,
    /// Build list size of the entry index's sample graph.
    #[arg(long, default_value_t = EntryParams::default().l)]
    pub entry_build_list: usize,
    /// How the entry index picks its nodes: uniform (a seeded random sample) or freq (the
    /// nodes most read by sample searches of the built index, OctopusANN's visit frequency).
    #[arg(long, default_value = "uniform", value_parser = |s: &str| s.parse::<EntrySampling>())]
    pub entry_sampling: EntrySampling,
    /// Also write the decoupled layout (graph.trawl + vectors.trawl, DecoupleVS) and report
    /// its bytes per component against packed.trawl.
    #[arg(long)]
    pub decoupled: bool,
    /// Write the build report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Index kind: graph (Vamana graph on disk, PQ in memory) or ivf (FusionANNS: posting
    /// lists over a centroid graph, PQ on an accelerator, bucketed vectors on disk).
    #[arg(long, default_value = "graph", value_parser = ["graph", "ivf"])]
    pub kind: String,
    #[command(flatten)]
    pub ivf: super::ivf::IvfBuildArgs,
}

/// `trawl build`: the kind asked for.
pub fn build_any(args: &BuildArgs, ctl: &Control) -> Result<()> {
    if args.kind == "ivf" {
        super::ivf::build(args, ctl).map(|_| ())
    } else {
        build(args, ctl).map(|_| ())
    }
}

/// Checks the flags that need no data, naming each flag (the library checks again, by field).
pub(crate) fn check_args(args: &BuildArgs) -> Result<()> {
    if args.r == 0 || args.r > u16::MAX as usize {
        bail!("-R {} must be between 1 and 65535", args.r);
    }
    if args.l < args.r || args.l > trawl::graph::MAX_BUILD_L {
        bail!(
            "-L {} must be between -R ({}) and {}",
            args.l,
            args.r,
            trawl::graph::MAX_BUILD_L
        );
    }
    if !(args.alpha.is_finite() && args.alpha >= 1.0) {
        bail!("--alpha {} must be a finite value ≥ 1", args.alpha);
    }
    if let Err(e) = args.visit_order.parse::<VisitOrder>() {
        bail!("--visit-order {}: {e}", args.visit_order);
    }
    if let Some(g) = args.memory_budget_gb {
        if !(g.is_finite() && g > 0.0 && g * (1u64 << 30) as f64 >= 1.0 && g < 1.0e9) {
            bail!("--memory-budget-gb {g} must be a positive number of GiB");
        }
    }
    if args.pq_bytes == Some(0) {
        bail!("--pq-bytes must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.entry_ratio) {
        bail!(
            "--entry-ratio {} must be between 0 (no entry index) and 1",
            args.entry_ratio
        );
    }
    if args.entry_ratio > 0.0 {
        if args.entry_degree == 0 || args.entry_degree > u16::MAX as usize {
            bail!(
                "--entry-degree {} must be between 1 and 65535",
                args.entry_degree
            );
        }
        if args.entry_build_list == 0 || args.entry_build_list > trawl::graph::MAX_BUILD_L {
            bail!(
                "--entry-build-list {} must be between 1 and {}",
                args.entry_build_list,
                trawl::graph::MAX_BUILD_L
            );
        }
    }
    Ok(())
}

/// The graph index parameters of `trawl build`'s flags for data of dimension `dim` (also used
/// by `trawl shard build` for every shard).
pub fn index_params(args: &BuildArgs, dim: usize) -> Result<IndexParams> {
    let pq_bytes = match args.pq_bytes {
        Some(b) if b > dim => bail!(
            "--pq-bytes {b} is more than the dimension of {} ({dim}): PQ codes hold at most \
             one byte per dimension",
            args.data.display()
        ),
        Some(b) => b,
        None => DEFAULT_PQ_BYTES.min(dim),
    };
    Ok(IndexParams {
        metric: args.metric,
        graph: VamanaParams {
            r: args.r,
            l: args.l,
            alpha: args.alpha,
            seed: args.seed,
            memory_budget_bytes: args
                .memory_budget_gb
                .map(|g| (g * (1u64 << 30) as f64) as u64),
            saturate: args.saturate,
            order: args
                .visit_order
                .parse::<VisitOrder>()
                .map_err(|e| anyhow::anyhow!("--visit-order {}: {e}", args.visit_order))?,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: pq_bytes,
            seed: args.seed,
            opq_iters: if args.opq { OPQ_ITERS } else { 0 },
            ..PqParams::default()
        },
        entry: (args.entry_ratio > 0.0).then_some(EntryParams {
            ratio: args.entry_ratio,
            r: args.entry_degree,
            l: args.entry_build_list,
            seed: args.seed,
            sampling: args.entry_sampling,
        }),
    })
}

pub fn build(args: &BuildArgs, ctl: &Control) -> Result<trawl::index::IndexBuildReport> {
    let t0 = Instant::now();
    check_args(args)?;
    if args.kind != "graph" {
        bail!("--kind {}: this builds a graph index", args.kind);
    }
    let data = if args.memory_budget_gb.is_some() {
        crate::runtime::map_vectors(&args.data)?
    } else {
        crate::runtime::read_vectors(&args.data)?
    };
    let params = index_params(args, data.dim())?;
    let sample = match &args.query_sample {
        Some(path) => {
            let q = crate::runtime::read_vectors(path)?;
            if q.dtype() != data.dtype() || q.dim() != data.dim() {
                bail!(
                    "--query-sample {}: {} × {} {} vectors, the data is {} × {} {}: the sample \
                     must have the data's element type and dimension",
                    path.display(),
                    q.n(),
                    q.dim(),
                    q.dtype(),
                    data.n(),
                    data.dim(),
                    data.dtype()
                );
            }
            if q.n() == 0 {
                bail!(
                    "--query-sample {}: the file holds no vectors",
                    path.display()
                );
            }
            Some(q)
        }
        None => None,
    };
    let dir = &args.index_dir;
    let (mut report, threads) = with_threads(args.threads, || -> Result<_> {
        let r = match (&data, &sample) {
            (AnyMatrix::F32(m), Some(AnyMatrix::F32(q))) => {
                index::build_index_with_queries(m, q, dir, &params, ctl)?
            }
            (AnyMatrix::U8(m), Some(AnyMatrix::U8(q))) => {
                index::build_index_with_queries(m, q, dir, &params, ctl)?
            }
            (AnyMatrix::I8(m), Some(AnyMatrix::I8(q))) => {
                index::build_index_with_queries(m, q, dir, &params, ctl)?
            }
            (AnyMatrix::F32(m), _) => index::build_index(m, dir, &params, ctl)?,
            (AnyMatrix::U8(m), _) => index::build_index(m, dir, &params, ctl)?,
            (AnyMatrix::I8(m), _) => index::build_index(m, dir, &params, ctl)?,
        };
        Ok((r, rayon::current_num_threads()))
    })??;
    report.total_secs = t0.elapsed().as_secs_f64();
    let rss = peak_rss_bytes();
    println!(
        "built disk index over {} × {} {} ({}) in {:.1} s with {threads} thread(s): PQ {:.1} s, graph {:.1} s \
         ({} shard(s), avg degree {:.1}, max {}), layout {:.1} s; peak RSS {}",
        report.n, report.dim, report.dtype, report.metric, report.total_secs, report.pq_secs,
        report.graph_secs, report.shards, report.avg_degree, report.max_degree, report.layout_secs,
        human_bytes(rss)
    );
    if let Some(r) = &report.recall {
        println!(
            "recall monitor: {} ({} of its vectors searched as held-out queries, {:.1} s)",
            crate::cmd_info::recall_points(&r.points),
            r.samples,
            report.monitor_secs
        );
    }
    let c = &report.connectivity;
    println!(
        "graph: {} of {} nodes reachable from the medoid{}; in-degree median {}, max {}",
        c.nodes - c.unreachable,
        c.nodes,
        if report.relinked > 0 {
            format!(
                " ({} edges added to link back the nodes the build left unreachable)",
                report.relinked
            )
        } else {
            String::new()
        },
        c.in_degree[2],
        c.in_degree[4]
    );
    if report.query_sample > 0 {
        println!(
            "query sample: the nearest points of {} queries linked to one another ({} edges)",
            report.query_sample, report.query_edges
        );
    }
    println!(
        "on disk in {}: packed.trawl {} ({} records per page), pq.trawl {}, pq-codes.trawl {} ({} B per vector), entry.trawl {} ({} nodes, {:.1} s), manifest.trawl {}; total {}",
        dir.display(),
        human_bytes(report.packed_bytes),
        report.records_per_page,
        human_bytes(report.pq_bytes),
        human_bytes(report.pq_codes_bytes),
        report.pq_bytes_per_vector,
        human_bytes(report.entry_bytes),
        report.entry_nodes,
        report.entry_secs,
        human_bytes(report.manifest_bytes),
        human_bytes(report.disk_bytes)
    );
    let decoupled = if args.decoupled {
        let ix = DiskIndex::open(dir, OpenOptions::default())
            .with_context(|| format!("opening {}", dir.display()))?;
        let r = ix.write_decoupled(&VectorParams::default(), ctl)?;
        if let Some(d) = &r.decoupled {
            let pq = report.pq_bytes + report.pq_codes_bytes;
            println!(
                "decoupled layout: graph.trawl {} ({:.3}× the lists' {}), vectors.trawl {} \
                 ({:.3}× the vectors' {}), together {:.3}× packed.trawl; with the PQ files {} \
                 ({:.3}× the packed layout's {}); metadata in memory {}; {:.1} s",
                human_bytes(d.graph_bytes),
                d.graph_bytes as f64 / d.lists_raw_bytes.max(1) as f64,
                human_bytes(d.lists_raw_bytes),
                human_bytes(d.vectors_bytes),
                d.vectors_bytes as f64 / d.vectors_raw_bytes.max(1) as f64,
                human_bytes(d.vectors_raw_bytes),
                r.file_bytes as f64 / r.packed_bytes.max(1) as f64,
                human_bytes(r.file_bytes + pq),
                (r.file_bytes + pq) as f64 / (r.packed_bytes + pq).max(1) as f64,
                human_bytes(r.packed_bytes + pq),
                human_bytes(d.vectors_metadata_bytes + 4 * d.graph_pages),
                r.total_secs
            );
        }
        Some(r)
    } else {
        None
    };
    if let Some(path) = &args.report {
        let mut v = serde_json::to_value(&report)?;
        v["peak_rss_bytes"] = rss.into();
        v["threads"] = threads.into();
        if let Some(d) = &decoupled {
            v["decoupled"] = serde_json::to_value(d)?;
        }
        write_json(path, &v)?;
    }
    Ok(report)
}

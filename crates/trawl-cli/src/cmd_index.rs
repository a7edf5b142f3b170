//! `trawl build | search | bench`: the disk index.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use trawl::data::matrix::AnyMatrix;
use trawl::data::{read, GroundTruth, Matrix};
use trawl::graph::VamanaParams;
use trawl::index::{
    self, open_any, AnyIndex, DiskIndex, IndexLayout, IndexParams, OpenOptions, ShuffleParams,
};
use trawl::io::EngineKind;
use trawl::layout::decoupled::vectors::VectorParams;
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::search::entry::{EntryParams, EntrySampling};
use trawl::search::{
    BeamParams, CachePolicy, PipeParams, RerankParams, SearchError, SearchParams, Strategy,
    WidthPolicy, WidthSchedule, DEFAULT_BEAM_WIDTH,
};
use trawl::{Element, Metric};

use crate::cmd_graph::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes, with_threads};

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
    /// PQ bytes per vector kept in memory at search time (≤ dimension).
    #[arg(long, default_value_t = 32)]
    pub pq_bytes: usize,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Memory budget of the graph build in GiB; above it the build is sharded.
    #[arg(long)]
    pub memory_budget_gb: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = VamanaParams::default().seed)]
    pub seed: u64,
    /// Fill neighbour lists up to R after pruning with the nearest candidates the prune left
    /// out (DiskANN's disk build does; off by default: measured on GloVe-400K, the pruned graph
    /// reads as many pages per query at equal recall and computes fewer PQ distances).
    #[arg(long)]
    pub saturate: bool,
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
}

/// How an index is opened and searched: options shared by `search` and `bench`.
#[derive(Debug, Args, Clone)]
pub struct SearchOptions {
    /// Search strategy: beam (DiskANN's rounds of W reads) or pipe (PipeANN's pipelined
    /// search).
    #[arg(long, default_value = "beam", value_parser = ["beam", "pipe"])]
    pub strategy: String,
    /// Records read per round trip (beam width W; beam search).
    #[arg(short = 'W', long, default_value_t = DEFAULT_BEAM_WIDTH)]
    pub beam_width: usize,
    /// PipeSearch width policy: dynamic (PipeANN's default), static (by explored position) or
    /// fixed (always --pipe-max-width).
    #[arg(long, default_value = "dynamic", value_parser = |s: &str| s.parse::<WidthPolicy>())]
    pub pipe_width: WidthPolicy,
    /// PipeSearch starting width (dynamic policy).
    #[arg(long, default_value_t = PipeParams::default().start_width)]
    pub pipe_start_width: usize,
    /// PipeSearch largest width.
    #[arg(long, default_value_t = PipeParams::default().max_width)]
    pub pipe_max_width: usize,
    /// Beam search: widen the beam with the explored position (OctopusANN's DynamicWidth),
    /// capped by -W. Takes a schedule `[STEP:]W1,W2,...` (a width per STEP explored positions,
    /// default step 5); given without a value: 4,4,8,8,16,16,24,24,32.
    #[arg(long, num_args = 0..=1, default_missing_value = "5:4,4,8,8,16,16,24,24,32",
          value_parser = |s: &str| s.parse::<WidthSchedule>())]
    pub dynamic_width: Option<WidthSchedule>,
    /// Beam search: score every record on each page read and expand any of them later without
    /// another read (Starling's in-page search, OctopusANN's PageSearch).
    #[arg(long)]
    pub page_search: bool,
    /// Queries each thread keeps in flight (throughput mode above 1; works with both
    /// strategies).
    #[arg(long, default_value_t = 1)]
    pub interleave: usize,
    /// List size of the in-memory entry-index search that seeds each query (0 = start at the
    /// medoid; needs an index built with an entry index).
    #[arg(long, default_value_t = 0)]
    pub entry_list: usize,
    /// Search threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Nodes kept in the static in-memory cache.
    #[arg(long, default_value_t = 0)]
    pub cache_nodes: usize,
    /// How cached nodes are chosen: bfs (from the entry point) or freq (most read by sample
    /// searches).
    #[arg(long, default_value = "freq", value_parser = |s: &str| s.parse::<CachePolicy>())]
    pub cache_policy: CachePolicy,
    /// Sample searches run to choose a frequency cache (indexed vectors as queries).
    #[arg(long)]
    pub cache_samples: Option<usize>,
    /// I/O engine: auto (io_uring, else pread), uring, pread, memory (the index file in RAM, no
    /// I/O), or sim:LATENCY_US[:IOPS] (the file in RAM, each read completing after a modelled
    /// device latency under an IOPS ceiling; e.g. sim:80:500000).
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<EngineKind>())]
    pub engine: EngineKind,
    /// Disk layout to search: packed (as built), shuffle (PageShuffle), ais (All-in-Storage)
    /// or decoupled (DecoupleVS: compressed lists and vectors in two files); all but packed
    /// are written by `trawl layout`.
    #[arg(long, default_value = "packed", value_parser = |s: &str| s.parse::<IndexLayout>())]
    pub layout: IndexLayout,
    /// Decoupled layout: memory for the LRU cache of compressed neighbour lists, in MiB.
    #[arg(long, default_value_t = (trawl::index::DEFAULT_LIST_CACHE_BYTES >> 20) as f64)]
    pub list_cache_mb: f64,
    /// Decoupled layout: candidates per re-rank batch (B), also the prefetch's stability
    /// window.
    #[arg(long, default_value_t = RerankParams::default().batch)]
    pub rerank_batch: usize,
    /// Decoupled layout: stop re-ranking after a batch whose share of top-k changes is below
    /// this (0 re-ranks every expanded node, as the packed layouts do).
    #[arg(long, default_value_t = RerankParams::default().threshold)]
    pub rerank_threshold: f32,
    /// Decoupled layout: do not prefetch vectors during the traversal.
    #[arg(long)]
    pub no_prefetch: bool,
    /// Decoupled layout: expansions in a row that leave the PQ top-(k+B) unchanged before the
    /// prefetch starts (0 = B, the paper's rule).
    #[arg(long, default_value_t = 0)]
    pub prefetch_window: usize,
    /// Decoupled layout: do not prefetch when the traversal is ending (beam: a round finds
    /// fewer unexpanded candidates than its width; pipe: none is left); only DecoupleVS's
    /// stability rule then starts the prefetch.
    #[arg(long)]
    pub no_converge_prefetch: bool,
    /// Decoupled layout: re-rank batches read ahead of the one being processed.
    #[arg(long, default_value_t = RerankParams::default().lookahead)]
    pub rerank_lookahead: usize,
    /// Read through the page cache instead of O_DIRECT (figures are then not disk figures).
    #[arg(long)]
    pub buffered: bool,
    /// Skip the CRC check of every page read.
    #[arg(long)]
    pub no_verify: bool,
    /// io_uring submission-queue polling by a kernel thread (costs a core).
    #[arg(long)]
    pub sqpoll: bool,
    /// Microseconds each search thread polls for a read before blocking (default: 200 when
    /// the threads do not outnumber the cores, else 0; 0 always blocks at once).
    #[arg(long)]
    pub spin_us: Option<u64>,
}

impl SearchOptions {
    /// The search parameters these options describe.
    pub fn params(&self, k: usize, l: usize) -> Result<SearchParams, SearchError> {
        let strategy = Strategy::named(
            &self.strategy,
            BeamParams {
                width: self.beam_width,
                dynamic_width: self.dynamic_width,
                page_search: self.page_search,
            },
            PipeParams {
                policy: self.pipe_width,
                start_width: self.pipe_start_width,
                max_width: self.pipe_max_width,
                ..PipeParams::default()
            },
        )?;
        Ok(SearchParams {
            k,
            l,
            strategy,
            entry_list: self.entry_list,
            rerank: RerankParams {
                batch: self.rerank_batch,
                threshold: self.rerank_threshold,
                prefetch: !self.no_prefetch,
                stable_window: self.prefetch_window,
                prefetch_on_converge: !self.no_converge_prefetch,
                lookahead: self.rerank_lookahead,
            },
        })
    }
}

/// Arguments of `trawl search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 10)]
    pub k: usize,
    /// Candidate list size.
    #[arg(short = 'L', long = "list-size", default_value_t = 100)]
    pub l: usize,
    /// Write the results here (DiskANN/big-ann ground-truth format: ids and distances).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Ground truth: print recall@k too.
    #[arg(long)]
    pub gt: Option<PathBuf>,
    #[command(flatten)]
    pub opts: SearchOptions,
}

/// Arguments of `trawl bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Ground truth (DiskANN/big-ann .bin or .ivecs).
    #[arg(long)]
    pub gt: PathBuf,
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 10)]
    pub k: usize,
    /// Comma-separated list sizes to sweep.
    #[arg(
        short = 'L',
        long = "list-sizes",
        default_value = "10,20,40,80",
        value_delimiter = ','
    )]
    pub l: Vec<usize>,
    /// Write the sweep as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the sweep as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Search only the first N queries (and the ground truth's first N rows).
    #[arg(long)]
    pub max_queries: Option<usize>,
    /// Run OctopusANN's ablation instead of one configuration: Baseline (beam search, width
    /// -W), Cache, MemGraph, PageShuffle, PageSearch, DynamicWidth, Pipeline, C1–C5 and
    /// All-in-Storage, each a sweep of -L; writes ablation.{csv,md,json} into --ablation-out.
    /// Missing layouts are written first (`trawl layout`).
    #[arg(long)]
    pub ablation: bool,
    /// Directory of the ablation's outputs.
    #[arg(long, default_value = "ablation-out")]
    pub ablation_out: PathBuf,
    /// Ablation configurations to run, comma-separated (default: all, in the paper's order).
    #[arg(long, value_delimiter = ',')]
    pub ablation_configs: Vec<String>,
    /// Ablation: list size of the MemGraph (entry index) search.
    #[arg(long, default_value_t = 10)]
    pub memgraph_list: usize,
    /// Ablation: largest width of DynamicWidth and of PipeSearch's dynamic policy.
    #[arg(long, default_value_t = 32)]
    pub dw_max_width: usize,
    /// Ablation: cached nodes of the Cache configuration (default: 0.1% of the nodes).
    #[arg(long)]
    pub ablation_cache_nodes: Option<usize>,
    #[command(flatten)]
    pub opts: SearchOptions,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

/// One row of a bench sweep.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    #[serde(rename = "L")]
    pub l: usize,
    pub recall: f64,
    pub qps: f64,
    pub latency_us: Latency,
    pub pages_per_query: f64,
    pub ios_per_query: f64,
    pub bytes_per_query: f64,
    pub hops_per_query: f64,
    pub nodes_expanded_per_query: f64,
    pub cache_hits_per_query: f64,
    pub pq_distances_per_query: f64,
    pub exact_distances_per_query: f64,
    pub io_wait_us_per_query: f64,
    pub compute_us_per_query: f64,
    /// Mean reads in flight / width while reads were in flight.
    pub occupancy: f64,
    /// Reads none of whose records were explored.
    pub wasted_reads_per_query: f64,
    /// Records on the pages read.
    pub records_read_per_query: f64,
    /// Nodes expanded from pages already read (PageSearch).
    pub page_hits_per_query: f64,
    /// I/O utilisation: nodes expanded from read pages / records on those pages.
    pub io_utilisation: f64,
    /// Decoupled layout: vector-file reads (the rest of `ios_per_query` are graph reads).
    pub vector_reads_per_query: f64,
    /// Decoupled layout: vector reads issued during the traversal (prefetch).
    pub prefetched_per_query: f64,
    /// Decoupled layout: re-rank batches.
    pub rerank_batches_per_query: f64,
    /// Decoupled layout: microseconds decoding neighbour lists.
    pub list_decode_us_per_query: f64,
    /// Decoupled layout: microseconds decoding vectors.
    pub vector_decode_us_per_query: f64,
}

pub(crate) fn open_index(
    dir: &Path,
    o: &SearchOptions,
    ctl: &Control,
) -> Result<(DiskIndex, serde_json::Value)> {
    let opts = OpenOptions {
        direct: !o.buffered,
        engine: o.engine,
        verify_pages: !o.no_verify,
        sqpoll: o.sqpoll,
        spin_us: o.spin_us,
        layout: o.layout,
        list_cache_bytes: (o.list_cache_mb.max(0.0) * (1u64 << 20) as f64) as u64,
        queue_depth: OpenOptions::default()
            .queue_depth
            .max(o.beam_width)
            .max(2 * o.pipe_max_width),
        ..OpenOptions::default()
    };
    let t_load = Instant::now();
    // Only the graph kind exists; a new kind makes this pattern refutable, and the compiler
    // asks for its arm.
    let AnyIndex::Graph(mut ix) =
        open_any(dir, opts).with_context(|| format!("opening {}", dir.display()))?;
    let policy = match (o.cache_policy, o.cache_samples) {
        (CachePolicy::Frequency { l, beam_width, .. }, Some(n)) => CachePolicy::Frequency {
            sample_queries: n,
            l,
            beam_width,
        },
        (p, _) => p,
    };
    let cache = ix.load_cache(o.cache_nodes, policy, o.threads.max(1), ctl)?;
    let load_secs = t_load.elapsed().as_secs_f64();
    let engine = ix.searcher()?.engine().info();
    // The index's own description (shared with `trawl info` and Python), then the run's.
    let mut info = serde_json::to_value(ix.info()?)?;
    let run = serde_json::json!({
        "rerank": {"batch": o.rerank_batch, "threshold": o.rerank_threshold, "prefetch": !o.no_prefetch, "prefetch_window": o.prefetch_window, "converge_prefetch": !o.no_converge_prefetch, "lookahead": o.rerank_lookahead},
        "list_cache": ix.decoupled().map(|d| serde_json::json!({"entries": d.lists().capacity(), "entry_bytes": d.lists().entry_bytes(), "budget_bytes": d.lists().budget_bytes()})),
        "entry_list": o.entry_list,
        "cache": cache, "cache_policy": format!("{policy:?}"),
        "engine": {"name": engine.name, "direct": engine.direct,
                   "registered_buffers": engine.registered_buffers, "sqpoll": engine.sqpoll},
        "verify_pages": !o.no_verify, "spin_us": o.spin_us, "beam_width": o.beam_width, "threads": o.threads,
        "dynamic_width": o.dynamic_width.map(|s| s.to_string()), "page_search": o.page_search,
        "strategy": o.strategy, "pipe": {"width_policy": format!("{:?}", o.pipe_width).to_lowercase(),
                   "start_width": o.pipe_start_width, "max_width": o.pipe_max_width},
        "dynamic_width_max": o.dynamic_width.map(|s| s.max_width()),
        "interleave": o.interleave,
        "page_bytes": trawl::io::PAGE_BYTES, "load_secs": load_secs,
        "passes_per_L": 1, "warmup": false,
    });
    if let (Some(obj), serde_json::Value::Object(run)) = (info.as_object_mut(), run) {
        obj.extend(run);
    }
    println!(
        "index {}: {} × {} {} ({}), {} engine{}{}; cache {} nodes ({}) in {:.2} s",
        dir.display(),
        ix.n(),
        ix.dim(),
        ix.dtype().name(),
        ix.metric().name(),
        engine.name,
        if engine.direct {
            ", O_DIRECT"
        } else {
            ", buffered (page cache)"
        },
        if engine.registered_buffers {
            ", registered buffers"
        } else {
            ""
        },
        cache.nodes,
        human_bytes(cache.bytes),
        cache.secs
    );
    Ok((ix, info))
}

pub fn build(args: &BuildArgs, ctl: &Control) -> Result<trawl::index::IndexBuildReport> {
    let t0 = Instant::now();
    let data = read::read_matrix_any(&args.data)?;
    let params = IndexParams {
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
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: args.pq_bytes,
            seed: args.seed,
            ..PqParams::default()
        },
        entry: (args.entry_ratio > 0.0).then_some(EntryParams {
            ratio: args.entry_ratio,
            r: args.entry_degree,
            l: args.entry_build_list,
            seed: args.seed,
            sampling: args.entry_sampling,
        }),
    };
    if args.pq_bytes == 0 {
        bail!("--pq-bytes must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.entry_ratio) {
        bail!(
            "--entry-ratio {} must be between 0 (no entry index) and 1",
            args.entry_ratio
        );
    }
    let dir = &args.index_dir;
    let (mut report, threads) = with_threads(args.threads, || -> Result<_> {
        let r = match &data {
            AnyMatrix::F32(m) => index::build_index(m, dir, &params, ctl)?,
            AnyMatrix::U8(m) => index::build_index(m, dir, &params, ctl)?,
            AnyMatrix::I8(m) => index::build_index(m, dir, &params, ctl)?,
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
    println!(
        "on disk in {}: packed.trawl {} ({} records per page), pq.trawl {}, pq-codes.trawl {} ({} B per vector), entry.trawl {} ({} nodes, {:.1} s); total {}",
        dir.display(),
        human_bytes(report.packed_bytes),
        report.records_per_page,
        human_bytes(report.pq_bytes),
        human_bytes(report.pq_codes_bytes),
        report.pq_bytes_per_vector,
        human_bytes(report.entry_bytes),
        report.entry_nodes,
        report.entry_secs,
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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

pub(crate) fn run_sweep<T: Element>(
    ix: &DiskIndex,
    queries: &Matrix<T>,
    gt: &GroundTruth,
    k: usize,
    ls: &[usize],
    o: &SearchOptions,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for &l in ls {
        let p = o.params(k, l)?;
        let out = ix.search_batch_with(queries, &p, o.threads, o.interleave)?;
        let nq = queries.n().max(1) as f64;
        let truth = GroundTruth {
            nq: queries.n(),
            k: gt.k,
            ids: gt.ids[..queries.n() * gt.k].to_vec(),
            dists: Vec::new(),
        };
        let recall = trawl::graph::recall_at_k(&out.ids, k, &truth).unwrap_or(0.0);
        let mut lat: Vec<f64> = out.stats.iter().map(|s| s.total_ns as f64 / 1e3).collect();
        lat.sort_by(f64::total_cmp);
        let t = out.total();
        let per = |x: u64| x as f64 / nq;
        rows.push(BenchRow {
            l,
            recall,
            qps: nq / out.wall_secs,
            latency_us: Latency {
                mean: lat.iter().sum::<f64>() / nq,
                p50: percentile(&lat, 0.5),
                p99: percentile(&lat, 0.99),
                p999: percentile(&lat, 0.999),
            },
            pages_per_query: per(t.io.pages_read),
            ios_per_query: per(t.io.io_requests),
            bytes_per_query: per(t.io.bytes_read),
            hops_per_query: per(t.traversal.hops),
            nodes_expanded_per_query: per(t.traversal.nodes_expanded),
            cache_hits_per_query: per(t.traversal.cache_hits),
            pq_distances_per_query: per(t.traversal.pq_distances),
            exact_distances_per_query: per(t.traversal.exact_distances),
            io_wait_us_per_query: t.io.io_wait_ns as f64 / 1e3 / nq,
            compute_us_per_query: t.compute_ns() as f64 / 1e3 / nq,
            occupancy: t.occupancy(),
            wasted_reads_per_query: per(t.io.wasted_reads),
            records_read_per_query: per(t.io.records_read),
            page_hits_per_query: per(t.traversal.page_hits),
            io_utilisation: t.io_utilisation(),
            vector_reads_per_query: per(t.rerank.vector_reads),
            prefetched_per_query: per(t.rerank.prefetched),
            rerank_batches_per_query: per(t.rerank.rerank_batches),
            list_decode_us_per_query: t.traversal.list_decode_ns as f64 / 1e3 / nq,
            vector_decode_us_per_query: t.rerank.vector_decode_ns as f64 / 1e3 / nq,
        });
    }
    Ok(rows)
}

fn check_gt(gt: &GroundTruth, nq: usize, k: usize) -> Result<()> {
    if gt.nq < nq {
        bail!("ground truth covers {} queries but there are {nq}", gt.nq);
    }
    if gt.k < k {
        bail!(
            "ground truth has {} neighbours per query, fewer than k = {k}",
            gt.k
        );
    }
    Ok(())
}

/// Runs the bench sweep; returns the rows and the run description.
pub fn bench(args: &BenchArgs, ctl: &Control) -> Result<(Vec<BenchRow>, serde_json::Value)> {
    if args.l.is_empty() {
        bail!("give at least one list size with -L");
    }
    let (ix, info) = open_index(&args.index_dir, &args.opts, ctl)?;
    let (queries, gt) = load_queries(args)?;
    let rows = match &queries {
        AnyMatrix::F32(q) => run_sweep(&ix, q, &gt, args.k, &args.l, &args.opts)?,
        AnyMatrix::U8(q) => run_sweep(&ix, q, &gt, args.k, &args.l, &args.opts)?,
        AnyMatrix::I8(q) => run_sweep(&ix, q, &gt, args.k, &args.l, &args.opts)?,
    };
    let mut info = info;
    info["k"] = args.k.into();
    info["queries"] = queries.n().into();
    info["peak_rss_bytes"] = peak_rss_bytes().into();
    if let Some(path) = &args.json {
        let mut v = info.clone();
        v["rows"] = serde_json::to_value(&rows)?;
        write_json(path, &v)?;
    }
    if let Some(path) = &args.csv {
        write_csv(path, &rows)?;
    }
    Ok((rows, info))
}

/// The bench's queries (the first `--max-queries`) and their checked ground truth.
pub(crate) fn load_queries(args: &BenchArgs) -> Result<(AnyMatrix, GroundTruth)> {
    let mut queries = read::read_matrix_any(&args.queries)?;
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
    let gt = trawl::data::groundtruth::read_ground_truth(&args.gt)?;
    check_gt(&gt, queries.n(), args.k)?;
    Ok((queries, gt))
}

fn write_csv(path: &Path, rows: &[BenchRow]) -> Result<()> {
    let mut s = String::from(
        "L,recall,qps,mean_us,p50_us,p99_us,p999_us,pages_per_query,ios_per_query,bytes_per_query,\
         hops_per_query,nodes_expanded_per_query,cache_hits_per_query,pq_distances_per_query,\
         exact_distances_per_query,io_wait_us_per_query,compute_us_per_query,occupancy,\
         wasted_reads_per_query,records_read_per_query,page_hits_per_query,io_utilisation\n",
    );
    for r in rows {
        s += &format!(
            "{},{:.5},{:.1},{:.1},{:.1},{:.1},{:.1},{:.3},{:.3},{:.1},{:.3},{:.3},{:.3},{:.1},{:.1},{:.1},{:.1},{:.4},{:.3},{:.2},{:.3},{:.4}\n",
            r.l, r.recall, r.qps, r.latency_us.mean, r.latency_us.p50, r.latency_us.p99,
            r.latency_us.p999, r.pages_per_query, r.ios_per_query, r.bytes_per_query,
            r.hops_per_query, r.nodes_expanded_per_query, r.cache_hits_per_query,
            r.pq_distances_per_query, r.exact_distances_per_query, r.io_wait_us_per_query,
            r.compute_us_per_query, r.occupancy, r.wasted_reads_per_query,
            r.records_read_per_query, r.page_hits_per_query, r.io_utilisation
        );
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// Prints a bench sweep as a table.
pub fn print_bench(rows: &[BenchRow], k: usize) {
    println!(
        "{:>5} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>7} {:>8} {:>8} {:>5} {:>6} {:>5}",
        "L",
        format!("recall@{k}"),
        "QPS",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "pages",
        "I/Os",
        "hops",
        "cached",
        "I/O µs",
        "CPU µs",
        "occ",
        "wasted",
        "U_io"
    );
    for r in rows {
        println!(
            "{:>5} {:>9.4} {:>8.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>7.1} {:>7.1} {:>6.1} {:>7.1} {:>8.0} {:>8.0} {:>5.2} {:>6.1} {:>5.2}",
            r.l, r.recall, r.qps, r.latency_us.mean, r.latency_us.p50, r.latency_us.p99,
            r.latency_us.p999, r.pages_per_query, r.ios_per_query, r.hops_per_query,
            r.cache_hits_per_query, r.io_wait_us_per_query, r.compute_us_per_query,
            r.occupancy, r.wasted_reads_per_query, r.io_utilisation
        );
    }
}

fn search_one<T: Element>(
    ix: &DiskIndex,
    q: &Matrix<T>,
    args: &SearchArgs,
) -> Result<trawl::index::BatchOutput> {
    let p = args.opts.params(args.k, args.l)?;
    Ok(ix.search_batch_with(q, &p, args.opts.threads, args.opts.interleave)?)
}

/// `trawl search`: one list size, results to a file.
pub fn search(args: &SearchArgs, ctl: &Control) -> Result<()> {
    let (ix, _) = open_index(&args.index_dir, &args.opts, ctl)?;
    let queries = read::read_matrix_any(&args.queries)?;
    let out = match &queries {
        AnyMatrix::F32(q) => search_one(&ix, q, args)?,
        AnyMatrix::U8(q) => search_one(&ix, q, args)?,
        AnyMatrix::I8(q) => search_one(&ix, q, args)?,
    };
    let nq = queries.n().max(1) as f64;
    let t = out.total();
    println!(
        "{} queries in {:.3} s ({:.0} QPS, {} thread(s)); per query: {:.1} pages, {:.1} I/Os, {:.1} hops, {:.1} cache hits",
        queries.n(),
        out.wall_secs,
        nq / out.wall_secs,
        args.opts.threads,
        t.io.pages_read as f64 / nq,
        t.io.io_requests as f64 / nq,
        t.traversal.hops as f64 / nq,
        t.traversal.cache_hits as f64 / nq
    );
    if let Some(gt_path) = &args.gt {
        let gt = trawl::data::groundtruth::read_ground_truth(gt_path)?;
        check_gt(&gt, queries.n(), args.k)?;
        let truth = GroundTruth {
            nq: queries.n(),
            k: gt.k,
            ids: gt.ids[..queries.n() * gt.k].to_vec(),
            dists: Vec::new(),
        };
        let recall = trawl::graph::recall_at_k(&out.ids, args.k, &truth).unwrap_or(0.0);
        println!("recall@{}: {recall:.4}", args.k);
    }
    if let Some(path) = &args.out {
        let res = GroundTruth {
            nq: queries.n(),
            k: args.k,
            ids: out.ids,
            dists: out.dists,
        };
        trawl::data::groundtruth::write_ground_truth(path, &res)?;
        println!("results written to {}", path.display());
    }
    Ok(())
}

/// Arguments of `trawl entry`.
#[derive(Debug, Args)]
pub struct EntryArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Share of the indexed vectors in the entry index, in (0, 1] (defaults: OctopusANN's
    /// MemGraph, 0.001; PipeANN's entry index, which `trawl build` makes, is 0.01).
    #[arg(long, default_value_t = EntryParams::memgraph().ratio)]
    pub ratio: f64,
    /// Maximum degree of the sample graph (MemGraph: 48; PipeANN: 32).
    #[arg(long, default_value_t = EntryParams::memgraph().r)]
    pub degree: usize,
    /// Build list size of the sample graph (MemGraph: 128; PipeANN: 64).
    #[arg(long, default_value_t = EntryParams::memgraph().l)]
    pub build_list: usize,
    /// uniform (seeded random sample) or freq (most read by sample searches).
    #[arg(long, default_value = "uniform", value_parser = |s: &str| s.parse::<EntrySampling>())]
    pub sampling: EntrySampling,
    /// Random seed of the uniform sample.
    #[arg(long, default_value_t = EntryParams::default().seed)]
    pub seed: u64,
    /// Threads of the sample searches (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// `trawl entry`: (re)builds an index's in-memory entry index (MemGraph) from its disk file,
/// without touching the graph.
pub fn entry(args: &EntryArgs, ctl: &Control) -> Result<()> {
    if !(args.ratio > 0.0 && args.ratio <= 1.0) {
        bail!("--ratio {} must be in (0, 1]", args.ratio);
    }
    let params = EntryParams {
        ratio: args.ratio,
        r: args.degree,
        l: args.build_list,
        seed: args.seed,
        sampling: args.sampling,
    };
    let mut ix = DiskIndex::open(&args.index_dir, OpenOptions::default())
        .with_context(|| format!("opening {}", args.index_dir.display()))?;
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.threads
    };
    let report = ix.rebuild_entry(&params, threads, ctl)?;
    println!(
        "entry index of {}: {} nodes ({} sampling, R = {}, L = {}), {} on disk, {} in memory, \
         {} pages read, {:.1} s",
        args.index_dir.display(),
        report.nodes,
        args.sampling.name(),
        args.degree,
        args.build_list,
        human_bytes(report.file_bytes),
        human_bytes(report.memory_bytes),
        report.pages_read,
        report.secs
    );
    if let Some(path) = &args.report {
        let mut v = serde_json::to_value(report)?;
        v["sampling"] = args.sampling.name().into();
        v["ratio"] = args.ratio.into();
        v["R"] = args.degree.into();
        v["L"] = args.build_list.into();
        v["peak_rss_bytes"] = peak_rss_bytes().into();
        write_json(path, &v)?;
    }
    Ok(())
}

/// Arguments of `trawl layout`.
#[derive(Debug, Args)]
pub struct LayoutArgs {
    /// Index directory (built by `trawl build`).
    pub index_dir: PathBuf,
    /// Write the PageShuffle layout (packed-shuffled.trawl): records reordered so graph
    /// neighbours share pages.
    #[arg(long)]
    pub shuffle: bool,
    /// Write the All-in-Storage layout (packed-ais.trawl): each record also holds its
    /// neighbours' PQ codes, so no PQ codes stay in memory.
    #[arg(long)]
    pub ais: bool,
    /// Write the decoupled layout (graph.trawl + vectors.trawl, DecoupleVS): sorted
    /// neighbour lists Elias-Fano coded in pages, and the vectors losslessly compressed
    /// (XOR with a base vector per chunk when it helps, Huffman per segment and byte lane).
    #[arg(long)]
    pub decoupled: bool,
    /// Decoupled layout: chunk-metadata memory over vector bytes (β); sets the chunk size.
    #[arg(long, default_value_t = VectorParams::default().beta)]
    pub beta: f64,
    /// Decoupled layout: uncompressed MiB per segment (each has its own code tables).
    #[arg(long, default_value_t = VectorParams::default().segment_bytes >> 20)]
    pub segment_mb: u64,
    /// Most PageShuffle refinement rounds after the neighbour packing.
    #[arg(long, default_value_t = ShuffleParams::default().rounds)]
    pub rounds: usize,
    /// Write the reports as JSON here (a list, one per layout).
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// `trawl layout`: writes other disk layouts of an index's graph beside it.
pub fn layout(args: &LayoutArgs, ctl: &Control) -> Result<()> {
    if !args.shuffle && !args.ais && !args.decoupled {
        bail!("choose a layout to write: --shuffle, --ais and/or --decoupled");
    }
    let ix = DiskIndex::open(&args.index_dir, OpenOptions::default())
        .with_context(|| format!("opening {}", args.index_dir.display()))?;
    let mut reports = Vec::new();
    for (on, kind) in [
        (args.shuffle, IndexLayout::Shuffled),
        (args.ais, IndexLayout::AllInStorage),
        (args.decoupled, IndexLayout::Decoupled),
    ] {
        if !on {
            continue;
        }
        let r = if kind == IndexLayout::Decoupled {
            ix.write_decoupled(
                &VectorParams {
                    beta: args.beta,
                    segment_bytes: args.segment_mb.max(1) << 20,
                },
                ctl,
            )?
        } else {
            ix.write_layout(
                kind,
                &ShuffleParams {
                    rounds: args.rounds,
                },
                ctl,
            )?
        };
        let rss = peak_rss_bytes();
        print!(
            "{}: {} ({} records per page; packed.trawl {}) in {:.1} s",
            r.file,
            human_bytes(r.file_bytes),
            r.records_per_page,
            human_bytes(r.packed_bytes),
            r.total_secs
        );
        if let Some(d) = &r.decoupled {
            print!(
                "; {:.3}× packed: graph {} ({:.3}× its {} uncompressed lists, {} pages), \
                 vectors {} ({:.3}× their {} raw; {} of {} chunks XOR-coded, {} raw vectors; \
                 metadata {} in memory)",
                r.file_bytes as f64 / r.packed_bytes.max(1) as f64,
                human_bytes(d.graph_bytes),
                d.graph_bytes as f64 / d.lists_raw_bytes.max(1) as f64,
                human_bytes(d.lists_raw_bytes),
                d.graph_pages,
                human_bytes(d.vectors_bytes),
                d.vectors_bytes as f64 / d.vectors_raw_bytes.max(1) as f64,
                human_bytes(d.vectors_raw_bytes),
                d.xor_chunks,
                d.chunks,
                d.raw_vectors,
                human_bytes(d.vectors_metadata_bytes)
            );
        }
        if let Some(s) = &r.shuffle {
            print!(
                "; OR(G) {:.4} in id order, {:.4} after packing, {:.4} final ({} round(s) kept); \
                 graph in memory {}",
                s.or_identity,
                s.or_packed,
                s.or_final,
                s.rounds_kept,
                human_bytes(r.graph_bytes)
            );
        }
        println!("; peak RSS {}", human_bytes(rss));
        let mut v = serde_json::to_value(&r)?;
        v["peak_rss_bytes"] = rss.into();
        reports.push(v);
    }
    if let Some(path) = &args.report {
        write_json(path, &serde_json::Value::Array(reports))?;
    }
    Ok(())
}

//! `trawl quickstart`: the README's main command. Generates a clustered dataset (unless one is
//! given), computes its ground truth, builds a disk index, searches it with O_DIRECT over a sweep of
//! list sizes and prints recall, QPS, latency and I/O per query.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use trawl::progress::Control;
use trawl::{DType, Metric};

use crate::cmd_gen::GenArgs;
use crate::cmd_gt::GtArgs;
use crate::cmd_index::{BenchArgs, BuildArgs, SearchOptions};

/// Arguments of `trawl quickstart`.
#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// Working folder for the data, ground truth and graph.
    #[arg(long, default_value = "trawl-quickstart")]
    pub dir: PathBuf,
    /// Base vectors to generate.
    #[arg(short = 'n', long, default_value_t = 200_000)]
    pub n: usize,
    /// Queries to generate.
    #[arg(long, default_value_t = 2_000)]
    pub nq: usize,
    /// Dimension.
    #[arg(long, default_value_t = 128)]
    pub dim: usize,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// PQ bytes per vector kept in memory.
    #[arg(long, default_value_t = 32)]
    pub pq_bytes: usize,
    /// Regenerate the data even if the folder already holds it.
    #[arg(long)]
    pub fresh: bool,
}

pub fn run(args: &QuickstartArgs, ctl: &Control) -> Result<()> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let base = args.dir.join("base.fbin");
    let queries = args.dir.join("queries.fbin");
    let gt = args.dir.join("gt.bin");
    let metric = Metric::L2;
    generate(args, &base, &queries, ctl)?;
    ground_truth(args, &base, &queries, &gt, metric, ctl)?;
    let index_dir = args.dir.join("index");
    build_index(args, &base, &index_dir, metric, ctl)?;
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.threads
    };
    println!("[4/4] disk search sweep with O_DIRECT, k = 10, beam width 4, {threads} thread(s)");
    let bench = bench_args(args, index_dir, queries, gt, threads);
    let (rows, _) = crate::cmd_index::bench(&bench, ctl)?;
    crate::cmd_index::print_bench(&rows, 10);
    println!(
        "done in {:.1} s; files in {}/: base.fbin, queries.fbin, gt.bin, index/ (packed.trawl, pq.trawl, pq-codes.trawl, entry.trawl), \
         build-report.json, bench.json, bench.csv",
        t0.elapsed().as_secs_f64(),
        args.dir.display()
    );
    Ok(())
}

/// Step 1: the clustered float32 base vectors and queries, generated into `base` and
/// `queries` (unless both are there already and `--fresh` is not given).
fn generate(args: &QuickstartArgs, base: &Path, queries: &Path, ctl: &Control) -> Result<()> {
    if args.fresh || !base.exists() || !queries.exists() {
        println!(
            "[1/4] generating {} × {} clustered float32 vectors and {} queries",
            args.n, args.dim, args.nq
        );
        crate::cmd_gen::run(
            &GenArgs {
                out: base.to_path_buf(),
                queries: Some(queries.to_path_buf()),
                n: args.n,
                nq: args.nq,
                dim: args.dim,
                dtype: Some(DType::F32),
                clusters: None,
                seed: 42,
                format: None,
            },
            ctl,
        )?;
    } else {
        println!("[1/4] reusing {} and {}", base.display(), queries.display());
    }
    Ok(())
}

/// Step 2: the exact ground truth (k = 100) of the queries, written to `gt` (unless it is
/// there already and `--fresh` is not given).
fn ground_truth(
    args: &QuickstartArgs,
    base: &Path,
    queries: &Path,
    gt: &Path,
    metric: Metric,
    ctl: &Control,
) -> Result<()> {
    if args.fresh || !gt.exists() {
        println!("[2/4] exact ground truth (k = 100)");
        crate::cmd_gt::run(
            &GtArgs {
                labels: None,
                attrs: Vec::new(),
                filter: None,
                filters: None,
                base: base.to_path_buf(),
                queries: queries.to_path_buf(),
                k: 100,
                metric,
                out: gt.to_path_buf(),
                threads: args.threads,
                memory_budget_gb: None,
                radius: None,
            },
            ctl,
        )?;
    } else {
        println!("[2/4] reusing {}", gt.display());
    }
    Ok(())
}

/// Step 3: the disk index of `base` built into `index_dir` (PQ of `--pq-bytes`, Vamana
/// R = 64, L = 100, α = 1.2), its build report beside the data.
fn build_index(
    args: &QuickstartArgs,
    base: &Path,
    index_dir: &Path,
    metric: Metric,
    ctl: &Control,
) -> Result<()> {
    println!(
        "[3/4] building the disk index (PQ {} B/vector, Vamana R = 64, L = 100, α = 1.2)",
        args.pq_bytes
    );
    let defaults = trawl::vamana::VamanaParams::default();
    crate::cmd_index::build(
        &BuildArgs {
            labels: None,
            attrs: Vec::new(),
            label_aware: Default::default(),
            data: base.to_path_buf(),
            index_dir: index_dir.to_path_buf(),
            metric,
            r: 64,
            l: 100,
            alpha: 1.2,
            pq_bytes: Some(args.pq_bytes),
            threads: args.threads,
            memory_budget_gb: None,
            seed: defaults.seed,
            saturate: false,
            visit_order: defaults.order.to_string(),
            query_sample: None,
            opq: false,
            quant: "pq".into(),
            bits: None,
            entry_ratio: trawl::kinds::graph::search::entry::EntryParams::default().ratio,
            entry_degree: trawl::kinds::graph::search::entry::EntryParams::default().r,
            entry_build_list: trawl::kinds::graph::search::entry::EntryParams::default().l,
            entry_sampling: trawl::kinds::graph::search::entry::EntrySampling::Uniform,
            decoupled: false,
            pages: false,
            report: Some(args.dir.join("build-report.json")),
            kind: trawl::kinds::graph::KindName::Graph,
            ivf: Default::default(),
        },
        ctl,
    )?;
    Ok(())
}

/// Step 4's arguments: the sweep of list sizes 10 to 160 at k = 10 with beam search, the
/// packed layout and O_DIRECT, by `threads` threads; its JSON and CSV beside the data.
fn bench_args(
    args: &QuickstartArgs,
    index_dir: PathBuf,
    queries: PathBuf,
    gt: PathBuf,
    threads: usize,
) -> BenchArgs {
    BenchArgs {
        index_dir,
        queries,
        gt,
        k: 10,
        l: vec![10, 20, 40, 80, 160],
        json: Some(args.dir.join("bench.json")),
        csv: Some(args.dir.join("bench.csv")),
        max_queries: None,
        fresh_queries: false,
        ablation: false,
        ablation_out: args.dir.join("ablation"),
        ablation_configs: Vec::new(),
        memgraph_list: 10,
        dw_max_width: 32,
        ablation_cache_nodes: None,
        radius: None,
        range_baseline: false,
        opts: SearchOptions {
            filter: Default::default(),
            strategy: "beam".into(),
            flash_batch: 0,
            staleness: trawl::kinds::graph::search::FlashParams::default().staleness,
            grain: trawl::kinds::graph::search::Grain::Query,
            strict_steps: 0,
            beam_width: trawl::kinds::graph::search::DEFAULT_BEAM_WIDTH,
            pipe_width: trawl::kinds::graph::search::WidthPolicy::Dynamic,
            pipe_start_width: trawl::kinds::graph::search::PipeParams::default().start_width,
            pipe_max_width: trawl::kinds::graph::search::PipeParams::default().max_width,
            interleave: 1,
            entry_list: 0,
            dynamic_width: None,
            page_search: false,
            layout: crate::cmd_index::LayoutArg::Named(trawl::kinds::graph::IndexLayout::Packed),
            threads,
            probe: 0,
            range_slack: trawl::kinds::graph::search::DEFAULT_RANGE_SLACK,
            range_width: trawl::kinds::graph::search::DEFAULT_RANGE_WIDTH,
            range_early_stop: 0,
            memory_budget: None,
            warm: "wait".into(),
            no_entry_index: false,
            cache_nodes: 0,
            cache_policy: trawl::kinds::graph::search::CachePolicy::default(),
            cache_samples: None,
            engine: trawl::io::EngineKind::Auto,
            list_cache_mb: (trawl::kinds::graph::DEFAULT_LIST_CACHE_BYTES >> 20) as f64,
            list_pin: 0.0,
            refine_bits: 0,
            rerank_batch: trawl::kinds::graph::search::RerankParams::default().batch,
            rerank_threshold: trawl::kinds::graph::search::RerankParams::default().threshold,
            no_prefetch: false,
            prefetch_window: 0,
            no_converge_prefetch: false,
            rerank_lookahead: trawl::kinds::graph::search::RerankParams::default().lookahead,
            rerank_bound: 0.0,
            rerank_depth: trawl::kinds::graph::search::rerank::DEFAULT_RERANK_DEPTH,
            rerank_skip_eps: trawl::kinds::graph::search::rerank::DEFAULT_SKIP_EPS,
            buffered: false,
            no_verify: false,
            sqpoll: false,
            taskrun: Default::default(),
            spin_us: None,
            time_parts: false,
            ivf: Default::default(),
        },
    }
}

//! `trawl quickstart`: the README's main command. Generates a clustered dataset (unless one is
//! given), computes its ground truth, builds a Vamana graph, searches it over a sweep of list sizes
//! and prints recall, QPS and latency.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use trawl::progress::Control;
use trawl::{DType, Metric};

use crate::cmd_gen::GenArgs;
use crate::cmd_graph::{self, BuildArgs, SearchArgs};
use crate::cmd_gt::GtArgs;

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
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
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
    let graph = args.dir.join("graph.trawl");
    let metric = Metric::L2;
    if args.fresh || !base.exists() || !queries.exists() {
        println!(
            "[1/4] generating {} × {} clustered float32 vectors and {} queries",
            args.n, args.dim, args.nq
        );
        crate::cmd_gen::run(
            &GenArgs {
                out: base.clone(),
                queries: Some(queries.clone()),
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
    if args.fresh || !gt.exists() {
        println!("[2/4] exact ground truth (k = 100)");
        crate::cmd_gt::run(
            &GtArgs {
                base: base.clone(),
                queries: queries.clone(),
                k: 100,
                metric,
                out: gt.clone(),
                threads: args.threads,
                memory_budget_gb: None,
            },
            ctl,
        )?;
    } else {
        println!("[2/4] reusing {}", gt.display());
    }
    println!("[3/4] building the Vamana graph (R = 64, L = 100, α = 1.2)");
    let defaults = trawl::graph::VamanaParams::default();
    cmd_graph::build(
        &BuildArgs {
            data: base.clone(),
            out: graph.clone(),
            metric,
            r: 64,
            l: 100,
            alpha: 1.2,
            max_candidates: defaults.max_candidates,
            threads: args.threads,
            memory_budget_gb: None,
            seed: defaults.seed,
            shuffle: defaults.shuffle,
            report: Some(args.dir.join("build-report.json")),
        },
        ctl,
    )?;
    println!("[4/4] in-memory search sweep, k = 10");
    let search = SearchArgs {
        data: base,
        graph,
        queries,
        gt,
        metric,
        k: 10,
        l: vec![10, 20, 40, 80, 160],
        threads: args.threads,
        json: Some(args.dir.join("search.json")),
    };
    let rows = cmd_graph::search(&search)?;
    cmd_graph::print_sweep(&rows, 10);
    cmd_graph::write_json(
        search
            .json
            .as_deref()
            .unwrap_or(&args.dir.join("search.json")),
        &serde_json::json!({ "k": 10, "rows": rows }),
    )?;
    println!(
        "done in {:.1} s; files in {}/ (base.fbin, queries.fbin, gt.bin, graph.trawl, build-report.json, search.json)",
        t0.elapsed().as_secs_f64(),
        args.dir.display()
    );
    Ok(())
}

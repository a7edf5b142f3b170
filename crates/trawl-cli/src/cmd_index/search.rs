//! `trawl search`: one list size, results to a file.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use trawl::data::matrix::AnyMatrix;
use trawl::data::GroundTruth;
use trawl::progress::Control;

use super::bench::check_gt;
use super::*;

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
    /// Candidate list size (IVF index: the number of lists probed).
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

/// `trawl search`: one list size, results to a file.
pub fn search(args: &SearchArgs, ctl: &Control) -> Result<()> {
    let queries = crate::runtime::read_vectors(&args.queries)?;
    let out = if trawl::shard::ShardedIndex::is_sharded(&args.index_dir) {
        let (ix, _) = super::shard::open(&args.index_dir, &args.opts, ctl)?;
        super::shard::search_any(&ix, &queries, args.k, args.l, &args.opts)?
    } else if super::ivf::kind_of(&args.index_dir)? == trawl::index::IndexKind::Ivf {
        let (ix, _) = super::ivf::open(&args.index_dir, &args.opts)?;
        let (k, m, o) = (args.k, args.l, &args.opts);
        match &queries {
            AnyMatrix::F32(q) => super::ivf::search(&ix, q, k, m, o)?,
            AnyMatrix::U8(q) => super::ivf::search(&ix, q, k, m, o)?,
            AnyMatrix::I8(q) => super::ivf::search(&ix, q, k, m, o)?,
        }
    } else {
        let (ix, _) = super::open_searchable(&args.index_dir, &args.opts, ctl)?;
        let p = args.opts.params(args.k, args.l)?;
        let (t, i) = (args.opts.threads, args.opts.interleave);
        match &queries {
            AnyMatrix::F32(q) => ix.search(q, &p, t, i)?,
            AnyMatrix::U8(q) => ix.search(q, &p, t, i)?,
            AnyMatrix::I8(q) => ix.search(q, &p, t, i)?,
        }
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

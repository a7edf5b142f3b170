//! `trawl search`: one list size, results to a file.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use trawl::data::GroundTruth;
use trawl::progress::Control;

use super::bench::check_gt;
use super::*;

/// Arguments of `trawl search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Index directory (with --remote: the index's name on the server).
    pub index_dir: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Search on a `trawl serve` server (`http://host:7700` or `https://...`) instead of
    /// opening the index here; the search flags that differ from the defaults are sent as
    /// parameters, the server opens the index with its own.
    #[arg(long)]
    pub remote: Option<String>,
    /// --remote: the API key (else $TRAWL_API_KEY).
    #[arg(long, requires = "remote")]
    pub api_key: Option<String>,
    /// --remote over https: a CA certificate (PEM) to trust besides the usual roots.
    #[arg(long, requires = "remote")]
    pub ca_cert: Option<PathBuf>,
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 10)]
    pub k: usize,
    /// Candidate list size (IVF index: the number of lists probed); default max(100, k)
    /// (IVF: 32, or every list when there are fewer; page-node layout:
    /// max(100, k) / min(capacity, 4) pages, and k may exceed it).
    #[arg(short = 'L', long = "list-size")]
    pub l: Option<usize>,
    /// Write the results here (DiskANN/big-ann ground-truth format: ids and distances).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Ground truth: print recall@k too (with --radius: a range ground truth, `trawl gt
    /// --radius`, and the mean per-query range recall).
    #[arg(long)]
    pub gt: Option<PathBuf>,
    /// Range search: every vector within this radius (trawl's distance: squared L2, negated
    /// inner product, 1 − cos), however many; -o then writes big-ann-benchmarks' range format
    /// (int32 nq, int32 total, nq int32 counts, total int32 ids, total float32 distances).
    #[arg(long, allow_negative_numbers = true, conflicts_with = "remote")]
    pub radius: Option<f32>,
    /// Range search: keep at most this many results per query, the nearest.
    #[arg(long, requires = "radius")]
    pub max_results: Option<usize>,
    #[command(flatten)]
    pub opts: SearchOptions,
}

/// `trawl search`: one list size, results to a file.
pub fn search(args: &SearchArgs, ctl: &Control) -> Result<()> {
    if let Some(radius) = args.radius {
        return search_range(args, radius, ctl);
    }
    let queries = crate::runtime::read_vectors(&args.queries)?;
    let out = if let Some(url) = &args.remote {
        let r = super::remote::Remote {
            url,
            api_key: args.api_key.as_deref(),
            ca_cert: args.ca_cert.as_deref(),
        };
        let name = args.index_dir.to_string_lossy();
        super::remote::search_remote(&r, &name, (args.k, args.l), &args.opts, &queries)?
    } else {
        let (ix, _) = super::open(&args.index_dir, &args.opts, ctl)?;
        super::search_at(&ix, &queries, args.k, args.l, &args.opts)?.0
    };
    let nq = queries.n().max(1) as f64;
    let t = out.total();
    println!(
        "{} queries in {:.3} s ({:.0} QPS, {}); per query: {:.1} pages, {:.1} I/Os, {:.1} hops, {:.1} cache hits",
        queries.n(),
        out.wall_secs,
        nq / out.wall_secs,
        match &args.remote {
            Some(url) => format!("served by {url}"),
            None => format!("{} thread(s)", args.opts.threads),
        },
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
        let recall = trawl::vamana::recall_at_k(&ids_u32(&out)?, args.k, &truth).unwrap_or(0.0);
        println!("recall@{}: {recall:.4}", args.k);
    }
    if let Some(path) = &args.out {
        let res = GroundTruth {
            nq: queries.n(),
            k: args.k,
            ids: ids_u32(&out)?,
            dists: out.dists,
        };
        trawl::data::groundtruth::write_ground_truth(path, &res)?;
        println!("results written to {}", path.display());
    }
    Ok(())
}

/// `trawl search --radius`.
fn search_range(args: &SearchArgs, radius: f32, ctl: &Control) -> Result<()> {
    let queries = crate::runtime::read_vectors(&args.queries)?;
    let (ix, _) = super::open(&args.index_dir, &args.opts, ctl)?;
    let mut out = super::range::range_at(&ix, &queries, radius, args.k, args.l, &args.opts, false)?;
    if let Some(m) = args.max_results {
        out.truncate_each(m);
    }
    let nq = queries.n().max(1) as f64;
    let t = out.total();
    println!(
        "{} queries in {:.3} s ({:.0} QPS, {} thread(s)); {} results ({:.1} per query); per \
         query: {:.1} pages, {:.1} I/Os, {:.1} hops",
        queries.n(),
        out.wall_secs,
        nq / out.wall_secs,
        args.opts.threads,
        out.results.total(),
        out.results.total() as f64 / nq,
        t.io.pages_read as f64 / nq,
        t.io.io_requests as f64 / nq,
        t.traversal.hops as f64 / nq,
    );
    if let Some(gt_path) = &args.gt {
        let truth = trawl::data::read_range_results(gt_path)?;
        let (recall, overall, _) = super::range::range_recall(&out, &truth)?;
        println!("range recall: {recall:.4} (mean per query), {overall:.4} overall; precision 1");
    }
    if let Some(path) = &args.out {
        trawl::data::write_range_results(path, &super::range::to_results(&out))?;
        println!("results written to {}", path.display());
    }
    Ok(())
}

/// The result ids as ground-truth files store them (32-bit; a missing result is `u32::MAX`).
pub(crate) fn ids_u32(out: &trawl::kinds::Hits) -> Result<Vec<u32>> {
    out.ids_u32().map_err(|id| {
        anyhow::anyhow!("id {id} does not fit the 32-bit ids of results and ground-truth files")
    })
}

/// Arguments of `trawl resolve` (hidden): the parameters the search options resolve to.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 10)]
    pub k: usize,
    /// Candidate list size (IVF: lists probed).
    #[arg(short = 'L', long = "list-size")]
    pub l: Option<usize>,
    #[command(flatten)]
    pub opts: SearchOptions,
}

/// `trawl resolve`: opens the index with the search options and prints the open options and
/// search parameters they resolve to (the library's resolution, as Python's
/// `Index._resolved` prints it).
pub fn resolve(args: &ResolveArgs, ctl: &Control) -> Result<()> {
    let (ix, _) = super::open(&args.index_dir, &args.opts, ctl)?;
    let text = args
        .opts
        .options(args.l)
        .resolved(&args.index_dir, &ix, args.k)
        .map_err(super::flag_names)?;
    println!("{text}");
    Ok(())
}

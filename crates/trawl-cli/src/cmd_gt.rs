//! `trawl gt`: exact ground truth in the DiskANN/big-ann format, or with `--radius` exact range
//! ground truth in big-ann-benchmarks' range format.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use trawl::data::groundtruth::write_ground_truth;
use trawl::data::matrix::AnyMatrix;
use trawl::data::{write_range_results, GroundTruth, RangeResults};
use trawl::exact::{self, ExactParams};
use trawl::progress::Control;
use trawl::Metric;

use crate::runtime::with_threads;

/// Arguments of `trawl gt`.
#[derive(Debug, Args)]
pub struct GtArgs {
    /// Base vectors.
    pub base: PathBuf,
    /// Query vectors (same element type and dimension).
    pub queries: PathBuf,
    /// Neighbours per query (ignored with --radius).
    #[arg(short = 'k', default_value_t = 100)]
    pub k: usize,
    /// Distance: l2, ip or cosine.
    #[arg(long, value_parser = crate::parse_metric)]
    pub metric: Metric,
    /// Output file (int32 nq, int32 k, nq·k u32 ids, nq·k f32 distances; with --radius: int32
    /// nq, int32 total, nq int32 counts, total int32 ids, total f32 distances).
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Memory budget for the search state in GiB (the base is streamed).
    #[arg(long)]
    pub memory_budget_gb: Option<f64>,
    /// Filtered ground truth: the base's labels (as `trawl build --labels`).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Filtered ground truth: the base's attributes (as `trawl build --attrs`).
    #[arg(long)]
    pub attrs: Vec<PathBuf>,
    /// Filtered ground truth: one filter for every query (the k nearest matches; fewer when
    /// fewer match, the rest u32::MAX / +inf).
    #[arg(long, conflicts_with = "filters")]
    pub filter: Option<String>,
    /// Filtered ground truth: one filter per query, line i for query i (empty: none).
    #[arg(long)]
    pub filters: Option<PathBuf>,
    /// Range ground truth: every base vector at distance <= R of each query (trawl's distances:
    /// squared L2, negated inner product, 1 - cos; R may be negative for ip), written in
    /// big-ann-benchmarks' range format instead of k-NN. Not combinable with filters.
    #[arg(
        long,
        value_name = "R",
        allow_negative_numbers = true,
        value_parser = parse_radius,
        conflicts_with_all = ["labels", "attrs", "filter", "filters"]
    )]
    pub radius: Option<f32>,
}

/// Parses a finite radius.
fn parse_radius(s: &str) -> Result<f32, String> {
    let r: f32 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if r.is_finite() {
        Ok(r)
    } else {
        Err(format!("the radius must be a finite number, not {s}"))
    }
}

pub fn run(args: &GtArgs, ctl: &Control) -> Result<()> {
    if let Some(radius) = args.radius {
        let res = compute_range(args, radius, ctl)?;
        write_range_results(&args.out, &res)?;
        println!(
            "wrote the range results of {} queries to {}",
            res.nq(),
            args.out.display()
        );
        println!("{}", range_summary(radius, &res));
        return Ok(());
    }
    let gt = compute(args, ctl)?;
    write_ground_truth(&args.out, &gt)?;
    println!(
        "wrote {} × {} neighbours to {}",
        gt.nq,
        gt.k,
        args.out.display()
    );
    Ok(())
}

/// Computes the ground truth (without writing it).
pub fn compute(args: &GtArgs, ctl: &Control) -> Result<GroundTruth> {
    let base = crate::runtime::read_vectors(&args.base)?;
    let queries = crate::runtime::read_vectors(&args.queries)?;
    if args.filter.is_some() || args.filters.is_some() {
        return filtered(args, &base, &queries);
    }
    let mut params = ExactParams::default();
    if let Some(gb) = args.memory_budget_gb {
        params.memory_budget_bytes = (gb * (1u64 << 30) as f64) as usize;
    }
    let t0 = Instant::now();
    let gt = with_threads(args.threads, || -> Result<GroundTruth> {
        Ok(match (&base, &queries) {
            (AnyMatrix::F32(b), AnyMatrix::F32(q)) => {
                trawl::data::validate_finite(b)?;
                trawl::data::validate_finite(q)?;
                exact::knn(b, q, args.k, args.metric, &params, ctl)?
            }
            (AnyMatrix::U8(b), AnyMatrix::U8(q)) => {
                exact::knn(b, q, args.k, args.metric, &params, ctl)?
            }
            (AnyMatrix::I8(b), AnyMatrix::I8(q)) => {
                exact::knn(b, q, args.k, args.metric, &params, ctl)?
            }
            _ => bail!(
                "queries are {} but the base is {}: element types must match",
                queries.dtype(),
                base.dtype()
            ),
        })
    })??;
    let secs = t0.elapsed().as_secs_f64();
    eprintln!(
        "ground truth: {} queries × {} base in {:.2} s ({:.0} queries/s)",
        queries.n(),
        base.n(),
        secs,
        queries.n() as f64 / secs.max(1e-9)
    );
    Ok(gt)
}

/// The filtered ground truth of `--filter` / `--filters`.
fn filtered(args: &GtArgs, base: &AnyMatrix, queries: &AnyMatrix) -> Result<GroundTruth> {
    use crate::cmd_index::filter::read_filter_file;
    use trawl::filter::{truth::knn_filtered, Filters};
    let Some(attrs) =
        crate::cmd_index::read_attributes(args.labels.as_deref(), &args.attrs, base.n())?
    else {
        bail!("--filter / --filters need the base's attributes: --labels and/or --attrs");
    };
    let one;
    let per_query;
    let filters = match (&args.filter, &args.filters) {
        (Some(text), _) => {
            one = trawl::filter::parse(text).map_err(|e| anyhow::anyhow!("--filter: {e}"))?;
            Filters::All(&one)
        }
        (None, Some(path)) => {
            per_query = read_filter_file(path)?;
            Filters::PerQuery(&per_query)
        }
        (None, None) => Filters::None,
    };
    let t0 = Instant::now();
    let gt = with_threads(args.threads, || -> Result<GroundTruth> {
        Ok(match (base, queries) {
            (AnyMatrix::F32(b), AnyMatrix::F32(q)) => {
                trawl::data::validate_finite(b)?;
                trawl::data::validate_finite(q)?;
                knn_filtered(b, q, args.k, args.metric, &attrs, filters)?
            }
            (AnyMatrix::U8(b), AnyMatrix::U8(q)) => {
                knn_filtered(b, q, args.k, args.metric, &attrs, filters)?
            }
            (AnyMatrix::I8(b), AnyMatrix::I8(q)) => {
                knn_filtered(b, q, args.k, args.metric, &attrs, filters)?
            }
            _ => bail!(
                "queries are {} but the base is {}: element types must match",
                queries.dtype(),
                base.dtype()
            ),
        })
    })??;
    eprintln!(
        "filtered ground truth: {} queries × {} base in {:.2} s",
        queries.n(),
        base.n(),
        t0.elapsed().as_secs_f64()
    );
    Ok(gt)
}

/// Computes the range ground truth of `--radius` (without writing it).
pub fn compute_range(args: &GtArgs, radius: f32, ctl: &Control) -> Result<RangeResults> {
    let base = crate::runtime::read_vectors(&args.base)?;
    let queries = crate::runtime::read_vectors(&args.queries)?;
    let t0 = Instant::now();
    let res = with_threads(args.threads, || -> Result<RangeResults> {
        Ok(match (&base, &queries) {
            (AnyMatrix::F32(b), AnyMatrix::F32(q)) => {
                exact::range_search(b, q, args.metric, radius, ctl)?
            }
            (AnyMatrix::U8(b), AnyMatrix::U8(q)) => {
                exact::range_search(b, q, args.metric, radius, ctl)?
            }
            (AnyMatrix::I8(b), AnyMatrix::I8(q)) => {
                exact::range_search(b, q, args.metric, radius, ctl)?
            }
            _ => bail!(
                "queries are {} but the base is {}: element types must match",
                queries.dtype(),
                base.dtype()
            ),
        })
    })??;
    let secs = t0.elapsed().as_secs_f64();
    eprintln!(
        "range ground truth: {} queries × {} base in {:.2} s ({:.0} queries/s)",
        queries.n(),
        base.n(),
        secs,
        queries.n() as f64 / secs.max(1e-9)
    );
    Ok(res)
}

/// One line: queries, results in all, and the distribution of the per-query counts.
fn range_summary(radius: f32, res: &RangeResults) -> String {
    let mut counts: Vec<usize> = res.lims.windows(2).map(|w| w[1] - w[0]).collect();
    counts.sort_unstable();
    let head = format!(
        "radius {radius}: {} queries, {} results",
        res.nq(),
        res.total()
    );
    let Some(&max) = counts.last() else {
        return head;
    };
    // Nearest-rank percentile: the smallest count with at least `p` of the queries at or below.
    let pct =
        |p: f64| counts[((p * counts.len() as f64).ceil() as usize).clamp(1, counts.len()) - 1];
    let zero = counts.iter().take_while(|&&c| c == 0).count();
    format!(
        "{head}; per query: min {}, median {}, p90 {}, p99 {}, max {max}; {zero} queries with none",
        counts[0],
        pct(0.5),
        pct(0.9),
        pct(0.99),
    )
}

//! `trawl gt`: exact ground truth in the DiskANN/big-ann format.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use trawl::data::groundtruth::write_ground_truth;
use trawl::data::matrix::AnyMatrix;
use trawl::data::GroundTruth;
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
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 100)]
    pub k: usize,
    /// Distance: l2, ip or cosine.
    #[arg(long, value_parser = crate::parse_metric)]
    pub metric: Metric,
    /// Output file (int32 nq, int32 k, nq·k u32 ids, nq·k f32 distances).
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Memory budget for the search state in GiB (the base is streamed).
    #[arg(long)]
    pub memory_budget_gb: Option<f64>,
}

pub fn run(args: &GtArgs, ctl: &Control) -> Result<()> {
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

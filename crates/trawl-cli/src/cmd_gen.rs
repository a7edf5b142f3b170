//! `trawl gen`: seeded synthetic vectors and held-out queries.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use trawl::data::format::Format;
use trawl::progress::Control;
use trawl::synth::{self, SynthParams};
use trawl::DType;

/// Arguments of `trawl gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Output base vectors (format from the extension: .fbin/.u8bin/.i8bin, .fvecs/.bvecs, .npy).
    pub out: PathBuf,
    /// Output held-out queries (same format).
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Number of base vectors.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    pub n: usize,
    /// Number of queries.
    #[arg(long, default_value_t = 1_000)]
    pub nq: usize,
    /// Dimension.
    #[arg(long, default_value_t = 128)]
    pub dim: usize,
    /// Element type: f32, u8 or i8 (default: implied by the extension, else f32).
    #[arg(long, value_parser = crate::parse_dtype)]
    pub dtype: Option<DType>,
    /// Number of mixture components (clusters).
    #[arg(long)]
    pub clusters: Option<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Force the file format (bin, vecs, npy) instead of the extension's.
    #[arg(long)]
    pub format: Option<Format>,
}

pub fn run(args: &GenArgs, ctl: &Control) -> Result<()> {
    let (ext_format, ext_dtype) = Format::from_path(&args.out).unzip();
    let ext_dtype = ext_dtype.flatten();
    let format = match (args.format, ext_format) {
        (Some(f), _) | (None, Some(f)) => f,
        (None, None) => bail!(
            "cannot tell the format of {} from its extension: use .fbin/.u8bin/.i8bin, .fvecs/.bvecs, .npy or --format",
            args.out.display()
        ),
    };
    let dtype = match (args.dtype, ext_dtype) {
        (Some(d), Some(e)) if d != e => bail!(
            "--dtype {d} conflicts with the extension of {}, which means {e}",
            args.out.display()
        ),
        (Some(d), _) | (None, Some(d)) => d,
        (None, None) => DType::F32,
    };
    let nq = if args.queries.is_some() { args.nq } else { 0 };
    let mut params = SynthParams::new(args.n, nq, args.dim, dtype, args.seed);
    if let Some(c) = args.clusters {
        params.clusters = c;
    }
    let t0 = Instant::now();
    synth::generate_to_file(&params, &args.out, args.queries.as_deref(), format, ctl)?;
    println!(
        "wrote {} × {} {} vectors to {}{} in {:.1} s",
        args.n,
        args.dim,
        dtype,
        args.out.display(),
        args.queries
            .as_ref()
            .map(|q| format!(" and {} queries to {}", args.nq, q.display()))
            .unwrap_or_default(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

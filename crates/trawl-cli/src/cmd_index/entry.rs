//! `trawl entry`: (re)build the in-memory entry index of a disk index.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use trawl::kinds::graph::search::entry::{EntryParams, EntrySampling};
use trawl::kinds::graph::{DiskIndex, OpenOptions};
use trawl::progress::Control;

use crate::runtime::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes};

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
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
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
    if args.degree == 0 || args.degree > u16::MAX as usize {
        bail!("--degree {} must be between 1 and 65535", args.degree);
    }
    if args.build_list == 0 || args.build_list > trawl::vamana::MAX_BUILD_L {
        bail!(
            "--build-list {} must be between 1 and {}",
            args.build_list,
            trawl::vamana::MAX_BUILD_L
        );
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

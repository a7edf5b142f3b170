//! `trawl layout`: write another disk layout of an index's graph.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use trawl::kinds::graph::layout::decoupled::vectors::VectorParams;
use trawl::kinds::graph::{DiskIndex, IndexLayout, OpenOptions, ShuffleParams};
use trawl::progress::Control;

use crate::runtime::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes};

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
    /// (XOR with a base vector per chunk when it helps, Huffman per segment and byte lane);
    /// then the 8-bit refinement codes (refine.trawl) with what sample searches measured
    /// them to save, loaded by --refine-bits 8 and planned by --memory-budget.
    #[arg(long)]
    pub decoupled: bool,
    /// Decoupled layout: chunk-metadata memory over vector bytes (β); sets the chunk size.
    #[arg(long, default_value_t = VectorParams::default().beta)]
    pub beta: f64,
    /// Decoupled layout: uncompressed MiB per segment (each has its own code tables).
    #[arg(long, default_value_t = VectorParams::default().segment_bytes >> 20)]
    pub segment_mb: u64,
    /// Decoupled layout: order of the vectors in vectors.trawl — `graph` (PageShuffle's
    /// locality order sized to the vectors a page holds, so a query's re-rank candidates
    /// share pages; each node's position is stored beside its list) or `id`.
    #[arg(long, default_value = "graph")]
    pub vector_order: trawl::kinds::graph::layout::decoupled::vectors::VectorOrder,
    /// Most PageShuffle refinement rounds after the neighbour packing.
    #[arg(long, default_value_t = ShuffleParams::default().rounds)]
    pub rounds: usize,
    /// Write the reports as JSON here (a list, one per layout).
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// `trawl layout`: writes other disk layouts of an index's graph beside it.
pub fn layout(args: &LayoutArgs, ctl: &Control) -> Result<()> {
    if args.rounds > ShuffleParams::MAX_ROUNDS {
        bail!(
            "--rounds {} must be at most {}",
            args.rounds,
            ShuffleParams::MAX_ROUNDS
        );
    }
    if args.segment_mb > 1 << 20 {
        bail!(
            "--segment-mb {} must be at most 1048576 (1 TiB)",
            args.segment_mb
        );
    }
    if !(args.beta.is_finite() && args.beta > 0.0) {
        bail!("--beta {} must be a positive number", args.beta);
    }
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
                    order: args.vector_order,
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
                 metadata {} in memory; vectors in {} order, {} per page)",
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
                human_bytes(d.vectors_metadata_bytes),
                match d.vector_order {
                    trawl::kinds::graph::layout::decoupled::vectors::VectorOrder::Id => "id",
                    trawl::kinds::graph::layout::decoupled::vectors::VectorOrder::Graph => "graph",
                },
                d.vectors_per_page
            );
            print!(
                "; refinement codes {} (refine.trawl: {:.1} of {:.1} pages per sample search \
                 saved, {:.1} s)",
                human_bytes(d.refine_bytes),
                d.refine_savings.saved(),
                d.refine_savings.pages_without,
                d.refine_secs
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

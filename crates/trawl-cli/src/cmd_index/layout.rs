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
    /// Write the page-node layout (pages.trawl, PageANN): similar vectors grouped into 4 KiB
    /// page nodes (a centre and its nearest vectors within a few hops of the graph) with one
    /// merged, Elias-Fano coded neighbour list per page; searched with --layout pages.
    #[arg(long)]
    pub pages: bool,
    /// Page-node layout: vectors per page (0: the most whose list keeps --page-min-degree
    /// entries per vector).
    #[arg(long, default_value_t = 0)]
    pub page_capacity: usize,
    /// Page-node layout: list entries a page needs per vector when the capacity is chosen
    /// (0: half the graph's largest degree).
    #[arg(long, default_value_t = 0)]
    pub page_min_degree: usize,
    /// Page-node layout: hops of the graph around a page's centre its members come from
    /// (0: 2 for graphs of degree ≥ 23, else 3).
    #[arg(long, default_value_t = 0)]
    pub page_hops: usize,
    /// Page-node layout: most entries of a page's list (0: four times the graph's degree; never
    /// more than fit).
    #[arg(long, default_value_t = 0)]
    pub page_degree: usize,
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
    if !args.shuffle && !args.ais && !args.decoupled && !args.pages {
        bail!("choose a layout to write: --shuffle, --ais, --decoupled and/or --pages");
    }
    let ix = DiskIndex::open(&args.index_dir, OpenOptions::default())
        .with_context(|| format!("opening {}", args.index_dir.display()))?;
    let mut reports = Vec::new();
    for (on, kind) in [
        (args.shuffle, IndexLayout::Shuffled),
        (args.ais, IndexLayout::AllInStorage),
        (args.decoupled, IndexLayout::Decoupled),
        (args.pages, IndexLayout::Pages),
    ] {
        if !on {
            continue;
        }
        let r = if kind == IndexLayout::Pages {
            ix.write_pages(
                &trawl::kinds::graph::layout::pages::build::PageParams {
                    capacity: args.page_capacity,
                    min_degree: args.page_min_degree,
                    hops: args.page_hops,
                    max_degree: args.page_degree,
                },
                ctl,
            )?
        } else if kind == IndexLayout::Decoupled {
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
        print_report(&r);
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

/// Prints what a layout write did (without a newline: the caller ends the line).
fn print_report(r: &trawl::kinds::graph::LayoutReport) {
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
    if let Some(p) = &r.pages {
        print!(
            "; {} page nodes of up to {} vectors ({:.1}% full, {} short; members within {} \
             hops), lists of {:.1} entries on average (largest {}), {} page-level edges of \
             the graph not represented on {} pages; {:.3}× packed",
            p.pages,
            p.capacity,
            100.0 * p.fill,
            p.underfull,
            p.hops,
            p.mean_degree,
            p.edges.max_degree,
            p.edges.missing_page_edges,
            p.edges.truncated_pages,
            r.file_bytes as f64 / r.packed_bytes.max(1) as f64,
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
}

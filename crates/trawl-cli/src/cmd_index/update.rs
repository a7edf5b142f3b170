//! `trawl insert`, `trawl delete`, `trawl merge`: streaming updates of a disk index.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use trawl::data::matrix::AnyMatrix;
use trawl::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
use trawl::kinds::graph::updates::merge::{
    DeleteRepair, InNeighbours, InPlaceParams, SegmentPolicy,
};
use trawl::kinds::graph::{IndexLayout, OpenOptions};
use trawl::progress::Control;

use crate::runtime::human_bytes;

/// Arguments of `trawl insert`.
#[derive(Debug, Args)]
pub struct InsertArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Vectors to insert (any format `trawl` reads; the index's element type and dimension).
    pub data: PathBuf,
    /// Ids of the vectors, one decimal id per line (default: new ids are assigned and
    /// printed).
    #[arg(long)]
    pub ids: Option<PathBuf>,
    /// Replace the vectors of ids already in the index (upsert) instead of refusing them.
    #[arg(long)]
    pub upsert: bool,
    /// Labels of the vectors (as `trawl build --labels`: one line per vector, labels
    /// separated by commas). An upserted vector's labels and attributes replace its old
    /// ones; without --labels / --attrs it has none.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Attributes of the vectors, JSON lines (as `trawl build --attrs`). A name keeps its
    /// meaning: a numeric field of the index cannot arrive as a label key, nor the reverse.
    #[arg(long)]
    pub attrs: Vec<PathBuf>,
}

/// Arguments of `trawl delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Ids to delete, one decimal id per line.
    #[arg(long, required_unless_present = "id")]
    pub ids: Option<PathBuf>,
    /// Ids to delete, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub id: Vec<u64>,
}

/// Arguments of `trawl merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Merge the decoupled layout (DecoupleVS): only `graph.trawl` is rewritten, the new
    /// vectors go to a new vector segment, and the page-packed layouts are dropped. The
    /// default for an index whose only layout is the decoupled one.
    #[arg(long)]
    pub decoupled: bool,
    /// Decoupled merge: garbage-collect a vector segment whose share of dead vectors passes
    /// this (its live vectors are rewritten into the new segment).
    #[arg(long, default_value_t = 0.2, value_parser = parse_share)]
    pub gc_threshold: f64,
    /// Decoupled merge: at most this many vector segments (the smallest are folded into
    /// the new one past it).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_segments: u32,
    /// How deleted vectors leave the graph: `in-place` (every node pointing to a deleted one,
    /// from the merge's pass over the lists, swaps that edge for at most `--replace` edges to
    /// the deleted node's out-neighbours), `in-place-search` (IP-DiskANN: the same for the
    /// nodes a search for the deleted vector finds; the other edges are dropped) or
    /// `consolidate` (FreshDiskANN: every such node is re-pruned over the deleted nodes'
    /// neighbours).
    #[arg(long, default_value = "in-place", value_parser = ["in-place", "in-place-search", "consolidate"])]
    pub deletes: String,
    /// In-place deletes: edges added per edge to a deleted node.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub replace: u32,
    /// The merge carries the hot-node order (`hot.trawl`, what a node cache is chosen by)
    /// over, the deleted vectors taken out, until the vectors deleted or inserted since its
    /// last ranking would pass this share of the index; then it ranks afresh by sample
    /// searches. 0 ranks afresh at every merge.
    #[arg(long, default_value_t = trawl::kinds::graph::hot::RERANK_SHARE, value_parser = parse_share)]
    pub hot_rerank: f64,
}

fn parse_share(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not a share between 0 and 1"))
    }
}

/// Reads ids, one per line (blank lines and `#` comments skipped).
fn read_ids(path: &Path) -> Result<Vec<u64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut ids = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        ids.push(
            t.parse::<u64>().with_context(|| {
                format!("{}: line {}: {t:?} is not an id", path.display(), i + 1)
            })?,
        );
    }
    Ok(ids)
}

/// The layout a writer opens: the decoupled one when asked, else the search commands' choice
/// (packed, or decoupled for an index a decoupled merge left without `packed.trawl`).
fn writer_layout(dir: &Path, decoupled: bool) -> IndexLayout {
    if decoupled {
        IndexLayout::Decoupled
    } else {
        super::resolve_layout(dir, IndexLayout::Packed)
    }
}

fn open_writer(dir: &Path) -> Result<LiveIndex> {
    open_writer_on(dir, writer_layout(dir, false))
}

fn open_writer_on(dir: &Path, layout: IndexLayout) -> Result<LiveIndex> {
    let opts = OpenOptions {
        direct: false,
        layout,
        ..OpenOptions::default()
    };
    LiveIndex::open(dir, opts, Access::ReadWrite)
        .with_context(|| format!("opening {} for writing", dir.display()))
}

/// `trawl insert`.
pub fn insert(args: &InsertArgs, _ctl: &Control) -> Result<()> {
    let data = crate::runtime::read_vectors(&args.data)?;
    let ids = args.ids.as_deref().map(read_ids).transpose()?;
    if args.upsert && ids.is_none() {
        bail!("--upsert needs --ids (the vectors to replace)");
    }
    let attrs = super::build::read_attributes(args.labels.as_deref(), &args.attrs, data.n())?;
    let attrs = attrs.as_deref();
    let ix = open_writer(&args.index_dir)?;
    let t0 = std::time::Instant::now();
    let up = ids.as_deref().unwrap_or(&[]);
    let got = match (&data, args.upsert) {
        (AnyMatrix::F32(m), false) => ix.insert_with(ids.as_deref(), m.as_slice(), attrs),
        (AnyMatrix::U8(m), false) => ix.insert_with(ids.as_deref(), m.as_slice(), attrs),
        (AnyMatrix::I8(m), false) => ix.insert_with(ids.as_deref(), m.as_slice(), attrs),
        (AnyMatrix::F32(m), true) => ix.upsert_with(up, m.as_slice(), attrs),
        (AnyMatrix::U8(m), true) => ix.upsert_with(up, m.as_slice(), attrs),
        (AnyMatrix::I8(m), true) => ix.upsert_with(up, m.as_slice(), attrs),
    }
    .with_context(|| format!("inserting {}", args.data.display()))?;
    println!(
        "{} {} vectors into {} in {:.2} s (logged and synced); {} live, {} in the delta \
         awaiting a merge",
        if args.upsert { "upserted" } else { "inserted" },
        got.len(),
        args.index_dir.display(),
        t0.elapsed().as_secs_f64(),
        ix.len(),
        ix.delta_len()
    );
    if args.ids.is_none() {
        if let (Some(a), Some(b)) = (got.first(), got.last()) {
            println!("assigned ids {a}..={b}");
        }
    }
    Ok(())
}

/// `trawl delete`.
pub fn delete(args: &DeleteArgs, _ctl: &Control) -> Result<()> {
    let mut ids = args.id.clone();
    if let Some(p) = &args.ids {
        ids.extend(read_ids(p)?);
    }
    let ix = open_writer(&args.index_dir)?;
    let r = ix.delete(&ids)?;
    println!(
        "deleted {} ids from {} (logged and synced); {} live",
        r.deleted,
        args.index_dir.display(),
        ix.len()
    );
    Ok(())
}

/// `trawl merge`.
pub fn merge(args: &MergeArgs, ctl: &Control) -> Result<()> {
    let layout = writer_layout(&args.index_dir, args.decoupled);
    let ix = open_writer_on(&args.index_dir, layout)?;
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("making the thread pool")?;
    let o = MergeOptions {
        threads,
        nice: 0,
        segments: SegmentPolicy {
            gc_dead_share: args.gc_threshold,
            max_segments: args.max_segments as usize,
        },
        deletes: match args.deletes.as_str() {
            "consolidate" => DeleteRepair::Consolidate,
            d => DeleteRepair::InPlace(InPlaceParams {
                replace: args.replace as usize,
                in_neighbours: if d == "in-place-search" {
                    InNeighbours::Search { l: 0 }
                } else {
                    InNeighbours::Exact
                },
                ..InPlaceParams::default()
            }),
        },
        hot_rerank_share: args.hot_rerank,
    };
    let r = pool.install(|| ix.merge_with(&o, ctl))?;
    println!(
        "merged into {}: {} deleted, {} inserted, {} lists repaired, {} patched, {} changed \
         ({} of {} pages); {} slots ({} free); {:.2} s (read {:.2}, delete {:.2}, insert {:.2}, \
         patch {:.2}, other files {:.2}); {} written; peak RSS {}",
        args.index_dir.display(),
        r.deleted,
        r.inserted,
        r.repaired,
        r.patched,
        r.touched_nodes,
        r.touched_pages,
        r.graph_pages,
        r.slots,
        r.holes,
        r.total_secs,
        r.read_secs,
        r.delete_secs,
        r.insert_secs,
        r.patch_secs,
        r.finish_secs,
        human_bytes(r.bytes_written),
        human_bytes(r.peak_rss_bytes)
    );
    if !r.recall.is_empty() {
        println!(
            "recall monitor: {} ({} of its vectors searched as held-out queries)",
            crate::cmd_info::recall_points(&r.recall),
            r.recall_samples
        );
    }
    println!(
        "hot-node order: {}",
        if r.hot_carried {
            format!(
                "carried over ({} vectors deleted or inserted since its ranking)",
                r.hot_changed
            )
        } else {
            "ranked afresh".into()
        }
    );
    if let Some(w) = &r.recall_warning {
        eprintln!("warning: {w}");
    }
    if let Some(seg) = &r.segments {
        println!(
            "decoupled: graph rewritten; {}; {} segments ({}){}",
            match &seg.written {
                Some(name) => format!(
                    "{name} written ({} vectors, {} moved from collected segments, {})",
                    seg.written_vectors,
                    seg.moved_vectors,
                    human_bytes(seg.written_bytes)
                ),
                None => "no vector segment written".into(),
            },
            seg.segments,
            human_bytes(seg.segment_bytes),
            if seg.collected.is_empty() {
                String::new()
            } else {
                format!(
                    "; collected {}",
                    seg.collected
                        .iter()
                        .map(|(n, d)| format!("{n} ({:.0}% dead)", d * 100.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    if let Some(p) = &args.report {
        crate::runtime::write_json(p, &r)?;
    }
    Ok(())
}

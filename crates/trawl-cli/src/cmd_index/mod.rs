//! `trawl build | search | bench | entry | layout`: the disk index, one file per command;
//! this file holds what `search` and `bench` share (the search options and opening an index).

mod bench;
mod build;
mod entry;
pub(crate) mod ivf;
mod layout;
mod search;
pub(crate) mod shard;
mod update;

pub use bench::{bench, print_bench, print_parts, BenchArgs, BenchRow};
pub(crate) use bench::{load_queries, run_sweep};
pub use build::{build, build_any, BuildArgs, DEFAULT_PQ_BYTES};
pub use entry::{entry, EntryArgs};
pub use layout::{layout, LayoutArgs};
pub use search::{search, SearchArgs};
pub use update::{delete, insert, merge, DeleteArgs, InsertArgs, MergeArgs};

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use trawl::index::{open_any, AnyIndex, DiskIndex, IndexLayout, OpenOptions};
use trawl::io::EngineKind;
use trawl::progress::Control;
use trawl::search::flash::DEFAULT_FLASH_BATCH;
use trawl::search::{
    BeamParams, CachePolicy, FlashParams, Grain, PipeParams, RerankParams, SearchError,
    SearchParams, Strategy, WidthPolicy, WidthSchedule, DEFAULT_BEAM_WIDTH,
};

use crate::runtime::human_bytes;

/// How an index is opened and searched: options shared by `search` and `bench`.
#[derive(Debug, Args, Clone)]
pub struct SearchOptions {
    /// Search strategy: beam (DiskANN's rounds of W reads), pipe (PipeANN's pipelined
    /// search) or flash (FlashANNS's batch search: lists on the accelerator of --accel, reads
    /// chosen --staleness steps ahead).
    #[arg(long, default_value = "beam", value_parser = ["beam", "pipe", "flash"])]
    pub strategy: String,
    /// Flash search: queries in flight per thread (0 = 32, or 1024 with --accel gpu).
    #[arg(long, default_value_t = 0)]
    pub flash_batch: usize,
    /// Flash search: steps a read is chosen ahead (0 = strict best-first; reads in flight per
    /// query: staleness + 1).
    #[arg(long, default_value_t = FlashParams::default().staleness)]
    pub staleness: usize,
    /// Flash search: a query resumes when its own read lands (query) or when every read of
    /// the oldest step has landed (kernel, a batch-wide barrier).
    #[arg(long, default_value = "query", value_parser = |s: &str| s.parse::<Grain>())]
    pub grain: Grain,
    /// Flash search: steps each query takes strictly before its reads are chosen ahead (0 =
    /// from the start, as FlashANNS).
    #[arg(long, default_value_t = 0)]
    pub strict_steps: usize,
    /// Records read per round trip (beam width W; beam search).
    #[arg(short = 'W', long, default_value_t = DEFAULT_BEAM_WIDTH)]
    pub beam_width: usize,
    /// PipeSearch width policy: dynamic (PipeANN's default), static (by explored position) or
    /// fixed (always --pipe-max-width).
    #[arg(long, default_value = "dynamic", value_parser = |s: &str| s.parse::<WidthPolicy>())]
    pub pipe_width: WidthPolicy,
    /// PipeSearch starting width (dynamic policy).
    #[arg(long, default_value_t = PipeParams::default().start_width)]
    pub pipe_start_width: usize,
    /// PipeSearch largest width.
    #[arg(long, default_value_t = PipeParams::default().max_width)]
    pub pipe_max_width: usize,
    /// Beam search: widen the beam with the explored position (OctopusANN's DynamicWidth),
    /// capped by -W. Takes a schedule `[STEP:]W1,W2,...` (a width per STEP explored positions,
    /// default step 5); given without a value: 4,4,8,8,16,16,24,24,32.
    #[arg(long, num_args = 0..=1, default_missing_value = "5:4,4,8,8,16,16,24,24,32",
          value_parser = |s: &str| s.parse::<WidthSchedule>())]
    pub dynamic_width: Option<WidthSchedule>,
    /// Beam search: score every record on each page read and expand any of them later without
    /// another read (Starling's in-page search, OctopusANN's PageSearch).
    #[arg(long)]
    pub page_search: bool,
    /// Queries each thread keeps in flight (throughput mode above 1; works with both
    /// strategies).
    #[arg(long, default_value_t = 1)]
    pub interleave: usize,
    /// List size of the in-memory entry-index search that seeds each query (0 = start at the
    /// medoid; needs an index built with an entry index).
    #[arg(long, default_value_t = 0)]
    pub entry_list: usize,
    /// Search threads.
    #[arg(long, default_value_t = 1, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Sharded index: search each query in its P nearest shards by centroid distance (0 = all
    /// shards).
    #[arg(long, default_value_t = 0)]
    pub probe: usize,
    /// Nodes kept in the static in-memory cache.
    #[arg(long, default_value_t = 0)]
    pub cache_nodes: usize,
    /// How cached nodes are chosen: bfs (from the entry point) or freq (most read by sample
    /// searches).
    #[arg(long, default_value = "freq", value_parser = |s: &str| s.parse::<CachePolicy>())]
    pub cache_policy: CachePolicy,
    /// Sample searches run to choose a frequency cache (indexed vectors as queries).
    #[arg(long)]
    pub cache_samples: Option<usize>,
    /// I/O engine: auto (io_uring, else pread), uring, pread, memory (the index file in RAM, no
    /// I/O), or sim:LATENCY_US[:IOPS] (the file in RAM, each read completing after a modelled
    /// device latency under an IOPS ceiling; e.g. sim:80:500000).
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<EngineKind>())]
    pub engine: EngineKind,
    /// Disk layout to search: packed (as built), shuffle (PageShuffle), ais (All-in-Storage)
    /// or decoupled (DecoupleVS: compressed lists and vectors in two files); all but packed
    /// are written by `trawl layout`. An index left with the decoupled layout alone (after a
    /// decoupled merge) is searched on it when packed is asked for.
    #[arg(long, default_value = "packed", value_parser = |s: &str| s.parse::<IndexLayout>())]
    pub layout: IndexLayout,
    /// Decoupled layout: memory for the LRU cache of compressed neighbour lists, in MiB.
    #[arg(long, default_value_t = (trawl::index::DEFAULT_LIST_CACHE_BYTES >> 20) as f64)]
    pub list_cache_mb: f64,
    /// Decoupled layout: share of the list cache pinned by value — the lists sample searches
    /// (--cache-samples of them, 20,000 by default; PQ-reconstructed indexed vectors) read
    /// most, stored at their exact size; the rest of the budget stays LRU. 0 = all LRU.
    #[arg(long, default_value_t = 0.0)]
    pub list_pin: f64,
    /// Decoupled layout: hold every vector in memory as a scalar code of 4 or 8 bits per
    /// dimension, built at open from the vector files, and order the re-rank by its distances
    /// instead of PQ's (fewer vector reads where PQ is coarse; costs dim/2 or dim bytes + 4
    /// per vector of memory, reported as refine_bytes). 0 = off.
    #[arg(long, default_value_t = 0)]
    pub refine_bits: u8,
    /// Decoupled layout: candidates per re-rank batch (B), also the prefetch's stability
    /// window.
    #[arg(long, default_value_t = RerankParams::default().batch)]
    pub rerank_batch: usize,
    /// Decoupled layout: stop re-ranking after a batch whose share of top-k changes is below
    /// this (0 re-ranks every expanded node, as the packed layouts do).
    #[arg(long, default_value_t = RerankParams::default().threshold)]
    pub rerank_threshold: f32,
    /// Decoupled layout: do not prefetch vectors during the traversal.
    #[arg(long)]
    pub no_prefetch: bool,
    /// Decoupled layout: expansions in a row that leave the PQ top-(k+B) unchanged before the
    /// prefetch starts (0 = B, the paper's rule).
    #[arg(long, default_value_t = 0)]
    pub prefetch_window: usize,
    /// Decoupled layout: do not prefetch when the traversal is ending (beam: a round finds
    /// fewer unexpanded candidates than its width; pipe: none is left); only DecoupleVS's
    /// stability rule then starts the prefetch.
    #[arg(long)]
    pub no_converge_prefetch: bool,
    /// Decoupled layout: re-rank batches read ahead of the one being processed.
    #[arg(long, default_value_t = RerankParams::default().lookahead)]
    pub rerank_lookahead: usize,
    /// Decoupled layout: stop the re-rank by an error bound instead of the batches' benefit:
    /// a candidate is read only if its PQ distance is within M × (the query's largest PQ
    /// overestimate so far) of the k-th exact distance; 0 = the benefit rule
    /// (--rerank-batch, --rerank-threshold).
    #[arg(long, default_value_t = 0.0)]
    pub rerank_bound: f32,
    /// Decoupled layout: most vector reads in flight after the traversal (0 = the strategy's
    /// width, as before).
    #[arg(long, default_value_t = trawl::search::rerank::DEFAULT_RERANK_DEPTH)]
    pub rerank_depth: usize,
    /// Read through the page cache instead of O_DIRECT (figures are then not disk figures).
    #[arg(long)]
    pub buffered: bool,
    /// Skip the CRC check of every page read.
    #[arg(long)]
    pub no_verify: bool,
    /// io_uring submission-queue polling by a kernel thread (costs a core).
    #[arg(long)]
    pub sqpoll: bool,
    /// io_uring: how completions reach a search thread: interrupt (the kernel's default, an
    /// interrupt per completion), coop or defer (no interrupt; the thread collects pending
    /// completions with one system call when it looks for them).
    #[arg(long, default_value_t = trawl::io::TaskRun::default())]
    pub taskrun: trawl::io::TaskRun,
    /// Microseconds each search thread polls for a read before blocking (default: 200 when
    /// the threads do not outnumber the cores, else 0; 0 always blocks at once).
    #[arg(long)]
    pub spin_us: Option<u64>,
    /// Time the parts of every query (I/O calls, polling, page checks, PQ table, visited
    /// checks, PQ scoring, exact distances, entry index) and print the CPU breakdown (costs a
    /// few percent of CPU).
    #[arg(long)]
    pub time_parts: bool,
    #[command(flatten)]
    pub ivf: ivf::IvfSearchArgs,
}

impl SearchOptions {
    /// The flash search's parameters.
    pub fn flash(&self) -> FlashParams {
        FlashParams {
            batch: match (self.flash_batch, self.ivf.accel) {
                (0, trawl::accel::AccelKind::Gpu) => 1024,
                (0, _) => DEFAULT_FLASH_BATCH,
                (b, _) => b,
            },
            staleness: self.staleness,
            grain: self.grain,
            strict_steps: self.strict_steps,
            ..FlashParams::default()
        }
    }

    /// The search parameters these options describe.
    pub fn params(&self, k: usize, l: usize) -> Result<SearchParams, SearchError> {
        let strategy = Strategy::named(
            &self.strategy,
            BeamParams {
                width: self.beam_width,
                dynamic_width: self.dynamic_width,
                page_search: self.page_search,
            },
            PipeParams {
                policy: self.pipe_width,
                start_width: self.pipe_start_width,
                max_width: self.pipe_max_width,
                ..PipeParams::default()
            },
            self.flash(),
        )?;
        Ok(SearchParams {
            k,
            l,
            strategy,
            entry_list: self.entry_list,
            rerank: RerankParams {
                batch: self.rerank_batch,
                threshold: self.rerank_threshold,
                prefetch: !self.no_prefetch,
                stable_window: self.prefetch_window,
                prefetch_on_converge: !self.no_converge_prefetch,
                lookahead: self.rerank_lookahead,
                bound: self.rerank_bound,
                depth: self.rerank_depth,
            },
        })
    }
}

/// The layout to open in `dir`: `asked`, except that an index without `packed.trawl` but with
/// the decoupled graph (a decoupled merge dropped the packed layouts) is opened on the
/// decoupled layout when the packed one is asked for (the default).
pub(crate) fn resolve_layout(dir: &Path, asked: IndexLayout) -> IndexLayout {
    if asked == IndexLayout::Packed
        && !dir.join(IndexLayout::Packed.file_name()).is_file()
        && dir.join(IndexLayout::Decoupled.file_name()).is_file()
    {
        IndexLayout::Decoupled
    } else {
        asked
    }
}

/// The open options the search flags ask for.
pub(crate) fn open_options(o: &SearchOptions) -> OpenOptions {
    OpenOptions {
        direct: !o.buffered,
        engine: o.engine,
        verify_pages: !o.no_verify,
        sqpoll: o.sqpoll,
        taskrun: o.taskrun,
        spin_us: o.spin_us,
        time_parts: o.time_parts,
        layout: o.layout,
        list_cache_bytes: (o.list_cache_mb.max(0.0) * (1u64 << 20) as f64) as u64,
        queue_depth: OpenOptions::default()
            .queue_depth
            .max(o.beam_width)
            .max(2 * o.pipe_max_width),
        accel: if o.strategy == "flash" {
            o.ivf.accel
        } else {
            trawl::accel::AccelKind::Cpu
        },
        ..OpenOptions::default()
    }
}

/// Whether the index has taken updates (its ids are not its row numbers, or it has a log):
/// then it is searched as a live index, its ids and unmerged updates with its disk files.
pub(crate) fn has_updates(dir: &Path) -> bool {
    dir.join(trawl::index::ids::FILE_NAME).is_file()
        || dir.join(trawl::index::wal::FILE_NAME).is_file()
}

/// A graph index opened for searching: its disk files alone, or — once it has taken updates —
/// those files (opened and configured the same way) as a read-only live index, so results are
/// the vectors' ids and the log's unmerged inserts and deletes are searched too.
pub(crate) enum GraphIndex {
    /// An index that never took updates: slot numbers are ids.
    Disk(std::sync::Arc<DiskIndex>),
    /// An index that took updates.
    Live(Box<trawl::index::live::LiveIndex>),
}

impl GraphIndex {
    /// The disk files searched.
    pub(crate) fn disk(&self) -> std::sync::Arc<DiskIndex> {
        match self {
            Self::Disk(ix) => ix.clone(),
            Self::Live(ix) => ix.disk(),
        }
    }

    /// Searches `q` with `p` over `threads` threads, `interleave` queries in flight each.
    pub(crate) fn search<T: trawl::kernels::Element>(
        &self,
        q: &trawl::data::matrix::Matrix<T>,
        p: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<trawl::index::BatchOutput> {
        let ix = match self {
            Self::Disk(ix) => return Ok(ix.search_batch_with(q, p, threads, interleave)?),
            Self::Live(ix) => ix,
        };
        if q.dim() != ix.dim() {
            anyhow::bail!(
                "the queries have dimension {}, the index {}",
                q.dim(),
                ix.dim()
            );
        }
        let out = ix.search_rows(q.as_slice(), p, threads, interleave)?;
        let ids = out
            .ids
            .iter()
            .map(|&id| match id {
                trawl::index::ids::HOLE => Ok(u32::MAX),
                id => u32::try_from(id).map_err(|_| {
                    anyhow::anyhow!(
                        "id {id} does not fit the 32-bit ids of results and ground-truth files"
                    )
                }),
            })
            .collect::<Result<Vec<u32>>>()?;
        Ok(trawl::index::BatchOutput {
            k: out.k,
            ids,
            dists: out.dists,
            stats: out.stats,
            wall_secs: out.wall_secs,
        })
    }
}

/// [`open_index`], then the index as a live one when it has taken updates ([`GraphIndex`]);
/// the description says which (`"updates"`: live vectors and the delta's).
pub(crate) fn open_searchable(
    dir: &Path,
    o: &SearchOptions,
    ctl: &Control,
) -> Result<(GraphIndex, serde_json::Value)> {
    let (ix, mut info) = open_index(dir, o, ctl)?;
    if !has_updates(dir) {
        return Ok((GraphIndex::Disk(std::sync::Arc::new(ix)), info));
    }
    let live = trawl::index::live::LiveIndex::from_disk(ix)
        .with_context(|| format!("opening {}", dir.display()))?;
    info["updates"] = serde_json::json!({"live": live.len(), "delta": live.delta_len()});
    println!(
        "{} live vectors ({} inserted since the last merge)",
        live.len(),
        live.delta_len()
    );
    Ok((GraphIndex::Live(Box::new(live)), info))
}

pub(crate) fn open_index(
    dir: &Path,
    o: &SearchOptions,
    ctl: &Control,
) -> Result<(DiskIndex, serde_json::Value)> {
    let most = trawl::io::MAX_DEPTH;
    if o.beam_width == 0 || o.beam_width > most {
        anyhow::bail!("-W {} must be between 1 and {most}", o.beam_width);
    }
    if o.pipe_max_width == 0 || o.pipe_max_width > most / 2 {
        anyhow::bail!(
            "--pipe-max-width {} must be between 1 and {}",
            o.pipe_max_width,
            most / 2
        );
    }
    let mut opts = open_options(o);
    opts.layout = resolve_layout(dir, opts.layout);
    let t_load = Instant::now();
    let AnyIndex::Graph(mut ix) =
        open_any(dir, opts).with_context(|| format!("opening {}", dir.display()))?
    else {
        anyhow::bail!(
            "{} is an IVF index: this command reads graph indexes",
            dir.display()
        );
    };
    let policy = match (o.cache_policy, o.cache_samples) {
        (CachePolicy::Frequency { l, beam_width, .. }, Some(n)) => CachePolicy::Frequency {
            sample_queries: n,
            l,
            beam_width,
        },
        (p, _) => p,
    };
    let cache = ix.load_cache(o.cache_nodes, policy, o.threads.max(1), ctl)?;
    let pinned = if o.list_pin > 0.0 && ix.decoupled().is_some() {
        let (l, w) = match CachePolicy::default() {
            CachePolicy::Frequency { l, beam_width, .. } => (l, beam_width),
            _ => (15, 4),
        };
        Some(ix.pin_lists(
            o.list_pin,
            o.cache_samples.unwrap_or(0),
            l,
            w,
            o.threads.max(1),
            ctl,
        )?)
    } else {
        None
    };
    let refine = if o.refine_bits > 0 {
        Some(ix.load_refine(o.refine_bits, ctl)?)
    } else {
        None
    };
    let load_secs = t_load.elapsed().as_secs_f64();
    let engine = ix.searcher()?.engine().info();
    // The index's own description (shared with `trawl info` and Python), then the run's.
    let mut info = serde_json::to_value(ix.info()?)?;
    let run = serde_json::json!({
        "rerank": {"batch": o.rerank_batch, "threshold": o.rerank_threshold, "prefetch": !o.no_prefetch, "prefetch_window": o.prefetch_window, "converge_prefetch": !o.no_converge_prefetch, "lookahead": o.rerank_lookahead, "bound": o.rerank_bound, "depth": o.rerank_depth},
        "list_cache": ix.decoupled().map(|d| serde_json::json!({"entries": d.lists().capacity(), "entry_bytes": d.lists().entry_bytes(), "budget_bytes": d.lists().budget_bytes(), "lru_budget_bytes": d.lists().lru_budget_bytes(), "pin_share": o.list_pin, "pinned": pinned})),
        "refine": refine,
        "entry_list": o.entry_list,
        "cache": cache, "cache_policy": format!("{policy:?}"),
        "engine": {"name": engine.name, "direct": engine.direct,
                   "registered_buffers": engine.registered_buffers, "sqpoll": engine.sqpoll, "taskrun": engine.taskrun.name()},
        "verify_pages": !o.no_verify, "spin_us": o.spin_us, "beam_width": o.beam_width, "threads": o.threads,
        "dynamic_width": o.dynamic_width.map(|s| s.to_string()), "page_search": o.page_search,
        "strategy": o.strategy, "pipe": {"width_policy": format!("{:?}", o.pipe_width).to_lowercase(),
                   "start_width": o.pipe_start_width, "max_width": o.pipe_max_width},
        "dynamic_width_max": o.dynamic_width.map(|s| s.max_width()),
        "interleave": o.interleave,
        "flash": (o.strategy == "flash").then(|| serde_json::json!({"batch": o.flash().batch, "staleness": o.staleness, "grain": o.grain.name(), "accel": ix.flash_accel_info()})),
        "page_bytes": trawl::io::PAGE_BYTES, "load_secs": load_secs,
        "passes_per_L": 1, "warmup": false,
    });
    if let (Some(obj), serde_json::Value::Object(run)) = (info.as_object_mut(), run) {
        obj.extend(run);
    }
    println!(
        "index {}: {} × {} {} ({}), {} engine{}{}; cache {} nodes ({}) in {:.2} s",
        dir.display(),
        ix.n(),
        ix.dim(),
        ix.dtype().name(),
        ix.metric().name(),
        engine.name,
        if engine.direct {
            ", O_DIRECT"
        } else {
            ", buffered (page cache)"
        },
        if engine.registered_buffers {
            ", registered buffers"
        } else {
            ""
        },
        cache.nodes,
        human_bytes(cache.bytes),
        cache.secs
    );
    Ok((ix, info))
}

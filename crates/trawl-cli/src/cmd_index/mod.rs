//! `trawl build | search | bench | entry | layout`: the disk index, one file per command;
//! this file holds what `search` and `bench` share (the search options and opening an index).

mod bench;
mod build;
mod entry;
pub(crate) mod filter;
pub(crate) mod ivf;
mod layout;
mod range;
mod remote;
mod search;
pub(crate) mod shard;
mod update;

pub use crate::runtime::LayoutArg;
pub use bench::{bench, print_bench, print_parts, BenchArgs, BenchRow};
pub(crate) use bench::{load_queries, run_sweep};
pub(crate) use build::read_attributes;
pub use build::{build, BuildArgs, DEFAULT_PQ_BYTES};
pub use entry::{entry, EntryArgs};
pub use layout::{layout, LayoutArgs};
pub use range::bench_range;
pub use search::{resolve, search, ResolveArgs, SearchArgs};
pub(crate) use trawl::kinds::options::resolve_layout;
pub use update::{delete, insert, merge, DeleteArgs, InsertArgs, MergeArgs};

use std::path::Path;

use anyhow::{Context, Result};
use clap::Args;
use trawl::data::matrix::AnyMatrix;
use trawl::io::EngineKind;
use trawl::kinds::graph::search::{
    CachePolicy, FlashParams, Grain, PipeParams, RerankParams, WidthPolicy, WidthSchedule,
    DEFAULT_BEAM_WIDTH,
};
use trawl::kinds::{open_with, AnyIndex, Hits, KindParams, OpenReport, Options};
use trawl::progress::Control;

use crate::runtime::human_bytes;

/// How an index is opened and searched: options shared by `search` and `bench`.
#[derive(Debug, Args, Clone)]
pub struct SearchOptions {
    #[command(flatten)]
    pub filter: filter::FilterArgs,
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
    /// Beam search and PipeSearch: score every record on each page read and expand any of them
    /// later without another read (Starling's in-page search, OctopusANN's PageSearch).
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
    /// Range search (--radius) on a graph index: the candidate list keeps every candidate
    /// whose code distance (PQ or RaBitQ) is within radius + slack·|radius|, to make up for
    /// the codes' error; results are checked by exact distance, so a larger slack costs
    /// reads, never precision.
    #[arg(long, default_value_t = trawl::kinds::graph::search::DEFAULT_RANGE_SLACK)]
    pub range_slack: f32,
    /// Range search with beam search: reads per round trip while the candidates within the
    /// radius are expanded (the second round), at least -W; 0 keeps -W.
    #[arg(long, default_value_t = trawl::kinds::graph::search::DEFAULT_RANGE_WIDTH)]
    pub range_width: usize,
    /// Range search on a graph index: a query that has found nothing within the radius, has
    /// no candidate within it waiting, and whose nearest distance has not improved for this
    /// many round trips in a row (PipeSearch: reads issued) stops — its search has settled
    /// away from the radius, where most queries have no result (near-duplicate search); 0
    /// never stops early.
    #[arg(long, default_value_t = 0)]
    pub range_early_stop: usize,
    /// Memory the index may keep, e.g. 512M or 2G (K, M, G, T = 2^10 … 2^40; a plain number
    /// is bytes): the engine plans every in-memory structure within it — PQ codes (or the
    /// All-in-Storage layout when they do not fit), the entry index, the node or list cache —
    /// and says so (`trawl info DIR --plan BUDGET` prints the plan). Below the index's minimum
    /// it is an error naming the minimum.
    #[arg(long, value_parser = |s: &str| trawl::kinds::plan::parse_bytes(s))]
    pub memory_budget: Option<u64>,
    /// How the static node cache fills at open: wait (before the first search) or background
    /// (on a thread of its own while searches run; a node not there yet is read from disk).
    #[arg(long, default_value = "wait", value_parser = ["wait", "background"])]
    pub warm: String,
    /// Leave the entry index on disk (graph index; to compare memory mixes by hand).
    #[arg(long)]
    pub no_entry_index: bool,
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
    /// decoupled merge) is searched on it when packed is asked for. `auto` (with
    /// --memory-budget): the planner picks among the index's layouts the one that reads the
    /// fewest pages at the budget (PageSearch on for shuffle; docs/memory.md).
    #[arg(long, default_value = "packed", value_parser = |s: &str| s.parse::<LayoutArg>())]
    pub layout: LayoutArg,
    /// Decoupled layout: memory for the LRU cache of compressed neighbour lists, in MiB.
    #[arg(long, default_value_t = (trawl::kinds::graph::DEFAULT_LIST_CACHE_BYTES >> 20) as f64)]
    pub list_cache_mb: f64,
    /// Decoupled layout: share of the list cache pinned by value — the lists sample searches
    /// (--cache-samples of them, 20,000 by default; PQ-reconstructed indexed vectors) read
    /// most, stored at their exact size; the rest of the budget stays LRU. 0 = all LRU.
    #[arg(long, default_value_t = 0.0)]
    pub list_pin: f64,
    /// Decoupled layout: hold every vector in memory as a scalar code of 4 or 8 bits per
    /// dimension and order the re-rank by its distances instead of PQ's (fewer vector reads
    /// where PQ is coarse; costs dim/2 or dim bytes + 4 per vector of memory, reported as
    /// refine_bytes). 8 bits are read from refine.trawl (written by `trawl layout
    /// --decoupled` and merges); otherwise they are built at open from the vector files.
    /// 0 = off.
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
    #[arg(long, default_value_t = trawl::kinds::graph::search::rerank::DEFAULT_RERANK_DEPTH)]
    pub rerank_depth: usize,
    /// Decoupled layout with RaBitQ codes (`trawl build --quant rabitq`): a re-rank candidate
    /// whose distance's lower bound (estimate − ε₀·σ, RaBitQ's error bound) is beyond the k-th
    /// exact distance so far is not read (`rerank_skipped`); this is ε₀ (1.9: the papers' value,
    /// a ~94% per-candidate confidence; 0 = never skip). No effect with PQ codes.
    #[arg(long, default_value_t = trawl::kinds::graph::search::rerank::DEFAULT_SKIP_EPS)]
    pub rerank_skip_eps: f32,
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
    /// The library's options these flags give; `l`: the list size (IVF: lists probed) when
    /// the command gives one (`None`: the kind's default).
    pub fn options(&self, l: Option<usize>) -> Options {
        let iv = &self.ivf;
        Options {
            layout: self.layout.named(),
            layout_auto: self.layout == LayoutArg::Auto,
            engine: self.engine,
            direct: !self.buffered,
            verify_pages: !self.no_verify,
            queue_depth: None,
            sqpoll: self.sqpoll,
            taskrun: self.taskrun,
            spin_us: self.spin_us,
            time_parts: self.time_parts,
            cache_nodes: self.cache_nodes,
            cache_policy: self.cache_policy,
            cache_samples: self.cache_samples,
            list_cache_mb: self.list_cache_mb,
            list_pin: self.list_pin,
            refine_bits: self.refine_bits,
            accel: iv.accel,
            ivf_vectors: iv.ivf_vectors,
            fastscan: iv.fastscan,
            writable: false,
            durability: Default::default(),
            memory_budget: self.memory_budget,
            warm_background: self.warm == "background",
            load_entry: !self.no_entry_index,
            l,
            strategy: self.strategy.clone(),
            beam_width: self.beam_width,
            dynamic_width: self.dynamic_width,
            page_search: self.page_search,
            pipe_width: self.pipe_width,
            pipe_start_width: self.pipe_start_width,
            pipe_max_width: self.pipe_max_width,
            flash_batch: self.flash_batch,
            staleness: self.staleness,
            grain: self.grain,
            strict_steps: self.strict_steps,
            entry_list: self.entry_list,
            rerank_batch: self.rerank_batch,
            rerank_threshold: self.rerank_threshold,
            prefetch: !self.no_prefetch,
            prefetch_window: self.prefetch_window,
            converge_prefetch: !self.no_converge_prefetch,
            rerank_lookahead: self.rerank_lookahead,
            rerank_bound: self.rerank_bound,
            rerank_depth: self.rerank_depth,
            rerank_skip_eps: self.rerank_skip_eps,
            rerank_n: (iv.rerank_n > 0).then_some(iv.rerank_n),
            ivf_batch: iv.ivf_batch,
            ivf_epsilon: iv.ivf_epsilon,
            ivf_beta: iv.ivf_beta,
            heuristic: !iv.no_heuristic,
            page_merge: !iv.no_page_merge,
            page_buffer: !iv.no_page_buffer,
            page_mates: !iv.no_page_mates,
            centroid_list: iv.centroid_list,
            accel_batch: iv.accel_batch,
            probe: self.probe,
            range_slack: self.range_slack,
            range_width: self.range_width,
            range_early_stop: self.range_early_stop,
            threads: self.threads,
            interleave: self.interleave,
        }
    }
}

/// Opens the index in `dir` with the search flags, whatever its kind (a graph index with
/// updates as a live index); prints what was opened; returns the index and its description
/// (the index's own, shared with `trawl info` and Python, then the run's).
pub(crate) fn open(
    dir: &Path,
    o: &SearchOptions,
    ctl: &Control,
) -> Result<(AnyIndex, serde_json::Value)> {
    let opts = o.options(None);
    let (ix, report) = open_with(dir, &opts, ctl)
        .map_err(flag_names)
        .with_context(|| format!("opening {}", dir.display()))?;
    let engine = ix.engine_info()?;
    let mut info = serde_json::to_value(ix.info()?)?;
    let run = describe(&ix, o, &report, &engine);
    if let (Some(obj), serde_json::Value::Object(run)) = (info.as_object_mut(), run) {
        obj.extend(run);
    }
    println!(
        "index {}: {}, {} × {} {} ({}), {} engine{}{}; cache {} nodes ({}) in {:.2} s",
        dir.display(),
        ix.kind().name(),
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
        report.cache.nodes,
        human_bytes(report.cache.bytes),
        report.load_secs
    );
    if let Some(live) = ix.graph().and_then(|g| g.live()) {
        info["updates"] = serde_json::json!({"live": live.len(), "delta": live.delta_len()});
        println!(
            "{} live vectors ({} inserted since the last merge)",
            live.len(),
            live.delta_len()
        );
    }
    Ok((ix, info))
}

/// The run's part of the description: the options as searched, the engine and what was
/// loaded.
fn describe(
    ix: &AnyIndex,
    o: &SearchOptions,
    report: &OpenReport,
    engine: &trawl::io::EngineInfo,
) -> serde_json::Value {
    let mut run = serde_json::json!({
        "engine": {"name": engine.name, "direct": engine.direct,
                   "registered_buffers": engine.registered_buffers, "sqpoll": engine.sqpoll,
                   "taskrun": engine.taskrun.name()},
        "verify_pages": !o.no_verify, "spin_us": o.spin_us, "threads": o.threads,
        "interleave": o.interleave, "page_bytes": trawl::io::PAGE_BYTES,
        "load_secs": report.load_secs, "passes_per_L": 1, "warmup": false,
        "cache": report.cache, "cache_policy": format!("{:?}", o.options(None).cache_policy()),
        "strategy": o.strategy, "beam_width": o.beam_width,
        "page_search": o.page_search || report.plan.as_ref().is_some_and(|p| p.page_search),
        "entry_list": o.entry_list,
        "dynamic_width": o.dynamic_width.map(|s| s.to_string()),
        "dynamic_width_max": o.dynamic_width.map(|s| s.max_width()),
        "pipe": {"width_policy": format!("{:?}", o.pipe_width).to_lowercase(),
                 "start_width": o.pipe_start_width, "max_width": o.pipe_max_width},
        "rerank": {"batch": o.rerank_batch, "threshold": o.rerank_threshold,
                   "prefetch": !o.no_prefetch, "prefetch_window": o.prefetch_window,
                   "converge_prefetch": !o.no_converge_prefetch,
                   "lookahead": o.rerank_lookahead, "bound": o.rerank_bound,
                   "depth": o.rerank_depth},
        "refine": report.refine,
        "memory_plan": report.plan,
        "warm": o.warm,
    });
    match ix {
        AnyIndex::Graph(g) => {
            let disk = g.disk();
            run["list_cache"] = serde_json::json!(disk.decoupled().map(|d| serde_json::json!({
                "entries": d.lists().capacity(), "entry_bytes": d.lists().entry_bytes(),
                "budget_bytes": d.lists().budget_bytes(),
                "lru_budget_bytes": d.lists().lru_budget_bytes(), "pin_share": o.list_pin,
                "pinned": report.pinned})));
            run["flash"] = serde_json::json!((o.strategy == "flash").then(|| {
                let batch = match o
                    .options(None)
                    .graph_params(1, disk.flash_accel_info().backend == "gpu")
                {
                    Ok(p) => match p.strategy {
                        trawl::kinds::graph::search::Strategy::Flash(f) => f.batch,
                        _ => 0,
                    },
                    Err(_) => 0,
                };
                serde_json::json!({"batch": batch, "staleness": o.staleness,
                    "grain": o.grain.name(), "accel": disk.flash_accel_info()})
            }));
        }
        AnyIndex::Ivf(iv) => {
            let a = iv.accel().info();
            run["strategy"] = "ivf".into();
            run["accel_batch"] = match o.options(Some(1)).ivf_params(iv, 1) {
                Ok(p) => p.accel_batch.into(),
                Err(_) => serde_json::Value::Null,
            };
            run["accel"] = serde_json::to_value(a).unwrap_or_default();
        }
        AnyIndex::Sharded(sh) => {
            let h = &sh.manifest().header;
            run["shard_counts"] =
                serde_json::json!(h.shards.iter().map(|e| e.count).collect::<Vec<_>>());
            run["epsilon"] = h.epsilon.into();
            run["slack"] = h.slack.into();
            run["replicas"] = h.replicas.into();
            run["probe"] = o.probe.into();
            run["cache_nodes"] = report.cache.nodes.into();
        }
        // A kind without options of its own beyond the index's description.
        _ => {}
    }
    run
}

/// One batch search of `q` at list size `l` (`None`: the kind's default).
pub(crate) fn search_at(
    ix: &AnyIndex,
    q: &AnyMatrix,
    k: usize,
    l: Option<usize>,
    o: &SearchOptions,
) -> Result<(Hits, KindParams)> {
    let opts = o.options(l);
    let p = opts.params(ix, k).map_err(flag_names)?;
    if q.dim() != ix.dim() {
        anyhow::bail!(
            "the queries have dimension {}, the index {}",
            q.dim(),
            ix.dim()
        );
    }
    let filter = o.filter.query_filter(q.n())?;
    Ok((ix.search_matrix(q, &p, opts.run(), &filter)?, p))
}

/// A library error about an option, with the option named as its flag: the library names
/// options as `name = value` (Python's keyword arguments); the CLI's flags are the same names
/// with dashes (`-W` where a flag has a short form).
pub(crate) fn flag_names(e: trawl::kinds::Error) -> anyhow::Error {
    use clap::Args as _;
    rename_options(e, SearchOptions::augment_args(clap::Command::new("search")))
}

/// [`flag_names`] against the flags of `cmd` (an option named by one letter, `R`, is its
/// flag's id in either case).
pub(crate) fn rename_options(e: trawl::kinds::Error, cmd: clap::Command) -> anyhow::Error {
    let trawl::kinds::Error::InvalidInput(msg) = &e else {
        return e.into();
    };
    let mut out = msg.clone();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        let flag = match (a.get_short(), a.get_long()) {
            (Some(c), _) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => continue,
        };
        let mut names = vec![format!("{id} = ")];
        if id.len() == 1 {
            names.push(format!("{} = ", id.to_uppercase()));
        }
        for named in names {
            if out.starts_with(&named) || out.contains(&format!(" {named}")) {
                out = out.replace(&named, &format!("{flag} "));
            }
        }
        // `pq_bytes 64 is …`: a message that opens with the option's name.
        if id.len() > 1 && out.starts_with(&format!("{id} ")) {
            out = format!("{flag}{}", &out[id.len()..]);
        }
    }
    anyhow::anyhow!(out)
}

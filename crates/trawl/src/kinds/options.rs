//! The options layer: every option of opening and searching an index, flat ([`Options`],
//! named as Python's keyword arguments and — with `-` for `_` — the CLI's flags), resolved here
//! into per-kind parameters with every default and every check in one place. The CLI and
//! Python only fill an [`Options`] and call [`open_with`] and [`Options::params`].

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::accel::AccelKind;
use crate::io::{EngineKind, TaskRun};
use crate::kinds::graph::search::flash::DEFAULT_FLASH_BATCH;
use crate::kinds::graph::search::{
    BeamParams, CachePolicy, FlashParams, Grain, PipeParams, RerankParams, SearchParams, Strategy,
    WidthPolicy, WidthSchedule, DEFAULT_BEAM_WIDTH,
};
use crate::kinds::graph::updates::live::{Access, Durability, LiveIndex};
use crate::kinds::graph::{DiskIndex, IndexLayout, KindName, OpenOptions};
use crate::kinds::ivf::{IvfIndex, IvfSearchParams, IvfVectorLayout};
use crate::kinds::sharded::ShardedIndex;
use crate::kinds::{
    kind_of, plan_memory, AnyIndex, Error, GraphIndex, KindParams, Run, ShardedParams,
};
use crate::progress::Control;

/// Lists an IVF search probes when `l` is not given (every list when there are fewer).
pub const DEFAULT_NPROBE: usize = 32;
pub use crate::kinds::graph::layout::pages::default_list as pages_default_l;
/// List size of a graph search when `l` is not given: `max(DEFAULT_L, k)`; on the
/// page-node layout, whose list counts pages, [`pages_default_l`].
pub const DEFAULT_L: usize = 100;
/// Queries in flight per thread of a flash search on a GPU when `flash_batch` is 0.
pub const GPU_FLASH_BATCH: usize = 1024;
/// Queries per accelerator job of an IVF batch search on a GPU when `accel_batch` is 0.
pub const GPU_ACCEL_BATCH: usize = 32;
pub use crate::kinds::ivf::MAX_IVF_PARAM;

/// Every option of opening and searching an index. [`Options::default`] holds every default
/// of the library; an option a kind does not use is ignored by it (and refused where it would
/// silently change nothing the caller expects, e.g. `writable` on an IVF index).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    // ---- Opening ----
    /// Graph layout: packed (as built), shuffle, ais or decoupled. An index left with the
    /// decoupled layout alone is opened on it when packed is asked for.
    pub layout: IndexLayout,
    /// I/O engine.
    pub engine: EngineKind,
    /// Read with O_DIRECT.
    pub direct: bool,
    /// Check every page read against its checksum.
    pub verify_pages: bool,
    /// Reads in flight per search thread; `None`: `max(64, beam_width, 2 · pipe_max_width)`.
    pub queue_depth: Option<usize>,
    /// io_uring submission polling.
    pub sqpoll: bool,
    /// io_uring completion delivery.
    pub taskrun: TaskRun,
    /// Microseconds a search thread polls before blocking (`None`: automatic).
    pub spin_us: Option<u64>,
    /// Time the parts of every query.
    pub time_parts: bool,
    /// Nodes of the static cache (graph and sharded kinds; a sharded index shares them out
    /// by shard size).
    pub cache_nodes: usize,
    /// How cached nodes are chosen.
    pub cache_policy: CachePolicy,
    /// Sample searches of a frequency cache and of list pinning (`None`: the policy's).
    pub cache_samples: Option<usize>,
    /// Decoupled layout: MiB of the neighbour-list cache.
    pub list_cache_mb: f64,
    /// Decoupled layout: share of the list cache pinned by value.
    pub list_pin: f64,
    /// Decoupled layout: bits per dimension of in-memory refinement codes (0, 4 or 8).
    pub refine_bits: u8,
    /// Accelerator of the IVF filter stage and of the flash strategy.
    pub accel: AccelKind,
    /// IVF: the vector file the re-rank reads.
    pub ivf_vectors: IvfVectorLayout,
    /// IVF with RaBitQ codes on the CPU: FastScan blocks by posting list (off, the default:
    /// the gathered ids' codes one by one).
    pub fastscan: bool,
    /// Open for updates (graph kind only).
    pub writable: bool,
    /// When an acknowledged update is durable (writable only).
    pub durability: Durability,
    /// Bytes the index may keep in memory: the engine plans every in-memory structure
    /// within it ([`plan_memory`]) and sets `layout` (All-in-Storage when the PQ codes do
    /// not fit), `cache_nodes` and `list_cache_mb` by the plan. `None`: each by its own option.
    pub memory_budget: Option<u64>,
    /// Fill the static node cache on a thread of its own while searches run (they read a
    /// node from disk until it has arrived), instead of before the open returns.
    pub warm_background: bool,
    /// Graph index: load its entry index (when it has one).
    pub load_entry: bool,
    /// Graph index, with `memory_budget`: the planner picks the layout (`layout` is ignored)
    /// among those the index has — the one that reads the fewest pages at the budget
    /// ([`crate::kinds::graph::plan::plan_auto`]), with PageSearch on the shuffled layout.
    pub layout_auto: bool,

    // ---- Searching ----
    /// List size (IVF: lists probed); `None`: `max(100, k)` (IVF: 32, or every list).
    pub l: Option<usize>,
    /// `beam`, `pipe` or `flash`.
    pub strategy: String,
    /// Beam width W.
    pub beam_width: usize,
    /// Beam search: DynamicWidth schedule.
    pub dynamic_width: Option<WidthSchedule>,
    /// PageSearch.
    pub page_search: bool,
    /// PipeSearch width policy.
    pub pipe_width: WidthPolicy,
    /// PipeSearch starting width.
    pub pipe_start_width: usize,
    /// PipeSearch largest width.
    pub pipe_max_width: usize,
    /// Flash: queries in flight per thread (0: 32, or 1024 on a GPU).
    pub flash_batch: usize,
    /// Flash: steps a read is chosen ahead.
    pub staleness: usize,
    /// Flash: resumption grain.
    pub grain: Grain,
    /// Flash: strict steps before the staleness applies.
    pub strict_steps: usize,
    /// Entry-index list size (0: start at the medoid).
    pub entry_list: usize,
    /// Decoupled re-rank: batch size.
    pub rerank_batch: usize,
    /// Decoupled re-rank: benefit threshold.
    pub rerank_threshold: f32,
    /// Decoupled re-rank: prefetch during the traversal.
    pub prefetch: bool,
    /// Decoupled re-rank: stability window (0: the batch size).
    pub prefetch_window: usize,
    /// Decoupled re-rank: prefetch when the traversal converges.
    pub converge_prefetch: bool,
    /// Decoupled re-rank: batches read ahead.
    pub rerank_lookahead: usize,
    /// Decoupled re-rank: error-bound multiplier (0: the benefit rule).
    pub rerank_bound: f32,
    /// Decoupled re-rank: reads in flight after the traversal.
    pub rerank_depth: usize,
    /// Decoupled re-rank with RaBitQ codes: skip a candidate whose lower bound at this `ε₀` is
    /// beyond the `K`-th exact distance (0: never).
    pub rerank_skip_eps: f32,
    /// IVF: candidates kept for the re-rank; `None`: `max(10 · k, 4 · nprobe)`.
    pub rerank_n: Option<usize>,
    /// IVF: re-rank mini-batch.
    pub ivf_batch: usize,
    /// IVF: early stop's ε.
    pub ivf_epsilon: f32,
    /// IVF: early stop's β.
    pub ivf_beta: usize,
    /// IVF: early stop on.
    pub heuristic: bool,
    /// IVF: intra-batch page merging.
    pub page_merge: bool,
    /// IVF: inter-batch page buffer.
    pub page_buffer: bool,
    /// IVF: page-mate scoring.
    pub page_mates: bool,
    /// IVF: centroid-graph list size (0: `max(2 · nprobe, 32)`).
    pub centroid_list: usize,
    /// IVF: queries per accelerator job (0: 1 on the CPU, 32 on a GPU).
    pub accel_batch: usize,
    /// Sharded: shards each query visits (0: all).
    pub probe: usize,
    /// Range search on a graph: relative widening of the radius in code space
    /// ([`crate::kinds::graph::search::RangeSpec::slack`]).
    pub range_slack: f32,
    /// Range search with beam search: reads per round trip of the second round
    /// ([`crate::kinds::graph::search::RangeSpec::width`]).
    pub range_width: usize,
    /// Range search on a graph: round trips without progress after which a query that found
    /// nothing within the radius stops ([`crate::kinds::graph::search::RangeSpec::early_stop`];
    /// 0: never).
    pub range_early_stop: usize,
    /// Search threads.
    pub threads: usize,
    /// Queries each thread keeps in flight.
    pub interleave: usize,
}

impl Default for Options {
    fn default() -> Self {
        let o = OpenOptions::default();
        let pipe = PipeParams::default();
        let flash = FlashParams::default();
        let rr = RerankParams::default();
        let ivf = IvfSearchParams::default();
        Self {
            layout: o.layout,
            engine: o.engine,
            direct: o.direct,
            verify_pages: o.verify_pages,
            queue_depth: None,
            sqpoll: o.sqpoll,
            taskrun: o.taskrun,
            spin_us: o.spin_us,
            time_parts: o.time_parts,
            cache_nodes: 0,
            cache_policy: CachePolicy::default(),
            cache_samples: None,
            list_cache_mb: (crate::kinds::graph::DEFAULT_LIST_CACHE_BYTES >> 20) as f64,
            list_pin: 0.0,
            refine_bits: 0,
            accel: o.accel,
            ivf_vectors: o.ivf_vectors,
            fastscan: o.fastscan,
            writable: false,
            durability: Durability::default(),
            memory_budget: None,
            warm_background: false,
            load_entry: true,
            layout_auto: false,
            l: None,
            strategy: "beam".into(),
            beam_width: DEFAULT_BEAM_WIDTH,
            dynamic_width: None,
            page_search: false,
            pipe_width: pipe.policy,
            pipe_start_width: pipe.start_width,
            pipe_max_width: pipe.max_width,
            flash_batch: 0,
            staleness: flash.staleness,
            grain: flash.grain,
            strict_steps: flash.strict_steps,
            entry_list: 0,
            rerank_batch: rr.batch,
            rerank_threshold: rr.threshold,
            prefetch: rr.prefetch,
            prefetch_window: rr.stable_window,
            converge_prefetch: rr.prefetch_on_converge,
            rerank_lookahead: rr.lookahead,
            rerank_bound: rr.bound,
            rerank_depth: rr.depth,
            rerank_skip_eps: rr.skip_eps,
            rerank_n: None,
            ivf_batch: ivf.batch,
            ivf_epsilon: ivf.epsilon,
            ivf_beta: ivf.beta,
            heuristic: ivf.heuristic,
            page_merge: ivf.page_merge,
            page_buffer: ivf.page_buffer,
            page_mates: ivf.page_mates,
            centroid_list: ivf.centroid_l,
            accel_batch: 0,
            probe: 0,
            range_slack: crate::kinds::graph::search::DEFAULT_RANGE_SLACK,
            range_width: crate::kinds::graph::search::DEFAULT_RANGE_WIDTH,
            range_early_stop: 0,
            threads: 1,
            interleave: 1,
        }
    }
}

pub(super) fn bad<T>(s: String) -> Result<T, Error> {
    Err(Error::InvalidInput(s))
}

impl Options {
    /// Checks the options that do not depend on the index.
    pub fn validate(&self) -> Result<(), Error> {
        let most = crate::io::MAX_DEPTH;
        if self.beam_width == 0 || self.beam_width > most {
            return bad(format!(
                "beam_width = {} must be between 1 and {most}",
                self.beam_width
            ));
        }
        if self.pipe_max_width == 0 || self.pipe_max_width > most / 2 {
            return bad(format!(
                "pipe_max_width = {} must be between 1 and {}",
                self.pipe_max_width,
                most / 2
            ));
        }
        if self.queue_depth.is_some_and(|d| d == 0 || d > most) {
            return bad(format!(
                "queue_depth = {} must be between 1 and {most}",
                self.queue_depth.unwrap_or(0)
            ));
        }
        if !(self.list_cache_mb.is_finite() && self.list_cache_mb >= 0.0) {
            return bad(format!(
                "list_cache_mb = {} must be at least 0",
                self.list_cache_mb
            ));
        }
        if !(0.0..=1.0).contains(&self.list_pin) {
            return bad(format!("list_pin = {} must be in [0, 1]", self.list_pin));
        }
        if !matches!(self.refine_bits, 0 | 4 | 8) {
            return bad(format!(
                "refine_bits = {}: expected 0 (off), 4 or 8",
                self.refine_bits
            ));
        }
        if self.threads == 0 || self.interleave == 0 {
            return bad(format!(
                "threads = {} and interleave = {} must be at least 1",
                self.threads, self.interleave
            ));
        }
        if !(self.rerank_threshold.is_finite() && (0.0..=1.0).contains(&self.rerank_threshold)) {
            return bad(format!(
                "rerank_threshold = {} must be between 0 and 1",
                self.rerank_threshold
            ));
        }
        if !(self.rerank_skip_eps.is_finite() && self.rerank_skip_eps >= 0.0) {
            return bad(format!(
                "rerank_skip_eps = {} must be a finite number ≥ 0",
                self.rerank_skip_eps
            ));
        }
        if !(self.rerank_bound.is_finite() && self.rerank_bound >= 0.0) {
            return bad(format!(
                "rerank_bound = {} must be a finite number ≥ 0",
                self.rerank_bound
            ));
        }
        if !(self.range_slack.is_finite() && self.range_slack >= 0.0) {
            return bad(format!(
                "range_slack = {} must be a finite number ≥ 0",
                self.range_slack
            ));
        }
        if self.layout_auto && self.memory_budget.is_none() {
            return bad(
                "layout = auto: the planner picks the layout within a memory budget; \
                        give memory_budget too, or name a layout"
                    .into(),
            );
        }
        Ok(())
    }

    /// The open options of the index in `dir` (the layout resolved against its files).
    pub fn open_options(&self, dir: &Path) -> OpenOptions {
        OpenOptions {
            direct: self.direct,
            engine: self.engine,
            verify_pages: self.verify_pages,
            sqpoll: self.sqpoll,
            taskrun: self.taskrun,
            spin_us: self.spin_us,
            time_parts: self.time_parts,
            layout: resolve_layout(dir, self.layout),
            list_cache_bytes: (self.list_cache_mb * (1u64 << 20) as f64) as u64,
            queue_depth: self.queue_depth.unwrap_or_else(|| {
                OpenOptions::default()
                    .queue_depth
                    .max(self.beam_width)
                    .max(2 * self.pipe_max_width)
            }),
            accel: self.accel,
            ivf_vectors: self.ivf_vectors,
            fastscan: self.fastscan,
            load_entry: self.load_entry,
            ..OpenOptions::default()
        }
    }

    /// How a batch search runs.
    pub fn run(&self) -> Run {
        Run {
            threads: self.threads.max(1),
            interleave: self.interleave.max(1),
        }
    }

    /// The cache policy with `cache_samples` applied.
    pub fn cache_policy(&self) -> CachePolicy {
        match (self.cache_policy, self.cache_samples) {
            (CachePolicy::Frequency { l, beam_width, .. }, Some(n)) => CachePolicy::Frequency {
                sample_queries: n,
                l,
                beam_width,
            },
            (p, _) => p,
        }
    }

    /// The search parameters of `index`'s kind for `k` results.
    pub fn params(&self, index: &AnyIndex, k: usize) -> Result<KindParams, Error> {
        Ok(match index {
            AnyIndex::Graph(g) => {
                let gpu = g.disk().flash_accel_info().backend == "gpu";
                // The page-node layout's list counts pages: its default follows the capacity.
                if let (None, Some(p)) = (self.l, g.disk().layout().pages()) {
                    let o = Options {
                        l: Some(pages_default_l(k, p.file().meta().capacity)),
                        layout: IndexLayout::Pages,
                        ..self.clone()
                    };
                    return Ok(KindParams::Graph(o.graph_params(k, gpu)?));
                }
                // The planner plans the shuffled layout for PageSearch.
                if self.layout_auto
                    && !self.page_search
                    && g.disk().options().layout == IndexLayout::Shuffled
                {
                    let o = Options {
                        page_search: true,
                        ..self.clone()
                    };
                    return Ok(KindParams::Graph(o.graph_params(k, gpu)?));
                }
                KindParams::Graph(self.graph_params(k, gpu)?)
            }
            AnyIndex::Ivf(ix) => KindParams::Ivf(self.ivf_params(ix, k)?),
            AnyIndex::Sharded(_) => {
                if self.strategy == "flash" {
                    return bad("strategy = \"flash\" is not supported on a sharded index".into());
                }
                KindParams::Sharded(ShardedParams {
                    graph: self.graph_params(k, false)?,
                    probe: self.probe,
                })
            }
            AnyIndex::Flat(_) => {
                self.validate()?;
                KindParams::Flat(crate::kinds::flat::FlatParams { k })
            }
        })
    }

    /// The parameters of a range search of `radius` on `index` ([`AnyIndex::range_search`]):
    /// [`Options::params`] with `k` sizing the first re-rank batches (graph kinds), the
    /// radius and [`Options::range_slack`] set on a graph search.
    pub fn range_params(
        &self,
        index: &AnyIndex,
        k: usize,
        radius: f32,
    ) -> Result<KindParams, Error> {
        crate::kinds::check_radius(radius)?;
        let spec = crate::kinds::graph::search::RangeSpec {
            radius,
            slack: self.range_slack,
            width: self.range_width,
            early_stop: self.range_early_stop,
        };
        // `k` only sizes a re-rank here: an index of fewer vectors is still searched.
        let mut p = self.params(index, k.clamp(1, index.n().max(1)))?;
        match &mut p {
            KindParams::Graph(g) | KindParams::Sharded(ShardedParams { graph: g, .. }) => {
                g.range = Some(spec)
            }
            _ => {}
        }
        Ok(p)
    }

    /// What these options resolve to on `index` (opened from `dir`) for `k` results: the
    /// open options and the kind's search parameters, as text. The CLI (`trawl resolve`) and
    /// Python (`Index._resolved`) print it, so a test can hold the two front ends to one
    /// resolution.
    pub fn resolved(&self, dir: &Path, index: &AnyIndex, k: usize) -> Result<String, Error> {
        Ok(format!(
            "{:#?}\n{:#?}",
            self.open_options(dir),
            self.params(index, k)?
        ))
    }

    /// Graph search parameters for `k` results; `gpu`: the flash accelerator is a GPU.
    pub fn graph_params(&self, k: usize, gpu: bool) -> Result<SearchParams, Error> {
        self.validate()?;
        let pages = self.layout == IndexLayout::Pages;
        let l = self.l.unwrap_or(if pages {
            pages_default_l(k, 4)
        } else {
            DEFAULT_L.max(k)
        });
        if l == 0 {
            return bad("L must be at least 1".into());
        }
        // On the page-node layout L counts pages, each holding several vectors.
        if k > l && !pages {
            return bad(format!(
                "k = {k} is larger than the list size L = {l}: raise L"
            ));
        }
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
            FlashParams {
                batch: match (self.flash_batch, gpu) {
                    (0, true) => GPU_FLASH_BATCH,
                    (0, false) => DEFAULT_FLASH_BATCH,
                    (b, _) => b,
                },
                staleness: self.staleness,
                grain: self.grain,
                strict_steps: self.strict_steps,
                ..FlashParams::default()
            },
        )?;
        Ok(SearchParams {
            k,
            l,
            strategy,
            entry_list: self.entry_list,
            rerank: RerankParams {
                batch: self.rerank_batch,
                threshold: self.rerank_threshold,
                prefetch: self.prefetch,
                stable_window: self.prefetch_window,
                prefetch_on_converge: self.converge_prefetch,
                lookahead: self.rerank_lookahead,
                bound: self.rerank_bound,
                depth: self.rerank_depth,
                skip_eps: self.rerank_skip_eps,
            },
            range: None,
        })
    }

    /// IVF search parameters for `k` results on `ix`.
    pub fn ivf_params(&self, ix: &IvfIndex, k: usize) -> Result<IvfSearchParams, Error> {
        self.validate()?;
        let nlist = ix.meta().nlist();
        let gpu = ix.accel().info().backend == "gpu";
        let nprobe = self.l.unwrap_or(DEFAULT_NPROBE.min(nlist.max(1)));
        if nprobe > nlist {
            return bad(format!(
                "L = {nprobe} is more than the index's {nlist} posting lists (for an IVF index \
                 L is the number of lists probed)"
            ));
        }
        let p = IvfSearchParams {
            k,
            nprobe,
            centroid_l: self.centroid_list,
            // (Capped at the largest allowed, so that an L too large for the index is
            // reported as such, not as its derived rerank_n.)
            top_n: self
                .rerank_n
                .unwrap_or_else(|| (10 * k).max(4 * nprobe).min(MAX_IVF_PARAM).max(k)),
            batch: self.ivf_batch,
            epsilon: self.ivf_epsilon,
            beta: self.ivf_beta,
            heuristic: self.heuristic,
            page_merge: self.page_merge,
            page_buffer: self.page_buffer,
            page_mates: self.page_mates,
            accel_batch: match (self.accel_batch, gpu) {
                (0, true) => GPU_ACCEL_BATCH,
                (0, false) => 1,
                (b, _) => b,
            },
            skip_eps: self.rerank_skip_eps,
        };
        if p.top_n < k {
            return bad(format!(
                "rerank_n = {} is smaller than k = {k}: the re-rank keeps at most rerank_n \
                 candidates",
                p.top_n
            ));
        }
        p.validate(ix.n(), nlist)?;
        Ok(p)
    }
}

/// The layout to open in `dir`: `asked`, except that an index without the packed file but
/// with the decoupled graph (a decoupled merge dropped the packed layouts) is opened on the
/// decoupled layout when the packed one is asked for (the default).
pub fn resolve_layout(dir: &Path, asked: IndexLayout) -> IndexLayout {
    if asked == IndexLayout::Packed
        && !dir.join(IndexLayout::Packed.file_name()).is_file()
        && dir.join(IndexLayout::Decoupled.file_name()).is_file()
    {
        IndexLayout::Decoupled
    } else {
        asked
    }
}

/// What opening an index loaded, and in how long.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OpenReport {
    /// The memory plan the index was opened by (with a `memory_budget`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::kinds::plan::MemoryPlan>,
    /// The static node cache (graph: the index's; sharded: summed over the shards).
    pub cache: crate::kinds::graph::CacheReport,
    /// Decoupled layout: the pinned lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<crate::kinds::graph::CacheReport>,
    /// Decoupled layout: the refinement codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refine: Option<crate::kinds::graph::RefineReport>,
    /// Seconds to open and load.
    pub load_secs: f64,
}

/// Opens the index in `dir` with `o`, whatever its kind, and loads what the options ask for
/// (node cache, pinned lists, refinement codes).
pub fn open_with(dir: &Path, o: &Options, ctl: &Control) -> Result<(AnyIndex, OpenReport), Error> {
    o.validate()?;
    let t = Instant::now();
    let mut report = OpenReport::default();
    let planned;
    let o = match o.memory_budget {
        None => o,
        Some(_) => {
            let plan = plan_memory(dir, o)?;
            planned = o.with_plan(dir, &plan)?;
            report.plan = Some(plan);
            &planned
        }
    };
    let index = match kind_of(dir)? {
        KindName::Graph => AnyIndex::Graph(open_graph(dir, o, ctl, &mut report)?),
        KindName::Ivf => {
            check_ivf(dir, o)?;
            AnyIndex::Ivf(IvfIndex::open(dir, o.open_options(dir))?)
        }
        KindName::Sharded => AnyIndex::Sharded(open_sharded(dir, o, ctl, &mut report)?),
        KindName::Flat => {
            check_read_only(dir, o, KindName::Flat)?;
            AnyIndex::Flat(crate::kinds::flat::FlatIndex::open(
                dir,
                o.open_options(dir),
            )?)
        }
    };
    report.load_secs = t.elapsed().as_secs_f64();
    Ok((index, report))
}

/// What a kind without updates, layouts or a node cache cannot do.
pub(super) fn check_read_only(dir: &Path, o: &Options, kind: KindName) -> Result<(), Error> {
    if o.writable {
        return bad(format!(
            "{}: {} indexes do not take updates: open it read-only",
            dir.display(),
            kind.label()
        ));
    }
    if o.cache_nodes > 0 || o.list_pin > 0.0 || o.refine_bits > 0 {
        return bad(format!(
            "cache_nodes / list_pin / refine_bits: a {} index has no node or list cache",
            kind.label()
        ));
    }
    Ok(())
}

/// What an IVF index cannot do, refused before anything is opened.
fn check_ivf(dir: &Path, o: &Options) -> Result<(), Error> {
    if o.writable {
        return bad(format!(
            "{}: IVF indexes do not take updates yet: open it read-only",
            dir.display()
        ));
    }
    if o.layout != IndexLayout::Packed {
        return bad(format!(
            "layout = {:?}: an IVF index has one layout, \"packed\" (choose its vector file \
             with ivf_vectors = \"bucket\" or \"by_id\")",
            o.layout.name()
        ));
    }
    if o.cache_nodes > 0 {
        return bad(format!(
            "cache_nodes = {}: an IVF index has no node cache (its centroids, posting lists \
             and PQ codes are in memory already)",
            o.cache_nodes
        ));
    }
    Ok(())
}

fn open_sharded(
    dir: &Path,
    o: &Options,
    ctl: &Control,
    report: &mut OpenReport,
) -> Result<ShardedIndex, Error> {
    if o.writable {
        return bad(format!(
            "{}: updates to sharded indexes are not supported: open it read-only",
            dir.display()
        ));
    }
    if o.refine_bits > 0 || o.list_pin > 0.0 {
        return bad("refine_bits and list_pin are not supported on a sharded index".into());
    }
    let first = dir.join(crate::kinds::sharded::shard_dir_name(0));
    let mut ix = ShardedIndex::open(dir, o.open_options(&first))?;
    let n = ix.n().max(1);
    // A plan gives each shard its own cache; else the nodes are shared out by shard size.
    let planned: Vec<usize> = report
        .plan
        .as_ref()
        .map(|p| p.shard_cache_nodes.clone())
        .unwrap_or_default();
    if o.cache_nodes > 0 {
        for (i, s) in ix.shards_mut().iter_mut().enumerate() {
            let share = planned
                .get(i)
                .copied()
                .unwrap_or((o.cache_nodes as u128 * s.n() as u128 / n as u128) as usize);
            let r = s.load_cache(share, o.cache_policy(), o.threads.max(1), ctl)?;
            report.cache.nodes += r.nodes;
            report.cache.bytes += r.bytes;
            report.cache.secs += r.secs;
            report.cache.pages_read += r.pages_read;
        }
    }
    Ok(ix)
}

fn open_graph(
    dir: &Path,
    o: &Options,
    ctl: &Control,
    report: &mut OpenReport,
) -> Result<GraphIndex, Error> {
    let planned = report.plan.clone();
    let opts = o.open_options(dir);
    let decoupled = opts.layout == IndexLayout::Decoupled;
    if (o.list_pin > 0.0 || o.refine_bits > 0) && (o.writable || !decoupled) {
        return bad(format!(
            "list_pin = {} / refine_bits = {}: pinned lists and refinement codes apply to a \
             read-only open of the decoupled layout",
            o.list_pin, o.refine_bits
        ));
    }
    let threads = o.threads.max(1);
    if !o.writable && !GraphIndex::has_updates(dir) {
        let mut ix = DiskIndex::open(dir, opts)?;
        report.cache = ix.load_cache_with(
            o.cache_nodes,
            o.cache_policy(),
            threads,
            o.warm_background,
            ctl,
        )?;
        if o.list_pin > 0.0 {
            let (l, w) = match CachePolicy::default() {
                CachePolicy::Frequency { l, beam_width, .. } => (l, beam_width),
                _ => (15, 4),
            };
            let samples = o.cache_samples.unwrap_or(0);
            report.pinned = Some(ix.pin_lists(o.list_pin, samples, l, w, threads, ctl)?);
        }
        if o.refine_bits > 0 {
            report.refine = Some(ix.load_refine(o.refine_bits, ctl)?);
        }
        // An update that landed while the files were opened makes it a live index.
        if !GraphIndex::has_updates(dir) {
            return GraphIndex::from_disk(ix);
        }
    }
    if o.list_pin > 0.0 || o.refine_bits > 0 {
        // Pinned lists and refinement codes are built for one version of the files; an
        // index with updates is opened live and its merges replace them.
        return bad(format!(
            "{}: the index has updates not merged yet, and list_pin / refine_bits apply to an \
             index without them: merge it first, or open it without them",
            dir.display()
        ));
    }
    let access = if o.writable {
        Access::ReadWrite
    } else {
        Access::ReadOnly
    };
    let live = LiveIndex::open(dir, opts, access)?;
    if o.writable {
        live.set_durability(o.durability)?;
        if let Some(p) = planned {
            live.set_delta_limit(Some(p.delta_bytes));
        }
    }
    // The static node cache of a live index is chosen again after every merge.
    if o.cache_nodes > 0 {
        report.cache = live.set_node_cache(o.cache_nodes, o.cache_policy(), threads, ctl)?;
    }
    Ok(GraphIndex::from_live(live))
}

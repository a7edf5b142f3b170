//! `BuildParams` and `SearchParams`: plain attribute bags, checked when used.
//!
//! Integer attributes are held as Python ints (`i64`) rather than `usize` so that a negative
//! value is an `InvalidInputError` naming the parameter, not an `OverflowError` at assignment.

#![allow(non_snake_case)]

use pyo3::prelude::*;
use trawl::kinds::graph::search::{Grain, WidthPolicy, WidthSchedule};
use trawl::kinds::{BuildOptions, Options};
use trawl::vamana::VamanaParams;

use crate::errors::{invalid, PyResultExt};

/// `value` as a count of at least `min`, or an `InvalidInputError` naming `name`.
pub fn count(name: &str, value: i64, min: i64) -> PyResult<usize> {
    if value < min {
        return Err(invalid(format!("{name} = {value} must be at least {min}")));
    }
    usize::try_from(value).map_err(|_| invalid(format!("{name} = {value} is too large")))
}

pub(crate) fn parse<T: std::str::FromStr>(name: &str, value: &str) -> PyResult<T>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e| invalid(format!("{name} = {value:?}: {e}")))
}

/// Parameters of `trawl.build`. Every argument is keyword-only and optional; the defaults
/// are those of `trawl build` on the command line.
///
/// `kind` picks the index: "graph" (a Vamana graph on disk, the default) or "ivf" (FusionANNS:
/// posting lists over a centroid graph, PQ codes on an accelerator, vectors on disk in
/// buckets). An IVF build reads `metric`, `pq_bytes`, `threads`, `seed`, `progress` and the
/// `ivf_*` / `by_id_vectors` fields; the graph-only fields (`R`, `L`, `alpha`,
/// `memory_budget_gb`, `saturate`, `visit_order`, `entry_*`, `decoupled`, `pages`) are ignored for it, and the `ivf_*`
/// fields for a graph build.
#[pyclass(module = "trawl._trawl", get_all, set_all, from_py_object)]
#[derive(Debug, Clone)]
pub struct BuildParams {
    /// Index kind: "graph" or "ivf".
    pub kind: String,
    /// Distance: "l2" (squared Euclidean), "ip" (negative inner product) or "cosine".
    pub metric: String,
    /// Maximum out-degree of the Vamana graph.
    pub R: i64,
    /// Candidate list size of the graph build.
    pub L: i64,
    /// Pruning factor α (≥ 1).
    pub alpha: f64,
    /// Bytes per vector of the in-memory PQ codes (at most the dimension); None = 32, or the
    /// dimension when it is smaller.
    pub pq_bytes: Option<i64>,
    /// Build threads; 0 = one per core.
    pub threads: i64,
    /// Seed of the PQ training, the graph build and the entry sample.
    pub seed: i64,
    /// Memory budget of the graph build in GiB (the graph is built in overlapping shards
    /// when the whole would not fit); None = no limit.
    pub memory_budget_gb: Option<f64>,
    /// Fill every pruned list up to R neighbours (DiskANN's disk build does so).
    pub saturate: bool,
    /// The order the graph build links its points in: "blocks:N" (blocks of N consecutive
    /// ids in a seeded random order; the default "blocks:64"), "random" or "ids".
    pub visit_order: String,
    /// Optimised PQ: learn an orthogonal rotation with the PQ codebooks (lower quantisation
    /// error at the same code size; dim² multiply-adds more per query).
    pub opq: bool,
    /// The codes searches navigate with: "pq" (pq_bytes per vector) or "rabitq" (Extended
    /// RaBitQ, `bits` per dimension plus 8–16 bytes of factors; graph kind).
    pub quant: String,
    /// RaBitQ bits per dimension, 1–8 (quant = "rabitq"; None = 4).
    pub bits: Option<i64>,
    /// Share of the vectors sampled into the in-memory entry index; 0 = none.
    pub entry_ratio: f64,
    /// Out-degree of the entry index's graph.
    pub entry_degree: i64,
    /// Candidate list size of the entry index's build.
    pub entry_build_list: i64,
    /// How the entry sample is drawn: "uniform" or "freq" (most visited by sample searches).
    pub entry_sampling: String,
    /// Also write the decoupled layout (compressed graph and vector files).
    pub decoupled: bool,
    /// Also write the page-node layout (PageANN: one graph node per 4 KiB page), opened with
    /// `Index.open(..., layout="pages")`.
    pub pages: bool,
    /// IVF: target posting-list size before replication (lists ≈ n / size).
    pub ivf_list_size: i64,
    /// IVF: boundary replication's ε — a vector joins list i when dist(v, c_i) ≤ (1 + ε) ·
    /// dist(v, c_1).
    pub ivf_epsilon: f64,
    /// IVF: most lists a vector joins (1..=64).
    pub ivf_max_replicas: i64,
    /// IVF: also write the vectors in id order (`ivf-vectors-by-id.trawl`), searched with
    /// `Index.open(..., ivf_vectors="by_id")` (the bucket layout's ablation baseline).
    pub by_id_vectors: bool,
    /// A label-aware graph build (FilteredVamana: per-label start nodes, a prune that keeps
    /// a path for every label) when labels are given: "auto" (on unless a memory budget is
    /// set), "on" or "off".
    pub label_aware: String,
    /// Show progress bars on stderr (only when it is a terminal).
    pub progress: bool,
}

#[pymethods]
impl BuildParams {
    #[new]
    #[pyo3(signature = (*, kind = "graph".to_string(), metric = "l2".to_string(), R = 64, L = 100,
        alpha = 1.2, pq_bytes = None, threads = 0, seed = VamanaParams::default().seed as i64,
        memory_budget_gb = None, saturate = false,
        visit_order = VamanaParams::default().order.to_string(), opq = false,
        quant = "pq".to_string(), bits = None, entry_ratio = 0.01, entry_degree = 32,
        entry_build_list = 64, entry_sampling = "uniform".to_string(), decoupled = false, pages = false,
        ivf_list_size = trawl::kinds::ivf::DEFAULT_LIST_SIZE as i64,
        ivf_epsilon = f32_as_f64(trawl::kinds::ivf::DEFAULT_EPSILON),
        ivf_max_replicas = trawl::kinds::ivf::DEFAULT_MAX_REPLICAS as i64, by_id_vectors = false,
        label_aware = "auto".to_string(), progress = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: String,
        metric: String,
        R: i64,
        L: i64,
        alpha: f64,
        pq_bytes: Option<i64>,
        threads: i64,
        seed: i64,
        memory_budget_gb: Option<f64>,
        saturate: bool,
        visit_order: String,
        opq: bool,
        quant: String,
        bits: Option<i64>,
        entry_ratio: f64,
        entry_degree: i64,
        entry_build_list: i64,
        entry_sampling: String,
        decoupled: bool,
        pages: bool,
        ivf_list_size: i64,
        ivf_epsilon: f64,
        ivf_max_replicas: i64,
        by_id_vectors: bool,
        label_aware: String,
        progress: bool,
    ) -> Self {
        Self {
            kind,
            metric,
            R,
            L,
            alpha,
            pq_bytes,
            threads,
            seed,
            memory_budget_gb,
            saturate,
            visit_order,
            opq,
            quant,
            bits,
            entry_ratio,
            entry_degree,
            entry_build_list,
            entry_sampling,
            decoupled,
            pages,
            ivf_list_size,
            ivf_epsilon,
            ivf_max_replicas,
            by_id_vectors,
            label_aware,
            progress,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "BuildParams(kind={:?}, metric={:?}, R={}, L={}, alpha={}, pq_bytes={}, threads={}, \
             seed={}, memory_budget_gb={}, saturate={}, visit_order={:?}, opq={}, quant={:?}, bits={}, entry_ratio={}, entry_degree={}, \
             entry_build_list={}, entry_sampling={:?}, decoupled={}, pages={}, ivf_list_size={}, \
             ivf_epsilon={}, ivf_max_replicas={}, by_id_vectors={}, label_aware={:?}, progress={})",
            self.kind,
            self.metric,
            self.R,
            self.L,
            self.alpha,
            self.pq_bytes.map_or("None".to_string(), |b| b.to_string()),
            self.threads,
            self.seed,
            self.memory_budget_gb
                .map_or("None".to_string(), |g| g.to_string()),
            py_bool(self.saturate),
            self.visit_order,
            py_bool(self.opq),
            self.quant,
            self.bits.map_or("None".to_string(), |b| b.to_string()),
            self.entry_ratio,
            self.entry_degree,
            self.entry_build_list,
            self.entry_sampling,
            py_bool(self.decoupled),
            py_bool(self.pages),
            self.ivf_list_size,
            py_float(self.ivf_epsilon),
            self.ivf_max_replicas,
            py_bool(self.by_id_vectors),
            self.label_aware,
            py_bool(self.progress),
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// A float as Python's `repr` writes it (`0.1`, `1.0`, `inf`, `nan`).
fn py_float(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else if x == x.trunc() && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        x.to_string()
    }
}

/// An `f32` default as the `f64` of its shortest decimal form (0.1f32 → 0.1, not
/// 0.10000000149011612), so that Python shows the value the library documents.
pub fn f32_as_f64(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

impl Default for BuildParams {
    fn default() -> Self {
        Self::new(
            "graph".into(),
            "l2".into(),
            64,
            100,
            1.2,
            None,
            0,
            VamanaParams::default().seed as i64,
            None,
            false,
            VamanaParams::default().order.to_string(),
            false,
            "pq".into(),
            None,
            0.01,
            32,
            64,
            "uniform".into(),
            false,
            false,
            trawl::kinds::ivf::DEFAULT_LIST_SIZE as i64,
            f32_as_f64(trawl::kinds::ivf::DEFAULT_EPSILON),
            trawl::kinds::ivf::DEFAULT_MAX_REPLICAS as i64,
            false,
            "auto".into(),
            true,
        )
    }
}

impl BuildParams {
    /// The library's build options (the library checks them, naming each).
    pub fn options(&self) -> PyResult<BuildOptions> {
        let seed = u64::try_from(self.seed)
            .map_err(|_| invalid(format!("seed = {} must be at least 0", self.seed)))?;
        let finite = |name: &str, x: f64| -> PyResult<f32> {
            if x.is_finite() {
                Ok(x as f32)
            } else {
                Err(invalid(format!("{name} = {x} must be a finite number")))
            }
        };
        let o = BuildOptions {
            kind: parse("kind", &self.kind)?,
            attrs: None,
            metric: parse("metric", &self.metric)?,
            r: count("R", self.R, 0)?,
            l: count("L", self.L, 0)?,
            alpha: finite("alpha", self.alpha)?,
            pq_bytes: self.pq_bytes.map(|b| count("pq_bytes", b, 1)).transpose()?,
            seed,
            memory_budget_gb: self.memory_budget_gb,
            saturate: self.saturate,
            visit_order: parse("visit_order", &self.visit_order)?,
            opq: self.opq,
            quant: match (self.quant.as_str(), self.bits) {
                ("pq", None) => trawl::quant::QuantKind::Pq,
                ("pq", Some(_)) => {
                    return Err(invalid(
                        "bits sets RaBitQ codes: pass quant=\"rabitq\" too".to_string(),
                    ))
                }
                ("rabitq", b) => trawl::quant::QuantKind::RaBitQ {
                    bits: u8::try_from(b.unwrap_or(4))
                        .map_err(|_| invalid(format!("bits = {b:?} must be between 1 and 8")))?,
                },
                (other, _) => {
                    return Err(invalid(format!(
                        "quant = {other:?} must be \"pq\" or \"rabitq\""
                    )))
                }
            },
            entry_ratio: self.entry_ratio,
            entry_degree: count("entry_degree", self.entry_degree, 0)?,
            entry_build_list: count("entry_build_list", self.entry_build_list, 0)?,
            entry_sampling: parse("entry_sampling", &self.entry_sampling)?,
            decoupled: self.decoupled,
            pages: self.pages,
            ivf_list_size: count("ivf_list_size", self.ivf_list_size, 1)?,
            ivf_epsilon: finite("ivf_epsilon", self.ivf_epsilon)?,
            ivf_max_replicas: count("ivf_max_replicas", self.ivf_max_replicas, 1)?,
            by_id_vectors: self.by_id_vectors,
            label_aware: parse("label_aware", &self.label_aware)?,
        };
        o.validate().py()?;
        Ok(o)
    }

    /// Build threads (0 = one per core).
    pub fn thread_count(&self) -> PyResult<usize> {
        count("threads", self.threads, 0)
    }
}

/// Parameters of `Index.search`, `Index.batch_search` and `Index.range_search`. Keyword-only,
/// all optional; the defaults are those of `trawl search`. The `range_*` fields apply to
/// range searches of a graph index only.
///
/// One object serves both index kinds: a graph index reads `L` and the graph fields, an IVF
/// index `L` (the number of posting lists probed) and the IVF fields (`rerank_n`, `ivf_*`,
/// `heuristic`, `page_merge`, `page_buffer`, `page_mates`, `centroid_list`, `accel_batch`); each ignores the
/// other kind's fields.
#[pyclass(module = "trawl._trawl", get_all, set_all, from_py_object)]
#[derive(Debug, Clone)]
pub struct SearchParams {
    /// Graph index: candidate list size (larger: slower, more accurate); None = max(100, k)
    /// (page-node layout: pages, max(100, k) / min(capacity, 4), and k may exceed it).
    /// IVF index: posting lists probed (nprobe); None = 32 (every list when fewer).
    pub L: Option<i64>,
    /// Beam search: records read per round trip.
    pub beam_width: i64,
    /// "beam" (beam search), "pipe" (PipeSearch: reads overlap the computation) or "flash"
    /// (FlashANNS's batch search).
    pub strategy: String,
    /// Seed each query with this many nodes of the in-memory entry index (0 = start at the
    /// medoid); PipeANN uses 10.
    pub entry_list: i64,
    /// PipeSearch width policy: "dynamic", "static" or "fixed".
    pub pipe_width: String,
    /// PipeSearch: width at the start of a query (dynamic policy).
    pub pipe_start_width: i64,
    /// PipeSearch: largest width (at most the index's queue depth).
    pub pipe_max_width: i64,
    /// Beam search: widen the beam with the explored position, e.g. "4,4,8,8,16,16,24,24,32"
    /// or "5:4,8,16" (OctopusANN's DynamicWidth, capped by beam_width); None = fixed width.
    pub dynamic_width: Option<String>,
    /// Beam search and PipeSearch: score every record of each page read and explore the kept
    /// ones without a read (PageSearch; pays on the PageShuffle layout).
    pub page_search: bool,
    /// Decoupled layout: vectors re-ranked per batch.
    pub rerank_batch: i64,
    /// Decoupled layout: stop re-ranking after a batch that changes less than this share of
    /// the top k (0 re-ranks every expanded node).
    pub rerank_threshold: f64,
    /// Decoupled layout: stop the re-rank by an error bound (multiplier M > 0) instead of the
    /// batches' benefit (0).
    pub rerank_bound: f64,
    /// Decoupled layout: prefetch vectors during the traversal.
    pub prefetch: bool,
    /// Decoupled layout: expansions in a row that leave the PQ top-(k+B) unchanged before the
    /// prefetch starts (0 = rerank_batch).
    pub prefetch_window: i64,
    /// Decoupled layout: prefetch when the traversal is ending.
    pub converge_prefetch: bool,
    /// Decoupled layout: re-rank batches read ahead of the one being processed.
    pub rerank_lookahead: i64,
    /// Decoupled layout: most vector reads in flight after the traversal (0 = the
    /// strategy's width).
    pub rerank_depth: i64,
    /// RaBitQ codes (decoupled re-rank, IVF re-rank): skip a candidate whose lower bound,
    /// estimate − ε₀·σ, is beyond the k-th exact distance so far; this is ε₀ (1.9 ≈ 94% per
    /// candidate, 3 ≈ 99.7%; 0 never skips).
    pub rerank_skip_eps: f64,
    /// IVF: candidates the filter stage keeps for the re-rank (n); None = max(10·k, 4·L).
    pub rerank_n: Option<i64>,
    /// IVF: re-rank mini-batch size.
    pub ivf_batch: i64,
    /// IVF: the early stop's change-rate threshold ε, in [0, 1] (0 re-ranks all rerank_n).
    pub ivf_epsilon: f64,
    /// IVF: mini-batches in a row below ε that stop the re-rank (β).
    pub ivf_beta: i64,
    /// IVF: stop the re-rank early (False: re-rank all rerank_n).
    pub heuristic: bool,
    /// IVF: read the vectors of one mini-batch on one page with one read.
    pub page_merge: bool,
    /// IVF: keep every page read for the rest of the query (no page read twice).
    pub page_buffer: bool,
    /// IVF: re-rank every vector on a page read for a candidate (its bucket mates), at no
    /// extra read.
    pub page_mates: bool,
    /// IVF: list size of the centroid-graph search; 0 = max(2·L, 32).
    pub centroid_list: i64,
    /// IVF, batch_search: queries per accelerator job; 0 = 1 on the CPU, 32 on a GPU.
    pub accel_batch: i64,
    /// Flash search: queries in flight per search thread; 0 = 32 (1024 on a GPU).
    pub batch: i64,
    /// Flash search: steps a read is chosen ahead (0 = strict best-first).
    pub staleness: i64,
    /// Flash search: "query" (a query resumes when its read lands) or "kernel" (when every
    /// read of the oldest step has).
    pub grain: String,
    /// Flash search: steps each query takes strictly before its reads are chosen ahead.
    pub strict_steps: i64,
    /// Sharded index: shards each query visits, nearest first (0 = all).
    pub probe: i64,
    /// Range search (`Index.range_search`) on a graph index: candidates whose code distance
    /// (PQ or RaBitQ) is within radius + range_slack·|radius| are kept, to make up for the
    /// codes' error (results are checked by exact distance: more slack costs reads, never
    /// precision); a finite number ≥ 0.
    pub range_slack: f64,
    /// Range search with beam search: reads per round trip while the candidates within the
    /// radius are expanded (at least `beam_width`; 0 keeps `beam_width`).
    pub range_width: i64,
    /// Range search on a graph index: round trips without progress after which a query that
    /// has found nothing within the radius stops (0 = never).
    pub range_early_stop: i64,
}

/// The library's defaults, as Python values.
fn d() -> Options {
    Options::default()
}

#[pymethods]
impl SearchParams {
    #[new]
    #[pyo3(signature = (*, L = None, beam_width = d().beam_width as i64, strategy = d().strategy,
        entry_list = d().entry_list as i64, pipe_width = d().pipe_width.name().to_string(),
        pipe_start_width = d().pipe_start_width as i64,
        pipe_max_width = d().pipe_max_width as i64, dynamic_width = None,
        page_search = d().page_search, rerank_batch = d().rerank_batch as i64,
        rerank_threshold = f32_as_f64(d().rerank_threshold),
        rerank_bound = f32_as_f64(d().rerank_bound), prefetch = d().prefetch,
        prefetch_window = d().prefetch_window as i64, converge_prefetch = d().converge_prefetch,
        rerank_lookahead = d().rerank_lookahead as i64, rerank_depth = d().rerank_depth as i64,
        rerank_skip_eps = f32_as_f64(d().rerank_skip_eps), rerank_n = None, ivf_batch = d().ivf_batch as i64,
        ivf_epsilon = f32_as_f64(d().ivf_epsilon), ivf_beta = d().ivf_beta as i64,
        heuristic = d().heuristic, page_merge = d().page_merge, page_buffer = d().page_buffer,
        page_mates = d().page_mates, centroid_list = d().centroid_list as i64,
        accel_batch = d().accel_batch as i64, batch = d().flash_batch as i64,
        staleness = d().staleness as i64, grain = d().grain.name().to_string(),
        strict_steps = d().strict_steps as i64, probe = d().probe as i64,
        range_slack = f32_as_f64(d().range_slack), range_width = d().range_width as i64,
        range_early_stop = d().range_early_stop as i64))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        L: Option<i64>,
        beam_width: i64,
        strategy: String,
        entry_list: i64,
        pipe_width: String,
        pipe_start_width: i64,
        pipe_max_width: i64,
        dynamic_width: Option<String>,
        page_search: bool,
        rerank_batch: i64,
        rerank_threshold: f64,
        rerank_bound: f64,
        prefetch: bool,
        prefetch_window: i64,
        converge_prefetch: bool,
        rerank_lookahead: i64,
        rerank_depth: i64,
        rerank_skip_eps: f64,
        rerank_n: Option<i64>,
        ivf_batch: i64,
        ivf_epsilon: f64,
        ivf_beta: i64,
        heuristic: bool,
        page_merge: bool,
        page_buffer: bool,
        page_mates: bool,
        centroid_list: i64,
        accel_batch: i64,
        batch: i64,
        staleness: i64,
        grain: String,
        strict_steps: i64,
        probe: i64,
        range_slack: f64,
        range_width: i64,
        range_early_stop: i64,
    ) -> Self {
        Self {
            L,
            beam_width,
            strategy,
            entry_list,
            pipe_width,
            pipe_start_width,
            pipe_max_width,
            dynamic_width,
            page_search,
            rerank_batch,
            rerank_threshold,
            rerank_bound,
            prefetch,
            prefetch_window,
            converge_prefetch,
            rerank_lookahead,
            rerank_depth,
            rerank_skip_eps,
            rerank_n,
            ivf_batch,
            ivf_epsilon,
            ivf_beta,
            heuristic,
            page_merge,
            page_buffer,
            page_mates,
            centroid_list,
            accel_batch,
            batch,
            staleness,
            grain,
            strict_steps,
            probe,
            range_slack,
            range_width,
            range_early_stop,
        }
    }

    fn __repr__(&self) -> String {
        let opt = |x: Option<i64>| x.map_or("None".to_string(), |v| v.to_string());
        format!(
            "SearchParams(L={}, beam_width={}, strategy={:?}, entry_list={}, pipe_width={:?}, \
             pipe_start_width={}, pipe_max_width={}, dynamic_width={}, page_search={}, \
             rerank_batch={}, rerank_threshold={}, rerank_bound={}, prefetch={}, \
             prefetch_window={}, converge_prefetch={}, rerank_lookahead={}, rerank_depth={}, \
             rerank_skip_eps={}, rerank_n={}, ivf_batch={}, ivf_epsilon={}, ivf_beta={}, heuristic={}, \
             page_merge={}, page_buffer={}, page_mates={}, centroid_list={}, accel_batch={}, \
             batch={}, staleness={}, grain={:?}, strict_steps={}, probe={}, range_slack={}, \
             range_width={}, range_early_stop={})",
            opt(self.L),
            self.beam_width,
            self.strategy,
            self.entry_list,
            self.pipe_width,
            self.pipe_start_width,
            self.pipe_max_width,
            self.dynamic_width
                .as_ref()
                .map_or("None".to_string(), |d| format!("{d:?}")),
            py_bool(self.page_search),
            self.rerank_batch,
            py_float(self.rerank_threshold),
            py_float(self.rerank_bound),
            py_bool(self.prefetch),
            self.prefetch_window,
            py_bool(self.converge_prefetch),
            self.rerank_lookahead,
            self.rerank_depth,
            py_float(self.rerank_skip_eps),
            opt(self.rerank_n),
            self.ivf_batch,
            py_float(self.ivf_epsilon),
            self.ivf_beta,
            py_bool(self.heuristic),
            py_bool(self.page_merge),
            py_bool(self.page_buffer),
            py_bool(self.page_mates),
            self.centroid_list,
            self.accel_batch,
            self.batch,
            self.staleness,
            self.grain,
            self.strict_steps,
            self.probe,
            py_float(self.range_slack),
            self.range_width,
            self.range_early_stop,
        )
    }
}

impl Default for SearchParams {
    fn default() -> Self {
        let o = d();
        Self::new(
            None,
            o.beam_width as i64,
            o.strategy.clone(),
            o.entry_list as i64,
            o.pipe_width.name().to_string(),
            o.pipe_start_width as i64,
            o.pipe_max_width as i64,
            None,
            o.page_search,
            o.rerank_batch as i64,
            f32_as_f64(o.rerank_threshold),
            f32_as_f64(o.rerank_bound),
            o.prefetch,
            o.prefetch_window as i64,
            o.converge_prefetch,
            o.rerank_lookahead as i64,
            o.rerank_depth as i64,
            f32_as_f64(o.rerank_skip_eps),
            None,
            o.ivf_batch as i64,
            f32_as_f64(o.ivf_epsilon),
            o.ivf_beta as i64,
            o.heuristic,
            o.page_merge,
            o.page_buffer,
            o.page_mates,
            o.centroid_list as i64,
            o.accel_batch as i64,
            o.flash_batch as i64,
            o.staleness as i64,
            o.grain.name().to_string(),
            o.strict_steps as i64,
            o.probe as i64,
            f32_as_f64(o.range_slack),
            o.range_width as i64,
            o.range_early_stop as i64,
        )
    }
}

impl SearchParams {
    /// `base` (the options the index was opened with) with these search parameters: the
    /// library checks and resolves them per kind ([`Options::params`]).
    pub fn to_options(&self, base: &Options) -> PyResult<Options> {
        let dynamic_width = match &self.dynamic_width {
            Some(s) => Some(parse::<WidthSchedule>("dynamic_width", s)?),
            None => None,
        };
        let float = |name: &str, x: f64| -> PyResult<f32> {
            if x.is_finite() {
                Ok(x as f32)
            } else {
                Err(invalid(format!("{name} = {x} must be a finite number")))
            }
        };
        Ok(Options {
            l: self.L.map(|l| count("L", l, 1)).transpose()?,
            strategy: self.strategy.clone(),
            beam_width: count("beam_width", self.beam_width, 1)?,
            dynamic_width,
            page_search: self.page_search,
            pipe_width: parse::<WidthPolicy>("pipe_width", &self.pipe_width)?,
            pipe_start_width: count("pipe_start_width", self.pipe_start_width, 1)?,
            pipe_max_width: count("pipe_max_width", self.pipe_max_width, 1)?,
            flash_batch: count("batch", self.batch, 0)?,
            staleness: count("staleness", self.staleness, 0)?,
            grain: parse::<Grain>("grain", &self.grain)?,
            strict_steps: count("strict_steps", self.strict_steps, 0)?,
            entry_list: count("entry_list", self.entry_list, 0)?,
            rerank_batch: count("rerank_batch", self.rerank_batch, 1)?,
            rerank_threshold: float("rerank_threshold", self.rerank_threshold)?,
            prefetch: self.prefetch,
            prefetch_window: count("prefetch_window", self.prefetch_window, 0)?,
            converge_prefetch: self.converge_prefetch,
            rerank_lookahead: count("rerank_lookahead", self.rerank_lookahead, 0)?,
            rerank_bound: float("rerank_bound", self.rerank_bound)?,
            rerank_depth: count("rerank_depth", self.rerank_depth, 0)?,
            rerank_skip_eps: float("rerank_skip_eps", self.rerank_skip_eps)?,
            rerank_n: self.rerank_n.map(|r| count("rerank_n", r, 1)).transpose()?,
            ivf_batch: count("ivf_batch", self.ivf_batch, 1)?,
            ivf_epsilon: float("ivf_epsilon", self.ivf_epsilon)?,
            ivf_beta: count("ivf_beta", self.ivf_beta, 1)?,
            heuristic: self.heuristic,
            page_merge: self.page_merge,
            page_buffer: self.page_buffer,
            page_mates: self.page_mates,
            centroid_list: count("centroid_list", self.centroid_list, 0)?,
            accel_batch: count("accel_batch", self.accel_batch, 0)?,
            probe: count("probe", self.probe, 0)?,
            range_slack: float("range_slack", self.range_slack)?,
            range_width: count("range_width", self.range_width, 0)?,
            range_early_stop: count("range_early_stop", self.range_early_stop, 0)?,
            ..base.clone()
        })
    }
}

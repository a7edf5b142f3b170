//! `BuildParams` and `SearchParams`: plain attribute bags, checked when used.
//!
//! Integer attributes are held as Python ints (`i64`) rather than `usize` so that a negative
//! value is an `InvalidInputError` naming the parameter, not an `OverflowError` at assignment.

#![allow(non_snake_case)]

use pyo3::prelude::*;
use trawl::graph::VamanaParams;
use trawl::index::IndexParams;
use trawl::ivf::search::MAX_IVF_PARAM;
use trawl::ivf::{IvfParams, IvfSearchParams};
use trawl::quant::pq::{PqParams, OPQ_ITERS};
use trawl::search::entry::{EntryParams, EntrySampling};
use trawl::search::{
    BeamParams, FlashParams, Grain, PipeParams, RerankParams, SearchParams as LibSearchParams,
    Strategy, WidthPolicy, WidthSchedule, DEFAULT_BEAM_WIDTH,
};
use trawl::Metric;

use crate::errors::{invalid, PyResultExt};

/// `value` as a count of at least `min`, or an `InvalidInputError` naming `name`.
pub fn count(name: &str, value: i64, min: i64) -> PyResult<usize> {
    if value < min {
        return Err(invalid(format!("{name} = {value} must be at least {min}")));
    }
    usize::try_from(value).map_err(|_| invalid(format!("{name} = {value} is too large")))
}

fn parse<T: std::str::FromStr>(name: &str, value: &str) -> PyResult<T>
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
/// `memory_budget_gb`, `saturate`, `visit_order`, `entry_*`, `decoupled`) are ignored for it, and the `ivf_*`
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
    /// Show progress bars on stderr (only when it is a terminal).
    pub progress: bool,
}

/// PQ bytes per vector when `pq_bytes` is None (fewer for data of fewer dimensions).
pub const DEFAULT_PQ_BYTES: usize = 32;

#[pymethods]
impl BuildParams {
    #[new]
    #[pyo3(signature = (*, kind = "graph".to_string(), metric = "l2".to_string(), R = 64, L = 100,
        alpha = 1.2, pq_bytes = None, threads = 0, seed = VamanaParams::default().seed as i64,
        memory_budget_gb = None, saturate = false,
        visit_order = VamanaParams::default().order.to_string(), opq = false, entry_ratio = 0.01, entry_degree = 32,
        entry_build_list = 64, entry_sampling = "uniform".to_string(), decoupled = false,
        ivf_list_size = trawl::ivf::DEFAULT_LIST_SIZE as i64,
        ivf_epsilon = f32_as_f64(trawl::ivf::DEFAULT_EPSILON),
        ivf_max_replicas = trawl::ivf::DEFAULT_MAX_REPLICAS as i64, by_id_vectors = false,
        progress = true))]
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
        entry_ratio: f64,
        entry_degree: i64,
        entry_build_list: i64,
        entry_sampling: String,
        decoupled: bool,
        ivf_list_size: i64,
        ivf_epsilon: f64,
        ivf_max_replicas: i64,
        by_id_vectors: bool,
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
            entry_ratio,
            entry_degree,
            entry_build_list,
            entry_sampling,
            decoupled,
            ivf_list_size,
            ivf_epsilon,
            ivf_max_replicas,
            by_id_vectors,
            progress,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "BuildParams(kind={:?}, metric={:?}, R={}, L={}, alpha={}, pq_bytes={}, threads={}, \
             seed={}, memory_budget_gb={}, saturate={}, visit_order={:?}, opq={}, entry_ratio={}, entry_degree={}, \
             entry_build_list={}, entry_sampling={:?}, decoupled={}, ivf_list_size={}, \
             ivf_epsilon={}, ivf_max_replicas={}, by_id_vectors={}, progress={})",
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
            self.entry_ratio,
            self.entry_degree,
            self.entry_build_list,
            self.entry_sampling,
            py_bool(self.decoupled),
            self.ivf_list_size,
            py_float(self.ivf_epsilon),
            self.ivf_max_replicas,
            py_bool(self.by_id_vectors),
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
            0.01,
            32,
            64,
            "uniform".into(),
            false,
            trawl::ivf::DEFAULT_LIST_SIZE as i64,
            f32_as_f64(trawl::ivf::DEFAULT_EPSILON),
            trawl::ivf::DEFAULT_MAX_REPLICAS as i64,
            false,
            true,
        )
    }
}

/// What `trawl.build` builds.
#[derive(Debug, Clone)]
pub enum BuildPlan {
    /// A graph index.
    Graph(IndexParams),
    /// An IVF index; `pq_default`: `pq_bytes` was None (32, or the dimension when smaller).
    Ivf { params: IvfParams, pq_default: bool },
}

impl BuildParams {
    /// What to build, every parameter of that kind checked (those of the other kind ignored).
    pub fn plan(&self) -> PyResult<BuildPlan> {
        match self.kind.as_str() {
            "graph" => Ok(BuildPlan::Graph(self.to_lib()?)),
            "ivf" => Ok(BuildPlan::Ivf {
                params: self.to_ivf()?,
                pq_default: self.pq_bytes.is_none(),
            }),
            other => Err(invalid(format!(
                "kind = {other:?}: expected \"graph\" or \"ivf\""
            ))),
        }
    }

    /// The library's IVF parameters, as `trawl build --kind ivf` maps its options (with
    /// `pq_bytes` None: 32, to be clamped to the dimension).
    pub fn to_ivf(&self) -> PyResult<IvfParams> {
        let metric: Metric = parse("metric", &self.metric)?;
        let seed = u64::try_from(self.seed)
            .map_err(|_| invalid(format!("seed = {} must be at least 0", self.seed)))?;
        if !(self.ivf_epsilon.is_finite() && self.ivf_epsilon >= 0.0) {
            return Err(invalid(format!(
                "ivf_epsilon = {} must be a finite value of at least 0",
                self.ivf_epsilon
            )));
        }
        let params = IvfParams {
            metric,
            list_size: count("ivf_list_size", self.ivf_list_size, 1)?,
            epsilon: self.ivf_epsilon as f32,
            max_replicas: count("ivf_max_replicas", self.ivf_max_replicas, 1)?,
            pq: PqParams {
                bytes_per_vector: match self.pq_bytes {
                    Some(b) => count("pq_bytes", b, 1)?,
                    None => DEFAULT_PQ_BYTES,
                },
                seed,
                opq_iters: if self.opq { OPQ_ITERS } else { 0 },
                ..PqParams::default()
            },
            seed,
            by_id_file: self.by_id_vectors,
            ..IvfParams::default()
        };
        // The library's ranges (list size, ε, replicas), checked before any data is read
        // (against a stand-in shape: the data's own is checked again by the build).
        params.validate(1, params.pq.bytes_per_vector).py()?;
        Ok(params)
    }

    /// The library's parameters, exactly as `trawl build` maps its options.
    pub fn to_lib(&self) -> PyResult<IndexParams> {
        let metric: Metric = parse("metric", &self.metric)?;
        let seed = u64::try_from(self.seed)
            .map_err(|_| invalid(format!("seed = {} must be at least 0", self.seed)))?;
        if !(self.alpha.is_finite() && self.alpha >= 1.0) {
            return Err(invalid(format!(
                "alpha = {} must be at least 1",
                self.alpha
            )));
        }
        if !(0.0..=1.0).contains(&self.entry_ratio) {
            return Err(invalid(format!(
                "entry_ratio = {} must be between 0 (no entry index) and 1",
                self.entry_ratio
            )));
        }
        let budget = match self.memory_budget_gb {
            Some(g) if !(g.is_finite() && g > 0.0) => {
                return Err(invalid(format!("memory_budget_gb = {g} must be positive")))
            }
            Some(g) => Some((g * (1u64 << 30) as f64) as u64),
            None => None,
        };
        let sampling: EntrySampling = parse("entry_sampling", &self.entry_sampling)?;
        Ok(IndexParams {
            metric,
            graph: VamanaParams {
                r: count("R", self.R, 1)?,
                l: count("L", self.L, 1)?,
                alpha: self.alpha as f32,
                seed,
                memory_budget_bytes: budget,
                saturate: self.saturate,
                order: parse("visit_order", &self.visit_order)?,
                ..VamanaParams::default()
            },
            pq: PqParams {
                bytes_per_vector: match self.pq_bytes {
                    Some(b) => count("pq_bytes", b, 1)?,
                    None => DEFAULT_PQ_BYTES,
                },
                seed,
                opq_iters: if self.opq { OPQ_ITERS } else { 0 },
                ..PqParams::default()
            },
            entry: (self.entry_ratio > 0.0)
                .then(|| -> PyResult<EntryParams> {
                    Ok(EntryParams {
                        ratio: self.entry_ratio,
                        r: count("entry_degree", self.entry_degree, 1)?,
                        l: count("entry_build_list", self.entry_build_list, 1)?,
                        seed,
                        sampling,
                    })
                })
                .transpose()?,
        })
    }

    /// Build threads (0 = one per core).
    pub fn thread_count(&self) -> PyResult<usize> {
        count("threads", self.threads, 0)
    }
}

/// Parameters of `Index.search` and `Index.batch_search`. Keyword-only, all optional; the
/// defaults are those of `trawl search`.
///
/// One object serves both index kinds: a graph index reads `L` and the graph fields, an IVF
/// index `L` (the number of posting lists probed) and the IVF fields (`rerank_n`, `ivf_*`,
/// `heuristic`, `page_merge`, `page_buffer`, `page_mates`, `centroid_list`, `accel_batch`); each ignores the
/// other kind's fields.
#[pyclass(module = "trawl._trawl", get_all, set_all, from_py_object)]
#[derive(Debug, Clone)]
pub struct SearchParams {
    /// Graph index: candidate list size (larger: slower, more accurate); None = max(100, k).
    /// IVF index: posting lists probed (nprobe); None = 32 (every list when fewer).
    pub L: Option<i64>,
    /// Beam search: records read per round trip.
    pub beam_width: i64,
    /// "beam" (beam search) or "pipe" (PipeSearch: reads overlap the computation).
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
}

/// Lists probed by an IVF search when `L` is None.
pub const DEFAULT_NPROBE: usize = 32;

#[pymethods]
impl SearchParams {
    #[new]
    #[pyo3(signature = (*, L = None, beam_width = DEFAULT_BEAM_WIDTH as i64, strategy = "beam".to_string(),
        entry_list = 0, pipe_width = "dynamic".to_string(), pipe_start_width = 4,
        pipe_max_width = 32, dynamic_width = None, page_search = false, rerank_batch = 10,
        rerank_threshold = 0.01, rerank_bound = 0.0, prefetch = true, rerank_n = None,
        ivf_batch = IvfSearchParams::default().batch as i64,
        ivf_epsilon = f32_as_f64(IvfSearchParams::default().epsilon),
        ivf_beta = IvfSearchParams::default().beta as i64,
        heuristic = IvfSearchParams::default().heuristic,
        page_merge = IvfSearchParams::default().page_merge,
        page_buffer = IvfSearchParams::default().page_buffer,
        page_mates = IvfSearchParams::default().page_mates,
        centroid_list = IvfSearchParams::default().centroid_l as i64, accel_batch = 0,
        batch = 0, staleness = 1, grain = "query".to_string()))]
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
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "SearchParams(L={}, beam_width={}, strategy={:?}, entry_list={}, pipe_width={:?}, \
             pipe_start_width={}, pipe_max_width={}, dynamic_width={}, page_search={}, \
             rerank_batch={}, rerank_threshold={}, rerank_bound={}, prefetch={}, rerank_n={}, \
             ivf_batch={}, \
             ivf_epsilon={}, ivf_beta={}, heuristic={}, page_merge={}, page_buffer={}, \
             page_mates={}, centroid_list={}, accel_batch={}, batch={}, staleness={}, grain={:?})",
            self.L.map_or("None".to_string(), |l| l.to_string()),
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
            self.rerank_n.map_or("None".to_string(), |n| n.to_string()),
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
        )
    }
}

impl Default for SearchParams {
    fn default() -> Self {
        Self::new(
            None,
            DEFAULT_BEAM_WIDTH as i64,
            "beam".into(),
            0,
            "dynamic".into(),
            4,
            32,
            None,
            false,
            10,
            0.01,
            0.0,
            true,
            None,
            IvfSearchParams::default().batch as i64,
            f32_as_f64(IvfSearchParams::default().epsilon),
            IvfSearchParams::default().beta as i64,
            IvfSearchParams::default().heuristic,
            IvfSearchParams::default().page_merge,
            IvfSearchParams::default().page_buffer,
            IvfSearchParams::default().page_mates,
            IvfSearchParams::default().centroid_l as i64,
            0,
            0,
            1,
            "query".into(),
        )
    }
}

impl SearchParams {
    /// The library's parameters for `k` results.
    /// `gpu`: whether the flash strategy's accelerator is a GPU (its default batch).
    pub fn to_lib(&self, k: usize, gpu: bool) -> PyResult<LibSearchParams> {
        let flash_batch_default = if gpu {
            1024
        } else {
            trawl::search::flash::DEFAULT_FLASH_BATCH
        };
        let l = match self.L {
            Some(l) => count("L", l, 1)?,
            None => k.max(100),
        };
        if k > l {
            return Err(invalid(format!(
                "k = {k} is larger than the list size L = {l}: raise L"
            )));
        }
        let dynamic_width = match &self.dynamic_width {
            Some(s) => Some(parse::<WidthSchedule>("dynamic_width", s)?),
            None => None,
        };
        let strategy = Strategy::named(
            &self.strategy,
            BeamParams {
                width: count("beam_width", self.beam_width, 1)?,
                dynamic_width,
                page_search: self.page_search,
            },
            if self.strategy == "pipe" {
                PipeParams {
                    policy: parse::<WidthPolicy>("pipe_width", &self.pipe_width)?,
                    start_width: count("pipe_start_width", self.pipe_start_width, 1)?,
                    max_width: count("pipe_max_width", self.pipe_max_width, 1)?,
                    ..PipeParams::default()
                }
            } else {
                PipeParams::default()
            },
            if self.strategy == "flash" {
                FlashParams {
                    batch: match count("batch", self.batch, 0)? {
                        0 => flash_batch_default,
                        b => b,
                    },
                    staleness: count("staleness", self.staleness, 0)?,
                    grain: parse::<Grain>("grain", &self.grain)?,
                    ..FlashParams::default()
                }
            } else {
                FlashParams::default()
            },
        )
        .py()?;
        if !(self.rerank_threshold.is_finite() && (0.0..=1.0).contains(&self.rerank_threshold)) {
            return Err(invalid(format!(
                "rerank_threshold = {} must be between 0 and 1",
                self.rerank_threshold
            )));
        }
        if !(self.rerank_bound.is_finite() && self.rerank_bound >= 0.0) {
            return Err(invalid(format!(
                "rerank_bound = {} must be a finite number ≥ 0",
                self.rerank_bound
            )));
        }
        Ok(LibSearchParams {
            k,
            l,
            strategy,
            entry_list: count("entry_list", self.entry_list, 0)?,
            rerank: RerankParams {
                batch: count("rerank_batch", self.rerank_batch, 1)?,
                threshold: self.rerank_threshold as f32,
                bound: self.rerank_bound as f32,
                prefetch: self.prefetch,
                ..RerankParams::default()
            },
        })
    }

    /// The library's IVF parameters for `k` results on an index of `n` vectors and `nlist`
    /// posting lists whose accelerator is a GPU (`gpu`), as `trawl search` maps its options,
    /// checked by the library.
    pub fn to_ivf(&self, k: usize, n: usize, nlist: usize, gpu: bool) -> PyResult<IvfSearchParams> {
        let nprobe = match self.L {
            Some(l) => count("L", l, 1)?,
            None => DEFAULT_NPROBE.min(nlist.max(1)),
        };
        let p = IvfSearchParams {
            k,
            nprobe,
            centroid_l: count("centroid_list", self.centroid_list, 0)?,
            top_n: match self.rerank_n {
                Some(r) => count("rerank_n", r, 1)?,
                // (Capped at the library's largest, so that an L too large for the index is
                // reported as such, not as its derived rerank_n.)
                None => (10 * k).max(4 * nprobe).min(MAX_IVF_PARAM).max(k),
            },
            batch: count("ivf_batch", self.ivf_batch, 1)?,
            epsilon: self.ivf_epsilon as f32,
            beta: count("ivf_beta", self.ivf_beta, 1)?,
            heuristic: self.heuristic,
            page_merge: self.page_merge,
            page_buffer: self.page_buffer,
            page_mates: self.page_mates,
            accel_batch: match count("accel_batch", self.accel_batch, 0)? {
                0 if gpu => 32,
                0 => 1,
                b => b,
            },
            ..IvfSearchParams::default()
        };
        if nprobe > nlist {
            return Err(invalid(format!(
                "L = {nprobe} is more than the index's {nlist} posting lists (for an IVF index \
                 L is the number of lists probed)"
            )));
        }
        if p.top_n < k {
            return Err(invalid(format!(
                "rerank_n = {} is smaller than k = {k}: the re-rank keeps at most rerank_n \
                 candidates",
                p.top_n
            )));
        }
        p.validate(n, nlist).py()?;
        Ok(p)
    }
}

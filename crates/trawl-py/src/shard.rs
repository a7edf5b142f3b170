//! Sharded indexes from Python: `trawl.build_sharded` (all in this process), the three steps a
//! cluster runs apart (`plan_shards`, `build_shard`, `finish_sharded`), `shard_manifest` (what
//! a scatter-gather driver needs: centroids, per-shard directories, ids and build ids) and
//! `trawl.ShardedIndex` (every shard open here, searched and merged by
//! [`trawl::kinds::sharded::ShardedIndex::search_rows`]).

use std::path::PathBuf;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trawl::data::AnyMatrix;
use trawl::io::EngineKind;
use trawl::kinds::graph::OpenOptions;
use trawl::kinds::sharded::{ShardError, ShardManifest, ShardParams, ShardedIndex as LibSharded};
use trawl::DType;

use crate::arrays::{as_array, dtype_of, Elements};
use crate::build::{run_interruptible, with_data, worker};
use crate::errors::{err, invalid, IntoPyErr, PyResultExt};
use crate::index::{numpy_name, stats_dict, MISSING_ID};
use crate::params::{count, BuildParams, SearchParams};
use crate::pyjson::ser_to_py;

impl IntoPyErr for ShardError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

fn shard_params(shards: i64, slack: f64, epsilon: f64, seed: i64) -> PyResult<ShardParams> {
    let p = ShardParams {
        shards: count("shards", shards, 1)?,
        slack,
        epsilon,
        seed: u64::try_from(seed)
            .map_err(|_| invalid(format!("seed = {seed} must be at least 0")))?,
    };
    if !(p.slack.is_finite() && p.slack >= 0.0) {
        return Err(invalid(format!(
            "slack = {slack} must be a finite number ≥ 0"
        )));
    }
    if !(p.epsilon.is_finite() && p.epsilon >= 0.0) {
        return Err(invalid(format!(
            "epsilon = {epsilon} must be a finite number ≥ 0"
        )));
    }
    Ok(p)
}

fn graph_params(params: &BuildParams) -> PyResult<trawl::kinds::graph::IndexParams> {
    let o = params.options()?;
    if o.kind != trawl::kinds::graph::KindName::Graph {
        return Err(invalid(
            "the shards of a sharded index are graph indexes: BuildParams(kind=\"graph\")",
        ));
    }
    // (PQ bytes default to 32 whatever the dimension, as every shard's build checks.)
    o.graph_params(usize::MAX).py()
}

/// Partitions `data` (a 2-D array or a vector file) into `shards` shards by balanced k-means
/// and builds each shard as a graph index of `params` in `index_dir/shard-NNN`, then writes
/// the shard manifest `index_dir/shards.trawl`. `slack` bounds a shard at
/// `ceil((1 + slack) * n / shards)` vectors; `epsilon` > 0 also puts a vector into its
/// second-nearest shard when that centroid is at most (1 + epsilon) times as far as the
/// nearest. `labels` / `attrs`: the vectors' attributes, as `trawl.build` takes them (each
/// shard keeps its rows'). Returns the build report (a dict). The GIL is released; Ctrl-C
/// stops it.
#[pyfunction]
#[pyo3(signature = (data, index_dir, shards, params = None, *, slack = 0.1, epsilon = 0.0,
    labels = None, attrs = None))]
#[allow(clippy::too_many_arguments)]
pub fn build_sharded<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    index_dir: PathBuf,
    shards: i64,
    params: Option<BuildParams>,
    slack: f64,
    epsilon: f64,
    labels: Option<&Bound<'py, PyAny>>,
    attrs: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let params = params.unwrap_or_default();
    let mut lib = graph_params(&params)?;
    let sp = shard_params(shards, slack, epsilon, params.seed)?;
    let (pool, ctl, cancel) = worker(params.thread_count()?, params.progress)?;
    let dir = index_dir.as_path();
    let report = with_data(py, data, |m: &AnyMatrix| {
        // Every vector's attributes (each shard keeps its rows'), checked before a write.
        lib.attrs = crate::filters::attributes(py, labels, attrs, m.n())?;
        let lib = &lib;
        run_interruptible(py, &cancel, || {
            pool.install(|| match m {
                AnyMatrix::F32(m) => {
                    trawl::kinds::sharded::build_sharded_index(m, dir, &sp, lib, &ctl)
                }
                AnyMatrix::U8(m) => {
                    trawl::kinds::sharded::build_sharded_index(m, dir, &sp, lib, &ctl)
                }
                AnyMatrix::I8(m) => {
                    trawl::kinds::sharded::build_sharded_index(m, dir, &sp, lib, &ctl)
                }
            })
        })
    })??
    .py()?;
    ser_to_py(py, &report)
}

/// Step 1 of a distributed sharded build: partitions `data` as `build_sharded` does and writes
/// the plan `index_dir/shards.plan.trawl`. Returns the plan report (shard sizes, …).
#[pyfunction]
#[pyo3(signature = (data, index_dir, shards, *, metric = "l2", slack = 0.1, epsilon = 0.0,
    seed = 0x5_4a2d, threads = 0))]
#[allow(clippy::too_many_arguments)]
pub fn plan_shards<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    index_dir: PathBuf,
    shards: i64,
    metric: &str,
    slack: f64,
    epsilon: f64,
    seed: i64,
    threads: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let metric: trawl::Metric = metric
        .parse()
        .map_err(|e: String| invalid(format!("metric: {e}")))?;
    let sp = shard_params(shards, slack, epsilon, seed)?;
    let (pool, ctl, cancel) = worker(count("threads", threads, 0)?, false)?;
    let dir = index_dir.as_path();
    let report = with_data(py, data, |m: &AnyMatrix| {
        run_interruptible(py, &cancel, || {
            pool.install(|| match m {
                AnyMatrix::F32(m) => trawl::kinds::sharded::plan_shards(m, metric, &sp, dir, &ctl),
                AnyMatrix::U8(m) => trawl::kinds::sharded::plan_shards(m, metric, &sp, dir, &ctl),
                AnyMatrix::I8(m) => trawl::kinds::sharded::plan_shards(m, metric, &sp, dir, &ctl),
            })
        })
    })??
    .py()?;
    ser_to_py(py, &report)
}

/// Step 2: builds shard `shard` of the plan in `index_dir` from `data` (the data the plan was
/// made from; its shape is checked) with `params` (its metric must be the plan's). Shards
/// build independently: run them on as many workers as you have.
#[pyfunction]
#[pyo3(signature = (data, index_dir, shard, params = None))]
pub fn build_shard<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    index_dir: PathBuf,
    shard: i64,
    params: Option<BuildParams>,
) -> PyResult<Bound<'py, PyAny>> {
    let params = params.unwrap_or_default();
    let lib = graph_params(&params)?;
    let shard = count("shard", shard, 0)?;
    let (pool, ctl, cancel) = worker(params.thread_count()?, params.progress)?;
    let dir = index_dir.as_path();
    let report = with_data(py, data, |m: &AnyMatrix| {
        run_interruptible(py, &cancel, || {
            pool.install(|| match m {
                AnyMatrix::F32(m) => trawl::kinds::sharded::build_shard(m, dir, shard, &lib, &ctl),
                AnyMatrix::U8(m) => trawl::kinds::sharded::build_shard(m, dir, shard, &lib, &ctl),
                AnyMatrix::I8(m) => trawl::kinds::sharded::build_shard(m, dir, shard, &lib, &ctl),
            })
        })
    })??
    .py()?;
    ser_to_py(py, &report)
}

/// Step 3: once every shard is built, writes `index_dir/shards.trawl` with each shard's build
/// id. Returns `shard_manifest(index_dir)`.
#[pyfunction]
pub fn finish_sharded<'py>(py: Python<'py>, index_dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let m = py
        .detach(|| trawl::kinds::sharded::finish_sharded_index(&index_dir))
        .py()?;
    manifest_dict(py, &index_dir, &m)
}

/// The shard manifest of `index_dir` as a dict: `n`, `dim`, `dtype`, `metric`, `epsilon`,
/// `centroids` (float32, shards × dim), and `shards`, a list of dicts with `dir` (absolute
/// path), `count`, `build_id` and `ids` (uint64: the global id of each of the shard's rows).
#[pyfunction]
pub fn shard_manifest<'py>(py: Python<'py>, index_dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let path = index_dir.join(trawl::kinds::sharded::SHARD_MANIFEST_FILE);
    let m = py.detach(|| ShardManifest::load(&path)).py()?;
    manifest_dict(py, &index_dir, &m)
}

fn manifest_dict<'py>(
    py: Python<'py>,
    dir: &std::path::Path,
    m: &ShardManifest,
) -> PyResult<Bound<'py, PyDict>> {
    let h = &m.header;
    let d = PyDict::new(py);
    d.set_item("n", h.n)?;
    d.set_item("dim", h.dim)?;
    d.set_item("dtype", &h.dtype)?;
    d.set_item("metric", &h.metric)?;
    d.set_item("epsilon", h.epsilon)?;
    d.set_item("slack", h.slack)?;
    d.set_item("replicas", h.replicas)?;
    let c = PyArray1::from_vec(py, m.centroids.clone()).reshape([h.shards.len(), h.dim])?;
    d.set_item("centroids", c)?;
    let mut shards = Vec::with_capacity(h.shards.len());
    for (e, ids) in h.shards.iter().zip(&m.ids) {
        let s = PyDict::new(py);
        s.set_item("dir", dir.join(&e.dir))?;
        s.set_item("count", e.count)?;
        s.set_item("build_id", &e.build_id)?;
        let ids: Vec<u64> = ids.iter().map(|&g| u64::from(g)).collect();
        s.set_item("ids", PyArray1::from_vec(py, ids))?;
        shards.push(s);
    }
    d.set_item("shards", shards)?;
    Ok(d)
}

/// A sharded index (built by `trawl.build_sharded` or `trawl shard build`), every shard open in
/// this process. `batch_search` sends each query to its `probe` nearest shards (0 = all),
/// searches each shard like a single index and merges the per-shard top-k by exact distance.
#[pyclass(module = "trawl._trawl", frozen)]
#[derive(Debug)]
pub struct ShardedIndex {
    inner: std::sync::RwLock<Option<LibSharded>>,
    last: std::sync::Mutex<Vec<trawl::search::QueryStats>>,
}

impl ShardedIndex {
    fn with<R>(&self, f: impl FnOnce(&LibSharded) -> PyResult<R>) -> PyResult<R> {
        let g = self
            .inner
            .read()
            .map_err(|_| err(crate::errors::Kind::Internal, "the index lock is poisoned"))?;
        match g.as_ref() {
            Some(ix) => f(ix),
            None => Err(invalid("the sharded index is closed")),
        }
    }
}

#[pymethods]
impl ShardedIndex {
    /// Opens the sharded index in `index_dir`: its manifest, then every shard (each checked
    /// against the build id the manifest recorded). `engine`, `direct`, `verify_pages` and
    /// `queue_depth` as for `Index.open`.
    #[new]
    #[pyo3(signature = (index_dir, *, engine = "auto", direct = true, verify_pages = true,
        queue_depth = 64))]
    fn new(
        py: Python<'_>,
        index_dir: PathBuf,
        engine: &str,
        direct: bool,
        verify_pages: bool,
        queue_depth: i64,
    ) -> PyResult<Self> {
        let opts = OpenOptions {
            engine: engine
                .parse::<EngineKind>()
                .map_err(|e| invalid(format!("engine: {e}")))?,
            direct,
            verify_pages,
            queue_depth: count("queue_depth", queue_depth, 1)?,
            ..OpenOptions::default()
        };
        let ix = py.detach(|| LibSharded::open(&index_dir, opts)).py()?;
        Ok(Self {
            inner: std::sync::RwLock::new(Some(ix)),
            last: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Distinct vectors.
    #[getter]
    fn n(&self) -> PyResult<usize> {
        self.with(|ix| Ok(ix.n()))
    }

    /// Dimension.
    #[getter]
    fn dim(&self) -> PyResult<usize> {
        self.with(|ix| Ok(ix.dim()))
    }

    /// Element type ("float32", "uint8", "int8").
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        self.with(|ix| Ok(numpy_name(ix.dtype())))
    }

    /// Metric name.
    #[getter]
    fn metric(&self) -> PyResult<&'static str> {
        self.with(|ix| Ok(ix.metric().name()))
    }

    /// Number of shards.
    #[getter]
    fn shards(&self) -> PyResult<usize> {
        self.with(|ix| Ok(ix.shards().len()))
    }

    fn __len__(&self) -> PyResult<usize> {
        self.n()
    }

    fn __repr__(&self) -> String {
        self.with(|ix| {
            Ok(format!(
                "ShardedIndex({:?}, n={}, dim={}, shards={}, metric={:?})",
                ix.dir().display().to_string(),
                ix.n(),
                ix.dim(),
                ix.shards().len(),
                ix.metric().name()
            ))
        })
        .unwrap_or_else(|_| "ShardedIndex(closed)".to_string())
    }

    /// The shards each row of `queries` visits: an int64 array (len(queries), p) of shard
    /// numbers, nearest centroid first, p = `probe` (0 or ≥ shards: all, in shard order).
    #[pyo3(signature = (queries, probe = 0))]
    fn route<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        probe: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let probe = count("probe", probe, 0)?;
        self.with(|ix| {
            let arr = as_array(queries, "queries")?;
            let (nq, dim) = shape2(&arr, ix.dim())?;
            let s = ix.shards().len();
            let p = if probe == 0 || probe >= s { s } else { probe };
            let mut out: Vec<i64> = Vec::with_capacity(nq * p);
            macro_rules! go {
                ($t:ty) => {{
                    let e = Elements::<$t>::of(&arr)?;
                    for q in e.as_slice().chunks_exact(dim) {
                        out.extend(ix.route(q, probe).into_iter().map(i64::from));
                    }
                }};
            }
            match dtype_of(&arr)? {
                DType::F32 => go!(f32),
                DType::U8 => go!(u8),
                DType::I8 => go!(i8),
            }
            Ok(PyArray1::from_vec(py, out).reshape([nq, p])?.into_any())
        })
    }

    /// The `k` nearest neighbours of every row of `queries`, each searched in its `probe`
    /// nearest shards (0 = all) by `threads` threads per shard (0 = one per core). Returns
    /// `(ids, distances)` of shape `(len(queries), k)`: global ids (row numbers of the data the
    /// index was built from; `MISSING_ID` where fewer than `k` were found), nearest first.
    ///
    /// `filter` / `filter_plan`: as `Index.batch_search` takes them; a filtered query visits
    /// every shard holding a match (whatever `probe`).
    #[pyo3(signature = (queries, k = 10, params = None, threads = 0, probe = 0, *,
        filter = None, filter_plan = "auto"))]
    #[allow(clippy::too_many_arguments)]
    fn batch_search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        threads: i64,
        probe: i64,
        filter: Option<&Bound<'py, PyAny>>,
        filter_plan: &str,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let fparams = crate::filters::filter_params(filter_plan)?;
        let k = count("k", k, 1)?;
        let probe = count("probe", probe, 0)?;
        let threads = match count("threads", threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        self.with(|ix| {
            if k > ix.n() {
                return Err(invalid(format!(
                    "k = {k} is larger than the {} indexed vectors",
                    ix.n()
                )));
            }
            let o = params
                .unwrap_or_default()
                .to_options(&trawl::kinds::Options::default())?;
            let p = o.graph_params(k, false).py()?;
            let arr = as_array(queries, "queries")?;
            let (nq, _) = shape2(&arr, ix.dim())?;
            let pf = crate::filters::PyFilters::read(filter, nq, true)?;
            let qf = trawl::filter::QueryFilter {
                filters: pf.filters(),
                params: fparams,
            };
            let dt = dtype_of(&arr)?;
            if dt != ix.dtype() {
                return Err(invalid(format!(
                    "queries dtype {} does not match the index's {} (convert with .astype(numpy.{}))",
                    numpy_name(dt),
                    numpy_name(ix.dtype()),
                    numpy_name(ix.dtype())
                )));
            }
            let out = match dt {
                DType::F32 => {
                    let e = Elements::<f32>::of(&arr)?;
                    let rows = e.as_slice();
                    py.detach(|| ix.search_rows_where(rows, &p, threads, 1, probe, &qf))
                }
                DType::U8 => {
                    let e = Elements::<u8>::of(&arr)?;
                    let rows = e.as_slice();
                    py.detach(|| ix.search_rows_where(rows, &p, threads, 1, probe, &qf))
                }
                DType::I8 => {
                    let e = Elements::<i8>::of(&arr)?;
                    let rows = e.as_slice();
                    py.detach(|| ix.search_rows_where(rows, &p, threads, 1, probe, &qf))
                }
            }
            .py()?;
            if let Ok(mut last) = self.last.lock() {
                last.clone_from(&out.stats);
            }
            let ids: Vec<u64> = out
                .ids
                .iter()
                .map(|&g| if g == u32::MAX { MISSING_ID } else { u64::from(g) })
                .collect();
            let ids = PyArray1::from_vec(py, ids).reshape([nq, k])?;
            let dists = PyArray1::from_vec(py, out.dists).reshape([nq, k])?;
            Ok((ids.into_any(), dists.into_any()))
        })
    }

    /// Per-query statistics of the last `batch_search`, summed over the shards each query
    /// visited (as `Index.last_stats`: one array per counter, and `latency_us`, the sum of the
    /// query's per-shard search times).
    #[getter]
    fn last_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let last = self
            .last
            .lock()
            .map_err(|_| err(crate::errors::Kind::Internal, "the stats lock is poisoned"))?;
        stats_dict(py, &last)
    }

    /// Memory the open shards hold (bytes), with the manifest's centroids and id maps.
    fn memory_bytes(&self) -> PyResult<u64> {
        self.with(|ix| Ok(ix.memory_bytes()))
    }

    /// Bytes on disk of the shards' files and the manifest.
    fn disk_bytes(&self) -> PyResult<u64> {
        self.with(|ix| Ok(ix.disk_bytes()))
    }

    /// Closes every shard (later calls raise `InvalidInputError`).
    fn close(&self) -> PyResult<()> {
        let mut g = self
            .inner
            .write()
            .map_err(|_| err(crate::errors::Kind::Internal, "the index lock is poisoned"))?;
        *g = None;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close()
    }
}

/// `(rows, dim)` of a 2-D array whose dimension must be `dim`.
fn shape2(arr: &Bound<'_, numpy::PyUntypedArray>, dim: usize) -> PyResult<(usize, usize)> {
    if arr.ndim() != 2 {
        return Err(invalid(format!(
            "queries must be a 2-D array (queries × dimension), not {}-D",
            arr.ndim()
        )));
    }
    let (nq, d) = (arr.shape()[0], arr.shape()[1]);
    if d != dim {
        return Err(invalid(format!(
            "queries have dimension {d}, the index has {dim}"
        )));
    }
    Ok((nq, d))
}

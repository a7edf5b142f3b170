//! `trawl.Index`: an opened disk index, searched one query or a batch at a time.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trawl::index::{DiskIndex, OpenOptions, AUTO_SPIN_US};
use trawl::io::{EngineKind, IoEngine};
use trawl::progress::Control;
use trawl::search::{CachePolicy, QueryStats, SearchParams as LibSearchParams, Searcher};
use trawl::{DType, Element};

use crate::arrays::{as_array, dtype_of, Elements};
use crate::errors::{err, invalid, Kind, PyResultExt};
use crate::params::{count, SearchParams};
use crate::pyjson::to_py;

/// An opened disk index. Open with `Index.open(index_dir)`; search with `search` (one query)
/// or `batch_search` (many, over threads). Thread-safe: several Python threads may search one
/// index at once (each search runs with the GIL released).
#[pyclass(module = "trawl._trawl", frozen)]
pub struct Index {
    ix: Arc<DiskIndex>,
    /// I/O engines kept between single-query searches (an io_uring engine costs far more to
    /// set up than a query).
    engines: Mutex<Vec<Box<dyn IoEngine>>>,
    /// Sums since opening (or `reset_stats`), and the number of queries.
    totals: Mutex<(u64, QueryStats)>,
    /// Per-query statistics of the last `search` / `batch_search` call.
    last: Mutex<Vec<QueryStats>>,
    cache: serde_json::Value,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.ix.dir())
            .finish_non_exhaustive()
    }
}

/// Ids and distances of one query.
type Hits<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<f32>>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[pymethods]
impl Index {
    /// Opens the index in `index_dir`.
    ///
    /// layout: "packed" (as built), "shuffle", "ais" or "decoupled" (written by `trawl layout`
    /// or `BuildParams(decoupled=True)`). engine: "auto" (io_uring, else pread), "uring",
    /// "pread" or "memory" (the index file loaded into RAM). direct: read with O_DIRECT (no
    /// page cache). cache_nodes: nodes held in a static in-memory cache, chosen by
    /// cache_policy ("freq": most read by sample searches; "bfs": breadth-first from the
    /// entry point). list_cache_mb: decoupled layout's cache of compressed neighbour lists.
    /// queue_depth: reads in flight per search thread (bounds beam_width and pipe_max_width).
    #[staticmethod]
    #[pyo3(signature = (index_dir, *, layout = "packed", engine = "auto", direct = true,
        verify_pages = true, cache_nodes = 0, cache_policy = "freq", list_cache_mb = 16.0,
        queue_depth = 64))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        index_dir: PathBuf,
        layout: &str,
        engine: &str,
        direct: bool,
        verify_pages: bool,
        cache_nodes: i64,
        cache_policy: &str,
        list_cache_mb: f64,
        queue_depth: i64,
    ) -> PyResult<Self> {
        let parse_err = |what: &str, e: String| invalid(format!("{what}: {e}"));
        let opts = OpenOptions {
            layout: layout.parse().map_err(|e: String| parse_err("layout", e))?,
            engine: engine
                .parse::<EngineKind>()
                .map_err(|e| parse_err("engine", e.to_string()))?,
            direct,
            verify_pages,
            list_cache_bytes: if list_cache_mb.is_finite() && list_cache_mb >= 0.0 {
                (list_cache_mb * (1u64 << 20) as f64) as u64
            } else {
                return Err(invalid(format!(
                    "list_cache_mb = {list_cache_mb} must be at least 0"
                )));
            },
            queue_depth: count("queue_depth", queue_depth, 1)?,
            ..OpenOptions::default()
        };
        let nodes = count("cache_nodes", cache_nodes, 0)?;
        let policy: CachePolicy = cache_policy
            .parse()
            .map_err(|e: String| parse_err("cache_policy", e))?;
        let (ix, cache) = py.detach(|| -> PyResult<_> {
            let trawl::index::AnyIndex::Graph(mut ix) =
                trawl::index::open_any(&index_dir, opts).py()?;
            let threads = std::thread::available_parallelism().map_or(1, |c| c.get());
            let cache = ix
                .load_cache(nodes, policy, threads, &Control::silent())
                .py()?;
            Ok((ix, cache))
        })?;
        Ok(Self {
            ix: Arc::new(ix),
            engines: Mutex::new(Vec::new()),
            totals: Mutex::new((0, QueryStats::default())),
            last: Mutex::new(Vec::new()),
            cache: serde_json::to_value(cache).unwrap_or_default(),
        })
    }

    /// Same as `Index.open(index_dir, **options)`.
    #[new]
    #[pyo3(signature = (index_dir, **options))]
    fn new(
        py: Python<'_>,
        index_dir: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let cls = py.get_type::<Index>();
        let opened = cls.call_method("open", (index_dir,), options)?;
        let this: PyRef<'_, Index> = opened.extract()?;
        Ok(Self {
            ix: Arc::clone(&this.ix),
            engines: Mutex::new(Vec::new()),
            totals: Mutex::new((0, QueryStats::default())),
            last: Mutex::new(Vec::new()),
            cache: this.cache.clone(),
        })
    }

    /// Number of indexed vectors.
    #[getter]
    fn n(&self) -> usize {
        self.ix.n()
    }

    /// Dimension of the vectors.
    #[getter]
    fn dim(&self) -> usize {
        self.ix.dim()
    }

    /// Element type of the vectors ("float32", "uint8" or "int8").
    #[getter]
    fn dtype(&self) -> &'static str {
        numpy_name(self.ix.dtype())
    }

    /// Distance ("l2", "ip" or "cosine").
    #[getter]
    fn metric(&self) -> &'static str {
        self.ix.metric().name()
    }

    fn __len__(&self) -> usize {
        self.ix.n()
    }

    fn __repr__(&self) -> String {
        format!(
            "trawl.Index({:?}, n={}, dim={}, dtype={}, metric={}, layout={})",
            self.ix.dir().display().to_string(),
            self.ix.n(),
            self.ix.dim(),
            numpy_name(self.ix.dtype()),
            self.ix.metric().name(),
            self.ix.options().layout.name()
        )
    }

    /// The `k` nearest neighbours of one query (a 1-D array of the index's dtype).
    ///
    /// Returns `(ids, distances)`: uint32 and float32 arrays of length `k`, nearest first.
    /// Missing results (fewer than `k` nodes reachable) are `MISSING_ID` with distance `inf`.
    #[pyo3(signature = (query, k = 10, params = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
    ) -> PyResult<Hits<'py>> {
        let arr = as_array(query, "query")?;
        if arr.ndim() != 1 {
            return Err(invalid(format!(
                "query must be a 1-D array, not {}-D (use batch_search for several queries)",
                arr.ndim()
            )));
        }
        let p = self.lib_params(k, params)?;
        let (hits, stats) = match self.check_dtype(&arr)? {
            DType::F32 => self.search_one(py, &Elements::<f32>::of(&arr)?, &p)?,
            DType::U8 => self.search_one(py, &Elements::<u8>::of(&arr)?, &p)?,
            DType::I8 => self.search_one(py, &Elements::<i8>::of(&arr)?, &p)?,
        };
        let k = p.k;
        let mut ids = vec![u32::MAX; k];
        let mut dists = vec![f32::INFINITY; k];
        for (j, (id, d)) in hits.into_iter().take(k).enumerate() {
            ids[j] = id;
            dists[j] = d;
        }
        self.record(vec![stats]);
        Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, dists)))
    }

    /// The `k` nearest neighbours of every row of `queries` (a 2-D array of the index's
    /// dtype), searched by `threads` threads (0 = one per core).
    ///
    /// Returns `(ids, distances)`: uint32 and float32 arrays of shape `(len(queries), k)`.
    #[pyo3(signature = (queries, k = 10, params = None, threads = 0))]
    fn batch_search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        threads: i64,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let arr = as_array(queries, "queries")?;
        if arr.ndim() != 2 {
            return Err(invalid(format!(
                "queries must be a 2-D array (queries × dimension), not {}-D",
                arr.ndim()
            )));
        }
        let (nq, dim) = (arr.shape()[0], arr.shape()[1]);
        if dim != self.ix.dim() {
            return Err(invalid(format!(
                "queries have dimension {dim}, the index has {}",
                self.ix.dim()
            )));
        }
        let p = self.lib_params(k, params)?;
        let threads = match count("threads", threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        let ix = &*self.ix;
        let out = match self.check_dtype(&arr)? {
            DType::F32 => {
                let e = Elements::<f32>::of(&arr)?;
                let rows = e.as_slice();
                py.detach(|| ix.search_rows(rows, &p, threads, 1)).py()?
            }
            DType::U8 => {
                let e = Elements::<u8>::of(&arr)?;
                let rows = e.as_slice();
                py.detach(|| ix.search_rows(rows, &p, threads, 1)).py()?
            }
            DType::I8 => {
                let e = Elements::<i8>::of(&arr)?;
                let rows = e.as_slice();
                py.detach(|| ix.search_rows(rows, &p, threads, 1)).py()?
            }
        };
        self.record(out.stats);
        let k = p.k;
        let ids = PyArray1::from_vec(py, out.ids).reshape([nq, k])?;
        let dists = PyArray1::from_vec(py, out.dists).reshape([nq, k])?;
        Ok((ids.into_any(), dists.into_any()))
    }

    /// I/O and work counters summed over every query since the index was opened (or since
    /// `reset_stats()`), with `queries` the number of queries. Exact counts: pages_read,
    /// io_requests, bytes_read, cache_hits, hops, nodes_expanded, pq_distances,
    /// exact_distances, ...; times in nanoseconds (total_ns, io_wait_ns, ...).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (queries, totals) = *lock(&self.totals);
        let mut v = serde_json::to_value(totals).unwrap_or_default();
        v["queries"] = queries.into();
        to_py(py, &v)
    }

    /// Per-query counters of the last `search` / `batch_search` call: a dict of uint64
    /// arrays (one entry per query, in query order), same keys as `stats` plus
    /// `latency_us` (float64).
    #[getter]
    fn last_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let last = lock(&self.last);
        let d = PyDict::new(py);
        let rows: Vec<serde_json::Value> = last
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default())
            .collect();
        let keys: Vec<String> = serde_json::to_value(QueryStats::default())
            .ok()
            .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect()))
            .unwrap_or_default();
        for key in keys {
            let col: Vec<u64> = rows.iter().map(|r| r[&key].as_u64().unwrap_or(0)).collect();
            d.set_item(key, PyArray1::from_vec(py, col))?;
        }
        let lat: Vec<f64> = last.iter().map(|s| s.total_ns as f64 / 1e3).collect();
        d.set_item("latency_us", PyArray1::from_vec(py, lat))?;
        Ok(d)
    }

    /// Zeroes `stats`.
    fn reset_stats(&self) {
        *lock(&self.totals) = (0, QueryStats::default());
    }

    /// A description of the index: shape, metric, graph and PQ parameters, layout, bytes on
    /// disk per file, memory held at search time per part, the static cache, the I/O engine.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let ix = &*self.ix;
        let engine = self.engine()?;
        let e = engine.info();
        self.put_engine(engine);
        let o = ix.options();
        // The library's description, with what only this handle knows (its cache and engine)
        // and the element type by its numpy name.
        let mut v = serde_json::to_value(ix.info().py()?)
            .map_err(|e| err(Kind::Internal, e.to_string()))?;
        let extra = serde_json::json!({
            "dtype": numpy_name(ix.dtype()),
            "cache": self.cache,
            "engine": {"name": e.name, "direct": e.direct,
                       "registered_buffers": e.registered_buffers, "sqpoll": e.sqpoll,
                       "queue_depth": o.queue_depth},
        });
        if let (Some(obj), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
            obj.extend(extra);
        }
        to_py(py, &v)
    }

    /// Reads every file of the index whole and checks it (pages against their checksums,
    /// compressed lists and vectors decoded, every file against the manifest): what
    /// `trawl info DIR --verify` does. Returns `{"manifest": bool, "files": [{"name", "bytes",
    /// "checked"}]}`; raises `CorruptIndexError` naming the first damaged file.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dir = self.ix.dir().to_path_buf();
        let rep = py
            .detach(|| trawl::index::verify_index(&dir, &trawl::progress::Control::silent()))
            .py()?;
        let v = serde_json::to_value(rep).map_err(|e| err(Kind::Internal, e.to_string()))?;
        to_py(py, &v)
    }

    /// Hands the pooled I/O engines back (they are recreated on demand).
    fn close(&self) {
        lock(&self.engines).clear();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close();
    }
}

impl Index {
    fn lib_params(&self, k: i64, params: Option<SearchParams>) -> PyResult<LibSearchParams> {
        let k = count("k", k, 1)?;
        if k > self.ix.n() {
            return Err(invalid(format!(
                "k = {k} is larger than the {} indexed vectors",
                self.ix.n()
            )));
        }
        params.unwrap_or_default().to_lib(k)
    }

    fn check_dtype(&self, arr: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
        let dt = dtype_of(arr)?;
        if dt != self.ix.dtype() {
            return Err(invalid(format!(
                "query dtype {} does not match the index's {} (convert with .astype(numpy.{}))",
                numpy_name(dt),
                numpy_name(self.ix.dtype()),
                numpy_name(self.ix.dtype())
            )));
        }
        Ok(dt)
    }

    fn engine(&self) -> PyResult<Box<dyn IoEngine>> {
        if let Some(e) = lock(&self.engines).pop() {
            return Ok(e);
        }
        self.ix
            .file()
            .engine(self.ix.options().engine, self.ix.engine_config())
            .py()
    }

    fn put_engine(&self, e: Box<dyn IoEngine>) {
        lock(&self.engines).push(e);
    }

    fn search_one<T: Element + numpy::Element>(
        &self,
        py: Python<'_>,
        query: &Elements<'_, T>,
        p: &LibSearchParams,
    ) -> PyResult<(Vec<(u32, f32)>, QueryStats)> {
        let q = query.as_slice();
        if q.len() != self.ix.dim() {
            return Err(invalid(format!(
                "query has dimension {}, the index has {}",
                q.len(),
                self.ix.dim()
            )));
        }
        let engine = self.engine()?;
        let ix = &*self.ix;
        let spin = Duration::from_micros(ix.options().spin_us.unwrap_or(AUTO_SPIN_US));
        let (res, engine) = py.detach(move || {
            let mut s = Searcher::with_engine(ix.view(), engine);
            s.set_spin(spin);
            let mut hits = Vec::with_capacity(p.k);
            let r = s.search(q, p, &mut hits).map(|st| (hits, st));
            (r, s.into_engine())
        });
        // A failed search may leave reads in flight: drop that engine rather than reuse it.
        if res.is_ok() {
            self.put_engine(engine);
        }
        res.py()
    }

    fn record(&self, stats: Vec<QueryStats>) {
        {
            let mut t = lock(&self.totals);
            t.0 += stats.len() as u64;
            for s in &stats {
                t.1 += *s;
            }
        }
        *lock(&self.last) = stats;
    }
}

/// numpy's name of an element type.
fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::U8 => "uint8",
        DType::I8 => "int8",
    }
}

//! `trawl.Index`: an opened index of any kind (`trawl::kinds::AnyIndex`, opened by the
//! library's options layer), searched one query or a batch at a time through the kind's
//! `search` (a single query runs on the calling thread with an I/O engine the library pools),
//! and updated (insert, upsert, delete, merge) when a graph index is opened for writing.
//!
//! A graph index that has never taken an update and is opened read-only is its disk files
//! alone. Every other graph index is a [`LiveIndex`]: while nothing has been written (no
//! `ids.trawl` nor `wal.trawl` at open, no write through this handle) its disk files are
//! still searched directly — the same results, ids equal to row numbers — and from the first
//! update on every search goes through [`LiveIndex::search_rows`] (deleted nodes hidden, the
//! in-memory delta searched beside the disk files, results by external id).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trawl::accel::AccelKind;
use trawl::data::Queries;
use trawl::index::live::{Durability, LiveError, LiveIndex};
use trawl::index::{DiskIndex, KindName};
use trawl::io::EngineKind;
use trawl::ivf::IvfVectorLayout;
use trawl::kinds::{AnyIndex, GraphIndex, Hits, KindParams, Options, Run};
use trawl::progress::Control;
use trawl::search::{CachePolicy, QueryStats};
use trawl::{DType, Element, Metric};

use crate::arrays::{as_array, dtype_of, Elements};
use crate::build::run_interruptible;
use crate::errors::{err, invalid, IntoPyErr, Kind, PyResultExt};
use crate::params::{count, SearchParams};
use crate::pyjson::{ser_to_py, to_py};

/// Per-query statistics as a dict of arrays: one uint64 array per counter of
/// [`QueryStats`], and `latency_us` (float64).
pub(crate) fn stats_dict<'py>(
    py: Python<'py>,
    last: &[QueryStats],
) -> PyResult<Bound<'py, PyDict>> {
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

/// Id of a missing result (fewer than `k` vectors reachable): `2**64 - 1`.
pub const MISSING_ID: u64 = trawl::index::ids::HOLE;

/// An opened disk index. Open with `Index.open(index_dir)`; search with `search` (one query)
/// or `batch_search` (many, over threads). Thread-safe: several Python threads may search one
/// index at once (each search runs with the GIL released).
#[pyclass(module = "trawl._trawl", frozen)]
pub struct Index {
    /// `None` once closed.
    state: Mutex<Option<Arc<AnyIndex>>>,
    dir: PathBuf,
    dim: usize,
    dtype: DType,
    metric: Metric,
    kind: KindName,
    /// The options it was opened with (searches add their parameters to them).
    options: Options,
    /// The graph layout searched, or an IVF index's vector layout.
    layout: &'static str,
    /// An IVF index's accelerator backend ("cpu" or "gpu"); empty for a graph index.
    accel: &'static str,
    writable: bool,
    /// Whether searches go through the live index (the index has updates: files of updates
    /// at open, or a write through this handle). Never cleared.
    updated: AtomicBool,
    /// Live vectors when known (`None`: to be counted, which scans every slot's deletion
    /// stamp). Inserts and deletes keep it up to date; an upsert (which may or may not
    /// replace) clears it. A merge leaves the live set as it is.
    live_n: Mutex<Option<usize>>,
    /// Held by every write through this handle and by a recount of `live_n`, so that the
    /// count and the writes follow each other. Taken with the GIL released.
    write_lock: Mutex<()>,
    /// Sums since opening (or `reset_stats`), and the number of queries.
    totals: Mutex<(u64, QueryStats)>,
    /// Per-query statistics of the last `search` / `batch_search` call.
    last: Mutex<Vec<QueryStats>>,
    cache: serde_json::Value,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

/// Ids and distances of one query.
type PyHits<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<f32>>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `Index.open`'s keyword arguments as the library's options (its defaults for the ones not
/// given; the library checks the values). Every open option of the library that Python names:
/// `layout`, `engine`, `direct`, `verify_pages`, `cache_nodes`, `cache_policy`,
/// `list_cache_mb`, `list_pin`, `refine_bits`, `queue_depth` (None: automatic), `writable`,
/// `durability`, `accel`, `ivf_vectors`.
fn open_options(kw: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options {
        threads: std::thread::available_parallelism().map_or(1, |c| c.get()),
        ..Options::default()
    };
    for (k, v) in kw.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        let text = |v: &Bound<'_, PyAny>| -> PyResult<String> { v.extract::<String>() };
        let parsed = |what: &str, e: String| invalid(format!("{what}: {e}"));
        match key.as_str() {
            "layout" => o.layout = text(&v)?.parse().map_err(|e| parsed("layout", e))?,
            "engine" => {
                o.engine = text(&v)?
                    .parse::<EngineKind>()
                    .map_err(|e| parsed("engine", e.to_string()))?
            }
            "direct" => o.direct = v.extract()?,
            "verify_pages" => o.verify_pages = v.extract()?,
            "cache_nodes" => o.cache_nodes = count("cache_nodes", v.extract()?, 0)?,
            "cache_policy" => {
                o.cache_policy = text(&v)?
                    .parse::<CachePolicy>()
                    .map_err(|e| parsed("cache_policy", e))?
            }
            "list_cache_mb" => o.list_cache_mb = v.extract()?,
            "list_pin" => o.list_pin = v.extract()?,
            "refine_bits" => {
                let b: i64 = v.extract()?;
                o.refine_bits = u8::try_from(b)
                    .map_err(|_| invalid(format!("refine_bits = {b}: expected 0 (off), 4 or 8")))?
            }
            "queue_depth" => {
                let d: Option<i64> = v.extract()?;
                o.queue_depth = d.map(|d| count("queue_depth", d, 1)).transpose()?
            }
            "writable" => o.writable = v.extract()?,
            "durability" => {
                o.durability = match text(&v)?.as_str() {
                    "sync" => Durability::Sync,
                    "buffered" => Durability::Buffered,
                    other => {
                        return Err(invalid(format!(
                            "durability = {other:?}: expected \"sync\" or \"buffered\""
                        )))
                    }
                }
            }
            "accel" => {
                o.accel = text(&v)?
                    .parse::<AccelKind>()
                    .map_err(|e| parsed("accel", e))?
            }
            "ivf_vectors" => {
                o.ivf_vectors = text(&v)?
                    .parse::<IvfVectorLayout>()
                    .map_err(|e| parsed("ivf_vectors", e))?
            }
            other => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "Index.open() got an unexpected keyword argument {other:?}"
                )))
            }
        }
    }
    Ok(o)
}

impl IntoPyErr for LiveError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

#[pymethods]
impl Index {
    /// Opens the index in `index_dir`, graph or IVF (the manifest names the kind).
    ///
    /// layout: "packed" (as built), "shuffle", "ais" or "decoupled" (written by `trawl layout`
    /// or `BuildParams(decoupled=True)`). engine: "auto" (io_uring, else pread), "uring",
    /// "pread" or "memory" (the index file loaded into RAM). direct: read with O_DIRECT (no
    /// page cache). cache_nodes: nodes held in a static in-memory cache, chosen by
    /// cache_policy ("freq": most read by sample searches; "bfs": breadth-first from the
    /// entry point); an index with updates chooses it again after every merge. list_cache_mb:
    /// decoupled layout's cache of compressed neighbour lists; list_pin: the share of it pinned
    /// by value (the lists 20,000 sample searches read most, at their exact size; the rest
    /// stays LRU; read-only opens of a decoupled index). refine_bits: 4 or 8 holds every
    /// vector in memory as a scalar code of that many bits per dimension (built at open from
    /// the vector files; dim/2 or dim bytes + 4 per vector) and orders the decoupled layout's
    /// re-rank by its distances instead of PQ's — far fewer vector reads where PQ is coarse;
    /// 0 (the default) = off; read-only opens of a decoupled index. queue_depth: reads in flight
    /// per search thread (bounds beam_width and pipe_max_width).
    ///
    /// writable: open for writing (`insert`, `upsert`, `delete`, `merge`, `flush`); takes the
    /// directory's writer lock for the handle's life (until `close()`), so a second writer —
    /// in this process or another — gets a `StorageError`. Read-only handles (the default)
    /// may be opened while a writer runs: they see the updates logged when they open.
    /// durability (writable only): "sync" (every write returns once its log record is on the
    /// device) or "buffered" (once it is written to the log file: it survives a crash of the
    /// process, not of the machine; `flush()` syncs).
    ///
    /// accel: the accelerator of an IVF index's filter stage, and of a graph index's
    /// `strategy="flash"` searches — "cpu", "gpu" (an `InvalidInputError` when this build has
    /// no GPU backend or no adapter is found) or "auto" (the GPU when one is found, else the
    /// CPU). IVF indexes only (ignored for graph indexes): ivf_vectors, the vector
    /// file the re-rank reads — "bucket" (by nearest centroid) or "by_id" (written by
    /// `BuildParams(by_id_vectors=True)`). An IVF index is read-only (`writable=True` is an
    /// `InvalidInputError`), has the one layout "packed" and no node cache (`cache_nodes`
    /// must be 0); engine, direct, verify_pages and queue_depth apply to its vector reads.
    #[staticmethod]
    #[pyo3(signature = (index_dir, **options))]
    fn open(
        py: Python<'_>,
        index_dir: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = open_options(options)?;
        let writable = opts.writable;
        let dir = index_dir.as_path();
        let (ix, report) = py
            .detach(|| trawl::kinds::open_with(dir, &opts, &Control::silent()))
            .py()?;
        let mut cache = serde_json::to_value(report.cache).unwrap_or_default();
        if let Some(p) = report.pinned {
            cache["pinned_lists"] = serde_json::to_value(p).unwrap_or_default();
        }
        if let Some(r) = report.refine {
            cache["refine"] = serde_json::to_value(r).unwrap_or_default();
        }
        // Searches go through the live index from the first update on: one at open, or the
        // first write through this handle (a writer holds the lock: nobody else adds any).
        let updated = match ix.graph().and_then(|g| g.live()) {
            Some(l) => !l.is_writable() || GraphIndex::has_updates(dir),
            None => false,
        };
        let (layout, accel) = match &ix {
            AnyIndex::Ivf(iv) => (iv.options().ivf_vectors.name(), iv.accel().info().backend),
            AnyIndex::Graph(g) => (g.disk().options().layout.name(), ""),
            AnyIndex::Sharded(sh) => (sh.shards()[0].options().layout.name(), ""),
            // A kind with one layout of its own: named as the kind.
            other => (other.kind().name(), ""),
        };
        Ok(Self {
            dir: index_dir.clone(),
            dim: ix.dim(),
            dtype: ix.dtype(),
            metric: ix.metric(),
            kind: ix.kind(),
            layout,
            accel,
            writable,
            options: opts,
            state: Mutex::new(Some(Arc::new(ix))),
            updated: AtomicBool::new(updated),
            live_n: Mutex::new(None),
            write_lock: Mutex::new(()),
            totals: Mutex::new((0, QueryStats::default())),
            last: Mutex::new(Vec::new()),
            cache,
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
        Self::open(py, index_dir, options)
    }

    /// Number of live vectors: what a search can return (the same as `len(index)`). For an
    /// index without updates, the number of vectors it was built from.
    #[getter]
    fn n(&self, py: Python<'_>) -> PyResult<usize> {
        self.live_count(py)
    }

    /// Dimension of the vectors.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// Element type of the vectors ("float32", "uint8" or "int8").
    #[getter]
    fn dtype(&self) -> &'static str {
        numpy_name(self.dtype)
    }

    /// Distance ("l2", "ip" or "cosine").
    #[getter]
    fn metric(&self) -> &'static str {
        self.metric.name()
    }

    /// Index kind: "graph" (Vamana graph on disk) or "ivf" (FusionANNS).
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether the index was opened for writing (`Index.open(..., writable=True)`).
    #[getter]
    fn writable(&self) -> bool {
        self.writable
    }

    /// Whether the handle is closed (`close()`, or the end of a `with` block).
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.state).is_none()
    }

    /// Vectors inserted or upserted since the last merge, held in memory (deleted ones
    /// included) until `merge()` folds them into the disk files.
    #[getter]
    fn delta_len(&self) -> PyResult<usize> {
        let inner = self.inner()?;
        Ok(inner
            .graph()
            .and_then(|g| g.live())
            .map_or(0, |l| l.delta_len()))
    }

    /// Number of live vectors (what a search can return).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.live_count(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let what = if self.closed() {
            "closed".to_string()
        } else {
            format!(
                "n={}",
                self.live_count(py)
                    .map_or_else(|_| "?".into(), |n| n.to_string())
            )
        };
        let dir = self.dir.display().to_string();
        let (dim, dtype, metric) = (self.dim, numpy_name(self.dtype), self.metric.name());
        match self.kind {
            KindName::Ivf => format!(
                "trawl.Index({dir:?}, {what}, dim={dim}, dtype={dtype}, metric={metric}, \
                 kind=ivf, vectors={}, accel={})",
                self.layout, self.accel
            ),
            _ => format!(
                "trawl.Index({dir:?}, {what}, dim={dim}, dtype={dtype}, metric={metric}, \
                 layout={}{})",
                self.layout,
                if self.writable { ", writable" } else { "" }
            ),
        }
    }

    /// The `k` nearest neighbours of one query (a 1-D array of the index's dtype). `params`
    /// apply by the index's kind: a graph index reads `L` as its candidate list size, an IVF
    /// index as the number of posting lists probed (see `SearchParams`).
    ///
    /// Returns `(ids, distances)`: uint64 and float32 arrays of length `k`, nearest first.
    /// Ids are the vectors' ids: row numbers of the data the index was built from, or the ids
    /// given to (or assigned by) `insert` / `upsert`. Missing results (fewer than `k`
    /// vectors reachable) are `MISSING_ID` (2**64 - 1) with distance `inf`.
    #[pyo3(signature = (query, k = 10, params = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
    ) -> PyResult<PyHits<'py>> {
        let inner = self.inner()?;
        let arr = as_array(query, "query")?;
        if arr.ndim() != 1 {
            return Err(invalid(format!(
                "query must be a 1-D array, not {}-D (use batch_search for several queries)",
                arr.ndim()
            )));
        }
        let p = self.lib_params(py, &inner, k, params)?;
        let (hits, stats) = match self.check_dtype(&arr, "query")? {
            DType::F32 => self.search_one(py, &inner, &Elements::<f32>::of(&arr)?, &p)?,
            DType::U8 => self.search_one(py, &inner, &Elements::<u8>::of(&arr)?, &p)?,
            DType::I8 => self.search_one(py, &inner, &Elements::<i8>::of(&arr)?, &p)?,
        };
        let k = p.k();
        let mut ids = vec![MISSING_ID; k];
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
    /// Returns `(ids, distances)`: uint64 and float32 arrays of shape `(len(queries), k)`;
    /// ids and missing results as in `search`.
    #[pyo3(signature = (queries, k = 10, params = None, threads = 0))]
    fn batch_search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        threads: i64,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let inner = self.inner()?;
        let arr = as_array(queries, "queries")?;
        if arr.ndim() != 2 {
            return Err(invalid(format!(
                "queries must be a 2-D array (queries × dimension), not {}-D",
                arr.ndim()
            )));
        }
        let (nq, dim) = (arr.shape()[0], arr.shape()[1]);
        if dim != self.dim {
            return Err(invalid(format!(
                "queries have dimension {dim}, the index has {}",
                self.dim
            )));
        }
        let p = self.lib_params(py, &inner, k, params)?;
        let threads = match count("threads", threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        let (ids, dists, stats) = match self.check_dtype(&arr, "query")? {
            DType::F32 => {
                let e = Elements::<f32>::of(&arr)?;
                self.search_batch(py, &inner, e.as_slice(), &p, threads)?
            }
            DType::U8 => {
                let e = Elements::<u8>::of(&arr)?;
                self.search_batch(py, &inner, e.as_slice(), &p, threads)?
            }
            DType::I8 => {
                let e = Elements::<i8>::of(&arr)?;
                self.search_batch(py, &inner, e.as_slice(), &p, threads)?
            }
        };
        self.record(stats);
        let k = p.k();
        let ids = PyArray1::from_vec(py, ids).reshape([nq, k])?;
        let dists = PyArray1::from_vec(py, dists).reshape([nq, k])?;
        Ok((ids.into_any(), dists.into_any()))
    }

    /// Inserts `vectors` (a 2-D array of the index's dtype and dimension, or one 1-D vector)
    /// under `ids` (integers: a numpy array or a list, one per vector, each new to the index
    /// and given once; None: fresh ids are assigned, above every id the index has held).
    ///
    /// Returns the ids (uint64). The vectors are searchable when it returns, and the
    /// operation is in the write-ahead log (synced to the device with durability "sync").
    /// Raises `InvalidInputError` (nothing changed) for a wrong dtype or dimension, NaN or
    /// infinite values, an id already in the index (use `upsert`), an id given twice, a
    /// negative id, or an index open read-only.
    #[pyo3(signature = (vectors, ids = None))]
    fn insert<'py>(
        &self,
        py: Python<'py>,
        vectors: &Bound<'py, PyAny>,
        ids: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let ids = ids.map(|i| id_list(i, "ids")).transpose()?;
        let out = self.write_vectors(py, vectors, ids.as_deref(), false)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Inserts or replaces: each id's vector (if the index holds the id) is deleted and the
    /// new one inserted, as one operation. `ids` and `vectors` as in `insert` (ids required).
    fn upsert<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        vectors: &Bound<'py, PyAny>,
    ) -> PyResult<()> {
        let ids = id_list(ids, "ids")?;
        self.write_vectors(py, vectors, Some(&ids), true)?;
        Ok(())
    }

    /// Deletes `ids` (integers: a numpy array or a list): hidden from every search from now
    /// on, removed from the disk files by the next `merge()`. Every id must be in the index
    /// and given once (otherwise `InvalidInputError`, and nothing is deleted). Returns the
    /// number of vectors deleted.
    fn delete(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        let inner = self.inner()?;
        let live = self.writer(&inner)?;
        let ids = id_list(ids, "ids")?;
        let report = self.write(py, || live.delete(&ids), |r, n| n.checked_sub(r.deleted))?;
        Ok(report.deleted)
    }

    /// Folds the vectors inserted since the last merge and the deletions into new disk
    /// files (FreshDiskANN's StreamingMerge) in one atomic commit, and shortens the log.
    /// Searches and writes may go on meanwhile (from other threads: the GIL is released).
    /// `threads`: threads of the merge (0 = one per core); `progress`: progress bars on
    /// stderr when it is a terminal. Ctrl-C stops it (`KeyboardInterrupt`; the index keeps
    /// its files and updates).
    ///
    /// Returns the merge report: `inserted`, `deleted`, `repaired`, `patched`, `relinked`
    /// (edges added so every node stays reachable), `slots` (slots of the new files), `holes`
    /// (free slots), seconds per phase, `bytes_written`, `peak_rss_bytes`, and the recall
    /// monitor's `recall` (recall@10 per list size on `recall_samples` of the index's own
    /// vectors) with `recall_warning` — a sentence when it fell more than 2 points below the
    /// last build's, else None.
    #[pyo3(signature = (threads = 0, progress = false))]
    fn merge<'py>(
        &self,
        py: Python<'py>,
        threads: i64,
        progress: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner()?;
        let live = self.writer(&inner)?;
        let threads = match count("threads", threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        let (pool, ctl, cancel) = crate::build::worker(threads, progress)?;
        self.updated.store(true, Ordering::Release);
        let result = run_interruptible(py, &cancel, || pool.install(|| live.merge(threads, &ctl)));
        let report = result?.map_err(|e| {
            if ctl.check().is_err() {
                err(Kind::Other, "the merge was interrupted")
            } else {
                e.into_py_err()
            }
        })?;
        ser_to_py(py, &report)
    }

    /// Makes every acknowledged write durable: syncs the log (a no-op with durability
    /// "sync", where every write is synced before it returns).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner()?;
        let live = self.writer(&inner)?;
        py.detach(|| live.flush()).py()
    }

    /// I/O and work counters summed over every query since the index was opened (or since
    /// `reset_stats()`), with `queries` the number of queries. Exact counts: pages_read,
    /// io_requests, bytes_read, cache_hits, hops, nodes_expanded, pq_distances,
    /// exact_distances, ...; times in nanoseconds (total_ns, io_wait_ns, ...). Counts the
    /// disk search only (not the in-memory delta of an updated index).
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
        stats_dict(py, &lock(&self.last))
    }

    /// Zeroes `stats`.
    fn reset_stats(&self) {
        *lock(&self.totals) = (0, QueryStats::default());
    }

    /// A description of the index: kind, shape, metric, graph and PQ parameters, layout,
    /// bytes on disk per file, memory held at search time per part, the static cache, the I/O
    /// engine, and `live`: whether it is open for writing, its live vectors and its in-memory
    /// delta. An IVF index's (`kind` "ivf") also has `ivf`: its lists (`nlist`,
    /// `replication`, `list_size`, `epsilon`, `max_replicas`), the centroid graph's degree,
    /// the vector file's layout and pages, the accelerator and memory per part.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner()?;
        let e = inner.engine_info().py()?;
        let live = match inner.graph().and_then(|g| g.live()) {
            None => serde_json::json!({
                "writable": false, "updated": false, "vectors": inner.n(),
                "delta_vectors": 0, "delta_bytes": 0,
            }),
            Some(l) => serde_json::json!({
                "writable": l.is_writable(),
                "updated": self.updated.load(Ordering::Acquire),
                "vectors": self.live_count(py)?,
                "delta_vectors": l.delta_len(), "delta_bytes": l.delta_bytes(),
            }),
        };
        // The library's description, with what only this handle knows (its cache and engine)
        // and the element type by its numpy name.
        let mut v = serde_json::to_value(py.detach(|| inner.info()).py()?)
            .map_err(|e| err(Kind::Internal, e.to_string()))?;
        let queue_depth = self.options.open_options(&self.dir).queue_depth;
        let extra = serde_json::json!({
            "dtype": numpy_name(inner.dtype()),
            "cache": self.cache,
            "engine": {"name": e.name, "direct": e.direct,
                       "registered_buffers": e.registered_buffers, "sqpoll": e.sqpoll, "taskrun": e.taskrun.name(),
                       "queue_depth": queue_depth},
            "live": live,
        });
        if let (Some(obj), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
            obj.extend(extra);
        }
        to_py(py, &v)
    }

    /// The open options and search parameters `params` resolve to on this index for `k`
    /// results, as the library prints them (`trawl resolve` prints the same for the CLI's
    /// flags): for tests.
    #[pyo3(signature = (k = 10, params = None))]
    fn _resolved(&self, k: i64, params: Option<SearchParams>) -> PyResult<String> {
        let inner = self.inner()?;
        let o = params.unwrap_or_default().to_options(&self.options)?;
        o.resolved(&self.dir, &inner, count("k", k, 1)?).py()
    }

    /// Reads every file of the index whole and checks it (pages against their checksums,
    /// compressed lists and vectors decoded, every file against the manifest): what
    /// `trawl info DIR --verify` does. Returns `{"manifest": bool, "files": [{"name", "bytes",
    /// "checked"}]}`; raises `CorruptIndexError` naming the first damaged file.
    ///
    /// An IVF index's other files were read whole and checked when it was opened; `verify`
    /// checks the posting lists against the build record and the vector file's buckets
    /// (what `trawl info DIR --verify` checks) and reads every page of its vector file
    /// against the page's checksum; the dict also holds `vector_pages`, the pages checked.
    /// A graph index's write-ahead log is checked record by record as replay would.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let open = self.inner()?;
        let rep = py
            .detach(|| open.verify(&trawl::progress::Control::silent()))
            .py()?;
        let v = serde_json::to_value(rep).map_err(|e| err(Kind::Internal, e.to_string()))?;
        to_py(py, &v)
    }

    /// Closes the handle: the pooled I/O engines are handed back, the files closed and, for
    /// an index open for writing, the log synced and the writer lock released (another
    /// writer may then open it). Every later call but `close()` raises `InvalidInputError`.
    /// A call running in another thread finishes first on what it holds.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let inner = lock(&self.state).take();
        if let Some(inner) = inner {
            if let Some(l) = inner.graph().and_then(|g| g.live()) {
                if l.is_writable() {
                    py.detach(|| l.flush()).py()?;
                }
            }
            py.detach(move || drop(inner));
        }
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close(py)
    }
}

impl Index {
    /// What the handle searches, or an error when it is closed.
    fn inner(&self) -> PyResult<Arc<AnyIndex>> {
        lock(&self.state).clone().ok_or_else(|| {
            invalid(format!(
                "{}: the index handle is closed",
                self.dir.display()
            ))
        })
    }

    /// The live index to write, or the read-only error.
    fn writer<'a>(&self, inner: &'a AnyIndex) -> PyResult<&'a LiveIndex> {
        match inner.graph().and_then(|g| g.live()) {
            Some(l) if l.is_writable() => Ok(l),
            _ if inner.graph().is_none() => Err(invalid(format!(
                "{}: {} indexes do not take updates yet (insert, upsert, delete, merge and \
                 flush need a graph index)",
                self.dir.display(),
                inner.kind().label()
            ))),
            _ => Err(invalid(format!(
                "{}: the index is open read-only: open it with Index.open(index_dir, \
                 writable=True) to change it",
                self.dir.display()
            ))),
        }
    }

    /// The disk files to search directly (ids = row numbers), while the index has no
    /// updates; `None` when searches go through the live index.
    fn fast_disk(&self, inner: &AnyIndex) -> Option<Arc<DiskIndex>> {
        let g = inner.graph()?;
        (g.live().is_none() || !self.updated.load(Ordering::Acquire)).then(|| g.disk())
    }

    /// Runs one write with the GIL released; searches go through the live index from it on.
    /// `count` gives the live vectors after the write from those before it and what the
    /// write returned (`None` when unknown).
    fn write<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce() -> Result<R, LiveError> + Send,
        count: impl FnOnce(&R, usize) -> Option<usize> + Send,
    ) -> PyResult<R> {
        self.updated.store(true, Ordering::Release);
        py.detach(|| {
            let _one = lock(&self.write_lock);
            let r = f();
            let mut n = lock(&self.live_n);
            *n = match &r {
                Ok(r) => n.and_then(|n| count(r, n)),
                // Nothing was applied, or (an error after the log write) recount.
                Err(e) if e.kind() == trawl::ErrorKind::InvalidInput => *n,
                Err(_) => None,
            };
            r
        })
        .py()
    }

    /// Live vectors: kept up to date by the writes, counted (a scan of every slot) when
    /// unknown.
    fn live_count(&self, py: Python<'_>) -> PyResult<usize> {
        let inner = self.inner()?;
        let Some(l) = inner.graph().and_then(|g| g.live()) else {
            return Ok(inner.n());
        };
        if let Some(n) = *lock(&self.live_n) {
            return Ok(n);
        }
        Ok(py.detach(|| {
            let _no_writes = lock(&self.write_lock);
            let mut n = lock(&self.live_n);
            *n.get_or_insert_with(|| l.len())
        }))
    }

    fn write_vectors(
        &self,
        py: Python<'_>,
        vectors: &Bound<'_, PyAny>,
        ids: Option<&[u64]>,
        upsert: bool,
    ) -> PyResult<Vec<u64>> {
        let inner = self.inner()?;
        let live = self.writer(&inner)?;
        let arr = as_array(vectors, "vectors")?;
        let dim = match arr.ndim() {
            1 => arr.shape()[0],
            2 => arr.shape()[1],
            d => {
                return Err(invalid(format!(
                    "vectors must be a 2-D array (vectors × dimension) or one 1-D vector, not \
                     {d}-D"
                )))
            }
        };
        if dim != self.dim {
            return Err(invalid(format!(
                "vectors have dimension {dim}, the index has {}",
                self.dim
            )));
        }
        fn go<T: Element + numpy::Element>(
            this: &Index,
            py: Python<'_>,
            live: &LiveIndex,
            arr: &Bound<'_, PyUntypedArray>,
            ids: Option<&[u64]>,
            upsert: bool,
        ) -> PyResult<Vec<u64>> {
            let e = Elements::<T>::of(arr)?;
            let rows = e.as_slice();
            if upsert {
                let ids = ids.unwrap_or(&[]);
                this.write(py, || live.upsert(ids, rows), |_, _| None)
            } else {
                this.write(py, || live.insert(ids, rows), |new, n| Some(n + new.len()))
            }
        }
        match self.check_dtype(&arr, "vector")? {
            DType::F32 => go::<f32>(self, py, live, &arr, ids, upsert),
            DType::U8 => go::<u8>(self, py, live, &arr, ids, upsert),
            DType::I8 => go::<i8>(self, py, live, &arr, ids, upsert),
        }
    }

    /// The parameters of a search of `k` results on `inner`, checked.
    fn lib_params(
        &self,
        py: Python<'_>,
        inner: &AnyIndex,
        k: i64,
        params: Option<SearchParams>,
    ) -> PyResult<KindParams> {
        let k = count("k", k, 1)?;
        let n = self.live_count(py)?;
        if k > n {
            return Err(invalid(format!(
                "k = {k} is larger than the {n} indexed vectors"
            )));
        }
        let o = params.unwrap_or_default().to_options(&self.options)?;
        o.params(inner, k).py()
    }

    fn check_dtype(&self, arr: &Bound<'_, PyUntypedArray>, what: &str) -> PyResult<DType> {
        let dt = dtype_of(arr)?;
        if dt != self.dtype {
            return Err(invalid(format!(
                "{what} dtype {} does not match the index's {} (convert with .astype(numpy.{}))",
                numpy_name(dt),
                numpy_name(self.dtype),
                numpy_name(self.dtype)
            )));
        }
        Ok(dt)
    }

    /// One query, as a batch of one (the library searches it on this thread with a pooled
    /// I/O engine).
    fn search_one<T: Element + numpy::Element>(
        &self,
        py: Python<'_>,
        inner: &Arc<AnyIndex>,
        query: &Elements<'_, T>,
        p: &KindParams,
    ) -> PyResult<(Vec<(u64, f32)>, QueryStats)> {
        let q = query.as_slice();
        if q.len() != self.dim {
            return Err(invalid(format!(
                "query has dimension {}, the index has {}",
                q.len(),
                self.dim
            )));
        }
        let (ids, dists, stats) = self.search_batch(py, inner, q, p, 1)?;
        let stats = stats.into_iter().next().unwrap_or_default();
        Ok((ids.into_iter().zip(dists).collect(), stats))
    }

    /// A batch: a writable graph index's disk files directly while nothing is written, else
    /// the kind's search. Returns row-major ids and distances and per-query statistics.
    #[allow(clippy::type_complexity)]
    fn search_batch<T: Element>(
        &self,
        py: Python<'_>,
        inner: &AnyIndex,
        rows: &[T],
        p: &KindParams,
        threads: usize,
    ) -> PyResult<(Vec<u64>, Vec<f32>, Vec<QueryStats>)> {
        let q = Queries::new(rows, self.dim).ok_or_else(|| {
            invalid("the queries do not hold whole vectors of the index's dimension")
        })?;
        let run = Run {
            threads,
            interleave: 1,
        };
        let hits: Hits = match (self.fast_disk(inner), p) {
            (Some(disk), KindParams::Graph(p)) => py
                .detach(|| disk.search_rows(rows, p, threads, 1))
                .py()?
                .into(),
            _ => py.detach(|| inner.search(q, p, run)).py()?,
        };
        Ok((hits.ids, hits.dists, hits.stats))
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

/// Ids from Python as `u64`: an integer numpy array (0-D or 1-D, any integer dtype), a single
/// int, or a sequence of ints (converted one by one, so large ids never pass through a float);
/// a negative, non-integer or out-of-range value is an `InvalidInputError`.
fn id_list(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    if let Ok(arr) = obj.cast::<PyUntypedArray>() {
        return id_array(arr, what);
    }
    let one = |item: &Bound<'_, PyAny>, at: Option<usize>| -> PyResult<u64> {
        if let Ok(id) = item.extract::<u64>() {
            return Ok(id);
        }
        if let Ok(neg) = item.extract::<i64>() {
            return Err(invalid(format!("{what} must be at least 0: found {neg}")));
        }
        let shown = item
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "?".into());
        Err(invalid(format!(
            "{what} must be integers in [0, 2**64 - 2]{}: {shown} is not",
            at.map_or(String::new(), |i| format!(" (item {i})"))
        )))
    };
    if obj.extract::<i128>().is_ok() {
        return Ok(vec![one(obj, None)?]);
    }
    let items = obj.try_iter().map_err(|_| {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        invalid(format!(
            "{what} must be a numpy array or a list of integers, not {ty}"
        ))
    })?;
    let mut ids = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in items.enumerate() {
        ids.push(one(&item?, Some(i))?);
    }
    Ok(ids)
}

/// [`id_list`] of a numpy array.
fn id_array(arr: &Bound<'_, PyUntypedArray>, what: &str) -> PyResult<Vec<u64>> {
    let py = arr.py();
    if arr.ndim() > 1 {
        return Err(invalid(format!(
            "{what} must be a 1-D array or list of integers, not {}-D",
            arr.ndim()
        )));
    }
    if arr.len() == 0 && arr.ndim() == 1 {
        return Ok(Vec::new());
    }
    let dtype = arr.dtype();
    let kind = dtype.kind();
    let np = py.import("numpy")?;
    let flat = arr.call_method1("reshape", (-1,))?;
    let contiguous = |name: &str| -> PyResult<Bound<'_, PyAny>> {
        let kw = PyDict::new(py);
        kw.set_item("dtype", name)?;
        np.call_method("ascontiguousarray", (&flat,), Some(&kw))
    };
    match kind {
        b'u' => {
            let a = contiguous("uint64")?;
            Ok(a.cast::<PyArray1<u64>>()?.to_vec()?)
        }
        b'i' => {
            let a = contiguous("int64")?;
            let v = a.cast::<PyArray1<i64>>()?.to_vec()?;
            if let Some(neg) = v.iter().find(|&&x| x < 0) {
                return Err(invalid(format!("{what} must be at least 0: found {neg}")));
            }
            Ok(v.into_iter().map(|x| x as u64).collect())
        }
        _ => {
            let name = dtype.str().map(|s| s.to_string()).unwrap_or_default();
            Err(invalid(format!(
                "{what} must be integers in [0, 2**64 - 2], not an array of {name}"
            )))
        }
    }
}

/// numpy's name of an element type.
pub(crate) fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::U8 => "uint8",
        DType::I8 => "int8",
    }
}

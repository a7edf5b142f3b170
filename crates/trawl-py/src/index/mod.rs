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
//!
//! The class and its Python methods are here; what they do is in the submodules: [`open`]
//! (`Index.open`'s options and the handle built from the opened index), [`search`] (single
//! and batch searches, their parameters and statistics), [`range`] (range searches),
//! [`update`] (writes, the live count
//! and merges) and [`ids`] (ids from Python).

mod ids;
mod open;
mod range;
mod search;
mod update;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trawl::kinds::graph::{DiskIndex, KindName};
use trawl::kinds::{AnyIndex, Options};
use trawl::search::QueryStats;
use trawl::{DType, Metric};

use crate::errors::{err, invalid, Kind, PyResultExt};
use crate::params::{count, SearchParams};
use crate::pyjson::to_py;

use ids::id_list;
pub(crate) use search::stats_dict;

/// Id of a missing result (fewer than `k` vectors reachable): `2**64 - 1`.
pub const MISSING_ID: u64 = trawl::kinds::graph::updates::ids::HOLE;

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
    /// Per-query statistics of the last `search` / `batch_search` / `range_search` call.
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
    /// memory_budget: bytes the index may keep in memory (an int, or a size such as "512M",
    /// "2G"): the engine plans every in-memory structure within it — the PQ codes (or the
    /// All-in-Storage layout when they do not fit), the entry index, the node or list cache —
    /// instead of cache_nodes / list_cache_mb (which must then be left unset); the plan is in
    /// `info()["cache"]["memory_plan"]`. Below the index's minimum it is an
    /// `InvalidInputError` naming the minimum. warm: "wait" (the default: the node cache is
    /// filled before `open` returns) or "background" (it fills on a thread of its own while
    /// searches run, reading from disk what has not arrived; see `warm_progress`).
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
        let opts = open::open_options(options)?;
        Self::open_with(py, index_dir, opts)
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

    /// How far the node cache's fill has got: {"filled": records in memory, "total": records
    /// the cache will hold, "done": whether the fill is over, "error": why it stopped early,
    /// or None}. Complete at once unless the index was opened with warm="background".
    #[getter]
    fn warm_progress<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let p = self.inner()?.warm_progress();
        let mut v = serde_json::to_value(&p).unwrap_or_default();
        v["done"] = p.done().into();
        crate::pyjson::to_py(py, &v)
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
    ///
    /// `filter` (a graph index built with `labels` / `attrs`): return only vectors that match
    /// it — a string in the text form (`'lang = "en" AND year >= 2024'`; labels:
    /// `label = "x"` for a plain label, `key = "v"` for the label `key=v`, `IN`, `HAS ANY`,
    /// `HAS ALL`; numeric fields: `= != < <= > >=`, `IN`, `BETWEEN`; `AND`, `OR`, `NOT`,
    /// parentheses) or a dict in the JSON form (`{"lang": "en", "year": {"$gte": 2024}}`).
    /// Fewer than `k` matches are padded with `MISSING_ID`. `filter_plan`: how a filtered
    /// query is searched — "auto" (the planner's choice from the number of matches), "inline"
    /// (the graph search, results filtered, list scaled), "scan" (the matches scored by PQ in
    /// memory, the best read) or "exact" (every match read and scored exactly). A filter that
    /// does not parse, names an unknown field or compares a label by order, and a filter on
    /// an index without attributes, raise `InvalidInputError`. `last_stats` tells the plan
    /// taken (`plan_inline`, `plan_scan`, `plan_exact`), `matches` and `filter_list`.
    #[pyo3(signature = (query, k = 10, params = None, *, filter = None, filter_plan = "auto"))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        filter: Option<&Bound<'py, PyAny>>,
        filter_plan: &str,
    ) -> PyResult<PyHits<'py>> {
        self.search_query(py, query, k, params, filter, filter_plan)
    }

    /// The `k` nearest neighbours of every row of `queries` (a 2-D array of the index's
    /// dtype), searched by `threads` threads (0 = one per core).
    ///
    /// Returns `(ids, distances)`: uint64 and float32 arrays of shape `(len(queries), k)`;
    /// ids and missing results as in `search`.
    ///
    /// `filter`: as in `search` (one filter for every query), or a list of one per query
    /// (None: that query is not filtered; its length must be `len(queries)`). `filter_plan`
    /// as in `search`.
    #[pyo3(signature = (queries, k = 10, params = None, threads = 0, *, filter = None,
        filter_plan = "auto"))]
    #[allow(clippy::too_many_arguments)]
    fn batch_search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        threads: i64,
        filter: Option<&Bound<'py, PyAny>>,
        filter_plan: &str,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        self.search_queries(py, queries, k, params, threads, filter, filter_plan)
    }

    /// Range search (faiss's `range_search`): every vector within `radius` of each query —
    /// a 2-D array of the index's dtype (one query per row), or a 1-D array (one query) —
    /// searched by `threads` threads (0 = one per core).
    ///
    /// Returns `(lims, ids, distances)`: `lims` an int64 array of `nq + 1` offsets (`nq`
    /// queries), `ids` uint64 and `distances` float32 arrays of `lims[-1]` results; query
    /// `i`'s results are `ids[lims[i]:lims[i + 1]]`, nearest first (ties by id), each with
    /// its exact distance (squared for "l2") at most `radius`. Ids as in `search`.
    ///
    /// `radius`: a finite number (NaN or infinite: `InvalidInputError`); a negative radius
    /// finds nothing but with "ip". `max_results` (None, or at least 1): keep only the
    /// nearest that many per query. `params`: as in `search` — on a graph index `L` is the
    /// list size the search starts with and `range_slack`, `range_width`, `range_early_stop`
    /// tune it (see `SearchParams`); a flat index is exact. A result is always within the
    /// radius; what an approximate search can miss is a vector within it (raise `L` or
    /// `range_slack`). `filter` / `filter_plan` as in `batch_search`. `last_stats` and
    /// `stats` count the queries as a batch search's.
    #[pyo3(signature = (queries, radius, max_results = None, params = None, threads = 0, *,
        filter = None, filter_plan = "auto"))]
    #[allow(clippy::too_many_arguments)]
    fn range_search<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        radius: f64,
        max_results: Option<i64>,
        params: Option<SearchParams>,
        threads: i64,
        filter: Option<&Bound<'py, PyAny>>,
        filter_plan: &str,
    ) -> PyResult<range::PyRangeHits<'py>> {
        let call = range::RangeCall {
            radius,
            max_results,
            params,
            threads,
            filter,
            filter_plan,
        };
        self.range_queries(py, queries, call)
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
    ///
    /// `labels` and `attrs` (keyword-only): the vectors' attributes for filtered search, in
    /// the forms `trawl.build` takes (one row per vector), logged with them and searchable
    /// by `filter=` at once. A name keeps its meaning: a numeric field of the index cannot
    /// arrive as a label key, nor the reverse (`InvalidInputError`, nothing changed).
    #[pyo3(signature = (vectors, ids = None, *, labels = None, attrs = None))]
    fn insert<'py>(
        &self,
        py: Python<'py>,
        vectors: &Bound<'py, PyAny>,
        ids: Option<&Bound<'py, PyAny>>,
        labels: Option<&Bound<'py, PyAny>>,
        attrs: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let ids = ids.map(|i| id_list(i, "ids")).transpose()?;
        let out = self.write_vectors(py, vectors, ids.as_deref(), (labels, attrs), false)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Inserts or replaces: each id's vector (if the index holds the id) is deleted and the
    /// new one inserted, as one operation. `ids` and `vectors` as in `insert` (ids required).
    /// `labels` / `attrs` as in `insert`: the new vectors' attributes replace the old ones
    /// (without them an upserted vector has none).
    #[pyo3(signature = (ids, vectors, *, labels = None, attrs = None))]
    fn upsert<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        vectors: &Bound<'py, PyAny>,
        labels: Option<&Bound<'py, PyAny>>,
        attrs: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let ids = id_list(ids, "ids")?;
        self.write_vectors(py, vectors, Some(&ids), (labels, attrs), true)?;
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
    /// stderr when it is a terminal. `deletes`: how deleted vectors leave the graph —
    /// "in-place" (every node pointing to a deleted one swaps that edge for at most `replace`
    /// edges to the deleted node's out-neighbours; a list is re-pruned only when over R),
    /// "in-place-search" (IP-DiskANN: the same for the nodes a search for the deleted vector
    /// finds; other edges to it are dropped) or "consolidate" (FreshDiskANN: every such node
    /// re-pruned over the deleted nodes' neighbours). Ctrl-C stops it (`KeyboardInterrupt`;
    /// the index keeps its files and updates).
    ///
    /// Returns the merge report: `inserted`, `deleted`, `repaired`, `patched`,
    /// `touched_nodes` and `touched_pages` (of `graph_pages`: what differs from the old
    /// files), `in_edges` (edges to deleted nodes, all gone) and `in_edges_found`, `relinked`
    /// (edges added so every node stays reachable), `slots` (slots of the new files), `holes`
    /// (free slots), seconds per phase, `bytes_written`, `peak_rss_bytes`, and the recall
    /// monitor's `recall` (recall@10 per list size on `recall_samples` of the index's own
    /// vectors) with `recall_warning` — a sentence when it fell more than 2 points below the
    /// last build's, else None.
    #[pyo3(signature = (threads = 0, progress = false, deletes = "in-place", replace = 3))]
    fn merge<'py>(
        &self,
        py: Python<'py>,
        threads: i64,
        progress: bool,
        deletes: &str,
        replace: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.merge_updates(py, threads, progress, deletes, replace)
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

    /// Per-query counters of the last `search` / `batch_search` / `range_search` call: a dict of uint64
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

    /// The disk files to search directly (ids = row numbers), while the index has no
    /// updates; `None` when searches go through the live index.
    fn fast_disk(&self, inner: &AnyIndex) -> Option<Arc<DiskIndex>> {
        let g = inner.graph()?;
        (g.live().is_none() || !self.updated.load(Ordering::Acquire)).then(|| g.disk())
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

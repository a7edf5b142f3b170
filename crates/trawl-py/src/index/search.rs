//! Searching an [`Index`]: one query or a batch, the parameters of a search checked against
//! the index, and the statistics the searches leave.

use std::sync::Arc;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trawl::data::Queries;
use trawl::filter::QueryFilter;
use trawl::kinds::{AnyIndex, Hits, KindParams, Run};
use trawl::search::QueryStats;
use trawl::{DType, Element};

use super::{lock, numpy_name, Index, PyHits, MISSING_ID};
use crate::arrays::{as_array, dtype_of, Elements};
use crate::errors::{invalid, PyResultExt};
use crate::filters::{filter_params, PyFilters};
use crate::params::{count, SearchParams};

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

/// The filter of one search call: the filters read from Python and what the library takes.
pub(super) struct Filtered<'f> {
    /// The filters as read from Python (they name a failing filter in its error).
    pub(super) filters: &'f PyFilters,
    /// The filter the library takes.
    pub(super) qf: QueryFilter<'f>,
}

impl Index {
    /// `search`: the `k` nearest neighbours of one query, padded with `MISSING_ID` and `inf`
    /// to `k`; the query's statistics recorded.
    pub(super) fn search_query<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        filter: Option<&Bound<'py, PyAny>>,
        filter_plan: &str,
    ) -> PyResult<PyHits<'py>> {
        let inner = self.inner()?;
        let filters = PyFilters::read(filter, 1, false)?;
        let qf = self.query_filter(&inner, &filters, filter_plan)?;
        let arr = as_array(query, "query")?;
        if arr.ndim() != 1 {
            return Err(invalid(format!(
                "query must be a 1-D array, not {}-D (use batch_search for several queries)",
                arr.ndim()
            )));
        }
        let p = self.lib_params(py, &inner, k, params)?;
        let (hits, stats) = match self.check_dtype(&arr, "query")? {
            DType::F32 => self.search_one(py, &inner, &Elements::<f32>::of(&arr)?, &p, &qf)?,
            DType::U8 => self.search_one(py, &inner, &Elements::<u8>::of(&arr)?, &p, &qf)?,
            DType::I8 => self.search_one(py, &inner, &Elements::<i8>::of(&arr)?, &p, &qf)?,
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

    /// `batch_search`: the `k` nearest neighbours of every row of `queries`, by `threads`
    /// threads (0 = one per core), as `(len(queries), k)` arrays; the statistics recorded.
    pub(super) fn search_queries<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: i64,
        params: Option<SearchParams>,
        threads: i64,
        filter: Option<&Bound<'py, PyAny>>,
        filter_plan: &str,
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
        let filters = PyFilters::read(filter, nq, true)?;
        let qf = self.query_filter(&inner, &filters, filter_plan)?;
        let p = self.lib_params(py, &inner, k, params)?;
        let threads = match count("threads", threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        let (ids, dists, stats) = match self.check_dtype(&arr, "query")? {
            DType::F32 => {
                let e = Elements::<f32>::of(&arr)?;
                self.search_batch(py, &inner, e.as_slice(), &p, threads, &qf)?
            }
            DType::U8 => {
                let e = Elements::<u8>::of(&arr)?;
                self.search_batch(py, &inner, e.as_slice(), &p, threads, &qf)?
            }
            DType::I8 => {
                let e = Elements::<i8>::of(&arr)?;
                self.search_batch(py, &inner, e.as_slice(), &p, threads, &qf)?
            }
        };
        self.record(stats);
        let k = p.k();
        let ids = PyArray1::from_vec(py, ids).reshape([nq, k])?;
        let dists = PyArray1::from_vec(py, dists).reshape([nq, k])?;
        Ok((ids.into_any(), dists.into_any()))
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

    pub(super) fn check_dtype(
        &self,
        arr: &Bound<'_, PyUntypedArray>,
        what: &str,
    ) -> PyResult<DType> {
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
        qf: &Filtered<'_>,
    ) -> PyResult<(Vec<(u64, f32)>, QueryStats)> {
        let q = query.as_slice();
        if q.len() != self.dim {
            return Err(invalid(format!(
                "query has dimension {}, the index has {}",
                q.len(),
                self.dim
            )));
        }
        let (ids, dists, stats) = self.search_batch(py, inner, q, p, 1, qf)?;
        let stats = stats.into_iter().next().unwrap_or_default();
        Ok((ids.into_iter().zip(dists).collect(), stats))
    }

    /// The filter of a search (`filter`, `filter_plan`) on `inner`: a filter on a graph index
    /// built without attributes is refused here, in Python's words.
    pub(super) fn query_filter<'f>(
        &self,
        inner: &AnyIndex,
        filters: &'f PyFilters,
        filter_plan: &str,
    ) -> PyResult<Filtered<'f>> {
        let params = filter_params(filter_plan)?;
        if !filters.is_none() {
            if let Some(g) = inner.graph() {
                if g.disk().attrs().is_none() {
                    return Err(invalid(format!(
                        "filter: the index in {} has no labels or attributes to filter on \
                         (build it with trawl.build(..., labels=..., attrs=...))",
                        self.dir.display()
                    )));
                }
            }
        }
        Ok(Filtered {
            filters,
            qf: QueryFilter {
                filters: filters.filters(),
                params,
            },
        })
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
        f: &Filtered<'_>,
    ) -> PyResult<(Vec<u64>, Vec<f32>, Vec<QueryStats>)> {
        let q = Queries::new(rows, self.dim).ok_or_else(|| {
            invalid("the queries do not hold whole vectors of the index's dimension")
        })?;
        let run = Run {
            threads,
            interleave: 1,
        };
        let qf = &f.qf;
        let hits: Hits = match (self.fast_disk(inner), p) {
            (Some(disk), KindParams::Graph(p)) => py
                .detach(|| {
                    disk.search_rows_where(rows, p, threads, 1, qf.filters, &qf.params, None)
                })
                .map_err(|e| f.filters.search_error(e))?
                .into(),
            _ => py
                .detach(|| inner.search(q, p, run, qf))
                .map_err(|e| f.filters.search_err(e))?,
        };
        Ok((hits.ids, hits.dists, hits.stats))
    }

    /// Records a call's per-query statistics: `last_stats`, and summed into `stats`.
    pub(super) fn record(&self, stats: Vec<QueryStats>) {
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

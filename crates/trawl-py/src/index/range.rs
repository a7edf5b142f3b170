//! Range search of an [`Index`] (faiss's `range_search`): every vector within a radius of each
//! query, however many, as `(lims, ids, distances)` arrays; the statistics recorded as a batch
//! search's are.

use numpy::{PyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trawl::data::{Queries, RangeResults};
use trawl::kinds::{AnyIndex, KindParams, RangeHits, Run};
use trawl::{DType, Element};

use super::search::Filtered;
use super::Index;
use crate::arrays::{as_array, Elements};
use crate::errors::{err, invalid, Kind, PyResultExt};
use crate::filters::PyFilters;
use crate::params::{count, SearchParams};

/// `(lims, ids, distances)` of a range search: int64 offsets (`nq + 1`), uint64 ids and
/// float32 distances.
pub(super) type PyRangeHits<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<f32>>,
);

/// The `k` a range search's parameters are resolved for: it only sizes the decoupled
/// layout's smallest re-rank, so `trawl search`'s 10, within the list size when one is set.
const RANGE_K: usize = 10;

/// What one range search call asks for, beside its queries.
pub(super) struct RangeCall<'a, 'py> {
    /// Largest distance of a result.
    pub(super) radius: f64,
    /// Most results kept per query (the nearest); `None` = every one.
    pub(super) max_results: Option<i64>,
    /// Search parameters (`None` = the defaults).
    pub(super) params: Option<SearchParams>,
    /// Search threads (0 = one per core).
    pub(super) threads: i64,
    /// One filter, a list of one per query, or `None`.
    pub(super) filter: Option<&'a Bound<'py, PyAny>>,
    /// How a filtered query is searched.
    pub(super) filter_plan: &'a str,
}

impl Index {
    /// `range_search`: every vector within `radius` of each query (a 1-D array is one query,
    /// a 2-D array one per row), nearest first, at most `max_results` per query; the
    /// statistics recorded.
    pub(super) fn range_queries<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        call: RangeCall<'_, 'py>,
    ) -> PyResult<PyRangeHits<'py>> {
        let inner = self.inner()?;
        let arr = as_array(queries, "queries")?;
        let (nq, dim) = match arr.ndim() {
            1 => (1, arr.shape()[0]),
            2 => (arr.shape()[0], arr.shape()[1]),
            n => {
                return Err(invalid(format!(
                    "queries must be a 1-D array (one query) or a 2-D array (queries × \
                     dimension), not {n}-D"
                )))
            }
        };
        if dim != self.dim {
            return Err(invalid(format!(
                "queries have dimension {dim}, the index has {}",
                self.dim
            )));
        }
        let radius = call.radius as f32;
        if !radius.is_finite() {
            return Err(invalid(format!(
                "radius = {} must be a finite number (of float32's range)",
                call.radius
            )));
        }
        let max_results = call
            .max_results
            .map(|m| count("max_results", m, 1))
            .transpose()?;
        let filters = PyFilters::read(call.filter, nq, true)?;
        let qf = self.query_filter(&inner, &filters, call.filter_plan)?;
        let p = self.range_params(&inner, radius, call.params)?;
        let threads = match count("threads", call.threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        let run = Run {
            threads,
            interleave: 1,
        };
        let (r, m) = (radius, max_results);
        let hits = match self.check_dtype(&arr, "query")? {
            DType::F32 => {
                let e = Elements::<f32>::of(&arr)?;
                self.range_batch(py, &inner, e.as_slice(), r, &p, run, &qf, m)?
            }
            DType::U8 => {
                let e = Elements::<u8>::of(&arr)?;
                self.range_batch(py, &inner, e.as_slice(), r, &p, run, &qf, m)?
            }
            DType::I8 => {
                let e = Elements::<i8>::of(&arr)?;
                self.range_batch(py, &inner, e.as_slice(), r, &p, run, &qf, m)?
            }
        };
        let RangeResults { lims, ids, dists } = hits.results;
        // (An empty batch may come back with no offsets at all.)
        let lims = if lims.is_empty() { vec![0] } else { lims };
        if lims.len() != nq + 1 || lims.last() != Some(&ids.len()) || ids.len() != dists.len() {
            return Err(err(
                Kind::Internal,
                format!(
                    "range search of {nq} queries returned {} offsets, {} ids and {} distances",
                    lims.len(),
                    ids.len(),
                    dists.len()
                ),
            ));
        }
        self.record(hits.stats);
        let lims = lims
            .into_iter()
            .map(|l| i64::try_from(l).unwrap_or(i64::MAX))
            .collect();
        Ok((
            PyArray1::from_vec(py, lims),
            PyArray1::from_vec(py, ids),
            PyArray1::from_vec(py, dists),
        ))
    }

    /// The parameters of a range search of `radius` on `inner`, checked by the library.
    fn range_params(
        &self,
        inner: &AnyIndex,
        radius: f32,
        params: Option<SearchParams>,
    ) -> PyResult<KindParams> {
        let params = params.unwrap_or_default();
        // k must not exceed a graph's list size; an unusable L is reported by the library.
        let k = match params.L {
            Some(l) if l >= 1 => RANGE_K.min(usize::try_from(l).unwrap_or(RANGE_K)),
            _ => RANGE_K,
        };
        let o = params.to_options(&self.options)?;
        o.range_params(inner, k, radius).py()
    }

    /// A batch of row-major `rows` searched by the kind's range search with the GIL released.
    #[allow(clippy::too_many_arguments)]
    fn range_batch<T: Element>(
        &self,
        py: Python<'_>,
        inner: &AnyIndex,
        rows: &[T],
        radius: f32,
        p: &KindParams,
        run: Run,
        f: &Filtered<'_>,
        max_results: Option<usize>,
    ) -> PyResult<RangeHits> {
        let q = Queries::new(rows, self.dim).ok_or_else(|| {
            invalid("the queries do not hold whole vectors of the index's dimension")
        })?;
        let qf = &f.qf;
        py.detach(|| inner.range_search(q, radius, p, run, qf, max_results))
            .map_err(|e| f.filters.search_err(e))
    }
}

//! Filtered search from Python: the vectors' attributes given to `trawl.build` (`labels`,
//! `attrs`) read into [`Attributes`], filters (the text form as a string, the JSON form as a
//! dict, one per query as a list) read into [`Expr`]s, `filter_plan`, and
//! `trawl.filtered_ground_truth` ([`trawl::filter::truth::knn_filtered`]).
//!
//! Attributes as Python gives them:
//!
//! - `labels`: one list of strings per vector (DiskANN's labels; `key=value` is the value of
//!   the label key `key`), or a CSR pair `(offsets, values)` (vector `i` has
//!   `values[offsets[i]:offsets[i+1]]`), or the path of a DiskANN label file;
//! - `attrs`: a dict `{name: column}` of one value per vector — an integer numpy array is an
//!   `i64` field, a float one an `f64` field (NaN refused; a `numpy.ma` masked array marks
//!   missing values), a boolean one the labels `name=true` / `name=false`; a list holds per
//!   vector None (no value), a number, a string (the label `name=value`) or a list of strings
//!   (several) — what a line of the JSON-lines attribute file holds under `name`; or the path
//!   of such a file.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use trawl::filter::{
    Attributes, AttrsBuilder, Expr, FilterError, FilterParams, Filters, Number, Plan,
};
use trawl::search::SearchError;

use crate::errors::{err, invalid, IntoPyErr, Kind};
use crate::pyjson::{from_py, type_name};

/// A filter error's own words (without the `attributes: ` of [`FilterError::Attrs`]).
fn words(e: FilterError) -> String {
    match e {
        FilterError::Attrs(m) => m,
        e => e.to_string(),
    }
}

/// A [`FilterError`] as the exception of its kind, prefixed with `what`.
fn filter_err(what: &str, e: FilterError) -> PyErr {
    let kind = Kind::from(e.kind());
    err(kind, format!("{what}: {}", words(e)))
}

/// The attributes `labels` and `attrs` give `n` vectors (`None`: neither given).
pub(crate) fn attributes(
    py: Python<'_>,
    labels: Option<&Bound<'_, PyAny>>,
    attrs: Option<&Bound<'_, PyAny>>,
    n: usize,
) -> PyResult<Option<Arc<Attributes>>> {
    let labels = labels.filter(|l| !l.is_none());
    let attrs = attrs.filter(|a| !a.is_none());
    if labels.is_none() && attrs.is_none() {
        return Ok(None);
    }
    let mut b = AttrsBuilder::new(n).map_err(|e| filter_err("labels / attrs", e))?;
    if let Some(l) = labels {
        add_labels(py, &mut b, l, n)?;
    }
    if let Some(a) = attrs {
        add_attrs(py, &mut b, a, n)?;
    }
    let a = b.finish().map_err(|e| filter_err("labels / attrs", e))?;
    Ok(Some(Arc::new(a)))
}

/// A path given as `str` or `os.PathLike` (not any other sequence).
fn as_path(v: &Bound<'_, PyAny>) -> Option<PathBuf> {
    if v.cast::<PyString>().is_ok() || v.hasattr("__fspath__").unwrap_or(false) {
        v.extract::<PathBuf>().ok()
    } else {
        None
    }
}

/// `has 999 entries but data has 1000 vectors`, for `what`.
fn check_len(what: &str, len: usize, n: usize) -> PyResult<()> {
    if len != n {
        return Err(invalid(format!(
            "{what} has {len} entries but data has {n} vectors (one per vector)"
        )));
    }
    Ok(())
}

fn add_labels(
    py: Python<'_>,
    b: &mut AttrsBuilder,
    labels: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<()> {
    if let Some(path) = as_path(labels) {
        return py
            .detach(|| trawl::filter::input::read_label_file(&path, n, b))
            .map_err(|e| filter_err("labels", e));
    }
    if let Ok(t) = labels.cast::<PyTuple>() {
        if t.len() == 2 && is_offsets(&t.get_item(0)?)? {
            return add_csr(b, &t.get_item(0)?, &t.get_item(1)?, n);
        }
    }
    if labels.cast::<PyDict>().is_ok() || labels.len().is_err() {
        return Err(invalid(format!(
            "labels must be a list of lists of strings (one list per vector), a CSR pair \
             (offsets, values) or the path of a label file, not {}",
            type_name(labels)
        )));
    }
    check_len("labels", labels.len()?, n)?;
    for (row, item) in labels.try_iter()?.enumerate() {
        let item = item?;
        if item.is_none() {
            continue;
        }
        if item.cast::<PyString>().is_ok() || item.len().is_err() {
            return Err(invalid(format!(
                "labels[{row}] must be a list of strings (the labels of vector {row}), not {}",
                type_name(&item)
            )));
        }
        for label in item.try_iter()? {
            let label = label?;
            let text = label_text(&label, &format!("labels[{row}]"))?;
            b.add_label(row as u32, &text)
                .map_err(|e| filter_err(&format!("labels[{row}]"), e))?;
        }
    }
    Ok(())
}

/// A label: a string (numpy's `str_` included).
fn label_text(v: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    v.cast::<PyString>()
        .map_err(|_| invalid(format!("{what}: a label is a string, not {}", type_name(v))))?
        .to_cow()
        .map(|c| c.into_owned())
}

/// Whether the first item of a pair is CSR offsets: an integer numpy array or a list of ints.
fn is_offsets(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(arr) = v.cast::<PyUntypedArray>() {
        return Ok(matches!(arr.dtype().kind(), b'i' | b'u'));
    }
    if let Ok(l) = v.cast::<PyList>() {
        return Ok(!l.is_empty() && l.iter().all(|x| x.cast::<PyInt>().is_ok()));
    }
    Ok(false)
}

fn add_csr(
    b: &mut AttrsBuilder,
    offsets: &Bound<'_, PyAny>,
    values: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<()> {
    let offsets = int_values(offsets, "labels offsets")?;
    if offsets.len() != n + 1 {
        return Err(invalid(format!(
            "labels offsets has {} entries but data has {n} vectors (n + 1 offsets expected)",
            offsets.len()
        )));
    }
    let values: Vec<String> = values
        .try_iter()
        .map_err(|_| invalid("labels values must be a list or array of strings"))?
        .enumerate()
        .map(|(i, v)| label_text(&v?, &format!("labels values[{i}]")))
        .collect::<PyResult<_>>()?;
    if offsets[0] != 0 || offsets[n] != values.len() as i64 {
        return Err(invalid(format!(
            "labels offsets run from {} to {}: they must run from 0 to the {} values",
            offsets[0],
            offsets[n],
            values.len()
        )));
    }
    for row in 0..n {
        let (from, to) = (offsets[row], offsets[row + 1]);
        if to < from {
            return Err(invalid(format!(
                "labels offsets decrease at {row} ({from} then {to})"
            )));
        }
        for label in &values[from as usize..to as usize] {
            b.add_label(row as u32, label)
                .map_err(|e| filter_err(&format!("labels (vector {row})"), e))?;
        }
    }
    Ok(())
}

/// A 1-D integer array (or list of ints) as `i64`s.
fn int_values(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    if let Ok(arr) = v.cast::<PyUntypedArray>() {
        if arr.ndim() != 1 {
            return Err(invalid(format!(
                "{what} must be a 1-D array, not {}-D",
                arr.ndim()
            )));
        }
        return int_column(arr, what);
    }
    v.extract::<Vec<i64>>()
        .map_err(|e| invalid(format!("{what} must be integers: {e}")))
}

/// An integer numpy array's values as `i64`s (uint64 values past `i64::MAX` refused).
fn int_column(arr: &Bound<'_, PyUntypedArray>, what: &str) -> PyResult<Vec<i64>> {
    let d = arr.dtype();
    if d.kind() == b'u' && d.itemsize() == 8 && arr.len() > 0 {
        let max: u64 = arr.call_method0("max")?.extract()?;
        if max > i64::MAX as u64 {
            return Err(invalid(format!(
                "{what}: {max} does not fit in a 64-bit signed integer"
            )));
        }
    }
    let conv = arr.call_method1("astype", ("int64",))?;
    let typed = conv
        .cast::<PyArrayDyn<i64>>()
        .map_err(|e| invalid(e.to_string()))?;
    let ro = typed.try_readonly().map_err(|e| invalid(e.to_string()))?;
    Ok(ro.as_array().iter().copied().collect())
}

/// A float numpy array's values as `f64`s.
fn float_column(arr: &Bound<'_, PyUntypedArray>) -> PyResult<Vec<f64>> {
    let conv = arr.call_method1("astype", ("float64",))?;
    let typed = conv
        .cast::<PyArrayDyn<f64>>()
        .map_err(|e| invalid(e.to_string()))?;
    let ro = typed.try_readonly().map_err(|e| invalid(e.to_string()))?;
    Ok(ro.as_array().iter().copied().collect())
}

fn add_attrs(
    py: Python<'_>,
    b: &mut AttrsBuilder,
    attrs: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<()> {
    if let Some(path) = as_path(attrs) {
        return py
            .detach(|| trawl::filter::input::read_attrs_jsonl(&path, n, b))
            .map_err(|e| filter_err("attrs", e));
    }
    let d = attrs.cast::<PyDict>().map_err(|_| {
        invalid(format!(
            "attrs must be a dict {{name: one value per vector}} or the path of a JSON-lines \
             file, not {}",
            type_name(attrs)
        ))
    })?;
    for (key, column) in d.iter() {
        let name: String = key
            .cast::<PyString>()
            .map_err(|_| {
                invalid(format!(
                    "attrs: field names are strings, not {}",
                    type_name(&key)
                ))
            })?
            .to_cow()?
            .into_owned();
        add_column(py, b, &name, &column, n)?;
    }
    Ok(())
}

/// One column of `attrs`.
fn add_column(
    py: Python<'_>,
    b: &mut AttrsBuilder,
    name: &str,
    column: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<()> {
    let what = format!("attrs[{name:?}]");
    let ma = py.import("numpy.ma")?;
    let (column, mask) = if ma.call_method1("isMaskedArray", (column,))?.is_truthy()? {
        let mask = ma.call_method1("getmaskarray", (column,))?;
        let mask = mask
            .cast::<PyArrayDyn<bool>>()
            .map_err(|e| invalid(e.to_string()))?
            .try_readonly()
            .map_err(|e| invalid(e.to_string()))?
            .as_array()
            .iter()
            .copied()
            .collect::<Vec<bool>>();
        (ma.call_method1("getdata", (column,))?, Some(mask))
    } else {
        (column.clone(), None)
    };
    let missing = |row: usize| mask.as_ref().is_some_and(|m| m[row]);
    let set = |b: &mut AttrsBuilder, row: usize, v: Number| {
        b.set_number(name, row as u32, v)
            .map_err(|e| filter_err(&what, e))
    };
    if let Ok(arr) = column.cast::<PyUntypedArray>() {
        if arr.ndim() != 1 {
            return Err(invalid(format!(
                "{what} must be a 1-D array (one value per vector), not {}-D",
                arr.ndim()
            )));
        }
        check_len(&what, arr.len(), n)?;
        match arr.dtype().kind() {
            b'i' | b'u' => {
                for (row, v) in int_column(arr, &what)?.into_iter().enumerate() {
                    if !missing(row) {
                        set(b, row, Number::I64(v))?;
                    }
                }
                return Ok(());
            }
            b'f' => {
                for (row, v) in float_column(arr)?.into_iter().enumerate() {
                    if missing(row) {
                        continue;
                    }
                    if !v.is_finite() {
                        return Err(not_finite(&what, row, v));
                    }
                    set(b, row, Number::F64(v))?;
                }
                return Ok(());
            }
            b'b' | b'U' | b'O' => {}
            _ => {
                return Err(invalid(format!(
                    "{what}: unsupported dtype {} (integers, floats, booleans, strings or \
                     objects)",
                    arr.dtype().str().map(|s| s.to_string()).unwrap_or_default()
                )))
            }
        }
    } else if column.cast::<PyString>().is_ok()
        || column.cast::<PyDict>().is_ok()
        || column.len().is_err()
    {
        return Err(invalid(format!(
            "{what} must be a numpy array or a list (one value per vector), not {}",
            type_name(&column)
        )));
    } else {
        check_len(&what, column.len()?, n)?;
    }
    // One value at a time, as a line of the JSON-lines attribute file holds it.
    for (row, v) in column.try_iter()?.enumerate() {
        let v = v?;
        if missing(row) || v.is_none() {
            continue;
        }
        if let Ok(f) = v.cast::<PyFloat>() {
            let x = f.value();
            if !x.is_finite() {
                return Err(not_finite(&what, row, x));
            }
        }
        let json = from_py(&v, &format!("{what}[{row}]"))?;
        trawl::filter::input::add_json(b, row as u32, name, &json)
            .map_err(|e| filter_err(&format!("{what}[{row}]"), e))?;
    }
    Ok(())
}

fn not_finite(what: &str, row: usize, x: f64) -> PyErr {
    invalid(format!(
        "{what}: row {row} is {x}, not a finite number (mark a missing value with a \
         numpy.ma masked array, or None in a list)"
    ))
}

/// The filters of a search, as read from Python.
#[derive(Debug, Clone, Default)]
pub(crate) enum PyFilters {
    /// No filter.
    #[default]
    None,
    /// One filter for every query.
    All(Expr),
    /// One per query (`None`: that query is not filtered).
    PerQuery(Vec<Option<Expr>>),
}

impl PyFilters {
    /// Reads `filter` for a search of `nq` queries; `batch`: whether a list (one filter per
    /// query) is accepted.
    pub(crate) fn read(
        filter: Option<&Bound<'_, PyAny>>,
        nq: usize,
        batch: bool,
    ) -> PyResult<Self> {
        let Some(f) = filter.filter(|f| !f.is_none()) else {
            return Ok(Self::None);
        };
        if f.cast::<PyList>().is_ok() || f.cast::<PyTuple>().is_ok() {
            if !batch {
                return Err(invalid(
                    "filter: search takes one filter (a string or a dict); a list of filters \
                     (one per query) is for batch_search",
                ));
            }
            let len = f.len()?;
            if len != nq {
                return Err(invalid(format!(
                    "filter: a list of {len} filters for {nq} queries (one per query)"
                )));
            }
            let list = f
                .try_iter()?
                .enumerate()
                .map(|(i, x)| one_filter(&x?, &format!("filter[{i}]")))
                .collect::<PyResult<Vec<_>>>()?;
            return Ok(Self::PerQuery(list));
        }
        Ok(match one_filter(f, "filter")? {
            Some(e) => Self::All(e),
            None => Self::None,
        })
    }

    /// As the library takes them.
    pub(crate) fn filters(&self) -> Filters<'_> {
        match self {
            Self::None => Filters::None,
            Self::All(e) => Filters::All(e),
            Self::PerQuery(v) => Filters::PerQuery(v),
        }
    }

    /// Whether no query is filtered.
    pub(crate) fn is_none(&self) -> bool {
        self.filters().is_none()
    }

    /// A library error of a search with these filters as an exception, a filter's error
    /// naming the filter (`filter`, or `filter[i]` for query `i`'s).
    pub(crate) fn search_err(&self, e: trawl::kinds::Error) -> PyErr {
        match e {
            trawl::kinds::Error::Search(s) => self.search_error(s),
            e => e.into_py_err(),
        }
    }

    /// [`PyFilters::search_err`] of a graph search's error.
    pub(crate) fn search_error(&self, e: SearchError) -> PyErr {
        match e {
            SearchError::Filter { query, source } => {
                let what = match self {
                    Self::PerQuery(_) => format!("filter[{query}]"),
                    _ => "filter".to_string(),
                };
                filter_err(&what, source)
            }
            e => e.into_py_err(),
        }
    }
}

/// One filter: a string (the text form), a dict (the JSON form) or None.
pub(crate) fn one_filter(f: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Expr>> {
    if f.is_none() {
        return Ok(None);
    }
    let parsed = if let Ok(s) = f.cast::<PyString>() {
        trawl::filter::parse(&s.to_cow()?)
    } else if f.cast::<PyDict>().is_ok() {
        trawl::filter::parse_json(&from_py(f, what)?)
    } else {
        return Err(invalid(format!(
            "{what} must be a string (the text form, e.g. 'lang = \"en\" AND year >= 2024'), \
             a dict (the JSON form, e.g. {{\"lang\": \"en\"}}) or None, not {}",
            type_name(f)
        )));
    };
    parsed
        .map(Some)
        .map_err(|e| invalid(format!("{what}: {e}")))
}

/// The planner's options of `filter_plan`: "auto" (the planner's choice), "inline", "scan"
/// or "exact".
pub(crate) fn filter_params(plan: &str) -> PyResult<FilterParams> {
    let plan = match plan {
        "auto" => None,
        p => Some(Plan::from_name(p).ok_or_else(|| {
            invalid(format!(
                "filter_plan = {p:?}: expected \"auto\", \"inline\", \"scan\" or \"exact\""
            ))
        })?),
    };
    Ok(FilterParams {
        plan,
        ..FilterParams::default()
    })
}

/// `trawl.filtered_ground_truth`: the exact `k` nearest neighbours of every row of `queries`
/// in `base` among the rows its filter matches (ties by id), the rows' attributes given as to
/// `trawl.build` (`labels`, `attrs`). `filter` as in `Index.batch_search` (None: every row).
/// Returns `(ids, distances)` of shape `(len(queries), k)`: uint64 ids (row numbers of `base`;
/// `MISSING_ID` where fewer than `k` rows match) and float32 distances (`inf` there), nearest
/// first.
#[pyfunction]
#[pyo3(signature = (base, queries, k = 10, metric = "l2", *, labels = None, attrs = None,
    filter = None))]
#[allow(clippy::too_many_arguments)]
pub fn filtered_ground_truth<'py>(
    py: Python<'py>,
    base: &Bound<'py, PyAny>,
    queries: &Bound<'py, PyAny>,
    k: i64,
    metric: &str,
    labels: Option<&Bound<'py, PyAny>>,
    attrs: Option<&Bound<'py, PyAny>>,
    filter: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    use trawl::data::AnyMatrix;
    use trawl::filter::truth::knn_filtered;

    let k = crate::params::count("k", k, 1)?;
    let metric: trawl::Metric = crate::params::parse("metric", metric)?;
    let gt = crate::build::with_vectors(py, base, "base", |b: &AnyMatrix| {
        let a = match attributes(py, labels, attrs, b.n())? {
            Some(a) => a,
            None => Arc::new(
                AttrsBuilder::new(b.n())
                    .and_then(AttrsBuilder::finish)
                    .map_err(|e| filter_err("base", e))?,
            ),
        };
        crate::build::with_vectors(py, queries, "queries", |q: &AnyMatrix| {
            if q.dtype() != b.dtype() || q.dim() != b.dim() {
                return Err(invalid(format!(
                    "queries are {} × {} {}, base is {} × {} {}: they must have the same \
                     element type and dimension",
                    q.n(),
                    q.dim(),
                    q.dtype(),
                    b.n(),
                    b.dim(),
                    b.dtype()
                )));
            }
            let f = PyFilters::read(filter, q.n(), true)?;
            let fs = f.filters();
            py.detach(|| match (b, q) {
                (AnyMatrix::F32(b), AnyMatrix::F32(q)) => knn_filtered(b, q, k, metric, &a, fs),
                (AnyMatrix::U8(b), AnyMatrix::U8(q)) => knn_filtered(b, q, k, metric, &a, fs),
                (AnyMatrix::I8(b), AnyMatrix::I8(q)) => knn_filtered(b, q, k, metric, &a, fs),
                _ => Err(FilterError::Attrs("element types differ".into())),
            })
            .map_err(|e| filter_err("filter", e))
        })?
    })??;
    let ids: Vec<u64> = gt
        .ids
        .iter()
        .map(|&i| {
            if i == u32::MAX {
                crate::index::MISSING_ID
            } else {
                u64::from(i)
            }
        })
        .collect();
    let ids = numpy::PyArray1::from_vec(py, ids).reshape([gt.nq, gt.k])?;
    let dists = numpy::PyArray1::from_vec(py, gt.dists).reshape([gt.nq, gt.k])?;
    Ok((ids.into_any(), dists.into_any()))
}

//! `trawl.build`: an index from a numpy array or a vector file, GIL released, Ctrl-C honoured.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;
use trawl::data::{read, AnyMatrix, Matrix};
use trawl::progress::Control;
use trawl::{DType, Element};

use crate::arrays::{as_array, dtype_of, Elements};
use crate::errors::{err, invalid, IntoPyErr, Kind, PyResultExt};
use crate::filters::attributes;
use crate::params::BuildParams;
use crate::pyjson::ser_to_py;

/// How often a running build checks for Ctrl-C (and other signals).
const SIGNAL_POLL: Duration = Duration::from_millis(25);

/// Runs `work` on a thread of its own with the GIL released; meanwhile the calling thread
/// checks for signals. On Ctrl-C (or any signal handler raising) it sets `cancel`, waits for
/// `work` to notice and return, and raises the handler's exception (`KeyboardInterrupt`).
pub fn run_interruptible<R: Send>(
    py: Python<'_>,
    cancel: &AtomicBool,
    work: impl FnOnce() -> R + Send,
) -> PyResult<R> {
    let (result, interrupted) = py.detach(|| {
        std::thread::scope(|s| {
            let handle = s.spawn(work);
            let mut interrupted: Option<PyErr> = None;
            while !handle.is_finished() {
                std::thread::park_timeout(SIGNAL_POLL);
                if interrupted.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        cancel.store(true, Ordering::Relaxed);
                        interrupted = Some(e);
                    }
                }
            }
            (handle.join(), interrupted)
        })
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    result.map_err(|_| {
        err(
            Kind::Internal,
            "the worker thread panicked (a bug: please report it)",
        )
    })
}

/// A thread pool of `threads` threads and a progress control cancelled through the returned
/// flag (set by [`run_interruptible`] on Ctrl-C).
pub(crate) fn worker(
    threads: usize,
    progress: bool,
) -> PyResult<(rayon::ThreadPool, Control, Arc<AtomicBool>)> {
    let cancel = Arc::new(AtomicBool::new(false));
    let ctl = if progress {
        Control::with_progress()
    } else {
        Control::silent()
    }
    .with_cancel_flag(Arc::clone(&cancel));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| err(Kind::Other, format!("creating the thread pool: {e}")))?;
    Ok((pool, ctl, cancel))
}

/// Builds a disk index over `data` into `index_dir` and returns the build report (a dict).
///
/// `data` is a 2-D numpy array of float32, uint8 or int8 (read in place when C-contiguous),
/// or the path of a vector file (.fbin/.u8bin/.i8bin, .fvecs/.bvecs, .npy; read whole).
/// `params.kind` picks a graph index (the default) or an IVF index (`kind="ivf"`); the report
/// names it (`kind`). Every parameter is checked before anything is written, and the new
/// index replaces the one the directory holds atomically. The GIL is released while it runs;
/// Ctrl-C stops it (the directory keeps the index it held).
///
/// `query_sample` (graph kind only): vectors like the queries the index will serve — an array
/// or a vector file with the data's dtype and dimension, not stored. The build links the exact
/// nearest points of each sample query to one another (query-aware edges), which lifts recall
/// of queries that fall between the data's clusters (`trawl build --query-sample`).
///
/// `labels` and `attrs` (graph kind only; keyword-only): the vectors' attributes, stored with
/// the index (`attrs.trawl`) for filtered search (`Index.search(..., filter=...)`), as
/// `trawl build --labels / --attrs` stores them. `labels`: one list of strings per vector
/// (DiskANN's labels; `key=value` is the value of the label key `key`), a CSR pair
/// `(offsets, values)` (vector `i` has `values[offsets[i]:offsets[i+1]]`), or the path of a
/// DiskANN label file. `attrs`: a dict `{name: column}`, one value per vector — an integer
/// numpy array is a numeric field of int64, a float array one of float64 (NaN and inf are
/// refused; a `numpy.ma` masked array marks missing values), a boolean array the labels
/// `name=true` / `name=false`; a list holds per vector None (no value), a number, a string
/// (the label `name=value`) or a list of strings (several such labels). Or the path of a
/// JSON-lines attribute file.
#[pyfunction]
#[pyo3(signature = (data, index_dir, params = None, query_sample = None, *, labels = None,
    attrs = None))]
pub fn build<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    index_dir: PathBuf,
    params: Option<BuildParams>,
    query_sample: Option<&Bound<'py, PyAny>>,
    labels: Option<&Bound<'py, PyAny>>,
    attrs: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let params = params.unwrap_or_default();
    let o = params.options()?;
    let labels = labels.filter(|l| !l.is_none());
    let attrs = attrs.filter(|a| !a.is_none());
    let threads = params.thread_count()?;
    let (pool, ctl, cancel) = worker(threads, params.progress)?;
    let dir = index_dir.as_path();
    let report = with_data(py, data, |m: &AnyMatrix| -> PyResult<serde_json::Value> {
        // Read and checked before anything is written.
        let mut o = o.clone();
        o.attrs = attributes(py, labels, attrs, m.n())?;
        let o = &o;
        let run = |q: Option<&AnyMatrix>| {
            run_interruptible(py, &cancel, || {
                pool.install(|| trawl::kinds::build_with(m, q, dir, o, &ctl))
            })
        };
        let built = match query_sample {
            None => run(None)?,
            Some(qs) => with_vectors(py, qs, "query_sample", |q: &AnyMatrix| run(Some(q)))??,
        };
        // A build stopped by the cancel flag says so (the caller raises KeyboardInterrupt).
        built.map(|b| b.report).map_err(|e| {
            if ctl.check().is_err() {
                err(Kind::Other, "the build was interrupted")
            } else {
                e.into_py_err()
            }
        })
    })??;
    ser_to_py(py, &report)
}

/// Calls `f` with the vectors of `data`: a 2-D numpy array of float32, uint8 or int8 (read in
/// place when C-contiguous) or the path of a vector file (read whole, GIL released).
pub(crate) fn with_data<R>(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    f: impl FnMut(&AnyMatrix) -> R,
) -> PyResult<R> {
    with_vectors(py, data, "data", f)
}

/// [`with_data`] for the argument `name` (errors name it).
pub(crate) fn with_vectors<R>(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    name: &str,
    mut f: impl FnMut(&AnyMatrix) -> R,
) -> PyResult<R> {
    if let Ok(path) = data.extract::<PathBuf>() {
        let m = py.detach(|| read::read_matrix_any(&path)).py()?;
        return Ok(f(&m));
    }
    let arr = as_array(data, name)?;
    if arr.ndim() != 2 {
        return Err(invalid(format!(
            "{name} must be a 2-D array (n vectors × dimension), not {}-D",
            arr.ndim()
        )));
    }
    let shape = arr.shape().to_vec();
    let (n, dim) = (shape[0], shape[1]);
    if n == 0 || dim == 0 {
        return Err(invalid(format!(
            "{name} has shape ({n}, {dim}): nothing to index"
        )));
    }
    Ok(match dtype_of(&arr)? {
        DType::F32 => {
            let e = Elements::<f32>::of(&arr)?;
            f(&AnyMatrix::F32(view(e.as_slice(), n, dim)?))
        }
        DType::U8 => {
            let e = Elements::<u8>::of(&arr)?;
            f(&AnyMatrix::U8(view(e.as_slice(), n, dim)?))
        }
        DType::I8 => {
            let e = Elements::<i8>::of(&arr)?;
            f(&AnyMatrix::I8(view(e.as_slice(), n, dim)?))
        }
    })
}

/// A matrix over `rows` without a copy.
pub(crate) fn view<T: Element>(rows: &[T], n: usize, dim: usize) -> PyResult<Matrix<T>> {
    if rows.len() != n * dim {
        return Err(invalid("array size does not match its shape"));
    }
    // SAFETY: `rows` (the numpy buffer under its read-only borrow, or our copy) outlives the
    // matrix: every caller (`build`, `Index.batch_search`) keeps both until it returns, and
    // drops the matrix before that.
    unsafe { Matrix::from_raw_parts(rows.as_ptr(), n, dim) }
        .ok_or_else(|| invalid("the array's buffer is not aligned for its dtype"))
}

//! `trawl.build`: an index from a numpy array or a vector file, GIL released, Ctrl-C honoured.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;
use trawl::data::{read, AnyMatrix, Matrix};
use trawl::index::{self, DiskIndex, IndexBuildError, OpenOptions};
use trawl::ivf::{build_ivf, IvfParams};
use trawl::layout::decoupled::vectors::VectorParams;
use trawl::progress::Control;
use trawl::{DType, Element};

use crate::arrays::{as_array, dtype_of, Elements};
use crate::errors::{err, invalid, IntoPyErr, Kind, PyResultExt};
use crate::params::{BuildParams, BuildPlan};
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
#[pyfunction]
#[pyo3(signature = (data, index_dir, params = None, query_sample = None))]
pub fn build<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    index_dir: PathBuf,
    params: Option<BuildParams>,
    query_sample: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let params = params.unwrap_or_default();
    let plan = params.plan()?;
    if query_sample.is_some() && !matches!(plan, BuildPlan::Graph(_)) {
        return Err(invalid(
            "query_sample: only a graph index (kind=\"graph\") takes a query sample",
        ));
    }
    let threads = params.thread_count()?;
    let (pool, ctl, cancel) = worker(threads, params.progress)?;
    let dir = index_dir.as_path();
    let report = with_data(py, data, |m: &AnyMatrix| -> PyResult<serde_json::Value> {
        let run = |q: Option<&AnyMatrix>| {
            run_interruptible(py, &cancel, || {
                pool.install(|| build_any(m, q, dir, &plan, &params, &ctl))
            })
        };
        match query_sample {
            None => run(None)?,
            Some(qs) => with_vectors(py, qs, "query_sample", |q: &AnyMatrix| {
                if q.n() == 0 {
                    return Err(invalid("query_sample holds no vectors"));
                }
                run(Some(q))?
            })?,
        }
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

/// The build report (graph or IVF), plus the decoupled layout's when asked for.
fn build_any(
    m: &AnyMatrix,
    sample: Option<&AnyMatrix>,
    dir: &Path,
    plan: &BuildPlan,
    params: &BuildParams,
    ctl: &Control,
) -> PyResult<serde_json::Value> {
    // A build stopped by the cancel flag says so (the caller raises KeyboardInterrupt).
    let fail = |e: IndexBuildError| {
        if ctl.check().is_err() {
            err(Kind::Other, "the build was interrupted")
        } else {
            e.into_py_err()
        }
    };
    let dim = match m {
        AnyMatrix::F32(m) => m.dim(),
        AnyMatrix::U8(m) => m.dim(),
        AnyMatrix::I8(m) => m.dim(),
    };
    if let Some(b) = params.pq_bytes.filter(|&b| b > dim as i64) {
        return Err(invalid(format!(
            "pq_bytes {b} is more than the dimension ({dim}): PQ codes hold at most one byte per \
             dimension"
        )));
    }
    let t0 = std::time::Instant::now();
    let lib = match plan {
        BuildPlan::Graph(lib) => lib,
        BuildPlan::Ivf {
            params: p,
            pq_default,
        } => {
            let mut p = p.clone();
            if *pq_default {
                p.pq.bytes_per_vector = p.pq.bytes_per_vector.min(dim);
            }
            return build_ivf_any(m, dir, &p, ctl, t0).map_err(fail);
        }
    };
    if let Some(q) = sample {
        let (qd, qt) = (q.dim(), q.dtype());
        if qt != m.dtype() || qd != dim {
            return Err(invalid(format!(
                "query_sample holds {} × {qd} {qt} vectors, the data is {} × {dim} {}: the \
                 sample must have the data's dtype and dimension",
                q.n(),
                m.n(),
                m.dtype()
            )));
        }
    }
    let mut report = match (m, sample) {
        (AnyMatrix::F32(m), Some(AnyMatrix::F32(q))) => {
            index::build_index_with_queries(m, q, dir, lib, ctl)
        }
        (AnyMatrix::U8(m), Some(AnyMatrix::U8(q))) => {
            index::build_index_with_queries(m, q, dir, lib, ctl)
        }
        (AnyMatrix::I8(m), Some(AnyMatrix::I8(q))) => {
            index::build_index_with_queries(m, q, dir, lib, ctl)
        }
        (AnyMatrix::F32(m), _) => index::build_index(m, dir, lib, ctl),
        (AnyMatrix::U8(m), _) => index::build_index(m, dir, lib, ctl),
        (AnyMatrix::I8(m), _) => index::build_index(m, dir, lib, ctl),
    }
    .map_err(fail)?;
    report.total_secs = t0.elapsed().as_secs_f64();
    let mut v = serde_json::to_value(&report).unwrap_or_default();
    v["kind"] = "graph".into();
    if params.decoupled {
        let ix = DiskIndex::open(dir, OpenOptions::default()).py()?;
        let d = ix
            .write_decoupled(&VectorParams::default(), ctl)
            .map_err(fail)?;
        v["decoupled"] = serde_json::to_value(&d).unwrap_or_default();
    }
    Ok(v)
}

/// An IVF index over `m` (`trawl build --kind ivf`): its report, with `kind`.
fn build_ivf_any(
    m: &AnyMatrix,
    dir: &Path,
    p: &IvfParams,
    ctl: &Control,
    t0: std::time::Instant,
) -> Result<serde_json::Value, IndexBuildError> {
    let mut report = match m {
        AnyMatrix::F32(m) => build_ivf(m, dir, p, ctl),
        AnyMatrix::U8(m) => build_ivf(m, dir, p, ctl),
        AnyMatrix::I8(m) => build_ivf(m, dir, p, ctl),
    }?;
    report.total_secs = t0.elapsed().as_secs_f64();
    let mut v = serde_json::to_value(&report).unwrap_or_default();
    v["kind"] = "ivf".into();
    Ok(v)
}

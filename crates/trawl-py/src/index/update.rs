//! Updating an [`Index`] open for writing: inserts, upserts and deletes through the live
//! index (with the count of live vectors they keep), and merges.

use std::sync::atomic::Ordering;

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trawl::kinds::graph::updates::live::{LiveError, LiveIndex};
use trawl::kinds::AnyIndex;
use trawl::{DType, Element};

use super::{lock, Index};
use crate::arrays::{as_array, Elements};
use crate::build::run_interruptible;
use crate::errors::{err, invalid, IntoPyErr, Kind, PyResultExt};
use crate::params::count;
use crate::pyjson::ser_to_py;

impl IntoPyErr for LiveError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

impl Index {
    /// The live index to write, or the read-only error.
    pub(super) fn writer<'a>(&self, inner: &'a AnyIndex) -> PyResult<&'a LiveIndex> {
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

    /// Runs one write with the GIL released; searches go through the live index from it on.
    /// `count` gives the live vectors after the write from those before it and what the
    /// write returned (`None` when unknown).
    pub(super) fn write<R: Send>(
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
    pub(super) fn live_count(&self, py: Python<'_>) -> PyResult<usize> {
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

    pub(super) fn write_vectors(
        &self,
        py: Python<'_>,
        vectors: &Bound<'_, PyAny>,
        ids: Option<&[u64]>,
        (labels, attrs): (Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
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
        let n = if arr.ndim() == 1 { 1 } else { arr.shape()[0] };
        let a = crate::filters::attributes(py, labels, attrs, n)?;
        let a = a.as_deref();
        #[allow(clippy::too_many_arguments)]
        fn go<T: Element + numpy::Element>(
            this: &Index,
            py: Python<'_>,
            live: &LiveIndex,
            arr: &Bound<'_, PyUntypedArray>,
            ids: Option<&[u64]>,
            a: Option<&trawl::filter::Attributes>,
            upsert: bool,
        ) -> PyResult<Vec<u64>> {
            let e = Elements::<T>::of(arr)?;
            let rows = e.as_slice();
            if upsert {
                let ids = ids.unwrap_or(&[]);
                this.write(py, || live.upsert_with(ids, rows, a), |_, _| None)
            } else {
                this.write(
                    py,
                    || live.insert_with(ids, rows, a),
                    |new, n| Some(n + new.len()),
                )
            }
        }
        match self.check_dtype(&arr, "vector")? {
            DType::F32 => go::<f32>(self, py, live, &arr, ids, a, upsert),
            DType::U8 => go::<u8>(self, py, live, &arr, ids, a, upsert),
            DType::I8 => go::<i8>(self, py, live, &arr, ids, a, upsert),
        }
    }

    /// `merge`: folds the updates into new disk files with `threads` threads (0 = one per
    /// core), taking deletes out as `deletes` says ("in-place", "in-place-search",
    /// "consolidate"; `replace` edges per lost edge in place), Ctrl-C stopping it; returns
    /// the merge report.
    pub(super) fn merge_updates<'py>(
        &self,
        py: Python<'py>,
        threads: i64,
        progress: bool,
        deletes: &str,
        replace: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        use trawl::kinds::graph::updates::merge::{DeleteRepair, InNeighbours, InPlaceParams};
        let inner = self.inner()?;
        let live = self.writer(&inner)?;
        let threads = match count("threads", threads, 0)? {
            0 => std::thread::available_parallelism().map_or(1, |c| c.get()),
            t => t,
        };
        let replace = count("replace", replace, 1)?;
        if replace > 64 {
            return Err(invalid(format!("replace={replace}: at most 64")));
        }
        let in_place = |in_neighbours| {
            DeleteRepair::InPlace(InPlaceParams {
                replace,
                in_neighbours,
                ..InPlaceParams::default()
            })
        };
        let deletes = match deletes {
            "in-place" => in_place(InNeighbours::Exact),
            "in-place-search" => in_place(InNeighbours::Search { l: 0 }),
            "consolidate" => DeleteRepair::Consolidate,
            d => {
                return Err(invalid(format!(
                    "deletes={d:?}: expected \"in-place\", \"in-place-search\" or \"consolidate\""
                )))
            }
        };
        let o = trawl::kinds::graph::updates::live::MergeOptions {
            threads,
            deletes,
            ..Default::default()
        };
        let (pool, ctl, cancel) = crate::build::worker(threads, progress)?;
        self.updated.store(true, Ordering::Release);
        let result = run_interruptible(py, &cancel, || pool.install(|| live.merge_with(&o, &ctl)));
        let report = result?.map_err(|e| {
            if ctl.check().is_err() {
                err(Kind::Other, "the merge was interrupted")
            } else {
                e.into_py_err()
            }
        })?;
        ser_to_py(py, &report)
    }
}

//! Ids from Python: the `ids` arguments of `insert`, `upsert` and `delete` as `u64`s.

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::invalid;

/// Ids from Python as `u64`: an integer numpy array (0-D or 1-D, any integer dtype), a single
/// int, or a sequence of ints (converted one by one, so large ids never pass through a float);
/// a negative, non-integer or out-of-range value is an `InvalidInputError`.
pub(super) fn id_list(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
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

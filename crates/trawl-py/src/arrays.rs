//! numpy arrays in: dtype dispatch, zero-copy views of C-contiguous arrays, copies otherwise.

use numpy::{
    dtype, Element as NpElement, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use trawl::DType;

use crate::errors::invalid;

/// The trawl element type of a numpy array, or an `InvalidInputError` naming its dtype.
pub fn dtype_of(arr: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    let py = arr.py();
    let d = arr.dtype();
    if d.is_equiv_to(&dtype::<f32>(py)) {
        Ok(DType::F32)
    } else if d.is_equiv_to(&dtype::<u8>(py)) {
        Ok(DType::U8)
    } else if d.is_equiv_to(&dtype::<i8>(py)) {
        Ok(DType::I8)
    } else {
        let name = d.str().map(|s| s.to_string()).unwrap_or_default();
        Err(invalid(format!(
            "unsupported dtype {name}: trawl takes float32, uint8 or int8 vectors \
             (convert with .astype(numpy.float32))"
        )))
    }
}

/// The array as a numpy array, or an `InvalidInputError` saying what it is.
pub fn as_array<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
    obj.cast::<PyUntypedArray>().cloned().map_err(|_| {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        invalid(format!("{what} must be a numpy array, not {ty}"))
    })
}

/// The elements of `arr` (of element type `T`) in row-major order: borrowed when the array
/// is C-contiguous, else copied. The borrow holds numpy's read-only borrow flag.
pub enum Elements<'py, T: NpElement> {
    Borrowed(numpy::PyReadonlyArrayDyn<'py, T>),
    Copied(Vec<T>),
}

impl<'py, T: NpElement + Copy> Elements<'py, T> {
    pub fn of(arr: &Bound<'py, PyUntypedArray>) -> PyResult<Self> {
        let typed = arr
            .cast::<PyArrayDyn<T>>()
            .map_err(|e| invalid(e.to_string()))?;
        let ro = typed.try_readonly().map_err(|e| invalid(e.to_string()))?;
        if ro.is_c_contiguous() {
            Ok(Elements::Borrowed(ro))
        } else {
            Ok(Elements::Copied(ro.as_array().iter().copied().collect()))
        }
    }

    pub fn as_slice(&self) -> &[T] {
        match self {
            Elements::Borrowed(ro) => ro.as_slice().unwrap_or(&[]),
            Elements::Copied(v) => v,
        }
    }
}

//! serde values (reports, statistics) as Python dicts, lists and scalars.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

/// `v` as the Python object `json.loads` would give.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A serializable value as a Python object.
pub fn ser_to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let v = serde_json::to_value(v)
        .map_err(|e| crate::errors::err(crate::errors::Kind::Internal, e.to_string()))?;
    to_py(py, &v)
}

/// A Python value as JSON (what `json.dumps` would write, numpy scalars included): a dict
/// with string keys, a list or tuple, a string, a bool, an int, a finite float or None.
/// `what` names the argument in errors, with the path of the offending part.
pub fn from_py(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    use pyo3::types::{PyBool, PyFloat, PyInt, PyString, PyTuple};
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, x) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(crate::errors::invalid(format!(
                    "{what}: dict keys must be strings, not {}",
                    type_name(&k)
                )));
            };
            let key = key.to_cow()?.into_owned();
            let inner = from_py(&x, &format!("{what}[{key:?}]"))?;
            map.insert(key, inner);
        }
        return Ok(Value::Object(map));
    }
    if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() {
        let mut out = Vec::new();
        for (i, x) in v.try_iter()?.enumerate() {
            out.push(from_py(&x?, &format!("{what}[{i}]"))?);
        }
        return Ok(Value::Array(out));
    }
    let float = |x: f64| -> PyResult<Value> {
        serde_json::Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| crate::errors::invalid(format!("{what}: {x} is not a finite number")))
    };
    if v.cast::<PyInt>().is_ok() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return float(v.extract::<f64>()?);
    }
    if v.cast::<PyFloat>().is_ok() {
        return float(v.extract::<f64>()?);
    }
    // numpy scalars: integers (and booleans) by `__index__`, floats by `__float__`.
    let ty = type_name(v);
    if ty == "bool_" || ty == "bool" {
        return Ok(Value::Bool(v.is_truthy()?));
    }
    if v.hasattr("__index__")? {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::from(u));
        }
    }
    if v.hasattr("__float__")? {
        if let Ok(x) = v.extract::<f64>() {
            return float(x);
        }
    }
    Err(crate::errors::invalid(format!(
        "{what}: {ty} is not a JSON value (dicts, lists, strings, numbers, booleans and None are)"
    )))
}

/// The name of a value's type.
pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

//! The library's errors as Python exceptions, chosen by the library's [`ErrorKind`] alone.
//!
//! The classes live in `trawl/errors.py` (so that they can inherit from both `trawl.Error`
//! and the built-in they refine, which `create_exception!` cannot express):
//!
//! | kind | class | bases | raised for |
//! |---|---|---|---|
//! | `InvalidInput` | `InvalidInputError` | `Error`, `ValueError` | wrong shape, dimension or dtype, NaN, bad `k`, bad parameters, bad ids, a write to a read-only index |
//! | `NotFound` | `IndexNotFoundError` | `Error`, `FileNotFoundError` | the directory is missing or not an index |
//! | `Corrupt` | `CorruptIndexError` | `Error` | a file is damaged, truncated, of the wrong kind or from another build |
//! | `Storage` | `StorageError` | `Error`, `OSError` | an I/O error; another writer holds the index |
//! | `Internal` | `InternalError` | `Error` | a bug in trawl (please report it) |
//! | `Cancelled` | `Error` | `Exception` | a cancelled operation (a build or merge stopped by Ctrl-C raises `KeyboardInterrupt` instead) |

use pyo3::prelude::*;
use pyo3::types::PyType;
use trawl::data::DataError;
use trawl::io::IoError;
use trawl::kinds::graph::{IndexBuildError, OpenError};
use trawl::search::SearchError;
use trawl::ErrorKind;

/// The exception classes of `trawl.errors`.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Invalid,
    NotFound,
    Corrupt,
    Storage,
    Internal,
    Other,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Invalid => "InvalidInputError",
            Kind::NotFound => "IndexNotFoundError",
            Kind::Corrupt => "CorruptIndexError",
            Kind::Storage => "StorageError",
            Kind::Internal => "InternalError",
            Kind::Other => "Error",
        }
    }
}

impl From<ErrorKind> for Kind {
    fn from(k: ErrorKind) -> Self {
        match k {
            ErrorKind::InvalidInput => Kind::Invalid,
            ErrorKind::NotFound => Kind::NotFound,
            ErrorKind::Corrupt => Kind::Corrupt,
            ErrorKind::Storage => Kind::Storage,
            ErrorKind::Internal => Kind::Internal,
            ErrorKind::Cancelled => Kind::Other,
        }
    }
}

/// A `trawl.errors` exception of `kind` carrying `msg`.
pub fn err(kind: Kind, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| {
        let class = py
            .import("trawl.errors")
            .and_then(|m| m.getattr(kind.class_name()))
            .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(c) => PyErr::from_type(c, msg),
            // The package is broken (errors.py missing): still say what went wrong.
            Err(e) => pyo3::exceptions::PyRuntimeError::new_err(format!("{msg} ({e})")),
        }
    })
}

/// Bad input from the caller (`InvalidInputError`, a `ValueError`).
pub fn invalid(msg: impl Into<String>) -> PyErr {
    err(Kind::Invalid, msg)
}

/// Converts a library error into its exception.
pub trait IntoPyErr {
    fn into_py_err(self) -> PyErr;
}

impl IntoPyErr for SearchError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

impl IntoPyErr for OpenError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

impl IntoPyErr for IndexBuildError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

impl IntoPyErr for DataError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

impl IntoPyErr for IoError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

/// `?` on library results inside the bindings.
pub trait PyResultExt<T> {
    fn py(self) -> PyResult<T>;
}

impl<T, E: IntoPyErr> PyResultExt<T> for Result<T, E> {
    fn py(self) -> PyResult<T> {
        self.map_err(IntoPyErr::into_py_err)
    }
}

impl IntoPyErr for trawl::dir::FileError {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

impl IntoPyErr for trawl::kinds::Error {
    fn into_py_err(self) -> PyErr {
        err(self.kind().into(), self.to_string())
    }
}

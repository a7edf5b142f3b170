//! The library's errors as Python exceptions.
//!
//! The classes live in `trawl/errors.py` (so that they can inherit from both `trawl.Error`
//! and the built-in they refine, which `create_exception!` cannot express):
//!
//! | class | bases | raised for |
//! |---|---|---|
//! | `InvalidInputError` | `Error`, `ValueError` | wrong shape, dimension or dtype, NaN, bad `k`, bad parameters |
//! | `IndexNotFoundError` | `Error`, `FileNotFoundError` | the directory is missing or not an index |
//! | `CorruptIndexError` | `Error` | a file is damaged, truncated, of the wrong kind or from another build |
//! | `StorageError` | `Error`, `OSError` | an I/O error |
//! | `Error` | `Exception` | anything else the library reports |

use pyo3::prelude::*;
use pyo3::types::PyType;
use trawl::data::{DataError, DataErrorKind};
use trawl::index::{IndexBuildError, OpenError};
use trawl::io::IoError;
use trawl::layout::{FileError, FileErrorKind};
use trawl::search::SearchError;

/// The exception classes of `trawl.errors`.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Invalid,
    NotFound,
    Corrupt,
    Storage,
    Other,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Invalid => "InvalidInputError",
            Kind::NotFound => "IndexNotFoundError",
            Kind::Corrupt => "CorruptIndexError",
            Kind::Storage => "StorageError",
            Kind::Other => "Error",
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

fn file_kind(e: &FileError) -> Kind {
    match &e.kind {
        FileErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => Kind::NotFound,
        FileErrorKind::Io(_) => Kind::Storage,
        _ => Kind::Corrupt,
    }
}

fn io_kind(e: &IoError) -> Kind {
    match e {
        IoError::BadConfig(_) => Kind::Invalid,
        IoError::Open { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Kind::NotFound
        }
        _ => Kind::Storage,
    }
}

fn data_kind(e: &DataError) -> Kind {
    match &e.kind {
        DataErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => Kind::NotFound,
        DataErrorKind::Io(_) => Kind::Storage,
        _ => Kind::Invalid,
    }
}

pub fn search_kind(e: &SearchError) -> Kind {
    match e {
        SearchError::Io(io) => io_kind(io),
        SearchError::Corrupt { .. } => Kind::Corrupt,
        SearchError::File(f) => file_kind(f),
        _ => Kind::Invalid,
    }
}

pub fn open_kind(e: &OpenError) -> Kind {
    match e {
        OpenError::NotAnIndex { .. } => Kind::NotFound,
        OpenError::File(f) => file_kind(f),
        OpenError::Mismatch { .. } => Kind::Corrupt,
        OpenError::Io(io) => io_kind(io),
    }
}

pub fn build_kind(e: &IndexBuildError) -> Kind {
    match e {
        IndexBuildError::Data(d) => data_kind(d),
        IndexBuildError::Pq(_) | IndexBuildError::Graph(_) => Kind::Invalid,
        IndexBuildError::File(f) => match file_kind(f) {
            // Writing: a missing path is a storage problem, not a missing index.
            Kind::NotFound => Kind::Storage,
            k => k,
        },
        IndexBuildError::Search(s) => search_kind(s),
        IndexBuildError::Open(o) => open_kind(o),
        IndexBuildError::Dir { .. } => Kind::Storage,
    }
}

/// Converts a library error into its exception.
pub trait IntoPyErr {
    fn into_py_err(self) -> PyErr;
}

impl IntoPyErr for SearchError {
    fn into_py_err(self) -> PyErr {
        err(search_kind(&self), self.to_string())
    }
}

impl IntoPyErr for OpenError {
    fn into_py_err(self) -> PyErr {
        err(open_kind(&self), self.to_string())
    }
}

impl IntoPyErr for IndexBuildError {
    fn into_py_err(self) -> PyErr {
        err(build_kind(&self), self.to_string())
    }
}

impl IntoPyErr for DataError {
    fn into_py_err(self) -> PyErr {
        err(data_kind(&self), self.to_string())
    }
}

impl IntoPyErr for IoError {
    fn into_py_err(self) -> PyErr {
        err(io_kind(&self), self.to_string())
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

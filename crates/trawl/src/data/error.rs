//! The one error type of the vector and ground-truth file formats.

use std::io;
use std::path::{Path, PathBuf};

use crate::kernels::DType;

/// Reading, writing or validating a vector or ground-truth file failed.
///
/// The message always names the file (`path`) and what is wrong with it (`kind`).
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", if path.as_os_str().is_empty() { "vectors".into() } else { path.display().to_string() })]
pub struct DataError {
    /// The file concerned (empty for in-memory validation).
    pub path: PathBuf,
    /// What is wrong with it.
    pub kind: DataErrorKind,
}

impl DataError {
    /// What kind of failure this is: an OS error's kind, else `InvalidInput` (the input data
    /// is unusable as given).
    pub fn kind(&self) -> crate::ErrorKind {
        match &self.kind {
            DataErrorKind::Io(e) => crate::ErrorKind::of_io(e),
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

/// The reason a vector or ground-truth file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DataErrorKind {
    /// The operating system refused (missing file, permissions, disk full). Check the path.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The file is shorter than its header (or its row layout) says: it was cut off. Re-download
    /// or regenerate it.
    #[error("truncated: expected {expected} bytes, found {actual}")]
    Truncated {
        /// Size in bytes the header implies.
        expected: u64,
        /// Actual size in bytes.
        actual: u64,
    },
    /// The file is longer than its header says (or its size fits no layout): it is damaged or
    /// is some other kind of file. Check the format.
    #[error("size mismatch: the header implies {expected} bytes, the file has {actual}")]
    SizeMismatch {
        /// Size in bytes the header implies.
        expected: u64,
        /// Actual size in bytes.
        actual: u64,
    },
    /// The element type stored in the file is not one trawl reads (f32, u8, i8). Convert it.
    #[error("unsupported element type `{0}` (trawl reads float32, uint8 and int8)")]
    UnsupportedDtype(String),
    /// The file holds a different element type than the caller asked for. Read it with the
    /// file's type (see [`crate::data::read_matrix_any`]) or convert it.
    #[error("the file holds {file} elements but {wanted} was requested")]
    DtypeMismatch {
        /// Element type of the file.
        file: DType,
        /// Element type the caller asked for.
        wanted: DType,
    },
    /// The header is malformed (zero or negative dimension, sizes that overflow, a bad npy
    /// dictionary). The file is damaged or not of the format assumed.
    #[error("bad header: {0}")]
    BadHeader(String),
    /// A `.fvecs`/`.bvecs`/`.ivecs` row has a different dimension than the first row. All
    /// vectors of a file must have the same dimension.
    #[error("row {row} has dimension {found}, but the first row has {expected}")]
    InconsistentDim {
        /// Zero-based row index.
        row: u64,
        /// Dimension of row 0.
        expected: u64,
        /// Dimension found in this row's header.
        found: i64,
    },
    /// The file holds no vectors. Give a file with at least one row.
    #[error("the file is empty (no vectors)")]
    Empty,
    /// A vector holds NaN or ±inf, which trawl rejects. Clean the data.
    #[error("row {row}, column {col} is not finite ({value})")]
    NonFinite {
        /// Zero-based row.
        row: u64,
        /// Zero-based column.
        col: u64,
        /// The offending value.
        value: f32,
    },
    /// A vector is so long that squared distances to it could overflow `f32` (its squared
    /// norm is at least [`crate::data::MAX_SQUARED_NORM`], 2^100 ≈ 1.27e30): trawl rejects it
    /// rather than answer with infinite distances. Scale the data down.
    #[error(
        "row {row} is too large: its squared norm {norm_sq:e} is not below 2^100 (about 1.27e30), \
         so distances to it could overflow 32-bit floats; scale the data down"
    )]
    TooLarge {
        /// Zero-based row.
        row: u64,
        /// Its squared Euclidean norm (computed in `f64`).
        norm_sq: f64,
    },
    /// The format cannot be told from the content or the extension, or the content fits more
    /// than one format. Name the format (and element type) explicitly.
    #[error("unrecognised format: {0}")]
    Unrecognised(String),
    /// The caller passed data that does not fit the file (a row length that is not a multiple
    /// of the dimension, a write after finish). A bug in the caller.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl DataError {
    /// Builds an error for `path`.
    pub fn new(path: impl Into<PathBuf>, kind: DataErrorKind) -> Self {
        Self {
            path: path.into(),
            kind,
        }
    }

    /// The same error attributed to `path` (e.g. a [`DataErrorKind::NonFinite`] found by
    /// [`crate::data::validate_finite`] in a matrix read from that file).
    pub fn in_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = path.into();
        self
    }

    /// Wraps an I/O error for `path`.
    pub fn io(path: &Path, err: io::Error) -> Self {
        Self::new(path, DataErrorKind::Io(err))
    }
}

/// Shorthand for results of this module.
pub type Result<T, E = DataError> = std::result::Result<T, E>;

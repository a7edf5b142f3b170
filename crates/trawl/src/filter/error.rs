//! [`FilterError`]: attributes that cannot be read or stored, and filters that do not fit an
//! index's attributes.

use std::path::PathBuf;

use crate::dir::FileError;

/// What went wrong with attributes or a filter.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// Attribute values that cannot be stored (a bad label, a non-finite number, …).
    #[error("attributes: {0}")]
    Attrs(String),
    /// A line of an attribute or filter file is malformed.
    #[error("{}, line {line}: {message}", path.display())]
    Input {
        /// The file.
        path: PathBuf,
        /// Its line (from 1).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An attribute or filter file does not match the data (its number of lines).
    #[error("{}: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An input file cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A filter names a field the index does not have.
    #[error("unknown field {field:?} in the filter: {known}")]
    UnknownField {
        /// The field.
        field: String,
        /// What the index has, in words.
        known: String,
    },
    /// A filter applies an operation a field does not support.
    #[error("field {field:?}: {message}")]
    Type {
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A filter was given for an index without attributes.
    #[error(
        "the index has no labels or attributes to filter on (build it with --labels / --attrs)"
    )]
    NoAttributes,
    /// The attribute file of an index is damaged.
    #[error(transparent)]
    File(#[from] FileError),
}

impl FilterError {
    /// What kind of failure this is: a damaged index file is `Corrupt`, an unreadable input
    /// file the OS error's kind, anything else the caller's input.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::File(e) => e.kind(),
            Self::Io { source, .. } => crate::ErrorKind::of_io(source),
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

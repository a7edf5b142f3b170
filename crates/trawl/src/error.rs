//! [`ErrorKind`]: what kind of failure an error is, for every error the library returns
//! (`kind()` on each). Front ends map kinds, not variants: the CLI's exit message and the
//! Python exception classes follow from the kind alone.

use std::io;

/// The kind of a failure: who has to act, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The caller asked for something impossible: a parameter out of range, a query of the
    /// wrong dimension or type, a switch the index does not support. Fix the call.
    InvalidInput,
    /// A file or directory does not exist, or a directory is not an index.
    NotFound,
    /// A file is damaged, truncated, of the wrong kind or from another build: rebuild it.
    Corrupt,
    /// The operating system or the device failed (permissions, disk full, a read error).
    Storage,
    /// The operation was cancelled (Ctrl-C, a cancel flag).
    Cancelled,
    /// An invariant of trawl itself does not hold: a bug. Please report it.
    Internal,
}

impl ErrorKind {
    /// `invalid_input`, `not_found`, `corrupt`, `storage`, `cancelled` or `internal`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid_input",
            Self::NotFound => "not_found",
            Self::Corrupt => "corrupt",
            Self::Storage => "storage",
            Self::Cancelled => "cancelled",
            Self::Internal => "internal",
        }
    }

    /// The kind of an operating-system error: a missing file is `NotFound`, anything else
    /// `Storage`.
    pub fn of_io(e: &io::Error) -> Self {
        if e.kind() == io::ErrorKind::NotFound {
            Self::NotFound
        } else {
            Self::Storage
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

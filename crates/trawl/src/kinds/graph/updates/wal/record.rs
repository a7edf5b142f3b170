//! The log's operations and records as values: what
//! [`LogWriter::append`](super::LogWriter::append) takes and [`read_log`](super::read_log)
//! returns.

use crate::kernels::{DType, Element};

/// The vectors of an insert or upsert: `count × dim` elements, row-major, as raw
/// little-endian bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogVectors {
    /// Element type.
    pub dtype: DType,
    /// Dimension (at least 1).
    pub dim: usize,
    /// `count × dim × dtype.size_bytes()` bytes, little-endian elements, row-major.
    pub bytes: Vec<u8>,
}

impl LogVectors {
    /// Vectors of dimension `dim` from row-major elements (`rows.len()` should be a multiple
    /// of `dim`; [`LogWriter::append`](super::LogWriter::append) checks it against the
    /// operation's ids).
    pub fn from_rows<T: Element>(rows: &[T], dim: usize) -> Self {
        let mut bytes = bytemuck::cast_slice::<T, u8>(rows).to_vec();
        to_little_endian(&mut bytes, T::DTYPE.size_bytes());
        Self {
            dtype: T::DTYPE,
            dim,
            bytes,
        }
    }

    /// The elements, row-major; `None` when `T` is not the vectors' type or the bytes are not
    /// a whole number of elements.
    pub fn rows<T: Element>(&self) -> Option<Vec<T>> {
        let size = T::DTYPE.size_bytes();
        if T::DTYPE != self.dtype || !self.bytes.len().is_multiple_of(size) {
            return None;
        }
        let mut out = vec![T::default(); self.bytes.len() / size];
        let out_bytes = bytemuck::cast_slice_mut::<T, u8>(&mut out);
        out_bytes.copy_from_slice(&self.bytes);
        to_little_endian(out_bytes, size);
        Some(out)
    }

    /// Number of whole vectors the bytes hold (0 when `dim` is 0).
    pub fn count(&self) -> usize {
        let row = self.dim.saturating_mul(self.dtype.size_bytes());
        self.bytes.len().checked_div(row).unwrap_or(0)
    }
}

/// Converts between native and little-endian element bytes (the same swap both ways).
fn to_little_endian(bytes: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") && size > 1 {
        for chunk in bytes.chunks_exact_mut(size) {
            chunk.reverse();
        }
    }
}

/// The attributes (labels, numeric fields) of an insert's or upsert's vectors, one row per
/// vector: the payload of an `attrs.trawl` file ([`crate::filter::file::encode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAttrs {
    /// The encoded attributes.
    pub bytes: Vec<u8>,
}

impl LogAttrs {
    /// Encodes `attrs`.
    pub fn encode(attrs: &crate::filter::Attributes) -> Self {
        Self {
            // Writing to a vector fails only when memory does.
            bytes: crate::filter::file::encode(attrs).unwrap_or_default(),
        }
    }

    /// Decodes and checks them.
    pub fn decode(&self) -> Result<crate::filter::Attributes, String> {
        crate::filter::file::decode(&self.bytes)
    }
}

/// One logged operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogOp {
    /// New vectors under new ids.
    Insert {
        /// Their ids, one per vector.
        ids: Vec<u64>,
        /// The vectors.
        vectors: LogVectors,
        /// Their attributes, when they have any.
        attrs: Option<LogAttrs>,
    },
    /// Removal of ids.
    Delete {
        /// The ids removed.
        ids: Vec<u64>,
    },
    /// Vectors that replace those of existing ids, or are inserted when the id is absent.
    Upsert {
        /// Their ids, one per vector.
        ids: Vec<u64>,
        /// The vectors.
        vectors: LogVectors,
        /// Their attributes (replacing the old vectors' ones), when they have any.
        attrs: Option<LogAttrs>,
    },
}

impl LogOp {
    /// The ids the operation touches.
    pub fn ids(&self) -> &[u64] {
        match self {
            Self::Insert { ids, .. } | Self::Delete { ids } | Self::Upsert { ids, .. } => ids,
        }
    }

    /// The vectors of an insert or upsert.
    pub fn vectors(&self) -> Option<&LogVectors> {
        match self {
            Self::Insert { vectors, .. } | Self::Upsert { vectors, .. } => Some(vectors),
            Self::Delete { .. } => None,
        }
    }

    /// The attributes of an insert or upsert that carries them.
    pub fn attrs(&self) -> Option<&LogAttrs> {
        match self {
            Self::Insert { attrs, .. } | Self::Upsert { attrs, .. } => attrs.as_ref(),
            Self::Delete { .. } => None,
        }
    }
}

/// One record of the log: an operation and its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Sequence number (`base_seq + 1` for the first record, then contiguous).
    pub seq: u64,
    /// The operation.
    pub op: LogOp,
}

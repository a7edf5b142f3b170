//! Vector data: in-memory and memory-mapped matrices, the vector file formats (bin, vecs, npy)
//! with format detection, streaming readers and writers, ground-truth files, and validation.
//!
//! Entry points: [`probe`] (what a file holds), [`read_matrix`] / [`read_matrix_any`] (whole
//! files, read into memory), [`map_matrix`] (memory-mapped, zero-copy), [`read_rows`] and
//! [`VectorReader`] (bounded memory), [`VectorWriter`] / [`write_matrix`] (atomic writes),
//! [`read_ground_truth`] / [`write_ground_truth`], [`validate_finite`]. Every failure is a
//! [`DataError`] naming the file.
//!
//! All formats are little-endian; trawl supports little-endian hosts only.

#[cfg(not(target_endian = "little"))]
compile_error!(
    "trawl's file formats are little-endian and are read zero-copy: little-endian hosts only"
);

pub mod error;
pub mod format;
pub mod groundtruth;
pub mod matrix;
pub mod npy;
pub mod range;
pub mod read;
pub mod validate;
pub mod write;

pub use error::{DataError, DataErrorKind};
pub use format::{probe, probe_with, Format, ProbeOptions, VectorFileInfo};
pub use groundtruth::{
    read_ground_truth, read_ivecs, write_ground_truth, write_ivecs, GroundTruth,
};
pub use matrix::{AnyMatrix, Matrix, Queries};
pub use range::{read_range_results, write_range_results, RangeResults};
pub use read::{
    map_matrix, read_matrix, read_matrix_any, read_matrix_any_with, read_matrix_with, read_rows,
    Blocks, VectorReader,
};
pub use validate::{row_fault, validate_finite, RowFault, MAX_SQUARED_NORM};
pub use write::{write_matrix, VectorWriter};

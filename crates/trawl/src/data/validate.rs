//! Validation of vector contents: trawl rejects NaN and ±inf, and vectors so long that squared
//! distances to them could overflow `f32` (squared norm at or above [`MAX_SQUARED_NORM`]).
//!
//! Why a bound on the norm and not only on the values: every distance trawl computes (squared
//! L2, inner product, cosine after normalising) is bounded by the norms of the two vectors,
//! `‖a − b‖² ≤ 4 · max(‖a‖², ‖b‖²)` and `|a · b| ≤ ‖a‖ ‖b‖`. With both squared norms below
//! 2^100 every distance stays below 2^102, far from `f32::MAX` (≈ 2^128), with room for sums
//! over many vectors (k-means, PQ training). Vectors with components like 1e30 pass a
//! finiteness check yet make a search return distance `inf`; they are refused at input
//! instead (build, insert, query), so what is stored always has exact finite distances.

use rayon::prelude::*;

use crate::kernels::{DType, Element};

use crate::data::error::{DataError, DataErrorKind};
use crate::data::matrix::Matrix;

/// The squared Euclidean norm a vector must stay below: 2^100 (≈ 1.27e30; components up to
/// about 1e15 whatever the dimension). See the module docs.
pub const MAX_SQUARED_NORM: f64 = 1_267_650_600_228_229_401_496_703_205_376.0;

/// What is wrong with one vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowFault {
    /// Column `col` holds NaN or ±inf.
    NonFinite {
        /// Zero-based column.
        col: usize,
        /// The value.
        value: f32,
    },
    /// Its squared norm is at least [`MAX_SQUARED_NORM`].
    TooLarge {
        /// The squared norm, computed in `f64`.
        norm_sq: f64,
    },
}

impl RowFault {
    /// The fault as a [`DataErrorKind`] for row `row`.
    pub fn into_kind(self, row: u64) -> DataErrorKind {
        match self {
            Self::NonFinite { col, value } => DataErrorKind::NonFinite {
                row,
                col: col as u64,
                value,
            },
            Self::TooLarge { norm_sq } => DataErrorKind::TooLarge { row, norm_sq },
        }
    }
}

/// What is wrong with `row`, if anything: a NaN or ±inf (the first), or a squared norm at or
/// above [`MAX_SQUARED_NORM`]. Integer vectors are always fine (their norms are far below).
pub fn row_fault<T: Element>(row: &[T]) -> Option<RowFault> {
    if T::DTYPE != DType::F32 {
        return None;
    }
    let mut norm_sq = 0f64;
    for x in row {
        let v = x.to_f32();
        if !v.is_finite() {
            let col = row
                .iter()
                .position(|x| !x.to_f32().is_finite())
                .unwrap_or(0);
            return Some(RowFault::NonFinite {
                col,
                value: row[col].to_f32(),
            });
        }
        norm_sq += f64::from(v) * f64::from(v);
    }
    (norm_sq >= MAX_SQUARED_NORM).then_some(RowFault::TooLarge { norm_sq })
}

/// Returns the first (lowest row) vector of `m` that holds a NaN or ±inf (as a
/// [`DataErrorKind::NonFinite`] error naming its first such column) or is too long (squared
/// norm at or above [`MAX_SQUARED_NORM`]: [`DataErrorKind::TooLarge`]), with an empty path
/// (attach the file with [`DataError::in_file`] when it came from one). Integer matrices
/// always pass. Runs in parallel.
pub fn validate_finite<T: Element>(m: &Matrix<T>) -> Result<(), DataError> {
    if T::DTYPE != DType::F32 || m.n() == 0 {
        return Ok(());
    }
    // In steps of rows, dropping a mapped matrix's pages behind the scan.
    const STEP: usize = 1 << 16;
    let dim = m.dim();
    let mut bad_row = None;
    for start in (0..m.n()).step_by(STEP) {
        let end = (start + STEP).min(m.n());
        let found = m.as_slice()[start * dim..end * dim]
            .par_chunks(dim)
            .position_first(|row| row_fault(row).is_some());
        m.release_rows(start, end);
        if let Some(r) = found {
            bad_row = Some(start + r);
            break;
        }
    }
    let Some(row) = bad_row else {
        return Ok(());
    };
    let fault = row_fault(m.row(row)).unwrap_or(RowFault::NonFinite {
        col: 0,
        value: f32::NAN,
    });
    Err(DataError::new(
        std::path::PathBuf::new(),
        fault.into_kind(row as u64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_non_finite_value() {
        let mut v = vec![1.0f32; 1000 * 8];
        assert!(validate_finite(&Matrix::from_vec(v.clone(), 8).unwrap()).is_ok());
        v[700 * 8 + 3] = f32::INFINITY;
        v[500 * 8 + 5] = f32::NAN;
        v[500 * 8 + 6] = f32::NEG_INFINITY;
        let err = validate_finite(&Matrix::from_vec(v, 8).unwrap()).unwrap_err();
        assert!(
            matches!(
                err.kind,
                DataErrorKind::NonFinite {
                    row: 500,
                    col: 5,
                    ..
                }
            ),
            "{err}"
        );
        assert!(validate_finite(&Matrix::from_vec(vec![255u8; 16], 4).unwrap()).is_ok());
    }

    #[test]
    fn refuses_vectors_whose_squared_norm_could_overflow() {
        // 1e15 per component over 4 dimensions: 4e30 ≥ 2^100.
        let mut v = vec![1.0f32; 10 * 4];
        v[6 * 4..7 * 4].fill(1e15);
        let err = validate_finite(&Matrix::from_vec(v.clone(), 4).unwrap()).unwrap_err();
        match err.kind {
            DataErrorKind::TooLarge { row: 6, norm_sq } => assert!(norm_sq > 3.9e30),
            k => panic!("{k:?}"),
        }
        assert!(err.to_string().contains("row 6 is too large"), "{err}");
        // Just below the bound passes; 3e38 (finite) does not.
        v[6 * 4..7 * 4].fill(5e14);
        assert!(validate_finite(&Matrix::from_vec(v.clone(), 4).unwrap()).is_ok());
        assert!(matches!(
            row_fault(&[3e38f32, 0.0]),
            Some(RowFault::TooLarge { .. })
        ));
        assert!(matches!(
            row_fault(&[1e30f32, f32::NAN]),
            Some(RowFault::NonFinite { col: 1, .. })
        ));
        assert_eq!(row_fault(&[0.5f32; 3]), None);
        assert_eq!(MAX_SQUARED_NORM, 2f64.powi(100));
    }
}

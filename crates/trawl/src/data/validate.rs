//! Validation of vector contents: trawl rejects NaN and ±inf.

use rayon::prelude::*;

use crate::kernels::{DType, Element};

use super::error::{DataError, DataErrorKind};
use super::matrix::Matrix;

/// Returns the first (lowest row, then column) NaN or ±inf in `m` as a
/// [`DataErrorKind::NonFinite`] error with an empty path (attach the file with
/// [`DataError::path`] when it came from one). Integer matrices always pass. Runs in parallel.
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
            .position_first(|row| row.iter().any(|x| !x.is_finite()));
        m.release_rows(start, end);
        if let Some(r) = found {
            bad_row = Some(start + r);
            break;
        }
    }
    let Some(row) = bad_row else {
        return Ok(());
    };
    let r = m.row(row);
    let col = r.iter().position(|x| !x.is_finite()).unwrap_or(0);
    Err(DataError::new(
        std::path::PathBuf::new(),
        DataErrorKind::NonFinite {
            row: row as u64,
            col: col as u64,
            value: r[col].to_f32(),
        },
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
}

//! A row-major matrix of vectors.

use crate::kernels::Element;

/// `n` vectors of `dim` elements each, stored row-major.
#[derive(Debug, Clone)]
pub struct Matrix<T: Element> {
    data: Vec<T>,
    n: usize,
    dim: usize,
}

impl<T: Element> Matrix<T> {
    /// Wraps row-major `data` of `data.len() / dim` rows. Returns `None` when `dim` is zero or
    /// does not divide the length.
    pub fn from_vec(data: Vec<T>, dim: usize) -> Option<Self> {
        if dim == 0 || data.len() % dim != 0 {
            return None;
        }
        let n = data.len() / dim;
        Some(Self { data, n, dim })
    }

    /// Number of vectors.
    #[inline]
    pub fn n(&self) -> usize {
        self.n
    }

    /// Elements per vector.
    #[inline]
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `i`. Panics if `i >= n` (an internal invariant, not user input).
    #[inline]
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// All elements, row-major.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// Iterator over rows.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[T]> + '_ {
        self.data.chunks_exact(self.dim)
    }
}

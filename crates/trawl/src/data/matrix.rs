//! A row-major matrix of vectors, owned or borrowed zero-copy from a memory-mapped file.

use std::ptr::NonNull;
use std::sync::Arc;

use memmap2::Mmap;

use crate::kernels::{DType, Element};

/// Where the elements of a [`Matrix`] live.
#[derive(Debug)]
enum Backing<T> {
    /// A heap buffer owned by the matrix.
    Owned(Vec<T>),
    /// A read-only file mapping; the elements start `offset` bytes into it.
    Mapped {
        /// The mapping, shared between clones.
        mmap: Arc<Mmap>,
        /// Byte offset of element 0.
        offset: usize,
    },
    /// Memory the caller owns (see [`Matrix::from_raw_parts`]).
    Borrowed,
}

/// Rows between two page releases of a sequential pass over a mapped matrix (see
/// [`Matrix::gather_rows`], [`Matrix::release_rows`]).
pub const RELEASE_ROWS: usize = 1 << 16;

/// `n` vectors of `dim` elements each, stored row-major.
///
/// The elements are either owned (a `Vec<T>`) or borrowed zero-copy from a memory-mapped file
/// (see [`crate::data::read_matrix`]), so a matrix larger than RAM can be used: the kernel pages
/// it in on demand. Either way [`Matrix::as_slice`] is a plain slice.
#[derive(Debug)]
pub struct Matrix<T: Element> {
    backing: Backing<T>,
    /// Start of element 0, valid for `n * dim` reads for the life of `backing`.
    ptr: NonNull<T>,
    n: usize,
    dim: usize,
}

// SAFETY: `ptr` points into `backing` (a `Vec<T>` or an `Arc<Mmap>`), which is `Send` when
// `T: Send`; the matrix only hands out shared references to the elements.
unsafe impl<T: Element> Send for Matrix<T> {}
// SAFETY: as above; the elements are never mutated through `&Matrix`.
unsafe impl<T: Element> Sync for Matrix<T> {}

impl<T: Element> Matrix<T> {
    /// Wraps row-major `data` of `data.len() / dim` rows. Returns `None` when `dim` is zero or
    /// does not divide the length.
    pub fn from_vec(data: Vec<T>, dim: usize) -> Option<Self> {
        if dim == 0 || !data.len().is_multiple_of(dim) {
            return None;
        }
        let n = data.len() / dim;
        let ptr = NonNull::new(data.as_ptr() as *mut T).unwrap_or(NonNull::dangling());
        Some(Self {
            backing: Backing::Owned(data),
            ptr,
            n,
            dim,
        })
    }

    /// Borrows `n × dim` row-major elements at `ptr` that the caller owns: the zero-copy view
    /// of a buffer from another runtime (a numpy array in the Python bindings). Returns `None`
    /// when `dim` is zero, `ptr` is null or misaligned, or the size overflows.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads of `n * dim` elements, and the memory must stay allocated
    /// and unmodified for as long as the returned matrix (or anything made from it) lives.
    pub unsafe fn from_raw_parts(ptr: *const T, n: usize, dim: usize) -> Option<Self> {
        n.checked_mul(dim)?.checked_mul(std::mem::size_of::<T>())?;
        if dim == 0 || ptr.align_offset(std::mem::align_of::<T>()) != 0 {
            return None;
        }
        let ptr = if n == 0 {
            NonNull::dangling()
        } else {
            NonNull::new(ptr as *mut T)?
        };
        Some(Self {
            backing: Backing::Borrowed,
            ptr,
            n,
            dim,
        })
    }

    /// Borrows `n × dim` elements starting `offset` bytes into `mmap`. Returns `None` when the
    /// range is out of bounds, `dim` is zero, or the start is not aligned for `T` (the caller
    /// then copies instead).
    pub(crate) fn from_mmap(mmap: Arc<Mmap>, offset: usize, n: usize, dim: usize) -> Option<Self> {
        let bytes = n.checked_mul(dim)?.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        if dim == 0 || end > mmap.len() {
            return None;
        }
        let region = &mmap[offset..end];
        if region.as_ptr().align_offset(std::mem::align_of::<T>()) != 0 {
            return None;
        }
        let ptr = NonNull::new(region.as_ptr() as *mut T).unwrap_or(NonNull::dangling());
        Some(Self {
            backing: Backing::Mapped { mmap, offset },
            ptr,
            n,
            dim,
        })
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

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// Row `i`. Panics if `i >= n` (an internal invariant, not user input).
    #[inline]
    pub fn row(&self, i: usize) -> &[T] {
        &self.as_slice()[i * self.dim..(i + 1) * self.dim]
    }

    /// All elements, row-major.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` is aligned and points at `n * dim` initialised elements inside
        // `backing` (checked in `from_vec` / `from_mmap`), which lives as long as `self` and is
        // never mutated while shared. A `Vec`'s heap buffer does not move when the matrix moves.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.n * self.dim) }
    }

    /// Iterator over rows.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[T]> + '_ {
        self.as_slice().chunks_exact(self.dim)
    }

    /// Whether the elements are borrowed from a memory-mapped file (zero-copy).
    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped { .. })
    }

    /// Drops the memory-mapped pages of rows `start..end` from this process's resident set
    /// (whole pages inside the rows only; a no-op for an owned or borrowed matrix, and for an
    /// empty or out-of-range span). The rows stay readable: a later read pages the file in
    /// again. Long sequential passes over a mapped matrix call it behind them, so the
    /// process does not keep the whole file resident.
    pub fn release_rows(&self, start: usize, end: usize) {
        let end = end.min(self.n);
        if self.is_mapped() && start < end {
            crate::mem::release_mapped(&self.as_slice()[start * self.dim..end * self.dim]);
        }
    }

    /// Copies rows `ids` (in that order) into one row-major vector. The rows are read in
    /// increasing id order, and when the matrix is memory-mapped the pages behind the reader
    /// are dropped every [`RELEASE_ROWS`] rows: a sparse gather would otherwise leave most of
    /// the file resident (the kernel maps a window of pages around every fault). Panics on an
    /// id out of range (callers pass ids below `n`).
    pub fn gather_rows<I: Copy + Into<u64>>(&self, ids: &[I]) -> Vec<T> {
        let dim = self.dim;
        let mut out: Vec<T> = Vec::with_capacity(ids.len() * dim);
        crate::mem::advise_huge_pages(&mut out);
        out.resize(ids.len() * dim, T::default());
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        if !ids.windows(2).all(|w| w[0].into() <= w[1].into()) {
            order.sort_unstable_by_key(|&j| ids[j as usize].into());
        }
        let mut released = 0usize;
        for &j in &order {
            let row = ids[j as usize].into() as usize;
            out[j as usize * dim..(j as usize + 1) * dim].copy_from_slice(self.row(row));
            if row >= released + RELEASE_ROWS {
                self.release_rows(released, row);
                released = row;
            }
        }
        self.release_rows(released, self.n);
        out
    }

    /// A copy of the elements for heavy random access: placed on transparent huge pages (see
    /// [`crate::mem`]) and, when the matrix is memory-mapped, copied in chunks whose mapped
    /// pages are dropped from this process as soon as they are copied, so the copy does not
    /// double the resident memory. The matrix stays valid: a later read pages the file in again.
    /// Returns `None` for an owned matrix (use it in place).
    pub fn resident_copy(&self) -> Option<Vec<T>> {
        if !self.is_mapped() {
            return None;
        }
        let all = self.as_slice();
        let mut out: Vec<T> = Vec::with_capacity(all.len());
        crate::mem::advise_huge_pages(&mut out);
        let chunk = (16usize << 20) / std::mem::size_of::<T>();
        for part in all.chunks(chunk.max(1)) {
            out.extend_from_slice(part);
            crate::mem::release_mapped(part);
        }
        Some(out)
    }

    /// The elements as an owned vector (copies when mapped).
    pub fn into_vec(self) -> Vec<T> {
        match self.backing {
            Backing::Owned(v) => v,
            Backing::Mapped { .. } | Backing::Borrowed => self.as_slice().to_vec(),
        }
    }

    /// A copy of rows `start..start + count` (clamped to the matrix).
    pub fn slice_rows(&self, start: usize, count: usize) -> Matrix<T> {
        let start = start.min(self.n);
        let end = start.saturating_add(count).min(self.n);
        let data = self.as_slice()[start * self.dim..end * self.dim].to_vec();
        Matrix::from_vec(data, self.dim).unwrap_or_else(|| unreachable!("dim is non-zero"))
    }
}

impl<T: Element> Clone for Matrix<T> {
    fn clone(&self) -> Self {
        match &self.backing {
            Backing::Owned(v) => Matrix::from_vec(v.clone(), self.dim)
                .unwrap_or_else(|| unreachable!("dim is non-zero")),
            Backing::Mapped { mmap, offset } => Self {
                backing: Backing::Mapped {
                    mmap: Arc::clone(mmap),
                    offset: *offset,
                },
                ptr: self.ptr,
                n: self.n,
                dim: self.dim,
            },
            // The caller's contract (`from_raw_parts`) covers everything made from the matrix.
            Backing::Borrowed => Self {
                backing: Backing::Borrowed,
                ptr: self.ptr,
                n: self.n,
                dim: self.dim,
            },
        }
    }
}

impl<T: Element> PartialEq for Matrix<T> {
    fn eq(&self, other: &Self) -> bool {
        self.dim == other.dim && self.n == other.n && self.as_slice() == other.as_slice()
    }
}

/// A batch of queries: row-major values, `dim` per query.
#[derive(Debug, Clone, Copy)]
pub struct Queries<'a, T> {
    rows: &'a [T],
    dim: usize,
}

impl<'a, T: Element> Queries<'a, T> {
    /// `rows` as queries of `dim` values; `None` when it does not hold whole queries.
    pub fn new(rows: &'a [T], dim: usize) -> Option<Self> {
        (dim > 0 && rows.len().is_multiple_of(dim)).then_some(Self { rows, dim })
    }

    /// Query `i`.
    pub fn row(&self, i: usize) -> &'a [T] {
        &self.rows[i * self.dim..(i + 1) * self.dim]
    }

    /// The values, row-major.
    pub fn rows(&self) -> &'a [T] {
        self.rows
    }

    /// Values per query.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Queries.
    pub fn n(&self) -> usize {
        self.rows.len() / self.dim
    }
}

impl<'a, T: Element> From<&'a Matrix<T>> for Queries<'a, T> {
    fn from(m: &'a crate::data::Matrix<T>) -> Self {
        Self {
            rows: m.as_slice(),
            dim: m.dim().max(1),
        }
    }
}

/// A matrix of any supported element type, for callers that dispatch on the file's type.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyMatrix {
    /// 32-bit floats.
    F32(Matrix<f32>),
    /// Unsigned bytes.
    U8(Matrix<u8>),
    /// Signed bytes.
    I8(Matrix<i8>),
}

impl AnyMatrix {
    /// Number of vectors.
    pub fn n(&self) -> usize {
        match self {
            AnyMatrix::F32(m) => m.n(),
            AnyMatrix::U8(m) => m.n(),
            AnyMatrix::I8(m) => m.n(),
        }
    }

    /// Elements per vector.
    pub fn dim(&self) -> usize {
        match self {
            AnyMatrix::F32(m) => m.dim(),
            AnyMatrix::U8(m) => m.dim(),
            AnyMatrix::I8(m) => m.dim(),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            AnyMatrix::F32(_) => DType::F32,
            AnyMatrix::U8(_) => DType::U8,
            AnyMatrix::I8(_) => DType::I8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_vec_checks_shape() {
        assert!(Matrix::<f32>::from_vec(vec![0.0; 6], 0).is_none());
        assert!(Matrix::<f32>::from_vec(vec![0.0; 7], 3).is_none());
        let m = Matrix::<f32>::from_vec((0..6).map(|x| x as f32).collect(), 3).unwrap();
        assert_eq!((m.n(), m.dim()), (2, 3));
        assert_eq!(m.row(1), &[3.0, 4.0, 5.0]);
        assert_eq!(m.rows().len(), 2);
        assert!(!m.is_mapped());
        let c = m.clone();
        drop(m);
        assert_eq!(c.row(0), &[0.0, 1.0, 2.0]);
        assert_eq!(c.slice_rows(1, 10).as_slice(), &[3.0, 4.0, 5.0]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a file: Miri cannot run mmap on files")]
    fn resident_copy_keeps_the_mapping_valid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        // 5M floats: several 16 MiB copy chunks and many whole pages to release.
        let vals: Vec<f32> = (0..5_000_000).map(|x| x as f32 * 0.5).collect();
        let mut bytes = vec![0u8; 8];
        bytes.extend_from_slice(bytemuck::cast_slice(&vals));
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the temporary file is not modified while mapped.
        let mmap = Arc::new(unsafe { Mmap::map(&file) }.unwrap());
        let m = Matrix::<f32>::from_mmap(mmap, 8, 1_000_000, 5).unwrap();
        let copy = m.resident_copy().unwrap();
        assert_eq!(copy, vals);
        // The released pages read back the file contents.
        assert_eq!(m.as_slice(), &vals[..]);
        let owned = Matrix::from_vec(vals, 5).unwrap();
        assert!(owned.resident_copy().is_none());
    }

    #[test]
    fn borrowed_matrix_views_the_callers_memory() {
        let vals: Vec<f32> = (0..12).map(|x| x as f32).collect();
        // SAFETY: `vals` outlives every matrix made here and is not modified.
        let m = unsafe { Matrix::from_raw_parts(vals.as_ptr(), 3, 4) }.unwrap();
        assert_eq!(m.as_slice().as_ptr(), vals.as_ptr());
        assert_eq!(m.row(2), &[8.0, 9.0, 10.0, 11.0]);
        assert_eq!(m.clone().as_slice().as_ptr(), vals.as_ptr());
        assert!(m.resident_copy().is_none());
        assert_eq!(m.into_vec(), vals);
        // SAFETY: a zero dimension is refused before any read.
        assert!(unsafe { Matrix::from_raw_parts(vals.as_ptr(), 3, 0) }.is_none());
        // SAFETY: a null pointer is refused.
        assert!(unsafe { Matrix::<f32>::from_raw_parts(std::ptr::null(), 3, 4) }.is_none());
        let odd = vals.as_ptr().cast::<u8>().wrapping_add(1).cast::<f32>();
        // SAFETY: a misaligned pointer is refused.
        assert!(unsafe { Matrix::from_raw_parts(odd, 1, 1) }.is_none());
        // SAFETY: an overflowing size is refused.
        assert!(unsafe { Matrix::<f32>::from_raw_parts(vals.as_ptr(), usize::MAX, 2) }.is_none());
        // SAFETY: zero rows read nothing.
        let empty = unsafe { Matrix::<f32>::from_raw_parts(std::ptr::null(), 0, 4) }.unwrap();
        assert_eq!(empty.n(), 0);
    }

    #[test]
    fn empty_matrix_is_valid() {
        let m = Matrix::<u8>::from_vec(Vec::new(), 4).unwrap();
        assert_eq!(m.n(), 0);
        assert!(m.as_slice().is_empty());
        assert_eq!(m.rows().len(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a file: Miri cannot run mmap on files")]
    fn mapped_matrix_borrows_and_checks_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        let vals: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let mut bytes = vec![0u8; 8];
        bytes.extend_from_slice(bytemuck::cast_slice(&vals));
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the test owns the file and does not modify it while mapped.
        let mmap = Arc::new(unsafe { Mmap::map(&file) }.unwrap());
        let m = Matrix::<f32>::from_mmap(Arc::clone(&mmap), 8, 3, 4).unwrap();
        assert!(m.is_mapped());
        assert_eq!(m.as_slice(), &vals[..]);
        assert_eq!(m.as_slice().as_ptr() as usize, mmap.as_ptr() as usize + 8);
        assert_eq!(m.clone(), m);
        assert!(Matrix::<f32>::from_mmap(Arc::clone(&mmap), 9, 3, 4).is_none());
        assert!(Matrix::<f32>::from_mmap(Arc::clone(&mmap), 8, 4, 4).is_none());
        assert!(Matrix::<u8>::from_mmap(mmap, 9, 4, 12).is_some());
    }

    /// A matrix moved into other threads (`Send`, `Sync`) keeps pointing at its elements: the
    /// heap buffer of an owned matrix and the caller's memory of a borrowed one do not move
    /// with the struct.
    #[test]
    fn moved_and_shared_matrices_keep_their_elements() {
        let vals: Vec<f32> = (0..24).map(|x| x as f32).collect();
        let owned = Matrix::from_vec(vals.clone(), 6).unwrap();
        let moved = std::thread::spawn(move || {
            let boxed = Box::new(owned);
            boxed.row(3).to_vec()
        })
        .join()
        .unwrap();
        assert_eq!(moved, &vals[18..24]);
        // SAFETY: `vals` outlives the scope below, which ends every thread using the view.
        let view = unsafe { Matrix::from_raw_parts(vals.as_ptr(), 4, 6) }.unwrap();
        let shared = &view;
        let sums: Vec<f32> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|t| s.spawn(move || shared.rows().skip(t).step_by(2).flatten().sum::<f32>()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            sums,
            [
                (0..6).chain(12..18).sum::<i32>() as f32,
                (6..12).chain(18..24).sum::<i32>() as f32
            ]
        );
        let copy = view.slice_rows(1, 2);
        drop(view);
        assert_eq!(copy.as_slice(), &vals[6..18]);
        assert_eq!(copy.into_vec(), &vals[6..18]);
    }
}

//! Reading vector files: whole matrices (memory-mapped when the layout allows), row ranges, and
//! a streaming block reader for bounded-memory passes.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::kernels::{DType, Element};

use super::error::{DataError, DataErrorKind, Result};
use super::format::{probe_with, Format, ProbeOptions, VectorFileInfo};
use super::matrix::{AnyMatrix, Matrix};

/// Reads a whole vector file of element type `T`.
///
/// bin and npy files are memory-mapped and the matrix borrows the mapping zero-copy (falling
/// back to a copy when the data is not aligned for `T`), so files larger than RAM work; vecs
/// files are read into memory. The file must not be modified while the matrix lives.
pub fn read_matrix<T: Element>(path: &Path) -> Result<Matrix<T>> {
    read_matrix_with(path, ProbeOptions::default())
}

/// [`read_matrix`] with explicit format / element-type hints.
pub fn read_matrix_with<T: Element>(path: &Path, opts: ProbeOptions) -> Result<Matrix<T>> {
    let info = probe_typed::<T>(path, opts)?;
    if !info.is_contiguous() {
        let mut r = VectorReader::<T>::from_info(info.clone())?;
        return r
            .read_block(info.n as usize)
            .map(|m| m.unwrap_or_else(|| empty(info.dim)));
    }
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    // SAFETY: the mapping is read-only and private to this process; trawl requires that input
    // files are not modified or truncated while they are in use (documented on this function).
    let mmap = unsafe { Mmap::map(&file) }.map_err(|e| DataError::io(path, e))?;
    let too_big = || {
        DataError::new(
            path,
            DataErrorKind::BadHeader("file larger than the address space".into()),
        )
    };
    let (n, dim) = (
        usize::try_from(info.n).map_err(|_| too_big())?,
        usize::try_from(info.dim).map_err(|_| too_big())?,
    );
    let offset = usize::try_from(info.data_offset).map_err(|_| too_big())?;
    let mmap = Arc::new(mmap);
    if let Some(m) = Matrix::from_mmap(Arc::clone(&mmap), offset, n, dim) {
        return Ok(m);
    }
    // Misaligned for T: copy.
    let mut data = vec![T::default(); n * dim];
    bytemuck::cast_slice_mut::<T, u8>(&mut data)
        .copy_from_slice(&mmap[offset..offset + n * dim * std::mem::size_of::<T>()]);
    Ok(Matrix::from_vec(data, dim).unwrap_or_else(|| empty(info.dim)))
}

/// Reads a whole vector file of whatever element type it holds.
///
/// A `.bin` file of one-byte elements cannot say whether they are u8 or i8: pass the type in
/// `opts.dtype` (see [`read_matrix_any_with`]).
pub fn read_matrix_any(path: &Path) -> Result<AnyMatrix> {
    read_matrix_any_with(path, ProbeOptions::default())
}

/// [`read_matrix_any`] with explicit hints.
pub fn read_matrix_any_with(path: &Path, opts: ProbeOptions) -> Result<AnyMatrix> {
    let info = probe_with(path, opts)?;
    let opts = ProbeOptions {
        format: Some(info.format),
        dtype: Some(info.dtype),
        fallback_dtype: None,
    };
    Ok(match info.dtype {
        DType::F32 => AnyMatrix::F32(read_matrix_with(path, opts)?),
        DType::U8 => AnyMatrix::U8(read_matrix_with(path, opts)?),
        DType::I8 => AnyMatrix::I8(read_matrix_with(path, opts)?),
    })
}

/// Reads rows `start..start + count` (clamped to the end of the file) into memory, for sharded
/// passes. `start` past the end is an [`DataErrorKind::InvalidInput`] error.
pub fn read_rows<T: Element>(path: &Path, start: u64, count: usize) -> Result<Matrix<T>> {
    let mut r = VectorReader::<T>::open(path)?;
    r.seek_row(start)?;
    Ok(r.read_block(count)?.unwrap_or_else(|| empty(r.info.dim)))
}

fn empty<T: Element>(dim: u64) -> Matrix<T> {
    Matrix::from_vec(Vec::new(), dim.max(1) as usize).unwrap_or_else(|| unreachable!("dim ≥ 1"))
}

/// Probes `path` for a typed reader: `T` is the fallback element type, and a file of another
/// type is a [`DataErrorKind::DtypeMismatch`].
fn probe_typed<T: Element>(path: &Path, opts: ProbeOptions) -> Result<VectorFileInfo> {
    let opts = ProbeOptions {
        fallback_dtype: Some(T::DTYPE),
        ..opts
    };
    let info = probe_with(path, opts)?;
    if info.dtype != T::DTYPE {
        return Err(DataError::new(
            path,
            DataErrorKind::DtypeMismatch {
                file: info.dtype,
                wanted: T::DTYPE,
            },
        ));
    }
    Ok(info)
}

/// Reads a vector file block by block with bounded memory, for every format.
///
/// vecs rows are checked to all have the file's dimension as they are read.
#[derive(Debug)]
pub struct VectorReader<T: Element> {
    info: VectorFileInfo,
    file: BufReader<File>,
    next_row: u64,
    _t: PhantomData<T>,
}

impl<T: Element> VectorReader<T> {
    /// Opens `path` (format detected as in [`super::probe`]; `T` breaks u8/i8 ties).
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, ProbeOptions::default())
    }

    /// Opens `path` with explicit hints.
    pub fn open_with(path: &Path, opts: ProbeOptions) -> Result<Self> {
        Self::from_info(probe_typed::<T>(path, opts)?)
    }

    fn from_info(info: VectorFileInfo) -> Result<Self> {
        let f = File::open(&info.path).map_err(|e| DataError::io(&info.path, e))?;
        let mut file = BufReader::with_capacity(1 << 20, f);
        file.seek(SeekFrom::Start(info.data_offset))
            .map_err(|e| DataError::io(&info.path, e))?;
        Ok(Self {
            info,
            file,
            next_row: 0,
            _t: PhantomData,
        })
    }

    /// What the file holds.
    pub fn info(&self) -> &VectorFileInfo {
        &self.info
    }

    /// Index of the next row [`VectorReader::read_block`] returns.
    pub fn position(&self) -> u64 {
        self.next_row
    }

    /// Moves to row `row` (`row == n` is the end; beyond is an error).
    pub fn seek_row(&mut self, row: u64) -> Result<()> {
        if row > self.info.n {
            return Err(self.fail(DataErrorKind::InvalidInput(format!(
                "row {row} is past the end ({} rows)",
                self.info.n
            ))));
        }
        let off = self.info.row_offset(row);
        self.file
            .seek(SeekFrom::Start(off))
            .map_err(|e| DataError::io(&self.info.path, e))?;
        self.next_row = row;
        Ok(())
    }

    /// The next up to `max_rows` rows, or `None` at the end of the file.
    pub fn read_block(&mut self, max_rows: usize) -> Result<Option<Matrix<T>>> {
        let left = self.info.n - self.next_row;
        let count = (max_rows as u64).min(left) as usize;
        if count == 0 {
            return Ok(None);
        }
        let dim = self.info.dim as usize;
        let mut data = vec![T::default(); count * dim];
        match self.info.format {
            Format::Bin | Format::Npy => {
                let bytes = bytemuck::cast_slice_mut::<T, u8>(&mut data);
                self.read_exact(bytes)?;
            }
            Format::Vecs => {
                for (i, row) in data.chunks_exact_mut(dim).enumerate() {
                    let mut h = [0u8; 4];
                    self.read_exact(&mut h)?;
                    let d = i32::from_le_bytes(h);
                    if d as i64 != dim as i64 {
                        return Err(self.fail(DataErrorKind::InconsistentDim {
                            row: self.next_row + i as u64,
                            expected: dim as u64,
                            found: d as i64,
                        }));
                    }
                    self.read_exact(bytemuck::cast_slice_mut::<T, u8>(row))?;
                }
            }
        }
        self.next_row += count as u64;
        Ok(Matrix::from_vec(data, dim))
    }

    /// An iterator over blocks of up to `rows_per_block` rows.
    pub fn blocks(self, rows_per_block: usize) -> Blocks<T> {
        Blocks {
            reader: self,
            rows: rows_per_block.max(1),
            done: false,
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                let actual = std::fs::metadata(&self.info.path).map_or(0, |m| m.len());
                self.fail(DataErrorKind::Truncated {
                    expected: self.info.row_offset(self.info.n),
                    actual,
                })
            } else {
                DataError::io(&self.info.path, e)
            }
        })
    }

    fn fail(&self, kind: DataErrorKind) -> DataError {
        DataError::new(&self.info.path, kind)
    }
}

/// Iterator returned by [`VectorReader::blocks`]; stops after the first error.
#[derive(Debug)]
pub struct Blocks<T: Element> {
    reader: VectorReader<T>,
    rows: usize,
    done: bool,
}

impl<T: Element> Iterator for Blocks<T> {
    type Item = Result<Matrix<T>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.reader.read_block(self.rows).transpose();
        self.done = !matches!(r, Some(Ok(_)));
        r
    }
}

//! Reading vector files: whole matrices (read into memory, or memory-mapped on request), row
//! ranges, and a streaming block reader for bounded-memory passes.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::kernels::{DType, Element};

use crate::data::error::{DataError, DataErrorKind, Result};
use crate::data::format::{probe_with, Format, ProbeOptions, VectorFileInfo};
use crate::data::matrix::{AnyMatrix, Matrix};

/// Reads a whole vector file of element type `T` into memory.
///
/// The rows are read (not memory-mapped) in one streaming pass, so a file that is truncated or
/// rewritten while trawl uses it gives a [`DataErrorKind::Truncated`] error (or stale data),
/// never a `SIGBUS` crash: this is the build path's reader. [`map_matrix`] maps bin and npy
/// files zero-copy instead, for callers that control their input files.
pub fn read_matrix<T: Element>(path: &Path) -> Result<Matrix<T>> {
    read_matrix_with(path, ProbeOptions::default())
}

/// [`read_matrix`] with explicit format / element-type hints.
pub fn read_matrix_with<T: Element>(path: &Path, opts: ProbeOptions) -> Result<Matrix<T>> {
    let info = probe_typed::<T>(path, opts)?;
    read_probed(info)
}

/// Reads all rows of a probed file (bin and npy in one read into an aligned buffer, vecs row by
/// row). A file shorter than the probe found is [`DataErrorKind::Truncated`].
fn read_probed<T: Element>(info: VectorFileInfo) -> Result<Matrix<T>> {
    let too_big = || {
        DataError::new(
            &info.path,
            DataErrorKind::BadHeader("file larger than the address space".into()),
        )
    };
    let n = usize::try_from(info.n).map_err(|_| too_big())?;
    let dim = info.dim;
    let mut r = VectorReader::<T>::from_info(info)?;
    r.read_block(n).map(|m| m.unwrap_or_else(|| empty(dim)))
}

/// Memory-maps a bin or npy file of element type `T` and borrows its rows zero-copy (copying
/// when they are not aligned for `T`); vecs files are read into memory.
///
/// Files larger than RAM work, but the file must not be truncated while the matrix lives: the
/// operating system then kills the process (`SIGBUS`) on the next access to a vanished page.
/// Use [`read_matrix`] for input files trawl does not control.
pub fn map_matrix<T: Element>(path: &Path, opts: ProbeOptions) -> Result<Matrix<T>> {
    let info = probe_typed::<T>(path, opts)?;
    if !info.is_contiguous() {
        return read_probed(info);
    }
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    // SAFETY: the mapping is read-only and private to this process; the caller guarantees
    // that the file is not modified or truncated while the matrix lives (documented above).
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
    let bytes = n
        .checked_mul(dim)
        .and_then(|x| x.checked_mul(std::mem::size_of::<T>()))
        .ok_or_else(too_big)?;
    let end = offset.checked_add(bytes).ok_or_else(too_big)?;
    if end > mmap.len() {
        // Truncated between the probe and the mapping.
        return Err(DataError::new(
            path,
            DataErrorKind::Truncated {
                expected: end as u64,
                actual: mmap.len() as u64,
            },
        ));
    };
    let mmap = Arc::new(mmap);
    if let Some(m) = Matrix::from_mmap(Arc::clone(&mmap), offset, n, dim) {
        return Ok(m);
    }
    // Misaligned for T: copy.
    let mut data = vec![T::default(); n * dim];
    bytemuck::cast_slice_mut::<T, u8>(&mut data).copy_from_slice(&mmap[offset..end]);
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
    /// Opens `path` (format detected as in [`crate::data::probe`]; `T` breaks u8/i8 ties).
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
        // On huge pages where the system allows (a whole-file read feeds the graph build,
        // whose random row reads then rarely miss the TLB).
        let mut data: Vec<T> = crate::mem::zeroed_huge(count * dim);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The build path reads its input: a file truncated after it was probed (between opening
    /// and reading) is a typed `Truncated` error, not a `SIGBUS` from a vanished mapped page.
    #[test]
    fn truncated_between_probe_and_read_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        for (name, head) in [
            ("t.fbin", [64u32.to_le_bytes(), 8u32.to_le_bytes()].concat()),
            ("t.fvecs", Vec::new()),
        ] {
            let path = dir.path().join(name);
            let mut bytes = head;
            for _ in 0..64 {
                if name.ends_with("vecs") {
                    bytes.extend_from_slice(&8i32.to_le_bytes());
                }
                bytes.extend(std::iter::repeat_n(0u8, 32));
            }
            std::fs::write(&path, &bytes).unwrap();
            let info = probe_typed::<f32>(&path, ProbeOptions::default()).unwrap();
            assert_eq!(info.n, 64);
            let file = File::options().write(true).open(&path).unwrap();
            file.set_len(bytes.len() as u64 / 2).unwrap();
            let err = read_probed::<f32>(info).unwrap_err();
            assert_eq!(err.path, path);
            assert!(
                matches!(err.kind, DataErrorKind::Truncated { .. }),
                "{name}: {err}"
            );
        }
    }
}

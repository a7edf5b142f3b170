//! Writing vector files: a streaming [`VectorWriter`] and [`write_matrix`].
//!
//! Every file is written under a temporary name beside the target (`NAME.tmp`), synced, and
//! renamed into place by `finish`, so a crash or an error never leaves a half-written file under
//! the final name. The layouts are documented in [`crate::data::format`] and [`crate::data::npy`].

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::kernels::{DType, Element};

use crate::data::error::{DataError, DataErrorKind, Result};
use crate::data::format::{Format, VectorFileInfo};
use crate::data::matrix::Matrix;
use crate::data::npy;

/// A file being written under a temporary name; renamed into place by [`AtomicFile::finish`],
/// removed when dropped unfinished.
#[derive(Debug)]
pub(crate) struct AtomicFile {
    path: PathBuf,
    tmp_path: PathBuf,
    out: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Creates `PATH.tmp`.
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp_path = path.with_file_name(tmp_name);
        let file = File::create(&tmp_path).map_err(|e| DataError::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp_path,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
        })
    }

    fn out(&mut self) -> Result<&mut BufWriter<File>> {
        let path = &self.path;
        self.out.as_mut().ok_or_else(|| {
            DataError::new(
                path,
                DataErrorKind::InvalidInput("writer already finished".into()),
            )
        })
    }

    /// Appends bytes.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let path = self.path.clone();
        self.out()?
            .write_all(bytes)
            .map_err(|e| DataError::io(&path, e))
    }

    /// Flushes, overwrites the start of the file with `header`, syncs and renames into place.
    pub(crate) fn finish(mut self, header: &[u8]) -> Result<()> {
        let path = self.path.clone();
        let err = |e: std::io::Error| DataError::io(&path, e);
        let out = self.out.take().ok_or_else(|| {
            DataError::new(
                &path,
                DataErrorKind::InvalidInput("writer already finished".into()),
            )
        })?;
        let mut file = out.into_inner().map_err(|e| err(e.into_error()))?;
        if !header.is_empty() {
            file.seek(SeekFrom::Start(0)).map_err(err)?;
            file.write_all(header).map_err(err)?;
        }
        file.sync_all().map_err(err)?;
        drop(file);
        std::fs::rename(&self.tmp_path, &self.path).map_err(err)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Persist the rename; some filesystems refuse to sync a directory, which is harmless.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp_path);
        }
    }
}

/// Streams rows into a bin, vecs or npy file; [`VectorWriter::finish`] writes the row count
/// into the header and renames the file into place. Dropping it unfinished leaves no file.
#[derive(Debug)]
pub struct VectorWriter {
    file: AtomicFile,
    format: Format,
    dtype: DType,
    dim: usize,
    n: u64,
}

impl VectorWriter {
    /// Starts a file of `format` holding `dtype` rows of `dim` elements at `path`.
    pub fn create(path: &Path, format: Format, dtype: DType, dim: usize) -> Result<Self> {
        if dim == 0 || dim > i32::MAX as usize {
            return Err(DataError::new(
                path,
                DataErrorKind::InvalidInput(format!("dimension {dim} is out of range")),
            ));
        }
        let mut file = AtomicFile::create(path)?;
        let placeholder = header(format, dtype, 0, dim);
        file.write(&placeholder)?;
        Ok(Self {
            file,
            format,
            dtype,
            dim,
            n: 0,
        })
    }

    /// Appends whole rows (`rows.len()` must be a multiple of the dimension).
    pub fn write_rows<T: Element>(&mut self, rows: &[T]) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(self.fail(DataErrorKind::DtypeMismatch {
                file: self.dtype,
                wanted: T::DTYPE,
            }));
        }
        if !rows.len().is_multiple_of(self.dim) {
            return Err(self.fail(DataErrorKind::InvalidInput(format!(
                "{} elements are not whole rows of dimension {}",
                rows.len(),
                self.dim
            ))));
        }
        let count = (rows.len() / self.dim) as u64;
        if self.format == Format::Bin && self.n + count > u32::MAX as u64 {
            return Err(self.fail(DataErrorKind::InvalidInput(
                "a bin file holds at most 2³²−1 rows".into(),
            )));
        }
        match self.format {
            Format::Bin | Format::Npy => self.file.write(bytemuck::cast_slice(rows))?,
            Format::Vecs => {
                let d = (self.dim as i32).to_le_bytes();
                for row in rows.chunks_exact(self.dim) {
                    self.file.write(&d)?;
                    self.file.write(bytemuck::cast_slice(row))?;
                }
            }
        }
        self.n += count;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows_written(&self) -> u64 {
        self.n
    }

    /// Writes the final header, syncs, and renames the file into place.
    pub fn finish(self) -> Result<VectorFileInfo> {
        let head = header(self.format, self.dtype, self.n, self.dim);
        let info = VectorFileInfo {
            path: self.file.path.clone(),
            format: self.format,
            dtype: self.dtype,
            n: self.n,
            dim: self.dim as u64,
            data_offset: head.len() as u64,
        };
        self.file.finish(&head)?;
        Ok(info)
    }

    fn fail(&self, kind: DataErrorKind) -> DataError {
        DataError::new(&self.file.path, kind)
    }
}

/// The header bytes of a file of `n` rows (empty for vecs).
fn header(format: Format, dtype: DType, n: u64, dim: usize) -> Vec<u8> {
    match format {
        Format::Bin => {
            let mut h = (n as u32).to_le_bytes().to_vec();
            h.extend_from_slice(&(dim as u32).to_le_bytes());
            h
        }
        Format::Vecs => Vec::new(),
        Format::Npy => npy::encode_header(dtype, n, dim as u64),
    }
}

/// Writes `m` to `path` in `format` (atomically, see the module docs).
pub fn write_matrix<T: Element>(
    path: &Path,
    format: Format,
    m: &Matrix<T>,
) -> Result<VectorFileInfo> {
    let mut w = VectorWriter::create(path, format, T::DTYPE, m.dim())?;
    for block in m.as_slice().chunks(m.dim() * 65536) {
        w.write_rows(block)?;
    }
    w.finish()
}

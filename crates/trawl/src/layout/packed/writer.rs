//! Streaming writer of page-packed files.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{PackedGeometry, PackedMeta, MAGIC, VERSION};
use crate::io::PAGE_BYTES;
use crate::kernels::Element;
use crate::layout::{FileError, FileErrorKind};

/// Writes a page-packed index one record at a time, in node order.
///
/// Memory: one record's pages and 4 bytes per data page. The file is written under a temporary
/// name and renamed into place by [`PackedWriter::finish`] after an `fsync`; dropping the writer
/// unfinished removes the temporary file.
#[derive(Debug)]
pub struct PackedWriter {
    path: PathBuf,
    tmp_path: PathBuf,
    out: Option<BufWriter<File>>,
    meta: PackedMeta,
    geo: PackedGeometry,
    /// The page (or, for spanning records, the pages) being filled.
    page: Vec<u8>,
    /// Records in `page`.
    in_page: usize,
    next_id: u64,
    crcs: Vec<u32>,
}

fn invalid(path: &Path, msg: String) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg))
}

impl PackedWriter {
    /// Starts writing `meta`'s index at `path`.
    pub fn create(path: &Path, meta: PackedMeta) -> Result<Self, FileError> {
        let geo = PackedGeometry::of(&meta)
            .ok_or_else(|| invalid(path, "index dimensions overflow".into()))?;
        if meta.n == 0 || meta.n > u64::from(u32::MAX) || u64::from(meta.medoid) >= meta.n {
            return Err(invalid(
                path,
                format!("n = {}, medoid = {}", meta.n, meta.medoid),
            ));
        }
        if meta.dim == 0 || meta.r == 0 || meta.r > u32::MAX as usize / 4 {
            return Err(invalid(path, format!("dim = {}, R = {}", meta.dim, meta.r)));
        }
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp_path = path.with_file_name(tmp_name);
        let file = File::create(&tmp_path).map_err(|e| FileError::new(path, e.into()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&[0u8; PAGE_BYTES])
            .map_err(|e| FileError::new(path, e.into()))?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp_path,
            out: Some(out),
            meta,
            page: vec![0u8; geo.pages_per_record * PAGE_BYTES],
            geo,
            in_page: 0,
            next_id: 0,
            crcs: Vec::with_capacity(usize::try_from(geo.data_pages).unwrap_or(0)),
        })
    }

    /// Appends the record of the next node: its vector and neighbour ids.
    pub fn push<T: Element>(&mut self, vector: &[T], neighbors: &[u32]) -> Result<(), FileError> {
        let id = self.next_id;
        if id >= self.meta.n {
            return Err(invalid(
                &self.path,
                format!("more than n = {} records", self.meta.n),
            ));
        }
        if T::DTYPE != self.meta.dtype || vector.len() != self.meta.dim {
            return Err(invalid(
                &self.path,
                format!(
                    "record {id}: {} × {} given, index holds {} × {}",
                    vector.len(),
                    T::DTYPE.name(),
                    self.meta.dim,
                    self.meta.dtype.name()
                ),
            ));
        }
        if neighbors.len() > self.meta.r {
            return Err(invalid(
                &self.path,
                format!(
                    "record {id}: degree {} > R = {}",
                    neighbors.len(),
                    self.meta.r
                ),
            ));
        }
        if let Some(bad) = neighbors.iter().find(|&&x| u64::from(x) >= self.meta.n) {
            return Err(invalid(
                &self.path,
                format!("record {id}: neighbour {bad} ≥ n"),
            ));
        }
        let at = if self.geo.per_page > 0 {
            self.in_page * self.geo.record_bytes
        } else {
            0
        };
        let rec = &mut self.page[at..at + self.geo.record_bytes];
        let (v, rest) = rec.split_at_mut(self.geo.vector_bytes);
        v.copy_from_slice(bytemuck::cast_slice(vector));
        rest[..4].copy_from_slice(&(neighbors.len() as u32).to_le_bytes());
        for (slot, &x) in rest[4..].chunks_exact_mut(4).zip(neighbors) {
            slot.copy_from_slice(&x.to_le_bytes());
        }
        rest[4 + 4 * neighbors.len()..].fill(0);
        self.next_id += 1;
        self.in_page += 1;
        let full = self.geo.per_page == 0 || self.in_page == self.geo.per_page;
        if full || self.next_id == self.meta.n {
            self.flush_page()?;
        }
        Ok(())
    }

    fn flush_page(&mut self) -> Result<(), FileError> {
        let used = if self.geo.per_page > 0 {
            self.in_page * self.geo.record_bytes
        } else {
            self.geo.record_bytes
        };
        self.page[used..].fill(0);
        for p in self.page.chunks_exact(PAGE_BYTES) {
            self.crcs.push(crc32fast::hash(p));
        }
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| invalid(&self.path, "finished".into()))?;
        out.write_all(&self.page)
            .map_err(|e| FileError::new(&self.path, e.into()))?;
        self.in_page = 0;
        Ok(())
    }

    /// Writes the checksum table and the header, syncs and renames the file into place.
    /// Returns the file size in bytes. Fails unless exactly `n` records were pushed.
    pub fn finish(mut self) -> Result<u64, FileError> {
        if self.next_id != self.meta.n {
            return Err(invalid(
                &self.path,
                format!(
                    "{} records written, header says {}",
                    self.next_id, self.meta.n
                ),
            ));
        }
        let path = self.path.clone();
        let err = |e: io::Error| FileError::new(&path, e.into());
        let mut out = self
            .out
            .take()
            .ok_or_else(|| invalid(&path, "finished".into()))?;
        let table: Vec<u8> = self.crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
        let table_crc = crc32fast::hash(&table);
        out.write_all(&table).map_err(err)?;
        let pad = (PAGE_BYTES - table.len() % PAGE_BYTES) % PAGE_BYTES;
        out.write_all(&vec![0u8; pad]).map_err(err)?;
        let mut file = out.into_inner().map_err(|e| err(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(err)?;
        file.write_all(&encode_header(&self.meta, &self.geo, table_crc))
            .map_err(err)?;
        file.sync_all().map_err(err)?;
        std::fs::rename(&self.tmp_path, &path).map_err(err)?;
        Ok(self.geo.total_pages() * PAGE_BYTES as u64)
    }
}

impl Drop for PackedWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp_path);
        }
    }
}

/// The header page of `meta`.
pub(super) fn encode_header(meta: &PackedMeta, geo: &PackedGeometry, table_crc: u32) -> Vec<u8> {
    let mut h = vec![0u8; PAGE_BYTES];
    let mut put = |at: usize, b: &[u8]| h[at..at + b.len()].copy_from_slice(b);
    put(0, &MAGIC);
    put(8, &VERSION.to_le_bytes());
    put(12, &(PAGE_BYTES as u32).to_le_bytes());
    put(16, &[meta.dtype.code(), meta.metric.code()]);
    put(20, &(meta.dim as u32).to_le_bytes());
    put(24, &meta.n.to_le_bytes());
    put(32, &(meta.r as u32).to_le_bytes());
    put(36, &meta.medoid.to_le_bytes());
    put(40, &(geo.record_bytes as u32).to_le_bytes());
    put(44, &(geo.per_page as u32).to_le_bytes());
    put(48, &(geo.pages_per_record as u32).to_le_bytes());
    put(52, &(meta.pq_bytes as u32).to_le_bytes());
    put(56, &geo.data_pages.to_le_bytes());
    put(64, &geo.checksum_pages.to_le_bytes());
    put(72, &table_crc.to_le_bytes());
    put(76, &meta.pq_crc.to_le_bytes());
    put(80, &meta.pq_codes_crc.to_le_bytes());
    let crc = crc32fast::hash(&h[..PAGE_BYTES - 4]);
    h[PAGE_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
    h
}

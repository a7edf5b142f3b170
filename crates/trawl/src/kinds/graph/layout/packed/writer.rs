//! Streaming writer of page-packed files.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::Element;
use crate::kinds::graph::layout::packed::{
    PackedGeometry, PackedMeta, EMPTY_SLOT, FLAG_PERMUTED, MAGIC, VERSION,
};

/// Writes a page-packed index one record at a time, in slot order: node order for an identity
/// file ([`PackedWriter::create`]), the order table's order for a permuted one
/// ([`PackedWriter::create_permuted`]).
///
/// Memory: one record's pages, 4 bytes per data page, and for a permuted file its order table.
/// The file is written under a temporary name and renamed into place by
/// [`PackedWriter::finish`] after an `fsync`; dropping the writer unfinished removes the
/// temporary file.
#[derive(Debug)]
pub struct PackedWriter {
    path: PathBuf,
    tmp_path: PathBuf,
    out: Option<BufWriter<File>>,
    meta: PackedMeta,
    geo: PackedGeometry,
    /// The page (or, for spanning records, the pages) being filled.
    page: Vec<u8>,
    /// Next slot to fill.
    slot: u64,
    /// Records written.
    records: u64,
    /// Node in each slot (permuted files).
    order: Option<Vec<u32>>,
    /// All-in-Storage: the medoid's PQ code, stored in the header.
    medoid_code: Vec<u8>,
    crcs: Vec<u32>,
}

fn invalid(path: &Path, msg: String) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg))
}

impl PackedWriter {
    /// Starts writing `meta`'s index at `path`, in identity order (`meta.permuted` must be
    /// false).
    pub fn create(path: &Path, meta: PackedMeta) -> Result<Self, FileError> {
        if meta.permuted {
            return Err(invalid(
                path,
                "a permuted file needs its order: use create_permuted".into(),
            ));
        }
        Self::start(path, meta, None)
    }

    /// Starts writing a permuted file: `order[s]` is the node in slot `s` ([`EMPTY_SLOT`] for
    /// none); every node `< n` must appear exactly once, and `order` must have one entry per
    /// slot (`data_pages × per_page`). Records are then pushed in slot order, empty slots
    /// skipped.
    pub fn create_permuted(
        path: &Path,
        meta: PackedMeta,
        order: Vec<u32>,
    ) -> Result<Self, FileError> {
        let meta = PackedMeta {
            permuted: true,
            ..meta
        };
        let geo = PackedGeometry::of(&meta).ok_or_else(|| {
            invalid(
                path,
                "a permuted file needs records that share pages".into(),
            )
        })?;
        if order.len() as u64 != geo.slots() {
            return Err(invalid(
                path,
                format!("{} order entries for {} slots", order.len(), geo.slots()),
            ));
        }
        let mut seen = vec![false; meta.n as usize];
        for &id in &order {
            if id == EMPTY_SLOT {
                continue;
            }
            match seen.get_mut(id as usize) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(invalid(
                        path,
                        format!("node {id} is out of range or in two slots"),
                    ))
                }
            }
        }
        if seen.iter().any(|&s| !s) {
            return Err(invalid(path, "some node has no slot".into()));
        }
        Self::start(path, meta, Some(order))
    }

    fn start(path: &Path, meta: PackedMeta, order: Option<Vec<u32>>) -> Result<Self, FileError> {
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
            slot: 0,
            records: 0,
            order,
            medoid_code: Vec::new(),
            crcs: Vec::with_capacity(usize::try_from(geo.data_pages).unwrap_or(0)),
        })
    }

    /// All-in-Storage files: the medoid's own PQ code (`c` bytes), written into the header.
    pub fn set_medoid_code(&mut self, code: &[u8]) -> Result<(), FileError> {
        let c = self.meta.neighbor_code_bytes;
        if code.len() != c || c == 0 || 104 + c > PAGE_BYTES - 4 {
            return Err(invalid(
                &self.path,
                format!("medoid code of {} bytes for {c} code bytes", code.len()),
            ));
        }
        self.medoid_code = code.to_vec();
        Ok(())
    }

    /// The node whose record the next [`PackedWriter::push`] must be (the next in slot order).
    pub fn next_node(&self) -> Option<u32> {
        match &self.order {
            None => (self.slot < self.meta.n).then_some(self.slot as u32),
            Some(order) => order[self.slot as usize..]
                .iter()
                .copied()
                .find(|&id| id != EMPTY_SLOT),
        }
    }

    /// Appends the record of the next node ([`PackedWriter::next_node`]): its vector and
    /// neighbour ids.
    pub fn push<T: Element>(&mut self, vector: &[T], neighbors: &[u32]) -> Result<(), FileError> {
        self.push_with_codes(vector, neighbors, &[])
    }

    /// Same as [`PackedWriter::push`] with the PQ codes of the neighbours, in list order
    /// (`neighbors.len() × c` bytes, `c` = the header's code bytes per neighbour; empty when
    /// `c` is 0).
    pub fn push_with_codes<T: Element>(
        &mut self,
        vector: &[T],
        neighbors: &[u32],
        codes: &[u8],
    ) -> Result<(), FileError> {
        let Some(id) = self.next_node() else {
            return Err(invalid(
                &self.path,
                format!("more than n = {} records", self.meta.n),
            ));
        };
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
        let c = self.meta.neighbor_code_bytes;
        if codes.len() != neighbors.len() * c {
            return Err(invalid(
                &self.path,
                format!(
                    "record {id}: {} code bytes for {} neighbours of {c} bytes",
                    codes.len(),
                    neighbors.len()
                ),
            ));
        }
        // Skip empty slots (permuted files), closing the pages they end.
        while self
            .order
            .as_ref()
            .is_some_and(|o| o[self.slot as usize] == EMPTY_SLOT)
        {
            self.advance()?;
        }
        let at = if self.geo.per_page > 0 {
            (self.slot % self.geo.per_page as u64) as usize * self.geo.record_bytes
        } else {
            0
        };
        let r = self.meta.r;
        let rec = &mut self.page[at..at + self.geo.record_bytes];
        let (v, rest) = rec.split_at_mut(self.geo.vector_bytes);
        v.copy_from_slice(bytemuck::cast_slice(vector));
        rest[..4].copy_from_slice(&(neighbors.len() as u32).to_le_bytes());
        let (ids, code_part) = rest[4..].split_at_mut(4 * r);
        for (slot, &x) in ids.chunks_exact_mut(4).zip(neighbors) {
            slot.copy_from_slice(&x.to_le_bytes());
        }
        ids[4 * neighbors.len()..].fill(0);
        code_part[..codes.len()].copy_from_slice(codes);
        code_part[codes.len()..].fill(0);
        self.records += 1;
        self.advance()
    }

    /// Moves to the next slot, writing the page out when the slot ends it.
    fn advance(&mut self) -> Result<(), FileError> {
        self.slot += 1;
        let ends_page =
            self.geo.per_page == 0 || self.slot.is_multiple_of(self.geo.per_page as u64);
        if ends_page {
            self.flush_page()?;
        }
        Ok(())
    }

    /// Writes the page buffer out and zeroes it (so empty slots and unused tails are zero).
    fn flush_page(&mut self) -> Result<(), FileError> {
        for p in self.page.chunks_exact(PAGE_BYTES) {
            self.crcs.push(crc32fast::hash(p));
        }
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| invalid(&self.path, "finished".into()))?;
        out.write_all(&self.page)
            .map_err(|e| FileError::new(&self.path, e.into()))?;
        self.page.fill(0);
        Ok(())
    }

    /// Writes the checksum table, the order table and the header, syncs and renames the file
    /// into place. Returns the file size in bytes. Fails unless exactly `n` records were
    /// pushed.
    pub fn finish(mut self) -> Result<u64, FileError> {
        if self.meta.neighbor_code_bytes > 0 && self.medoid_code.is_empty() {
            return Err(invalid(
                &self.path,
                "an All-in-Storage file needs the medoid's code (set_medoid_code)".into(),
            ));
        }
        if self.records != self.meta.n {
            return Err(invalid(
                &self.path,
                format!(
                    "{} records written, header says {}",
                    self.records, self.meta.n
                ),
            ));
        }
        // The last, partly filled page, then any trailing empty pages.
        if self.geo.per_page > 0 && !self.slot.is_multiple_of(self.geo.per_page as u64) {
            self.flush_page()?;
            self.slot = self.slot.next_multiple_of(self.geo.per_page as u64);
        }
        while (self.crcs.len() as u64) < self.geo.data_pages {
            self.flush_page()?;
        }
        let path = self.path.clone();
        let err = |e: io::Error| FileError::new(&path, e.into());
        let mut out = self
            .out
            .take()
            .ok_or_else(|| invalid(&path, "finished".into()))?;
        let pad = |len: usize| vec![0u8; (PAGE_BYTES - len % PAGE_BYTES) % PAGE_BYTES];
        let table: Vec<u8> = self.crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
        let table_crc = crc32fast::hash(&table);
        out.write_all(&table).map_err(err)?;
        out.write_all(&pad(table.len())).map_err(err)?;
        let order_crc = match &self.order {
            Some(order) => {
                let bytes: Vec<u8> = order.iter().flat_map(|c| c.to_le_bytes()).collect();
                out.write_all(&bytes).map_err(err)?;
                out.write_all(&pad(bytes.len())).map_err(err)?;
                crc32fast::hash(&bytes)
            }
            None => 0,
        };
        let mut file = out.into_inner().map_err(|e| err(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(err)?;
        file.write_all(&encode_header(
            &self.meta,
            &self.geo,
            table_crc,
            order_crc,
            &self.medoid_code,
        ))
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
pub(super) fn encode_header(
    meta: &PackedMeta,
    geo: &PackedGeometry,
    table_crc: u32,
    order_crc: u32,
    medoid_code: &[u8],
) -> Vec<u8> {
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
    let flags = if meta.permuted { FLAG_PERMUTED } else { 0 };
    put(84, &flags.to_le_bytes());
    put(88, &(meta.neighbor_code_bytes as u32).to_le_bytes());
    put(92, &geo.order_pages.to_le_bytes());
    put(100, &order_crc.to_le_bytes());
    put(104, medoid_code);
    let crc = crc32fast::hash(&h[..PAGE_BYTES - 4]);
    h[PAGE_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
    h
}

//! The second pass of writing a vector file: the vectors coded into pages, then the metadata
//! and the header.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{VectorPlan, MAGIC, PAGE_HEADER, RAW_FLAG, VERSION};
use crate::dir::file::seal_header_page;
use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kinds::graph::layout::decoupled::graph::build_data_page;
use crate::kinds::graph::layout::decoupled::huffman::{self, CodeTable};

/// Second pass: codes the vectors into pages.
#[derive(Debug)]
pub struct CompressedVectorWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    plan: VectorPlan,
    tables: Vec<CodeTable>,
    next: u64,
    // Current page.
    ends: Vec<u16>,
    data: Vec<u8>,
    first: u32,
    page: Vec<u8>,
    scratch: Vec<u8>,
    coded: Vec<u8>,
    // Metadata.
    chunk_first_page: Vec<u32>,
    page_first_id: Vec<u32>,
    payload_bytes: u64,
    raw_vectors: u64,
}

impl CompressedVectorWriter {
    /// Starts the file at `path` for `plan`.
    pub fn create(path: &Path, plan: VectorPlan) -> Result<Self, FileError> {
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = path.with_file_name(tmp_name);
        let file = File::create(&tmp).map_err(|e| FileError::new(path, e.into()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&[0u8; PAGE_BYTES])
            .map_err(|e| FileError::new(path, e.into()))?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
            out: Some(out),
            plan,
            tables: Vec::new(),
            next: 0,
            ends: Vec::new(),
            data: Vec::new(),
            first: 0,
            page: vec![0u8; PAGE_BYTES],
            scratch: Vec::new(),
            coded: Vec::new(),
            chunk_first_page: Vec::new(),
            page_first_id: Vec::new(),
            payload_bytes: 0,
            raw_vectors: 0,
        })
    }

    fn invalid(&self, m: String) -> FileError {
        FileError::new(&self.path, FileErrorKind::Invalid(m))
    }

    /// Codes the next vector (ids in order, the same vectors the planner saw).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FileError> {
        let geo = self.plan.geo;
        let v = geo.vector_bytes();
        if bytes.len() != v || self.next >= geo.n {
            return Err(self.invalid(format!("vector {} of {} bytes", self.next, bytes.len())));
        }
        let id = self.next;
        if id.is_multiple_of(geo.segment_vectors) {
            let seg = (id / geo.segment_vectors) as usize;
            self.tables = self.plan.lengths[seg]
                .iter()
                .map(CodeTable::from_lengths)
                .collect::<Result<_, _>>()
                .map_err(|e| self.invalid(e.to_string()))?;
        }
        if id.is_multiple_of(geo.chunk_vectors) {
            // A chunk starts on a fresh page.
            if !self.ends.is_empty() {
                self.flush_page()?;
            }
            self.chunk_first_page.push(self.page_first_id.len() as u32);
        }
        let chunk = (id / geo.chunk_vectors) as usize;
        self.scratch.clear();
        match &self.plan.bases[chunk] {
            Some(base) => self
                .scratch
                .extend(bytes.iter().zip(base).map(|(a, b)| a ^ b)),
            None => self.scratch.extend_from_slice(bytes),
        }
        self.coded.clear();
        let coded_ok = huffman::encode_split(&self.tables, &self.scratch, &mut self.coded).is_ok()
            && self.coded.len() < v;
        let raw = !coded_ok;
        let len = if raw { v } else { self.coded.len() };
        let used = PAGE_HEADER + 2 * self.ends.len() + self.data.len();
        if !self.ends.is_empty() && used + 2 + len > PAGE_BYTES {
            self.flush_page()?;
        }
        if self.ends.is_empty() {
            self.first = id as u32;
        }
        if raw {
            self.data.extend_from_slice(bytes);
            self.raw_vectors += 1;
        } else {
            self.data.extend_from_slice(&self.coded);
        }
        self.ends
            .push(self.data.len() as u16 | if raw { RAW_FLAG } else { 0 });
        self.next += 1;
        Ok(())
    }

    fn flush_page(&mut self) -> Result<(), FileError> {
        self.payload_bytes +=
            build_data_page(&mut self.page, self.first, &self.ends, &self.data) as u64;
        self.page_first_id.push(self.first);
        self.ends.clear();
        self.data.clear();
        let path = self.path.clone();
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| FileError::new(&path, FileErrorKind::Invalid("finished".into())))?;
        out.write_all(&self.page)
            .map_err(|e| FileError::new(&path, e.into()))
    }

    /// Writes the last page, the metadata and the header; syncs and renames into place.
    pub fn finish(mut self) -> Result<VectorWriteReport, FileError> {
        let geo = self.plan.geo;
        if self.next != geo.n {
            return Err(self.invalid(format!("{} of {} vectors written", self.next, geo.n)));
        }
        if !self.ends.is_empty() {
            self.flush_page()?;
        }
        let v = geo.vector_bytes();
        let d = self.page_first_id.len() as u64;
        let mut meta = Vec::new();
        for seg in &self.plan.lengths {
            for lane in seg {
                meta.extend_from_slice(lane);
            }
        }
        for (c, base) in self.plan.bases.iter().enumerate() {
            let first = self.chunk_first_page[c];
            let end = self
                .chunk_first_page
                .get(c + 1)
                .copied()
                .unwrap_or(d as u32);
            meta.extend_from_slice(&first.to_le_bytes());
            meta.extend_from_slice(&(end - first).to_le_bytes());
            meta.extend_from_slice(&u32::from(base.is_some()).to_le_bytes());
            match base {
                Some(b) => meta.extend_from_slice(b),
                None => meta.extend(std::iter::repeat_n(0u8, v)),
            }
        }
        for f in &self.page_first_id {
            meta.extend_from_slice(&f.to_le_bytes());
        }
        let meta_len = meta.len() as u64;
        let meta_crc = crc32fast::hash(&meta);
        let m = meta_len.div_ceil(PAGE_BYTES as u64);
        meta.resize(m as usize * PAGE_BYTES, 0);
        let mut h = vec![0u8; PAGE_BYTES];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(PAGE_BYTES as u32).to_le_bytes());
        h[16] = geo.dtype.code();
        h[20..24].copy_from_slice(&(geo.dim as u32).to_le_bytes());
        h[24..32].copy_from_slice(&geo.n.to_le_bytes());
        h[32..40].copy_from_slice(&geo.segment_vectors.to_le_bytes());
        h[40..48].copy_from_slice(&geo.chunk_vectors.to_le_bytes());
        h[48..52].copy_from_slice(&(geo.lanes() as u32).to_le_bytes());
        h[52..60].copy_from_slice(&geo.segments().to_le_bytes());
        h[60..68].copy_from_slice(&geo.chunks().to_le_bytes());
        h[68..76].copy_from_slice(&d.to_le_bytes());
        h[76..84].copy_from_slice(&meta_len.to_le_bytes());
        h[84..92].copy_from_slice(&m.to_le_bytes());
        h[92..96].copy_from_slice(&meta_crc.to_le_bytes());
        h[96..104].copy_from_slice(&self.payload_bytes.to_le_bytes());
        h[104..112].copy_from_slice(&self.raw_vectors.to_le_bytes());
        h[112..120].copy_from_slice(&(self.plan.xor_chunks() as u64).to_le_bytes());
        seal_header_page(&mut h);
        let path = self.path.clone();
        let io = |e: std::io::Error| FileError::new(&path, e.into());
        let out = self
            .out
            .take()
            .ok_or_else(|| FileError::new(&path, FileErrorKind::Invalid("finished".into())))?;
        let mut file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.write_all(&meta).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&h).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&self.tmp, &self.path).map_err(io)?;
        Ok(VectorWriteReport {
            file_bytes: (1 + d + m) * PAGE_BYTES as u64,
            data_pages: d,
            metadata_bytes: meta_len,
            payload_bytes: self.payload_bytes,
            raw_vectors: self.raw_vectors,
            xor_chunks: self.plan.xor_chunks() as u64,
            chunks: geo.chunks(),
            segments: geo.segments(),
        })
    }
}

impl Drop for CompressedVectorWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// What [`CompressedVectorWriter::finish`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct VectorWriteReport {
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Data pages.
    pub data_pages: u64,
    /// Metadata bytes (code lengths, chunk records, per-page first ids).
    pub metadata_bytes: u64,
    /// Coded bytes of all vectors with their offset tables.
    pub payload_bytes: u64,
    /// Vectors stored raw (coding would not shrink them).
    pub raw_vectors: u64,
    /// Chunks XOR-coded against a base vector.
    pub xor_chunks: u64,
    /// Chunks.
    pub chunks: u64,
    /// Segments.
    pub segments: u64,
}

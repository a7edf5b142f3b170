//! The decoupled vector file `vectors.trawl`: the full-precision vectors, losslessly compressed,
//! sorted by id, in segments → chunks → 4 KiB pages (DecoupleVS §3.3).
//!
//! - A **segment** holds `segment_vectors` consecutive ids and has its own Huffman code tables,
//!   one per byte lane ([`crate::kinds::graph::layout::decoupled::huffman`]).
//! - A **chunk** holds `chunk_vectors` consecutive ids (segments are whole chunks) on
//!   consecutive pages. Per chunk, an entropy test decides whether its vectors are XOR-ed with
//!   a *base vector* (the most frequent byte at each byte position of the chunk) before coding.
//!   The test counts every byte of the chunk (the counts per position are kept anyway to find
//!   the base, so the full test costs no more than a sample), and it judges the *segment's*
//!   entropy, not the chunk's: the segment's tables code all its chunks, and raw and XOR-ed
//!   chunks under one table can cost more than either alone (on GloVe the per-chunk choice
//!   mixed them and coded at 0.879 of the raw size where one mode for all reaches 0.85).
//! - A **page** holds consecutive vectors of one chunk, each coded on its own.
//!
//! The chunk size follows the memory-overhead ratio β (chunk metadata over vector bytes, §3.3):
//! per chunk the metadata is 12 bytes, a base vector of `V` bytes and 4 bytes per page, so
//! `β = (V + 12) / C + α / 1024` for a chunk of `C` uncompressed bytes compressed to `α·C`;
//! with `α = 1` (the worst case) `C = (V + 12) / (β − 1/1024)`.
//!
//! All integers little-endian, in pages of 4096 bytes:
//!
//! | pages | content |
//! |---|---|
//! | 0 | header |
//! | 1 ..= D | data pages |
//! | D+1 ..= D+M | metadata (loaded at open): per segment `lanes × 256` code lengths; per chunk first data page `u32`, page count `u32`, flags `u32` (bit 0: XOR with the base), base vector (`V` bytes, zero without XOR); per data page its first id `u32`; zero-padded |
//!
//! **Header page:** 0 magic `TRAWLVEC`; 8 version (1); 12 page size; 16 element type code;
//! 17..20 reserved; 20 `dim`; 24 `n`; 32 segment vectors; 40 chunk vectors; 48 lanes (`u32`);
//! 52 segments; 60 chunks; 68 `D`; 76 metadata bytes; 84 `M`; 92 CRC-32 of the metadata bytes;
//! 96 coded payload bytes (offset tables and codes of all vectors); 104 vectors stored raw;
//! 112 chunks with XOR; 120 .. 4092 zero; 4092 CRC-32 of bytes 0..4092.
//!
//! **Data page:** 0 CRC-32 of bytes 4..4096; 4 first id `f`; 8 count `c` (`u16`); 10 reserved;
//! 12 end offsets of the `c` coded vectors (`u16` each, relative to the end of this table; bit
//! 15 set = the vector is stored raw, its `V` bytes verbatim, when coding would not shrink
//! it); then the coded vectors. Every vector starts on a byte boundary. A coded vector is the
//! bytes of its *raw lanes* verbatim (lanes whose code lengths are all zero: coding them would
//! save < 1%, as for the three mantissa bytes of a float), then the Huffman code of the other
//! bytes ([`huffman::encode_split`]). Decoding then costs one table lookup per coded byte only:
//! a quarter of a float vector's bytes.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::dir::file::{read_header_page, seal_header_page};
use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::DType;
use crate::kinds::graph::layout::decoupled::graph::{
    build_data_page, check_data_page, le16, le32, le64, page_crc_ok,
};
use crate::kinds::graph::layout::decoupled::huffman::{self, CodeTable};

/// Magic of decoupled vector files.
pub const MAGIC: [u8; 8] = *b"TRAWLVEC";
/// Current format version (2: lanes whose code would save < 1% are stored raw, ahead of the
/// code; version 1 files, which coded every lane, are refused: rewrite the layout).
pub const VERSION: u32 = 2;
/// File name inside an index directory.
pub const FILE_NAME: &str = "vectors.trawl";
/// Bytes of a data page's fixed header.
pub const PAGE_HEADER: usize = 12;
const RAW_FLAG: u16 = 1 << 15;

/// The order of the vectors in the vector file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum VectorOrder {
    /// By id: a vector's position is its id (no key in the graph file).
    Id,
    /// Graph locality: PageShuffle's order over the graph, with pages sized to the vectors
    /// a page holds, so that nodes near each other in the graph (the re-rank candidates of
    /// a query) share vector pages; each node's position rides in the graph file beside its
    /// list (a keyed graph file), so no id → position map is held in memory.
    #[default]
    Graph,
}

impl std::str::FromStr for VectorOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "id" => Ok(Self::Id),
            "graph" => Ok(Self::Graph),
            other => Err(format!("unknown vector order {other:?} (id, graph)")),
        }
    }
}

/// How the vectors are grouped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorParams {
    /// Chunk-metadata memory over vector bytes (β, §3.3); must exceed 1/1024 (the per-page
    /// first ids alone cost that much).
    pub beta: f64,
    /// Uncompressed bytes per segment (each segment has its own code tables).
    pub segment_bytes: u64,
    /// The order of the vectors (used by the layout writer; a vector file stores whatever
    /// order it is given).
    pub order: VectorOrder,
}

impl Default for VectorParams {
    fn default() -> Self {
        Self {
            beta: 0.001,
            segment_bytes: 512 << 20,
            order: VectorOrder::default(),
        }
    }
}

/// The grouping of `n` vectors of `vector_bytes` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorGeometry {
    /// Element type.
    pub dtype: DType,
    /// Dimension.
    pub dim: usize,
    /// Vectors.
    pub n: u64,
    /// Ids per segment (a multiple of `chunk_vectors`).
    pub segment_vectors: u64,
    /// Ids per chunk.
    pub chunk_vectors: u64,
}

impl VectorGeometry {
    /// Sizes chunks and segments from `params`.
    pub fn new(dtype: DType, dim: usize, n: u64, params: &VectorParams) -> Result<Self, String> {
        let v = (dim * dtype.size_bytes()) as f64;
        let floor = 1.0 / 1024.0;
        if !(params.beta > floor && params.beta < 1.0) {
            return Err(format!(
                "beta {} must be above 1/1024 ≈ 0.000977 and below 1",
                params.beta
            ));
        }
        let chunk_bytes = (v + 12.0) / (params.beta - floor);
        let chunk_vectors = ((chunk_bytes / v).floor() as u64).clamp(1, n.max(1));
        let segment_vectors =
            ((params.segment_bytes as f64 / v) as u64 / chunk_vectors).max(1) * chunk_vectors;
        Ok(Self {
            dtype,
            dim,
            n,
            segment_vectors,
            chunk_vectors,
        })
    }
    /// Bytes of one vector.
    pub fn vector_bytes(&self) -> usize {
        self.dim * self.dtype.size_bytes()
    }
    /// Byte lanes (one code table each): the element size.
    pub fn lanes(&self) -> usize {
        self.dtype.size_bytes()
    }
    /// Chunks.
    pub fn chunks(&self) -> u64 {
        self.n.div_ceil(self.chunk_vectors)
    }
    /// Segments.
    pub fn segments(&self) -> u64 {
        self.n.div_ceil(self.segment_vectors)
    }
    fn check(&self) -> Result<(), String> {
        let v = self.vector_bytes();
        if v == 0 || PAGE_HEADER + 2 + v > PAGE_BYTES {
            return Err(format!(
                "vectors of {v} bytes do not fit a 4 KiB page with its header (at most {})",
                PAGE_BYTES - PAGE_HEADER - 2
            ));
        }
        if self.n == 0 || self.n > u64::from(u32::MAX) {
            return Err(format!("{} vectors", self.n));
        }
        if self.chunk_vectors == 0 || self.segment_vectors == 0 {
            return Err(format!(
                "{} vectors per chunk, {} per segment",
                self.chunk_vectors, self.segment_vectors
            ));
        }
        if !self.segment_vectors.is_multiple_of(self.chunk_vectors) {
            return Err("segments must be whole chunks".into());
        }
        Ok(())
    }
}

/// What the first pass over the vectors decided: each chunk's base vector (or none) and each
/// segment's code lengths.
#[derive(Debug, Clone)]
pub struct VectorPlan {
    geo: VectorGeometry,
    /// Per chunk: the base vector when the chunk is XOR-coded.
    bases: Vec<Option<Vec<u8>>>,
    /// Per segment, per lane: code lengths.
    lengths: Vec<Vec<[u8; 256]>>,
}

impl VectorPlan {
    /// Chunks that XOR with a base.
    pub fn xor_chunks(&self) -> usize {
        self.bases.iter().filter(|b| b.is_some()).count()
    }
}

/// First pass: counts bytes per position in each chunk, picks the base vectors, and at the end
/// of each segment runs the entropy test and builds the segment's code lengths.
#[derive(Debug)]
pub struct VectorPlanner {
    geo: VectorGeometry,
    pos_counts: Vec<u32>,
    in_chunk: u64,
    next: u64,
    /// The segment's chunks so far: base vector and per-lane byte counts without and with
    /// the XOR.
    pending: Vec<PendingChunk>,
    plan: VectorPlan,
}

type LaneCounts = Vec<[u64; 256]>;

#[derive(Debug)]
struct PendingChunk {
    base: Vec<u8>,
    raw: LaneCounts,
    xor: LaneCounts,
}

impl VectorPlanner {
    /// A planner for `geo`.
    pub fn new(geo: VectorGeometry) -> Result<Self, String> {
        geo.check()?;
        let v = geo.vector_bytes();
        Ok(Self {
            geo,
            pos_counts: vec![0; v * 256],
            in_chunk: 0,
            next: 0,
            pending: Vec::new(),
            plan: VectorPlan {
                geo,
                bases: Vec::new(),
                lengths: Vec::new(),
            },
        })
    }

    /// Counts the next vector (ids in order).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() != self.geo.vector_bytes() || self.next >= self.geo.n {
            return Err(format!(
                "vector {} of {} bytes (expected {} bytes, {} vectors)",
                self.next,
                bytes.len(),
                self.geo.vector_bytes(),
                self.geo.n
            ));
        }
        for (p, &b) in bytes.iter().enumerate() {
            self.pos_counts[p * 256 + b as usize] += 1;
        }
        self.in_chunk += 1;
        self.next += 1;
        if self.in_chunk == self.geo.chunk_vectors || self.next == self.geo.n {
            self.close_chunk();
        }
        if self.next.is_multiple_of(self.geo.segment_vectors) || self.next == self.geo.n {
            self.close_segment();
        }
        Ok(())
    }

    /// Chooses each chunk of the segment raw or XOR-coded so that the segment's code tables,
    /// built over all its chunks, are as small as can be: start from the better of all-raw and
    /// all-XOR, then flip single chunks while that lowers the segment's per-lane entropy. (A
    /// per-chunk choice alone can mix raw and XOR-ed bytes under one table, whose entropy is
    /// then above either's.)
    fn close_segment(&mut self) {
        let lanes = self.geo.lanes();
        let chunks = std::mem::take(&mut self.pending);
        let total = |modes: &[bool]| -> LaneCounts {
            let mut t = vec![[0u64; 256]; lanes];
            for (c, &x) in chunks.iter().zip(modes) {
                let src = if x { &c.xor } else { &c.raw };
                for (tl, sl) in t.iter_mut().zip(src) {
                    for s in 0..256 {
                        tl[s] += sl[s];
                    }
                }
            }
            t
        };
        let h = |t: &LaneCounts| t.iter().map(huffman::entropy_bits).sum::<f64>();
        let all_raw = vec![false; chunks.len()];
        let all_xor = vec![true; chunks.len()];
        let (mut modes, mut best) = {
            let (hr, hx) = (h(&total(&all_raw)), h(&total(&all_xor)));
            if hx < hr {
                (all_xor, hx)
            } else {
                (all_raw, hr)
            }
        };
        for _ in 0..2 {
            let mut changed = false;
            for i in 0..modes.len() {
                modes[i] = !modes[i];
                let e = h(&total(&modes));
                if e < best {
                    best = e;
                    changed = true;
                } else {
                    modes[i] = !modes[i];
                }
            }
            if !changed {
                break;
            }
        }
        let counts = total(&modes);
        self.plan
            .lengths
            .push(counts.iter().map(huffman::lane_lengths).collect());
        for (c, x) in chunks.into_iter().zip(modes) {
            self.plan.bases.push(x.then_some(c.base));
        }
    }

    fn close_chunk(&mut self) {
        let v = self.geo.vector_bytes();
        let lanes = self.geo.lanes();
        let mut base = vec![0u8; v];
        let mut raw = vec![[0u64; 256]; lanes];
        let mut xor = vec![[0u64; 256]; lanes];
        for (p, b) in base.iter_mut().enumerate() {
            let counts = &self.pos_counts[p * 256..(p + 1) * 256];
            let mut best = 0usize;
            for s in 1..256 {
                if counts[s] > counts[best] {
                    best = s;
                }
            }
            *b = best as u8;
            for s in 0..256 {
                let c = u64::from(counts[s]);
                raw[p % lanes][s] += c;
                xor[p % lanes][s ^ best] += c;
            }
        }
        self.pending.push(PendingChunk { base, raw, xor });
        self.pos_counts.fill(0);
        self.in_chunk = 0;
    }

    /// The plan, once every vector is counted.
    pub fn finish(self) -> Result<VectorPlan, String> {
        if self.next != self.geo.n {
            return Err(format!("{} of {} vectors counted", self.next, self.geo.n));
        }
        Ok(self.plan)
    }
}

/// Second pass: codes the vectors into pages.
#[derive(Debug)]
pub struct VectorWriter {
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

impl VectorWriter {
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

impl Drop for VectorWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// What [`VectorWriter::finish`] wrote.
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

/// An opened, checked vector file: code tables, chunk metadata and the first id of every page
/// in memory.
#[derive(Debug, Clone)]
pub struct VectorFile {
    path: PathBuf,
    geo: VectorGeometry,
    data_pages: u64,
    meta_pages: u64,
    meta_bytes: u64,
    report: VectorWriteReport,
    /// Per segment, per lane.
    tables: Vec<Vec<CodeTable>>,
    /// Per chunk: first data page, page count, XOR.
    chunks: Vec<(u32, u32, bool)>,
    /// Per chunk, `V` bytes (zero without XOR).
    bases: Vec<u8>,
    page_first_id: Vec<u32>,
}

impl VectorFile {
    /// Opens `path`, checking the header, the length, the metadata's checksum and its
    /// consistency (tables, chunk page ranges, increasing page ids).
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(path, kind);
        let invalid = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let hp = read_header_page(path, MAGIC, "trawl decoupled vectors", VERSION..=VERSION)?;
        let (mut file, actual, h) = (hp.file, hp.len, hp.bytes);
        let dtype = DType::from_code(h[16]).ok_or_else(|| invalid("element type".into()))?;
        let geo = VectorGeometry {
            dtype,
            dim: le32(&h, 20) as usize,
            n: le64(&h, 24),
            segment_vectors: le64(&h, 32),
            chunk_vectors: le64(&h, 40),
        };
        geo.check().map_err(invalid)?;
        if le32(&h, 12) as usize != PAGE_BYTES
            || le32(&h, 48) as usize != geo.lanes()
            || le64(&h, 52) != geo.segments()
            || le64(&h, 60) != geo.chunks()
        {
            return Err(invalid("header fields disagree".into()));
        }
        let data_pages = le64(&h, 68);
        let meta_bytes = le64(&h, 76);
        let meta_pages = le64(&h, 84);
        let v = geo.vector_bytes() as u64;
        // n < 2³², segments and chunks ≤ n, v ≤ 4 KiB and data pages ≤ n (checked first):
        // no term overflows.
        let meta_ok = data_pages != 0 && data_pages <= geo.n && {
            let want_meta = geo.segments() * geo.lanes() as u64 * 256
                + geo.chunks() * (12 + v)
                + data_pages * 4;
            meta_bytes == want_meta && meta_pages == meta_bytes.div_ceil(PAGE_BYTES as u64)
        };
        if !meta_ok {
            return Err(invalid(format!(
                "{data_pages} data pages, {meta_bytes} metadata bytes"
            )));
        }
        let expected = (1 + data_pages + meta_pages) * PAGE_BYTES as u64;
        if actual != expected {
            return Err(fail(FileErrorKind::SizeMismatch { expected, actual }));
        }
        file.seek(SeekFrom::Start((1 + data_pages) * PAGE_BYTES as u64))
            .map_err(|e| fail(e.into()))?;
        let mut meta = vec![0u8; (meta_pages as usize) * PAGE_BYTES];
        file.read_exact(&mut meta).map_err(|e| fail(e.into()))?;
        let used = meta_bytes as usize;
        if crc32fast::hash(&meta[..used]) != le32(&h, 92) || meta[used..].iter().any(|&b| b != 0) {
            return Err(fail(FileErrorKind::Checksum { what: "metadata" }));
        }
        let (tables, chunks, bases, page_first_id) =
            super::vector_meta::parse(path, &geo, &meta, data_pages)?;
        let report = VectorWriteReport {
            file_bytes: expected,
            data_pages,
            metadata_bytes: meta_bytes,
            payload_bytes: le64(&h, 96),
            raw_vectors: le64(&h, 104),
            xor_chunks: le64(&h, 112),
            chunks: geo.chunks(),
            segments: geo.segments(),
        };
        Ok(Self {
            path: path.to_path_buf(),
            geo,
            data_pages,
            meta_pages,
            meta_bytes,
            report,
            tables,
            chunks,
            bases,
            page_first_id,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The grouping.
    pub fn geometry(&self) -> &VectorGeometry {
        &self.geo
    }
    /// What the writer recorded (sizes, raw vectors, XOR chunks).
    pub fn report(&self) -> &VectorWriteReport {
        &self.report
    }
    /// Pages of the whole file.
    pub fn total_pages(&self) -> u64 {
        1 + self.data_pages + self.meta_pages
    }
    /// Data pages.
    pub fn data_pages(&self) -> u64 {
        self.data_pages
    }
    /// Bytes of the file.
    pub fn file_bytes(&self) -> u64 {
        self.total_pages() * PAGE_BYTES as u64
    }
    /// Bytes held in memory: decoding tables, chunk records, base vectors, page first ids.
    pub fn heap_bytes(&self) -> usize {
        let table = 256 + 512 + (1usize << huffman::MAX_CODE_LEN) * 2;
        self.tables.len() * self.geo.lanes() * table
            + self.chunks.len() * 12
            + self.bases.len()
            + self.page_first_id.len() * 4
    }
    /// Metadata bytes as stored.
    pub fn metadata_bytes(&self) -> u64 {
        self.meta_bytes
    }

    /// Vectors on data page `page` (a file page number).
    pub fn vectors_on_page(&self, page: u64) -> u64 {
        let i = page.saturating_sub(1) as usize;
        let next = self
            .page_first_id
            .get(i + 1)
            .map_or(self.geo.n, |&f| u64::from(f));
        next.saturating_sub(self.page_first_id.get(i).map_or(next, |&f| u64::from(f)))
    }

    /// File page holding vector `id` (`id < n`).
    #[inline]
    pub fn locate(&self, id: u32) -> u64 {
        let c = (u64::from(id) / self.geo.chunk_vectors) as usize;
        let (first, count, _) = self.chunks[c.min(self.chunks.len() - 1)];
        let pages = &self.page_first_id[first as usize..(first + count) as usize];
        let i = pages.partition_point(|&f| f <= id).max(1) - 1;
        1 + u64::from(first) + i as u64
    }

    /// Decodes vector `id` from `page` (the bytes of file page `page_no`, which
    /// [`VectorFile::locate`] gave) into `out` (`V` bytes), checking the page's CRC first when
    /// `verify`.
    pub fn decode(
        &self,
        id: u32,
        page_no: u64,
        page: &[u8],
        verify: bool,
        out: &mut [u8],
    ) -> Result<(), String> {
        let v = self.geo.vector_bytes();
        if out.len() != v {
            return Err(format!("output of {} bytes for vectors of {v}", out.len()));
        }
        let (first, count) =
            check_data_page(page, page_no, id, &self.page_first_id, self.geo.n, verify)?;
        let k = (id - first) as usize;
        let data = PAGE_HEADER + 2 * count;
        if data > PAGE_BYTES {
            return Err(format!("page {page_no}: count {count} too large"));
        }
        let start = if k == 0 {
            0
        } else {
            usize::from(le16(page, PAGE_HEADER + 2 * (k - 1)) & !RAW_FLAG)
        };
        let end_raw = le16(page, PAGE_HEADER + 2 * k);
        let end = usize::from(end_raw & !RAW_FLAG);
        if start > end || data + end > PAGE_BYTES {
            return Err(format!(
                "page {page_no}: vector {id}'s bytes overrun the page"
            ));
        }
        let bytes = &page[data + start..data + end];
        if end_raw & RAW_FLAG != 0 {
            if bytes.len() != v {
                return Err(format!(
                    "page {page_no}: raw vector {id} of {} bytes",
                    bytes.len()
                ));
            }
            out.copy_from_slice(bytes);
            return Ok(());
        }
        let seg = (u64::from(id) / self.geo.segment_vectors) as usize;
        let chunk = (u64::from(id) / self.geo.chunk_vectors) as usize;
        huffman::decode_split(&self.tables[seg], bytes, out)
            .map_err(|e| format!("page {page_no}: vector {id}: {e}"))?;
        if self.chunks[chunk].2 {
            let base = &self.bases[chunk * v..(chunk + 1) * v];
            for (o, b) in out.iter_mut().zip(base) {
                *o ^= b;
            }
        }
        Ok(())
    }

    /// Reads every data page, checks its CRC and decodes every vector on it, calling
    /// `f(id, bytes)` in id order.
    pub fn scan(&self, mut f: impl FnMut(u32, &[u8])) -> Result<(), FileError> {
        let mut file = File::open(&self.path).map_err(|e| FileError::new(&self.path, e.into()))?;
        file.seek(SeekFrom::Start(PAGE_BYTES as u64))
            .map_err(|e| FileError::new(&self.path, e.into()))?;
        let mut page = vec![0u8; PAGE_BYTES];
        let mut out = vec![0u8; self.geo.vector_bytes()];
        let mut next = 0u64;
        for p in 1..=self.data_pages {
            file.read_exact(&mut page)
                .map_err(|e| FileError::new(&self.path, e.into()))?;
            if !page_crc_ok(&page) {
                return Err(FileError::new(
                    &self.path,
                    FileErrorKind::PageChecksum { page: p },
                ));
            }
            let first = u64::from(le32(&page, 4));
            let count = u64::from(le16(&page, 8));
            if first != next || count == 0 {
                return Err(FileError::new(
                    &self.path,
                    FileErrorKind::Invalid(format!("page {p} starts at {first}, expected {next}")),
                ));
            }
            for id in first..first + count {
                self.decode(id as u32, p, &page, false, &mut out)
                    .map_err(|m| FileError::new(&self.path, FileErrorKind::Invalid(m)))?;
                f(id as u32, &out);
            }
            next = first + count;
        }
        if next != self.geo.n {
            return Err(FileError::new(
                &self.path,
                FileErrorKind::Invalid(format!("{next} vectors for {}", self.geo.n)),
            ));
        }
        Ok(())
    }
}

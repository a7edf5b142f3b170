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
//! bytes ([`huffman::encode_split`](super::huffman::encode_split)). Decoding then costs one
//! table lookup per coded byte only: a quarter of a float vector's bytes.
//!
//! The code: the format and the grouping here, the first pass ([`VectorPlanner`]) in `plan`,
//! the second ([`CompressedVectorWriter`]) in `write`, the reader ([`CompressedVectorFile`]) in `read`.

mod plan;
mod read;
mod write;

use crate::io::PAGE_BYTES;
use crate::kernels::DType;

pub use plan::{VectorPlan, VectorPlanner};
pub use read::CompressedVectorFile;
pub use write::{CompressedVectorWriter, VectorWriteReport};

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
pub struct CompressedGeometry {
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

impl CompressedGeometry {
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

//! The page-node layout (PageANN): the graph's nodes are 4 KiB pages, not vectors. Similar
//! vectors are grouped into one page node (a centre and its nearest vectors within a few hops
//! of the built Vamana graph, [`build::group`]); the page holds their full-precision vectors
//! and *one* neighbour list for all of them — the pages their vector edges reach, merged
//! ([`build::page_edges`]) — instead of one list per vector. A search reads a page, gets the
//! exact distances of every vector on it, and scores each page its list names by the nearest
//! PQ code among that page's vectors (the codes are kept in memory in page order, so a page's
//! codes are contiguous); a page is read at most once per query.
//!
//! File `pages.trawl`, all integers little-endian, in pages of [`PAGE_BYTES`] = 4096 bytes:
//!
//! | pages | content |
//! |---|---|
//! | 0 | header (table below) |
//! | 1 ..= P | page nodes: page node `p` is file page `1 + p` |
//! | P+1 ..= P+C | checksum table: CRC-32 of every page node, `u32` each, zero-padded |
//! | P+C+1 ..= P+C+O | order table: the vector in each slot (slot `s` = position `s mod capacity` of page node `⌊s / capacity⌋`), `u32` each, [`NO_VECTOR`] for an empty slot, zero-padded |
//!
//! **Header page:**
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `TRAWLPGN` |
//! | 8 | 4 | format version (2; version 1, without bytes 100..112, is read too) |
//! | 12 | 4 | page size in bytes (4096) |
//! | 16 | 1 | element type code ([`DType::code`]) |
//! | 17 | 1 | metric code ([`Metric::code`]) |
//! | 18 | 2 | reserved, zero |
//! | 20 | 4 | `dim` |
//! | 24 | 8 | `n`, vector ids (each `< n`) |
//! | 32 | 8 | `P`, page nodes |
//! | 40 | 4 | capacity: most vectors a page node holds |
//! | 44 | 4 | medoid (the entry vector), `< n`, on a page |
//! | 48 | 4 | largest neighbour list of a page node |
//! | 52 | 4 | payload CRC of the PQ quantiser file (0 = none) |
//! | 56 | 8 | `C`, checksum pages |
//! | 64 | 4 | CRC-32 of the checksum table's entries (`4·P` bytes) |
//! | 68 | 4 | payload CRC of the PQ codes file (0 = none) |
//! | 72 | 8 | `O`, order-table pages |
//! | 80 | 4 | CRC-32 of the order table's entries (`4·P·capacity` bytes) |
//! | 84 | 4 | PQ bytes per vector of the index's quantiser |
//! | 88 | 8 | vectors placed (slots holding a vector) |
//! | 96 | 4 | `R`, the largest degree of the vector graph the pages were made from |
//! | 100 | … | reserved, zero, up to byte 4092 |
//! | 4092 | 4 | CRC-32 of bytes 0..4092 |
//!
//! **Page node** `p`:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 2 | `m`, vectors on the page (1 ..= capacity) |
//! | 2 | 2 | `d`, entries of the neighbour list |
//! | 4 | 2 | `e`, bytes of the coded neighbour list |
//! | 6 | 2 | reserved, zero |
//! | 8 | `4m` | the members' vector ids, centre first (the order table's slots `p·capacity ..`) |
//! | `8 + 4m` | `m·V` | their vectors (`V = dim·size(dtype)`), in member order |
//! | `8 + 4m + m·V` | `e` | the neighbour list: `d` page nodes, sorted, Elias–Fano coded below `P` ([`crate::kinds::graph::layout::decoupled::elias_fano`]) |
//!
//! The rest of the page is zero. The compressed list is the page's *topology*: one list of
//! page ids, 10–14 bits each, where a page of packed records spends `4 + 4R` bytes per vector,
//! so a page holds more vectors (GloVe 50 × f32: 15 against 8) and still names every page its
//! vectors' edges reach. A vector keeps its id, so the id map, the filters and the entry index
//! are the other layouts' own; opening the layout reorders the PQ codes into slot order (no
//! second copy) and keeps the page of each vector (4 bytes per vector) for entry points.

pub mod build;
pub mod place;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use reader::{PageFile, PageView};
pub use writer::write_file;

use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Metric};
use crate::kinds::graph::layout::decoupled::elias_fano;

/// Magic of page-node files.
pub const MAGIC: [u8; 8] = *b"TRAWLPGN";
/// Current format version.
pub const VERSION: u32 = 2;
/// File name of the page-node layout inside an index directory.
pub const FILE_NAME: &str = "pages.trawl";
/// Page of a vector that is on no page.
pub const NO_PAGE: u32 = u32::MAX;
/// Order-table entry of an empty slot.
pub const NO_VECTOR: u32 = u32::MAX;
/// Bytes before a page node's member ids.
pub const PAGE_HEAD: usize = 8;

/// The default cap on a page's neighbour list for a vector graph of degree `graph_r`:
/// `4 · graph_r` entries. Scoring the pages a list names is a search's CPU hot spot (each
/// costs one PQ code per member), and the list of a full page reaches many more pages than
/// a search needs: GloVe-400K's pages of 15 vectors reach 553 pages on average (R = 64).
/// Measured there with the flash strategy on 2 threads (AMD EPYC, O_DIRECT, the 1,000-query
/// sample of `bench/pagegraph.py`): lists capped at 128 / 256 / 384 / 553 (uncapped) pages
/// gave ~3,100 / 3,150–3,400 / 2,800 / 2,300 QPS at recall@10 = 0.90 and ~1,650 /
/// 2,400–2,500 / 2,300 / 1,900 at 0.95 (the shorter lists need longer searches for high
/// recall). Lists shorter than the cap (gen-1M's pages of 6 reach 137 pages, MiniLM's of 2
/// fewer) are not changed. A capped list keeps the pages its members are nearest to
/// ([`build::page_edges`]).
pub fn default_degree_cap(graph_r: usize) -> usize {
    4 * graph_r.max(1)
}

/// The default list size on the page-node layout, in pages of up to `capacity` vectors:
/// `max(DEFAULT_L, k) / min(capacity, 4)` (at least 1). A list of pages finds more than a
/// list of as many vectors, but less than `capacity` times more: measured at recall@10 on
/// the default, 25 pages of 15 GloVe-400K vectors reach 0.995, 25 pages of 6 gen-1M vectors
/// 0.95, and MiniLM-200K's pages of 2 vectors need 40–50 for 0.95
/// (`bench/results/pagegraph-*.md`).
pub fn default_list(k: usize, capacity: usize) -> usize {
    (crate::kinds::options::DEFAULT_L.max(k) / capacity.clamp(1, 4)).max(1)
}

/// The shape of a page-node file: everything its header says but checksums and table sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagesMeta {
    /// Element type of the vectors.
    pub dtype: DType,
    /// Metric.
    pub metric: Metric,
    /// Dimension.
    pub dim: usize,
    /// Vector ids (each below it).
    pub n: u64,
    /// Page nodes.
    pub pages: u64,
    /// Most vectors on one page node.
    pub capacity: usize,
    /// The entry vector.
    pub medoid: u32,
    /// Largest neighbour list of a page node.
    pub max_degree: usize,
    /// Payload CRC of the PQ quantiser file (0 = none).
    pub pq_crc: u32,
    /// Payload CRC of the PQ codes file (0 = none).
    pub pq_codes_crc: u32,
    /// Vectors placed on a page.
    pub placed: u64,
    /// PQ bytes per vector of the index's quantiser.
    pub pq_bytes: usize,
    /// Largest degree of the vector graph the pages were made from.
    pub graph_r: usize,
    /// Hops around a centre the members were chosen from (0: unknown, a version-1 file).
    pub hops: usize,
    /// Neighbour-list entries per vector the capacity was chosen for (0: unknown).
    pub min_degree: usize,
    /// Most entries asked of a page's list (0: as many as fit).
    pub degree_cap: usize,
}

impl PagesMeta {
    /// The parameters the file was written with, as a merge writes it again: the capacity it
    /// has, the others as asked (0 where the file does not say).
    pub fn params(&self) -> build::PageParams {
        build::PageParams {
            capacity: self.capacity,
            min_degree: self.min_degree,
            hops: self.hops,
            max_degree: self.degree_cap,
        }
    }

    /// Bytes of one vector.
    pub fn vector_bytes(&self) -> usize {
        self.dim * self.dtype.size_bytes()
    }

    /// The shape as the graph kind's other layouts describe it (`R` the source graph's).
    pub fn packed_meta(&self) -> crate::kinds::graph::layout::packed::PackedMeta {
        crate::kinds::graph::layout::packed::PackedMeta {
            dtype: self.dtype,
            metric: self.metric,
            dim: self.dim,
            n: self.n,
            r: self.graph_r,
            medoid: self.medoid,
            pq_bytes: self.pq_bytes,
            pq_crc: self.pq_crc,
            pq_codes_crc: self.pq_codes_crc,
            neighbor_code_bytes: 0,
            permuted: false,
        }
    }
}

/// Bytes a page node of `members` vectors of `vector_bytes` each leaves for its coded
/// neighbour list (`None` when they do not fit).
pub fn room_bytes(members: usize, vector_bytes: usize) -> Option<usize> {
    let used = PAGE_HEAD.checked_add(members.checked_mul(vector_bytes.checked_add(4)?)?)?;
    PAGE_BYTES.checked_sub(used)
}

/// The longest neighbour list of page ids below `universe` whose code fits in `room` bytes
/// (at most `u16::MAX` entries).
pub fn entries_that_fit(room: usize, universe: u32) -> usize {
    // Bits per entry only fall as a list grows, so the count is found by bisection.
    let (mut lo, mut hi) = (0usize, (room * 8).min(u16::MAX as usize));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if elias_fano::encoded_bytes(mid, universe) <= room {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Most vectors of `vector_bytes` a page node can hold (0 when not even one fits beside an
/// empty list).
pub fn max_capacity(vector_bytes: usize) -> usize {
    (PAGE_BYTES - PAGE_HEAD) / (vector_bytes + 4)
}

/// The capacity a build of `n` vectors picks: the most vectors per page whose neighbour list
/// still holds `min_degree` entries per vector (PageANN's rule: the page degree over the
/// capacity at least the degree a vector needs), and at least 1 when one vector fits.
pub fn auto_capacity(vector_bytes: usize, n: u64, min_degree: usize) -> usize {
    let most = max_capacity(vector_bytes);
    (1..=most)
        .rev()
        .find(|&c| {
            let pages = n.div_ceil(c as u64).min(u64::from(u32::MAX)) as u32;
            room_bytes(c, vector_bytes)
                .is_some_and(|r| entries_that_fit(r, pages) >= c * min_degree)
        })
        .unwrap_or(most.min(1))
}

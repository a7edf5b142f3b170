//! The page-packed disk layout (DiskANN's): each node's full-precision vector and neighbour list
//! in one record, records packed into 4 KiB pages so one page read brings a node's vector and
//! its edges.
//!
//! File `packed.trawl`, all integers little-endian, in pages of [`PAGE_BYTES`] = 4096 bytes:
//!
//! | pages | content |
//! |---|---|
//! | 0 | header (table below) |
//! | 1 ..= D | data pages: the records, in slot order (slot `s` = page `1 + ⌊s / per_page⌋`, position `s mod per_page`) |
//! | D+1 ..= D+C | checksum table: CRC-32 of every data page, `u32` each, zero-padded |
//! | D+C+1 ..= D+C+O | order table (permuted files only): the node id in each slot, `u32` each, `0xFFFF_FFFF` for an empty slot, zero-padded |
//!
//! A file is in *identity* order (node `i` in slot `i`, as the graph build writes it) or
//! *permuted* (PageShuffle: graph neighbours packed onto shared pages; the order table maps
//! slots to nodes, and the reader inverts it into an id → slot map held in memory). Records may
//! also carry the PQ codes of their neighbours (*All-in-Storage*, AiSAQ): then no PQ codes need
//! to be in memory at search time.
//!
//! **Header page:**
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `TRAWLPAK` |
//! | 8 | 4 | format version (2; version 1 files are read: their fields from 84 on are zero) |
//! | 12 | 4 | page size in bytes (4096) |
//! | 16 | 1 | element type code ([`DType::code`]: 0 f32, 1 u8, 2 i8) |
//! | 17 | 1 | metric code ([`Metric::code`]: 0 L2, 1 inner product, 2 cosine) |
//! | 18 | 2 | reserved, zero |
//! | 20 | 4 | `dim` |
//! | 24 | 8 | `n`, number of records (nodes) |
//! | 32 | 4 | `R`: neighbour slots per record (the graph's largest degree) |
//! | 36 | 4 | medoid (entry point), `< n` |
//! | 40 | 4 | record bytes `= dim·size(dtype) + 4 + 4R` |
//! | 44 | 4 | records per page (`⌊4096 / record⌋`; 0 when a record spans pages) |
//! | 48 | 4 | pages per record (1 when records share pages) |
//! | 52 | 4 | PQ bytes per vector of the index's quantiser (0 = none) |
//! | 56 | 8 | `D`, data pages |
//! | 64 | 8 | `C`, checksum pages |
//! | 72 | 4 | CRC-32 of the whole checksum table (`4·D` bytes) |
//! | 76 | 4 | payload CRC of the PQ quantiser file (binds the PQ files to this index; 0 = none) |
//! | 80 | 4 | payload CRC of the PQ codes file (0 = none) |
//! | 84 | 4 | flags: bit 0 = permuted (an order table follows the checksum table) |
//! | 88 | 4 | `c`: PQ code bytes per neighbour stored in each record (0 = none; All-in-Storage) |
//! | 92 | 8 | `O`, order-table pages (0 unless permuted) |
//! | 100 | 4 | CRC-32 of the order table's entries (`4 · D · per_page` bytes; 0 unless permuted) |
//! | 104 | `c` | All-in-Storage only: the medoid's own PQ code (it is nobody's neighbour on the way in) |
//! | 104 + `c` | … | reserved, zero, up to byte 4092 |
//! | 4092 | 4 | CRC-32 of bytes 0..4092 |
//!
//! **Record** of the node in slot `s` (never straddles a page: when records share pages it sits
//! on page `1 + ⌊s / per_page⌋` at byte `(s mod per_page) · record`; when a record spans pages
//! it starts on page `1 + s · pages_per_record` at byte 0 and the tail of its last page is zero;
//! spanning records are always in identity order):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | `dim·size(dtype)` | the vector, element type of the header |
//! | `v` | 4 | degree `d ≤ R` |
//! | `v + 4` | `4R` | neighbour ids, the first `d` valid (`< n`), the rest zero |
//! | `v + 4 + 4R` | `c·R` | All-in-Storage only: the PQ code of each neighbour, in list order, the first `d` valid, the rest zero |
//!
//! Unused bytes at the end of a data page are zero. The writer ([`PackedWriter`]) streams: it
//! holds one page and the checksum table (4 bytes per page) in memory, so an index larger than
//! RAM is written from a memory-mapped input. [`PackedFile::open`] checks the header's checksum,
//! every field, the file length and the checksum table's own CRC; page checksums are checked on
//! read ([`PackedFile::check_page`]) and in full by [`PackedFile::verify_all`].

mod reader;
mod writer;

pub use reader::{PackedFile, RecordView};
pub use writer::PackedWriter;

use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Metric};

/// Magic of page-packed index files.
pub const MAGIC: [u8; 8] = *b"TRAWLPAK";
/// Current format version.
pub const VERSION: u32 = 2;
/// Header flag: the file is in permuted order.
pub const FLAG_PERMUTED: u32 = 1;
/// Order-table entry of an empty slot.
pub const EMPTY_SLOT: u32 = u32::MAX;
/// File name of the page-packed index inside an index directory.
pub const FILE_NAME: &str = "packed.trawl";

/// The shape of a page-packed index: everything the header says except checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedMeta {
    /// Element type of the stored vectors.
    pub dtype: DType,
    /// Distance the graph was built for.
    pub metric: Metric,
    /// Vector dimension.
    pub dim: usize,
    /// Number of nodes.
    pub n: u64,
    /// Neighbour slots per record.
    pub r: usize,
    /// Entry point.
    pub medoid: u32,
    /// PQ bytes per vector of the quantiser stored beside (0 = none).
    pub pq_bytes: usize,
    /// Payload CRC of the PQ quantiser file (0 = none).
    pub pq_crc: u32,
    /// Payload CRC of the PQ codes file (0 = none).
    pub pq_codes_crc: u32,
    /// PQ code bytes per neighbour stored in each record (0 = none; All-in-Storage: equals
    /// `pq_bytes`).
    pub neighbor_code_bytes: usize,
    /// Records are in a permuted slot order (PageShuffle) with an order table.
    pub permuted: bool,
}

/// Where records sit, derived from a [`PackedMeta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedGeometry {
    /// Bytes of the vector part of a record.
    pub vector_bytes: usize,
    /// Bytes of a record.
    pub record_bytes: usize,
    /// Records per page, 0 when a record spans pages.
    pub per_page: usize,
    /// Pages per record (1 when records share pages).
    pub pages_per_record: usize,
    /// Data pages.
    pub data_pages: u64,
    /// Checksum-table pages.
    pub checksum_pages: u64,
    /// Order-table pages (0 unless permuted).
    pub order_pages: u64,
}

impl PackedGeometry {
    /// The geometry of `meta`; `None` when sizes overflow (including the file's total bytes).
    pub fn of(meta: &PackedMeta) -> Option<Self> {
        let vector_bytes = meta.dim.checked_mul(meta.dtype.size_bytes())?;
        let record_bytes = vector_bytes
            .checked_add(4)?
            .checked_add(meta.r.checked_mul(4)?)?
            .checked_add(meta.r.checked_mul(meta.neighbor_code_bytes)?)?;
        let (per_page, pages_per_record) = if record_bytes <= PAGE_BYTES {
            (PAGE_BYTES / record_bytes, 1)
        } else {
            (0, record_bytes.div_ceil(PAGE_BYTES))
        };
        let data_pages = if per_page > 0 {
            meta.n.div_ceil(per_page as u64)
        } else {
            meta.n.checked_mul(pages_per_record as u64)?
        };
        let checksum_pages = data_pages.checked_mul(4)?.div_ceil(PAGE_BYTES as u64);
        let order_pages = if meta.permuted {
            if per_page == 0 {
                return None;
            }
            data_pages
                .checked_mul(per_page as u64)?
                .checked_mul(4)?
                .div_ceil(PAGE_BYTES as u64)
        } else {
            0
        };
        // The whole file's byte size must be representable (every later page arithmetic
        // relies on it).
        1u64.checked_add(data_pages)?
            .checked_add(checksum_pages)?
            .checked_add(order_pages)?
            .checked_mul(PAGE_BYTES as u64)?;
        Some(Self {
            vector_bytes,
            record_bytes,
            per_page,
            pages_per_record,
            data_pages,
            checksum_pages,
            order_pages,
        })
    }

    /// Total pages of the file (header, data, checksums, order table).
    pub fn total_pages(&self) -> u64 {
        1 + self.data_pages + self.checksum_pages + self.order_pages
    }

    /// Slots of the data pages (`data_pages × per_page`; `n` when records span pages).
    pub fn slots(&self) -> u64 {
        if self.per_page > 0 {
            self.data_pages * self.per_page as u64
        } else {
            self.data_pages / self.pages_per_record as u64
        }
    }

    /// First page of slot `slot` and the byte offset of its record in it.
    #[inline]
    pub fn locate_slot(&self, slot: u64) -> (u64, usize) {
        if self.per_page > 0 {
            let per = self.per_page as u64;
            (1 + slot / per, (slot % per) as usize * self.record_bytes)
        } else {
            (1 + slot * self.pages_per_record as u64, 0)
        }
    }

    /// First page of node `id`'s record and the byte offset of the record in it, in identity
    /// order (a permuted file locates through [`PackedFile::locate`]).
    #[inline]
    pub fn locate(&self, id: u32) -> (u64, usize) {
        self.locate_slot(u64::from(id))
    }

    /// Pages a read of one record needs.
    #[inline]
    pub fn read_pages(&self) -> usize {
        self.pages_per_record
    }
}

#[cfg(test)]
mod tests;

//! The decoupled graph file `graph.trawl`: every node's neighbour list, sorted and Elias-Fano
//! coded ([`crate::kinds::graph::layout::decoupled::elias_fano`]), packed in node order into 4 KiB pages; an in-memory sparse
//! index (the first node of each page) locates a node's page.
//!
//! All integers little-endian, in pages of 4096 bytes:
//!
//! | pages | content |
//! |---|---|
//! | 0 | header (table below) |
//! | 1 ..= D | data pages |
//! | D+1 ..= D+S | sparse index: the first node id of each data page, `u32` each, zero-padded |
//!
//! **Header page:** 0 magic `TRAWLDGR`; 8 version (2; version 1 files, never keyed, are
//! read too); 12 page size (4096); 16 element type code; 17 metric code; 18 reserved; 20
//! `dim`; 24 `n`; 32 `R` (largest degree); 36 medoid; 40 PQ bytes per vector; 44 payload CRC of
//! the PQ quantiser file; 48 payload CRC of the PQ codes file; 52 `D`; 60 `S`; 68 CRC-32 of the
//! sparse index entries (`4D` bytes); 72 edges (sum of degrees, `u64`); 80 flags (`u32`; bit 0:
//! *keyed*); 84 .. 4092 zero; 4092 CRC-32 of bytes 0..4092.
//!
//! **Data page:** 0 CRC-32 of bytes 4..4096; 4 first node id `f`; 8 count `c` (`u16`); 10
//! reserved; 12 degrees of nodes `f .. f+c`, `u16` each; then their entries one after the
//! other — in a keyed file a `u32` *vector key* (where the node's vector is in the vector file:
//! its position when the vectors are stored in graph-locality order) then the list, else the
//! list alone, each list [`elias_fano::encoded_bytes`]`(degree, n)` bytes; zero to the end of
//! the page. Pages hold consecutive nodes and every node is on exactly one page. A node's
//! vector key travels with its list (into the list cache too), so a search learns where an
//! expanded node's vector is without an id → position map in memory.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::dir::file::{read_header_page, seal_header_page};
use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Metric};
use crate::kinds::graph::layout::decoupled::elias_fano;
use crate::kinds::graph::layout::packed::PackedMeta;

/// Magic of decoupled graph files.
pub const MAGIC: [u8; 8] = *b"TRAWLDGR";
/// Current format version.
pub const VERSION: u32 = 2;
/// Header flag: every list entry starts with its node's `u32` vector key.
const FLAG_KEYED: u32 = 1;
/// Bytes of a vector key.
pub const KEY_BYTES: usize = 4;
/// File name inside an index directory.
pub const FILE_NAME: &str = "graph.trawl";
/// Bytes of a data page's fixed header.
pub const PAGE_HEADER: usize = 12;

pub(crate) fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub(crate) fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | (u64::from(le32(b, at + 4)) << 32)
}

/// Checks a data page's own CRC (bytes 0..4 over 4..4096).
pub(crate) fn page_crc_ok(page: &[u8]) -> bool {
    page.len() >= PAGE_BYTES && crc32fast::hash(&page[4..PAGE_BYTES]) == le32(page, 0)
}

/// Seals a data page: writes the CRC of bytes 4..4096 into bytes 0..4.
pub(crate) fn seal_page(page: &mut [u8]) {
    let crc = crc32fast::hash(&page[4..PAGE_BYTES]);
    page[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Lays out a data page of the graph or vector file: first id, item count, one `u16` per
/// item (degrees, or end offsets), then `data`, zero to the end, CRC sealed. Returns the bytes
/// used after the fixed header.
pub(crate) fn build_data_page(page: &mut [u8], first: u32, table: &[u16], data: &[u8]) -> usize {
    page.fill(0);
    page[4..8].copy_from_slice(&first.to_le_bytes());
    page[8..10].copy_from_slice(&(table.len() as u16).to_le_bytes());
    let mut at = PAGE_HEADER;
    for t in table {
        page[at..at + 2].copy_from_slice(&t.to_le_bytes());
        at += 2;
    }
    page[at..at + data.len()].copy_from_slice(data);
    seal_page(page);
    at - PAGE_HEADER + data.len()
}

/// Checks data page `page_no` (file page number) read for item `id`: its CRC when `verify`,
/// its first id against `first_ids` (the in-memory index of every data page's first id), its
/// count against the next page's first id (`n`, the item count, after the last page) and that
/// it holds `id`. Returns the page's first id and item count. Shared by the graph and
/// vector files, whose data pages start alike (CRC, first id, count).
pub(crate) fn check_data_page(
    page: &[u8],
    page_no: u64,
    id: u32,
    first_ids: &[u32],
    n: u64,
    verify: bool,
) -> Result<(u32, usize), String> {
    if page.len() < PAGE_BYTES {
        return Err("short page".into());
    }
    if verify && !page_crc_ok(page) {
        return Err(format!("checksum mismatch in page {page_no}"));
    }
    let first = le32(page, 4);
    let count = usize::from(le16(page, 8));
    let i = page_no.wrapping_sub(1) as usize;
    let expected = first_ids.get(i).copied();
    if expected != Some(first) || id < first || (id - first) as usize >= count {
        return Err(format!(
            "page {page_no} holds items {first}..{} (count {count}), not {id}",
            u64::from(first) + count as u64
        ));
    }
    // The page holds exactly the items up to the next page's first (or `n` after the last
    // page): a count claiming more would hand out ids of the next page, or ids ≥ n.
    let end = first_ids.get(i + 1).map_or(n, |&f| u64::from(f));
    if u64::from(first) + count as u64 != end {
        return Err(format!(
            "page {page_no} claims {count} items from {first}, the index has {} there",
            end.saturating_sub(u64::from(first))
        ));
    }
    Ok((first, count))
}

/// Largest degree whose list always fits a page with its header and degree field.
pub fn max_degree_for(n: u64) -> usize {
    let universe = u32::try_from(n).unwrap_or(u32::MAX);
    let mut r = 1usize;
    while PAGE_HEADER + 2 + elias_fano::max_bits(r + 1, universe).div_ceil(8) <= PAGE_BYTES {
        r += 1;
    }
    r
}

/// Streams neighbour lists, in node order, into a graph file.
#[derive(Debug)]
pub struct GraphWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    meta: PackedMeta,
    universe: u32,
    page: Vec<u8>,
    degrees: Vec<u16>,
    lists: Vec<u8>,
    first: u32,
    next_id: u64,
    sparse: Vec<u32>,
    edges: u64,
    sorted: Vec<u32>,
    max_degree: usize,
    keyed: bool,
}

impl GraphWriter {
    /// Starts a graph file for the index shape `meta` (its `r` bounds the degrees).
    pub fn create(path: &Path, meta: PackedMeta) -> Result<Self, FileError> {
        let fail = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        if meta.n == 0 || meta.n > u64::from(u32::MAX) {
            return Err(fail(format!("{} nodes: need 1 to 2^32 − 1", meta.n)));
        }
        let max_degree = max_degree_for(meta.n);
        if meta.r > max_degree || meta.r > usize::from(u16::MAX) {
            return Err(fail(format!(
                "degree bound {} is above {max_degree}, the largest whose list fits a page",
                meta.r
            )));
        }
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
            meta,
            universe: meta.n as u32,
            page: vec![0u8; PAGE_BYTES],
            degrees: Vec::new(),
            lists: Vec::new(),
            first: 0,
            next_id: 0,
            sparse: Vec::new(),
            edges: 0,
            sorted: Vec::new(),
            max_degree: meta.r,
            keyed: false,
        })
    }

    /// Starts a *keyed* graph file: every list is pushed with its node's vector key
    /// ([`GraphWriter::push_keyed`]).
    pub fn create_keyed(path: &Path, meta: PackedMeta) -> Result<Self, FileError> {
        let mut w = Self::create(path, meta)?;
        let universe = u32::try_from(meta.n).unwrap_or(u32::MAX);
        if PAGE_HEADER + 2 + KEY_BYTES + elias_fano::max_bits(meta.r, universe).div_ceil(8)
            > PAGE_BYTES
        {
            return Err(FileError::new(
                path,
                FileErrorKind::Invalid(format!(
                    "degree bound {} leaves no room for a vector key in a page",
                    meta.r
                )),
            ));
        }
        w.keyed = true;
        Ok(w)
    }

    fn io(&self, e: std::io::Error) -> FileError {
        FileError::new(&self.path, e.into())
    }

    /// Appends the neighbour list of the next node (any order; it is sorted here).
    pub fn push(&mut self, neighbors: &[u32]) -> Result<(), FileError> {
        if self.keyed {
            return Err(FileError::new(
                &self.path,
                FileErrorKind::Invalid("a keyed graph file takes vector keys".into()),
            ));
        }
        self.push_entry(neighbors, None)
    }

    /// Appends the neighbour list of the next node with its vector key (a keyed file).
    pub fn push_keyed(&mut self, neighbors: &[u32], key: u32) -> Result<(), FileError> {
        if !self.keyed {
            return Err(FileError::new(
                &self.path,
                FileErrorKind::Invalid("vector key given to an unkeyed graph file".into()),
            ));
        }
        self.push_entry(neighbors, Some(key))
    }

    fn push_entry(&mut self, neighbors: &[u32], key: Option<u32>) -> Result<(), FileError> {
        let path = self.path.clone();
        let fail = |m: String| FileError::new(&path, FileErrorKind::Invalid(m));
        if self.next_id >= self.meta.n {
            return Err(fail(format!("more than {} lists", self.meta.n)));
        }
        if neighbors.len() > self.max_degree {
            return Err(fail(format!(
                "node {} has {} neighbours, above the bound {}",
                self.next_id,
                neighbors.len(),
                self.max_degree
            )));
        }
        self.sorted.clear();
        self.sorted.extend_from_slice(neighbors);
        self.sorted.sort_unstable();
        let bytes = elias_fano::encoded_bytes(self.sorted.len(), self.universe)
            + if key.is_some() { KEY_BYTES } else { 0 };
        let used = PAGE_HEADER + 2 * self.degrees.len() + self.lists.len();
        if !self.degrees.is_empty() && used + 2 + bytes > PAGE_BYTES {
            self.flush_page()?;
        }
        if self.degrees.is_empty() {
            self.first = self.next_id as u32;
        }
        if let Some(k) = key {
            self.lists.extend_from_slice(&k.to_le_bytes());
        }
        elias_fano::encode(&self.sorted, self.universe, &mut self.lists)
            .map_err(|e| fail(format!("node {}: {e}", self.next_id)))?;
        self.degrees.push(self.sorted.len() as u16);
        self.edges += self.sorted.len() as u64;
        self.next_id += 1;
        Ok(())
    }

    fn flush_page(&mut self) -> Result<(), FileError> {
        build_data_page(&mut self.page, self.first, &self.degrees, &self.lists);
        self.sparse.push(self.first);
        self.degrees.clear();
        self.lists.clear();
        let out = self.out.as_mut().ok_or_else(|| {
            FileError::new(&self.path, FileErrorKind::Invalid("writer finished".into()))
        })?;
        out.write_all(&self.page)
            .map_err(|e| FileError::new(&self.path, FileErrorKind::Io(e)))
    }

    /// Writes the last page, the sparse index and the header; syncs and renames into place.
    /// Returns the file's bytes.
    pub fn finish(mut self) -> Result<u64, FileError> {
        if self.next_id != self.meta.n {
            return Err(FileError::new(
                &self.path,
                FileErrorKind::Invalid(format!(
                    "{} lists written for {} nodes",
                    self.next_id, self.meta.n
                )),
            ));
        }
        if !self.degrees.is_empty() {
            self.flush_page()?;
        }
        let d = self.sparse.len() as u64;
        let mut index: Vec<u8> = self.sparse.iter().flat_map(|x| x.to_le_bytes()).collect();
        let index_crc = crc32fast::hash(&index);
        let s = (index.len() as u64).div_ceil(PAGE_BYTES as u64);
        index.resize(s as usize * PAGE_BYTES, 0);
        let mut h = vec![0u8; PAGE_BYTES];
        let m = &self.meta;
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(PAGE_BYTES as u32).to_le_bytes());
        h[16] = m.dtype.code();
        h[17] = m.metric.code();
        h[20..24].copy_from_slice(&(m.dim as u32).to_le_bytes());
        h[24..32].copy_from_slice(&m.n.to_le_bytes());
        h[32..36].copy_from_slice(&(m.r as u32).to_le_bytes());
        h[36..40].copy_from_slice(&m.medoid.to_le_bytes());
        h[40..44].copy_from_slice(&(m.pq_bytes as u32).to_le_bytes());
        h[44..48].copy_from_slice(&m.pq_crc.to_le_bytes());
        h[48..52].copy_from_slice(&m.pq_codes_crc.to_le_bytes());
        h[52..60].copy_from_slice(&d.to_le_bytes());
        h[60..68].copy_from_slice(&s.to_le_bytes());
        h[68..72].copy_from_slice(&index_crc.to_le_bytes());
        h[72..80].copy_from_slice(&self.edges.to_le_bytes());
        let flags = if self.keyed { FLAG_KEYED } else { 0 };
        h[80..84].copy_from_slice(&flags.to_le_bytes());
        seal_header_page(&mut h);
        let out = self.out.take().ok_or_else(|| {
            FileError::new(&self.path, FileErrorKind::Invalid("writer finished".into()))
        })?;
        let mut file = out.into_inner().map_err(|e| self.io(e.into_error()))?;
        file.write_all(&index).map_err(|e| self.io(e))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| self.io(e))?;
        file.write_all(&h).map_err(|e| self.io(e))?;
        file.sync_all().map_err(|e| self.io(e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| self.io(e))?;
        Ok((1 + d + s) * PAGE_BYTES as u64)
    }
}

impl Drop for GraphWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// An opened, checked graph file: its shape and sparse index (4 bytes per page in memory).
#[derive(Debug, Clone)]
pub struct GraphFile {
    path: PathBuf,
    meta: PackedMeta,
    universe: u32,
    data_pages: u64,
    index_pages: u64,
    edges: u64,
    /// First node id of each data page.
    first_ids: Vec<u32>,
    /// Whether every list entry starts with a vector key.
    keyed: bool,
}

impl GraphFile {
    /// Opens `path`, checking the header, the file length and the sparse index (monotone,
    /// starting at node 0, within `n`). Pages are checked when read ([`GraphFile::list_bytes`]
    /// with `verify`, or [`GraphFile::verify_all`]).
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(path, kind);
        let invalid = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let hp = read_header_page(path, MAGIC, "trawl decoupled graph", 1..=VERSION)?;
        let (mut file, actual, h) = (hp.file, hp.len, hp.bytes);
        if le32(&h, 12) as usize != PAGE_BYTES {
            return Err(invalid(format!("page size {}", le32(&h, 12))));
        }
        let dtype = DType::from_code(h[16]).ok_or_else(|| invalid("element type".into()))?;
        let metric = Metric::from_code(h[17]).ok_or_else(|| invalid("metric".into()))?;
        let n = le64(&h, 24);
        if n == 0 || n > u64::from(u32::MAX) {
            return Err(invalid(format!("{n} nodes")));
        }
        let meta = PackedMeta {
            dtype,
            metric,
            dim: le32(&h, 20) as usize,
            n,
            r: le32(&h, 32) as usize,
            medoid: le32(&h, 36),
            pq_bytes: le32(&h, 40) as usize,
            pq_crc: le32(&h, 44),
            pq_codes_crc: le32(&h, 48),
            neighbor_code_bytes: 0,
            permuted: false,
        };
        if meta.dim == 0 || u64::from(meta.medoid) >= n || meta.r > max_degree_for(n) {
            return Err(invalid(format!(
                "dim {}, medoid {}, degree bound {}",
                meta.dim, meta.medoid, meta.r
            )));
        }
        let flags = le32(&h, 80);
        if flags & !FLAG_KEYED != 0 {
            return Err(invalid(format!("unknown flags {flags:#x}")));
        }
        let keyed = flags & FLAG_KEYED != 0;
        let data_pages = le64(&h, 52);
        let index_pages = le64(&h, 60);
        if data_pages == 0
            || data_pages > n
            || index_pages != (data_pages * 4).div_ceil(PAGE_BYTES as u64)
        {
            return Err(invalid(format!(
                "{data_pages} data pages, {index_pages} index pages"
            )));
        }
        let expected = (1 + data_pages + index_pages) * PAGE_BYTES as u64;
        if actual != expected {
            return Err(fail(FileErrorKind::SizeMismatch { expected, actual }));
        }
        file.seek(SeekFrom::Start((1 + data_pages) * PAGE_BYTES as u64))
            .map_err(|e| fail(e.into()))?;
        let mut raw = vec![0u8; (index_pages as usize) * PAGE_BYTES];
        file.read_exact(&mut raw).map_err(|e| fail(e.into()))?;
        let used = data_pages as usize * 4;
        if crc32fast::hash(&raw[..used]) != le32(&h, 68) || raw[used..].iter().any(|&b| b != 0) {
            return Err(fail(FileErrorKind::Checksum {
                what: "sparse index",
            }));
        }
        let first_ids: Vec<u32> = raw[..used].chunks_exact(4).map(|b| le32(b, 0)).collect();
        if first_ids[0] != 0
            || first_ids.windows(2).any(|w| w[0] >= w[1])
            || u64::from(*first_ids.last().unwrap_or(&0)) >= n
        {
            return Err(invalid("sparse index is not increasing within n".into()));
        }
        Ok(Self {
            path: path.to_path_buf(),
            meta,
            universe: n as u32,
            data_pages,
            index_pages,
            edges: le64(&h, 72),
            first_ids,
            keyed,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The index shape (no vectors here: `neighbor_code_bytes` 0, identity order).
    pub fn meta(&self) -> &PackedMeta {
        &self.meta
    }
    /// Data pages.
    pub fn data_pages(&self) -> u64 {
        self.data_pages
    }
    /// Pages of the whole file.
    pub fn total_pages(&self) -> u64 {
        1 + self.data_pages + self.index_pages
    }
    /// Bytes of the file.
    pub fn file_bytes(&self) -> u64 {
        self.total_pages() * PAGE_BYTES as u64
    }
    /// Sum of the degrees.
    pub fn edges(&self) -> u64 {
        self.edges
    }
    /// Bytes held in memory (the sparse index).
    pub fn heap_bytes(&self) -> usize {
        self.first_ids.len() * 4
    }
    /// Bytes of a fixed-size cache entry: room for any list (degree and length fields, 2 bytes
    /// each, and the worst-case Elias-Fano size of `R` ids, DecoupleVS §3.4).
    pub fn cache_entry_bytes(&self) -> usize {
        4 + self.key_bytes() + elias_fano::max_bits(self.meta.r, self.universe).div_ceil(8)
    }

    /// Whether every list carries its node's vector key.
    pub fn keyed(&self) -> bool {
        self.keyed
    }

    /// Bytes of the vector key ahead of each coded list (0 unkeyed).
    #[inline]
    pub fn key_bytes(&self) -> usize {
        if self.keyed {
            KEY_BYTES
        } else {
            0
        }
    }

    /// The vector key of an entry from [`GraphFile::list_bytes`] (`None` unkeyed).
    #[inline]
    pub fn key_of(&self, entry: &[u8]) -> Option<u32> {
        (self.keyed && entry.len() >= KEY_BYTES).then(|| le32(entry, 0))
    }

    /// Lists on data page `page` (a file page number), from the sparse index.
    pub fn lists_on_page(&self, page: u64) -> u64 {
        let i = page.saturating_sub(1) as usize;
        let next = self
            .first_ids
            .get(i + 1)
            .map_or(self.meta.n, |&f| u64::from(f));
        next.saturating_sub(self.first_ids.get(i).map_or(next, |&f| u64::from(f)))
    }

    /// File page holding node `id`'s list (`id < n`).
    #[inline]
    pub fn locate(&self, id: u32) -> u64 {
        let i = self.first_ids.partition_point(|&f| f <= id);
        i.max(1) as u64 // data page k (0-based) is file page k + 1
    }

    /// Node `id`'s degree and entry (vector key, when keyed, then coded list) inside `page`
    /// (the bytes of the page [`GraphFile::locate`] gave), checking the page's CRC first when
    /// `verify`.
    pub fn list_bytes<'a>(
        &self,
        id: u32,
        page_no: u64,
        page: &'a [u8],
        verify: bool,
    ) -> Result<(usize, &'a [u8]), String> {
        let (first, count) =
            check_data_page(page, page_no, id, &self.first_ids, self.meta.n, verify)?;
        let k = (id - first) as usize;
        let degrees = PAGE_HEADER;
        if degrees + 2 * count > PAGE_BYTES {
            return Err(format!("page {page_no}: count {count} too large"));
        }
        let kb = self.key_bytes();
        let mut at = degrees + 2 * count;
        for j in 0..k {
            at += kb
                + elias_fano::encoded_bytes(
                    usize::from(le16(page, degrees + 2 * j)),
                    self.universe,
                );
        }
        let d = usize::from(le16(page, degrees + 2 * k));
        let len = kb + elias_fano::encoded_bytes(d, self.universe);
        if d > self.meta.r || at + len > PAGE_BYTES {
            return Err(format!(
                "page {page_no}: node {id}'s list overruns the page"
            ));
        }
        Ok((d, &page[at..at + len]))
    }

    /// Decodes an entry's list (from [`GraphFile::list_bytes`] or a cache entry) into `out`.
    pub fn decode_list(
        &self,
        degree: usize,
        bytes: &[u8],
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        out.clear();
        let bytes = bytes
            .get(self.key_bytes()..)
            .ok_or_else(|| "entry shorter than its vector key".to_string())?;
        elias_fano::decode(bytes, degree, self.universe, out)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Reads every data page and checks its CRC, its first id against the sparse index, and
    /// every list it holds. Returns the number of pages checked.
    pub fn verify_all(&self) -> Result<u64, FileError> {
        self.scan_lists(|_, _| Ok::<(), FileError>(()))
    }

    /// Calls `f(id, list)` for every node in id order, reading the data pages sequentially and
    /// checking each page's CRC, its first id against the sparse index, and every list it
    /// holds. Returns the number of pages read.
    pub fn scan_lists<E: From<FileError>>(
        &self,
        mut f: impl FnMut(u32, &[u32]) -> Result<(), E>,
    ) -> Result<u64, E> {
        self.scan_entries(|id, list, _| f(id, list))
    }

    /// The vector key of every node, in id order (`None` for an unkeyed file), from a
    /// checked sequential scan.
    pub fn keys(&self) -> Result<Option<Vec<u32>>, FileError> {
        if !self.keyed {
            return Ok(None);
        }
        let mut keys = Vec::with_capacity(self.meta.n as usize);
        self.scan_entries(|_, _, key| {
            keys.push(key.unwrap_or(u32::MAX));
            Ok::<(), FileError>(())
        })?;
        Ok(Some(keys))
    }

    /// Calls `f(id, degree, entry)` for every node in id order with its coded entry (vector
    /// key when keyed, then the Elias-Fano list) as [`GraphFile::list_bytes`] gives it, reading
    /// the data pages sequentially and checking each page's CRC.
    pub fn scan_coded(&self, mut f: impl FnMut(u32, usize, &[u8])) -> Result<u64, FileError> {
        let io = |e: std::io::Error| FileError::new(&self.path, e.into());
        let mut file = File::open(&self.path).map_err(io)?;
        file.seek(SeekFrom::Start(PAGE_BYTES as u64)).map_err(io)?;
        let mut file = std::io::BufReader::with_capacity(1 << 20, file);
        let mut page = vec![0u8; PAGE_BYTES];
        for p in 1..=self.data_pages {
            file.read_exact(&mut page).map_err(io)?;
            if !page_crc_ok(&page) {
                return Err(FileError::new(
                    &self.path,
                    FileErrorKind::PageChecksum { page: p },
                ));
            }
            let first = le32(&page, 4);
            let count = u32::from(le16(&page, 8));
            for id in first..first.saturating_add(count) {
                let (d, bytes) = self
                    .list_bytes(id, p, &page, false)
                    .map_err(|m| FileError::new(&self.path, FileErrorKind::Invalid(m)))?;
                f(id, d, bytes);
            }
        }
        Ok(self.data_pages)
    }

    /// [`GraphFile::scan_lists`] with each node's vector key (`None` unkeyed).
    pub fn scan_entries<E: From<FileError>>(
        &self,
        mut f: impl FnMut(u32, &[u32], Option<u32>) -> Result<(), E>,
    ) -> Result<u64, E> {
        let io = |e: std::io::Error| FileError::new(&self.path, e.into());
        let mut file = File::open(&self.path).map_err(io)?;
        file.seek(SeekFrom::Start(PAGE_BYTES as u64)).map_err(io)?;
        let mut file = std::io::BufReader::with_capacity(1 << 20, file);
        let mut page = vec![0u8; PAGE_BYTES];
        let mut ids = Vec::new();
        let mut next = 0u64;
        for p in 1..=self.data_pages {
            file.read_exact(&mut page).map_err(io)?;
            if !page_crc_ok(&page) {
                return Err(
                    FileError::new(&self.path, FileErrorKind::PageChecksum { page: p }).into(),
                );
            }
            let first = u64::from(le32(&page, 4));
            let count = u64::from(le16(&page, 8));
            if first != next || count == 0 {
                return Err(FileError::new(
                    &self.path,
                    FileErrorKind::Invalid(format!(
                        "page {p} starts at node {first}, expected {next}"
                    )),
                )
                .into());
            }
            for id in first..first + count {
                let (d, bytes) = self
                    .list_bytes(id as u32, p, &page, false)
                    .map_err(|m| FileError::new(&self.path, FileErrorKind::Invalid(m)))?;
                self.decode_list(d, bytes, &mut ids).map_err(|m| {
                    FileError::new(
                        &self.path,
                        FileErrorKind::Invalid(format!("node {id}: {m}")),
                    )
                })?;
                f(id as u32, &ids, self.key_of(bytes))?;
            }
            next = first + count;
        }
        if next != self.meta.n {
            return Err(FileError::new(
                &self.path,
                FileErrorKind::Invalid(format!("{next} lists for {} nodes", self.meta.n)),
            )
            .into());
        }
        Ok(self.data_pages)
    }
}

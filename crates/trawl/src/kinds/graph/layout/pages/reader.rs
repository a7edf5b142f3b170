//! Opening and checking page-node files; decoding page nodes from read bytes.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::layout::decoupled::elias_fano;
use crate::kinds::graph::layout::pages::{
    room_bytes, PagesMeta, MAGIC, NO_PAGE, NO_VECTOR, PAGE_HEAD, VERSION,
};
use crate::progress::Control;

/// An opened, checked page-node file: its shape, the page checksums, the members' count of
/// each page and each vector's page (4 bytes per page node and per vector in memory; the
/// order table itself is read at open and dropped). Reading pages is the I/O engine's job;
/// this type decodes the page nodes in the bytes it returns.
#[derive(Debug, Clone)]
pub struct PageFile {
    path: PathBuf,
    meta: PagesMeta,
    packed: crate::kinds::graph::layout::packed::PackedMeta,
    crcs: Vec<u32>,
    page_of: Vec<u32>,
    counts: Vec<u16>,
    file_bytes: u64,
}

/// One page node inside read bytes.
#[derive(Debug, Clone, Copy)]
pub struct PageView<'a> {
    ids: &'a [u8],
    vectors: &'a [u8],
    vector_bytes: usize,
    degree: usize,
    list: &'a [u8],
}

impl<'a> PageView<'a> {
    /// Vectors on the page.
    #[inline]
    pub fn len(&self) -> usize {
        self.ids.len() / 4
    }
    /// Whether the page holds no vector (never true of a checked page).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    /// The id of the `i`-th vector.
    #[inline]
    pub fn id(&self, i: usize) -> u32 {
        let b = &self.ids[4 * i..4 * i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    /// The ids of the vectors, centre first.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        self.ids
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// The bytes of the `i`-th vector.
    #[inline]
    pub fn vector_bytes(&self, i: usize) -> &'a [u8] {
        &self.vectors[i * self.vector_bytes..(i + 1) * self.vector_bytes]
    }
    /// The `i`-th vector, typed (copied into `scratch` when the bytes are not aligned).
    #[inline]
    pub fn vector<'s, T: Element>(&self, i: usize, scratch: &'s mut Vec<T>) -> &'s [T]
    where
        'a: 's,
    {
        crate::kinds::graph::layout::packed::RecordView::from_parts(
            self.vector_bytes(i),
            &[],
            &[],
            0,
        )
        .vector(scratch)
    }
    /// Entries of the neighbour list.
    pub fn degree(&self) -> usize {
        self.degree
    }
    /// The coded neighbour list.
    pub fn coded_list(&self) -> &'a [u8] {
        self.list
    }
}

fn le32(h: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}
fn le64(h: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&h[at..at + 8]);
    u64::from_le_bytes(b)
}
fn invalid(path: &Path, msg: String) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg))
}

impl PageFile {
    /// Opens `path`: checks its header, length, checksum table and page table (held in
    /// memory). Page nodes are checked when read ([`PageFile::check_page`]) or all at once by
    /// [`PageFile::verify_all`].
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(path, kind);
        let hp =
            crate::dir::file::read_header_page(path, MAGIC, "trawl page-node index", 1..=VERSION)?;
        let (mut file, actual, h) = (hp.file, hp.len, hp.bytes);
        if le32(&h, 12) as usize != PAGE_BYTES {
            return Err(invalid(path, format!("page size {}", le32(&h, 12))));
        }
        let dtype = DType::from_code(h[16])
            .ok_or_else(|| invalid(path, format!("element type code {}", h[16])))?;
        let metric = Metric::from_code(h[17])
            .ok_or_else(|| invalid(path, format!("metric code {}", h[17])))?;
        let meta = PagesMeta {
            dtype,
            metric,
            dim: le32(&h, 20) as usize,
            n: le64(&h, 24),
            pages: le64(&h, 32),
            capacity: le32(&h, 40) as usize,
            medoid: le32(&h, 44),
            max_degree: le32(&h, 48) as usize,
            pq_crc: le32(&h, 52),
            pq_codes_crc: le32(&h, 68),
            placed: le64(&h, 88),
            pq_bytes: le32(&h, 84) as usize,
            graph_r: le32(&h, 96) as usize,
            hops: le32(&h, 100) as usize,
            min_degree: le32(&h, 104) as usize,
            degree_cap: le32(&h, 108) as usize,
        };
        let (crc_pages, table_pages) = (le64(&h, 56), le64(&h, 72));
        let v = meta.vector_bytes();
        let shape_ok = meta.dim > 0
            && meta.n > 0
            && meta.n < u64::from(NO_PAGE)
            && meta.pages > 0
            && meta.pages <= meta.n
            && meta.capacity > 0
            && room_bytes(meta.capacity, v).is_some()
            && u64::from(meta.medoid) < meta.n
            && meta.max_degree <= u16::MAX as usize
            && meta.placed <= meta.n
            && meta.placed >= meta.pages
            && crc_pages == (4 * meta.pages).div_ceil(PAGE_BYTES as u64)
            && table_pages == (4 * meta.pages * meta.capacity as u64).div_ceil(PAGE_BYTES as u64)
            && meta.graph_r > 0
            && h[18..20] == [0, 0]
            && meta.hops <= 8
            && h[112..PAGE_BYTES - 4].iter().all(|&b| b == 0);
        if !shape_ok {
            return Err(invalid(path, format!("inconsistent header: {meta:?}")));
        }
        let expected = (1 + meta.pages + crc_pages + table_pages) * PAGE_BYTES as u64;
        if actual != expected {
            return Err(fail(FileErrorKind::SizeMismatch { expected, actual }));
        }
        file.seek(SeekFrom::Start((1 + meta.pages) * PAGE_BYTES as u64))
            .map_err(|e| fail(e.into()))?;
        let read_table = |file: &mut std::fs::File, pages: u64, used: usize, crc: u32, what| {
            let mut raw = vec![0u8; pages as usize * PAGE_BYTES];
            file.read_exact(&mut raw).map_err(|e| fail(e.into()))?;
            if crc32fast::hash(&raw[..used]) != crc || raw[used..].iter().any(|&b| b != 0) {
                return Err(fail(FileErrorKind::Checksum { what }));
            }
            Ok(raw[..used]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect::<Vec<u32>>())
        };
        let crcs = read_table(
            &mut file,
            crc_pages,
            4 * meta.pages as usize,
            le32(&h, 64),
            "page checksum table",
        )?;
        let order = read_table(
            &mut file,
            table_pages,
            4 * meta.pages as usize * meta.capacity,
            le32(&h, 80),
            "order table",
        )?;
        let mut page_of = vec![NO_PAGE; meta.n as usize];
        let mut counts = vec![0u16; meta.pages as usize];
        for (s, &id) in order.iter().enumerate() {
            let (p, i) = (s / meta.capacity, s % meta.capacity);
            if id == NO_VECTOR {
                continue;
            }
            // A page's vectors fill its first slots; each vector is in one slot.
            let ok = usize::from(counts[p]) == i
                && page_of.get(id as usize).is_some_and(|&q| q == NO_PAGE);
            if !ok {
                return Err(invalid(
                    path,
                    format!("order table: vector {id} in slot {s}"),
                ));
            }
            page_of[id as usize] = p as u32;
            counts[p] += 1;
        }
        let placed: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if placed != meta.placed || counts.contains(&0) || page_of[meta.medoid as usize] == NO_PAGE
        {
            return Err(invalid(
                path,
                format!("the order table places {placed} vectors, the header {}, with an empty page or the medoid on none", meta.placed),
            ));
        }
        Ok(Self {
            path: path.to_path_buf(),
            packed: meta.packed_meta(),
            meta,
            crcs,
            page_of,
            counts,
            file_bytes: expected,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The shape.
    pub fn meta(&self) -> &PagesMeta {
        &self.meta
    }
    /// The shape as the other layouts describe it ([`PagesMeta::packed_meta`]).
    pub fn packed_meta(&self) -> &crate::kinds::graph::layout::packed::PackedMeta {
        &self.packed
    }
    /// Bytes of the file.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }
    /// Bytes held in memory (checksums, page of each vector, count of each page).
    pub fn heap_bytes(&self) -> usize {
        4 * (self.crcs.len() + self.page_of.len()) + 2 * self.counts.len()
    }
    /// Vectors on page node `p` (0 past the file).
    #[inline]
    pub fn count(&self, p: u32) -> usize {
        self.counts.get(p as usize).map_or(0, |&c| usize::from(c))
    }
    /// Reads the order table again: the vector in each slot ([`NO_VECTOR`] for an empty one),
    /// `P · capacity` entries, checked against what the open found.
    pub fn read_order(&self) -> Result<Vec<u32>, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(&self.path, kind);
        let mut file = std::fs::File::open(&self.path).map_err(|e| fail(e.into()))?;
        let slots = self.counts.len() * self.meta.capacity;
        let crc_pages = (4 * self.meta.pages).div_ceil(PAGE_BYTES as u64);
        file.seek(SeekFrom::Start(
            (1 + self.meta.pages + crc_pages) * PAGE_BYTES as u64,
        ))
        .map_err(|e| fail(e.into()))?;
        let mut raw = vec![0u8; 4 * slots];
        file.read_exact(&mut raw).map_err(|e| fail(e.into()))?;
        let order: Vec<u32> = raw
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let cap = self.meta.capacity;
        for (s, &id) in order.iter().enumerate() {
            let p = (s / cap) as u32;
            let want = (s % cap) < self.count(p);
            if want != (id != NO_VECTOR) || (want && self.page_of(id) != p) {
                return Err(invalid(
                    &self.path,
                    format!("order table changed under the index (slot {s})"),
                ));
            }
        }
        Ok(order)
    }
    /// The page node of vector `id` ([`NO_PAGE`] for none or an id past the file).
    #[inline]
    pub fn page_of(&self, id: u32) -> u32 {
        self.page_of.get(id as usize).copied().unwrap_or(NO_PAGE)
    }
    /// The page of every vector.
    pub fn page_table(&self) -> &[u32] {
        &self.page_of
    }
    /// File page of page node `p`.
    #[inline]
    pub fn file_page(&self, p: u32) -> u64 {
        1 + u64::from(p)
    }

    /// Checks the bytes read for page node `p` against its checksum.
    pub fn check_page(&self, p: u64, bytes: &[u8]) -> Result<(), String> {
        let want = self
            .crcs
            .get(p as usize)
            .ok_or_else(|| format!("page node {p} of {}", self.crcs.len()))?;
        let got = bytes.get(..PAGE_BYTES).map(crc32fast::hash);
        if got != Some(*want) {
            return Err(format!("checksum mismatch in page node {p}"));
        }
        Ok(())
    }

    /// Decodes page node `p` from its bytes: every field within the page and consistent with
    /// the header and the page table, so damage is an error, never a panic or a wrong id.
    pub fn decode<'a>(&self, p: u64, bytes: &'a [u8]) -> Result<PageView<'a>, String> {
        let b = bytes
            .get(..PAGE_BYTES)
            .ok_or_else(|| format!("page node {p}: {} bytes", bytes.len()))?;
        let m = u16::from_le_bytes([b[0], b[1]]) as usize;
        let d = u16::from_le_bytes([b[2], b[3]]) as usize;
        let e = u16::from_le_bytes([b[4], b[5]]) as usize;
        let v = self.meta.vector_bytes();
        let room = room_bytes(m, v).filter(|_| m > 0 && m <= self.meta.capacity);
        let Some(room) = room else {
            return Err(format!(
                "page node {p}: {m} vectors (capacity {})",
                self.meta.capacity
            ));
        };
        if d > self.meta.max_degree
            || e > room
            || e != elias_fano::encoded_bytes(d, self.meta.pages as u32)
            || b[6..8] != [0, 0]
        {
            return Err(format!("page node {p}: list of {d} entries in {e} bytes"));
        }
        let ids = &b[PAGE_HEAD..PAGE_HEAD + 4 * m];
        let view = PageView {
            ids,
            vectors: &b[PAGE_HEAD + 4 * m..PAGE_HEAD + 4 * m + m * v],
            vector_bytes: v,
            degree: d,
            list: &b[PAGE_HEAD + 4 * m + m * v..PAGE_HEAD + 4 * m + m * v + e],
        };
        if m != self.count(p as u32) {
            return Err(format!(
                "page node {p}: {m} vectors, the order table says {}",
                self.count(p as u32)
            ));
        }
        for id in view.ids() {
            if u64::from(self.page_of(id)) != p {
                return Err(format!(
                    "page node {p}: vector {id} belongs to another page"
                ));
            }
        }
        Ok(view)
    }

    /// Decodes `view`'s neighbour list into `out` (sorted page nodes, each checked below `P`).
    pub fn neighbors(&self, p: u64, view: &PageView<'_>, out: &mut Vec<u32>) -> Result<(), String> {
        elias_fano::decode(view.list, view.degree, self.meta.pages as u32, out)
            .map(|_| ())
            .map_err(|e| format!("page node {p}: neighbour list: {e}"))
    }

    /// Reads and checks every page node (checksum, decoding, the list), sequentially.
    pub fn verify_all(&self, ctl: &Control) -> Result<(), FileError> {
        let fail = |m: String| invalid(&self.path, m);
        let mut file =
            std::fs::File::open(&self.path).map_err(|e| FileError::new(&self.path, e.into()))?;
        file.seek(SeekFrom::Start(PAGE_BYTES as u64))
            .map_err(|e| FileError::new(&self.path, e.into()))?;
        let mut buf = vec![0u8; PAGE_BYTES];
        let mut nbrs = Vec::new();
        let mut seen = 0u64;
        let bar = ctl.bar("verifying page nodes", self.meta.pages);
        for p in 0..self.meta.pages {
            ctl.check().map_err(|c| fail(c.to_string()))?;
            file.read_exact(&mut buf)
                .map_err(|e| FileError::new(&self.path, e.into()))?;
            self.check_page(p, &buf).map_err(fail)?;
            let view = self.decode(p, &buf).map_err(fail)?;
            self.neighbors(p, &view, &mut nbrs).map_err(fail)?;
            if nbrs.contains(&(p as u32)) {
                return Err(fail(format!("page node {p} lists itself")));
            }
            seen += view.len() as u64;
            bar.inc(1);
        }
        bar.finish_and_clear();
        if seen != self.meta.placed {
            return Err(fail(format!(
                "{seen} vectors on the pages, {} in the page table",
                self.meta.placed
            )));
        }
        Ok(())
    }
}

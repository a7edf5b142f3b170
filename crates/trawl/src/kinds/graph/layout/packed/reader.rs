//! Opening and checking page-packed files; decoding records from read pages.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::layout::packed::{
    PackedGeometry, PackedMeta, EMPTY_SLOT, FLAG_PERMUTED, MAGIC, VERSION,
};
use crate::progress::Control;

/// An opened, checked page-packed index file: its shape and page checksums (4 bytes per data
/// page in memory). Reading pages is the I/O engine's job ([`crate::io`]); this type locates and
/// decodes records in the bytes it returns.
#[derive(Debug, Clone)]
pub struct PackedFile {
    path: PathBuf,
    meta: PackedMeta,
    geo: PackedGeometry,
    crcs: Vec<u32>,
    /// Permuted files: the slot order and its inverse.
    order: Option<Order>,
    /// All-in-Storage files: the medoid's PQ code (empty otherwise).
    medoid_code: Vec<u8>,
}

/// A permuted file's order table and its inverse.
#[derive(Debug, Clone)]
struct Order {
    /// Node in each slot ([`EMPTY_SLOT`] for none).
    node_at: Vec<u32>,
    /// Slot of each node.
    slot_of: Vec<u32>,
}

/// One record inside read page bytes.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    vector: &'a [u8],
    ids: &'a [u8],
    /// All-in-Storage: the neighbours' PQ codes, `code_bytes` each, in list order.
    codes: &'a [u8],
    code_bytes: usize,
}

impl<'a> RecordView<'a> {
    /// A view of a record's parts: vector bytes, neighbour ids (little-endian `u32`s) and the
    /// neighbours' PQ codes (`code_bytes` each; empty without).
    pub fn from_parts(vector: &'a [u8], ids: &'a [u8], codes: &'a [u8], code_bytes: usize) -> Self {
        Self {
            vector,
            ids,
            codes,
            code_bytes,
        }
    }

    /// The raw vector bytes.
    #[inline]
    pub fn vector_bytes(&self) -> &'a [u8] {
        self.vector
    }

    /// The vector as `T` (borrowed when the bytes are aligned for `T`, else copied into
    /// `scratch`).
    #[inline]
    pub fn vector<'s, T: Element>(&self, scratch: &'s mut Vec<T>) -> &'s [T]
    where
        'a: 's,
    {
        match bytemuck::try_cast_slice(self.vector) {
            Ok(v) => v,
            Err(_) => {
                scratch.clear();
                scratch.extend(
                    self.vector
                        .chunks_exact(std::mem::size_of::<T>())
                        .map(bytemuck::pod_read_unaligned::<T>),
                );
                scratch
            }
        }
    }

    /// Number of neighbours.
    #[inline]
    pub fn degree(&self) -> usize {
        self.ids.len() / 4
    }

    /// The neighbour ids (checked `< n` when the view was made).
    #[inline]
    pub fn neighbors(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        self.ids
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// All-in-Storage records: the PQ code of neighbour `i` (list order); `None` for records
    /// without codes or `i ≥ degree`.
    #[inline]
    pub fn neighbor_code(&self, i: usize) -> Option<&'a [u8]> {
        if self.code_bytes == 0 {
            return None;
        }
        self.codes
            .get(i * self.code_bytes..(i + 1) * self.code_bytes)
    }

    /// Whether the record carries its neighbours' PQ codes.
    #[inline]
    pub fn has_codes(&self) -> bool {
        self.code_bytes > 0
    }
}

fn invalid(path: &Path, msg: String) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg))
}

fn le32(h: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}

fn le64(h: &[u8], at: usize) -> u64 {
    u64::from(le32(h, at)) | (u64::from(le32(h, at + 4)) << 32)
}

impl PackedFile {
    /// Opens `path` and checks its header, length and checksum table. Page contents are checked
    /// when read ([`PackedFile::check_page`]) or all at once by [`PackedFile::verify_all`].
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(path, kind);
        let hp = crate::dir::file::read_header_page(
            path,
            MAGIC,
            "trawl page-packed index",
            1..=VERSION,
        )?;
        let (mut file, actual, h) = (hp.file, hp.len, hp.bytes);
        let (meta, geo, table_crc) = decode_header(path, &h)?;
        let expected = geo.total_pages() * PAGE_BYTES as u64;
        if actual != expected {
            return Err(fail(FileErrorKind::SizeMismatch { expected, actual }));
        }
        let table_bytes = usize::try_from(geo.checksum_pages * PAGE_BYTES as u64)
            .map_err(|_| invalid(path, "checksum table larger than memory".into()))?;
        let mut table = vec![0u8; table_bytes];
        std::io::Seek::seek(
            &mut file,
            std::io::SeekFrom::Start((1 + geo.data_pages) * PAGE_BYTES as u64),
        )
        .map_err(|e| fail(e.into()))?;
        file.read_exact(&mut table).map_err(|e| fail(e.into()))?;
        let used = geo.data_pages as usize * 4;
        if crc32fast::hash(&table[..used]) != table_crc || table[used..].iter().any(|&b| b != 0) {
            return Err(fail(FileErrorKind::Checksum {
                what: "page checksum table",
            }));
        }
        let crcs = table[..used]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let order = if meta.permuted {
            let bytes = usize::try_from(geo.order_pages * PAGE_BYTES as u64)
                .map_err(|_| invalid(path, "order table larger than memory".into()))?;
            let mut raw = vec![0u8; bytes];
            file.read_exact(&mut raw).map_err(|e| fail(e.into()))?;
            let used = geo.slots() as usize * 4;
            if crc32fast::hash(&raw[..used]) != le32(&h, 100) || raw[used..].iter().any(|&b| b != 0)
            {
                return Err(fail(FileErrorKind::Checksum {
                    what: "order table",
                }));
            }
            let node_at: Vec<u32> = raw[..used]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let mut slot_of = vec![EMPTY_SLOT; meta.n as usize];
            for (slot, &id) in node_at.iter().enumerate() {
                if id == EMPTY_SLOT {
                    continue;
                }
                match slot_of.get_mut(id as usize) {
                    Some(s) if *s == EMPTY_SLOT => *s = slot as u32,
                    _ => {
                        return Err(invalid(
                            path,
                            format!("order table: node {id} out of range or in two slots"),
                        ))
                    }
                }
            }
            if slot_of.contains(&EMPTY_SLOT) {
                return Err(invalid(path, "order table: some node has no slot".into()));
            }
            Some(Order { node_at, slot_of })
        } else {
            None
        };
        let c = meta.neighbor_code_bytes;
        let medoid_code = h[104..104 + c].to_vec();
        if h[104 + c..PAGE_BYTES - 4].iter().any(|&b| b != 0) {
            return Err(invalid(path, "reserved header bytes are not zero".into()));
        }
        Ok(Self {
            path: path.to_path_buf(),
            meta,
            geo,
            crcs,
            order,
            medoid_code,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index shape.
    pub fn meta(&self) -> &PackedMeta {
        &self.meta
    }

    /// Where records sit.
    pub fn geometry(&self) -> &PackedGeometry {
        &self.geo
    }

    /// File size in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.geo.total_pages() * PAGE_BYTES as u64
    }

    /// Memory this handle keeps (the checksum table; for a permuted file, the order table
    /// and its inverse, 8 bytes per node).
    pub fn heap_bytes(&self) -> usize {
        self.crcs.capacity() * 4
            + self
                .order
                .as_ref()
                .map_or(0, |o| (o.node_at.capacity() + o.slot_of.capacity()) * 4)
    }

    /// All-in-Storage files: the medoid's PQ code (empty for other files).
    pub fn medoid_code(&self) -> &[u8] {
        &self.medoid_code
    }

    /// Whether the records are in a permuted order (PageShuffle).
    pub fn is_permuted(&self) -> bool {
        self.order.is_some()
    }

    /// The node in each slot of a permuted file ([`crate::kinds::graph::layout::packed::EMPTY_SLOT`] for none); `None` for
    /// an identity file.
    pub fn order(&self) -> Option<&[u32]> {
        self.order.as_ref().map(|o| o.node_at.as_slice())
    }

    /// Whether `bytes` (whole pages starting at page `first`) match their checksums.
    #[inline]
    pub fn check_pages(&self, first: u64, bytes: &[u8]) -> Result<(), u64> {
        for (i, p) in bytes.chunks_exact(PAGE_BYTES).enumerate() {
            let page = first + i as u64;
            let want = page
                .checked_sub(1)
                .and_then(|d| self.crcs.get(d as usize))
                .ok_or(page)?;
            if crc32fast::hash(p) != *want {
                return Err(page);
            }
        }
        Ok(())
    }

    /// Same as [`PackedFile::check_pages`] for one page.
    #[inline]
    pub fn check_page(&self, page: u64, bytes: &[u8]) -> Result<(), u64> {
        self.check_pages(page, &bytes[..PAGE_BYTES.min(bytes.len())])
    }

    /// First page of node `id`'s record and the record's byte offset in it.
    #[inline]
    pub fn locate(&self, id: u32) -> (u64, usize) {
        match &self.order {
            None => self.geo.locate(id),
            Some(o) => self.geo.locate_slot(u64::from(o.slot_of[id as usize])),
        }
    }

    /// Appends the nodes whose records lie on data page `page` to `out`, in slot order (none
    /// for a page outside the data pages; for records spanning pages, the node that starts on
    /// `page`, if any).
    pub fn ids_on_page(&self, page: u64, out: &mut Vec<u32>) {
        if page == 0 || page > self.geo.data_pages {
            return;
        }
        let d = page - 1;
        if let Some(o) = &self.order {
            let per = self.geo.per_page;
            let first = d as usize * per;
            out.extend(
                o.node_at[first..first + per]
                    .iter()
                    .copied()
                    .filter(|&id| id != EMPTY_SLOT),
            );
        } else if self.geo.per_page > 0 {
            let per = self.geo.per_page as u64;
            let first = d * per;
            let end = (first + per).min(self.meta.n);
            out.extend((first..end).map(|i| i as u32));
        } else if d.is_multiple_of(self.geo.pages_per_record as u64) {
            out.push((d / self.geo.pages_per_record as u64) as u32);
        }
    }

    /// How many records a read of one record starting at `page` brings in (the records on the
    /// page; 1 when records span pages).
    #[inline]
    pub fn records_on_page(&self, page: u64) -> u64 {
        if self.geo.per_page == 0 {
            return 1;
        }
        let per = self.geo.per_page as u64;
        let first = page.saturating_sub(1) * per;
        match &self.order {
            Some(o) => o
                .node_at
                .get(first as usize..(first + per) as usize)
                .map_or(0, |s| {
                    s.iter().filter(|&&id| id != EMPTY_SLOT).count() as u64
                }),
            None => self.meta.n.saturating_sub(first).min(per),
        }
    }

    /// Decodes node `id`'s record from `bytes`, the pages read from its first page on
    /// ([`PackedFile::locate`]). `Err` with a message when the record is malformed
    /// (degree above R or an id out of range): the page is corrupt.
    #[inline]
    pub fn record<'a>(&self, id: u32, bytes: &'a [u8]) -> Result<RecordView<'a>, String> {
        let (_, at) = self.locate(id);
        let rec = bytes
            .get(at..at + self.geo.record_bytes)
            .ok_or_else(|| format!("record {id} lies outside the bytes read"))?;
        self.decode(id, rec)
    }

    /// Decodes node `id`'s record from exactly its `record_bytes` bytes (e.g. a cached copy).
    #[inline]
    pub fn decode<'a>(&self, id: u32, rec: &'a [u8]) -> Result<RecordView<'a>, String> {
        if rec.len() != self.geo.record_bytes {
            return Err(format!(
                "record {id}: {} bytes, expected {}",
                rec.len(),
                self.geo.record_bytes
            ));
        }
        let (vector, rest) = rec.split_at(self.geo.vector_bytes);
        let degree = le32(rest, 0) as usize;
        let c = self.meta.neighbor_code_bytes;
        let codes_at = 4 + 4 * self.meta.r;
        if degree > self.meta.r {
            return Err(format!(
                "record {id}: degree {degree} > R = {}",
                self.meta.r
            ));
        }
        let ids = &rest[4..4 + 4 * degree];
        let n = self.meta.n;
        if ids
            .chunks_exact(4)
            .any(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) >= n)
        {
            return Err(format!("record {id}: neighbour id ≥ n = {n}"));
        }
        Ok(RecordView {
            vector,
            ids,
            codes: &rest[codes_at..codes_at + c * degree],
            code_bytes: c,
        })
    }

    /// Reads the whole file sequentially and checks every data page against its checksum.
    pub fn verify_all(&self, ctl: &Control) -> Result<(), FileError> {
        let fail = |kind: FileErrorKind| FileError::new(&self.path, kind);
        let mut file = File::open(&self.path).map_err(|e| fail(e.into()))?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(PAGE_BYTES as u64))
            .map_err(|e| fail(e.into()))?;
        let bar = ctl.bar("verifying pages", self.geo.data_pages);
        let mut buf = vec![0u8; 256 * PAGE_BYTES];
        let mut page = 1u64;
        while page <= self.geo.data_pages {
            ctl.check()
                .map_err(|c| invalid(&self.path, c.to_string()))?;
            let count = (self.geo.data_pages + 1 - page).min(256) as usize;
            let chunk = &mut buf[..count * PAGE_BYTES];
            file.read_exact(chunk).map_err(|e| fail(e.into()))?;
            if let Err(bad) = self.check_pages(page, chunk) {
                return Err(fail(FileErrorKind::PageChecksum { page: bad }));
            }
            page += count as u64;
            bar.inc(count as u64);
        }
        bar.finish_and_clear();
        Ok(())
    }
}

fn decode_header(path: &Path, h: &[u8]) -> Result<(PackedMeta, PackedGeometry, u32), FileError> {
    let bad = |m: String| invalid(path, m);
    if le32(h, 12) as usize != PAGE_BYTES {
        return Err(bad(format!(
            "page size {} is not {PAGE_BYTES}",
            le32(h, 12)
        )));
    }
    let dtype = DType::from_code(h[16]).ok_or_else(|| bad(format!("element type {}", h[16])))?;
    let metric = Metric::from_code(h[17]).ok_or_else(|| bad(format!("metric code {}", h[17])))?;
    let meta = PackedMeta {
        dtype,
        metric,
        dim: le32(h, 20) as usize,
        n: le64(h, 24),
        r: le32(h, 32) as usize,
        medoid: le32(h, 36),
        pq_bytes: le32(h, 52) as usize,
        pq_crc: le32(h, 76),
        pq_codes_crc: le32(h, 80),
        neighbor_code_bytes: le32(h, 88) as usize,
        permuted: le32(h, 84) & FLAG_PERMUTED != 0,
    };
    if le32(h, 84) & !FLAG_PERMUTED != 0 {
        return Err(bad(format!("unknown flags {:#x}", le32(h, 84))));
    }
    if meta.neighbor_code_bytes > PAGE_BYTES - 4 - 104
        || (meta.neighbor_code_bytes != 0 && meta.neighbor_code_bytes != meta.pq_bytes)
    {
        return Err(bad(format!(
            "{} code bytes per neighbour, but {} PQ bytes per vector",
            meta.neighbor_code_bytes, meta.pq_bytes
        )));
    }
    if meta.n == 0 || meta.n > u64::from(u32::MAX) || u64::from(meta.medoid) >= meta.n {
        return Err(bad(format!("n = {}, medoid = {}", meta.n, meta.medoid)));
    }
    if meta.dim == 0 || meta.r == 0 || meta.r > u32::MAX as usize / 4 {
        return Err(bad(format!("dim = {}, R = {}", meta.dim, meta.r)));
    }
    let geo = PackedGeometry::of(&meta).ok_or_else(|| bad("sizes overflow".into()))?;
    let stored = (
        le32(h, 40) as usize,
        le32(h, 44) as usize,
        le32(h, 48) as usize,
        le64(h, 56),
        le64(h, 64),
        le64(h, 92),
    );
    let derived = (
        geo.record_bytes,
        geo.per_page,
        geo.pages_per_record,
        geo.data_pages,
        geo.checksum_pages,
        geo.order_pages,
    );
    if stored != derived {
        return Err(bad(format!(
            "stored geometry {stored:?} disagrees with the derived {derived:?}"
        )));
    }
    Ok((meta, geo, le32(h, 72)))
}

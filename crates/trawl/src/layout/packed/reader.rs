//! Opening and checking page-packed files; decoding records from read pages.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{PackedGeometry, PackedMeta, MAGIC, VERSION};
use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Element, Metric};
use crate::layout::{FileError, FileErrorKind};
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
}

/// One record inside read page bytes.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    vector: &'a [u8],
    ids: &'a [u8],
}

impl<'a> RecordView<'a> {
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
        let mut file = File::open(path).map_err(|e| fail(e.into()))?;
        let actual = file.metadata().map_err(|e| fail(e.into()))?.len();
        if actual < PAGE_BYTES as u64 {
            return Err(fail(FileErrorKind::SizeMismatch {
                expected: PAGE_BYTES as u64,
                actual,
            }));
        }
        let mut h = vec![0u8; PAGE_BYTES];
        file.read_exact(&mut h).map_err(|e| fail(e.into()))?;
        let found: [u8; 8] = h[0..8].try_into().unwrap_or_default();
        if found != MAGIC {
            return Err(fail(FileErrorKind::WrongMagic {
                expected: "trawl page-packed index",
                found,
            }));
        }
        if crc32fast::hash(&h[..PAGE_BYTES - 4]) != le32(&h, PAGE_BYTES - 4) {
            return Err(fail(FileErrorKind::Checksum { what: "header" }));
        }
        let version = le32(&h, 8);
        if version == 0 || version > VERSION {
            return Err(fail(FileErrorKind::UnsupportedVersion {
                found: version,
                supported: VERSION,
            }));
        }
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
        Ok(Self {
            path: path.to_path_buf(),
            meta,
            geo,
            crcs,
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

    /// Memory this handle keeps (the checksum table).
    pub fn heap_bytes(&self) -> usize {
        self.crcs.capacity() * 4
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

    /// Decodes node `id`'s record from `bytes`, the pages read from its first page on
    /// ([`PackedGeometry::locate`]). `Err` with a message when the record is malformed
    /// (degree above R or an id out of range): the page is corrupt.
    #[inline]
    pub fn record<'a>(&self, id: u32, bytes: &'a [u8]) -> Result<RecordView<'a>, String> {
        let (_, at) = self.geo.locate(id);
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
        Ok(RecordView { vector, ids })
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
    };
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
    );
    let derived = (
        geo.record_bytes,
        geo.per_page,
        geo.pages_per_record,
        geo.data_pages,
        geo.checksum_pages,
    );
    if stored != derived {
        return Err(bad(format!(
            "stored geometry {stored:?} disagrees with the derived {derived:?}"
        )));
    }
    Ok((meta, geo, le32(h, 72)))
}

//! Reading a vector file: opened and checked, its vectors decoded by page or scanned in
//! order.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{CompressedGeometry, VectorWriteReport, MAGIC, PAGE_HEADER, RAW_FLAG, VERSION};
use crate::dir::file::read_header_page;
use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::DType;
use crate::kinds::graph::layout::decoupled::graph::{
    check_data_page, le16, le32, le64, page_crc_ok,
};
use crate::kinds::graph::layout::decoupled::huffman::{self, CodeTable};

/// An opened, checked vector file: code tables, chunk metadata and the first id of every page
/// in memory.
#[derive(Debug, Clone)]
pub struct CompressedVectorFile {
    path: PathBuf,
    geo: CompressedGeometry,
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

impl CompressedVectorFile {
    /// Opens `path`, checking the header, the length, the metadata's checksum and its
    /// consistency (tables, chunk page ranges, increasing page ids).
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(path, kind);
        let invalid = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let hp = read_header_page(path, MAGIC, "trawl decoupled vectors", VERSION..=VERSION)?;
        let (mut file, actual, h) = (hp.file, hp.len, hp.bytes);
        let dtype = DType::from_code(h[16]).ok_or_else(|| invalid("element type".into()))?;
        let geo = CompressedGeometry {
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
            crate::kinds::graph::layout::decoupled::vector_meta::parse(
                path, &geo, &meta, data_pages,
            )?;
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
    pub fn geometry(&self) -> &CompressedGeometry {
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
    /// [`CompressedVectorFile::locate`] gave) into `out` (`V` bytes), checking the page's CRC first when
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

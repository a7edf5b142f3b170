//! The slot file: full-precision vectors in 4 KiB pages, each at a slot, and the table that
//! maps a vector id to its slot. The IVF kind writes it with its vectors grouped in buckets by
//! their nearest centroid (FusionANNS §4.3; `ivf-vectors.trawl`), and by id for the ablation
//! baseline (`ivf-vectors-by-id.trawl`); the flat kind by id (`flat-vectors.trawl`).
//!
//! | pages | content |
//! |---|---|
//! | 0 | header: magic `TRAWLIVV`, version, shape, geometry, the CRCs of both tables, CRC of the page |
//! | 1 ..= data_pages | vectors: slot `s` at data page `s / per_page`, byte `(s % per_page) · vector_bytes` |
//! | then | the slot table: `n × u32` (the slot of each id), padded to a page |
//! | then | the page checksums: `data_pages × u32` (CRC-32 of each data page), padded to a page |
//!
//! A vector larger than a page takes `pages_per_vector` whole pages (`per_page = 0`): slot `s`
//! starts at data page `s · pages_per_vector`.
//!
//! **Bucket packing.** A bucket of `b` vectors fills `b / per_page` whole pages, laid out in
//! bucket order; the `b mod per_page` vectors left over are packed with other buckets' left
//! overs, largest first, each page topped up with the largest pieces that still fit (a
//! max-min / best-fit-decreasing rule), so pages waste little room. A bucket's left-over piece
//! is never split. The by-id layout (`slot = id`, no buckets) is the ablation baseline.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::dir::file::{read_header_page, seal_header_page};
use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kernels::DType;

const MAGIC: [u8; 8] = *b"TRAWLIVV";
const VERSION: u32 = 1;

/// Shape and geometry of a vector file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotGeometry {
    /// Vectors.
    pub n: u64,
    /// Dimension.
    pub dim: usize,
    /// Element type.
    pub dtype: DType,
    /// Bytes per vector.
    pub vector_bytes: usize,
    /// Vectors per page (0 when a vector spans pages).
    pub per_page: usize,
    /// Pages per vector when a vector spans pages (1 otherwise).
    pub pages_per_vector: usize,
    /// Data pages.
    pub data_pages: u64,
    /// Whether the slots follow buckets (else `slot = id`).
    pub bucketed: bool,
}

impl SlotGeometry {
    fn new(n: u64, dim: usize, dtype: DType, data_pages: u64, bucketed: bool) -> Self {
        let vector_bytes = dim * dtype.size_bytes();
        let per_page = PAGE_BYTES / vector_bytes.max(1);
        Self {
            n,
            dim,
            dtype,
            vector_bytes,
            per_page,
            pages_per_vector: if per_page == 0 {
                vector_bytes.div_ceil(PAGE_BYTES)
            } else {
                1
            },
            data_pages,
            bucketed,
        }
    }

    /// First file page (header included) and byte offset in it of slot `s`.
    #[inline]
    pub fn locate(&self, slot: u32) -> (u64, usize) {
        let s = slot as usize;
        match s.checked_div(self.per_page) {
            Some(page) => (1 + page as u64, (s % self.per_page) * self.vector_bytes),
            None => (1 + u64::from(slot) * self.pages_per_vector as u64, 0),
        }
    }

    fn table_pages(&self) -> (u64, u64) {
        let slot = (self.n * 4).div_ceil(PAGE_BYTES as u64);
        let crc = (self.data_pages * 4).div_ceil(PAGE_BYTES as u64);
        (slot, crc)
    }

    /// Bytes of the whole file.
    pub fn file_bytes(&self) -> u64 {
        let (s, c) = self.table_pages();
        (1 + self.data_pages + s + c) * PAGE_BYTES as u64
    }
}

/// Slots of every vector under the bucket layout: buckets in order, whole pages first, then
/// the left-over pieces packed. Returns `(slot of each id, data pages)`.
pub(crate) fn bucket_slots(
    n: usize,
    buckets: &[Vec<u32>],
    per_page: usize,
    pages_per_vector: usize,
) -> (Vec<u32>, u64) {
    let mut slot = vec![u32::MAX; n];
    if per_page == 0 {
        // Vectors span pages: no packing to do, buckets in order.
        let mut s = 0u32;
        for b in buckets {
            for &id in b {
                slot[id as usize] = s;
                s += 1;
            }
        }
        return (slot, u64::from(s) * pages_per_vector as u64);
    }
    let mut page = 0u64;
    let mut pieces: Vec<(usize, usize)> = Vec::new(); // (size, bucket)
    for (bi, b) in buckets.iter().enumerate() {
        let full = b.len() / per_page;
        for (j, &id) in b[..full * per_page].iter().enumerate() {
            slot[id as usize] = (page as usize * per_page + j) as u32;
        }
        page += full as u64;
        if b.len() % per_page != 0 {
            pieces.push((b.len() % per_page, bi));
        }
    }
    // Best-fit decreasing: open a page with the largest piece left, top it up with the
    // largest pieces that still fit.
    let mut by_size: Vec<Vec<usize>> = vec![Vec::new(); per_page];
    for &(size, bi) in pieces.iter().rev() {
        by_size[size].push(bi); // popped in bucket order
    }
    let mut left = pieces.len();
    while left > 0 {
        let mut room = per_page;
        let mut used = 0usize;
        while let Some(size) = (1..=room.min(per_page - 1))
            .rev()
            .find(|&s| !by_size[s].is_empty())
        {
            let Some(bi) = by_size[size].pop() else {
                break;
            };
            let b = &buckets[bi];
            for (j, &id) in b[b.len() - size..].iter().enumerate() {
                slot[id as usize] = (page as usize * per_page + used + j) as u32;
            }
            used += size;
            room -= size;
            left -= 1;
        }
        page += 1;
    }
    (slot, page)
}

/// Writes a vector file: `rows(id)` gives each vector's bytes, `slot[id]` its slot.
pub(crate) fn write<'d>(
    path: &Path,
    n: usize,
    dim: usize,
    dtype: DType,
    slot: &[u32],
    data_pages: u64,
    bucketed: bool,
    row: &dyn Fn(usize) -> &'d [u8],
) -> Result<u64, FileError> {
    let fail = |e: std::io::Error| FileError::new(path, e.into());
    let geo = SlotGeometry::new(n as u64, dim, dtype, data_pages, bucketed);
    // Inverse map: which id sits in each slot.
    let slots_total = if geo.per_page == 0 {
        data_pages as usize / geo.pages_per_vector
    } else {
        data_pages as usize * geo.per_page
    };
    let mut at = vec![u32::MAX; slots_total];
    for (id, &s) in slot.iter().enumerate() {
        at[s as usize] = id as u32;
    }
    let tmp = path.with_extension("trawl.tmp");
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(fail)?);
    out.write_all(&[0u8; PAGE_BYTES]).map_err(fail)?;
    let mut crcs = Vec::with_capacity(data_pages as usize);
    let mut page = vec![0u8; PAGE_BYTES * geo.pages_per_vector];
    let page_bytes = if geo.per_page == 0 {
        PAGE_BYTES * geo.pages_per_vector
    } else {
        PAGE_BYTES
    };
    let slots_per_unit = geo.per_page.max(1);
    for unit in at.chunks(slots_per_unit) {
        page[..page_bytes].fill(0);
        for (j, &id) in unit.iter().enumerate() {
            if id != u32::MAX {
                let off = j * geo.vector_bytes;
                page[off..off + geo.vector_bytes].copy_from_slice(row(id as usize));
            }
        }
        for p in page[..page_bytes].chunks(PAGE_BYTES) {
            crcs.push(crc32fast::hash(p));
        }
        out.write_all(&page[..page_bytes]).map_err(fail)?;
    }
    let pad = |out: &mut BufWriter<File>, bytes: usize| {
        let rest = bytes.next_multiple_of(PAGE_BYTES) - bytes;
        out.write_all(&vec![0u8; rest]).map_err(fail)
    };
    let slot_bytes: Vec<u8> = slot.iter().flat_map(|s| s.to_le_bytes()).collect();
    out.write_all(&slot_bytes).map_err(fail)?;
    pad(&mut out, slot_bytes.len())?;
    let crc_bytes: Vec<u8> = crcs.iter().flat_map(|s| s.to_le_bytes()).collect();
    out.write_all(&crc_bytes).map_err(fail)?;
    pad(&mut out, crc_bytes.len())?;
    let mut h = vec![0u8; PAGE_BYTES];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&(n as u64).to_le_bytes());
    h[20..24].copy_from_slice(&(dim as u32).to_le_bytes());
    h[24] = dtype.code();
    h[25] = u8::from(bucketed);
    h[28..36].copy_from_slice(&data_pages.to_le_bytes());
    h[36..40].copy_from_slice(&crc32fast::hash(&slot_bytes).to_le_bytes());
    h[40..44].copy_from_slice(&crc32fast::hash(&crc_bytes).to_le_bytes());
    seal_header_page(&mut h);
    let mut file = out.into_inner().map_err(|e| fail(e.into_error()))?;
    file.seek(SeekFrom::Start(0)).map_err(fail)?;
    file.write_all(&h).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(fail)?;
    Ok(geo.file_bytes())
}

/// A vector file opened: its geometry, the slot of every id and the page checksums.
#[derive(Debug)]
pub struct SlotFile {
    geo: SlotGeometry,
    slot: Vec<u32>,
    /// The inverse of `slot`: the id in each slot (`u32::MAX` for an empty one).
    ids: Vec<u32>,
    page_crcs: Vec<u32>,
    occupancy: Vec<u16>,
    header_crc: u32,
}

impl SlotFile {
    /// Opens and checks `path`: header, size, both tables' checksums, and that the slot table
    /// is a one-to-one map into the data pages.
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let bad = |kind: FileErrorKind| FileError::new(path, kind);
        let hp = read_header_page(path, MAGIC, "trawl IVF vector", 1..=VERSION)?;
        let h = &hp.bytes;
        let u32_at = |a: usize| u32::from_le_bytes(h[a..a + 4].try_into().unwrap_or_default());
        let u64_at = |a: usize| u64::from_le_bytes(h[a..a + 8].try_into().unwrap_or_default());
        let n = u64_at(12);
        let dim = u32_at(20) as usize;
        let dtype = DType::from_code(h[24])
            .ok_or_else(|| bad(FileErrorKind::Invalid(format!("element type {}", h[24]))))?;
        if dim == 0 || n >= u64::from(u32::MAX) {
            return Err(bad(FileErrorKind::Invalid(format!("n {n}, dim {dim}"))));
        }
        let data_pages = u64_at(28);
        // Bounded by the file's pages first: the size below cannot overflow.
        if data_pages > hp.len / PAGE_BYTES as u64 {
            return Err(bad(FileErrorKind::Invalid(format!(
                "{data_pages} data pages in a file of {} bytes",
                hp.len
            ))));
        }
        let geo = SlotGeometry::new(n, dim, dtype, data_pages, h[25] != 0);
        if geo.file_bytes() != hp.len {
            return Err(bad(FileErrorKind::SizeMismatch {
                expected: geo.file_bytes(),
                actual: hp.len,
            }));
        }
        let (slot_pages, _) = geo.table_pages();
        let mut file = hp.file;
        let read_at = |file: &mut File, page: u64, bytes: usize| -> Result<Vec<u8>, FileError> {
            let mut v = vec![0u8; bytes];
            file.seek(SeekFrom::Start(page * PAGE_BYTES as u64))
                .and_then(|_| file.read_exact(&mut v))
                .map_err(|e| FileError::new(path, e.into()))?;
            Ok(v)
        };
        let slot_bytes = read_at(&mut file, 1 + geo.data_pages, n as usize * 4)?;
        if crc32fast::hash(&slot_bytes) != u32_at(36) {
            return Err(bad(FileErrorKind::Checksum { what: "slot table" }));
        }
        let crc_bytes = read_at(
            &mut file,
            1 + geo.data_pages + slot_pages,
            geo.data_pages as usize * 4,
        )?;
        if crc32fast::hash(&crc_bytes) != u32_at(40) {
            return Err(bad(FileErrorKind::Checksum {
                what: "page checksum table",
            }));
        }
        let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let slot: Vec<u32> = slot_bytes.chunks_exact(4).map(le).collect();
        let page_crcs = crc_bytes.chunks_exact(4).map(le).collect();
        let slots_total = if geo.per_page == 0 {
            geo.data_pages / geo.pages_per_vector as u64
        } else {
            geo.data_pages * geo.per_page as u64
        };
        let mut ids = vec![u32::MAX; slots_total as usize];
        for (id, &s) in slot.iter().enumerate() {
            match ids.get_mut(s as usize) {
                Some(x) if *x == u32::MAX => *x = id as u32,
                _ => {
                    return Err(bad(FileErrorKind::Invalid(format!(
                        "slot {s} of vector {id} is out of range or taken twice"
                    ))))
                }
            }
        }
        let mut occupancy = vec![0u16; geo.data_pages as usize];
        for &s in &slot {
            let (page, _) = geo.locate(s);
            occupancy[page as usize - 1] += 1;
        }
        Ok(Self {
            geo,
            slot,
            ids,
            page_crcs,
            occupancy,
            header_crc: u32_at(PAGE_BYTES - 4),
        })
    }

    /// Shape and geometry.
    pub fn geometry(&self) -> &SlotGeometry {
        &self.geo
    }

    /// First file page and byte offset of vector `id`'s bytes.
    #[inline]
    pub fn locate(&self, id: u32) -> (u64, usize) {
        self.geo.locate(self.slot[id as usize])
    }

    /// The slot of every id.
    pub fn slots(&self) -> &[u32] {
        &self.slot
    }

    /// The stored CRC-32 of file page `page` (a data page).
    #[inline]
    pub fn page_crc(&self, page: u64) -> Option<u32> {
        self.page_crcs.get(page.checked_sub(1)? as usize).copied()
    }

    /// The CRC of the header page (what the manifest records).
    pub fn header_crc(&self) -> u32 {
        self.header_crc
    }

    /// Memory held: the slot table, its inverse and the page checksums.
    pub fn heap_bytes(&self) -> u64 {
        ((self.slot.len() + self.ids.len()) * 4 + self.page_crcs.len() * 6) as u64
    }

    /// The ids stored on data page `page` (file page number), in slot order, `u32::MAX` for an
    /// empty slot; empty when vectors span pages or `page` is not a data page.
    #[inline]
    pub fn ids_on_page(&self, page: u64) -> &[u32] {
        let per = self.geo.per_page;
        if per == 0 || page == 0 || page > self.geo.data_pages {
            return &[];
        }
        let first = (page - 1) as usize * per;
        self.ids.get(first..first + per).unwrap_or(&[])
    }

    /// Reads every data page of the file at `path` (this one) and checks it against its
    /// checksum; returns the pages checked.
    pub fn verify_all(
        &self,
        path: &Path,
        ctl: &crate::progress::Control,
    ) -> Result<u64, FileError> {
        let fail = |kind: FileErrorKind| FileError::new(path, kind);
        let mut file = File::open(path).map_err(|e| fail(e.into()))?;
        file.seek(SeekFrom::Start(PAGE_BYTES as u64))
            .map_err(|e| fail(e.into()))?;
        let pages = self.geo.data_pages;
        let bar = ctl.bar("verifying vector pages", pages);
        let mut buf = vec![0u8; 256 * PAGE_BYTES];
        let mut page = 1u64;
        while page <= pages {
            ctl.check()
                .map_err(|c| fail(FileErrorKind::Invalid(c.to_string())))?;
            let count = (pages + 1 - page).min(256) as usize;
            let chunk = &mut buf[..count * PAGE_BYTES];
            file.read_exact(chunk).map_err(|e| fail(e.into()))?;
            for (j, bytes) in chunk.chunks(PAGE_BYTES).enumerate() {
                let at = page + j as u64;
                if Some(crc32fast::hash(bytes)) != self.page_crc(at) {
                    return Err(fail(FileErrorKind::PageChecksum { page: at }));
                }
            }
            page += count as u64;
            bar.inc(count as u64);
        }
        bar.finish_and_clear();
        Ok(pages)
    }

    /// Vectors on file page `page` (the vectors a read of it brings in; for a vector spanning
    /// pages, 1 on its first page).
    #[inline]
    pub fn vectors_on_page(&self, page: u64) -> u64 {
        page.checked_sub(1)
            .and_then(|p| self.occupancy.get(p as usize))
            .map_or(0, |&c| u64::from(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_packing_places_every_vector_once_and_wastes_little() {
        let per_page = 10;
        let mut buckets = Vec::new();
        let mut next = 0u32;
        for b in 0..500usize {
            let size = 1 + (b * 7919) % 23;
            buckets.push((next..next + size as u32).collect::<Vec<_>>());
            next += size as u32;
        }
        let n = next as usize;
        let (slot, pages) = bucket_slots(n, &buckets, per_page, 1);
        let mut seen = vec![false; pages as usize * per_page];
        for &s in &slot {
            assert!(!seen[s as usize]);
            seen[s as usize] = true;
        }
        // Lower bound: every page full.
        let lower = n.div_ceil(per_page) as u64;
        assert!(
            pages <= lower + lower / 50 + 1,
            "{pages} pages for {n} vectors"
        );
        // A bucket's whole pages hold only that bucket's vectors.
        for b in &buckets {
            let full = b.len() / per_page;
            for &id in &b[..full * per_page] {
                let page = slot[id as usize] as usize / per_page;
                assert!(
                    b[..full * per_page]
                        .iter()
                        .filter(|&&j| slot[j as usize] as usize / per_page == page)
                        .count()
                        == per_page
                );
            }
            // The left-over piece is on one page.
            let rest: Vec<usize> = b[full * per_page..]
                .iter()
                .map(|&id| slot[id as usize] as usize / per_page)
                .collect();
            assert!(rest.windows(2).all(|w| w[0] == w[1]));
        }
    }
}

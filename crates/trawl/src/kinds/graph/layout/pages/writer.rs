//! Writing a page-node file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kinds::graph::layout::decoupled::elias_fano;
use crate::kinds::graph::layout::pages::{
    room_bytes, PagesMeta, MAGIC, NO_PAGE, NO_VECTOR, PAGE_HEAD, VERSION,
};

fn invalid(path: &Path, msg: String) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg))
}

/// Writes the page-node file of `meta` at `path`: page node `p` holds the vectors
/// `pages[p]` (their bytes from `vector`, `V` each) and the sorted page list `lists[p]`;
/// `page_of` gives each vector's page (`n` entries, checked against `pages`). `meta.pages`,
/// `max_degree` and `placed` are taken from the arguments. The file is synced before this
/// returns; its bytes are returned.
pub fn write_file<'v>(
    path: &Path,
    meta: &PagesMeta,
    pages: &[Vec<u32>],
    lists: &[Vec<u32>],
    page_of: &[u32],
    vector: impl Fn(u32) -> &'v [u8],
    mut tick: impl FnMut(),
) -> Result<u64, FileError> {
    let io = |e: std::io::Error| FileError::new(path, e.into());
    let n = meta.n;
    if n == 0 || n > u64::from(u32::MAX - 1) || page_of.len() as u64 != n {
        return Err(invalid(
            path,
            format!("n = {n}, page table of {}", page_of.len()),
        ));
    }
    if pages.len() != lists.len() || pages.is_empty() || meta.medoid as u64 >= n {
        return Err(invalid(
            path,
            format!(
                "{} pages, {} lists, medoid {}",
                pages.len(),
                lists.len(),
                meta.medoid
            ),
        ));
    }
    let cap = meta.capacity;
    // The page count is the lists' universe.
    let meta = &PagesMeta {
        pages: pages.len() as u64,
        ..*meta
    };
    let file = File::create(path).map_err(io)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(&[0u8; PAGE_BYTES]).map_err(io)?;
    let mut crcs: Vec<u32> = Vec::with_capacity(pages.len());
    let mut buf = vec![0u8; PAGE_BYTES];
    let mut coded = Vec::new();
    let (mut placed, mut max_degree) = (0u64, 0usize);
    for (p, (members, list)) in pages.iter().zip(lists).enumerate() {
        let m = members.len();
        encode_page(
            path, meta, p, members, list, page_of, &vector, &mut coded, &mut buf,
        )?;
        crcs.push(crc32fast::hash(&buf));
        out.write_all(&buf).map_err(io)?;
        placed += m as u64;
        max_degree = max_degree.max(list.len());
        tick();
    }
    if placed != page_of.iter().filter(|&&p| p != NO_PAGE).count() as u64 {
        return Err(invalid(
            path,
            "the pages and the page table disagree".into(),
        ));
    }
    let table_bytes = |entries: usize| (4 * entries).div_ceil(PAGE_BYTES) * PAGE_BYTES;
    let mut tail = Vec::with_capacity(table_bytes(crcs.len()));
    for c in &crcs {
        tail.extend_from_slice(&c.to_le_bytes());
    }
    let crc_table_crc = crc32fast::hash(&tail);
    let crc_pages = table_bytes(crcs.len()) / PAGE_BYTES;
    tail.resize(table_bytes(crcs.len()), 0);
    out.write_all(&tail).map_err(io)?;
    tail.clear();
    for members in pages {
        for i in 0..cap {
            tail.extend_from_slice(&members.get(i).copied().unwrap_or(NO_VECTOR).to_le_bytes());
        }
    }
    let page_table_crc = crc32fast::hash(&tail);
    let table_pages = table_bytes(pages.len() * cap) / PAGE_BYTES;
    tail.resize(table_bytes(pages.len() * cap), 0);
    out.write_all(&tail).map_err(io)?;
    let mut file = out.into_inner().map_err(|e| io(e.into_error()))?;
    let h = header(
        meta,
        pages.len(),
        max_degree,
        placed,
        [crc_pages, table_pages],
        [crc_table_crc, page_table_crc],
    );
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(&h).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(((1 + pages.len() + crc_pages + table_pages) * PAGE_BYTES) as u64)
}

/// The header page of a file of `pages` page nodes; `tables`: the checksum and order tables'
/// pages, `crcs` their entries' CRCs.
fn header(
    meta: &PagesMeta,
    pages: usize,
    max_degree: usize,
    placed: u64,
    tables: [usize; 2],
    crcs: [u32; 2],
) -> [u8; PAGE_BYTES] {
    let [crc_pages, table_pages] = tables;
    let [crc_table_crc, page_table_crc] = crcs;
    let n = meta.n;
    let mut h = [0u8; PAGE_BYTES];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(PAGE_BYTES as u32).to_le_bytes());
    h[16] = meta.dtype.code();
    h[17] = meta.metric.code();
    h[20..24].copy_from_slice(&(meta.dim as u32).to_le_bytes());
    h[24..32].copy_from_slice(&n.to_le_bytes());
    h[32..40].copy_from_slice(&(pages as u64).to_le_bytes());
    h[40..44].copy_from_slice(&(meta.capacity as u32).to_le_bytes());
    h[44..48].copy_from_slice(&meta.medoid.to_le_bytes());
    h[48..52].copy_from_slice(&(max_degree as u32).to_le_bytes());
    h[52..56].copy_from_slice(&meta.pq_crc.to_le_bytes());
    h[56..64].copy_from_slice(&(crc_pages as u64).to_le_bytes());
    h[64..68].copy_from_slice(&crc_table_crc.to_le_bytes());
    h[68..72].copy_from_slice(&meta.pq_codes_crc.to_le_bytes());
    h[72..80].copy_from_slice(&(table_pages as u64).to_le_bytes());
    h[80..84].copy_from_slice(&page_table_crc.to_le_bytes());
    h[84..88].copy_from_slice(&(meta.pq_bytes as u32).to_le_bytes());
    h[88..96].copy_from_slice(&placed.to_le_bytes());
    h[96..100].copy_from_slice(&(meta.graph_r as u32).to_le_bytes());
    h[100..104].copy_from_slice(&(meta.hops as u32).to_le_bytes());
    h[104..108].copy_from_slice(&(meta.min_degree as u32).to_le_bytes());
    h[108..112].copy_from_slice(&(meta.degree_cap as u32).to_le_bytes());
    let hc = crc32fast::hash(&h[..PAGE_BYTES - 4]);
    h[PAGE_BYTES - 4..].copy_from_slice(&hc.to_le_bytes());
    h
}

/// Encodes page node `p` (its `members`, their vectors, its `list`) into `buf`.
#[allow(clippy::too_many_arguments)]
fn encode_page<'v>(
    path: &Path,
    meta: &PagesMeta,
    p: usize,
    members: &[u32],
    list: &[u32],
    page_of: &[u32],
    vector: &impl Fn(u32) -> &'v [u8],
    coded: &mut Vec<u8>,
    buf: &mut [u8],
) -> Result<(), FileError> {
    let (m, v) = (members.len(), meta.vector_bytes());
    let room = room_bytes(m, v).filter(|_| m > 0 && m <= meta.capacity);
    let Some(room) = room else {
        return Err(invalid(path, format!("page {p}: {m} vectors")));
    };
    coded.clear();
    elias_fano::encode(list, meta.pages as u32, coded)
        .map_err(|e| invalid(path, format!("page {p}: {e}")))?;
    if coded.len() > room || list.len() > u16::MAX as usize {
        return Err(invalid(
            path,
            format!(
                "page {p}: a list of {} entries needs {} bytes, {room} left",
                list.len(),
                coded.len()
            ),
        ));
    }
    buf.fill(0);
    buf[0..2].copy_from_slice(&(m as u16).to_le_bytes());
    buf[2..4].copy_from_slice(&(list.len() as u16).to_le_bytes());
    buf[4..6].copy_from_slice(&(coded.len() as u16).to_le_bytes());
    let mut at = PAGE_HEAD;
    for &id in members {
        if page_of.get(id as usize) != Some(&(p as u32)) {
            return Err(invalid(
                path,
                format!("page {p}: vector {id} is not in the page table there"),
            ));
        }
        buf[at..at + 4].copy_from_slice(&id.to_le_bytes());
        at += 4;
    }
    for &id in members {
        let bytes = vector(id);
        if bytes.len() != v {
            return Err(invalid(
                path,
                format!("vector {id}: {} bytes, {v} expected", bytes.len()),
            ));
        }
        buf[at..at + v].copy_from_slice(bytes);
        at += v;
    }
    buf[at..at + coded.len()].copy_from_slice(coded);
    Ok(())
}

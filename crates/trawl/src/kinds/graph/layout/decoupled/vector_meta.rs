//! The metadata pages of the decoupled layout's vector file, parsed and checked when the file
//! opens ([`super::vectors::CompressedVectorFile::open`]).

use std::path::Path;

use crate::dir::{FileError, FileErrorKind};
use crate::kinds::graph::layout::decoupled::graph::le32;
use crate::kinds::graph::layout::decoupled::huffman::CodeTable;
use crate::kinds::graph::layout::decoupled::vectors::CompressedGeometry;

/// What the metadata pages of a decoupled vector file hold, checked: the code tables of every
/// segment and lane, each chunk's page range, flag and base vector, and each data page's first
/// id.
pub(crate) type Meta = (
    Vec<Vec<CodeTable>>,
    Vec<(u32, u32, bool)>,
    Vec<u8>,
    Vec<u32>,
);

/// Parses and checks the metadata pages `meta` of the vector file at `path` (see [`Meta`]).
pub(crate) fn parse(
    path: &Path,
    geo: &CompressedGeometry,
    meta: &[u8],
    data_pages: u64,
) -> Result<Meta, FileError> {
    let invalid = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
    let v = geo.vector_bytes() as u64;
    let mut at = 0usize;
    let mut tables = Vec::new();
    for _ in 0..geo.segments() {
        let mut seg = Vec::new();
        for _ in 0..geo.lanes() {
            let lens: [u8; 256] = meta[at..at + 256].try_into().unwrap_or([0; 256]);
            seg.push(CodeTable::from_lengths(&lens).map_err(|e| invalid(e.to_string()))?);
            at += 256;
        }
        tables.push(seg);
    }
    let mut chunks = Vec::new();
    let mut bases = Vec::with_capacity(geo.chunks() as usize * v as usize);
    let mut expect_first = 0u32;
    for _ in 0..geo.chunks() {
        let first = le32(meta, at);
        let count = le32(meta, at + 4);
        let flags = le32(meta, at + 8);
        let next = first
            .checked_add(count)
            .filter(|&e| u64::from(e) <= data_pages);
        let Some(next) = next.filter(|_| first == expect_first && count != 0 && flags <= 1) else {
            return Err(invalid("chunk page ranges are not consecutive".into()));
        };
        expect_first = next;
        chunks.push((first, count, flags == 1));
        bases.extend_from_slice(&meta[at + 12..at + 12 + v as usize]);
        at += 12 + v as usize;
    }
    if u64::from(expect_first) != data_pages {
        return Err(invalid("chunks do not cover the data pages".into()));
    }
    let page_first_id: Vec<u32> = meta[at..at + 4 * data_pages as usize]
        .chunks_exact(4)
        .map(|b| le32(b, 0))
        .collect();
    if page_first_id.windows(2).any(|w| w[0] >= w[1])
        || page_first_id[0] != 0
        || u64::from(*page_first_id.last().unwrap_or(&0)) >= geo.n
    {
        return Err(invalid("page first ids are not increasing within n".into()));
    }
    for (c, &(first, count, _)) in chunks.iter().enumerate() {
        let lo = c as u64 * geo.chunk_vectors;
        if u64::from(page_first_id[first as usize]) != lo
            || u64::from(page_first_id[(first + count - 1) as usize])
                >= (lo + geo.chunk_vectors).min(geo.n)
        {
            return Err(invalid(format!("chunk {c}'s pages hold other ids")));
        }
    }
    Ok((tables, chunks, bases, page_first_id))
}

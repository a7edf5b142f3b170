//! Range results: every vector within a radius of each query, a variable number per query
//! ([`RangeResults`]), and their file, big-ann-benchmarks' range format.
//!
//! **Range ground truth** (big-ann-benchmarks), all little-endian:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | `nq`, queries (int32, ≥ 0) |
//! | 4 | 4 | `total`, results over all queries (int32, ≥ 0) |
//! | 8 | nq·4 | results of each query (int32, ≥ 0, summing to `total`) |
//! | 8 + nq·4 | total·4 | ids (int32, ≥ 0), query by query, in the order of the counts |
//! | 8 + nq·4 + total·4 | total·4 | distances (float32), alongside the ids |
//!
//! [`write_range_results`] writes atomically (temporary name, sync, rename);
//! [`read_range_results`] checks the size against the header before allocating anything.

use std::path::Path;

use crate::data::error::{DataError, DataErrorKind, Result};
use crate::data::write::AtomicFile;

/// Every result within a radius, per query: query `q`'s results are
/// `ids[lims[q]..lims[q + 1]]` (with `dists` alongside), nearest first, ties by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangeResults {
    /// `nq + 1` offsets into `ids` / `dists`, from 0 to the total.
    pub lims: Vec<usize>,
    /// Ids (row numbers).
    pub ids: Vec<u64>,
    /// Exact distances.
    pub dists: Vec<f32>,
}

impl RangeResults {
    /// No query yet.
    pub fn new() -> Self {
        Self {
            lims: vec![0],
            ids: Vec::new(),
            dists: Vec::new(),
        }
    }

    /// Queries.
    pub fn nq(&self) -> usize {
        self.lims.len().saturating_sub(1)
    }

    /// Results over all queries.
    pub fn total(&self) -> usize {
        self.ids.len()
    }

    /// Query `q`'s ids.
    pub fn ids_of(&self, q: usize) -> &[u64] {
        &self.ids[self.lims[q]..self.lims[q + 1]]
    }

    /// Query `q`'s distances.
    pub fn dists_of(&self, q: usize) -> &[f32] {
        &self.dists[self.lims[q]..self.lims[q + 1]]
    }

    /// Appends one query's results (nearest first).
    pub fn push(&mut self, hits: impl IntoIterator<Item = (u64, f32)>) {
        if self.lims.is_empty() {
            self.lims.push(0);
        }
        for (id, d) in hits {
            self.ids.push(id);
            self.dists.push(d);
        }
        self.lims.push(self.ids.len());
    }
}

/// Writes `r` in big-ann-benchmarks' range format (see the module docs), atomically.
///
/// Empty `lims` (as in `RangeResults::default()`) with no results count as zero queries.
///
/// # Errors
/// [`DataErrorKind::InvalidInput`] when `r` is inconsistent (`lims` not non-decreasing from 0 to
/// `ids.len()`, `dists` of another length) or does not fit the format's int32 fields (more than
/// `i32::MAX` queries, results or an id above `i32::MAX`); an I/O error otherwise.
pub fn write_range_results(path: &Path, r: &RangeResults) -> Result<()> {
    check_range_results(r).map_err(|m| DataError::new(path, DataErrorKind::InvalidInput(m)))?;
    let mut f = AtomicFile::create(path)?;
    f.write(&(r.nq() as i32).to_le_bytes())?;
    f.write(&(r.total() as i32).to_le_bytes())?;
    for w in r.lims.windows(2) {
        f.write(&((w[1] - w[0]) as i32).to_le_bytes())?;
    }
    // Ids fit in i32 (checked), so their low 32 bits are the int32 value.
    for chunk in r.ids.chunks(1 << 14) {
        let words: Vec<u32> = chunk.iter().map(|&id| id as u32).collect();
        f.write(bytemuck::cast_slice(&words))?;
    }
    f.write(bytemuck::cast_slice(&r.dists))?;
    f.finish(&[])
}

/// Why `r` cannot be written, if it cannot.
fn check_range_results(r: &RangeResults) -> std::result::Result<(), String> {
    let max = i32::MAX as usize;
    if r.lims.is_empty() && r.ids.is_empty() && r.dists.is_empty() {
        return Ok(()); // `RangeResults::default()`: no query
    }
    if r.lims.first() != Some(&0) {
        return Err("range results: lims must start at 0".into());
    }
    if r.lims.windows(2).any(|w| w[1] < w[0]) {
        return Err("range results: lims are not non-decreasing".into());
    }
    if r.lims.last() != Some(&r.ids.len()) {
        return Err(format!(
            "range results: lims end at {} but there are {} ids",
            r.lims.last().copied().unwrap_or(0),
            r.ids.len()
        ));
    }
    if r.dists.len() != r.ids.len() {
        return Err(format!(
            "range results: {} ids but {} distances",
            r.ids.len(),
            r.dists.len()
        ));
    }
    if r.nq() > max {
        return Err(format!(
            "range results: {} queries, more than the format's int32 allows",
            r.nq()
        ));
    }
    if r.total() > max {
        return Err(format!(
            "range results: {} results, more than the format's int32 allows",
            r.total()
        ));
    }
    if let Some(id) = r.ids.iter().find(|&&id| id > i32::MAX as u64) {
        return Err(format!(
            "range results: id {id} does not fit the format's int32 ids"
        ));
    }
    Ok(())
}

/// Reads a range ground-truth file (see the module docs), validating it: the size must be
/// exactly `8 + 4·nq + 8·total` bytes, the counts and ids non-negative and the counts must sum
/// to `total`.
///
/// # Errors
/// A [`DataError`] naming the file: [`DataErrorKind::Truncated`] / [`DataErrorKind::SizeMismatch`]
/// when the size does not match the header, [`DataErrorKind::BadHeader`] for negative or
/// inconsistent fields, an I/O error otherwise.
pub fn read_range_results(path: &Path) -> Result<RangeResults> {
    use std::io::Read;
    let fail = |kind| DataError::new(path, kind);
    let mut file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let size = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    if size < 8 {
        return Err(fail(DataErrorKind::Truncated {
            expected: 8,
            actual: size,
        }));
    }
    let mut header = [0u8; 8];
    file.read_exact(&mut header)
        .map_err(|e| DataError::io(path, e))?;
    let nq = i32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let total = i32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if nq < 0 || total < 0 {
        return Err(fail(DataErrorKind::BadHeader(format!(
            "{nq} queries with {total} results in all"
        ))));
    }
    let (nq, total) = (nq as u64, total as u64);
    let expected = 8 + 4 * nq + 8 * total; // both < 2³¹: no overflow
    if size < expected {
        return Err(fail(DataErrorKind::Truncated {
            expected,
            actual: size,
        }));
    }
    if size > expected {
        return Err(fail(DataErrorKind::SizeMismatch {
            expected,
            actual: size,
        }));
    }
    // The size matches the header: allocating what it says is bounded by the file's length.
    let mut bytes = Vec::with_capacity((expected - 8) as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| DataError::io(path, e))?;
    if bytes.len() as u64 != expected - 8 {
        // The file changed size while it was read.
        return Err(fail(DataErrorKind::Truncated {
            expected,
            actual: 8 + bytes.len() as u64,
        }));
    }
    let (nq, total) = (nq as usize, total as usize);
    let (counts, rest) = bytes.split_at(4 * nq);
    let (ids, dists) = rest.split_at(4 * total);
    decode(counts, ids, dists, total).map_err(|m| fail(DataErrorKind::BadHeader(m)))
}

/// Decodes the three arrays of a range file whose size has been checked.
fn decode(
    counts: &[u8],
    ids: &[u8],
    dists: &[u8],
    total: usize,
) -> std::result::Result<RangeResults, String> {
    let mut lims = Vec::with_capacity(counts.len() / 4 + 1);
    lims.push(0usize);
    let mut sum = 0usize;
    for (q, w) in counts.chunks_exact(4).enumerate() {
        let c = i32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        if c < 0 {
            return Err(format!("query {q} has {c} results, a negative count"));
        }
        sum = match sum.checked_add(c as usize).filter(|&s| s <= total) {
            Some(s) => s,
            None => {
                return Err(format!(
                    "the counts of queries 0..={q} exceed the header's {total} results"
                ))
            }
        };
        lims.push(sum);
    }
    if sum != total {
        return Err(format!(
            "the per-query counts sum to {sum}, but the header says {total} results"
        ));
    }
    let mut out_ids = Vec::with_capacity(total);
    for (i, w) in ids.chunks_exact(4).enumerate() {
        let id = i32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        if id < 0 {
            return Err(format!("result {i} has the negative id {id}"));
        }
        out_ids.push(id as u64);
    }
    let out_dists = dists
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(RangeResults {
        lims,
        ids: out_ids,
        dists: out_dists,
    })
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod range_tests;

//! Ground truth: the exact `k` nearest neighbours of each query, and its two file formats.
//!
//! **DiskANN / big-ann ground truth** (any extension but `.ivecs`):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | `nq`, queries (int32 LE, > 0) |
//! | 4 | 4 | `k`, neighbours per query (int32 LE, > 0) |
//! | 8 | nq·k·4 | ids, u32 LE, row-major, nearest first |
//! | 8 + nq·k·4 | nq·k·4 | distances, f32 LE (absent in the ids-only variant) |
//!
//! **`.ivecs`** (texmex ground truth, ids only), per query: int32 `k`, then `k` int32 ids.
//!
//! Files are written atomically (temporary name, sync, rename).

use std::path::Path;

use crate::data::error::{DataError, DataErrorKind, Result};
use crate::data::write::AtomicFile;

/// The `k` nearest base ids of each of `nq` queries, nearest first, with their distances.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundTruth {
    /// Number of queries.
    pub nq: usize,
    /// Neighbours per query.
    pub k: usize,
    /// Row-major `nq × k` base ids.
    pub ids: Vec<u32>,
    /// Row-major `nq × k` distances (trawl's distance of the metric, see [`crate::kernels`]);
    /// empty when the source had ids only (`.ivecs`, ids-only bin files).
    pub dists: Vec<f32>,
}

impl GroundTruth {
    /// Ids of query `q`.
    pub fn ids(&self, q: usize) -> &[u32] {
        &self.ids[q * self.k..(q + 1) * self.k]
    }

    /// Distances of query `q` (empty when the ground truth has no distances).
    pub fn dists(&self, q: usize) -> &[f32] {
        self.dists.get(q * self.k..(q + 1) * self.k).unwrap_or(&[])
    }

    /// Whether distances are present.
    pub fn has_dists(&self) -> bool {
        !self.dists.is_empty()
    }
}

/// Reads a ground-truth file: `.ivecs` by extension, otherwise the DiskANN / big-ann layout
/// (with or without distances, told apart by the file size).
pub fn read_ground_truth(path: &Path) -> Result<GroundTruth> {
    if is_ivecs(path) {
        return read_ivecs(path);
    }
    let fail = |kind| DataError::new(path, kind);
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let size = bytes.len() as u64;
    if size == 0 {
        return Err(fail(DataErrorKind::Empty));
    }
    if size < 8 {
        return Err(fail(DataErrorKind::Truncated {
            expected: 8,
            actual: size,
        }));
    }
    let nq = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let k = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if nq < 0 || k <= 0 {
        return Err(fail(DataErrorKind::BadHeader(format!(
            "{nq} queries × {k} neighbours"
        ))));
    }
    if nq == 0 {
        return Err(fail(DataErrorKind::Empty));
    }
    let (nq, k) = (nq as usize, k as usize);
    let m = nq as u64 * k as u64; // both < 2³¹: m < 2⁶²
    let full = m.saturating_mul(8).saturating_add(8);
    let ids_only = 8 + 4 * m;
    let with_dists = if size == full {
        true
    } else if size == ids_only {
        false
    } else if size < full {
        return Err(fail(DataErrorKind::Truncated {
            expected: if size < ids_only { ids_only } else { full },
            actual: size,
        }));
    } else {
        return Err(fail(DataErrorKind::SizeMismatch {
            expected: full,
            actual: size,
        }));
    };
    let m = m as usize;
    let ids = le_words(&bytes[8..8 + 4 * m], u32::from_le_bytes);
    let dists = if with_dists {
        le_words(&bytes[8 + 4 * m..], f32::from_le_bytes)
    } else {
        Vec::new()
    };
    Ok(GroundTruth { nq, k, ids, dists })
}

/// Reads a `.ivecs` file as id lists (a [`GroundTruth`] without distances). Negative ids are
/// a [`DataErrorKind::BadHeader`] error.
pub fn read_ivecs(path: &Path) -> Result<GroundTruth> {
    let fail = |kind| DataError::new(path, kind);
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let size = bytes.len() as u64;
    if size == 0 {
        return Err(fail(DataErrorKind::Empty));
    }
    if size < 4 {
        return Err(fail(DataErrorKind::Truncated {
            expected: 4,
            actual: size,
        }));
    }
    let words: Vec<i32> = le_words(&bytes[..bytes.len() / 4 * 4], i32::from_le_bytes);
    let k = words[0];
    if k <= 0 {
        return Err(fail(DataErrorKind::BadHeader(format!(
            "row 0 has {k} ids, which is not positive"
        ))));
    }
    let stride = k as usize + 1;
    let mut ids = Vec::with_capacity(words.len());
    for (row, chunk) in words.chunks(stride).enumerate() {
        if chunk[0] != k {
            return Err(fail(DataErrorKind::InconsistentDim {
                row: row as u64,
                expected: k as u64,
                found: chunk[0] as i64,
            }));
        }
        if chunk.len() < stride {
            let rows = (size / 4).div_ceil(stride as u64);
            return Err(fail(DataErrorKind::Truncated {
                expected: rows * stride as u64 * 4,
                actual: size,
            }));
        }
        if let Some(bad) = chunk[1..].iter().find(|&&id| id < 0) {
            return Err(fail(DataErrorKind::BadHeader(format!(
                "row {row} holds the negative id {bad}"
            ))));
        }
        ids.extend(chunk[1..].iter().map(|&id| id as u32));
    }
    let row_bytes = 4 * stride as u64;
    if !size.is_multiple_of(row_bytes) {
        return Err(fail(DataErrorKind::Truncated {
            expected: size.div_ceil(row_bytes) * row_bytes,
            actual: size,
        }));
    }
    Ok(GroundTruth {
        nq: words.len() / stride,
        k: k as usize,
        ids,
        dists: Vec::new(),
    })
}

/// Writes `gt` in the DiskANN / big-ann layout (ids only when `gt` has no distances).
pub fn write_ground_truth(path: &Path, gt: &GroundTruth) -> Result<()> {
    check_shape(path, gt)?;
    let mut f = AtomicFile::create(path)?;
    f.write(&(gt.nq as i32).to_le_bytes())?;
    f.write(&(gt.k as i32).to_le_bytes())?;
    f.write(bytemuck::cast_slice(&gt.ids))?;
    f.write(bytemuck::cast_slice(&gt.dists))?;
    f.finish(&[])
}

/// Writes the ids of `gt` as `.ivecs` (distances are dropped).
pub fn write_ivecs(path: &Path, gt: &GroundTruth) -> Result<()> {
    check_shape(path, gt)?;
    let mut f = AtomicFile::create(path)?;
    for q in 0..gt.nq {
        f.write(&(gt.k as i32).to_le_bytes())?;
        f.write(bytemuck::cast_slice(gt.ids(q)))?;
    }
    f.finish(&[])
}

fn check_shape(path: &Path, gt: &GroundTruth) -> Result<()> {
    let m = gt.nq.checked_mul(gt.k);
    let ok = gt.nq <= i32::MAX as usize
        && gt.k > 0
        && gt.k <= i32::MAX as usize
        && m == Some(gt.ids.len())
        && (gt.dists.is_empty() || m == Some(gt.dists.len()))
        && gt
            .ids
            .iter()
            .all(|&id| id <= i32::MAX as u32 || !is_ivecs(path));
    if ok {
        Ok(())
    } else {
        Err(DataError::new(
            path,
            DataErrorKind::InvalidInput(format!(
                "ground truth of {} × {} with {} ids and {} distances is inconsistent",
                gt.nq,
                gt.k,
                gt.ids.len(),
                gt.dists.len()
            )),
        ))
    }
}

fn is_ivecs(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ivecs"))
}

fn le_words<W>(bytes: &[u8], f: fn([u8; 4]) -> W) -> Vec<W> {
    bytes
        .chunks_exact(4)
        .map(|c| f([c[0], c[1], c[2], c[3]]))
        .collect()
}

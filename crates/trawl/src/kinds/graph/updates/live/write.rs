//! The write path of a live index: inserts, upserts and deletes, each logged, then applied.

use std::collections::HashSet;

use crate::filter::Attributes;
use crate::kernels::Element;
use crate::kinds::graph::updates::ids::MAX_ID;
use crate::kinds::graph::updates::wal::{LogAttrs, LogOp, LogRecord, LogVectors, LogWriter};

use super::apply::{apply, row_fault_words};
use super::{log_path, Durability, LiveError, LiveIndex, Writer};

/// What a delete did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeleteReport {
    /// Ids deleted.
    pub deleted: usize,
}

impl LiveIndex {
    /// Inserts `rows` (row-major, the index's element type and dimension) under `ids`
    /// (`None`: fresh ids are assigned). Every id must be new (use [`LiveIndex::upsert`] to
    /// replace a vector) and appear once. Returns the ids, after the operation is in the log
    /// (synced, by default) and visible to searches.
    pub fn insert<T: Element>(
        &self,
        ids: Option<&[u64]>,
        rows: &[T],
    ) -> Result<Vec<u64>, LiveError> {
        self.write_vectors(ids, rows, None, false)
    }

    /// [`LiveIndex::insert`] of vectors with attributes: `attrs` holds one row per vector
    /// (labels, numeric fields), logged with them and searchable by filters at once. A name
    /// must keep its meaning: a numeric field of the index cannot arrive as a label key, nor
    /// the reverse.
    pub fn insert_with<T: Element>(
        &self,
        ids: Option<&[u64]>,
        rows: &[T],
        attrs: Option<&Attributes>,
    ) -> Result<Vec<u64>, LiveError> {
        self.write_vectors(ids, rows, attrs, false)
    }

    /// Inserts or replaces: each id's old vector (if any) is deleted and `rows` inserted, as
    /// one operation.
    pub fn upsert<T: Element>(&self, ids: &[u64], rows: &[T]) -> Result<Vec<u64>, LiveError> {
        self.write_vectors(Some(ids), rows, None, true)
    }

    /// [`LiveIndex::upsert`] with the new vectors' attributes (an upserted vector's old
    /// attributes go with its old vector; without `attrs` the new one has none).
    pub fn upsert_with<T: Element>(
        &self,
        ids: &[u64],
        rows: &[T],
        attrs: Option<&Attributes>,
    ) -> Result<Vec<u64>, LiveError> {
        self.write_vectors(Some(ids), rows, attrs, true)
    }

    fn write_vectors<T: Element>(
        &self,
        ids: Option<&[u64]>,
        rows: &[T],
        attrs: Option<&Attributes>,
        upsert: bool,
    ) -> Result<Vec<u64>, LiveError> {
        let writer = self.writer()?;
        let v = self.current.read().clone();
        let (dim, dtype) = (v.disk.dim(), v.disk.dtype());
        if T::DTYPE != dtype {
            return Err(LiveError::InvalidInput(format!(
                "vectors of {} for an index of {}",
                T::DTYPE.name(),
                dtype.name()
            )));
        }
        if dim == 0 || !rows.len().is_multiple_of(dim) {
            return Err(LiveError::InvalidInput(format!(
                "{} values are not whole vectors of dimension {dim}",
                rows.len()
            )));
        }
        let n = rows.len() / dim;
        let attrs = attrs.filter(|a| !a.is_empty());
        if let Some(a) = attrs {
            if a.n() as usize != n {
                return Err(LiveError::InvalidInput(format!(
                    "attributes of {} vectors for {n} vectors",
                    a.n()
                )));
            }
            if let Some(cur) = v.attrs.read().as_ref() {
                cur.check_compatible(a)
                    .map_err(|e| LiveError::InvalidInput(e.to_string()))?;
            }
        }
        if let Some((row, f)) = (0..n)
            .find_map(|i| crate::data::row_fault(&rows[i * dim..(i + 1) * dim]).map(|f| (i, f)))
        {
            return Err(LiveError::InvalidInput(match f {
                crate::data::RowFault::NonFinite { .. } => {
                    format!("vector {row} holds a NaN or infinite value")
                }
                f => format!("vector {row}: {}", row_fault_words(&f)),
            }));
        }
        let mut w = writer.lock();
        self.check_delta_room(n, dim * std::mem::size_of::<T>())?;
        let ids: Vec<u64> = match ids {
            Some(ids) => {
                if ids.len() != n {
                    return Err(LiveError::InvalidInput(format!(
                        "{} ids for {n} vectors",
                        ids.len()
                    )));
                }
                check_ids(ids)?;
                if !upsert {
                    if let Some(id) = ids.iter().find(|id| w.map.contains_key(id)) {
                        return Err(LiveError::InvalidInput(format!(
                            "id {id} is already in the index: use upsert to replace its vector"
                        )));
                    }
                }
                ids.to_vec()
            }
            None => {
                let first = w.next_id;
                if first.saturating_add(n as u64) > MAX_ID {
                    return Err(LiveError::InvalidInput("no ids left to assign".into()));
                }
                (first..first + n as u64).collect()
            }
        };
        if n == 0 {
            return Ok(ids);
        }
        let vectors = LogVectors::from_rows(rows, dim);
        let attrs = attrs.map(LogAttrs::encode);
        let op = if upsert {
            LogOp::Upsert {
                ids: ids.clone(),
                vectors,
                attrs,
            }
        } else {
            LogOp::Insert {
                ids: ids.clone(),
                vectors,
                attrs,
            }
        };
        self.log_and_apply(&mut w, op)?;
        Ok(ids)
    }

    /// Deletes `ids`: every one must be in the index (an unknown id is an error and nothing is
    /// deleted) and appear once.
    pub fn delete(&self, ids: &[u64]) -> Result<DeleteReport, LiveError> {
        let writer = self.writer()?;
        check_ids(ids)?;
        let mut w = writer.lock();
        let unknown: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| !w.map.contains_key(id))
            .take(5)
            .collect();
        if !unknown.is_empty() {
            return Err(LiveError::InvalidInput(format!(
                "id{} {} not in the index; nothing was deleted",
                if unknown.len() > 1 { "s" } else { "" },
                unknown
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if ids.is_empty() {
            return Ok(DeleteReport::default());
        }
        self.log_and_apply(&mut w, LogOp::Delete { ids: ids.to_vec() })?;
        Ok(DeleteReport { deleted: ids.len() })
    }

    /// Makes every acknowledged operation durable (a no-op with [`Durability::Sync`]).
    pub fn flush(&self) -> Result<(), LiveError> {
        let mut w = self.writer()?.lock();
        if let Some(log) = w.log.as_mut() {
            log.sync()?;
        }
        Ok(())
    }

    /// Logs `op` and applies it to the current version. The caller holds the writer lock
    /// (`w`), and the version is read under it: a merge freezes the active delta, and later
    /// installs its merged version, under that lock too, so an operation is never applied to
    /// a version a merge has replaced (a version read before the lock could hold the delta
    /// being merged as its active one, and the operation would be lost with it).
    fn log_and_apply(&self, w: &mut Writer, op: LogOp) -> Result<(), LiveError> {
        let v = self.current.read().clone();
        let sync = w.durability == Durability::Sync;
        if w.log.is_none() {
            let base = v.disk.manifest().and_then(|m| m.log_seq).unwrap_or(0);
            w.log = Some(LogWriter::create(&log_path(&self.dir), base)?);
        }
        let log = w.log.as_mut().expect("created above");
        let seqs = log.append(std::slice::from_ref(&op), sync)?;
        let r = LogRecord {
            seq: *seqs.start(),
            op,
        };
        apply(&self.dir, &v, w, &r)
    }
}

impl LiveIndex {
    /// Refuses `n` more vectors (of `row_bytes` each, also held once more while their log
    /// record is written) when the delta's memory limit cannot hold them.
    fn check_delta_room(&self, n: usize, row_bytes: usize) -> Result<(), LiveError> {
        let limit = self.delta_limit.load(std::sync::atomic::Ordering::Relaxed);
        if limit == 0 || n == 0 {
            return Ok(());
        }
        let per = self.delta_vector_bytes();
        let held = self.delta_len();
        let need = (held + n) as u64 * per + (n * (row_bytes + 16)) as u64;
        if need > limit {
            return Err(LiveError::DeltaFull {
                held,
                asked: n,
                most: limit / per,
                limit,
                per,
            });
        }
        Ok(())
    }
}

/// Ids of one call: none reserved, none repeated.
fn check_ids(ids: &[u64]) -> Result<(), LiveError> {
    if let Some(id) = ids.iter().find(|&&id| id > MAX_ID) {
        return Err(LiveError::InvalidInput(format!(
            "id {id} is reserved (the largest id is {MAX_ID})"
        )));
    }
    let mut seen = HashSet::with_capacity(ids.len());
    if let Some(id) = ids.iter().find(|id| !seen.insert(**id)) {
        return Err(LiveError::InvalidInput(format!(
            "id {id} appears twice in one call"
        )));
    }
    Ok(())
}

//! Applying logged operations to a version of a live index: checked whole first, then
//! published at a new epoch (replay at open and after a merge, and every write).

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::kernels::DType;
use crate::kinds::graph::updates::delta::Delta;
use crate::kinds::graph::updates::ids::MAX_ID;
use crate::kinds::graph::updates::wal::{LogOp, LogRecord, LogVectors};
use crate::progress::Control;

use super::{log_path, LiveError, Loc, Version, Writer};

/// Checks logged operation `op` against the index it applies to (element type `dtype`,
/// dimension `dim`) and the ids it holds now (`holds`): every invariant a call of the API is
/// held to — ids below the reserved one and each once, deleted ids present, inserted ids
/// absent, vectors of the index's element type and dimension, one per id, finite and not too
/// long ([`crate::data::row_fault`]). Replay runs it on every record before applying it, and
/// `trawl info --verify` on every record not merged yet: a record that fails is damage (a
/// forged or foreign log), never applied.
pub(crate) fn check_op(
    op: &LogOp,
    dtype: DType,
    dim: usize,
    holds: &dyn Fn(u64) -> bool,
) -> Result<(), String> {
    let ids = op.ids();
    if let Some(id) = ids.iter().find(|&&id| id > MAX_ID) {
        return Err(format!("id {id} is reserved (the largest id is {MAX_ID})"));
    }
    let mut seen = HashSet::with_capacity(ids.len());
    if let Some(id) = ids.iter().find(|id| !seen.insert(**id)) {
        return Err(format!("id {id} appears twice in one operation"));
    }
    match op {
        LogOp::Delete { .. } => {
            if let Some(id) = ids.iter().find(|&&id| !holds(id)) {
                return Err(format!("deletes id {id}, which the index does not hold"));
            }
        }
        LogOp::Insert { .. } => {
            if let Some(id) = ids.iter().find(|&&id| holds(id)) {
                return Err(format!("inserts id {id}, which the index already holds"));
            }
        }
        LogOp::Upsert { .. } => {}
    }
    if let Some(v) = op.vectors() {
        if v.dtype != dtype || v.dim != dim {
            return Err(format!(
                "vectors of {} × {} for an index of {} × {}",
                v.dtype.name(),
                v.dim,
                dtype.name(),
                dim
            ));
        }
        if v.count() != ids.len() {
            return Err(format!("{} vectors for {} ids", v.count(), ids.len()));
        }
        if let Some(a) = op.attrs() {
            let a = a.decode().map_err(|e| format!("attributes: {e}"))?;
            if a.n() as usize != ids.len() {
                return Err(format!(
                    "attributes of {} vectors for {} ids",
                    a.n(),
                    ids.len()
                ));
            }
        }
        if dtype == DType::F32 {
            let rows = v.rows::<f32>().ok_or("vectors that do not decode")?;
            if let Some((i, f)) = rows
                .chunks_exact(dim.max(1))
                .enumerate()
                .find_map(|(i, r)| crate::data::row_fault(r).map(|f| (i, f)))
            {
                return Err(format!(
                    "the vector of id {}: {}",
                    ids[i],
                    row_fault_words(&f)
                ));
            }
        }
    }
    Ok(())
}

/// A [`crate::data::RowFault`] in words.
pub(super) fn row_fault_words(f: &crate::data::RowFault) -> String {
    match f {
        crate::data::RowFault::NonFinite { col, value } => {
            format!("component {col} is not finite ({value})")
        }
        crate::data::RowFault::TooLarge { norm_sq } => format!(
            "its squared norm {norm_sq:e} is not below 2^100 (about 1.27e30), so distances to \
             it could overflow 32-bit floats"
        ),
    }
}

/// Applies one logged operation to version `v` (the writer's id map `w.map` is kept in step),
/// publishing it at a new epoch. The record is checked whole first ([`check_op`]): a bad one
/// changes nothing.
pub(super) fn apply(
    dir: &Path,
    v: &Version,
    w: &mut Writer,
    r: &LogRecord,
) -> Result<(), LiveError> {
    let bad = |reason: String| LiveError::BadLog {
        path: log_path(dir),
        reason: format!("record {}: {reason}", r.seq),
    };
    check_op(&r.op, v.disk.dtype(), v.disk.dim(), &|id| {
        w.map.contains_key(&id)
    })
    .map_err(bad)?;
    let e = v.epoch.load(Ordering::Acquire) + 1;
    // The attributes, decoded and checked against the names the index uses before anything
    // changes.
    let attrs = match r.op.attrs() {
        None => None,
        Some(a) => {
            let a = a.decode().map_err(|e| bad(format!("attributes: {e}")))?;
            if let Some(cur) = v.attrs.read().as_ref() {
                cur.check_compatible(&a).map_err(|e| bad(e.to_string()))?;
            }
            Some(a)
        }
    };
    let (delete, insert): (&[u64], Option<(&[u64], &LogVectors)>) = match &r.op {
        LogOp::Insert { ids, vectors, .. } => (&[], Some((ids, vectors))),
        LogOp::Delete { ids } => (ids, None),
        LogOp::Upsert { ids, vectors, .. } => (ids, Some((ids, vectors))),
    };
    let (mut active, mut frozen) = (Vec::new(), Vec::new());
    for &id in delete {
        match w.map.remove(&id) {
            Some(Loc::Disk(s)) => {
                let _ =
                    v.dead[s as usize].compare_exchange(0, e, Ordering::AcqRel, Ordering::Acquire);
            }
            Some(Loc::Active(i)) => active.push(i as usize),
            Some(Loc::Frozen(i)) => frozen.push(i as usize),
            None => {} // an upsert of a new id (check_op refused a delete of one)
        }
    }
    // Deleted delta nodes leave the active delta's graph in place; the frozen delta, which a
    // running merge reads, is only stamped (the merge drops its deleted nodes).
    v.active.delete(&active, e, true);
    if let Some(f) = &v.frozen {
        f.delete(&frozen, e, false);
    }
    if let Some((ids, vectors)) = insert {
        let first = insert_rows(&v.active, ids, vectors, e).map_err(bad)?;
        if let Some(a) = &attrs {
            v.active
                .set_attrs(first, a)
                .map_err(|e| bad(e.to_string()))?;
            extend_schema(v, a);
        }
        for (k, &id) in ids.iter().enumerate() {
            w.map.insert(id, Loc::Active((first + k) as u32));
            w.next_id = w.next_id.max(id.saturating_add(1));
        }
    }
    v.epoch.store(e, Ordering::Release);
    Ok(())
}

/// Makes the version's disk attributes know the names of `a` (an insert's): a clone, only
/// when `a` brings a new label key or field (or the index had no attributes).
fn extend_schema(v: &Version, a: &crate::filter::Attributes) {
    let mut g = v.attrs.write();
    let next = match g.as_ref() {
        Some(cur) if cur.has_schema_of(a) => return,
        Some(cur) => (**cur).clone(),
        None => crate::filter::Attributes::empty(v.disk.n() as u32),
    };
    let mut next = next;
    next.extend_schema(a);
    *g = Some(std::sync::Arc::new(next));
}

fn insert_rows(delta: &Delta, ids: &[u64], vectors: &LogVectors, e: u32) -> Result<usize, String> {
    let ctl = Control::silent();
    let r = match vectors.dtype {
        DType::F32 => {
            delta.insert::<f32>(ids, &vectors.rows::<f32>().ok_or("bad vectors")?, e, &ctl)
        }
        DType::U8 => delta.insert::<u8>(ids, &vectors.rows::<u8>().ok_or("bad vectors")?, e, &ctl),
        DType::I8 => delta.insert::<i8>(ids, &vectors.rows::<i8>().ok_or("bad vectors")?, e, &ctl),
    };
    r.map_err(|e| e.to_string())
}

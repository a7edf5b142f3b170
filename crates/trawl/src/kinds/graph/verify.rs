//! `trawl info DIR --verify`: every file of an index read whole and checked — each page
//! against its checksum, each envelope against its payload checksum, each compressed list and
//! vector decoded — and every file against the manifest.

use std::path::Path;

use crate::dir::manifest::Manifest;
use crate::kinds::graph::layout::packed::PackedMeta;
use crate::kinds::graph::{IndexLayout, OpenError};
use crate::progress::Control;

pub use crate::dir::component::VerifiedFile;
pub use crate::kinds::VerifyReport;

/// Reads every file of the index in `dir` whole and checks it (see the module docs). The
/// first damaged file ends the check with its error, which names it. Holds the directory's
/// commit lock (shared) throughout, so a concurrent commit waits.
pub fn verify_index(dir: &Path, ctl: &Control) -> Result<VerifyReport, OpenError> {
    crate::dir::txn::settle_for_reading(dir)?;
    let _lock = crate::dir::txn::Flock::dir(dir, false)?;
    let manifest = Manifest::load_if_present(dir)?;
    let mut report = VerifyReport {
        manifest: manifest.is_some(),
        ..VerifyReport::default()
    };
    let mut cx = crate::kinds::graph::files::GraphCx {
        dir: dir.to_path_buf(),
        base: None,
        ctl: ctl.clone(),
    };
    // Graph files first: they set the build the PQ files and the entry index are checked
    // against.
    report.files = crate::dir::component::verify_files(
        dir,
        manifest.as_ref(),
        &crate::kinds::graph::files::COMPONENTS,
        &mut cx,
    )?;
    let base = cx.base;
    let is_ivf = manifest
        .as_ref()
        .is_some_and(|m| m.kind == crate::dir::manifest::KindName::Ivf);
    if !is_ivf {
        report.connectivity = Some(check_connectivity(dir, ctl)?);
    }
    let log = dir.join(crate::kinds::graph::updates::wal::FILE_NAME);
    if log.is_file() {
        // The write-ahead log: every record checked (a torn last record is reported, not an
        // error: it was never acknowledged).
        let c = crate::kinds::graph::updates::wal::read_log(&log).map_err(|e| match e {
            crate::kinds::graph::updates::wal::WalError::File(f) => OpenError::File(f),
            other => OpenError::Mismatch {
                dir: dir.to_path_buf(),
                reason: other.to_string(),
            },
        })?;
        let log_seq = manifest.as_ref().and_then(|m| m.log_seq).unwrap_or(0);
        if c.base_seq > log_seq {
            return Err(OpenError::Mismatch {
                dir: dir.to_path_buf(),
                reason: format!(
                    "{} starts after sequence number {} but the index files include only up \
                     to {log_seq}",
                    crate::kinds::graph::updates::wal::FILE_NAME,
                    c.base_seq
                ),
            });
        }
        let pending = c.records.iter().filter(|r| r.seq > log_seq).count();
        check_log_records(dir, &c, log_seq, base)?;
        report.files.push(VerifiedFile {
            name: crate::kinds::graph::updates::wal::FILE_NAME.into(),
            bytes: c.valid_len + c.torn_tail.map_or(0, |t| t.bytes),
            checked: format!(
                "every record's checksum and sequence number; {pending} operations not merged \
                 yet, each valid against the index and the records before it{}",
                match c.torn_tail {
                    Some(t) => format!(
                        "; a torn last record of {} bytes at offset {} (never acknowledged)",
                        t.bytes, t.offset
                    ),
                    None => String::new(),
                }
            ),
        });
    }
    if manifest.is_some() {
        report
            .files
            .push(crate::dir::component::verified_manifest(dir)?);
    }
    Ok(report)
}

/// Every node of the graph index in `dir` must be reachable from its medoid: a node no path
/// reaches is never found by any search.
fn check_connectivity(
    dir: &Path,
    ctl: &Control,
) -> Result<crate::vamana::connectivity::Connectivity, OpenError> {
    let layout = if dir.join(IndexLayout::Packed.file_name()).is_file() {
        IndexLayout::Packed
    } else {
        IndexLayout::Decoupled
    };
    let opts = crate::kinds::graph::OpenOptions {
        layout,
        direct: false,
        ..crate::kinds::graph::OpenOptions::default()
    };
    let ix = crate::kinds::graph::DiskIndex::open(dir, opts)?;
    let ids = crate::kinds::graph::updates::ids::SlotIds::load(dir, ix.n())?;
    let holes: Vec<bool> = (0..ix.n() as u32).map(|s| ids.is_hole(s)).collect();
    let c = ix
        .connectivity(Some(&holes), ctl)
        .map_err(|e| OpenError::Mismatch {
            dir: dir.to_path_buf(),
            reason: format!("reading the neighbour lists: {e}"),
        })?;
    if c.unreachable > 0 {
        return Err(OpenError::Mismatch {
            dir: dir.to_path_buf(),
            reason: format!(
                "{} of its {} nodes cannot be reached from the medoid: no search can return \
                 them (build the index again)",
                c.unreachable, c.nodes
            ),
        });
    }
    Ok(c)
}

/// Replays the log's records after `log_seq` on the ids the index holds, as opening it
/// would ([`crate::kinds::graph::updates::live::check_op`]): each must be one the API could have acknowledged.
/// Only the ids the records touch are tracked.
fn check_log_records(
    dir: &Path,
    c: &crate::kinds::graph::updates::wal::LogContents,
    log_seq: u64,
    base: Option<PackedMeta>,
) -> Result<(), OpenError> {
    let pending: Vec<&crate::kinds::graph::updates::wal::LogRecord> =
        c.records.iter().filter(|r| r.seq > log_seq).collect();
    if pending.is_empty() {
        return Ok(());
    }
    let mismatch = |reason: String| OpenError::Mismatch {
        dir: dir.to_path_buf(),
        reason,
    };
    let b = base.ok_or_else(|| {
        mismatch(format!(
            "{} without a graph file to apply it to",
            crate::kinds::graph::updates::wal::FILE_NAME
        ))
    })?;
    let touched: std::collections::HashSet<u64> =
        pending.iter().flat_map(|r| r.op.ids()).copied().collect();
    let ids = crate::kinds::graph::updates::ids::SlotIds::load(dir, b.n as usize)?;
    let mut holds: std::collections::HashSet<u64> = (0..b.n as u32)
        .map(|s| ids.id(s))
        .filter(|id| *id != crate::kinds::graph::updates::ids::HOLE && touched.contains(id))
        .collect();
    for r in pending {
        crate::kinds::graph::updates::live::check_op(&r.op, b.dtype, b.dim, &|id| {
            holds.contains(&id)
        })
        .map_err(|reason| {
            mismatch(format!(
                "{}: record {}: {reason}",
                crate::kinds::graph::updates::wal::FILE_NAME,
                r.seq
            ))
        })?;
        match &r.op {
            crate::kinds::graph::updates::wal::LogOp::Delete { ids } => ids.iter().for_each(|id| {
                holds.remove(id);
            }),
            crate::kinds::graph::updates::wal::LogOp::Insert { ids, .. }
            | crate::kinds::graph::updates::wal::LogOp::Upsert { ids, .. } => {
                holds.extend(ids.iter().copied())
            }
        }
    }
    Ok(())
}

//! `trawl info DIR --verify`: every file of an index read whole and checked — each page
//! against its checksum, each envelope against its payload checksum, each compressed list and
//! vector decoded — and every file against the manifest.

use std::path::Path;

use serde::Serialize;

use super::manifest::{Manifest, MANIFEST_FILE};
use super::{IndexLayout, OpenError, PQ_CODES_FILE, PQ_FILE};
use crate::layout::decoupled::graph::GraphFile;
use crate::layout::decoupled::vectors::{self as dvectors, VectorFile};
use crate::layout::packed::{PackedFile, PackedMeta};
use crate::layout::FileError;
use crate::progress::Control;
use crate::quant::pq::{PqCodes, ProductQuantizer};
use crate::search::entry::{self, EntryIndex};

/// One verified file.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedFile {
    /// File name in the index directory.
    pub name: String,
    /// Bytes.
    pub bytes: u64,
    /// What was checked, in words.
    pub checked: String,
}

/// Every file of an index, verified.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Whether the index has a manifest (each file was also checked against it).
    pub manifest: bool,
    /// The files, in the order checked.
    pub files: Vec<VerifiedFile>,
    /// A graph index's connectivity from its medoid (every node must be reachable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connectivity: Option<crate::graph::connectivity::Connectivity>,
    /// The data pages of vectors checked (IVF and flat kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_pages: Option<u64>,
}

/// Reads every file of the index in `dir` whole and checks it (see the module docs). The
/// first damaged file ends the check with its error, which names it. Holds the directory's
/// commit lock (shared) throughout, so a concurrent commit waits.
pub fn verify_index(dir: &Path, ctl: &Control) -> Result<VerifyReport, OpenError> {
    super::txn::settle_for_reading(dir)?;
    let _lock = super::txn::Flock::dir(dir, false)?;
    let manifest = Manifest::load_if_present(dir)?;
    let mut report = VerifyReport {
        manifest: manifest.is_some(),
        ..VerifyReport::default()
    };
    let present = |name: &str| dir.join(name).is_file();
    // The files to check: the manifest's (each must be there), else every index file present.
    let names: Vec<String> = match &manifest {
        Some(m) => {
            let listed: Vec<&str> = m.files.iter().map(|f| f.name.as_str()).collect();
            m.check_files(dir, &listed)?;
            for f in &m.files {
                if !present(&f.name) {
                    return Err(OpenError::Mismatch {
                        dir: dir.to_path_buf(),
                        reason: format!("{} is missing (the manifest lists it)", f.name),
                    });
                }
            }
            let segment_names = super::txn::segment_files(dir)?;
            let listed: Vec<&str> = super::txn::index_file_names()
                .into_iter()
                .chain(segment_names.iter().map(String::as_str))
                .collect();
            for name in listed {
                if present(name) && m.file(name).is_none() {
                    return Err(OpenError::Mismatch {
                        dir: dir.to_path_buf(),
                        reason: format!(
                            "{name} is not part of this index (its manifest does not list it)"
                        ),
                    });
                }
            }
            m.files.iter().map(|f| f.name.clone()).collect()
        }
        None => super::txn::index_file_names()
            .into_iter()
            .filter(|n| present(n))
            .map(String::from)
            .collect(),
    };
    let mut base: Option<PackedMeta> = None;
    // Graph files first: they set the build the PQ files and the entry index are checked
    // against.
    let graph_first = |n: &String| !IndexLayout::ALL.iter().any(|l| l.file_name() == n.as_str());
    let mut ordered = names.clone();
    ordered.sort_by_key(graph_first);
    for name in &ordered {
        let path = dir.join(name);
        let bytes = std::fs::metadata(&path)
            .map_err(|e| FileError::new(&path, e.into()))?
            .len();
        let checked = check_file(dir, name, &mut base, ctl)?;
        report.files.push(VerifiedFile {
            name: name.clone(),
            bytes,
            checked,
        });
    }
    let is_ivf = manifest
        .as_ref()
        .is_some_and(|m| m.kind == super::manifest::KindName::Ivf);
    if !is_ivf {
        report.connectivity = Some(check_connectivity(dir, ctl)?);
    }
    let log = dir.join(super::wal::FILE_NAME);
    if log.is_file() {
        // The write-ahead log: every record checked (a torn last record is reported, not an
        // error: it was never acknowledged).
        let c = super::wal::read_log(&log).map_err(|e| match e {
            super::wal::WalError::File(f) => OpenError::File(f),
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
                    super::wal::FILE_NAME,
                    c.base_seq
                ),
            });
        }
        let pending = c.records.iter().filter(|r| r.seq > log_seq).count();
        check_log_records(dir, &c, log_seq, base)?;
        report.files.push(VerifiedFile {
            name: super::wal::FILE_NAME.into(),
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
        let path = dir.join(MANIFEST_FILE);
        report.files.push(VerifiedFile {
            name: MANIFEST_FILE.into(),
            bytes: std::fs::metadata(&path)
                .map_err(|e| FileError::new(&path, e.into()))?
                .len(),
            checked: "checksum matches; lists every file with its size and header checksum".into(),
        });
    }
    Ok(report)
}

/// Every node of the graph index in `dir` must be reachable from its medoid: a node no path
/// reaches is never found by any search.
fn check_connectivity(
    dir: &Path,
    ctl: &Control,
) -> Result<crate::graph::connectivity::Connectivity, OpenError> {
    let layout = if dir.join(IndexLayout::Packed.file_name()).is_file() {
        IndexLayout::Packed
    } else {
        IndexLayout::Decoupled
    };
    let opts = super::OpenOptions {
        layout,
        direct: false,
        ..super::OpenOptions::default()
    };
    let ix = super::DiskIndex::open(dir, opts)?;
    let ids = super::ids::SlotIds::load(dir, ix.n())?;
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
/// would ([`super::live::check_op`]): each must be one the API could have acknowledged.
/// Only the ids the records touch are tracked.
fn check_log_records(
    dir: &Path,
    c: &super::wal::LogContents,
    log_seq: u64,
    base: Option<PackedMeta>,
) -> Result<(), OpenError> {
    let pending: Vec<&super::wal::LogRecord> =
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
            super::wal::FILE_NAME
        ))
    })?;
    let touched: std::collections::HashSet<u64> =
        pending.iter().flat_map(|r| r.op.ids()).copied().collect();
    let ids = super::ids::SlotIds::load(dir, b.n as usize)?;
    let mut holds: std::collections::HashSet<u64> = (0..b.n as u32)
        .map(|s| ids.id(s))
        .filter(|id| *id != super::ids::HOLE && touched.contains(id))
        .collect();
    for r in pending {
        super::live::check_op(&r.op, b.dtype, b.dim, &|id| holds.contains(&id)).map_err(
            |reason| {
                mismatch(format!(
                    "{}: record {}: {reason}",
                    super::wal::FILE_NAME,
                    r.seq
                ))
            },
        )?;
        match &r.op {
            super::wal::LogOp::Delete { ids } => ids.iter().for_each(|id| {
                holds.remove(id);
            }),
            super::wal::LogOp::Insert { ids, .. } | super::wal::LogOp::Upsert { ids, .. } => {
                holds.extend(ids.iter().copied())
            }
        }
    }
    Ok(())
}

/// Checks one file; `base` is the build the first graph file set.
fn check_file(
    dir: &Path,
    name: &str,
    base: &mut Option<PackedMeta>,
    ctl: &Control,
) -> Result<String, OpenError> {
    let path = dir.join(name);
    let mismatch = |reason: String| OpenError::Mismatch {
        dir: dir.to_path_buf(),
        reason,
    };
    let mut same_build = |meta: &PackedMeta| -> Result<(), OpenError> {
        match base {
            None => {
                *base = Some(*meta);
                Ok(())
            }
            Some(b)
                if b.n == meta.n
                    && b.dim == meta.dim
                    && b.pq_crc == meta.pq_crc
                    && b.pq_codes_crc == meta.pq_codes_crc =>
            {
                Ok(())
            }
            Some(_) => Err(mismatch(format!(
                "{name} holds the graph of another build (its PQ files differ)"
            ))),
        }
    };
    if name == super::segments::FILE_NAME {
        let map = super::segments::VectorMap::load(dir)?
            .ok_or_else(|| mismatch(format!("{name} is missing")))?;
        let b = base.ok_or_else(|| mismatch(format!("{name} without a graph file")))?;
        if map.slots.len() as u64 != b.n {
            return Err(mismatch(format!(
                "{name} maps {} slots for a graph of {}",
                map.slots.len(),
                b.n
            )));
        }
        let ids = super::ids::SlotIds::load(dir, b.n as usize)?;
        map.check_ids(&ids, &dir.join(name))?;
        for (seg, count) in &map.segments {
            let v = VectorFile::open(&dir.join(seg))?;
            if v.geometry().n != *count {
                return Err(mismatch(format!(
                    "{seg} holds {} vectors, {name} says {count}",
                    v.geometry().n
                )));
            }
        }
        let live = map
            .slots
            .iter()
            .filter(|&&s| s != super::segments::GONE)
            .count();
        return Ok(format!(
            "{} segments; {live} slots point at vectors inside them",
            map.segments.len()
        ));
    }
    let is_segment = super::segments::is_segment_name(name);
    if name == dvectors::FILE_NAME || is_segment {
        let v = VectorFile::open(&path)?;
        let mut n = 0u64;
        v.scan(|_, _| n += 1)?;
        // A merged decoupled index (with a vector map) holds its vectors in segments whose
        // sizes the map checks; the layout's one vector file holds every slot.
        let mapped = dir.join(super::segments::FILE_NAME).is_file();
        if let Some(b) = base {
            let g = v.geometry();
            if g.dim != b.dim || g.dtype != b.dtype || (!mapped && !is_segment && g.n != b.n) {
                return Err(mismatch(format!(
                    "{name} ({} × {}) does not match the graph ({} × {})",
                    g.n, g.dim, b.n, b.dim
                )));
            }
        }
        return Ok(format!(
            "all {n} vectors decode and all {} data pages match their checksums",
            v.data_pages()
        ));
    }
    if name == IndexLayout::Decoupled.file_name() {
        let g = GraphFile::open(&path)?;
        same_build(g.meta())?;
        let pages = g.verify_all()?;
        return Ok(format!(
            "all {pages} data pages decode and match their checksums"
        ));
    }
    if let Some(layout) = IndexLayout::ALL.iter().find(|l| l.file_name() == name) {
        let p = PackedFile::open(&path)?;
        same_build(p.meta())?;
        let m = p.meta();
        if m.permuted != (*layout == IndexLayout::Shuffled)
            || (m.neighbor_code_bytes > 0) != (*layout == IndexLayout::AllInStorage)
        {
            return Err(mismatch(format!(
                "{name} is not a {} layout",
                layout.name()
            )));
        }
        p.verify_all(ctl)?;
        return Ok(format!(
            "all {} data pages match their checksums",
            p.geometry().data_pages
        ));
    }
    let built = |what: &str| -> Result<PackedMeta, OpenError> {
        base.ok_or_else(|| mismatch(format!("{what} without a graph file to check it against")))
    };
    match name {
        PQ_FILE => {
            let meta = built(name)?;
            if super::payload_crc(&path)? != meta.pq_crc {
                return Err(mismatch(format!(
                    "{name} is not the one the graph was built with"
                )));
            }
            let pq = ProductQuantizer::load(&path)?;
            if pq.dim() != meta.dim || pq.m() != meta.pq_bytes {
                return Err(mismatch(format!("{name} does not match the graph")));
            }
            Ok(format!(
                "checksum matches; {} codebooks over {} dimensions",
                pq.m(),
                pq.dim()
            ))
        }
        PQ_CODES_FILE => {
            let meta = built(name)?;
            if super::payload_crc(&path)? != meta.pq_codes_crc {
                return Err(mismatch(format!(
                    "{name} is not the one the graph was built with"
                )));
            }
            let codes = PqCodes::load(&path)?;
            if codes.n() as u64 != meta.n || codes.m() != meta.pq_bytes {
                return Err(mismatch(format!("{name} does not match the graph")));
            }
            Ok(format!(
                "checksum matches; {} codes of {} bytes",
                codes.n(),
                codes.m()
            ))
        }
        n if n == entry::FILE_NAME => {
            let meta = built(name)?;
            let e = EntryIndex::load(
                &path,
                meta.n,
                meta.dtype,
                meta.dim,
                meta.metric,
                meta.pq_codes_crc,
            )?;
            Ok(format!("checksum matches; {} sampled nodes", e.len()))
        }
        n if n == super::ids::FILE_NAME => {
            let meta = built(name)?;
            let ids = super::ids::SlotIds::load(dir, meta.n as usize)?;
            Ok(format!(
                "checksum matches; {} slots, {} free, no id twice",
                ids.len(),
                ids.len() - ids.live()
            ))
        }
        _ => Err(mismatch(format!("{name} is not a file of this index kind"))),
    }
}

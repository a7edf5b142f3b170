//! A live index: a disk index that takes inserts, deletes and upserts (FreshDiskANN's design,
//! DecoupleVS §3.5).
//!
//! - Every acknowledged operation is first in the write-ahead log ([`crate::kinds::graph::updates::wal`], one
//!   `fdatasync` per call), then applied in memory: inserted vectors go into the in-memory
//!   delta ([`crate::kinds::graph::updates::delta`]), a Vamana graph searched beside the disk index; deleted disk
//!   nodes get a deletion stamp (never returned, still traversed).
//! - Searches take the current version (an `Arc`) and read at its epoch: an operation is
//!   seen whole or not at all, and a search that started before a merge finishes on the
//!   files it started on.
//! - [`LiveIndex::merge`] folds the delta and the deletions into new disk files
//!   ([`crate::kinds::graph::updates::merge`]) in one transaction whose manifest records the last log sequence
//!   number the files include; the new version replays the records logged after it, and the
//!   log is checkpointed to them.
//! - One process writes (the directory's writer lock names it); any number of processes may
//!   open the index read-only: they replay the log as it is when they open.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use rayon::prelude::*;

use crate::dir::txn::{Flock, Txn, TxnError};
use crate::kernels::{DType, Element};
use crate::kinds::graph::search::{CachePolicy, LiveFilter, SearchParams};
use crate::kinds::graph::updates::delta::Delta;
use crate::kinds::graph::updates::ids::{SlotIds, HOLE, MAX_ID};
use crate::kinds::graph::updates::merge::{MergeInput, MergeReport, SegmentPolicy};
use crate::kinds::graph::updates::wal::{self, LogOp, LogRecord, LogVectors, LogWriter, WalError};
use crate::kinds::graph::{DiskIndex, IndexBuildError, IndexLayout, OpenError, OpenOptions};
use crate::progress::Control;
use crate::search::{QueryStats, SearchError};
use crate::vamana::search::SearchScratch;
use crate::vamana::{VamanaConfig, VamanaParams};
use crate::ErrorKind;

/// Why an operation on a live index failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The call is wrong (shapes, ids, values): nothing was changed.
    #[error("{0}")]
    InvalidInput(String),
    /// The index was opened read-only.
    #[error("{}: the index is open read-only: open it for writing to change it", dir.display())]
    ReadOnly {
        /// The index directory.
        dir: PathBuf,
    },
    /// Opening the index failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The write-ahead log could not be read or written.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// Another process writes the index, or the directory could not be written.
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// Writing the merged version failed.
    #[error(transparent)]
    Merge(#[from] IndexBuildError),
    /// A search failed.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// A bug in trawl: please report it.
    #[error("internal error: {0}")]
    Internal(String),
    /// The log holds an operation the index cannot apply (damaged or foreign log).
    #[error("{}: {reason}", path.display())]
    BadLog {
        /// The log file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl LiveError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidInput(_) | Self::ReadOnly { .. } => ErrorKind::InvalidInput,
            Self::Open(e) => e.kind(),
            Self::Wal(e) => e.kind(),
            Self::Txn(e) => e.kind(),
            Self::Merge(e) => e.kind(),
            Self::Search(e) => e.kind(),
            Self::BadLog { .. } => ErrorKind::Corrupt,
            Self::Internal(_) => ErrorKind::Internal,
        }
    }
}

/// How a live index is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Searches only; the log is replayed as it is at open.
    ReadOnly,
    /// Searches and writes; takes the writer lock (refused while another process holds it).
    ReadWrite,
}

/// When an acknowledged operation is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every call returns after its log record is synced to the device (group commit: one
    /// `fdatasync` per call).
    #[default]
    Sync,
    /// Calls return once the record is written to the log (it survives a crash of the
    /// process, not of the machine); [`LiveIndex::flush`] syncs.
    Buffered,
}

/// Where an id's vector is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    Disk(u32),
    Active(u32),
    Frozen(u32),
}

/// One version of the index: disk files, their ids and deletion stamps, and the deltas.
#[derive(Debug)]
struct Version {
    disk: Arc<DiskIndex>,
    ids: Arc<SlotIds>,
    dead: Arc<[AtomicU32]>,
    epoch: Arc<AtomicU32>,
    /// The delta a merge is folding in (searched until the merge's version replaces this).
    frozen: Option<Arc<Delta>>,
    active: Arc<Delta>,
    /// Every disk slot is free (a merge after every vector was deleted): the disk graph has
    /// no vector to search from, only the deltas are searched.
    disk_empty: bool,
}

#[derive(Debug)]
struct Writer {
    _lock: Option<Flock>,
    log: Option<LogWriter>,
    map: HashMap<u64, Loc>,
    next_id: u64,
    durability: Durability,
}

/// Results of a batch search of a live index: `nq × k` ids (missing results are
/// [`crate::kinds::graph::updates::ids::HOLE`]) and exact distances, per-query statistics of the disk search, and
/// the batch's wall time.
#[derive(Debug, Clone, Default)]
pub struct LiveBatch {
    /// Results per query.
    pub k: usize,
    /// Row-major ids.
    pub ids: Vec<u64>,
    /// Row-major exact distances.
    pub dists: Vec<f32>,
    /// Per-query statistics (the disk search's).
    pub stats: Vec<QueryStats>,
    /// Seconds for the whole batch.
    pub wall_secs: f64,
}

/// How a merge runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MergeOptions {
    /// Threads of the merge (its prunes and the insert phase's searches).
    pub threads: usize,
    /// Niceness of the merge's threads (Linux: 0 = as the caller, 19 = lowest priority),
    /// so searches running beside a merge keep the cores first.
    pub nice: i32,
    /// Decoupled layout: when vector segments are garbage-collected.
    pub segments: SegmentPolicy,
}

impl Default for MergeOptions {
    /// One thread per core at niceness 10.
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            nice: 10,
            segments: SegmentPolicy::default(),
        }
    }
}

/// Lowers the calling thread's priority to niceness `nice` (best effort: a refusal leaves
/// it as it is).
fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        // SAFETY: gettid takes no arguments and only returns this thread's id.
        let tid = unsafe { libc::gettid() };
        // SAFETY: setpriority takes no pointers; it changes only this thread's priority.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice.min(19)) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// What a delete did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeleteReport {
    /// Ids deleted.
    pub deleted: usize,
}

/// A disk index that takes updates.
#[derive(Debug)]
pub struct LiveIndex {
    dir: PathBuf,
    opts: OpenOptions,
    cfg: VamanaConfig,
    current: RwLock<Arc<Version>>,
    writer: Option<Mutex<Writer>>,
    merging: Mutex<()>,
    /// A read-only handle's id map, as replayed at open (a writable one keeps it in its
    /// writer state).
    reader_map: HashMap<u64, Loc>,
    /// The static node cache asked for ([`LiveIndex::set_node_cache`]): nodes, policy and
    /// sampling threads, loaded again from the new files after every merge.
    node_cache: Mutex<Option<(usize, CachePolicy, usize)>>,
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join(wal::FILE_NAME)
}

impl LiveIndex {
    /// Opens the index in `dir` (searched with `opts`) for `access`, replaying its log.
    pub fn open(dir: &Path, opts: OpenOptions, access: Access) -> Result<Self, LiveError> {
        let lock = match access {
            Access::ReadWrite => {
                if !dir.is_dir() {
                    return Err(OpenError::NotAnIndex {
                        dir: dir.to_path_buf(),
                        reason: "no such directory".into(),
                    }
                    .into());
                }
                // A sharded search never replays a shard's log: updates through it are refused.
                if let Some(why) = crate::kinds::member::updates_refused(dir) {
                    return Err(LiveError::InvalidInput(why));
                }
                let lock = crate::dir::txn::take_writer_lock(dir, "a live index open for writing")?;
                // What a killed writer left: its decided commit finished, its staging removed
                // (readers leave both to the lock holder, which is now this handle).
                crate::dir::txn::recover_held(dir).map_err(OpenError::from)?;
                Some(lock)
            }
            Access::ReadOnly => None,
        };
        // A reader may race a merge's log checkpoint: the log it reads must not start after
        // the files it opened (retry when it does).
        let mut tries = 0;
        let (disk, contents) = loop {
            let mut disk = DiskIndex::open(dir, opts)?;
            disk.writer_held = lock.is_some();
            let path = log_path(dir);
            let contents = if path.is_file() {
                Some(wal::read_log(&path)?)
            } else {
                None
            };
            let log_seq = disk.manifest().and_then(|m| m.log_seq).unwrap_or(0);
            match &contents {
                Some(c) if c.base_seq > log_seq => {
                    tries += 1;
                    if lock.is_some() || tries > 20 {
                        return Err(LiveError::BadLog {
                            path,
                            reason: format!(
                                "the log starts after sequence number {} but the index files \
                                 include only up to {log_seq}",
                                c.base_seq
                            ),
                        });
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                _ => break (disk, contents),
            }
        };
        Self::assemble(dir, opts, disk, contents, lock, access)
    }

    /// A read-only live index over `disk`, an index already open (and configured: its
    /// caches loaded) — for a caller that searches an index that may have taken updates
    /// with the options it opened it with. Replays the log as it is now.
    pub fn from_disk(disk: DiskIndex) -> Result<Self, LiveError> {
        let dir = disk.dir().to_path_buf();
        let path = log_path(&dir);
        let contents = if path.is_file() {
            Some(wal::read_log(&path)?)
        } else {
            None
        };
        let log_seq = disk.manifest().and_then(|m| m.log_seq).unwrap_or(0);
        if let Some(c) = &contents {
            if c.base_seq > log_seq {
                return Err(LiveError::BadLog {
                    path,
                    reason: format!(
                        "the log starts after sequence number {} but the index files include \
                         only up to {log_seq} (a merge committed while the index was opened: \
                         open it again)",
                        c.base_seq
                    ),
                });
            }
        }
        let opts = *disk.options();
        Self::assemble(&dir, opts, disk, contents, None, Access::ReadOnly)
    }

    /// The live index over opened `disk` with its log `contents` replayed.
    fn assemble(
        dir: &Path,
        opts: OpenOptions,
        disk: DiskIndex,
        contents: Option<wal::LogContents>,
        lock: Option<Flock>,
        access: Access,
    ) -> Result<Self, LiveError> {
        let cfg = graph_config(&disk)?;
        let ids = SlotIds::load(dir, disk.n()).map_err(OpenError::from)?;
        let next_id = disk
            .manifest()
            .and_then(|m| m.next_id)
            .unwrap_or(0)
            .max(ids.next_free_id());
        let log_seq = disk.manifest().and_then(|m| m.log_seq).unwrap_or(0);
        let version = new_version(disk, ids, &cfg);
        let map = version
            .ids
            .reverse()
            .into_iter()
            .map(|(id, s)| (id, Loc::Disk(s)))
            .collect();
        let mut w = Writer {
            _lock: lock,
            log: None,
            map,
            next_id,
            durability: Durability::Sync,
        };
        let v = Arc::new(version);
        if let Some(c) = &contents {
            for r in c.records.iter().filter(|r| r.seq > log_seq) {
                apply(dir, &v, &mut w, r)?;
            }
        }
        if access == Access::ReadWrite {
            if let Some(c) = &contents {
                w.log = Some(LogWriter::open_append(&log_path(dir), c)?);
            }
        }
        let (writer, reader_map) = match access {
            Access::ReadWrite => (Some(Mutex::new(w)), HashMap::new()),
            Access::ReadOnly => (None, w.map),
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            opts,
            cfg,
            current: RwLock::new(v),
            writer,
            merging: Mutex::new(()),
            reader_map,
            node_cache: Mutex::new(None),
        })
    }
}

fn graph_config(disk: &DiskIndex) -> Result<VamanaConfig, LiveError> {
    let b = disk.manifest().and_then(|m| m.build.clone());
    let p = match b {
        Some(b) => VamanaParams {
            r: b.r,
            l: b.l,
            alpha: b.alpha as f32,
            ..VamanaParams::default()
        },
        None => VamanaParams {
            r: disk.meta().r.max(1),
            l: disk.meta().r.max(100),
            ..VamanaParams::default()
        },
    };
    p.validate()
        .map_err(|e| LiveError::InvalidInput(e.to_string()))
}

fn new_version(disk: DiskIndex, ids: SlotIds, cfg: &VamanaConfig) -> Version {
    let dead: Arc<[AtomicU32]> = (0..disk.n() as u32)
        .map(|s| AtomicU32::new(u32::from(ids.is_hole(s))))
        .collect();
    let active = Arc::new(Delta::new(disk.dtype(), disk.dim(), disk.metric(), *cfg));
    let disk_empty = ids.live() == 0;
    Version {
        disk_empty,
        disk: Arc::new(disk),
        ids: Arc::new(ids),
        dead,
        epoch: Arc::new(AtomicU32::new(1)),
        frozen: None,
        active,
    }
}

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
fn row_fault_words(f: &crate::data::RowFault) -> String {
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
fn apply(dir: &Path, v: &Version, w: &mut Writer, r: &LogRecord) -> Result<(), LiveError> {
    let bad = |reason: String| LiveError::BadLog {
        path: log_path(dir),
        reason: format!("record {}: {reason}", r.seq),
    };
    check_op(&r.op, v.disk.dtype(), v.disk.dim(), &|id| {
        w.map.contains_key(&id)
    })
    .map_err(bad)?;
    let e = v.epoch.load(Ordering::Acquire) + 1;
    let (delete, insert): (&[u64], Option<(&[u64], &LogVectors)>) = match &r.op {
        LogOp::Insert { ids, vectors } => (&[], Some((ids, vectors))),
        LogOp::Delete { ids } => (ids, None),
        LogOp::Upsert { ids, vectors } => (ids, Some((ids, vectors))),
    };
    for &id in delete {
        match w.map.remove(&id) {
            Some(Loc::Disk(s)) => {
                let _ =
                    v.dead[s as usize].compare_exchange(0, e, Ordering::AcqRel, Ordering::Acquire);
            }
            Some(Loc::Active(i)) => v.active.delete(i as usize, e),
            Some(Loc::Frozen(i)) => {
                if let Some(f) = &v.frozen {
                    f.delete(i as usize, e);
                }
            }
            None => {} // an upsert of a new id (check_op refused a delete of one)
        }
    }
    if let Some((ids, vectors)) = insert {
        let first = insert_rows(&v.active, ids, vectors, e).map_err(bad)?;
        for (k, &id) in ids.iter().enumerate() {
            w.map.insert(id, Loc::Active((first + k) as u32));
            w.next_id = w.next_id.max(id.saturating_add(1));
        }
    }
    v.epoch.store(e, Ordering::Release);
    Ok(())
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

impl LiveIndex {
    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.current.read().disk.dtype()
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.current.read().disk.dim()
    }

    /// The current disk files (the version new searches use).
    pub fn disk(&self) -> Arc<DiskIndex> {
        self.current.read().disk.clone()
    }

    /// Whether the index was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.writer.is_some()
    }

    /// Vectors in the in-memory delta (deleted ones included) awaiting a merge.
    pub fn delta_len(&self) -> usize {
        let v = self.current.read().clone();
        v.active.len() + v.frozen.as_ref().map_or(0, |f| f.len())
    }

    /// Whether `id` is in the index (live now).
    pub fn contains(&self, id: u64) -> bool {
        let v = self.current.read().clone();
        let e = v.epoch.load(Ordering::Acquire);
        match self.locate(id) {
            Some(Loc::Disk(s)) => LiveFilter {
                dead: &v.dead,
                epoch: e,
            }
            .visible(s),
            Some(_) => true,
            None => false,
        }
    }

    fn locate(&self, id: u64) -> Option<Loc> {
        match &self.writer {
            Some(w) => w.lock().map.get(&id).copied(),
            None => self.reader_map.get(&id).copied(),
        }
    }

    /// Bytes the in-memory deltas hold (vectors, graph, ids, stamps).
    pub fn delta_bytes(&self) -> u64 {
        let v = self.current.read().clone();
        v.active.heap_bytes() + v.frozen.as_ref().map_or(0, |f| f.heap_bytes())
    }

    /// Live vectors: what a search can return.
    pub fn len(&self) -> usize {
        let v = self.current.read().clone();
        let e = v.epoch.load(Ordering::Acquire);
        let f = LiveFilter {
            dead: &v.dead,
            epoch: e,
        };
        let disk = (0..v.dead.len() as u32).filter(|&s| f.visible(s)).count();
        disk + v.active.live(e) + v.frozen.as_ref().map_or(0, |d| d.live(e))
    }

    /// Whether no vector is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets when operations are durable (see [`Durability`]).
    pub fn set_durability(&self, d: Durability) -> Result<(), LiveError> {
        self.writer()?.lock().durability = d;
        Ok(())
    }

    fn writer(&self) -> Result<&Mutex<Writer>, LiveError> {
        self.writer.as_ref().ok_or_else(|| LiveError::ReadOnly {
            dir: self.dir.clone(),
        })
    }

    /// Inserts `rows` (row-major, the index's element type and dimension) under `ids`
    /// (`None`: fresh ids are assigned). Every id must be new (use [`LiveIndex::upsert`] to
    /// replace a vector) and appear once. Returns the ids, after the operation is in the log
    /// (synced, by default) and visible to searches.
    pub fn insert<T: Element>(
        &self,
        ids: Option<&[u64]>,
        rows: &[T],
    ) -> Result<Vec<u64>, LiveError> {
        self.write_vectors(ids, rows, false)
    }

    /// Inserts or replaces: each id's old vector (if any) is deleted and `rows` inserted, as
    /// one operation.
    pub fn upsert<T: Element>(&self, ids: &[u64], rows: &[T]) -> Result<Vec<u64>, LiveError> {
        self.write_vectors(Some(ids), rows, true)
    }

    fn write_vectors<T: Element>(
        &self,
        ids: Option<&[u64]>,
        rows: &[T],
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
        let op = if upsert {
            LogOp::Upsert {
                ids: ids.clone(),
                vectors,
            }
        } else {
            LogOp::Insert {
                ids: ids.clone(),
                vectors,
            }
        };
        self.log_and_apply(&mut w, &v, op)?;
        Ok(ids)
    }

    /// Deletes `ids`: every one must be in the index (an unknown id is an error and nothing is
    /// deleted) and appear once.
    pub fn delete(&self, ids: &[u64]) -> Result<DeleteReport, LiveError> {
        let writer = self.writer()?;
        check_ids(ids)?;
        let v = self.current.read().clone();
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
        self.log_and_apply(&mut w, &v, LogOp::Delete { ids: ids.to_vec() })?;
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

    fn log_and_apply(&self, w: &mut Writer, v: &Version, op: LogOp) -> Result<(), LiveError> {
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
        apply(&self.dir, v, w, &r)
    }

    /// Searches every row of `rows` (row-major queries) over `threads` threads: the disk
    /// index (deleted nodes hidden) and the delta, merged by exact distance.
    pub fn search_rows<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<LiveBatch, SearchError> {
        let t0 = Instant::now();
        let v = self.current.read().clone();
        let e = v.epoch.load(Ordering::Acquire);
        let filter = LiveFilter {
            dead: &v.dead,
            epoch: e,
        };
        let out = if v.disk_empty {
            // Checked as a disk search checks them (none is run: its graph has no vector).
            let dim = v.disk.dim();
            if dim == 0 || !rows.len().is_multiple_of(dim) {
                return Err(SearchError::BadBatch(format!(
                    "the queries hold {} elements, not a multiple of the dimension {dim}",
                    rows.len()
                )));
            }
            if T::DTYPE != v.disk.dtype() {
                return Err(SearchError::DTypeMismatch {
                    expected: v.disk.dtype().name(),
                    got: T::DTYPE.name(),
                });
            }
            let mut out = v.disk.search_rows_filtered(
                &rows[..0],
                params,
                threads,
                interleave,
                Some(filter),
            )?;
            let nq = rows.len() / dim;
            for q in 0..nq {
                crate::search::check_query_values(&rows[q * dim..(q + 1) * dim], q)?;
            }
            out.ids = vec![u32::MAX; nq * out.k];
            out.dists = vec![f32::INFINITY; nq * out.k];
            out.stats = vec![QueryStats::default(); nq];
            out
        } else {
            v.disk
                .search_rows_filtered(rows, params, threads, interleave, Some(filter))?
        };
        let k = out.k;
        let nq = out.stats.len();
        let dim = v.disk.dim();
        let mut ids: Vec<u64> = out
            .ids
            .iter()
            .map(|&s| if s == u32::MAX { HOLE } else { v.ids.id(s) })
            .collect();
        let mut dists = out.dists;
        let deltas: Vec<&Arc<Delta>> = std::iter::once(&v.active)
            .chain(v.frozen.iter())
            .filter(|d| d.len() > 0)
            .collect();
        if !deltas.is_empty() {
            let l = params.l;
            ids.par_chunks_mut(k.max(1))
                .zip(dists.par_chunks_mut(k.max(1)))
                .enumerate()
                .for_each_init(
                    || (SearchScratch::new(0), Vec::new(), Vec::new()),
                    |(scratch, hits, all), (q, (qi, qd))| {
                        all.clear();
                        all.extend(
                            qi.iter()
                                .copied()
                                .zip(qd.iter().copied())
                                .filter(|h| h.0 != HOLE),
                        );
                        let query = &rows[q * dim..(q + 1) * dim];
                        for d in &deltas {
                            search_delta(d, query, k, l, e, scratch, hits);
                            all.extend_from_slice(hits);
                        }
                        all.sort_by(|a: &(u64, f32), b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                        let mut seen = HashSet::new();
                        all.retain(|h| seen.insert(h.0));
                        for j in 0..k {
                            let (id, d) = all.get(j).copied().unwrap_or((HOLE, f32::INFINITY));
                            qi[j] = id;
                            qd[j] = d;
                        }
                    },
                );
        }
        let _ = nq;
        Ok(LiveBatch {
            k,
            ids,
            dists,
            stats: out.stats,
            wall_secs: t0.elapsed().as_secs_f64(),
        })
    }

    /// Keeps a static node cache of `nodes` nodes chosen by `policy` (page-packed layouts;
    /// [`DiskIndex::load_cache`]): loaded now, and chosen and loaded again from the new files
    /// after every merge of this handle, so it always holds nodes of the current graph.
    /// `nodes` = 0 drops it. Searches go on meanwhile (they switch to the cached version
    /// when it is ready). A read-only handle whose files a writer has merged since it opened
    /// is refused (reopen it).
    pub fn set_node_cache(
        &self,
        nodes: usize,
        policy: CachePolicy,
        threads: usize,
        ctl: &Control,
    ) -> Result<crate::kinds::graph::cache_load::CacheReport, LiveError> {
        let _one = self.merging.lock();
        let cur = self.current.read().clone();
        let mut disk = DiskIndex::open(&self.dir, self.opts)?;
        disk.writer_held = cur.disk.writer_held;
        let id = |d: &DiskIndex| d.manifest().map(|m| (m.build_id.clone(), m.log_seq));
        if id(&disk) != id(&cur.disk) || disk.n() != cur.disk.n() {
            return Err(LiveError::InvalidInput(format!(
                "{}: the index files changed since this handle opened (a merge by another \
                 process); reopen it to cache the new ones",
                self.dir.display()
            )));
        }
        let report = disk
            .load_cache(nodes, policy, threads.max(1), ctl)
            .map_err(|e| LiveError::InvalidInput(e.to_string()))?;
        // Publish under the writer lock (writes apply to the version they read; the new
        // version shares every mutable part with the old one, so none is lost).
        let _w = self.writer.as_ref().map(|w| w.lock());
        let cur = self.current.read().clone();
        let v = Arc::new(Version {
            disk: Arc::new(disk),
            ids: cur.ids.clone(),
            dead: cur.dead.clone(),
            epoch: cur.epoch.clone(),
            frozen: cur.frozen.clone(),
            active: cur.active.clone(),
            disk_empty: cur.disk_empty,
        });
        *self.current.write() = v;
        *self.node_cache.lock() = (nodes > 0).then_some((nodes, policy, threads.max(1)));
        Ok(report)
    }

    /// Folds the delta and the deletions into new disk files (see [`crate::kinds::graph::updates::merge`]), then
    /// searches use them. Searches and writes go on meanwhile: writes land in a fresh delta.
    pub fn merge(&self, threads: usize, ctl: &Control) -> Result<MergeReport, LiveError> {
        self.merge_with(
            &MergeOptions {
                threads,
                ..MergeOptions::default()
            },
            ctl,
        )
    }

    /// [`LiveIndex::merge`] with its options: the merge runs on threads of its own, at the
    /// niceness asked (searches of the same process keep their priority).
    pub fn merge_with(&self, o: &MergeOptions, ctl: &Control) -> Result<MergeReport, LiveError> {
        let threads = o.threads.max(1);
        std::thread::scope(|s| {
            s.spawn(|| {
                lower_priority(o.nice);
                // Threads started from here (the pool's, the insert phase's searchers)
                // inherit the niceness.
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .map_err(|e| LiveError::Internal(format!("merge threads: {e}")))?;
                pool.install(|| self.merge_now(threads, &o.segments, ctl))
            })
            .join()
            .unwrap_or_else(|_| Err(LiveError::Internal("the merge thread panicked".into())))
        })
    }

    fn merge_now(
        &self,
        threads: usize,
        policy: &SegmentPolicy,
        ctl: &Control,
    ) -> Result<MergeReport, LiveError> {
        let writer = self.writer()?;
        let _one = self.merging.lock();
        // Freeze: the active delta becomes the frozen one; new writes go to a fresh delta.
        let (v, epoch, seq, next_id) = {
            let mut w = writer.lock();
            let cur = self.current.read().clone();
            let seq = w.log.as_ref().map_or(
                cur.disk.manifest().and_then(|m| m.log_seq).unwrap_or(0),
                |l| l.next_seq() - 1,
            );
            let frozen = cur.active.clone();
            let v = Arc::new(Version {
                disk: cur.disk.clone(),
                ids: cur.ids.clone(),
                dead: cur.dead.clone(),
                epoch: cur.epoch.clone(),
                frozen: Some(frozen),
                active: Arc::new(Delta::new(
                    cur.disk.dtype(),
                    cur.disk.dim(),
                    cur.disk.metric(),
                    self.cfg,
                )),
                disk_empty: cur.disk_empty,
            });
            for loc in w.map.values_mut() {
                if let Loc::Active(i) = *loc {
                    *loc = Loc::Frozen(i);
                }
            }
            *self.current.write() = v.clone();
            (v, cur.epoch.load(Ordering::Acquire), seq, w.next_id)
        };
        let result = self.merge_frozen(&v, epoch, seq, next_id, threads, policy, ctl);
        // Whatever happened, the next version is read from the directory: the merged files
        // after a commit, the old ones otherwise, plus the log after them.
        let mut w = writer.lock();
        let mut disk = DiskIndex::open(&self.dir, self.opts)?;
        disk.writer_held = true;
        // The static node cache, chosen again on the new graph (its nodes and records
        // changed); a failure here leaves the new version uncached, not unusable.
        let cache = *self.node_cache.lock();
        if let Some((nodes, policy, threads)) = cache {
            let _ = disk.load_cache(nodes, policy, threads, ctl);
        }
        let disk_seq = disk.manifest().and_then(|m| m.log_seq).unwrap_or(0);
        let ids = SlotIds::load(&self.dir, disk.n()).map_err(OpenError::from)?;
        let version = Arc::new(new_version(disk, ids, &self.cfg));
        w.map = version
            .ids
            .reverse()
            .into_iter()
            .map(|(id, s)| (id, Loc::Disk(s)))
            .collect();
        let path = log_path(&self.dir);
        let keep: Vec<LogRecord> = if path.is_file() {
            wal::read_log(&path)?
                .records
                .into_iter()
                .filter(|r| r.seq > disk_seq)
                .collect()
        } else {
            Vec::new()
        };
        for r in &keep {
            apply(&self.dir, &version, &mut w, r)?;
        }
        *self.current.write() = version;
        if path.is_file() && result.is_ok() {
            // Checkpoint under the directory lock, so a reader never pairs the old files
            // with the new log.
            let lock = Flock::dir(&self.dir, true).map_err(OpenError::from)?;
            w.log = Some(wal::checkpoint(&path, disk_seq, &keep)?);
            drop(lock);
        }
        result
    }

    /// The index's files opened through the page cache on the layout the merge rewrites —
    /// the decoupled one when this handle searches it, else the packed one — for a merge
    /// (whose writes start their transactions under the lock this handle holds).
    fn open_source(&self) -> Result<DiskIndex, LiveError> {
        let mut o = self.opts;
        if o.layout != IndexLayout::Decoupled {
            o.layout = IndexLayout::Packed;
        }
        o.direct = false;
        let mut d = DiskIndex::open(&self.dir, o)?;
        d.writer_held = true;
        Ok(d)
    }

    #[allow(clippy::too_many_arguments)]
    fn merge_frozen(
        &self,
        v: &Version,
        epoch: u32,
        seq: u64,
        next_id: u64,
        threads: usize,
        policy: &SegmentPolicy,
        ctl: &Control,
    ) -> Result<MergeReport, LiveError> {
        let t0 = Instant::now();
        // The merge reads the files through the page cache: its read pass has just brought
        // them in, so the insert phase's searches cost memory reads, not device round trips
        // (and leave the device to the O_DIRECT searches running beside the merge).
        let source = self.open_source()?;
        let old = &source;
        let decoupled = old.options().layout == IndexLayout::Decoupled;
        debug_assert_eq!(old.n(), v.disk.n());
        let frozen = v.frozen.as_ref().expect("frozen by merge");
        let txn = Txn::begin_held(&self.dir)?;
        let input = MergeInput {
            old,
            ids: &v.ids,
            dead: &v.dead,
            epoch,
            delta: frozen,
            cfg: self.cfg,
            threads,
            segments: decoupled.then_some(*policy),
        };
        let out = crate::kinds::graph::updates::merge::merge(&input, txn.staging(), ctl)?;
        let mut report = out.report;
        let old_manifest = old.manifest().cloned();
        // The staging directory holds the whole new version (a decoupled merge links the
        // segments it keeps into it), so it alone is described: the layouts not rewritten
        // (the packed ones, after a decoupled merge) are left out and the commit deletes them.
        let mut m = crate::kinds::graph::files::describe(
            &[txn.staging()],
            old_manifest.as_ref().and_then(|m| m.build.clone()),
            String::new(),
        )
        .map_err(IndexBuildError::from)?;
        check_merged(txn.staging(), m.n).map_err(IndexBuildError::from)?;
        m.log_seq = Some(seq);
        m.next_id = Some(next_id);
        if !report.recall.is_empty() {
            let r = crate::kinds::graph::monitor::RecallRecord::after_merge(
                report.recall.clone(),
                report.recall_samples,
                old_manifest.as_ref().and_then(|m| m.recall.as_ref()),
            );
            report.recall_warning = r.drop_warning();
            m.recall = Some(r);
        }
        report.bytes_written += txn.commit(&m)?;
        drop(source);
        // The other layouts the index had, written again from the new packed file (a
        // decoupled merge keeps only the decoupled layout: DecoupleVS rewrites the graph
        // file alone).
        let layouts: Vec<IndexLayout> = old_manifest
            .map(|m| m.layouts.iter().filter_map(|l| l.parse().ok()).collect())
            .unwrap_or_default();
        let t_l = Instant::now();
        if !decoupled && layouts.iter().any(|&l| l != IndexLayout::Packed) {
            let mut o = self.opts;
            o.layout = IndexLayout::Packed;
            o.direct = false;
            let mut d = DiskIndex::open(&self.dir, o)?;
            d.writer_held = true;
            for l in layouts.into_iter().filter(|&l| l != IndexLayout::Packed) {
                let r = d.write_layout(l, &crate::kinds::graph::ShuffleParams::default(), ctl)?;
                report.bytes_written += r.file_bytes;
            }
        }
        report.finish_secs += t_l.elapsed().as_secs_f64();
        report.total_secs = t0.elapsed().as_secs_f64();
        report.peak_rss_bytes = crate::mem::peak_rss_bytes();
        Ok(report)
    }
}

/// What a merge wrote, read back with the loaders an open uses before it is committed: a
/// merge never commits a state its own loader refuses (ids each once, the vector map's slots
/// in step with them).
fn check_merged(staging: &Path, n: u64) -> Result<(), crate::dir::FileError> {
    let ids = SlotIds::load(staging, n as usize)?;
    if let Some(map) = crate::kinds::graph::updates::segments::VectorMap::load(staging)? {
        map.check_ids(
            &ids,
            &staging.join(crate::kinds::graph::updates::segments::FILE_NAME),
        )?;
    }
    Ok(())
}

fn search_delta<T: Element>(
    d: &Delta,
    query: &[T],
    k: usize,
    l: usize,
    e: u32,
    scratch: &mut SearchScratch,
    out: &mut Vec<(u64, f32)>,
) {
    match T::DTYPE {
        DType::F32 => d.search::<f32>(bytemuck::cast_slice(query), k, l, e, scratch, out),
        DType::U8 => d.search::<u8>(bytemuck::cast_slice(query), k, l, e, scratch, out),
        DType::I8 => d.search::<i8>(bytemuck::cast_slice(query), k, l, e, scratch, out),
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

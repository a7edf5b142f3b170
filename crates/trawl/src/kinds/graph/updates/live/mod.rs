//! A live index: a disk index that takes inserts, deletes and upserts (FreshDiskANN's design,
//! DecoupleVS §3.5).
//!
//! - Every acknowledged operation is first in the write-ahead log ([`crate::kinds::graph::updates::wal`], one
//!   `fdatasync` per call), then applied in memory: inserted vectors go into the in-memory
//!   delta (`updates::delta`), a Vamana graph searched beside the disk index; deleted disk
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

mod apply;
mod error;
mod merging;
mod open;
mod search;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::dir::txn::Flock;
use crate::kernels::DType;
use crate::kinds::graph::search::{CachePolicy, LiveFilter};
use crate::kinds::graph::updates::delta::Delta;
use crate::kinds::graph::updates::ids::SlotIds;
use crate::kinds::graph::updates::wal::{self, LogWriter};
use crate::kinds::graph::{DiskIndex, OpenOptions};
use crate::vamana::VamanaConfig;

pub(crate) use apply::check_op;
pub use error::LiveError;
pub use merging::MergeOptions;
pub use search::LiveBatch;
pub use write::DeleteReport;

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
    /// The attributes filters of the disk slots compile against: the disk files' ones (rows
    /// = slots; empty rows when the files have none) knowing the label keys and fields of
    /// every vector inserted since ([`SharedAttrs`]); `None` while no vector has any.
    attrs: SharedAttrs,
}

/// A version's [`Version::attrs`], shared with the versions made from it without a merge
/// (a freeze, a cache load), so an insert's new names reach them all.
type SharedAttrs = Arc<RwLock<Option<Arc<crate::filter::Attributes>>>>;

#[derive(Debug)]
struct Writer {
    _lock: Option<Flock>,
    log: Option<LogWriter>,
    map: HashMap<u64, Loc>,
    next_id: u64,
    durability: Durability,
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
    /// Bytes the in-memory delta and a write's log buffer may take (0: no limit;
    /// [`LiveIndex::set_delta_limit`]).
    delta_limit: std::sync::atomic::AtomicU64,
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join(wal::FILE_NAME)
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

    /// Limits the memory of the update delta (and of a write's log record) to `bytes`, a
    /// memory plan's `delta` item (`None`: no limit). An insert or upsert that would take the
    /// delta past it is refused with [`LiveError::DeltaFull`] until a merge empties the
    /// delta; deletes are not limited (a deleted disk vector takes no delta memory).
    pub fn set_delta_limit(&self, bytes: Option<u64>) {
        self.delta_limit
            .store(bytes.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes the delta is planned to take per vector: its row, norms, id, stamps and graph
    /// row, three times over (its arrays grow by doubling, the old copy held while the new one
    /// fills).
    pub fn delta_vector_bytes(&self) -> u64 {
        let v = self.current.read().clone();
        crate::kinds::graph::updates::delta::vector_bytes(
            v.disk.dim(),
            v.disk.dtype().size_bytes(),
            self.cfg.slots,
        )
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
}

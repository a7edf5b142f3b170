//! Opening a live index: the disk files, their ids and the log replayed over them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::dir::txn::Flock;
use crate::kinds::graph::updates::delta::Delta;
use crate::kinds::graph::updates::ids::SlotIds;
use crate::kinds::graph::updates::wal::{self, LogWriter};
use crate::kinds::graph::{DiskIndex, OpenError, OpenOptions};
use crate::vamana::{VamanaConfig, VamanaParams};

use super::apply::apply;
use super::{log_path, Access, Durability, LiveError, LiveIndex, Loc, Version, Writer};

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
            delta_limit: Default::default(),
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

pub(super) fn new_version(disk: DiskIndex, ids: SlotIds, cfg: &VamanaConfig) -> Version {
    let dead: Arc<[AtomicU32]> = (0..disk.n() as u32)
        .map(|s| AtomicU32::new(u32::from(ids.is_hole(s))))
        .collect();
    let active = Arc::new(Delta::new(disk.dtype(), disk.dim(), disk.metric(), *cfg));
    let disk_empty = ids.live() == 0;
    let attrs = Arc::new(RwLock::new(disk.attrs().cloned()));
    Version {
        attrs,
        disk_empty,
        disk: Arc::new(disk),
        ids: Arc::new(ids),
        dead,
        epoch: Arc::new(AtomicU32::new(1)),
        frozen: None,
        active,
    }
}

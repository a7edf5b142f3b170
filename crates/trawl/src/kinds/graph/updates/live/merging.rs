//! Merging a live index: the active delta is frozen, folded with the deletions into new disk
//! files ([`crate::kinds::graph::updates::merge`]) in one transaction, and the next version
//! replays the log after them.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::dir::txn::{Flock, Txn};
use crate::kinds::graph::updates::delta::Delta;
use crate::kinds::graph::updates::ids::SlotIds;
use crate::kinds::graph::updates::merge::{DeleteRepair, MergeInput, MergeReport, SegmentPolicy};
use crate::kinds::graph::updates::wal::{self, LogRecord};
use crate::kinds::graph::{DiskIndex, IndexBuildError, IndexLayout, OpenError};
use crate::progress::Control;

use super::apply::apply;
use super::open::new_version;
use super::{log_path, LiveError, LiveIndex, Loc, Version};

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
    /// How deleted nodes are taken out of the graph (in place by default).
    pub deletes: DeleteRepair,
    /// The merge carries the hot-node order over (the slots it frees leave it) until the
    /// slots changed since its last ranking would pass this share of the live vectors, then
    /// ranks afresh (0: every merge ranks afresh). Default
    /// [`crate::kinds::graph::hot::RERANK_SHARE`].
    pub hot_rerank_share: f64,
}

impl Default for MergeOptions {
    /// One thread per core at niceness 10.
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            nice: 10,
            segments: SegmentPolicy::default(),
            deletes: DeleteRepair::default(),
            hot_rerank_share: crate::kinds::graph::hot::RERANK_SHARE,
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

impl LiveIndex {
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
                pool.install(|| self.merge_now(threads, o, ctl))
            })
            .join()
            .unwrap_or_else(|_| Err(LiveError::Internal("the merge thread panicked".into())))
        })
    }

    fn merge_now(
        &self,
        threads: usize,
        o: &MergeOptions,
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
                attrs: cur.attrs.clone(),
            });
            for loc in w.map.values_mut() {
                if let Loc::Active(i) = *loc {
                    *loc = Loc::Frozen(i);
                }
            }
            *self.current.write() = v.clone();
            (v, cur.epoch.load(Ordering::Acquire), seq, w.next_id)
        };
        let result = self.merge_frozen(&v, epoch, seq, next_id, threads, o, ctl);
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
        o: &MergeOptions,
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
            segments: decoupled.then_some(o.segments),
            deletes: o.deletes,
            hot_rerank_share: o.hot_rerank_share,
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
        // The page nodes the index had, kept by the layout written below (the commit deletes
        // the old file). A damaged page-node file does not stop the merge: its layout is then
        // grouped afresh (the old file, whose damage searches report, is replaced).
        let prev_pages = if decoupled {
            None
        } else {
            crate::kinds::graph::pages_write::PreviousPages::read(&self.dir, &v.ids).unwrap_or(None)
        };
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
                let r = match (l, &prev_pages) {
                    // The page nodes are kept, with the parameters they were written with.
                    (IndexLayout::Pages, Some(prev)) => {
                        d.write_pages_kept(&prev.params, Some(prev), ctl)?
                    }
                    _ => d.write_layout(l, &crate::kinds::graph::ShuffleParams::default(), ctl)?,
                };
                report.bytes_written += r.file_bytes;
                if let Some(p) = r.pages.and_then(|p| p.placement) {
                    report.pages_placement = Some(p);
                }
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

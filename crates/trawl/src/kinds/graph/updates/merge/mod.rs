//! StreamingMerge (FreshDiskANN): folds the deletions and the in-memory delta of a live index
//! into a new version of its disk files.
//!
//! 1. **Read** (one sequential pass over `packed.trawl`): every live vector into a matrix
//!    indexed by its new slot, and the lists of the deleted nodes. New vectors take the freed
//!    slots first (ascending), then slots past the end.
//! 2. **Insert**: each new vector is placed by a beam search over the old disk index (read through
//!    the page cache, 8 queries interleaved per thread; deleted
//!    nodes traversed but never chosen) and a greedy search of the delta graph; the candidates
//!    are robust-pruned to `R` with exact distances, and a back-edge to the new node is noted
//!    for each chosen neighbour (`Δ`).
//! 3. **Delete + patch** (a second sequential pass, writing the new file in slot order): a node
//!    that points to deleted nodes takes their out-neighbours as candidates and is re-pruned
//!    (FreshDiskANN Algorithm 4); `Δ` is added to each list (re-pruned when over `R`); freed
//!    slots that no new vector took are written as empty records (no vector, no edges, never
//!    reachable).
//!
//! The graph is streamed: besides the vectors (the distances are exact) the merge holds the
//! deleted nodes' lists, the new nodes' lists and `Δ`, never the whole graph. New vectors get PQ
//! codes from the existing codebook; the entry index is rebuilt over the new slots.
//!
//! A version built label-aware stays so: the merge links new vectors by their labels too,
//! prunes keeping a path for every label, and writes the labels' start nodes (`labels`).
//!
//! The code follows the phases: the plan of the slots here, the read pass in `read`, the insert
//! phase in `insert` (with the labels' candidates from `labels`), the delete + patch pass in `patch`, the PQ codes, the entry index and the
//! recall monitor in `finish`, the decoupled layout's vector segments in `segment_files`.

mod finish;
mod insert;
mod labels;
mod patch;
mod read;
mod segment_files;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::time::Instant;

use crate::kernels::DType;
use crate::kinds::graph::search::{DecoupledLayout, LiveFilter};
use crate::kinds::graph::updates::delta::{Delta, DeltaElement};
use crate::kinds::graph::updates::ids::{SlotIds, HOLE};
use crate::kinds::graph::{DiskIndex, IndexBuildError};
use crate::progress::Control;
use crate::vamana::{PruneLimits, VamanaConfig, VectorStore};

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MergeReport {
    /// Vectors removed from the disk index.
    pub deleted: u64,
    /// Vectors added to it.
    pub inserted: u64,
    /// Live nodes re-pruned because they pointed to deleted nodes.
    pub repaired: u64,
    /// Nodes that received back-edges from new nodes.
    pub patched: u64,
    /// Edges added to link back nodes the merge left unreachable from the medoid.
    pub relinked: usize,
    /// Labels with a start node in the new version (a label-aware merge: the old version was
    /// built label-aware; 0 otherwise).
    pub label_starts: usize,
    /// The recall monitor's figures on the merged version ([`crate::kinds::graph::monitor`]).
    pub recall: Vec<crate::kinds::graph::monitor::RecallPoint>,
    /// Vectors the monitor searched.
    pub recall_samples: usize,
    /// Set when the merged version's sampled recall fell more than 2 points below the last
    /// build's ([`crate::kinds::graph::monitor::RecallRecord::drop_warning`]).
    pub recall_warning: Option<String>,
    /// Slots of the new version.
    pub slots: u64,
    /// Free slots of the new version.
    pub holes: u64,
    /// Seconds of the read pass.
    pub read_secs: f64,
    /// Seconds of the insert phase (searches, prunes).
    pub insert_secs: f64,
    /// Seconds of the delete and patch pass (with writing the file).
    pub patch_secs: f64,
    /// Seconds of the other files (PQ codes, ids, entry index, other layouts).
    pub finish_secs: f64,
    /// Seconds of the whole merge.
    pub total_secs: f64,
    /// Bytes written (every new file).
    pub bytes_written: u64,
    /// Peak resident memory of the process during the merge (from the kernel's high-water
    /// mark, so it includes whatever the process held before), bytes.
    pub peak_rss_bytes: u64,
    /// Decoupled layout: what happened to the vector segments.
    pub segments: Option<SegmentReport>,
    /// Page-node layout: how its page nodes were kept.
    pub pages_placement: Option<crate::kinds::graph::layout::pages::place::PlaceReport>,
}

/// What a decoupled merge did to the vector segments.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SegmentReport {
    /// The segment written (its file name), if any.
    pub written: Option<String>,
    /// Vectors in it: the new ones and those moved out of collected segments.
    pub written_vectors: u64,
    /// Of those, vectors moved out of garbage-collected segments.
    pub moved_vectors: u64,
    /// Bytes of the new segment file.
    pub written_bytes: u64,
    /// Segments garbage-collected (file names), with their dead share before the merge.
    pub collected: Vec<(String, f64)>,
    /// Segments of the new version.
    pub segments: usize,
    /// Bytes of every segment file of the new version.
    pub segment_bytes: u64,
}

/// The state a merge folds in.
pub(crate) struct MergeInput<'a> {
    /// The current version, opened on its packed layout.
    pub old: &'a DiskIndex,
    /// Its slot ids.
    pub ids: &'a SlotIds,
    /// Deletion stamps of its slots and the epoch the merge reads at.
    pub dead: &'a [AtomicU32],
    pub epoch: u32,
    /// The delta to fold in (its nodes live at `epoch`).
    pub delta: &'a Delta,
    /// Graph parameters (`R`, `L`, `α`).
    pub cfg: VamanaConfig,
    /// Search threads of the insert phase.
    pub threads: usize,
    /// `Some` for a merge of the decoupled layout (only the graph file is rewritten; new
    /// vectors go to a new segment), with its segment policy; `None` for the packed layout.
    pub segments: Option<SegmentPolicy>,
}

/// How a decoupled merge manages its vector segments (DecoupleVS §3.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentPolicy {
    /// A segment whose share of dead vectors (deleted, or replaced by an upsert) passes this
    /// is garbage-collected: its live vectors are rewritten into the merge's new segment and
    /// the file is deleted.
    pub gc_dead_share: f64,
    /// At most this many segments: past it, the segments with the fewest live vectors are
    /// folded into the merge's new segment too (small segments from small merges would
    /// otherwise pile up).
    pub max_segments: usize,
}

impl Default for SegmentPolicy {
    fn default() -> Self {
        Self {
            gc_dead_share: 0.2,
            max_segments: 8,
        }
    }
}

/// What the merge wrote into the staging directory.
pub(crate) struct MergeOutput {
    pub report: MergeReport,
}

/// Runs the merge, writing `packed.trawl` (decoupled: `graph.trawl`, `vmap.trawl`, a new vector
/// segment when there are vectors to write, and hard links to the segments kept),
/// `pq-codes.trawl`, `pq.trawl`, `ids.trawl` and (when the old version had one) `entry.trawl`
/// into `staging`.
pub(crate) fn merge(
    input: &MergeInput<'_>,
    staging: &Path,
    ctl: &Control,
) -> Result<MergeOutput, IndexBuildError> {
    match input.old.dtype() {
        DType::F32 => merge_typed::<f32>(input, staging, ctl),
        DType::U8 => merge_typed::<u8>(input, staging, ctl),
        DType::I8 => merge_typed::<i8>(input, staging, ctl),
    }
}

/// The merge as its phases: plan the slots, read the old version, insert the new vectors,
/// write the PQ files, delete + patch the graph, then the ids, the vector segments, the entry
/// index and the recall monitor.
fn merge_typed<T: DeltaElement>(
    input: &MergeInput<'_>,
    staging: &Path,
    ctl: &Control,
) -> Result<MergeOutput, IndexBuildError> {
    let t0 = Instant::now();
    let old = input.old;
    let dim = old.dim();
    let metric = old.metric();
    let mut plan = Plan::<T>::new(input);
    let mut report = MergeReport {
        deleted: plan.deleted.iter().filter(|&&d| d).count() as u64,
        inserted: plan.new_slot.len() as u64,
        ..MergeReport::default()
    };

    // 1. Read: vectors of live nodes, lists of deleted ones.
    let t_read = Instant::now();
    let read = read::read(input, &plan, ctl)?;
    report.read_secs = t_read.elapsed().as_secs_f64();
    let store = VectorStore::new(&read.vectors, dim, metric).ok_or_else(|| {
        IndexBuildError::Graph(crate::vamana::BuildError::InvalidParam {
            name: "dimension",
            reason: "zero".into(),
        })
    })?;
    let limits = PruneLimits {
        degree: input.cfg.r,
        alpha: input.cfg.alpha,
        max_candidates: input.cfg.max_candidates,
        saturate: input.cfg.saturate,
    };

    // The new version's attributes; a label-aware merge's labels and start nodes.
    let merged = finish::merged_attrs(input, &plan)?;
    let labels = match &merged {
        Some(a) => labels::labels(input, &plan, a, &store, ctl)?,
        None => None,
    };
    report.label_starts = labels.as_ref().map_or(0, |lb| lb.tracked());

    // 2. Insert: candidates from the old disk graph and the delta graph (and the labels').
    let t_ins = Instant::now();
    let extra = match (&labels, &merged) {
        (Some(lb), Some(a)) => labels::candidates(input, &plan, lb, a, &store, ctl)?,
        _ => Vec::new(),
    };
    let inserted = insert::insert(input, &plan, &store, limits, labels.as_ref(), &extra, ctl)?;
    drop(extra);
    report.insert_secs = t_ins.elapsed().as_secs_f64();
    let medoid = insert::new_medoid(old, &plan, &store, &read.medoid_vec);

    // PQ codes of the new version: old codes for kept slots, new codes for new vectors.
    let t_fin = Instant::now();
    report.bytes_written += finish::write_pq(old, &plan, staging)?;
    report.finish_secs += t_fin.elapsed().as_secs_f64();

    // 3. Delete + patch, streaming the old file into the new one.
    let t_patch = Instant::now();
    let repair = patch::Repair {
        deleted: &plan.deleted,
        dlists: &read.dlists,
        back: &inserted.back,
        new_of_slot: &inserted.new_of_slot,
        new_lists: &inserted.new_lists,
        store: &store,
        limits,
        labels: labels.as_ref(),
    };
    let written = patch::write_graph(input, &plan, &repair, &read.vectors, medoid, staging, ctl)?;
    report.relinked = written.relinked;
    report.bytes_written += written.bytes;
    report.repaired = written.repaired;
    report.patched = written.patched;
    report.patch_secs = t_patch.elapsed().as_secs_f64();

    // Ids, the vector segments and the entry index.
    let t_fin = Instant::now();
    let ids = SlotIds::Table(std::mem::take(&mut plan.slot_ids));
    report.bytes_written +=
        ids.save(&staging.join(crate::kinds::graph::updates::ids::FILE_NAME))?;
    report.bytes_written +=
        finish::write_attrs(merged.as_ref(), labels.as_ref(), &written.meta, staging)?;
    if let (Some(d), Some(policy)) = (decoupled(input), input.segments) {
        let n_old = old.n();
        let keep = |s: u32| (s as usize) < n_old && !plan.is_free(s);
        let seg = segment_files::write_segments::<T>(
            d,
            n_old,
            plan.n_slots,
            &keep,
            &plan.new_slot,
            &read.vectors,
            dim,
            policy,
            staging,
            old.dir(),
        )?;
        report.bytes_written += seg.bytes_written;
        report.segments = Some(seg.report);
    }
    report.bytes_written += finish::write_entry(old, &ids, &store, &written.meta, staging, ctl)?;
    // The recall monitor on the merged version (read through the page cache: just written).
    let t_mon = Instant::now();
    let hot_bytes;
    (report.recall, report.recall_samples, hot_bytes) =
        finish::monitor(input, staging, &read.vectors, &ids)?;
    report.bytes_written += hot_bytes;
    report.finish_secs += t_mon.elapsed().as_secs_f64();
    report.slots = plan.n_slots as u64;
    report.holes = ids.len() as u64 - ids.live() as u64;
    report.finish_secs += t_fin.elapsed().as_secs_f64();
    report.total_secs = t0.elapsed().as_secs_f64();
    report.peak_rss_bytes = crate::mem::peak_rss_bytes();
    Ok(MergeOutput { report })
}

/// The old version's decoupled layout when this is a decoupled merge.
fn decoupled<'a>(input: &MergeInput<'a>) -> Option<&'a DecoupledLayout> {
    input.old.decoupled().filter(|_| input.segments.is_some())
}

/// The deletion filter at the merge's epoch.
fn live_filter<'a>(input: &MergeInput<'a>) -> LiveFilter<'a> {
    LiveFilter {
        dead: input.dead,
        epoch: input.epoch,
    }
}

/// The slots of the new version, planned before any file is read: which old slots this merge
/// deletes, the new vectors (the delta's nodes live at the merge's epoch) and their slots
/// (freed ones first, ascending, then past the end).
struct Plan<'a, T> {
    /// The old version's slot ids.
    ids: &'a SlotIds,
    /// Per old slot: deleted by this merge.
    deleted: Vec<bool>,
    /// The new vectors' rows.
    new_rows: Vec<T>,
    /// The slot of each new vector.
    new_slot: Vec<u32>,
    /// The slot of each new vector, by its node in the delta.
    delta_slot: HashMap<usize, u32>,
    /// Slots of the new version.
    n_slots: usize,
    /// The id of each slot of the new version (`HOLE` when free).
    slot_ids: Vec<u64>,
}

impl<'a, T: DeltaElement> Plan<'a, T> {
    fn new(input: &MergeInput<'a>) -> Self {
        let n_old = input.old.n();
        let filter = live_filter(input);
        let deleted: Vec<bool> = (0..n_old as u32)
            .map(|s| !input.ids.is_hole(s) && !filter.visible(s))
            .collect();
        let mut plan = Plan {
            ids: input.ids,
            deleted,
            new_rows: Vec::new(),
            new_slot: Vec::new(),
            delta_slot: HashMap::new(),
            n_slots: 0,
            slot_ids: Vec::new(),
        };
        // The new vectors: the delta's nodes live at the merge's epoch.
        let (new_rows, new_ids, new_delta_idx) = input
            .delta
            .view::<T, _>(|v| {
                let mut rows = Vec::new();
                let mut ids = Vec::new();
                let mut idx = Vec::new();
                for i in 0..v.n() {
                    if v.visible(i, input.epoch) {
                        rows.extend_from_slice(v.row(i));
                        ids.push(v.ext(i));
                        idx.push(i);
                    }
                }
                (rows, ids, idx)
            })
            .unwrap_or_default();
        let n_new_vectors = new_ids.len();
        // Slots: freed ones first, then past the end.
        let free: Vec<u32> = (0..n_old as u32).filter(|&s| plan.is_free(s)).collect();
        let mut new_slot = Vec::with_capacity(n_new_vectors);
        for i in 0..n_new_vectors {
            new_slot.push(match free.get(i) {
                Some(&s) => s,
                None => (n_old + i - free.len()) as u32,
            });
        }
        let n_slots = n_old + n_new_vectors.saturating_sub(free.len());
        let mut slot_ids: Vec<u64> = (0..n_slots as u32)
            .map(|s| {
                if (s as usize) < n_old && !plan.is_free(s) {
                    input.ids.id(s)
                } else {
                    HOLE
                }
            })
            .collect();
        for (i, &s) in new_slot.iter().enumerate() {
            slot_ids[s as usize] = new_ids[i];
        }
        plan.delta_slot = new_delta_idx
            .iter()
            .zip(&new_slot)
            .map(|(&d, &s)| (d, s))
            .collect();
        plan.new_rows = new_rows;
        plan.new_slot = new_slot;
        plan.n_slots = n_slots;
        plan.slot_ids = slot_ids;
        plan
    }

    /// Whether old slot `s` is free in the new version (a hole, or deleted now).
    fn is_free(&self, s: u32) -> bool {
        self.ids.is_hole(s) || self.deleted[s as usize]
    }

    /// The rows of new vector `i`.
    fn new_row(&self, i: usize, dim: usize) -> &[T] {
        &self.new_rows[i * dim..(i + 1) * dim]
    }
}

//! StreamingMerge (FreshDiskANN) with in-place deletes (IP-DiskANN): folds the deletions and
//! the in-memory delta of a live index into a new version of its disk files.
//!
//! 1. **Read** (one sequential pass over `packed.trawl`, or the decoupled graph and segments):
//!    every live vector into a matrix indexed by its new slot, every list, and the deleted
//!    nodes' vectors. New vectors take the freed slots first (ascending), then slots past the
//!    end.
//! 2. **Delete** ([`DeleteRepair`], `deletes`): the deleted nodes are taken out of the lists.
//!    In place (the default): each in-neighbour of a deleted node replaces its edge by at most
//!    `c` edges to the deleted node's out-neighbours, every other edge to a deleted node is
//!    dropped, and a list is re-pruned only when it then holds more than `R` — the work of a
//!    delete is `O(c·R)` distances, not a re-prune of every node near it. Consolidation
//!    (FreshDiskANN Algorithm 4, behind the switch): a node pointing to deleted nodes takes
//!    their out-neighbours as candidates and is robust-pruned afresh.
//! 3. **Insert**: each new vector is placed by a beam search over the old disk index (read
//!    through the page cache, 8 queries interleaved per thread; deleted nodes traversed but never
//!    chosen) and a greedy search of the delta graph; the candidates are robust-pruned to `R`
//!    with exact distances, and a back-edge to the new node is noted for each chosen neighbour
//!    (`Δ`).
//! 4. **Patch** (writing the new file in slot order): `Δ` is added to each list (re-pruned when
//!    over `R`); nodes left unreachable are linked back; freed slots that no new vector took are
//!    written as empty records (no vector, no edges, never reachable). The report counts the
//!    kept nodes whose list changed and the pages that differ from the old file's.
//!
//! The merge holds the vectors and the lists of the graph in memory (about what the build
//! holds), never more than one copy of each besides the repaired lists. New vectors get PQ codes
//! from the existing codebook; the entry index is rebuilt over the new slots.
//!
//! A version built label-aware stays so: the merge links new vectors by their labels too,
//! prunes keeping a path for every label, and writes the labels' start nodes (`labels`).
//!
//! The code follows the phases: the plan of the slots here, the read pass in `read`, the delete
//! phase in `deletes`, the insert phase in `insert` (with the labels' candidates from
//! `labels`), the patch pass in `patch`, the PQ codes, the entry index and the recall monitor
//! in `finish`, the decoupled layout's vector segments in `segment_files`.

mod deletes;
mod finish;
mod insert;
mod labels;
mod patch;
mod read;
mod segment_files;
#[cfg(test)]
mod tests;

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
use crate::vamana::{VamanaConfig, VectorStore};

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MergeReport {
    /// Vectors removed from the disk index.
    pub deleted: u64,
    /// Vectors added to it.
    pub inserted: u64,
    /// Kept nodes whose list the delete phase changed (lost an edge to a deleted node, gained a
    /// replacement or, by consolidation, was re-pruned).
    pub repaired: u64,
    /// Nodes that received back-edges from new nodes.
    pub patched: u64,
    /// How the deleted nodes were taken out of the graph.
    pub deletes: DeleteRepair,
    /// Edges from live nodes to the deleted nodes in the old graph (every one is gone from the
    /// new graph).
    pub in_edges: u64,
    /// In place: of those edges, the ones whose source the delete phase found (by its search,
    /// or all of them with [`InNeighbours::Exact`]) and gave replacement edges.
    pub in_edges_found: u64,
    /// Edges added in place of edges to deleted nodes (before any prune).
    pub replacement_edges: u64,
    /// Kept nodes whose list changed (repaired, patched or losing an edge to a deleted node).
    pub touched_nodes: u64,
    /// Data pages of the new graph file that differ from the old one's: pages holding a
    /// changed list, a new vector or a freed slot (packed: 4 KiB record pages; decoupled: the
    /// lists, one per page counted as touched when changed, since its lists are not paged).
    pub touched_pages: u64,
    /// Data pages of the new graph file.
    pub graph_pages: u64,
    /// Seconds of the delete phase (the in-place searches and replacement edges; 0 for a
    /// consolidation, whose work is in `patch_secs`).
    pub delete_secs: f64,
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
    /// Seconds of the other files (PQ codes, ids, entry index, the recall monitor, other
    /// layouts).
    pub finish_secs: f64,
    /// Of those, seconds of the recall monitor and the hot-node order on the merged version.
    pub monitor_secs: f64,
    /// Whether the merge carried the old version's hot-node order over
    /// ([`crate::kinds::graph::hot::HotOrder::carried`]) instead of ranking afresh.
    pub hot_carried: bool,
    /// Slots deleted or filled since the hot-node order was ranked (0 after a fresh ranking).
    pub hot_changed: u64,
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

/// How a merge takes deleted nodes out of the graph.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum DeleteRepair {
    /// In place (IP-DiskANN): the in-neighbours of each deleted node are found
    /// ([`InPlaceParams::in_neighbours`]); each replaces its edge to the deleted node by edges
    /// to at most [`InPlaceParams::replace`] of the candidates; a list is re-pruned only when
    /// it then holds more than `R`. Every other edge to a deleted node is dropped. The cost of
    /// a delete is `O(c·R)` distances (plus its search, when searching), whatever the size of
    /// the graph.
    InPlace(InPlaceParams),
    /// FreshDiskANN's consolidation (Algorithm 4): every node pointing to a deleted node takes
    /// the deleted node's out-neighbours as candidates and is robust-pruned afresh.
    Consolidate,
}

impl Default for DeleteRepair {
    fn default() -> Self {
        Self::InPlace(InPlaceParams::default())
    }
}

/// How an in-place delete finds what it needs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct InPlaceParams {
    /// Edges added per edge lost (IP-DiskANN's `c`).
    pub replace: usize,
    /// How the in-neighbours of a deleted node are found.
    pub in_neighbours: InNeighbours,
    /// Where the replacement edges go.
    pub candidates: Candidates,
}

impl Default for InPlaceParams {
    fn default() -> Self {
        Self {
            replace: 3,
            in_neighbours: InNeighbours::Exact,
            candidates: Candidates::OutNeighbours,
        }
    }
}

/// How an in-place delete finds the in-neighbours of a deleted node.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum InNeighbours {
    /// IP-DiskANN: a search of the old graph for the deleted vector with a list of `l`
    /// (0: the graph's build `L`); the nodes found whose list holds the deleted node.
    Search {
        /// The search's list size.
        l: usize,
    },
    /// Every node pointing to the deleted node, from the merge's sequential pass over the
    /// lists (exact; no search). The default: IP-DiskANN searches because it deletes one
    /// vertex at a time with no pass over the graph, but a merge reads every list anyway, so
    /// the exact set costs one scan. On GloVe-200K with 5% random deletes the search found
    /// 63% of the in-edges and took twice the delete phase's time for the same recall; after a
    /// whole cluster is deleted it finds almost none (the deleted vector's neighbourhood is
    /// deleted too).
    Exact,
}

/// The candidates an in-place delete gives replacement edges to.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Candidates {
    /// The deleted node's live out-neighbours (IP-DiskANN).
    OutNeighbours,
    /// The `k` live nodes nearest to the deleted vector found by the in-neighbour search
    /// (DiskANN's `VisitedAndTopK`; with [`InNeighbours::Exact`] the search is run for them).
    Nearest {
        /// How many.
        k: usize,
    },
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
    /// How deleted nodes are taken out of the graph.
    pub deletes: DeleteRepair,
    /// The hot-node order is ranked afresh once the slots changed since its ranking would
    /// pass this share of the live vectors (0: every merge ranks afresh).
    pub hot_rerank_share: f64,
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
    let limits = input.cfg.prune_limits();

    // The new version's attributes; a label-aware merge's labels and start nodes.
    let merged = finish::merged_attrs(input, &plan)?;
    let labels = match &merged {
        Some(a) => labels::labels(input, &plan, a, &store, ctl)?,
        None => None,
    };
    report.label_starts = labels.as_ref().map_or(0, |lb| lb.tracked());

    let medoid = insert::new_medoid(old, &plan, &store, &read.medoid_vec);

    // 2. Delete: the deleted nodes taken out of the graph, in place or by consolidation.
    let t_del = Instant::now();
    let repaired = deletes::repair(
        input,
        &plan,
        &read.lists,
        &read.deleted_vectors,
        &store,
        limits,
        labels.as_ref(),
        medoid,
        ctl,
    )?;
    repaired.report(input.deletes, &mut report);
    report.delete_secs = t_del.elapsed().as_secs_f64();

    // 3. Insert: candidates from the old disk graph and the delta graph (and the labels').
    let t_ins = Instant::now();
    let extra = match (&labels, &merged) {
        (Some(lb), Some(a)) => labels::candidates(input, &plan, lb, a, &store, ctl)?,
        _ => Vec::new(),
    };
    let inserted = insert::insert(input, &plan, &store, limits, labels.as_ref(), &extra, ctl)?;
    drop(extra);
    report.insert_secs = t_ins.elapsed().as_secs_f64();

    // PQ codes of the new version: old codes for kept slots, new codes for new vectors.
    let t_fin = Instant::now();
    report.bytes_written += finish::write_pq(old, &plan, staging)?;
    report.finish_secs += t_fin.elapsed().as_secs_f64();

    // 4. Patch: back-edges added, the new graph written.
    let t_patch = Instant::now();
    let patch = patch::Patch {
        old_lists: &read.lists,
        repaired: &repaired.graph,
        back: &inserted.back,
        new_of_slot: &inserted.new_of_slot,
        new_lists: &inserted.new_lists,
        store: &store,
        limits,
        labels: labels.as_ref(),
    };
    let written = patch::write_graph(input, &plan, &patch, &read.vectors, medoid, staging, ctl)?;
    drop(repaired);
    written.report(&mut report);
    report.patch_secs = t_patch.elapsed().as_secs_f64();

    // Ids, the vector segments and the entry index.
    let t_fin = Instant::now();
    let ids = SlotIds::Table(std::mem::take(&mut plan.slot_ids));
    report.bytes_written +=
        ids.save(&staging.join(crate::kinds::graph::updates::ids::FILE_NAME))?;
    report.bytes_written +=
        finish::write_attrs(merged.as_ref(), labels.as_ref(), &written.meta, staging)?;
    finish::write_segments(input, &plan, &read.vectors, staging, &mut report)?;
    report.bytes_written += finish::write_entry(old, &ids, &store, &written.meta, staging, ctl)?;
    // The recall monitor on the merged version (read through the page cache: just written).
    let t_mon = Instant::now();
    let hot = finish::carried_hot_order(input, &plan, medoid, ids.live());
    report.hot_carried = hot.is_some();
    let hot_bytes;
    (
        report.recall,
        report.recall_samples,
        report.hot_changed,
        hot_bytes,
    ) = finish::monitor(input, staging, &read.vectors, &ids, hot)?;
    report.bytes_written += hot_bytes;
    report.monitor_secs = t_mon.elapsed().as_secs_f64();
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

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

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::time::Instant;

use rayon::prelude::*;

use crate::data::Matrix;
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::{DType, Element};
use crate::kinds::graph::layout::decoupled::graph::GraphWriter;
use crate::kinds::graph::layout::decoupled::vectors::{
    VectorGeometry, VectorParams, VectorPlanner, VectorWriter,
};
use crate::kinds::graph::layout::packed::{self, PackedMeta, PackedWriter};
use crate::kinds::graph::search::entry::{self, EntryIndex, EntryParams};
use crate::kinds::graph::search::DecoupledLayout;
use crate::kinds::graph::search::{BeamParams, LiveFilter, SearchParams, Strategy};
use crate::kinds::graph::updates::delta::{Delta, DeltaElement};
use crate::kinds::graph::updates::ids::{SlotIds, HOLE};
use crate::kinds::graph::updates::segments::{self, VectorMap, GONE};
use crate::kinds::graph::{
    payload_crc, DiskIndex, IndexBuildError, IndexLayout, PQ_CODES_FILE, PQ_FILE,
};
use crate::progress::Control;
use crate::quant::pq::PqCodes;
use crate::vamana::queue::Neighbor;
use crate::vamana::search::SearchScratch;
use crate::vamana::{robust_prune, PruneLimits, PruneScratch, VamanaConfig, VectorStore};

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

fn merge_typed<T: DeltaElement>(
    input: &MergeInput<'_>,
    staging: &Path,
    ctl: &Control,
) -> Result<MergeOutput, IndexBuildError> {
    let t0 = Instant::now();
    let old = input.old;
    let dim = old.dim();
    let metric = old.metric();
    let n_old = old.n();
    let filter = LiveFilter {
        dead: input.dead,
        epoch: input.epoch,
    };
    let deleted: Vec<bool> = (0..n_old as u32)
        .map(|s| !input.ids.is_hole(s) && !filter.visible(s))
        .collect();
    let is_free = |s: u32| input.ids.is_hole(s) || deleted[s as usize];
    let mut report = MergeReport {
        deleted: deleted.iter().filter(|&&d| d).count() as u64,
        ..MergeReport::default()
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
    report.inserted = n_new_vectors as u64;
    // Slots: freed ones first, then past the end.
    let free: Vec<u32> = (0..n_old as u32).filter(|&s| is_free(s)).collect();
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
            if (s as usize) < n_old && !is_free(s) {
                input.ids.id(s)
            } else {
                HOLE
            }
        })
        .collect();
    for (i, &s) in new_slot.iter().enumerate() {
        slot_ids[s as usize] = new_ids[i];
    }
    let delta_slot: HashMap<usize, u32> = new_delta_idx
        .iter()
        .zip(&new_slot)
        .map(|(&d, &s)| (d, s))
        .collect();

    // 1. Read: vectors of live nodes, lists of deleted ones.
    let t_read = Instant::now();
    let mut vectors = vec![T::default(); n_slots * dim];
    let mut dlists: HashMap<u32, Vec<u32>> = HashMap::new();
    let medoid = old.medoid();
    let mut medoid_vec: Vec<T> = Vec::new();
    let bar = ctl.bar("merge: reading", n_old as u64);
    if let Some(d) = old.decoupled().filter(|_| input.segments.is_some()) {
        // Decoupled: the vectors from their segments (each read sequentially), the deleted
        // nodes' lists from the graph file.
        let vb = dim * std::mem::size_of::<T>();
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut vectors[..]);
        let map = slot_map(d, n_old)?;
        let mut of_local: Vec<Vec<u32>> = d
            .segments()
            .iter()
            .map(|f| vec![u32::MAX; f.geometry().n as usize])
            .collect();
        for (slot, &(sg, l)) in map.iter().enumerate() {
            if let Some(x) = of_local
                .get_mut(sg as usize)
                .and_then(|v| v.get_mut(l as usize))
            {
                *x = slot as u32;
            }
        }
        for (si, f) in d.segments().iter().enumerate() {
            let inv = &of_local[si];
            f.scan(|local, raw| {
                let Some(&slot) = inv.get(local as usize) else {
                    return;
                };
                if slot == u32::MAX {
                    return;
                }
                if slot == medoid {
                    medoid_vec = raw
                        .chunks_exact(std::mem::size_of::<T>())
                        .map(bytemuck::pod_read_unaligned::<T>)
                        .collect();
                }
                if !is_free(slot) {
                    bytes[slot as usize * vb..(slot as usize + 1) * vb].copy_from_slice(raw);
                }
            })?;
            ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
        }
        d.graph().scan_lists(|id, list| {
            if deleted[id as usize] {
                dlists.insert(id, list.to_vec());
            }
            if id % 4096 == 0 {
                bar.set_position(u64::from(id));
            }
            Ok::<(), IndexBuildError>(())
        })?;
    } else {
        old.scan_records(ctl, |id, view| {
            let v = view.vector::<T>(&mut Vec::new()).to_vec();
            if id == medoid {
                medoid_vec = v.clone();
            }
            if deleted[id as usize] {
                dlists.insert(id, view.neighbors().collect());
            } else if !input.ids.is_hole(id) {
                vectors[id as usize * dim..(id as usize + 1) * dim].copy_from_slice(&v);
            }
            if id % 4096 == 0 {
                bar.set_position(u64::from(id));
            }
            Ok(())
        })?;
    }
    bar.finish_and_clear();
    for (i, &s) in new_slot.iter().enumerate() {
        vectors[s as usize * dim..(s as usize + 1) * dim]
            .copy_from_slice(&new_rows[i * dim..(i + 1) * dim]);
    }
    report.read_secs = t_read.elapsed().as_secs_f64();
    let store = VectorStore::new(&vectors, dim, metric).ok_or_else(|| {
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

    // 2. Insert: candidates from the old disk graph and the delta graph.
    let t_ins = Instant::now();
    let mut new_lists: Vec<Vec<u32>> = vec![Vec::new(); n_new_vectors];
    if n_new_vectors > 0 {
        let l = input.cfg.l.max(10);
        let params = SearchParams {
            k: l.min(n_old.max(1)),
            l,
            strategy: Strategy::Beam(BeamParams {
                width: 4,
                ..BeamParams::default()
            }),
            ..SearchParams::default()
        };
        // The old graph is searched for candidates when it keeps a live node (not when every
        // slot is free: deleted now, or by earlier merges).
        let disk = if (0..n_old as u32).any(|s| !is_free(s)) {
            Some(
                old.search_rows_filtered(&new_rows, &params, input.threads, 8, Some(filter))
                    .map_err(IndexBuildError::Search)?,
            )
        } else {
            None
        };
        let bar = ctl.bar("merge: inserting", n_new_vectors as u64);
        new_lists = input
            .delta
            .view::<T, _>(|dv| {
                (0..n_new_vectors)
                    .into_par_iter()
                    .map_init(
                        || (SearchScratch::new(0), PruneScratch::default(), Vec::new()),
                        |(ss, ps, dists), i| {
                            let s = new_slot[i];
                            let mut ids: Vec<u32> = Vec::new();
                            if let Some(d) = &disk {
                                ids.extend(
                                    d.ids[i * d.k..(i + 1) * d.k]
                                        .iter()
                                        .copied()
                                        .filter(|&x| x != u32::MAX),
                                );
                            }
                            let q = &new_rows[i * dim..(i + 1) * dim];
                            for nb in dv.expanded(q, l, ss) {
                                if let Some(&slot) = delta_slot.get(&(nb.id as usize)) {
                                    ids.push(slot);
                                }
                            }
                            ids.sort_unstable();
                            ids.dedup();
                            let out = prune(&store, s, &ids, limits, ps, dists);
                            if i % 1024 == 0 {
                                bar.inc(1024);
                            }
                            out
                        },
                    )
                    .collect()
            })
            .unwrap_or_default();
        bar.finish_and_clear();
        ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
    }
    // Back-edges Δ: node → new nodes that chose it.
    let mut back: HashMap<u32, Vec<u32>> = HashMap::new();
    for (i, list) in new_lists.iter().enumerate() {
        for &j in list {
            back.entry(j).or_default().push(new_slot[i]);
        }
    }
    let new_of_slot: HashMap<u32, usize> =
        new_slot.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    report.insert_secs = t_ins.elapsed().as_secs_f64();

    // New medoid when the old one is gone: the live node nearest to its vector.
    let medoid = if (medoid as usize) < n_old && !is_free(medoid) {
        medoid
    } else if medoid_vec.is_empty() {
        0
    } else {
        (0..n_slots as u32)
            .into_par_iter()
            .filter(|&s| slot_ids[s as usize] != HOLE)
            .map(|s| {
                let d = crate::kernels::distance(metric, &medoid_vec, store.row(s as usize));
                (d, s)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map_or(0, |(_, s)| s)
    };

    // PQ codes of the new version: old codes for kept slots, new codes for new vectors.
    let t_fin = Instant::now();
    let old_codes = old.codes().ok_or_else(|| {
        IndexBuildError::Search(crate::search::SearchError::Unsupported(
            "merging needs the PQ codes in memory".into(),
        ))
    })?;
    let m = old_codes.m();
    let mut codes = vec![0u8; n_slots * m];
    for s in 0..n_old.min(n_slots) {
        if !is_free(s as u32) {
            codes[s * m..(s + 1) * m].copy_from_slice(old_codes.code(s));
        }
    }
    for (i, &s) in new_slot.iter().enumerate() {
        old.pq()
            .encode_one(
                &new_rows[i * dim..(i + 1) * dim],
                &mut codes[s as usize * m..(s as usize + 1) * m],
            )
            .map_err(IndexBuildError::Pq)?;
    }
    let codes =
        PqCodes::from_vec(codes, m, old_codes.centroids_per_subspace()).ok_or_else(|| {
            IndexBuildError::Search(crate::search::SearchError::Internal(
                "PQ codes of the merge have a bad shape".into(),
            ))
        })?;
    let codes_path = staging.join(PQ_CODES_FILE);
    report.bytes_written += codes.save(&codes_path)?;
    let pq_path = staging.join(PQ_FILE);
    report.bytes_written += old.pq().save(&pq_path)?;
    report.finish_secs += t_fin.elapsed().as_secs_f64();

    // 3. Delete + patch, streaming the old file into the new one.
    let t_patch = Instant::now();
    let old_meta = *old.meta();
    let meta = PackedMeta {
        n: n_slots as u64,
        r: input.cfg.r.max(1),
        medoid,
        pq_crc: payload_crc(&pq_path)?,
        pq_codes_crc: payload_crc(&codes_path)?,
        neighbor_code_bytes: 0,
        permuted: false,
        ..old_meta
    };
    let decoupled = old.decoupled().filter(|_| input.segments.is_some());
    let mut w = if decoupled.is_some() {
        Out::Graph(GraphWriter::create(
            &staging.join(IndexLayout::Decoupled.file_name()),
            meta,
        )?)
    } else {
        Out::Packed(PackedWriter::create(
            &staging.join(packed::FILE_NAME),
            meta,
        )?)
    };
    let bar = ctl.bar("merge: writing", n_slots as u64);
    // Lists of one chunk of slots, computed in parallel, written in order.
    let mut pending: Vec<(u32, Vec<u32>)> = Vec::with_capacity(4096);
    let mut counts = (0u64, 0u64);
    // Every slot's new list, linked back where the merge left a node unreachable, then written.
    let mut all: Vec<Vec<u32>> = vec![Vec::new(); n_slots];
    let flush = |pending: &mut Vec<(u32, Vec<u32>)>,
                 all: &mut Vec<Vec<u32>>,
                 counts: &mut (u64, u64)|
     -> Result<(), IndexBuildError> {
        let done: Vec<(Vec<u32>, bool, bool)> = pending
            .par_iter()
            .map_init(
                || (PruneScratch::default(), Vec::new()),
                |(ps, dists), (s, list)| {
                    fix_list(
                        *s,
                        list,
                        &deleted,
                        &dlists,
                        &back,
                        &new_of_slot,
                        &new_lists,
                        &store,
                        limits,
                        ps,
                        dists,
                    )
                },
            )
            .collect();
        for ((s, _), (list, repaired, patched)) in pending.iter().zip(done) {
            counts.0 += u64::from(repaired);
            counts.1 += u64::from(patched);
            if let Some(slot) = all.get_mut(*s as usize) {
                *slot = list;
            }
        }
        bar.inc(pending.len() as u64);
        pending.clear();
        ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
        Ok(())
    };
    let mut take = |id: u32, list: Vec<u32>| -> Result<(), IndexBuildError> {
        let list = if (id as usize) < n_old && !is_free(id) {
            list
        } else {
            Vec::new()
        };
        pending.push((id, list));
        if pending.len() == 4096 {
            flush(&mut pending, &mut all, &mut counts)?;
        }
        Ok(())
    };
    match decoupled {
        Some(d) => {
            d.graph().scan_lists(|id, list| take(id, list.to_vec()))?;
        }
        None => old.scan_records(ctl, |id, view| take(id, view.neighbors().collect()))?,
    }
    for s in n_old as u32..n_slots as u32 {
        pending.push((s, Vec::new()));
        if pending.len() == 4096 {
            flush(&mut pending, &mut all, &mut counts)?;
        }
    }
    flush(&mut pending, &mut all, &mut counts)?;
    let mut graph = crate::vamana::Graph::from_lists(all, input.cfg.r.max(1), medoid);
    let holes: Vec<bool> = slot_ids.iter().map(|&id| id == HOLE).collect();
    report.relinked =
        crate::vamana::build::link_unreachable(&mut graph, &store, input.cfg.l, Some(&holes), ctl)
            .map_err(IndexBuildError::Graph)?;
    for s in 0..n_slots as u32 {
        let list = graph.neighbors(s);
        match &mut w {
            Out::Packed(w) => w.push(&vectors[s as usize * dim..(s as usize + 1) * dim], list)?,
            Out::Graph(g) => g.push(list)?,
        }
    }
    drop(graph);
    report.bytes_written += match w {
        Out::Packed(w) => w.finish()?,
        Out::Graph(g) => g.finish()?,
    };
    bar.finish_and_clear();
    report.repaired = counts.0;
    report.patched = counts.1;
    report.patch_secs = t_patch.elapsed().as_secs_f64();

    // Ids and the entry index.
    let t_fin = Instant::now();
    let ids = SlotIds::Table(slot_ids);
    report.bytes_written +=
        ids.save(&staging.join(crate::kinds::graph::updates::ids::FILE_NAME))?;
    if let (Some(d), Some(policy)) = (decoupled, input.segments) {
        let keep = |s: u32| (s as usize) < n_old && !is_free(s);
        let seg = write_segments::<T>(
            d,
            n_old,
            n_slots,
            &keep,
            &new_slot,
            &vectors,
            dim,
            policy,
            staging,
            old.dir(),
        )?;
        report.bytes_written += seg.bytes_written;
        report.segments = Some(seg.report);
    }
    if let Some(e) = old.entry() {
        let live: Vec<u32> = (0..n_slots as u32).filter(|&s| !ids.is_hole(s)).collect();
        let ratio = (e.len() as f64 / n_old.max(1) as f64).clamp(1e-6, 1.0);
        let want = ((live.len() as f64 * ratio).round() as usize).clamp(1, live.len().max(1));
        if !live.is_empty() {
            let params = EntryParams {
                ratio,
                ..EntryParams::default()
            };
            use rand::SeedableRng;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(params.seed);
            let mut pick: Vec<u32> = rand::seq::index::sample(&mut rng, live.len(), want)
                .into_iter()
                .map(|i| live[i])
                .collect();
            pick.sort_unstable();
            let mut rows = Vec::with_capacity(pick.len() * dim);
            for &s in &pick {
                rows.extend_from_slice(store.row(s as usize));
            }
            let rows = Matrix::from_vec(rows, dim).ok_or(crate::vamana::BuildError::Empty)?;
            let e = EntryIndex::from_sample(pick, rows, metric, &params, ctl)?;
            report.bytes_written +=
                e.save(&staging.join(entry::FILE_NAME), meta.n, meta.pq_codes_crc)?;
        }
    }
    // The recall monitor on the merged version (read through the page cache: just written).
    let t_mon = Instant::now();
    let staged = DiskIndex::open(
        staging,
        crate::kinds::graph::OpenOptions {
            layout: if decoupled.is_some() {
                IndexLayout::Decoupled
            } else {
                IndexLayout::Packed
            },
            direct: false,
            ..crate::kinds::graph::OpenOptions::default()
        },
    )?;
    let (points, samples) = crate::kinds::graph::monitor::measure(
        &staged,
        &|s| &vectors[s as usize * dim..(s as usize + 1) * dim],
        &|s| !ids.is_hole(s),
    )?;
    drop(staged);
    report.recall = points;
    report.recall_samples = samples;
    report.finish_secs += t_mon.elapsed().as_secs_f64();
    report.slots = n_slots as u64;
    report.holes = ids.len() as u64 - ids.live() as u64;
    report.finish_secs += t_fin.elapsed().as_secs_f64();
    report.total_secs = t0.elapsed().as_secs_f64();
    report.peak_rss_bytes = crate::mem::peak_rss_bytes();
    Ok(MergeOutput { report })
}

/// Where the patch pass writes the new graph.
enum Out {
    /// The packed layout: records with vectors and lists.
    Packed(PackedWriter),
    /// The decoupled layout: the lists only.
    Graph(GraphWriter),
}

/// Per slot `(segment, local id)` of a decoupled layout (`GONE` past its map): the vector
/// map's, else the vector keys of a keyed graph file (vectors in graph order), else identity.
fn slot_map(d: &DecoupledLayout, n: usize) -> Result<Vec<(u32, u32)>, IndexBuildError> {
    Ok(match d.slot_map() {
        Some(m) => m.to_vec(),
        None => match d.graph().keys()? {
            Some(keys) => keys.into_iter().map(|k| (0, k)).collect(),
            None => (0..n as u32).map(|s| (0, s)).collect(),
        },
    })
}

/// What [`write_segments`] wrote.
struct SegmentsOut {
    report: SegmentReport,
    bytes_written: u64,
}

/// The vector segments of a decoupled merge: decides which old segments are collected (dead
/// share over the policy's, or the smallest past its segment count), writes the new vectors
/// and the collected segments' live vectors into one new segment (in slot order, compressed
/// like the layout's), hard-links the kept segment files into `staging` (the commit then
/// deletes the others) and writes the new `vmap.trawl`.
#[allow(clippy::too_many_arguments)]
fn write_segments<T: Element>(
    d: &DecoupledLayout,
    n_old: usize,
    n_slots: usize,
    keep: &dyn Fn(u32) -> bool,
    new_slot: &[u32],
    vectors: &[T],
    dim: usize,
    policy: SegmentPolicy,
    staging: &Path,
    dir: &Path,
) -> Result<SegmentsOut, IndexBuildError> {
    let old_map = slot_map(d, n_old)?;
    let names: Vec<String> = d
        .segments()
        .iter()
        .map(|f| {
            f.path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let counts: Vec<u64> = d.segments().iter().map(|f| f.geometry().n).collect();
    // Live vectors per old segment after this merge.
    let mut live = vec![0u64; names.len()];
    for (s, &(sg, _)) in old_map.iter().enumerate() {
        if sg != GONE.0 && keep(s as u32) {
            live[sg as usize] += 1;
        }
    }
    let dead_share = |i: usize| 1.0 - live[i] as f64 / counts[i].max(1) as f64;
    let mut collect: Vec<bool> = (0..names.len())
        .map(|i| live[i] == 0 || dead_share(i) > policy.gc_dead_share)
        .collect();
    let has_new = !new_slot.is_empty();
    // Bound the segment count: fold the smallest kept segments in too.
    let limit = policy.max_segments.max(1);
    loop {
        let kept = collect.iter().filter(|&&c| !c).count();
        let moving = has_new || collect.iter().zip(&live).any(|(&c, &l)| c && l > 0);
        if kept + usize::from(moving) <= limit {
            break;
        }
        let Some(i) = (0..names.len())
            .filter(|&i| !collect[i])
            .min_by_key(|&i| (live[i], std::cmp::Reverse(i)))
        else {
            break;
        };
        collect[i] = true;
    }
    // Slots whose vectors go into the new segment, in slot order.
    let mut is_new = vec![false; n_slots];
    for &s in new_slot {
        is_new[s as usize] = true;
    }
    let moves = |s: usize| -> bool {
        is_new[s]
            || (s < n_old
                && keep(s as u32)
                && old_map[s].0 != GONE.0
                && collect[old_map[s].0 as usize])
    };
    let written: Vec<u32> = (0..n_slots as u32).filter(|&s| moves(s as usize)).collect();
    // Index of each kept segment in the new map.
    let mut renumber = vec![u32::MAX; names.len()];
    let mut segs: Vec<(String, u64)> = Vec::new();
    for i in 0..names.len() {
        if !collect[i] {
            renumber[i] = segs.len() as u32;
            segs.push((names[i].clone(), counts[i]));
        }
    }
    let mut report = SegmentReport {
        collected: (0..names.len())
            .filter(|&i| collect[i])
            .map(|i| (names[i].clone(), dead_share(i)))
            .collect(),
        ..SegmentReport::default()
    };
    let mut bytes_written = 0u64;
    let new_index = segs.len() as u32;
    if !written.is_empty() {
        let number = names
            .iter()
            .filter_map(|n| {
                n.strip_prefix("vectors-")
                    .and_then(|r| r.strip_suffix(".trawl"))
                    .and_then(|r| r.parse::<u64>().ok())
            })
            .max()
            .unwrap_or(0)
            + 1;
        let name = segments::segment_name(number);
        let path = staging.join(&name);
        let bad =
            |m: String| IndexBuildError::File(FileError::new(&path, FileErrorKind::Invalid(m)));
        let geo = VectorGeometry::new(
            T::DTYPE,
            dim,
            written.len() as u64,
            &VectorParams::default(),
        )
        .map_err(bad)?;
        let row = |s: u32| -> &[u8] {
            bytemuck::cast_slice(&vectors[s as usize * dim..(s as usize + 1) * dim])
        };
        let mut planner = VectorPlanner::new(geo).map_err(bad)?;
        for &s in &written {
            planner.push(row(s)).map_err(bad)?;
        }
        let plan = planner.finish().map_err(bad)?;
        let mut w = VectorWriter::create(&path, plan)?;
        for &s in &written {
            w.push(row(s))?;
        }
        let r = w.finish()?;
        bytes_written += r.file_bytes;
        report.written = Some(name.clone());
        report.written_vectors = written.len() as u64;
        report.moved_vectors = written.iter().filter(|&&s| !is_new[s as usize]).count() as u64;
        report.written_bytes = r.file_bytes;
        segs.push((name, written.len() as u64));
    }
    let mut local_of_written = vec![u32::MAX; n_slots];
    for (k, &s) in written.iter().enumerate() {
        local_of_written[s as usize] = k as u32;
    }
    let slots: Vec<(u32, u32)> = (0..n_slots)
        .map(|s| {
            if local_of_written[s] != u32::MAX {
                (new_index, local_of_written[s])
            } else if s < n_old && keep(s as u32) && old_map[s].0 != GONE.0 {
                (renumber[old_map[s].0 as usize], old_map[s].1)
            } else {
                GONE
            }
        })
        .collect();
    // The kept segments join the new version by hard links (the same files: nothing copied).
    for (name, _) in &segs {
        let to = staging.join(name);
        if to.exists() {
            continue;
        }
        let from = dir.join(name);
        std::fs::hard_link(&from, &to).map_err(|e| FileError::new(&from, e.into()))?;
    }
    let map = VectorMap {
        segments: segs,
        slots,
    };
    bytes_written += map.save(&staging.join(segments::FILE_NAME))?;
    report.segments = map.segments.len();
    report.segment_bytes = map
        .segments
        .iter()
        .map(|(n, _)| std::fs::metadata(staging.join(n)).map_or(0, |m| m.len()))
        .sum();
    Ok(SegmentsOut {
        report,
        bytes_written,
    })
}

/// The new list of slot `s` given its old list (empty for a freed or new slot): deleted
/// neighbours replaced by their own neighbours and re-pruned, a new node's list from the insert
/// phase, back-edges added (re-pruned over `R`). Returns the list and whether it was repaired
/// or patched.
#[allow(clippy::too_many_arguments)]
fn fix_list<T: Element>(
    s: u32,
    old: &[u32],
    deleted: &[bool],
    dlists: &HashMap<u32, Vec<u32>>,
    back: &HashMap<u32, Vec<u32>>,
    new_of_slot: &HashMap<u32, usize>,
    new_lists: &[Vec<u32>],
    store: &VectorStore<'_, T>,
    limits: PruneLimits,
    ps: &mut PruneScratch,
    dists: &mut Vec<f32>,
) -> (Vec<u32>, bool, bool) {
    let is_deleted = |v: u32| deleted.get(v as usize).copied().unwrap_or(false);
    let mut list: Vec<u32>;
    let mut repaired = false;
    let mut must_prune = false;
    if let Some(&i) = new_of_slot.get(&s) {
        list = new_lists[i].clone();
    } else if old.iter().any(|&v| is_deleted(v)) {
        let mut cands: Vec<u32> = Vec::with_capacity(old.len() * 2);
        for &v in old {
            if is_deleted(v) {
                if let Some(l) = dlists.get(&v) {
                    cands.extend(l.iter().copied().filter(|&x| !is_deleted(x) && x != s));
                }
            } else {
                cands.push(v);
            }
        }
        list = cands;
        repaired = true;
        must_prune = true;
    } else {
        list = old.to_vec();
    }
    let patched = match back.get(&s) {
        Some(b) => {
            list.extend(b.iter().copied().filter(|&x| x != s));
            true
        }
        None => false,
    };
    list.sort_unstable();
    list.dedup();
    if must_prune || list.len() > limits.degree {
        list = prune(store, s, &list, limits, ps, dists);
    }
    (list, repaired, patched)
}

/// Robust prune of candidates `ids` for node `s`, with exact distances.
fn prune<T: Element>(
    store: &VectorStore<'_, T>,
    s: u32,
    ids: &[u32],
    limits: PruneLimits,
    ps: &mut PruneScratch,
    dists: &mut Vec<f32>,
) -> Vec<u32> {
    let probe = store.point(s);
    store.dist_batch(&probe, ids, dists);
    let mut pool: Vec<Neighbor> = ids
        .iter()
        .zip(dists.iter())
        .map(|(&id, &dist)| Neighbor { id, dist })
        .collect();
    let mut out = Vec::new();
    robust_prune(store, s, &mut pool, limits, ps, &mut out);
    out
}

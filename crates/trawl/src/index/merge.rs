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

use super::delta::{Delta, DeltaElement};
use super::ids::{SlotIds, HOLE};
use super::{payload_crc, DiskIndex, IndexBuildError, PQ_CODES_FILE, PQ_FILE};
use crate::data::Matrix;
use crate::graph::queue::Neighbor;
use crate::graph::search::SearchScratch;
use crate::graph::{robust_prune, PruneLimits, PruneScratch, VamanaConfig, VectorStore};
use crate::kernels::{DType, Element};
use crate::layout::packed::{self, PackedMeta, PackedWriter};
use crate::progress::Control;
use crate::quant::pq::PqCodes;
use crate::search::entry::{self, EntryIndex, EntryParams};
use crate::search::{BeamParams, LiveFilter, SearchParams, Strategy};

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
}

/// What the merge wrote into the staging directory.
pub(crate) struct MergeOutput {
    pub report: MergeReport,
}

/// Runs the merge, writing `packed.trawl`, `pq-codes.trawl`, `pq.trawl`, `ids.trawl` and (when
/// the old version had one) `entry.trawl` into `staging`.
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
    bar.finish_and_clear();
    for (i, &s) in new_slot.iter().enumerate() {
        vectors[s as usize * dim..(s as usize + 1) * dim]
            .copy_from_slice(&new_rows[i * dim..(i + 1) * dim]);
    }
    report.read_secs = t_read.elapsed().as_secs_f64();
    let store = VectorStore::new(&vectors, dim, metric).ok_or_else(|| {
        IndexBuildError::Graph(crate::graph::BuildError::InvalidParam {
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
        let disk = if n_old > report.deleted as usize {
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
    let packed_path = staging.join(packed::FILE_NAME);
    let mut w = PackedWriter::create(&packed_path, meta)?;
    let bar = ctl.bar("merge: writing", n_slots as u64);
    // Lists of one chunk of slots, computed in parallel, written in order.
    let mut pending: Vec<(u32, Vec<u32>)> = Vec::with_capacity(4096);
    let mut counts = (0u64, 0u64);
    let flush = |pending: &mut Vec<(u32, Vec<u32>)>,
                 w: &mut PackedWriter,
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
            let row = &vectors[*s as usize * dim..(*s as usize + 1) * dim];
            w.push(row, &list)?;
        }
        bar.inc(pending.len() as u64);
        pending.clear();
        ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
        Ok(())
    };
    old.scan_records(ctl, |id, view| {
        let list = if (id as usize) < n_old && !is_free(id) {
            view.neighbors().collect()
        } else {
            Vec::new()
        };
        pending.push((id, list));
        if pending.len() == 4096 {
            flush(&mut pending, &mut w, &mut counts)?;
        }
        Ok(())
    })?;
    for s in n_old as u32..n_slots as u32 {
        pending.push((s, Vec::new()));
        if pending.len() == 4096 {
            flush(&mut pending, &mut w, &mut counts)?;
        }
    }
    flush(&mut pending, &mut w, &mut counts)?;
    report.bytes_written += w.finish()?;
    bar.finish_and_clear();
    report.repaired = counts.0;
    report.patched = counts.1;
    report.patch_secs = t_patch.elapsed().as_secs_f64();

    // Ids and the entry index.
    let t_fin = Instant::now();
    let ids = SlotIds::Table(slot_ids);
    report.bytes_written += ids.save(&staging.join(super::ids::FILE_NAME))?;
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
            let rows = Matrix::from_vec(rows, dim).ok_or(crate::graph::BuildError::Empty)?;
            let e = EntryIndex::from_sample(pick, rows, metric, &params, ctl)?;
            report.bytes_written +=
                e.save(&staging.join(entry::FILE_NAME), meta.n, meta.pq_codes_crc)?;
        }
    }
    report.slots = n_slots as u64;
    report.holes = ids.len() as u64 - ids.live() as u64;
    report.finish_secs += t_fin.elapsed().as_secs_f64();
    report.total_secs = t0.elapsed().as_secs_f64();
    report.peak_rss_bytes = peak_rss_bytes();
    Ok(MergeOutput { report })
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

/// The process's peak resident set (`VmHWM`), 0 where unknown.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

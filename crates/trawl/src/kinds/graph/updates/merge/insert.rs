//! The merge's insert phase: each new vector placed by a beam search over the old disk index
//! and a greedy search of the delta graph, its candidates robust-pruned with exact distances.

use std::collections::HashMap;

use rayon::prelude::*;

use super::patch::prune;
use super::{live_filter, MergeInput, Plan};
use crate::kinds::graph::search::{BeamParams, SearchParams, Strategy};
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::updates::ids::HOLE;
use crate::kinds::graph::{DiskIndex, IndexBuildError};
use crate::progress::Control;
use crate::vamana::search::SearchScratch;
use crate::vamana::{BuildLabels, PruneLimits, PruneScratch, VectorStore};

/// The new nodes' lists and the back-edges `Δ` they call for.
pub(super) struct Inserted {
    /// Each new vector's list.
    pub new_lists: Vec<Vec<u32>>,
    /// Back-edges `Δ`: node → new nodes that chose it.
    pub back: HashMap<u32, Vec<u32>>,
    /// The index of the new vector at a slot.
    pub new_of_slot: HashMap<u32, usize>,
}

/// Candidates for each new vector from the old disk graph (a beam search through the page
/// cache, deleted nodes traversed but never chosen) and the delta graph (and, from a label-aware merge, `extra[i]`: its labels'
/// candidates, [`super::labels::candidates`]), pruned to `R` (keeping a path for every label
/// when `labels` are given).
pub(super) fn insert<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    store: &VectorStore<'_, T>,
    limits: PruneLimits,
    labels: Option<&BuildLabels>,
    extra: &[Vec<u32>],
    ctl: &Control,
) -> Result<Inserted, IndexBuildError> {
    let dim = input.old.dim();
    let n_old = input.old.n();
    let n_new_vectors = plan.new_slot.len();
    let mut new_lists: Vec<Vec<u32>> = vec![Vec::new(); n_new_vectors];
    if n_new_vectors > 0 {
        let l = input.cfg.l.max(10);
        // The old graph is searched for candidates (deleted nodes traversed, never returned)
        // when it keeps a live node (not when every slot is free: deleted now, or by earlier
        // merges), as searches run: by PQ distances, from the medoid.
        // (A greedy search of the repaired graph in memory by exact distances was faster, but
        // on far-apart clusters the new vectors then linked to nodes the PQ-guided searches
        // never end at: tests/connectivity.rs.)
        let params = SearchParams {
            k: l.min(n_old.max(1)),
            l,
            strategy: Strategy::Beam(BeamParams {
                width: 4,
                ..BeamParams::default()
            }),
            ..SearchParams::default()
        };
        let disk = if (0..n_old as u32).any(|s| !plan.is_free(s)) {
            Some(
                input
                    .old
                    .search_rows_filtered(
                        &plan.new_rows,
                        &params,
                        input.threads,
                        8,
                        Some(&live_filter(input)),
                    )
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
                            let s = plan.new_slot[i];
                            let mut ids: Vec<u32> = Vec::new();
                            if let Some(d) = &disk {
                                ids.extend(
                                    d.ids[i * d.k..(i + 1) * d.k]
                                        .iter()
                                        .copied()
                                        .filter(|&x| x != u32::MAX),
                                );
                            }
                            let q = plan.new_row(i, dim);
                            for nb in dv.expanded(q, l, ss) {
                                if let Some(&slot) = plan.delta_slot.get(&(nb.id as usize)) {
                                    ids.push(slot);
                                }
                            }
                            if let Some(e) = extra.get(i) {
                                ids.extend_from_slice(e);
                            }
                            ids.sort_unstable();
                            ids.dedup();
                            let out = prune(store, s, &ids, limits, ps, dists, labels);
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
            back.entry(j).or_default().push(plan.new_slot[i]);
        }
    }
    let new_of_slot: HashMap<u32, usize> = plan
        .new_slot
        .iter()
        .enumerate()
        .map(|(i, &s)| (s, i))
        .collect();
    Ok(Inserted {
        new_lists,
        back,
        new_of_slot,
    })
}

/// The medoid of the new version: the old one while it stays, else the kept node nearest to
/// its vector (any live node when none is kept).
pub(super) fn new_medoid<T: DeltaElement>(
    old: &DiskIndex,
    plan: &Plan<'_, T>,
    store: &VectorStore<'_, T>,
    medoid_vec: &[T],
) -> u32 {
    let medoid = old.medoid();
    let metric = old.metric();
    if (medoid as usize) < old.n() && !plan.is_free(medoid) {
        medoid
    } else if medoid_vec.is_empty() {
        0
    } else {
        // A kept node when there is one (the insert phase searches the repaired graph from
        // here; a new node has no list yet), else any live slot.
        let n_old = old.n();
        let kept = (0..n_old as u32).any(|s| !plan.is_free(s));
        (0..plan.n_slots as u32)
            .into_par_iter()
            .filter(|&s| plan.slot_ids[s as usize] != HOLE)
            .filter(|&s| !kept || ((s as usize) < n_old && !plan.is_free(s)))
            .map(|s| {
                let d = crate::kernels::distance(metric, medoid_vec, store.row(s as usize));
                (d, s)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map_or(0, |(_, s)| s)
    }
}

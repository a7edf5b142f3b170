//! The merge's in-place delete phase (IP-DiskANN, Xu et al. 2025): for each deleted node `p`,
//! its in-neighbours are found — by a search of the old graph for `p`'s vector, keeping the
//! nodes found whose list holds `p` ([`InNeighbours::Search`]), or exactly from the read pass's
//! lists ([`InNeighbours::Exact`]) — and
//!
//! each in-neighbour `z` gets edges to at most `c` candidates: the edge `z → p` is replaced by
//! at most `c` edges. (DiskANN's Rust in-place delete also gives each out-neighbour `w` of `p`
//! edges from its nearest candidates; on GloVe-200K with 5% random deletes that doubled the
//! edges planned and the delete phase's time for the same recall, so trawl does not.)
//!
//! The `c` are chosen among the candidates as robust prune would choose: nearest first,
//! skipping one occluded by a candidate already chosen (IP-DiskANN takes the `c` nearest; a
//! cluster of deleted nodes then cut the paths across it: every in-neighbour took the `c`
//! candidates on its own side).
//!
//! The candidates are `p`'s live out-neighbours ([`Candidates::OutNeighbours`]) or the live
//! nodes nearest to `p` that its search found ([`Candidates::Nearest`]). The work of one delete
//! is its search plus `O(c·R)` exact distances, whatever the size of the graph; the patch pass
//! adds the edges, drops every remaining edge to a deleted node and re-prunes only the lists
//! that then hold more than `R`.

use rayon::prelude::*;

use super::patch::prune;
use super::{live_filter, Candidates, DeleteRepair, InNeighbours, InPlaceParams, MergeInput, Plan};
use crate::kinds::graph::search::{BeamParams, SearchParams, Strategy};
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::IndexBuildError;
use crate::progress::Control;
use crate::vamana::prune::replacement_edges;
use crate::vamana::{BuildLabels, Graph, PruneLimits, PruneScratch, VectorStore};

/// The graph with the deleted nodes taken out, and what it took.
pub(super) struct Repaired {
    /// Every slot of the new version: a kept node's repaired list; empty for a free or new
    /// slot.
    pub graph: Graph,
    /// Kept nodes whose list lost an edge or gained a replacement.
    pub repaired: u64,
    /// In place: what the delete phase planned (`None` for a consolidation).
    pub planned: Option<Replacements>,
}

impl Repaired {
    /// Copies the phase's figures into the merge's report.
    pub(super) fn report(&self, deletes: DeleteRepair, r: &mut super::MergeReport) {
        r.deletes = deletes;
        r.repaired = self.repaired;
        if let Some(p) = &self.planned {
            r.in_edges = p.in_edges;
            r.in_edges_found = p.in_edges_found;
            r.replacement_edges = p.replacement_edges;
        }
    }
}

/// Takes the deleted nodes out of the old lists: in place (replacement edges planned by
/// [`plan_in_place`]; a list re-pruned only when over `R`) or by consolidation (a node
/// pointing to deleted nodes takes their out-neighbours as candidates and is re-pruned).
#[allow(clippy::too_many_arguments)]
pub(super) fn repair<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    lists: &[Vec<u32>],
    deleted_vectors: &[T],
    store: &VectorStore<'_, T>,
    limits: PruneLimits,
    labels: Option<&BuildLabels>,
    medoid: u32,
    ctl: &Control,
) -> Result<Repaired, IndexBuildError> {
    let planned = match input.deletes {
        DeleteRepair::InPlace(p) => Some(plan_in_place(
            input,
            plan,
            lists,
            deleted_vectors,
            store,
            p,
            ctl,
        )?),
        DeleteRepair::Consolidate => None,
    };
    let add = planned.as_ref().map(|p| p.add.as_slice());
    let n_old = lists.len();
    let deleted = |v: u32| plan.deleted.get(v as usize).copied().unwrap_or(false);
    let fixed: Vec<(Vec<u32>, bool)> = (0..plan.n_slots as u32)
        .into_par_iter()
        .map_init(
            || (PruneScratch::default(), Vec::new()),
            |(ps, dists), s| {
                if s as usize >= n_old || plan.is_free(s) {
                    return (Vec::new(), false);
                }
                let old = &lists[s as usize];
                let added = add
                    .and_then(|a| a.get(s as usize))
                    .filter(|a| !a.is_empty());
                if added.is_none() && !old.iter().any(|&v| deleted(v)) {
                    return (old.clone(), false);
                }
                let list = match add {
                    // In place: edges to deleted nodes dropped, the replacements appended.
                    Some(_) => {
                        let mut list: Vec<u32> =
                            old.iter().copied().filter(|&v| !deleted(v)).collect();
                        for &x in added.into_iter().flatten() {
                            if x != s && !list.contains(&x) {
                                list.push(x);
                            }
                        }
                        if list.len() > limits.degree {
                            list = prune(store, s, &list, limits, ps, dists, labels);
                        }
                        list
                    }
                    // Consolidation (FreshDiskANN Algorithm 4).
                    None => {
                        let mut list = Vec::with_capacity(old.len() * 2);
                        for &v in old {
                            if deleted(v) {
                                let of = lists.get(v as usize).into_iter().flatten();
                                list.extend(of.copied().filter(|&x| !deleted(x) && x != s));
                            } else {
                                list.push(v);
                            }
                        }
                        list.sort_unstable();
                        list.dedup();
                        prune(store, s, &list, limits, ps, dists, labels)
                    }
                };
                (list, true)
            },
        )
        .collect();
    ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
    let repaired = fixed.iter().filter(|f| f.1).count() as u64;
    let graph = Graph::from_lists(
        fixed.into_iter().map(|f| f.0).collect(),
        input.cfg.r.max(1),
        medoid,
    );
    Ok(Repaired {
        graph,
        repaired,
        planned,
    })
}

/// What the delete phase planned.
#[derive(Default)]
pub(super) struct Replacements {
    /// Per old slot: the nodes to add to its list (sorted, may repeat).
    pub add: Vec<Vec<u32>>,
    /// Edges from live nodes to deleted ones.
    pub in_edges: u64,
    /// Of those, the ones whose source was found.
    pub in_edges_found: u64,
    /// Edges planned in their place.
    pub replacement_edges: u64,
}

/// Plans the replacement edges of every node this merge deletes.
fn plan_in_place<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    lists: &[Vec<u32>],
    deleted_vectors: &[T],
    store: &VectorStore<'_, T>,
    params: InPlaceParams,
    ctl: &Control,
) -> Result<Replacements, IndexBuildError> {
    let n_old = lists.len();
    let dead: Vec<u32> = (0..n_old as u32)
        .filter(|&s| plan.deleted[s as usize])
        .collect();
    let mut out = Replacements {
        add: vec![Vec::new(); n_old],
        ..Replacements::default()
    };
    if dead.is_empty() {
        return Ok(out);
    }
    let kept = |v: u32| (v as usize) < n_old && !plan.is_free(v);
    let into = in_neighbours_of(plan, lists, &dead);
    out.in_edges = into.iter().map(|v| v.len() as u64).sum();

    // The search for each deleted vector, when the parameters call for one.
    let found = if (0..n_old as u32).any(kept) {
        search_deleted(input, params, deleted_vectors, n_old)?
    } else {
        None
    };
    ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;

    let c = params.replace.max(1);
    let alpha = input.cfg.alpha;
    // Per deleted node: the (source, target) edges to add, and the in-edges found.
    let per: Vec<(Vec<(u32, u32)>, u64)> = (0..dead.len())
        .into_par_iter()
        .map_init(Vec::new, |dists: &mut Vec<f32>, k| {
            let p = dead[k] as usize;
            let results: &[u32] = match &found {
                Some(r) => {
                    let row = &r.ids[k * r.k..(k + 1) * r.k];
                    let end = row.iter().position(|&x| x == u32::MAX).unwrap_or(row.len());
                    &row[..end]
                }
                None => &[],
            };
            let sources: Vec<u32> = match params.in_neighbours {
                InNeighbours::Exact => into[k].clone(),
                InNeighbours::Search { .. } => {
                    // The nodes found, and `p`'s own out-neighbours: most edges are kept
                    // both ways, so these are the likeliest in-neighbours a search misses.
                    let mut s: Vec<u32> = results
                        .iter()
                        .chain(&lists[p])
                        .copied()
                        .filter(|z| into[k].contains(z))
                        .collect();
                    s.sort_unstable();
                    s.dedup();
                    s
                }
            };
            let cands: Vec<u32> = match params.candidates {
                Candidates::OutNeighbours => {
                    lists[p].iter().copied().filter(|&w| kept(w)).collect()
                }
                Candidates::Nearest { k } => results.iter().copied().take(k).collect(),
            };
            let mut edges = Vec::with_capacity(sources.len() * c);
            for &z in &sources {
                for x in replacement_edges(store, z, &cands, c, alpha, dists) {
                    edges.push((z, x));
                }
            }
            (edges, sources.len() as u64)
        })
        .collect();
    for (edges, f) in per {
        out.in_edges_found += f;
        out.replacement_edges += edges.len() as u64;
        for (from, to) in edges {
            out.add[from as usize].push(to);
        }
    }
    out.add.par_iter_mut().for_each(|a| a.sort_unstable());
    Ok(out)
}

/// The live in-neighbours of each of the `dead` nodes (in order), from the lists.
fn in_neighbours_of<T: DeltaElement>(
    plan: &Plan<'_, T>,
    lists: &[Vec<u32>],
    dead: &[u32],
) -> Vec<Vec<u32>> {
    let n_old = lists.len();
    let mut at = vec![u32::MAX; n_old];
    for (k, &p) in dead.iter().enumerate() {
        at[p as usize] = k as u32;
    }
    let mut into: Vec<Vec<u32>> = vec![Vec::new(); dead.len()];
    for (z, list) in lists.iter().enumerate() {
        if plan.is_free(z as u32) {
            continue;
        }
        for &v in list {
            if let Some(&k) = at.get(v as usize).filter(|&&k| k != u32::MAX) {
                into[k as usize].push(z as u32);
            }
        }
    }
    into
}

/// The search of the old graph for each deleted vector (deleted nodes traversed, never
/// returned), when the parameters call for one: its `l` (or `k`) nearest live nodes.
fn search_deleted<T: DeltaElement>(
    input: &MergeInput<'_>,
    params: InPlaceParams,
    deleted_vectors: &[T],
    n_old: usize,
) -> Result<Option<crate::search::BatchOutput>, IndexBuildError> {
    let l = match (params.in_neighbours, params.candidates) {
        (InNeighbours::Search { l }, _) => l,
        (InNeighbours::Exact, Candidates::Nearest { .. }) => 0,
        (InNeighbours::Exact, Candidates::OutNeighbours) => return Ok(None),
    };
    let l = if l == 0 { input.cfg.l.max(10) } else { l };
    let k = match params.candidates {
        Candidates::Nearest { k } => l.max(k),
        Candidates::OutNeighbours => l,
    };
    let sp = SearchParams {
        k: k.min(n_old),
        l: k,
        strategy: Strategy::Beam(BeamParams {
            width: 4,
            ..BeamParams::default()
        }),
        ..SearchParams::default()
    };
    input
        .old
        .search_rows_filtered(
            deleted_vectors,
            &sp,
            input.threads,
            8,
            Some(&live_filter(input)),
        )
        .map(Some)
        .map_err(IndexBuildError::Search)
}

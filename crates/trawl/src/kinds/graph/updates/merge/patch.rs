//! The merge's delete + patch pass (FreshDiskANN Algorithm 4), streaming the old graph into
//! the new one in slot order.

use std::collections::HashMap;
use std::path::Path;

use indicatif::ProgressBar;
use rayon::prelude::*;

use super::{decoupled, MergeInput, Plan};
use crate::kernels::Element;
use crate::kinds::graph::layout::decoupled::graph::GraphWriter;
use crate::kinds::graph::layout::packed::{self, PackedMeta, PackedWriter};
use crate::kinds::graph::search::DecoupledLayout;
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::updates::ids::HOLE;
use crate::kinds::graph::{payload_crc, IndexBuildError, IndexLayout, PQ_CODES_FILE, PQ_FILE};
use crate::progress::Control;
use crate::vamana::queue::Neighbor;
use crate::vamana::{robust_prune_labelled, BuildLabels, PruneLimits, PruneScratch, VectorStore};

/// What the patch pass needs to give a slot its new list.
pub(super) struct Repair<'a, T: Element> {
    /// Per old slot: deleted by this merge.
    pub deleted: &'a [bool],
    /// The lists of the deleted nodes.
    pub dlists: &'a HashMap<u32, Vec<u32>>,
    /// Back-edges `Δ`: node → new nodes that chose it.
    pub back: &'a HashMap<u32, Vec<u32>>,
    /// The index of the new vector at a slot.
    pub new_of_slot: &'a HashMap<u32, usize>,
    /// Each new vector's list.
    pub new_lists: &'a [Vec<u32>],
    /// Every vector of the new version.
    pub store: &'a VectorStore<'a, T>,
    pub limits: PruneLimits,
    /// A label-aware merge's labels: its prunes keep a path for every label.
    pub labels: Option<&'a BuildLabels>,
}

/// What the patch pass wrote.
pub(super) struct Written {
    /// The new graph file's header.
    pub meta: PackedMeta,
    /// Edges added to link back unreachable nodes.
    pub relinked: usize,
    /// Live nodes re-pruned because they pointed to deleted nodes.
    pub repaired: u64,
    /// Nodes that received back-edges.
    pub patched: u64,
    /// Bytes of the graph file.
    pub bytes: u64,
}

/// Where the patch pass writes the new graph.
enum Out {
    /// The packed layout: records with vectors and lists.
    Packed(PackedWriter),
    /// The decoupled layout: the lists only.
    Graph(GraphWriter),
}

/// Writes the new graph file (`packed.trawl`, or decoupled `graph.trawl`): every slot's new
/// list, with nodes the merge left unreachable from `medoid` linked back.
pub(super) fn write_graph<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    repair: &Repair<'_, T>,
    vectors: &[T],
    medoid: u32,
    staging: &Path,
    ctl: &Control,
) -> Result<Written, IndexBuildError> {
    let old = input.old;
    let dim = old.dim();
    let n_slots = plan.n_slots;
    let old_meta = *old.meta();
    let meta = PackedMeta {
        n: n_slots as u64,
        r: input.cfg.r.max(1),
        medoid,
        pq_crc: payload_crc(&staging.join(PQ_FILE))?,
        pq_codes_crc: payload_crc(&staging.join(PQ_CODES_FILE))?,
        neighbor_code_bytes: 0,
        permuted: false,
        ..old_meta
    };
    let decoupled = decoupled(input);
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
    let NewLists {
        all,
        repaired,
        patched,
    } = new_lists(input, plan, repair, decoupled, &bar, ctl)?;
    let mut graph = crate::vamana::Graph::from_lists(all, input.cfg.r.max(1), medoid);
    let holes: Vec<bool> = plan.slot_ids.iter().map(|&id| id == HOLE).collect();
    let relinked = crate::vamana::build::link_unreachable(
        &mut graph,
        repair.store,
        input.cfg.l,
        Some(&holes),
        ctl,
    )
    .map_err(IndexBuildError::Graph)?;
    for s in 0..n_slots as u32 {
        let list = graph.neighbors(s);
        match &mut w {
            Out::Packed(w) => w.push(&vectors[s as usize * dim..(s as usize + 1) * dim], list)?,
            Out::Graph(g) => g.push(list)?,
        }
    }
    drop(graph);
    let bytes = match w {
        Out::Packed(w) => w.finish()?,
        Out::Graph(g) => g.finish()?,
    };
    bar.finish_and_clear();
    Ok(Written {
        meta,
        relinked,
        repaired,
        patched,
        bytes,
    })
}

/// What [`new_lists`] computed.
struct NewLists {
    /// Every slot's new list.
    all: Vec<Vec<u32>>,
    /// Nodes repaired.
    repaired: u64,
    /// Nodes patched.
    patched: u64,
}

/// Every slot's new list, streamed from the old graph in chunks of slots whose lists are
/// computed in parallel; with the counts of repaired and patched nodes.
fn new_lists<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    repair: &Repair<'_, T>,
    decoupled: Option<&DecoupledLayout>,
    bar: &ProgressBar,
    ctl: &Control,
) -> Result<NewLists, IndexBuildError> {
    let old = input.old;
    let n_old = old.n();
    let n_slots = plan.n_slots;
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
                |(ps, dists), (s, list)| repair.fix_list(*s, list, ps, dists),
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
        let list = if (id as usize) < n_old && !plan.is_free(id) {
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
    Ok(NewLists {
        all,
        repaired: counts.0,
        patched: counts.1,
    })
}

impl<T: Element> Repair<'_, T> {
    /// The new list of slot `s` given its old list (empty for a freed or new slot): deleted
    /// neighbours replaced by their own neighbours and re-pruned, a new node's list from the
    /// insert phase, back-edges added (re-pruned over `R`). Returns the list and whether it
    /// was repaired or patched.
    fn fix_list(
        &self,
        s: u32,
        old: &[u32],
        ps: &mut PruneScratch,
        dists: &mut Vec<f32>,
    ) -> (Vec<u32>, bool, bool) {
        let deleted = self.deleted;
        let is_deleted = |v: u32| deleted.get(v as usize).copied().unwrap_or(false);
        let mut list: Vec<u32>;
        let mut repaired = false;
        let mut must_prune = false;
        if let Some(&i) = self.new_of_slot.get(&s) {
            list = self.new_lists[i].clone();
        } else if old.iter().any(|&v| is_deleted(v)) {
            let mut cands: Vec<u32> = Vec::with_capacity(old.len() * 2);
            for &v in old {
                if is_deleted(v) {
                    if let Some(l) = self.dlists.get(&v) {
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
        let patched = match self.back.get(&s) {
            Some(b) => {
                list.extend(b.iter().copied().filter(|&x| x != s));
                true
            }
            None => false,
        };
        list.sort_unstable();
        list.dedup();
        if must_prune || list.len() > self.limits.degree {
            list = prune(self.store, s, &list, self.limits, ps, dists, self.labels);
        }
        (list, repaired, patched)
    }
}

/// Robust prune of candidates `ids` for node `s`, with exact distances; keeping a path for
/// every tracked label of `s` when `labels` are given.
pub(super) fn prune<T: Element>(
    store: &VectorStore<'_, T>,
    s: u32,
    ids: &[u32],
    limits: PruneLimits,
    ps: &mut PruneScratch,
    dists: &mut Vec<f32>,
    labels: Option<&BuildLabels>,
) -> Vec<u32> {
    let probe = store.point(s);
    store.dist_batch(&probe, ids, dists);
    let mut pool: Vec<Neighbor> = ids
        .iter()
        .zip(dists.iter())
        .map(|(&id, &dist)| Neighbor { id, dist })
        .collect();
    let mut out = Vec::new();
    // No labels (or none on `s`): every mask is 0, the plain robust prune.
    let mine = labels.map_or(&[][..], |lb| lb.of(s));
    robust_prune_labelled(store, s, &mut pool, limits, ps, &mut out, |q| {
        labels.map_or(0, |lb| lb.mask(mine, q))
    });
    out
}

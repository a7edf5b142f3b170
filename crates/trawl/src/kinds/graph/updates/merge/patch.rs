//! The merge's patch pass, writing the new graph in slot order: the repaired lists
//! ([`super::deletes::repair`]) with the back-edges of the new nodes added (re-pruned when
//! over `R`), the new nodes' lists, nodes left unreachable linked back.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use super::{decoupled, MergeInput, Plan};
use crate::kernels::Element;
use crate::kinds::graph::layout::decoupled::graph::GraphWriter;
use crate::kinds::graph::layout::packed::{self, PackedGeometry, PackedMeta, PackedWriter};
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::updates::ids::HOLE;
use crate::kinds::graph::{payload_crc, IndexBuildError, IndexLayout, PQ_CODES_FILE, PQ_FILE};
use crate::progress::Control;
use crate::vamana::queue::Neighbor;
use crate::vamana::{
    robust_prune_labelled, BuildLabels, Graph, PruneLimits, PruneScratch, VectorStore,
};

/// What the patch pass needs to give a slot its new list.
pub(super) struct Patch<'a, T: Element> {
    /// Every old slot's list, as on disk.
    pub old_lists: &'a [Vec<u32>],
    /// The repaired graph: every slot's list with the deleted nodes gone.
    pub repaired: &'a Graph,
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
    /// Nodes that received back-edges.
    pub patched: u64,
    /// Kept nodes whose list changed.
    pub touched_nodes: u64,
    /// Pages of the new file that differ from the old one's (decoupled: lists).
    pub touched_pages: u64,
    /// Data pages of the new file (decoupled: lists).
    pub graph_pages: u64,
    /// Bytes of the graph file.
    pub bytes: u64,
}

impl Written {
    /// Copies the pass's figures into the merge's report.
    pub(super) fn report(&self, r: &mut super::MergeReport) {
        r.relinked = self.relinked;
        r.bytes_written += self.bytes;
        r.patched = self.patched;
        r.touched_nodes = self.touched_nodes;
        r.touched_pages = self.touched_pages;
        r.graph_pages = self.graph_pages;
    }
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
    repair: &Patch<'_, T>,
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
    let (all, patched) = new_lists(plan, repair, ctl)?;
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
    let (touched_nodes, touched_pages, graph_pages) = touched(
        plan,
        repair.old_lists,
        &graph,
        decoupled.is_none().then_some(&meta),
    );
    let bar = ctl.bar("merge: writing", n_slots as u64);
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
        patched,
        touched_nodes,
        touched_pages,
        graph_pages,
        bytes,
    })
}

/// Kept nodes whose list changed, and the data pages of the new file that differ from the old
/// one's: those holding a changed list, a slot freed now or a new vector (for a decoupled
/// merge, whose lists are not paged: the changed lists and new or freed slots, out of every
/// slot).
fn touched<T: DeltaElement>(
    plan: &Plan<'_, T>,
    old_lists: &[Vec<u32>],
    graph: &crate::vamana::Graph,
    packed: Option<&PackedMeta>,
) -> (u64, u64, u64) {
    let n_old = old_lists.len();
    let changed: Vec<bool> = (0..plan.n_slots)
        .into_par_iter()
        .map(|s| {
            if s >= n_old || plan.is_free(s as u32) {
                // A new slot, or one freed now or holding a new vector; an old hole left
                // empty is unchanged.
                !(s < n_old && plan.ids.is_hole(s as u32) && graph.neighbors(s as u32).is_empty())
            } else {
                graph.neighbors(s as u32) != old_lists[s].as_slice()
            }
        })
        .collect();
    let nodes = (0..n_old.min(plan.n_slots))
        .filter(|&s| !plan.is_free(s as u32) && changed[s])
        .count() as u64;
    let all = changed.iter().filter(|&&x| x).count() as u64;
    let Some(meta) = packed else {
        return (nodes, all, plan.n_slots as u64);
    };
    match PackedGeometry::of(meta) {
        Some(g) if g.per_page > 0 => {
            let pages = changed
                .chunks(g.per_page)
                .filter(|c| c.iter().any(|&x| x))
                .count() as u64;
            (nodes, pages, g.data_pages)
        }
        Some(g) => (nodes, all * g.pages_per_record as u64, g.data_pages),
        None => (nodes, 0, 0),
    }
}

/// Every slot's new list, computed in parallel; with the count of nodes patched.
fn new_lists<T: DeltaElement>(
    plan: &Plan<'_, T>,
    repair: &Patch<'_, T>,
    ctl: &Control,
) -> Result<(Vec<Vec<u32>>, u64), IndexBuildError> {
    let bar = ctl.bar("merge: patching", plan.n_slots as u64);
    let mut all: Vec<Vec<u32>> = Vec::with_capacity(plan.n_slots);
    let mut patched = 0u64;
    for chunk in (0..plan.n_slots as u32).collect::<Vec<u32>>().chunks(16384) {
        let done: Vec<(Vec<u32>, bool)> = chunk
            .par_iter()
            .map_init(
                || (PruneScratch::default(), Vec::new()),
                |(ps, dists), &s| repair.fix_list(s, ps, dists),
            )
            .collect();
        for (list, p) in done {
            patched += u64::from(p);
            all.push(list);
        }
        bar.inc(chunk.len() as u64);
        ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
    }
    bar.finish_and_clear();
    Ok((all, patched))
}

impl<T: Element> Patch<'_, T> {
    /// The new list of slot `s`: a new node's list from the insert phase, or the repaired
    /// list, with the back-edges added (the list keeps its order; re-pruned only when over
    /// `R`). Returns the list and whether it was patched.
    fn fix_list(&self, s: u32, ps: &mut PruneScratch, dists: &mut Vec<f32>) -> (Vec<u32>, bool) {
        let mut list = match self.new_of_slot.get(&s) {
            Some(&i) => self.new_lists[i].clone(),
            None => self.repaired.neighbors(s).to_vec(),
        };
        let Some(back) = self.back.get(&s).filter(|b| !b.is_empty()) else {
            return (list, false);
        };
        // (A back-edge may name a freed slot: it is the new vector placed there.)
        for &x in back {
            if x != s && !list.contains(&x) {
                list.push(x);
            }
        }
        if list.len() > self.limits.degree {
            list = prune(self.store, s, &list, self.limits, ps, dists, self.labels);
        }
        (list, true)
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

//! Deletes of delta nodes, in place (IP-DiskANN): the graph loses its edges to them.

use std::sync::atomic::Ordering;

use super::Rows;
use crate::kernels::Element;
use crate::vamana::prune::replacement_edges;
use crate::vamana::queue::Neighbor;
use crate::vamana::search::{greedy, SearchScratch};
use crate::vamana::{robust_prune, Adjacency, PruneScratch, VamanaConfig, VectorStore};

/// Edges an in-neighbour of a deleted delta node takes in place of its edge to it (IP-DiskANN's
/// `c`, as in the merge's default).
pub(crate) const DELTA_REPLACE: usize = 3;

/// A delete call finds the in-neighbours of its nodes by a search for each when that costs less
/// than one pass over the lists: a search reads about `SEARCH_WORK × L` list entries' worth
/// (its distances weigh more than the pass's loads) against the pass's `n`.
const SEARCH_WORK: usize = 4;

/// What taking deleted nodes out of the delta graph did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unlinked {
    /// Edges from live nodes to the deleted ones that were found and removed (all of them
    /// when found by the pass over the lists).
    pub in_edges: u64,
    /// Replacement edges added.
    pub replacement_edges: u64,
    /// Lists rewritten (by searches, a node that links to two deleted nodes counts twice).
    pub touched: u64,
    /// Whether the in-neighbours were found by searches (else by a pass over the lists).
    pub searched: bool,
}

/// Takes the nodes `gone` (just stamped deleted) out of the delta graph in place (IP-DiskANN):
/// each live node whose list holds one of them loses the edge and takes up to
/// [`DELTA_REPLACE`] edges to that node's live out-neighbours in its place, chosen as robust
/// prune chooses (nearest first, skipping an occluded one); a list that then overflows its
/// slots is re-pruned to `R`.
///
/// The in-neighbours are found exactly, by one pass over the lists (`n × slots` loads, about
/// 2 ms for 50,000 nodes), unless the call deletes few nodes of a large delta: then, as in
/// IP-DiskANN, by a search for each deleted vector (list size `L`): the nodes it expands, and
/// the deleted node's own out-neighbours (most edges are kept both ways), that link to it are
/// its in-neighbours (approximate: an edge not found stays, to a node that is hidden from
/// results, and the merge drops it).
///
/// Deleted nodes' own lists are left as they are. The nodes are visited in a fixed order on
/// one thread, so the same operations give the same graph (a reader that replays the log gets
/// the writer's). Searches read lists meanwhile without locks, as they do while nodes are
/// linked.
pub(super) fn unlink_in_place<T: Element>(
    r: &Rows<T>,
    store: &VectorStore<'_, T>,
    cfg: &VamanaConfig,
    gone: &[u32],
) -> Unlinked {
    let n = r.n();
    let mut is_gone = vec![false; n];
    for &d in gone {
        is_gone[d as usize] = true;
    }
    let dead = |v: u32| r.dead[v as usize].load(Ordering::Acquire) != 0;
    let mut fix = Fixer {
        r,
        store,
        cfg,
        out: Unlinked::default(),
        bufs: Default::default(),
    };
    let mut list = Vec::new();
    if gone.len().saturating_mul(SEARCH_WORK * cfg.l) < n {
        fix.out.searched = true;
        let mut s = SearchScratch::new(n);
        let mut found = Vec::new();
        for &p in gone {
            let probe = store.point(p);
            greedy(&r.graph, store, &probe, 0, cfg.l, true, &mut s);
            found.clear();
            found.extend(s.expanded.iter().map(|nb| nb.id));
            // Most edges are kept both ways (every link adds a back-edge): `p`'s own
            // out-neighbours are the likeliest in-neighbours the search did not expand.
            r.graph.neighbors_into(p, &mut list);
            found.extend_from_slice(&list);
            found.retain(|&z| z != p && !dead(z));
            found.sort_unstable();
            found.dedup();
            for &z in &found {
                r.graph.neighbors_into(z, &mut list);
                if list.contains(&p) {
                    fix.rewrite(z, &list, |v| v == p);
                }
            }
        }
    } else {
        for z in (0..n as u32).filter(|&z| !dead(z)) {
            r.graph.neighbors_into(z, &mut list);
            if list.iter().any(|&v| is_gone[v as usize]) {
                fix.rewrite(z, &list, |v| is_gone[v as usize]);
            }
        }
    }
    fix.out
}

/// Rewrites delta lists for [`unlink_in_place`].
struct Fixer<'a, 'r, T: Element> {
    r: &'a Rows<T>,
    store: &'a VectorStore<'r, T>,
    cfg: &'a VamanaConfig,
    out: Unlinked,
    bufs: (Vec<u32>, Vec<f32>, PruneScratch, Vec<u32>),
}

impl<T: Element> Fixer<'_, '_, T> {
    /// Node `z`, whose list is `list`, drops its edges to the nodes `gone` names and takes
    /// replacements for each.
    fn rewrite(&mut self, z: u32, list: &[u32], gone: impl Fn(u32) -> bool) {
        let (r, store, g) = (self.r, self.store, &self.r.graph);
        let (of, dists, ps, pruned) = &mut self.bufs;
        let dead = |v: u32| r.dead[v as usize].load(Ordering::Acquire) != 0;
        let mut next: Vec<u32> = list.iter().copied().filter(|&v| !gone(v)).collect();
        for &p in list.iter().filter(|&&v| gone(v)) {
            self.out.in_edges += 1;
            g.neighbors_into(p, of);
            of.retain(|&w| w != z && !dead(w));
            for x in replacement_edges(store, z, of, DELTA_REPLACE, self.cfg.alpha, dists) {
                if !next.contains(&x) {
                    next.push(x);
                    self.out.replacement_edges += 1;
                }
            }
        }
        if next.len() > g.slots() {
            let probe = store.point(z);
            store.dist_batch(&probe, &next, dists);
            let mut pool: Vec<Neighbor> = next
                .iter()
                .zip(dists.iter())
                .map(|(&id, &dist)| Neighbor { id, dist })
                .collect();
            robust_prune(store, z, &mut pool, self.cfg.prune_limits(), ps, pruned);
            next.clone_from(pruned);
        }
        let lock = g.lock(z);
        g.set(&lock, &next);
        self.out.touched += 1;
    }
}

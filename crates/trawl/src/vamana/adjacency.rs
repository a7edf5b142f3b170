//! Neighbour-list storage: [`SlotGraph`], the concurrently mutated build-time graph, and
//! [`Graph`], the compact immutable result.
//!
//! `SlotGraph` keeps one row of `slots + 1` `u32`s per node in one flat array: the length, then
//! `slots` neighbour ids (`n × (slots + 1) × 4` bytes and one lock byte per node). Keeping the
//! length in the row makes reading a list one cache miss, not two. Writers hold the node's lock;
//! searches read lists without it, as DiskANN's static build does: ids and lengths are atomics
//! (plain loads and stores on x86), so a reader racing a writer sees a mix of old and new ids,
//! every one of them a valid node id, which at worst steers one greedy step differently.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use parking_lot::{Mutex, MutexGuard};

/// Something greedy search can walk.
pub trait Adjacency: Sync {
    /// Number of nodes.
    fn node_count(&self) -> usize;
    /// Replaces `out` with the neighbours of `i`.
    fn neighbors_into(&self, i: u32, out: &mut Vec<u32>);
    /// Hints the CPU to load the list of `i` (a no-op by default).
    #[inline]
    fn prefetch(&self, i: u32) {
        let _ = i;
    }
}

/// The build-time graph: fixed slots per node, per-node locks for writers.
#[derive(Debug)]
pub struct SlotGraph {
    /// `n` rows of `slots + 1`: length, then ids.
    rows: Vec<AtomicU32>,
    locks: Vec<Mutex<()>>,
    slots: usize,
}

/// Proof that the lock of one node is held.
#[derive(Debug)]
pub struct NodeGuard<'g> {
    node: u32,
    _guard: MutexGuard<'g, ()>,
}

impl SlotGraph {
    /// An edgeless graph of `n` nodes with room for `slots` neighbours each.
    pub fn new(n: usize, slots: usize) -> Self {
        // Zeroed allocations come from fresh pages; converting in place keeps them untouched
        // until a list is written.
        let rows = crate::mem::zeroed_huge::<u32>(n * (slots + 1))
            .into_iter()
            .map(AtomicU32::new)
            .collect();
        let locks = (0..n).map(|_| Mutex::new(())).collect();
        Self { rows, locks, slots }
    }

    /// Bytes allocated by a graph of `n` nodes and `slots` slots.
    pub fn bytes_for(n: usize, slots: usize) -> u64 {
        (n as u64) * ((slots as u64 + 1) * 4 + 1)
    }

    /// A copy with room for `n` nodes (at least the current count): the lists are kept,
    /// new nodes start empty. Writers must not run meanwhile (the caller holds `&mut` access
    /// or a lock over the whole graph).
    pub fn grown(&self, n: usize) -> SlotGraph {
        let n = n.max(self.locks.len());
        let g = SlotGraph::new(n, self.slots);
        for (to, from) in g.rows.iter().zip(&self.rows) {
            to.store(from.load(Relaxed), Relaxed);
        }
        g
    }

    /// Slots per node.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Takes the lock of node `i`.
    #[inline]
    pub fn lock(&self, i: u32) -> NodeGuard<'_> {
        NodeGuard {
            node: i,
            _guard: self.locks[i as usize].lock(),
        }
    }

    /// Current number of neighbours of `i`.
    #[inline]
    pub fn degree(&self, i: u32) -> usize {
        (self.rows[i as usize * (self.slots + 1)].load(Relaxed) as usize).min(self.slots)
    }

    #[inline]
    fn len_slot(&self, i: u32) -> &AtomicU32 {
        &self.rows[i as usize * (self.slots + 1)]
    }

    #[inline]
    fn row(&self, i: u32) -> &[AtomicU32] {
        let s = i as usize * (self.slots + 1) + 1;
        &self.rows[s..s + self.slots]
    }

    /// Hints the CPU to load the list of node `i` (every cache line of its row).
    #[inline]
    pub fn prefetch_row(&self, i: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let stride = self.slots + 1;
            let start = i as usize * stride;
            if let Some(row) = self.rows.get(start..start + stride) {
                let base = row.as_ptr().cast::<i8>();
                for off in (0..stride * 4).step_by(64) {
                    // SAFETY: prefetch never faults; `base + off` stays inside the row.
                    unsafe { _mm_prefetch(base.wrapping_add(off), _MM_HINT_T0) };
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Replaces the list of the locked node (at most `slots` ids are kept).
    pub fn set(&self, g: &NodeGuard<'_>, list: &[u32]) {
        let row = self.row(g.node);
        let k = list.len().min(self.slots);
        for (slot, &id) in row.iter().zip(&list[..k]) {
            slot.store(id, Relaxed);
        }
        self.len_slot(g.node).store(k as u32, Relaxed);
    }

    /// Whether the locked node links to `id`.
    pub fn contains(&self, g: &NodeGuard<'_>, id: u32) -> bool {
        let d = self.degree(g.node);
        self.row(g.node)[..d].iter().any(|s| s.load(Relaxed) == id)
    }

    /// Appends `id` to the locked node's list; returns `false` (and changes nothing) when full.
    pub fn push(&self, g: &NodeGuard<'_>, id: u32) -> bool {
        let d = self.degree(g.node);
        if d >= self.slots {
            return false;
        }
        self.row(g.node)[d].store(id, Relaxed);
        self.len_slot(g.node).store(d as u32 + 1, Relaxed);
        true
    }

    /// Converts into a compact [`Graph`] with at most `r` neighbours per node (lists longer
    /// than `r` are cut; the build prunes them first), reusing the allocation.
    pub fn into_graph(self, r: usize, medoid: u32) -> Graph {
        let n = self.locks.len();
        drop(self.locks);
        let stride = self.slots + 1;
        let mut ids: Vec<u32> = self.rows.into_iter().map(AtomicU32::into_inner).collect();
        let mut degrees = Vec::with_capacity(n);
        for i in 0..n {
            let d = (ids[i * stride] as usize).min(r);
            degrees.push(d as u32);
            // Row i moves down to offset i·r ≤ i·stride + 1: copy_within handles the overlap.
            ids.copy_within(i * stride + 1..i * stride + 1 + d, i * r);
        }
        ids.truncate(n * r);
        ids.shrink_to_fit();
        Graph {
            n,
            r,
            medoid,
            degrees,
            ids,
        }
    }
}

impl Adjacency for SlotGraph {
    fn node_count(&self) -> usize {
        self.locks.len()
    }
    #[inline]
    fn prefetch(&self, i: u32) {
        self.prefetch_row(i);
    }
    #[inline]
    fn neighbors_into(&self, i: u32, out: &mut Vec<u32>) {
        out.clear();
        let d = self.degree(i);
        out.extend(self.row(i)[..d].iter().map(|s| s.load(Relaxed)));
    }
}

/// A Vamana graph: at most `R` out-neighbours per node and an entry point (the medoid).
///
/// Two graphs are equal when they have the same `n`, `R`, medoid and neighbour lists.
#[derive(Clone)]
pub struct Graph {
    pub(super) n: usize,
    pub(super) r: usize,
    pub(super) medoid: u32,
    pub(super) degrees: Vec<u32>,
    /// `n × r` ids; node `i`'s list is the first `degrees[i]` of row `i`.
    pub(super) ids: Vec<u32>,
}

impl Graph {
    /// Number of nodes.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Maximum degree `R`.
    pub fn max_degree(&self) -> usize {
        self.r
    }
    /// The entry point of searches.
    pub fn medoid(&self) -> u32 {
        self.medoid
    }
    /// Out-neighbours of node `i` (panics when `i >= n`).
    #[inline]
    pub fn neighbors(&self, i: u32) -> &[u32] {
        let s = i as usize * self.r;
        &self.ids[s..s + self.degrees[i as usize] as usize]
    }
    /// Total number of edges.
    pub fn edge_count(&self) -> u64 {
        self.degrees.iter().map(|&d| u64::from(d)).sum()
    }
    /// Bytes held in memory.
    pub fn heap_bytes(&self) -> usize {
        (self.ids.capacity() + self.degrees.capacity()) * 4
    }

    /// A graph from explicit neighbour lists (each cut to `r`); `medoid` must be `< lists.len()`
    /// and every id `< lists.len()` (the caller checks).
    pub fn from_lists(lists: Vec<Vec<u32>>, r: usize, medoid: u32) -> Self {
        let n = lists.len();
        let mut ids = vec![0u32; n * r];
        let mut degrees = Vec::with_capacity(n);
        for (i, l) in lists.iter().enumerate() {
            let d = l.len().min(r);
            ids[i * r..i * r + d].copy_from_slice(&l[..d]);
            degrees.push(d as u32);
        }
        Self {
            n,
            r,
            medoid,
            degrees,
            ids,
        }
    }
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        (self.n, self.r, self.medoid) == (other.n, other.r, other.medoid)
            && (0..self.n as u32).all(|i| self.neighbors(i) == other.neighbors(i))
    }
}

impl Eq for Graph {}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("n", &self.n)
            .field("r", &self.r)
            .field("medoid", &self.medoid)
            .field("edges", &self.edge_count())
            .finish_non_exhaustive()
    }
}

impl Adjacency for Graph {
    fn node_count(&self) -> usize {
        self.n
    }
    #[inline]
    fn neighbors_into(&self, i: u32, out: &mut Vec<u32>) {
        out.clear();
        out.extend_from_slice(self.neighbors(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_graph_round_trip() {
        let g = SlotGraph::new(4, 3);
        {
            let guard = g.lock(1);
            g.set(&guard, &[0, 2, 3, 3]);
            assert!(g.contains(&guard, 2));
            assert!(!g.push(&guard, 0), "full");
        }
        {
            let guard = g.lock(2);
            assert!(g.push(&guard, 1));
        }
        let mut buf = Vec::new();
        g.neighbors_into(1, &mut buf);
        assert_eq!(buf, [0, 2, 3]);
        let graph = g.into_graph(2, 1);
        assert_eq!(graph.neighbors(1), [0, 2]);
        assert_eq!(graph.neighbors(2), [1]);
        assert_eq!(graph.neighbors(0), [] as [u32; 0]);
        assert_eq!(graph.edge_count(), 3);
    }
}

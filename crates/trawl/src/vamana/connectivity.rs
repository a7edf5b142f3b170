//! How well a graph's nodes can be reached: the nodes no search from the start nodes can
//! find (unreachable), the in-degree distribution, and the strongly connected components.
//! A node unreachable from every start point is never returned by any search, whatever its
//! list size; the build repairs such nodes and `trawl info --verify` checks none is left.

use serde::Serialize;

use crate::vamana::adjacency::Adjacency;

/// Connectivity figures of a graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Connectivity {
    /// Nodes of the graph.
    pub nodes: usize,
    /// Start nodes the reachability was measured from (the medoid, and the entry index's
    /// nodes when the index has one).
    pub starts: usize,
    /// Nodes no path from a start node reaches.
    pub unreachable: usize,
    /// Nodes without an in-edge (reachable only when they are start nodes).
    pub zero_in_degree: usize,
    /// In-degree percentiles: minimum, 1 %, median, 99 %, maximum.
    pub in_degree: [u32; 5],
    /// Strongly connected components.
    pub components: usize,
    /// Nodes of the largest component.
    pub largest_component: usize,
}

/// The nodes reachable from `starts` (out-of-range starts are ignored): one flag per node.
pub fn reachable<A: Adjacency + ?Sized>(g: &A, starts: &[u32]) -> Vec<bool> {
    let n = g.node_count();
    let mut seen = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    for &s in starts {
        mark(&mut seen, &mut stack, s);
    }
    spread(g, &mut seen, &mut stack);
    seen
}

/// Marks `v` seen and queues it, when it is a node not seen yet; returns whether it was.
fn mark(seen: &mut [bool], stack: &mut Vec<u32>, v: u32) -> bool {
    match seen.get_mut(v as usize) {
        Some(s) if !*s => {
            *s = true;
            stack.push(v);
            true
        }
        _ => false,
    }
}

/// Marks everything reachable from the queued nodes; returns how many it marked.
fn spread<A: Adjacency + ?Sized>(g: &A, seen: &mut [bool], stack: &mut Vec<u32>) -> usize {
    let mut nbrs = Vec::new();
    let mut added = 0;
    while let Some(v) = stack.pop() {
        g.neighbors_into(v, &mut nbrs);
        for &u in &nbrs {
            added += usize::from(mark(seen, stack, u));
        }
    }
    added
}

/// Adds the nodes reachable from `v` to `seen` ([`reachable`]'s flags); returns how many were
/// added.
pub fn reach_from<A: Adjacency + ?Sized>(g: &A, seen: &mut [bool], v: u32) -> usize {
    let mut stack = Vec::new();
    let first = usize::from(mark(seen, &mut stack, v));
    first + spread(g, seen, &mut stack)
}

/// The connectivity of `g` from `starts`. Slots `hole` marks (free slots of an updated index:
/// no vector, no list) are not nodes: they are left out of every figure.
pub fn measure<A: Adjacency + ?Sized>(
    g: &A,
    starts: &[u32],
    hole: Option<&[bool]>,
) -> Connectivity {
    let n = g.node_count();
    let is_hole = |v: usize| hole.is_some_and(|h| h.get(v).copied().unwrap_or(false));
    let seen = reachable(g, starts);
    let mut indeg = vec![0u32; n];
    let mut nbrs = Vec::new();
    for v in 0..n as u32 {
        g.neighbors_into(v, &mut nbrs);
        for &u in &nbrs {
            if let Some(d) = indeg.get_mut(u as usize) {
                *d += 1;
            }
        }
    }
    let nodes: Vec<usize> = (0..n).filter(|&v| !is_hole(v)).collect();
    let zero_in_degree = nodes.iter().filter(|&&v| indeg[v] == 0).count();
    let mut sorted: Vec<u32> = nodes.iter().map(|&v| indeg[v]).collect();
    sorted.sort_unstable();
    let pct = |p: usize| {
        sorted
            .get(sorted.len().saturating_sub(1) * p / 100)
            .copied()
            .unwrap_or(0)
    };
    let (components, largest_component) = components(g, hole);
    Connectivity {
        nodes: nodes.len(),
        starts: starts.iter().filter(|&&s| (s as usize) < n).count(),
        unreachable: nodes.iter().filter(|&&v| !seen[v]).count(),
        zero_in_degree,
        in_degree: [pct(0), pct(1), pct(50), pct(99), pct(100)],
        components,
        largest_component,
    }
}

/// Neighbour lists in two flat arrays, filled in any node order (what a scan of an index
/// file yields).
#[derive(Debug, Clone, Default)]
pub struct Lists {
    start: Vec<u64>,
    len: Vec<u32>,
    ids: Vec<u32>,
}

impl Lists {
    /// `n` nodes, every list empty.
    pub fn new(n: usize) -> Self {
        Self {
            start: vec![0; n],
            len: vec![0; n],
            ids: Vec::new(),
        }
    }

    /// Sets node `v`'s list (a node out of range is ignored).
    pub fn set(&mut self, v: u32, list: impl IntoIterator<Item = u32>) {
        let Some(s) = self.start.get_mut(v as usize) else {
            return;
        };
        *s = self.ids.len() as u64;
        self.ids.extend(list);
        self.len[v as usize] = (self.ids.len() as u64 - *s) as u32;
    }
}

impl Adjacency for Lists {
    fn node_count(&self) -> usize {
        self.start.len()
    }
    fn neighbors_into(&self, i: u32, out: &mut Vec<u32>) {
        out.clear();
        let s = self.start[i as usize] as usize;
        out.extend_from_slice(&self.ids[s..s + self.len[i as usize] as usize]);
    }
}

/// The strongly connected components of `g` (iterative Tarjan) without the `hole` slots: how
/// many, and the size of the largest.
pub fn components<A: Adjacency + ?Sized>(g: &A, hole: Option<&[bool]>) -> (usize, usize) {
    let n = g.node_count();
    let is_hole = |v: usize| hole.is_some_and(|h| h.get(v).copied().unwrap_or(false));
    let mut t = Tarjan {
        index: vec![NOT_SEEN; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        frames: Vec::new(),
        spare: Vec::new(),
        next: 0,
    };
    let (mut count, mut largest) = (0usize, 0usize);
    for root in 0..n as u32 {
        if t.index[root as usize] != NOT_SEEN || is_hole(root as usize) {
            continue;
        }
        t.visit(g, root);
        while let Some((v, nb, at)) = t.frames.last_mut() {
            let v = *v as usize;
            if let Some(&u) = nb.get(*at) {
                *at += 1;
                let u_i = u as usize;
                if u_i >= n || is_hole(u_i) {
                    continue;
                }
                if t.index[u_i] == NOT_SEEN {
                    t.visit(g, u);
                } else if t.on_stack[u_i] {
                    t.low[v] = t.low[v].min(t.index[u_i]);
                }
                continue;
            }
            if let Some((_, nb, _)) = t.frames.pop() {
                t.spare.push(nb);
            }
            if let Some((parent, _, _)) = t.frames.last() {
                let p = *parent as usize;
                t.low[p] = t.low[p].min(t.low[v]);
            }
            if t.low[v] == t.index[v] {
                let mut size = 0;
                while let Some(w) = t.stack.pop() {
                    t.on_stack[w as usize] = false;
                    size += 1;
                    if w as usize == v {
                        break;
                    }
                }
                count += 1;
                largest = largest.max(size);
            }
        }
    }
    (count, largest)
}

const NOT_SEEN: u32 = u32::MAX;

/// The state of [`components`]' depth-first search.
struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    /// The DFS path: (node, its neighbours, the next neighbour to visit).
    frames: Vec<(u32, Vec<u32>, usize)>,
    /// Neighbour buffers of finished frames, reused.
    spare: Vec<Vec<u32>>,
    next: u32,
}

impl Tarjan {
    fn visit<A: Adjacency + ?Sized>(&mut self, g: &A, v: u32) {
        self.index[v as usize] = self.next;
        self.low[v as usize] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        let mut nb = self.spare.pop().unwrap_or_default();
        g.neighbors_into(v, &mut nb);
        self.frames.push((v, nb, 0));
    }
}

/// Reachability from `start` with the BFS tree: `parent[v]` is the node whose edge first
/// reached `v` (`u32::MAX` for the start and for nodes not reached).
pub(crate) fn parents(g: &crate::vamana::Graph, start: u32) -> (Vec<bool>, Vec<u32>) {
    let n = g.n();
    let (mut seen, mut parent) = (vec![false; n], vec![u32::MAX; n]);
    if (start as usize) < n {
        seen[start as usize] = true;
        spread_with_parents(g, &mut seen, &mut parent, vec![start]);
    }
    (seen, parent)
}

/// Marks `v` (just linked from the reached node `from`) and everything it reaches, with parents.
pub(crate) fn reach_with_parents(
    g: &crate::vamana::Graph,
    seen: &mut [bool],
    parent: &mut [u32],
    v: u32,
    from: u32,
) {
    if seen.get(v as usize).is_some_and(|s| !*s) {
        seen[v as usize] = true;
        parent[v as usize] = from;
        spread_with_parents(g, seen, parent, vec![v]);
    }
}

fn spread_with_parents(
    g: &crate::vamana::Graph,
    seen: &mut [bool],
    parent: &mut [u32],
    mut q: Vec<u32>,
) {
    while let Some(v) = q.pop() {
        for &w in g.neighbors(v) {
            if seen.get(w as usize).is_some_and(|s| !*s) {
                seen[w as usize] = true;
                parent[w as usize] = v;
                q.push(w);
            }
        }
    }
}

/// Adds the edge `v → u` for the first of `near` (nearest first, all reached) with room in its
/// list, else replaces in the nearest list that has one a neighbour `w` that another node also
/// links to and whose tree edge (`parent`) is not this one — so every node reached stays
/// reached. Returns the `v` that got the edge.
pub(crate) fn link_one(
    g: &mut crate::vamana::Graph,
    near: &[crate::vamana::queue::Neighbor],
    u: u32,
    indeg: &mut [u32],
    parent: &[u32],
) -> Option<u32> {
    if let Some(v) = near
        .iter()
        .find(|c| (g.degrees[c.id as usize] as usize) < g.r)
    {
        let (row, d) = (v.id as usize * g.r, g.degrees[v.id as usize] as usize);
        g.ids[row + d] = u;
        g.degrees[v.id as usize] += 1;
        indeg[u as usize] += 1;
        return Some(v.id);
    }
    for v in near {
        let (row, d) = (v.id as usize * g.r, g.degrees[v.id as usize] as usize);
        // Lists keep their neighbours nearest first: look from the farthest.
        let spare = (0..d).rev().find(|&k| {
            let w = g.ids[row + k] as usize;
            indeg[w] >= 2 && parent[w] != v.id
        });
        if let Some(k) = spare {
            indeg[g.ids[row + k] as usize] -= 1;
            g.ids[row + k] = u;
            indeg[u as usize] += 1;
            return Some(v.id);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vamana::Graph;

    fn graph(lists: &[&[u32]]) -> Graph {
        Graph::from_lists(lists.iter().map(|l| l.to_vec()).collect(), 4, 0)
    }

    #[test]
    fn a_cycle_is_one_component_reachable_from_anywhere() {
        let g = graph(&[&[1], &[2], &[3], &[0]]);
        let c = measure(&g, &[2], None);
        assert_eq!(c.unreachable, 0);
        assert_eq!(c.zero_in_degree, 0);
        assert_eq!((c.components, c.largest_component), (1, 4));
        assert_eq!(c.in_degree, [1, 1, 1, 1, 1]);
    }

    #[test]
    fn islands_and_one_way_edges() {
        // 0 ⇄ 1 → 2 ⇄ 3; 4 → 0 (nobody reaches 4); 5 alone.
        let g = graph(&[&[1], &[0, 2], &[3], &[2], &[0], &[]]);
        let c = measure(&g, &[0], None);
        assert_eq!(c.unreachable, 2);
        assert_eq!(c.zero_in_degree, 2);
        assert_eq!((c.components, c.largest_component), (4, 2));
        assert_eq!(c.in_degree[0], 0);
        assert_eq!(c.in_degree[4], 2);
        assert_eq!(measure(&g, &[0, 4, 5], None).unreachable, 0);
        let mut r = reachable(&g, &[2]);
        assert_eq!(r, vec![false, false, true, true, false, false]);
        assert_eq!(reach_from(&g, &mut r, 4), 3);
        assert_eq!(r, vec![true, true, true, true, true, false]);
        // Slot 5 a hole: not a node.
        let holes = [false, false, false, false, false, true];
        let c = measure(&g, &[0], Some(&holes));
        assert_eq!((c.nodes, c.unreachable, c.zero_in_degree), (5, 1, 1));
        assert_eq!(c.components, 3);
        let mut lists = Lists::new(6);
        for v in (0..6u32).rev() {
            lists.set(v, g.neighbors(v).iter().copied());
        }
        assert_eq!(measure(&lists, &[0], None), measure(&g, &[0], None));
    }

    #[test]
    fn a_long_path_does_not_overflow_the_stack() {
        let n = 200_000u32;
        let lists: Vec<Vec<u32>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let g = Graph::from_lists(lists, 1, 0);
        let c = measure(&g, &[0], None);
        assert_eq!(
            (c.components, c.largest_component, c.unreachable),
            (1, n as usize, 0)
        );
    }
}

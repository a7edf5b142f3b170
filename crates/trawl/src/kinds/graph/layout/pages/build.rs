//! Page-node construction from a built Vamana graph: grouping vectors into page nodes
//! ([`group`]) and merging their edges into one list per page ([`page_edges`]).

use crate::kernels::{self, Element, Metric};
use crate::kinds::graph::layout::pages::NO_PAGE;
use crate::kinds::graph::layout::shuffle::Csr;

/// Parameters of a page-node layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageParams {
    /// Vectors per page node (0: the most whose neighbour list keeps `min_degree` entries per
    /// vector, [`crate::kinds::graph::layout::pages::auto_capacity`]).
    pub capacity: usize,
    /// Neighbour-list entries a page needs per vector when the capacity is chosen (0: the
    /// graph's largest degree, so every vector edge fits the list).
    pub min_degree: usize,
    /// Hops of the graph around a page's centre its members are chosen from (0: 2, PageANN's
    /// choice for graphs of degree ≥ 23, and 3 below).
    pub hops: usize,
    /// Most entries of a page's list (0: four times the graph's degree,
    /// [`super::default_degree_cap`]; never more than the page has room for). A shorter list
    /// keeps the pages its members are nearest to (round-robin over the members' edges) and
    /// costs a search fewer page scorings per page read.
    pub max_degree: usize,
}

/// Vectors grouped into page nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouping {
    /// The page node of each vector ([`NO_PAGE`] for a slot left out).
    pub page_of: Vec<u32>,
    /// The members of each page node, centre first, the others nearest the centre first.
    pub pages: Vec<Vec<u32>>,
}

impl Grouping {
    /// Pages holding fewer than `capacity` vectors.
    pub fn underfull(&self, capacity: usize) -> usize {
        self.pages.iter().filter(|p| p.len() < capacity).count()
    }
}

/// Groups the vectors of `graph` into page nodes of at most `capacity`, PageANN's way: a
/// centre takes its `capacity − 1` nearest (exact distance) unplaced vectors among those
/// within `hops` hops of it in the graph (more hops, up to `hops + 2`, while too few are
/// unplaced); the next centre is the nearest candidate that did not fit, so consecutive pages
/// follow each other through the space, or, when none is left, the lowest unplaced id. The
/// first centre is `start` (the medoid). Unlike PageANN, a page that finds too few unplaced
/// vectors nearby stays short instead of being filled with unrelated ones. Slots `include`
/// rejects (freed slots) get no page. `tick` is called once per page.
#[allow(clippy::too_many_arguments)]
pub fn group<T: Element>(
    graph: &Csr,
    vectors: &[T],
    dim: usize,
    metric: Metric,
    capacity: usize,
    hops: usize,
    start: u32,
    include: impl Fn(u32) -> bool,
    mut tick: impl FnMut(),
) -> Grouping {
    let n = graph.n();
    let capacity = capacity.max(1);
    let mut page_of = vec![NO_PAGE; n];
    let mut unplaced = 0usize;
    for (i, p) in page_of.iter_mut().enumerate() {
        if include(i as u32) {
            unplaced += 1;
        } else {
            // Marked as placed on no page: never a member, never a candidate.
            *p = NO_PAGE - 1;
        }
    }
    let mut pages: Vec<Vec<u32>> = Vec::with_capacity(unplaced.div_ceil(capacity));
    // Breadth-first search scratch: the stamp of the search that last reached a node.
    let mut seen = vec![0u32; n];
    let mut stamp = 0u32;
    let mut frontier: Vec<u32> = Vec::new();
    let mut next_frontier: Vec<u32> = Vec::new();
    let mut cands: Vec<(f32, u32)> = Vec::new();
    let mut scan = 0usize;
    let mut seed = (start as usize) < n && page_of[start as usize] == NO_PAGE;
    let mut centre = start;
    let vec_of = |id: u32| &vectors[id as usize * dim..(id as usize + 1) * dim];
    while unplaced > 0 {
        if !seed {
            while page_of[scan] != NO_PAGE {
                scan += 1;
            }
            centre = scan as u32;
        }
        let page = pages.len() as u32;
        page_of[centre as usize] = page;
        unplaced -= 1;
        let mut members = vec![centre];
        // The unplaced vectors within `hops` (more while too few).
        stamp = stamp.wrapping_add(1);
        if stamp == 0 {
            seen.iter_mut().for_each(|s| *s = 0);
            stamp = 1;
        }
        seen[centre as usize] = stamp;
        frontier.clear();
        frontier.push(centre);
        cands.clear();
        let c = vec_of(centre);
        let mut depth = 0;
        while !frontier.is_empty()
            && (depth < hops || (cands.len() + 1 < capacity && depth < hops + 2))
        {
            next_frontier.clear();
            for &u in &frontier {
                for &v in graph.row(u as usize) {
                    let s = &mut seen[v as usize];
                    if *s == stamp {
                        continue;
                    }
                    *s = stamp;
                    next_frontier.push(v);
                    if page_of[v as usize] == NO_PAGE {
                        cands.push((kernels::distance(metric, c, vec_of(v)), v));
                    }
                }
            }
            std::mem::swap(&mut frontier, &mut next_frontier);
            depth += 1;
        }
        let take = (capacity - 1).min(cands.len());
        if take < cands.len() {
            cands.select_nth_unstable_by(take, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        }
        cands[..take].sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, v) in &cands[..take] {
            page_of[v as usize] = page;
            members.push(v);
        }
        unplaced -= take;
        // The nearest candidate left over starts the next page.
        seed = take < cands.len();
        if seed {
            centre = cands[take].1;
        }
        pages.push(members);
        tick();
    }
    for p in page_of.iter_mut() {
        if *p == NO_PAGE - 1 {
            *p = NO_PAGE;
        }
    }
    Grouping { page_of, pages }
}

/// What merging the vector edges into page lists did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EdgeReport {
    /// Page-level edges (list entries) over all pages.
    pub page_edges: u64,
    /// Page-level edges of the vector graph that no list represents (a page whose members
    /// reach more pages than its list can name).
    pub missing_page_edges: u64,
    /// Pages with such a missing edge.
    pub truncated_pages: u64,
    /// Largest list.
    pub max_degree: usize,
}

/// The neighbour list of every page node: the pages its members' vector edges reach (each
/// once), taken round-robin over the members (each member's next edge in its list's order,
/// which a Vamana build leaves nearest first) so that, when a page reaches more pages than
/// `room(members)` entries, the ones its members are nearest to are kept. Lists come back
/// sorted (the coded form's order).
pub fn page_edges(
    graph: &Csr,
    grouping: &Grouping,
    room: impl Fn(usize) -> usize,
) -> (Vec<Vec<u32>>, EdgeReport) {
    let mut report = EdgeReport::default();
    let page_of = &grouping.page_of;
    let mut lists = Vec::with_capacity(grouping.pages.len());
    // Pages taken by the current page's list (stamped with its number + 1).
    let mut taken = vec![0u32; grouping.pages.len()];
    let mut pos: Vec<usize> = Vec::new();
    for (p, members) in grouping.pages.iter().enumerate() {
        let mark = p as u32 + 1;
        let cap = room(members.len());
        let mut list: Vec<u32> = Vec::new();
        let mut reached = 0u64;
        pos.clear();
        pos.resize(members.len(), 0);
        let mut live = true;
        while live {
            live = false;
            for (i, &u) in members.iter().enumerate() {
                let row = graph.row(u as usize);
                while pos[i] < row.len() {
                    let v = row[pos[i]];
                    pos[i] += 1;
                    let q = page_of[v as usize];
                    if q == NO_PAGE || q as usize == p || taken[q as usize] == mark {
                        continue;
                    }
                    taken[q as usize] = mark;
                    reached += 1;
                    if list.len() < cap {
                        list.push(q);
                    }
                    live = true;
                    break;
                }
            }
        }
        if reached > list.len() as u64 {
            report.missing_page_edges += reached - list.len() as u64;
            report.truncated_pages += 1;
        }
        list.sort_unstable();
        report.page_edges += list.len() as u64;
        report.max_degree = report.max_degree.max(list.len());
        lists.push(list);
    }
    (lists, report)
}

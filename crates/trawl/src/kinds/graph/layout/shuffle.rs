//! PageShuffle (Starling's block shuffling): assign graph nodes to pages so that a page read
//! for one node brings many of its neighbours, measured by the overlap ratio `OR(G)`
//! (OctopusANN §3.1): `OR(u) = |B(u) ∩ N(u)| / (n_p − 1)`, where `B(u)` are the other records on
//! `u`'s page and `N(u)` its out-neighbours, averaged over all nodes.
//!
//! Two phases, both over the undirected view of the graph (out- and in-neighbours), so memory is
//! about twice the graph (the out-lists and their transpose) plus a few `u32` per node:
//!
//! 1. **Neighbour packing**: nodes in id order; each node not yet placed opens a page and the
//!    page is filled breadth-first from it with unplaced neighbours, then, if the
//!    neighbourhood runs out, with the next unplaced nodes in id order. Every page but the last
//!    is full, so the file has exactly `⌈n / n_p⌉` pages, as in identity order.
//! 2. **Refinement rounds**: every node, in page order, moves to the page holding most of its
//!    neighbours when that page beats its own — into a free slot, or by swapping with the
//!    member of that page for which the exchange gains most — if the exchange raises the
//!    number of neighbour pairs that share a page. A round is kept only if it raises `OR(G)`;
//!    the rounds stop at the first that does not.
//!
//! A restreaming LDG round (every node placed again from scratch on the page with most
//! neighbours weighted by the room left, `count × (1 − load / n_p)`) was tried first: with
//! every page full it must push the last nodes of a round onto whatever page has room, and on
//! GloVe-400K (8 records per page) one round lowered `OR(G)` from 0.264 after packing to 0.242.
//! Swaps keep every page full and only make moves that gain.

/// A graph in compressed rows: the neighbours of `u` are `targets[offsets[u]..offsets[u+1]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Csr {
    /// Row starts, `n + 1` entries.
    pub offsets: Vec<u64>,
    /// Neighbour ids, `< n`.
    pub targets: Vec<u32>,
}

impl Csr {
    /// Rows from adjacency lists.
    pub fn from_lists(lists: &[Vec<u32>]) -> Self {
        let mut offsets = Vec::with_capacity(lists.len() + 1);
        offsets.push(0);
        let mut targets = Vec::new();
        for l in lists {
            targets.extend_from_slice(l);
            offsets.push(targets.len() as u64);
        }
        Self { offsets, targets }
    }

    /// Nodes.
    pub fn n(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Out-neighbours of `u`.
    #[inline]
    pub fn row(&self, u: usize) -> &[u32] {
        &self.targets[self.offsets[u] as usize..self.offsets[u + 1] as usize]
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.offsets.capacity() * 8 + self.targets.capacity() * 4
    }

    /// The transpose (in-neighbours as rows).
    pub fn transpose(&self) -> Self {
        let n = self.n();
        let mut counts = vec![0u64; n + 1];
        for &v in &self.targets {
            counts[v as usize + 1] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut targets = vec![0u32; self.targets.len()];
        for u in 0..n {
            for &v in self.row(u) {
                let at = &mut fill[v as usize];
                targets[*at as usize] = u as u32;
                *at += 1;
            }
        }
        Self {
            offsets: counts,
            targets,
        }
    }
}

/// `OR(G)` of the placement `page_of` (page of each node) with `per_page` records per page
/// (0 when `per_page < 2`: a page then holds no other record).
pub fn overlap_ratio(graph: &Csr, page_of: &[u32], per_page: usize) -> f64 {
    let n = graph.n();
    if n == 0 || per_page < 2 {
        return 0.0;
    }
    let mut sum = 0.0;
    for u in 0..n {
        let p = page_of[u];
        let same = graph
            .row(u)
            .iter()
            .filter(|&&v| v as usize != u && page_of[v as usize] == p)
            .count();
        sum += same as f64 / (per_page - 1) as f64;
    }
    sum / n as f64
}

/// Pages of the identity placement (node `i` on page `i / per_page`).
pub fn identity_pages(n: usize, per_page: usize) -> Vec<u32> {
    (0..n).map(|i| (i / per_page.max(1)) as u32).collect()
}

/// What [`shuffle`] did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ShuffleReport {
    /// `OR(G)` in identity order.
    pub or_identity: f64,
    /// `OR(G)` after neighbour packing.
    pub or_packed: f64,
    /// `OR(G)` after each refinement round (kept or not).
    pub or_rounds: Vec<f64>,
    /// `OR(G)` of the placement returned.
    pub or_final: f64,
    /// Refinement rounds kept (each raised `OR(G)`).
    pub rounds_kept: usize,
}

/// Places the nodes of `graph` on `⌈n / per_page⌉` pages of `per_page` records, raising the
/// overlap ratio; returns the page of every node and the report. Up to `rounds` refinement rounds
/// follow the neighbour packing (0 = packing only). `tick` is called once per node per phase
/// (for progress).
pub fn shuffle(
    graph: &Csr,
    per_page: usize,
    rounds: usize,
    mut tick: impl FnMut(),
) -> (Vec<u32>, ShuffleReport) {
    let n = graph.n();
    let mut report = ShuffleReport {
        or_identity: overlap_ratio(graph, &identity_pages(n, per_page), per_page),
        ..ShuffleReport::default()
    };
    if n == 0 || per_page < 2 {
        report.or_packed = report.or_identity;
        report.or_final = report.or_identity;
        return (identity_pages(n, per_page), report);
    }
    let rev = graph.transpose();
    let pages = n.div_ceil(per_page);
    let mut page_of = pack(graph, &rev, per_page, &mut tick);
    report.or_packed = overlap_ratio(graph, &page_of, per_page);
    let mut best = report.or_packed;
    for _ in 0..rounds {
        let next = refine(graph, &rev, &page_of, pages, per_page, &mut tick);
        let or = overlap_ratio(graph, &next, per_page);
        report.or_rounds.push(or);
        if or > best {
            let gained = or - best;
            best = or;
            page_of = next;
            report.rounds_kept += 1;
            if gained < MIN_ROUND_GAIN {
                break;
            }
        } else {
            break;
        }
    }
    report.or_final = best;
    (page_of, report)
}

const UNPLACED: u32 = u32::MAX;

/// A refinement round that raises `OR(G)` by less than this ends the rounds (on GloVe-400K the
/// rounds gained 0.089, 0.021, 0.007, 0.002, 0.0009, 0.0003, … ).
const MIN_ROUND_GAIN: f64 = 5e-4;

/// Phase 1: breadth-first neighbour packing.
fn pack(graph: &Csr, rev: &Csr, per_page: usize, tick: &mut impl FnMut()) -> Vec<u32> {
    let n = graph.n();
    let mut page_of = vec![UNPLACED; n];
    let mut page = 0u32;
    let mut members: Vec<u32> = Vec::with_capacity(per_page);
    let mut cursor = 0usize;
    while cursor < n {
        if page_of[cursor] != UNPLACED {
            cursor += 1;
            continue;
        }
        members.clear();
        members.push(cursor as u32);
        page_of[cursor] = page;
        tick();
        let mut head = 0;
        // Breadth-first over the page's members' neighbourhoods.
        while members.len() < per_page && head < members.len() {
            let u = members[head] as usize;
            head += 1;
            for &v in graph.row(u).iter().chain(rev.row(u)) {
                if members.len() == per_page {
                    break;
                }
                if page_of[v as usize] == UNPLACED {
                    page_of[v as usize] = page;
                    members.push(v);
                    tick();
                }
            }
        }
        // The neighbourhood ran out: fill with the next unplaced nodes.
        let mut k = cursor + 1;
        while members.len() < per_page && k < n {
            if page_of[k] == UNPLACED {
                page_of[k] = page;
                members.push(k as u32);
                tick();
            }
            k += 1;
        }
        page += 1;
    }
    page_of
}

/// Phase 2: one refinement round from the placement `prev`. Every node, in page order, looks
/// for the page holding most of its neighbours; if that page beats its own, the node moves
/// there — into a free slot, or by swapping with the member of that page whose own neighbours
/// gain most (or lose least) from the exchange — when the exchange raises the number of
/// neighbour pairs sharing a page. Pages never exceed `per_page`, and their number does not
/// change.
fn refine(
    graph: &Csr,
    rev: &Csr,
    prev: &[u32],
    pages: usize,
    per_page: usize,
    tick: &mut impl FnMut(),
) -> Vec<u32> {
    let n = graph.n();
    let mut page_of = prev.to_vec();
    // Members of every page (EMPTY for a free slot).
    let mut members = vec![UNPLACED; pages * per_page];
    let mut fill = vec![0usize; pages];
    for (u, &p) in page_of.iter().enumerate() {
        let p = p as usize;
        members[p * per_page + fill[p]] = u as u32;
        fill[p] += 1;
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&u| prev[u as usize]);
    let mut cand: Vec<(u32, i64)> = Vec::with_capacity(128);
    // Neighbours of `x` on page `p`.
    let on_page = |page_of: &[u32], x: u32, p: u32| -> i64 {
        graph
            .row(x as usize)
            .iter()
            .chain(rev.row(x as usize))
            .filter(|&&y| y != x && page_of[y as usize] == p)
            .count() as i64
    };
    for &u in &order {
        tick();
        let cu = page_of[u as usize];
        cand.clear();
        let mut own = 0i64;
        for &v in graph.row(u as usize).iter().chain(rev.row(u as usize)) {
            if v == u {
                continue;
            }
            let p = page_of[v as usize];
            if p == cu {
                own += 1;
                continue;
            }
            match cand.iter_mut().find(|c| c.0 == p) {
                Some(c) => c.1 += 1,
                None => cand.push((p, 1)),
            }
        }
        let Some(&(target, there)) = cand.iter().max_by_key(|c| (c.1, std::cmp::Reverse(c.0)))
        else {
            continue;
        };
        if there <= own {
            continue;
        }
        let slots = target as usize * per_page..(target as usize + 1) * per_page;
        let from = (cu as usize * per_page..(cu as usize + 1) * per_page)
            .find(|&k| members[k] == u)
            .expect("u is on its page");
        // A free slot on the target page: move.
        if let Some(k) = slots.clone().find(|&k| members[k] == UNPLACED) {
            members[from] = UNPLACED;
            members[k] = u;
            page_of[u as usize] = target;
            continue;
        }
        // Otherwise the best swap partner.
        let mut best: Option<(i64, usize)> = None;
        for k in slots {
            let v = members[k];
            let adjacent = graph.row(u as usize).contains(&v) as i64
                + graph.row(v as usize).contains(&u) as i64;
            let gain_v = on_page(&page_of, v, cu) - on_page(&page_of, v, target);
            // u's pairs on the target include v, which leaves; v's on u's page include u.
            let gain = (there - own) + gain_v - 2 * adjacent;
            if gain > 0 && best.is_none_or(|(g, _)| gain > g) {
                best = Some((gain, k));
            }
        }
        if let Some((_, k)) = best {
            let v = members[k];
            members[from] = v;
            members[k] = u;
            page_of[u as usize] = target;
            page_of[v as usize] = cu;
        }
    }
    page_of
}

/// The order table of a placement: the node in each of the `pages × per_page` slots, pages in
/// order, nodes of a page by id, [`crate::kinds::graph::layout::packed::EMPTY_SLOT`] for the rest.
pub fn order_table(page_of: &[u32], per_page: usize) -> Vec<u32> {
    let pages = page_of.len().div_ceil(per_page.max(1));
    let mut fill = vec![0usize; pages];
    let mut order = vec![crate::kinds::graph::layout::packed::EMPTY_SLOT; pages * per_page];
    for (u, &p) in page_of.iter().enumerate() {
        let p = p as usize;
        order[p * per_page + fill[p]] = u as u32;
        fill[p] += 1;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two 4-cliques joined by one edge, ids interleaved so identity order splits them.
    fn two_cliques() -> Csr {
        let a = [0u32, 2, 4, 6];
        let b = [1u32, 3, 5, 7];
        let mut lists = vec![Vec::new(); 8];
        for set in [a, b] {
            for &u in &set {
                lists[u as usize] = set.iter().copied().filter(|&v| v != u).collect();
            }
        }
        lists[0].push(1);
        Csr::from_lists(&lists)
    }

    #[test]
    fn overlap_ratio_of_a_hand_built_graph() {
        let g = two_cliques();
        // Identity, 4 per page: pages {0,1,2,3} and {4,5,6,7}. Node 0's neighbours 2, 4, 6, 1:
        // on its page 2 and 1 → 2/3. Node 1: 3 → 1/3. Node 2: 0 → 1/3; node 3: 1 → 1/3.
        // Page 2 is symmetric without the bridge: 4: 6 → 1/3, 5: 7, 6: 4, 7: 5 → 1/3 each.
        let or = overlap_ratio(&g, &identity_pages(8, 4), 4);
        let want = (2.0 / 3.0 + 7.0 / 3.0) / 8.0;
        assert!((or - want).abs() < 1e-12, "{or} vs {want}");
        // The cliques on their own pages: every node has its 3 clique mates → OR = 1.
        let page_of = [0, 1, 0, 1, 0, 1, 0, 1];
        assert_eq!(overlap_ratio(&g, &page_of, 4), 1.0);
        // One record per page: no other record on a page.
        assert_eq!(overlap_ratio(&g, &identity_pages(8, 1), 1), 0.0);
    }

    #[test]
    fn shuffle_finds_the_cliques_and_keeps_pages_full() {
        let g = two_cliques();
        let (page_of, rep) = shuffle(&g, 4, 3, || {});
        assert!((rep.or_final - 1.0).abs() < 1e-12, "{rep:?}");
        assert!(rep.or_final > rep.or_identity);
        let mut load = [0; 2];
        for &p in &page_of {
            load[p as usize] += 1;
        }
        assert_eq!(load, [4, 4]);
        let order = order_table(&page_of, 4);
        let mut ids: Vec<u32> = order.clone();
        ids.sort_unstable();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn random_graphs_keep_the_page_count_and_never_lose_overlap() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for (n, per, deg) in [
            (1000usize, 8usize, 6usize),
            (997, 5, 10),
            (13, 4, 3),
            (50, 7, 0),
        ] {
            let lists: Vec<Vec<u32>> = (0..n)
                .map(|u| {
                    // Mostly local edges, as a proximity graph has, plus some random ones.
                    (0..deg)
                        .map(|_| {
                            if rng.gen_bool(0.7) {
                                ((u + rng.gen_range(1..20)) % n) as u32
                            } else {
                                rng.gen_range(0..n as u32)
                            }
                        })
                        .filter(|&v| v as usize != u)
                        .collect()
                })
                .collect();
            let g = Csr::from_lists(&lists);
            let (page_of, rep) = shuffle(&g, per, 4, || {});
            let pages = n.div_ceil(per);
            let mut load = vec![0usize; pages];
            for &p in &page_of {
                load[p as usize] += 1;
            }
            assert!(load.iter().all(|&l| l <= per), "n {n}: over-full page");
            assert_eq!(load.iter().sum::<usize>(), n);
            assert!(rep.or_final >= rep.or_packed, "{rep:?}");
            assert!(
                (overlap_ratio(&g, &page_of, per) - rep.or_final).abs() < 1e-12,
                "{rep:?}"
            );
            if deg > 0 {
                assert!(rep.or_final > rep.or_identity, "n {n}: {rep:?}");
            }
        }
    }

    #[test]
    fn transpose_is_the_reverse_graph() {
        let g = Csr::from_lists(&[vec![1, 2], vec![2], vec![0]]);
        let t = g.transpose();
        assert_eq!(t.row(0), &[2]);
        assert_eq!(t.row(1), &[0]);
        assert_eq!(t.row(2), &[0, 1]);
    }
}

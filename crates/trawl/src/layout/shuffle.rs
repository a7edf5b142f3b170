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
//! 2. **Restreaming** (linear deterministic greedy, LDG): rounds in which every node, in the
//!    page order of the last round, is placed again on the page that holds most of its
//!    neighbours (their placement from this round if already placed, else the last), weighted
//!    by the room left, `count × (1 − load / n_p)`; with no neighbour page open, on the least
//!    loaded open page. A round is kept only if it raises `OR(G)`.

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
    /// `OR(G)` after each restreaming round (kept or not).
    pub or_rounds: Vec<f64>,
    /// `OR(G)` of the placement returned.
    pub or_final: f64,
}

/// Places the nodes of `graph` on `⌈n / per_page⌉` pages of `per_page` records, raising the
/// overlap ratio; returns the page of every node and the report. `rounds` restreaming rounds
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
        let next = restream(graph, &rev, &page_of, pages, per_page, &mut tick);
        let or = overlap_ratio(graph, &next, per_page);
        report.or_rounds.push(or);
        if or > best {
            best = or;
            page_of = next;
        } else {
            break;
        }
    }
    report.or_final = best;
    (page_of, report)
}

const UNPLACED: u32 = u32::MAX;

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

/// Phase 2: one restreaming LDG round from the placement `prev`.
fn restream(
    graph: &Csr,
    rev: &Csr,
    prev: &[u32],
    pages: usize,
    per_page: usize,
    tick: &mut impl FnMut(),
) -> Vec<u32> {
    let n = graph.n();
    // Stream in the page order of the last placement.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&u| prev[u as usize]);
    let mut page_of = vec![UNPLACED; n];
    let mut load = vec![0u32; pages];
    // Open pages, least loaded first when no neighbour's page has room (lazy removal).
    let mut open: Vec<u32> = (0..pages as u32).rev().collect();
    let mut cand: Vec<(u32, u32)> = Vec::with_capacity(128);
    let cap = per_page as u32;
    for &u in &order {
        cand.clear();
        for &v in graph.row(u as usize).iter().chain(rev.row(u as usize)) {
            if v == u {
                continue;
            }
            let p = match page_of[v as usize] {
                UNPLACED => prev[v as usize],
                p => p,
            };
            match cand.iter_mut().find(|c| c.0 == p) {
                Some(c) => c.1 += 1,
                None => cand.push((p, 1)),
            }
        }
        let mut best: Option<(f64, u32)> = None;
        for &(p, count) in &cand {
            let l = load[p as usize];
            if l >= cap {
                continue;
            }
            let score = f64::from(count) * (1.0 - f64::from(l) / f64::from(cap));
            if best.is_none_or(|(s, bp)| score > s || (score == s && p < bp)) {
                best = Some((score, p));
            }
        }
        let p = match best {
            Some((_, p)) => p,
            None => loop {
                let p = *open.last().expect("pages × per_page ≥ n");
                if load[p as usize] < cap {
                    break p;
                }
                open.pop();
            },
        };
        page_of[u as usize] = p;
        load[p as usize] += 1;
        tick();
    }
    page_of
}

/// The order table of a placement: the node in each of the `pages × per_page` slots, pages in
/// order, nodes of a page by id, [`crate::layout::packed::EMPTY_SLOT`] for the rest.
pub fn order_table(page_of: &[u32], per_page: usize) -> Vec<u32> {
    let pages = page_of.len().div_ceil(per_page.max(1));
    let mut fill = vec![0usize; pages];
    let mut order = vec![crate::layout::packed::EMPTY_SLOT; pages * per_page];
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

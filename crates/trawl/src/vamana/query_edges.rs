//! Query-aware edges ([`link_query_neighbours`]): the nearest points of each query of a
//! sample linked to one another (RoarGraph, VLDB'24).

use rayon::prelude::*;

use crate::kernels::Element;
use crate::progress::Cancelled;
use crate::progress::Control;
use crate::vamana::adjacency::Graph;
use crate::vamana::prune::{robust_prune, PruneLimits, PruneScratch};
use crate::vamana::queue::Neighbor;
use crate::vamana::store::VectorStore;

/// Query-aware edges: the exact top `k` of each query of a sample (`neighbours`, row-major
/// `nq × k` node ids) are linked to one another, as graphs built for a query distribution do
/// (RoarGraph, VLDB'24): the nearest neighbours of a query that lies away from the data (in
/// a region with no points of its own) are often far apart from each other, in regions the
/// graph does not connect, and a search stays in the first it enters. Each node that gains
/// candidates is pruned again over its list and them (`limits`; at most the graph's row
/// capacity); `reserve` keeps at least that many of its query candidates (the nearest) in the
/// list, replacing its farthest other neighbours. Returns the edges that were not there before.
pub fn link_query_neighbours<T: Element>(
    g: &mut Graph,
    store: &VectorStore<'_, T>,
    neighbours: &[u32],
    k: usize,
    limits: PruneLimits,
    reserve: usize,
    ctl: &Control,
) -> Result<usize, Cancelled> {
    let n = g.n();
    let mut cand: Vec<Vec<u32>> = vec![Vec::new(); n];
    for row in neighbours.chunks(k.max(1)) {
        for &a in row {
            if a as usize >= n {
                continue;
            }
            for &b in row {
                if a != b && (b as usize) < n {
                    cand[a as usize].push(b);
                }
            }
        }
    }
    let limits = PruneLimits {
        degree: limits.degree.min(g.r),
        ..limits
    };
    let nodes: Vec<u32> = (0..n as u32)
        .filter(|&i| !cand[i as usize].is_empty())
        .collect();
    let lists: Vec<(u32, Vec<u32>, usize)> = nodes
        .par_iter()
        .map_init(
            || (PruneScratch::default(), Vec::new(), Vec::new(), Vec::new()),
            |(scratch, pool, ids, dists), &p| {
                let c = &mut cand[p as usize].clone();
                c.sort_unstable();
                c.dedup();
                ids.clear();
                ids.extend_from_slice(g.neighbors(p));
                let old = ids.len();
                ids.extend(c.iter().copied().filter(|j| !g.neighbors(p).contains(j)));
                let probe = store.point(p);
                store.dist_batch(&probe, ids, dists);
                pool.clear();
                pool.extend(
                    ids.iter()
                        .zip(dists.iter())
                        .map(|(&id, &dist)| Neighbor { id, dist }),
                );
                let mut out = Vec::new();
                robust_prune(store, p, pool, limits, scratch, &mut out);
                // Keep at least `reserve` query candidates, the nearest, in place of the
                // farthest other neighbours.
                let want = reserve.min(c.len()).min(limits.degree);
                let have = out.iter().filter(|j| c.binary_search(j).is_ok()).count();
                if have < want {
                    let mut qc: Vec<(f32, u32)> = ids
                        .iter()
                        .zip(dists.iter())
                        .filter(|(j, _)| c.binary_search(j).is_ok() && !out.contains(j))
                        .map(|(&j, &d)| (d, j))
                        .collect();
                    qc.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    for (_, j) in qc.into_iter().take(want - have) {
                        if out.len() < limits.degree {
                            out.push(j);
                        } else if let Some(pos) =
                            out.iter().rposition(|x| c.binary_search(x).is_err())
                        {
                            out[pos] = j;
                        }
                    }
                }
                let added = out.iter().filter(|j| !ids[..old].contains(j)).count();
                (p, out, added)
            },
        )
        .collect();
    ctl.check()?;
    let mut added = 0;
    for (p, out, a) in lists {
        let row = p as usize * g.r;
        g.ids[row..row + out.len()].copy_from_slice(&out);
        g.degrees[p as usize] = out.len() as u32;
        added += a;
    }
    Ok(added)
}

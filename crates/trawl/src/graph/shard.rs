//! Sharded build under a memory budget.
//!
//! When an unsharded build would exceed the budget, the points are clustered with k-means on a
//! sample and each point is assigned to its [`defaults::SHARD_OVERLAP`] (2) nearest centroids.
//! Each shard's vectors are copied into memory alone (the source matrix may be a memory map
//! larger than RAM) and built into a graph; shard graphs are merged one by one into the final
//! `n × R` graph: a point's second list is united with its first and the union is re-pruned
//! with robust prune on exact distances (DiskANN cuts the union at random instead).
//!
//! Peak memory: the final graph (`n × (R + 1) × 4` bytes plus a lock byte per node), the
//! norms, the assignments (`8n` bytes) and one shard build at a time. The source vectors are
//! not counted: they are read from the caller's matrix, whose pages a memory map can evict.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::adjacency::{Graph, SlotGraph};
use super::build::{build_in_memory, medoid, working_bytes};
use super::defaults;
use super::params::{BuildError, VamanaConfig};
use super::prune::{robust_prune, PruneLimits, PruneScratch};
use super::queue::Neighbor;
use super::store::VectorStore;
use crate::data::Matrix;
use crate::kernels::kmeans::{self, KMeans, KMeansParams};
use crate::kernels::{Element, Metric};
use crate::progress::Control;

/// Result of a sharded build: graph, distances computed, shard count, estimated peak bytes.
pub(super) type Sharded = (Graph, u64, usize, u64);

/// Points the shard k-means trains on: a fifth of the data, at least 1 000 (or all), at most
/// [`defaults::SHARD_SAMPLE`].
fn sample_size(n: usize) -> usize {
    (n / 5).clamp(1000.min(n), defaults::SHARD_SAMPLE)
}

/// Chooses the shard count for `budget`; returns it with the estimated peak bytes.
fn plan<T: Element>(
    n: usize,
    dim: usize,
    metric: Metric,
    cfg: &VamanaConfig,
    budget: u64,
) -> Result<(usize, u64), BuildError> {
    let sample_n = sample_size(n);
    let fixed = SlotGraph::bytes_for(n, cfg.r) + 8 * n as u64 + working_bytes(n, metric, cfg)
        - SlotGraph::bytes_for(n, cfg.slots)
        + (sample_n * dim * 4) as u64;
    let per_point =
        (dim * std::mem::size_of::<T>()) as u64 + SlotGraph::bytes_for(1, cfg.slots) + 4 + 8;
    let min_shard = (4 * cfg.r) as u64;
    let needed = fixed + min_shard * per_point;
    if budget < needed {
        return Err(BuildError::BudgetTooSmall {
            budget_bytes: budget,
            needed_bytes: needed,
        });
    }
    let cap = (budget - fixed) / per_point;
    let want = (defaults::SHARD_OVERLAP as f64 * n as f64 * defaults::SHARD_IMBALANCE / cap as f64)
        .ceil() as usize;
    let k = want.max(defaults::SHARD_OVERLAP + 1);
    if k * 4 > sample_n {
        let needed = fixed + (2 * n as u64 * per_point) / (sample_n as u64 / 4).max(1);
        return Err(BuildError::BudgetTooSmall {
            budget_bytes: budget,
            needed_bytes: needed,
        });
    }
    let shard_points = (defaults::SHARD_OVERLAP * n).div_ceil(k) as f64 * defaults::SHARD_IMBALANCE;
    Ok((k, fixed + shard_points as u64 * per_point))
}

/// Clusters a sample and returns each point's two nearest centroids.
fn assign<T: Element>(
    data: &Matrix<T>,
    k: usize,
    seed: u64,
    ctl: &Control,
) -> Result<Vec<[u32; 2]>, BuildError> {
    let (n, dim) = (data.n(), data.dim());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut idx = sample(&mut rng, n, sample_size(n)).into_vec();
    idx.sort_unstable();
    let flat: Vec<f32> = idx
        .iter()
        .flat_map(|&i| data.row(i).iter().map(|x| x.to_f32()))
        .collect();
    let params = KMeansParams {
        k,
        max_iters: 10,
        seed,
        max_sample: flat.len() / dim,
    };
    let km: KMeans = kmeans::train(&flat, dim, &params, ctl)?;
    drop(flat);
    let bar = ctl.bar("shard assign", n as u64);
    let out = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map_init(
            || vec![0f32; dim],
            |buf, i| {
                for (b, x) in buf.iter_mut().zip(data.row(i)) {
                    *b = x.to_f32();
                }
                let near = km.nearest_m(buf, defaults::SHARD_OVERLAP);
                let a = near.first().copied().unwrap_or(0) as u32;
                let b = near.get(1).copied().unwrap_or(a as usize) as u32;
                if i % 4096 == 0 {
                    bar.inc(4096);
                }
                [a, b]
            },
        )
        .collect();
    bar.finish_and_clear();
    ctl.check()?;
    Ok(out)
}

/// Builds `data` in overlapping shards that fit `budget` bytes (see the module docs).
pub(super) fn build_sharded<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    cfg: &VamanaConfig,
    budget: u64,
    ctl: &Control,
) -> Result<Sharded, BuildError> {
    let (n, dim) = (data.n(), data.dim());
    let (k, estimate) = plan::<T>(n, dim, metric, cfg, budget)?;
    let assignment = assign(data, k, cfg.seed, ctl)?;
    let global = VectorStore::from_matrix(data, metric);
    let medoid = medoid(&global, ctl)?;
    let merged = SlotGraph::new(n, cfg.r);
    let mut dists = n as u64;
    let bar = ctl.bar("shards", k as u64);
    for s in 0..k as u32 {
        let members: Vec<u32> = (0..n as u32)
            .filter(|&i| assignment[i as usize].contains(&s))
            .collect();
        if members.is_empty() {
            continue;
        }
        let mut vecs: Vec<T> = Vec::with_capacity(members.len() * dim);
        crate::mem::advise_huge_pages(&mut vecs);
        for &g in &members {
            vecs.extend_from_slice(data.row(g as usize));
        }
        // Shard vectors are a valid matrix: non-empty and a multiple of `dim`.
        let local = VectorStore::new(&vecs, dim, metric).expect("shard shape is valid");
        let mut shard_cfg = *cfg;
        shard_cfg.seed = cfg.seed.wrapping_add(u64::from(s));
        let (g, d) = build_in_memory(&local, &shard_cfg, ctl)?;
        drop(local);
        drop(vecs);
        dists += d;
        dists += merge(&merged, &global, &g, &members, &assignment, s, cfg);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((merged.into_graph(cfg.r, medoid), dists, k, estimate))
}

/// Merges one shard graph (local ids, `members[local] = global`) into `merged`.
fn merge<T: Element>(
    merged: &SlotGraph,
    global: &VectorStore<'_, T>,
    shard: &Graph,
    members: &[u32],
    assignment: &[[u32; 2]],
    s: u32,
    cfg: &VamanaConfig,
) -> u64 {
    let limits = PruneLimits {
        degree: cfg.r,
        alpha: cfg.alpha,
        max_candidates: cfg.max_candidates,
        saturate: cfg.saturate,
    };
    members
        .par_iter()
        .enumerate()
        .with_min_len(256)
        .map_init(
            || {
                (
                    Vec::<u32>::new(),
                    Vec::<Neighbor>::new(),
                    PruneScratch::default(),
                    Vec::<u32>::new(),
                )
            },
            |(list, pool, ps, out), (u, &g)| {
                list.clear();
                list.extend(
                    shard
                        .neighbors(u as u32)
                        .iter()
                        .map(|&v| members[v as usize]),
                );
                let lock = merged.lock(g);
                let first = assignment[g as usize].iter().copied().min() == Some(s);
                if first {
                    merged.set(&lock, list);
                    return 0;
                }
                let mut old = Vec::new();
                super::adjacency::Adjacency::neighbors_into(merged, g, &mut old);
                list.extend_from_slice(&old);
                let probe = global.point(g);
                pool.clear();
                pool.extend(list.iter().map(|&id| Neighbor {
                    id,
                    dist: global.dist(&probe, id),
                }));
                let c = list.len() as u64 + robust_prune(global, g, pool, limits, ps, out);
                merged.set(&lock, out);
                c
            },
        )
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::VamanaParams;

    #[test]
    fn plan_fits_the_budget_or_refuses() {
        let cfg = VamanaParams::default().validate().unwrap();
        let (n, dim) = (1_000_000, 128);
        let single = crate::graph::estimate_bytes::<f32>(n, dim, Metric::L2, &cfg);
        for budget in [single / 2, single * 2 / 3] {
            let (k, est) = plan::<f32>(n, dim, Metric::L2, &cfg, budget).unwrap();
            assert!(
                k >= 3 && est <= budget,
                "k {k}, estimate {est}, budget {budget}"
            );
        }
        let err = plan::<f32>(n, dim, Metric::L2, &cfg, 1 << 20).unwrap_err();
        assert!(matches!(err, BuildError::BudgetTooSmall { .. }));
    }
}

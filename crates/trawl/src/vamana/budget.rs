//! Sharded build under a memory budget.
//!
//! When an unsharded build would exceed the budget, the points are clustered with k-means on a
//! sample and each point is assigned to its [`defaults::SHARD_OVERLAP`] (2) nearest centroids.
//! Each shard's vectors are copied into memory alone (the source matrix may be a memory map
//! larger than RAM) and built into a graph; shard graphs are merged one by one into the final
//! `n × R` graph: a point's second list is united with its first and the union is re-pruned
//! with robust prune on exact distances (DiskANN cuts the union at random instead).
//!
//! The merge's re-prune needs distances between any two points. For float32 data under L2 or
//! cosine it computes them on an 8-bit copy of the vectors (one global offset and scale over
//! every component, after cosine normalisation, so squared L2 in code space is a uniform
//! multiple of the metric's distance and robust prune's α comparisons hold as on exact
//! values, up to rounding); the medoid is taken on that copy too. The source matrix is then
//! only read in sequential passes (the assignment, the 8-bit copy, each shard's copy), and when
//! it is memory-mapped every pass drops the pages behind it from this process
//! ([`Matrix::release_rows`]), so the file is never resident as a whole. For inner product
//! and 8-bit data the re-prune reads the source itself (8-bit data is as small as the copy).
//!
//! Peak memory: the final graph (`n × (R + 1) × 4` bytes plus a lock byte per node), the
//! 8-bit copy (`n × dim` bytes) or the norms, the assignments (`8n` bytes) and one shard build
//! at a time.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::data::Matrix;
use crate::kernels::kmeans::{self, KMeans, KMeansParams};
use crate::kernels::{Element, Metric};
use crate::progress::Control;
use crate::vamana::adjacency::{Graph, SlotGraph};
use crate::vamana::build::{budget_for, build_in_memory, medoid, usable_budget, working_bytes};
use crate::vamana::defaults;
use crate::vamana::params::{BuildError, VamanaConfig};
use crate::vamana::prune::{robust_prune, PruneLimits, PruneScratch};
use crate::vamana::queue::Neighbor;
use crate::vamana::store::VectorStore;

/// Result of a sharded build: graph, distances computed, shard count, estimated peak bytes.
pub(super) type Sharded = (Graph, u64, usize, u64);

/// Points the shard k-means trains on: a fifth of the data, at least 1 000 (or all), at most
/// [`defaults::SHARD_SAMPLE`].
fn sample_size(n: usize) -> usize {
    (n / 5).clamp(1000.min(n), defaults::SHARD_SAMPLE)
}

/// Chooses the shard count for `budget` (planned against its [`usable_budget`]); returns it
/// with the estimated peak bytes.
fn plan<T: Element>(
    n: usize,
    dim: usize,
    metric: Metric,
    cfg: &VamanaConfig,
    budget: u64,
) -> Result<(usize, u64), BuildError> {
    let given = budget;
    let budget = usable_budget(budget);
    let sample_n = sample_size(n);
    let copy = if quantizes::<T>(metric) {
        (n * dim) as u64
    } else {
        0
    };
    let fixed = SlotGraph::bytes_for(n, cfg.r) + 8 * n as u64 + working_bytes(n, metric, cfg)
        - SlotGraph::bytes_for(n, cfg.slots)
        + (sample_n * dim * 4) as u64
        + copy;
    let per_point =
        (dim * std::mem::size_of::<T>()) as u64 + SlotGraph::bytes_for(1, cfg.slots) + 4 + 8;
    let min_shard = (4 * cfg.r) as u64;
    let needed = fixed + min_shard * per_point;
    if budget < needed {
        return Err(BuildError::BudgetTooSmall {
            budget_bytes: given,
            needed_bytes: budget_for(needed),
        });
    }
    let cap = (budget - fixed) / per_point;
    let want = (defaults::SHARD_OVERLAP as f64 * n as f64 * defaults::SHARD_IMBALANCE / cap as f64)
        .ceil() as usize;
    let k = want.max(defaults::SHARD_OVERLAP + 1);
    if k * 4 > sample_n {
        let needed = fixed + (2 * n as u64 * per_point) / (sample_n as u64 / 4).max(1);
        return Err(BuildError::BudgetTooSmall {
            budget_bytes: given,
            needed_bytes: budget_for(needed),
        });
    }
    Ok((k, fixed + shard_capacity(n, k) as u64 * per_point))
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
    let ids: Vec<u64> = idx.iter().map(|&i| i as u64).collect();
    let flat: Vec<f32> = data.gather_rows(&ids).iter().map(|x| x.to_f32()).collect();
    drop(ids);
    let params = KMeansParams {
        k,
        max_iters: 10,
        seed,
        max_sample: flat.len() / dim,
    };
    data.release_rows(0, n);
    let km: KMeans = kmeans::train(&flat, dim, &params, ctl)?;
    drop(flat);
    let bar = ctl.bar("shard assign", n as u64);
    // Each point's RANKED nearest centroids with their distances.
    let mut ranked: Vec<Ranked> = Vec::with_capacity(n);
    for start in (0..n).step_by(PASS_ROWS) {
        let end = (start + PASS_ROWS).min(n);
        ranked.par_extend((start..end).into_par_iter().with_min_len(1024).map_init(
            || vec![0f32; dim],
            |buf, i| {
                for (b, x) in buf.iter_mut().zip(data.row(i)) {
                    *b = x.to_f32();
                }
                ranked_centroids(&km, buf)
            },
        ));
        data.release_rows(start, end);
        bar.inc((end - start) as u64);
        ctl.check()?;
    }
    bar.finish_and_clear();
    // Balanced placement ([`kmeans::assign_balanced`]), no part above `shard_capacity` points:
    // first every point's primary part (the points that lose most by leaving their nearest
    // choose first; with the capacity twice the primaries' mean nearly every point gets its
    // nearest), then its second part among the rest in the same way. A point whose ranked
    // choices are full takes the nearest part with room.
    let cap = shard_capacity(n, k);
    let mut size = vec![0usize; k];
    let mut out = vec![[u32::MAX; 2]; n];
    let mut buf = vec![0f32; dim];
    for copy in 0..defaults::SHARD_OVERLAP.min(k) {
        let picks = kmeans::assign_balanced(
            n,
            cap,
            &mut size,
            |p| {
                let r = &ranked[p];
                r.1[copy + 1].sqrt() - r.1[copy].sqrt()
            },
            |p, c| c.extend_from_slice(&ranked[p].0),
            |p, c| {
                for (b, x) in buf.iter_mut().zip(data.row(p)) {
                    *b = x.to_f32();
                }
                c.extend(km.nearest_m(&buf, k).into_iter().map(|c| c as u32));
            },
            |p, c| !out[p].contains(&c),
            // Capacity × k ≥ 2n: only reachable if the plan changes; stay whole.
            |p| out[p][0].min(ranked[p].0[0]),
        );
        for (o, pick) in out.iter_mut().zip(picks) {
            o[copy] = pick;
        }
        ctl.check()?;
    }
    for a in &mut out {
        if a[1] == u32::MAX {
            a[1] = a[0];
        }
    }
    data.release_rows(0, n);
    Ok(out)
}

/// A point's ranked centroids (`u32::MAX` where fewer) and their squared distances.
type Ranked = ([u32; RANKED], [f32; RANKED]);

/// Ranked centroids kept per point for the balanced placement.
const RANKED: usize = 4;

/// Most points a shard takes: the planned shard size (see [`plan`]).
fn shard_capacity(n: usize, k: usize) -> usize {
    ((defaults::SHARD_OVERLAP * n).div_ceil(k) as f64 * defaults::SHARD_IMBALANCE).ceil() as usize
}

/// The [`RANKED`] nearest centroids of `x` (unused slots `u32::MAX`, distance +∞), nearest
/// first, with their squared L2 distances.
fn ranked_centroids(km: &KMeans, x: &[f32]) -> Ranked {
    let mut best = [(f32::INFINITY, u32::MAX); RANKED];
    for (c, cen) in km.centroids.chunks_exact(km.dim).enumerate() {
        let d = <f32 as Element>::l2_sq(cen, x);
        if d < best[RANKED - 1].0 {
            let mut j = RANKED - 1;
            while j > 0 && best[j - 1].0 > d {
                best[j] = best[j - 1];
                j -= 1;
            }
            best[j] = (d, c as u32);
        }
    }
    (best.map(|b| b.1), best.map(|b| b.0))
}

/// Builds `data` in overlapping shards that fit `budget` bytes (see the module docs).
pub(super) fn build_in_parts<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    cfg: &VamanaConfig,
    budget: u64,
    ctl: &Control,
) -> Result<Sharded, BuildError> {
    let (n, dim) = (data.n(), data.dim());
    let (k, estimate) = plan::<T>(n, dim, metric, cfg, budget)?;
    let assignment = assign(data, k, cfg.seed, ctl)?;
    let (merged, medoid, dists) = match quantized(data, metric, ctl)? {
        Some(codes) => {
            let store = VectorStore::new(&codes, dim, Metric::L2).expect("copy shape is valid");
            shard_loop(data, metric, &store, &assignment, k, cfg, ctl)?
        }
        None => {
            let store = VectorStore::from_matrix(data, metric);
            shard_loop(data, metric, &store, &assignment, k, cfg, ctl)?
        }
    };
    Ok((merged.into_graph(cfg.r, medoid), dists, k, estimate))
}

/// Rows per step of a sequential pass over the source (its mapped pages are dropped after
/// each step).
const PASS_ROWS: usize = crate::data::matrix::RELEASE_ROWS;

/// Whether the merge re-prunes on an 8-bit copy (see the module docs).
fn quantizes<T: Element>(metric: Metric) -> bool {
    T::DTYPE == crate::kernels::DType::F32 && metric != Metric::InnerProduct
}

/// The 8-bit copy of `data` the merge re-prunes on (cosine: of the normalised vectors), or
/// `None` where [`quantizes`] says no. Two sequential passes: the range, then the codes.
fn quantized<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    ctl: &Control,
) -> Result<Option<Vec<u8>>, BuildError> {
    if !quantizes::<T>(metric) {
        return Ok(None);
    }
    let (n, dim) = (data.n(), data.dim());
    let prepare = |x: &[T], buf: &mut [f32]| {
        for (b, v) in buf.iter_mut().zip(x) {
            *b = v.to_f32();
        }
        if metric == Metric::Cosine {
            let norm = <f32 as Element>::norm_sq(buf).sqrt();
            if norm > 0.0 {
                buf.iter_mut().for_each(|v| *v /= norm);
            }
        }
    };
    let bar = ctl.bar("8-bit copy", 2 * n as u64);
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for start in (0..n).step_by(PASS_ROWS) {
        let end = (start + PASS_ROWS).min(n);
        let (l, h) = (start..end)
            .into_par_iter()
            .with_min_len(1024)
            .map_init(
                || vec![0f32; dim],
                |buf, i| {
                    prepare(data.row(i), buf);
                    buf.iter()
                        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                            (l.min(v), h.max(v))
                        })
                },
            )
            .reduce(
                || (f32::INFINITY, f32::NEG_INFINITY),
                |a, b| (a.0.min(b.0), a.1.max(b.1)),
            );
        lo = lo.min(l);
        hi = hi.max(h);
        data.release_rows(start, end);
        bar.inc((end - start) as u64);
        ctl.check()?;
    }
    let scale = if hi > lo { 255.0 / (hi - lo) } else { 1.0 };
    let mut codes: Vec<u8> = crate::mem::zeroed_huge(n * dim);
    for (c, part) in codes.chunks_mut(PASS_ROWS * dim).enumerate() {
        let start = c * PASS_ROWS;
        part.par_chunks_mut(dim)
            .enumerate()
            .with_min_len(1024)
            .for_each_init(
                || vec![0f32; dim],
                |buf, (j, out)| {
                    prepare(data.row(start + j), buf);
                    for (o, &v) in out.iter_mut().zip(buf.iter()) {
                        *o = ((v - lo) * scale).round().clamp(0.0, 255.0) as u8;
                    }
                },
            );
        let end = (start + PASS_ROWS).min(n);
        data.release_rows(start, end);
        bar.inc((end - start) as u64);
        ctl.check()?;
    }
    bar.finish_and_clear();
    Ok(Some(codes))
}

/// Builds every shard and merges it into the final graph, re-pruning on `store` (the source or
/// its 8-bit copy). Returns the merged graph, the medoid (on `store`) and distances computed.
fn shard_loop<T: Element, U: Element>(
    data: &Matrix<T>,
    metric: Metric,
    store: &VectorStore<'_, U>,
    assignment: &[[u32; 2]],
    k: usize,
    cfg: &VamanaConfig,
    ctl: &Control,
) -> Result<(SlotGraph, u32, u64), BuildError> {
    let (n, dim) = (data.n(), data.dim());
    let medoid = medoid(store, ctl)?;
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
        let vecs: Vec<T> = data.gather_rows(&members);
        // Shard vectors are a valid matrix: non-empty and a multiple of `dim`.
        let local = VectorStore::new(&vecs, dim, metric).expect("shard shape is valid");
        let mut shard_cfg = *cfg;
        shard_cfg.seed = cfg.seed.wrapping_add(u64::from(s));
        let (g, d, _) = build_in_memory(&local, &shard_cfg, None, ctl)?;
        drop(local);
        drop(vecs);
        dists += d;
        dists += merge(&merged, store, &g, &members, assignment, s, cfg);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((merged, medoid, dists))
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
                crate::vamana::adjacency::Adjacency::neighbors_into(merged, g, &mut old);
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
    use crate::vamana::VamanaParams;

    #[test]
    fn plan_fits_the_budget_or_refuses() {
        let cfg = VamanaParams::default().validate().unwrap();
        let (n, dim) = (1_000_000, 128);
        let single = crate::vamana::estimate_bytes::<f32>(n, dim, Metric::L2, &cfg);
        // The fixed part (final graph, 8-bit copy, assignment, sample) is about half of an
        // unsharded build here: half the unsharded estimate is refused, a bit more plans.
        let mut planned = 0;
        for budget in [single / 2, single * 2 / 3, single * 3 / 4] {
            match plan::<f32>(n, dim, Metric::L2, &cfg, budget) {
                Ok((k, est)) => {
                    planned += 1;
                    assert!(
                        k >= 3 && est <= budget,
                        "k {k}, estimate {est}, budget {budget}"
                    );
                }
                Err(BuildError::BudgetTooSmall { needed_bytes, .. }) => {
                    assert!(needed_bytes > budget, "{needed_bytes} vs {budget}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(planned >= 2, "only {planned} of 3 budgets planned");
        let err = plan::<f32>(n, dim, Metric::L2, &cfg, 1 << 20).unwrap_err();
        assert!(matches!(err, BuildError::BudgetTooSmall { .. }));
    }
}

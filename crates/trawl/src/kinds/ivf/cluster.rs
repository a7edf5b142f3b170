//! Hierarchical balanced k-means (FusionANNS §4.1, after SPANN): the points are split into at
//! most `branch` parts by k-means followed by a capacity-bounded reassignment, and every part
//! larger than the leaf bound is split again, until every leaf holds at most `max_leaf`
//! points. The leaves, in depth-first order (neighbouring leaves are near each other), are the
//! posting lists' primary members; the order also lays the vector buckets out on disk.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::kernels::kmeans::{self, KMeansParams};
use crate::kernels::Element;
use crate::progress::{Cancelled, Control};

/// Parts a node is split into at most.
pub(crate) const BRANCH: usize = 16;
/// A part may exceed an even share by this factor in the balanced reassignment.
const SLACK: f32 = 1.15;
/// Points a node's k-means trains on at most (the rest are only assigned).
const SAMPLE_PER_PART: usize = 256;

/// Splits the `n` rows of `data` (row-major, `dim` wide, the clustering space) into leaves of
/// at most `max_leaf` points, each about `target` (`target ≤ max_leaf`). Deterministic for a
/// seed whatever the thread count. Calls `tick(points)` as points settle into leaves.
pub(crate) fn balanced_leaves(
    data: &[f32],
    dim: usize,
    target: usize,
    max_leaf: usize,
    seed: u64,
    ctl: &Control,
    tick: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Vec<u32>>, Cancelled> {
    let n = data.len() / dim.max(1);
    let ids: Vec<u32> = (0..n as u32).collect();
    split(
        data,
        dim,
        ids,
        target.max(1),
        max_leaf.max(target.max(1)),
        seed,
        ctl,
        tick,
    )
}

fn split(
    data: &[f32],
    dim: usize,
    ids: Vec<u32>,
    target: usize,
    max_leaf: usize,
    seed: u64,
    ctl: &Control,
    tick: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Vec<u32>>, Cancelled> {
    if ids.len() <= max_leaf {
        tick(ids.len() as u64);
        return Ok(vec![ids]);
    }
    ctl.check()?;
    let k = ids.len().div_ceil(target).clamp(2, BRANCH);
    let parts = partition(data, dim, &ids, k, seed);
    let parts: Vec<Vec<u32>> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    let leaves: Result<Vec<Vec<Vec<u32>>>, Cancelled> = parts
        .into_par_iter()
        .enumerate()
        .map(|(i, p)| {
            let s = seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(i as u64 + 1);
            split(data, dim, p, target, max_leaf, s, ctl, tick)
        })
        .collect();
    Ok(leaves?.into_iter().flatten().collect())
}

/// Splits `ids` into `k` parts of at most `ceil(SLACK · len / k)` points each.
fn partition(data: &[f32], dim: usize, ids: &[u32], k: usize, seed: u64) -> Vec<Vec<u32>> {
    let row = |i: u32| &data[i as usize * dim..(i as usize + 1) * dim];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Train on a sample (the whole node when small).
    let sample_n = (SAMPLE_PER_PART * k).min(ids.len());
    let mut sample = Vec::with_capacity(sample_n * dim);
    if sample_n == ids.len() {
        for &i in ids {
            sample.extend_from_slice(row(i));
        }
    } else {
        for j in rand::seq::index::sample(&mut rng, ids.len(), sample_n) {
            sample.extend_from_slice(row(ids[j]));
        }
    }
    let params = KMeansParams {
        k,
        max_iters: 8,
        seed: rng.gen(),
        max_sample: sample_n,
    };
    let quiet = Control::silent();
    let centroids = match kmeans::train(&sample, dim, &params, &quiet) {
        Ok(km) => km.centroids,
        // Degenerate input (fewer distinct points than parts): even split in id order.
        Err(_) => return even_split(ids, k),
    };
    // Distances of every point to every centroid.
    let d: Vec<f32> = ids
        .par_iter()
        .with_min_len(256)
        .flat_map_iter(|&i| {
            let x = row(i);
            centroids
                .chunks_exact(dim)
                .map(move |c| <f32 as Element>::l2_sq(x, c))
        })
        .collect();
    // Balanced assignment: points with the strongest preference choose first, each takes its
    // nearest part with room.
    let cap = ((SLACK * ids.len() as f32 / k as f32).ceil() as usize).max(1);
    let margin = |p: usize| {
        let r = &d[p * k..(p + 1) * k];
        let (mut a, mut b) = (f32::INFINITY, f32::INFINITY);
        for &v in r {
            if v < a {
                b = a;
                a = v;
            } else if v < b {
                b = v;
            }
        }
        b - a
    };
    let mut sizes = vec![0usize; k];
    let mut prefs: Vec<(f32, u32)> = Vec::with_capacity(k);
    let picks = crate::kernels::kmeans::assign_balanced(
        ids.len(),
        cap,
        &mut sizes,
        margin,
        |p, c| {
            prefs.clear();
            prefs.extend(d[p * k..(p + 1) * k].iter().copied().zip(0..k as u32));
            prefs.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            c.extend(prefs.iter().map(|&(_, c)| c));
        },
        |_, _| {},
        |_, _| true,
        |_| 0,
    );
    let mut parts: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (p, c) in picks.into_iter().enumerate() {
        parts[c as usize].push(ids[p]);
    }
    if parts.iter().filter(|p| !p.is_empty()).count() < 2 {
        return even_split(ids, k);
    }
    for p in &mut parts {
        p.sort_unstable();
    }
    parts
}

fn even_split(ids: &[u32], k: usize) -> Vec<Vec<u32>> {
    let per = ids.len().div_ceil(k);
    ids.chunks(per.max(1)).map(<[u32]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_cover_every_point_once_and_are_bounded() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (n, dim) = (5000, 8);
        let data: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let leaves = balanced_leaves(&data, dim, 10, 13, 7, &Control::silent(), &|_| {}).unwrap();
        let mut all: Vec<u32> = leaves.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..n as u32).collect::<Vec<_>>());
        assert!(leaves.iter().all(|l| !l.is_empty() && l.len() <= 13));
        let mean = n as f64 / leaves.len() as f64;
        assert!((5.0..=13.0).contains(&mean), "mean leaf {mean}");
        // Same seed, same leaves, whatever the pool.
        let again = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| balanced_leaves(&data, dim, 10, 13, 7, &Control::silent(), &|_| {}))
            .unwrap();
        assert_eq!(leaves, again);
    }

    #[test]
    fn identical_points_still_split() {
        let data = vec![1.0f32; 100 * 4];
        let leaves = balanced_leaves(&data, 4, 10, 10, 1, &Control::silent(), &|_| {}).unwrap();
        assert!(leaves.iter().all(|l| l.len() <= 10));
        assert_eq!(leaves.iter().map(Vec::len).sum::<usize>(), 100);
    }
}

//! Balanced k-means partitioning (see the module docs of [`super`]).

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::data::Matrix;
use crate::kernels::kmeans::{self, KMeansParams};
use crate::kernels::{Element, Metric};
use crate::kinds::sharded::{ShardError, ShardParams};
use crate::progress::Control;

/// Most vectors the partition k-means trains on.
pub const PARTITION_SAMPLE: usize = 100_000;
/// Lloyd iterations of the partition k-means.
const PARTITION_ITERS: usize = 15;
/// Ranked centroids kept per vector for placement (a vector whose first choices are all full
/// falls back to a scan of every centroid).
const RANKED: usize = 4;

/// Where every vector goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// `S × dim` centroids, row-major (normalised space for cosine).
    pub centroids: Vec<f32>,
    /// Dimension.
    pub dim: usize,
    /// Per shard, the global ids of its vectors in increasing order (a replicated vector is in
    /// two lists).
    pub members: Vec<Vec<u32>>,
    /// Vectors placed in their nearest partition (the rest overflowed to a later choice).
    pub in_nearest: usize,
    /// Extra copies made by boundary replication.
    pub replicas: usize,
}

impl Partition {
    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.members.len()
    }
}

/// `x` as `f32`, normalised for cosine (a zero vector stays zero); `false` if not finite.
pub(crate) fn prepare<T: Element>(metric: Metric, x: &[T], out: &mut [f32]) -> bool {
    let mut ok = true;
    for (o, v) in out.iter_mut().zip(x) {
        ok &= v.is_finite();
        *o = v.to_f32();
    }
    if metric == Metric::Cosine && ok {
        let n = <f32 as Element>::norm_sq(out).sqrt();
        if n > 0.0 {
            out.iter_mut().for_each(|v| *v /= n);
        }
    }
    ok
}

/// The `m` nearest centroids of `x` by squared L2, nearest first, with their distances.
pub(crate) fn nearest_centroids(centroids: &[f32], x: &[f32], m: usize) -> Vec<(u32, f32)> {
    let dim = x.len();
    let mut all: Vec<(u32, f32)> = centroids
        .chunks_exact(dim)
        .enumerate()
        .map(|(c, row)| (c as u32, <f32 as Element>::l2_sq(row, x)))
        .collect();
    let m = m.min(all.len());
    if m < all.len() {
        all.select_nth_unstable_by(m, |a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        all.truncate(m);
    }
    all.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    all
}

/// The partitions' centroids: k-means on a seeded sample of `data` (its mean for one
/// partition), in the clustering space of `metric` ([`prepare`]).
fn train_centroids<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &ShardParams,
    ctl: &Control,
) -> Result<Vec<f32>, ShardError> {
    let (n, dim) = (data.n(), data.dim());
    let s = params.shards;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let take = n.min(PARTITION_SAMPLE).max(s);
    let mut idx = sample(&mut rng, n, take).into_vec();
    idx.sort_unstable();
    let mut flat = vec![0f32; idx.len() * dim];
    for (o, &i) in flat.chunks_exact_mut(dim).zip(&idx) {
        prepare(metric, data.row(i), o);
    }
    Ok(if s == 1 {
        let mut mean = vec![0f64; dim];
        for row in flat.chunks_exact(dim) {
            mean.iter_mut()
                .zip(row)
                .for_each(|(m, &v)| *m += f64::from(v));
        }
        mean.iter().map(|m| (m / idx.len() as f64) as f32).collect()
    } else {
        let kp = KMeansParams {
            k: s,
            max_iters: PARTITION_ITERS,
            seed: params.seed,
            max_sample: usize::MAX,
        };
        kmeans::train(&flat, dim, &kp, ctl)
            .map_err(|e| match e {
                kmeans::KMeansError::Cancelled(c) => ShardError::Cancelled(c),
                other => ShardError::Other(format!("partition k-means: {other}")),
            })?
            .centroids
    })
}

/// Splits `data` into `params.shards` balanced partitions.
pub fn partition<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &ShardParams,
    ctl: &Control,
) -> Result<Partition, ShardError> {
    let (n, dim) = (data.n(), data.dim());
    params.validate(n)?;
    crate::data::validate_finite(data)?;
    let s = params.shards;
    let centroids = train_centroids(data, metric, params, ctl)?;
    // Ranked choices of every vector.
    let bar = ctl.bar("shard assign", n as u64);
    let ranked: Vec<Vec<(u32, f32)>> = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map_init(
            || vec![0f32; dim],
            |buf, i| {
                if i % 4096 == 0 {
                    bar.inc(4096.min((n - i) as u64));
                }
                prepare(metric, data.row(i), buf);
                nearest_centroids(&centroids, buf, RANKED)
            },
        )
        .collect();
    bar.finish_and_clear();
    ctl.check()?;
    // Placement: largest loss from moving first.
    let cap = ((1.0 + params.slack) * n as f64 / s as f64).ceil().max(1.0) as usize;
    let loss = |r: &[(u32, f32)]| -> f32 {
        match r {
            [a, b, ..] => b.1.sqrt() - a.1.sqrt(),
            _ => f32::INFINITY,
        }
    };
    let mut size = vec![0usize; s];
    let mut buf = vec![0f32; dim];
    let primary = kmeans::assign_balanced(
        n,
        cap,
        &mut size,
        |v| loss(&ranked[v]),
        |v, c| c.extend(ranked[v].iter().map(|&(c, _)| c)),
        // Every ranked choice is full: the nearest partition with room.
        |v, c| {
            prepare(metric, data.row(v), &mut buf);
            c.extend(
                nearest_centroids(&centroids, &buf, s)
                    .into_iter()
                    .map(|(c, _)| c),
            );
        },
        |_, _| true,
        |v| ranked[v][0].0,
    );
    let in_nearest = primary
        .iter()
        .zip(&ranked)
        .filter(|(&p, r)| p == r[0].0)
        .count();
    let mut members: Vec<Vec<u32>> = size.iter().map(|&c| Vec::with_capacity(c)).collect();
    let mut replicas = 0;
    for (v, r) in ranked.iter().enumerate() {
        let p = primary[v];
        members[p as usize].push(v as u32);
        if params.epsilon > 0.0 {
            // The nearest centroid other than the primary, if close enough to the nearest.
            if let Some(&(c, d)) = r.iter().find(|(c, _)| *c != p) {
                let d1 = r[0].1.sqrt();
                if f64::from(d.sqrt()) <= (1.0 + params.epsilon) * f64::from(d1) {
                    members[c as usize].push(v as u32);
                    replicas += 1;
                }
            }
        }
    }
    for m in &mut members {
        m.sort_unstable();
        m.dedup();
    }
    Ok(Partition {
        centroids,
        dim,
        members,
        in_nearest,
        replicas,
    })
}

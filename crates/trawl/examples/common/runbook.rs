//! What the streaming runbook (`streaming.rs`) and the recall-stability driver
//! (`recall_stability.rs`) share: the k-means clusters the runbook inserts and deletes whole.

use trawl::data::Matrix;
use trawl::kernels::kmeans::{train, KMeans, KMeansParams};
use trawl::progress::Control;

/// The runbook's clusters of `base`: `k` k-means clusters (seed 7) trained on `pool`, and
/// each cluster's rows in increasing order.
pub fn clusters(
    base: &Matrix<f32>,
    k: usize,
    pool: &rayon::ThreadPool,
    ctl: &Control,
) -> (KMeans, Vec<Vec<usize>>) {
    let km = pool
        .install(|| {
            train(
                base.as_slice(),
                base.dim(),
                &KMeansParams {
                    k,
                    seed: 7,
                    ..KMeansParams::default()
                },
                ctl,
            )
        })
        .expect("k-means");
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (row, &c) in km.assign(base.as_slice()).iter().enumerate() {
        members[c as usize].push(row);
    }
    (km, members)
}

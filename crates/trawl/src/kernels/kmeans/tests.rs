use crate::kernels::kmeans::*;
use proptest::prelude::{prop_assert, prop_assert_eq, proptest, ProptestConfig};
use rand_distr::{Distribution, Normal};

/// `per` points around each of `centres` (row-major), Gaussian noise of std `sigma`.
fn blobs(centres: &[f32], dim: usize, per: usize, sigma: f32, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise = Normal::new(0.0f32, sigma).unwrap();
    let mut out = Vec::new();
    for _ in 0..per {
        for c in centres.chunks_exact(dim) {
            out.extend(c.iter().map(|v| v + noise.sample(&mut rng)));
        }
    }
    out
}

fn random_centres(k: usize, dim: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..k * dim).map(|_| rng.gen_range(-scale..scale)).collect()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "trains on thousands of points: safe code, too slow under Miri"
)]
fn recovers_well_separated_blobs() {
    let (k, dim) = (10, 8);
    let centres = random_centres(k, dim, 100.0, 1);
    let data = blobs(&centres, dim, 200, 0.5, 2);
    let params = KMeansParams {
        k,
        max_iters: 20,
        seed: 3,
        max_sample: usize::MAX,
    };
    let km = train(&data, dim, &params, &Control::silent()).unwrap();
    // Every true centre has a learned centroid within the noise radius.
    for c in centres.chunks_exact(dim) {
        let (_, d) = km.nearest(c);
        assert!(d < 0.1, "centre missed by squared distance {d}");
    }
    // And the clustering is a bijection onto the blobs.
    let a = km.assign(&data);
    for (i, ci) in a.iter().enumerate().take(k * 3) {
        assert_eq!(*ci, a[i % k], "point {i} left its blob");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "trains on thousands of points: safe code, too slow under Miri"
)]
fn identical_for_any_thread_count() {
    let dim = 5;
    let data = blobs(&random_centres(40, dim, 3.0, 4), dim, 300, 1.0, 5);
    let params = KMeansParams {
        k: 64,
        max_iters: 8,
        seed: 9,
        max_sample: 10_000,
    };
    let run = |threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| train(&data, dim, &params, &Control::silent()).unwrap())
    };
    let one = run(1);
    let two = run(2);
    assert_eq!(one.centroids, two.centroids);
    let other_seed = train(
        &data,
        dim,
        &KMeansParams {
            seed: 10,
            ..params.clone()
        },
        &Control::silent(),
    )
    .unwrap();
    assert_ne!(one.centroids, other_seed.centroids);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "trains on thousands of points: safe code, too slow under Miri"
)]
fn lloyd_lowers_the_objective() {
    let dim = 6;
    let data = blobs(&random_centres(30, dim, 2.0, 6), dim, 100, 1.0, 7);
    let p = |iters| KMeansParams {
        k: 32,
        max_iters: iters,
        seed: 1,
        max_sample: usize::MAX,
    };
    let init = train(&data, dim, &p(0), &Control::silent()).unwrap();
    let done = train(&data, dim, &p(15), &Control::silent()).unwrap();
    assert!(done.inertia(&data) < init.inertia(&data));
}

#[test]
fn duplicates_and_empty_clusters() {
    // 3 distinct points, k = 5: k-means++ must still pick 5 centres and never panic; every
    // point is at distance 0 from some centroid.
    let dim = 2;
    let mut data = Vec::new();
    for i in 0..30 {
        data.extend_from_slice(&[(i % 3) as f32, 0.0]);
    }
    let km = train(
        &data,
        dim,
        &KMeansParams {
            k: 5,
            max_iters: 5,
            seed: 0,
            max_sample: 100,
        },
        &Control::silent(),
    )
    .unwrap();
    assert_eq!(km.centroids.len(), 10);
    assert!(km.inertia(&data) < 1e-9);
}

#[test]
fn splits_the_largest_cluster_when_one_empties() {
    // Two far clusters; k = 3 forces the third centroid into one of them; after fixing, no
    // centroid is left without points.
    let dim = 1;
    let mut data: Vec<f32> = (0..50).map(|i| i as f32 * 0.01).collect();
    data.extend((0..50).map(|i| 100.0 + i as f32 * 0.01));
    let params = KMeansParams {
        k: 3,
        max_iters: 10,
        seed: 2,
        max_sample: 1000,
    };
    let km = train(&data, dim, &params, &Control::silent()).unwrap();
    let a = km.assign(&data);
    for c in 0..3u32 {
        assert!(a.contains(&c), "cluster {c} is empty");
    }
}

#[test]
fn bad_input_is_an_error() {
    let s = Control::silent();
    let p = KMeansParams {
        k: 4,
        ..Default::default()
    };
    assert!(matches!(
        train(&[1.0; 6], 0, &p, &s),
        Err(KMeansError::InvalidInput(_))
    ));
    assert!(matches!(
        train(&[1.0; 7], 2, &p, &s),
        Err(KMeansError::InvalidInput(_))
    ));
    assert!(matches!(
        train(&[1.0; 6], 2, &p, &s),
        Err(KMeansError::InvalidInput(_))
    ));
    let k0 = KMeansParams {
        k: 0,
        ..Default::default()
    };
    assert!(matches!(
        train(&[1.0; 6], 2, &k0, &s),
        Err(KMeansError::InvalidInput(_))
    ));
    let mut nan = vec![1.0f32; 20];
    nan[7] = f32::NAN;
    assert!(matches!(
        train(&nan, 2, &p, &s),
        Err(KMeansError::InvalidInput(_))
    ));
}

#[test]
fn cancel_stops_training() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ctl = Control::silent().with_cancel_flag(flag);
    let data = random_centres(100, 4, 1.0, 0);
    let p = KMeansParams {
        k: 4,
        ..Default::default()
    };
    assert!(matches!(
        train(&data, 4, &p, &ctl),
        Err(KMeansError::Cancelled(_))
    ));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "trains on thousands of points: safe code, too slow under Miri"
)]
fn sampling_caps_the_training_set() {
    let dim = 3;
    let data = blobs(&random_centres(4, dim, 50.0, 8), dim, 5000, 0.5, 9);
    let params = KMeansParams {
        k: 4,
        max_iters: 10,
        seed: 4,
        max_sample: 500,
    };
    let km = train(&data, dim, &params, &Control::silent()).unwrap();
    assert_eq!(km.k, 4);
    // Even from a 500-point sample, the four blobs are found.
    let per_point = km.inertia(&data) / (data.len() / dim) as f64;
    assert!(per_point < 3.0, "{per_point}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 48 }))]

    #[test]
    fn transposed_nearest_matches_brute_force(
        dim in 1usize..40,
        k in 1usize..600,
        seed in 0u64..1000,
    ) {
        let cents = random_centres(k, dim, 10.0, seed);
        let km = KMeans { centroids: cents.clone(), dim, k };
        let t = TransposedCentroids::new(&km);
        let xs = random_centres(8, dim, 10.0, seed + 1);
        for x in xs.chunks_exact(dim) {
            let (c, d) = t.nearest(x);
            let (c2, d2) = km.nearest(x);
            prop_assert!((d - d2).abs() <= 1e-3 * d2.max(1.0));
            prop_assert!(c == c2 || (l2(x, &cents[c * dim..(c + 1) * dim]) - d2).abs() <= 1e-3 * d2.max(1.0));
            let m = km.nearest_m(x, 5);
            prop_assert_eq!(m.len(), 5.min(k));
            prop_assert_eq!(m[0], c2);
            for w in m.windows(2) {
                let da = l2(x, &cents[w[0] * dim..(w[0] + 1) * dim]);
                let db = l2(x, &cents[w[1] * dim..(w[1] + 1) * dim]);
                prop_assert!(da <= db);
            }
        }
    }

    #[test]
    fn every_cluster_is_used(n in 20usize..300, k in 1usize..20, dim in 1usize..6, seed in 0u64..100) {
        let data = random_centres(n, dim, 5.0, seed);
        let params = KMeansParams { k, max_iters: 6, seed, max_sample: usize::MAX };
        let km = train(&data, dim, &params, &Control::silent()).unwrap();
        prop_assert_eq!(km.centroids.len(), k * dim);
        prop_assert!(km.centroids.iter().all(|v| v.is_finite()));
        let a = km.assign(&data);
        prop_assert!(a.iter().all(|&c| (c as usize) < k));
    }
}

#[test]
fn ties_pick_the_first_centroid() {
    let km = KMeans {
        centroids: vec![1.0; 300 * 2],
        dim: 2,
        k: 300,
    };
    assert_eq!(TransposedCentroids::new(&km).nearest(&[0.0, 0.0]), (0, 2.0));
    let mut cents = vec![5.0f32; 300];
    cents[37] = 1.0;
    cents[290] = 1.0;
    let km = KMeans {
        centroids: cents,
        dim: 1,
        k: 300,
    };
    assert_eq!(TransposedCentroids::new(&km).nearest(&[0.0]).0, 37);
    assert_eq!(km.nearest(&[0.0]).0, 37);
    assert_eq!(km.nearest_m(&[0.0], 2), vec![37, 290]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 6 } else { 32 }))]

    /// The dispatched (SIMD) block search gives the same bits as the portable one.
    #[test]
    fn dispatched_block_matches_portable(dim in 1usize..20, k in 1usize..300, seed in 0u64..1000) {
        let cents = random_centres(k, dim, 3.0, seed);
        let t = TransposedCentroids::new(&KMeans { centroids: cents, dim, k });
        let x = random_centres(1, dim, 3.0, seed + 7);
        let len = k.min(BLOCK);
        let fast = block_nearest(&t.t, k, 0, len, &x);
        let slow = block_generic(&t.t, k, 0, len, &x);
        prop_assert_eq!(fast.0, slow.0);
        prop_assert_eq!(fast.1.to_bits(), slow.1.to_bits());
    }
}

#[test]
fn balanced_assignment_places_the_biggest_losers_first_within_capacity() {
    // Four points, two parts of capacity 2; every point prefers part 0. The two that lose
    // most by leaving it (points 2 and 3) get it, the others go to part 1.
    let loss = [0.1f32, 0.2, 0.9, 0.5];
    let mut sizes = vec![0usize; 2];
    let picks = crate::kernels::kmeans::assign_balanced(
        4,
        2,
        &mut sizes,
        |p| loss[p],
        |_, c| c.extend([0, 1]),
        |_, _| {},
        |_, _| true,
        |_| u32::MAX,
    );
    assert_eq!(picks, vec![1, 1, 0, 0]);
    assert_eq!(sizes, vec![2, 2]);
    // A part the caller refuses (a copy it already holds) is skipped and not counted; when
    // nothing fits, the caller's default is taken (and counted only if allowed).
    let mut sizes = vec![0usize; 2];
    let picks = crate::kernels::kmeans::assign_balanced(
        3,
        1,
        &mut sizes,
        |p| p as f32,
        |_, c| c.push(0),
        |_, c| c.extend([0, 1]),
        |p, c| !(p == 2 && c == 0),
        |_| 0,
    );
    // Point 2 (largest loss) may not take part 0: it takes 1 from the fallback; point 1 then
    // takes 0; point 0 finds both full and gets the default 0, counted.
    assert_eq!(picks, vec![0, 0, 1]);
    assert_eq!(sizes, vec![2, 1]);
}

//! Builds a Vamana graph and reports wall time, peak RSS and in-memory recall@10.
//!
//! ```text
//! cargo run --release -p trawl --example graph_build -- \
//!     [--n 200000] [--dim 128] [--metric l2|cosine|ip] [--r 64] [--l 100] [--alpha 1.2] \
//!     [--threads 2] [--slack 1.3] [--nq 1000] [--input base.f32 --input-dim D] [--visit-order ids|random|blocks:N] [--budget-mib M]
//! ```
//!
//! Without `--input`, data is a seeded anisotropic Gaussian mixture; with it, a raw file of
//! little-endian f32 rows of `--input-dim` elements (queries are then its last `nq` rows, held
//! out of the build).

use std::collections::HashMap;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use trawl::data::{GroundTruth, Matrix};
use trawl::kernels::distance;
use trawl::progress::Control;
use trawl::vamana::{build, recall_at_k, search_batch, VamanaParams, VectorStore};
use trawl::Metric;

fn mixture(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let c = 64;
    let centers: Vec<f32> = (0..c * dim)
        .map(|_| rng.sample::<f32, _>(StandardNormal) * 3.0)
        .collect();
    let scales: Vec<f32> = (0..c * dim).map(|_| rng.gen_range(0.2f32..1.5)).collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let k = rng.gen_range(0..c);
        for j in 0..dim {
            let z: f32 = rng.sample(StandardNormal);
            out.push(centers[k * dim + j] + scales[k * dim + j] * z);
        }
    }
    out
}

fn ground_truth(
    base: &Matrix<f32>,
    queries: &Matrix<f32>,
    metric: Metric,
    k: usize,
) -> GroundTruth {
    let ids: Vec<u32> = (0..queries.n())
        .into_par_iter()
        .flat_map_iter(|q| {
            let mut all: Vec<(f32, u32)> = base
                .rows()
                .enumerate()
                .map(|(i, b)| (distance(metric, queries.row(q), b), i as u32))
                .collect();
            all.select_nth_unstable_by(k, |a, b| a.0.total_cmp(&b.0));
            all.truncate(k);
            all.sort_by(|a, b| a.0.total_cmp(&b.0));
            all.into_iter().map(|x| x.1)
        })
        .collect();
    GroundTruth {
        nq: queries.n(),
        k,
        dists: vec![0.0; ids.len()],
        ids,
    }
}

fn rusage() -> libc::rusage {
    // SAFETY: rusage is a plain C struct of integers, for which all-zero bytes are valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct we pass, which we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru
}

fn cpu_secs() -> f64 {
    let ru = rusage();
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn peak_rss_mib() -> f64 {
    let ru = rusage();
    ru.ru_maxrss as f64 / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opt: HashMap<String, String> = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        let key = args[i].trim_start_matches("--").to_string();
        opt.insert(key, args.get(i + 1).cloned().unwrap_or_default());
        i += 2;
    }
    let get = |k: &str, d: &str| opt.get(k).cloned().unwrap_or_else(|| d.to_string());
    let num = |k: &str, d: &str| get(k, d).parse::<f64>().expect("numeric option");
    let nq = num("nq", "1000") as usize;
    let metric: Metric = get("metric", "l2").parse().expect("metric");
    let threads = num("threads", "2") as usize;
    let (mut flat, dim) = match opt.get("input") {
        Some(path) => {
            let dim = num("input-dim", "128") as usize;
            let bytes = std::fs::read(path).expect("read input");
            (
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
                dim,
            )
        }
        None => {
            let (n, dim) = (num("n", "200000") as usize, num("dim", "128") as usize);
            (mixture(n + nq, dim, 42), dim)
        }
    };
    let qflat = flat.split_off(flat.len() - nq * dim);
    let base = Matrix::from_vec(flat, dim).expect("shape");
    let queries = Matrix::from_vec(qflat, dim).expect("shape");
    let params = VamanaParams {
        r: num("r", "64") as usize,
        l: num("l", "100") as usize,
        alpha: num("alpha", "1.2") as f32,
        order: opt
            .get("visit-order")
            .map_or(VamanaParams::default().order, |o| {
                o.parse().expect("visit order")
            }),
        slack: num("slack", "1.3") as f32,
        memory_budget_bytes: opt
            .get("budget-mib")
            .map(|m| m.parse::<u64>().expect("budget") << 20),
        ..VamanaParams::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let rss_before = peak_rss_mib();
    let cpu0 = cpu_secs();
    let t0 = Instant::now();
    let (graph, stats) = pool
        .install(|| build(&base, metric, &params, &Control::with_progress()))
        .expect("build");
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu0;
    println!(
        "n={} dim={dim} metric={metric} R={} L={} alpha={} threads={threads}: build {wall:.2} s ({cpu:.2} s CPU), \
         peak RSS {:.0} MiB (before build {rss_before:.0} MiB)",
        base.n(),
        params.r,
        params.l,
        params.alpha,
        peak_rss_mib()
    );
    println!(
        "  distances {:.3e}, avg degree {:.1}, max degree {}, isolated {}, shards {}",
        stats.distance_computations as f64,
        stats.avg_degree,
        stats.max_degree,
        stats.isolated,
        stats.shards
    );
    let truth = ground_truth(&base, &queries, metric, 10);
    let store = VectorStore::from_matrix(&base, metric);
    for l in [10, 20, 50, 100] {
        let t = Instant::now();
        let (ids, st) = pool
            .install(|| search_batch(&graph, &store, &queries, 10, l))
            .expect("search");
        let secs = t.elapsed().as_secs_f64();
        let recall = recall_at_k(&ids, 10, &truth).expect("shapes");
        println!(
            "  L={l:>3}: recall@10 {recall:.4}, {:.0} QPS, {:.1} hops, {:.0} dists/query",
            nq as f64 / secs,
            st.hops as f64 / nq as f64,
            st.distance_computations as f64 / nq as f64
        );
    }
}

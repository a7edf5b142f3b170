//! Throughput of exact ground truth (`trawl::exact::knn`).
//!
//! ```text
//! cargo run --release -p trawl --example gt_bench -- [--base FILE --query FILE --dim D]
//!     [--n 200000 --nq 2000 --dim 128 --seed 1] [--k 100] [--threads 2] [--metric l2]
//!     [--reps 3] [--ids-out FILE]
//! ```
//!
//! With `--base`/`--query` it reads raw little-endian f32 files (`n·dim` floats, no header);
//! otherwise it generates a seeded Gaussian mixture. It prints the median time of `--reps` runs,
//! queries per second and distance evaluations (`nq·n`) per second, and optionally writes the
//! result ids (raw little-endian u32, `nq·k`) for checking.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use trawl::data::Matrix;
use trawl::exact::{knn_with_stats, ExactParams};
use trawl::progress::Control;
use trawl::Metric;

struct Args {
    base: Option<String>,
    query: Option<String>,
    n: usize,
    nq: usize,
    dim: usize,
    seed: u64,
    k: usize,
    threads: usize,
    metric: Metric,
    reps: usize,
    ids_out: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        base: None,
        query: None,
        n: 200_000,
        nq: 2_000,
        dim: 128,
        seed: 1,
        k: 100,
        threads: 2,
        metric: Metric::L2,
        reps: 3,
        ids_out: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [flag, v] = pair else {
            return Err(format!("flag {pair:?} lacks a value"));
        };
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--base" => a.base = Some(v.clone()),
            "--query" => a.query = Some(v.clone()),
            "--n" => a.n = num(v)?,
            "--nq" => a.nq = num(v)?,
            "--dim" => a.dim = num(v)?,
            "--seed" => a.seed = num(v)? as u64,
            "--k" => a.k = num(v)?,
            "--threads" => a.threads = num(v)?,
            "--reps" => a.reps = num(v)?.max(1),
            "--metric" => a.metric = v.parse()?,
            "--ids-out" => a.ids_out = Some(v.clone()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

fn read_f32(path: &str, dim: usize) -> Result<Matrix<f32>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() % (4 * dim) != 0 {
        return Err(format!(
            "{path}: size {} is not a multiple of 4·{dim}",
            bytes.len()
        ));
    }
    let data: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Matrix::from_vec(data, dim).ok_or_else(|| format!("{path}: bad dimension"))
}

/// A Gaussian mixture: 64 centres of spread 1, points at spread 0.3 around them.
fn mixture(rng: &mut ChaCha8Rng, centres: &[f32], n: usize, dim: usize) -> Matrix<f32> {
    let nc = centres.len() / dim;
    let mut data = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = rng.gen_range(0..nc);
        for t in 0..dim {
            let z: f32 = rng.sample(StandardNormal);
            data.push(centres[c * dim + t] + 0.3 * z);
        }
    }
    Matrix::from_vec(data, dim).expect("dim > 0")
}

fn main() -> Result<(), String> {
    let a = parse()?;
    let (base, queries) = match (&a.base, &a.query) {
        (Some(b), Some(q)) => (read_f32(b, a.dim)?, read_f32(q, a.dim)?),
        _ => {
            let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
            let centres: Vec<f32> = (0..64 * a.dim)
                .map(|_| rng.sample(StandardNormal))
                .collect();
            let b = mixture(&mut rng, &centres, a.n, a.dim);
            (b, mixture(&mut rng, &centres, a.nq, a.dim))
        }
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads)
        .build()
        .map_err(|e| e.to_string())?;
    let params = ExactParams::default();
    let ctl = Control::silent();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..a.reps {
        let t = Instant::now();
        let r = pool.install(|| knn_with_stats(&base, &queries, a.k, a.metric, &params, &ctl));
        times.push(t.elapsed().as_secs_f64());
        last = Some(r.map_err(|e| e.to_string())?);
    }
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2];
    let (gt, stats) = last.expect("reps ≥ 1");
    let (n, nq) = (base.n(), queries.n());
    println!(
        "trawl knn: n={n} nq={nq} dim={} k={} metric={} threads={} median_s={med:.4} \
         qps={:.1} dist_evals_per_s={:.4e} exact_reruns={} base_passes={}",
        base.dim(),
        a.k,
        a.metric,
        a.threads,
        nq as f64 / med,
        (nq as f64 * n as f64) / med,
        stats.exact_reruns,
        stats.base_passes
    );
    if let Some(path) = &a.ids_out {
        let bytes: Vec<u8> = gt.ids.iter().flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(path, bytes).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

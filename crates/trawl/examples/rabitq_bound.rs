//! Measures RaBitQ's estimator and error bound on real vectors: bias, RMS error and how often
//! the bound `|est − d| ≤ ε₀·σ` holds, against its stated confidence `2Φ(ε₀) − 1`.
//!
//! ```text
//! cargo run --release -p trawl --example rabitq_bound -- BASE.fbin QUERIES.fbin
//!     [--metric cosine] [--bits 1,2,4] [--queries 500] [--sample 20000] [--seed 0]
//! ```
//!
//! The quantiser is trained on the whole base; `--sample` base vectors (seeded) are encoded and
//! every query of the first `--queries` is paired with all of them. Reported per bits: over all
//! pairs and over each query's 10 nearest in the sample (the pairs a re-rank decides on), the
//! mean signed error relative to the mean distance (bias), the RMS error relative to it, and the
//! bound's coverage at ε₀ = 1.9 and 3.

use std::error::Error;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use trawl::kernels::{distance, Metric};
use trawl::progress::Control;
use trawl::quant::rabitq::{confidence, RaBitQuantizer, RbqParams};

struct Stats {
    n: usize,
    err: f64,
    sq: f64,
    dist: f64,
    hit19: usize,
    hit3: usize,
}

impl Stats {
    fn new() -> Self {
        Self {
            n: 0,
            err: 0.0,
            sq: 0.0,
            dist: 0.0,
            hit19: 0,
            hit3: 0,
        }
    }
    fn add(&mut self, est: f32, sigma: f32, d: f32) {
        let e = f64::from(est - d);
        self.n += 1;
        self.err += e;
        self.sq += e * e;
        self.dist += f64::from(d.abs());
        self.hit19 += usize::from(e.abs() <= 1.9 * f64::from(sigma));
        self.hit3 += usize::from(e.abs() <= 3.0 * f64::from(sigma));
    }
    fn merge(mut self, o: Self) -> Self {
        self.n += o.n;
        self.err += o.err;
        self.sq += o.sq;
        self.dist += o.dist;
        self.hit19 += o.hit19;
        self.hit3 += o.hit3;
        self
    }
    fn line(&self, what: &str) -> String {
        let n = self.n.max(1) as f64;
        let mean_d = self.dist / n;
        format!(
            "{what}: {} pairs, bias {:+.4}% of the mean distance, RMS error {:.3}%, bound held \
             {:.2}% at ε₀ 1.9 (stated {:.2}%), {:.2}% at 3 (stated {:.2}%)",
            self.n,
            100.0 * self.err / n / mean_d,
            100.0 * (self.sq / n).sqrt() / mean_d,
            100.0 * self.hit19 as f64 / n,
            100.0 * confidence(1.9),
            100.0 * self.hit3 as f64 / n,
            100.0 * confidence(3.0),
        )
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut metric, mut bits, mut nq, mut sample, mut seed) =
        (Metric::Cosine, vec![1u8, 2, 4], 500usize, 20_000usize, 0u64);
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--metric" => metric = v.parse().map_err(|e: String| e)?,
            "--bits" => bits = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--queries" => nq = v.parse()?,
            "--sample" => sample = v.parse()?,
            "--seed" => seed = v.parse()?,
            f => {
                files.push(f.to_string());
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let [base, queries] = files.as_slice() else {
        return Err("usage: rabitq_bound BASE.fbin QUERIES.fbin [options]".into());
    };
    let base = trawl::data::read_matrix::<f32>(base.as_ref())?;
    let queries = trawl::data::read_matrix::<f32>(queries.as_ref())?;
    let nq = nq.min(queries.n());
    let mut ids: Vec<usize> = (0..base.n()).collect();
    ids.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    ids.truncate(sample.min(base.n()));
    println!(
        "{} base × {} dims ({metric:?}), {nq} queries × {} sampled base vectors",
        base.n(),
        base.dim(),
        ids.len()
    );
    for &b in &bits {
        let params = RbqParams {
            bits: b,
            seed,
            ..RbqParams::default()
        };
        let rq = RaBitQuantizer::train(&base, metric, &params, &Control::silent())?;
        let mut codes = vec![0u8; ids.len() * rq.code_bytes()];
        for (k, &id) in ids.iter().enumerate() {
            let cb = rq.code_bytes();
            rq.encode_one(base.row(id), &mut codes[k * cb..(k + 1) * cb])?;
        }
        let (all, near) = (0..nq)
            .into_par_iter()
            .map(|qi| {
                let q = rq.query(queries.row(qi)).expect("query");
                let cb = rq.code_bytes();
                let mut pairs: Vec<(f32, f32, f32)> = ids
                    .iter()
                    .enumerate()
                    .map(|(k, &id)| {
                        let (est, sigma) = q.estimate(&codes[k * cb..(k + 1) * cb]);
                        (distance(metric, queries.row(qi), base.row(id)), est, sigma)
                    })
                    .collect();
                let mut all = Stats::new();
                for &(d, est, sigma) in &pairs {
                    all.add(est, sigma, d);
                }
                pairs.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
                let mut near = Stats::new();
                for &(d, est, sigma) in &pairs[..10] {
                    near.add(est, sigma, d);
                }
                (all, near)
            })
            .reduce(
                || (Stats::new(), Stats::new()),
                |a, b| (a.0.merge(b.0), a.1.merge(b.1)),
            );
        println!("B = {b} ({} B per code)", rq.code_bytes());
        println!("  {}", all.line("all pairs"));
        println!("  {}", near.line("10 nearest"));
    }
    Ok(())
}

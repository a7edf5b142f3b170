//! Measures how far PQ (ADC) distances are from exact distances.
//!
//! ```text
//! cargo run --release -p trawl --example pq_error -- DATA [--metric cosine] [--m 16,32,48]
//!     [--queries 200] [--pairs 500] [--center] [--seed 0]
//! ```
//!
//! `DATA` is a float32 `.npy` file of shape `(n, d)` (C or Fortran order) or `synthetic:N:D` (a seeded anisotropic
//! Gaussian mixture). `--queries` rows are held out (seeded) as queries, the rest is the base.
//! For each M it prints: the mean relative error `|d_pq − d| / |d|` over random (query, base)
//! pairs and over each query's true 100 nearest, recall@10 when the true top-100 is re-ranked by
//! PQ distance, the fraction of the true top-10 inside the PQ top-100 of a full scan (10@100),
//! and train / encode / scan times. `--center` subtracts the base mean before PQ (for cosine:
//! of the normalised vectors, quantised as inner product plus a constant) to measure whether
//! centring helps.

use std::error::Error;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;
use trawl::data::Matrix;
use trawl::kernels::{distance, Element, Metric};
use trawl::progress::Control;
use trawl::quant::pq::{PqParams, ProductQuantizer};

struct Args {
    data: String,
    metric: Metric,
    ms: Vec<usize>,
    queries: usize,
    pairs: usize,
    center: bool,
    seed: u64,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        data: String::new(),
        metric: Metric::Cosine,
        ms: vec![16, 32, 48],
        queries: 200,
        pairs: 500,
        center: false,
        seed: 0,
    };
    while let Some(arg) = it.next() {
        let mut val = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--metric" => a.metric = val()?.parse()?,
            "--m" => {
                a.ms = val()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--queries" => a.queries = val()?.parse()?,
            "--pairs" => a.pairs = val()?.parse()?,
            "--seed" => a.seed = val()?.parse()?,
            "--center" => a.center = true,
            _ if a.data.is_empty() => a.data = arg,
            _ => return Err(format!("unexpected argument {arg}").into()),
        }
    }
    if a.data.is_empty() {
        return Err(
            "usage: pq_error DATA [--metric M] [--m 16,32] [--queries N] [--center]".into(),
        );
    }
    Ok(a)
}

/// Reads a little-endian float32 C-order 2-d `.npy` file.
fn read_npy(path: &str) -> Result<Matrix<f32>, Box<dyn Error>> {
    let bytes = std::fs::read(path)?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not an .npy file".into());
    }
    let (hlen, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes(bytes[8..12].try_into()?) as usize, 12)
    };
    let header = std::str::from_utf8(&bytes[start..start + hlen])?;
    if !header.contains("'descr': '<f4'") {
        return Err(format!("need little-endian float32, header {header}").into());
    }
    let fortran = header.contains("'fortran_order': True");
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or("no shape")?;
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let [n, d] = dims[..] else {
        return Err("need a 2-d array".into());
    };
    let body = &bytes[start + hlen..];
    if body.len() != n * d * 4 {
        return Err("file size does not match its shape".into());
    }
    let values: Vec<f32> = body
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    // Column-major files (GloVe's is) are transposed to rows.
    let data = if fortran {
        let mut t = vec![0f32; n * d];
        for (j, col) in values.chunks_exact(n).enumerate() {
            for (i, v) in col.iter().enumerate() {
                t[i * d + j] = *v;
            }
        }
        t
    } else {
        values
    };
    Ok(Matrix::from_vec(data, d).ok_or("bad shape")?)
}

/// A seeded anisotropic Gaussian mixture of `n` × `d` (64 clusters).
fn synthetic(n: usize, d: usize, seed: u64) -> Matrix<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let k = 64;
    let centres: Vec<f32> = (0..k * d).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let scales: Vec<f32> = (0..k * d).map(|_| rng.gen_range(0.05..0.5)).collect();
    let g = Normal::new(0.0f32, 1.0).unwrap();
    let mut data = Vec::with_capacity(n * d);
    for _ in 0..n {
        let c = rng.gen_range(0..k);
        for j in 0..d {
            data.push(centres[c * d + j] + scales[c * d + j] * g.sample(&mut rng));
        }
    }
    Matrix::from_vec(data, d).unwrap()
}

/// Splits off `nq` seeded random rows as queries.
fn split(all: &Matrix<f32>, nq: usize, seed: u64) -> (Matrix<f32>, Matrix<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let picked = rand::seq::index::sample(&mut rng, all.n(), nq).into_vec();
    let mut is_q = vec![false; all.n()];
    picked.iter().for_each(|&i| is_q[i] = true);
    let (mut b, mut q) = (Vec::new(), Vec::new());
    for (i, row) in all.rows().enumerate() {
        if is_q[i] { &mut q } else { &mut b }.extend_from_slice(row);
    }
    let d = all.dim();
    (
        Matrix::from_vec(b, d).unwrap(),
        Matrix::from_vec(q, d).unwrap(),
    )
}

/// Exact top-`k` of each query, nearest first.
fn exact_top(base: &Matrix<f32>, queries: &Matrix<f32>, metric: Metric, k: usize) -> Vec<Vec<u32>> {
    queries
        .rows()
        .collect::<Vec<_>>()
        .par_iter()
        .map(|q| top_k((0..base.n()).map(|i| distance(metric, q, base.row(i))), k))
        .collect()
}

fn top_k(d: impl Iterator<Item = f32>, k: usize) -> Vec<u32> {
    let mut all: Vec<(f32, u32)> = d.enumerate().map(|(i, v)| (v, i as u32)).collect();
    let k = k.min(all.len());
    all.select_nth_unstable_by(k - 1, |a, b| a.0.total_cmp(&b.0));
    all.truncate(k);
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    all.into_iter().map(|(_, i)| i).collect()
}

/// PQ distance function for one query: either the plain table, or centred (see module docs).
struct Pq {
    pq: ProductQuantizer,
    mean: Option<Vec<f32>>,
}

impl Pq {
    fn train(base: &Matrix<f32>, metric: Metric, m: usize, center: bool, seed: u64) -> Self {
        let p = PqParams {
            bytes_per_vector: m,
            seed,
            ..Default::default()
        };
        let ctl = Control::silent();
        if !center {
            let pq = ProductQuantizer::train(base, metric, &p, &ctl).unwrap();
            return Self { pq, mean: None };
        }
        let (shifted, mean) = centred(base, metric);
        let pq_metric = if metric == Metric::L2 {
            Metric::L2
        } else {
            Metric::InnerProduct
        };
        let pq = ProductQuantizer::train(&shifted, pq_metric, &p, &ctl).unwrap();
        Self {
            pq,
            mean: Some(mean),
        }
    }

    fn encode(&self, base: &Matrix<f32>, metric: Metric) -> Vec<u8> {
        let ctl = Control::silent();
        match &self.mean {
            None => self.pq.encode(base, &ctl).unwrap().as_bytes().to_vec(),
            Some(_) => {
                let (shifted, _) = centred(base, metric);
                self.pq.encode(&shifted, &ctl).unwrap().as_bytes().to_vec()
            }
        }
    }

    /// The table and the constant to add to its distances.
    fn table(&self, q: &[f32], metric: Metric) -> (trawl::quant::pq::QueryTable, f32) {
        let Some(mean) = &self.mean else {
            return (self.pq.query_table(q).unwrap(), 0.0);
        };
        match metric {
            Metric::L2 => {
                let qs: Vec<f32> = q.iter().zip(mean).map(|(a, b)| a - b).collect();
                (self.pq.query_table(&qs).unwrap(), 0.0)
            }
            _ => {
                let mut qn = q.to_vec();
                if metric == Metric::Cosine {
                    normalise(&mut qn);
                }
                let c = -<f32 as Element>::dot(&qn, mean);
                let extra = if metric == Metric::Cosine { 1.0 } else { 0.0 };
                (self.pq.query_table(&qn).unwrap(), c + extra)
            }
        }
    }
}

fn normalise(v: &mut [f32]) {
    let n = <f32 as Element>::norm_sq(v).sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// The base (normalised first for cosine) minus its mean, and the mean.
fn centred(base: &Matrix<f32>, metric: Metric) -> (Matrix<f32>, Vec<f32>) {
    let d = base.dim();
    let mut rows = base.as_slice().to_vec();
    if metric == Metric::Cosine {
        rows.chunks_exact_mut(d).for_each(normalise);
    }
    let mut mean = vec![0f64; d];
    for r in rows.chunks_exact(d) {
        mean.iter_mut()
            .zip(r)
            .for_each(|(m, v)| *m += f64::from(*v));
    }
    let mean: Vec<f32> = mean.iter().map(|m| (m / base.n() as f64) as f32).collect();
    for r in rows.chunks_exact_mut(d) {
        r.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
    }
    (Matrix::from_vec(rows, d).unwrap(), mean)
}

fn rel(pq: f32, exact: f32) -> f64 {
    f64::from((pq - exact).abs()) / f64::from(exact.abs().max(1e-12))
}

fn main() -> Result<(), Box<dyn Error>> {
    let a = parse_args()?;
    let all = if let Some(spec) = a.data.strip_prefix("synthetic:") {
        let v: Vec<usize> = spec.split(':').map(str::parse).collect::<Result<_, _>>()?;
        synthetic(v[0], v[1], a.seed)
    } else {
        read_npy(&a.data)?
    };
    let (base, queries) = split(&all, a.queries, a.seed);
    let t = Instant::now();
    let truth = exact_top(&base, &queries, a.metric, 100);
    println!(
        "data {} : base {} x {}, {} queries, metric {}, center {}, threads {}; exact top-100 in {:.1}s",
        a.data, base.n(), base.dim(), queries.n(), a.metric, a.center,
        rayon::current_num_threads(), t.elapsed().as_secs_f64()
    );
    println!("| M | rel. error, random pairs | rel. error, true top-100 | recall@10 (re-rank true top-100) | 10@100 full scan | train s | encode s | scan M codes/s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &m in &a.ms {
        let t = Instant::now();
        let pq = Pq::train(&base, a.metric, m, a.center, a.seed);
        let train_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let codes = pq.encode(&base, a.metric);
        let encode_s = t.elapsed().as_secs_f64();
        let code = |i: usize| &codes[i * m..(i + 1) * m];
        let mut rng = ChaCha8Rng::seed_from_u64(a.seed + 1);
        let (mut e_rand, mut e_top, mut r10, mut r100) = (0f64, 0f64, 0usize, 0usize);
        let mut scan_s = 0f64;
        let mut dists = vec![0f32; base.n()];
        for (qi, q) in queries.rows().enumerate() {
            let (table, extra) = pq.table(q, a.metric);
            for _ in 0..a.pairs {
                let i = rng.gen_range(0..base.n());
                let exact = distance(a.metric, q, base.row(i));
                e_rand += rel(table.distance(code(i)) + extra, exact);
            }
            let top = &truth[qi];
            let mut by_pq: Vec<(f32, u32)> = top
                .iter()
                .map(|&i| {
                    let exact = distance(a.metric, q, base.row(i as usize));
                    let d = table.distance(code(i as usize)) + extra;
                    e_top += rel(d, exact);
                    (d, i)
                })
                .collect();
            by_pq.sort_by(|x, y| x.0.total_cmp(&y.0));
            r10 += by_pq[..10]
                .iter()
                .filter(|(_, i)| top[..10].contains(i))
                .count();
            let t = Instant::now();
            table.distances(&codes, &mut dists);
            scan_s += t.elapsed().as_secs_f64();
            let pq_top = top_k(dists.iter().copied(), 100);
            r100 += top[..10].iter().filter(|i| pq_top.contains(i)).count();
        }
        let nq = queries.n() as f64;
        println!(
            "| {m} | {:.4} | {:.4} | {:.3} | {:.3} | {train_s:.1} | {encode_s:.2} | {:.0} |",
            e_rand / (nq * a.pairs as f64),
            e_top / (nq * 100.0),
            r10 as f64 / (nq * 10.0),
            r100 as f64 / (nq * 10.0),
            nq * base.n() as f64 / scan_s / 1e6,
        );
    }
    Ok(())
}

//! Throughput of the filter stage's accelerators (`trawl::accel`): PQ distances per second for
//! one batch, CPU backend against GPU backend.
//!
//! ```text
//! cargo run --release -p trawl --example accel_bench -- [--n 1000000] [--m 32] [--nq 64]
//!     [--cands 20000] [--top-n 1000] [--reps 5]
//! ```
//!
//! Random codes for `--n` vectors of `--m` bytes, and one batch of `--nq` queries with random
//! tables, each with `--cands` candidate ids drawn uniformly (so a few duplicates). Each
//! backend scores the batch once to warm up, then `--reps` times; the median time gives
//! distances/s (distinct candidates scored) and candidates/s. The GPU is also timed with two
//! batches in flight (the next submitted before the previous is collected). The outputs of the
//! two backends are compared. Without a GPU adapter only the CPU is timed.

use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trawl::accel::{open, AccelKind, FilterJob, FilterOutput, TABLE_ROW};
use trawl::quant::pq::PqCodes;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time_it(
    reps: usize,
    mut f: impl FnMut() -> Result<FilterOutput, Box<dyn std::error::Error>>,
) -> Result<(f64, FilterOutput), Box<dyn std::error::Error>> {
    let out = f()?;
    let mut secs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        secs.push(t.elapsed().as_secs_f64());
    }
    Ok((median(secs), out))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut n, mut m, mut nq, mut cands, mut top_n, mut reps) = (
        1_000_000usize,
        32usize,
        64usize,
        20_000usize,
        1000usize,
        5usize,
    );
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [flag, v] = pair else {
            return Err(format!("flag {pair:?} lacks a value").into());
        };
        let v: usize = v.parse()?;
        match flag.as_str() {
            "--n" => n = v,
            "--m" => m = v,
            "--nq" => nq = v,
            "--cands" => cands = v,
            "--top-n" => top_n = v,
            "--reps" => reps = v.max(1),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let codes: Vec<u8> = (0..n * m).map(|_| rng.gen()).collect();
    let codes = Arc::new(PqCodes::from_vec(codes, m, 256).ok_or("bad codes")?);
    let job = FilterJob {
        m,
        tables: (0..nq * m * TABLE_ROW)
            .map(|_| rng.gen_range(-1.0f32..1.0))
            .collect(),
        offsets: (0..=nq).map(|q| (q * cands) as u32).collect(),
        ids: (0..nq * cands)
            .map(|_| rng.gen_range(0..n as u32))
            .collect(),
        top_n,
    };
    println!("batch: n {n}, m {m}, {nq} queries × {cands} candidates, top_n {top_n}, {reps} reps");

    let cpu = open(AccelKind::Cpu, codes.clone())?;
    let (cpu_s, cpu_out) = time_it(reps, || Ok(cpu.filter(job.clone())?))?;
    let distinct: u64 = cpu_out.unique.iter().map(|&u| u64::from(u)).sum();
    let report = |name: &str, s: f64| {
        println!(
            "{name:<28} {:>9.2} ms/batch  {:>12.0} distances/s  {:>12.0} candidates/s",
            s * 1e3,
            distinct as f64 / s,
            (nq * cands) as f64 / s
        );
    };
    println!("cpu: {}", cpu.info().adapter);
    report("cpu", cpu_s);

    let gpu = match open(AccelKind::Gpu, codes) {
        Ok(g) => g,
        Err(e) => {
            println!("gpu: not timed ({e})");
            return Ok(());
        }
    };
    println!("gpu: {}", gpu.info().adapter);
    let (gpu_s, gpu_out) = time_it(reps, || Ok(gpu.filter(job.clone())?))?;
    report("gpu", gpu_s);
    // Two batches in flight: submit the next, then collect the previous.
    let t = Instant::now();
    let mut pending = gpu.submit(&job)?;
    for _ in 1..reps {
        let next = gpu.submit(&job)?;
        pending.wait()?;
        pending = next;
    }
    pending.wait()?;
    report(
        "gpu, 2 batches in flight",
        t.elapsed().as_secs_f64() / reps as f64,
    );

    let same = gpu_out == cpu_out;
    let bits = gpu_out
        .dists
        .iter()
        .zip(&cpu_out.dists)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!("gpu output == cpu output: {same} (distances bit-identical: {bits})");
    if !same {
        return Err("the backends disagree".into());
    }
    Ok(())
}

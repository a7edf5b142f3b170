//! Distance kernel benchmarks: trawl's dispatched kernels against `simsimd` and a naive loop,
//! side by side in one run.
//!
//! Each iteration scores one query against a batch of rows held in a cache-resident buffer
//! (≈ 0.5 MiB, so it stays in L2) and writes every distance to an output slice, as a search does.
//! Divide the reported time by the batch size (printed in the group name) for time per call.
//!
//! - `trawl`: the public path, `<T as Element>::l2_sq` / `dot` (a `OnceLock` load and an
//!   indirect call per distance).
//! - `trawl_ptr`: the kernel pointer fetched once per batch, as hot loops may do.
//! - `trawl_many`: the one-to-many kernel (`Kernels::l2_f32_many`), one call per batch.
//! - `simsimd`: `simsimd::SpatialSimilarity` (its own dynamic dispatch; f32 kernels accumulate in
//!   f32 like ours and return f64, converted back to f32 here).
//! - `naive`: a plain iterator `sum` (LLVM keeps a float sum in order, so it is not vectorised
//!   beyond what a plain loop gets; integer sums may be auto-vectorised).
//!
//! Each sample is `iters ×` the median single-batch time (see [`robust`]), so time the process
//! spent descheduled on a busy machine does not count.
//!
//! Run: `cargo bench -p trawl --bench distance`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Bencher, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use simsimd::SpatialSimilarity;
use trawl::kernels::dispatch::kernels;
use trawl::Element;

/// Bytes of rows per batch: small enough to stay in L2.
const BATCH_BYTES: usize = 512 * 1024;

struct Batch<T> {
    query: Vec<T>,
    rows: Vec<T>,
    dim: usize,
    out: Vec<f32>,
}

impl<T: Copy> Batch<T> {
    fn new(dim: usize, mut gen: impl FnMut() -> T) -> Self {
        let n = (BATCH_BYTES / (dim * std::mem::size_of::<T>())).min(1024);
        Self {
            query: (0..dim).map(|_| gen()).collect(),
            rows: (0..n * dim).map(|_| gen()).collect(),
            dim,
            out: vec![0.0; n],
        }
    }

    fn len(&self) -> usize {
        self.out.len()
    }

    /// Scores the query against every row with `f`.
    #[inline(always)]
    fn run(&mut self, f: impl Fn(&[T], &[T]) -> f32) {
        let q = black_box(&self.query[..]);
        for (o, row) in self.out.iter_mut().zip(self.rows.chunks_exact(self.dim)) {
            *o = f(q, row);
        }
        black_box(&self.out);
    }
}

/// Times `iters` runs of `body` (one batch each) as `iters ×` the median single-batch time.
///
/// This machine is shared and oversubscribed: a plain wall-clock sample (tens of ms) includes
/// the time this process sat descheduled, which inflates every figure and makes ratios between
/// sequentially measured functions noisy. A batch takes microseconds, so most batches run
/// undisturbed and their median is the undisturbed cost. Every contender is timed this way.
fn robust(bch: &mut Bencher, mut body: impl FnMut()) {
    bch.iter_custom(|iters| {
        let mut times: Vec<Duration> = (0..iters)
            .map(|_| {
                let t = Instant::now();
                body();
                t.elapsed()
            })
            .collect();
        times.sort_unstable();
        times[times.len() / 2] * u32::try_from(iters).unwrap_or(u32::MAX)
    });
}

#[inline(never)]
fn naive_l2_f32(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>()
}

#[inline(never)]
fn naive_dot_f32(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()
}

#[inline(never)]
fn naive_l2_int<T: Copy + Into<i32>>(a: &[T], b: &[T]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = x.into() - y.into();
            d * d
        })
        .sum::<i32>() as f32
}

#[inline(never)]
fn naive_dot_int<T: Copy + Into<i32>>(a: &[T], b: &[T]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| x.into() * y.into())
        .sum::<i32>() as f32
}

fn bench_f32(c: &mut Criterion) {
    eprintln!("trawl kernels: {}", kernels().name);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for dim in [128usize, 960] {
        let mut batch = Batch::new(dim, || rng.gen_range(-1.0f32..1.0));
        let n = batch.len();
        let mut g = c.benchmark_group(format!("f32_l2_d{dim}_x{n}"));
        g.bench_function("trawl", |bch| robust(bch, || batch.run(f32::l2_sq)));
        g.bench_function("trawl_ptr", |bch| {
            robust(bch, || {
                let f = kernels().l2_f32;
                batch.run(f)
            })
        });
        g.bench_function("trawl_many", |bch| {
            robust(bch, || {
                (kernels().l2_f32_many)(black_box(&batch.query), &batch.rows, &mut batch.out);
                black_box(&batch.out);
            })
        });
        g.bench_function("simsimd", |bch| {
            robust(bch, || {
                batch.run(|a, b| f32::l2sq(a, b).unwrap_or(f64::NAN) as f32)
            })
        });
        g.bench_function("naive", |bch| robust(bch, || batch.run(naive_l2_f32)));
        g.finish();

        let mut g = c.benchmark_group(format!("f32_dot_d{dim}_x{n}"));
        g.bench_function("trawl", |bch| {
            robust(bch, || batch.run(<f32 as Element>::dot))
        });
        g.bench_function("trawl_ptr", |bch| {
            robust(bch, || {
                let f = kernels().dot_f32;
                batch.run(f)
            })
        });
        g.bench_function("trawl_many", |bch| {
            robust(bch, || {
                (kernels().dot_f32_many)(black_box(&batch.query), &batch.rows, &mut batch.out);
                black_box(&batch.out);
            })
        });
        g.bench_function("simsimd", |bch| {
            robust(bch, || {
                batch.run(|a, b| <f32 as SpatialSimilarity>::dot(a, b).unwrap_or(f64::NAN) as f32)
            })
        });
        g.bench_function("naive", |bch| robust(bch, || batch.run(naive_dot_f32)));
        g.finish();
    }
}

type I8Fn = fn(&[i8], &[i8]) -> f32;

fn bench_int(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let dim = 128;
    let mut b8 = Batch::new(dim, || rng.gen::<i8>());
    let n = b8.len();
    for (op, id) in [("l2", 0), ("dot", 1)] {
        let mut g = c.benchmark_group(format!("i8_{op}_d{dim}_x{n}"));
        let (ours, naive): (I8Fn, I8Fn) = if id == 0 {
            (i8::l2_sq, naive_l2_int)
        } else {
            (<i8 as Element>::dot, naive_dot_int)
        };
        g.bench_function("trawl", |bch| robust(bch, || b8.run(ours)));
        g.bench_function("simsimd", |bch| {
            robust(bch, || {
                b8.run(|a, b| {
                    let r = if id == 0 {
                        i8::l2sq(a, b)
                    } else {
                        <i8 as SpatialSimilarity>::dot(a, b)
                    };
                    r.unwrap_or(f64::NAN) as f32
                })
            })
        });
        g.bench_function("naive", |bch| robust(bch, || b8.run(naive)));
        g.finish();
    }

    // simsimd 6 has no u8 spatial kernels in its Rust API: trawl against the naive loop only.
    let mut bu = Batch::new(dim, || rng.gen::<u8>());
    let mut g = c.benchmark_group(format!("u8_l2_d{dim}_x{n}"));
    g.bench_function("trawl", |bch| robust(bch, || bu.run(u8::l2_sq)));
    g.bench_function("naive", |bch| robust(bch, || bu.run(naive_l2_int::<u8>)));
    g.finish();
    let mut g = c.benchmark_group(format!("u8_dot_d{dim}_x{n}"));
    g.bench_function("trawl", |bch| robust(bch, || bu.run(<u8 as Element>::dot)));
    g.bench_function("naive", |bch| robust(bch, || bu.run(naive_dot_int::<u8>)));
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_f32, bench_int
}
criterion_main!(benches);

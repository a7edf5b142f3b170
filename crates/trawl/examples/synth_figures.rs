//! Figures for the report on synthetic data: relative contrast of the mixture against i.i.d.
//! noise, and generation speed (median of 3) of 1M × 128 f32 to a file and in memory.
//!
//! ```text
//! cargo run --release -p trawl --example synth_figures
//! ```

use std::time::Instant;

use trawl::data::{Format, Matrix};
use trawl::progress::Control;
use trawl::synth::{generate, generate_to_file, relative_contrast, SynthParams};
use trawl::DType;

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let p = SynthParams::new(20_000, 200, 128, DType::F32, 42);
    let (base, queries) = generate::<f32>(&p).expect("generate");
    let rc = relative_contrast(&base, &queries, 10);
    use rand::SeedableRng;
    use rand_distr::Distribution;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let iid: Vec<f32> = (0..20_200 * 128)
        .map(|_| rand_distr::StandardNormal.sample(&mut rng))
        .collect();
    let iid = Matrix::from_vec(iid, 128).expect("shape");
    let (ib, iq) = (iid.slice_rows(0, 20_000), iid.slice_rows(20_000, 200));
    let rc_iid = relative_contrast(&ib, &iq, 10);
    println!("relative contrast (20K x 128, k=10): mixture {rc:.3}, iid {rc_iid:.3}");

    let dir = std::env::temp_dir().join(format!("trawl-synth-figures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let big = SynthParams::new(1_000_000, 10_000, 128, DType::F32, 42);
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        generate_to_file(
            &big,
            &dir.join("b.fbin"),
            Some(&dir.join("q.fbin")),
            Format::Bin,
            &Control::silent(),
        )
        .expect("generate to file");
        times.push(t.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "generate_to_file 1M x 128 f32 + 10K queries: median {:.2} s ({} threads) {times:?}",
        median(times.clone()),
        rayon::current_num_threads()
    );
    let mem = SynthParams::new(1_000_000, 0, 128, DType::F32, 42);
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (b, _) = generate::<f32>(&mem).expect("generate");
        times.push(t.elapsed().as_secs_f64());
        drop(b);
    }
    println!(
        "in memory 1M x 128: median {:.2} s {times:?}",
        median(times.clone())
    );
}

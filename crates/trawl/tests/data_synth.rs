//! Synthetic data: determinism across thread counts, file output equals in-memory output, and
//! (ignored, run by hand) the realism and speed figures.

use std::time::Instant;

use trawl::data::{read_matrix, Format, Matrix};
use trawl::progress::Control;
use trawl::synth::{generate, generate_to_file, relative_contrast, SynthParams};
use trawl::DType;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn file_bytes_are_identical_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in [DType::F32, DType::U8, DType::I8] {
        let p = SynthParams::new(5000, 300, 20, dtype, 11);
        let mut outputs = Vec::new();
        for threads in [1, 3] {
            let base = dir.path().join(format!("b{threads}.bin"));
            let query = dir.path().join(format!("q{threads}.npy"));
            pool(threads)
                .install(|| {
                    generate_to_file(&p, &base, Some(&query), Format::Bin, &Control::silent())
                })
                .unwrap();
            outputs.push((
                std::fs::read(&base).unwrap(),
                std::fs::read(&query).unwrap(),
            ));
        }
        assert_eq!(outputs[0], outputs[1], "{dtype}");
        assert_eq!(outputs[0].0.len(), 8 + 5000 * 20 * dtype.size_bytes());
    }
}

#[test]
fn file_output_equals_in_memory_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = SynthParams::new(2500, 100, 16, DType::F32, 5);
    let base = dir.path().join("b.fvecs");
    let query = dir.path().join("q.fbin");
    let (bi, qi) =
        generate_to_file(&p, &base, Some(&query), Format::Vecs, &Control::silent()).unwrap();
    assert_eq!((bi.n, bi.dim, qi.unwrap().n), (2500, 16, 100));
    let (b, q) = pool(2).install(|| generate::<f32>(&p)).unwrap();
    assert_eq!(read_matrix::<f32>(&base).unwrap(), b);
    // The query file was written as vecs too (the format argument applies to both).
    assert_eq!(
        trawl::data::read_matrix_with::<f32>(
            &query,
            trawl::data::ProbeOptions {
                format: Some(Format::Vecs),
                ..Default::default()
            }
        )
        .unwrap(),
        q
    );
}

#[test]
fn cancellation_stops_generation_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ctl = Control::silent().with_cancel_flag(flag);
    let base = dir.path().join("b.fbin");
    let p = SynthParams::new(1000, 0, 8, DType::F32, 1);
    let r = generate_to_file(&p, &base, None, Format::Bin, &ctl);
    assert!(matches!(r, Err(trawl::synth::SynthError::Cancelled(_))));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Figures for the report: `cargo test -p trawl --test data_synth -- --ignored --nocapture`.
#[test]
#[ignore]
fn figures() {
    let p = SynthParams::new(20_000, 200, 128, DType::F32, 42);
    let (base, queries) = generate::<f32>(&p).unwrap();
    let rc = relative_contrast(&base, &queries, 10);
    use rand::SeedableRng;
    use rand_distr::Distribution;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let iid: Vec<f32> = (0..20_200 * 128)
        .map(|_| rand_distr::StandardNormal.sample(&mut rng))
        .collect();
    let iid = Matrix::from_vec(iid, 128).unwrap();
    let (ib, iq) = (iid.slice_rows(0, 20_000), iid.slice_rows(20_000, 200));
    let rc_iid = relative_contrast(&ib, &iq, 10);
    println!("relative contrast (20K x 128, k=10): mixture {rc:.3}, iid-like {rc_iid:.3}");
    let dir = tempfile::tempdir().unwrap();
    let big = SynthParams::new(1_000_000, 10_000, 128, DType::F32, 42);
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        generate_to_file(
            &big,
            &dir.path().join("b.fbin"),
            Some(&dir.path().join("q.fbin")),
            Format::Bin,
            &Control::silent(),
        )
        .unwrap();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "generate_to_file 1M x 128 f32 + 10K queries: median {:.2} s ({} threads) {times:?}",
        times[1],
        rayon::current_num_threads()
    );
}

#[test]
#[ignore]
fn time_in_memory() {
    let big = SynthParams::new(1_000_000, 0, 128, DType::F32, 42);
    for _ in 0..3 {
        let t = Instant::now();
        let (b, _) = generate::<f32>(&big).unwrap();
        println!("in memory 1M x 128: {:.2} s", t.elapsed().as_secs_f64());
        drop(b);
    }
}

//! Synthetic data: determinism across thread counts, file output equals in-memory output, and
//! more neighbourhood contrast than noise (the figures themselves: `examples/synth_figures.rs`).

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
    assert_eq!(r.unwrap_err().kind(), trawl::ErrorKind::Cancelled);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let bad = SynthParams::new(10, 0, 0, DType::F32, 1);
    let e = generate_to_file(&bad, &base, None, Format::Bin, &Control::silent()).unwrap_err();
    assert!(
        matches!(e, trawl::synth::SynthError::InvalidParams(_)),
        "{e}"
    );
    assert_eq!(e.kind(), trawl::ErrorKind::InvalidInput);
}

/// The mixture has the neighbourhood structure real embeddings have: its relative contrast
/// (mean distance over k-th neighbour distance) is well above that of i.i.d. Gaussian data of the
/// same shape, which is nearly 1 at d = 128 (every point about equally far).
#[test]
fn mixture_has_more_contrast_than_iid_noise() {
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
    assert!(rc_iid < 1.4, "iid contrast {rc_iid}");
    assert!(
        rc > 1.6 && rc > rc_iid + 0.4,
        "mixture {rc} vs iid {rc_iid}"
    );
}

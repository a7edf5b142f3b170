use crate::dir::FileErrorKind;
use crate::kernels::distance;
use crate::quant::pq::*;
use proptest::prelude::{prop_assert, prop_assert_eq, proptest, ProptestConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// An anisotropic Gaussian mixture: `clusters` centres, per-dimension scales in 0.1..2.
fn mixture(n: usize, dim: usize, clusters: usize, seed: u64) -> Matrix<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<f32> = (0..clusters * dim)
        .map(|_| rng.gen_range(-5.0..5.0))
        .collect();
    let scales: Vec<f32> = (0..clusters * dim)
        .map(|_| rng.gen_range(0.1..2.0))
        .collect();
    let g = Normal::new(0.0f32, 1.0).unwrap();
    let mut data = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = rng.gen_range(0..clusters);
        for j in 0..dim {
            data.push(centres[c * dim + j] + scales[c * dim + j] * g.sample(&mut rng));
        }
    }
    Matrix::from_vec(data, dim).unwrap()
}

fn params(m: usize) -> PqParams {
    PqParams {
        bytes_per_vector: m,
        iters: 8,
        ..Default::default()
    }
}

fn silent() -> Control {
    Control::silent()
}

/// Mean squared reconstruction error of `data` under `pq`.
fn reconstruction_error(pq: &ProductQuantizer, data: &Matrix<f32>) -> f64 {
    let codes = pq.encode(data, &silent()).unwrap();
    let mut rec = vec![0f32; data.dim()];
    let mut total = 0f64;
    for i in 0..data.n() {
        pq.decode(codes.code(i), &mut rec).unwrap();
        total += f64::from(<f32 as Element>::l2_sq(data.row(i), &rec));
    }
    total / data.n() as f64
}

#[test]
fn error_decreases_as_m_grows() {
    let data = mixture(3000, 24, 20, 1);
    let mut last = f64::INFINITY;
    for m in [1, 2, 4, 8, 12, 24] {
        let pq = ProductQuantizer::train(&data, Metric::L2, &params(m), &silent()).unwrap();
        let err = reconstruction_error(&pq, &data);
        assert!(err < last, "M {m}: error {err} not below {last}");
        last = err;
    }
}

/// The exact distance the table approximates: to the reconstruction `rec`.
fn decoded_distance(metric: Metric, q: &[f32], rec: &[f32]) -> f32 {
    match metric {
        Metric::L2 | Metric::InnerProduct => distance(metric, q, rec),
        Metric::Cosine => {
            let norm = <f32 as Element>::norm_sq(q).sqrt();
            let qn: Vec<f32> = q.iter().map(|v| v / norm).collect();
            0.5 * distance(Metric::L2, &qn, rec)
        }
    }
}

fn check_adc_matches_decoded(pq: &ProductQuantizer, data: &Matrix<f32>, queries: &Matrix<f32>) {
    let codes = pq.encode(data, &silent()).unwrap();
    let mut rec = vec![0f32; data.dim()];
    let mut batch = vec![0f32; codes.n()];
    for q in queries.rows() {
        let t = pq.query_table(q).unwrap();
        t.distances(codes.as_bytes(), &mut batch);
        for i in 0..codes.n() {
            pq.decode(codes.code(i), &mut rec).unwrap();
            let want = decoded_distance(pq.metric(), q, &rec);
            let got = t.distance(codes.code(i));
            assert_eq!(got.to_bits(), batch[i].to_bits());
            let tol = 1e-4 * (1.0 + want.abs());
            assert!(
                (got - want).abs() <= tol,
                "{}: {got} vs {want}",
                pq.metric()
            );
        }
    }
}

/// The `u16` table orders codes as the `f32` one up to its bound (`M · step / 2` apart), and
/// maps its sums back to the `f32` distances within that bound.
fn check_quantized_table(pq: &ProductQuantizer, data: &Matrix<f32>, queries: &Matrix<f32>) {
    let codes = pq.encode(data, &silent()).unwrap();
    let ids: Vec<u32> = (0..codes.n() as u32).rev().chain([u32::MAX]).collect();
    for q in queries.rows() {
        let t = pq.query_table(q).unwrap();
        let qt = t.quantized();
        assert_eq!(qt.m(), t.m());
        let bound = qt.m() as f32 * qt.step() / 2.0 + 1e-5 * (1.0 + qt.step());
        let mut got = vec![0u32; ids.len()];
        qt.distances_of(&codes, &ids, &mut got);
        assert_eq!(got[ids.len() - 1], u32::MAX, "an id out of range");
        for (&id, &d) in ids.iter().zip(&got).take(codes.n()) {
            let want = t.distance(codes.code(id as usize));
            assert_eq!(d, qt.distance(codes.code(id as usize)));
            let back = qt.to_f32(d);
            assert!(
                (back - want).abs() <= bound + 1e-4 * want.abs(),
                "{}: {back} vs {want} (bound {bound})",
                pq.metric()
            );
        }
        // Codes the f32 table sets more than twice the bound apart keep their order.
        for (i, j) in (1..codes.n()).map(|i| (i - 1, i)) {
            let (fa, fb) = (
                t.distance(codes.code(ids[i] as usize)),
                t.distance(codes.code(ids[j] as usize)),
            );
            if fa + 2.0 * bound < fb {
                assert!(got[i] < got[j], "{fa} < {fb} but {} >= {}", got[i], got[j]);
            }
        }
    }
}

#[test]
fn the_u16_table_follows_the_f32_table() {
    let data = mixture(700, 13, 8, 2);
    let queries = mixture(5, 13, 3, 3);
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        for m in [1, 5, 13] {
            let pq = ProductQuantizer::train(&data, metric, &params(m), &silent()).unwrap();
            check_quantized_table(&pq, &data, &queries);
        }
    }
}

#[test]
fn adc_equals_distance_to_reconstruction() {
    // 13 dims in 5 subspaces: widths 3,3,3,2,2.
    let data = mixture(700, 13, 8, 2);
    let queries = mixture(5, 13, 3, 3);
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let pq = ProductQuantizer::train(&data, metric, &params(5), &silent()).unwrap();
        assert_eq!(pq.bounds(), &[0, 3, 6, 9, 11, 13]);
        check_adc_matches_decoded(&pq, &data, &queries);
    }
    // Other code sizes: with and without a remainder after the four-way split.
    for m in [1, 3, 4, 8, 13] {
        let pq = ProductQuantizer::train(&data, Metric::L2, &params(m), &silent()).unwrap();
        check_adc_matches_decoded(&pq, &data, &queries);
    }
}

#[test]
fn cosine_codes_unit_vectors_and_ranks_well() {
    let data = mixture(2000, 16, 10, 4);
    let pq = ProductQuantizer::train(&data, Metric::Cosine, &params(8), &silent()).unwrap();
    let codes = pq.encode(&data, &silent()).unwrap();
    let mut rec = vec![0f32; 16];
    pq.decode(codes.code(0), &mut rec).unwrap();
    let norm = <f32 as Element>::norm_sq(&rec).sqrt();
    assert!((norm - 1.0).abs() < 0.2, "reconstruction norm {norm}");
    // PQ distances track exact cosine distances closely.
    let t = pq.query_table(data.row(1)).unwrap();
    let mut err = 0f32;
    for i in 0..200 {
        let exact = distance(Metric::Cosine, data.row(1), data.row(i));
        err += (t.distance(codes.code(i)) - exact).abs();
    }
    assert!(err / 200.0 < 0.05, "mean abs error {}", err / 200.0);
}

#[test]
fn integer_data_trains_and_encodes() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let u: Vec<u8> = (0..400 * 8).map(|_| rng.gen()).collect();
    let u = Matrix::from_vec(u, 8).unwrap();
    let pq = ProductQuantizer::train(&u, Metric::L2, &params(4), &silent()).unwrap();
    let codes = pq.encode(&u, &silent()).unwrap();
    let t = pq.query_table(u.row(0)).unwrap();
    let mut rec = vec![0f32; 8];
    pq.decode(codes.code(3), &mut rec).unwrap();
    let q: Vec<f32> = u.row(0).iter().map(|&v| f32::from(v)).collect();
    let want = distance(Metric::L2, &q, &rec);
    assert!((t.distance(codes.code(3)) - want).abs() <= 1e-3 * want.max(1.0));

    let i: Vec<i8> = (0..300 * 6).map(|_| rng.gen()).collect();
    let i = Matrix::from_vec(i, 6).unwrap();
    let pq = ProductQuantizer::train(&i, Metric::InnerProduct, &params(3), &silent()).unwrap();
    assert_eq!(pq.encode(&i, &silent()).unwrap().n(), 300);
}

#[test]
fn deterministic_over_thread_counts() {
    let data = mixture(3000, 10, 12, 6);
    let run = |threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let pq = ProductQuantizer::train(&data, Metric::L2, &params(4), &silent()).unwrap();
            let codes = pq.encode(&data, &silent()).unwrap();
            (pq.centroids().to_vec(), codes)
        })
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn few_points_give_fewer_centroids() {
    let data = mixture(40, 6, 3, 7);
    let pq = ProductQuantizer::train(&data, Metric::L2, &params(3), &silent()).unwrap();
    assert_eq!(pq.centroids_per_subspace(), 40);
    let codes = pq.encode(&data, &silent()).unwrap();
    assert!(codes.as_bytes().iter().all(|&c| c < 40));
    // Every training point is its own centroid (up to k-means moves): tiny error.
    assert!(reconstruction_error(&pq, &data) < 1e-6);
    let t = pq.query_table(data.row(0)).unwrap();
    assert_eq!(t.entry(0, 200), f32::INFINITY);
    let mut rec = vec![0f32; 6];
    assert!(matches!(
        pq.decode(&[0, 41, 0], &mut rec),
        Err(PqError::BadCode {
            position: 1,
            value: 41,
            ..
        })
    ));
}

#[test]
fn bad_parameters_and_inputs_are_errors() {
    let data = mixture(100, 8, 2, 8);
    let s = silent();
    for m in [0, 9] {
        assert!(matches!(
            ProductQuantizer::train(&data, Metric::L2, &params(m), &s),
            Err(PqError::BadCodeSize { .. })
        ));
    }
    let zero = PqParams {
        max_sample: 0,
        ..params(2)
    };
    assert!(matches!(
        ProductQuantizer::train(&data, Metric::L2, &zero, &s),
        Err(PqError::ZeroSample)
    ));
    let empty = Matrix::<f32>::from_vec(vec![], 8).unwrap();
    assert!(matches!(
        ProductQuantizer::train(&empty, Metric::L2, &params(2), &s),
        Err(PqError::NoTrainingData)
    ));
    let mut nan = data.as_slice().to_vec();
    nan[8 * 7 + 3] = f32::NAN;
    let nan = Matrix::from_vec(nan, 8).unwrap();
    assert!(matches!(
        ProductQuantizer::train(&nan, Metric::L2, &params(2), &s),
        Err(PqError::NonFinite { row: 7 })
    ));
    let pq = ProductQuantizer::train(&data, Metric::L2, &params(2), &s).unwrap();
    assert!(matches!(
        pq.encode(&nan, &s),
        Err(PqError::NonFinite { row: 7 })
    ));
    assert!(matches!(
        pq.query_table(&[1.0f32; 7]),
        Err(PqError::LengthMismatch {
            what: "query",
            expected: 8,
            found: 7
        })
    ));
    let other = Matrix::from_vec(vec![0f32; 9], 9).unwrap();
    assert!(matches!(
        pq.encode(&other, &s),
        Err(PqError::LengthMismatch { .. })
    ));
    assert!(matches!(
        pq.encode_one(&[0f32; 8], &mut [0u8; 3]),
        Err(PqError::LengthMismatch { what: "code", .. })
    ));
}

#[test]
fn cancel_stops_training_and_encoding() {
    let data = mixture(500, 8, 4, 9);
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ctl = Control::silent().with_cancel_flag(flag);
    assert!(matches!(
        ProductQuantizer::train(&data, Metric::L2, &params(2), &ctl),
        Err(PqError::Cancelled(_))
    ));
    let pq = ProductQuantizer::train(&data, Metric::L2, &params(2), &silent()).unwrap();
    assert!(matches!(pq.encode(&data, &ctl), Err(PqError::Cancelled(_))));
}

#[test]
fn batched_lookups_agree() {
    let data = mixture(600, 20, 6, 10);
    let pq = ProductQuantizer::train(&data, Metric::L2, &params(7), &silent()).unwrap();
    let codes = pq.encode(&data, &silent()).unwrap();
    let t = pq.query_table(data.row(5)).unwrap();
    let ids = [3u32, 599, 0, 600, 42];
    let mut out = [0f32; 5];
    t.distances_of(&codes, &ids, &mut out);
    assert_eq!(out[0], t.distance(codes.code(3)));
    assert_eq!(out[1], t.distance(codes.code(599)));
    assert_eq!(out[3], f32::INFINITY);
    let mut one = [0u8; 7];
    pq.encode_one(data.row(42), &mut one).unwrap();
    assert_eq!(&one, codes.code(42));
    // Through the trait, generically.
    fn via_trait<Q: crate::quant::Quantizer>(q: &Q, x: &[f32]) -> Q::Table {
        q.query_table(x).unwrap()
    }
    let tt = via_trait(&pq, data.row(5));
    assert_eq!(
        crate::quant::DistanceTable::distance(&tt, codes.code(9)),
        t.distance(codes.code(9))
    );
}

#[test]
fn save_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let data = mixture(800, 11, 5, 11);
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let pq = ProductQuantizer::train(&data, metric, &params(4), &silent()).unwrap();
        let path = dir.path().join(format!("pq-{metric}"));
        pq.save(&path).unwrap();
        let back = ProductQuantizer::load(&path).unwrap();
        assert_eq!(back.metric(), metric);
        assert_eq!(back.bounds(), pq.bounds());
        assert_eq!(back.centroids(), pq.centroids());
        assert_eq!(back.centroids_per_subspace(), 256);
        let codes = pq.encode(&data, &silent()).unwrap();
        let cpath = dir.path().join(format!("codes-{metric}"));
        codes.save(&cpath).unwrap();
        assert_eq!(PqCodes::load(&cpath).unwrap(), codes);
    }
}

#[test]
fn damaged_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = mixture(300, 6, 3, 12);
    let pq = ProductQuantizer::train(&data, Metric::L2, &params(3), &silent()).unwrap();
    let path = dir.path().join("pq");
    pq.save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    for i in [0, 9, 20, 40, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[i] ^= 0x11;
        std::fs::write(&path, &bad).unwrap();
        assert!(ProductQuantizer::load(&path).is_err(), "flip at {i}");
    }
    std::fs::write(&path, &good[..good.len() - 4]).unwrap();
    assert!(ProductQuantizer::load(&path).is_err());
    // A codes file is not a quantiser.
    let codes = pq.encode(&data, &silent()).unwrap();
    let cpath = dir.path().join("codes");
    codes.save(&cpath).unwrap();
    let err = ProductQuantizer::load(&cpath).unwrap_err();
    assert!(matches!(err.kind, FileErrorKind::WrongMagic { .. }));
    let cgood = std::fs::read(&cpath).unwrap();
    std::fs::write(&cpath, &cgood[..cgood.len() - 1]).unwrap();
    assert!(PqCodes::load(&cpath).is_err());
}

/// Writes `payload` in a valid envelope of `magic`.
fn forge(path: &std::path::Path, magic: [u8; 8], payload: &[u8]) {
    let mut w = crate::dir::EnvelopeWriter::create(path, magic, 1).unwrap();
    w.write(payload).unwrap();
    w.finish().unwrap();
}

#[test]
fn forged_content_is_invalid() {
    use crate::dir::bytes::ByteWriter;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let quantiser = |metric: u8, dim: u32, m: u32, ks: u32, bounds: &[u32], n_cent: usize| {
        let mut w = ByteWriter::new();
        w.u8(metric);
        w.bytes(&[0; 3]);
        w.u32(dim);
        w.u32(m);
        w.u32(ks);
        w.u32s(bounds);
        w.f32s(&vec![0.5; n_cent]);
        w.into_inner()
    };
    let cases = [
        quantiser(7, 4, 2, 2, &[0, 2, 4], 8),          // unknown metric
        quantiser(0, 4, 5, 2, &[0, 1, 2, 3, 4, 4], 8), // M > dim
        quantiser(0, 4, 2, 0, &[0, 2, 4], 0),          // ks 0
        quantiser(0, 4, 2, 300, &[0, 2, 4], 1200),     // ks > 256
        quantiser(0, 4, 2, 2, &[0, 3, 3], 8),          // boundaries not increasing
        quantiser(0, 4, 2, 2, &[0, 2, 5], 8),          // boundaries past dim
        quantiser(0, 4, 2, 2, &[0, 2, 4], 7),          // codebooks too short
        quantiser(0, 4, 2, 2, &[0, 2, 4], 9),          // codebooks too long
        quantiser(0, 4, 2, 2, &[0, 2], 0),             // cut in the boundaries
    ];
    for (i, payload) in cases.iter().enumerate() {
        forge(&path, PQ_MAGIC, payload);
        let err = ProductQuantizer::load(&path).unwrap_err();
        assert!(
            matches!(err.kind, FileErrorKind::Invalid(_)),
            "case {i}: {err}"
        );
    }
    forge(&path, PQ_MAGIC, &quantiser(2, 4, 2, 2, &[0, 2, 4], 8));
    assert_eq!(
        ProductQuantizer::load(&path).unwrap().metric(),
        Metric::Cosine
    );

    let codes = |n: u64, m: u32, ks: u32, bytes: &[u8]| {
        let mut w = ByteWriter::new();
        w.u64(n);
        w.u32(m);
        w.u32(ks);
        w.bytes(bytes);
        w.into_inner()
    };
    let bad = [
        codes(2, 2, 4, &[0, 1, 2]),     // too short
        codes(1, 0, 4, &[]),            // M 0
        codes(1, 2, 2, &[0, 2]),        // byte not below ks
        codes(u64::MAX, 2, 4, &[0, 1]), // overflow
    ];
    for (i, payload) in bad.iter().enumerate() {
        forge(&path, PQ_CODES_MAGIC, payload);
        let err = PqCodes::load(&path).unwrap_err();
        assert!(
            matches!(err.kind, FileErrorKind::Invalid(_)),
            "codes case {i}: {err}"
        );
    }
    forge(&path, PQ_CODES_MAGIC, &codes(2, 2, 4, &[0, 1, 2, 3]));
    assert_eq!(PqCodes::load(&path).unwrap().code(1), &[2, 3]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_dim_and_m(dim in 1usize..40, m_frac in 0.0f64..1.0, n in 1usize..300, seed in 0u64..1000) {
        let m = 1 + ((dim - 1) as f64 * m_frac) as usize;
        let b = subspace_bounds(dim, m);
        prop_assert_eq!(b.len(), m + 1);
        prop_assert_eq!(b[m], dim);
        let widths: Vec<usize> = b.windows(2).map(|w| w[1] - w[0]).collect();
        prop_assert!(widths.iter().max().unwrap() - widths.iter().min().unwrap() <= 1);

        let data = mixture(n, dim, 3, seed);
        let p = PqParams { bytes_per_vector: m, iters: 4, seed, ..Default::default() };
        let pq = ProductQuantizer::train(&data, Metric::L2, &p, &silent()).unwrap();
        prop_assert_eq!(pq.centroids_per_subspace(), n.min(256));
        let codes = pq.encode(&data, &silent()).unwrap();
        prop_assert_eq!(codes.n(), n);
        let t = pq.query_table(data.row(0)).unwrap();
        let mut rec = vec![0f32; dim];
        for i in 0..n.min(20) {
            pq.decode(codes.code(i), &mut rec).unwrap();
            let want = distance(Metric::L2, data.row(0), &rec);
            let got = t.distance(codes.code(i));
            prop_assert!((got - want).abs() <= 1e-4 * (1.0 + want));
        }
    }
}

/// The table is filled dimension by dimension over all centroids; every entry must equal, bit
/// for bit, the per-centroid sum it replaced (uneven subspace widths, fewer than 256 centroids,
/// every metric, queries with zeros and negative values).
#[test]
fn table_entries_equal_the_per_centroid_sum() {
    for (n, dim, m) in [(300, 10, 3), (100, 7, 7), (600, 16, 5)] {
        let data = mixture(n, dim, 4, 21);
        for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
            let pq = ProductQuantizer::train(&data, metric, &params(m), &silent()).unwrap();
            let ks = pq.centroids_per_subspace();
            let mut query: Vec<f32> = data.row(3).to_vec();
            query[0] = 0.0;
            query[dim - 1] = -query[dim - 1];
            let mut q = vec![0f32; dim];
            assert!(prepare(metric, &query, &mut q));
            let t = pq.query_table(&query).unwrap();
            let b = pq.bounds();
            for s in 0..pq.m() {
                let qs = &q[b[s]..b[s + 1]];
                for (e, c) in pq.codebook(s).chunks_exact(qs.len()).enumerate() {
                    let l2 = || {
                        qs.iter()
                            .zip(c)
                            .map(|(a, b)| (a - b) * (a - b))
                            .sum::<f32>()
                    };
                    let want = match metric {
                        Metric::L2 => l2(),
                        Metric::Cosine => 0.5 * l2(),
                        Metric::InnerProduct => -qs.iter().zip(c).map(|(a, b)| a * b).sum::<f32>(),
                    };
                    assert_eq!(
                        t.entry(s, e as u8).to_bits(),
                        want.to_bits(),
                        "{metric} s {s} e {e}"
                    );
                }
                if ks < 256 {
                    assert_eq!(t.entry(s, 255), f32::INFINITY);
                }
            }
        }
    }
}

// ---- OPQ ----

/// A seeded random orthogonal `d × d` matrix (row-major, f64): a product of Givens rotations.
fn random_orthogonal(d: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut q = vec![0f64; d * d];
    for i in 0..d {
        q[i * d + i] = 1.0;
    }
    for _ in 0..4 * d * d {
        let (i, j) = (rng.gen_range(0..d), rng.gen_range(0..d));
        if i == j {
            continue;
        }
        let t: f64 = rng.gen_range(0.0..std::f64::consts::TAU);
        let (c, s) = (t.cos(), t.sin());
        for k in 0..d {
            let (a, b) = (q[i * d + k], q[j * d + k]);
            q[i * d + k] = c * a - s * b;
            q[j * d + k] = s * a + c * b;
        }
    }
    q
}

fn matmul(a: &[f64], b: &[f64], d: usize) -> Vec<f64> {
    let mut out = vec![0f64; d * d];
    for i in 0..d {
        for k in 0..d {
            for j in 0..d {
                out[i * d + j] += a[i * d + k] * b[k * d + j];
            }
        }
    }
    out
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn assert_orthogonal(r: &[f64], d: usize, tol: f64) {
    let mut rt = vec![0f64; d * d];
    for i in 0..d {
        for j in 0..d {
            rt[j * d + i] = r[i * d + j];
        }
    }
    let p = matmul(r, &rt, d);
    for i in 0..d {
        for j in 0..d {
            let want = if i == j { 1.0 } else { 0.0 };
            assert!(
                (p[i * d + j] - want).abs() < tol,
                "R Rᵀ[{i}][{j}] = {}",
                p[i * d + j]
            );
        }
    }
}

#[test]
fn polar_factor_recovers_the_orthogonal_part() {
    // A = Q S with S symmetric positive definite has polar factor Q.
    for (d, seed) in [(1, 1), (2, 2), (7, 3), (24, 4)] {
        let q = random_orthogonal(d, seed);
        let b = random_orthogonal(d, seed + 100);
        // S = B diag(1..d) Bᵀ.
        let mut diag_bt = vec![0f64; d * d];
        for i in 0..d {
            for j in 0..d {
                diag_bt[i * d + j] = (i + 1) as f64 * b[j * d + i];
            }
        }
        let s = matmul(&b, &diag_bt, d);
        let a = matmul(&q, &s, d);
        let p = rotation::polar(&a, d);
        assert!(
            max_abs_diff(&p, &q) < 1e-9,
            "d {d}: {}",
            max_abs_diff(&p, &q)
        );
    }
    // Singular input (rank 2 of 5, and all zero): still an orthogonal result.
    let d = 5;
    let mut a = vec![0f64; d * d];
    a[0] = 3.0;
    a[d + 2] = -1.0;
    assert_orthogonal(&rotation::polar(&a, d), d, 1e-12);
    assert_orthogonal(&rotation::polar(&vec![0.0; d * d], d), d, 1e-12);
}

#[test]
fn procrustes_recovers_a_rotation_and_rotation_checks_orthogonality() {
    let d = 12;
    let q = random_orthogonal(d, 7);
    let data = mixture(500, d, 4, 8);
    let qf: Vec<f32> = q.iter().map(|&v| v as f32).collect();
    let truth = Rotation::from_rows(d, qf.clone()).expect("orthogonal");
    let mut ys = vec![0f32; data.n() * d];
    for (x, y) in data.rows().zip(ys.chunks_exact_mut(d)) {
        truth.apply(x, y);
    }
    let fit = Rotation::procrustes(d, data.as_slice(), &ys);
    let err = fit
        .rows()
        .iter()
        .zip(&qf)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(err < 1e-4, "fitted rotation off by {err}");
    // Rᵀ undoes R.
    let mut back = vec![0f32; d];
    truth.apply_transpose(&ys[..d], &mut back);
    for (a, b) in back.iter().zip(data.row(0)) {
        assert!((a - b).abs() < 1e-4);
    }
    // Not orthogonal, not finite, wrong size: refused.
    let mut skew = qf.clone();
    skew[0] += 0.01;
    assert!(Rotation::from_rows(d, skew).is_none());
    let mut nan = qf.clone();
    nan[5] = f32::NAN;
    assert!(Rotation::from_rows(d, nan).is_none());
    assert!(Rotation::from_rows(d, qf[..d * d - 1].to_vec()).is_none());
    assert!(Rotation::from_rows(0, Vec::new()).is_none());
}

/// Data whose structure is spread over all dimensions: a low-dimensional mixture embedded by
/// a random rotation into `dim` dimensions (the case OPQ exists for).
fn rotated_mixture(n: usize, dim: usize, seed: u64) -> Matrix<f32> {
    let latent = mixture(n, dim, 12, seed);
    let q = random_orthogonal(dim, seed + 1);
    let r = Rotation::from_rows(dim, q.iter().map(|&v| v as f32).collect()).unwrap();
    // Scale dimension j by 2^(-j/2) first, so the variance is concentrated in a few directions.
    let mut out = vec![0f32; n * dim];
    let mut scaled = vec![0f32; dim];
    for (x, o) in latent.rows().zip(out.chunks_exact_mut(dim)) {
        for (j, (s, &v)) in scaled.iter_mut().zip(x).enumerate() {
            *s = v * 0.5f32.powf(j as f32 / 2.0);
        }
        r.apply(&scaled, o);
    }
    Matrix::from_vec(out, dim).unwrap()
}

fn opq_params(m: usize) -> PqParams {
    PqParams {
        opq_iters: OPQ_ITERS,
        ..params(m)
    }
}

#[test]
fn opq_lowers_the_error_and_keeps_adc_exact() {
    let data = rotated_mixture(3000, 16, 21);
    let plain = ProductQuantizer::train(&data, Metric::L2, &params(4), &silent()).unwrap();
    let opq = ProductQuantizer::train(&data, Metric::L2, &opq_params(4), &silent()).unwrap();
    assert!(plain.rotation().is_none());
    let r = opq.rotation().expect("OPQ keeps its rotation");
    assert_orthogonal(
        &r.rows().iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        16,
        1e-5,
    );
    let (e_plain, e_opq) = (
        reconstruction_error(&plain, &data),
        reconstruction_error(&opq, &data),
    );
    assert!(
        e_opq < 0.8 * e_plain,
        "OPQ error {e_opq} not clearly below PQ's {e_plain}"
    );
    // Tables stay exact against the (un-rotated) reconstruction, for every metric.
    let queries = rotated_mixture(5, 16, 22);
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let pq = ProductQuantizer::train(&data, metric, &opq_params(4), &silent()).unwrap();
        check_adc_matches_decoded(&pq, &data, &queries);
    }
}

#[test]
fn opq_is_deterministic_over_thread_counts() {
    let data = rotated_mixture(1500, 10, 31);
    let run = |threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let pq = ProductQuantizer::train(&data, Metric::L2, &opq_params(5), &silent()).unwrap();
            let codes = pq.encode(&data, &silent()).unwrap();
            (
                pq.rotation().unwrap().rows().to_vec(),
                pq.centroids().to_vec(),
                codes,
            )
        })
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn opq_file_round_trip_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let data = rotated_mixture(800, 12, 41);
    let opq = ProductQuantizer::train(&data, Metric::Cosine, &opq_params(3), &silent()).unwrap();
    let path = dir.path().join("opq");
    opq.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 2);
    let back = ProductQuantizer::load(&path).unwrap();
    assert_eq!(back.rotation(), opq.rotation());
    assert_eq!(back.centroids(), opq.centroids());
    let (a, b) = (
        opq.encode(&data, &silent()).unwrap(),
        back.encode(&data, &silent()).unwrap(),
    );
    assert_eq!(a, b);
    // A plain quantiser is still written as version 1.
    let plain = ProductQuantizer::train(&data, Metric::Cosine, &params(3), &silent()).unwrap();
    let ppath = dir.path().join("plain");
    plain.save(&ppath).unwrap();
    let pbytes = std::fs::read(&ppath).unwrap();
    assert_eq!(u32::from_le_bytes(pbytes[8..12].try_into().unwrap()), 1);
    // Every flipped byte and a cut are errors (a flip in the rotation too).
    for i in [bytes.len() - 3, bytes.len() - 12 * 12 * 4 + 1, 33] {
        let mut bad = bytes.clone();
        bad[i] ^= 0x40;
        std::fs::write(&path, &bad).unwrap();
        assert!(ProductQuantizer::load(&path).is_err(), "flip at {i}");
    }
    std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
    assert!(ProductQuantizer::load(&path).is_err());
}

#[test]
fn forged_rotations_are_invalid() {
    use crate::dir::bytes::ByteWriter;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let payload = |flags: u8, rotation: &[f32]| {
        let mut w = ByteWriter::new();
        w.u8(0);
        w.u8(flags);
        w.bytes(&[0; 2]);
        w.u32(2);
        w.u32(1);
        w.u32(2);
        w.u32s(&[0, 2]);
        w.f32s(&[0.5; 4]);
        w.f32s(rotation);
        w.into_inner()
    };
    let forge_v = |version: u32, bytes: &[u8]| {
        let mut w = crate::dir::EnvelopeWriter::create(&path, PQ_MAGIC, version).unwrap();
        w.write(bytes).unwrap();
        w.finish().unwrap();
    };
    let identity = [1.0, 0.0, 0.0, 1.0];
    forge_v(2, &payload(1, &identity));
    assert!(ProductQuantizer::load(&path).unwrap().rotation().is_some());
    let cases: [(u32, Vec<u8>); 5] = [
        (1, payload(1, &identity)),             // a rotation flag in version 1
        (2, payload(2, &[])),                   // unknown flag
        (2, payload(1, &[1.0, 0.5, 0.0, 1.0])), // not orthogonal
        (2, payload(1, &identity[..3])),        // rotation cut short
        (2, payload(0, &identity)),             // rotation bytes without the flag
    ];
    for (i, (version, bytes)) in cases.iter().enumerate() {
        forge_v(*version, bytes);
        let err = ProductQuantizer::load(&path).unwrap_err();
        assert!(
            matches!(err.kind, FileErrorKind::Invalid(_)),
            "case {i}: {err}"
        );
    }
}

/// `min_within` over a page's consecutive codes: the least `distance` bit for bit when it is
/// within the limit, else something above the limit; for every metric, odd and even counts,
/// and limits that cut most, some or none of the codes.
#[test]
fn min_within_is_the_least_distance_within_the_limit() {
    let data = mixture(1500, 20, 12, 7);
    for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
        for m in [5, 8, 10] {
            let pq = ProductQuantizer::train(&data, metric, &params(m), &silent()).unwrap();
            let codes = pq.encode(&data, &silent()).unwrap();
            let mut table = QueryTable::new(m);
            let mut rng = ChaCha8Rng::seed_from_u64(m as u64);
            for qi in 0..20 {
                pq.fill_table(data.row(qi * 7), &mut table).unwrap();
                let first = rng.gen_range(0..1400);
                for count in 0..=9 {
                    let bytes = &codes.as_bytes()[first * m..(first + count) * m];
                    let all: Vec<f32> = bytes.chunks_exact(m).map(|c| table.distance(c)).collect();
                    let least = all.iter().copied().fold(f32::INFINITY, f32::min);
                    let mut sorted = all.clone();
                    sorted.sort_by(f32::total_cmp);
                    let limits = [
                        f32::INFINITY,
                        sorted.get(count / 2).copied().unwrap_or(0.0),
                        least,
                        least - 1e-3,
                    ];
                    for limit in limits {
                        let got = table.min_within(bytes, limit);
                        if least <= limit {
                            assert_eq!(got.to_bits(), least.to_bits(), "{metric:?} m {m} {count}");
                        } else {
                            assert!(got > limit, "{metric:?} m {m} count {count}: {got} {limit}");
                        }
                    }
                }
            }
        }
    }
}

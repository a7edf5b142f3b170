//! The GPU backend against the CPU reference and the model of the contract.
//!
//! Without a GPU adapter (no Vulkan driver) these tests print a skip message and pass, unless
//! `TRAWL_REQUIRE_GPU=1` (set by `.ci/run`, which installs Mesa's lavapipe): then they fail.

use std::io::Write;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::accel::gpu::{GpuAccel, GpuOptions};
use crate::accel::tests::{model, random_codes, random_job};
use crate::accel::*;

/// The GPU backend over `codes`, or `None` (after a skip message) when no adapter opens.
fn gpu(codes: &PqCodes, opts: GpuOptions) -> Option<GpuAccel> {
    match GpuAccel::with_options(codes, opts) {
        Ok(g) => Some(g),
        Err(e @ AccelError::NoAdapter(_)) => {
            assert!(
                std::env::var("TRAWL_REQUIRE_GPU").as_deref() != Ok("1"),
                "TRAWL_REQUIRE_GPU=1 but the GPU backend did not open: {e}"
            );
            // Straight to stderr, past the test harness's capture, so CI logs show the skip.
            let _ = writeln!(std::io::stderr(), "skipping a GPU test: {e}");
            None
        }
        Err(e) => panic!("the GPU backend failed to open: {e}"),
    }
}

/// Asserts that the GPU's output for `job` equals the CPU's and the model's: same ids and
/// distinct counts, distances within 1e-4 relative. Returns how many distances are not
/// bit-identical to the CPU's (reported by the callers; on lavapipe there are none).
fn check(gpu: &GpuAccel, codes: &Arc<PqCodes>, job: &FilterJob, what: &str) -> usize {
    let got = gpu
        .filter(job.clone())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let cpu = CpuAccel::new(codes.clone()).filter(job.clone()).unwrap();
    let want = model(codes, job);
    assert_eq!(cpu, want, "{what}: the CPU backend differs from the model");
    assert_eq!(got.top_n, want.top_n, "{what}: top_n");
    assert_eq!(got.unique, want.unique, "{what}: distinct counts");
    assert_eq!(got.ids.len(), want.ids.len(), "{what}: output length");
    for (k, (g, w)) in got.ids.iter().zip(&want.ids).enumerate() {
        assert_eq!(
            g,
            w,
            "{what}: query {} rank {}: id {g} (dist {}) vs {w} (dist {})",
            k / job.top_n,
            k % job.top_n,
            got.dists[k],
            want.dists[k]
        );
    }
    let mut differ = 0;
    for (k, (&g, &w)) in got.dists.iter().zip(&want.dists).enumerate() {
        let close = g == w || (g - w).abs() <= 1e-4 * w.abs().max(1e-30);
        assert!(close, "{what}: entry {k}: distance {g} vs {w}");
        differ += usize::from(g.to_bits() != w.to_bits());
    }
    if differ > 0 {
        eprintln!("{what}: {differ} distances are not bit-identical to the CPU's");
    }
    differ
}

/// `random_job` with a table shifted to `[-2, 2)` (negative distances for inner product).
fn signed_job(seed: u64, n: usize, m: usize, nq: usize, cands: usize, top_n: usize) -> FilterJob {
    let mut job = random_job(seed, n, m, nq, cands, top_n);
    job.tables.iter_mut().for_each(|t| *t -= 2.0);
    job
}

#[test]
fn gpu_matches_cpu_on_random_batches() {
    const N: usize = 30_000;
    let mut batches = 0;
    let mut differ = 0;
    for (i, &m) in [4usize, 8, 16, 25, 32, 48].iter().enumerate() {
        let codes = random_codes(100 + m as u64, N, m);
        let Some(g) = gpu(&codes, GpuOptions::default()) else {
            return;
        };
        eprintln!(
            "m {m}: {:?}, table in workgroup memory: {}",
            g.info().adapter,
            g.table_in_workgroup_memory()
        );
        for (j, &nq) in [1usize, 3, 64].iter().enumerate() {
            for (k, &top_n) in [1usize, 10, 100, 2000].iter().enumerate() {
                // Candidates per query up to: 0, 50, 3000 or 20000 (cycled over the batches).
                let cands = [0, 50, 3000, 20_000][(i + j + k) % 4];
                // 64 queries of 20000 candidates for every m would be slow in debug-less CI on
                // a software rasteriser: keep the big ones to a few batches.
                let cands = if nq == 64 && cands == 20_000 && k != 3 {
                    3000
                } else {
                    cands
                };
                let seed = (i * 100 + j * 10 + k) as u64;
                let job = if seed.is_multiple_of(2) {
                    random_job(seed, N, m, nq, cands, top_n)
                } else {
                    signed_job(seed, N, m, nq, cands, top_n)
                };
                let what = format!("m {m} nq {nq} top_n {top_n} cands ≤ {cands} seed {seed}");
                differ += check(&g, &codes, &job, &what);
                batches += 1;
            }
        }
    }
    eprintln!("{batches} batches, {differ} distances not bit-identical to the CPU's");
    assert_eq!(
        differ, 0,
        "distances should be bit-identical on this adapter"
    );
}

/// The benchmark's shape (`trawl accel-bench`'s defaults): 64 queries × 20,000 candidates, m = 32
/// (the table exactly fills lavapipe's 32 KiB of workgroup memory), top_n 1000.
#[test]
fn bench_sized_batch_matches() {
    const N: usize = 200_000;
    let codes = random_codes(11, N, 32);
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let job = FilterJob {
        m: 32,
        rbq: Vec::new(),
        lists: Vec::new(),
        list_offsets: Vec::new(),
        tables: (0..64 * 32 * TABLE_ROW)
            .map(|_| rng.gen_range(-1.0f32..1.0))
            .collect(),
        offsets: (0..=64).map(|q| q * 20_000).collect(),
        ids: (0..64 * 20_000)
            .map(|_| rng.gen_range(0..N as u32))
            .collect(),
        top_n: 1000,
    };
    assert_eq!(check(&g, &codes, &job, "64 × 20000, m 32, top_n 1000"), 0);
}

#[test]
fn every_global_memory_path_matches() {
    for m in [8usize, 25, 32] {
        let codes = random_codes(7 + m as u64, 5000, m);
        for opts in [
            GpuOptions {
                global_table: true,
                ..Default::default()
            },
            GpuOptions {
                global_hash: true,
                ..Default::default()
            },
            GpuOptions {
                global_sort: true,
                ..Default::default()
            },
            GpuOptions {
                global_table: true,
                global_hash: true,
                global_sort: true,
                ..Default::default()
            },
        ] {
            let Some(g) = gpu(&codes, opts) else {
                return;
            };
            assert!(!opts.global_table || !g.table_in_workgroup_memory());
            for (seed, nq, cands, top_n) in [
                (1, 1, 1, 1),
                (2, 3, 2000, 10),
                (3, 9, 6000, 100),
                (4, 5, 3000, 2000),
                (5, 4, 700, 3000),
            ] {
                let job = signed_job(seed, 5000, m, nq, cands, top_n);
                check(&g, &codes, &job, &format!("m {m} {opts:?} seed {seed}"));
            }
        }
    }
}

#[test]
fn large_top_n_sorts_in_global_memory() {
    let codes = random_codes(21, 40_000, 16);
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    for (seed, top_n) in [(1, 2049), (2, 5000), (3, 20_000), (4, 30_000)] {
        let job = random_job(seed, 40_000, 16, 3, 25_000, top_n);
        check(&g, &codes, &job, &format!("top_n {top_n}"));
    }
}

/// Many equal distances (small integer tables, few subspaces): ties are broken by id, which
/// exercises the id rounds of the radix select.
#[test]
fn ties_are_broken_by_id() {
    let codes = random_codes(31, 20_000, 4);
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    let global = GpuOptions {
        global_sort: true,
        global_hash: true,
        ..Default::default()
    };
    let global = GpuAccel::with_options(&codes, global).unwrap();
    for (seed, nq, cands, top_n) in [(1, 4, 5000, 10), (2, 3, 20_000, 777), (3, 2, 20_000, 2000)] {
        let mut job = random_job(seed, 20_000, 4, nq, cands, top_n);
        job.tables.iter_mut().for_each(|t| *t = t.floor() - 1.0);
        check(&g, &codes, &job, &format!("ties seed {seed}"));
        check(&global, &codes, &job, &format!("ties, global, seed {seed}"));
    }
}

/// Infinite table entries: +∞ distances sort after every finite one (by id among themselves),
/// before the padding.
#[test]
fn infinite_distances_sort_last() {
    let codes = random_codes(41, 3000, 8);
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let mut job = random_job(41, 3000, 8, 5, 400, 500);
    for t in job.tables.iter_mut() {
        if rng.gen_bool(0.05) {
            *t = f32::INFINITY;
        }
    }
    check(&g, &codes, &job, "infinite entries");
}

#[test]
fn edge_batches() {
    let codes = random_codes(51, 1000, 12);
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    // No queries.
    let job = FilterJob {
        m: 12,
        rbq: Vec::new(),
        lists: Vec::new(),
        list_offsets: Vec::new(),
        offsets: vec![0],
        top_n: 3,
        ..Default::default()
    };
    let out = g.filter(job.clone()).unwrap();
    assert_eq!(out, CpuAccel::new(codes.clone()).filter(job).unwrap());
    // Queries without candidates between others; one id repeated; every id once.
    let mut job = random_job(52, 1000, 12, 4, 300, 50);
    job.offsets = vec![0, 0, 5, 5, 1005, 1005];
    job.ids = vec![7; 5];
    job.ids.extend(0..1000u32);
    job.tables.extend(random_job(53, 1000, 12, 1, 0, 50).tables);
    check(&g, &codes, &job, "empty, duplicate-only and full queries");
    // top_n larger than any query's distinct count, and exactly equal to one.
    let mut job = random_job(54, 1000, 12, 3, 100, 1000);
    check(&g, &codes, &job, "top_n above the distinct counts");
    job.top_n = 1;
    check(&g, &codes, &job, "top_n 1");
    // Bad batches are errors before anything reaches the device.
    let mut bad = random_job(55, 1000, 12, 2, 10, 5);
    bad.ids[0] = 1000;
    assert!(matches!(g.filter(bad), Err(AccelError::BadBatch(_))));
    let mut bad = random_job(55, 1000, 12, 2, 10, 5);
    bad.top_n = 0;
    assert!(matches!(g.filter(bad), Err(AccelError::BadBatch(_))));
}

/// A batch too big for one binding is split into slices of queries; a query that alone is too
/// big is an error.
#[test]
fn batches_split_over_the_binding_limit() {
    let codes = random_codes(61, 8000, 8);
    let cap = 64 * 1024;
    let Some(g) = gpu(
        &codes,
        GpuOptions {
            binding_cap: cap,
            ..Default::default()
        },
    ) else {
        return;
    };
    // 8 × 1024 table bytes, 40 × 2000 × 8 output bytes: several slices.
    let job = random_job(62, 8000, 8, 40, 3000, 200);
    check(&g, &codes, &job, "split batch");
    let job = random_job(63, 8000, 8, 2, 3000, 10_000);
    assert!(matches!(g.filter(job), Err(AccelError::Device(_))));
}

/// Dispatch grids laid out over two dimensions (the workgroups of a dimension capped at 5),
/// and batches split where a slice's score grid would exceed 5 × 5.
#[test]
fn two_dimensional_grids() {
    let codes = random_codes(65, 20_000, 8);
    let Some(g) = gpu(
        &codes,
        GpuOptions {
            group_cap: 5,
            ..Default::default()
        },
    ) else {
        return;
    };
    for (seed, nq, cands) in [(1, 1, 20_000), (2, 7, 300), (3, 64, 9000)] {
        let job = random_job(seed, 20_000, 8, nq, cands, 100);
        check(&g, &codes, &job, &format!("grid cap 5, seed {seed}"));
    }
}

/// Several batches in flight at once, collected out of order, from several threads.
#[test]
fn batches_in_flight_and_threads() {
    let codes = random_codes(71, 10_000, 16);
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    let jobs: Vec<FilterJob> = (0..4)
        .map(|s| signed_job(72 + s, 10_000, 16, 8, 4000, 64))
        .collect();
    let pending: Vec<_> = jobs.iter().map(|j| g.submit(j).unwrap()).collect();
    let mut outs: Vec<_> = pending
        .into_iter()
        .rev()
        .map(|p| p.wait().unwrap())
        .collect();
    outs.reverse();
    for (job, out) in jobs.iter().zip(&outs) {
        assert_eq!(*out, model(&codes, job));
    }
    let g: Arc<dyn Accelerator> = Arc::new(g);
    std::thread::scope(|s| {
        for (job, want) in jobs.iter().zip(&outs) {
            let g = g.clone();
            s.spawn(move || {
                for _ in 0..3 {
                    assert_eq!(g.filter(job.clone()).unwrap(), *want);
                }
            });
        }
    });
}

#[test]
fn open_gpu_reports_the_adapter() {
    let codes = random_codes(81, 500, 6);
    let Some(_) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    let a = open(AccelKind::Gpu, codes.clone()).unwrap();
    let info = a.info();
    assert_eq!(info.backend, "gpu");
    assert!(!info.adapter.is_empty());
    // 6 bytes per code pack into 2 words.
    assert_eq!(info.resident_bytes, 500 * 8);
    assert_eq!(open(AccelKind::Auto, codes).unwrap().info().backend, "gpu");
}

/// Run in a subprocess by [`no_adapter_is_an_error`], with the Vulkan loader pointed at no
/// driver.
#[test]
#[ignore = "run by no_adapter_is_an_error in a subprocess without a Vulkan driver"]
fn no_adapter_child() {
    let codes = random_codes(91, 100, 8);
    match open(AccelKind::Gpu, codes.clone()) {
        Err(AccelError::NoAdapter(e)) => eprintln!("no adapter, as expected: {e}"),
        Err(e) => panic!("expected NoAdapter, got {e}"),
        Ok(a) => panic!("expected NoAdapter, opened {:?}", a.info()),
    }
    assert_eq!(open(AccelKind::Auto, codes).unwrap().info().backend, "cpu");
}

#[test]
fn no_adapter_is_an_error() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "accel::gpu_tests::no_adapter_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env("WGPU_BACKEND", "vulkan")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the child test did not run:\n{text}"
    );
}

/// RaBitQ codes: the GPU kernel's distances are bit for bit the CPU's (the contract's estimate),
/// for every metric, 1 to 5 bits and dimensions with and without padding; a quantiser whose
/// integers the kernel could not convert exactly is refused, not answered approximately.
#[test]
fn gpu_matches_cpu_bit_for_bit_on_rabitq_codes() {
    use crate::kernels::Metric;
    use crate::quant::rabitq::{RaBitQuantizer, RbqParams};
    let mut checked = 0;
    for (case, &(dim, bits, metric)) in [
        (100usize, 1u8, Metric::L2),
        (384, 1, Metric::Cosine),
        (128, 2, Metric::InnerProduct),
        (96, 4, Metric::L2),
        (64, 5, Metric::InnerProduct),
        (200, 3, Metric::Cosine),
    ]
    .iter()
    .enumerate()
    {
        let mut rng = ChaCha8Rng::seed_from_u64(40 + case as u64);
        let n = 6000;
        let data: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let data = crate::data::Matrix::from_vec(data, dim).unwrap();
        let params = RbqParams {
            bits,
            ..RbqParams::default()
        };
        let ctl = crate::progress::Control::silent();
        let rq = RaBitQuantizer::train(&data, metric, &params, &ctl).unwrap();
        let codes = Arc::new(rq.encode(&data, &ctl).unwrap());
        let Some(g) = gpu(&codes, GpuOptions::default()) else {
            return;
        };
        for (nq, cands, top_n) in [(1usize, 500usize, 10usize), (7, 3000, 3000), (20, 40, 64)] {
            let mut job = random_job(case as u64 * 7 + nq as u64, n, codes.m(), nq, cands, top_n);
            job.tables.clear();
            for _ in 0..nq {
                let q: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
                job.rbq.push(rq.query(&q).unwrap());
            }
            let what = format!("RaBitQ dim {dim} bits {bits} {metric:?} nq {nq}");
            let got = g
                .filter(job.clone())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let cpu = CpuAccel::new(codes.clone()).filter(job.clone()).unwrap();
            assert_eq!(got.ids, cpu.ids, "{what}: ids");
            assert_eq!(got.unique, cpu.unique, "{what}: distinct counts");
            let bits_of = |v: &[f32]| v.iter().map(|d| d.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits_of(&got.dists),
                bits_of(&cpu.dists),
                "{what}: distances"
            );
            // The CPU's distances are the quantiser's own estimates.
            for q in 0..nq {
                let (ids, dists) = cpu.query(q);
                for (&id, &d) in ids.iter().zip(dists) {
                    assert_eq!(
                        d.to_bits(),
                        job.rbq[q].distance(codes.code(id as usize)).to_bits()
                    );
                }
            }
            checked += got.ids.iter().filter(|&&i| i != u32::MAX).count();
        }
    }
    assert!(checked > 10_000, "only {checked} distances compared");

    // 8 bits × 384 dimensions: 2·D·(2⁸ − 1)·(2¹² − 1) is far above 2²⁴.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let data: Vec<f32> = (0..500 * 384).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let data = crate::data::Matrix::from_vec(data, 384).unwrap();
    let params = RbqParams {
        bits: 8,
        ..RbqParams::default()
    };
    let ctl = crate::progress::Control::silent();
    let rq = RaBitQuantizer::train(&data, crate::kernels::Metric::L2, &params, &ctl).unwrap();
    let codes = Arc::new(rq.encode(&data, &ctl).unwrap());
    let Some(g) = gpu(&codes, GpuOptions::default()) else {
        return;
    };
    let mut job = random_job(1, 500, codes.m(), 1, 100, 10);
    job.tables.clear();
    job.rbq.push(rq.query(&vec![0.5f32; 384]).unwrap());
    assert!(!job.rbq[0].gpu_exact());
    match g.filter(job) {
        Err(AccelError::Device(msg)) => assert!(msg.contains("CPU backend"), "{msg}"),
        other => panic!("8-bit 384-d codes on the GPU: {other:?}"),
    }
}

//! The filter stage's contract, on the CPU backend (the GPU backend's tests compare against it).

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::accel::*;

/// A random batch: `nq` queries, up to `max_cands` candidates each drawn from `n` with many
/// duplicates, random tables.
pub(crate) fn random_job(
    seed: u64,
    n: usize,
    m: usize,
    nq: usize,
    max_cands: usize,
    top_n: usize,
) -> FilterJob {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let tables = (0..nq * m * TABLE_ROW)
        .map(|_| rng.gen_range(0.0f32..4.0))
        .collect();
    let mut offsets = vec![0u32];
    let mut ids = Vec::new();
    for _ in 0..nq {
        let c = rng.gen_range(0..=max_cands);
        let span = rng.gen_range(1..=n);
        let lo = rng.gen_range(0..=n - span);
        ids.extend((0..c).map(|_| (lo + rng.gen_range(0..span)) as u32));
        offsets.push(ids.len() as u32);
    }
    FilterJob {
        m,
        rbq: Vec::new(),
        lists: Vec::new(),
        list_offsets: Vec::new(),
        tables,
        offsets,
        ids,
        top_n,
    }
}

pub(crate) fn random_codes(seed: u64, n: usize, m: usize) -> Arc<PqCodes> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let codes = (0..n * m).map(|_| rng.gen::<u8>()).collect();
    Arc::new(PqCodes::from_vec(codes, m, 256).unwrap())
}

/// An independent model of the contract: sort and dedup, score, sort by (distance, id).
pub(crate) fn model(codes: &PqCodes, job: &FilterJob) -> FilterOutput {
    let nq = job.queries();
    let mut out = FilterOutput {
        top_n: job.top_n,
        ids: vec![u32::MAX; nq * job.top_n],
        dists: vec![f32::INFINITY; nq * job.top_n],
        unique: vec![0; nq],
    };
    for q in 0..nq {
        let mut c = job.candidates(q).to_vec();
        c.sort_unstable();
        c.dedup();
        out.unique[q] = c.len() as u32;
        let mut s: Vec<(f32, u32)> = c
            .iter()
            .map(|&id| {
                let code = codes.code(id as usize);
                let mut acc = [0f32; 4];
                for (j, &b) in code.iter().enumerate() {
                    acc[j % 4] += job.table(q)[j * 256 + b as usize];
                }
                ((acc[0] + acc[1]) + (acc[2] + acc[3]), id)
            })
            .collect();
        s.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (k, &(d, id)) in s.iter().take(job.top_n).enumerate() {
            out.ids[q * job.top_n + k] = id;
            out.dists[q * job.top_n + k] = d;
        }
    }
    out
}

#[test]
fn cpu_backend_matches_the_model() {
    for (seed, m, nq, cands, top_n) in [
        (1, 8, 1, 50, 10),
        (2, 16, 7, 3000, 100),
        (3, 5, 33, 400, 400),
        (4, 32, 4, 0, 5),
    ] {
        let codes = random_codes(seed, 2000, m);
        let job = random_job(seed, 2000, m, nq, cands, top_n);
        let want = model(&codes, &job);
        let cpu = CpuAccel::new(codes.clone());
        assert_eq!(cpu.filter(job.clone()).unwrap(), want, "seed {seed}");
        // Again on the same thread (the dedup's bit array must be clean after a batch), and
        // with the dedup by sorting.
        assert_eq!(cpu.filter(job.clone()).unwrap(), want, "seed {seed}, again");
        let sorting = CpuAccel::sorting(codes.clone());
        assert_eq!(
            sorting.filter(job.clone()).unwrap(),
            want,
            "seed {seed}, sorting"
        );
    }
}

#[test]
fn bad_batches_are_errors() {
    let codes = random_codes(9, 100, 8);
    let cpu = CpuAccel::new(codes);
    let mut job = random_job(9, 100, 8, 3, 20, 5);
    job.ids.push(100);
    *job.offsets.last_mut().unwrap() += 1;
    assert!(matches!(cpu.filter(job), Err(AccelError::BadBatch(_))));
    let mut job = random_job(9, 100, 8, 3, 20, 5);
    job.m = 4;
    assert!(matches!(cpu.filter(job), Err(AccelError::BadBatch(_))));
    let mut job = random_job(9, 100, 8, 3, 20, 5);
    job.top_n = 0;
    assert!(matches!(cpu.filter(job), Err(AccelError::BadBatch(_))));
}

#[test]
fn auto_opens_something_and_cpu_is_cpu() {
    let codes = random_codes(5, 100, 8);
    assert_eq!(
        open(AccelKind::Cpu, codes.clone()).unwrap().info().backend,
        "cpu"
    );
    let a = open(AccelKind::Auto, codes).unwrap();
    assert!(["cpu", "gpu"].contains(&a.info().backend));
}

#[test]
fn adc_of_two_codes_equals_adc_of_each() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for m in 1..=13 {
        let table: Vec<f32> = (0..m * TABLE_ROW)
            .map(|_| rng.gen_range(-3.0f32..3.0))
            .collect();
        for _ in 0..20 {
            let x: Vec<u8> = (0..m).map(|_| rng.gen()).collect();
            let y: Vec<u8> = (0..m).map(|_| rng.gen()).collect();
            let (dx, dy) = adc_distance2(&table, &x, &y);
            assert_eq!(dx.to_bits(), adc_distance(&table, &x).to_bits(), "m {m}");
            assert_eq!(dy.to_bits(), adc_distance(&table, &y).to_bits(), "m {m}");
        }
    }
}

/// RaBitQ codes scored from FastScan lists give exactly the output of the same lists' ids
/// gathered and scored one by one (same estimates bit for bit, same dedup, same order), with
/// either dedup.
#[test]
fn fastscan_lists_equal_gathered_ids_on_rabitq_codes() {
    use crate::kernels::Metric;
    use crate::quant::rabitq::fastscan::BlockLists;
    use crate::quant::rabitq::{RaBitQuantizer, RbqParams};
    for (dim, bits, metric) in [
        (100usize, 1u8, Metric::L2),
        (64, 2, Metric::InnerProduct),
        (300, 4, Metric::Cosine),
    ] {
        let mut rng = ChaCha8Rng::seed_from_u64(dim as u64 + u64::from(bits));
        let n = 3000;
        let data: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let data = crate::data::Matrix::from_vec(data, dim).unwrap();
        let params = RbqParams {
            bits,
            ..RbqParams::default()
        };
        let ctl = crate::progress::Control::silent();
        let rq = RaBitQuantizer::train(&data, metric, &params, &ctl).unwrap();
        let codes = Arc::new(rq.encode(&data, &ctl).unwrap());
        // 200 lists of 0–70 ids, vectors in several lists (replicas).
        let lists: Vec<Vec<u32>> = (0..200)
            .map(|_| {
                let len = rng.gen_range(0..=70);
                (0..len).map(|_| rng.gen_range(0..n as u32)).collect()
            })
            .collect();
        let blocks = Arc::new(BlockLists::build(
            lists.len(),
            |l| &lists[l],
            &codes,
            usize::from(bits),
            rq.pad(),
        ));
        // The memory plan's figure is what the build holds.
        assert_eq!(
            BlockLists::bytes_for(lists.iter().map(Vec::len), codes.m()),
            blocks.heap_bytes()
        );
        for (nq, probe, top_n) in [(1usize, 10usize, 10usize), (5, 40, 3000), (3, 0, 5)] {
            let mut by_ids = FilterJob {
                m: codes.m(),
                top_n,
                offsets: vec![0],
                ..FilterJob::default()
            };
            let mut by_lists = FilterJob {
                m: codes.m(),
                top_n,
                offsets: vec![0],
                list_offsets: vec![0],
                ..FilterJob::default()
            };
            for _ in 0..nq {
                let q: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let q = rq.query(&q).unwrap();
                by_ids.rbq.push(q.clone());
                by_lists.rbq.push(q);
                for _ in 0..probe {
                    let l = rng.gen_range(0..lists.len());
                    by_ids.ids.extend_from_slice(&lists[l]);
                    by_lists.lists.push(l as u32);
                }
                by_ids.offsets.push(by_ids.ids.len() as u32);
                by_lists.offsets.push(0);
                by_lists.list_offsets.push(by_lists.lists.len() as u32);
            }
            let want = CpuAccel::new(codes.clone()).filter(by_ids.clone()).unwrap();
            let got = CpuAccel::with_lists(codes.clone(), blocks.clone())
                .filter(by_lists.clone())
                .unwrap();
            let what = format!("dim {dim} bits {bits} {metric:?} nq {nq} probe {probe}");
            assert_eq!(got, want, "{what}");
            let sorted = CpuAccel::sorting_with_lists(codes.clone(), blocks.clone())
                .filter(by_lists)
                .unwrap();
            assert_eq!(sorted, want, "{what}: sorting dedup");
            if probe > 0 {
                assert!(want.unique.iter().all(|&u| u > 0), "{what}: nothing scored");
            }
        }
    }
}

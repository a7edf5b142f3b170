//! The flash step's contract: the CPU backend against an independent model over random step
//! sequences, and (with the `gpu` feature and an adapter, e.g. lavapipe) the GPU backend
//! against the CPU backend, output for output.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::accel::flash::*;
use crate::accel::tests::random_codes;
use crate::accel::{adc_distance, TABLE_ROW};
use crate::quant::pq::PqCodes;

/// The model of one slot: a visited set, and the whole list re-sorted after every step.
#[derive(Default, Clone)]
struct ModelSlot {
    table: Vec<f32>,
    rbq: Option<crate::quant::rabitq::RbqQuery>,
    list: Vec<(u32, u32, bool)>,
    visited: HashSet<u32>,
}

fn model_step(codes: &PqCodes, l: usize, slots: &mut [ModelSlot], job: &StepJob) -> StepOutput {
    model_step_grouped(codes, None, l, slots, job)
}

/// The model over `groups` of the codes: a node's key is the least of its codes' keys, and
/// each of its codes counts as scored.
fn model_step_grouped(
    codes: &PqCodes,
    groups: Option<&Groups>,
    l: usize,
    slots: &mut [ModelSlot],
    job: &StepJob,
) -> StepOutput {
    let m = codes.m();
    let mut out = StepOutput::default();
    out.reset(job.entries.len());
    let mut tables = job.tables.chunks_exact(m * TABLE_ROW);
    let mut rbq = job.rbq.iter();
    let code_key = |s: &ModelSlot, c: usize| {
        key_of(match &s.rbq {
            Some(q) => q.distance(codes.code(c)),
            None => adc_distance(&s.table, codes.code(c)),
        })
    };
    let score = |s: &ModelSlot, id: u32| -> (u32, u32) {
        match groups {
            None => (code_key(s, id as usize), 1),
            Some(g) => {
                let r = g.members(id);
                let n = r.len() as u32;
                (r.map(|c| code_key(s, c)).min().unwrap_or(u32::MAX), n)
            }
        }
    };
    for (i, e) in job.entries.iter().enumerate() {
        let s = &mut slots[e.slot as usize];
        let mut scored = 0;
        if e.entry != NONE {
            *s = if job.rabitq {
                ModelSlot {
                    rbq: Some(rbq.next().unwrap().clone()),
                    ..ModelSlot::default()
                }
            } else {
                ModelSlot {
                    table: tables.next().unwrap().to_vec(),
                    ..ModelSlot::default()
                }
            };
            s.visited.insert(e.entry);
            let (k, c) = score(s, e.entry);
            s.list.push((k, e.entry, false));
            scored += c;
        }
        if e.node != NONE {
            out.stale[i] = s
                .list
                .iter()
                .find(|c| !c.2)
                .is_some_and(|c| (c.0, c.1) < (e.node_key, e.node));
        }
        for &nb in &job.nbrs[e.nbr_off as usize..(e.nbr_off + e.nbr_len) as usize] {
            if s.visited.insert(nb) {
                let (k, c) = score(s, nb);
                s.list.push((k, nb, false));
                scored += c;
            }
        }
        s.list.sort_by_key(|c| (c.0, c.1));
        s.list.truncate(l);
        let mut n = 0;
        for c in s.list.iter_mut().filter(|c| !c.2).take(e.fill as usize) {
            c.2 = true;
            out.chosen[i * MAX_FILL + n] = c.1;
            out.keys[i * MAX_FILL + n] = c.0;
            n += 1;
        }
        out.n_chosen[i] = n as u32;
        out.scored[i] = scored;
    }
    out
}

/// A random sequence of steps over `slots` slots: starts, expansions of chosen nodes with
/// random neighbour lists (duplicates and already visited ids included), random fills.
fn random_steps(
    seed: u64,
    codes: &PqCodes,
    shape: FlashShape,
    steps: usize,
    run: impl FnMut(&StepJob) -> StepOutput,
) {
    random_steps_with(seed, codes, None, codes.n() as u32, shape, steps, run)
}

/// [`random_steps`] over RaBitQ codes of `rq` when it is given (random queries), over
/// `nodes` nodes.
fn random_steps_with(
    seed: u64,
    codes: &PqCodes,
    rq: Option<&crate::quant::rabitq::RaBitQuantizer>,
    nodes: u32,
    shape: FlashShape,
    steps: usize,
    mut run: impl FnMut(&StepJob) -> StepOutput,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = nodes;
    let m = codes.m();
    // Odd seeds: tables without negative entries (the CPU backend then cuts a group's
    // codes short against the list).
    let low = if seed % 2 == 1 { 0.0 } else { -1.0 };
    // Per slot: chosen (node, key) not yet expanded.
    let mut pending: Vec<Vec<(u32, u32)>> = vec![Vec::new(); shape.slots];
    let mut started = vec![false; shape.slots];
    for _ in 0..steps {
        let mut job = StepJob {
            rabitq: rq.is_some(),
            ..StepJob::default()
        };
        for s in 0..shape.slots {
            if rng.gen_bool(0.3) {
                continue;
            }
            let reset = !started[s] || rng.gen_bool(0.05);
            let (node, node_key) = if !reset && !pending[s].is_empty() {
                let i = rng.gen_range(0..pending[s].len().min(2));
                pending[s].remove(i)
            } else {
                (NONE, 0)
            };
            let entry = if reset {
                started[s] = true;
                pending[s].clear();
                if let Some(rq) = rq {
                    let q: Vec<f32> = (0..rq.dim()).map(|_| rng.gen_range(-1.0..1.0)).collect();
                    job.rbq.push(rq.query(&q).unwrap());
                } else {
                    let t: Vec<f32> = (0..m * TABLE_ROW)
                        .map(|_| rng.gen_range(low..4.0))
                        .collect();
                    job.tables.extend_from_slice(&t);
                }
                rng.gen_range(0..n)
            } else {
                NONE
            };
            let off = job.nbrs.len() as u32;
            let deg = if node == NONE && !reset {
                0
            } else {
                rng.gen_range(0..=shape.max_degree)
            };
            for _ in 0..deg {
                // A small id range makes repeats and already visited ids common.
                job.nbrs.push(rng.gen_range(0..n.min(400)));
            }
            job.entries.push(StepEntry {
                slot: s as u32,
                entry,
                node,
                node_key,
                nbr_off: off,
                nbr_len: deg as u32,
                fill: rng.gen_range(0..=3),
            });
        }
        let out = run(&job);
        for (i, e) in job.entries.iter().enumerate() {
            pending[e.slot as usize].extend(out.chosen(i));
        }
    }
}

#[test]
fn cpu_backend_equals_the_model() {
    for (seed, m, l, deg) in [
        (1u64, 8usize, 10usize, 16usize),
        (2, 25, 40, 64),
        (3, 16, 3, 5),
    ] {
        let codes = random_codes(seed, 3000, m);
        let shape = FlashShape {
            slots: 6,
            l,
            max_degree: deg,
            max_visited: 100_000,
        };
        let mut model = vec![ModelSlot::default(); shape.slots];
        let mut session = CpuSession::new(&codes, shape);
        let mut stale = 0;
        let mut chosen = 0;
        random_steps(seed, &codes, shape, 60, |job| {
            session.submit(job).unwrap();
            let mut got = StepOutput::default();
            session.wait(&mut got).unwrap();
            let want = model_step(&codes, l, &mut model, job);
            assert_eq!(got, want, "seed {seed}");
            stale += got.stale.iter().filter(|&&s| s).count();
            chosen += got.n_chosen.iter().sum::<u32>();
            got
        });
        assert!(chosen > 50, "seed {seed}: only {chosen} nodes chosen");
        assert!(
            stale > 0,
            "seed {seed}: the sequences never made a stale step"
        );
    }
}

#[test]
fn malformed_steps_are_refused() {
    let codes = random_codes(9, 100, 8);
    let shape = FlashShape {
        slots: 2,
        l: 10,
        max_degree: 4,
        max_visited: 100,
    };
    let mut s = CpuSession::new(&codes, shape);
    let entry = StepEntry {
        slot: 0,
        entry: 3,
        node: NONE,
        node_key: 0,
        nbr_off: 0,
        nbr_len: 0,
        fill: 1,
    };
    let table = vec![0f32; 8 * TABLE_ROW];
    let bad = [
        StepJob {
            entries: vec![entry],
            ..StepJob::default()
        },
        StepJob {
            entries: vec![StepEntry { slot: 2, ..entry }],
            tables: table.clone(),
            ..StepJob::default()
        },
        StepJob {
            entries: vec![entry, entry],
            tables: [table.clone(), table.clone()].concat(),
            ..StepJob::default()
        },
        StepJob {
            entries: vec![StepEntry {
                nbr_len: 2,
                ..entry
            }],
            nbrs: vec![1, 100],
            tables: table.clone(),
            ..StepJob::default()
        },
        StepJob {
            entries: vec![StepEntry {
                nbr_len: 5,
                ..entry
            }],
            nbrs: vec![1; 5],
            tables: table.clone(),
            ..StepJob::default()
        },
        StepJob {
            entries: vec![StepEntry {
                fill: MAX_FILL as u32 + 1,
                ..entry
            }],
            tables: table.clone(),
            ..StepJob::default()
        },
    ];
    for (i, job) in bad.iter().enumerate() {
        s.submit(job).unwrap();
        let mut out = StepOutput::default();
        let e = s.wait(&mut out).expect_err(&format!("job {i}"));
        assert_eq!(e.kind(), crate::ErrorKind::Internal, "job {i}: {e}");
    }
}

#[test]
fn keys_order_like_total_cmp() {
    let xs = [
        f32::NEG_INFINITY,
        -3.5,
        -0.0,
        0.0,
        1e-30,
        2.0,
        f32::INFINITY,
    ];
    for w in xs.windows(2) {
        assert!(key_of(w[0]) < key_of(w[1]), "{} {}", w[0], w[1]);
    }
    for &x in &xs {
        assert_eq!(dist_of_key(key_of(x)).to_bits(), x.to_bits());
    }
}

#[cfg(feature = "gpu")]
#[test]
fn gpu_backend_equals_the_cpu_backend() {
    use crate::accel::gpu_flash::GpuFlash;
    use std::io::Write;
    for (seed, m, l, deg, slots) in [
        (11u64, 8usize, 10usize, 16usize, 6usize),
        (12, 25, 40, 64, 9),
        (13, 48, 100, 64, 3),
        (14, 16, 3, 5, 70),
    ] {
        let codes = random_codes(seed, 5000, m);
        let g = match GpuFlash::new(&codes) {
            Ok(g) => g,
            Err(e @ crate::accel::AccelError::NoAdapter(_)) => {
                assert!(
                    std::env::var("TRAWL_REQUIRE_GPU").as_deref() != Ok("1"),
                    "TRAWL_REQUIRE_GPU=1 but the GPU backend did not open: {e}"
                );
                let _ = writeln!(std::io::stderr(), "skipping a GPU test: {e}");
                return;
            }
            Err(e) => panic!("the GPU backend failed to open: {e}"),
        };
        let shape = FlashShape {
            slots,
            l,
            max_degree: deg,
            max_visited: 60 * deg + 1,
        };
        let mut gs = g.session(shape).unwrap();
        let mut cs = CpuSession::new(&codes, shape);
        let mut steps = 0;
        random_steps(seed, &codes, shape, 40, |job| {
            gs.submit(job).unwrap();
            let mut got = StepOutput::default();
            gs.wait(&mut got).unwrap();
            cs.submit(job).unwrap();
            let mut want = StepOutput::default();
            cs.wait(&mut want).unwrap();
            assert_eq!(got, want, "seed {seed} step {steps}");
            steps += 1;
            got
        });
    }
}

/// RaBitQ codes of random vectors (`dim`, `bits`, `metric`) and their quantiser.
fn rabitq_codes(
    seed: u64,
    n: usize,
    dim: usize,
    bits: u8,
    metric: crate::kernels::Metric,
) -> (crate::quant::rabitq::RaBitQuantizer, PqCodes) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let data: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let data = crate::data::Matrix::from_vec(data, dim).unwrap();
    let params = crate::quant::rabitq::RbqParams {
        bits,
        ..Default::default()
    };
    let ctl = crate::progress::Control::silent();
    let rq = crate::quant::rabitq::RaBitQuantizer::train(&data, metric, &params, &ctl).unwrap();
    let codes = rq.encode(&data, &ctl).unwrap();
    (rq, codes)
}

#[test]
fn cpu_backend_equals_the_model_on_rabitq_codes() {
    use crate::kernels::Metric;
    for (seed, dim, bits, metric) in [
        (21u64, 100usize, 1u8, Metric::L2),
        (22, 64, 3, Metric::InnerProduct),
        (23, 200, 2, Metric::Cosine),
    ] {
        let (rq, codes) = rabitq_codes(seed, 3000, dim, bits, metric);
        let shape = FlashShape {
            slots: 6,
            l: 20,
            max_degree: 32,
            max_visited: 100_000,
        };
        let mut model = vec![ModelSlot::default(); shape.slots];
        let mut session = CpuSession::new(&codes, shape);
        let mut chosen = 0;
        random_steps_with(
            seed,
            &codes,
            Some(&rq),
            codes.n() as u32,
            shape,
            60,
            |job| {
                session.submit(job).unwrap();
                let mut got = StepOutput::default();
                session.wait(&mut got).unwrap();
                let want = model_step(&codes, shape.l, &mut model, job);
                assert_eq!(got, want, "seed {seed}");
                chosen += got.n_chosen.iter().sum::<u32>();
                got
            },
        );
        assert!(chosen > 50, "seed {seed}: only {chosen} nodes chosen");
    }
}

#[cfg(feature = "gpu")]
#[test]
fn gpu_backend_equals_the_cpu_backend_on_rabitq_codes() {
    use crate::accel::gpu_flash::GpuFlash;
    use crate::kernels::Metric;
    use std::io::Write;
    for (seed, dim, bits, metric, slots) in [
        (31u64, 100usize, 1u8, Metric::L2, 6usize),
        (32, 128, 2, Metric::InnerProduct, 9),
        (33, 96, 4, Metric::Cosine, 40),
    ] {
        let (rq, codes) = rabitq_codes(seed, 4000, dim, bits, metric);
        let g = match GpuFlash::new(&codes) {
            Ok(g) => g,
            Err(e @ crate::accel::AccelError::NoAdapter(_)) => {
                assert!(
                    std::env::var("TRAWL_REQUIRE_GPU").as_deref() != Ok("1"),
                    "TRAWL_REQUIRE_GPU=1 but the GPU backend did not open: {e}"
                );
                let _ = writeln!(std::io::stderr(), "skipping a GPU test: {e}");
                return;
            }
            Err(e) => panic!("the GPU backend failed to open: {e}"),
        };
        let shape = FlashShape {
            slots,
            l: 30,
            max_degree: 48,
            max_visited: 60 * 48 + 1,
        };
        let mut gs = g.session(shape).unwrap();
        let mut cs = CpuSession::new(&codes, shape);
        let mut steps = 0;
        let mut scored = 0u32;
        random_steps_with(
            seed,
            &codes,
            Some(&rq),
            codes.n() as u32,
            shape,
            40,
            |job| {
                gs.submit(job).unwrap();
                let mut got = StepOutput::default();
                gs.wait(&mut got).unwrap();
                cs.submit(job).unwrap();
                let mut want = StepOutput::default();
                cs.wait(&mut want).unwrap();
                assert_eq!(got, want, "seed {seed} step {steps}");
                steps += 1;
                scored += got.scored.iter().sum::<u32>();
                got
            },
        );
        assert!(scored > 1000, "seed {seed}: only {scored} codes scored");
    }
}

/// Random groups over `n` codes: capacity `cap`, counts from 0 to `cap` (mostly full).
fn random_groups(seed: u64, n: usize, cap: usize) -> Groups {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let counts = (0..n / cap)
        .map(|_| {
            if rng.gen_bool(0.1) {
                rng.gen_range(0..=cap as u32)
            } else {
                cap as u32
            }
        })
        .collect();
    Groups::new(cap, counts).unwrap()
}

#[test]
fn grouped_cpu_backend_equals_the_model() {
    for (seed, m, l, deg, cap) in [
        (41u64, 8usize, 10usize, 16usize, 4usize),
        (42, 25, 20, 40, 15),
        (43, 16, 3, 5, 2),
        (45, 32, 30, 64, 7),
    ] {
        let codes = random_codes(seed, 4000, m);
        let groups = random_groups(seed, codes.n(), cap);
        let shape = FlashShape {
            slots: 5,
            l,
            max_degree: deg,
            max_visited: 100_000,
        };
        let mut model = vec![ModelSlot::default(); shape.slots];
        let flash = CpuFlash::grouped(&codes, &groups).unwrap();
        let mut session = flash.session(shape).unwrap();
        let (mut chosen, mut scored) = (0u32, 0u32);
        let nodes = groups.nodes() as u32;
        random_steps_with(seed, &codes, None, nodes, shape, 60, |job| {
            session.submit(job).unwrap();
            let mut got = StepOutput::default();
            session.wait(&mut got).unwrap();
            let want = model_step_grouped(&codes, Some(&groups), l, &mut model, job);
            assert_eq!(got, want, "seed {seed}");
            chosen += got.n_chosen.iter().sum::<u32>();
            scored += got.scored.iter().sum::<u32>();
            got
        });
        assert!(chosen > 50, "seed {seed}: only {chosen} nodes chosen");
        assert!(scored > chosen, "seed {seed}: {scored} codes scored");
    }
}

#[test]
fn groups_are_checked() {
    assert!(Groups::new(0, vec![]).is_err());
    assert!(Groups::new(4, vec![4, 5]).is_err());
    let g = Groups::new(4, vec![4, 2, 4]).unwrap();
    assert_eq!((g.nodes(), g.members(1), g.members(2)), (3, 4..6, 8..12));
    let codes = random_codes(5, 11, 8);
    assert!(
        CpuFlash::grouped(&codes, &g).is_err(),
        "12 codes needed, 11 there"
    );
    let codes = random_codes(5, 12, 8);
    let flash = CpuFlash::grouped(&codes, &g).unwrap();
    // Node ids are groups: a start node past the groups is refused.
    let shape = FlashShape {
        slots: 1,
        l: 4,
        max_degree: 2,
        max_visited: 10,
    };
    let mut s = flash.session(shape).unwrap();
    let job = StepJob {
        entries: vec![StepEntry {
            slot: 0,
            entry: 3,
            node: NONE,
            node_key: 0,
            nbr_off: 0,
            nbr_len: 0,
            fill: 1,
        }],
        tables: vec![0.0; 8 * TABLE_ROW],
        ..StepJob::default()
    };
    s.submit(&job).unwrap();
    assert!(s.wait(&mut StepOutput::default()).is_err());
}

#[cfg(feature = "gpu")]
#[test]
fn grouped_gpu_backend_equals_the_cpu_backend() {
    use crate::accel::gpu_flash::GpuFlash;
    use std::io::Write;
    for (seed, m, l, deg, cap, slots) in [
        (51u64, 8usize, 10usize, 16usize, 4usize, 6usize),
        (52, 25, 40, 64, 15, 9),
        (53, 48, 25, 32, 6, 40),
    ] {
        let codes = random_codes(seed, 6000, m);
        let groups = random_groups(seed, codes.n(), cap);
        let g = match GpuFlash::grouped(&codes, Some(&groups)) {
            Ok(g) => g,
            Err(e @ crate::accel::AccelError::NoAdapter(_)) => {
                assert!(
                    std::env::var("TRAWL_REQUIRE_GPU").as_deref() != Ok("1"),
                    "TRAWL_REQUIRE_GPU=1 but the GPU backend did not open: {e}"
                );
                let _ = writeln!(std::io::stderr(), "skipping a GPU test: {e}");
                return;
            }
            Err(e) => panic!("the GPU backend failed to open: {e}"),
        };
        let shape = FlashShape {
            slots,
            l,
            max_degree: deg,
            max_visited: 60 * deg + 1,
        };
        let mut gs = g.session(shape).unwrap();
        let cpu = CpuFlash::grouped(&codes, &groups).unwrap();
        let mut cs = cpu.session(shape).unwrap();
        let mut steps = 0;
        let nodes = groups.nodes() as u32;
        random_steps_with(seed, &codes, None, nodes, shape, 40, |job| {
            gs.submit(job).unwrap();
            let mut got = StepOutput::default();
            gs.wait(&mut got).unwrap();
            cs.submit(job).unwrap();
            let mut want = StepOutput::default();
            cs.wait(&mut want).unwrap();
            assert_eq!(got, want, "seed {seed} step {steps}");
            steps += 1;
            got
        });
    }
}

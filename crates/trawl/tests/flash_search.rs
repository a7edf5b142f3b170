//! FlashANNS's batch search end to end: staleness 0 equals strict best-first search (beam
//! search with width 1), the relaxed search's step bound and recall, results independent of
//! grain, batch, threads and engine, exact read accounting, a damaged page failing its query
//! alone, the GPU backend (lavapipe in CI) against the CPU backend, parameter errors.

mod common;

use std::io::Write;

use common::{
    build, data, flash_counts as counts, flash_params as flash, open, same_results, truth, Tap,
};
use trawl::io::EngineKind;
use trawl::kinds::graph::search::{FlashParams, Grain, SearchParams, Searcher, Strategy};
use trawl::kinds::graph::{DiskIndex, OpenOptions};
use trawl::search::SearchError;
use trawl::vamana::recall_at_k;
use trawl::Metric;

#[test]
fn staleness_zero_is_strict_best_first_search() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(6_000, 60, 32, 31);
    build(&base, dir.path(), Metric::L2, 8);
    let ix = open(dir.path());
    for l in [10, 40] {
        let strict = ix
            .search_batch(&q, &SearchParams::beam(10, l, 1), 1)
            .unwrap();
        for batch in [1, 8] {
            let f = ix
                .search_batch(&q, &flash(l, 0, batch, Grain::Query), 2)
                .unwrap();
            same_results(&f, &strict, &format!("L {l} batch {batch}"));
            // Staleness 1 that never gets past its strict steps is strict search too.
            let never = SearchParams {
                strategy: Strategy::Flash(FlashParams {
                    batch,
                    staleness: 1,
                    strict_steps: usize::MAX,
                    ..FlashParams::default()
                }),
                ..flash(l, 1, batch, Grain::Query)
            };
            same_results(
                &ix.search_batch(&q, &never, 2).unwrap(),
                &strict,
                &format!("L {l} batch {batch}, strict steps"),
            );
            // Seeded by the entry index, too (the seeds enter the list as beam search's do).
            let seeded = |p: SearchParams| SearchParams {
                entry_list: 10,
                ..p
            };
            let strict_e = ix
                .search_batch(&q, &seeded(SearchParams::beam(10, l, 1)), 1)
                .unwrap();
            let flash_e = ix
                .search_batch(&q, &seeded(flash(l, 0, batch, Grain::Query)), 2)
                .unwrap();
            same_results(
                &flash_e,
                &strict_e,
                &format!("L {l} batch {batch}, entry list"),
            );
            for (a, b) in flash_e.stats.iter().zip(&strict_e.stats) {
                assert_eq!(a.flash.steps, b.traversal.nodes_expanded);
                assert_eq!(a.traversal.pq_distances, b.traversal.pq_distances);
                assert_eq!(a.traversal.entry_distances, b.traversal.entry_distances);
                assert!(a.traversal.entry_distances > 0);
            }
            for (i, (a, b)) in f.stats.iter().zip(&strict.stats).enumerate() {
                assert_eq!(a.flash.stale_steps, 0, "query {i}");
                assert_eq!(a.flash.steps, b.traversal.nodes_expanded, "query {i}");
                assert_eq!(
                    a.traversal.pq_distances, b.traversal.pq_distances,
                    "query {i}"
                );
                assert_eq!(a.io.io_requests, b.io.io_requests, "query {i}");
            }
        }
    }
}

#[test]
fn relaxed_search_converges_within_the_step_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(8_000, 200, 32, 32);
    build(&base, dir.path(), Metric::L2, 8);
    let ix = open(dir.path());
    let gt = truth(&base, &q, Metric::L2);
    let l = 40;
    let strict = ix
        .search_batch(&q, &flash(l, 0, 16, Grain::Query), 2)
        .unwrap();
    let r0 = recall_at_k(&strict.ids, 10, &gt).unwrap();
    for k in [1, 2, 3] {
        let f = ix
            .search_batch(&q, &flash(l, k, 16, Grain::Query), 2)
            .unwrap();
        let rk = recall_at_k(&f.ids, 10, &gt).unwrap();
        assert!(rk >= r0 - 0.02, "staleness {k}: recall {rk} vs {r0}");
        let (mut s0, mut sk, mut stale) = (0, 0, 0);
        for (i, (a, b)) in f.stats.iter().zip(&strict.stats).enumerate() {
            // §4.1.3: the relaxed path is bounded by the strict one plus k per step.
            assert!(
                a.flash.steps <= (k as u64 + 1) * b.flash.steps,
                "staleness {k}, query {i}: {} steps vs {} strict",
                a.flash.steps,
                b.flash.steps
            );
            assert!(a.flash.stale_steps <= a.flash.steps);
            s0 += b.flash.steps;
            sk += a.flash.steps;
            stale += a.flash.stale_steps;
        }
        assert!(stale > 0, "staleness {k}: no stale step at all");
        // Strict first steps (the greedy descent, where a read chosen early is most often
        // stale) leave fewer stale steps, and the same step bound holds.
        let warm = SearchParams {
            strategy: Strategy::Flash(FlashParams {
                batch: 16,
                staleness: k,
                strict_steps: 6,
                ..FlashParams::default()
            }),
            ..flash(l, k, 16, Grain::Query)
        };
        let w = ix.search_batch(&q, &warm, 2).unwrap();
        let stale_w: u64 = w.stats.iter().map(|s| s.flash.stale_steps).sum();
        assert!(
            stale_w < stale,
            "staleness {k}: {stale_w} stale steps after strict ones vs {stale}"
        );
        for (a, b) in w.stats.iter().zip(&strict.stats) {
            assert!(a.flash.steps <= (k as u64 + 1) * b.flash.steps);
        }
        eprintln!(
            "staleness {k}: steps {:.1} vs {:.1} strict (+{:.1}%), stale {:.1}%, recall {rk:.3} vs {r0:.3}",
            sk as f64 / q.n() as f64,
            s0 as f64 / q.n() as f64,
            100.0 * (sk as f64 / s0 as f64 - 1.0),
            100.0 * stale as f64 / sk as f64
        );
    }
}

#[test]
fn results_do_not_depend_on_grain_batch_threads_or_engine() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(5_000, 80, 24, 33);
    build(&base, dir.path(), Metric::Cosine, 8);
    let ix = open(dir.path());
    let want = ix
        .search_batch(&q, &flash(30, 1, 8, Grain::Query), 1)
        .unwrap();
    let engines = [
        EngineKind::Auto,
        EngineKind::Pread,
        EngineKind::Memory,
        "sim:50".parse().unwrap(),
    ];
    for engine in engines {
        let ix = DiskIndex::open(
            dir.path(),
            OpenOptions {
                engine,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        for grain in [Grain::Query, Grain::Kernel] {
            for (batch, threads) in [(1, 1), (7, 2), (32, 1), (80, 2)] {
                let got = ix
                    .search_batch(&q, &flash(30, 1, batch, grain), threads)
                    .unwrap();
                let what = format!("{engine:?} {grain:?} batch {batch} threads {threads}");
                same_results(&got, &want, &what);
                for (a, b) in got.stats.iter().zip(&want.stats) {
                    assert_eq!(counts(a), counts(b), "{what}");
                }
            }
        }
    }
}

#[test]
fn every_read_is_expanded_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(5_000, 100, 24, 34);
    build(&base, dir.path(), Metric::L2, 8);
    let ix = open(dir.path());
    for (k, batch, grain) in [
        (0, 4, Grain::Query),
        (1, 16, Grain::Query),
        (2, 9, Grain::Kernel),
    ] {
        let mut cfg = ix.engine_config();
        cfg.depth = batch * (k + 1);
        let engine = ix.file().engine(EngineKind::Auto, cfg).unwrap();
        let (tap, seen) = Tap::new(engine);
        let mut s = Searcher::with_engine(ix.view(), Box::new(tap));
        let p = flash(30, k, batch, grain);
        let mut all = Vec::new();
        let mut next = 0usize;
        s.search_stream(
            &p,
            1,
            &mut || {
                next += 1;
                (next <= q.n()).then(|| (next - 1, q.row(next - 1)))
            },
            &mut |_, hits, st| all.push((hits.len(), st)),
        )
        .unwrap();
        assert_eq!(all.len(), q.n());
        let seen = *seen.lock().unwrap();
        let requests: u64 = all.iter().map(|(_, st)| st.io.io_requests).sum();
        let steps: u64 = all.iter().map(|(_, st)| st.flash.steps).sum();
        let pages: u64 = all.iter().map(|(_, st)| st.io.pages_read).sum();
        assert_eq!(seen.requests, requests, "staleness {k}: requests");
        assert_eq!(
            seen.requests, steps,
            "staleness {k}: a read not expanded once"
        );
        assert_eq!(seen.pages, pages);
        assert_eq!(seen.bytes, pages * 4096);
        assert_eq!(seen.busy, 0, "a slot left busy");
        assert!(
            seen.max_busy as usize <= batch * (k + 1),
            "{} slots busy at once",
            seen.max_busy
        );
        assert!(all.iter().all(|(n, _)| *n == 10));
        assert_eq!(s.engine().in_flight(), 0);
    }
}

#[test]
fn a_damaged_page_fails_its_query_only() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(4_000, 60, 16, 35);
    build(&base, dir.path(), Metric::L2, 8);
    let clean = {
        let ix = open(dir.path());
        ix.search_batch(&q, &flash(30, 1, 16, Grain::Query), 1)
            .unwrap()
    };
    // Damage the page of query 0's nearest result (on its path, and on few others').
    let ix = open(dir.path());
    let (page, at) = ix.packed().unwrap().locate(clean.ids[0]);
    let (medoid_page, _) = ix.packed().unwrap().locate(ix.medoid());
    assert_ne!(page, medoid_page, "pick another node");
    drop(ix);
    let path = dir
        .path()
        .join(trawl::kinds::graph::layout::packed::FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[page as usize * 4096 + at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let ix = open(dir.path());
    for grain in [Grain::Query, Grain::Kernel] {
        let mut s = ix.searcher().unwrap();
        let p = flash(30, 1, 16, grain);
        let mut ok = vec![None; q.n()];
        let mut failed = Vec::new();
        let mut next = 0usize;
        s.search_stream_partial(
            &p,
            1,
            &mut || {
                next += 1;
                (next <= q.n()).then(|| (next - 1, q.row(next - 1)))
            },
            &mut |i, hits, _| ok[i] = Some(hits.to_vec()),
            &mut |i, e| failed.push((i, e)),
        )
        .unwrap();
        assert!(failed.iter().any(|(i, _)| *i == 0), "query 0 read the page");
        for (i, e) in &failed {
            assert!(ok[*i].is_none(), "query {i} both failed and answered");
            assert!(
                matches!(e, SearchError::Corrupt { page: p, .. } if *p == page),
                "query {i}: {e}"
            );
        }
        let answered: Vec<usize> = (0..q.n()).filter(|&i| ok[i].is_some()).collect();
        assert_eq!(answered.len() + failed.len(), q.n());
        assert!(!answered.is_empty(), "every query failed");
        for i in answered {
            let hits = ok[i].as_ref().unwrap();
            let want: Vec<u32> = clean.ids[i * 10..(i + 1) * 10].to_vec();
            let got: Vec<u32> = hits.iter().map(|h| h.0).collect();
            assert_eq!(got, want, "{grain:?}: query {i} changed");
        }
        assert_eq!(s.engine().in_flight(), 0);
        // The batch API fails the batch (no silent hole in its results).
        assert!(matches!(
            ix.search_batch(&q, &p, 2),
            Err(SearchError::Corrupt { .. })
        ));
    }
}

#[test]
fn gpu_backend_gives_the_cpu_results() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(5_000, 50, 32, 36);
    build(&base, dir.path(), Metric::L2, 12);
    let cpu = open(dir.path());
    let gpu = match DiskIndex::open(
        dir.path(),
        OpenOptions {
            accel: trawl::accel::AccelKind::Gpu,
            ..OpenOptions::default()
        },
    ) {
        Ok(ix) => ix,
        Err(e) => {
            assert!(
                std::env::var("TRAWL_REQUIRE_GPU").as_deref() != Ok("1"),
                "TRAWL_REQUIRE_GPU=1 but the GPU backend did not open: {e}"
            );
            let _ = writeln!(std::io::stderr(), "skipping a GPU test: {e}");
            return;
        }
    };
    assert_eq!(gpu.flash_accel_info().backend, "gpu");
    for (k, grain) in [(0, Grain::Query), (1, Grain::Query), (1, Grain::Kernel)] {
        let p = flash(40, k, 24, grain);
        let want = cpu.search_batch(&q, &p, 1).unwrap();
        let got = gpu.search_batch(&q, &p, 2).unwrap();
        same_results(&got, &want, &format!("staleness {k} {grain:?}"));
        for (a, b) in got.stats.iter().zip(&want.stats) {
            assert_eq!(counts(a), counts(b));
        }
    }
}

#[test]
fn flash_parameters_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(2_000, 5, 16, 37);
    build(&base, dir.path(), Metric::L2, 8);
    let ix = open(dir.path());
    let with = |f: FlashParams| SearchParams {
        strategy: Strategy::Flash(f),
        ..SearchParams::beam(10, 20, 1)
    };
    for bad in [
        FlashParams {
            batch: 0,
            ..FlashParams::default()
        },
        FlashParams {
            staleness: 8,
            ..FlashParams::default()
        },
        FlashParams {
            batch: 100_000,
            ..FlashParams::default()
        },
    ] {
        let e = ix.search_batch(&q, &with(bad), 1).unwrap_err();
        assert_eq!(e.kind(), trawl::ErrorKind::InvalidInput, "{bad:?}: {e}");
    }
    // Seeds from the entry index need one.
    let seeded = SearchParams {
        entry_list: 10,
        ..with(FlashParams::default())
    };
    assert_eq!(ix.search_batch(&q, &seeded, 1).unwrap().ids.len(), 50);
    let plain = tempfile::tempdir().unwrap();
    trawl::kinds::graph::build_index(
        &base,
        plain.path(),
        &trawl::kinds::graph::IndexParams {
            attrs: None,
            quant: Default::default(),
            entry: None,
            ..common::params(Metric::L2, 8)
        },
        &trawl::progress::Control::silent(),
    )
    .unwrap();
    assert!(matches!(
        open(plain.path()).search_batch(&q, &seeded, 1),
        Err(SearchError::NoEntryIndex)
    ));
    // A batch larger than the engine's depth on a searcher made by hand is refused.
    let mut s = ix.searcher().unwrap();
    let mut hits = Vec::new();
    let big = with(FlashParams {
        batch: 64,
        ..FlashParams::default()
    });
    assert!(matches!(
        s.search(q.row(0), &big, &mut hits),
        Err(SearchError::Unsupported(_))
    ));
    s.search(q.row(0), &with(FlashParams::default()), &mut hits)
        .unwrap();
    assert_eq!(hits.len(), 10);
    // The decoupled layout holds no records: refused.
    ix.write_layout(
        trawl::kinds::graph::IndexLayout::Decoupled,
        &Default::default(),
        &trawl::progress::Control::silent(),
    )
    .unwrap();
    let d = DiskIndex::open(
        dir.path(),
        OpenOptions {
            layout: trawl::kinds::graph::IndexLayout::Decoupled,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert!(matches!(
        d.search_batch(&q, &with(FlashParams::default()), 1),
        Err(SearchError::Unsupported(_))
    ));
}

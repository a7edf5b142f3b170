//! The flash strategy over the page-node layout: a node is a page, scored on the accelerator
//! by the nearest code among its vectors. Staleness 0 equals beam search with one read per
//! round trip over the pages (which `pages.rs` checks against a best-first search written from
//! the files), seeded or not; the relaxed search's results do not depend on the batch, the
//! grain or the threads; every read is one page, expanded once; the GPU backend (lavapipe in
//! CI) gives the CPU backend's results.

mod common;

use std::io::Write;

use common::{
    build, data, flash_counts as counts, flash_params as flash, same_results, truth, Tap,
};
use trawl::data::Matrix;
use trawl::io::EngineKind;
use trawl::kinds::graph::layout::pages::build::PageParams;
use trawl::kinds::graph::search::{Grain, SearchParams, Searcher};
use trawl::kinds::graph::{BatchOutput, DiskIndex, IndexLayout, OpenOptions};
use trawl::progress::Control;
use trawl::search::QueryStats;
use trawl::vamana::recall_at_k;
use trawl::Metric;

fn open_pages(
    dir: &std::path::Path,
    opts: OpenOptions,
) -> Result<DiskIndex, trawl::kinds::graph::OpenError> {
    DiskIndex::open(
        dir,
        OpenOptions {
            layout: IndexLayout::Pages,
            ..opts
        },
    )
}

/// A built index (with its entry index) and its page-node layout.
fn setup(
    metric: Metric,
    n: usize,
    dim: usize,
    seed: u64,
) -> (tempfile::TempDir, Matrix<f32>, Matrix<f32>) {
    let (base, q) = data::<f32>(n, 60, dim, seed);
    let dir = tempfile::tempdir().unwrap();
    build(&base, dir.path(), metric, 8);
    let rep = common::open(dir.path())
        .write_pages(&PageParams::default(), &Control::silent())
        .unwrap();
    let p = rep.pages.unwrap();
    assert!(p.pages > 10 && p.capacity > 1, "{p:?}");
    (dir, base, q)
}

#[test]
fn staleness_zero_is_beam_search_over_the_pages() {
    for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
        let (dir, ..) = setup(metric, 4_000, 16, 41);
        let (_, q) = data::<f32>(4_000, 60, 16, 41);
        let ix = open_pages(dir.path(), OpenOptions::default()).unwrap();
        for l in [6, 20] {
            for entry_list in [0, 10] {
                let seeded = |p: SearchParams| SearchParams { entry_list, ..p };
                let strict = ix
                    .search_batch(&q, &seeded(SearchParams::beam(10, l, 1)), 1)
                    .unwrap();
                for batch in [1, 8] {
                    let what = format!("{metric:?} L {l} entry list {entry_list} batch {batch}");
                    let f = ix
                        .search_batch(&q, &seeded(flash(l, 0, batch, Grain::Query)), 2)
                        .unwrap();
                    same_results(&f, &strict, &what);
                    for (i, (a, b)) in f.stats.iter().zip(&strict.stats).enumerate() {
                        assert_eq!(a.flash.stale_steps, 0, "{what} query {i}");
                        assert_eq!(
                            a.flash.steps, b.traversal.nodes_expanded,
                            "{what} query {i}"
                        );
                        // Every code of every page offered is scored; every vector of every
                        // page read is measured exactly.
                        assert_eq!(a.traversal.pq_distances, b.traversal.pq_distances, "{what}");
                        assert_eq!(
                            a.traversal.exact_distances, b.traversal.exact_distances,
                            "{what}"
                        );
                        assert_eq!(a.io.io_requests, b.io.io_requests, "{what}");
                        assert_eq!(a.io.pages_read, a.flash.steps, "{what}: one page a read");
                        assert!(a.traversal.exact_distances > a.io.pages_read, "{what}");
                        assert_eq!(
                            a.traversal.entry_distances, b.traversal.entry_distances,
                            "{what}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn relaxed_search_finds_the_neighbours_whatever_the_batch_grain_or_threads() {
    let (dir, base, q) = setup(Metric::L2, 6_000, 24, 42);
    let t = truth(&base, &q, Metric::L2);
    let ix = open_pages(dir.path(), OpenOptions::default()).unwrap();
    let want = ix
        .search_batch(&q, &flash(20, 1, 8, Grain::Query), 1)
        .unwrap();
    let strict = ix
        .search_batch(&q, &SearchParams::beam(10, 20, 1), 1)
        .unwrap();
    let r_flash = recall_at_k(&want.ids, 10, &t).unwrap();
    let r_beam = recall_at_k(&strict.ids, 10, &t).unwrap();
    assert!(r_flash >= 0.9, "recall {r_flash}");
    assert!(r_flash >= r_beam - 0.02, "flash {r_flash}, beam {r_beam}");
    let stale: u64 = want.stats.iter().map(|s| s.flash.stale_steps).sum();
    assert!(stale > 0, "staleness 1 never made a stale step");
    for engine in [
        EngineKind::Auto,
        EngineKind::Memory,
        "sim:40".parse().unwrap(),
    ] {
        let ix = open_pages(
            dir.path(),
            OpenOptions {
                engine,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        for grain in [Grain::Query, Grain::Kernel] {
            for (batch, threads) in [(1, 1), (7, 2), (32, 1)] {
                let got = ix
                    .search_batch(&q, &flash(20, 1, batch, grain), threads)
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
fn every_read_is_one_page_expanded_once() {
    let (dir, _, q) = setup(Metric::L2, 4_000, 16, 43);
    let ix = open_pages(dir.path(), OpenOptions::default()).unwrap();
    for (k, batch, grain) in [(0, 4, Grain::Query), (2, 9, Grain::Kernel)] {
        let mut cfg = ix.engine_config();
        cfg.depth = batch * (k + 1);
        let engine = ix.file().engine(EngineKind::Auto, cfg).unwrap();
        let (tap, seen) = Tap::new(engine);
        let mut s = Searcher::with_engine(ix.view(), Box::new(tap));
        let mut all = Vec::new();
        let mut next = 0usize;
        s.search_stream(
            &flash(15, k, batch, grain),
            1,
            &mut || {
                next += 1;
                (next <= q.n()).then(|| (next - 1, q.row(next - 1)))
            },
            &mut |_, hits, st| all.push((hits.len(), st)),
        )
        .unwrap();
        let seen = *seen.lock().unwrap();
        let steps: u64 = all.iter().map(|(_, st)| st.flash.steps).sum();
        let pages: u64 = all.iter().map(|(_, st)| st.io.pages_read).sum();
        assert_eq!(
            seen.requests, steps,
            "staleness {k}: a read not expanded once"
        );
        assert_eq!(seen.pages, pages);
        assert_eq!(seen.pages, seen.requests, "a read is one page");
        assert_eq!(seen.bytes, pages * 4096);
        assert_eq!(seen.busy, 0, "a slot left busy");
        assert!(all.iter().all(|(n, _)| *n == 10));
    }
}

#[test]
fn gpu_backend_gives_the_cpu_results_over_pages() {
    let (dir, _, q) = setup(Metric::L2, 5_000, 32, 44);
    let cpu = open_pages(dir.path(), OpenOptions::default()).unwrap();
    let gpu = match open_pages(
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
        let p = flash(20, k, 24, grain);
        let want = cpu.search_batch(&q, &p, 1).unwrap();
        let got = gpu.search_batch(&q, &p, 2).unwrap();
        same_results(&got, &want, &format!("staleness {k} {grain:?}"));
        for (a, b) in got.stats.iter().zip(&want.stats) {
            assert_eq!(counts(a), counts(b));
        }
    }
}

#[test]
fn cached_pages_are_expanded_without_a_read_with_the_same_results() {
    let (dir, _, q) = setup(Metric::L2, 4_000, 16, 45);
    let mut ix = open_pages(dir.path(), OpenOptions::default()).unwrap();
    for grain in [Grain::Query, Grain::Kernel] {
        let p = flash(15, 1, 8, grain);
        let cold = ix.search_batch(&q, &p, 1).unwrap();
        let total = ix.layout().pages().unwrap().file().meta().pages as usize;
        ix.load_cache(
            total / 4,
            trawl::kinds::graph::search::CachePolicy::default(),
            1,
            &Control::silent(),
        )
        .unwrap();
        let warm = ix.search_batch(&q, &p, 2).unwrap();
        same_results(&warm, &cold, &format!("{grain:?}"));
        let sum = |o: &BatchOutput, f: fn(&QueryStats) -> u64| o.stats.iter().map(f).sum::<u64>();
        let hits = sum(&warm, |s| s.traversal.cache_hits);
        assert!(hits > 0);
        assert!(
            warm.stats.iter().all(|s| s.traversal.cache_hits >= 1),
            "the medoid's page"
        );
        assert_eq!(
            sum(&cold, |s| s.io.pages_read),
            sum(&warm, |s| s.io.pages_read) + hits,
            "every cached page saves one read"
        );
        assert_eq!(sum(&cold, |s| s.flash.steps), sum(&warm, |s| s.flash.steps));
        ix = open_pages(dir.path(), OpenOptions::default()).unwrap();
    }
}

//! The page-node layout (PageANN): written from a built index and searched with beam search
//! and PipeSearch. Its results equal a best-first search over the page graph written here
//! (exact top-k over the vectors of the pages it read); reading every page gives the exact
//! answer; hidden vectors and damage behave as documented; updates keep the page nodes (`pages_updates.rs`).

mod common;

use std::collections::HashSet;

use common::{build, data, truth};
use trawl::data::Matrix;
use trawl::kinds::graph::layout::pages::build::PageParams;
use trawl::kinds::graph::layout::pages::{PageFile, FILE_NAME};
use trawl::kinds::graph::search::{PipeParams, SearchParams, Strategy};
use trawl::kinds::graph::{DiskIndex, IndexLayout, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqCodes;
use trawl::quant::Quantiser;
use trawl::vamana::recall_at_k;
use trawl::Metric;

fn open_pages(dir: &std::path::Path) -> DiskIndex {
    DiskIndex::open(
        dir,
        OpenOptions {
            layout: IndexLayout::Pages,
            ..OpenOptions::default()
        },
    )
    .unwrap()
}

/// A built index with its page-node layout.
fn setup(
    metric: Metric,
    n: usize,
    dim: usize,
    params: PageParams,
) -> (tempfile::TempDir, Matrix<f32>, Matrix<f32>) {
    let (base, q) = data::<f32>(n, 40, dim, 21);
    let dir = tempfile::tempdir().unwrap();
    build(&base, dir.path(), metric, 8);
    let rep = common::open(dir.path())
        .write_pages(&params, &Control::silent())
        .unwrap();
    let p = rep.pages.unwrap();
    assert!(p.pages > 1 && p.capacity > 1, "{p:?}");
    (dir, base, q)
}

/// Beam search with one read per round trip over the page graph, written from the files:
/// pages scored by their nearest PQ code, the `l` best kept (ties by page), every page read
/// scored exactly; the `k` nearest vectors of the pages read, with their exact distances.
fn reference(
    dir: &std::path::Path,
    base: &Matrix<f32>,
    query: &[f32],
    metric: Metric,
    l: usize,
    k: usize,
) -> Vec<(u32, f32)> {
    let pf = PageFile::open(&dir.join(FILE_NAME)).unwrap();
    let raw = std::fs::read(dir.join(FILE_NAME)).unwrap();
    let pq = Quantiser::load(&dir.join("pq.trawl")).unwrap();
    let codes = PqCodes::load(&dir.join("pq-codes.trawl")).unwrap();
    let mut table = pq.new_query();
    pq.fill_query(query, &mut table).unwrap();
    let page = |p: u32| &raw[(1 + p as usize) * 4096..(2 + p as usize) * 4096];
    let score = |p: u32| {
        let v = pf.decode(u64::from(p), page(p)).unwrap();
        v.ids()
            .map(|id| table.distance(codes.code(id as usize)))
            .fold(f32::INFINITY, f32::min)
    };
    let mut list: Vec<(f32, u32, bool)> = Vec::new();
    let mut seen = HashSet::new();
    let start = pf.page_of(pf.meta().medoid);
    seen.insert(start);
    list.push((score(start), start, false));
    let mut full: Vec<(f32, u32)> = Vec::new();
    let mut nbrs = Vec::new();
    while let Some(i) = list.iter().position(|c| !c.2) {
        list[i].2 = true;
        let p = list[i].1;
        let v = pf.decode(u64::from(p), page(p)).unwrap();
        for id in v.ids() {
            full.push((
                trawl::kernels::distance(metric, query, base.row(id as usize)),
                id,
            ));
        }
        pf.neighbors(u64::from(p), &v, &mut nbrs).unwrap();
        for &q in &nbrs {
            if !seen.insert(q) {
                continue;
            }
            let d = score(q);
            let full_list = list.len() == l;
            if full_list && (d, q) >= (list[l - 1].0, list[l - 1].1) {
                continue;
            }
            let at = list.partition_point(|c| (c.0, c.1) < (d, q));
            list.insert(at, (d, q, false));
            list.truncate(l);
        }
    }
    full.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    full.into_iter().take(k).map(|(d, id)| (id, d)).collect()
}

#[test]
fn results_equal_a_best_first_search_over_the_page_graph() {
    for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
        let (dir, base, q) = setup(metric, 3_000, 16, PageParams::default());
        let ix = open_pages(dir.path());
        for l in [10, 25] {
            let out = ix
                .search_batch(&q, &SearchParams::beam(10, l, 1), 2)
                .unwrap();
            for i in 0..q.n() {
                let want = reference(dir.path(), &base, q.row(i), metric, l, 10);
                let got: Vec<(u32, f32)> = (0..10)
                    .map(|j| (out.ids[i * 10 + j], out.dists[i * 10 + j]))
                    .collect();
                assert_eq!(got, want, "{metric:?} L {l} query {i}");
                // One read per page, each page once; every vector of a read page scored.
                let s = &out.stats[i];
                assert_eq!(s.io.pages_read, s.traversal.nodes_expanded);
                assert!(s.traversal.exact_distances >= s.io.pages_read);
            }
        }
    }
}

#[test]
fn reading_every_page_gives_the_exact_answer_and_recall_grows_with_the_list() {
    for metric in [Metric::L2, Metric::Cosine] {
        let (dir, base, q) = setup(metric, 4_000, 24, PageParams::default());
        let ix = open_pages(dir.path());
        let gt = truth(&base, &q, metric);
        let pages = PageFile::open(&dir.path().join(FILE_NAME))
            .unwrap()
            .meta()
            .pages as usize;
        let all = ix
            .search_batch(&q, &SearchParams::beam(10, pages, 8), 2)
            .unwrap();
        assert_eq!(all.ids, gt.ids);
        let mut last = 0.0;
        for l in [10, 20, 40] {
            for strategy in ["beam", "pipe"] {
                let p = match strategy {
                    "beam" => SearchParams::beam(10, l, 4),
                    _ => SearchParams {
                        strategy: Strategy::Pipe(PipeParams::default()),
                        ..SearchParams::beam(10, l, 4)
                    },
                };
                let out = ix.search_batch(&q, &p, 2).unwrap();
                let r = recall_at_k(&out.ids, 10, &gt).unwrap();
                if strategy == "beam" {
                    assert!(r >= last - 0.01, "{metric:?} L {l}: {r} after {last}");
                    last = r;
                }
                assert!(r > 0.8, "{metric:?} {strategy} L {l}: recall {r}");
            }
        }
        assert!(last > 0.97, "{metric:?}: {last}");
    }
}

#[test]
fn a_hidden_vector_is_never_returned_but_its_page_is_searched() {
    let (dir, base, _) = setup(Metric::L2, 3_000, 16, PageParams::default());
    let ix = open_pages(dir.path());
    let rows: Vec<f32> = (0..50).flat_map(|i| base.row(i * 7).to_vec()).collect();
    let hidden: std::sync::Arc<[u32]> = (0..50).map(|i| (i * 7) as u32).collect();
    let out = ix
        .search_rows_hiding(&rows, &SearchParams::beam(10, 20, 4), 1, hidden.clone())
        .unwrap();
    for i in 0..50 {
        let ids = &out.ids[i * 10..(i + 1) * 10];
        assert!(!ids.contains(&hidden[i]), "query {i}");
        // The nearest other vectors are still found (the hidden one's page is read).
        assert!(out.dists[i * 10] > 0.0);
    }
}

#[test]
fn page_degree_and_capacity_are_respected_and_bad_values_refused() {
    let (dir, ..) = setup(
        Metric::L2,
        2_000,
        16,
        PageParams {
            capacity: 5,
            max_degree: 12,
            ..PageParams::default()
        },
    );
    let pf = PageFile::open(&dir.path().join(FILE_NAME)).unwrap();
    assert_eq!(pf.meta().capacity, 5);
    assert!(pf.meta().max_degree <= 12);
    let ix = common::open(dir.path());
    let err = ix
        .write_pages(
            &PageParams {
                capacity: 10_000,
                ..PageParams::default()
            },
            &Control::silent(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("do not fit a page"), "{err}");
}

#[test]
fn a_damaged_page_is_an_error() {
    let (dir, _, q) = setup(Metric::L2, 2_000, 16, PageParams::default());
    let path = dir.path().join(FILE_NAME);
    let mut raw = std::fs::read(&path).unwrap();
    let pf = PageFile::open(&path).unwrap();
    // Damage the medoid's page: every search reads it first.
    let p = pf.page_of(pf.meta().medoid) as usize;
    raw[(1 + p) * 4096 + 20] ^= 0xff;
    std::fs::write(&path, &raw).unwrap();
    let ix = open_pages(dir.path());
    let err = ix
        .search_batch(&q, &SearchParams::beam(10, 20, 4), 1)
        .unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

#[test]
fn cached_pages_are_expanded_from_memory_with_the_same_results() {
    let (dir, _, q) = setup(Metric::L2, 3_000, 16, PageParams::default());
    let mut ix = open_pages(dir.path());
    let p = SearchParams::beam(10, 20, 4);
    let cold = ix.search_batch(&q, &p, 1).unwrap();
    let total = PageFile::open(&dir.path().join(FILE_NAME))
        .unwrap()
        .meta()
        .pages as usize;
    let rep = ix
        .load_cache(
            total / 4,
            trawl::kinds::graph::search::CachePolicy::default(),
            1,
            &Control::silent(),
        )
        .unwrap();
    assert_eq!(rep.nodes, total / 4);
    assert_eq!(rep.bytes, (total / 4 * 4096 + 4 * total) as u64);
    let warm = ix.search_batch(&q, &p, 1).unwrap();
    assert_eq!(warm.ids, cold.ids);
    assert_eq!(warm.dists, cold.dists);
    let hits: u64 = warm.stats.iter().map(|s| s.traversal.cache_hits).sum();
    let (cold_reads, warm_reads): (u64, u64) = (
        cold.stats.iter().map(|s| s.io.pages_read).sum(),
        warm.stats.iter().map(|s| s.io.pages_read).sum(),
    );
    assert!(hits > 0);
    assert_eq!(
        cold_reads,
        warm_reads + hits,
        "every cached page saves one read"
    );
    // The cache's hottest pages include the medoid's, which every query reads.
    assert!(warm.stats.iter().all(|s| s.traversal.cache_hits >= 1));
}

#[test]
fn the_list_counts_pages_k_may_exceed_it_and_its_default_follows_the_capacity() {
    let (dir, base, q) = setup(Metric::L2, 3_000, 16, PageParams::default());
    let cap = PageFile::open(&dir.path().join(FILE_NAME))
        .unwrap()
        .meta()
        .capacity;
    let o = trawl::kinds::Options {
        layout: IndexLayout::Pages,
        ..Default::default()
    };
    let (ix, _) = trawl::kinds::open_with(dir.path(), &o, &Control::silent()).unwrap();
    let want = trawl::kinds::options::pages_default_l(10, cap);
    assert_eq!(want, (100 / cap.min(4)).max(1));
    match o.params(&ix, 10).unwrap() {
        trawl::kinds::KindParams::Graph(p) => assert_eq!((p.k, p.l), (10, want)),
        other => panic!("{other:?}"),
    }
    // k above L: the pages read hold enough vectors, and the results are the exact nearest
    // of those (a best-first search over the page graph).
    let ix = open_pages(dir.path());
    let out = ix
        .search_batch(&q, &SearchParams::beam(10, 3, 1), 1)
        .unwrap();
    for qi in 0..q.n() {
        let want = reference(dir.path(), &base, q.row(qi), Metric::L2, 3, 10);
        let got: Vec<u32> = out.ids[qi * 10..][..10].to_vec();
        assert_eq!(
            got,
            want.iter().map(|w| w.0).collect::<Vec<_>>(),
            "query {qi}"
        );
    }
    // The other layouts still refuse k above L.
    let packed = trawl::kinds::Options {
        l: Some(5),
        ..Default::default()
    };
    let (pix, _) = trawl::kinds::open_with(dir.path(), &packed, &Control::silent()).unwrap();
    assert!(packed.params(&pix, 10).is_err());
}

//! The page-node layout (PageANN): written from a built index, searched with beam search and
//! PipeSearch; its results equal an exact search over the vectors of the pages it read, and
//! reading every page gives the exact answer.

mod common;

use common::{build, data, truth};
use trawl::kinds::graph::layout::pages::build::PageParams;
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::{DiskIndex, IndexLayout, OpenOptions};
use trawl::progress::Control;
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

#[test]
fn recall_grows_with_the_list_and_every_page_gives_the_exact_answer() {
    for metric in [Metric::L2, Metric::Cosine] {
        let (base, q) = data::<f32>(5_000, 50, 24, 21);
        let dir = tempfile::tempdir().unwrap();
        build(&base, dir.path(), metric, 24);
        let packed = common::open(dir.path());
        let rep = packed
            .write_pages(&PageParams::default(), &Control::silent())
            .unwrap();
        let pr = rep.pages.unwrap();
        let ix = open_pages(dir.path());
        let gt = truth(&base, &q, metric);
        for l in [10, 40] {
            let out = packed.search_batch(&q, &SearchParams::beam(10, l, 4), 1).unwrap();
            let r = recall_at_k(&out.ids, 10, &gt).unwrap();
            let pages: f64 = out.stats.iter().map(|s| s.io.pages_read as f64).sum::<f64>() / 50.0;
            eprintln!("packed {metric:?} L {l}: recall {r:.3}, {pages:.1} pages");
        }
        // Where the true neighbours are: pages holding them per query.
        let pf = trawl::kinds::graph::layout::pages::PageFile::open(&dir.path().join("pages.trawl")).unwrap();
        let mut spread = 0usize;
        for i in 0..50 {
            let mut ps: Vec<u32> = gt.ids[i * gt.k..i * gt.k + 10].iter().map(|&id| pf.page_of(id)).collect();
            ps.sort();
            ps.dedup();
            spread += ps.len();
        }
        eprintln!("true top-10 on {:.1} pages per query", spread as f64 / 50.0);
        let mut last = 0.0;
        for l in [10, 40, 160] {
            let out = ix.search_batch(&q, &SearchParams::beam(10, l, 4), 1).unwrap();
            let r = recall_at_k(&out.ids, 10, &gt).unwrap();
            let pages: f64 = out.stats.iter().map(|s| s.io.pages_read as f64).sum::<f64>() / 50.0;
            eprintln!("{metric:?} L {l}: recall {r:.3}, {pages:.1} pages, cap {}", pr.capacity);
            assert!(r >= last - 0.02);
            last = r;
        }
        let all = pr.pages as usize;
        let out = ix
            .search_batch(&q, &SearchParams::beam(10, all.min(trawl::kinds::graph::search::MAX_LIST), 8), 2)
            .unwrap();
        assert!(recall_at_k(&out.ids, 10, &gt).unwrap() > 0.99);
    }
}

/// A best-first search over the page graph in memory with exact distances for the entries:
/// returns the top 10 over the vectors of the pages read.
fn simulate(
    pf: &trawl::kinds::graph::layout::pages::PageFile,
    raw: &[u8],
    base: &trawl::data::Matrix<f32>,
    q: &[f32],
    l: usize,
    metric: Metric,
    mode: u8,
) -> (Vec<u32>, usize) {
    let dist = |id: u32| trawl::kernels::distance(metric, q, base.row(id as usize));
    let page = |p: u32| &raw[(1 + p as usize) * 4096..(2 + p as usize) * 4096];
    let mut list: Vec<(f32, u32, bool)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let med = pf.meta().medoid;
    list.push((dist(med), pf.page_of(med), false));
    seen.insert(pf.page_of(med));
    let mut full: Vec<(f32, u32)> = Vec::new();
    let mut reads = 0;
    let mut nb = Vec::new();
    while let Some(i) = list.iter().position(|c| !c.2) {
        list[i].2 = true;
        let p = list[i].1;
        reads += 1;
        let v = pf.decode(p as u64, page(p)).unwrap();
        for id in v.ids() {
            full.push((dist(id), id));
        }
        pf.neighbors(p as u64, &v, &mut nb).unwrap();
        for &u in &nb {
            let qp = pf.page_of(u);
            let d = match mode {
                0 => dist(u),
                1 => pf.decode(qp as u64, page(qp)).unwrap().ids().map(dist).fold(f32::INFINITY, f32::min),
                _ => dist(pf.decode(qp as u64, page(qp)).unwrap().id(0)),
            };
            if seen.insert(qp) {
                list.push((d, qp, false));
            } else if let Some(c) = list.iter_mut().find(|c| c.1 == qp && !c.2) {
                c.0 = c.0.min(d);
            }
        }
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        list.truncate(l);
    }
    full.sort_by(|a, b| a.0.total_cmp(&b.0));
    (full.iter().take(10).map(|x| x.1).collect(), reads)
}

#[test]
fn simulated() {
    let metric = Metric::L2;
    let (base, q) = data::<f32>(5_000, 50, 24, 21);
    let dir = tempfile::tempdir().unwrap();
    build(&base, dir.path(), metric, 24);
    let packed = common::open(dir.path());
    packed.write_pages(&PageParams::default(), &Control::silent()).unwrap();
    let pf = trawl::kinds::graph::layout::pages::PageFile::open(&dir.path().join("pages.trawl")).unwrap();
    let raw = std::fs::read(dir.path().join("pages.trawl")).unwrap();
    let gt = truth(&base, &q, metric);
    for mode in [0u8, 1, 2] {
    for l in [5, 10, 40] {
        let mut ids = Vec::new();
        let mut reads = 0;
        for i in 0..50 {
            let (r, n) = simulate(&pf, &raw, &base, q.row(i), l, metric, mode);
            ids.extend(r);
            reads += n;
        }
        eprintln!("mode {mode} simulated L {l}: recall {:.3}, {:.1} pages", recall_at_k(&ids, 10, &gt).unwrap(), reads as f64 / 50.0);
    }
    }
}

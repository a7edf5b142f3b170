//! OctopusANN's design space on one index: every search-time switch (DynamicWidth,
//! PageSearch, MemGraph) turned on and off without rebuilding, checked against the baseline.

mod common;

use std::collections::HashSet;

use common::{build, data, open, params, truth};
use trawl::kinds::graph::search::entry::{EntryParams, EntrySampling};
use trawl::kinds::graph::search::{BeamParams, PipeParams, SearchParams, Strategy, WidthSchedule};
use trawl::kinds::graph::{
    build_index, BatchOutput, DiskIndex, IndexLayout, OpenOptions, ShuffleParams,
};
use trawl::progress::Control;
use trawl::search::SearchError;
use trawl::vamana::recall_at_k;
use trawl::Metric;

fn beam(l: usize, w: usize) -> SearchParams {
    SearchParams::beam(10, l, w)
}

/// Beam search with list size `l`, width `w` and the switches `f` sets.
fn beam_with(l: usize, w: usize, f: impl FnOnce(&mut BeamParams)) -> SearchParams {
    let mut b = BeamParams {
        width: w,
        ..BeamParams::default()
    };
    f(&mut b);
    SearchParams {
        strategy: Strategy::Beam(b),
        ..SearchParams::beam(10, l, w)
    }
}

fn no_repeats(out: &BatchOutput, k: usize) {
    for (q, row) in out.ids.chunks(k).enumerate() {
        let set: HashSet<u32> = row.iter().copied().collect();
        assert_eq!(set.len(), row.len(), "query {q}: repeated ids {row:?}");
    }
}

#[test]
fn dynamic_width_follows_its_schedule_and_a_constant_one_is_fixed_width() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(8_000, 100, 32, 3);
    build(&base, dir.path(), Metric::L2, 16);
    let ix = open(dir.path());
    let fixed = ix.search_batch(&q, &beam(40, 8), 1).unwrap();
    // A schedule that is 8 everywhere is the fixed width 8: same results, same reads.
    let constant = beam_with(40, 8, |b| b.dynamic_width = Some("8".parse().unwrap()));
    let c = ix.search_batch(&q, &constant, 1).unwrap();
    assert_eq!(c.ids, fixed.ids);
    assert_eq!(c.total().io.pages_read, fixed.total().io.pages_read);
    assert_eq!(c.total().traversal.hops, fixed.total().traversal.hops);
    // Width 1 everywhere (capped by W = 8): one read per round trip.
    let one = beam_with(40, 8, |b| b.dynamic_width = Some("1".parse().unwrap()));
    let t = ix.search_batch(&q, &one, 1).unwrap().total();
    assert_eq!(t.io.io_requests, t.traversal.hops, "one read per round");
    // The default schedule (4 → 32) under W = 32 starts narrower than W = 32 and ends wider
    // than 4: fewer round trips than W = 4 and fewer reads than W = 32.
    let dw = beam_with(40, 32, |b| b.dynamic_width = Some(WidthSchedule::default()));
    let d = ix.search_batch(&q, &dw, 1).unwrap();
    let w4 = ix.search_batch(&q, &beam(40, 4), 1).unwrap().total();
    let w32 = ix.search_batch(&q, &beam(40, 32), 1).unwrap().total();
    assert!(
        d.total().traversal.hops < w4.traversal.hops,
        "{} vs {}",
        d.total().traversal.hops,
        w4.traversal.hops
    );
    assert!(
        d.total().io.pages_read < w32.io.pages_read,
        "{} vs {}",
        d.total().io.pages_read,
        w32.io.pages_read
    );
    let gt = truth(&base, &q, Metric::L2);
    let r4 = recall_at_k(&ix.search_batch(&q, &beam(40, 4), 1).unwrap().ids, 10, &gt).unwrap();
    let rd = recall_at_k(&d.ids, 10, &gt).unwrap();
    assert!(rd >= r4 - 0.02, "dynamic width recall {rd} vs W = 4 {r4}");
}

#[test]
fn page_search_scores_whole_pages_and_expands_from_them_without_reads() {
    let dir = tempfile::tempdir().unwrap();
    // 32-d f32 with R = 32: 260-byte records, 15 per page.
    let (base, q) = data::<f32>(12_000, 200, 32, 8);
    build(&base, dir.path(), Metric::L2, 16);
    let ix = open(dir.path());
    let per_page = ix.packed().unwrap().geometry().per_page as u64;
    assert!(per_page > 1);
    let gt = truth(&base, &q, Metric::L2);
    for l in [20, 40] {
        let b = ix.search_batch(&q, &beam(l, 4), 1).unwrap();
        let ps = beam_with(l, 4, |b| b.page_search = true);
        let p = ix.search_batch(&q, &ps, 1).unwrap();
        no_repeats(&p, 10);
        let (tb, tp) = (b.total(), p.total());
        // Every record of every page read is scored once.
        assert!(tp.traversal.exact_distances > tp.traversal.nodes_expanded);
        assert!(tp.traversal.exact_distances <= tp.io.records_read);
        assert!(
            tp.traversal.page_hits > 0,
            "L = {l}: nothing expanded from a kept page"
        );
        assert_eq!(tb.traversal.page_hits, 0);
        // Records read: every page read brings `per_page` records (the last page fewer).
        assert!(tp.io.records_read <= tp.io.pages_read * per_page);
        assert!(tp.io.records_read > tp.io.pages_read * (per_page - 1));
        assert!(
            tp.io_utilisation() > tb.io_utilisation(),
            "L = {l}: U_io {} vs {}",
            tp.io_utilisation(),
            tb.io_utilisation()
        );
        let rb = recall_at_k(&b.ids, 10, &gt).unwrap();
        let rp = recall_at_k(&p.ids, 10, &gt).unwrap();
        assert!(rp >= rb - 0.01, "L = {l}: page search recall {rp} vs {rb}");
    }
}

/// PageSearch inside PipeSearch: every record of a page read is scored once, kept records are
/// explored without a read, and on the PageShuffle layout (neighbours share pages) it reads
/// fewer pages than PipeSearch alone at no loss of recall. The layout without records
/// (decoupled) refuses it; the flash search refuses it; DynamicWidth stays beam-only.
#[test]
fn pipe_page_search_scores_whole_pages_and_reads_fewer_of_them() {
    let dir = tempfile::tempdir().unwrap();
    // 32-d f32 with R = 32: 260-byte records, 15 per page.
    let (base, q) = data::<f32>(12_000, 200, 32, 8);
    build(&base, dir.path(), Metric::L2, 16);
    let plain = open(dir.path());
    plain
        .write_layout(
            IndexLayout::Shuffled,
            &ShuffleParams::default(),
            &Control::silent(),
        )
        .unwrap();
    let ix = DiskIndex::open(
        dir.path(),
        OpenOptions {
            layout: IndexLayout::Shuffled,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let gt = truth(&base, &q, Metric::L2);
    let pipe = |l: usize, page_search: bool| SearchParams {
        k: 10,
        l,
        strategy: Strategy::Pipe(PipeParams {
            page_search,
            ..PipeParams::default()
        }),
        ..SearchParams::default()
    };
    for l in [20, 40] {
        // One thread: PipeSearch's order depends on when reads land, so compare totals.
        let a = ix.search_batch(&q, &pipe(l, false), 1).unwrap();
        let p = ix.search_batch(&q, &pipe(l, true), 1).unwrap();
        no_repeats(&p, 10);
        let (ta, tp) = (a.total(), p.total());
        assert_eq!(ta.traversal.page_hits, 0);
        assert!(
            tp.traversal.page_hits > 0,
            "L = {l}: nothing explored from a kept record"
        );
        // Every record of a page read is scored at most once; page mates add exact distances.
        assert!(tp.traversal.exact_distances > tp.traversal.nodes_expanded);
        assert!(tp.traversal.exact_distances <= tp.io.records_read);
        // Every expansion is a read's record, a kept record or a cached one.
        assert!(tp.traversal.page_hits <= tp.traversal.nodes_expanded);
        assert!(
            tp.io.pages_read < ta.io.pages_read,
            "L = {l}: pages {} with PageSearch vs {} without",
            tp.io.pages_read,
            ta.io.pages_read
        );
        let ra = recall_at_k(&a.ids, 10, &gt).unwrap();
        let rp = recall_at_k(&p.ids, 10, &gt).unwrap();
        assert!(
            rp >= ra - 0.01,
            "L = {l}: recall {rp} with PageSearch vs {ra}"
        );
    }
    // The flag maps from the flat options front ends use; DynamicWidth stays beam-only.
    let with = |page_search: bool, dynamic: bool| {
        Strategy::named(
            "pipe",
            BeamParams {
                page_search,
                dynamic_width: dynamic.then(|| "4,8".parse::<WidthSchedule>().unwrap()),
                ..BeamParams::default()
            },
            PipeParams::default(),
            Default::default(),
        )
    };
    assert!(matches!(with(true, false), Ok(Strategy::Pipe(p)) if p.page_search));
    assert!(matches!(
        with(false, true),
        Err(SearchError::Unsupported(_))
    ));
    assert!(matches!(
        Strategy::named(
            "flash",
            BeamParams {
                page_search: true,
                ..BeamParams::default()
            },
            PipeParams::default(),
            Default::default()
        ),
        Err(SearchError::Unsupported(_))
    ));
}

#[test]
fn page_search_changes_nothing_when_a_page_holds_one_record() {
    let dir = tempfile::tempdir().unwrap();
    // 900-d f32 with R = 32: 3732-byte records, one per page.
    let (base, q) = data::<f32>(1_500, 30, 900, 2);
    build(&base, dir.path(), Metric::L2, 32);
    let ix = open(dir.path());
    assert_eq!(ix.packed().unwrap().geometry().per_page, 1);
    let b = ix.search_batch(&q, &beam(30, 4), 1).unwrap();
    let p = ix
        .search_batch(&q, &beam_with(30, 4, |b| b.page_search = true), 1)
        .unwrap();
    assert_eq!(p.ids, b.ids);
    assert_eq!(p.total().io.pages_read, b.total().io.pages_read);
    assert_eq!(p.total().traversal.page_hits, 0);
}

#[test]
fn memgraph_by_visit_frequency_is_built_with_the_index_or_rebuilt_later() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(10_000, 100, 32, 11);
    let mut p = params(Metric::L2, 16);
    p.entry = Some(EntryParams {
        sampling: EntrySampling::Frequency,
        ratio: 0.01,
        ..EntryParams::memgraph()
    });
    let report = build_index(&base, dir.path(), &p, &Control::silent()).unwrap();
    assert_eq!(report.entry_nodes, 100);
    let mut ix = open(dir.path());
    let e = ix.entry().expect("an entry index");
    assert_eq!(e.len(), 100);
    assert!(
        e.ids().contains(&ix.medoid()),
        "the medoid is read by every search, so it is among the most visited"
    );
    let gt = truth(&base, &q, Metric::L2);
    let plain = recall_at_k(&ix.search_batch(&q, &beam(20, 4), 1).unwrap().ids, 10, &gt).unwrap();
    let seeded = SearchParams {
        entry_list: 10,
        ..beam(20, 4)
    };
    let s = ix.search_batch(&q, &seeded, 1).unwrap();
    assert!(recall_at_k(&s.ids, 10, &gt).unwrap() >= plain - 0.02);
    // Rebuilt uniformly at 0.5% on the same graph: the index now searches with the new one,
    // and so does a fresh open.
    let uniform = EntryParams {
        ratio: 0.005,
        ..EntryParams::memgraph()
    };
    let r = ix.rebuild_entry(&uniform, 2, &Control::silent()).unwrap();
    assert_eq!(r.nodes, 50);
    assert_eq!(ix.entry().unwrap().len(), 50);
    assert_eq!(
        DiskIndex::open(dir.path(), Default::default())
            .unwrap()
            .entry()
            .unwrap()
            .len(),
        50
    );
    ix.search_batch(&q, &seeded, 1).unwrap();
}

#[test]
fn shuffled_and_all_in_storage_layouts_search_the_same_graph() {
    use trawl::kinds::graph::{IndexLayout, OpenOptions, ShuffleParams};
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(12_000, 100, 32, 4);
    build(&base, dir.path(), Metric::L2, 16);
    let ix = open(dir.path());
    let ctl = Control::silent();
    let sp = ShuffleParams::default();
    let shuf = ix.write_layout(IndexLayout::Shuffled, &sp, &ctl).unwrap();
    let s = shuf.shuffle.as_ref().unwrap();
    assert!(
        s.or_final > s.or_identity + 0.05,
        "PageShuffle raised OR(G) only from {} to {}",
        s.or_identity,
        s.or_final
    );
    assert_eq!(
        shuf.file_bytes,
        std::fs::metadata(dir.path().join("packed-shuffled.trawl"))
            .unwrap()
            .len()
    );
    let ais = ix
        .write_layout(IndexLayout::AllInStorage, &sp, &ctl)
        .unwrap();
    assert!(ais.file_bytes > ix.packed().unwrap().file_bytes());
    assert!(ix.write_layout(IndexLayout::Packed, &sp, &ctl).is_err());
    let with = |layout| {
        DiskIndex::open(
            dir.path(),
            OpenOptions {
                layout,
                ..OpenOptions::default()
            },
        )
        .unwrap()
    };
    let (sx, ax) = (with(IndexLayout::Shuffled), with(IndexLayout::AllInStorage));
    assert!(sx.packed().unwrap().is_permuted());
    assert_eq!(ax.memory().pq_codes_bytes, 0, "no codes in memory");
    assert_eq!(ix.memory().pq_codes_bytes, 12_000 * 16);
    assert!(
        ax.memory().total() + ix.memory().pq_codes_bytes / 2 < ix.memory().total(),
        "{:?} vs {:?}",
        ax.memory(),
        ix.memory()
    );
    for l in [20, 60] {
        let want = ix.search_batch(&q, &beam(l, 4), 1).unwrap();
        for (name, other) in [("shuffled", &sx), ("all-in-storage", &ax)] {
            let got = other.search_batch(&q, &beam(l, 4), 1).unwrap();
            assert_eq!(got.ids, want.ids, "{name}, L = {l}: ids");
            assert_eq!(got.dists, want.dists, "{name}, L = {l}: distances");
            assert_eq!(
                got.total().traversal.nodes_expanded,
                want.total().traversal.nodes_expanded,
                "{name}, L = {l}"
            );
        }
        // PageShuffle + PageSearch: more of each page read is used than without the shuffle.
        let ps = beam_with(l, 4, |b| b.page_search = true);
        let (pp, sp) = (
            ix.search_batch(&q, &ps, 1).unwrap().total(),
            sx.search_batch(&q, &ps, 1).unwrap().total(),
        );
        assert!(
            sp.io_utilisation() > pp.io_utilisation(),
            "L = {l}: U_io shuffled {} vs packed {}",
            sp.io_utilisation(),
            pp.io_utilisation()
        );
        assert!(sp.traversal.page_hits > pp.traversal.page_hits, "L = {l}");
    }
    // The entry index needs codes in memory: refused on All-in-Storage, fine on the shuffle.
    let seeded = SearchParams {
        entry_list: 10,
        ..beam(20, 4)
    };
    assert!(matches!(
        ax.search_batch(&q, &seeded, 1),
        Err(SearchError::Unsupported(_))
    ));
    sx.search_batch(&q, &seeded, 1).unwrap();
    // A layout that was not written is a clear error; a damaged order table is refused.
    let other = tempfile::tempdir().unwrap();
    build(&base, other.path(), Metric::L2, 16);
    let missing = DiskIndex::open(
        other.path(),
        OpenOptions {
            layout: IndexLayout::Shuffled,
            ..OpenOptions::default()
        },
    )
    .unwrap_err();
    assert!(missing.to_string().contains("trawl layout"), "{missing}");
    drop(sx);
    let path = dir.path().join("packed-shuffled.trawl");
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    let at = bad.len() - 4096 + 17; // inside the order table
    bad[at] ^= 0x40;
    std::fs::write(&path, &bad).unwrap();
    let err = DiskIndex::open(
        dir.path(),
        OpenOptions {
            layout: IndexLayout::Shuffled,
            ..OpenOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("order table"), "{err}");
    std::fs::write(&path, &good[..good.len() - 4096]).unwrap();
    assert!(DiskIndex::open(
        dir.path(),
        OpenOptions {
            layout: IndexLayout::Shuffled,
            ..OpenOptions::default()
        },
    )
    .is_err());
}

/// Every search-time switch is an option of one open index: turned on and off again on the same
/// searcher, and with the extra layouts and a MemGraph written beside the index, a search with
/// all switches off returns exactly what the plain index returned before any of them existed
/// (ids, distances and every I/O counter).
#[test]
fn all_switches_off_is_the_baseline_and_switches_leave_no_trace() {
    use trawl::kinds::graph::{IndexLayout, ShuffleParams};
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(10_000, 60, 32, 21);
    let mut p = params(Metric::L2, 16);
    p.entry = None;
    build_index(&base, dir.path(), &p, &Control::silent()).unwrap();
    let baseline = beam(30, 8);
    let before = open(dir.path()).search_batch(&q, &baseline, 1).unwrap();

    // Write everything the design space adds beside the index, then reopen it.
    let mut ix = open(dir.path());
    let ctl = Control::silent();
    ix.write_layout(IndexLayout::Shuffled, &ShuffleParams::default(), &ctl)
        .unwrap();
    ix.write_layout(IndexLayout::AllInStorage, &ShuffleParams::default(), &ctl)
        .unwrap();
    ix.rebuild_entry(&EntryParams::memgraph(), 2, &ctl).unwrap();
    let ix = open(dir.path());
    assert!(ix.entry().is_some());
    let all_on = SearchParams {
        entry_list: 10,
        ..beam_with(30, 32, |b| {
            b.dynamic_width = Some(WidthSchedule::default());
            b.page_search = true;
        })
    };
    let same = |a: &trawl::search::QueryStats, b: &trawl::search::QueryStats, what: &str| {
        assert_eq!(a.io.pages_read, b.io.pages_read, "{what}: pages");
        assert_eq!(a.io.io_requests, b.io.io_requests, "{what}: requests");
        assert_eq!(a.io.bytes_read, b.io.bytes_read, "{what}: bytes");
        assert_eq!(a.traversal.hops, b.traversal.hops, "{what}: hops");
        assert_eq!(
            a.traversal.nodes_expanded, b.traversal.nodes_expanded,
            "{what}: expanded"
        );
        assert_eq!(a.io.records_read, b.io.records_read, "{what}: records");
        assert_eq!(a.traversal.page_hits, 0, "{what}: page hits");
        assert_eq!(
            a.traversal.cache_hits, b.traversal.cache_hits,
            "{what}: cache hits"
        );
    };
    let after = ix.search_batch(&q, &baseline, 1).unwrap();
    assert_eq!(after.ids, before.ids);
    assert_eq!(after.dists, before.dists);
    same(&after.total(), &before.total(), "reopened");

    // One searcher, query by query: all switches on, then off again.
    let mut s = ix.searcher().unwrap();
    let mut on_pages = 0;
    for (i, row) in q.rows().enumerate() {
        let mut hits = Vec::new();
        on_pages += s.search(row, &all_on, &mut hits).unwrap().io.pages_read;
        let st = s.search(row, &baseline, &mut hits).unwrap();
        let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
        let dists: Vec<f32> = hits.iter().map(|h| h.1).collect();
        assert_eq!(ids, before.ids[i * 10..(i + 1) * 10], "query {i}");
        assert_eq!(dists, before.dists[i * 10..(i + 1) * 10], "query {i}");
        same(&st, &before.stats[i], &format!("query {i}"));
    }
    assert!(
        on_pages < before.total().io.pages_read,
        "the switches changed nothing: {on_pages} pages vs {}",
        before.total().io.pages_read
    );
}

//! PipeSearch and throughput mode end to end: recall against beam search at equal L, exact I/O
//! counters against an independent count, no read left in flight after a query, interleaved
//! queries, errors.

mod common;

use common::{build, data, open, truth, Tap};
use trawl::io::EngineKind;
use trawl::kinds::graph::search::{
    CachePolicy, PipeParams, SearchParams, Searcher, Strategy, WidthPolicy,
};
use trawl::kinds::graph::{DiskIndex, OpenOptions};
use trawl::progress::Control;
use trawl::search::{QueryStats, SearchError};
use trawl::vamana::recall_at_k;
use trawl::Metric;

fn beam(l: usize) -> SearchParams {
    SearchParams {
        k: 10,
        l,
        ..SearchParams::default()
    }
}

fn pipe(l: usize, policy: WidthPolicy) -> SearchParams {
    SearchParams {
        strategy: Strategy::Pipe(PipeParams {
            policy,
            ..PipeParams::default()
        }),
        ..beam(l)
    }
}

#[test]
fn pipe_recall_is_within_two_points_of_beam_at_equal_l() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(20_000, 300, 48, 21);
    build(&base, dir.path(), Metric::L2, 24);
    let ix = open(dir.path());
    let gt = truth(&base, &q, Metric::L2);
    for l in [20, 40, 80] {
        let b = ix.search_batch(&q, &beam(l), 2).unwrap();
        let rb = recall_at_k(&b.ids, 10, &gt).unwrap();
        for policy in [
            WidthPolicy::Dynamic,
            WidthPolicy::Static,
            WidthPolicy::Fixed,
        ] {
            let p = ix.search_batch(&q, &pipe(l, policy), 2).unwrap();
            let rp = recall_at_k(&p.ids, 10, &gt).unwrap();
            assert!(
                rp >= rb - 0.02,
                "L = {l}, {policy:?}: pipe recall {rp} vs beam {rb}"
            );
            let t = p.total();
            assert_eq!(t.io.bytes_read, t.io.pages_read * 4096);
            assert!(t.io.wasted_reads <= t.io.io_requests);
            assert!(
                t.occupancy() > 0.0 && t.occupancy() <= 1.0,
                "{}",
                t.occupancy()
            );
            // Every read that was not wasted had at least one of its records explored.
            assert!(
                t.traversal.nodes_expanded - t.traversal.cache_hits
                    >= t.io.io_requests - t.io.wasted_reads
            );
        }
        // Seeded by the in-memory entry index, both strategies keep their recall, and the
        // entry search's distances are counted apart.
        for strategy in [beam(l), pipe(l, WidthPolicy::Dynamic)] {
            let seeded = SearchParams {
                entry_list: 10,
                ..strategy
            };
            let e = ix.search_batch(&q, &seeded, 2).unwrap();
            let re = recall_at_k(&e.ids, 10, &gt).unwrap();
            assert!(re >= rb - 0.02, "L = {l}, entry: recall {re} vs beam {rb}");
            assert!(e.total().traversal.entry_distances >= 10 * q.n() as u64);
            assert_eq!(b.total().traversal.entry_distances, 0);
        }
        // Throughput mode: beam search interleaved gives exactly the single-query traversal
        // (rounds do not depend on timing); PipeSearch interleaved keeps its recall.
        let bi = ix.search_batch_with(&q, &beam(l), 2, 4).unwrap();
        assert_eq!(bi.ids, b.ids, "L = {l}");
        assert_eq!(bi.total().io.pages_read, b.total().io.pages_read);
        assert_eq!(bi.total().traversal.hops, b.total().traversal.hops);
        let pi = ix
            .search_batch_with(&q, &pipe(l, WidthPolicy::Dynamic), 2, 4)
            .unwrap();
        let rpi = recall_at_k(&pi.ids, 10, &gt).unwrap();
        assert!(
            rpi >= rb - 0.02,
            "L = {l}: interleaved pipe recall {rpi} vs beam {rb}"
        );
    }
}

/// Runs every query on one searcher over a [`Tap`], checking after each that the engine has
/// nothing in flight and every slot back; returns the summed statistics and what the tap saw.
fn tapped(
    ix: &DiskIndex,
    kind: EngineKind,
    q: &trawl::data::Matrix<f32>,
    p: &SearchParams,
    interleave: usize,
) -> (QueryStats, common::Seen, usize) {
    let mut cfg = ix.engine_config();
    cfg.depth = cfg.depth.max(interleave * 64);
    let (tap, seen) = Tap::new(ix.file().engine(kind, cfg).unwrap());
    let mut s = Searcher::with_engine(ix.view(), Box::new(tap));
    let mut total = QueryStats::default();
    let mut results = 0;
    let mut next_row = 0;
    s.search_stream(
        p,
        interleave,
        &mut || {
            let i = next_row;
            next_row += 1;
            (i < q.n()).then(|| (i, q.row(i)))
        },
        &mut |_, hits, st| {
            assert_eq!(hits.len(), 10);
            total += st;
            results += 1;
        },
    )
    .unwrap();
    assert_eq!(
        s.engine().in_flight(),
        0,
        "no read in flight after the queries"
    );
    let seen = *seen.lock().unwrap();
    assert_eq!(seen.busy, 0, "every slot handed back");
    for row in q.rows().take(20) {
        let mut hits = Vec::new();
        s.search(row, p, &mut hits).unwrap();
        assert_eq!(s.engine().in_flight(), 0, "no read in flight after a query");
    }
    (total, seen, results)
}

#[test]
fn pipe_counters_match_an_independent_count_and_no_read_outlives_its_query() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(6_000, 80, 64, 13);
    build(&base, dir.path(), Metric::L2, 16);
    let mut ix = open(dir.path());
    for cached in [false, true] {
        if cached {
            ix.load_cache(200, CachePolicy::Bfs, 1, &Control::silent())
                .unwrap();
        }
        for kind in [EngineKind::Pread, EngineKind::Auto] {
            for interleave in [1, 3] {
                let p = pipe(40, WidthPolicy::Dynamic);
                let (t, seen, n) = tapped(&ix, kind, &q, &p, interleave);
                let what = format!("{kind:?}, interleave {interleave}, cached {cached}");
                assert_eq!(n, q.n(), "{what}");
                assert_eq!(t.io.io_requests, seen.requests, "{what}");
                assert_eq!(t.io.pages_read, seen.pages, "{what}");
                assert_eq!(t.io.bytes_read, t.io.pages_read * 4096, "{what}");
                // Every read is delivered (drained ones included) before the queries return.
                assert_eq!(seen.bytes, t.io.bytes_read, "{what}");
                assert!(seen.max_busy as usize <= 64 * interleave, "{what}");
                assert_eq!(cached, t.traversal.cache_hits > 0, "{what}");
                assert_eq!(
                    t.traversal.exact_distances, t.traversal.nodes_expanded,
                    "{what}"
                );
                let b = tapped(&ix, kind, &q, &beam(40), interleave).0;
                assert_eq!(
                    b.io.wasted_reads, 0,
                    "beam search explores every record it reads"
                );
            }
        }
    }
}

#[test]
fn pipe_errors_are_typed_and_leave_the_searcher_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(3_000, 5, 16, 9);
    build(&base, dir.path(), Metric::L2, 8);
    let ix = open(dir.path());
    let mut s = ix.searcher().unwrap();
    let mut hits = Vec::new();
    let row = q.row(0);
    let with = |pp: PipeParams| SearchParams {
        strategy: Strategy::Pipe(pp),
        ..beam(20)
    };
    for bad in [
        PipeParams {
            max_width: 0,
            ..PipeParams::default()
        },
        PipeParams {
            max_width: 10_000,
            ..PipeParams::default()
        },
        PipeParams {
            start_width: 64,
            ..PipeParams::default()
        },
        PipeParams {
            in_pool_threshold: 1.5,
            ..PipeParams::default()
        },
    ] {
        assert!(
            matches!(
                s.search(row, &with(bad), &mut hits),
                Err(SearchError::InvalidPipe(_))
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        ix.search_batch_with(&q, &beam(20), 1, 0),
        Err(SearchError::BadBatch(_))
    ));
    assert!(matches!(
        ix.search_batch_with(
            &q,
            &beam(20),
            1,
            trawl::kinds::graph::search::MAX_INTERLEAVE + 1
        ),
        Err(SearchError::BadBatch(_))
    ));
    s.search(row, &with(PipeParams::default()), &mut hits)
        .unwrap();
    assert_eq!(hits.len(), 10);

    // A corrupt page read by PipeSearch is an error, and nothing stays in flight.
    let path = dir
        .path()
        .join(trawl::kinds::graph::layout::packed::FILE_NAME);
    let good = std::fs::read(&path).unwrap();
    let (page, at) = ix.packed().unwrap().locate(ix.medoid());
    drop(s);
    drop(ix);
    let mut bad = good.clone();
    bad[page as usize * 4096 + at] ^= 0x20;
    std::fs::write(&path, &bad).unwrap();
    let ix = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
    for interleave in [1, 2] {
        let err = ix
            .search_batch_with(&q, &pipe(20, WidthPolicy::Dynamic), 1, interleave)
            .unwrap_err();
        assert!(
            matches!(err, SearchError::Corrupt { page: p, .. } if p == page),
            "{err}"
        );
    }
    let mut s = ix.searcher().unwrap();
    assert!(s
        .search(row, &pipe(20, WidthPolicy::Dynamic), &mut hits)
        .is_err());
    assert_eq!(s.engine().in_flight(), 0);
}

#[test]
fn the_entry_index_is_checked_and_optional() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(4_000, 20, 24, 5);
    build(&base, dir.path(), Metric::Cosine, 8);
    let ix = open(dir.path());
    let e = ix.entry().expect("built with an entry index");
    assert_eq!(e.len(), 40, "1% of 4000");
    let mut ids = e.ids().to_vec();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 40);
    assert!(ix.memory().entry_bytes > 0);
    assert!(ix.disk_bytes().entry > 0);
    drop(ix);
    let path = dir
        .path()
        .join(trawl::kinds::graph::search::entry::FILE_NAME);
    let good = std::fs::read(&path).unwrap();
    // A flipped byte, a truncation, or an entry file of another build: refused at open.
    let mut bad = good.clone();
    let at = bad.len() - 9;
    bad[at] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    assert!(DiskIndex::open(dir.path(), OpenOptions::default()).is_err());
    std::fs::write(&path, &good[..good.len() - 4]).unwrap();
    assert!(DiskIndex::open(dir.path(), OpenOptions::default()).is_err());
    let other = tempfile::tempdir().unwrap();
    build(&base, other.path(), Metric::Cosine, 4);
    std::fs::copy(
        other
            .path()
            .join(trawl::kinds::graph::search::entry::FILE_NAME),
        &path,
    )
    .unwrap();
    assert!(DiskIndex::open(dir.path(), OpenOptions::default()).is_err());
    // Without the file the index opens, and an entry search is a typed error.
    std::fs::remove_file(&path).unwrap();
    let ix = open(dir.path());
    assert!(ix.entry().is_none());
    let seeded = SearchParams {
        entry_list: 10,
        ..beam(20)
    };
    assert!(matches!(
        ix.search_batch(&q, &seeded, 1),
        Err(SearchError::NoEntryIndex)
    ));
    ix.search_batch(&q, &beam(20), 1).unwrap();
}

/// The memory and simulated-device engines run the same search over the same pages: beam
/// search (whose order does not depend on timing) returns exactly what it returns from disk,
/// and PipeSearch on a modelled device keeps its recall.
#[test]
fn memory_and_simulated_engines_serve_the_same_search() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(5_000, 60, 32, 17);
    build(&base, dir.path(), Metric::L2, 16);
    let gt = truth(&base, &q, Metric::L2);
    let disk = open(dir.path());
    let want = disk.search_batch(&q, &beam(30), 1).unwrap();
    let rb = recall_at_k(&want.ids, 10, &gt).unwrap();
    for engine in ["memory", "sim:40", "sim:40:100000"] {
        let ix = DiskIndex::open(
            dir.path(),
            OpenOptions {
                engine: engine.parse().unwrap(),
                ..OpenOptions::default()
            },
        )
        .unwrap();
        let got = ix.search_batch(&q, &beam(30), 1).unwrap();
        assert_eq!(got.ids, want.ids, "{engine}: beam search ids");
        assert_eq!(
            got.total().io.pages_read,
            want.total().io.pages_read,
            "{engine}"
        );
        assert_eq!(
            got.total().io.io_requests,
            want.total().io.io_requests,
            "{engine}"
        );
        let p = ix
            .search_batch(&q, &pipe(30, WidthPolicy::Dynamic), 1)
            .unwrap();
        let rp = recall_at_k(&p.ids, 10, &gt).unwrap();
        assert!(rp >= rb - 0.02, "{engine}: pipe recall {rp} vs beam {rb}");
        if engine.starts_with("sim") {
            // Each beam-search round waits for its reads: at least the modelled 40 µs.
            let t = got.total();
            assert!(
                t.total_ns >= t.traversal.hops * 40_000,
                "{engine}: {} ns for {} rounds",
                t.total_ns,
                t.traversal.hops
            );
        }
    }
}

/// `time_parts` fills the CPU breakdown of beam search and PipeSearch (the page checks, the
/// PQ table, the PQ scoring, the exact distances, the I/O calls, the entry index when it
/// seeds) and changes nothing else: beam search returns the same ids and counters with and
/// without it. Off, every part is zero.
#[test]
fn timed_parts_fill_the_breakdown_and_change_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(3_000, 40, 24, 29);
    build(&base, dir.path(), Metric::L2, 16);
    let plain = open(dir.path());
    let timed = DiskIndex::open(
        dir.path(),
        OpenOptions {
            time_parts: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let seeded = |p: SearchParams| SearchParams { entry_list: 8, ..p };
    for params in [
        beam(30),
        seeded(beam(30)),
        pipe(30, WidthPolicy::Dynamic),
        seeded(pipe(30, WidthPolicy::Dynamic)),
    ] {
        let off = plain.search_batch(&q, &params, 1).unwrap();
        let on = timed.search_batch(&q, &params, 1).unwrap();
        let (a, b) = (off.total(), on.total());
        assert_eq!(a.parts, Default::default(), "untimed parts stay zero");
        if matches!(params.strategy, Strategy::Beam(_)) {
            assert_eq!(on.ids, off.ids, "timing changes no result");
            assert_eq!(
                (a.traversal, a.io.pages_read, a.io.io_requests),
                (b.traversal, b.io.pages_read, b.io.io_requests)
            );
        }
        let p = b.parts;
        assert!(p.checksum_ns > 0, "{params:?}: {p:?}");
        assert!(p.pq_table_ns > 0, "{params:?}: {p:?}");
        assert!(p.pq_score_ns > 0 && p.visited_ns > 0, "{params:?}: {p:?}");
        assert!(p.exact_ns > 0, "{params:?}: {p:?}");
        assert!(p.io_call_ns > 0, "{params:?}: {p:?}");
        assert_eq!(p.entry_ns > 0, params.entry_list > 0, "{params:?}: {p:?}");
        // Each part is a share of the queries' compute time (their wall time outside the
        // waits for reads); with one query at a time the parts cannot exceed it.
        let polled = p.poll_ns;
        let parts = p.io_call_ns
            + p.checksum_ns
            + p.pq_table_ns
            + p.visited_ns
            + p.pq_score_ns
            + p.exact_ns
            + p.entry_ns;
        assert!(
            parts <= b.compute_ns() + polled,
            "{params:?}: parts {parts} ns > compute {} ns",
            b.compute_ns()
        );
    }
}

//! RaBitQ codes on graph indexes: every metric and layout searches with them, inserts and merges
//! encode new vectors with the index's quantiser, shards build with them, the flash strategy
//! navigates on them, the page-node layout scores its pages with them, and the codes' bytes are
//! reported.

mod common;

use common::{data, params, truth};
use trawl::data::Matrix;
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex};
use trawl::kinds::graph::{build_index, DiskIndex, IndexLayout, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::{QuantKind, Quantiser};
use trawl::Metric;

fn rabitq(metric: Metric, bits: u8) -> IndexParams {
    IndexParams {
        quant: QuantKind::RaBitQ { bits },
        ..params(metric, 8)
    }
}

/// recall@10 of `ids` (10 per query) against `t`.
fn recall10(ids: &[u32], t: &trawl::data::GroundTruth) -> f64 {
    let hit: usize = (0..t.nq)
        .map(|qi| {
            let want = &t.ids[qi * t.k..qi * t.k + 10];
            ids[qi * 10..qi * 10 + 10]
                .iter()
                .filter(|i| want.contains(i))
                .count()
        })
        .sum();
    hit as f64 / (10 * t.nq) as f64
}

fn recall_of(ix: &DiskIndex, q: &Matrix<f32>, t: &trawl::data::GroundTruth, l: usize) -> f64 {
    let out = ix
        .search_batch(q, &SearchParams::beam(10, l, 4), 1)
        .unwrap();
    recall10(&out.ids, t)
}

/// Builds `params`' index of `base` in `dir` and writes its decoupled layout.
fn build_decoupled(base: &Matrix<f32>, dir: &std::path::Path, params: &IndexParams) {
    build_index(base, dir, params, &Control::silent()).unwrap();
    DiskIndex::open(dir, OpenOptions::default())
        .unwrap()
        .write_layout(
            IndexLayout::Decoupled,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
}

/// `m` with every row scaled to unit length.
fn normalised(m: &Matrix<f32>) -> Matrix<f32> {
    let mut v = m.as_slice().to_vec();
    for row in v.chunks_exact_mut(m.dim()) {
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= n);
    }
    Matrix::from_vec(v, m.dim()).unwrap()
}

#[test]
fn every_metric_searches_with_rabitq_codes_and_ip_and_cosine_match_l2_on_unit_vectors() {
    let (base, q) = data::<f32>(5_000, 100, 48, 21);
    let (base, q) = (normalised(&base), normalised(&q));
    let mut recalls = Vec::new();
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let dir = tempfile::tempdir().unwrap();
        build_index(&base, dir.path(), &rabitq(metric, 2), &Control::silent()).unwrap();
        let ix = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
        assert_eq!(ix.pq().kind(), QuantKind::RaBitQ { bits: 2 });
        // `trawl info --verify` reads the quantiser and checks the codes' factors.
        let report = trawl::kinds::graph::verify_index(dir.path(), &Control::silent()).unwrap();
        assert!(
            format!("{report:?}").contains("RaBitQ 2 bits"),
            "{report:?}"
        );
        // 2 planes of 64 bits and the factors: ‖r‖ and two half floats, and −⟨r, c⟩ for
        // inner product.
        let factors = if metric == Metric::InnerProduct {
            12
        } else {
            8
        };
        assert_eq!(ix.codes().unwrap().m(), 2 * 8 + factors);
        let t = truth(&base, &q, metric);
        let r = recall_of(&ix, &q, &t, 40);
        assert!(r >= 0.9, "{metric:?}: recall {r}");
        recalls.push(r);
        // PipeSearch navigates with the same codes.
        let mut p = SearchParams::beam(10, 40, 4);
        p.strategy = trawl::kinds::graph::search::Strategy::Pipe(Default::default());
        let r_pipe = recall10(&ix.search_batch(&q, &p, 1).unwrap().ids, &t);
        assert!(
            r_pipe >= r - 0.02,
            "{metric:?}: pipe recall {r_pipe}, beam {r}"
        );
    }
    // On unit vectors the three metrics rank alike, and so do their RaBitQ estimates (the
    // same estimated term, scaled): inner product and cosine recall at least L2's, up to one
    // neighbour in a thousand of floating-point ties.
    assert!(recalls[1] >= recalls[0] - 1e-3, "{recalls:?}");
    assert!(recalls[2] >= recalls[0] - 1e-3, "{recalls:?}");
}

#[test]
fn more_bits_navigate_better_and_the_all_in_storage_layout_carries_the_codes() {
    let (base, q) = data::<f32>(6_000, 100, 64, 22);
    let t = truth(&base, &q, Metric::L2);
    let mut last = 0.0;
    for bits in [1u8, 4] {
        let dir = tempfile::tempdir().unwrap();
        build_index(
            &base,
            dir.path(),
            &rabitq(Metric::L2, bits),
            &Control::silent(),
        )
        .unwrap();
        let ix = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
        let r = recall_of(&ix, &q, &t, 20);
        assert!(r > last, "B {bits}: recall {r} not above {last}");
        last = r;
        ix.write_layout(
            IndexLayout::AllInStorage,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
        drop(ix);
        let ais = DiskIndex::open(
            dir.path(),
            OpenOptions {
                layout: IndexLayout::AllInStorage,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert!(ais.codes().is_none());
        let r_ais = recall_of(&ais, &q, &t, 20);
        assert!(
            (r_ais - r).abs() <= 0.02,
            "B {bits}: all-in-storage recall {r_ais}, packed {r}"
        );
    }
}

#[test]
fn inserted_vectors_get_the_quantisers_codes_through_the_log_and_the_merge() {
    const DIM: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let (all, _) = data::<f32>(4_000, 1, DIM, 23);
    let base = Matrix::from_vec(all.as_slice()[..3_000 * DIM].to_vec(), DIM).unwrap();
    build_index(
        &base,
        dir.path(),
        &rabitq(Metric::L2, 3),
        &Control::silent(),
    )
    .unwrap();
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    let new = &all.as_slice()[3_000 * DIM..];
    let ids = ix.insert(None, new).unwrap();
    let found = |ix: &LiveIndex| {
        let out = ix
            .search_rows(new, &SearchParams::beam(1, 40, 4), 2, 1)
            .unwrap();
        out.ids.iter().zip(&ids).filter(|(a, b)| a == b).count()
    };
    assert!(found(&ix) >= 990, "{} of 1000 before the merge", found(&ix));
    ix.merge(2, &Control::silent()).unwrap();
    assert!(found(&ix) >= 990, "{} of 1000 after the merge", found(&ix));
    drop(ix);
    // The merged codes of the new vectors are the quantiser's codes of them, and the index
    // reopens with them.
    let disk = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
    let q: &Quantiser = disk.pq();
    let codes = disk.codes().unwrap();
    let mut want = vec![0u8; q.m()];
    for (i, &id) in ids.iter().enumerate().step_by(97) {
        q.encode_one(&new[i * DIM..(i + 1) * DIM], &mut want)
            .unwrap();
        // Slots are the ids of a merged index without holes.
        assert_eq!(codes.code(id as usize), &want[..], "vector {id}");
    }
}

/// The flash strategy navigates on RaBitQ codes (the CPU backend here; the GPU kernel is
/// tested against it in `accel::flash_tests`) and finds what beam search finds.
#[test]
fn the_flash_strategy_searches_rabitq_codes() {
    for (metric, bits) in [(Metric::L2, 1u8), (Metric::Cosine, 2)] {
        let (base, q) = data::<f32>(4_000, 50, 32, 24);
        let dir = tempfile::tempdir().unwrap();
        build_index(&base, dir.path(), &rabitq(metric, bits), &Control::silent()).unwrap();
        let ix = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
        let t = truth(&base, &q, metric);
        let beam = recall_of(&ix, &q, &t, 64);
        let mut p = SearchParams::beam(10, 64, 4);
        p.strategy = trawl::kinds::graph::search::Strategy::Flash(Default::default());
        let out = ix.search_batch(&q, &p, 1).unwrap();
        let flash = recall10(&out.ids, &t);
        assert!(
            flash >= 0.9 && flash >= beam - 0.03,
            "{metric:?} {bits} bits: flash recall {flash}, beam {beam}"
        );
    }
}

/// Recall@10 and the summed statistics of a search of the decoupled layout of `dir`.
fn decoupled_run(
    dir: &std::path::Path,
    q: &Matrix<f32>,
    t: &trawl::data::GroundTruth,
    eps: f32,
) -> (f64, trawl::search::QueryStats) {
    let ix = DiskIndex::open(
        dir,
        OpenOptions {
            layout: IndexLayout::Decoupled,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut p = SearchParams::beam(10, 40, 4);
    p.rerank.skip_eps = eps;
    let out = ix.search_batch(q, &p, 1).unwrap();
    let mut total = trawl::search::QueryStats::default();
    for s in &out.stats {
        total += *s;
    }
    (recall10(&out.ids, t), total)
}

#[test]
fn the_error_bound_skips_vector_reads_of_the_decoupled_re_rank() {
    let (base, q) = data::<f32>(6_000, 100, 64, 25);
    let t = truth(&base, &q, Metric::L2);
    let dir = tempfile::tempdir().unwrap();
    build_decoupled(&base, dir.path(), &rabitq(Metric::L2, 2));
    let (r0, s0) = decoupled_run(dir.path(), &q, &t, 0.0);
    assert_eq!(s0.rerank.rerank_skipped, 0);
    for eps in [1.9f32, 3.0] {
        let (r, s) = decoupled_run(dir.path(), &q, &t, eps);
        assert!(s.rerank.rerank_skipped > 0, "ε₀ {eps}: nothing skipped");
        assert!(
            s.rerank.vector_reads < s0.rerank.vector_reads,
            "ε₀ {eps}: {} vector reads, {} without skipping",
            s.rerank.vector_reads,
            s0.rerank.vector_reads
        );
        // A skipped candidate is one the bound says cannot enter the top-K: at these
        // confidences the recall stays (within one neighbour in two hundred).
        assert!(
            r >= r0 - 0.005,
            "ε₀ {eps}: recall {r}, {r0} without skipping"
        );
    }
    // A PQ index has no bound: nothing is skipped.
    let pq = tempfile::tempdir().unwrap();
    build_decoupled(&base, pq.path(), &params(Metric::L2, 16));
    let (_, s) = decoupled_run(pq.path(), &q, &t, 1.9);
    assert_eq!(s.rerank.rerank_skipped, 0);
}

/// The IVF kind's filter stage with RaBitQ codes: every metric and element type finds the
/// neighbours as PQ does (the round trip's bar), with exact re-ranked distances, and the files
/// verify.
#[test]
fn ivf_filter_stage_scores_rabitq_codes() {
    use trawl::kinds::ivf::{build_ivf, IvfIndex, IvfParams, IvfSearchParams};
    fn one<T: trawl::Element>(metric: Metric, bits: u8, seed: u64) {
        let dir = tempfile::tempdir().unwrap();
        let (base, q) = data::<T>(6_000, 50, 32, seed);
        let params = IvfParams {
            metric,
            quant: QuantKind::RaBitQ { bits },
            ..IvfParams::default()
        };
        build_ivf(&base, dir.path(), &params, &Control::silent()).unwrap();
        let ix = IvfIndex::open(dir.path(), OpenOptions::default()).unwrap();
        assert_eq!(ix.pq().kind(), QuantKind::RaBitQ { bits });
        ix.verify(&Control::silent()).unwrap();
        let sp = IvfSearchParams {
            nprobe: 64,
            top_n: 300,
            batch: 8,
            beta: 3,
            ..IvfSearchParams::default()
        };
        let out = ix.search_batch(&q, &sp, 2).unwrap();
        let gt = truth(&base, &q, metric);
        let recall = trawl::vamana::recall_at_k(&out.ids, 10, &gt).unwrap();
        let what = format!("{metric:?} {} bits {bits}", T::DTYPE.name());
        assert!(recall >= 0.95, "{what}: recall@10 {recall}");
        // The bound skips re-ranks (default ε₀ 1.9) at almost no recall; 0 skips none.
        let off = ix
            .search_batch(
                &q,
                &IvfSearchParams {
                    skip_eps: 0.0,
                    ..sp
                },
                2,
            )
            .unwrap();
        let recall_off = trawl::vamana::recall_at_k(&off.ids, 10, &gt).unwrap();
        let total = |o: &trawl::search::BatchOutput| {
            o.stats
                .iter()
                .fold(trawl::search::QueryStats::default(), |mut a, s| {
                    a += *s;
                    a
                })
        };
        let (on_s, off_s) = (total(&out), total(&off));
        assert_eq!(off_s.rerank.rerank_skipped, 0, "{what}");
        assert!(on_s.rerank.rerank_skipped > 0, "{what}: nothing skipped");
        assert!(
            on_s.traversal.exact_distances < off_s.traversal.exact_distances,
            "{what}: {} exact distances with skipping, {} without",
            on_s.traversal.exact_distances,
            off_s.traversal.exact_distances
        );
        assert!(
            recall >= recall_off - 0.005,
            "{what}: {recall} vs {recall_off} without skipping"
        );
        // FastScan blocks by list answer exactly as the gathered ids do, and hold memory.
        assert_eq!(
            ix.memory().code_lists,
            0,
            "{what}: lists without --fastscan"
        );
        let fs = IvfIndex::open(
            dir.path(),
            OpenOptions {
                fastscan: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert!(fs.memory().code_lists > 0, "{what}: no FastScan lists");
        let fs_out = fs.search_batch(&q, &sp, 2).unwrap();
        assert_eq!(fs_out.ids, out.ids, "{what}: FastScan ids");
        assert_eq!(fs_out.dists, out.dists, "{what}: FastScan distances");
        for r in 0..q.n() {
            let id = out.ids[r * 10] as usize;
            let d = trawl::kernels::distance(metric, q.row(r), base.row(id));
            assert!(
                (d - out.dists[r * 10]).abs() <= 1e-4 * d.abs().max(1.0),
                "{what}"
            );
        }
    }
    one::<f32>(Metric::L2, 1, 1);
    one::<f32>(Metric::InnerProduct, 2, 2);
    one::<f32>(Metric::Cosine, 4, 3);
    one::<u8>(Metric::L2, 1, 4);
    one::<i8>(Metric::Cosine, 2, 5);
}

/// The page-node layout with RaBitQ codes: a page is scored by its nearest code under the
/// RaBitQ estimate; beam search, PipeSearch and flash find the neighbours, and flash with
/// staleness 0 is beam search with one read per round trip.
#[test]
fn the_page_node_layout_searches_rabitq_codes() {
    use trawl::kinds::graph::layout::pages::build::PageParams;
    use trawl::kinds::graph::search::{FlashParams, PipeParams, Strategy};
    for (metric, bits) in [(Metric::L2, 2u8), (Metric::Cosine, 3)] {
        let (base, q) = data::<f32>(5_000, 50, 32, 25);
        let dir = tempfile::tempdir().unwrap();
        build_index(&base, dir.path(), &rabitq(metric, bits), &Control::silent()).unwrap();
        let rep = DiskIndex::open(dir.path(), OpenOptions::default())
            .unwrap()
            .write_pages(&PageParams::default(), &Control::silent())
            .unwrap();
        assert!(rep.pages.unwrap().capacity > 1);
        let ix = DiskIndex::open(
            dir.path(),
            OpenOptions {
                layout: IndexLayout::Pages,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert_eq!(ix.pq().kind(), QuantKind::RaBitQ { bits });
        let t = truth(&base, &q, metric);
        let with = |strategy: Strategy, l: usize| SearchParams {
            strategy,
            ..SearchParams::beam(10, l, 1)
        };
        let beam = ix
            .search_batch(&q, &SearchParams::beam(10, 20, 1), 1)
            .unwrap();
        let strict = ix
            .search_batch(
                &q,
                &with(
                    Strategy::Flash(FlashParams {
                        staleness: 0,
                        ..FlashParams::default()
                    }),
                    20,
                ),
                2,
            )
            .unwrap();
        assert_eq!(
            strict.ids, beam.ids,
            "{metric:?}: flash staleness 0 = beam W 1"
        );
        let pipe = ix
            .search_batch(&q, &with(Strategy::Pipe(PipeParams::default()), 20), 1)
            .unwrap();
        let flash = ix
            .search_batch(&q, &with(Strategy::Flash(FlashParams::default()), 20), 1)
            .unwrap();
        for (what, out) in [("beam", &beam), ("pipe", &pipe), ("flash", &flash)] {
            let r = recall10(&out.ids, &t);
            assert!(r >= 0.9, "{metric:?} {bits} bits, {what}: recall {r}");
            let pages: u64 = out.stats.iter().map(|s| s.io.pages_read).sum();
            let exact: u64 = out.stats.iter().map(|s| s.traversal.exact_distances).sum();
            assert!(
                exact > 2 * pages,
                "{what}: every vector of a page read is measured"
            );
        }
    }
}

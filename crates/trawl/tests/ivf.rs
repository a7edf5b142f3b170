//! The IVF index kind (FusionANNS): build and search round trips for every metric and element
//! type, the re-rank's switches, exact counters checked against an independent count, and
//! damaged files.

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::{data, truth};
use trawl::io::EngineKind;
use trawl::kinds::graph::{KindName, OpenError, OpenOptions};
use trawl::kinds::ivf::{build_ivf, IvfIndex, IvfParams, IvfSearchParams, IvfVectorLayout};
use trawl::kinds::{open as open_any, AnyIndex};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::vamana::recall_at_k;
use trawl::{Element, Metric};

fn params(metric: Metric) -> IvfParams {
    IvfParams {
        metric,
        pq: PqParams {
            bytes_per_vector: 8,
            ..PqParams::default()
        },
        by_id_file: true,
        ..IvfParams::default()
    }
}

fn open(dir: &Path) -> IvfIndex {
    IvfIndex::open(dir, OpenOptions::default()).unwrap()
}

/// A generous setting: many lists, a deep candidate list, and an early stop that waits for
/// three quiet batches of 8 (the defaults stop sooner, for speed).
fn generous() -> IvfSearchParams {
    IvfSearchParams {
        nprobe: 64,
        top_n: 300,
        batch: 8,
        beta: 3,
        ..IvfSearchParams::default()
    }
}

fn round_trip<T: Element>(metric: Metric, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<T>(6_000, 50, 32, seed);
    let rep = build_ivf(&base, dir.path(), &params(metric), &Control::silent()).unwrap();
    assert_eq!(rep.n, 6_000);
    assert!(
        rep.nlist >= 300 && rep.nlist <= 1_200,
        "{} lists",
        rep.nlist
    );
    assert!(rep.replication >= 1.0 && rep.replication <= 8.0);
    let gt = truth(&base, &q, metric);
    {
        let ix = open(dir.path());
        let m = ix.meta();
        assert!(
            (0..m.nlist() as u32).all(|l| !m.list(l).is_empty()),
            "an empty posting list"
        );
        // What verify checks holds for every build.
        ix.verify(&Control::silent()).unwrap();
    }
    let AnyIndex::Ivf(ix) = open_any(dir.path(), OpenOptions::default()).unwrap() else {
        panic!("an IVF directory opens as IVF");
    };
    let out = ix.search_batch(&q, &generous(), 2).unwrap();
    let recall = recall_at_k(&out.ids, 10, &gt).unwrap();
    assert!(
        recall >= 0.95,
        "{metric:?} {}: recall@10 {recall}",
        T::DTYPE.name()
    );
    // Distances are exact and sorted.
    for r in 0..q.n() {
        let row = &out.dists[r * 10..(r + 1) * 10];
        assert!(row.windows(2).all(|w| w[0] <= w[1]));
        let id = out.ids[r * 10] as usize;
        let d = trawl::kernels::distance(metric, q.row(r), base.row(id));
        assert!((d - row[0]).abs() <= 1e-4 * d.abs().max(1.0));
    }
}

#[test]
fn round_trip_l2_f32() {
    round_trip::<f32>(Metric::L2, 1);
}

#[test]
fn round_trip_cosine_f32() {
    round_trip::<f32>(Metric::Cosine, 2);
}

#[test]
fn round_trip_ip_f32() {
    round_trip::<f32>(Metric::InnerProduct, 3);
}

#[test]
fn round_trip_l2_u8() {
    round_trip::<u8>(Metric::L2, 4);
}

#[test]
fn round_trip_l2_i8() {
    round_trip::<i8>(Metric::L2, 5);
}

#[test]
fn round_trip_cosine_i8() {
    round_trip::<i8>(Metric::Cosine, 6);
}

#[test]
fn manifest_names_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(2_000, 1, 16, 7);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let m = trawl::kinds::graph::Manifest::load_if_present(dir.path())
        .unwrap()
        .unwrap();
    assert_eq!(m.kind, KindName::Ivf);
    assert_eq!(m.layouts, vec!["bucket".to_string(), "by_id".to_string()]);
    let info = open(dir.path()).info().unwrap();
    assert_eq!(info.kind, KindName::Ivf);
    let ivf = info.ivf.unwrap();
    assert_eq!(ivf.accel.backend, "cpu");
    assert!(ivf.nlist > 0);
}

/// With ε = 0 the early stop never fires: the same results and counters as re-ranking all n.
#[test]
fn epsilon_zero_equals_reranking_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(4_000, 40, 24, 8);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let ix = open(dir.path());
    for mates in [false, true] {
        let eps0 = IvfSearchParams {
            epsilon: 0.0,
            beta: 1,
            page_mates: mates,
            ..generous()
        };
        let all = IvfSearchParams {
            heuristic: false,
            page_mates: mates,
            ..generous()
        };
        let a = ix.search_batch(&q, &eps0, 1).unwrap();
        let b = ix.search_batch(&q, &all, 1).unwrap();
        assert_eq!(a.ids, b.ids);
        assert_eq!(a.dists, b.dists);
        let (ta, tb) = (a.total(), b.total());
        assert_eq!(ta.traversal.exact_distances, tb.traversal.exact_distances);
        assert_eq!(ta.io.pages_read, tb.io.pages_read);
        if !mates {
            // Every query re-ranked all its candidates, and nothing else.
            for s in &b.stats {
                assert_eq!(
                    s.traversal.exact_distances,
                    s.ivf.candidates_unique.min(300)
                );
            }
        }
        // The heuristic stops earlier and reads less.
        let h = ix
            .search_batch(
                &q,
                &IvfSearchParams {
                    page_mates: mates,
                    ..generous()
                },
                1,
            )
            .unwrap()
            .total();
        assert!(h.traversal.exact_distances < tb.traversal.exact_distances);
        assert!(h.io.pages_read <= tb.io.pages_read);
    }
}

/// Page-mate scoring re-ranks a superset of the vectors (same reads, at a fixed n), so every
/// query's k-th distance can only get smaller; no id is returned twice, also when pages are
/// read again (page buffer off).
#[test]
fn page_mates_only_add_exact_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(5_000, 40, 16, 21);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let ix = open(dir.path());
    let p = |mates: bool, buffer: bool| IvfSearchParams {
        nprobe: 16,
        top_n: 24,
        batch: 4,
        heuristic: false,
        page_mates: mates,
        page_buffer: buffer,
        ..IvfSearchParams::default()
    };
    let off = ix.search_batch(&q, &p(false, true), 1).unwrap();
    let on = ix.search_batch(&q, &p(true, true), 1).unwrap();
    let on_rereads = ix.search_batch(&q, &p(true, false), 1).unwrap();
    assert_eq!(on.ids, on_rereads.ids);
    assert_eq!(on.dists, on_rereads.dists);
    let k = off.k;
    let mut better = 0;
    for r in 0..q.n() {
        let (a, b) = (
            &off.dists[r * k..(r + 1) * k],
            &on.dists[r * k..(r + 1) * k],
        );
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(y <= x, "query {r}: rank {j} {y} > {x}");
        }
        better += usize::from(b != a);
        let ids: HashSet<u32> = on.ids[r * k..(r + 1) * k].iter().copied().collect();
        assert_eq!(ids.len(), k, "query {r}: an id returned twice");
        // Every distance is the exact one.
        for j in 0..k {
            let id = on.ids[r * k + j] as usize;
            let d = <f32 as Element>::l2_sq(q.row(r), base.row(id));
            assert_eq!(d.to_bits(), on.dists[r * k + j].to_bits());
        }
    }
    assert!(better > 0, "page mates changed no result");
    let (t_off, t_on) = (off.total(), on.total());
    assert_eq!(t_off.io.pages_read, t_on.io.pages_read);
    assert_eq!(t_off.ivf.page_mates, 0);
    assert!(t_on.ivf.page_mates > 0);
    assert!(t_on.traversal.exact_distances > t_off.traversal.exact_distances);
}

/// An independent count of what one query must read: the candidate list the filter stage
/// keeps, the slot table, and the page rules.
#[test]
fn dedup_and_page_counters_match_an_independent_count() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(5_000, 20, 16, 9);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let ix = open(dir.path());
    let meta = ix.meta();
    let pq = ix.pq();
    // Vectors on each page, counted from the slot table.
    let mut occupancy: std::collections::HashMap<u64, u64> = Default::default();
    for id in 0..base.n() as u32 {
        *occupancy.entry(ix.vectors().locate(id).0).or_default() += 1;
    }
    for (merge, buffer, mates) in [
        (true, true, false),
        (false, true, false),
        (true, false, false),
        (false, false, false),
        (true, true, true),
        (false, true, true),
        (true, false, true),
        (false, false, true),
    ] {
        let p = IvfSearchParams {
            nprobe: 24,
            top_n: 120,
            batch: 8,
            heuristic: false,
            page_merge: merge,
            page_buffer: buffer,
            page_mates: mates,
            ..IvfSearchParams::default()
        };
        let mut s = ix.searcher().unwrap();
        for r in 0..q.n() {
            let (_, st) = s.search(q.row(r), &p).unwrap();
            // The lists probed: an exhaustive scan of the centroids finds the same ones
            // when the centroid search list is large enough; use the searcher's own
            // count of gathered ids instead, and recount uniqueness from the lists.
            assert_eq!(st.ivf.lists_probed, 24);
            // Gathered and unique ids, recomputed from the nearest lists by brute force.
            let mut qc: Vec<f32> = q.row(r).to_vec();
            let _ = &mut qc;
            let mut cents: Vec<(f32, u32)> = (0..meta.nlist() as u32)
                .map(|l| {
                    let c = &meta.centroids[l as usize * meta.dim..(l as usize + 1) * meta.dim];
                    (<f32 as Element>::l2_sq(&qc, c), l)
                })
                .collect();
            cents.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let ids: Vec<u32> = cents[..24]
                .iter()
                .flat_map(|&(_, l)| meta.list(l).iter().copied())
                .collect();
            // The graph search may miss a nearest list now and then; the counts must agree
            // whenever it found the same lists (which it does for nearly every query).
            let uniq: HashSet<u32> = ids.iter().copied().collect();
            if st.ivf.candidates != ids.len() as u64 {
                continue;
            }
            assert_eq!(st.ivf.candidates_unique, uniq.len() as u64);
            // The re-rank's candidates: the top 120 unique ids by PQ distance.
            let table = pq.as_pq().unwrap().query_table(q.row(r)).unwrap();
            let mut scored: Vec<(f32, u32)> = uniq
                .iter()
                .map(|&id| {
                    (
                        trawl::accel::adc_distance(table.flat(), ix.codes().code(id as usize)),
                        id,
                    )
                })
                .collect();
            scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            scored.truncate(120);
            // Page rules, batch by batch.
            let (mut reads, mut merged, mut buffered) = (0u64, 0u64, 0u64);
            // Vectors scored: candidates (page mates off), or everything on the pages read.
            let (mut scored_on_reads, mut missed) = (0u64, 0u64);
            let mut seen: HashSet<u64> = HashSet::new();
            for batch in scored.chunks(8) {
                let pages: Vec<u64> = batch
                    .iter()
                    .map(|&(_, id)| ix.vectors().locate(id).0)
                    .collect();
                let mut hit: HashSet<u64> = HashSet::new();
                let mut miss: Vec<u64> = Vec::new();
                for &pg in &pages {
                    if buffer && seen.contains(&pg) {
                        hit.insert(pg);
                    } else {
                        miss.push(pg);
                    }
                }
                let distinct: HashSet<u64> = miss.iter().copied().collect();
                let n_reads = if merge { distinct.len() } else { miss.len() } as u64;
                missed += miss.len() as u64;
                scored_on_reads += if merge {
                    distinct.iter().map(|pg| occupancy[pg]).sum::<u64>()
                } else {
                    miss.iter().map(|pg| occupancy[pg]).sum::<u64>()
                };
                reads += n_reads;
                merged += miss.len() as u64 - n_reads;
                buffered += hit.len() as u64;
                if buffer {
                    seen.extend(distinct);
                }
            }
            if mates {
                assert_eq!(st.traversal.exact_distances, scored_on_reads);
                assert_eq!(st.ivf.page_mates, scored_on_reads - missed);
            } else {
                assert_eq!(st.traversal.exact_distances, scored.len() as u64);
                assert_eq!(st.ivf.page_mates, 0);
            }
            assert_eq!(st.io.io_requests, reads, "merge {merge} buffer {buffer}");
            assert_eq!(st.io.pages_read, reads);
            assert_eq!(st.io.bytes_read, reads * 4096);
            assert_eq!(st.ivf.pages_merged, merged);
            assert_eq!(st.ivf.pages_buffered, buffered);
            assert_eq!(st.rerank.rerank_batches, scored.len().div_ceil(8) as u64);
            if buffer && merge {
                // Never a page twice for one query.
                assert!(st.io.pages_read <= seen.len() as u64);
            }
        }
    }
}

/// The page counts above, observed at the device: a counting engine wrapper sees every read.
#[test]
fn reads_reach_the_device_as_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(3_000, 10, 16, 10);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    for engine in [EngineKind::Pread, EngineKind::Memory, EngineKind::Auto] {
        let ix = IvfIndex::open(
            dir.path(),
            OpenOptions {
                engine,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        let mut s = ix.searcher().unwrap();
        let before = s.engine().counters();
        let mut total = trawl::search::QueryStats::default();
        for r in 0..q.n() {
            let (_, st) = s.search(q.row(r), &generous()).unwrap();
            total += st;
        }
        let after = s.engine().counters();
        assert_eq!(after.requests - before.requests, total.io.io_requests);
        assert_eq!(after.pages - before.pages, total.io.pages_read);
    }
}

#[test]
fn bucket_layout_reads_fewer_pages_than_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(8_000, 40, 16, 12);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let p = IvfSearchParams {
        heuristic: false,
        ..generous()
    };
    let bucket = open(dir.path()).search_batch(&q, &p, 1).unwrap();
    let by_id = IvfIndex::open(
        dir.path(),
        OpenOptions {
            ivf_vectors: IvfVectorLayout::ById,
            ..OpenOptions::default()
        },
    )
    .unwrap()
    .search_batch(&q, &p, 1)
    .unwrap();
    assert_eq!(bucket.ids, by_id.ids, "same results, other pages");
    assert!(
        bucket.total().io.pages_read * 10 < by_id.total().io.pages_read * 8,
        "bucket {} pages, by id {}",
        bucket.total().io.pages_read,
        by_id.total().io.pages_read
    );
}

fn damaged(dir: &Path, name: &str, how: &dyn Fn(&Path)) -> OpenError {
    let path = dir.join(name);
    let keep = std::fs::read(&path).unwrap();
    how(&path);
    let err = IvfIndex::open(dir, OpenOptions::default())
        .map(|_| format!("{} opened after damage", path.display()))
        .unwrap_err();
    std::fs::write(&path, keep).unwrap();
    err
}

#[test]
fn damaged_or_truncated_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(2_000, 2, 16, 13);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let flip = |at: u64| {
        move |p: &Path| {
            let mut b = std::fs::read(p).unwrap();
            let i = (at as usize).min(b.len() - 1);
            b[i] ^= 0x40;
            std::fs::write(p, b).unwrap();
        }
    };
    let cut = |p: &Path| {
        let b = std::fs::read(p).unwrap();
        std::fs::write(p, &b[..b.len() - 100]).unwrap();
    };
    for name in [
        "ivf.trawl",
        "ivf-vectors.trawl",
        "pq.trawl",
        "pq-codes.trawl",
    ] {
        // A byte of the payload; for the vector file, of its tables (data pages are checked
        // when they are read, below).
        let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
        let payload = if name == "ivf-vectors.trawl" {
            len - 4096 + 2
        } else {
            len / 2
        };
        for (what, e) in [
            ("truncated", damaged(dir.path(), name, &cut)),
            ("header byte", damaged(dir.path(), name, &flip(10))),
            ("payload byte", damaged(dir.path(), name, &flip(payload))),
        ] {
            let msg = e.to_string();
            assert!(
                msg.contains(name) || msg.contains("manifest") || msg.contains("not the"),
                "{name} {what}: {msg}"
            );
            assert!(
                matches!(e.kind(), trawl::ErrorKind::Corrupt),
                "{name} {what}: {:?} {msg}",
                e.kind()
            );
        }
    }
    // A damaged data page of the vector file: open succeeds (pages are checked when read),
    // the search that reads it fails with the page named.
    let vpath = dir.path().join("ivf-vectors.trawl");
    let mut b = std::fs::read(&vpath).unwrap();
    for page in 1..4 {
        b[page * 4096 + 7] ^= 0x01;
    }
    std::fs::write(&vpath, &b).unwrap();
    let ix = open(dir.path());
    let p = IvfSearchParams {
        nprobe: ix.meta().nlist().min(400),
        top_n: 2_000,
        heuristic: false,
        ..IvfSearchParams::default()
    };
    let err = ix.search_batch(&q, &p, 1).unwrap_err();
    assert_eq!(err.kind(), trawl::ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("page"), "{err}");
}

#[test]
fn bad_parameters_and_queries_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(1_000, 2, 8, 14);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let ix = open(dir.path());
    let mut s = ix.searcher().unwrap();
    let ok = IvfSearchParams::default();
    for bad in [
        IvfSearchParams { k: 0, ..ok },
        IvfSearchParams { nprobe: 0, ..ok },
        IvfSearchParams {
            nprobe: 1 << 19,
            ..ok
        },
        IvfSearchParams { top_n: 5, ..ok },
        IvfSearchParams { batch: 0, ..ok },
        IvfSearchParams { epsilon: 2.0, ..ok },
        IvfSearchParams { beta: 0, ..ok },
    ] {
        let e = s.search(q.row(0), &bad).unwrap_err();
        assert_eq!(e.kind(), trawl::ErrorKind::InvalidInput, "{bad:?}: {e}");
    }
    assert!(s.search(&[0.0f32; 7], &ok).is_err());
    assert!(s.search(&[f32::NAN; 8], &ok).is_err());
    assert!(s.search(&[0u8; 8], &ok).is_err());
    // Build parameters.
    let d2 = tempfile::tempdir().unwrap();
    for bad in [
        IvfParams {
            list_size: 0,
            ..params(Metric::L2)
        },
        IvfParams {
            max_replicas: 0,
            ..params(Metric::L2)
        },
        IvfParams {
            epsilon: -1.0,
            ..params(Metric::L2)
        },
    ] {
        let e = build_ivf(&base, d2.path(), &bad, &Control::silent()).unwrap_err();
        assert_eq!(e.kind(), trawl::ErrorKind::InvalidInput, "{e}");
    }
    // By-id layout missing: a clear error.
    let d3 = tempfile::tempdir().unwrap();
    build_ivf(
        &base,
        d3.path(),
        &IvfParams {
            by_id_file: false,
            ..params(Metric::L2)
        },
        &Control::silent(),
    )
    .unwrap();
    let e = IvfIndex::open(
        d3.path(),
        OpenOptions {
            ivf_vectors: IvfVectorLayout::ById,
            ..OpenOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("by-id"), "{e}");
}

/// Vectors larger than a page (dimension 1,100 f32 = 4,400 bytes) take two pages each.
#[test]
fn vectors_larger_than_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(600, 10, 1_100, 15);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let ix = open(dir.path());
    assert_eq!(ix.vectors().geometry().pages_per_vector, 2);
    let gt = truth(&base, &q, Metric::L2);
    let out = ix.search_batch(&q, &generous(), 2).unwrap();
    assert!(recall_at_k(&out.ids, 10, &gt).unwrap() >= 0.95);
    let t = out.total();
    assert_eq!(t.io.pages_read, 2 * t.io.io_requests);
    ix.verify(&Control::silent()).unwrap();
    // One list per vector: verify also checks the buckets of vectors spanning pages.
    let one = tempfile::tempdir().unwrap();
    let p = IvfParams {
        max_replicas: 1,
        ..params(Metric::L2)
    };
    build_ivf(&base, one.path(), &p, &Control::silent()).unwrap();
    open(one.path()).verify(&Control::silent()).unwrap();
}

/// Pipelined groups of queries, several re-ranks in flight per thread and an engine too
/// shallow for one batch's reads give the same answers and counters as one query at a time.
#[test]
fn pipelining_and_interleaving_do_not_change_results() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(3_000, 37, 16, 16);
    build_ivf(&base, dir.path(), &params(Metric::L2), &Control::silent()).unwrap();
    let ix = open(dir.path());
    let one = ix.search_batch(&q, &generous(), 2).unwrap();
    let strip = |mut s: trawl::search::QueryStats| {
        s.total_ns = 0;
        s.io.io_wait_ns = 0;
        s
    };
    for (accel_batch, interleave, depth) in
        [(8, 1, 64), (1, 3, 64), (5, 4, 64), (1, 2, 3), (4, 3, 1)]
    {
        let ix2;
        let ix = if depth == 64 {
            &ix
        } else {
            ix2 = IvfIndex::open(
                dir.path(),
                OpenOptions {
                    queue_depth: depth,
                    ..OpenOptions::default()
                },
            )
            .unwrap();
            &ix2
        };
        let p = IvfSearchParams {
            accel_batch,
            batch: 8,
            ..generous()
        };
        let base_p = IvfSearchParams {
            batch: 8,
            ..generous()
        };
        let reference = if base_p == generous() {
            one.clone()
        } else {
            open(dir.path()).search_batch(&q, &base_p, 2).unwrap()
        };
        let run = trawl::kinds::Run {
            threads: 2,
            interleave,
        };
        let got = ix.search_batch(&q, &p, run).unwrap();
        assert_eq!(reference.ids, got.ids, "{accel_batch} {interleave} {depth}");
        assert_eq!(reference.dists, got.dists);
        for (a, b) in reference.stats.iter().zip(&got.stats) {
            assert_eq!(strip(*a), strip(*b));
        }
        // Single-query searches agree too.
        let mut s = ix.searcher().unwrap();
        for r in 0..q.n() {
            let (hits, st) = s.search(q.row(r), &base_p).unwrap();
            let ids: Vec<u32> = hits.iter().map(|h| h.1).collect();
            assert_eq!(&ids[..], &reference.ids[r * 10..r * 10 + ids.len()]);
            assert_eq!(strip(st), strip(reference.stats[r]));
        }
    }
}

// ---- forged ivf.trawl (issue 39) ------------------------------------------------------------

use trawl::dir::FileErrorKind;
use trawl::kinds::ivf::file::IvfMeta;

/// Rewrites `dir/ivf.trawl` with `forge` applied to its contents (its checksum and the
/// manifest's record of it recomputed, as a forger would), returning the file's path.
fn forge_ivf(dir: &Path, forge: impl FnOnce(&mut IvfMeta)) -> std::path::PathBuf {
    let path = dir.join("ivf.trawl");
    let mut meta = IvfMeta::load(&path).unwrap();
    forge(&mut meta);
    meta.save(&path).unwrap();
    reseal_manifest_entry(dir, "ivf.trawl");
    path
}

/// Records the current size and envelope checksum of `name` in the manifest.
fn reseal_manifest_entry(dir: &Path, name: &str) {
    let mpath = dir.join(trawl::kinds::graph::MANIFEST_FILE);
    let mut m = trawl::kinds::graph::Manifest::load_from(&mpath).unwrap();
    let bytes = std::fs::read(dir.join(name)).unwrap();
    let f = m.files.iter_mut().find(|f| f.name == name).unwrap();
    f.bytes = bytes.len() as u64;
    f.checksum = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    m.write_to(&mpath).unwrap();
}

/// The error is a corrupt-file error that names `path` and says `needle`.
fn names_file(e: &dyn std::fmt::Display, kind: trawl::ErrorKind, path: &Path, needle: &str) {
    let msg = e.to_string();
    assert_eq!(kind, trawl::ErrorKind::Corrupt, "{msg}");
    assert!(msg.contains(&*path.to_string_lossy()), "{msg}");
    assert!(msg.contains(needle), "{msg} lacks {needle:?}");
}

fn small_ivf(params: &IvfParams) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(1_500, 1, 8, 21);
    build_ivf(&base, dir.path(), params, &Control::silent()).unwrap();
    dir
}

/// An `ivf.trawl` whose centroid-graph degree is 2^32 − 1 or 2^24 made `Graph::from_lists`
/// allocate lists × degree ids (`memory allocation of 9534827394900 bytes failed`, exit 134).
#[test]
fn forged_centroid_graph_degree_is_refused() {
    let dir = small_ivf(&params(Metric::L2));
    let path = dir.path().join("ivf.trawl");
    let keep = std::fs::read(&path).unwrap();
    for r in [u32::MAX, 1 << 24, 65_536] {
        let mut b = keep.clone();
        // Payload offset 42 (after n, dim, dtype, metric, nlist, list size, replicas, ε and
        // three CRCs): the centroid graph's R.
        b[32 + 42..32 + 46].copy_from_slice(&r.to_le_bytes());
        let c = crc32fast::hash(&b[32..]);
        b[24..28].copy_from_slice(&c.to_le_bytes());
        let h = crc32fast::hash(&b[..28]);
        b[28..32].copy_from_slice(&h.to_le_bytes());
        std::fs::write(&path, &b).unwrap();
        reseal_manifest_entry(dir.path(), "ivf.trawl");
        let e = IvfMeta::load(&path).unwrap_err();
        assert_eq!(e.path, path);
        assert!(
            matches!(&e.kind, FileErrorKind::Invalid(m) if m.contains("largest degree")),
            "{e}"
        );
        let e = IvfIndex::open(dir.path(), OpenOptions::default()).unwrap_err();
        names_file(&e, e.kind(), &path, "largest degree");
        let e = open_any(dir.path(), OpenOptions::default()).unwrap_err();
        names_file(&e, e.kind(), &path, "largest degree");
    }
}

/// All-NaN or infinite centroids passed verify and search answered with recall 0.024; open
/// (and so `trawl info --verify`, which opens first) must refuse them, naming ivf.trawl.
#[test]
fn non_finite_centroids_are_refused_by_open_and_verify() {
    let dir = small_ivf(&params(Metric::L2));
    let keep = std::fs::read(dir.path().join("ivf.trawl")).unwrap();
    let keep_manifest = std::fs::read(dir.path().join("manifest.trawl")).unwrap();
    for (what, forge) in [
        (
            "all NaN",
            (|c: &mut Vec<f32>| c.fill(f32::NAN)) as fn(&mut Vec<f32>),
        ),
        ("one infinite", |c: &mut Vec<f32>| c[3] = f32::INFINITY),
        ("all -inf", |c: &mut Vec<f32>| c.fill(f32::NEG_INFINITY)),
        ("too large", |c: &mut Vec<f32>| c[0] = 3e38),
    ] {
        let path = forge_ivf(dir.path(), |m| forge(&mut m.centroids));
        let needle = if what == "too large" {
            "too large"
        } else {
            "non-finite"
        };
        let e = IvfMeta::load(&path).unwrap_err();
        assert!(
            matches!(&e.kind, FileErrorKind::Invalid(m) if m.contains(needle)),
            "{what}: {e}"
        );
        let e = IvfIndex::open(dir.path(), OpenOptions::default()).unwrap_err();
        names_file(&e, e.kind(), &path, needle);
        let e = open_any(dir.path(), OpenOptions::default()).unwrap_err();
        names_file(&e, e.kind(), &path, needle);
        std::fs::write(&path, &keep).unwrap();
        std::fs::write(dir.path().join("manifest.trawl"), &keep_manifest).unwrap();
    }
    // Untouched, it opens and verifies.
    open(dir.path()).verify(&Control::silent()).unwrap();
}

/// Every id moved into one posting list (checksums recomputed): verify must refuse it.
#[test]
fn all_ids_in_one_list_fail_verify() {
    let dir = small_ivf(&params(Metric::L2));
    let ix = open(dir.path());
    ix.verify(&Control::silent()).unwrap();
    ix.check_structure().unwrap();
    drop(ix);
    let keep = std::fs::read(dir.path().join("ivf.trawl")).unwrap();
    let keep_manifest = std::fs::read(dir.path().join("manifest.trawl")).unwrap();
    // Deduplicated (every id once, in list 0), and as the old lists concatenated (replicas
    // kept: list 0 then repeats ids).
    for dedup in [true, false] {
        let path = forge_ivf(dir.path(), |m| {
            if dedup {
                m.list_ids = (0..m.n as u32).collect();
            }
            let total = m.list_ids.len() as u64;
            for (l, o) in m.list_offsets.iter_mut().enumerate() {
                *o = if l == 0 { 0 } else { total };
            }
        });
        if dedup {
            // Opens (each list is well formed), but verify sees the emptied lists.
            let ix = open(dir.path());
            let e = ix.verify(&Control::silent()).unwrap_err();
            names_file(&e, e.kind(), &path, "posting list 1 is empty");
            let e = ix.check_structure().unwrap_err();
            assert_eq!(e.path, path);
        } else {
            let e = IvfIndex::open(dir.path(), OpenOptions::default()).unwrap_err();
            names_file(&e, e.kind(), &path, "ascending");
        }
        std::fs::write(&path, &keep).unwrap();
        std::fs::write(dir.path().join("manifest.trawl"), &keep_manifest).unwrap();
    }
    // Other broken list invariants: a vector in no list, in more lists than allowed.
    let path = forge_ivf(dir.path(), |m| {
        let l0 = m.list(0).to_vec();
        let cut = m.list_offsets[1] as usize;
        m.list_ids.remove(cut - 1);
        for o in &mut m.list_offsets[1..] {
            *o -= 1;
        }
        // The removed id may still be in another list: remove it everywhere.
        let gone = l0[l0.len() - 1];
        let mut ids = Vec::new();
        let mut offs = vec![0u64];
        for l in 0..m.nlist() as u32 {
            ids.extend(m.list(l).iter().copied().filter(|&x| x != gone));
            offs.push(ids.len() as u64);
        }
        m.list_ids = ids;
        m.list_offsets = offs;
    });
    let e = open(dir.path()).verify(&Control::silent()).unwrap_err();
    names_file(&e, e.kind(), &path, "is in no posting list");
    std::fs::write(&path, &keep).unwrap();
    std::fs::write(dir.path().join("manifest.trawl"), &keep_manifest).unwrap();
    let path = forge_ivf(dir.path(), |m| m.max_replicas = 1);
    let e = open(dir.path()).verify(&Control::silent()).unwrap_err();
    names_file(&e, e.kind(), &path, "posting lists");
    std::fs::write(&path, &keep).unwrap();
    std::fs::write(dir.path().join("manifest.trawl"), &keep_manifest).unwrap();
    open(dir.path()).verify(&Control::silent()).unwrap();
}

/// With one list per vector (`max_replicas` 1) the lists are the buckets of the vector file:
/// moving every id into one list contradicts its layout.
#[test]
fn single_list_per_vector_must_match_the_buckets() {
    let dir = small_ivf(&IvfParams {
        max_replicas: 1,
        ..params(Metric::L2)
    });
    open(dir.path()).verify(&Control::silent()).unwrap();
    let path = forge_ivf(dir.path(), |m| {
        m.list_ids = (0..m.n as u32).collect();
        let total = m.n;
        for (l, o) in m.list_offsets.iter_mut().enumerate() {
            *o = if l == 0 { 0 } else { total };
        }
    });
    let e = open(dir.path()).verify(&Control::silent()).unwrap_err();
    names_file(
        &e,
        e.kind(),
        &path,
        "posting lists do not match the buckets of ivf-vectors.trawl",
    );
}

/// Verify checks every file with the component that owns it — the index file first, then the
/// PQ files and both vector files — so damage in a file no search reads by default (the by-id
/// vectors) is found too, naming the file and page.
#[test]
fn verify_checks_every_file_by_its_component() {
    let dir = small_ivf(&params(Metric::L2));
    let rep = open(dir.path()).verify(&Control::silent()).unwrap();
    let names: Vec<&str> = rep.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ivf.trawl",
            "pq.trawl",
            "pq-codes.trawl",
            "ivf-vectors.trawl",
            "ivf-vectors-by-id.trawl",
            "manifest.trawl"
        ]
    );
    // With replicas the layout cannot be derived from the lists: not claimed as checked.
    let sole = open(dir.path()).meta().sole_lists().is_some();
    assert_eq!(
        rep.files[3].checked.contains("follow the posting lists"),
        sole,
        "{rep:?}"
    );
    let path = dir.path().join("ivf-vectors-by-id.trawl");
    let mut raw = std::fs::read(&path).unwrap();
    raw[4096 + 10] ^= 0xFF;
    std::fs::write(&path, &raw).unwrap();
    let ix = open(dir.path());
    let e = ix.verify(&Control::silent()).unwrap_err();
    names_file(&e, e.kind(), &path, "checksum mismatch in page 1");
}

//! Streaming updates end to end: inserts, deletes and upserts seen by searches at once, kept
//! across a reopen (log replay) and a merge, and refused cleanly when the call is wrong.

mod common;

use std::collections::HashSet;

use common::{build, data};
use trawl::data::Matrix;
use trawl::exact::{knn, ExactParams};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex};
use trawl::kinds::graph::{IndexLayout, OpenOptions};
use trawl::progress::Control;
use trawl::{ErrorKind, Metric};

const DIM: usize = 32;

fn sp(k: usize) -> SearchParams {
    SearchParams::beam(k, 64, 4)
}

fn rows(m: &Matrix<f32>, from: usize, count: usize) -> Vec<f32> {
    m.as_slice()[from * DIM..(from + count) * DIM].to_vec()
}

/// The nearest id returned for each row of `q`.
fn top1(ix: &LiveIndex, q: &[f32]) -> Vec<(u64, f32)> {
    let out = ix.search_rows(q, &sp(1), 2, 1).unwrap();
    out.ids
        .iter()
        .copied()
        .zip(out.dists.iter().copied())
        .collect()
}

/// Every id returned for queries `q` at k = 10.
fn returned(ix: &LiveIndex, q: &[f32]) -> HashSet<u64> {
    ix.search_rows(q, &sp(10), 2, 1)
        .unwrap()
        .ids
        .into_iter()
        .collect()
}

/// recall@10 of the live index against exact search over `live` (ids, vectors).
fn recall(ix: &LiveIndex, ids: &[u64], vectors: &[f32], q: &Matrix<f32>) -> f64 {
    let base = Matrix::from_vec(vectors.to_vec(), DIM).unwrap();
    let t = knn(
        &base,
        q,
        10,
        Metric::L2,
        &ExactParams::default(),
        &Control::silent(),
    )
    .unwrap();
    let out = ix.search_rows(q.as_slice(), &sp(10), 2, 1).unwrap();
    common::recall_of_ids(&out.ids, &t, ids)
}

#[test]
fn updates_are_seen_at_once_survive_a_reopen_and_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(6_000, 100, DIM, 11);
    let base = Matrix::from_vec(rows(&all, 0, 4_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    let opts = OpenOptions::default();
    let ix = LiveIndex::open(dir.path(), opts, Access::ReadWrite).unwrap();
    assert_eq!(ix.len(), 4_000);

    // Insert 1,000 new vectors with chosen ids, 500 with assigned ids.
    let new_ids: Vec<u64> = (0..1_000).map(|i| 1_000_000 + i).collect();
    assert_eq!(
        ix.insert(Some(&new_ids), &rows(&all, 4_000, 1_000))
            .unwrap(),
        new_ids
    );
    let assigned = ix.insert(None, &rows(&all, 5_000, 500)).unwrap();
    assert_eq!(assigned.len(), 500);
    assert!(assigned
        .iter()
        .all(|id| !new_ids.contains(id) && *id >= 4_000));
    assert_eq!(ix.len(), 5_500);
    // Each inserted vector finds itself.
    let hits = top1(&ix, &rows(&all, 4_000, 1_000));
    let found = hits
        .iter()
        .zip(&new_ids)
        .filter(|(h, id)| h.0 == **id && h.1 == 0.0)
        .count();
    assert!(found >= 990, "{found} of 1000 inserted vectors found");

    // Delete 1,000 disk vectors and 100 inserted ones: never returned again.
    let gone: Vec<u64> = (0..1_000u64)
        .map(|i| i * 4)
        .chain(new_ids[..100].iter().copied())
        .collect();
    assert_eq!(ix.delete(&gone).unwrap().deleted, 1_100);
    assert_eq!(ix.len(), 4_400);
    let gone_set: HashSet<u64> = gone.iter().copied().collect();
    let mut queries = rows(&all, 0, 400);
    queries.extend(rows(&all, 4_000, 100));
    assert!(returned(&ix, &queries).is_disjoint(&gone_set));
    // Upsert: id 1 gets the vector of row 5,900 (its old vector is gone).
    ix.upsert(&[1], &rows(&all, 5_900, 1)).unwrap();
    assert_eq!(top1(&ix, &rows(&all, 5_900, 1))[0], (1, 0.0));
    assert_ne!(top1(&ix, &rows(&all, 1, 1))[0].0, 1);
    assert_eq!(ix.len(), 4_400);

    // The live set, for recall.
    let mut live_ids = Vec::new();
    let mut live_vecs = Vec::new();
    for r in 0..4_000 {
        if !gone_set.contains(&(r as u64)) && r != 1 {
            live_ids.push(r as u64);
            live_vecs.extend(rows(&all, r, 1));
        }
    }
    for (k, &id) in new_ids.iter().enumerate().skip(100) {
        live_ids.push(id);
        live_vecs.extend(rows(&all, 4_000 + k, 1));
    }
    for (k, &id) in assigned.iter().enumerate() {
        live_ids.push(id);
        live_vecs.extend(rows(&all, 5_000 + k, 1));
    }
    live_ids.push(1);
    live_vecs.extend(rows(&all, 5_900, 1));
    assert_eq!(live_ids.len(), 4_400);
    let before = recall(&ix, &live_ids, &live_vecs, &q);
    assert!(before >= 0.9, "recall before the merge {before}");
    let before_results = ix.search_rows(q.as_slice(), &sp(10), 1, 1).unwrap().ids;

    // A reopen replays the log: the same answers.
    drop(ix);
    let ix = LiveIndex::open(dir.path(), opts, Access::ReadWrite).unwrap();
    assert_eq!(ix.len(), 4_400);
    assert_eq!(
        ix.search_rows(q.as_slice(), &sp(10), 1, 1).unwrap().ids,
        before_results
    );

    // Merge: the delta and the deletions go to disk; every acknowledged operation stays.
    let report = ix.merge(2, &Control::silent()).unwrap();
    assert_eq!(report.inserted, 1_401);
    assert_eq!(report.deleted, 1_001);
    assert_eq!(report.slots, 4_400);
    assert_eq!(report.holes, 0);
    assert_eq!(ix.delta_len(), 0);
    assert_eq!(ix.len(), 4_400);
    let after = recall(&ix, &live_ids, &live_vecs, &q);
    assert!(
        after >= before - 0.01,
        "recall {before} before the merge, {after} after"
    );
    assert!(returned(&ix, &queries).is_disjoint(&gone_set));
    assert_eq!(top1(&ix, &rows(&all, 5_900, 1))[0], (1, 0.0));
    let hits = top1(&ix, &rows(&all, 4_100, 900));
    let found = hits
        .iter()
        .zip(&new_ids[100..])
        .filter(|(h, id)| h.0 == **id)
        .count();
    assert!(found >= 890, "{found} of 900 merged vectors found");

    // Writes after the merge land in the log after its checkpoint; reopen sees all.
    ix.delete(&[1_000_500]).unwrap();
    drop(ix);
    let ix = LiveIndex::open(dir.path(), opts, Access::ReadOnly).unwrap();
    assert_eq!(ix.len(), 4_399);
    assert_ne!(top1(&ix, &rows(&all, 4_500, 1))[0].0, 1_000_500);
    // A read-only handle refuses writes.
    let e = ix.delete(&[2]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("read-only"), "{e}");
    // The merged index verifies.
    trawl::kinds::graph::verify_index(dir.path(), &Control::silent()).unwrap();
}

#[test]
fn bad_calls_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(1_500, 1, DIM, 5);
    build(&base, dir.path(), Metric::L2, 16);
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    let one = rows(&base, 0, 1);
    let bad = |e: trawl::kinds::graph::updates::live::LiveError, what: &str| {
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains(what), "{e} (wanted {what:?})");
    };
    bad(
        ix.insert(Some(&[7]), &one).unwrap_err(),
        "already in the index",
    );
    bad(
        ix.insert(Some(&[9_000, 9_000]), &rows(&base, 0, 2))
            .unwrap_err(),
        "twice",
    );
    bad(
        ix.insert(Some(&[9_000]), &one[..DIM - 1]).unwrap_err(),
        "dimension",
    );
    bad(ix.insert(Some(&[9_000]), &[1u8; DIM]).unwrap_err(), "u8");
    let mut nan = one.clone();
    nan[3] = f32::NAN;
    bad(ix.insert(Some(&[9_000]), &nan).unwrap_err(), "NaN");
    bad(ix.insert(Some(&[u64::MAX]), &one).unwrap_err(), "reserved");
    bad(
        ix.insert(Some(&[1, 2]), &one).unwrap_err(),
        "2 ids for 1 vectors",
    );
    bad(ix.delete(&[5, 99_999]).unwrap_err(), "99999");
    bad(ix.delete(&[5, 5]).unwrap_err(), "twice");
    assert_eq!(ix.len(), 1_500);
    assert!(!dir.path().join("wal.trawl").exists(), "nothing was logged");
    // A second writer is refused, naming the holder.
    let e = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap_err();
    assert!(e.to_string().contains("pid"), "{e}");
    // A reader opens while the writer runs.
    let r = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadOnly).unwrap();
    assert_eq!(r.len(), 1_500);
}

#[test]
fn merge_keeps_the_other_layouts_and_refills_freed_slots() {
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(3_000, 50, DIM, 3);
    let base = Matrix::from_vec(rows(&all, 0, 2_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    {
        let ix = trawl::kinds::graph::DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
        ix.write_layout(
            IndexLayout::Shuffled,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
    }
    let opts = OpenOptions {
        layout: IndexLayout::Shuffled,
        ..OpenOptions::default()
    };
    let ix = LiveIndex::open(dir.path(), opts, Access::ReadWrite).unwrap();
    // Delete 600, insert 400: the new vectors take freed slots, 200 stay free.
    let gone: Vec<u64> = (0..600u64).map(|i| i * 3).collect();
    ix.delete(&gone).unwrap();
    let ids: Vec<u64> = (0..400).map(|i| 50_000 + i).collect();
    ix.insert(Some(&ids), &rows(&all, 2_000, 400)).unwrap();
    let r = ix.merge(1, &Control::silent()).unwrap();
    assert_eq!((r.slots, r.holes), (2_000, 200));
    assert_eq!(ix.len(), 1_800);
    let gone_set: HashSet<u64> = gone.iter().copied().collect();
    assert!(returned(&ix, q.as_slice()).is_disjoint(&gone_set));
    assert!(returned(&ix, &rows(&all, 0, 300)).is_disjoint(&gone_set));
    let hits = top1(&ix, &rows(&all, 2_000, 400));
    let found = hits.iter().zip(&ids).filter(|(h, id)| h.0 == **id).count();
    assert!(found >= 395, "{found} of 400");
    let m = ix.disk().manifest().cloned().unwrap();
    assert!(
        m.layouts.contains(&"shuffle".to_string()),
        "{:?}",
        m.layouts
    );
    trawl::kinds::graph::verify_index(dir.path(), &Control::silent()).unwrap();
}

#[test]
fn searches_on_two_threads_run_through_three_merges() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::RwLock;
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(5_000, 64, DIM, 21);
    let base = Matrix::from_vec(rows(&all, 0, 3_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    // Every id ever inserted, and the ids whose deletion has returned.
    let known: RwLock<HashSet<u64>> = RwLock::new((0..3_000).collect());
    let deleted: RwLock<HashSet<u64>> = RwLock::new(HashSet::new());
    let stop = AtomicBool::new(false);
    let searches = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (ix, known, deleted, stop, searches, q, all) =
                (&ix, &known, &deleted, &stop, &searches, &q, &all);
            s.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Acquire) {
                    let gone = deleted.read().unwrap().clone();
                    // Every other search looks for a deleted vector itself (its nearest
                    // neighbour is the deleted node, which must never come back).
                    let row = match gone.iter().nth(i % gone.len().max(1)) {
                        Some(&d) if i % 4 < 2 && d < 3_000 => {
                            &all.as_slice()[d as usize * DIM..(d as usize + 1) * DIM]
                        }
                        _ => &q.as_slice()[(i % q.n()) * DIM..(i % q.n() + 1) * DIM],
                    };
                    let out = ix
                        .search_rows(row, &sp(10), 1, 1)
                        .expect("a search never fails because of a merge");
                    let ids: Vec<u64> = out.ids.clone();
                    let known = known.read().unwrap();
                    assert!(ids.iter().all(|id| known.contains(id)), "{ids:?}");
                    assert!(
                        ids.iter().all(|id| !gone.contains(id)),
                        "an id deleted before the search began came back: {ids:?}"
                    );
                    let set: HashSet<u64> = ids.iter().copied().collect();
                    assert_eq!(set.len(), 10, "ten distinct results: {ids:?}");
                    searches.fetch_add(1, Ordering::Relaxed);
                    i += 2;
                }
            });
        }
        for round in 0..3u64 {
            let first = 3_000 + round as usize * 600;
            let ids: Vec<u64> = (first as u64..first as u64 + 600).collect();
            known.write().unwrap().extend(ids.iter().copied());
            ix.insert(Some(&ids), &rows(&all, first, 600)).unwrap();
            let gone: Vec<u64> = (0..300u64).map(|i| round * 900 + i * 3).collect();
            ix.delete(&gone).unwrap();
            deleted.write().unwrap().extend(gone);
            // Deletes taken out in place (by search, with the exact in-neighbours) and by
            // consolidation, one merge each.
            use trawl::kinds::graph::updates::merge::{DeleteRepair, InNeighbours, InPlaceParams};
            let deletes = match round {
                0 => DeleteRepair::default(),
                1 => DeleteRepair::InPlace(InPlaceParams {
                    in_neighbours: InNeighbours::Search { l: 0 },
                    ..InPlaceParams::default()
                }),
                _ => DeleteRepair::Consolidate,
            };
            let o = trawl::kinds::graph::updates::live::MergeOptions {
                threads: 1,
                deletes,
                ..Default::default()
            };
            ix.merge_with(&o, &Control::silent()).unwrap();
        }
        stop.store(true, Ordering::Release);
    });
    assert!(
        searches.load(Ordering::Relaxed) > 20,
        "the searches ran through the merges"
    );
    assert_eq!(ix.len(), 3_000 + 1_800 - 900);
}

#[test]
fn a_decoupled_merge_rewrites_the_graph_appends_segments_and_collects_garbage() {
    use trawl::kinds::graph::updates::live::MergeOptions;
    use trawl::kinds::graph::updates::merge::SegmentPolicy;
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(6_000, 60, DIM, 8);
    let base = Matrix::from_vec(rows(&all, 0, 3_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    {
        let ix = trawl::kinds::graph::DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
        ix.write_layout(
            IndexLayout::Decoupled,
            &Default::default(),
            &Control::silent(),
        )
        .unwrap();
    }
    let opts = OpenOptions {
        layout: IndexLayout::Decoupled,
        ..OpenOptions::default()
    };
    let ix = LiveIndex::open(dir.path(), opts, Access::ReadWrite).unwrap();
    let mut live: std::collections::BTreeMap<u64, usize> =
        (0..3_000).map(|r| (r, r as usize)).collect();
    let o = MergeOptions {
        threads: 2,
        segments: SegmentPolicy {
            gc_dead_share: 0.3,
            max_segments: 3,
        },
        ..MergeOptions::default()
    };
    let exists = |name: &str| dir.path().join(name).exists();
    let mut gone_all: HashSet<u64> = HashSet::new();
    let mut collected_any = false;
    for round in 0..4usize {
        // Delete a contiguous block of the oldest ids (whole segments age out), insert 500.
        let oldest: Vec<u64> = live.keys().copied().take(500).collect();
        ix.delete(&oldest).unwrap();
        for id in &oldest {
            live.remove(id);
        }
        gone_all.extend(oldest.iter().copied());
        let first = 3_000 + round * 500;
        let ids: Vec<u64> = (first as u64..first as u64 + 500).collect();
        ix.insert(Some(&ids), &rows(&all, first, 500)).unwrap();
        for (k, &id) in ids.iter().enumerate() {
            live.insert(id, first + k);
        }
        let r = ix.merge_with(&o, &Control::silent()).unwrap();
        assert_eq!((r.inserted, r.deleted), (500, 500));
        let seg = r
            .segments
            .clone()
            .expect("a decoupled merge reports its segments");
        // The new vectors (and the live ones of collected segments) went to one new segment.
        assert_eq!(
            seg.written.as_deref(),
            Some(format!("vectors-{:06}.trawl", round + 1).as_str())
        );
        assert_eq!(seg.written_vectors, 500 + seg.moved_vectors);
        assert!(seg.segments <= 3, "{seg:?}");
        collected_any |= !seg.collected.is_empty();
        for (name, _) in &seg.collected {
            assert!(!exists(name), "{name} collected but still on disk");
        }
        // Only the decoupled layout is left: the graph file, the map, the segments.
        assert!(!exists("packed.trawl"));
        assert!(exists("graph.trawl") && exists("vmap.trawl"));
        let m = ix.disk().manifest().cloned().unwrap();
        assert_eq!(m.layouts, vec!["decoupled".to_string()]);
        // The refinement codes were written again for the merged version (the layout wrote
        // them): every slot's code, `dim + 4` bytes.
        let refine = dir.path().join(trawl::kinds::graph::refine_file::FILE_NAME);
        let h = trawl::kinds::graph::refine_file::RefineHeader::read(&refine).unwrap();
        assert_eq!(h.n, ix.disk().n() as u64);
        assert_eq!(
            h.tag,
            ix.disk().meta().pq_codes_crc,
            "codes of the merged version"
        );
        let refine_bytes = std::fs::metadata(&refine).unwrap().len();
        assert!(refine_bytes < (h.n * (DIM as u64 + 4)) + 4096);
        // Bytes written: the graph, the new segment, the refinement codes and the small
        // files, not every vector.
        let raw_vectors = (live.len() * DIM * 4) as u64;
        assert!(
            r.bytes_written < raw_vectors + refine_bytes + 200_000,
            "{} bytes written for {raw_vectors} bytes of vectors",
            r.bytes_written
        );
        assert_eq!(ix.len(), 3_000);
        // Every live vector finds itself at distance 0; no deleted id comes back.
        let live_rows: Vec<f32> = live.values().flat_map(|&r| rows(&all, r, 1)).collect();
        let hits = top1(&ix, &live_rows);
        let found = hits
            .iter()
            .zip(live.keys())
            .filter(|(h, id)| h.0 == **id && h.1 == 0.0)
            .count();
        assert!(found >= live.len() * 99 / 100, "{found} of {}", live.len());
        assert!(returned(&ix, q.as_slice()).is_disjoint(&gone_all));
        trawl::kinds::graph::verify_index(dir.path(), &Control::silent()).unwrap();
    }
    assert!(collected_any, "4 rounds of 1/6 deletions collect a segment");
    let ids: Vec<u64> = live.keys().copied().collect();
    let vecs: Vec<f32> = live.values().flat_map(|&r| rows(&all, r, 1)).collect();
    let rec = recall(&ix, &ids, &vecs, &q);
    assert!(rec >= 0.9, "recall after 4 decoupled merges {rec}");
    // A reopen (read-only, another handle) reads the same segments.
    drop(ix);
    let r = LiveIndex::open(dir.path(), opts, Access::ReadOnly).unwrap();
    assert_eq!(r.len(), 3_000);
    assert!((recall(&r, &ids, &vecs, &q) - rec).abs() < 1e-9);
}

#[test]
fn the_static_cache_of_a_live_index_is_chosen_again_after_a_merge() {
    use trawl::kinds::graph::search::CachePolicy;
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(3_000, 40, DIM, 13);
    let base = Matrix::from_vec(rows(&all, 0, 2_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    let r = ix
        .set_node_cache(200, CachePolicy::default(), 2, &Control::silent())
        .unwrap();
    assert_eq!(r.nodes, 200);
    assert_eq!(ix.disk().cache().len(), 200);
    let before = ix.search_rows(q.as_slice(), &sp(10), 1, 1).unwrap();
    assert!(
        before
            .stats
            .iter()
            .map(|s| s.traversal.cache_hits)
            .sum::<u64>()
            > 0
    );
    // Delete the cached nodes' ids and merge: the new cache holds nodes of the new graph.
    let gone: Vec<u64> = (0..2_000u64)
        .filter(|&s| ix.disk().cache().contains(s as u32))
        .collect();
    assert_eq!(gone.len(), 200);
    ix.delete(&gone).unwrap();
    ix.insert(None, &rows(&all, 2_000, 300)).unwrap();
    ix.merge(2, &Control::silent()).unwrap();
    let disk = ix.disk();
    assert_eq!(disk.cache().len(), 200, "the cache was loaded again");
    let after = ix.search_rows(q.as_slice(), &sp(10), 1, 1).unwrap();
    assert!(
        after
            .stats
            .iter()
            .map(|s| s.traversal.cache_hits)
            .sum::<u64>()
            > 0
    );
    let gone: HashSet<u64> = gone.into_iter().collect();
    assert!(after.ids.iter().all(|id| !gone.contains(id)));
    // Dropping it: searches read every page again.
    ix.set_node_cache(0, CachePolicy::default(), 1, &Control::silent())
        .unwrap();
    assert_eq!(ix.disk().cache().len(), 0);
}

#[test]
fn inserts_do_not_deadlock_searches_running_on_the_rayon_pool() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(9_000, 64, DIM, 17);
    let base = Matrix::from_vec(rows(&all, 0, 1_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    let ix = std::sync::Arc::new(
        LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let work = {
        let ix = ix.clone();
        std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                // Batch searches on the global rayon pool (2 threads each), the pool the
                // inserts' linking broadcasts to.
                for _ in 0..2 {
                    s.spawn(|| {
                        while !stop.load(Ordering::Acquire) {
                            ix.search_rows(q.as_slice(), &sp(10), 2, 1).unwrap();
                        }
                    });
                }
                for b in 0..16 {
                    let first = 1_000 + b * 500;
                    ix.insert(None, &rows(&all, first, 500)).unwrap();
                }
                stop.store(true, Ordering::Release);
            });
            tx.send(()).unwrap();
        })
    };
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("inserts and rayon-pool searches deadlocked");
    work.join().unwrap();
    assert_eq!(ix.len(), 9_000);
}

/// Writes that race merges: every insert and delete acknowledged while merges run is in the
/// index after them, and after a reopen. (A write once read the current version before it
/// took the writer lock: a merge freezing the active delta in between left the write in the
/// delta being merged, and the merge's replay of the log then refused it as a duplicate,
/// dropping every later write from the id map.)
#[test]
fn writes_racing_merges_are_never_lost() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let (all, _) = data::<f32>(6_000, 8, DIM, 5);
    let base = Matrix::from_vec(rows(&all, 0, 2_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    let stop = AtomicBool::new(false);
    let (present, gone) = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut present: Vec<u64> = Vec::new();
            let mut gone: Vec<u64> = Vec::new();
            let mut next = 2_000usize;
            while !stop.load(Ordering::Acquire) && next + 4 <= 6_000 {
                let ids: Vec<u64> = (next as u64..next as u64 + 4).collect();
                ix.insert(Some(&ids), &rows(&all, next, 4)).unwrap();
                present.extend(&ids);
                next += 4;
                if next.is_multiple_of(40) {
                    let d = [present.remove(0), present.remove(0)];
                    ix.delete(&d).unwrap();
                    gone.extend(d);
                }
            }
            (present, gone)
        });
        for _ in 0..6 {
            ix.merge(1, &Control::silent()).unwrap();
        }
        stop.store(true, Ordering::Release);
        w.join().unwrap()
    });
    assert!(present.len() > 40, "too few writes raced the merges");
    let check = |ix: &LiveIndex| {
        for &id in &present {
            assert!(ix.contains(id), "acknowledged insert {id} is lost");
        }
        for &id in &gone {
            assert!(!ix.contains(id), "acknowledged delete {id} is undone");
        }
        assert_eq!(ix.len(), 2_000 + present.len());
    };
    check(&ix);
    ix.merge(1, &Control::silent()).unwrap();
    check(&ix);
    drop(ix);
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    check(&ix);
}

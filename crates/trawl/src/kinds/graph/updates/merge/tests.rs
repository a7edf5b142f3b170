//! The merge's delete phase against a full scan of the lists: every edge to a deleted node is
//! gone, whichever way deletes are taken out, and in place only the lists near a delete change.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::{Candidates, DeleteRepair, InNeighbours, InPlaceParams, MergeReport};
use crate::kernels::{DType, Metric};
use crate::kinds::graph::search::SearchParams;
use crate::kinds::graph::updates::ids::SlotIds;
use crate::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
use crate::kinds::graph::{build_index, DiskIndex, IndexParams, OpenOptions};
use crate::progress::Control;
use crate::quant::pq::PqParams;
use crate::synth::{generate, SynthParams};
use crate::vamana::VamanaParams;

/// Every slot's list, from a full sequential scan of `packed.trawl`.
fn lists_of(dir: &Path) -> Vec<Vec<u32>> {
    let ix = DiskIndex::open(
        dir,
        OpenOptions {
            direct: false,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut out = vec![Vec::new(); ix.n()];
    ix.scan_records(&Control::silent(), |id, view| {
        out[id as usize] = view.neighbors().collect();
        Ok(())
    })
    .unwrap();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// R 12, L 32, 8 PQ bytes, no entry index (a merge samples a new one, and then ranks the
/// hot-node order afresh).
fn small_params() -> IndexParams {
    IndexParams {
        metric: Metric::L2,
        graph: VamanaParams {
            r: 12,
            l: 32,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: 8,
            ..PqParams::default()
        },
        entry: None,
        ..IndexParams::default()
    }
}

fn modes() -> Vec<DeleteRepair> {
    vec![
        DeleteRepair::default(),
        DeleteRepair::InPlace(InPlaceParams {
            in_neighbours: InNeighbours::Search { l: 0 },
            ..InPlaceParams::default()
        }),
        DeleteRepair::InPlace(InPlaceParams {
            candidates: Candidates::Nearest { k: 16 },
            replace: 2,
            ..InPlaceParams::default()
        }),
        DeleteRepair::Consolidate,
    ]
}

/// Deletes a random 10% of a fresh index (ids = slots) and merges with `deletes`; returns the
/// deleted slots, the report and the merged lists.
fn delete_and_merge(
    built: &Path,
    work: &Path,
    deletes: DeleteRepair,
    n: usize,
) -> (Vec<u32>, MergeReport, Vec<Vec<u32>>) {
    copy_dir(built, work);
    let mut ids: Vec<u64> = (0..n as u64).collect();
    ids.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(9));
    let gone: Vec<u64> = ids[..n / 10].to_vec();
    let live = LiveIndex::open(work, OpenOptions::default(), Access::ReadWrite).unwrap();
    live.delete(&gone).unwrap();
    let o = MergeOptions {
        threads: 2,
        nice: 0,
        deletes,
        ..MergeOptions::default()
    };
    let report = live.merge_with(&o, &Control::silent()).unwrap();
    // The vectors left are found by searching for them.
    drop(live);
    let slots: Vec<u32> = gone.iter().map(|&i| i as u32).collect();
    (slots, report, lists_of(work))
}

#[test]
fn every_edge_to_a_deleted_node_is_gone_and_in_place_touches_only_its_neighbours() {
    let n = 3000;
    let (base, _) = generate::<f32>(&SynthParams::new(n, 1, 16, DType::F32, 4)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("built");
    build_index(&base, &built, &small_params(), &Control::silent()).unwrap();
    let old = lists_of(&built);
    for (m, deletes) in modes().into_iter().enumerate() {
        let work = dir.path().join(format!("m{m}"));
        let (gone, report, new) = delete_and_merge(&built, &work, deletes, n);
        let is_gone = |v: u32| gone.contains(&v);
        // The in-edges of the deleted nodes, by a full scan of the old lists (not vacuous).
        let in_edges: u64 = (0..n as u32)
            .filter(|&u| !is_gone(u))
            .map(|u| old[u as usize].iter().filter(|&&v| is_gone(v)).count() as u64)
            .sum();
        assert!(in_edges > 500, "{deletes:?}: {in_edges} in-edges");
        let ids = SlotIds::load(&work, new.len()).unwrap();
        for (u, list) in new.iter().enumerate() {
            if is_gone(u as u32) {
                assert!(
                    ids.is_hole(u as u32) && list.is_empty(),
                    "{deletes:?}: slot {u}"
                );
                continue;
            }
            let bad: Vec<&u32> = list.iter().filter(|&&v| is_gone(v)).collect();
            assert!(
                bad.is_empty(),
                "{deletes:?}: node {u} still points to deleted {bad:?} (old list {:?})",
                old[u]
            );
            assert!(list.len() <= 12 && !list.contains(&(u as u32)));
        }
        let changed = (0..n)
            .filter(|&u| !is_gone(u as u32) && new[u] != old[u])
            .count() as u64;
        assert_eq!(report.touched_nodes, changed, "{deletes:?}");
        assert_eq!(report.deleted, gone.len() as u64);
        if let DeleteRepair::InPlace(p) = deletes {
            assert_eq!(report.in_edges, in_edges, "{deletes:?}");
            assert!(report.in_edges_found <= in_edges && report.in_edges_found > 0);
            if p.in_neighbours == InNeighbours::Exact {
                assert_eq!(report.in_edges_found, in_edges);
            }
            // Only the in-neighbours of deleted nodes change (besides what relinking adds).
            if report.relinked == 0 {
                for u in (0..n).filter(|&u| !is_gone(u as u32)) {
                    if !old[u].iter().any(|&v| is_gone(v)) {
                        assert_eq!(
                            new[u], old[u],
                            "{deletes:?}: node {u} has no deleted neighbour"
                        );
                    }
                }
            }
        }
        // The live vectors are still found by searching for them.
        let live = LiveIndex::open(&work, OpenOptions::default(), Access::ReadOnly).unwrap();
        let rows: Vec<f32> = (0..n)
            .filter(|&u| !is_gone(u as u32))
            .step_by(7)
            .flat_map(|u| base.row(u).to_vec())
            .collect();
        let out = live
            .search_rows(&rows, &SearchParams::beam(1, 32, 4), 2, 1)
            .unwrap();
        let want: Vec<u64> = (0..n as u64)
            .filter(|&u| !is_gone(u as u32))
            .step_by(7)
            .collect();
        let hit = out.ids.iter().zip(&want).filter(|(a, b)| a == b).count();
        assert!(
            hit as f64 >= 0.97 * want.len() as f64,
            "{deletes:?}: {hit} of {} found",
            want.len()
        );
    }
}

/// A merge carries the hot-node order over while the slots changed since its ranking stay
/// within the share, with the deleted nodes out of it, and ranks afresh past the share, when
/// told to always, and when the start node is deleted.
#[test]
fn the_hot_order_is_carried_over_small_merges_and_ranked_afresh_past_the_share() {
    use crate::kinds::graph::hot::HotOrder;
    let n = 3000;
    let (base, _) = generate::<f32>(&SynthParams::new(n + 3000, 1, 16, DType::F32, 4)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("built");
    build_index(
        &base.slice_rows(0, n),
        &built,
        &small_params(),
        &Control::silent(),
    )
    .unwrap();
    let order = |d: &Path| -> (HotOrder, DiskIndex) {
        let ix = DiskIndex::open(d, OpenOptions::default()).unwrap();
        (ix.hot_order().unwrap().expect("a hot order"), ix)
    };
    let work = dir.path().join("live");
    copy_dir(&built, &work);
    let medoid = order(&work).1.medoid() as u64;
    let mut ids: Vec<u64> = (0..n as u64).filter(|&i| i != medoid).collect();
    ids.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(5));
    let mut next = n;
    // Deletes `k` vectors (the medoid first when asked) and inserts `k`, then merges.
    let mut round = |k: usize, medoid_too: bool, share: f64| -> (MergeReport, Vec<u64>) {
        let live = LiveIndex::open(&work, OpenOptions::default(), Access::ReadWrite).unwrap();
        let mut gone: Vec<u64> = ids.split_off(ids.len() - k + usize::from(medoid_too));
        if medoid_too {
            gone.push(medoid);
        }
        live.delete(&gone).unwrap();
        let new: Vec<u64> = (next as u64..(next + k) as u64).collect();
        live.insert(Some(&new), base.slice_rows(next, k).as_slice())
            .unwrap();
        next += k;
        ids.extend_from_slice(&new);
        let o = MergeOptions {
            threads: 2,
            nice: 0,
            hot_rerank_share: share,
            ..MergeOptions::default()
        };
        (live.merge_with(&o, &Control::silent()).unwrap(), gone)
    };
    let slots_of = |d: &Path| {
        SlotIds::load(d, DiskIndex::open(d, OpenOptions::default()).unwrap().n()).unwrap()
    };

    // 5% + 5%: carried, every deleted slot's old node out of the order (its slot, reused by a
    // new vector, ranked only by the refresh), no hole ranked.
    let (before, _) = order(&work);
    let (r, gone) = round(150, false, 0.25);
    assert!(r.hot_carried, "{r:?}");
    assert_eq!(r.hot_changed, 300);
    let (after, mut ix) = order(&work);
    assert_eq!(after.changed(), 300);
    let slots = slots_of(&work);
    assert!(after.ids().iter().all(|&s| !slots.is_hole(s)));
    assert_eq!(after.samples(), before.samples());
    // Not a fresh ranking: a full one of the same index differs.
    let (full, _) = ix.rank_hot_nodes(2, &Control::silent()).unwrap();
    assert_ne!(full.ids(), after.ids());
    assert_eq!(full.changed(), 0);
    drop(ix);
    assert_eq!(gone.len(), 150);

    // Another 10% + 10% passes the share (900 of 3000 > 25%): ranked afresh, as a full
    // ranking of the merged index ranks.
    let (r, _) = round(300, false, 0.25);
    assert!(!r.hot_carried && r.hot_changed == 0, "{r:?}");
    let (after, mut ix) = order(&work);
    let (full, _) = ix.rank_hot_nodes(2, &Control::silent()).unwrap();
    assert_eq!(after, full);
    drop(ix);

    // Told to rank afresh at every merge.
    let (r, _) = round(30, false, 0.0);
    assert!(!r.hot_carried, "{r:?}");
    // The start node deleted: a new one, ranked afresh.
    let (r, _) = round(30, true, 0.25);
    assert!(!r.hot_carried, "{r:?}");
    assert_ne!(order(&work).1.medoid() as u64, medoid);
    // And carried again after.
    let (r, _) = round(30, false, 0.25);
    assert!(r.hot_carried && r.hot_changed == 60, "{r:?}");
}

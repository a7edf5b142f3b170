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
    let params = IndexParams {
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
        quant: Default::default(),
        entry: None,
        attrs: None,
        label_aware: Default::default(),
    };
    build_index(&base, &built, &params, &Control::silent()).unwrap();
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

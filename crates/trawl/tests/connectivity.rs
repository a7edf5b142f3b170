//! Every node of a built graph is reachable from the medoid: far-apart clusters are linked
//! back by the build (`link_unreachable`), the build reports its connectivity, and `verify`
//! refuses an index with unreachable nodes.

mod common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trawl::data::Matrix;
use trawl::kinds::graph::{build_index, build_random_link_index, verify_index};
use trawl::progress::Control;
use trawl::vamana::connectivity::{measure, reachable};
use trawl::vamana::{build, Graph, VamanaParams, VectorStore};
use trawl::Metric;

/// `clusters` tight clusters of `per` points each, their centres `gap` apart along the axes:
/// far enough that no search started in one cluster would step into another on its own.
fn far_clusters(clusters: usize, per: usize, dim: usize, gap: f32, seed: u64) -> Matrix<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = Vec::with_capacity(clusters * per * dim);
    for c in 0..clusters {
        for _ in 0..per {
            for j in 0..dim {
                let centre = if j == c % dim {
                    gap * (1 + c / dim) as f32
                } else {
                    0.0
                };
                v.push(centre + rng.gen_range(-1.0f32..1.0));
            }
        }
    }
    Matrix::from_vec(v, dim).unwrap()
}

#[test]
fn the_build_reaches_every_node_of_far_apart_clusters() {
    let data = far_clusters(6, 400, 8, 1.0e4, 3);
    for r in [4usize, 16] {
        let params = VamanaParams {
            r,
            l: r.max(20),
            ..VamanaParams::default()
        };
        let (g, stats) = build(&data, Metric::L2, &params, &Control::silent()).unwrap();
        let c = measure(&g, &[g.medoid()], None);
        assert_eq!(
            c.unreachable, 0,
            "R {r}: {c:?} ({} relinked)",
            stats.relinked
        );
        assert_eq!(c.nodes, data.n());
    }
    // And as a disk index: its report says so, and verify agrees.
    let dir = tempfile::tempdir().unwrap();
    let mut p = common::params(Metric::L2, 8);
    p.graph.r = 4;
    p.graph.l = 20;
    let rep = build_index(&data, dir.path(), &p, &Control::silent()).unwrap();
    assert_eq!(rep.connectivity.unreachable, 0);
    assert_eq!(rep.connectivity.nodes, data.n());
    let v = verify_index(dir.path(), &Control::silent()).unwrap();
    assert_eq!(v.connectivity.unwrap().unreachable, 0);
}

#[test]
fn unreachable_nodes_are_linked_back() {
    // Two clusters whose lists never leave their cluster: the second is an island.
    let data = far_clusters(2, 200, 4, 100.0, 5);
    let n = data.n();
    let mut lists: Vec<Vec<u32>> = (0..n as u32)
        .map(|i| {
            let base = if i < 200 { 0 } else { 200 };
            (1..=3).map(|k| base + (i - base + k) % 200).collect()
        })
        .collect();
    // A node no list names at all.
    for l in &mut lists {
        l.retain(|&x| x != 7);
    }
    let mut g = Graph::from_lists(lists, 4, 0);
    let before = measure(&g, &[0], None);
    assert_eq!(before.unreachable, 201, "{before:?}");
    let store = VectorStore::new(data.as_slice(), data.dim(), Metric::L2).unwrap();
    let added =
        trawl::vamana::build::link_unreachable(&mut g, &store, 20, None, &Control::silent())
            .unwrap();
    assert!(added >= 2, "{added} edges");
    assert!(reachable(&g, &[0]).iter().all(|&r| r));
    for v in 0..n as u32 {
        assert!(g.neighbors(v).len() <= 4);
    }
    // Connected already: nothing to do.
    assert_eq!(
        trawl::vamana::build::link_unreachable(&mut g, &store, 20, None, &Control::silent())
            .unwrap(),
        0
    );
}

#[test]
fn verify_refuses_an_index_with_unreachable_nodes() {
    // Two random out-links per node: about e^-2 of the nodes have no in-link at all.
    let (base, _) = common::data::<f32>(1500, 1, 8, 9);
    let dir = tempfile::tempdir().unwrap();
    let mut p = common::params(Metric::L2, 8);
    p.graph.r = 2;
    p.graph.l = 2;
    let rep = build_random_link_index(&base, dir.path(), &p, &Control::silent()).unwrap();
    assert!(rep.connectivity.unreachable > 0, "{:?}", rep.connectivity);
    let err = verify_index(dir.path(), &Control::silent()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cannot be reached from the medoid"), "{msg}");
}

#[test]
fn the_recall_monitor_is_recorded_by_builds_and_merges() {
    use trawl::kinds::graph::search::SearchParams;
    use trawl::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
    use trawl::kinds::graph::{DiskIndex, Manifest, OpenOptions};
    let (base, q) = common::data::<f32>(3000, 200, 16, 21);
    let dir = tempfile::tempdir().unwrap();
    let rep = build_index(
        &base,
        dir.path(),
        &common::params(Metric::L2, 8),
        &Control::silent(),
    )
    .unwrap();
    let r = rep.recall.clone().unwrap();
    assert_eq!((r.samples, r.by.as_str()), (300, "build"));
    assert_eq!(
        r.points.iter().map(|p| p.l).collect::<Vec<_>>(),
        vec![32, 64, 128]
    );
    assert_eq!(r.points, r.build);
    assert!(
        r.points.iter().all(|p| p.recall > 0.5 && p.recall <= 1.0),
        "{r:?}"
    );
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    assert_eq!(m.recall.as_ref(), Some(&r));
    // Against held-out queries at the same settings.
    let truth = common::truth(&base, &q, Metric::L2);
    let ix = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
    let out = ix
        .search_batch(&q, &SearchParams::beam(10, 64, 4), 2)
        .unwrap();
    let held_out = trawl::vamana::recall_at_k(&out.ids, 10, &truth).unwrap();
    let monitor = r.points.iter().find(|p| p.l == 64).unwrap().recall;
    assert!(
        (monitor - held_out).abs() < 0.05,
        "monitor {monitor}, held-out {held_out}"
    );
    drop(ix);

    // A merge measures again and keeps the build's figures beside its own.
    let live = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    live.delete(&(0..1500u64).collect::<Vec<_>>()).unwrap();
    let report = live
        .merge_with(&MergeOptions::default(), &Control::silent())
        .unwrap();
    assert_eq!(report.recall.len(), 3);
    assert!(report.recall_samples > 0);
    drop(live);
    let m = Manifest::load_if_present(dir.path()).unwrap().unwrap();
    let after = m.recall.unwrap();
    assert_eq!(after.by, "merge");
    assert_eq!(after.build, r.build);
    assert_eq!(after.points, report.recall);
    assert_eq!(report.recall_warning, after.drop_warning());
    assert_eq!(
        verify_index(dir.path(), &Control::silent())
            .unwrap()
            .connectivity
            .unwrap()
            .unreachable,
        0
    );
}

/// A merge that deletes a whole far-apart cluster and inserts another, farther one leaves no
/// node unreachable, and a search for each inserted vector ends in the inserted cluster.
#[test]
fn a_merge_of_far_apart_clusters_leaves_every_node_reachable() {
    use trawl::kinds::graph::search::SearchParams;
    use trawl::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
    use trawl::kinds::graph::OpenOptions;
    let (per, dim) = (300usize, 8usize);
    let data = far_clusters(5, per, dim, 1.0e4, 5);
    let dir = tempfile::tempdir().unwrap();
    let mut p = common::params(Metric::L2, 8);
    p.graph.r = 8;
    p.graph.l = 24;
    build_index(&data, dir.path(), &p, &Control::silent()).unwrap();
    // The sixth cluster of the same layout: far from the five built.
    let six = far_clusters(6, per, dim, 1.0e4, 6);
    let new_rows = six.slice_rows(5 * per, per);
    let live = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    live.delete(&(per as u64..2 * per as u64).collect::<Vec<_>>())
        .unwrap();
    let ids = live.insert(None, new_rows.as_slice()).unwrap();
    let report = live
        .merge_with(&MergeOptions::default(), &Control::silent())
        .unwrap();
    let out = live
        .search_rows(new_rows.as_slice(), &SearchParams::beam(1, 24, 4), 2, 1)
        .unwrap();
    assert!(
        out.ids.iter().all(|i| ids.contains(i)),
        "a search for an inserted vector ends in the inserted cluster: {:?}",
        out.ids
    );
    drop(live);
    let v = verify_index(dir.path(), &Control::silent()).unwrap();
    let c = v.connectivity.unwrap();
    assert_eq!(c.unreachable, 0, "{c:?} ({} relinked)", report.relinked);
    assert_eq!(c.nodes, 5 * per, "300 deleted, 300 inserted");
}

/// A query sample adds edges between the nearest points of each sample query, within R, and
/// the graph stays fully reachable; the same sample gives the same graph, and a sample of
/// another dimension is refused.
#[test]
fn a_query_sample_links_the_neighbours_of_far_queries() {
    use trawl::vamana::build_with_queries;
    // Two far-apart clusters and queries halfway between them: their nearest points lie on
    // the facing sides of both.
    let data = far_clusters(2, 500, 8, 40.0, 9);
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let mut q = Vec::new();
    for _ in 0..50 {
        for j in 0..8 {
            let centre = if j < 2 { 20.0 } else { 0.0 };
            q.push(centre + rng.gen_range(-1.0f32..1.0));
        }
    }
    let queries = Matrix::from_vec(q, 8).unwrap();
    let params = VamanaParams {
        r: 8,
        l: 24,
        ..VamanaParams::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let run = |sample: Option<&Matrix<f32>>| {
        pool.install(|| {
            build_with_queries(&data, Metric::L2, &params, sample, &Control::silent()).unwrap()
        })
    };
    let (plain, s0) = run(None);
    let (g, s) = run(Some(&queries));
    assert_eq!((s0.query_sample, s0.query_edges), (0, 0));
    assert_eq!(s.query_sample, 50);
    assert!(s.query_edges > 0, "{s:?}");
    assert_ne!(g, plain);
    assert!((0..data.n() as u32).all(|i| g.neighbors(i).len() <= 8));
    assert_eq!(measure(&g, &[g.medoid()], None).unreachable, 0);
    // Edges between the two clusters: the sample's neighbours sit on both facing sides.
    let cross = |g: &Graph| {
        (0..data.n() as u32)
            .map(|i| {
                g.neighbors(i)
                    .iter()
                    .filter(|&&j| (i < 500) != (j < 500))
                    .count()
            })
            .sum::<usize>()
    };
    assert!(
        cross(&g) > cross(&plain),
        "{} vs {}",
        cross(&g),
        cross(&plain)
    );
    assert_eq!(run(Some(&queries)).0, g, "deterministic on one thread");
    let wrong = Matrix::from_vec(vec![0.0f32; 4 * 7], 7).unwrap();
    assert!(matches!(
        build_with_queries(&data, Metric::L2, &params, Some(&wrong), &Control::silent()),
        Err(trawl::vamana::BuildError::DimMismatch {
            expected: 8,
            got: 7
        })
    ));
}

/// A query that hides a node (the recall monitor's own-node rule) never expands nor returns
/// it, with beam search and PipeSearch, at every list size; without hiding, the same queries
/// find themselves first. The flash strategy refuses to hide.
#[test]
fn a_hidden_node_is_neither_expanded_nor_returned() {
    use std::sync::Arc;
    use trawl::kinds::graph::search::{FlashParams, PipeParams, SearchParams, Strategy};
    use trawl::kinds::graph::{DiskIndex, OpenOptions};
    let (base, _) = common::data::<f32>(2000, 1, 16, 5);
    let dir = tempfile::tempdir().unwrap();
    build_index(
        &base,
        dir.path(),
        &common::params(Metric::L2, 8),
        &Control::silent(),
    )
    .unwrap();
    let ix = DiskIndex::open(dir.path(), OpenOptions::default()).unwrap();
    let medoid = ix.medoid();
    // Rows other than the medoid searched as queries; query i is row rows[i].
    let rows: Vec<u32> = (0..200u32)
        .map(|i| i * 10)
        .filter(|&r| r != medoid)
        .collect();
    let mut q = Vec::new();
    for &r in &rows {
        q.extend_from_slice(base.row(r as usize));
    }
    let hidden: Arc<[u32]> = rows.clone().into();
    let pipe = |l| SearchParams {
        strategy: Strategy::Pipe(PipeParams::default()),
        ..SearchParams::beam(10, l, 4)
    };
    for l in [10, 32, 64] {
        for p in [SearchParams::beam(10, l, 4), pipe(l)] {
            let seen = ix.search_rows(&q, &p, 2, 1).unwrap();
            let self_first = rows
                .iter()
                .enumerate()
                .filter(|&(i, &r)| seen.ids[i * 10] == r && seen.dists[i * 10] == 0.0)
                .count();
            assert!(self_first > rows.len() * 9 / 10, "{self_first}");
            let out = ix.search_rows_hiding(&q, &p, 2, hidden.clone()).unwrap();
            for (i, &r) in rows.iter().enumerate() {
                let found = &out.ids[i * 10..(i + 1) * 10];
                assert!(
                    !found.contains(&r),
                    "query {i} (L {l}) returned its hidden row {r}"
                );
                assert!(found.iter().all(|&id| id != u32::MAX), "{found:?}");
                assert!(out.dists[i * 10] > 0.0);
            }
        }
    }
    let flash = SearchParams {
        strategy: Strategy::Flash(FlashParams::default()),
        ..SearchParams::beam(10, 32, 4)
    };
    let e = ix
        .search_rows_hiding(&q, &flash, 1, hidden.clone())
        .unwrap_err();
    assert!(e.to_string().contains("hide"), "{e}");
    // A node past the index is refused, not a panic.
    let mut past = rows.clone();
    past[3] = ix.n() as u32;
    let e = ix
        .search_rows_hiding(&q, &SearchParams::beam(10, 32, 4), 2, past.into())
        .unwrap_err();
    assert!(e.to_string().contains("past the index"), "{e}");
}

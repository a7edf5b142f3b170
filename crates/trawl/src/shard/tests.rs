use super::*;
use crate::data::Matrix;
use crate::exact::{knn, ExactParams};
use crate::graph::VamanaParams;
use crate::index::{IndexParams, OpenOptions};
use crate::kernels::{DType, Metric};
use crate::progress::Control;
use crate::quant::pq::PqParams;
use crate::search::SearchParams;
use crate::synth::{generate, SynthParams};

fn data(n: usize, nq: usize, dim: usize, seed: u64) -> (Matrix<f32>, Matrix<f32>) {
    generate::<f32>(&SynthParams::new(n, nq, dim, DType::F32, seed)).unwrap()
}

fn index_params(metric: Metric) -> IndexParams {
    IndexParams {
        metric,
        graph: VamanaParams {
            r: 24,
            l: 48,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: 8,
            ..PqParams::default()
        },
        ..IndexParams::default()
    }
}

fn recall(found: &[u32], truth: &crate::data::GroundTruth, k: usize) -> f64 {
    let mut hit = 0;
    for q in 0..truth.nq {
        let t = &truth.ids[q * truth.k..q * truth.k + k];
        hit += found[q * k..(q + 1) * k]
            .iter()
            .filter(|g| t.contains(g))
            .count();
    }
    hit as f64 / (truth.nq * k) as f64
}

#[test]
fn partitions_are_balanced_cover_every_vector_and_replicate_boundaries() {
    let (base, _) = data(4000, 1, 16, 1);
    let ctl = Control::silent();
    for s in [1, 2, 3, 7] {
        let p = ShardParams {
            shards: s,
            slack: 0.05,
            ..ShardParams::default()
        };
        let part = partition(&base, Metric::L2, &p, &ctl).unwrap();
        let cap = ((1.05 * 4000.0) / s as f64).ceil() as usize;
        let mut seen = vec![0u32; 4000];
        for m in &part.members {
            assert!(
                !m.is_empty() && m.len() <= cap,
                "{s} shards: {} > {cap}",
                m.len()
            );
            assert!(m.windows(2).all(|w| w[0] < w[1]));
            m.iter().for_each(|&g| seen[g as usize] += 1);
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "each vector in exactly one shard"
        );
        assert_eq!(part.replicas, 0);
        // Most vectors stay in their nearest partition.
        assert!(
            part.in_nearest as f64 >= 0.7 * 4000.0,
            "{s}: {}",
            part.in_nearest
        );
        // Deterministic.
        assert_eq!(partition(&base, Metric::L2, &p, &ctl).unwrap(), part);
    }
    let p = ShardParams {
        shards: 4,
        epsilon: 0.2,
        ..ShardParams::default()
    };
    let part = partition(&base, Metric::L2, &p, &ctl).unwrap();
    let total: usize = part.members.iter().map(Vec::len).sum();
    assert!(part.replicas > 0);
    assert_eq!(total, 4000 + part.replicas);
    // Bad parameters are errors, not panics.
    for bad in [
        ShardParams { shards: 0, ..p },
        ShardParams { shards: 4001, ..p },
        ShardParams { slack: -1.0, ..p },
        ShardParams {
            epsilon: f64::NAN,
            ..p
        },
    ] {
        assert!(matches!(
            partition(&base, Metric::L2, &bad, &ctl),
            Err(ShardError::InvalidParams(_))
        ));
    }
}

#[test]
fn sharded_search_matches_a_single_index_and_probe_trades_recall_for_reads() {
    let (base, queries) = data(6000, 60, 24, 2);
    let ctl = Control::silent();
    let dir = tempfile::tempdir().unwrap();
    let ip = index_params(Metric::L2);
    let single = dir.path().join("single");
    crate::index::build_index(&base, &single, &ip, &ctl).unwrap();
    let sharded = dir.path().join("sharded");
    let sp = ShardParams {
        shards: 3,
        ..ShardParams::default()
    };
    let rep = build_sharded_index(&base, &sharded, &sp, &ip, &ctl).unwrap();
    assert_eq!(rep.plan.counts.iter().sum::<u64>(), 6000);
    assert!(rep.disk_bytes > 0);
    let truth = knn(
        &base,
        &queries,
        10,
        Metric::L2,
        &ExactParams::default(),
        &ctl,
    )
    .unwrap();
    let params = SearchParams {
        k: 10,
        l: 40,
        ..SearchParams::default()
    };
    let one = crate::index::DiskIndex::open(&single, OpenOptions::default()).unwrap();
    let r_single = recall(
        &one.search_batch(&queries, &params, 2).unwrap().ids,
        &truth,
        10,
    );
    let ix = ShardedIndex::open(&sharded, OpenOptions::default()).unwrap();
    assert_eq!((ix.n(), ix.dim(), ix.shards().len()), (6000, 24, 3));
    let all = ix
        .search_rows(queries.as_slice(), &params, 2, 1, 0)
        .unwrap();
    let r_all = recall(&all.ids, &truth, 10);
    assert!(
        r_all >= r_single - 0.005,
        "sharded {r_all} vs single {r_single}"
    );
    // Distances are exact, sorted, and belong to the returned global ids.
    for q in 0..queries.n() {
        let row = &all.dists[q * 10..(q + 1) * 10];
        assert!(row.windows(2).all(|w| w[0] <= w[1]));
        for (j, &g) in all.ids[q * 10..(q + 1) * 10].iter().enumerate() {
            let d = crate::kernels::distance(Metric::L2, queries.row(q), base.row(g as usize));
            assert_eq!(d.to_bits(), row[j].to_bits());
        }
    }
    // One shard per query: fewer pages read, recall no higher.
    let p1 = ix
        .search_rows(queries.as_slice(), &params, 2, 1, 1)
        .unwrap();
    let pages = |o: &crate::index::BatchOutput| o.total().io.pages_read;
    assert!(
        pages(&p1) < pages(&all),
        "{} vs {}",
        pages(&p1),
        pages(&all)
    );
    assert!(recall(&p1.ids, &truth, 10) <= r_all + 1e-9);
    // The queries' pages add up over the shards they visit: all shards cost about S times one.
    assert!(pages(&all) > 2 * pages(&p1));
    // Wrong element type or a ragged batch: clear errors.
    let bad = ix.search_rows(&[1u8; 24], &params, 1, 1, 0).unwrap_err();
    assert!(matches!(bad, ShardError::BadQuery(_)), "{bad}");
    let bad = ix.search_rows(&[1f32; 25], &params, 1, 1, 0).unwrap_err();
    assert!(matches!(bad, ShardError::BadQuery(_)), "{bad}");
}

#[test]
fn one_shard_is_the_plain_index_and_replicas_count_once() {
    let (base, queries) = data(2500, 30, 16, 3);
    let ctl = Control::silent();
    let dir = tempfile::tempdir().unwrap();
    let ip = index_params(Metric::Cosine);
    let params = SearchParams {
        k: 10,
        l: 32,
        ..SearchParams::default()
    };
    // S = 1: the shard's results, unchanged (ids map to themselves).
    let d1 = dir.path().join("s1");
    let sp = ShardParams {
        shards: 1,
        ..ShardParams::default()
    };
    build_sharded_index(&base, &d1, &sp, &ip, &ctl).unwrap();
    let ix = ShardedIndex::open(&d1, OpenOptions::default()).unwrap();
    let got = ix
        .search_rows(queries.as_slice(), &params, 1, 1, 0)
        .unwrap();
    let want = ix.shards()[0].search_batch(&queries, &params, 1).unwrap();
    assert_eq!(got.ids, want.ids);
    assert_eq!(got.dists, want.dists);
    // Replication: every result id at most once per query.
    let d2 = dir.path().join("rep");
    let sp = ShardParams {
        shards: 3,
        epsilon: 0.3,
        ..ShardParams::default()
    };
    let rep = build_sharded_index(&base, &d2, &sp, &ip, &ctl).unwrap();
    assert!(rep.plan.replication > 1.0);
    let ix = ShardedIndex::open(&d2, OpenOptions::default()).unwrap();
    assert_eq!(ix.n(), 2500);
    let got = ix
        .search_rows(queries.as_slice(), &params, 1, 1, 0)
        .unwrap();
    for q in 0..queries.n() {
        let mut row: Vec<u32> = got.ids[q * 10..(q + 1) * 10].to_vec();
        row.sort_unstable();
        row.dedup();
        assert_eq!(row.len(), 10, "query {q} returned a vector twice");
    }
}

#[test]
fn damaged_or_replaced_shards_are_refused() {
    let (base, _) = data(1500, 1, 8, 4);
    let ctl = Control::silent();
    let dir = tempfile::tempdir().unwrap();
    let ip = index_params(Metric::L2);
    let sp = ShardParams {
        shards: 2,
        ..ShardParams::default()
    };
    let d = dir.path().join("ix");
    build_sharded_index(&base, &d, &sp, &ip, &ctl).unwrap();
    let man = d.join(SHARD_MANIFEST_FILE);
    let good = std::fs::read(&man).unwrap();
    for at in [0, 12, 40, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        std::fs::write(&man, &bad).unwrap();
        assert!(
            ShardedIndex::open(&d, OpenOptions::default()).is_err(),
            "flip at {at}"
        );
    }
    std::fs::write(&man, &good[..good.len() - 3]).unwrap();
    assert!(ShardedIndex::open(&d, OpenOptions::default()).is_err());
    std::fs::write(&man, &good).unwrap();
    ShardedIndex::open(&d, OpenOptions::default()).unwrap();
    // Shard 1 rebuilt with another seed behind the manifest's back: refused, by name.
    let mut other = ip.clone();
    other.graph.seed ^= 1;
    build_shard(&base, &d, 1, &other, &ctl).unwrap();
    let err = ShardedIndex::open(&d, OpenOptions::default()).unwrap_err();
    assert!(matches!(err, ShardError::Mismatch(_)), "{err}");
    assert!(err.to_string().contains("shard 1"), "{err}");
    // A plan built for other data is refused by build_shard.
    let (small, _) = data(1000, 1, 8, 5);
    let err = build_shard(&small, &d, 0, &ip, &ctl).unwrap_err();
    assert!(matches!(err, ShardError::Mismatch(_)), "{err}");
}

#[test]
fn k_above_every_shard_size_returns_k_distinct_results() {
    let (base, queries) = data(300, 5, 8, 41);
    let dir = tempfile::tempdir().unwrap();
    let ctl = Control::silent();
    let sp = ShardParams {
        shards: 3,
        ..ShardParams::default()
    };
    let rep = build_sharded_index(&base, dir.path(), &sp, &index_params(Metric::L2), &ctl).unwrap();
    assert!(
        rep.plan.counts.iter().all(|&c| c < 150),
        "{:?}",
        rep.plan.counts
    );
    let ix = ShardedIndex::open(dir.path(), OpenOptions::default()).unwrap();
    let params = SearchParams {
        k: 150,
        l: 200,
        ..SearchParams::default()
    };
    let out = ix
        .search_rows(queries.as_slice(), &params, 1, 1, 0)
        .unwrap();
    for row in out.ids.chunks(150) {
        let mut r = row.to_vec();
        r.sort_unstable();
        r.dedup();
        assert_eq!(r.len(), 150);
        assert!(r.iter().all(|&g| g < 300));
    }
    let too_many = SearchParams {
        k: 301,
        l: 400,
        ..SearchParams::default()
    };
    let err = ix
        .search_rows(queries.as_slice(), &too_many, 1, 1, 0)
        .unwrap_err();
    assert!(matches!(err, ShardError::BadQuery(_)), "{err}");
}

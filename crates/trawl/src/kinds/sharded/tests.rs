use crate::data::Matrix;
use crate::exact::{knn, ExactParams};
use crate::kernels::{DType, Metric};
use crate::kinds::graph::search::SearchParams;
use crate::kinds::graph::{IndexParams, OpenOptions};
use crate::kinds::member::{shard_of, ShardOf};
use crate::kinds::sharded::*;
use crate::progress::Control;
use crate::quant::pq::PqParams;
use crate::synth::{generate, SynthParams};
use crate::vamana::VamanaParams;

fn data(n: usize, nq: usize, dim: usize, seed: u64) -> (Matrix<f32>, Matrix<f32>) {
    generate::<f32>(&SynthParams::new(n, nq, dim, DType::F32, seed)).unwrap()
}

fn index_params(metric: Metric) -> IndexParams {
    IndexParams {
        attrs: None,
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
    crate::kinds::graph::build_index(&base, &single, &ip, &ctl).unwrap();
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
    let one = crate::kinds::graph::DiskIndex::open(&single, OpenOptions::default()).unwrap();
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
    let pages = |o: &crate::kinds::graph::BatchOutput| o.total().io.pages_read;
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

/// A small sharded index of 600 × 8 vectors in 2 shards, in `dir/ix`.
fn small_sharded(dir: &std::path::Path) -> std::path::PathBuf {
    let (base, _) = data(600, 1, 8, 7);
    let sp = ShardParams {
        shards: 2,
        ..ShardParams::default()
    };
    let d = dir.join("ix");
    build_sharded_index(
        &base,
        &d,
        &sp,
        &index_params(Metric::L2),
        &Control::silent(),
    )
    .unwrap();
    d
}

/// Loads `dir/shards.trawl`, lets `edit` change its header and saves it (a valid envelope).
fn forge(dir: &std::path::Path, edit: impl FnOnce(&mut manifest::ShardHeader)) {
    let path = dir.join(SHARD_MANIFEST_FILE);
    let mut m = ShardManifest::load(&path).unwrap();
    edit(&mut m.header);
    m.save(&path).unwrap();
}

fn invalid_reason(e: &crate::dir::FileError) -> String {
    match &e.kind {
        crate::dir::FileErrorKind::Invalid(why) => why.clone(),
        other => panic!("{}: expected Invalid, got {other:?}", e.path.display()),
    }
}

#[test]
fn forged_vector_counts_are_refused_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let d = small_sharded(dir.path());
    let man = d.join(SHARD_MANIFEST_FILE);
    let good = std::fs::read(&man).unwrap();
    // `n` far above the ids the file holds: 10^15, 2^40, 2^63, u64::MAX (an abort and a
    // capacity-overflow panic before the fix).
    for n in [1_000_000_000_000_000u64, 1 << 40, 1 << 63, u64::MAX, 601] {
        forge(&d, |h| h.n = n);
        let e = ShardManifest::load(&man).unwrap_err();
        assert_eq!(e.path, man);
        assert_eq!(
            invalid_reason(&e),
            format!("n = {n} vectors, but the shards hold only 600 ids"),
        );
        let e = ShardedIndex::open(&d, OpenOptions::default()).unwrap_err();
        assert!(matches!(e, ShardError::File(_)), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{}: ", man.display())),
            "{e}"
        );
        std::fs::write(&man, &good).unwrap();
    }
    // Shard sizes whose sum overflows, or that do not match the bytes.
    forge(&d, |h| {
        h.shards[0].count = u64::MAX;
        h.shards[1].count = 2;
    });
    let e = ShardManifest::load(&man).unwrap_err();
    assert_eq!(
        (e.path.clone(), invalid_reason(&e)),
        (man.clone(), "the shard sizes overflow".to_string())
    );
    std::fs::write(&man, &good).unwrap();
    forge(&d, |h| h.shards[0].count = 1 << 40);
    let e = ShardManifest::load(&man).unwrap_err();
    assert!(
        invalid_reason(&e).contains("bytes after the header, expected"),
        "{e}"
    );
    std::fs::write(&man, &good).unwrap();
    // Partition counts beyond the vectors.
    forge(&d, |h| h.replicas = u64::MAX);
    let e = ShardManifest::load(&man).unwrap_err();
    assert!(invalid_reason(&e).contains("do not fit 600 vectors"), "{e}");
    std::fs::write(&man, &good).unwrap();
    ShardedIndex::open(&d, OpenOptions::default()).unwrap();
}

#[test]
fn shard_directories_escaping_the_sharded_index_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = small_sharded(dir.path());
    let man = d.join(SHARD_MANIFEST_FILE);
    let good = std::fs::read(&man).unwrap();
    // A real index outside the sharded index's folder, reachable through `..` or absolutely.
    let outside = dir.path().join("x");
    std::fs::create_dir_all(&outside).unwrap();
    let abs = outside.to_str().unwrap().to_string();
    for bad in [
        "../x",
        "..",
        ".",
        "",
        "/etc",
        &abs,
        "a/b",
        "shard-000/",
        "./shard-000",
        "a\\b",
    ] {
        forge(&d, |h| h.shards[1].dir = bad.to_string());
        let e = ShardManifest::load(&man).unwrap_err();
        assert_eq!(e.path, man, "{bad:?}");
        assert_eq!(
            invalid_reason(&e),
            format!(
                "shard 1's directory {bad:?} is not a plain name inside the sharded index's \
                 folder (an absolute path, `..`, `.` or a path separator): refused"
            ),
        );
        let e = ShardedIndex::open(&d, OpenOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("shards.trawl: invalid content: shard 1's directory"),
            "{e}"
        );
        std::fs::write(&man, &good).unwrap();
    }
    forge(&d, |h| h.shards[1].dir = h.shards[0].dir.clone());
    let e = ShardManifest::load(&man).unwrap_err();
    assert_eq!(
        invalid_reason(&e),
        "shards 0 and 1 share the directory \"shard-000\""
    );
    std::fs::write(&man, &good).unwrap();
    // The plan a build reads is checked alike: a shard is never built outside the folder.
    std::fs::copy(&man, d.join(SHARD_PLAN_FILE)).unwrap();
    let plan = d.join(SHARD_PLAN_FILE);
    let mut m = ShardManifest::load(&plan).unwrap();
    m.header.shards[0].dir = "../x".into();
    m.save(&plan).unwrap();
    let (base, _) = data(600, 1, 8, 7);
    let e = build_shard(&base, &d, 0, &index_params(Metric::L2), &Control::silent()).unwrap_err();
    assert!(
        e.to_string().contains("shard 0's directory \"../x\""),
        "{e}"
    );
    assert!(!outside.join("manifest.trawl").exists());
    ShardedIndex::open(&d, OpenOptions::default()).unwrap();
}

#[test]
fn updates_through_a_shard_are_refused_and_unmerged_shard_logs_refuse_the_search() {
    use crate::kinds::graph::updates::live::{Access, LiveError, LiveIndex};
    use crate::kinds::graph::updates::wal::{self, LogOp, LogWriter};
    let dir = tempfile::tempdir().unwrap();
    let d = small_sharded(dir.path());
    let shard0 = d.join("shard-000");
    let man = d.join(SHARD_MANIFEST_FILE);
    // Recognised however the directory is named: plainly, with `/.`, through a link, as `.`.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&shard0, &link).unwrap();
    for path in [shard0.clone(), shard0.join("."), link.clone()] {
        let e = LiveIndex::open(&path, OpenOptions::default(), Access::ReadWrite).unwrap_err();
        assert!(matches!(e, LiveError::InvalidInput(_)), "{e}");
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: this directory is shard 0 of a sharded index ({}): updates to sharded \
                 indexes are not supported (insert, delete, upsert and merge through a shard's \
                 directory are refused: the sharded search would not see them); rebuild the \
                 sharded index from the updated data (`trawl shard build`)",
                path.display(),
                man.display()
            )
        );
    }
    assert_eq!(
        shard_of(&d.join("shard-001")),
        Some(ShardOf {
            manifest: man.clone(),
            shard: Some(1)
        })
    );
    assert!(!shard0.join(wal::FILE_NAME).exists(), "nothing was logged");
    // Reading a shard is fine.
    LiveIndex::open(&shard0, OpenOptions::default(), Access::ReadOnly).unwrap();
    // A plain index is not a shard, nor is a directory beside a sharded index it does not list.
    assert_eq!(shard_of(&d), None);
    assert_eq!(shard_of(&d.join("other")), None);
    // A damaged manifest still protects the `shard-NNN` directories beside it.
    let good = std::fs::read(&man).unwrap();
    std::fs::write(&man, b"damaged").unwrap();
    assert_eq!(
        shard_of(&shard0),
        Some(ShardOf {
            manifest: man.clone(),
            shard: None
        })
    );
    std::fs::write(&man, &good).unwrap();
    // A log with an unmerged delete (as an older trawl wrote through the shard's directory):
    // the sharded search refuses the index, naming the log.
    let baseline = ShardedIndex::open(&d, OpenOptions::default()).unwrap();
    let log = shard0.join(wal::FILE_NAME);
    let mut w = LogWriter::create(&log, 0).unwrap();
    w.append(&[LogOp::Delete { ids: vec![0] }], true).unwrap();
    drop(w);
    let e = ShardedIndex::open(&d, OpenOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            ShardError::UnmergedLog {
                shard: 0,
                ops: 1,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), crate::ErrorKind::Corrupt);
    assert_eq!(
        e.to_string(),
        format!(
            "shard 0: {} holds 1 logged update(s) not merged into the shard's files; a sharded \
             search does not apply its shards' logs and updates to sharded indexes are not \
             supported: rebuild the sharded index from the updated data (`trawl shard build`)",
            log.display()
        )
    );
    // A log holding only its header (nothing unmerged) is fine; a damaged one is refused.
    LogWriter::create(&log, 0).unwrap();
    ShardedIndex::open(&d, OpenOptions::default()).unwrap();
    std::fs::write(&log, b"not a log").unwrap();
    let e = ShardedIndex::open(&d, OpenOptions::default()).unwrap_err();
    assert!(matches!(e, ShardError::Log { shard: 0, .. }), "{e}");
    assert!(e.to_string().contains("wal.trawl"), "{e}");
    drop(baseline);
}

#[test]
fn shards_build_and_search_with_rabitq_codes() {
    let (base, queries) = data(6000, 60, 24, 2);
    let ctl = Control::silent();
    let dir = tempfile::tempdir().unwrap();
    let ip = IndexParams {
        quant: crate::quant::QuantKind::RaBitQ { bits: 4 },
        ..index_params(Metric::L2)
    };
    let sp = ShardParams {
        shards: 3,
        ..ShardParams::default()
    };
    build_sharded_index(&base, dir.path(), &sp, &ip, &ctl).unwrap();
    let ix = ShardedIndex::open(dir.path(), OpenOptions::default()).unwrap();
    for shard in ix.shards() {
        assert_eq!(
            shard.pq().kind(),
            crate::quant::QuantKind::RaBitQ { bits: 4 }
        );
    }
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
    let all = ix
        .search_rows(queries.as_slice(), &params, 2, 1, 0)
        .unwrap();
    let r = recall(&all.ids, &truth, 10);
    assert!(r >= 0.9, "sharded RaBitQ recall {r}");
}

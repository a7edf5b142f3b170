//! The streaming runbook (in the style of big-ann-benchmarks' streaming track), driven by
//! `bench/streaming.py`: start from an index of half the vectors, then rounds that delete the
//! oldest k-means clusters (≈ 5% of the live vectors) and insert the next unused clusters
//! (≈ 5%), whole clusters at a time (the hard case), with a merge after each round. After every
//! round: recall@10 at a fixed L over the live set (exact ground truth of the live set), the same
//! for an index built from scratch on the live set, the merge's time against that build's, the
//! search QPS while the merge runs against idle QPS, bytes written and peak RSS.
//!
//! ```text
//! cargo run --release --example streaming -- --base B.fbin --queries Q.fbin --metric cosine \
//!     --dir WORK --out result.json [--rounds 10] [--clusters 200] [-L 64] [--threads 2] \
//!     [--extra-l 16,32] [--layout packed|decoupled]
//! ```

#[path = "common/runbook.rs"]
mod runbook;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use trawl::data::read::read_matrix;
use trawl::data::Matrix;
use trawl::exact::{knn, ExactParams};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
use trawl::kinds::graph::{build_index, DiskIndex, IndexLayout, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::vamana::VamanaParams;
use trawl::Metric;

struct Args {
    base: PathBuf,
    queries: PathBuf,
    metric: Metric,
    dir: PathBuf,
    out: PathBuf,
    rounds: usize,
    clusters: usize,
    l: usize,
    threads: usize,
    max_queries: usize,
    r: usize,
    build_l: usize,
    pq_bytes: usize,
    layout: IndexLayout,
    share: f64,
    /// More list sizes at which recall is measured (merged and fresh), beside `l`.
    extra_l: Vec<usize>,
}

fn parse() -> Args {
    let mut a = Args {
        base: PathBuf::new(),
        queries: PathBuf::new(),
        metric: Metric::L2,
        dir: PathBuf::from("streaming-work"),
        out: PathBuf::from("streaming.json"),
        rounds: 10,
        clusters: 200,
        l: 64,
        threads: 2,
        max_queries: 1000,
        r: 64,
        build_l: 100,
        pq_bytes: 32,
        layout: IndexLayout::Packed,
        share: 0.05,
        extra_l: Vec::new(),
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--base" => a.base = val.into(),
            "--queries" => a.queries = val.into(),
            "--metric" => a.metric = val.parse().expect("metric"),
            "--dir" => a.dir = val.into(),
            "--out" => a.out = val.into(),
            "--rounds" => a.rounds = val.parse().expect("rounds"),
            "--clusters" => a.clusters = val.parse().expect("clusters"),
            "-L" => a.l = val.parse().expect("L"),
            "--threads" => a.threads = val.parse().expect("threads"),
            "--max-queries" => a.max_queries = val.parse().expect("max queries"),
            "-R" => a.r = val.parse().expect("R"),
            "--build-L" => a.build_l = val.parse().expect("build L"),
            "--pq-bytes" => a.pq_bytes = val.parse().expect("pq bytes"),
            "--layout" => a.layout = val.parse().expect("layout"),
            "--share" => a.share = val.parse().expect("share"),
            "--extra-l" => {
                a.extra_l = val
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| x.parse().expect("extra L"))
                    .collect()
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

fn index_params(a: &Args) -> IndexParams {
    IndexParams {
        attrs: None,
        metric: a.metric,
        graph: VamanaParams {
            r: a.r,
            l: a.build_l,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: a.pq_bytes,
            ..PqParams::default()
        },
        quant: Default::default(),
        entry: None,
        label_aware: Default::default(),
    }
}

fn open_opts(a: &Args) -> OpenOptions {
    OpenOptions {
        layout: a.layout,
        ..OpenOptions::default()
    }
}

/// recall@10 of `found` (row-major nq × 10 ids) against exact top-10 ids `truth`.
fn recall(found: &[u64], truth: &[u64], nq: usize) -> f64 {
    let mut hit = 0;
    for q in 0..nq {
        let t = &truth[q * 10..q * 10 + 10];
        hit += found[q * 10..q * 10 + 10]
            .iter()
            .filter(|i| t.contains(i))
            .count();
    }
    hit as f64 / (10 * nq) as f64
}

/// Queries per second of `threads` threads searching `queries` in batches of 32 until `stop`.
fn search_loop(
    ix: &LiveIndex,
    queries: &Matrix<f32>,
    p: &SearchParams,
    threads: usize,
    stop: &AtomicBool,
    done: &AtomicU64,
) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let dim = queries.dim();
                let mut at = t * 32;
                while !stop.load(Ordering::Acquire) {
                    let from = at % (queries.n() - 32).max(1);
                    let rows = &queries.as_slice()[from * dim..(from + 32) * dim];
                    ix.search_rows(rows, p, 1, 1).expect("search");
                    done.fetch_add(32, Ordering::Relaxed);
                    at += 32 * threads;
                }
            });
        }
    });
}

fn main() {
    let a = parse();
    let ctl = Control::silent();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads)
        .build()
        .unwrap();
    let base: Matrix<f32> = read_matrix(&a.base).expect("base");
    let q_all: Matrix<f32> = read_matrix(&a.queries).expect("queries");
    let nq = q_all.n().min(a.max_queries);
    let queries = q_all.slice_rows(0, nq);
    let (n, dim) = (base.n(), base.dim());
    eprintln!("{n} × {dim} base, {nq} queries");
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).unwrap();

    // Clusters, in a fixed order: the stream inserts and deletes whole clusters.
    let t = Instant::now();
    let (_, members) = runbook::clusters(&base, a.clusters, &pool, &ctl);
    eprintln!(
        "k-means: {} clusters in {:.1} s",
        a.clusters,
        t.elapsed().as_secs_f64()
    );
    let mut order: VecDeque<usize> = (0..a.clusters)
        .filter(|&c| !members[c].is_empty())
        .collect();

    // The start: clusters in order up to half the vectors. Ids: initial rows get their
    // position in the initial file, inserted rows get n + row.
    let mut live: VecDeque<(usize, Vec<u64>)> = VecDeque::new(); // (cluster, ids)
    let mut row_of = std::collections::HashMap::<u64, usize>::new();
    let mut initial_rows = Vec::new();
    while initial_rows.len() < n / 2 {
        let c = order.pop_front().expect("clusters left");
        let ids: Vec<u64> = (initial_rows.len()..initial_rows.len() + members[c].len())
            .map(|i| i as u64)
            .collect();
        for (&id, &row) in ids.iter().zip(&members[c]) {
            row_of.insert(id, row);
        }
        initial_rows.extend(members[c].iter().copied());
        live.push_back((c, ids));
    }
    let gather = |rows: &[usize]| -> Matrix<f32> {
        let mut v = Vec::with_capacity(rows.len() * dim);
        for &r in rows {
            v.extend_from_slice(base.row(r));
        }
        Matrix::from_vec(v, dim).unwrap()
    };
    let ix_dir = a.dir.join("live");
    let t = Instant::now();
    pool.install(|| build_index(&gather(&initial_rows), &ix_dir, &index_params(&a), &ctl))
        .expect("initial build");
    let initial_build_secs = t.elapsed().as_secs_f64();
    if a.layout != IndexLayout::Packed {
        let d = DiskIndex::open(&ix_dir, OpenOptions::default()).unwrap();
        d.write_layout(a.layout, &Default::default(), &ctl).unwrap();
    }
    eprintln!(
        "initial index: {} vectors in {initial_build_secs:.1} s",
        initial_rows.len()
    );
    let ix = LiveIndex::open(&ix_dir, open_opts(&a), Access::ReadWrite).unwrap();
    let p = SearchParams::beam(10, a.l, 4);
    let mut rows_out = Vec::new();

    for round in 1..=a.rounds {
        let live_n: usize = live.iter().map(|(_, ids)| ids.len()).sum();
        let want = (live_n as f64 * a.share) as usize;
        // Delete the oldest clusters, insert the next unused ones.
        let t_ops = Instant::now();
        let mut deleted = 0;
        while deleted < want {
            let Some((_, ids)) = live.pop_front() else {
                break;
            };
            ix.delete(&ids).unwrap();
            deleted += ids.len();
        }
        let mut inserted = 0;
        while inserted < want {
            let Some(c) = order.pop_front() else { break };
            let ids: Vec<u64> = members[c].iter().map(|&r| (n + r) as u64).collect();
            for (&id, &row) in ids.iter().zip(&members[c]) {
                row_of.insert(id, row);
            }
            ix.insert(Some(&ids), gather(&members[c]).as_slice())
                .unwrap();
            inserted += ids.len();
            live.push_back((c, ids));
        }
        let ops_secs = t_ops.elapsed().as_secs_f64();
        let live_ids: Vec<u64> = live
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        let live_rows: Vec<usize> = live_ids.iter().map(|id| row_of[id]).collect();
        let live_m = gather(&live_rows);
        let truth = pool
            .install(|| {
                knn(
                    &live_m,
                    &queries,
                    10,
                    a.metric,
                    &ExactParams::default(),
                    &ctl,
                )
            })
            .expect("ground truth");
        let truth_ids: Vec<u64> = truth
            .ids
            .chunks(truth.k)
            .flat_map(|r| r[..10].iter().map(|&i| live_ids[i as usize]))
            .collect();
        let before = ix
            .search_rows(queries.as_slice(), &p, a.threads, 1)
            .unwrap();
        let recall_delta = recall(&before.ids, &truth_ids, nq);

        // Odd rounds: the merge alone on all threads (its time against a fresh build); even
        // rounds: the merge on one thread at niceness 10 while `threads` threads search.
        let concurrent = round % 2 == 0;
        let stop = AtomicBool::new(false);
        let done = AtomicU64::new(0);
        let t_m = Instant::now();
        let report = std::thread::scope(|s| {
            if concurrent {
                s.spawn(|| search_loop(&ix, &queries, &p, a.threads, &stop, &done));
            }
            let o = MergeOptions {
                threads: if concurrent { 1 } else { a.threads },
                nice: 10,
                ..MergeOptions::default()
            };
            let r = ix.merge_with(&o, &ctl).expect("merge");
            stop.store(true, Ordering::Release);
            r
        });
        let merge_wall = t_m.elapsed().as_secs_f64();
        let qps_during = done.load(Ordering::Relaxed) as f64 / merge_wall;
        // Idle QPS, the same loop for 3 s.
        let stop = AtomicBool::new(false);
        let done = AtomicU64::new(0);
        let t_i = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| search_loop(&ix, &queries, &p, a.threads, &stop, &done));
            std::thread::sleep(Duration::from_secs(3));
            stop.store(true, Ordering::Release);
        });
        let qps_idle = done.load(Ordering::Relaxed) as f64 / t_i.elapsed().as_secs_f64();
        let after = ix
            .search_rows(queries.as_slice(), &p, a.threads, 1)
            .unwrap();
        let recall_merged = recall(&after.ids, &truth_ids, nq);
        let merged_at: Vec<f64> = a
            .extra_l
            .iter()
            .map(|&l| {
                let p = SearchParams::beam(10, l.max(10), 4);
                let o = ix
                    .search_rows(queries.as_slice(), &p, a.threads, 1)
                    .unwrap();
                recall(&o.ids, &truth_ids, nq)
            })
            .collect();

        // A fresh build of the live set, searched at the same L.
        let fresh_dir = a.dir.join("fresh");
        let t_b = Instant::now();
        pool.install(|| build_index(&live_m, &fresh_dir, &index_params(&a), &ctl))
            .expect("fresh build");
        let fresh_secs = t_b.elapsed().as_secs_f64();
        if a.layout != IndexLayout::Packed {
            let d = DiskIndex::open(&fresh_dir, OpenOptions::default()).unwrap();
            d.write_layout(a.layout, &Default::default(), &ctl).unwrap();
        }
        let fresh = DiskIndex::open(&fresh_dir, open_opts(&a)).unwrap();
        let fo = fresh.search_batch(&queries, &p, a.threads).unwrap();
        let fresh_ids: Vec<u64> = fo.ids.iter().map(|&s| live_ids[s as usize]).collect();
        let recall_fresh = recall(&fresh_ids, &truth_ids, nq);
        let fresh_at: Vec<f64> = a
            .extra_l
            .iter()
            .map(|&l| {
                let p = SearchParams::beam(10, l.max(10), 4);
                let o = fresh.search_batch(&queries, &p, a.threads).unwrap();
                let ids: Vec<u64> = o.ids.iter().map(|&s| live_ids[s as usize]).collect();
                recall(&ids, &truth_ids, nq)
            })
            .collect();
        let recall_at: Vec<serde_json::Value> = a
            .extra_l
            .iter()
            .zip(merged_at.iter().zip(&fresh_at))
            .map(|(&l, (&m, &f))| serde_json::json!({"L": l, "recall": m, "recall_fresh": f}))
            .collect();
        drop(fresh);
        let row = serde_json::json!({
            "round": round,
            "live": live_ids.len(),
            "deleted": deleted,
            "inserted": inserted,
            "ops_secs": ops_secs,
            "recall_before_merge": recall_delta,
            "recall": recall_merged,
            "recall_fresh": recall_fresh,
            "recall_at": recall_at,
            "merge_mode": if concurrent { "with 2 search threads, 1 merge thread at nice 10" } else { "alone" },
            "merge_secs": report.total_secs,
            "merge_wall_secs": merge_wall,
            "fresh_build_secs": fresh_secs,
            "merge_over_fresh": report.total_secs / fresh_secs,
            "qps_during_merge": if concurrent { Some(qps_during) } else { None },
            "qps_idle": qps_idle,
            "qps_ratio": if concurrent { Some(qps_during / qps_idle) } else { None },
            "bytes_written": report.bytes_written,
            "peak_rss_bytes": report.peak_rss_bytes,
            "merge": report,
        });
        eprintln!("{row}");
        rows_out.push(row);
        std::fs::write(
            &a.out,
            serde_json::to_vec_pretty(&serde_json::json!({
                "base": a.base, "n": n, "dim": dim, "metric": a.metric.name(), "queries": nq,
                "L": a.l, "R": a.r, "build_L": a.build_l, "pq_bytes": a.pq_bytes,
                "layout": a.layout.name(), "clusters": a.clusters, "share": a.share,
                "threads": a.threads, "initial": initial_rows.len(),
                "initial_build_secs": initial_build_secs, "rounds": rows_out,
            }))
            .unwrap(),
        )
        .unwrap();
    }
}

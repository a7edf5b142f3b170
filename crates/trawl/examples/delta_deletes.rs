//! Deletes of vectors still in a live index's in-memory delta: what one delete call costs and
//! what the delta's recall is after them, against a twin index whose delta never held the
//! deleted vectors (the best a delete can leave behind).
//!
//! A small disk index (the first `--disk` vectors) takes `--n` inserts, which stay in the delta
//! (no merge); then a random `--share` of them is deleted, `--batch` ids per call, with the log
//! in buffered mode so the figure is the delete's own work, not the device's sync. Recall@10 at
//! L 20 and 40 over the live vectors, against exact truth.
//!
//! ```text
//! cargo run --release --example delta_deletes -- --base B.fbin --queries Q.fbin --metric cosine \
//!     [--disk 2000] [--n 50000] [--share 0.1] [--batch 1] [--dir DIR] [--threads 2]
//! ```

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use trawl::data::read::read_matrix;
use trawl::data::Matrix;
use trawl::exact::{knn, ExactParams};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, Durability, LiveIndex};
use trawl::kinds::graph::{build_index, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::Metric;

struct Args {
    base: PathBuf,
    queries: PathBuf,
    metric: Metric,
    disk: usize,
    n: usize,
    share: f64,
    batch: usize,
    dir: PathBuf,
    threads: usize,
}

fn parse() -> Args {
    let mut a = Args {
        base: PathBuf::new(),
        queries: PathBuf::new(),
        metric: Metric::L2,
        disk: 2000,
        n: 50_000,
        share: 0.1,
        batch: 1,
        dir: std::env::temp_dir().join("trawl-delta-deletes"),
        threads: 2,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.chunks(2);
    while let Some([k, v]) = it.next() {
        match k.as_str() {
            "--base" => a.base = v.into(),
            "--queries" => a.queries = v.into(),
            "--metric" => a.metric = v.parse().expect("--metric"),
            "--disk" => a.disk = v.parse().expect("--disk"),
            "--n" => a.n = v.parse().expect("--n"),
            "--share" => a.share = v.parse().expect("--share"),
            "--batch" => a.batch = v.parse::<usize>().expect("--batch").max(1),
            "--dir" => a.dir = v.into(),
            "--threads" => a.threads = v.parse().expect("--threads"),
            _ => panic!("unknown argument {k}"),
        }
    }
    a
}

/// SplitMix64.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A live index at `dir` of the first `disk` rows on disk and the delta rows `delta` (ids =
/// row numbers) inserted in calls of 1,000.
fn live_index(a: &Args, base: &Matrix<f32>, dir: &PathBuf, delta: &[usize]) -> LiveIndex {
    let _ = std::fs::remove_dir_all(dir);
    let dim = base.dim();
    let disk = base.slice_rows(0, a.disk);
    let params = IndexParams {
        metric: a.metric,
        ..IndexParams::default()
    };
    build_index(&disk, dir, &params, &Control::silent()).expect("build");
    let ix = LiveIndex::open(dir, OpenOptions::default(), Access::ReadWrite).expect("open");
    ix.set_durability(Durability::Buffered).unwrap();
    for part in delta.chunks(1000) {
        let ids: Vec<u64> = part.iter().map(|&r| r as u64).collect();
        let mut rows = Vec::with_capacity(part.len() * dim);
        for &r in part {
            rows.extend_from_slice(base.row(r));
        }
        ix.insert(Some(&ids), &rows).expect("insert");
    }
    ix
}

/// Recall@10 of `ix` at list size `l` against `truth` (ids of the live rows, 10 per query).
fn recall(ix: &LiveIndex, queries: &Matrix<f32>, truth: &[u64], l: usize, threads: usize) -> f64 {
    let p = SearchParams::beam(10, l, 4);
    let out = ix
        .search_rows(queries.as_slice(), &p, threads, 1)
        .expect("search");
    let mut hit = 0usize;
    for q in 0..queries.n() {
        let want: HashSet<u64> = truth[q * 10..(q + 1) * 10].iter().copied().collect();
        hit += out.ids[q * out.k..q * out.k + 10]
            .iter()
            .filter(|i| want.contains(i))
            .count();
    }
    hit as f64 / (queries.n() * 10) as f64
}

fn main() {
    let a = parse();
    let base: Matrix<f32> = read_matrix(&a.base).expect("base");
    let q_all: Matrix<f32> = read_matrix(&a.queries).expect("queries");
    let queries = q_all.slice_rows(0, q_all.n().min(1000));
    assert!(
        a.disk + a.n <= base.n(),
        "--disk + --n must fit in the base"
    );
    let delta: Vec<usize> = (a.disk..a.disk + a.n).collect();
    // The deleted rows: a seeded random share of the delta.
    let mut seed = 7u64;
    let mut order = delta.clone();
    for i in (1..order.len()).rev() {
        order.swap(i, (next(&mut seed) % (i as u64 + 1)) as usize);
    }
    let gone: Vec<usize> = order[..(a.n as f64 * a.share) as usize].to_vec();
    let gone_set: HashSet<usize> = gone.iter().copied().collect();
    let kept: Vec<usize> = delta
        .iter()
        .copied()
        .filter(|r| !gone_set.contains(r))
        .collect();

    let t = Instant::now();
    let ix = live_index(&a, &base, &a.dir.join("deleted"), &delta);
    let insert_secs = t.elapsed().as_secs_f64();
    let mut call_ms = Vec::new();
    for part in gone.chunks(a.batch) {
        let ids: Vec<u64> = part.iter().map(|&r| r as u64).collect();
        let t = Instant::now();
        ix.delete(&ids).expect("delete");
        call_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let twin = live_index(&a, &base, &a.dir.join("twin"), &kept);

    // Exact truth over the live rows (the disk rows and the kept delta rows).
    let live_rows: Vec<usize> = (0..a.disk).chain(kept.iter().copied()).collect();
    let mut live = Vec::with_capacity(live_rows.len() * base.dim());
    for &r in &live_rows {
        live.extend_from_slice(base.row(r));
    }
    let live = Matrix::from_vec(live, base.dim()).unwrap();
    let t = knn(
        &live,
        &queries,
        10,
        a.metric,
        &ExactParams::default(),
        &Control::silent(),
    )
    .expect("truth");
    let truth: Vec<u64> = t
        .ids
        .iter()
        .map(|&i| live_rows[i as usize] as u64)
        .collect();

    call_ms.sort_by(f64::total_cmp);
    let pct = |p: f64| call_ms[((call_ms.len() - 1) as f64 * p) as usize];
    println!(
        "delta of {} ({} on disk), {} deleted in calls of {}: insert {:.1} s; delete call median {:.3} ms, p99 {:.3} ms, total {:.2} s",
        a.n,
        a.disk,
        gone.len(),
        a.batch,
        insert_secs,
        pct(0.5),
        pct(0.99),
        call_ms.iter().sum::<f64>() / 1e3
    );
    for l in [20, 40] {
        println!(
            "recall@10 L {l}: after deletes {:.4}, twin never holding them {:.4}",
            recall(&ix, &queries, &truth, l, a.threads),
            recall(&twin, &queries, &truth, l, a.threads)
        );
    }
    let _ = std::fs::remove_dir_all(&a.dir);
}

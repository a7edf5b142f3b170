//! What carrying the hot-node order over merges costs a node cache: rounds of random deletes
//! and inserts (`--share` of the live vectors each), each folded in by a merge that carries the
//! order over (refreshed by fewer sample searches) or ranks afresh
//! ([`trawl::kinds::graph::hot::RERANK_SHARE`]); after each, the
//! merged index is opened with a node cache of `--cache` of its vectors chosen twice, by the
//! order the merge wrote and by a fresh ranking of the same index (the same sample searches a
//! build runs), and the test queries are searched with each (O_DIRECT, beam width 4): pages
//! read per query and cache hits. Merge time and monitor time per round too.
//!
//! ```text
//! cargo run --release --example hot_carry -- --base B.fbin --queries Q.fbin [--metric l2] \
//!     [--n 500000] [--rounds 6] [--share 0.05] [--cache 0.04] [--l 20] [--nq 1000] \
//!     [--pq 32] [--work DIR]
//! ```
//!
//! The initial index (R 64, L 100, `--pq` bytes) is built into `DIR/init` when that is missing,
//! and copied to `DIR/live` for the rounds.

use std::path::PathBuf;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use trawl::data::read::read_matrix;
use trawl::data::Matrix;
use trawl::kinds::graph::search::{CachePolicy, SearchParams};
use trawl::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
use trawl::kinds::graph::{build_index, hot, DiskIndex, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::vamana::VamanaParams;
use trawl::Metric;

fn arg(v: &[String], k: &str, d: &str) -> String {
    v.iter()
        .position(|x| x == k)
        .and_then(|i| v.get(i + 1).cloned())
        .unwrap_or_else(|| d.to_string())
}

/// Mean pages read and cache hits per query with a cache of `nodes` nodes chosen by `policy`.
fn pages_per_query(
    dir: &std::path::Path,
    queries: &Matrix<f32>,
    nodes: usize,
    policy: CachePolicy,
    l: usize,
) -> (f64, f64, f64) {
    let mut ix = DiskIndex::open(dir, OpenOptions::default()).expect("open");
    let t = Instant::now();
    ix.load_cache(nodes, policy, 2, &Control::silent())
        .expect("cache");
    let secs = t.elapsed().as_secs_f64();
    let out = ix
        .search_batch(queries, &SearchParams::beam(10, l, 4), 2)
        .expect("search");
    let nq = out.stats.len() as f64;
    let pages: u64 = out.stats.iter().map(|s| s.io.pages_read).sum();
    let hits: u64 = out.stats.iter().map(|s| s.traversal.cache_hits).sum();
    (pages as f64 / nq, hits as f64 / nq, secs)
}

fn main() {
    let v: Vec<String> = std::env::args().collect();
    let base: Matrix<f32> = read_matrix(&PathBuf::from(arg(&v, "--base", ""))).expect("base");
    let q: Matrix<f32> = read_matrix(&PathBuf::from(arg(&v, "--queries", ""))).expect("queries");
    let nq: usize = arg(&v, "--nq", "1000").parse().expect("--nq");
    let q = q.slice_rows(0, q.n().min(nq));
    let metric: Metric = arg(&v, "--metric", "l2").parse().expect("--metric");
    let n: usize = arg(&v, "--n", "500000").parse().expect("--n");
    let rounds: usize = arg(&v, "--rounds", "6").parse().expect("--rounds");
    let share: f64 = arg(&v, "--share", "0.05").parse().expect("--share");
    let cache: f64 = arg(&v, "--cache", "0.04").parse().expect("--cache");
    let l: usize = arg(&v, "--l", "20").parse().expect("--l");
    let work = PathBuf::from(arg(&v, "--work", "/tmp/hot_carry"));
    let dim = base.dim();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut rows: Vec<usize> = (0..base.n()).collect();
    rows.shuffle(&mut rng);
    assert!(
        n < base.n(),
        "--n must leave base vectors to insert ({} in the file)",
        base.n()
    );
    let spare = rows[n..].to_vec();
    let gather = |rs: &[usize]| {
        let mut x = Vec::with_capacity(rs.len() * dim);
        for &r in rs {
            x.extend_from_slice(base.row(r));
        }
        Matrix::from_vec(x, dim).expect("rows")
    };
    let init = work.join("init");
    if !init.join("manifest.trawl").is_file() {
        let params = IndexParams {
            metric,
            graph: VamanaParams {
                r: 64,
                l: 100,
                ..VamanaParams::default()
            },
            pq: PqParams {
                bytes_per_vector: arg(&v, "--pq", "32").parse().expect("--pq"),
                ..PqParams::default()
            },
            ..IndexParams::default()
        };
        let t = Instant::now();
        build_index(&gather(&rows[..n]), &init, &params, &Control::silent()).expect("build");
        eprintln!("initial build {:.1} s", t.elapsed().as_secs_f64());
    }
    let dir = work.join("live");
    let _ = std::fs::remove_dir_all(&dir);
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(&init)
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(copied.success(), "copying {}", init.display());
    let mut live: Vec<u64> = (0..n as u64).collect();
    let mut next_id = n as u64;
    let mut next_spare = 0;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    println!(
        "round | merge s | monitor s | hot order | changed since ranking | cache nodes | pages/query carried-or-merged order | fresh ranking | hits/query merged | fresh"
    );
    for round in 1..=rounds {
        let ix = LiveIndex::open(&dir, OpenOptions::default(), Access::ReadWrite).expect("live");
        let k = (live.len() as f64 * share) as usize;
        live.shuffle(&mut rng);
        let del = live.split_off(live.len() - k);
        ix.delete(&del).expect("delete");
        let new_rows = &spare[next_spare..next_spare + k];
        next_spare += k;
        let ids: Vec<u64> = (next_id..next_id + k as u64).collect();
        next_id += k as u64;
        ix.insert(Some(&ids), gather(new_rows).as_slice())
            .expect("insert");
        live.extend_from_slice(&ids);
        let o = MergeOptions {
            threads: 2,
            nice: 0,
            ..MergeOptions::default()
        };
        let r = ix.merge_with(&o, &Control::silent()).expect("merge");
        drop(ix);
        let nodes = (live.len() as f64 * cache) as usize;
        let slots = DiskIndex::open(&dir, OpenOptions::default())
            .expect("open")
            .n();
        let merged = CachePolicy::Frequency {
            sample_queries: 0,
            l: 15,
            beam_width: 4,
        };
        let fresh = CachePolicy::Frequency {
            sample_queries: hot::sample_searches(slots),
            l: 15,
            beam_width: 4,
        };
        let (pm, hm, _) = pages_per_query(&dir, &q, nodes, merged, l);
        let (pf, hf, _) = pages_per_query(&dir, &q, nodes, fresh, l);
        println!(
            "{round} | {:.2} | {:.2} | {} | {} | {nodes} | {pm:.3} | {pf:.3} | {hm:.3} | {hf:.3}",
            r.total_secs,
            r.monitor_secs,
            if r.hot_carried { "carried" } else { "ranked" },
            r.hot_changed,
        );
    }
}

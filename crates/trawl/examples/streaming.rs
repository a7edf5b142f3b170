//! The streaming runbook (in the style of big-ann-benchmarks' streaming track), driven by
//! `bench/streaming.py`: start from an index of half the vectors, then rounds that delete
//! `--share` (default 5%) of the live vectors and insert as many unused ones, with a merge after
//! each round. Which vectors, by `--pattern` (every pattern seeded by `--seed`, deterministic):
//!
//! - `cluster` (default): the start is whole k-means clusters in cluster order up to half the
//!   vectors; each round deletes the oldest clusters and inserts the next unused ones, whole
//!   clusters at a time (the hard case: a region of the space goes, another arrives).
//! - `uniform`: the start is a uniformly random half; each round deletes live vectors chosen
//!   uniformly at random and inserts unused vectors chosen uniformly at random.
//! - `expire`: the start is a random half inserted in a random order (the order is the age);
//!   each round deletes the oldest live vectors (first in, first out) and inserts unused vectors
//!   in random order (they become the youngest).
//! - `upsert`: the start is a random half; each round `share/2` random live ids get a new
//!   (unused) vector through [`LiveIndex::upsert`] (the id stays, its vector changes), `share/2`
//!   random live ids are deleted and `share/2` unused vectors inserted under new ids.
//!
//! A vector is never reused once deleted or replaced; the ground truth maps each live id to its
//! current dataset row. `--deletes` chooses how the merge takes deleted nodes out of the graph
//! (`MergeOptions::deletes`): `inplace` (the default: every in-neighbour, from the merge's
//! pass over the lists, takes replacement edges to the deleted node's out-neighbours),
//! `inplace-search` (IP-DiskANN: the in-neighbours a search for the deleted vector finds),
//! `inplace-nearest` (replacement edges to
//! the 32 live nodes nearest to the deleted vector), `consolidate` (FreshDiskANN's Algorithm 4);
//! `--replace C` is the in-place variants' edges per lost edge.
//!
//! After every round:
//! - recall@10 at a fixed L over the live set (exact ground truth of the live set), before and
//!   after the merge, and the same for an index built from scratch on the live set (also at the
//!   `--extra-l` list sizes, each ≥ 10). A returned id is a hit only when it is live and its
//!   distance is its current vector's (so a deleted id, or an upserted id found through its old
//!   vector, never counts; both are counted apart as dead and stale results), and recall over
//!   the top-10 entries that are vectors the stream added (`recall_added`: new vectors the
//!   merge failed to link show there first);
//! - odd rounds: the merge alone on all threads, its time against the fresh build's; even
//!   rounds: the merge on 1 thread at niceness 10 beside 2 search threads, QPS during the merge
//!   against idle QPS right after it (the same loop: O_DIRECT, batches of 32);
//! - QPS after the merge against the fresh index, paired: the same loop on the merged index and
//!   on the fresh one, 2 s each, alternated 5 times (medians and their ratio);
//! - what the merge touched (its report, as `merge`): nodes whose list changed and graph pages
//!   rewritten, per deleted vector and as a share of the graph's pages, the in-edges of the
//!   deleted nodes found and replaced, the delete phase's time; bytes written and peak RSS.
//!
//! ```text
//! cargo run --release --example streaming -- --base B.fbin --queries Q.fbin --metric cosine \
//!     --dir WORK --out result.json [--rounds 10] [--clusters 200] [-L 64] [--threads 2] \
//!     [--extra-l 16,32] [--layout packed|decoupled] [--share 0.05] \
//!     [--pattern cluster|uniform|expire|upsert] [--seed 1] \
//!     [--deletes inplace|inplace-search|inplace-nearest|consolidate] [--replace 3]
//! ```

// The per-round JSON object is one `serde_json::json!`, past the default macro recursion.
#![recursion_limit = "256"]

#[path = "common/runbook.rs"]
mod runbook;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use trawl::data::read::read_matrix;
use trawl::data::Matrix;
use trawl::exact::{knn, ExactParams};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex, MergeOptions};
use trawl::kinds::graph::updates::merge::{Candidates, DeleteRepair, InNeighbours, InPlaceParams};
use trawl::kinds::graph::{build_index, DiskIndex, IndexLayout, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::vamana::VamanaParams;
use trawl::Metric;

/// Which vectors each round deletes and inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    Cluster,
    Uniform,
    Expire,
    Upsert,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::Cluster => "cluster",
            Pattern::Uniform => "uniform",
            Pattern::Expire => "expire",
            Pattern::Upsert => "upsert",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "cluster" => Pattern::Cluster,
            "uniform" => Pattern::Uniform,
            "expire" => Pattern::Expire,
            "upsert" => Pattern::Upsert,
            _ => return None,
        })
    }
}

/// How the merge takes deleted nodes out of the graph (`--deletes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deletes {
    InPlace,
    InPlaceSearch,
    InPlaceNearest,
    Consolidate,
}

impl Deletes {
    fn name(self) -> &'static str {
        match self {
            Deletes::InPlace => "inplace",
            Deletes::InPlaceSearch => "inplace-search",
            Deletes::InPlaceNearest => "inplace-nearest",
            Deletes::Consolidate => "consolidate",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "inplace" => Deletes::InPlace,
            "inplace-search" => Deletes::InPlaceSearch,
            "inplace-nearest" => Deletes::InPlaceNearest,
            "consolidate" => Deletes::Consolidate,
            _ => return None,
        })
    }

    /// The merge option, with `replace` edges per lost edge for the in-place variants.
    fn repair(self, replace: usize) -> DeleteRepair {
        let base = InPlaceParams {
            replace,
            ..InPlaceParams::default()
        };
        match self {
            Deletes::InPlace => DeleteRepair::InPlace(base),
            Deletes::InPlaceSearch => DeleteRepair::InPlace(InPlaceParams {
                in_neighbours: InNeighbours::Search { l: 0 },
                ..base
            }),
            Deletes::InPlaceNearest => DeleteRepair::InPlace(InPlaceParams {
                candidates: Candidates::Nearest { k: 32 },
                ..base
            }),
            Deletes::Consolidate => DeleteRepair::Consolidate,
        }
    }
}

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
    pattern: Pattern,
    seed: u64,
    deletes: Deletes,
    replace: usize,
}

/// Stops with `msg` on stderr (exit status 2): a bad command line.
fn refuse(msg: &str) -> ! {
    eprintln!("streaming: {msg}");
    std::process::exit(2)
}

/// `val` parsed, or a refusal naming `what`.
fn num<T: std::str::FromStr>(val: &str, what: &str) -> T {
    val.parse()
        .unwrap_or_else(|_| refuse(&format!("{what}: `{val}` is not a valid value")))
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
        pattern: Pattern::Cluster,
        seed: 1,
        deletes: Deletes::InPlace,
        replace: 3,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--base" => a.base = val.into(),
            "--queries" => a.queries = val.into(),
            "--metric" => a.metric = val.parse().unwrap_or_else(|e: String| refuse(&e)),
            "--dir" => a.dir = val.into(),
            "--out" => a.out = val.into(),
            "--rounds" => a.rounds = num(&val, "--rounds"),
            "--clusters" => a.clusters = num(&val, "--clusters"),
            "-L" => a.l = num(&val, "-L"),
            "--threads" => a.threads = num(&val, "--threads"),
            "--max-queries" => a.max_queries = num(&val, "--max-queries"),
            "-R" => a.r = num(&val, "-R"),
            "--build-L" => a.build_l = num(&val, "--build-L"),
            "--pq-bytes" => a.pq_bytes = num(&val, "--pq-bytes"),
            "--layout" => a.layout = val.parse().unwrap_or_else(|e: String| refuse(&e)),
            "--share" => a.share = num(&val, "--share"),
            "--extra-l" => {
                a.extra_l = val
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| num(x, "--extra-l"))
                    .collect()
            }
            "--pattern" => {
                a.pattern = Pattern::parse(&val).unwrap_or_else(|| {
                    refuse(&format!(
                        "--pattern `{val}`: expected cluster, uniform, expire or upsert"
                    ))
                })
            }
            "--seed" => a.seed = num(&val, "--seed"),
            "--deletes" => {
                a.deletes = Deletes::parse(&val).unwrap_or_else(|| {
                    refuse(&format!(
                        "--deletes `{val}`: expected inplace, inplace-search, inplace-nearest \
                         or consolidate"
                    ))
                })
            }
            "--replace" => a.replace = num(&val, "--replace"),
            other => refuse(&format!("unknown argument {other}")),
        }
        i += 2;
    }
    // recall@10 needs a list of at least 10: a smaller L would be raised to 10 by the search,
    // and its column would silently repeat L 10.
    if a.l < 10 {
        refuse(&format!("-L {}: recall@10 needs L ≥ 10", a.l));
    }
    if let Some(l) = a.extra_l.iter().find(|&&l| l < 10) {
        refuse(&format!("--extra-l {l}: recall@10 needs L ≥ 10"));
    }
    if !(a.share > 0.0 && a.share < 1.0) {
        refuse(&format!("--share {}: expected a share in (0, 1)", a.share));
    }
    if a.replace == 0 && a.deletes != Deletes::Consolidate {
        refuse("--replace 0: an in-place delete needs at least one replacement edge");
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

/// SplitMix64: the runbook's seeded, deterministic random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }

    /// `k` live ids chosen uniformly at random, taken out of `live` (its order is not kept).
    fn take(&mut self, live: &mut VecDeque<u64>, k: usize) -> Vec<u64> {
        (0..k.min(live.len()))
            .map(|_| {
                let j = self.below(live.len());
                live.swap_remove_back(j).unwrap()
            })
            .collect()
    }
}

/// The live set and the unused vectors of a stream. Ids: a vector of the start gets its
/// position in the initial build; an inserted vector gets `n + row`; an upserted id keeps its
/// id. Each dataset row is used once at most, so ids are never reused.
enum Stream {
    /// Whole k-means clusters: the live clusters (oldest first) and the unused ones in order.
    Clusters {
        members: Vec<Vec<usize>>,
        order: VecDeque<usize>,
        live: VecDeque<(usize, Vec<u64>)>,
    },
    /// Single vectors: the live ids (oldest first: the order matters only to `expire`) and
    /// the unused rows in random order.
    Rows {
        live: VecDeque<u64>,
        unused: VecDeque<usize>,
        rng: Rng,
    },
}

/// What one round did to the live index.
#[derive(Debug, Default)]
struct RoundOps {
    /// Vectors removed (upserted ids' old vectors included).
    deleted: usize,
    /// Vectors added (upserted ids' new vectors included).
    inserted: usize,
    /// Ids whose vector was replaced by an upsert.
    upserted: usize,
}

impl Stream {
    fn live_ids(&self) -> Vec<u64> {
        match self {
            Stream::Clusters { live, .. } => live
                .iter()
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect(),
            Stream::Rows { live, .. } => live.iter().copied().collect(),
        }
    }

    /// One round of `pattern`: deletes and inserts (and upserts) of `share` of the live set
    /// each, applied to `ix`; `row_of` follows.
    #[allow(clippy::too_many_arguments)]
    fn round(
        &mut self,
        pattern: Pattern,
        share: f64,
        n: usize,
        ix: &LiveIndex,
        row_of: &mut HashMap<u64, usize>,
        gather: &dyn Fn(&[usize]) -> Matrix<f32>,
    ) -> RoundOps {
        let mut ops = RoundOps::default();
        let live_n = self.live_ids().len();
        let want = (live_n as f64 * share) as usize;
        // Inserts of rows under new ids (n + row), in slices of at most 4096 vectors.
        let insert = |rows: &[usize], row_of: &mut HashMap<u64, usize>| -> Vec<u64> {
            let ids: Vec<u64> = rows.iter().map(|&r| (n + r) as u64).collect();
            for (c_ids, c_rows) in ids.chunks(4096).zip(rows.chunks(4096)) {
                ix.insert(Some(c_ids), gather(c_rows).as_slice()).unwrap();
            }
            for (&id, &row) in ids.iter().zip(rows) {
                row_of.insert(id, row);
            }
            ids
        };
        let delete = |ids: &[u64], row_of: &mut HashMap<u64, usize>| {
            if !ids.is_empty() {
                ix.delete(ids).unwrap();
            }
            for id in ids {
                row_of.remove(id);
            }
        };
        match self {
            Stream::Clusters {
                members,
                order,
                live,
            } => {
                // Delete the oldest clusters, insert the next unused ones.
                while ops.deleted < want {
                    let Some((_, ids)) = live.pop_front() else {
                        break;
                    };
                    delete(&ids, row_of);
                    ops.deleted += ids.len();
                }
                while ops.inserted < want {
                    let Some(c) = order.pop_front() else { break };
                    let ids = insert(&members[c], row_of);
                    ops.inserted += ids.len();
                    live.push_back((c, ids));
                }
            }
            Stream::Rows { live, unused, rng } => {
                let (upserts, deletes) = match pattern {
                    Pattern::Upsert => (want / 2, want - want / 2),
                    _ => (0, want),
                };
                let gone: Vec<u64> = match pattern {
                    Pattern::Expire => live.drain(..deletes.min(live.len())).collect(),
                    _ => rng.take(live, deletes),
                };
                delete(&gone, row_of);
                ops.deleted += gone.len();
                if upserts > 0 {
                    let ids = rng.take(live, upserts.min(unused.len()));
                    let rows: Vec<usize> = unused.drain(..ids.len()).collect();
                    for (c_ids, c_rows) in ids.chunks(4096).zip(rows.chunks(4096)) {
                        ix.upsert(c_ids, gather(c_rows).as_slice()).unwrap();
                    }
                    for (&id, &row) in ids.iter().zip(&rows) {
                        row_of.insert(id, row);
                    }
                    ops.upserted = ids.len();
                    ops.deleted += ids.len();
                    ops.inserted += ids.len();
                    live.extend(ids);
                }
                let rows: Vec<usize> = unused.drain(..deletes.min(unused.len())).collect();
                let ids = insert(&rows, row_of);
                ops.inserted += ids.len();
                live.extend(ids);
            }
        }
        ops
    }
}

/// How a batch's results score against the exact top-10 of the live set.
#[derive(Debug, Clone, Copy, Default)]
struct Scored {
    recall: f64,
    /// Results whose id is not live (deleted).
    dead: usize,
    /// Results whose id is live but whose distance is not its current vector's (an upserted
    /// id found through its old vector).
    stale: usize,
    /// Entries of the exact top-10s that are vectors the stream added (inserted or upserted
    /// since the start), and how many of them were found.
    added_truth: usize,
    added_hits: usize,
}

/// recall@10 of `ids`/`dists` (row-major, `k` a query, `k` ≥ 10) against the exact top-10
/// ids `truth`: a result is a hit only when its id is in the truth and its distance is that
/// of the id's current vector (`row_of`, rows of `base`). `added` tells the vectors the stream
/// added.
#[allow(clippy::too_many_arguments)]
fn score(
    ids: &[u64],
    dists: &[f32],
    k: usize,
    truth: &[u64],
    queries: &Matrix<f32>,
    base: &Matrix<f32>,
    row_of: &HashMap<u64, usize>,
    metric: Metric,
    added: &dyn Fn(u64) -> bool,
) -> Scored {
    let nq = queries.n();
    let mut s = Scored::default();
    let mut hit = 0;
    for q in 0..nq {
        let t = &truth[q * 10..q * 10 + 10];
        s.added_truth += t.iter().filter(|&&id| added(id)).count();
        for j in q * k..q * k + 10 {
            let id = ids[j];
            if id == u64::MAX {
                continue; // no result
            }
            let Some(&row) = row_of.get(&id) else {
                s.dead += 1;
                continue;
            };
            let d = trawl::kernels::distance(metric, queries.row(q), base.row(row));
            if (d - dists[j]).abs() > 1e-3 * d.abs().max(1.0) {
                s.stale += 1;
                continue;
            }
            if t.contains(&id) {
                hit += 1;
                s.added_hits += usize::from(added(id));
            }
        }
    }
    s.recall = hit as f64 / (10 * nq) as f64;
    s
}

/// Recall over the added vectors' top-10 entries (`None` when there are none).
fn added_recall(s: &Scored) -> Option<f64> {
    (s.added_truth > 0).then(|| s.added_hits as f64 / s.added_truth as f64)
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
    let batch = queries.n().min(32);
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let dim = queries.dim();
                let mut at = t * batch;
                while !stop.load(Ordering::Acquire) {
                    let from = at % (queries.n() - batch + 1);
                    let rows = &queries.as_slice()[from * dim..(from + batch) * dim];
                    ix.search_rows(rows, p, 1, 1).expect("search");
                    done.fetch_add(batch as u64, Ordering::Relaxed);
                    at += batch * threads;
                }
            });
        }
    });
}

/// QPS of [`search_loop`] on `ix` for `secs` seconds.
fn qps_for(
    ix: &LiveIndex,
    queries: &Matrix<f32>,
    p: &SearchParams,
    threads: usize,
    secs: f64,
) -> f64 {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| search_loop(ix, queries, p, threads, &stop, &done));
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Release);
    });
    done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

/// Mean hops, pages read, PQ distances and exact distances per query of a batch's statistics.
fn work(stats: &[trawl::search::QueryStats]) -> serde_json::Value {
    let n = stats.len().max(1) as f64;
    let mean = |f: &dyn Fn(&trawl::search::QueryStats) -> u64| {
        stats.iter().map(|s| f(s) as f64).sum::<f64>() / n
    };
    serde_json::json!({
        "hops": mean(&|s| s.traversal.hops),
        "pages": mean(&|s| s.io.pages_read),
        "pq_distances": mean(&|s| s.traversal.pq_distances),
        "exact_distances": mean(&|s| s.traversal.exact_distances),
    })
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// `a / b`, or 0 when `b` is 0.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
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
    eprintln!(
        "{n} × {dim} base, {nq} queries; pattern {}, deletes {}",
        a.pattern.name(),
        a.deletes.name()
    );
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).unwrap();

    // The start (half the vectors) and the stream's state. Ids of the start: their position
    // in the initial build.
    let mut row_of = HashMap::<u64, usize>::new();
    let mut initial_rows = Vec::new();
    let mut stream = if a.pattern == Pattern::Cluster {
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
        let mut live: VecDeque<(usize, Vec<u64>)> = VecDeque::new();
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
        Stream::Clusters {
            members,
            order,
            live,
        }
    } else {
        // A random half, in random order (the order is the age); the rest, in random order,
        // is drawn from the front.
        let mut rng = Rng(a.seed);
        let mut rows: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut rows);
        let mut unused: VecDeque<usize> = rows.into();
        initial_rows = unused.drain(..n / 2).collect();
        for (id, &row) in initial_rows.iter().enumerate() {
            row_of.insert(id as u64, row);
        }
        Stream::Rows {
            live: (0..initial_rows.len() as u64).collect(),
            unused,
            rng,
        }
    };
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
    let repair = a.deletes.repair(a.replace);
    let command: Vec<String> = std::env::args().collect();
    let mut rows_out = Vec::new();

    for round in 1..=a.rounds {
        let t_ops = Instant::now();
        let ops = stream.round(a.pattern, a.share, n, &ix, &mut row_of, &gather);
        let ops_secs = t_ops.elapsed().as_secs_f64();
        let live_ids = stream.live_ids();
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
        // A vector the stream added: not the one its id had in the initial build.
        let added = |id: u64| initial_rows.get(id as usize) != row_of.get(&id);
        let scored = |ids: &[u64], dists: &[f32], k: usize| {
            score(
                ids, dists, k, &truth_ids, &queries, &base, &row_of, a.metric, &added,
            )
        };
        let before = ix
            .search_rows(queries.as_slice(), &p, a.threads, 1)
            .unwrap();
        let before = scored(&before.ids, &before.dists, before.k);

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
                deletes: repair,
                ..MergeOptions::default()
            };
            let r = ix.merge_with(&o, &ctl).expect("merge");
            stop.store(true, Ordering::Release);
            r
        });
        let merge_wall = t_m.elapsed().as_secs_f64();
        let qps_during = done.load(Ordering::Relaxed) as f64 / merge_wall;
        // Idle QPS, the same loop for 3 s.
        let qps_idle = qps_for(&ix, &queries, &p, a.threads, 3.0);
        let after = ix
            .search_rows(queries.as_slice(), &p, a.threads, 1)
            .unwrap();
        let work_after = work(&after.stats);
        let after = scored(&after.ids, &after.dists, after.k);
        let merged_at: Vec<f64> = a
            .extra_l
            .iter()
            .map(|&l| {
                let p = SearchParams::beam(10, l, 4);
                let o = ix
                    .search_rows(queries.as_slice(), &p, a.threads, 1)
                    .unwrap();
                scored(&o.ids, &o.dists, o.k).recall
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
        let to_ids = |slots: &[u32]| -> Vec<u64> {
            slots
                .iter()
                .map(|&s| live_ids.get(s as usize).copied().unwrap_or(u64::MAX))
                .collect()
        };
        let fo = fresh.search_batch(&queries, &p, a.threads).unwrap();
        let work_fresh = work(&fo.stats);
        let fresh_scored = scored(&to_ids(&fo.ids), &fo.dists, fo.k);
        let fresh_at: Vec<f64> = a
            .extra_l
            .iter()
            .map(|&l| {
                let p = SearchParams::beam(10, l, 4);
                let o = fresh.search_batch(&queries, &p, a.threads).unwrap();
                scored(&to_ids(&o.ids), &o.dists, o.k).recall
            })
            .collect();
        let recall_at: Vec<serde_json::Value> = a
            .extra_l
            .iter()
            .zip(merged_at.iter().zip(&fresh_at))
            .map(|(&l, (&m, &f))| serde_json::json!({"L": l, "recall": m, "recall_fresh": f}))
            .collect();
        drop(fresh);

        // QPS after the merge against the fresh index, paired: the same loop on each in
        // turn (merged, fresh, merged, …), 2 s each, 5 times each.
        let fresh_live = LiveIndex::open(&fresh_dir, open_opts(&a), Access::ReadOnly).unwrap();
        let (mut qps_after, mut qps_fresh) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            qps_after.push(qps_for(&ix, &queries, &p, a.threads, 2.0));
            qps_fresh.push(qps_for(&fresh_live, &queries, &p, a.threads, 2.0));
        }
        drop(fresh_live);
        let (qps_after_m, qps_fresh_m) = (median(&qps_after), median(&qps_fresh));

        let deleted = ops.deleted as f64;
        let row = serde_json::json!({
            "round": round,
            "live": live_ids.len(),
            "deleted": ops.deleted,
            "inserted": ops.inserted,
            "upserted": ops.upserted,
            "ops_secs": ops_secs,
            "recall_before_merge": before.recall,
            "work_after_merge": work_after,
            "work_fresh": work_fresh,
            "recall": after.recall,
            "recall_fresh": fresh_scored.recall,
            "recall_at": recall_at,
            "recall_added": added_recall(&after),
            "recall_added_fresh": added_recall(&fresh_scored),
            "truth_added": after.added_truth,
            "dead_results_before_merge": before.dead,
            "stale_results_before_merge": before.stale,
            "dead_results": after.dead,
            "stale_results": after.stale,
            "stale_results_fresh": fresh_scored.stale,
            "merge_mode": if concurrent { "with 2 search threads, 1 merge thread at nice 10" } else { "alone" },
            "merge_secs": report.total_secs,
            "merge_wall_secs": merge_wall,
            "fresh_build_secs": fresh_secs,
            "merge_over_fresh": report.total_secs / fresh_secs,
            "qps_during_merge": if concurrent { Some(qps_during) } else { None },
            "qps_idle": qps_idle,
            "qps_ratio": if concurrent { Some(qps_during / qps_idle) } else { None },
            "qps_after_merge": qps_after_m,
            "qps_fresh": qps_fresh_m,
            "qps_after_over_fresh": ratio(qps_after_m, qps_fresh_m),
            "qps_after_merge_runs": qps_after,
            "qps_fresh_runs": qps_fresh,
            "touched_nodes": report.touched_nodes,
            "touched_pages": report.touched_pages,
            "graph_pages": report.graph_pages,
            "in_edges": report.in_edges,
            "in_edges_found": report.in_edges_found,
            "replacement_edges": report.replacement_edges,
            "delete_secs": report.delete_secs,
            "nodes_touched_per_delete": ratio(report.touched_nodes as f64, deleted),
            "pages_touched_per_delete": ratio(report.touched_pages as f64, deleted),
            "pages_touched_share": ratio(report.touched_pages as f64, report.graph_pages as f64),
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
                "layout": a.layout.name(), "pattern": a.pattern.name(), "seed": a.seed,
                "clusters": if a.pattern == Pattern::Cluster { Some(a.clusters) } else { None },
                "share": a.share, "deletes": a.deletes.name(), "replace": a.replace,
                "delete_repair": repair, "threads": a.threads, "initial": initial_rows.len(),
                "initial_build_secs": initial_build_secs, "command": command,
                "rounds": rows_out,
            }))
            .unwrap(),
        )
        .unwrap();
    }
}

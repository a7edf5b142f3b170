//! Recall of fresh builds across live sets of one dataset: the streaming runbook's live sets
//! (whole k-means clusters, in the runbook's order) and random subsets of the same size, each
//! built and searched with one or more variants of the build and search settings. Per build:
//! recall@10 at each L (all queries; the queries whose own cluster is in the live set; those
//! whose cluster is not), and the graph's connectivity.
//!
//! ```text
//! cargo run --release -p trawl --example recall_stability -- --base B.fbin --queries Q.fbin \
//!     --dir WORK --out result.json [--runbook 10] [--random 10] [--clusters 200] \
//!     [--variants default,shuffle,...] [-L 64] [--threads 2] [--max-queries 1000]
//!     [--only runbook-10,random-3]
//! ```
//!
//! Variants: `default` (the runbook's build: R 64, build L 100, PQ 32, no entry index, the
//! library's default visit order; beam width 4 from the medoid), `ids` (points linked in id
//! order, the default before this study), `shuffle` (in a seeded random order), `blocksN`
//! (blocks of N consecutive ids in a seeded random order), `entry` (an entry index, searched
//! with list 10 before the disk search; `entryN`: with list N), `bshufN` (the rows permuted in
//! blocks of N before the build), `alphaX`, `l200` (build L 200), `pass2` (a second pass), `qsN` (the build gets the N
//! queries after the evaluated ones as its query sample), `qcapN_RES`, `qtrainN`,
//! `pseudoS_B_K` (query-aware edge experiments on the in-memory graph), `exact` (the in-memory graph
//! searched with exact distances, no PQ: the graph alone, with an analysis of the misses);
//! joined with `+` (`shuffle+entry`).

#[path = "common/runbook.rs"]
mod runbook;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use trawl::data::read::read_matrix;
use trawl::data::Matrix;
use trawl::exact::{knn, ExactParams};
use trawl::kinds::graph::search::entry::EntryParams;
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::{build_index, DiskIndex, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::vamana::{VamanaParams, VisitOrder};
use trawl::Metric;

struct Args {
    base: PathBuf,
    queries: PathBuf,
    dir: PathBuf,
    out: PathBuf,
    runbook: usize,
    random: usize,
    clusters: usize,
    variants: Vec<String>,
    ls: Vec<usize>,
    threads: usize,
    max_queries: usize,
    metric: Metric,
    share: f64,
    only: Vec<String>,
}

fn parse() -> Args {
    let mut a = Args {
        base: PathBuf::new(),
        queries: PathBuf::new(),
        dir: PathBuf::from("recall-stability"),
        out: PathBuf::from("recall-stability.json"),
        runbook: 10,
        random: 10,
        clusters: 200,
        variants: vec!["default".into()],
        ls: vec![64],
        threads: 2,
        max_queries: 1000,
        metric: Metric::L2,
        share: 0.05,
        only: Vec::new(),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--base" => a.base = v.into(),
            "--queries" => a.queries = v.into(),
            "--dir" => a.dir = v.into(),
            "--out" => a.out = v.into(),
            "--runbook" => a.runbook = v.parse().expect("--runbook"),
            "--random" => a.random = v.parse().expect("--random"),
            "--clusters" => a.clusters = v.parse().expect("--clusters"),
            "--variants" => a.variants = v.split(',').map(String::from).collect(),
            "-L" => a.ls = v.split(',').map(|x| x.parse().expect("-L")).collect(),
            "--threads" => a.threads = v.parse().expect("--threads"),
            "--max-queries" => a.max_queries = v.parse().expect("--max-queries"),
            "--metric" => a.metric = v.parse().expect("--metric"),
            "--only" => a.only = v.split(',').map(String::from).collect(),
            other => panic!("unknown flag {other}"),
        }
        i += 2;
    }
    a
}

/// The runbook's live sets: clusters in order up to half the rows, then `rounds` rounds each
/// dropping the oldest clusters (≥ 5% of the live rows) and adding the next unused ones.
/// Returns per round the live clusters in live order (round 0 is the start).
fn runbook_sets(members: &[Vec<usize>], n: usize, rounds: usize, share: f64) -> Vec<Vec<usize>> {
    let mut order: std::collections::VecDeque<usize> = (0..members.len())
        .filter(|&c| !members[c].is_empty())
        .collect();
    let mut live: std::collections::VecDeque<usize> = Default::default();
    let mut rows = 0;
    while rows < n / 2 {
        let c = order.pop_front().expect("clusters left");
        rows += members[c].len();
        live.push_back(c);
    }
    let mut sets = Vec::new();
    for _ in 1..=rounds {
        let live_n: usize = live.iter().map(|&c| members[c].len()).sum();
        let want = (live_n as f64 * share) as usize;
        let mut deleted = 0;
        while deleted < want {
            let Some(c) = live.pop_front() else { break };
            deleted += members[c].len();
        }
        let mut inserted = 0;
        while inserted < want {
            let Some(c) = order.pop_front() else { break };
            inserted += members[c].len();
            live.push_back(c);
        }
        sets.push(live.iter().copied().collect());
    }
    sets
}

fn gather(base: &Matrix<f32>, rows: &[usize]) -> Matrix<f32> {
    let dim = base.dim();
    let mut v = Vec::with_capacity(rows.len() * dim);
    for &r in rows {
        v.extend_from_slice(base.row(r));
    }
    Matrix::from_vec(v, dim).expect("rows")
}

/// recall@10 of `found` (slots of the live set, nq × 10) against `truth` (nq × k), over the
/// queries `which` selects.
fn recall(found: &[u32], truth: &[u32], k: usize, which: &[bool], want: Option<bool>) -> f64 {
    let (mut hit, mut total) = (0usize, 0usize);
    for (q, &w) in which.iter().enumerate() {
        if want.is_some_and(|x| x != w) {
            continue;
        }
        let t = &truth[q * k..q * k + 10];
        hit += found[q * 10..q * 10 + 10]
            .iter()
            .filter(|i| t.contains(i))
            .count();
        total += 10;
    }
    if total == 0 {
        f64::NAN
    } else {
        hit as f64 / total as f64
    }
}

/// A variant's build parameters, its entry list, and the block size of a block shuffle of the
/// rows (`bshufN`: blocks of N consecutive rows in a seeded random order) done before the build.
fn params(variant: &str) -> (IndexParams, usize, Option<usize>) {
    let mut p = IndexParams {
        attrs: None,
        metric: Metric::L2,
        graph: VamanaParams {
            r: 64,
            l: 100,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: 32,
            ..PqParams::default()
        },
        quant: Default::default(),
        entry: None,
        label_aware: Default::default(),
    };
    let mut entry_list = 0;
    let mut block = None;
    for part in variant.split('+') {
        match part {
            "default" | "exact" => {}
            "shuffle" => p.graph.order = VisitOrder::Random,
            "ids" => p.graph.order = VisitOrder::Ids,
            "entry" => {
                p.entry.get_or_insert_with(EntryParams::default);
                entry_list = 10;
            }
            r if r.starts_with("ratio") => {
                p.entry.get_or_insert_with(EntryParams::default).ratio =
                    r["ratio".len()..].parse().expect("entry ratio")
            }
            e if e.starts_with("entry") => {
                p.entry.get_or_insert_with(EntryParams::default);
                entry_list = e["entry".len()..].parse().expect("entry list");
            }
            b if b.starts_with("bshuf") => block = Some(b["bshuf".len()..].parse().expect("block")),
            b if b.starts_with("blocks") => {
                p.graph.order = VisitOrder::Blocks(b["blocks".len()..].parse().expect("blocks"))
            }
            "l200" => p.graph.l = 200,
            "opq" => p.pq.opq_iters = trawl::quant::pq::OPQ_ITERS,
            b if b.starts_with("pq") => {
                p.pq.bytes_per_vector = b["pq".len()..].parse().expect("PQ bytes")
            }
            "pass2" => p.graph.passes = 2,
            q if q.starts_with("pseudo")
                || q.starts_with("qtrain")
                || q.starts_with("qcap")
                || q.starts_with("qs") => {}
            a if a.starts_with("alpha") => {
                p.graph.alpha = a["alpha".len()..].parse().expect("alpha")
            }
            other => panic!("unknown variant {other}"),
        }
    }
    (p, entry_list, block)
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
    std::fs::create_dir_all(&a.dir).unwrap();
    let (km, members) = runbook::clusters(&base, a.clusters, &pool, &ctl);
    let q_cluster = km.assign(queries.as_slice());
    let mut row_cluster = vec![0u32; n];
    for (c, m) in members.iter().enumerate() {
        for &r in m {
            row_cluster[r] = c as u32;
        }
    }
    let mut sets: Vec<(String, Vec<usize>, HashSet<usize>)> = Vec::new();
    for (i, clusters) in runbook_sets(&members, n, a.runbook, a.share)
        .into_iter()
        .enumerate()
    {
        let rows: Vec<usize> = clusters
            .iter()
            .flat_map(|&c| members[c].iter().copied())
            .collect();
        sets.push((
            format!("runbook-{}", i + 1),
            rows,
            clusters.into_iter().collect(),
        ));
    }
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    for i in 0..a.random {
        let mut rows: Vec<usize> = (0..n).collect();
        rows.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1000 + i as u64));
        rows.truncate(n / 2);
        rows.sort_unstable();
        let all: HashSet<usize> = (0..a.clusters).collect();
        sets.push((format!("random-{}", i + 1), rows, all));
    }
    let mut results = Vec::new();
    sets.retain(|(name, _, _)| a.only.is_empty() || a.only.contains(name));
    for (name, rows, clusters) in &sets {
        let live = gather(&base, rows);
        let own: Vec<bool> = q_cluster
            .iter()
            .map(|&c| clusters.contains(&(c as usize)))
            .collect();
        let t = Instant::now();
        let truth = pool
            .install(|| knn(&live, &queries, 10, a.metric, &ExactParams::default(), &ctl))
            .expect("ground truth");
        eprintln!(
            "{name}: {} rows, {} of {nq} queries in their own cluster, truth in {:.1} s",
            rows.len(),
            own.iter().filter(|&&o| o).count(),
            t.elapsed().as_secs_f64()
        );
        for variant in &a.variants {
            let (p, entry_list, block) = params(variant);
            // A block shuffle: the build sees the rows in `perm` order; results map back.
            let perm: Option<Vec<usize>> = block.map(|b| {
                use rand::seq::SliceRandom;
                let mut blocks: Vec<usize> = (0..rows.len().div_ceil(b)).collect();
                blocks.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(77));
                blocks
                    .iter()
                    .flat_map(|&k| k * b..((k + 1) * b).min(rows.len()))
                    .collect()
            });
            let shuffled = perm.as_ref().map(|pm| gather(&live, pm));
            let built = shuffled.as_ref().unwrap_or(&live);
            let back = |ids: &[u32]| -> Vec<u32> {
                match &perm {
                    Some(pm) => ids
                        .iter()
                        .map(|&s| pm.get(s as usize).map_or(u32::MAX, |&r| r as u32))
                        .collect(),
                    None => ids.to_vec(),
                }
            };
            let dir = a.dir.join("ix");
            let t = Instant::now();
            let mut row = serde_json::json!({"set": name, "variant": variant, "n": rows.len(),
                "own_cluster_queries": own.iter().filter(|&&o| o).count()});
            let mut recalls = serde_json::Map::new();
            if variant.split('+').any(|p| p == "exact") {
                let (mut g, _) = pool
                    .install(|| trawl::vamana::build(built, a.metric, &p.graph, &ctl))
                    .expect("graph");
                if let Some(part) = variant.split('+').find(|p| p.starts_with("qtrain")) {
                    // An oracle: held-out queries other than the evaluated ones as the sample.
                    let m: usize = part["qtrain".len()..].parse().expect("qtrain");
                    let extra = q_all.slice_rows(nq, m.min(q_all.n() - nq));
                    let added = pool
                        .install(|| co_neighbour_edges(&mut g, built, &extra, a.metric, 10, &ctl));
                    eprintln!("    query-sample edges: {added} added");
                    row["qtrain_edges"] = added.into();
                }
                if let Some(part) = variant.split('+').find(|p| p.starts_with("qcap")) {
                    // The library's query-aware edges, within R: qcapN_RES.
                    let v: Vec<usize> = part["qcap".len()..]
                        .split('_')
                        .map(|x| x.parse().expect("qcap"))
                        .collect();
                    let extra = q_all.slice_rows(nq, v[0].min(q_all.n() - nq));
                    let t = pool
                        .install(|| knn(built, &extra, 10, a.metric, &ExactParams::default(), &ctl))
                        .expect("sample truth");
                    let store = trawl::vamana::VectorStore::new(built.as_slice(), dim, a.metric)
                        .expect("store");
                    let limits = trawl::vamana::PruneLimits {
                        degree: p.graph.r,
                        alpha: p.graph.alpha,
                        max_candidates: p.graph.max_candidates,
                        saturate: false,
                    };
                    let added = pool
                        .install(|| {
                            trawl::vamana::link_query_neighbours(
                                &mut g, &store, &t.ids, 10, limits, v[1], &ctl,
                            )
                        })
                        .expect("query edges");
                    eprintln!("    query edges within R: {added} added");
                    row["qcap_edges"] = added.into();
                }
                if let Some((share, beta, kk)) = pseudo_of(variant) {
                    let t = Instant::now();
                    let added = pool
                        .install(|| pseudo_edges(&mut g, built, a.metric, share, beta, kk, &ctl));
                    eprintln!(
                        "    pseudo-query edges: {added} added in {:.1} s",
                        t.elapsed().as_secs_f64()
                    );
                    row["pseudo_edges"] = added.into();
                }
                row["build_secs"] = t.elapsed().as_secs_f64().into();
                row["connectivity"] = serde_json::to_value(trawl::vamana::connectivity::measure(
                    &g,
                    &[g.medoid()],
                    None,
                ))
                .unwrap();
                let store = trawl::vamana::VectorStore::new(built.as_slice(), dim, a.metric)
                    .expect("store");
                for &l in &a.ls {
                    let (found, _) = pool
                        .install(|| trawl::vamana::search_batch(&g, &store, &queries, 10, l))
                        .expect("search");
                    let found = back(&found);
                    recalls.insert(format!("L{l}"), recall_json(&found, &truth, &own));
                    analyze(l, &found, &truth, &own, rows, &row_cluster);
                }
            } else {
                // `qsN`: the build gets the N queries after the evaluated ones as its sample.
                let sample = variant
                    .split('+')
                    .find(|p| p.starts_with("qs"))
                    .map(|part| {
                        let m: usize = part["qs".len()..].parse().expect("qs");
                        q_all.slice_rows(nq, m.min(q_all.n() - nq))
                    });
                let rep = pool
                    .install(|| match &sample {
                        Some(q) => {
                            trawl::kinds::graph::build_index_with_queries(built, q, &dir, &p, &ctl)
                        }
                        None => build_index(built, &dir, &p, &ctl),
                    })
                    .expect("build");
                row["query_edges"] = rep.query_edges.into();
                row["build_secs"] = t.elapsed().as_secs_f64().into();
                row["connectivity"] = serde_json::to_value(&rep.connectivity).unwrap();
                row["relinked"] = rep.relinked.into();
                row["monitor"] = serde_json::to_value(&rep.recall).unwrap();
                row["graph_secs"] = rep.graph_secs.into();
                let ix = DiskIndex::open(&dir, OpenOptions::default()).expect("open");
                // With an entry index, each L is searched from the medoid and from the seeds.
                let lists: Vec<usize> = if entry_list > 0 {
                    vec![0, entry_list]
                } else {
                    vec![0]
                };
                for &l in &a.ls {
                    for &e in &lists {
                        let mut sp = SearchParams::beam(10, l, 4);
                        sp.entry_list = e;
                        let o = ix.search_batch(&queries, &sp, a.threads).expect("search");
                        let key = if e > 0 {
                            format!("L{l}+e{e}")
                        } else {
                            format!("L{l}")
                        };
                        recalls.insert(key, recall_json(&back(&o.ids), &truth, &own));
                    }
                }
            }
            row["recall"] = recalls.into();
            eprintln!("  {variant}: {}", row);
            results.push(row);
            std::fs::write(
                &a.out,
                serde_json::to_string_pretty(&serde_json::json!({"results": results})).unwrap(),
            )
            .unwrap();
        }
    }
}

fn recall_json(
    found: &[u32],
    truth: &trawl::data::groundtruth::GroundTruth,
    own: &[bool],
) -> serde_json::Value {
    serde_json::json!({
        "all": recall(found, &truth.ids, truth.k, own, None),
        "own": recall(found, &truth.ids, truth.k, own, Some(true)),
        "other": recall(found, &truth.ids, truth.k, own, Some(false)),
    })
}

/// Where the misses of the out-of-distribution queries lie: the distinct clusters of the true
/// and the found top 10, the misses in a cluster with no found neighbour, d10/d1 of the truth.
fn analyze(
    l: usize,
    found: &[u32],
    truth: &trawl::data::groundtruth::GroundTruth,
    own: &[bool],
    rows: &[usize],
    row_cluster: &[u32],
) {
    for want in [true, false] {
        let (mut nq, mut tc, mut fc, mut miss, mut miss_other, mut ratio) = (0, 0, 0, 0, 0, 0.0);
        let mut hist = [0usize; 11];
        for (q, &o) in own.iter().enumerate() {
            if o != want {
                continue;
            }
            nq += 1;
            let t = &truth.ids[q * truth.k..q * truth.k + 10];
            let f = &found[q * 10..q * 10 + 10];
            let cl = |i: u32| row_cluster[rows[i as usize]];
            let tcs: HashSet<u32> = t.iter().map(|&i| cl(i)).collect();
            let fcs: HashSet<u32> = f
                .iter()
                .filter(|&&i| (i as usize) < rows.len())
                .map(|&i| cl(i))
                .collect();
            tc += tcs.len();
            fc += fcs.len();
            let hits = f.iter().filter(|i| t.contains(i)).count();
            hist[hits] += 1;
            for &i in t {
                if !f.contains(&i) {
                    miss += 1;
                    if !fcs.contains(&cl(i)) {
                        miss_other += 1;
                    }
                }
            }
            if !truth.dists.is_empty() {
                let d = &truth.dists[q * truth.k..q * truth.k + 10];
                ratio += (d[9] / d[0].max(1e-12)).sqrt() as f64;
            }
        }
        eprintln!(
            "    L{l} {}: {nq} queries, clusters in truth {:.2} found {:.2}, misses {miss} ({miss_other} in a cluster not found), sqrt d10/d1 {:.3}, hits histogram {:?}",
            if want { "own" } else { "other" },
            tc as f64 / nq.max(1) as f64,
            fc as f64 / nq.max(1) as f64,
            ratio / nq.max(1) as f64,
            hist
        );
    }
}

/// `pseudoS_B_K` in a variant: share S of the points, step B, top K.
fn pseudo_of(variant: &str) -> Option<(f64, f32, usize)> {
    let part = variant.split('+').find(|p| p.starts_with("pseudo"))?;
    let v: Vec<&str> = part["pseudo".len()..].split('_').collect();
    Some((
        v[0].parse().expect("share"),
        v[1].parse().expect("step"),
        v[2].parse().expect("k"),
    ))
}

/// Pseudo-queries off the rim of the data: from a sample of points p, a step of `beta` times
/// p's mean neighbour distance away from the centroid of p's neighbours (outwards, where a
/// point on the edge of a region has no data); each pseudo-query's exact top `kk` are linked
/// to one another (co-neighbours of one query, as query-aware graphs do). Returns edges added.
fn pseudo_edges(
    g: &mut trawl::vamana::Graph,
    data: &Matrix<f32>,
    metric: Metric,
    share: f64,
    beta: f32,
    kk: usize,
    ctl: &Control,
) -> usize {
    use rand::SeedableRng;
    let (n, dim) = (data.n(), data.dim());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(99);
    let s = ((n as f64 * share) as usize).max(1);
    let picks = rand::seq::index::sample(&mut rng, n, s).into_vec();
    let mut qs = Vec::with_capacity(s * dim);
    for &p in &picks {
        let x = data.row(p);
        let nb = g.neighbors(p as u32);
        let mut c = vec![0f32; dim];
        let mut mean_d = 0f32;
        for &j in nb {
            let y = data.row(j as usize);
            let mut d2 = 0f32;
            for k in 0..dim {
                c[k] += y[k];
                d2 += (x[k] - y[k]) * (x[k] - y[k]);
            }
            mean_d += d2.sqrt();
        }
        let m = nb.len().max(1) as f32;
        mean_d /= m;
        let mut dir: Vec<f32> = (0..dim).map(|k| x[k] - c[k] / m).collect();
        let norm = dir.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        for v in &mut dir {
            *v *= beta * mean_d / norm;
        }
        qs.extend((0..dim).map(|k| x[k] + dir[k]));
    }
    let qm = Matrix::from_vec(qs, dim).unwrap();
    co_neighbour_edges(g, data, &qm, metric, kk, ctl)
}

/// Links the exact top `kk` of each query of `qm` to one another. Returns edges added.
fn co_neighbour_edges(
    g: &mut trawl::vamana::Graph,
    data: &Matrix<f32>,
    qm: &Matrix<f32>,
    metric: Metric,
    kk: usize,
    ctl: &Control,
) -> usize {
    let (n, s) = (data.n(), qm.n());
    let t = knn(data, qm, kk, metric, &ExactParams::default(), ctl).expect("pseudo truth");
    let r = g.max_degree();
    let mut lists: Vec<Vec<u32>> = (0..n as u32).map(|i| g.neighbors(i).to_vec()).collect();
    let mut added = 0;
    for q in 0..s {
        let ids = &t.ids[q * kk..(q + 1) * kk];
        for &a in ids {
            for &b in ids {
                if a != b && !lists[a as usize].contains(&b) {
                    lists[a as usize].push(b);
                    added += 1;
                }
            }
        }
    }
    let r2 = lists.iter().map(|l| l.len()).max().unwrap_or(r);
    *g = trawl::vamana::Graph::from_lists(lists, r2, g.medoid());
    added
}

//! The in-memory Vamana build (DiskANN's `Index::link`): a medoid entry point, then for every
//! point in parallel a greedy search from the medoid, a robust prune of the expanded nodes to
//! `R` out-neighbours, and back-edges to each chosen neighbour (re-pruned when its slack runs
//! out); a final pass prunes every list longer than `R`.

use std::time::Instant;

use parking_lot::Mutex;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::data::Matrix;
use crate::kernels::{Element, Metric};
use crate::progress::Control;
use crate::vamana::adjacency::{Adjacency, Graph, SlotGraph};
use crate::vamana::labels::BuildLabels;
use crate::vamana::params::{BuildError, VamanaConfig, VamanaParams, VisitOrder};
use crate::vamana::prune::{robust_prune, robust_prune_labelled, PruneLimits, PruneScratch};
use crate::vamana::queue::Neighbor;
use crate::vamana::search::{greedy, greedy_where, SearchScratch};
use crate::vamana::store::VectorStore;
use crate::vamana::{budget, defaults};

pub use crate::vamana::query_edges::link_query_neighbours;

/// What a build did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildStats {
    /// Wall-clock seconds of the whole build.
    pub wall_secs: f64,
    /// Distances computed (searches, prunes, medoid).
    pub distance_computations: u64,
    /// Mean out-degree.
    pub avg_degree: f64,
    /// Largest out-degree.
    pub max_degree: usize,
    /// Nodes without out-neighbours.
    pub isolated: usize,
    /// Shards built (1 for an unsharded build).
    pub shards: usize,
    /// Estimated peak memory of the build in bytes.
    pub estimated_peak_bytes: u64,
    /// Edges added to link back nodes the medoid did not reach ([`link_unreachable`]).
    pub relinked: usize,
    /// Queries in the sample the build linked the nearest points of (0 without one).
    pub query_sample: usize,
    /// Edges the query sample added ([`link_query_neighbours`]).
    pub query_edges: usize,
    /// Labels the build linked by, each with a start node (0: not a label-aware build).
    pub label_starts: usize,
    /// Label searches the label-aware build ran (one per point and tracked label searched).
    pub label_searches: u64,
}

/// Builds a Vamana graph over `data` for `metric`; every node is reachable from the medoid
/// ([`link_unreachable`]).
///
/// With a `memory_budget_bytes` smaller than [`estimate_bytes`], the build is split into
/// overlapping shards (see `vamana/budget.rs`). Runs on rayon's current thread pool; with one
/// thread and a fixed seed the result is bit-identical across runs.
pub fn build<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &VamanaParams,
    ctl: &Control,
) -> Result<(Graph, BuildStats), BuildError> {
    build_with_queries(data, metric, params, None, ctl)
}

/// [`build`], and with a sample of the queries the index will serve, query-aware edges
/// ([`link_query_neighbours`]) between the exact [`defaults::QUERY_EDGE_K`] nearest points of
/// each sample query, before the unreachable nodes are linked back. The sample must have the
/// data's dimension; an empty one adds nothing.
pub fn build_with_queries<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &VamanaParams,
    queries: Option<&Matrix<T>>,
    ctl: &Control,
) -> Result<(Graph, BuildStats), BuildError> {
    build_labelled(data, metric, params, queries, None, ctl)
}

/// [`build_with_queries`], label-aware with `labels` ([`crate::vamana::labels`]): start nodes
/// ([`BuildLabels::starts`]), label searches, label-aware prunes. A build split into parts by a
/// memory budget is not label-aware (no starts, `label_starts` 0).
pub fn build_labelled<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    params: &VamanaParams,
    queries: Option<&Matrix<T>>,
    mut labels: Option<&mut BuildLabels>,
    ctl: &Control,
) -> Result<(Graph, BuildStats), BuildError> {
    let cfg = params.validate()?;
    if let Some(q) = queries {
        if q.n() > 0 && q.dim() != data.dim() {
            return Err(BuildError::DimMismatch {
                expected: data.dim(),
                got: q.dim(),
            });
        }
    }
    let n = data.n();
    if n == 0 {
        return Err(BuildError::Empty);
    }
    if n >= u32::MAX as usize {
        return Err(BuildError::TooManyPoints { n });
    }
    let t0 = Instant::now();
    let single = estimate_bytes::<T>(n, data.dim(), metric, &cfg);
    let mut label_searches = 0;
    let (graph, dists, shards, est) = match cfg.memory_budget_bytes {
        Some(budget) if single > usable_budget(budget) => {
            let (g, d, s, e) = budget::build_in_parts(data, metric, &cfg, budget, ctl)?;
            (g, d, s, e)
        }
        _ => {
            // A mapped file is copied onto huge pages (and its mapped pages released): the
            // build reads rows at random, and 4 KiB pages would add a TLB miss to most reads.
            let owned = data.resident_copy();
            let rows = owned.as_deref().unwrap_or(data.as_slice());
            let store = VectorStore::new(rows, data.dim(), metric).expect("matrix shape is valid");
            if let Some(lb) = labels.as_deref_mut() {
                lb.choose_starts(&store, ctl)?;
            }
            let (g, d, searches) = build_in_memory(&store, &cfg, labels.as_deref(), ctl)?;
            label_searches = searches;
            (g, d, 1, single)
        }
    };
    let mut graph = graph;
    let store =
        VectorStore::new(data.as_slice(), data.dim(), metric).expect("matrix shape is valid");
    let mut query_edges = 0;
    if let Some(q) = queries.filter(|q| q.n() > 0) {
        let k = defaults::QUERY_EDGE_K.min(n);
        let truth = crate::exact::knn(
            data,
            q,
            k,
            metric,
            &crate::exact::ExactParams::default(),
            ctl,
        )
        .map_err(|e| match e {
            crate::exact::ExactError::Cancelled(c) => BuildError::Cancelled(c),
            other => BuildError::InvalidParam {
                name: "query_sample",
                reason: other.to_string(),
            },
        })?;
        let limits = cfg.prune_limits();
        query_edges = link_query_neighbours(&mut graph, &store, &truth.ids, k, limits, 0, ctl)?;
    }
    let relinked = link_unreachable(&mut graph, &store, cfg.l, None, ctl)?;
    drop(store);
    let mut stats = degree_stats(&graph);
    stats.relinked = relinked;
    stats.query_edges = query_edges;
    stats.query_sample = queries.map_or(0, |q| q.n());
    stats.wall_secs = t0.elapsed().as_secs_f64();
    stats.distance_computations = dists;
    stats.shards = shards;
    stats.estimated_peak_bytes = est;
    stats.label_searches = label_searches;
    stats.label_starts = labels.map_or(0, |lb| {
        lb.starts()
            .iter()
            .filter(|&&s| s != crate::vamana::labels::NO_START)
            .count()
    });
    Ok((graph, stats))
}

/// The part of a memory budget a build plans to fill. The estimates count the build's own
/// buffers, not the process around them (allocator slack, thread stacks, the PQ codes and
/// progress state held meanwhile): at 10M vectors the peak RSS came out 0.6% above the
/// estimate, so a build planned to the last byte can overrun. A thirty-second of the budget
/// (256 MiB of 8 GiB) is kept back.
pub(super) fn usable_budget(budget: u64) -> u64 {
    budget - budget / 32
}

/// The budget whose [`usable_budget`] is at least `usable` bytes (for error messages).
pub(super) fn budget_for(usable: u64) -> u64 {
    usable.saturating_mul(32).div_ceil(31)
}

/// Estimated peak bytes of an unsharded build: the vectors, the slot graph, the norms and the
/// per-thread scratch.
pub fn estimate_bytes<T: Element>(n: usize, dim: usize, metric: Metric, cfg: &VamanaConfig) -> u64 {
    let vectors = (n * dim * std::mem::size_of::<T>()) as u64;
    vectors + working_bytes(n, metric, cfg)
}

/// Bytes of a build over `n` vectors that are not the vectors themselves.
pub(super) fn working_bytes(n: usize, metric: Metric, cfg: &VamanaConfig) -> u64 {
    let norms = match metric {
        Metric::L2 => 0,
        Metric::Cosine => n as u64 * 4,
        Metric::InnerProduct => n as u64 * 8,
    };
    let threads = rayon::current_num_threads() as u64;
    let scratch = threads * (n as u64 / 8 + 64 * 1024);
    SlotGraph::bytes_for(n, cfg.slots) + norms + scratch
}

fn degree_stats(g: &Graph) -> BuildStats {
    let degs = &g.degrees;
    BuildStats {
        avg_degree: g.edge_count() as f64 / g.n().max(1) as f64,
        max_degree: degs.iter().copied().max().unwrap_or(0) as usize,
        isolated: degs.iter().filter(|&&d| d == 0).count(),
        ..BuildStats::default()
    }
}

/// The order points are linked in (see [`VisitOrder`]).
fn visit_order(n: usize, cfg: &VamanaConfig) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    match cfg.order {
        VisitOrder::Ids => (0..n as u32).collect(),
        VisitOrder::Random => {
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.shuffle(&mut rng);
            order
        }
        VisitOrder::Blocks(b) => {
            let b = b.max(1);
            let mut blocks: Vec<u32> = (0..n.div_ceil(b) as u32).collect();
            blocks.shuffle(&mut rng);
            blocks
                .into_iter()
                .flat_map(|k| (k as usize * b) as u32..((k as usize + 1) * b).min(n) as u32)
                .collect()
        }
    }
}

/// Per-thread buffers of the build.
#[derive(Debug, Default)]
struct Scratch {
    search: SearchScratch,
    prune: PruneScratch,
    pool: Vec<Neighbor>,
    out: Vec<u32>,
    copy: Vec<u32>,
    copy_dists: Vec<f32>,
    /// Labels of the point being linked that it searches.
    searched: Vec<u32>,
    /// The candidates sharing a label with the pruned point, and their prune.
    lab: (Vec<Neighbor>, Vec<u32>),
    dists: u64,
    label_searches: u64,
}

/// One scratch per pool thread, picked by thread index (no allocation per point).
struct ScratchPool(Vec<Mutex<Scratch>>);

impl ScratchPool {
    fn new(n: usize) -> Self {
        let t = rayon::current_num_threads().max(1);
        Self(
            (0..t)
                .map(|_| {
                    Mutex::new(Scratch {
                        search: SearchScratch::new(n),
                        ..Scratch::default()
                    })
                })
                .collect(),
        )
    }
    fn get(&self) -> parking_lot::MutexGuard<'_, Scratch> {
        let i = rayon::current_thread_index().unwrap_or(0) % self.0.len();
        self.0[i].lock()
    }
    fn dists(self) -> u64 {
        self.totals().0
    }
    /// Distances computed and label searches run.
    fn totals(self) -> (u64, u64) {
        self.0.into_iter().fold((0, 0), |(d, l), m| {
            let s = m.into_inner();
            (d + s.dists, l + s.label_searches)
        })
    }
}

struct Builder<'s, 'a, 'g, T: Element> {
    store: &'s VectorStore<'a, T>,
    graph: &'g SlotGraph,
    cfg: VamanaConfig,
    medoid: u32,
    labels: Option<&'g BuildLabels>,
}

/// Builds the graph of every vector of `store` in memory (label-aware with `labels`, their
/// starts chosen). Returns it with the number of distances computed and of label searches.
pub(super) fn build_in_memory<T: Element>(
    store: &VectorStore<'_, T>,
    cfg: &VamanaConfig,
    labels: Option<&BuildLabels>,
    ctl: &Control,
) -> Result<(Graph, u64, u64), BuildError> {
    let n = store.n();
    let medoid = medoid(store, ctl)?;
    let graph = SlotGraph::new(n, cfg.slots);
    let b = Builder {
        store,
        graph: &graph,
        cfg: *cfg,
        medoid,
        labels,
    };
    let order = visit_order(n, cfg);
    let scratch = ScratchPool::new(n);
    let bar = ctl.bar("vamana build", n as u64 * cfg.passes as u64);
    // Points are handed out in order, one chunk at a time, from a shared cursor (OpenMP's
    // dynamic schedule, which DiskANN uses): every thread works near the front of the order,
    // so the graph grows from the first points outwards. rayon's recursive halving of the
    // order would instead start one thread in the middle of it.
    for pass in 0..cfg.passes {
        // A later pass searches the whole graph for each point again and prunes what it
        // finds together with the point's current list (Vamana's second pass).
        let keep = pass > 0;
        let cursor = std::sync::atomic::AtomicUsize::new(0);
        let outcomes = rayon::broadcast(|ctx| -> Result<(), BuildError> {
            let mut s = scratch.0[ctx.index() % scratch.0.len()].lock();
            loop {
                let start =
                    cursor.fetch_add(defaults::BUILD_CHUNK, std::sync::atomic::Ordering::Relaxed);
                if start >= n {
                    return Ok(());
                }
                ctl.check()?;
                let chunk = &order[start..(start + defaults::BUILD_CHUNK).min(n)];
                for &p in chunk {
                    b.link(p, keep, &mut s);
                }
                bar.inc(chunk.len() as u64);
            }
        });
        outcomes.into_iter().collect::<Result<(), _>>()?;
    }
    bar.finish_and_clear();
    drop(order);
    b.final_prune(&scratch, ctl)?;
    let (dists, searches) = scratch.totals();
    Ok((graph.into_graph(cfg.r, medoid), n as u64 + dists, searches))
}

/// Links `points` (ids of `store`, whose lists in `graph` are empty) into `graph` in
/// parallel, as the build does — greedy search from `start`, robust prune, back-edges
/// re-pruned when a list runs out of slots — without the final prune: lists may hold up to
/// `graph.slots()` neighbours. The streaming updates' in-memory delta grows this way. Returns
/// the distances computed.
pub(crate) fn link_points<T: Element>(
    store: &VectorStore<'_, T>,
    graph: &SlotGraph,
    cfg: &VamanaConfig,
    start: u32,
    points: &[u32],
    ctl: &Control,
) -> Result<u64, BuildError> {
    let b = Builder {
        store,
        graph,
        cfg: *cfg,
        medoid: start,
        labels: None,
    };
    let scratch = ScratchPool::new(graph.node_count());
    let cursor = std::sync::atomic::AtomicUsize::new(0);
    let chunk_len = defaults::BUILD_CHUNK.min(points.len().div_ceil(8)).max(1);
    let outcomes = rayon::broadcast(|ctx| -> Result<(), BuildError> {
        let mut s = scratch.0[ctx.index() % scratch.0.len()].lock();
        loop {
            let at = cursor.fetch_add(chunk_len, std::sync::atomic::Ordering::Relaxed);
            if at >= points.len() {
                return Ok(());
            }
            ctl.check()?;
            for &p in &points[at..(at + chunk_len).min(points.len())] {
                b.link(p, false, &mut s);
            }
        }
    });
    outcomes.into_iter().collect::<Result<(), _>>()?;
    Ok(scratch.dists())
}

impl<T: Element> Builder<'_, '_, '_, T> {
    fn limits(&self) -> PruneLimits {
        self.cfg.prune_limits()
    }

    /// Robust prune of `p`'s `pool` into `out`; with labels, label-aware, and up to half the
    /// list kept for the candidates sharing a label with `p` (a rare label's are far).
    fn prune(
        &self,
        p: u32,
        pool: &mut Vec<Neighbor>,
        scratch: &mut PruneScratch,
        out: &mut Vec<u32>,
        lab: &mut (Vec<Neighbor>, Vec<u32>),
    ) -> u64 {
        let Some(lb) = self.labels.filter(|lb| !lb.of(p).is_empty()) else {
            return robust_prune(self.store, p, pool, self.limits(), scratch, out);
        };
        let mine = lb.of(p);
        let mask = |q: u32| lb.mask(mine, q);
        let (shared, kept) = lab;
        shared.clear();
        shared.extend(pool.iter().filter(|c| mask(c.id) != 0));
        let limits = self.limits();
        let mut d = robust_prune_labelled(self.store, p, pool, limits, scratch, out, mask);
        if shared.iter().all(|c| c.id == p) {
            return d;
        }
        let half = PruneLimits {
            degree: (limits.degree / 2).max(1),
            ..limits
        };
        d += robust_prune_labelled(self.store, p, shared, half, scratch, kept, mask);
        // The label candidates kept first, then the others the whole prune chose.
        for &q in out.iter() {
            if kept.len() >= limits.degree {
                break;
            }
            if !kept.contains(&q) {
                kept.push(q);
            }
        }
        std::mem::swap(out, kept);
        d
    }

    /// Search, prune, set and back-link point `p` (with `keep`, its current neighbours are
    /// candidates of the prune too).
    fn link(&self, p: u32, keep: bool, s: &mut Scratch) {
        let probe = self.store.point(p);
        let st = greedy(
            self.graph,
            self.store,
            &probe,
            self.medoid,
            self.cfg.l,
            true,
            &mut s.search,
        );
        s.dists += st.distance_computations;
        s.pool.clear();
        s.pool.extend_from_slice(&s.search.expanded);
        if let Some(lb) = self.labels {
            // FilteredVamana: the subgraph of each label of p, from the label's start node.
            let mut searched = std::mem::take(&mut s.searched);
            lb.searched(p, &mut searched);
            for &l in &searched {
                let start = lb.starts()[l as usize];
                let st = greedy_where(
                    self.graph,
                    self.store,
                    &probe,
                    start,
                    self.cfg.l,
                    true,
                    &mut s.search,
                    |id| lb.has(id, l),
                );
                s.dists += st.distance_computations;
                s.label_searches += 1;
                s.pool.extend_from_slice(&s.search.expanded);
            }
            s.searched = searched;
        }
        if keep {
            self.graph.neighbors_into(p, &mut s.copy);
            s.copy.retain(|j| !s.pool.iter().any(|c| c.id == *j));
            self.store.dist_batch(&probe, &s.copy, &mut s.copy_dists);
            s.dists += s.copy.len() as u64;
            s.pool.extend(
                s.copy
                    .iter()
                    .zip(&s.copy_dists)
                    .map(|(&id, &dist)| Neighbor { id, dist }),
            );
        }
        s.dists += self.prune(p, &mut s.pool, &mut s.prune, &mut s.out, &mut s.lab);
        {
            let g = self.graph.lock(p);
            self.graph.set(&g, &s.out);
        }
        let out = std::mem::take(&mut s.out);
        for &j in &out {
            self.back_link(j, p, s);
        }
        s.out = out;
    }

    /// Adds the edge `j → p`, re-pruning `j`'s list when it has no slack left.
    fn back_link(&self, j: u32, p: u32, s: &mut Scratch) {
        {
            let g = self.graph.lock(j);
            if self.graph.contains(&g, p) || self.graph.push(&g, p) {
                return;
            }
            self.graph.neighbors_into(j, &mut s.copy);
        }
        s.copy.push(p);
        self.reprune(j, s);
    }

    /// Prunes `s.copy` (the candidate list of `j`) to `R` and stores it as `j`'s list.
    fn reprune(&self, j: u32, s: &mut Scratch) {
        let probe = self.store.point(j);
        self.store.dist_batch(&probe, &s.copy, &mut s.copy_dists);
        s.pool.clear();
        s.pool.extend(
            s.copy
                .iter()
                .zip(&s.copy_dists)
                .map(|(&id, &dist)| Neighbor { id, dist }),
        );
        s.dists += s.copy.len() as u64;
        let mut out = std::mem::take(&mut s.out);
        s.dists += self.prune(j, &mut s.pool, &mut s.prune, &mut out, &mut s.lab);
        let g = self.graph.lock(j);
        self.graph.set(&g, &out);
        s.out = out;
    }

    fn final_prune(&self, scratch: &ScratchPool, ctl: &Control) -> Result<(), BuildError> {
        let n = self.store.n();
        let bar = ctl.bar("final prune", n as u64);
        (0..n as u32)
            .into_par_iter()
            .with_min_len(1024)
            .try_for_each(|j| {
                if j % 4096 == 0 {
                    ctl.check()?;
                    bar.inc(4096);
                }
                if self.graph.degree(j) > self.cfg.r {
                    let mut s = scratch.get();
                    self.graph.neighbors_into(j, &mut s.copy);
                    self.reprune(j, &mut s);
                }
                Ok::<_, BuildError>(())
            })?;
        bar.finish_and_clear();
        Ok(())
    }
}

/// Links back every node no search from the medoid can reach, so that every node can be found:
/// for the first unreachable node `u` (in id order), a greedy search for `u`'s vector from the
/// medoid (list size `l`); the nearest node it expanded whose list has room gets an edge to
/// `u`. When every expanded list is full, the nearest node gives up, for `u`, its farthest
/// neighbour that another node also links to and that the search tree from the medoid does not
/// reach through this edge — so no node reached is cut off. Everything `u` reaches becomes
/// reachable with it; the next unreachable node is taken until none is left. Returns the edges
/// added (0 for a graph already connected). Deterministic.
pub fn link_unreachable<T: Element>(
    g: &mut Graph,
    store: &VectorStore<'_, T>,
    l: usize,
    hole: Option<&[bool]>,
    ctl: &Control,
) -> Result<usize, BuildError> {
    let is_hole = |v: usize| hole.is_some_and(|h| h.get(v).copied().unwrap_or(false));
    let n = g.n();
    let start = g.medoid();
    let mut added = 0;
    let mut scratch = SearchScratch::new(n);
    let mut indeg = vec![0u32; n];
    for v in 0..n as u32 {
        for &w in g.neighbors(v) {
            indeg[w as usize] += 1;
        }
    }
    for _round in 0..64 {
        let (mut seen, mut parent) = crate::vamana::connectivity::parents(&*g, start);
        if (0..n).all(|v| seen[v] || is_hole(v)) {
            return Ok(added);
        }
        for u in 0..n as u32 {
            if seen[u as usize] || is_hole(u as usize) {
                continue;
            }
            ctl.check()?;
            let probe = store.point(u);
            greedy(&*g, store, &probe, start, l.max(1), true, &mut scratch);
            let mut near: Vec<Neighbor> = scratch
                .expanded
                .iter()
                .copied()
                .filter(|c| c.id != u && seen[c.id as usize] && !is_hole(c.id as usize))
                .collect();
            near.sort_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
            if let Some(v) = crate::vamana::connectivity::link_one(g, &near, u, &mut indeg, &parent)
            {
                added += 1;
                crate::vamana::connectivity::reach_with_parents(&*g, &mut seen, &mut parent, u, v);
            }
        }
    }
    Ok(added)
}

/// A graph whose `r` out-links per node are drawn at random (distinct, never the node itself;
/// seeded), with the medoid as entry point: what FlashANNS's degree selector (§4.3) profiles
/// the search pipeline on — the reads and the per-step work of a degree-`r` graph, without
/// the cost of building real neighbourhoods.
pub fn random_links<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    r: usize,
    seed: u64,
    ctl: &Control,
) -> Result<(Graph, BuildStats), BuildError> {
    use rand::{Rng, SeedableRng};
    let t0 = std::time::Instant::now();
    let n = data.n();
    if n == 0 {
        return Err(BuildError::Empty);
    }
    if r == 0 {
        return Err(BuildError::InvalidParam {
            name: "r",
            reason: "a graph needs at least one link per node".into(),
        });
    }
    let store = VectorStore::new(data.as_slice(), data.dim(), metric).ok_or(BuildError::Empty)?;
    let medoid = medoid(&store, ctl)?;
    let r = r.min(n.saturating_sub(1));
    let lists: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
                seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            let mut l: Vec<u32> = Vec::with_capacity(r);
            while l.len() < r {
                let j = rng.gen_range(0..n as u32);
                if j as usize != i && !l.contains(&j) {
                    l.push(j);
                }
            }
            l
        })
        .collect();
    let g = Graph::from_lists(lists, r.max(1), medoid);
    let stats = BuildStats {
        wall_secs: t0.elapsed().as_secs_f64(),
        avg_degree: r as f64,
        max_degree: r,
        shards: 1,
        ..BuildStats::default()
    };
    Ok((g, stats))
}

/// The entry point of searches: the point nearest to the centroid of all points (DiskANN's
/// choice). For cosine the centroid is that of the unit vectors and nearness is cosine
/// distance, so the entry point lies in the middle of the directions the metric sees (a raw-L2
/// centroid is pulled towards short vectors, whose direction can be anywhere).
pub(crate) fn medoid<T: Element>(
    store: &VectorStore<'_, T>,
    ctl: &Control,
) -> Result<u32, BuildError> {
    let (n, dim) = (store.n(), store.dim());
    let cosine = store.metric() == Metric::Cosine;
    let weight = |i: usize| {
        if cosine {
            f64::from(store.pair_aux(i as u32))
        } else {
            1.0
        }
    };
    let bar = ctl.bar("medoid", 2 * n as u64);
    let sum = (0..n)
        .into_par_iter()
        .with_min_len(4096)
        .fold(
            || vec![0f64; dim],
            |mut acc, i| {
                let w = weight(i);
                for (a, x) in acc.iter_mut().zip(store.row(i)) {
                    *a += w * f64::from(x.to_f32());
                }
                acc
            },
        )
        .reduce(
            || vec![0f64; dim],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        );
    bar.inc(n as u64);
    ctl.check()?;
    let centroid: Vec<f32> = sum.iter().map(|s| (s / n as f64) as f32).collect();
    let best = (0..n)
        .into_par_iter()
        .with_min_len(4096)
        .map(|i| {
            let d: f32 = if cosine {
                // Minus the cosine similarity up to the centroid's (constant) norm.
                let dot: f32 = store
                    .row(i)
                    .iter()
                    .zip(&centroid)
                    .map(|(x, c)| x.to_f32() * c)
                    .sum();
                -dot * store.pair_aux(i as u32)
            } else {
                store
                    .row(i)
                    .iter()
                    .zip(&centroid)
                    .map(|(x, c)| (x.to_f32() - c) * (x.to_f32() - c))
                    .sum()
            };
            (d, i as u32)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .map_or(0, |(_, i)| i);
    bar.finish_and_clear();
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(n: usize, order: VisitOrder) -> Vec<u32> {
        let cfg = VamanaParams {
            order,
            ..VamanaParams::default()
        }
        .validate()
        .unwrap();
        visit_order(n, &cfg)
    }

    #[test]
    fn every_order_is_a_permutation_and_blocks_stay_whole() {
        for n in [0, 1, 63, 64, 65, 1000] {
            for o in [
                VisitOrder::Ids,
                VisitOrder::Random,
                VisitOrder::Blocks(64),
                VisitOrder::Blocks(7),
            ] {
                let v = order(n, o);
                let mut sorted = v.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n as u32).collect::<Vec<_>>(), "{o} n {n}");
                if let VisitOrder::Blocks(b) = o {
                    // Each block of b ids (the last one shorter) comes whole and in id order.
                    let mut i = 0;
                    while i < v.len() {
                        let start = v[i] as usize;
                        assert_eq!(start % b, 0, "{o}: a block starts at a multiple of {b}");
                        let len = b.min(n - start);
                        let want: Vec<u32> = (start as u32..(start + len) as u32).collect();
                        assert_eq!(&v[i..i + len], &want[..]);
                        i += len;
                    }
                }
            }
        }
        assert_eq!(
            order(1000, VisitOrder::Ids),
            (0..1000).collect::<Vec<u32>>()
        );
        assert_ne!(
            order(1000, VisitOrder::Blocks(64)),
            order(1000, VisitOrder::Ids)
        );
    }
}

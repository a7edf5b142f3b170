//! The query state machine contract: what the searcher's loop (poll → route → step) asks of a
//! query, whatever its strategy.
//!
//! - [`QueryMachine`]: start, hear that the thread blocked, take a completion of its own, take
//!   one step, say whether it is finished, hand over its results. Beam search
//!   ([`crate::kinds::graph::search::BeamQuery`]), PipeSearch ([`crate::kinds::graph::search::PipeQuery`]) and the re-rank from a vector
//!   file ([`crate::kinds::graph::search::rerank::Rerank`]) implement it.
//! - [`Traversal`]: a graph traversal is a machine that also says how busy it is (reads in
//!   flight, width, whether it is converging), so a re-rank can prefetch into the slots it
//!   leaves free.
//! - [`Reranked`]: a traversal followed by a re-rank, for layouts that keep the vectors apart
//!   from the graph — itself a [`QueryMachine`], so the loop runs it like any other.

use crate::io::{Completion, IoEngine};
use crate::kernels::Element;
use crate::kinds::graph::search::explore::{sorted_results, Frontier};
use crate::kinds::graph::search::rerank::Rerank;
use crate::kinds::graph::search::source::{is_vector_read, Expand, GraphSource, GraphSpace};
use crate::kinds::graph::search::SearchConfig;
use crate::quant::sq::{RefineCodes, RefineQuery};
use crate::search::rerank::{VectorSource, VectorView};
use crate::search::{QueryStats, SearchError};

/// A graph layout as a traversal sees it: the shared parts and the layout's reader.
#[derive(Debug)]
pub struct GraphView<'v, G> {
    /// Shape, PQ distances, entry index.
    pub space: GraphSpace<'v>,
    /// The layout's reader.
    pub graph: &'v G,
}

/// What one call of a machine works with: the thread's engine, the query and its counters.
pub struct Turn<'t, T> {
    /// The thread's engine (shared by the lanes; tags keep their reads apart).
    pub engine: &'t mut dyn IoEngine,
    /// Query, scratch, counters.
    pub x: Expand<'t, T>,
    /// Ids of nodes expanded from reads, when the searcher traces them.
    pub trace: &'t mut Option<Vec<u32>>,
}

impl<T> std::fmt::Debug for Turn<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("engine", &self.engine.info())
            .field("x", &self.x)
            .finish_non_exhaustive()
    }
}

/// One query's state machine.
pub trait QueryMachine<S> {
    /// Starts a query: `seeds` are the entry points (nearest first; the medoid when empty), and
    /// `tag_base` the high half of every tag this query submits.
    fn start<T: Element>(
        &mut self,
        src: &S,
        cfg: &SearchConfig,
        t: &mut Turn<'_, T>,
        seeds: &[u32],
        tag_base: u64,
    ) -> Result<(), SearchError>;

    /// The thread blocked waiting for reads while this query ran.
    fn on_blocked(&mut self, _stats: &mut QueryStats) {}

    /// Completions are about to be routed (to this query or others).
    fn before_route(&mut self, _stats: &mut QueryStats) {}

    /// A read of this query landed; its slot is the machine's to release.
    fn on_completion<T: Element>(
        &mut self,
        src: &S,
        t: &mut Turn<'_, T>,
        c: Completion,
    ) -> Result<(), SearchError>;

    /// One step; returns whether anything happened (a read, an expansion, a batch).
    fn step<T: Element>(&mut self, src: &S, t: &mut Turn<'_, T>) -> Result<bool, SearchError>;

    /// Whether the query is over: nothing left to do, no read in flight, no slot held.
    fn finished(&self) -> bool;

    /// The `k` nearest results, nearest first (after [`QueryMachine::finished`]); final
    /// counts go into `stats`.
    fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>, stats: &mut QueryStats);

    /// After an error: hands back every slot the query holds (reads in flight are drained by
    /// the searcher).
    fn abort(&mut self, _engine: &mut dyn IoEngine) {}
}

/// A graph traversal: a [`QueryMachine`] whose step is split in two — [`Traversal::advance`]
/// (issue and explore) and [`Traversal::settle`] (end the traversal once converged) — so a
/// re-rank can act between them.
pub trait Traversal<'v, G: GraphSource + 'v>: QueryMachine<GraphView<'v, G>> + HasFrontier {
    /// Issues and explores: the traversal's part of a step.
    fn advance<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError>;
    /// Ends the traversal once it has converged.
    fn settle(&mut self, _engine: &mut dyn IoEngine, _stats: &mut QueryStats) {}
    /// Whether the traversal is over (reads may still be in flight).
    fn traversed(&self) -> bool;
    /// Graph reads in flight.
    fn in_flight(&self) -> usize;
    /// The current width (reads per round trip, or in flight).
    fn width(&self) -> usize;
    /// Whether the traversal is ending (beam: a round found fewer candidates than its width;
    /// PipeSearch: no unexpanded candidate left).
    fn converging(&self) -> bool;
}

/// A traversal over a layout whose graph pages hold no vectors, followed by the re-rank that
/// reads them ([`Rerank`]): expanded nodes enter the re-rank pool as they are explored, vector
/// reads are routed by `VECTOR_TAG`, the prefetch uses the slots the
/// traversal leaves free, and phase 2 runs once the traversal is over.
#[derive(Debug, Default)]
pub struct Reranked<M> {
    inner: M,
    rerank: Rerank,
    /// Expanded nodes already handed to the re-rank.
    seen: usize,
    /// The query's side of the refinement codes, when the layout holds them (`refining`).
    refine_q: RefineQuery,
    refining: bool,
    /// The query as `f32`, for the refinement codes.
    qf: Vec<f32>,
}

impl<M> Reranked<M> {
    /// The vector view of a graph view whose layout also holds the vectors.
    fn vectors<'v, G>(src: &GraphView<'v, G>) -> VectorView<'v, G> {
        VectorView {
            metric: src.space.metric,
            dim: src.space.dim,
            vectors: src.graph,
        }
    }
}

impl<'v, G, M> QueryMachine<GraphView<'v, G>> for Reranked<M>
where
    G: GraphSource + VectorSource + 'v,
    M: Traversal<'v, G>,
{
    fn start<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        cfg: &SearchConfig,
        t: &mut Turn<'_, T>,
        seeds: &[u32],
        tag_base: u64,
    ) -> Result<(), SearchError> {
        self.rerank.begin(cfg, tag_base);
        self.seen = 0;
        self.refining = false;
        if let Some(r) = src.graph.refine() {
            self.qf.clear();
            self.qf.extend(t.x.query.iter().map(|v| v.to_f32()));
            r.prepare(&self.qf, &mut self.refine_q);
            self.refining = true;
        }
        self.inner.start(src, cfg, t, seeds, tag_base)
    }
    fn on_blocked(&mut self, stats: &mut QueryStats) {
        self.inner.on_blocked(stats);
    }
    fn before_route(&mut self, stats: &mut QueryStats) {
        self.inner.before_route(stats);
    }
    fn on_completion<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
        c: Completion,
    ) -> Result<(), SearchError> {
        if is_vector_read(&c) {
            self.rerank.on_completion(&Self::vectors(src), t, c)
        } else {
            self.inner.on_completion(src, t, c)
        }
    }
    fn step<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        let vectors = Self::vectors(src);
        let mut progressed = false;
        if !self.inner.traversed() {
            progressed |= self.inner.advance(src, t)?;
            self.observe_new(src, t.x.stats, t.x.keep);
            if !self.inner.traversed() {
                let busy = self.inner.in_flight() + self.rerank.in_flight();
                let free = prefetch_room(&*t.engine, self.inner.width(), busy);
                let converging = self.inner.converging();
                progressed |=
                    self.rerank
                        .prefetch(&vectors, &mut *t.engine, free, converging, t.x.stats)?
                        > 0;
            }
            self.inner.settle(&mut *t.engine, t.x.stats);
        }
        if self.inner.traversed() {
            // Nodes expanded as the last reads landed (beam search expands on completion).
            self.observe_new(src, t.x.stats, t.x.keep);
            progressed |= self.rerank.step(&vectors, t)?;
        }
        Ok(progressed)
    }

    fn finished(&self) -> bool {
        self.inner.traversed() && self.inner.in_flight() == 0 && self.rerank.done()
    }
    fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>, stats: &mut QueryStats) {
        QueryMachine::<VectorView<'v, G>>::results(&mut self.rerank, k, out, stats);
    }
    fn abort(&mut self, engine: &mut dyn IoEngine) {
        self.inner.abort(engine);
    }
}

impl<M: HasFrontier> Reranked<M> {
    /// Hands the nodes expanded since the last call to the re-rank, in expansion order, with
    /// their PQ distances — or their refinement-code distances when the layout holds them.
    /// Nodes `keep` rejects are left out: their vectors are never read.
    fn observe_new<'v, G: GraphSource + VectorSource + 'v>(
        &mut self,
        src: &GraphView<'v, G>,
        stats: &mut QueryStats,
        keep: Option<(usize, &dyn crate::kinds::graph::search::ResultFilter)>,
    ) {
        let refine: Option<&RefineCodes> = src.graph.refine();
        let f = self.inner.frontier_ref();
        let new = &f.coded[self.seen..];
        let kept = |id: u32| keep.is_none_or(|(q, k)| k.keep(q, id));
        // RaBitQ codes in memory: the candidates' lower bounds, for the re-rank to skip the
        // vectors that cannot enter the top-K.
        let eps = self.rerank.skip_eps();
        if let (Some(table), Some(codes), true) = (
            f.table.as_ref().filter(|t| t.has_bound()),
            src.space.pq.in_memory(),
            eps > 0.0,
        ) {
            for n in new {
                if kept(n.id) && (n.id as usize) < codes.n() {
                    let (_, lower) = table.bounded(codes.code(n.id as usize), eps);
                    self.rerank.observe_lower(n.id, lower);
                }
            }
        }
        match refine {
            Some(r) if self.refining => {
                let t0 = std::time::Instant::now();
                for n in new {
                    r.prefetch(n.id as usize);
                }
                for (n, &key) in new.iter().zip(&f.coded_keys[self.seen..]) {
                    if kept(n.id) {
                        let est = r.distance(&self.refine_q, n.id as usize);
                        self.rerank.observe(n.id, est, key);
                    }
                }
                stats.rerank.refined += new.len() as u64;
                stats.rerank.refine_ns += t0.elapsed().as_nanos() as u64;
            }
            _ => {
                for (n, &key) in new.iter().zip(&f.coded_keys[self.seen..]) {
                    if kept(n.id) {
                        self.rerank.observe(n.id, n.dist, key);
                    }
                }
            }
        }
        self.seen = f.coded.len();
    }
}

/// A query machine with a [`Frontier`] (every traversal).
pub trait HasFrontier {
    /// The candidate list and explored nodes.
    fn frontier_ref(&self) -> &Frontier;
}

/// Vector reads a query may prefetch: its width less its `busy` reads (graph and vector), and
/// never so many that the engine could not take a full round of graph reads after them.
fn prefetch_room(engine: &dyn IoEngine, width: usize, busy: usize) -> usize {
    width
        .saturating_sub(busy)
        .min(engine.depth().saturating_sub(engine.in_flight() + width))
}

/// The results of a traversal over records: the `k` explored nodes nearest by exact distance.
pub(crate) fn record_results(f: &mut Frontier, k: usize, out: &mut Vec<(u32, f32)>) {
    sorted_results(&mut f.full, k, out);
}

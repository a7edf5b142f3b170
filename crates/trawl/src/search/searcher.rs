//! [`Searcher`]: one search thread — an I/O engine (its own ring) and the query state machines
//! — and the loop that runs them, one query at a time or several interleaved.
//!
//! The loop: poll completions (without blocking, unless the last turn could do nothing: then
//! poll for up to the spin time and block), hand each to its query (the high half of a read's
//! tag is the query's lane), let every running query take one step (beam search: start its
//! next round when the last one has landed; PipeSearch: issue one read and explore one
//! record), and retire the queries that are over — a PipeSearch query first waits out its
//! reads still in flight, so no buffer of a returned query is written later. With one lane this
//! is the ordinary single-query search; with `N` lanes one thread keeps `N` queries in flight so
//! the device stays busy without more threads (PipeANN's "ideal throughput" baseline, §5.7).

use std::time::{Duration, Instant};

use super::beam::{wait_some, BeamQuery};
use super::entry::EntryScratch;
use super::pipe::{drain_engine, PipeQuery};
use super::rerank::VECTOR_TAG;
use super::{QueryStats, SearchError, SearchParams, Strategy};
use crate::index::DiskIndex;
use crate::io::{Completion, IoEngine};
use crate::kernels::Element;

/// Receives each finished query: `(id, hits nearest first, statistics)`.
pub type ResultSink<'a> = dyn FnMut(usize, &[(u32, f32)], QueryStats) + 'a;

/// Most queries one thread may interleave.
pub const MAX_INTERLEAVE: usize = 256;

/// Reusable state of one lane.
#[derive(Debug, Default)]
struct Lane {
    beam: BeamQuery,
    pipe: PipeQuery,
}

/// A query running in a lane.
#[derive(Debug)]
struct Running<'q, T> {
    id: usize,
    query: &'q [T],
    stats: QueryStats,
    t0: Instant,
    /// PipeSearch has converged and waits for its last reads.
    finishing: bool,
}

/// One search thread: an I/O engine and the query state, borrowing the index.
pub struct Searcher<'i> {
    index: &'i DiskIndex,
    engine: Box<dyn IoEngine>,
    lanes: Vec<Lane>,
    completions: Vec<Completion>,
    hits: Vec<(u32, f32)>,
    entry: EntryScratch,
    seeds: Vec<u32>,
    trace: Option<Vec<u32>>,
    spin: Duration,
}

impl std::fmt::Debug for Searcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searcher")
            .field("engine", &self.engine.info())
            .finish_non_exhaustive()
    }
}

impl<'i> Searcher<'i> {
    /// A searcher over `index` reading through `engine` (made from the index's file).
    pub fn with_engine(index: &'i DiskIndex, engine: Box<dyn IoEngine>) -> Self {
        Self {
            index,
            engine,
            lanes: Vec::new(),
            completions: Vec::new(),
            hits: Vec::new(),
            entry: EntryScratch::default(),
            seeds: Vec::new(),
            trace: None,
            spin: Duration::ZERO,
        }
    }

    /// The engine (its counters include every read this searcher made).
    pub fn engine(&self) -> &dyn IoEngine {
        self.engine.as_ref()
    }

    /// Gives the engine back (to keep it for a later searcher: creating an io_uring engine
    /// and its aligned buffers costs far more than one query).
    pub fn into_engine(self) -> Box<dyn IoEngine> {
        self.engine
    }

    /// How long to poll the completion queue (without a system call) before blocking in the
    /// kernel when waiting for reads; zero (the default) blocks at once. Polling saves the
    /// sleep and wake-up of a blocking wait but keeps the core busy: use it only when every
    /// search thread has a core of its own ([`crate::index::DiskIndex::search_batch`] does so
    /// when its threads do not outnumber the cores).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Records the id of every node a beam search expanded from the file (not from the cache)
    /// until [`Searcher::take_trace`]; used to choose a cache by visit frequency.
    pub fn start_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// Stops tracing and returns the ids recorded.
    pub fn take_trace(&mut self) -> Vec<u32> {
        self.trace.take().unwrap_or_default()
    }

    /// Searches for the `params.k` nearest neighbours of `query`; `out` receives
    /// `(id, exact distance)` nearest first (fewer than `k` only if fewer nodes are reachable).
    pub fn search<T: Element>(
        &mut self,
        query: &[T],
        params: &SearchParams,
        out: &mut Vec<(u32, f32)>,
    ) -> Result<QueryStats, SearchError> {
        let mut one = Some((0usize, query));
        let mut stats = QueryStats::default();
        self.search_stream(params, 1, &mut || one.take(), &mut |_, hits, st| {
            out.clear();
            out.extend_from_slice(hits);
            stats = st;
        })?;
        Ok(stats)
    }

    /// Searches every query `next` yields (`(id, vector)`), keeping up to `interleave` of them
    /// in flight on this thread, and hands each result to `sink(id, hits, stats)` as it
    /// finishes (not necessarily in order). Each query's `total_ns` runs from its start to its
    /// result, interleaving included; time the thread spent blocked counts as I/O wait of
    /// every query running then.
    pub fn search_stream<'q, T: Element>(
        &mut self,
        params: &SearchParams,
        interleave: usize,
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        sink: &mut ResultSink<'_>,
    ) -> Result<(), SearchError> {
        if interleave == 0 || interleave > MAX_INTERLEAVE {
            return Err(SearchError::BadBatch(format!(
                "interleave {interleave} must be between 1 and {MAX_INTERLEAVE}"
            )));
        }
        while self.lanes.len() < interleave {
            self.lanes.push(Lane::default());
        }
        let mut running: Vec<Option<Running<'q, T>>> = (0..interleave).map(|_| None).collect();
        let result = self.drive(params, &mut running, next, sink);
        if result.is_err() {
            for lane in &mut self.lanes {
                lane.pipe.release_held(self.engine.as_mut());
            }
            drain_engine(self.engine.as_mut(), &mut self.completions);
        }
        result
    }

    fn drive<'q, T: Element>(
        &mut self,
        params: &SearchParams,
        running: &mut [Option<Running<'q, T>>],
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        sink: &mut ResultSink<'_>,
    ) -> Result<(), SearchError> {
        let ix = self.index;
        let engine = self.engine.as_mut();
        let depth = engine.depth();
        let pipe = match &params.strategy {
            Strategy::Pipe(pp) => Some(*pp),
            Strategy::Beam => None,
        };
        let mut vec_scratch: Vec<T> = Vec::new();
        let decoupled = ix.decoupled().is_some();
        let mut done = std::mem::take(&mut self.completions);
        let mut exhausted = false;
        let mut block = false;
        let outcome = (|| -> Result<(), SearchError> {
            loop {
                // Start queries in free lanes.
                for (i, slot) in running.iter_mut().enumerate() {
                    if slot.is_some() || exhausted {
                        continue;
                    }
                    let Some((id, query)) = next() else {
                        exhausted = true;
                        break;
                    };
                    ix.check_query(query, params, depth)?;
                    let mut stats = QueryStats::default();
                    let t0 = Instant::now();
                    self.seeds.clear();
                    if let (Some(e), true) = (ix.entry(), params.entry_list > 0) {
                        stats.entry_distances +=
                            e.search(query, params.entry_list, &mut self.entry, &mut self.seeds);
                    }
                    let lane = &mut self.lanes[i];
                    let tag_base = (i as u64) << 32;
                    let seeds = &self.seeds;
                    match &pipe {
                        Some(pp) => lane
                            .pipe
                            .start(ix, engine, query, params, pp, tag_base, seeds, &mut stats)?,
                        None => lane
                            .beam
                            .start(ix, query, params, tag_base, seeds, &mut stats)?,
                    }
                    *slot = Some(Running {
                        id,
                        query,
                        stats,
                        t0,
                        finishing: false,
                    });
                }
                if running.iter().all(Option::is_none) {
                    return Ok(());
                }
                // Poll (or wait, when the last turn could do nothing).
                done.clear();
                if engine.in_flight() > 0 {
                    if block {
                        let tw = Instant::now();
                        wait_some(engine, self.spin, &mut done)?;
                        let waited = tw.elapsed().as_nanos() as u64;
                        for r in running.iter_mut().flatten() {
                            r.stats.io_wait_ns += waited;
                            if pipe.is_some() && !r.finishing {
                                r.stats.hops += 1;
                            }
                        }
                    } else {
                        engine.wait(0, &mut done)?;
                    }
                }
                if pipe.is_some() && !done.is_empty() {
                    // Close the occupancy interval before the landed reads leave the pipeline.
                    for (i, r) in running.iter_mut().enumerate() {
                        if let Some(r) = r.as_mut().filter(|r| !r.finishing) {
                            self.lanes[i].pipe.tick(&mut r.stats);
                        }
                    }
                }
                for &c in &done {
                    let i = (c.tag >> 32) as usize;
                    let lane = &mut self.lanes[i];
                    let vector = decoupled && c.tag & VECTOR_TAG != 0;
                    match running.get_mut(i).and_then(Option::as_mut) {
                        Some(r) if vector => {
                            let f = if pipe.is_some() {
                                lane.pipe.frontier()
                            } else {
                                lane.beam.frontier()
                            };
                            f.rerank.on_completion(
                                ix,
                                engine,
                                r.query,
                                c,
                                &mut vec_scratch,
                                &mut r.stats,
                            )?;
                        }
                        Some(r) if pipe.is_some() => {
                            if r.finishing {
                                lane.pipe.discard(engine, c);
                            } else {
                                lane.pipe.on_completion(ix, engine, c)?;
                            }
                        }
                        Some(r) => lane.beam.on_completion(
                            ix,
                            engine,
                            &mut self.trace,
                            r.query,
                            c,
                            &mut vec_scratch,
                            &mut r.stats,
                        )?,
                        None => engine.release(c.slot),
                    }
                }
                // One step of every running query.
                let mut progressed = false;
                for (i, slot) in running.iter_mut().enumerate() {
                    let Some(r) = slot.as_mut() else { continue };
                    let lane = &mut self.lanes[i];
                    if pipe.is_some() {
                        if !r.finishing {
                            let q = &mut lane.pipe;
                            q.end_poll();
                            q.tick(&mut r.stats);
                            progressed |= q.issue_one(ix, engine, &mut r.stats)?;
                            progressed |=
                                q.explore_one(ix, engine, r.query, &mut vec_scratch, &mut r.stats)?;
                            if decoupled {
                                let busy = q.in_flight() + q.frontier().rerank.in_flight();
                                let free = prefetch_room(engine, q.width(), busy);
                                // Converging: no unexpanded candidate left, only reads in
                                // flight whose records may still add some.
                                let converging = !q.frontier().list.has_unexpanded();
                                progressed |= q.frontier().rerank.prefetch(
                                    ix,
                                    engine,
                                    free,
                                    converging,
                                    &mut r.stats,
                                )? > 0;
                            }
                            if q.converged() {
                                q.tick(&mut r.stats);
                                q.finish(engine, &mut r.stats);
                                r.finishing = true;
                            }
                        }
                        if decoupled && r.finishing {
                            let cap = pipe.map_or(params.beam_width, |pp| pp.max_width);
                            let graph_in_flight = lane.pipe.in_flight();
                            let f = lane.pipe.frontier();
                            progressed |= f.rerank.step(ix, engine, cap, &mut r.stats)?;
                            if !f.rerank.done() || graph_in_flight > 0 {
                                continue;
                            }
                            f.rerank.count_waste(&mut r.stats);
                            f.take_reranked();
                        } else if !r.finishing || lane.pipe.in_flight() > 0 {
                            continue;
                        }
                        lane.pipe.frontier().results(params.k, &mut self.hits);
                    } else {
                        progressed |= lane.beam.advance(
                            ix,
                            engine,
                            r.query,
                            &mut vec_scratch,
                            &mut r.stats,
                        )?;
                        let q = &mut lane.beam;
                        if !q.done() {
                            if decoupled {
                                let busy = q.in_flight() + q.frontier().rerank.in_flight();
                                let converging = q.short_round();
                                let free = prefetch_room(engine, q.width(), busy);
                                progressed |= q.frontier().rerank.prefetch(
                                    ix,
                                    engine,
                                    free,
                                    converging,
                                    &mut r.stats,
                                )? > 0;
                            }
                            continue;
                        }
                        if decoupled {
                            let f = q.frontier();
                            progressed |=
                                f.rerank.step(ix, engine, params.beam_width, &mut r.stats)?;
                            if !f.rerank.done() {
                                continue;
                            }
                            f.rerank.count_waste(&mut r.stats);
                            f.take_reranked();
                        }
                        lane.beam.frontier().results(params.k, &mut self.hits);
                    }
                    let mut r = slot.take().expect("running");
                    r.stats.total_ns = r.t0.elapsed().as_nanos() as u64;
                    sink(r.id, &self.hits, r.stats);
                    progressed = true;
                }
                block = !progressed && done.is_empty();
            }
        })();
        self.completions = done;
        outcome
    }
}

/// Vector reads a query may prefetch: its width less its `busy` reads (graph and vector), and
/// never so many that the engine could not take a full round of graph reads after them.
fn prefetch_room(engine: &dyn IoEngine, width: usize, busy: usize) -> usize {
    width
        .saturating_sub(busy)
        .min(engine.depth().saturating_sub(engine.in_flight() + width))
}

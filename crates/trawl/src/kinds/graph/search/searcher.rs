//! [`Searcher`]: one search thread — an I/O engine (its own ring) and the query state machines
//! — and the loop that runs them, one query at a time or several interleaved.
//!
//! The loop is *poll → route → step* over [`QueryMachine`]s: poll completions (without
//! blocking, unless the last turn could do nothing: then poll for up to the spin time and
//! block), route each to its query (the high half of a read's tag is the query's lane), let
//! every running query take one step, retire the queries that are finished — a query is
//! finished only when none of its reads is in flight and every buffer it held is back with the
//! engine. With one lane this is the ordinary single-query search; with `N` lanes one thread
//! keeps `N` queries in flight so the device stays busy without more threads (PipeANN's "ideal
//! throughput" baseline, §5.7).
//!
//! The layout and the strategy are matched once per batch; the loop is monomorphised for each
//! pair, so no call inside it is dynamic but the engine's.

use std::time::{Duration, Instant};

use crate::accel::flash::{CpuFlash, FlashAccel};
use crate::io::{Completion, IoEngine};
use crate::kernels::Element;
use crate::kinds::graph::search::beam::BeamQuery;
use crate::kinds::graph::search::entry::EntryScratch;
use crate::kinds::graph::search::flash::{self, FailSink};
use crate::kinds::graph::search::layouts::LayoutReader;
use crate::kinds::graph::search::machine::{GraphView, QueryMachine, Reranked, Turn};
use crate::kinds::graph::search::pipe::PipeQuery;
use crate::kinds::graph::search::source::{Expand, GraphSource, GraphSpace, ResultFilter};
use crate::kinds::graph::search::{Capabilities, SearchConfig, SearchParams, Strategy};
use crate::search::runner::{drain_engine, wait_some_polled};
use crate::search::{QueryStats, SearchError};

/// Receives each finished query: `(id, hits nearest first, statistics)`.
pub type ResultSink<'a> = dyn FnMut(usize, &[(u32, f32)], QueryStats) + 'a;

pub use crate::search::runner::MAX_INTERLEAVE;

/// A graph index as a searcher reads it: the shared parts and the layout's reader.
#[derive(Debug, Clone, Copy)]
pub struct IndexView<'i> {
    /// Shape, PQ distances, entry index.
    pub space: GraphSpace<'i>,
    /// The layout.
    pub layout: &'i LayoutReader,
}

impl IndexView<'_> {
    /// What the index supports, for checking search parameters.
    pub fn capabilities(&self) -> Capabilities {
        Capabilities {
            n: self.space.n as u64,
            records: self.layout.records().is_some(),
            rerank_from_disk: self.layout.decoupled().is_some(),
            entry_index: self.space.entry.is_some(),
            pq_in_memory: self.space.pq.in_memory().is_some(),
            page_nodes: self.layout.pages().is_some(),
        }
    }

    /// Checks `params` against the index and a queue depth.
    pub fn configure(
        &self,
        params: &SearchParams,
        depth: usize,
    ) -> Result<SearchConfig, SearchError> {
        SearchConfig::new(params, &self.capabilities(), depth)
    }
}

/// A query running in a lane.
#[derive(Debug)]
struct Running<'q, T> {
    id: usize,
    /// The node this query hides ([`Searcher::set_hidden`]).
    hidden: Option<u32>,
    query: &'q [T],
    stats: QueryStats,
    t0: Instant,
}

/// Reusable query machines, one per lane, for each layout family and strategy.
#[derive(Debug, Default)]
struct Lanes {
    beam: Vec<BeamQuery>,
    pipe: Vec<PipeQuery>,
    beam_reranked: Vec<Reranked<BeamQuery>>,
    pipe_reranked: Vec<Reranked<PipeQuery>>,
}

/// The thread's side of the loop: engine, completion buffer, entry-index scratch.
struct Io {
    engine: Box<dyn IoEngine>,
    completions: Vec<Completion>,
    hits: Vec<(u32, f32)>,
    entry: EntryScratch,
    seeds: Vec<u32>,
    trace: Option<Vec<u32>>,
    spin: Duration,
    /// Time the parts of each query ([`QueryStats::parts`]).
    time_parts: bool,
    /// The node each query hides, by query id (`u32::MAX`: none).
    hidden: Option<std::sync::Arc<[u32]>>,
}

/// One search thread: an I/O engine and the query state, borrowing the index.
pub struct Searcher<'i> {
    view: IndexView<'i>,
    io: Io,
    lanes: Lanes,
    filter: Option<&'i dyn ResultFilter>,
    flash: Option<&'i dyn FlashAccel>,
}

impl std::fmt::Debug for Searcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searcher")
            .field("engine", &self.io.engine.info())
            .finish_non_exhaustive()
    }
}

impl<'i> Searcher<'i> {
    /// A searcher over `view` reading through `engine` (made from the index's file).
    pub fn with_engine(view: IndexView<'i>, engine: Box<dyn IoEngine>) -> Self {
        Self {
            view,
            io: Io {
                engine,
                completions: Vec::new(),
                hits: Vec::new(),
                entry: EntryScratch::default(),
                seeds: Vec::new(),
                trace: None,
                spin: Duration::ZERO,
                time_parts: false,
                hidden: None,
            },
            lanes: Lanes::default(),
            filter: None,
            flash: None,
        }
    }

    /// The accelerator of the flash strategy's steps (`None`: the CPU backend over the PQ
    /// codes in memory).
    pub fn set_flash_accel(&mut self, accel: Option<&'i dyn FlashAccel>) {
        self.flash = accel;
    }

    /// Hides the nodes `filter` does not keep from every later result (they are still
    /// traversed): a live index's deleted nodes, those a query's filter rejects; `None` shows
    /// every node.
    pub fn set_filter(&mut self, filter: Option<&'i dyn ResultFilter>) {
        self.filter = filter;
    }

    /// Hides one node from each later query: query id `q` (as the query stream numbers it)
    /// neither expands nor returns node `hidden[q]` (`u32::MAX`, or `q` past the table: none).
    /// For searching an index's own vectors as if they were held out (the recall monitor):
    /// the own node, reached at distance 0, would hand the query its exact neighbourhood.
    /// Beam search and PipeSearch honour it; the flash strategy refuses it. A query whose only
    /// entry point is hidden finds nothing. Refuses a node past the index.
    pub fn set_hidden(&mut self, hidden: Option<std::sync::Arc<[u32]>>) -> Result<(), SearchError> {
        let n = self.view.space.n;
        if let Some(bad) = hidden
            .as_deref()
            .and_then(|h| h.iter().find(|&&id| id != u32::MAX && id as usize >= n))
        {
            return Err(SearchError::BadBatch(format!(
                "hidden node {bad} is past the index's {n} nodes"
            )));
        }
        self.io.hidden = hidden;
        Ok(())
    }

    /// The view it searches.
    pub fn view(&self) -> &IndexView<'i> {
        &self.view
    }

    /// The engine, to read with (the filtered scan's reads).
    pub(crate) fn engine_mut(&mut self) -> &mut dyn IoEngine {
        self.io.engine.as_mut()
    }

    /// The engine (its counters include every read this searcher made).
    pub fn engine(&self) -> &dyn IoEngine {
        self.io.engine.as_ref()
    }

    /// Gives the engine back (to keep it for a later searcher: creating an io_uring engine
    /// and its aligned buffers costs far more than one query).
    pub fn into_engine(self) -> Box<dyn IoEngine> {
        self.io.engine
    }

    /// How long to poll the completion queue (without a system call) before blocking in the
    /// kernel when waiting for reads; zero (the default) blocks at once. Polling saves the
    /// sleep and wake-up of a blocking wait but keeps the core busy: use it only when every
    /// search thread has a core of its own.
    pub fn set_spin(&mut self, spin: Duration) {
        self.io.spin = spin;
    }

    /// Times the parts of every later query of the graph strategies (beam search,
    /// PipeSearch) into [`QueryStats::parts`]: I/O calls, polling, page checks, PQ table,
    /// visited checks, PQ scoring, exact distances, entry-index search. Costs two clock reads
    /// per part per node (a few percent of the CPU); off by default.
    pub fn set_time_parts(&mut self, on: bool) {
        self.io.time_parts = on;
    }

    /// Records the id of every node a beam search expanded from the file (not from memory)
    /// until [`Searcher::take_trace`]; used to choose a cache by visit frequency.
    pub fn start_trace(&mut self) {
        self.io.trace = Some(Vec::new());
    }

    /// Stops tracing and returns the ids recorded.
    pub fn take_trace(&mut self) -> Vec<u32> {
        self.io.trace.take().unwrap_or_default()
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
    /// finishes (not necessarily in order). The parameters are checked once, against the index
    /// and this searcher's queue depth. Each query's `total_ns` runs from its start to its
    /// result, interleaving included; time the thread spent blocked counts as I/O wait of
    /// every query running then.
    pub fn search_stream<'q, T: Element>(
        &mut self,
        params: &SearchParams,
        interleave: usize,
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        sink: &mut ResultSink<'_>,
    ) -> Result<(), SearchError> {
        let mut first = None;
        self.search_stream_partial(params, interleave, next, sink, &mut |_, e| {
            first.get_or_insert(e);
        })?;
        first.map_or(Ok(()), Err)
    }

    /// [`Searcher::search_stream`] where a query that fails alone (the flash strategy's
    /// damaged page) goes to `fail` while the others go on; the other strategies fail the
    /// whole stream on any error.
    pub fn search_stream_partial<'q, T: Element>(
        &mut self,
        params: &SearchParams,
        interleave: usize,
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        sink: &mut ResultSink<'_>,
        fail: &mut FailSink<'_>,
    ) -> Result<(), SearchError> {
        if interleave == 0 || interleave > MAX_INTERLEAVE {
            return Err(SearchError::BadBatch(format!(
                "interleave {interleave} must be between 1 and {MAX_INTERLEAVE}"
            )));
        }
        let mut cfg = self.view.configure(params, self.io.engine.depth())?;
        let mut filtered;
        // A range search ([`SearchParams::range`]): every explored node within the radius.
        let radius = cfg.range().map(|r| r.radius);
        let sink: &mut ResultSink<'_> = match (self.filter, radius) {
            (None, None) => sink,
            (f, radius) => {
                // Every explored node comes back, nearest first; those the filter does not
                // keep are dropped and the first k of the rest kept — or, in a range search,
                // every one within the radius.
                cfg.keep_all_results();
                let k = if radius.is_some() {
                    usize::MAX
                } else {
                    cfg.k()
                };
                let r = radius.unwrap_or(f32::INFINITY);
                let mut kept = Vec::new();
                filtered = move |id: usize, hits: &[(u32, f32)], mut st: QueryStats| {
                    kept.clear();
                    let mut rejected = 0u64;
                    for h in hits {
                        if kept.len() == k || h.1.is_nan() || h.1 > r {
                            break;
                        }
                        if f.is_none_or(|f| f.keep(id, h.0)) {
                            kept.push(*h);
                        } else {
                            rejected += 1;
                        }
                    }
                    st.filter.rejected += rejected;
                    sink(id, &kept, st);
                };
                &mut filtered
            }
        };
        if let Strategy::Flash(_) = cfg.strategy() {
            if self.io.hidden.is_some() {
                return Err(SearchError::Unsupported(
                    "the flash strategy cannot hide nodes from a query".into(),
                ));
            }
            return self.run_flash(&cfg, next, sink, fail);
        }
        let space = self.view.space;
        let keep = self.filter.filter(|f| f.prunes_rerank());
        // The filter's entry points and gate, whatever the layout.
        let seeder = self.filter;
        let io = &mut self.io;
        let l = &mut self.lanes;
        let beam = matches!(cfg.strategy(), Strategy::Beam(_));
        // One loop per layout and strategy, each monomorphised for its pair.
        macro_rules! go {
            ($g:expr, $beam:ident, $pipe:ident, $keep:expr) => {{
                let view = GraphView { space, graph: $g };
                let rest = (interleave, next, sink, ($keep, seeder));
                if beam {
                    run(io, &view, &cfg, &mut l.$beam, rest)
                } else {
                    run(io, &view, &cfg, &mut l.$pipe, rest)
                }
            }};
        }
        match self.view.layout {
            LayoutReader::Packed(g) | LayoutReader::Shuffled(g) | LayoutReader::AllInStorage(g) => {
                go!(g, beam, pipe, None)
            }
            LayoutReader::Pages(p) => go!(&**p, beam, pipe, None),
            LayoutReader::Decoupled(d) => go!(&**d, beam_reranked, pipe_reranked, keep),
        }
    }
}

impl Searcher<'_> {
    fn run_flash<'q, T: Element>(
        &mut self,
        cfg: &SearchConfig,
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        sink: &mut ResultSink<'_>,
        fail: &mut FailSink<'_>,
    ) -> Result<(), SearchError> {
        let space = self.view.space;
        let Some(codes) = space.pq.in_memory() else {
            return Err(SearchError::Unsupported(
                "the flash strategy needs the PQ codes in memory".into(),
            ));
        };
        let io = &mut self.io;
        let gpu = self.flash;
        // The accelerator (the CPU backend unless a GPU was opened) and the run, for a
        // layout `g` whose nodes are the codes' groups `groups` (one code each when `None`).
        macro_rules! go {
            ($g:expr, $groups:expr) => {{
                let cpu = match $groups {
                    None => CpuFlash::new(codes),
                    Some(groups) => CpuFlash::grouped(codes, groups)?,
                };
                let accel: &dyn FlashAccel = gpu.unwrap_or(&cpu);
                flash::run(
                    io.engine.as_mut(),
                    &mut io.completions,
                    io.spin,
                    &space,
                    $g,
                    accel,
                    cfg,
                    next,
                    sink,
                    fail,
                )
            }};
        }
        match self.view.layout {
            LayoutReader::Packed(g) | LayoutReader::Shuffled(g) => go!(g, None),
            LayoutReader::Pages(p) => {
                let Some(groups) = p.groups() else {
                    return Err(SearchError::Unsupported(
                        "the page-node file has too many slots for the flash strategy's u32 ids"
                            .into(),
                    ));
                };
                go!(&**p, Some(groups))
            }
            _ => Err(SearchError::Unsupported(
                "the flash strategy searches the packed, PageShuffle or page-node layout".into(),
            )),
        }
    }
}

/// Runs a stream of queries with machines `M` in `interleave` lanes; after an error, every
/// slot is handed back and every read in flight drained before returning.
/// `rest`: the lanes, the query stream, the sink, and the filters that prune the re-rank and
/// seed the queries.
#[allow(clippy::type_complexity)]
fn run<'v, 'q, G, M, T>(
    io: &mut Io,
    view: &GraphView<'v, G>,
    cfg: &SearchConfig,
    lanes: &mut Vec<M>,
    rest: (
        usize,
        &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        &mut ResultSink<'_>,
        (Keep<'_>, Keep<'_>),
    ),
) -> Result<(), SearchError>
where
    G: GraphSource,
    M: QueryMachine<GraphView<'v, G>> + Default,
    T: Element,
{
    let (interleave, next, sink, (keep, seeder)) = rest;
    while lanes.len() < interleave {
        lanes.push(M::default());
    }
    let lanes = &mut lanes[..interleave];
    let mut running: Vec<Option<Running<'q, T>>> = (0..interleave).map(|_| None).collect();
    let mut scratch: Vec<T> = Vec::new();
    let result = drive(
        io,
        view,
        cfg,
        lanes,
        &mut running,
        &mut scratch,
        next,
        sink,
        keep,
        seeder,
    );
    if result.is_err() {
        for m in lanes.iter_mut() {
            m.abort(io.engine.as_mut());
        }
        drain_engine(io.engine.as_mut(), &mut io.completions);
    }
    result
}

/// The loop: start queries in free lanes, poll, route, step, retire.
#[allow(clippy::too_many_arguments)]
fn drive<'v, 'q, G, M, T>(
    io: &mut Io,
    view: &GraphView<'v, G>,
    cfg: &SearchConfig,
    lanes: &mut [M],
    running: &mut [Option<Running<'q, T>>],
    scratch: &mut Vec<T>,
    next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
    sink: &mut ResultSink<'_>,
    keep: Keep<'_>,
    seeder: Keep<'_>,
) -> Result<(), SearchError>
where
    G: GraphSource,
    M: QueryMachine<GraphView<'v, G>>,
    T: Element,
{
    let mut done = std::mem::take(&mut io.completions);
    let mut exhausted = false;
    let mut block = false;
    let outcome = (|| -> Result<(), SearchError> {
        loop {
            if !exhausted {
                exhausted =
                    start_queries(io, view, cfg, lanes, running, scratch, next, (keep, seeder))?;
            }
            if running.iter().all(Option::is_none) {
                return Ok(());
            }
            poll(io, lanes, running, block, &mut done)?;
            for &c in &done {
                let i = (c.tag >> 32) as usize;
                match running.get_mut(i).and_then(Option::as_mut) {
                    Some(r) => {
                        let mut t = turn(io, r, scratch, keep);
                        lanes[i].on_completion(view, &mut t, c)?;
                    }
                    None => io.engine.release(c.slot),
                }
            }
            // One step of every running query; retire the finished ones.
            let mut progressed = false;
            for (i, slot) in running.iter_mut().enumerate() {
                let Some(r) = slot.as_mut() else { continue };
                let m = &mut lanes[i];
                progressed |= m.step(view, &mut turn(io, r, scratch, keep))?;
                if !m.finished() {
                    continue;
                }
                m.results(cfg.result_len(), &mut io.hits, &mut r.stats);
                let mut r = slot.take().expect("running");
                r.stats.total_ns = r.t0.elapsed().as_nanos() as u64;
                sink(r.id, &io.hits, r.stats);
                progressed = true;
            }
            block = !progressed && done.is_empty();
        }
    })();
    io.completions = done;
    outcome
}

/// The filter a re-rank reads only the kept nodes of ([`ResultFilter::prunes_rerank`]).
type Keep<'f> = Option<&'f dyn ResultFilter>;

/// The machines' view of one running query.
fn turn<'t, T>(
    io: &'t mut Io,
    r: &'t mut Running<'_, T>,
    scratch: &'t mut Vec<T>,
    keep: Keep<'t>,
) -> Turn<'t, T> {
    Turn {
        engine: io.engine.as_mut(),
        x: Expand {
            query: r.query,
            scratch,
            stats: &mut r.stats,
            hidden: r.hidden,
            keep: keep.map(|f| (r.id, f)),
        },
        trace: &mut io.trace,
    }
}

/// Starts queries in the free lanes (each seeded by the entry index when asked); returns
/// whether the query stream is exhausted.
fn start_queries<'v, 'q, G, M, T>(
    io: &mut Io,
    view: &GraphView<'v, G>,
    cfg: &SearchConfig,
    lanes: &mut [M],
    running: &mut [Option<Running<'q, T>>],
    scratch: &mut Vec<T>,
    next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
    (keep, seeder): (Keep<'_>, Keep<'_>),
) -> Result<bool, SearchError>
where
    G: GraphSource,
    M: QueryMachine<GraphView<'v, G>>,
    T: Element,
{
    for (i, slot) in running.iter_mut().enumerate() {
        if slot.is_some() {
            continue;
        }
        let Some((id, query)) = next() else {
            return Ok(true);
        };
        view.space.check_query(query)?;
        let hidden = io
            .hidden
            .as_ref()
            .and_then(|h| h.get(id).copied())
            .filter(|&h| h != u32::MAX);
        let mut r = Running {
            id,
            hidden,
            query,
            stats: QueryStats::default(),
            t0: Instant::now(),
        };
        r.stats.parts.timed = io.time_parts;
        io.seeds.clear();
        if let (Some(e), true) = (view.space.entry, cfg.entry_list() > 0) {
            let t0 = r.stats.parts.start();
            r.stats.traversal.entry_distances +=
                e.search(query, cfg.entry_list(), &mut io.entry, &mut io.seeds);
            crate::search::stop_part(t0, &mut r.stats.parts.entry_ns);
        }
        if let (Some(f), Some(_)) = (seeder, view.space.pq.in_memory()) {
            // The filter's own entry points (scored by their PQ codes, so only with the codes
            // in memory), beside the medoid when the entry index gave none.
            // A restricted traversal starts inside its gate only.
            let gate = f.gate(id);
            if let Some(g) = gate {
                io.seeds.retain(|&s| g.contains(s));
            }
            let had = io.seeds.len();
            f.seeds(id, &mut io.seeds);
            let added = io.seeds.len() > had;
            if gate.is_none() && had == 0 && added && !io.seeds.contains(&view.space.medoid) {
                io.seeds.insert(0, view.space.medoid);
            }
        }
        let seeds = std::mem::take(&mut io.seeds);
        let started = lanes[i].start(
            view,
            cfg,
            // The machine takes its gate from the filter at its start.
            &mut turn(io, &mut r, scratch, keep.or(seeder)),
            &seeds,
            (i as u64) << 32,
        );
        io.seeds = seeds;
        started?;
        *slot = Some(r);
    }
    Ok(false)
}

/// Polls completions into `done` (waits for one when `block`); time blocked counts as I/O
/// wait of every running query.
fn poll<'q, S, M: QueryMachine<S>, T>(
    io: &mut Io,
    lanes: &mut [M],
    running: &mut [Option<Running<'q, T>>],
    block: bool,
    done: &mut Vec<Completion>,
) -> Result<(), SearchError> {
    done.clear();
    let engine = io.engine.as_mut();
    if engine.in_flight() > 0 {
        // CPU time of a call serves every running query: split equally among them.
        let live = running.iter().flatten().count().max(1) as u64;
        let share = |ns: u128| ns as u64 / live;
        if block {
            let tw = Instant::now();
            let (_, polled) = wait_some_polled(engine, io.spin, done)?;
            let waited = tw.elapsed().as_nanos() as u64;
            let polled = if io.time_parts {
                share(polled.as_nanos())
            } else {
                0
            };
            for (i, r) in running.iter_mut().enumerate() {
                if let Some(r) = r {
                    r.stats.io.io_wait_ns += waited;
                    r.stats.parts.poll_ns += polled;
                    lanes[i].on_blocked(&mut r.stats);
                }
            }
        } else {
            let t0 = io.time_parts.then(Instant::now);
            engine.wait(0, done)?;
            if let Some(t0) = t0 {
                let ns = share(t0.elapsed().as_nanos());
                for r in running.iter_mut().flatten() {
                    r.stats.parts.io_call_ns += ns;
                }
            }
        }
    }
    if !done.is_empty() {
        for (i, r) in running.iter_mut().enumerate() {
            if let Some(r) = r {
                lanes[i].before_route(&mut r.stats);
            }
        }
    }
    Ok(())
}

/// Runs `queries` through machines `M` over any graph source, `interleave` at a time — how
/// the tests drive a strategy over a synthetic page source. Returns each query's hits and
/// statistics (in query order), the ids expanded from reads (beam search's trace) and the
/// engine.
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) fn run_on<'v, G, M, T>(
    engine: Box<dyn IoEngine>,
    view: &GraphView<'v, G>,
    cfg: &SearchConfig,
    interleave: usize,
    queries: &[Vec<T>],
) -> Result<
    (
        Vec<(Vec<(u32, f32)>, QueryStats)>,
        Vec<u32>,
        Box<dyn IoEngine>,
    ),
    SearchError,
>
where
    G: GraphSource,
    M: QueryMachine<GraphView<'v, G>> + Default,
    T: Element,
{
    let mut io = Io {
        engine,
        completions: Vec::new(),
        hits: Vec::new(),
        entry: EntryScratch::default(),
        seeds: Vec::new(),
        trace: Some(Vec::new()),
        spin: Duration::ZERO,
        time_parts: false,
        hidden: None,
    };
    let mut lanes: Vec<M> = Vec::new();
    let mut out = vec![(Vec::new(), QueryStats::default()); queries.len()];
    let mut q = 0;
    run(
        &mut io,
        view,
        cfg,
        &mut lanes,
        (
            interleave,
            &mut || {
                q += 1;
                queries.get(q - 1).map(|v| (q - 1, v.as_slice()))
            },
            &mut |i, hits: &[(u32, f32)], st| out[i] = (hits.to_vec(), st),
            (None, None),
        ),
    )?;
    Ok((out, io.trace.unwrap_or_default(), io.engine))
}

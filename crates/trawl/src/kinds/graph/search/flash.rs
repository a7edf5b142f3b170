//! FlashANNS's batch graph search (§4): a search thread keeps a batch of `B` queries, each
//! with its candidate list and visited set on an accelerator ([`crate::accel::flash`]), and
//! overlaps each query's reads with the steps of the others and with its own.
//!
//! - **A step** expands, for every query whose record has arrived, that record: its exact
//!   distance enters the query's result set on the host, its neighbour ids go to the
//!   accelerator, which scores the unvisited ones by PQ, updates the list and picks the
//!   query's next node(s) to read. All the ready queries of a step go in one submission (on
//!   the GPU backend, one dispatch).
//! - **Staleness `k`** (§4.1): a query keeps up to `k + 1` reads in flight; after the step of
//!   node `i`, the node read for step `i + k + 1` is chosen from the list as it stands then,
//!   i.e. without the results of the `k` steps still in flight. `k = 0` is strict best-first
//!   search (it equals beam search with width 1); `k = 1` (the default) overlaps a query's
//!   read with its previous step. A query's records are processed in the order its reads
//!   were issued, so its path does not depend on which read lands first: the results are
//!   the same whatever the I/O timing, the grain or the backend.
//! - **Grain** (§4.2): [`Grain::Query`] — a query whose read landed takes part in the next
//!   step at once, whatever the others wait for; [`Grain::Kernel`] — CAM's batch-wide barrier:
//!   a step runs only when every read issued by the oldest outstanding step has landed.
//! - **Convergence** (§4.1.3): every step expands a node never expanded before, so a query
//!   ends after at most `n` steps; the host also stops choosing after
//!   [`FlashParams::max_steps`] reads (which sizes the accelerator's visited hash). The
//!   paper bounds the relaxed path by the strict one plus `k` per step of detour; the test
//!   suite checks `steps(k) ≤ (k + 1) · steps(0)` on real graphs.
//!
//! The gap to the paper's design: its persistent kernel's warps poll per-query completion
//! flags in mapped host memory, so a query resumes the moment its read lands; here a step is
//! a dispatch (`wgpu` shaders cannot wait on the host), and a query resumes at the next
//! dispatch after its read lands. The host submits a step, reaps completions while the
//! device computes it, and builds the next step from the queries that became ready.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::accel::flash::{
    FlashAccel, FlashSession, FlashShape, StepEntry, StepJob, StepOutput, MAX_FILL, NONE,
};
use crate::io::{Completion, IoEngine, ReadRequest, Slot};
use crate::kernels::{self, Element};
use crate::kinds::graph::search::explore::sorted_results;
use crate::kinds::graph::search::searcher::ResultSink;
use crate::kinds::graph::search::source::{GraphSource, GraphSpace, RecordSource};
use crate::kinds::graph::search::SearchConfig;
use crate::search::runner::{drain_engine, wait_some};
use crate::search::{QueryStats, SearchError};
use crate::vamana::queue::Neighbor;

/// Default queries in flight per search thread (sized for the CPU backend on a small
/// machine; a GPU wants hundreds).
pub const DEFAULT_FLASH_BATCH: usize = 32;
/// Most queries one search thread keeps in flight.
pub const MAX_FLASH_BATCH: usize = 8192;

/// When a query continues after its read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grain {
    /// As soon as its own read has landed (FlashANNS).
    #[default]
    Query,
    /// Only when every read of the oldest outstanding step has landed (a batch-wide barrier,
    /// as a kernel-grained I/O stack such as CAM imposes).
    Kernel,
}

impl Grain {
    /// `query` or `kernel`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Query => "query",
            Self::Kernel => "kernel",
        }
    }
}

impl std::str::FromStr for Grain {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "query" => Ok(Self::Query),
            "kernel" => Ok(Self::Kernel),
            other => Err(format!("unknown grain {other:?} (query, kernel)")),
        }
    }
}

/// Parameters of FlashANNS's batch search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashParams {
    /// Queries in flight per search thread (`B`).
    pub batch: usize,
    /// Steps a read may be chosen ahead of (`k`; reads in flight per query: `k + 1`).
    pub staleness: usize,
    /// Per-query or batch-wide resumption.
    pub grain: Grain,
    /// Most reads one query issues (0: `8 · L + 64`).
    pub max_steps: usize,
    /// Steps each query takes strictly (one read in flight) before the staleness applies:
    /// 0 relaxes from the start, as the paper does. The first steps of a search descend
    /// greedily, each finding a much nearer node, so a read chosen a step early there is
    /// usually wasted.
    pub strict_steps: usize,
}

impl Default for FlashParams {
    fn default() -> Self {
        Self {
            batch: DEFAULT_FLASH_BATCH,
            staleness: 1,
            grain: Grain::Query,
            max_steps: 0,
            strict_steps: 0,
        }
    }
}

impl FlashParams {
    /// Checks the parameters against a queue depth.
    pub fn validate(&self, depth: usize) -> Result<(), SearchError> {
        let bad = |s: String| Err(SearchError::Unsupported(s));
        if self.batch == 0 || self.batch > MAX_FLASH_BATCH {
            return bad(format!(
                "flash batch {} must be between 1 and {MAX_FLASH_BATCH}",
                self.batch
            ));
        }
        if self.staleness >= MAX_FILL {
            return bad(format!(
                "staleness {} must be below {MAX_FILL}",
                self.staleness
            ));
        }
        if self.batch * (self.staleness + 1) > depth {
            return bad(format!(
                "flash batch {} × {} reads in flight needs a queue depth of {}, the engine has {depth}",
                self.batch,
                self.staleness + 1,
                self.batch * (self.staleness + 1)
            ));
        }
        Ok(())
    }

    /// Reads one query may issue, for list size `l`.
    pub fn steps_cap(&self, l: usize) -> usize {
        if self.max_steps == 0 {
            8 * l + 64
        } else {
            self.max_steps
        }
    }
}

/// A layout the flash strategy searches: a read's node is expanded on the host (its exact
/// distances into the query's results, its neighbour ids into the step).
pub(crate) trait FlashSource: GraphSource {
    /// Longest neighbour list of a node.
    fn max_degree(&self) -> usize;

    /// Expands `node` from `bytes`, the read from `page` (already passed
    /// [`GraphSource::check_read`]): its vectors' exact distances to `query` go to
    /// `results`, its neighbours are appended to the first of `nbrs` (the second is scratch);
    /// returns the exact distances computed.
    #[allow(clippy::too_many_arguments)]
    fn expand_read<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        node: u32,
        page: u64,
        bytes: &[u8],
        query: &[T],
        scratch: &mut Vec<T>,
        results: &mut Vec<Neighbor>,
        nbrs: (&mut Vec<u32>, &mut Vec<u32>),
    ) -> Result<u64, SearchError>;

    /// The bytes [`FlashSource::expand_read`] takes for `node` when they are held in memory
    /// (the page-node layout's cached pages): the node is expanded without a read.
    fn cached(&self, _node: u32) -> Option<&[u8]> {
        None
    }
}

impl FlashSource for crate::kinds::graph::search::layouts::RecordLayout {
    fn max_degree(&self) -> usize {
        RecordSource::max_degree(self)
    }
    fn expand_read<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        node: u32,
        page: u64,
        bytes: &[u8],
        query: &[T],
        scratch: &mut Vec<T>,
        results: &mut Vec<Neighbor>,
        (nbrs, _): (&mut Vec<u32>, &mut Vec<u32>),
    ) -> Result<u64, SearchError> {
        let view = self.record(node, page, bytes)?;
        let v = view.vector::<T>(scratch);
        results.push(Neighbor {
            id: node,
            dist: kernels::distance(space.metric, query, v),
        });
        nbrs.extend(view.neighbors());
        Ok(1)
    }
}

/// Receives a query that failed alone (a damaged page): its id and the error.
pub type FailSink<'a> = dyn FnMut(usize, SearchError) + 'a;

/// One read of a query, in issue order.
#[derive(Debug, Clone, Copy)]
struct Read {
    node: u32,
    key: u32,
    page: u64,
    seq: u32,
    landed: Option<Slot>,
    /// Submitted to the engine (the kernel grain holds a step's reads until the round in
    /// flight has landed).
    issued: bool,
    /// The node is held in memory: it is expanded without a read.
    cached: bool,
    submitted: Instant,
}

/// A query in a slot of the batch.
struct Lane<'q, T> {
    id: usize,
    query: &'q [T],
    stats: QueryStats,
    t0: Instant,
    reads: VecDeque<Read>,
    results: Vec<Neighbor>,
    issued: usize,
    seq: u32,
    /// The query failed: its remaining reads are drained, then it is reported.
    failed: Option<SearchError>,
    /// In the step being built or run.
    in_step: bool,
}

/// Runs a stream of queries through the batch search on one thread; queries that fail alone
/// (a damaged page) go to `fail`, the rest to `sink`. After an error of the whole batch (the
/// device, the accelerator), every read in flight is drained before returning.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<'q, T: Element, G: FlashSource>(
    engine: &mut dyn IoEngine,
    completions: &mut Vec<Completion>,
    spin: Duration,
    space: &GraphSpace<'_>,
    graph: &G,
    accel: &dyn FlashAccel,
    cfg: &SearchConfig,
    next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
    sink: &mut ResultSink<'_>,
    fail: &mut FailSink<'_>,
) -> Result<(), SearchError> {
    let crate::kinds::graph::search::Strategy::Flash(fp) = *cfg.strategy() else {
        return Err(SearchError::Internal(
            "flash::run without flash parameters".into(),
        ));
    };
    // The entry-index seeds of a starting query travel as its step's neighbours.
    let max_degree = graph.max_degree().max(cfg.entry_list());
    let cap = fp.steps_cap(cfg.l());
    let shape = FlashShape {
        slots: fp.batch,
        l: cfg.l(),
        max_degree,
        max_visited: cap.saturating_mul(max_degree).saturating_add(1),
    };
    let mut session = accel.session(shape)?;
    let mut state = Flash {
        engine,
        done: std::mem::take(completions),
        spin,
        space,
        graph,
        cfg,
        fp,
        cap,
        lanes: (0..fp.batch).map(|_| None).collect(),
        job: StepJob::default(),
        out: StepOutput::default(),
        order: Vec::new(),
        scratch: Vec::new(),
        hits: Vec::new(),
        entry: crate::kinds::graph::search::entry::EntryScratch::default(),
        seeds: Vec::new(),
        list: Vec::new(),
    };
    let r = state.drive(session.as_mut(), next, sink, fail);
    if r.is_err() {
        for lane in state.lanes.iter().flatten() {
            for rd in &lane.reads {
                if let Some(s) = rd.landed {
                    state.engine.release(s);
                }
            }
        }
        drain_engine(state.engine, &mut state.done);
    }
    *completions = std::mem::take(&mut state.done);
    r
}

struct Flash<'e, 'v, 'q, T, G> {
    engine: &'e mut dyn IoEngine,
    done: Vec<Completion>,
    spin: Duration,
    space: &'v GraphSpace<'v>,
    graph: &'v G,
    cfg: &'v SearchConfig,
    fp: FlashParams,
    cap: usize,
    lanes: Vec<Option<Lane<'q, T>>>,
    job: StepJob,
    out: StepOutput,
    /// Lane of each entry of the step in flight.
    order: Vec<usize>,
    scratch: Vec<T>,
    hits: Vec<(u32, f32)>,
    entry: crate::kinds::graph::search::entry::EntryScratch,
    seeds: Vec<u32>,
    /// A page node's neighbour list, decoded.
    list: Vec<u32>,
}

impl<'q, T: Element, G: FlashSource> Flash<'_, '_, 'q, T, G> {
    fn drive(
        &mut self,
        session: &mut dyn FlashSession,
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
        sink: &mut ResultSink<'_>,
        fail: &mut FailSink<'_>,
    ) -> Result<(), SearchError> {
        let mut exhausted = false;
        loop {
            self.job.clear();
            // Every step says what the codes are: a step without a new query still scores
            // the slots' RaBitQ queries.
            self.job.rabitq = self.space.pq.quantizer.as_rabitq().is_some();
            self.order.clear();
            if !exhausted {
                exhausted = self.start_queries(next)?;
            }
            let t0 = Instant::now();
            self.gather_ready(fail)?;
            if !self.order.is_empty() {
                session.submit(&self.job)?;
                // While the device computes, reap what has landed (the GPU backend's
                // overlap; the CPU backend computed at submission).
                let tr = Instant::now();
                self.reap(false)?;
                let reaping = tr.elapsed();
                session.wait(&mut self.out)?;
                let share = (t0.elapsed().saturating_sub(reaping)).as_nanos() as u64
                    / self.order.len() as u64;
                for &i in &self.order {
                    if let Some(l) = self.lanes[i].as_mut() {
                        l.stats.flash.step_ns += share;
                    }
                }
                self.apply(sink)?;
                continue;
            }
            if self.lanes.iter().all(Option::is_none) {
                return Ok(());
            }
            self.reap(true)?;
        }
    }

    /// Reads a query keeps in flight once it has taken `steps` steps.
    fn depth(fp: &FlashParams, steps: u64) -> usize {
        if steps < fp.strict_steps as u64 {
            1
        } else {
            fp.staleness + 1
        }
    }

    /// Starts queries in free lanes: a reset entry each. Returns whether the stream ended.
    fn start_queries(
        &mut self,
        next: &mut dyn FnMut() -> Option<(usize, &'q [T])>,
    ) -> Result<bool, SearchError> {
        let m = self.space.pq.quantizer.m();
        for i in 0..self.lanes.len() {
            if self.lanes[i].is_some() {
                continue;
            }
            let Some((id, query)) = next() else {
                return Ok(true);
            };
            self.space.check_query(query)?;
            match &self.space.pq.quantizer {
                crate::quant::Quantiser::Pq(pq) => {
                    let at = self.job.tables.len();
                    self.job
                        .tables
                        .resize(at + m * crate::accel::TABLE_ROW, 0.0);
                    let mut table = crate::quant::pq::QueryTable::new(m);
                    pq.fill_table(query, &mut table)
                        .map_err(|_| SearchError::NonFiniteQuery { row: 0 })?;
                    self.job.tables[at..].copy_from_slice(table.flat());
                }
                crate::quant::Quantiser::RaBitQ(rq) => {
                    self.job.rabitq = true;
                    let q = rq
                        .query(query)
                        .map_err(|_| SearchError::NonFiniteQuery { row: 0 })?;
                    self.job.rbq.push(q);
                }
            }
            // Seeds from the in-memory entry index (nearest first), else the medoid: the first
            // starts the list, the others enter it as if they were its neighbours — the list
            // is the first L of the seeds by PQ distance either way, as beam search's.
            let mut stats = QueryStats::default();
            self.seeds.clear();
            if let (Some(e), true) = (self.space.entry, self.cfg.entry_list() > 0) {
                stats.traversal.entry_distances += e.search(
                    query,
                    self.cfg.entry_list(),
                    &mut self.entry,
                    &mut self.seeds,
                );
            }
            // On the page-node layout a seed is its vector's page.
            let g = self.graph;
            self.seeds.retain_mut(|s| {
                *s = g.node_of(*s);
                *s != NONE
            });
            let start = match self.seeds.first() {
                Some(&s) => s,
                None => g.node_of(self.space.medoid),
            };
            if start == NONE {
                return Err(SearchError::Internal(
                    "flash search: the entry vector is on no page".into(),
                ));
            }
            let nbr_off = self.job.nbrs.len() as u32;
            self.job.nbrs.extend(self.seeds.iter().skip(1));
            self.job.entries.push(StepEntry {
                slot: i as u32,
                entry: start,
                node: NONE,
                node_key: 0,
                nbr_off,
                nbr_len: self.seeds.len().saturating_sub(1) as u32,
                fill: Self::depth(&self.fp, 0).min(self.cap) as u32,
            });
            self.order.push(i);
            self.lanes[i] = Some(Lane {
                id,
                query,
                stats,
                t0: Instant::now(),
                reads: VecDeque::with_capacity(self.fp.staleness + 1),
                results: Vec::new(),
                issued: 0,
                seq: 0,
                failed: None,
                in_step: true,
            });
        }
        Ok(false)
    }

    /// Adds the queries whose next record has landed (all of the oldest step's, with the
    /// kernel grain) to the step being built.
    fn gather_ready(&mut self, fail: &mut FailSink<'_>) -> Result<(), SearchError> {
        if self.fp.grain == Grain::Kernel {
            // CAM's barrier: a round of reads is issued only when the round in flight has
            // landed whole; then every landed record is expanded in one step while the new
            // round is in flight.
            if self.engine.in_flight() > 0 {
                return Ok(());
            }
            self.issue_pending()?;
        }
        for i in 0..self.lanes.len() {
            let Some(lane) = self.lanes[i].as_mut() else {
                continue;
            };
            if lane.in_step {
                continue;
            }
            let Some(front) = lane.reads.front().copied() else {
                continue;
            };
            if front.landed.is_none() && !front.cached {
                continue;
            }
            lane.reads.pop_front();
            if lane.failed.is_some() {
                lane.reads.retain(|r| r.issued);
                if let Some(slot) = front.landed {
                    self.engine.release(slot);
                }
                if lane.reads.is_empty() {
                    let lane = self.lanes[i].take().expect("lane");
                    fail(lane.id, lane.failed.expect("failed"));
                }
                continue;
            }
            let r = self.expand(i, front);
            if let Some(slot) = front.landed {
                self.engine.release(slot);
            }
            let lane = self.lanes[i].as_mut().expect("lane");
            if let Err(e) = r {
                if e.kind() != crate::ErrorKind::Corrupt {
                    return Err(e);
                }
                lane.reads.retain(|r| r.issued);
                if lane.reads.is_empty() {
                    let lane = self.lanes[i].take().expect("lane");
                    fail(lane.id, e);
                } else {
                    lane.failed = Some(e);
                }
                continue;
            }
            lane.in_step = true;
            self.order.push(i);
        }
        Ok(())
    }

    /// Expands `lane`'s landed (or cached) read: the exact distances on the host, the
    /// neighbours into the step.
    fn expand(&mut self, i: usize, rd: Read) -> Result<(), SearchError> {
        let g = self.graph;
        let bytes = match rd.landed {
            Some(slot) => {
                let bytes = self.engine.buffer(slot);
                g.check_read(rd.page, bytes)?;
                bytes
            }
            None => g.cached(rd.node).ok_or_else(|| {
                SearchError::Internal(format!("flash search: node {} is not cached", rd.node))
            })?,
        };
        let lane = self.lanes[i].as_mut().expect("lane");
        if rd.landed.is_none() {
            lane.stats.traversal.cache_hits += 1;
        }
        let off = self.job.nbrs.len();
        let exact = g.expand_read(
            self.space,
            rd.node,
            rd.page,
            bytes,
            lane.query,
            &mut self.scratch,
            &mut lane.results,
            (&mut self.job.nbrs, &mut self.list),
        );
        let exact = match exact {
            Ok(x) => x,
            Err(e) => {
                self.job.nbrs.truncate(off);
                return Err(e);
            }
        };
        lane.stats.traversal.exact_distances += exact;
        lane.stats.traversal.nodes_expanded += 1;
        lane.stats.flash.steps += 1;
        let room = Self::depth(&self.fp, lane.stats.flash.steps).saturating_sub(lane.reads.len());
        let left = self.cap.saturating_sub(lane.issued);
        self.job.entries.push(StepEntry {
            slot: i as u32,
            entry: NONE,
            node: rd.node,
            node_key: rd.key,
            nbr_off: off as u32,
            nbr_len: (self.job.nbrs.len() - off) as u32,
            fill: room.min(left) as u32,
        });
        Ok(())
    }

    /// Issues the step's choices and retires the queries that are done.
    fn apply(&mut self, sink: &mut ResultSink<'_>) -> Result<(), SearchError> {
        let g = self.graph;
        for (e, &i) in self.order.iter().enumerate() {
            let lane = self.lanes[i].as_mut().expect("lane in the step");
            lane.in_step = false;
            lane.stats.traversal.pq_distances += u64::from(self.out.scored[e]);
            if self.out.stale[e] {
                lane.stats.flash.stale_steps += 1;
            }
            for (node, key) in self.out.chosen(e) {
                let seq = lane.seq;
                lane.seq = lane.seq.wrapping_add(1);
                lane.issued += 1;
                lane.reads.push_back(Read {
                    node,
                    key,
                    page: g.locate(node),
                    seq,
                    landed: None,
                    issued: false,
                    cached: g.cached(node).is_some(),
                    submitted: Instant::now(),
                });
            }
            if self.fp.grain == Grain::Query {
                Self::issue(self.engine, g, i, lane)?;
            }
            if lane.reads.is_empty() {
                let mut lane = self.lanes[i].take().expect("lane");
                sorted_results(&mut lane.results, self.cfg.result_len(), &mut self.hits);
                lane.stats.total_ns = lane.t0.elapsed().as_nanos() as u64;
                sink(lane.id, &self.hits, lane.stats);
            }
        }
        Ok(())
    }

    /// Submits lane `i`'s reads not yet submitted.
    fn issue(
        engine: &mut dyn IoEngine,
        g: &G,
        i: usize,
        lane: &mut Lane<'q, T>,
    ) -> Result<(), SearchError> {
        let pages = g.pages_per_read();
        for rd in lane.reads.iter_mut().filter(|r| !r.issued && !r.cached) {
            engine.submit(
                ((i as u64) << 32) | u64::from(rd.seq),
                ReadRequest {
                    first_page: rd.page,
                    pages,
                },
            )?;
            rd.issued = true;
            rd.submitted = Instant::now();
            lane.stats.count_read(pages, g.nodes_on_page(rd.page));
        }
        Ok(())
    }

    /// Submits every read the steps chose and the kernel grain held back.
    fn issue_pending(&mut self) -> Result<(), SearchError> {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if let Some(lane) = lane {
                Self::issue(self.engine, self.graph, i, lane)?;
            }
        }
        Ok(())
    }

    /// Records the reads that landed; when `block`, waits for at least one (the time counts
    /// as I/O wait of every query, and as a wait of each query whose next record is missing).
    fn reap(&mut self, block: bool) -> Result<(), SearchError> {
        self.done.clear();
        if self.engine.in_flight() == 0 {
            if block {
                return Err(SearchError::Internal(
                    "flash search: queries wait for reads but none is in flight".into(),
                ));
            }
            return Ok(());
        }
        if block {
            let t = Instant::now();
            wait_some(self.engine, self.spin, &mut self.done)?;
            let waited = t.elapsed().as_nanos() as u64;
            for lane in self.lanes.iter_mut().flatten() {
                lane.stats.io.io_wait_ns += waited;
                if lane
                    .reads
                    .front()
                    .is_some_and(|r| r.landed.is_none() && !r.cached)
                {
                    lane.stats.flash.waits += 1;
                }
            }
        } else {
            self.engine.wait(0, &mut self.done)?;
        }
        let now = Instant::now();
        for c in &self.done {
            let lane_at = (c.tag >> 32) as usize;
            let seq = c.tag as u32;
            let rd = self
                .lanes
                .get_mut(lane_at)
                .and_then(Option::as_mut)
                .and_then(|l| {
                    let rd = l
                        .reads
                        .iter_mut()
                        .find(|r| r.seq == seq && r.landed.is_none())?;
                    l.stats.flash.read_ns += now.duration_since(rd.submitted).as_nanos() as u64;
                    Some(rd)
                });
            match rd {
                Some(rd) => rd.landed = Some(c.slot),
                None => {
                    self.engine.release(c.slot);
                    return Err(SearchError::Internal(format!(
                        "flash search: a read landed for no query (tag {:#x})",
                        c.tag
                    )));
                }
            }
        }
        Ok(())
    }
}

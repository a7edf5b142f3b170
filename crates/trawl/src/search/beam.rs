//! Beam search over a page-packed index (DiskANN's `cached_beam_search`).
//!
//! Each round trip takes the `W` nearest unexpanded candidates of the list (PQ distances),
//! expands the cached ones from memory while the others' pages are read (one request per
//! distinct page: two frontier nodes on one page cost one read), then, for every expanded node,
//! computes the exact distance of its full-precision vector (kept for the final re-rank) and
//! the PQ distances of its unvisited neighbours, which enter the list. The search ends when no
//! candidate in the list is unexpanded; the `k` expanded nodes with the smallest exact
//! distances are the result.

use std::time::Instant;

use super::{QueryStats, SearchError, SearchParams};
use crate::graph::queue::{CandidateList, Neighbor, VisitedSet};
use crate::index::DiskIndex;
use crate::io::{Completion, IoEngine, ReadRequest, PAGE_BYTES};
use crate::kernels::{self, Element};
use crate::layout::packed::RecordView;
use crate::quant::pq::QueryTable;

/// Reusable per-thread buffers of a beam search.
#[derive(Debug, Default)]
pub struct BeamScratch {
    list: CandidateList,
    visited: VisitedSet,
    table: Option<QueryTable>,
    /// Expanded nodes with exact distances.
    full: Vec<Neighbor>,
    /// Frontier nodes to read and the read each belongs to.
    frontier: Vec<(u32, usize)>,
    cached: Vec<u32>,
    /// Distinct first pages of this round trip's reads.
    reads: Vec<u64>,
    completions: Vec<Completion>,
    fresh: Vec<u32>,
}

/// One search thread: an I/O engine (its own ring) and scratch, borrowing the index.
pub struct Searcher<'i> {
    index: &'i DiskIndex,
    engine: Box<dyn IoEngine>,
    scratch: BeamScratch,
    trace: Option<Vec<u32>>,
    spin: std::time::Duration,
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
            scratch: BeamScratch::default(),
            trace: None,
            spin: std::time::Duration::ZERO,
        }
    }

    /// The engine (its counters include every read this searcher made).
    pub fn engine(&self) -> &dyn IoEngine {
        self.engine.as_ref()
    }

    /// How long to poll the completion queue (without a system call) before blocking in the
    /// kernel when waiting for reads; zero (the default) blocks at once. Polling saves the
    /// sleep and wake-up of a blocking wait but keeps the core busy: use it only when every
    /// search thread has a core of its own ([`crate::index::DiskIndex::search_batch`] does so
    /// when its threads do not outnumber the cores).
    pub fn set_spin(&mut self, spin: std::time::Duration) {
        self.spin = spin;
    }

    /// Records the id of every node expanded from the file (not from the cache) until
    /// [`Searcher::take_trace`]; used to choose a cache by visit frequency.
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
        let t0 = Instant::now();
        self.index.check_query(query, params, self.engine.depth())?;
        let mut stats = QueryStats::default();
        let result = self.run(query, params, &mut stats);
        if result.is_err() {
            self.drain();
        }
        result?;
        let full = &mut self.scratch.full;
        full.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
        out.clear();
        out.extend(full.iter().take(params.k).map(|n| (n.id, n.dist)));
        stats.total_ns = t0.elapsed().as_nanos() as u64;
        Ok(stats)
    }

    /// Waits for and releases every read still in flight (after an error mid-query), so the
    /// next query never sees a stale completion.
    fn drain(&mut self) {
        let mut done = Vec::new();
        while self.engine.in_flight() > 0 {
            done.clear();
            match self.engine.wait(1, &mut done) {
                Ok(_) => {
                    for c in &done {
                        self.engine.release(c.slot);
                    }
                }
                Err(_) => continue,
            }
        }
        for c in self.scratch.completions.drain(..) {
            self.engine.release(c.slot);
        }
    }

    fn run<T: Element>(
        &mut self,
        query: &[T],
        params: &SearchParams,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let ix = self.index;
        let s = &mut self.scratch;
        let table = s.table.get_or_insert_with(|| QueryTable::new(ix.pq().m()));
        ix.pq()
            .fill_table(query, table)
            .map_err(|_| SearchError::NonFiniteQuery { row: 0 })?;
        s.list.reset(params.l);
        s.visited.reset(ix.n());
        s.full.clear();
        let medoid = ix.medoid();
        s.visited.insert(medoid);
        s.list
            .insert(medoid, table.distance(ix.codes().code(medoid as usize)));
        stats.pq_distances += 1;
        let geo = *ix.packed().geometry();
        let pages = geo.read_pages() as u32;
        let mut vec_scratch: Vec<T> = Vec::new();
        while s.list.has_unexpanded() {
            s.frontier.clear();
            s.cached.clear();
            s.reads.clear();
            while s.frontier.len() + s.cached.len() < params.beam_width {
                let Some(c) = s.list.pop_unexpanded() else {
                    break;
                };
                if ix.cache().contains(c.id) {
                    s.cached.push(c.id);
                    continue;
                }
                let (page, _) = geo.locate(c.id);
                let read = match s.reads.iter().position(|&p| p == page) {
                    Some(i) => i,
                    None => {
                        s.reads.push(page);
                        s.reads.len() - 1
                    }
                };
                s.frontier.push((c.id, read));
            }
            for (tag, &page) in s.reads.iter().enumerate() {
                self.engine.submit(
                    tag as u64,
                    ReadRequest {
                        first_page: page,
                        pages,
                    },
                )?;
            }
            stats.hops += 1;
            stats.io_requests += s.reads.len() as u64;
            stats.pages_read += s.reads.len() as u64 * u64::from(pages);
            stats.bytes_read += s.reads.len() as u64 * u64::from(pages) * PAGE_BYTES as u64;
            for i in 0..s.cached.len() {
                let id = s.cached[i];
                let rec = ix.cache().record(id).unwrap_or(&[]);
                let view = ix
                    .packed()
                    .decode(id, rec)
                    .map_err(|d| SearchError::Corrupt {
                        path: ix.packed().path().to_path_buf(),
                        page: 0,
                        detail: format!("cached {d}"),
                    })?;
                expand(ix, s, query, id, view, &mut vec_scratch, stats);
                stats.cache_hits += 1;
            }
            if s.reads.is_empty() {
                continue;
            }
            // Expand each read as it lands, while the others are still in flight: the round
            // trip's outcome does not depend on the order (the list keeps the L best of the
            // same candidates), so this only hides compute under the slowest read.
            let mut pending = s.reads.len();
            while pending > 0 {
                let tw = Instant::now();
                s.completions.clear();
                pending -=
                    wait_some(self.engine.as_mut(), self.spin, &mut s.completions)?.min(pending);
                stats.io_wait_ns += tw.elapsed().as_nanos() as u64;
                expand_completions(
                    ix,
                    s,
                    self.engine.as_mut(),
                    &mut self.trace,
                    query,
                    &mut vec_scratch,
                    stats,
                )?;
            }
        }
        Ok(())
    }
}

/// Waits for at least one completion: polls for up to `spin`, then blocks.
fn wait_some(
    engine: &mut dyn IoEngine,
    spin: std::time::Duration,
    out: &mut Vec<Completion>,
) -> Result<usize, crate::io::IoError> {
    if !spin.is_zero() {
        let t0 = Instant::now();
        loop {
            let got = engine.wait(0, out)?;
            if got > 0 {
                return Ok(got);
            }
            if t0.elapsed() >= spin {
                break;
            }
            std::hint::spin_loop();
        }
    }
    engine.wait(1, out)
}

/// Expands the frontier nodes of every completion in `s.completions`, releasing each slot.
fn expand_completions<T: Element>(
    ix: &DiskIndex,
    s: &mut BeamScratch,
    engine: &mut dyn IoEngine,
    trace: &mut Option<Vec<u32>>,
    query: &[T],
    vec_scratch: &mut Vec<T>,
    stats: &mut QueryStats,
) -> Result<(), SearchError> {
    while let Some(c) = s.completions.pop() {
        let bytes = engine.buffer(c.slot);
        let result = expand_read(ix, s, trace, query, c, bytes, vec_scratch, stats);
        engine.release(c.slot);
        result?;
    }
    Ok(())
}

/// Expands every frontier node that lives in `bytes`, the pages of completion `c`.
fn expand_read<T: Element>(
    ix: &DiskIndex,
    s: &mut BeamScratch,
    trace: &mut Option<Vec<u32>>,
    query: &[T],
    c: Completion,
    bytes: &[u8],
    vec_scratch: &mut Vec<T>,
    stats: &mut QueryStats,
) -> Result<(), SearchError> {
    let read = c.tag as usize;
    let page = s.reads[read];
    let corrupt = |detail: String| SearchError::Corrupt {
        path: ix.packed().path().to_path_buf(),
        page,
        detail,
    };
    if ix.verify_pages() {
        ix.packed()
            .check_pages(page, bytes)
            .map_err(|p| corrupt(format!("checksum mismatch in page {p}")))?;
    }
    for i in 0..s.frontier.len() {
        let (id, r) = s.frontier[i];
        if r != read {
            continue;
        }
        let view = ix.packed().record(id, bytes).map_err(corrupt)?;
        if let Some(t) = trace.as_mut() {
            t.push(id);
        }
        expand(ix, s, query, id, view, vec_scratch, stats);
    }
    Ok(())
}

/// Exact distance of `id`'s vector (kept for the re-rank) and PQ distances of its unvisited
/// neighbours (offered to the list).
#[inline]
fn expand<T: Element>(
    ix: &DiskIndex,
    s: &mut BeamScratch,
    query: &[T],
    id: u32,
    view: RecordView<'_>,
    vec_scratch: &mut Vec<T>,
    stats: &mut QueryStats,
) {
    let v = view.vector::<T>(vec_scratch);
    let d = kernels::distance(ix.metric(), query, v);
    s.full.push(Neighbor { id, dist: d });
    stats.exact_distances += 1;
    stats.nodes_expanded += 1;
    s.fresh.clear();
    for nb in view.neighbors() {
        if s.visited.insert(nb) {
            s.fresh.push(nb);
        }
    }
    let codes = ix.codes();
    for &nb in &s.fresh {
        codes.prefetch(nb as usize);
    }
    let table = s.table.as_ref().expect("filled at query start");
    for &nb in &s.fresh {
        s.list.insert(nb, table.distance(codes.code(nb as usize)));
    }
    stats.pq_distances += s.fresh.len() as u64;
}

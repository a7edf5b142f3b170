//! Beam search over a page-packed index (DiskANN's `cached_beam_search`), as a state machine
//! ([`BeamQuery`]) that the searcher runs alone or interleaved with other queries.
//!
//! Each round trip takes the `W` nearest unexpanded candidates of the list (PQ distances),
//! expands the cached ones from memory while the others' pages are read (one request per
//! distinct page: two frontier nodes on one page cost one read), then, for every expanded node,
//! computes the exact distance of its full-precision vector (kept for the final re-rank) and
//! the PQ distances of its unvisited neighbours, which enter the list. Each read is expanded as
//! it lands, while the round's other reads are still in flight: the round's outcome does not
//! depend on the order (the list keeps the `L` best of the same candidates). The next round
//! starts when every read of this one has been expanded. The search ends when no candidate in
//! the list is unexpanded; the `k` expanded nodes with the smallest exact distances are the
//! result.
//!
//! Two switches of OctopusANN's design space act here. DynamicWidth
//! ([`SearchParams::dynamic_width`]) sets each round's width from a schedule indexed by the
//! explored position instead of a fixed `W`. PageSearch ([`SearchParams::page_search`]) scores
//! every other record of each page read (exact distance into the result set and, for new
//! nodes, into the list) and keeps a copy of those records, so any of them is expanded later
//! without a read (counted in [`QueryStats::page_hits`]): at once, before a round chooses its
//! reads, while the nearest unexpanded candidate is such a record; within a round's width
//! otherwise.

use std::time::{Duration, Instant};

use super::explore::{check_read, corrupt, Frontier};
use super::{QueryStats, SearchError, SearchParams, WidthSchedule};
use crate::graph::queue::VisitedSet;
use crate::index::DiskIndex;
use crate::io::{Completion, IoEngine, ReadRequest, PAGE_BYTES};
use crate::kernels::Element;

/// The state of one beam-search query.
#[derive(Debug, Default)]
pub struct BeamQuery {
    f: Frontier,
    /// Frontier nodes to read this round and the read each belongs to.
    frontier: Vec<(u32, usize)>,
    cached: Vec<u32>,
    /// Frontier nodes expanded from records PageSearch kept.
    from_pages: Vec<u32>,
    /// PageSearch: records of pages read and not expanded yet (`(id, offset in held_bytes)`).
    held: Vec<(u32, u32)>,
    held_ids: VisitedSet,
    held_bytes: Vec<u8>,
    page_ids: Vec<u32>,
    page_search: bool,
    /// Decoupled layout: list-cache hits of this round (`(id, degree, offset in lc_bytes)`).
    lc_hits: Vec<(u32, u16, u32)>,
    lc_bytes: Vec<u8>,
    lc_buf: Vec<u8>,
    schedule: Option<WidthSchedule>,
    cap: usize,
    /// Distinct first pages of this round's reads.
    reads: Vec<u64>,
    /// Reads of this round not yet landed.
    pending: usize,
    width: usize,
    tag_base: u64,
    mark: Option<Instant>,
}

impl BeamQuery {
    /// The candidate list, visited set and explored nodes of the last query.
    pub(crate) fn frontier(&mut self) -> &mut Frontier {
        &mut self.f
    }

    /// Starts a query at `entry` (the medoid when empty).
    pub(crate) fn start<T: Element>(
        &mut self,
        ix: &DiskIndex,
        query: &[T],
        params: &SearchParams,
        tag_base: u64,
        entry: &[u32],
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        self.f.fill_table(ix, query)?;
        self.f.set_page_search(params.page_search);
        self.f.reset(ix, params.l);
        self.f.rerank.start(params.k, params.rerank, tag_base);
        self.page_search = params.page_search;
        self.held.clear();
        self.held_bytes.clear();
        self.held_ids
            .reset(if params.page_search { ix.n() } else { 0 });
        self.schedule = params.dynamic_width;
        self.cap = params.beam_width;
        self.pending = 0;
        self.width = params.beam_width;
        self.tag_base = tag_base;
        self.mark = None;
        let medoid = [ix.medoid()];
        let entry = if entry.is_empty() { &medoid[..] } else { entry };
        for &id in entry {
            if self.f.visited.insert(id) {
                let d = self.f.pq_distance(ix, id);
                self.f.list.insert(id, d);
                stats.pq_distances += 1;
            }
        }
        Ok(())
    }

    /// Reads of the current round still in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending
    }

    /// The current round's width.
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// Whether the current round found fewer unexpanded candidates than its width (the
    /// traversal is ending).
    pub(crate) fn short_round(&self) -> bool {
        self.frontier.len() + self.cached.len() + self.from_pages.len() + self.lc_hits.len()
            < self.width
    }

    /// Whether the search is over (no round in flight, no unexpanded candidate).
    pub(crate) fn done(&self) -> bool {
        self.pending == 0 && !self.f.list.has_unexpanded()
    }

    /// Starts the next round if the last one is complete: submits its reads, then expands its
    /// cached nodes. Returns whether a round started.
    pub(crate) fn advance<T: Element>(
        &mut self,
        ix: &DiskIndex,
        engine: &mut dyn IoEngine,
        query: &[T],
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> Result<bool, SearchError> {
        if self.pending > 0 || !self.f.list.has_unexpanded() {
            return Ok(false);
        }
        if self.page_search {
            // While the nearest unexpanded candidate came with a page already read, expand it
            // now, before this round's reads are chosen: best-first order kept, no read, no
            // round trip, and the reads are chosen from the list its neighbours updated.
            let mut eager = false;
            while let Some(c) = self.f.list.peek_unexpanded() {
                if !self.held_ids.contains(c.id) {
                    break;
                }
                self.f.list.pop_unexpanded();
                self.expand_held(ix, query, c.id, vec_scratch, stats)?;
                eager = true;
            }
            if !self.f.list.has_unexpanded() {
                return Ok(eager);
            }
        }
        self.frontier.clear();
        self.cached.clear();
        self.from_pages.clear();
        self.reads.clear();
        self.lc_hits.clear();
        self.lc_bytes.clear();
        if let Some(s) = &self.schedule {
            self.width = s.width_at(self.f.list.cursor(), self.cap);
        }
        let dec = ix.decoupled();
        while self.frontier.len() + self.cached.len() + self.from_pages.len() + self.lc_hits.len()
            < self.width
        {
            let Some(c) = self.f.list.pop_unexpanded() else {
                break;
            };
            if let Some(d) = dec {
                // Copy a cached list now: another thread may evict it before it is expanded.
                if let Some(degree) = d.lists.get(c.id, &mut self.lc_buf) {
                    self.lc_hits
                        .push((c.id, degree as u16, self.lc_bytes.len() as u32));
                    self.lc_bytes.extend_from_slice(&self.lc_buf);
                    continue;
                }
                self.add_to_round(c.id, d.graph.locate(c.id));
                continue;
            }
            if ix.cache().contains(c.id) {
                self.cached.push(c.id);
                continue;
            }
            if self.page_search && self.held_ids.contains(c.id) {
                self.from_pages.push(c.id);
                continue;
            }
            let (page, _) = ix.packed_file()?.locate(c.id);
            self.add_to_round(c.id, page);
        }
        let pages = match ix.packed() {
            Some(p) => p.geometry().read_pages() as u32,
            None => 1,
        };
        for (tag, &page) in self.reads.iter().enumerate() {
            engine.submit(
                self.tag_base | tag as u64,
                ReadRequest {
                    first_page: page,
                    pages,
                },
            )?;
            self.pending += 1;
        }
        if self.pending > 0 {
            self.mark = Some(Instant::now());
        }
        stats.hops += 1;
        stats.io_requests += self.reads.len() as u64;
        stats.pages_read += self.reads.len() as u64 * u64::from(pages);
        stats.bytes_read += self.reads.len() as u64 * u64::from(pages) * PAGE_BYTES as u64;
        for &page in &self.reads {
            stats.records_read += match (ix.packed(), dec) {
                (Some(p), _) => p.records_on_page(page),
                (None, Some(d)) => d.graph.lists_on_page(page),
                (None, None) => 0,
            };
        }
        for i in 0..self.lc_hits.len() {
            let (id, degree, at) = self.lc_hits[i];
            let next = self
                .lc_hits
                .get(i + 1)
                .map_or(self.lc_bytes.len(), |h| h.2 as usize);
            let coded = &self.lc_bytes[at as usize..next];
            self.f
                .explore_coded(ix, id, usize::from(degree), coded, 0, stats)?;
            stats.cache_hits += 1;
        }
        for i in 0..self.cached.len() {
            let id = self.cached[i];
            self.f.explore_cached(ix, query, id, vec_scratch, stats)?;
        }
        for i in 0..self.from_pages.len() {
            let id = self.from_pages[i];
            self.expand_held(ix, query, id, vec_scratch, stats)?;
        }
        Ok(true)
    }

    /// Puts `id` on this round's read of `page` (one read per distinct page).
    fn add_to_round(&mut self, id: u32, page: u64) {
        let read = match self.reads.iter().position(|&p| p == page) {
            Some(i) => i,
            None => {
                self.reads.push(page);
                self.reads.len() - 1
            }
        };
        self.frontier.push((id, read));
    }

    /// Expands `id` from the copy of its record PageSearch kept.
    fn expand_held<T: Element>(
        &mut self,
        ix: &DiskIndex,
        query: &[T],
        id: u32,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let packed = ix.packed_file()?;
        let rb = packed.geometry().record_bytes;
        let at = self
            .held
            .iter()
            .find(|h| h.0 == id)
            .map(|h| h.1 as usize)
            .ok_or_else(|| corrupt(ix, 0, format!("record {id} was not kept")))?;
        let (page, _) = packed.locate(id);
        let view = packed
            .decode(id, &self.held_bytes[at..at + rb])
            .map_err(|d| corrupt(ix, page, d))?;
        self.f.explore(ix, query, id, view, vec_scratch, stats);
        stats.page_hits += 1;
        Ok(())
    }

    /// Adds the time since the last tick, weighted by reads in flight and by the width, to the
    /// occupancy counters.
    #[inline]
    pub(crate) fn tick(&mut self, stats: &mut QueryStats) {
        if self.pending == 0 {
            return;
        }
        let now = Instant::now();
        if let Some(m) = self.mark.replace(now) {
            let dt = now.duration_since(m).as_nanos() as u64;
            stats.inflight_time_ns += dt * self.pending as u64;
            stats.width_time_ns += dt * self.width as u64;
        }
    }

    /// Expands the frontier nodes of a landed read and hands its slot back.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_completion<T: Element>(
        &mut self,
        ix: &DiskIndex,
        engine: &mut dyn IoEngine,
        trace: &mut Option<Vec<u32>>,
        query: &[T],
        c: Completion,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        self.tick(stats);
        self.pending -= 1;
        let result = self.expand_read(
            ix,
            engine.buffer(c.slot),
            trace,
            query,
            c,
            vec_scratch,
            stats,
        );
        engine.release(c.slot);
        result
    }

    /// Expands every frontier node that lives in `bytes`, the pages of completion `c`.
    #[allow(clippy::too_many_arguments)]
    fn expand_read<T: Element>(
        &mut self,
        ix: &DiskIndex,
        bytes: &[u8],
        trace: &mut Option<Vec<u32>>,
        query: &[T],
        c: Completion,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let read = (c.tag & 0xffff_ffff) as usize;
        let page = self.reads[read];
        if let Some(d) = ix.decoupled() {
            for i in 0..self.frontier.len() {
                let (id, r) = self.frontier[i];
                if r != read {
                    continue;
                }
                let (degree, coded) = d
                    .graph
                    .list_bytes(id, page, bytes, ix.verify_pages())
                    .map_err(|m| corrupt(ix, page, m))?;
                d.lists.insert(id, degree, coded);
                if let Some(t) = trace.as_mut() {
                    t.push(id);
                }
                self.f.explore_coded(ix, id, degree, coded, page, stats)?;
            }
            return Ok(());
        }
        check_read(ix, page, bytes)?;
        let packed = ix.packed_file()?;
        for i in 0..self.frontier.len() {
            let (id, r) = self.frontier[i];
            if r != read {
                continue;
            }
            let view = packed.record(id, bytes).map_err(|d| corrupt(ix, page, d))?;
            if let Some(t) = trace.as_mut() {
                t.push(id);
            }
            self.f.explore(ix, query, id, view, vec_scratch, stats);
        }
        if self.page_search {
            // Score the page's other records and keep them for a later expansion.
            self.page_ids.clear();
            packed.ids_on_page(page, &mut self.page_ids);
            let rb = packed.geometry().record_bytes;
            for i in 0..self.page_ids.len() {
                let id = self.page_ids[i];
                if self.f.is_scored(id) {
                    continue;
                }
                let view = packed.record(id, bytes).map_err(|d| corrupt(ix, page, d))?;
                if self
                    .f
                    .score_on_page(ix, query, id, view, vec_scratch, stats)
                    && self.held_ids.insert(id)
                {
                    let (_, at) = packed.locate(id);
                    self.held.push((id, self.held_bytes.len() as u32));
                    self.held_bytes.extend_from_slice(&bytes[at..at + rb]);
                }
            }
        }
        Ok(())
    }
}

/// Waits for at least one completion: polls for up to `spin`, then blocks.
pub(crate) fn wait_some(
    engine: &mut dyn IoEngine,
    spin: Duration,
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

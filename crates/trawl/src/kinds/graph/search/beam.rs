//! Beam search over a disk graph (DiskANN's `cached_beam_search`), as a state machine
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
//! ([`BeamParams::dynamic_width`]) sets each round's width from a schedule indexed by the
//! explored position instead of a fixed `W`. PageSearch ([`BeamParams::page_search`]) scores
//! every other record of each page read (exact distance into the result set and, for new
//! nodes, into the list) and keeps a copy of those records, so any of them is expanded later
//! without a read (counted in [`crate::search::TraversalStats::page_hits`]): at once, before a round chooses its
//! reads, while the nearest unexpanded candidate is such a record; within a round's width
//! otherwise.

use std::time::Instant;

use crate::io::{Completion, ReadRequest};
use crate::kernels::Element;
use crate::kinds::graph::search::explore::{Frontier, KeptRecords};
use crate::kinds::graph::search::machine::{
    record_results, GraphView, QueryMachine, Traversal, Turn,
};
use crate::kinds::graph::search::source::{Expand, GraphSource, Held};
use crate::kinds::graph::search::{BeamParams, SearchConfig, Strategy, WidthSchedule};
use crate::search::{stop_part, QueryStats, SearchError};

/// The state of one beam-search query.
#[derive(Debug, Default)]
pub struct BeamQuery {
    f: Frontier,
    /// Frontier nodes to read this round and the read each belongs to.
    frontier: Vec<(u32, usize)>,
    /// Frontier nodes expanded from memory this round (cached records, or copied lists).
    held: Held,
    /// Frontier nodes expanded from records PageSearch kept.
    from_pages: Vec<u32>,
    /// PageSearch: records of pages read and not expanded yet.
    kept: KeptRecords,
    page_search: bool,
    schedule: Option<WidthSchedule>,
    cap: usize,
    /// Distinct first pages of this round's reads.
    reads: Vec<u64>,
    /// Reads of this round not yet landed.
    pending: usize,
    width: usize,
    /// Range search: the width of the second round (0: off).
    range_width: usize,
    /// Range search: the early stop's round trips and radius.
    early: Option<(u64, f32)>,
    tag_base: u64,
    mark: Option<Instant>,
}

impl BeamQuery {
    /// Whether the current round found fewer unexpanded candidates than its width (the
    /// traversal is ending).
    fn short_round(&self) -> bool {
        self.frontier.len() + self.held.len() + self.from_pages.len() < self.width
    }

    /// Whether the search is over (no round in flight, no unexpanded candidate).
    fn done(&self) -> bool {
        self.pending == 0 && !self.f.list.has_unexpanded()
    }

    /// Starts the next round if the last one is complete: submits its reads, then expands its
    /// nodes held in memory. Returns whether a round started.
    fn next_round<G: GraphSource, T: Element>(
        &mut self,
        src: &GraphView<'_, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        if self.pending > 0 || !self.f.list.has_unexpanded() {
            return Ok(false);
        }
        if let Some((hops, limit)) = self.early {
            if self.f.stop_early(hops, limit) {
                return Ok(false);
            }
        }
        let g = src.graph;
        if self.page_search {
            // While the nearest unexpanded candidate came with a page already read, expand it
            // now, before this round's reads are chosen: best-first order kept, no read, no
            // round trip, and the reads are chosen from the list its neighbours updated.
            let mut eager = false;
            while let Some(c) = self.f.list.peek_unexpanded() {
                if !self.kept.contains(c.id) {
                    break;
                }
                self.f.list.pop_unexpanded();
                self.expand_kept(src, c.id, t)?;
                eager = true;
            }
            if !self.f.list.has_unexpanded() {
                return Ok(eager);
            }
        }
        self.frontier.clear();
        self.held.clear();
        self.from_pages.clear();
        self.reads.clear();
        self.width = match &self.schedule {
            Some(s) => s.width_at(self.f.list.cursor(), self.cap),
            None => self.cap,
        };
        // A range search's second round: every read is needed and independent, so wider.
        if self.f.list.in_overflow() {
            self.width = self.width.max(self.range_width);
        }
        while self.frontier.len() + self.held.len() + self.from_pages.len() < self.width {
            let Some(c) = self.f.list.pop_unexpanded() else {
                break;
            };
            if g.hold(c.id, &mut self.held) {
                continue;
            }
            if self.page_search && self.kept.contains(c.id) {
                self.from_pages.push(c.id);
                continue;
            }
            self.add_to_round(c.id, g.locate(c.id));
        }
        let pages = g.pages_per_read();
        for (tag, &page) in self.reads.iter().enumerate() {
            t.engine.submit(
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
        let stats = &mut *t.x.stats;
        stats.traversal.hops += 1;
        for &page in &self.reads {
            stats.count_read(pages, g.nodes_on_page(page));
        }
        for i in 0..self.held.len() {
            let id = self.held.id(i);
            g.expand_held(&src.space, &mut self.f, id, &self.held, &mut t.x)?;
        }
        for i in 0..self.from_pages.len() {
            let id = self.from_pages[i];
            self.expand_kept(src, id, t)?;
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
    fn expand_kept<G: GraphSource, T: Element>(
        &mut self,
        src: &GraphView<'_, G>,
        id: u32,
        t: &mut Turn<'_, T>,
    ) -> Result<(), SearchError> {
        self.kept
            .expand(src.graph, &src.space, &mut self.f, id, &mut t.x)
    }

    /// Adds the time since the last tick, weighted by reads in flight and by the width, to the
    /// occupancy counters.
    #[inline]
    fn tick(&mut self, stats: &mut QueryStats) {
        if self.pending == 0 {
            return;
        }
        let now = Instant::now();
        if let Some(m) = self.mark.replace(now) {
            let dt = now.duration_since(m).as_nanos() as u64;
            stats.io.inflight_time_ns += dt * self.pending as u64;
            stats.io.width_time_ns += dt * self.width as u64;
        }
    }

    /// Expands every frontier node that lives in `bytes`, the pages of completion `c`.
    fn expand_read<G: GraphSource, T: Element>(
        &mut self,
        src: &GraphView<'_, G>,
        bytes: &[u8],
        c: Completion,
        x: &mut Expand<'_, T>,
        trace: &mut Option<Vec<u32>>,
    ) -> Result<(), SearchError> {
        let g = src.graph;
        let read = (c.tag & 0xffff_ffff) as usize;
        let page = self.reads[read];
        // The neighbours' PQ codes start loading while the page's checksum is verified.
        for &(id, r) in &self.frontier {
            if r == read {
                g.prefetch_expansion(&src.space, id, bytes);
            }
        }
        let t0 = x.stats.parts.start();
        g.check_read(page, bytes)?;
        stop_part(t0, &mut x.stats.parts.checksum_ns);
        for i in 0..self.frontier.len() {
            let (id, r) = self.frontier[i];
            if r != read {
                continue;
            }
            if let Some(tr) = trace.as_mut() {
                tr.push(id);
            }
            g.expand(&src.space, &mut self.f, id, page, bytes, x)?;
        }
        if self.page_search {
            self.score_page(src, page, bytes, x)?;
        }
        Ok(())
    }

    /// PageSearch: scores the other records of a page read and keeps them for a later
    /// expansion.
    fn score_page<G: GraphSource, T: Element>(
        &mut self,
        src: &GraphView<'_, G>,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        self.kept
            .score_page(src.graph, &src.space, &mut self.f, page, bytes, x, |_| {
                false
            })
    }
}

impl<'v, G: GraphSource> QueryMachine<GraphView<'v, G>> for BeamQuery {
    /// Starts a query at `seeds` (the medoid when empty).
    fn start<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        cfg: &SearchConfig,
        t: &mut Turn<'_, T>,
        seeds: &[u32],
        tag_base: u64,
    ) -> Result<(), SearchError> {
        let Strategy::Beam(bp) = cfg.strategy() else {
            return Err(SearchError::Internal(
                "a beam-search query started with another strategy".into(),
            ));
        };
        let BeamParams {
            width,
            dynamic_width,
            page_search,
        } = *bp;
        let n = src.space.n;
        self.f.fill_table(&src.space, t.x.query, t.x.stats)?;
        self.f.set_page_search(page_search);
        self.f.reset(n, cfg.l());
        self.f.list.set_radius(cfg.code_radius());
        self.f.set_gate(t.x.keep.and_then(|(q, k)| k.gate(q)));
        if let Some(h) = t.x.hidden.filter(|_| !G::PAGE_NODES) {
            self.f.hide(h);
        }
        self.page_search = page_search;
        self.kept.reset(n, page_search);
        self.schedule = dynamic_width;
        self.cap = width;
        self.pending = 0;
        self.width = width;
        self.range_width = cfg.range().map_or(0, |r| r.width);
        self.early = cfg
            .range()
            .filter(|r| r.early_stop > 0)
            .map(|r| (r.early_stop as u64, r.code_radius()));
        self.tag_base = tag_base;
        self.mark = None;
        self.f.seed(&src.space, src.graph, seeds, t.x.stats);
        Ok(())
    }

    /// Expands the frontier nodes of a landed read and hands its slot back.
    fn on_completion<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
        c: Completion,
    ) -> Result<(), SearchError> {
        self.tick(t.x.stats);
        self.pending -= 1;
        let Turn { engine, x, trace } = t;
        let result = self.expand_read(src, engine.buffer(c.slot), c, x, trace);
        engine.release(c.slot);
        result
    }

    fn step<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        self.next_round(src, t)
    }

    fn finished(&self) -> bool {
        self.done()
    }

    fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>, _stats: &mut QueryStats) {
        record_results(&mut self.f, k, out);
    }
}

impl crate::kinds::graph::search::machine::HasFrontier for BeamQuery {
    fn frontier_ref(&self) -> &Frontier {
        &self.f
    }
}

impl<'v, G: GraphSource + 'v> Traversal<'v, G> for BeamQuery {
    fn advance<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        self.next_round(src, t)
    }
    fn traversed(&self) -> bool {
        self.done()
    }
    fn in_flight(&self) -> usize {
        self.pending
    }
    fn width(&self) -> usize {
        self.width
    }
    fn converging(&self) -> bool {
        self.short_round()
    }
}

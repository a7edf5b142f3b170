//! PipeSearch (PipeANN): a search that keeps up to `W` reads in flight and explores the records
//! that have arrived while the others are still being read, instead of beam search's strict
//! read-a-batch / explore-the-batch rounds.
//!
//! Each turn of the loop:
//!
//! 1. **issue** at most one read, for the nearest candidate of the list that is neither read nor
//!    in flight, when fewer than `W` reads are in flight (a candidate whose page is already in
//!    flight or held joins that read; a cached candidate needs no read);
//! 2. **explore** at most one arrived record, the nearest by PQ distance: exact distance of its
//!    vector, PQ distances of its unvisited neighbours into the list;
//! 3. **poll** completions without blocking; arrived records become explorable.
//!
//! One issue and one exploration per turn is the paper's §4.3 "algorithm optimisation": when
//! several reads land together the pipeline is refilled one read per exploration, so each read
//! misses the information of at most about `W` records. When a turn can do nothing the search
//! polls for up to the spin time, then blocks (the loop is [`crate::kinds::graph::search::Searcher`]'s, shared with
//! beam search and with the interleaving of several queries on one thread).
//!
//! The pipeline width `W` follows a [`WidthPolicy`] ([`WidthController`]): fixed, by explored
//! position (the paper's static table) or dynamic (§4.2.3: start at 4, and once the explored
//! position reaches 5, widen by one whenever at least 90% of the reads that landed in a poll
//! hold a node still in the list).
//!
//! The search ends when every candidate in the list has been explored (candidates whose reads
//! are in flight or whose records wait unexplored keep it going); reads still in flight are then
//! drained and every buffer is handed back before the query returns, so no read of a finished
//! query lands later. Reads whose records were never explored are counted as wasted.
//!
//! The first reads (the entry point's) are submitted before the query's PQ table is built, so
//! building it overlaps the first round trip (§4.4 "overlapping initialisation").

use std::time::Instant;

use crate::io::{Completion, IoEngine, ReadRequest, Slot};
use crate::kernels::Element;
use crate::kinds::graph::search::explore::{Frontier, KeptRecords};
use crate::kinds::graph::search::machine::{
    record_results, GraphView, QueryMachine, Traversal, Turn,
};
use crate::kinds::graph::search::source::{Expand, GraphSource, GraphSpace, Held};
use crate::kinds::graph::search::{SearchConfig, Strategy};
use crate::search::{stop_part, QueryStats, SearchError};

/// How the pipeline width changes during a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WidthPolicy {
    /// Always [`PipeParams::max_width`].
    Fixed,
    /// From the explored position (PipeANN's Table 3): 4 below position 10, 8 below 20, 16
    /// below 30, 24 below 40, then 32; never above [`PipeParams::max_width`].
    Static,
    /// Start at [`PipeParams::start_width`]; once the explored position reaches
    /// [`PipeParams::adapt_after`], widen by one after every poll in which at least
    /// [`PipeParams::in_pool_threshold`] of the landed reads hold a node still in the list, up
    /// to [`PipeParams::max_width`].
    Dynamic,
}

impl std::str::FromStr for WidthPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(Self::Fixed),
            "static" => Ok(Self::Static),
            "dynamic" => Ok(Self::Dynamic),
            other => Err(format!(
                "unknown width policy {other:?} (fixed, static, dynamic)"
            )),
        }
    }
}

/// Parameters of PipeSearch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PipeParams {
    /// How the width changes.
    pub policy: WidthPolicy,
    /// Width at the start of a query (dynamic policy).
    pub start_width: usize,
    /// Largest width; `≤` the searcher's queue depth.
    pub max_width: usize,
    /// Explored position from which the dynamic policy starts widening.
    pub adapt_after: usize,
    /// Share of a poll's landed reads that must still be in the list to widen, in `(0, 1]`.
    pub in_pool_threshold: f32,
    /// PageSearch inside the pipeline: when a page lands, the exact distances of its other
    /// records enter the result set and the list, and their records are kept, so a kept
    /// candidate is explored later without a read. Pays on the PageShuffle layout, where a
    /// page holds graph neighbours; needs pages that hold whole records.
    pub page_search: bool,
}

/// PipeANN's defaults: dynamic width from 4 to 32, adapting from explored position 5 with a
/// 0.9 threshold.
impl Default for PipeParams {
    fn default() -> Self {
        Self {
            policy: WidthPolicy::Dynamic,
            start_width: 4,
            max_width: 32,
            adapt_after: 5,
            in_pool_threshold: 0.9,
            page_search: false,
        }
    }
}

impl PipeParams {
    /// Checks the parameters against a queue depth.
    pub fn validate(&self, depth: usize) -> Result<(), SearchError> {
        let bad = |m: String| Err(SearchError::InvalidPipe(m));
        if self.max_width == 0 || self.max_width > depth {
            return bad(format!(
                "maximum pipeline width {} must be between 1 and the queue depth {depth}",
                self.max_width
            ));
        }
        if self.start_width == 0 || self.start_width > self.max_width {
            return bad(format!(
                "start width {} must be between 1 and the maximum width {}",
                self.start_width, self.max_width
            ));
        }
        if !(self.in_pool_threshold > 0.0 && self.in_pool_threshold <= 1.0) {
            return bad(format!(
                "in-pool threshold {} must be in (0, 1]",
                self.in_pool_threshold
            ));
        }
        Ok(())
    }
}

/// The width of PipeANN's static policy at an explored position (Table 3 of the paper).
pub fn static_width(explored_position: usize) -> usize {
    match explored_position {
        0..=9 => 4,
        10..=19 => 8,
        20..=29 => 16,
        30..=39 => 24,
        _ => 32,
    }
}

/// The pipeline width of one query, driven by what the search reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WidthController {
    p: PipeParams,
    width: usize,
    adapting: bool,
}

impl Default for WidthController {
    fn default() -> Self {
        Self::new(&PipeParams::default())
    }
}

impl WidthController {
    /// The width at the start of a query.
    pub fn new(p: &PipeParams) -> Self {
        let width = match p.policy {
            WidthPolicy::Fixed => p.max_width,
            WidthPolicy::Static => static_width(0).min(p.max_width),
            WidthPolicy::Dynamic => p.start_width.min(p.max_width),
        };
        Self {
            p: *p,
            width: width.max(1),
            adapting: false,
        }
    }

    /// The current width.
    #[inline]
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether the dynamic policy has started widening.
    pub fn adapting(&self) -> bool {
        self.adapting
    }

    /// After an exploration: `position` is the list position of the nearest candidate not yet
    /// read ([`crate::vamana::queue::CandidateList::cursor`]).
    #[inline]
    pub fn on_explored(&mut self, position: usize) {
        match self.p.policy {
            WidthPolicy::Fixed => {}
            WidthPolicy::Static => self.width = static_width(position).min(self.p.max_width),
            WidthPolicy::Dynamic => {
                if position >= self.p.adapt_after {
                    self.adapting = true;
                }
            }
        }
    }

    /// After a poll in which `landed` reads completed, `in_pool` of them holding a node that is
    /// still in the list.
    #[inline]
    pub fn on_landed(&mut self, landed: usize, in_pool: usize) {
        if self.p.policy != WidthPolicy::Dynamic || !self.adapting || landed == 0 {
            return;
        }
        if in_pool as f32 >= self.p.in_pool_threshold * landed as f32 {
            self.width = (self.width + 1).min(self.p.max_width);
        }
    }
}

/// Marks a node explored from memory instead of a read.
const NO_READ: u32 = u32::MAX;
/// Marks a node explored from the copy of its record PageSearch kept.
const KEPT: u32 = u32::MAX - 1;

/// A node to explore: its PQ distance and the read that brings its record.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u32,
    dist: f32,
    read: u32,
}

/// One read of a query.
#[derive(Debug, Clone, Copy)]
struct PipeRead {
    page: u64,
    slot: Option<Slot>,
    /// Nodes of this read not yet explored.
    left: u32,
    /// Nodes of this read explored.
    explored: u32,
    released: bool,
}

/// The state of one PipeSearch query, usable alone or interleaved with other queries on one
/// engine (tags carry the query's `tag_base` in their high half).
#[derive(Debug, Default)]
pub struct PipeQuery {
    f: Frontier,
    /// Range search: the early stop's reads and radius.
    early: Option<(u64, f32)>,
    reads: Vec<PipeRead>,
    /// Reads not yet released (in flight, or landed with unexplored nodes).
    live: Vec<u32>,
    /// Nodes whose read is in flight.
    waiting: Vec<Pending>,
    /// Nodes whose record is in memory, not yet explored.
    ready: Vec<Pending>,
    width: WidthController,
    in_flight: usize,
    tag_base: u64,
    landed_in_poll: usize,
    in_pool_in_poll: usize,
    mark: Option<Instant>,
    /// Nodes explored from memory (the static cache's records, or lists copied from the list
    /// cache at issue time), explored like landed reads.
    held: Held,
    /// The traversal has converged; reads still in flight are waited out.
    finishing: bool,
    /// PageSearch: records of landed pages scored but not explored yet.
    page_search: bool,
    kept: KeptRecords,
}

impl PipeQuery {
    /// Sends the read of `id` (or joins a live read of its page, or takes it from memory).
    fn submit_node<G: GraphSource>(
        &mut self,
        g: &G,
        engine: &mut dyn IoEngine,
        id: u32,
        dist: f32,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        if g.hold(id, &mut self.held) {
            self.ready.push(Pending {
                id,
                dist,
                read: NO_READ,
            });
            return Ok(());
        }
        let page = g.locate(id);
        let pages = g.pages_per_read();
        if let Some(&r) = self
            .live
            .iter()
            .find(|&&r| self.reads[r as usize].page == page)
        {
            let rd = &mut self.reads[r as usize];
            rd.left += 1;
            let p = Pending { id, dist, read: r };
            if rd.slot.is_some() {
                self.ready.push(p);
            } else {
                self.waiting.push(p);
            }
            return Ok(());
        }
        let r = self.reads.len() as u32;
        engine.submit(
            self.tag_base | u64::from(r),
            ReadRequest {
                first_page: page,
                pages,
            },
        )?;
        self.reads.push(PipeRead {
            page,
            slot: None,
            left: 1,
            explored: 0,
            released: false,
        });
        self.live.push(r);
        self.waiting.push(Pending { id, dist, read: r });
        self.in_flight += 1;
        stats.count_read(pages, g.nodes_on_page(page));
        Ok(())
    }

    /// Issues the read of the nearest unread candidate if the pipeline has room; returns
    /// whether a candidate was taken.
    fn issue_one<G: GraphSource>(
        &mut self,
        g: &G,
        engine: &mut dyn IoEngine,
        stats: &mut QueryStats,
    ) -> Result<bool, SearchError> {
        if self.in_flight >= self.width.width() || !engine.can_submit() {
            return Ok(false);
        }
        if let Some((reads, limit)) = self.early {
            if self.f.stop_early(reads, limit) {
                return Ok(false);
            }
        }
        let Some(c) = self.f.list.pop_unexpanded() else {
            return Ok(false);
        };
        if self.page_search && self.kept.contains(c.id) {
            self.ready.push(Pending {
                id: c.id,
                dist: c.dist,
                read: KEPT,
            });
            return Ok(true);
        }
        self.submit_node(g, engine, c.id, c.dist, stats)?;
        Ok(true)
    }

    /// PageSearch: scores the records of landed read `r` (page `page`) other than the nodes
    /// it was read for, and keeps those new to the query for a later exploration.
    fn score_page<G: GraphSource, T: Element>(
        &mut self,
        src: &GraphView<'_, G>,
        r: u32,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let ready = &self.ready;
        self.kept
            .score_page(src.graph, &src.space, &mut self.f, page, bytes, x, |id| {
                ready.iter().any(|p| p.read == r && p.id == id)
            })
    }

    /// Explores the nearest arrived record; returns whether there was one.
    fn explore_one<G: GraphSource, T: Element>(
        &mut self,
        src: &GraphView<'_, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        let Some(i) = (0..self.ready.len()).min_by(|&a, &b| {
            let (x, y) = (&self.ready[a], &self.ready[b]);
            x.dist.total_cmp(&y.dist).then(x.id.cmp(&y.id))
        }) else {
            return Ok(false);
        };
        let g = src.graph;
        let p = self.ready.swap_remove(i);
        if p.read == NO_READ {
            g.expand_held(&src.space, &mut self.f, p.id, &self.held, &mut t.x)?;
        } else if p.read == KEPT {
            self.kept
                .expand(src.graph, &src.space, &mut self.f, p.id, &mut t.x)?;
        } else {
            let rd = self.reads[p.read as usize];
            let slot = rd
                .slot
                .ok_or_else(|| SearchError::Internal(format!("node {} is not landed", p.id)))?;
            g.expand(
                &src.space,
                &mut self.f,
                p.id,
                rd.page,
                t.engine.buffer(slot),
                &mut t.x,
            )?;
            let rd = &mut self.reads[p.read as usize];
            rd.left -= 1;
            rd.explored += 1;
            if rd.left == 0 {
                t.engine.release(slot);
                rd.released = true;
                self.live.retain(|&r| r != p.read);
            }
        }
        self.width.on_explored(self.f.list.cursor());
        Ok(true)
    }

    /// Takes a completion of this query: its nodes become explorable.
    fn landed<G: GraphSource>(
        &mut self,
        g: &G,
        space: &GraphSpace<'_>,
        engine: &dyn IoEngine,
        c: Completion,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let r = (c.tag & 0xffff_ffff) as u32;
        let rd = &mut self.reads[r as usize];
        rd.slot = Some(c.slot);
        self.in_flight -= 1;
        let page = rd.page;
        let bytes = engine.buffer(c.slot);
        // The neighbours' PQ codes start loading while the page's checksum is verified.
        for p in &self.waiting {
            if p.read == r {
                g.prefetch_expansion(space, p.id, bytes);
            }
        }
        let t0 = stats.parts.start();
        g.check_read(page, bytes)?;
        stop_part(t0, &mut stats.parts.checksum_ns);
        let mut in_pool = false;
        let mut j = 0;
        while j < self.waiting.len() {
            if self.waiting[j].read == r {
                let p = self.waiting.swap_remove(j);
                in_pool |= self.f.list.still_holds(p.id, p.dist);
                self.ready.push(p);
            } else {
                j += 1;
            }
        }
        self.landed_in_poll += 1;
        self.in_pool_in_poll += usize::from(in_pool);
        Ok(())
    }

    /// Ends a poll: the width policy sees what landed in it.
    fn end_poll(&mut self) {
        self.width
            .on_landed(self.landed_in_poll, self.in_pool_in_poll);
        self.landed_in_poll = 0;
        self.in_pool_in_poll = 0;
    }

    /// Whether every candidate in the list has been explored.
    fn converged(&self) -> bool {
        if self.f.list.has_unexpanded() {
            return false;
        }
        !self
            .ready
            .iter()
            .chain(self.waiting.iter())
            .any(|p| self.f.list.still_holds(p.id, p.dist))
    }

    /// Adds the time since the last tick, weighted by reads in flight and by the width, to the
    /// occupancy counters (only while a read is in flight).
    #[inline]
    fn tick(&mut self, stats: &mut QueryStats) {
        let now = Instant::now();
        if let Some(m) = self.mark.replace(now) {
            if self.in_flight > 0 {
                let dt = now.duration_since(m).as_nanos() as u64;
                stats.io.inflight_time_ns += dt * self.in_flight as u64;
                stats.io.width_time_ns += dt * self.width.width() as u64;
            }
        }
    }

    /// Hands back every landed buffer this query still holds and counts the reads none of
    /// whose records were explored. Reads in flight are waited out ([`PipeQuery::discard`]).
    fn finish(&mut self, engine: &mut dyn IoEngine, stats: &mut QueryStats) {
        for &r in &self.live {
            let rd = &mut self.reads[r as usize];
            if let (Some(slot), false) = (rd.slot, rd.released) {
                engine.release(slot);
                rd.released = true;
            }
        }
        self.live.retain(|&r| self.reads[r as usize].slot.is_none());
        self.ready.clear();
        stats.io.wasted_reads += self.reads.iter().filter(|r| r.explored == 0).count() as u64;
        self.mark = None;
    }

    /// A read of this query that landed after [`PipeQuery::finish`]: hand its buffer back.
    fn discard(&mut self, engine: &mut dyn IoEngine, c: Completion) {
        let r = (c.tag & 0xffff_ffff) as usize;
        if let Some(rd) = self.reads.get_mut(r) {
            rd.slot = Some(c.slot);
            rd.released = true;
        }
        self.live.retain(|&x| x as usize != r);
        self.in_flight = self.in_flight.saturating_sub(1);
        engine.release(c.slot);
    }
}

impl<'v, G: GraphSource> QueryMachine<GraphView<'v, G>> for PipeQuery {
    /// Starts a query from `seeds` (nearest first; the medoid when empty): submits the first
    /// reads, then builds the PQ table while they fly.
    fn start<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        cfg: &SearchConfig,
        t: &mut Turn<'_, T>,
        seeds: &[u32],
        tag_base: u64,
    ) -> Result<(), SearchError> {
        let Strategy::Pipe(pp) = cfg.strategy() else {
            return Err(SearchError::Internal(
                "a PipeSearch query started with another strategy".into(),
            ));
        };
        let (space, g) = (&src.space, src.graph);
        self.reads.clear();
        self.live.clear();
        self.waiting.clear();
        self.ready.clear();
        self.in_flight = 0;
        self.tag_base = tag_base;
        self.width = WidthController::new(pp);
        self.landed_in_poll = 0;
        self.in_pool_in_poll = 0;
        self.mark = Some(Instant::now());
        self.finishing = false;
        let medoid = [space.medoid];
        let entry = if seeds.is_empty() { &medoid[..] } else { seeds };
        self.page_search = pp.page_search;
        self.f.set_page_search(pp.page_search);
        self.f.reset(space.n, cfg.l());
        self.f.list.set_radius(cfg.code_radius());
        self.early = cfg
            .range()
            .filter(|r| r.early_stop > 0)
            .map(|r| (r.early_stop as u64, r.code_radius()));
        self.f.set_gate(t.x.keep.and_then(|(q, k)| k.gate(q)));
        // On the page-node layout a hidden vector is left out of the results only.
        let hidden = t.x.hidden.filter(|_| !G::PAGE_NODES);
        if let Some(h) = hidden {
            self.f.hide(h);
        }
        self.kept.reset(space.n, pp.page_search);
        self.held.clear();
        // Overlapping initialisation: the nearest entries' reads go out first.
        let first = entry.len().min(self.width.width());
        let mut issued = 0;
        // Entry points are searched as their nodes (their pages on the page-node layout).
        let skip = |i: usize, id: u32, node: u32| {
            node == u32::MAX
                || hidden == Some(id)
                || entry[..i].iter().any(|&e| g.node_of(e) == node)
        };
        for (i, &id) in entry.iter().enumerate() {
            let node = g.node_of(id);
            if skip(i, id, node) {
                continue;
            }
            self.f.visited.insert(node);
            if issued < first && t.engine.can_submit() {
                self.submit_node(g, &mut *t.engine, node, f32::NAN, t.x.stats)?;
                issued += 1;
            }
        }
        self.f.fill_table(space, t.x.query, t.x.stats)?;
        for (i, &id) in entry.iter().enumerate() {
            let node = g.node_of(id);
            if skip(i, id, node) {
                continue;
            }
            let table = self.f.table.as_ref().expect("filled above");
            let (d, scored) = g.seed_distance(space, table, id, node);
            t.x.stats.traversal.pq_distances += scored;
            self.f.list.insert(node, d);
            let mut pending = false;
            for p in self.waiting.iter_mut().chain(self.ready.iter_mut()) {
                if p.id == node && p.dist.is_nan() {
                    p.dist = d;
                    pending = true;
                }
            }
            if pending {
                self.f.list.mark_expanded(node);
            }
        }
        Ok(())
    }

    fn on_blocked(&mut self, stats: &mut QueryStats) {
        if !self.finishing {
            stats.traversal.hops += 1;
        }
    }

    /// Closes the occupancy interval before the landed reads leave the pipeline.
    fn before_route(&mut self, stats: &mut QueryStats) {
        if !self.finishing {
            self.tick(stats);
        }
    }

    fn on_completion<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
        c: Completion,
    ) -> Result<(), SearchError> {
        if self.finishing {
            self.discard(&mut *t.engine, c);
            return Ok(());
        }
        self.landed(src.graph, &src.space, &*t.engine, c, t.x.stats)?;
        if self.page_search {
            let r = (c.tag & 0xffff_ffff) as u32;
            let page = self.reads[r as usize].page;
            self.score_page(src, r, page, t.engine.buffer(c.slot), &mut t.x)?;
        }
        Ok(())
    }

    fn step<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        if self.finishing {
            return Ok(false);
        }
        let progressed = Traversal::advance(self, src, t)?;
        Traversal::<'v, G>::settle(self, &mut *t.engine, t.x.stats);
        Ok(progressed)
    }

    fn finished(&self) -> bool {
        self.finishing && self.in_flight == 0
    }

    fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>, _stats: &mut QueryStats) {
        record_results(&mut self.f, k, out);
    }

    /// Hands back every landed buffer this query holds and forgets its pending nodes; reads
    /// in flight are drained by the searcher (`search::runner::drain_engine`).
    fn abort(&mut self, engine: &mut dyn IoEngine) {
        for &r in &self.live {
            let rd = &mut self.reads[r as usize];
            if let (Some(slot), false) = (rd.slot, rd.released) {
                engine.release(slot);
                rd.released = true;
            }
        }
        self.live.clear();
        self.ready.clear();
        self.waiting.clear();
        self.in_flight = 0;
    }
}

impl crate::kinds::graph::search::machine::HasFrontier for PipeQuery {
    fn frontier_ref(&self) -> &Frontier {
        &self.f
    }
}

impl<'v, G: GraphSource + 'v> Traversal<'v, G> for PipeQuery {
    /// One turn: the width policy sees the last poll, then at most one read is issued and one
    /// arrived record explored.
    fn advance<T: Element>(
        &mut self,
        src: &GraphView<'v, G>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        self.end_poll();
        self.tick(t.x.stats);
        let mut progressed = self.issue_one(src.graph, &mut *t.engine, t.x.stats)?;
        progressed |= self.explore_one(src, t)?;
        Ok(progressed)
    }
    fn settle(&mut self, engine: &mut dyn IoEngine, stats: &mut QueryStats) {
        if !self.finishing && self.converged() {
            self.tick(stats);
            self.finish(engine, stats);
            self.finishing = true;
        }
    }
    fn traversed(&self) -> bool {
        self.finishing
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn width(&self) -> usize {
        self.width.width()
    }
    fn converging(&self) -> bool {
        !self.f.list.has_unexpanded()
    }
}

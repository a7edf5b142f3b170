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

use std::time::{Duration, Instant};

use super::explore::{check_read, corrupt, Frontier};
use super::{QueryStats, SearchError, SearchParams};
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
        self.f.reset(ix, params.l);
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
        self.frontier.clear();
        self.cached.clear();
        self.reads.clear();
        let geo = *ix.packed().geometry();
        while self.frontier.len() + self.cached.len() < self.width {
            let Some(c) = self.f.list.pop_unexpanded() else {
                break;
            };
            if ix.cache().contains(c.id) {
                self.cached.push(c.id);
                continue;
            }
            let (page, _) = geo.locate(c.id);
            let read = match self.reads.iter().position(|&p| p == page) {
                Some(i) => i,
                None => {
                    self.reads.push(page);
                    self.reads.len() - 1
                }
            };
            self.frontier.push((c.id, read));
        }
        let pages = geo.read_pages() as u32;
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
        for i in 0..self.cached.len() {
            let id = self.cached[i];
            self.f.explore_cached(ix, query, id, vec_scratch, stats)?;
        }
        Ok(true)
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
        check_read(ix, page, bytes)?;
        for i in 0..self.frontier.len() {
            let (id, r) = self.frontier[i];
            if r != read {
                continue;
            }
            let view = ix
                .packed()
                .record(id, bytes)
                .map_err(|d| corrupt(ix, page, d))?;
            if let Some(t) = trace.as_mut() {
                t.push(id);
            }
            self.f.explore(ix, query, id, view, vec_scratch, stats);
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

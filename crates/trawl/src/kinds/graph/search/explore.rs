//! The step every search strategy shares: explore one node — from its record (vector and
//! neighbours) or from its neighbour list alone.

use crate::kernels::{self, Element};
use crate::kinds::graph::layout::packed::RecordView;
use crate::kinds::graph::search::source::{
    Expand, GraphSource, GraphSpace, PageRecords, PqCodesAt,
};
use crate::quant::QuantQuery;
use crate::search::{stop_part, QueryStats, SearchError};
use crate::vamana::queue::{CandidateList, Neighbor, VisitedSet};

/// A corrupt page (or cached record) of the file at `path`.
pub(crate) fn corrupt(path: &std::path::Path, page: u64, detail: String) -> SearchError {
    SearchError::Corrupt {
        path: path.to_path_buf(),
        page,
        detail,
    }
}

/// The per-query state an exploration updates.
#[derive(Debug, Default)]
pub struct Frontier {
    /// The `L` nearest candidates by PQ distance.
    pub(crate) list: CandidateList,
    /// Every node ever offered to the list.
    pub(crate) visited: VisitedSet,
    /// The query's PQ distance table.
    pub(crate) table: Option<QuantQuery>,
    /// Explored nodes with exact distances (the re-rank set of layouts with records).
    pub(crate) full: Vec<Neighbor>,
    /// Nodes explored from their lists alone, with their PQ distances, in order (the re-rank
    /// pool of layouts that keep vectors apart).
    pub(crate) coded: Vec<Neighbor>,
    /// The vector key of each node in `coded` ([`crate::kinds::graph::search::source::NO_KEY`] when its list
    /// carried none).
    pub(crate) coded_keys: Vec<u32>,
    /// PageSearch: nodes whose exact distance is in `full` already (explored, or scored on a
    /// page read for another node); only kept when `page_search` is on.
    scored: VisitedSet,
    page_search: bool,
    fresh: Vec<u32>,
    /// A decoded neighbour list.
    pub(crate) nbrs: Vec<u32>,
    /// The page-node layout's scratch: the pages a list offers that are new to the query.
    pub(crate) fresh_pages: Vec<u32>,
    /// The only nodes the traversal may enter ([`ResultFilter::gate`]), when restricted.
    ///
    /// [`ResultFilter::gate`]: crate::kinds::graph::search::ResultFilter::gate
    gate: Option<roaring::RoaringBitmap>,
    /// Range search's early stop: the nearest exact distance so far, and round trips since it
    /// last improved.
    best_seen: f32,
    stalled: u64,
}

impl Frontier {
    /// Empties the list, the visited set and the explored nodes for a query with list size `l`.
    pub fn reset(&mut self, n: usize, l: usize) {
        self.gate = None;
        self.best_seen = f32::INFINITY;
        self.stalled = 0;
        self.list.reset(l);
        self.visited.reset(n);
        self.full.clear();
        self.coded.clear();
        self.coded_keys.clear();
        self.scored.reset(if self.page_search { n } else { 0 });
    }

    /// Restricts this query's traversal (after [`Frontier::reset`]) to the nodes of `gate`:
    /// no other neighbour is offered to the list.
    pub fn set_gate(&mut self, gate: Option<&roaring::RoaringBitmap>) {
        self.gate = gate.cloned();
    }

    /// Whether the traversal may enter `id`.
    #[inline]
    fn open(&self, id: u32) -> bool {
        self.gate.as_ref().is_none_or(|g| g.contains(id))
    }

    /// Hides `id` from this query (after [`Frontier::reset`]): visited from the start, so
    /// never offered to the list nor expanded, and, under PageSearch, scored already, so a
    /// page read for another node does not put it among the results.
    pub fn hide(&mut self, id: u32) {
        self.visited.insert(id);
        if self.page_search {
            self.scored.insert(id);
        }
    }

    /// Turns PageSearch's bookkeeping on or off (before [`Frontier::reset`]).
    pub fn set_page_search(&mut self, on: bool) {
        self.page_search = on;
    }

    /// PageSearch: whether `id`'s exact distance is known (explored or scored on a page).
    #[inline]
    pub fn is_scored(&self, id: u32) -> bool {
        self.scored.contains(id)
    }

    /// PageSearch: scores `id`, a record on a page read for another node — its exact distance
    /// enters the result set and, if `id` is new to the query, the candidate list (with that
    /// distance). Returns `false` (and does nothing) when `id`'s exact distance is known
    /// already.
    pub fn score_on_page<T: Element>(
        &mut self,
        space: &GraphSpace<'_>,
        query: &[T],
        id: u32,
        view: RecordView<'_>,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> bool {
        if !self.scored.insert(id) {
            return false;
        }
        let t0 = stats.parts.start();
        let v = view.vector::<T>(vec_scratch);
        let d = kernels::distance(space.metric, query, v);
        stop_part(t0, &mut stats.parts.exact_ns);
        self.full.push(Neighbor { id, dist: d });
        stats.traversal.exact_distances += 1;
        if self.visited.insert(id) {
            self.list.insert(id, d);
        }
        true
    }

    /// Builds the query's PQ distance table.
    pub fn fill_table<T: Element>(
        &mut self,
        space: &GraphSpace<'_>,
        query: &[T],
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let t0 = stats.parts.start();
        let pq = space.pq.quantizer;
        let table = self.table.get_or_insert_with(|| pq.new_query());
        let r = pq
            .fill_query(query, table)
            .map_err(|_| SearchError::NonFiniteQuery { row: 0 });
        stop_part(t0, &mut stats.parts.pq_table_ns);
        r
    }

    /// PQ distance of node `id` to the query.
    #[inline]
    pub fn pq_distance(&self, space: &GraphSpace<'_>, id: u32) -> f32 {
        let table = self.table.as_ref().expect("filled at query start");
        space.pq.distance(table, id)
    }

    /// Offers the entry points (nearest first; the medoid when empty) to the list, each as the
    /// search node `g` makes of it (the vector itself, or on the page-node layout its page)
    /// with the distance `g` gives it ([`GraphSource::seed_distance`]).
    pub fn seed<G: GraphSource>(
        &mut self,
        space: &GraphSpace<'_>,
        g: &G,
        entry: &[u32],
        stats: &mut QueryStats,
    ) {
        let medoid = [space.medoid];
        let entry = if entry.is_empty() { &medoid[..] } else { entry };
        let table = self.table.as_ref().expect("filled at query start");
        for &id in entry {
            let node = g.node_of(id);
            if node != u32::MAX && self.visited.insert(node) {
                let (d, scored) = g.seed_distance(space, table, id, node);
                self.list.insert(node, d);
                stats.traversal.pq_distances += scored;
            }
        }
    }

    /// Range search's early stop, called once per round trip: a query that has found nothing
    /// within `limit` (the corrected radius) by exact distance, has no candidate within it
    /// waiting, and whose nearest exact distance has not improved for `patience` round trips
    /// in a row (0: never) stops — its search has settled away from the radius, where most
    /// such queries have no result at all and the rest of the search would only confirm it.
    /// Returns whether the search stopped.
    pub fn stop_early(&mut self, patience: u64, limit: f32) -> bool {
        if patience == 0 || self.full.is_empty() {
            return false;
        }
        let best = self
            .full
            .iter()
            .map(|n| n.dist)
            .fold(f32::INFINITY, f32::min);
        if best < self.best_seen {
            self.best_seen = best;
            self.stalled = 0;
        } else {
            self.stalled += 1;
        }
        if patience == 0 || self.stalled < patience || best <= limit {
            return false;
        }
        if self.list.overflow_len() > 0
            || self.list.peek_unexpanded().is_some_and(|c| c.dist <= limit)
        {
            return false;
        }
        self.list.drop_unexpanded();
        true
    }

    /// The `k` explored nodes nearest by exact distance, nearest first.
    pub fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>) {
        sorted_results(&mut self.full, k, out);
    }

    /// Explores `id` from its record: the exact distance of its vector (kept for the re-rank)
    /// and the PQ distances of its unvisited neighbours (offered to the list).
    #[inline]
    pub fn explore<T: Element>(
        &mut self,
        space: &GraphSpace<'_>,
        query: &[T],
        id: u32,
        view: RecordView<'_>,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) {
        if !self.page_search || self.scored.insert(id) {
            let t0 = stats.parts.start();
            let v = view.vector::<T>(vec_scratch);
            let d = kernels::distance(space.metric, query, v);
            stop_part(t0, &mut stats.parts.exact_ns);
            self.full.push(Neighbor { id, dist: d });
            stats.traversal.exact_distances += 1;
        }
        stats.traversal.nodes_expanded += 1;
        let table = self.table.as_ref().expect("filled at query start");
        if view.has_codes() {
            // All-in-Storage: the neighbours' codes came with the record.
            let mut scored = 0u64;
            for (i, nb) in view.neighbors().enumerate() {
                if self.visited.insert(nb) && self.open(nb) {
                    let code = view.neighbor_code(i).unwrap_or(&[]);
                    self.list.insert(nb, table.distance(code));
                    scored += 1;
                }
            }
            stats.traversal.pq_distances += scored;
            return;
        }
        self.offer_neighbors(space, view.neighbors(), stats);
    }

    /// Offers the unvisited `neighbors` to the list with their PQ distances (codes in memory).
    #[inline]
    fn offer_neighbors(
        &mut self,
        space: &GraphSpace<'_>,
        neighbors: impl Iterator<Item = u32>,
        stats: &mut QueryStats,
    ) {
        let t0 = stats.parts.start();
        self.fresh.clear();
        for nb in neighbors {
            if self.visited.insert(nb) && self.open(nb) {
                self.fresh.push(nb);
            }
        }
        stop_part(t0, &mut stats.parts.visited_ns);
        let (PqCodesAt::Memory(codes), Some(table)) = (space.pq.codes, self.table.as_ref()) else {
            return;
        };
        let t0 = stats.parts.start();
        for &nb in &self.fresh {
            codes.prefetch(nb as usize);
        }
        for &nb in &self.fresh {
            self.list
                .insert(nb, table.distance(codes.code(nb as usize)));
        }
        stop_part(t0, &mut stats.parts.pq_score_ns);
        stats.traversal.pq_distances += self.fresh.len() as u64;
    }

    /// Explores `id` from its neighbour list alone, decoded into `self.nbrs`: its PQ distance
    /// (and the vector `key` its list carried) enters the re-rank pool, its unvisited
    /// neighbours' PQ distances enter the list.
    pub fn explore_list(
        &mut self,
        space: &GraphSpace<'_>,
        id: u32,
        key: u32,
        stats: &mut QueryStats,
    ) {
        let pq = self.pq_distance(space, id);
        self.coded.push(Neighbor { id, dist: pq });
        self.coded_keys.push(key);
        stats.traversal.nodes_expanded += 1;
        let nbrs = std::mem::take(&mut self.nbrs);
        self.offer_neighbors(space, nbrs.iter().copied(), stats);
        self.nbrs = nbrs;
    }
}

/// Sorts `full` by (distance, id) and puts its first `k` into `out`.
pub(crate) fn sorted_results(full: &mut [Neighbor], k: usize, out: &mut Vec<(u32, f32)>) {
    full.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
    out.clear();
    out.extend(full.iter().take(k).map(|n| (n.id, n.dist)));
}

/// PageSearch's copies of the records scored on pages read and not explored yet, shared by
/// beam search and PipeSearch: a kept candidate is explored later from its copy, without a
/// read. Copies rather than held pages keep the engine's slots bounded by the search width.
#[derive(Debug, Default)]
pub(crate) struct KeptRecords {
    /// `(id, offset in bytes)` of each kept record.
    kept: Vec<(u32, u32)>,
    ids: VisitedSet,
    bytes: Vec<u8>,
    page_ids: Vec<u32>,
}

impl KeptRecords {
    /// Forgets every kept record for a query over `n` nodes (`on`: PageSearch is used).
    pub fn reset(&mut self, n: usize, on: bool) {
        self.kept.clear();
        self.bytes.clear();
        self.ids.reset(if on { n } else { 0 });
    }

    /// Whether `id`'s record is kept.
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        self.ids.contains(id)
    }

    /// Scores the records on `page` (its bytes, checked) except those whose exact distance is
    /// known and those `skip` names, through [`Frontier::score_on_page`]; keeps a copy of each
    /// record new to the query.
    #[allow(clippy::too_many_arguments)]
    pub fn score_page<G: GraphSource, T: Element>(
        &mut self,
        g: &G,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
        skip: impl Fn(u32) -> bool,
    ) -> Result<(), SearchError> {
        let records = page_records(g)?;
        self.page_ids.clear();
        records.ids_on_page(page, &mut self.page_ids);
        let rb = records.record_bytes();
        for i in 0..self.page_ids.len() {
            let id = self.page_ids[i];
            if f.is_scored(id) || skip(id) {
                continue;
            }
            let view = records
                .record(id, bytes)
                .map_err(|d| corrupt(g.path(), page, d))?;
            if f.score_on_page(space, x.query, id, view, x.scratch, x.stats) && self.ids.insert(id)
            {
                let at = records.offset(id);
                self.kept.push((id, self.bytes.len() as u32));
                self.bytes.extend_from_slice(&bytes[at..at + rb]);
            }
        }
        Ok(())
    }

    /// Explores `id` from its kept copy (counted as a page hit).
    pub fn expand<G: GraphSource, T: Element>(
        &self,
        g: &G,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let records = page_records(g)?;
        let rb = records.record_bytes();
        let at = self
            .kept
            .iter()
            .find(|h| h.0 == id)
            .map(|h| h.1 as usize)
            .ok_or_else(|| SearchError::Internal(format!("record {id} was not kept")))?;
        let view = records
            .decode(id, &self.bytes[at..at + rb])
            .map_err(|d| corrupt(g.path(), g.locate(id), d))?;
        f.explore(space, x.query, id, view, x.scratch, x.stats);
        x.stats.traversal.page_hits += 1;
        Ok(())
    }
}

/// The page records PageSearch reads (refused for such layouts when the parameters are
/// checked, so a layout without them here is a bug).
pub(crate) fn page_records<G: GraphSource>(g: &G) -> Result<&G::Records, SearchError> {
    g.page_records().ok_or_else(|| {
        SearchError::Internal("PageSearch on a layout whose pages hold no records".into())
    })
}

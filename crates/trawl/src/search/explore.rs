//! The step every search strategy shares: explore one record.

use std::time::Instant;

use super::rerank::Rerank;
use super::{QueryStats, SearchError};
use crate::graph::queue::{CandidateList, Neighbor, VisitedSet};
use crate::index::DiskIndex;
use crate::kernels::{self, Element};
use crate::layout::packed::RecordView;
use crate::quant::pq::QueryTable;

/// A corrupt page (or cached record) of the index file.
pub(crate) fn corrupt(ix: &DiskIndex, page: u64, detail: String) -> SearchError {
    SearchError::Corrupt {
        path: ix.layout_path().to_path_buf(),
        page,
        detail,
    }
}

/// Checks `bytes`, read from `page` on, against the page checksums (when the index checks them).
pub(crate) fn check_read(ix: &DiskIndex, page: u64, bytes: &[u8]) -> Result<(), SearchError> {
    if let (true, Some(packed)) = (ix.verify_pages(), ix.packed()) {
        packed
            .check_pages(page, bytes)
            .map_err(|p| corrupt(ix, page, format!("checksum mismatch in page {p}")))?;
    }
    Ok(())
}

/// The per-query state an exploration updates.
#[derive(Debug, Default)]
pub(crate) struct Frontier {
    /// The `L` nearest candidates by PQ distance.
    pub list: CandidateList,
    /// Every node ever offered to the list.
    pub visited: VisitedSet,
    /// The query's PQ distance table.
    pub table: Option<QueryTable>,
    /// Explored nodes with exact distances (the re-rank set).
    pub full: Vec<Neighbor>,
    /// PageSearch: nodes whose exact distance is in `full` already (explored, or scored on a
    /// page read for another node); only kept when `page_search` is on.
    scored: VisitedSet,
    page_search: bool,
    fresh: Vec<u32>,
    /// Decoupled layout: the re-rank state (expanded nodes, vector reads, exact distances).
    pub rerank: Rerank,
    /// Decoupled layout: a decoded neighbour list.
    nbrs: Vec<u32>,
}

impl Frontier {
    /// Empties the list, the visited set and the explored nodes for a query with list size `l`.
    pub fn reset(&mut self, ix: &DiskIndex, l: usize) {
        self.list.reset(l);
        self.visited.reset(ix.n());
        self.full.clear();
        self.scored.reset(if self.page_search { ix.n() } else { 0 });
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
        ix: &DiskIndex,
        query: &[T],
        id: u32,
        view: RecordView<'_>,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> bool {
        if !self.scored.insert(id) {
            return false;
        }
        let v = view.vector::<T>(vec_scratch);
        let d = kernels::distance(ix.metric(), query, v);
        self.full.push(Neighbor { id, dist: d });
        stats.exact_distances += 1;
        if self.visited.insert(id) {
            self.list.insert(id, d);
        }
        true
    }

    /// Builds the query's PQ distance table.
    pub fn fill_table<T: Element>(
        &mut self,
        ix: &DiskIndex,
        query: &[T],
    ) -> Result<(), SearchError> {
        let table = self
            .table
            .get_or_insert_with(|| QueryTable::new(ix.pq().m()));
        ix.pq()
            .fill_table(query, table)
            .map_err(|_| SearchError::NonFiniteQuery { row: 0 })
    }

    /// PQ distance of node `id` to the query. The All-in-Storage layout keeps no codes in
    /// memory, only the medoid's (in its header): the only node scored this way there.
    #[inline]
    pub fn pq_distance(&self, ix: &DiskIndex, id: u32) -> f32 {
        let table = self.table.as_ref().expect("filled at query start");
        match ix.codes() {
            Some(codes) => table.distance(codes.code(id as usize)),
            None => table.distance(ix.packed().map_or(&[][..], |p| p.medoid_code())),
        }
    }

    /// The `k` explored nodes nearest by exact distance, nearest first.
    pub fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>) {
        let full = &mut self.full;
        full.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
        out.clear();
        out.extend(full.iter().take(k).map(|n| (n.id, n.dist)));
    }

    /// Explores `id` from its record: the exact distance of its vector (kept for the re-rank)
    /// and the PQ distances of its unvisited neighbours (offered to the list).
    #[inline]
    pub fn explore<T: Element>(
        &mut self,
        ix: &DiskIndex,
        query: &[T],
        id: u32,
        view: RecordView<'_>,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) {
        if !self.page_search || self.scored.insert(id) {
            let v = view.vector::<T>(vec_scratch);
            let d = kernels::distance(ix.metric(), query, v);
            self.full.push(Neighbor { id, dist: d });
            stats.exact_distances += 1;
        }
        stats.nodes_expanded += 1;
        let table = self.table.as_ref().expect("filled at query start");
        if view.has_codes() {
            // All-in-Storage: the neighbours' codes came with the record.
            let mut scored = 0u64;
            for (i, nb) in view.neighbors().enumerate() {
                if self.visited.insert(nb) {
                    let code = view.neighbor_code(i).unwrap_or(&[]);
                    self.list.insert(nb, table.distance(code));
                    scored += 1;
                }
            }
            stats.pq_distances += scored;
            return;
        }
        self.offer_neighbors(ix, view.neighbors(), stats);
    }

    /// Offers the unvisited `neighbors` to the list with their PQ distances (codes in memory).
    #[inline]
    fn offer_neighbors(
        &mut self,
        ix: &DiskIndex,
        neighbors: impl Iterator<Item = u32>,
        stats: &mut QueryStats,
    ) {
        self.fresh.clear();
        for nb in neighbors {
            if self.visited.insert(nb) {
                self.fresh.push(nb);
            }
        }
        let (Some(codes), Some(table)) = (ix.codes(), self.table.as_ref()) else {
            return;
        };
        for &nb in &self.fresh {
            codes.prefetch(nb as usize);
        }
        for &nb in &self.fresh {
            self.list
                .insert(nb, table.distance(codes.code(nb as usize)));
        }
        stats.pq_distances += self.fresh.len() as u64;
    }

    /// Decoupled layout: explores `id` from its coded neighbour list (read from a graph page
    /// or the list cache) — its PQ distance enters the re-rank pool, its unvisited
    /// neighbours' PQ distances enter the list.
    pub fn explore_coded(
        &mut self,
        ix: &DiskIndex,
        id: u32,
        degree: usize,
        coded: &[u8],
        page: u64,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let Some(d) = ix.decoupled() else {
            return Err(corrupt(ix, page, "not a decoupled index".into()));
        };
        let t0 = Instant::now();
        d.graph
            .decode_list(degree, coded, &mut self.nbrs)
            .map_err(|e| corrupt(ix, page, format!("node {id}: {e}")))?;
        stats.list_decode_ns += t0.elapsed().as_nanos() as u64;
        let pq = self.pq_distance(ix, id);
        self.rerank.observe(id, pq);
        stats.nodes_expanded += 1;
        let nbrs = std::mem::take(&mut self.nbrs);
        self.offer_neighbors(ix, nbrs.iter().copied(), stats);
        self.nbrs = nbrs;
        Ok(())
    }

    /// Decoupled layout: the result set becomes every exact distance the re-rank computed.
    pub fn take_reranked(&mut self) {
        self.rerank.results(&mut self.full);
    }

    /// Explores `id` from the static cache (counted as a cache hit).
    pub fn explore_cached<T: Element>(
        &mut self,
        ix: &DiskIndex,
        query: &[T],
        id: u32,
        vec_scratch: &mut Vec<T>,
        stats: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let rec = ix.cache().record(id).unwrap_or(&[]);
        let view = ix
            .packed_file()?
            .decode(id, rec)
            .map_err(|d| corrupt(ix, 0, format!("cached {d}")))?;
        self.explore(ix, query, id, view, vec_scratch, stats);
        stats.cache_hits += 1;
        Ok(())
    }
}

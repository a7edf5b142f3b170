//! Each strategy driven over a synthetic page source — an `S × S` grid graph, no index build —
//! with exact expected visit orders and counter identities.
//!
//! Node `y·S + x` sits at `(x, y)` and links to its 4-neighbourhood. Its PQ code is `[x, y]`
//! under a quantiser whose centroids are the integers 0..255 in each of two 1-d subspaces, so
//! PQ distances are exact and a search's order can be worked out by hand. Pages hold
//! `per_page` nodes in id order; the engine completes reads in submission order and logs them.

use std::collections::{HashSet, VecDeque};
use std::path::Path;

use crate::io::{
    Completion, EngineCounters, EngineInfo, IoEngine, IoError, ReadRequest, Slot, PAGE_BYTES,
};
use crate::kernels::{Element, Metric};
use crate::kinds::graph::layout::packed::RecordView;
use crate::kinds::graph::search::explore::{corrupt, Frontier};
use crate::kinds::graph::search::machine::{GraphView, Reranked};
use crate::kinds::graph::search::searcher::run_on;
use crate::kinds::graph::search::source::{
    Expand, GraphSource, GraphSpace, Held, NoRecords, PageRecords, PqCodesAt, PqSource,
};
use crate::kinds::graph::search::*;
use crate::quant::pq::{PqCodes, ProductQuantizer};
use crate::search::rerank::VectorSource;
use crate::search::*;

/// Bytes of one grid record: x, y (f32), degree (u32), 4 neighbour slots (u32).
const REC: usize = 28;

struct Grid {
    side: usize,
    per_page: usize,
    /// Page 0 is a header; node `i` is on page `1 + i / per_page`.
    pages: Vec<Vec<u8>>,
    cached: HashSet<u32>,
    /// Vector pages (for the re-rank), after the graph pages: `vpp` vectors per page.
    vpp: usize,
}

fn neighbors(side: usize, i: u32) -> Vec<u32> {
    let (x, y) = ((i as usize % side) as i64, (i as usize / side) as i64);
    let mut out: Vec<u32> = [(0, -1), (-1, 0), (1, 0), (0, 1)]
        .iter()
        .map(|(dx, dy)| (x + dx, y + dy))
        .filter(|&(a, b)| a >= 0 && b >= 0 && a < side as i64 && b < side as i64)
        .map(|(a, b)| (b as usize * side + a as usize) as u32)
        .collect();
    out.sort_unstable();
    out
}

impl Grid {
    fn new(side: usize, per_page: usize, vpp: usize) -> Self {
        let n = side * side;
        let mut pages = vec![vec![0u8; PAGE_BYTES]];
        for first in (0..n).step_by(per_page) {
            let mut p = vec![0u8; PAGE_BYTES];
            for i in first..(first + per_page).min(n) {
                let at = (i - first) * REC;
                let r = &mut p[at..at + REC];
                r[0..4].copy_from_slice(&((i % side) as f32).to_le_bytes());
                r[4..8].copy_from_slice(&((i / side) as f32).to_le_bytes());
                let nb = neighbors(side, i as u32);
                r[8..12].copy_from_slice(&(nb.len() as u32).to_le_bytes());
                for (j, v) in nb.iter().enumerate() {
                    r[12 + 4 * j..16 + 4 * j].copy_from_slice(&v.to_le_bytes());
                }
            }
            pages.push(p);
        }
        for first in (0..n).step_by(vpp) {
            let mut p = vec![0u8; PAGE_BYTES];
            for i in first..(first + vpp).min(n) {
                let at = (i - first) * 8;
                p[at..at + 4].copy_from_slice(&((i % side) as f32).to_le_bytes());
                p[at + 4..at + 8].copy_from_slice(&((i / side) as f32).to_le_bytes());
            }
            pages.push(p);
        }
        Self {
            side,
            per_page,
            pages,
            cached: HashSet::new(),
            vpp,
        }
    }

    fn n(&self) -> usize {
        self.side * self.side
    }

    fn graph_pages(&self) -> u64 {
        1 + self.n().div_ceil(self.per_page) as u64
    }

    fn record_at<'a>(&self, id: u32, bytes: &'a [u8]) -> Result<RecordView<'a>, String> {
        let at = self.offset(id);
        let r = bytes.get(at..at + REC).ok_or("outside the page")?;
        let degree = u32::from_le_bytes(r[8..12].try_into().unwrap()) as usize;
        Ok(RecordView::from_parts(
            &r[..8],
            &r[12..12 + 4 * degree],
            &[],
            0,
        ))
    }
}

impl PageRecords for Grid {
    fn ids_on_page(&self, page: u64, out: &mut Vec<u32>) {
        let first = (page as usize - 1) * self.per_page;
        out.extend((first..(first + self.per_page).min(self.n())).map(|i| i as u32));
    }
    fn offset(&self, id: u32) -> usize {
        (id as usize % self.per_page) * REC
    }
    fn record_bytes(&self) -> usize {
        REC
    }
    fn record<'a>(&self, id: u32, bytes: &'a [u8]) -> Result<RecordView<'a>, String> {
        self.record_at(id, bytes)
    }
    fn decode<'a>(&self, id: u32, rec: &'a [u8]) -> Result<RecordView<'a>, String> {
        let degree = u32::from_le_bytes(rec[8..12].try_into().unwrap()) as usize;
        let _ = id;
        Ok(RecordView::from_parts(
            &rec[..8],
            &rec[12..12 + 4 * degree],
            &[],
            0,
        ))
    }
}

impl GraphSource for Grid {
    const RECORDS: bool = true;
    type Records = Grid;
    fn path(&self) -> &Path {
        Path::new("grid")
    }
    fn locate(&self, id: u32) -> u64 {
        1 + (id as usize / self.per_page) as u64
    }
    fn pages_per_read(&self) -> u32 {
        1
    }
    fn nodes_on_page(&self, page: u64) -> u64 {
        let mut v = Vec::new();
        self.ids_on_page(page, &mut v);
        v.len() as u64
    }
    fn check_read(&self, _page: u64, _bytes: &[u8]) -> Result<(), SearchError> {
        Ok(())
    }
    fn hold(&self, id: u32, held: &mut Held) -> bool {
        let hit = self.cached.contains(&id);
        if hit {
            held.push_id(id);
        }
        hit
    }
    fn expand_held<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        _held: &Held,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let page = &self.pages[self.locate(id) as usize];
        let view = self
            .record_at(id, page)
            .map_err(|d| corrupt(self.path(), 0, d))?;
        f.explore(space, x.query, id, view, x.scratch, x.stats);
        x.stats.traversal.cache_hits += 1;
        Ok(())
    }
    fn expand<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let view = self
            .record_at(id, bytes)
            .map_err(|d| corrupt(self.path(), page, d))?;
        f.explore(space, x.query, id, view, x.scratch, x.stats);
        Ok(())
    }
    fn page_records(&self) -> Option<&Grid> {
        Some(self)
    }
}

/// The same grid as a layout of neighbour lists without vectors, re-ranked from its vector
/// pages (the decoupled layout's shape).
struct ListGrid(Grid);

impl GraphSource for ListGrid {
    const RECORDS: bool = false;
    type Records = NoRecords;
    fn path(&self) -> &Path {
        Path::new("grid-lists")
    }
    fn locate(&self, id: u32) -> u64 {
        self.0.locate(id)
    }
    fn pages_per_read(&self) -> u32 {
        1
    }
    fn nodes_on_page(&self, page: u64) -> u64 {
        self.0.nodes_on_page(page)
    }
    fn check_read(&self, _page: u64, _bytes: &[u8]) -> Result<(), SearchError> {
        Ok(())
    }
    fn hold(&self, _id: u32, _held: &mut Held) -> bool {
        false
    }
    fn expand_held<T: Element>(
        &self,
        _space: &GraphSpace<'_>,
        _f: &mut Frontier,
        id: u32,
        _held: &Held,
        _x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        Err(SearchError::Internal(format!("list {id} was never held")))
    }
    fn expand<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        _page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let view = self.0.record_at(id, bytes).map_err(SearchError::Internal)?;
        f.nbrs.clear();
        f.nbrs.extend(view.neighbors());
        f.explore_list(
            space,
            id,
            crate::kinds::graph::search::source::NO_KEY,
            x.stats,
        );
        Ok(())
    }
    fn page_records(&self) -> Option<&NoRecords> {
        None
    }
}

impl VectorSource for ListGrid {
    fn vector_page(&self, id: u32, _key: u32) -> u64 {
        self.0.graph_pages() + (id as usize / self.0.vpp) as u64
    }
    fn vectors_on_page(&self, page: u64) -> u64 {
        let first = (page - self.0.graph_pages()) as usize * self.0.vpp;
        (self.0.n() - first).min(self.0.vpp) as u64
    }
    fn decode_vector(
        &self,
        id: u32,
        _key: u32,
        _page: u64,
        bytes: &[u8],
        out: &mut [u8],
    ) -> Result<(), SearchError> {
        let at = (id as usize % self.0.vpp) * 8;
        out.copy_from_slice(&bytes[at..at + 8]);
        Ok(())
    }
}

/// Completes reads in submission order, logging each read's first page.
struct LogEngine {
    pages: Vec<Vec<u8>>,
    depth: usize,
    held: Vec<Option<u64>>,
    done: VecDeque<(u64, Slot)>,
    in_flight: usize,
    log: Log,
    counters: EngineCounters,
}

/// First pages of the reads an engine was given, in order.
type Log = std::sync::Arc<std::sync::Mutex<Vec<u64>>>;

impl LogEngine {
    /// An engine over `pages` and the handle of its log.
    fn create(pages: Vec<Vec<u8>>, depth: usize) -> (Box<dyn IoEngine>, Log) {
        let log = Log::default();
        let e = Self {
            pages,
            depth,
            held: vec![None; depth],
            done: VecDeque::new(),
            in_flight: 0,
            log: log.clone(),
            counters: EngineCounters::default(),
        };
        (Box::new(e), log)
    }
}

fn read_log(log: &Log) -> Vec<u64> {
    log.lock().unwrap().clone()
}

impl IoEngine for LogEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "log",
            direct: false,
            registered_buffers: false,
            sqpoll: false,
            taskrun: Default::default(),
        }
    }
    fn depth(&self) -> usize {
        self.depth
    }
    fn max_pages_per_read(&self) -> usize {
        1
    }
    fn file_pages(&self) -> u64 {
        self.pages.len() as u64
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn can_submit(&self) -> bool {
        self.held.iter().any(Option::is_none)
    }
    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        let s = self
            .held
            .iter()
            .position(Option::is_none)
            .ok_or(IoError::QueueFull { depth: self.depth })?;
        self.held[s] = Some(req.first_page);
        self.done.push_back((tag, Slot(s as u32)));
        self.in_flight += 1;
        self.log.lock().unwrap().push(req.first_page);
        self.counters.requests += 1;
        self.counters.pages += u64::from(req.pages);
        Ok(())
    }
    fn wait(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        let n = self.done.len();
        for (tag, slot) in self.done.drain(..) {
            out.push(Completion { tag, slot });
        }
        self.in_flight -= n;
        self.counters.completions += n as u64;
        self.counters.bytes += (n * PAGE_BYTES) as u64;
        Ok(n)
    }
    fn buffer(&self, slot: Slot) -> &[u8] {
        match self.held[slot.0 as usize] {
            Some(p) => &self.pages[p as usize],
            None => &[],
        }
    }
    fn release(&mut self, slot: Slot) {
        self.held[slot.0 as usize] = None;
    }
    fn counters(&self) -> EngineCounters {
        self.counters
    }
}

/// A quantiser whose codes are the coordinates themselves, and the grid's codes.
fn exact_pq(side: usize) -> (crate::quant::Quantiser, PqCodes) {
    let mut centroids = Vec::with_capacity(512);
    for _ in 0..2 {
        centroids.extend((0..256).map(|c| c as f32));
    }
    let pq =
        ProductQuantizer::from_parts(Metric::L2, 2, vec![0, 1, 2], 256, centroids, None).unwrap();
    let codes: Vec<u8> = (0..side * side)
        .flat_map(|i| [(i % side) as u8, (i / side) as u8])
        .collect();
    (
        crate::quant::Quantiser::Pq(pq),
        PqCodes::from_vec(codes, 2, 256).unwrap(),
    )
}

fn space<'a>(side: usize, pq: &'a crate::quant::Quantiser, codes: &'a PqCodes) -> GraphSpace<'a> {
    GraphSpace {
        n: side * side,
        dim: 2,
        dtype: crate::DType::F32,
        metric: Metric::L2,
        medoid: 0,
        pq: PqSource {
            quantizer: pq,
            codes: PqCodesAt::Memory(codes),
        },
        entry: None,
    }
}

fn caps(n: usize, records: bool) -> Capabilities {
    Capabilities {
        n: n as u64,
        records,
        rerank_from_disk: !records,
        entry_index: false,
        pq_in_memory: true,
        page_nodes: false,
    }
}

fn config(p: &SearchParams, n: usize, records: bool) -> SearchConfig {
    SearchConfig::new(p, &caps(n, records), 64).unwrap()
}

/// The exact `k` nearest grid nodes of `q`.
fn brute(side: usize, q: [f32; 2], k: usize) -> Vec<u32> {
    let mut all: Vec<(f32, u32)> = (0..side * side)
        .map(|i| {
            let (x, y) = ((i % side) as f32, (i / side) as f32);
            ((q[0] - x).powi(2) + (q[1] - y).powi(2), i as u32)
        })
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.iter().take(k).map(|p| p.1).collect()
}

/// Beam search with W = 1 on an 8 × 8 grid from the corner: best-first, one read per round
/// trip. The order was worked out by hand (and by an independent best-first search).
#[test]
fn beam_search_visits_the_grid_in_best_first_order() {
    let g = Grid::new(8, 1, 8);
    let (pq, codes) = exact_pq(8);
    let view = GraphView {
        space: space(8, &pq, &codes),
        graph: &g,
    };
    let p = SearchParams::beam(3, 6, 1);
    let q = vec![vec![5.2f32, 6.1]];
    let (engine, log) = LogEngine::create(g.pages.clone(), 64);
    let (out, trace, engine) =
        run_on::<_, BeamQuery, f32>(engine, &view, &config(&p, 64, true), 1, &q).unwrap();
    let order = [0, 8, 9, 17, 18, 26, 27, 35, 36, 44, 45, 53, 54, 61, 52, 62];
    assert_eq!(trace, order);
    let pages: Vec<u64> = order.iter().map(|&i| u64::from(i) + 1).collect();
    assert_eq!(
        read_log(&log),
        pages,
        "one read per expansion, its node's page"
    );
    let (hits, st) = &out[0];
    let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
    assert_eq!(ids, [53, 54, 61]);
    assert_eq!(ids, brute(8, [5.2, 6.1], 3));
    // One record per page: a read per expansion, one round trip each.
    let n = order.len() as u64;
    assert_eq!(st.traversal.nodes_expanded, n);
    assert_eq!(st.traversal.exact_distances, n);
    assert_eq!(st.traversal.hops, n);
    assert_eq!((st.io.io_requests, st.io.pages_read), (n, n));
    assert_eq!(st.io.bytes_read, n * PAGE_BYTES as u64);
    assert_eq!(st.io.records_read, n);
    // Every node ever offered to the list was scored once: the medoid and 29 neighbours.
    assert_eq!(st.traversal.pq_distances, 30);
    assert_eq!(st.traversal.cache_hits + st.traversal.page_hits, 0);
    let c = engine.counters();
    assert_eq!((c.requests, c.completions), (n, n));
    assert_eq!(engine.in_flight(), 0);
}

/// With W = 2 and 4 records per page, each round reads the distinct pages of its two
/// candidates; cached nodes are expanded without a read. Counters agree with the engine's log.
#[test]
fn beam_rounds_share_pages_and_the_cache_saves_reads() {
    let mut g = Grid::new(8, 4, 8);
    let (pq, codes) = exact_pq(8);
    let q: Vec<Vec<f32>> = vec![vec![5.2, 6.1], vec![1.3, 6.7], vec![6.6, 0.4]];
    let p = SearchParams::beam(5, 12, 2);
    let run = |g: &Grid| {
        let view = GraphView {
            space: space(8, &pq, &codes),
            graph: g,
        };
        let (engine, _log) = LogEngine::create(g.pages.clone(), 64);
        run_on::<_, BeamQuery, f32>(engine, &view, &config(&p, 64, true), 1, &q).unwrap()
    };
    let (plain, trace, engine) = run(&g);
    let total = plain.iter().fold(QueryStats::default(), |mut t, (_, s)| {
        t += *s;
        t
    });
    assert_eq!(total.io.io_requests, engine.counters().requests);
    assert_eq!(total.io.pages_read, engine.counters().pages);
    assert_eq!(total.io.records_read, 4 * total.io.io_requests);
    assert_eq!(total.traversal.nodes_expanded, trace.len() as u64);
    // Two candidates on one page cost one read: fewer reads than expansions.
    assert!(total.io.io_requests < total.traversal.nodes_expanded);
    assert!(total.io.io_requests <= 2 * total.traversal.hops);
    for (i, (hits, _)) in plain.iter().enumerate() {
        let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
        assert_eq!(ids, brute(8, [q[i][0], q[i][1]], 5), "query {i}");
    }
    // Cache the first query's first four expansions: same results, as many fewer reads of
    // those nodes, counted as cache hits.
    g.cached = trace[..4].iter().copied().collect();
    let (cached, trace2, _) = run(&g);
    assert_eq!(
        cached.iter().map(|c| &c.0).collect::<Vec<_>>(),
        plain.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
    let hits: u64 = cached.iter().map(|c| c.1.traversal.cache_hits).sum();
    let expanded: u64 = cached.iter().map(|c| c.1.traversal.nodes_expanded).sum();
    assert_eq!(
        hits + trace2.len() as u64,
        expanded,
        "every expansion is a read or a hit"
    );
    assert!(hits >= 4);
}

/// PageSearch on 4 records per page: every record of every page read is scored once; nodes
/// expanded from a kept page cost no read.
#[test]
fn page_search_scores_each_record_once_and_expands_without_reads() {
    let g = Grid::new(8, 4, 8);
    let (pq, codes) = exact_pq(8);
    let view = GraphView {
        space: space(8, &pq, &codes),
        graph: &g,
    };
    let q = vec![vec![5.2f32, 6.1]];
    let p = SearchParams {
        strategy: Strategy::Beam(BeamParams {
            width: 2,
            page_search: true,
            ..BeamParams::default()
        }),
        ..SearchParams::beam(3, 8, 2)
    };
    let (engine, log) = LogEngine::create(g.pages.clone(), 64);
    let (out, trace, _engine) =
        run_on::<_, BeamQuery, f32>(engine, &view, &config(&p, 64, true), 1, &q).unwrap();
    let st = out[0].1;
    let pages: HashSet<u64> = read_log(&log).into_iter().collect();
    assert_eq!(
        pages.len() as u64,
        st.io.io_requests,
        "no page is read twice"
    );
    // Exact distances: one per distinct record on the pages read.
    assert_eq!(st.traversal.exact_distances, 4 * st.io.io_requests);
    assert!(st.traversal.page_hits > 0);
    assert_eq!(
        st.traversal.nodes_expanded,
        trace.len() as u64 + st.traversal.page_hits
    );
    let ids: Vec<u32> = out[0].0.iter().map(|h| h.0).collect();
    assert_eq!(ids, brute(8, [5.2, 6.1], 3));
}

/// PipeSearch with a fixed width of 1 and completions in order: each turn issues the read of
/// the nearest unread candidate *before* exploring the record that just landed, so it reads
/// one candidate ahead of beam search's best-first order (worked out by hand: after node 0,
/// node 8 is read; while it flies nothing is explorable; when it lands, node 1 — the nearest
/// unread — is issued before 8's neighbours 9 and 16 enter the list; and so on). Wider, it
/// reads further ahead; reads none of whose records were explored are counted as wasted, and
/// every slot comes back.
#[test]
fn pipe_search_reads_one_candidate_ahead_and_counts_its_waste() {
    let g = Grid::new(8, 1, 8);
    let (pq, codes) = exact_pq(8);
    let view = GraphView {
        space: space(8, &pq, &codes),
        graph: &g,
    };
    let q = vec![vec![5.2f32, 6.1]];
    let pipe = |w: usize| SearchParams {
        strategy: Strategy::Pipe(PipeParams {
            policy: WidthPolicy::Fixed,
            start_width: 1,
            max_width: w,
            ..PipeParams::default()
        }),
        ..SearchParams::beam(3, 6, 1)
    };
    let (engine, log) = LogEngine::create(g.pages.clone(), 64);
    let (out, _, engine) =
        run_on::<_, PipeQuery, f32>(engine, &view, &config(&pipe(1), 64, true), 1, &q).unwrap();
    assert_eq!(engine.in_flight(), 0);
    let reads = read_log(&log);
    let order = [
        0u64, 8, 1, 9, 16, 17, 10, 18, 25, 26, 19, 27, 34, 35, 28, 36, 43, 44, 37, 45, 52, 53, 46,
        54, 61, 62,
    ];
    assert_eq!(reads, order.map(|i| i + 1), "pages read, in order");
    let st = out[0].1;
    assert_eq!(st.io.io_requests, order.len() as u64);
    assert_eq!(
        st.io.io_requests,
        st.traversal.nodes_expanded + st.io.wasted_reads
    );
    let ids: Vec<u32> = out[0].0.iter().map(|h| h.0).collect();
    assert_eq!(ids, [53, 54, 61]);

    let (engine, _log) = LogEngine::create(g.pages.clone(), 64);
    let (out, _, engine) =
        run_on::<_, PipeQuery, f32>(engine, &view, &config(&pipe(4), 64, true), 1, &q).unwrap();
    let st = out[0].1;
    assert_eq!(engine.in_flight(), 0);
    assert_eq!(st.io.io_requests, engine.counters().requests);
    // Each read holds one node: explored reads are expansions, the rest are waste.
    assert_eq!(
        st.io.io_requests,
        st.traversal.nodes_expanded + st.io.wasted_reads
    );
    let ids: Vec<u32> = out[0].0.iter().map(|h| h.0).collect();
    assert_eq!(ids, [53, 54, 61]);
}

/// Interleaving several queries on one engine keeps their reads apart: each result is the
/// one it gets alone, for both strategies.
#[test]
fn interleaved_queries_get_their_own_results() {
    let g = Grid::new(8, 4, 8);
    let (pq, codes) = exact_pq(8);
    let view = GraphView {
        space: space(8, &pq, &codes),
        graph: &g,
    };
    let q: Vec<Vec<f32>> = (0..7)
        .map(|i| vec![(i as f32 * 1.37) % 7.0, (i as f32 * 2.71) % 7.0])
        .collect();
    for p in [
        SearchParams::beam(4, 10, 3),
        SearchParams {
            strategy: Strategy::Pipe(PipeParams::default()),
            ..SearchParams::beam(4, 10, 3)
        },
    ] {
        let cfg = config(&p, 64, true);
        let go = |lanes: usize| {
            let (engine, _log) = LogEngine::create(g.pages.clone(), 64);
            match p.strategy {
                Strategy::Beam(_) => run_on::<_, BeamQuery, f32>(engine, &view, &cfg, lanes, &q),
                Strategy::Pipe(_) => run_on::<_, PipeQuery, f32>(engine, &view, &cfg, lanes, &q),
                Strategy::Flash(_) => unreachable!("not in this test"),
            }
            .unwrap()
            .0
        };
        let (one, many) = (go(1), go(4));
        for i in 0..q.len() {
            assert_eq!(one[i].0, many[i].0, "{} query {i}", p.strategy.name());
            let ids: Vec<u32> = one[i].0.iter().map(|h| h.0).collect();
            assert_eq!(ids, brute(8, [q[i][0], q[i][1]], 4));
        }
    }
}

/// The re-rank stage over a vector source: a list-only traversal followed by the re-rank
/// reads the vectors of the expanded nodes batch by batch. With threshold 0 every expanded
/// node is re-ranked: the results are the exact top-k of the expanded set.
#[test]
fn rerank_returns_the_exact_top_k_of_the_expanded_nodes() {
    let g = ListGrid(Grid::new(8, 4, 8));
    let (pq, codes) = exact_pq(8);
    let view = GraphView {
        space: space(8, &pq, &codes),
        graph: &g,
    };
    let q = vec![vec![5.2f32, 6.1]];
    for threshold in [0.0f32, 0.5] {
        let p = SearchParams {
            rerank: RerankParams {
                threshold,
                batch: 4,
                prefetch: false,
                prefetch_on_converge: false,
                ..RerankParams::default()
            },
            ..SearchParams::beam(3, 10, 2)
        };
        let cfg = config(&p, 64, false);
        let (engine, log) = LogEngine::create(g.0.pages.clone(), 64);
        let (out, trace, engine) =
            run_on::<_, Reranked<BeamQuery>, f32>(engine, &view, &cfg, 1, &q).unwrap();
        assert_eq!(engine.in_flight(), 0);
        let log = read_log(&log);
        let vpages: Vec<u64> = log.iter().copied().filter(|&p| p >= 17).collect();
        let (hits, st) = &out[0];
        // A page is read once per batch that wants it (a read is joined while in flight; its
        // buffer is handed back when it lands): never more reads than re-ranked vectors.
        assert!(vpages.len() as u64 <= st.traversal.exact_distances);
        assert_eq!(st.rerank.vector_reads, vpages.len() as u64);
        assert_eq!(st.rerank.prefetched, 0);
        assert_eq!(
            st.io.io_requests,
            st.rerank.vector_reads + (log.len() - vpages.len()) as u64
        );
        let expanded = trace.len() as u64;
        assert_eq!(st.traversal.nodes_expanded, expanded);
        if threshold == 0.0 {
            // Every expanded node re-ranked, in batches of 4.
            assert_eq!(st.traversal.exact_distances, expanded);
            assert_eq!(st.rerank.rerank_batches, expanded.div_ceil(4));
            let mut exact = trace.clone();
            let d = |i: u32| {
                let (x, y) = ((i % 8) as f32, (i / 8) as f32);
                (5.2 - x).powi(2) + (6.1 - y).powi(2)
            };
            exact.sort_by(|&a, &b| d(a).total_cmp(&d(b)).then(a.cmp(&b)));
            let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
            assert_eq!(ids, exact[..3]);
        } else {
            // An early stop re-ranks fewer nodes, never more.
            assert!(st.traversal.exact_distances <= expanded);
        }
    }
}

/// The error-bound re-rank: the PQ distances here are exact (δ = 0), so whatever the
/// multiplier it reads the first k candidates, stops at the next (beyond the k-th exact
/// distance), and returns the exact top-k of the expanded set.
#[test]
fn bound_rerank_reads_what_can_still_enter_the_top_k() {
    let g = ListGrid(Grid::new(8, 4, 8));
    let (pq, codes) = exact_pq(8);
    let view = GraphView {
        space: space(8, &pq, &codes),
        graph: &g,
    };
    let q = vec![vec![5.2f32, 6.1]];
    let d = |i: u32| {
        let (x, y) = ((i % 8) as f32, (i / 8) as f32);
        (5.2 - x).powi(2) + (6.1 - y).powi(2)
    };
    for bound in [1.0f32, 1e9] {
        let p = SearchParams {
            rerank: RerankParams {
                bound,
                prefetch: false,
                prefetch_on_converge: false,
                ..RerankParams::default()
            },
            ..SearchParams::beam(3, 10, 2)
        };
        let cfg = config(&p, 64, false);
        let (engine, _log) = LogEngine::create(g.0.pages.clone(), 64);
        let (out, trace, engine) =
            run_on::<_, Reranked<BeamQuery>, f32>(engine, &view, &cfg, 1, &q).unwrap();
        assert_eq!(engine.in_flight(), 0);
        let (hits, st) = &out[0];
        let mut exact = trace.clone();
        exact.sort_by(|&a, &b| d(a).total_cmp(&d(b)).then(a.cmp(&b)));
        let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
        assert_eq!(ids, exact[..3], "bound {bound}");
        assert!(trace.len() > 3);
        assert_eq!(st.traversal.exact_distances, 3, "bound {bound}");
    }
}

/// Invariant failures are internal errors (a bug), not corruption: a list that should have
/// been held is not.
#[test]
fn a_broken_invariant_is_an_internal_error() {
    let g = ListGrid(Grid::new(4, 4, 8));
    let (pq, codes) = exact_pq(4);
    let sp = space(4, &pq, &codes);
    let mut f = Frontier::default();
    let mut scratch = Vec::new();
    let mut stats = QueryStats::default();
    let mut x = Expand {
        query: &[1.0f32, 1.0][..],
        scratch: &mut scratch,
        stats: &mut stats,
        hidden: None,
        keep: None,
    };
    let e = g
        .expand_held(&sp, &mut f, 3, &Held::default(), &mut x)
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Internal);
    assert!(e.to_string().contains("a bug"), "{e}");
}

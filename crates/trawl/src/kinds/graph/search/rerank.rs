//! Re-ranking on the decoupled layout (DecoupleVS §3.4): the traversal reads only neighbour
//! lists, so the full-precision vectors that re-rank the result are read on their own, from
//! the vector file, as late and as few as possible. Built from the shared re-rank stage's
//! parts ([`crate::search::rerank`]: the vector source, the top-`K`, the stop rules, the page
//! buffer); what is this layout's own is when the reads go out.
//!
//! - **Phase 1, prefetch.** While the graph is traversed, the `K + B` expanded nodes nearest by
//!   PQ distance are tracked. Once that set is full and `B` expansions in a row have left it
//!   unchanged, the search is *stable*: the vectors of its best members are requested, with
//!   only the read slots the traversal leaves free (the width minus the reads in flight).
//! - **Phase 2, batched re-rank.** After the traversal, the expanded nodes are taken in order
//!   of PQ distance, `B` at a time. A batch's vectors are read, their exact distances enter the
//!   top-`K`, and the share of the batch that changed the top-`K` is its *benefit*. Re-ranking
//!   stops after a batch whose benefit is below the threshold (default 0.01), or when every
//!   expanded node is re-ranked. A threshold of 0 re-ranks every expanded node: the result is
//!   then exactly the page-packed layout's, which re-ranks every node it expands.
//!
//!   Reads are issued for the batches sure to be processed at once: the first `⌊K / B⌋`
//!   batches all enter the top-`K` (it is not full yet), so their benefit is 1 and the batch
//!   after them is always needed — with `K = B = 10` the first two batches go out together,
//!   one round trip. Later batches are read only once the last one asked for them
//!   ([`RerankParams::lookahead`] reads further ahead: on this machine's disk, at 2 threads,
//!   reading the next batch while the current one is processed cost 17% of the QPS at
//!   GloVe's recall 0.93 — 10 more reads per query, the last batch's for nothing, and no round
//!   trip saved that the sure batches had not saved already).
//!
//! Every vector read (a page of the vector file) is counted in the query's statistics; a page
//! holding several wanted vectors is read once, and a page that has landed is kept for the
//! rest of the query, so a vector asked for later on a page already read costs no read (with
//! the vectors in graph-locality order the re-rank candidates of a query share pages). Vectors read but never reached by a batch still
//! give their exact distances to the result (they cost the read already).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::io::{Completion, IoEngine, ReadRequest, PAGE_BYTES};
use crate::kernels::{self, Element};
use crate::kinds::graph::search::explore::sorted_results;
use crate::kinds::graph::search::machine::{QueryMachine, Turn};
use crate::kinds::graph::search::source::{Expand, NO_KEY, VECTOR_TAG};
use crate::kinds::graph::search::SearchConfig;
use crate::search::rerank::{
    BatchOutcome, PageBuffer, Stop, StopRule, TopK, VectorSource, VectorView,
};
use crate::search::{QueryStats, SearchError};
use crate::vamana::queue::Neighbor;

/// Parameters of the decoupled layout's re-rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankParams {
    /// `B`: candidates per re-rank batch, and the stability window of the prefetch.
    pub batch: usize,
    /// Stop after a batch whose share of top-`K` changes is below this; 0 re-ranks every
    /// expanded node.
    pub threshold: f32,
    /// Prefetch vectors during the traversal once the PQ top-`(K + B)` is stable.
    pub prefetch: bool,
    /// Expansions in a row that must leave the PQ top-`(K + B)` unchanged before the
    /// prefetch starts; 0 = `B` (the paper's rule).
    pub stable_window: usize,
    /// Also prefetch once the traversal is ending — beam search: a round finds fewer
    /// unexpanded candidates than its width; PipeSearch: none is left — stable or not (the
    /// spare slots would idle; DecoupleVS's stability rule alone rarely fires at small `L`,
    /// where the top-`(K + B)` changes until the last rounds).
    pub prefetch_on_converge: bool,
    /// Batches whose reads are issued ahead of the one being processed, beyond those sure to
    /// be processed (0: a batch is read once the last one asked for it; 1: the next batch's
    /// reads overlap the current one's, and the batch after the last is read for nothing).
    pub lookahead: usize,
    /// Stop by an error bound instead of the batches' benefit (0: the benefit rule). With
    /// `bound = m > 0`, once `K` exact distances are in, `δ` is the largest amount by which a
    /// PQ distance of this query overestimated an exact one so far, and a candidate can enter
    /// the top-`K` only if its PQ distance is within `m·δ` of the current `K`-th exact
    /// distance; the candidates in that range (a prefix of the pool, which is in PQ order) are
    /// read at once, and the re-rank stops at the first beyond it. Adapts to the quantiser's
    /// accuracy: few reads past `K` where PQ is close, more where it is coarse.
    pub bound: f32,
    /// Most vector reads in flight after the traversal (phase 2); 0 = the strategy's width
    /// (beam: `W`), the default. A larger depth issues what phase 2 knows it needs in fewer
    /// round trips; measured on MiniLM at the 20% budget (beam, bound 1, L 40): 4.4 → 1.5
    /// round trips per query but 34.4 → 37.8 vector reads (the bound's prefix is read before
    /// the k-th distance has tightened) and no QPS gained, so it is not the default.
    pub depth: usize,
    /// With RaBitQ codes: a candidate whose lower bound — its estimate less `skip_eps` times
    /// the scale of its error (RaBitQ's Theorem 3.2 at `ε₀ = skip_eps`) — is beyond the
    /// current `K`-th exact distance is not read (counted in `rerank_skipped`). 0: never
    /// skip. Without RaBitQ codes (PQ has no bound) nothing is skipped.
    pub skip_eps: f32,
}

/// Default [`RerankParams::skip_eps`]: the RaBitQ papers' `ε₀`.
pub const DEFAULT_SKIP_EPS: f32 = crate::quant::rabitq::EPSILON0;

/// Default [`RerankParams::depth`].
pub const DEFAULT_RERANK_DEPTH: usize = 0;

impl Default for RerankParams {
    fn default() -> Self {
        Self {
            batch: 10,
            threshold: 0.01,
            prefetch: true,
            stable_window: 0,
            prefetch_on_converge: true,
            lookahead: 0,
            bound: 0.0,
            depth: DEFAULT_RERANK_DEPTH,
            skip_eps: DEFAULT_SKIP_EPS,
        }
    }
}

impl RerankParams {
    /// The stop rule these parameters choose: the error bound when [`RerankParams::bound`]
    /// is set, else the batches' benefit.
    pub fn stop_rule(&self) -> StopRule {
        if self.bound > 0.0 {
            StopRule::Bound { m: self.bound }
        } else {
            StopRule::Benefit {
                threshold: self.threshold,
            }
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), SearchError> {
        if self.batch == 0 || self.batch > 4096 {
            return Err(SearchError::InvalidRerank(format!(
                "re-rank batch {} must be between 1 and 4096",
                self.batch
            )));
        }
        if self.depth > crate::io::MAX_DEPTH {
            return Err(SearchError::InvalidRerank(format!(
                "re-rank depth {} must be at most {}",
                self.depth,
                crate::io::MAX_DEPTH
            )));
        }
        if self.lookahead > 16 {
            return Err(SearchError::InvalidRerank(format!(
                "re-rank lookahead {} must be at most 16 batches",
                self.lookahead
            )));
        }
        if !(self.bound.is_finite() && self.bound >= 0.0) {
            return Err(SearchError::InvalidRerank(format!(
                "re-rank bound {} must be a finite number ≥ 0",
                self.bound
            )));
        }
        if !(0.0..=1.0).contains(&self.threshold) {
            return Err(SearchError::InvalidRerank(format!(
                "re-rank threshold {} must be in [0, 1]",
                self.threshold
            )));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct VRead {
    /// Page of the vector (in the engine's page space).
    page: u64,
    ids: Vec<u32>,
    landed: bool,
}

/// One query's re-rank state.
#[derive(Debug, Default)]
pub struct Rerank {
    k: usize,
    p: RerankParams,
    tag_base: u64,
    /// Most vector reads in flight in phase 2.
    cap: usize,
    /// Expanded nodes with their PQ distances.
    pool: Vec<Neighbor>,
    /// The `K + B` nearest expanded nodes by PQ distance (unsorted; small).
    pq_top: Vec<Neighbor>,
    stable: usize,
    requested: HashSet<u32>,
    /// Vector key of each observed node.
    keys: HashMap<u32, u32>,
    reads: Vec<VRead>,
    page_read: HashMap<u64, usize>,
    /// Copies of the landed pages.
    kept: PageBuffer,
    /// Vectors asked for on a page already landed: decoded from its copy at the next turn.
    local: Vec<(u32, u64)>,
    in_flight: usize,
    exact: HashMap<u32, f32>,
    /// Phase 2.
    phase2: bool,
    cursor: usize,
    /// The exact top-`K` of the processed candidates.
    best: TopK,
    stop: Stop,
    stopped: bool,
    /// The result set, rebuilt per query without a new allocation.
    full: Vec<Neighbor>,
    /// Lower bounds of the candidates' distances (RaBitQ codes only).
    lowers: HashMap<u32, f32>,
    /// Candidates skipped by their lower bound.
    skipped: HashSet<u32>,
    /// Range search: the code-space radius that cuts the pool and the exact radius.
    range: Option<(f32, f32)>,
}

impl Rerank {
    /// Starts a query: `K`, the re-rank parameters and the cap on vector reads in flight
    /// (the strategy's width) come from `cfg`.
    pub fn begin(&mut self, cfg: &SearchConfig, tag_base: u64) {
        self.k = cfg.k();
        self.p = cfg.rerank_or_default();
        self.cap = if self.p.depth == 0 {
            cfg.strategy().max_reads()
        } else {
            self.p.depth
        };
        self.tag_base = tag_base;
        self.pool.clear();
        self.pq_top.clear();
        self.stable = 0;
        self.requested.clear();
        self.keys.clear();
        self.reads.clear();
        self.page_read.clear();
        self.kept.reset(PAGE_BYTES);
        self.local.clear();
        self.in_flight = 0;
        self.exact.clear();
        self.phase2 = false;
        self.cursor = 0;
        self.best.reset(self.k);
        self.range = cfg.range().map(|r| (r.code_radius(), r.radius));
        // A range search re-ranks every candidate within the code-space radius.
        self.stop = Stop::new(if self.range.is_some() {
            StopRule::Exhaustive
        } else {
            self.p.stop_rule()
        });
        self.stopped = false;
        self.lowers.clear();
        self.skipped.clear();
    }

    /// [`RerankParams::skip_eps`] of this query.
    pub fn skip_eps(&self) -> f32 {
        self.p.skip_eps
    }

    /// Records the lower bound of an observed candidate's distance.
    pub fn observe_lower(&mut self, id: u32, lower: f32) {
        self.lowers.insert(id, lower);
    }

    /// Whether candidate `id` need not be read: its lower bound is beyond the `K`-th exact
    /// distance so far. Marks it skipped (and counts it) the first time.
    fn skip(&mut self, id: u32, stats: &mut QueryStats) -> bool {
        if self.skipped.contains(&id) {
            return true;
        }
        // A range search skips what its lower bound puts beyond the radius.
        let limit = match self.range {
            Some((_, r)) => Some(r),
            None => self.best.kth(),
        };
        let (Some(kth), Some(&lower)) = (limit, self.lowers.get(&id)) else {
            return false;
        };
        if lower > kth && !self.requested.contains(&id) {
            self.skipped.insert(id);
            stats.rerank.rerank_skipped += 1;
            return true;
        }
        false
    }

    /// Vector reads in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Records an expanded node, its PQ distance (phase 1's stability test) and the vector
    /// key its list carried.
    pub fn observe(&mut self, id: u32, pq: f32, key: u32) {
        if key != NO_KEY {
            self.keys.insert(id, key);
        }
        let n = Neighbor { id, dist: pq };
        self.pool.push(n);
        let cap = self.k + self.p.batch;
        if self.pq_top.len() < cap {
            self.pq_top.push(n);
            self.stable = 0;
            return;
        }
        let (worst, w) =
            self.pq_top
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |acc, (i, t)| {
                    if t.dist > acc.1 {
                        (i, t.dist)
                    } else {
                        acc
                    }
                });
        if pq < w {
            self.pq_top[worst] = n;
            self.stable = 0;
        } else {
            self.stable += 1;
        }
    }

    /// Phase 1: when the top-`(K + B)` is stable — or the traversal is `converging` (beam
    /// search: its round found fewer unexpanded candidates than its width; PipeSearch: no
    /// unexpanded candidate is left, only reads in flight) and
    /// [`RerankParams::prefetch_on_converge`] — requests the vectors of its best members not
    /// requested yet, at most `free` reads. Returns the reads issued.
    pub fn prefetch<V: VectorSource>(
        &mut self,
        src: &VectorView<'_, V>,
        engine: &mut dyn IoEngine,
        free: usize,
        converging: bool,
        stats: &mut QueryStats,
    ) -> Result<usize, SearchError> {
        let converging = converging && self.p.prefetch_on_converge;
        let window = if self.p.stable_window == 0 {
            self.p.batch
        } else {
            self.p.stable_window
        };
        if !self.p.prefetch
            || free == 0
            || self.pq_top.len() < self.k + self.p.batch
            || (self.stable < window && !converging)
        {
            return Ok(0);
        }
        let mut want: Vec<Neighbor> = self
            .pq_top
            .iter()
            .filter(|n| !self.requested.contains(&n.id))
            .copied()
            .collect();
        if want.is_empty() {
            return Ok(0);
        }
        want.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
        let mut issued = 0;
        for n in want {
            if issued >= free || !engine.can_submit() {
                break;
            }
            if self.request(src.vectors, engine, n.id, stats)? {
                issued += 1;
                stats.rerank.prefetched += 1;
            }
        }
        Ok(issued)
    }

    fn key(&self, id: u32) -> u32 {
        self.keys.get(&id).copied().unwrap_or(NO_KEY)
    }

    /// Requests `id`'s vector: joins a read of its page in flight, takes it from the page's
    /// copy if that page has landed (decoded at the next turn), or submits a read. Returns
    /// whether a read was submitted.
    fn request<V: VectorSource>(
        &mut self,
        vectors: &V,
        engine: &mut dyn IoEngine,
        id: u32,
        stats: &mut QueryStats,
    ) -> Result<bool, SearchError> {
        self.requested.insert(id);
        let page = vectors.vector_page(id, self.key(id));
        if let Some(&r) = self.page_read.get(&page) {
            if !self.reads[r].landed {
                self.reads[r].ids.push(id);
                stats.rerank.page_joins += 1;
                return Ok(false);
            }
            if self.kept.contains(page) {
                self.local.push((id, page));
                stats.rerank.page_reuses += 1;
                return Ok(false);
            }
        }
        let r = self.reads.len();
        if self.phase2 && self.in_flight == 0 {
            // A read after the traversal with none of the re-rank's in flight: a round trip
            // the query waits for.
            stats.rerank.rounds += 1;
        }
        let pages = vectors.pages_per_read();
        engine.submit(
            self.tag_base | VECTOR_TAG | r as u64,
            ReadRequest {
                first_page: page,
                pages,
            },
        )?;
        self.reads.push(VRead {
            page,
            ids: vec![id],
            landed: false,
        });
        self.page_read.insert(page, r);
        self.in_flight += 1;
        stats.count_read(pages, vectors.vectors_on_page(page));
        stats.rerank.vector_reads += 1;
        Ok(true)
    }

    /// A vector read landed: decodes the wanted vectors, computes their exact distances and
    /// hands the slot back.
    fn landed<V: VectorSource, T: Element>(
        &mut self,
        src: &VectorView<'_, V>,
        t: &mut Turn<'_, T>,
        c: Completion,
    ) -> Result<(), SearchError> {
        let r = (c.tag & (VECTOR_TAG - 1)) as usize;
        let Turn { engine, x, .. } = t;
        let result = self.decode_read(src, engine.buffer(c.slot), r, x);
        engine.release(c.slot);
        self.in_flight = self.in_flight.saturating_sub(1);
        result
    }

    fn decode_read<V: VectorSource, T: Element>(
        &mut self,
        src: &VectorView<'_, V>,
        bytes: &[u8],
        r: usize,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let read = self
            .reads
            .get_mut(r)
            .ok_or_else(|| SearchError::Internal(format!("unknown vector read {r}")))?;
        read.landed = true;
        let page = read.page;
        src.vectors.check_read(page, bytes)?;
        let ids = std::mem::take(&mut read.ids);
        let result = self.decode_ids(src, page, bytes, &ids, x);
        self.reads[r].ids = ids;
        result?;
        // Kept only once checked: a damaged page has failed the query above.
        self.kept.keep(page, bytes);
        Ok(())
    }

    /// Decodes the vectors of `ids` from `bytes` (page `page`) and records their exact
    /// distances.
    fn decode_ids<V: VectorSource, T: Element>(
        &mut self,
        src: &VectorView<'_, V>,
        page: u64,
        bytes: &[u8],
        ids: &[u32],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let scratch = &mut *x.scratch;
        scratch.clear();
        scratch.resize(src.dim, T::default());
        let t0 = Instant::now();
        for &id in ids {
            src.vectors.decode_vector(
                id,
                self.keys.get(&id).copied().unwrap_or(NO_KEY),
                page,
                bytes,
                bytemuck::cast_slice_mut(scratch.as_mut_slice()),
            )?;
            let dist = kernels::distance(src.metric, x.query, scratch);
            self.exact.insert(id, dist);
            x.stats.traversal.exact_distances += 1;
        }
        x.stats.rerank.vector_decode_ns += t0.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Decodes the vectors asked for on pages that had landed already, from the pages'
    /// copies. Returns whether there were any.
    pub fn decode_local<V: VectorSource, T: Element>(
        &mut self,
        src: &VectorView<'_, V>,
        x: &mut Expand<'_, T>,
    ) -> Result<bool, SearchError> {
        if self.local.is_empty() {
            return Ok(false);
        }
        let local = std::mem::take(&mut self.local);
        let kept = std::mem::take(&mut self.kept);
        let mut result = Ok(());
        for &(id, page) in &local {
            let Some(bytes) = kept.get(page) else {
                result = Err(SearchError::Internal(format!(
                    "vector page {page} not kept"
                )));
                break;
            };
            result = self.decode_ids(src, page, bytes, &[id], x);
            if result.is_err() {
                break;
            }
        }
        self.kept = kept;
        self.local = local;
        self.local.clear();
        result.map(|_| true)
    }

    /// Phase 2, one step: requests what the current and next batch need, and processes the
    /// current batch once its distances are known. Returns whether anything happened. The
    /// strategy's width bounds the vector reads in flight.
    fn phase2<V: VectorSource>(
        &mut self,
        vectors: &V,
        engine: &mut dyn IoEngine,
        stats: &mut QueryStats,
    ) -> Result<bool, SearchError> {
        let cap = self.cap;
        if !self.phase2 {
            self.phase2 = true;
            self.pool
                .sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
            self.pool.dedup_by_key(|n| n.id);
            // A range search re-ranks every candidate within the code-space radius, and at
            // least the `K` nearest by code, as a top-`K` search would (where the radius is
            // small next to the codes' error, the true results may all lie beyond it).
            if let Some((code_r, _)) = self.range {
                let keep = self.pool.partition_point(|n| n.dist <= code_r);
                self.pool.truncate(keep.max(self.k));
            }
        }
        if self.stopped {
            return Ok(false);
        }
        if self.stop.per_candidate() {
            return self.phase2_bound(vectors, engine, stats);
        }
        let b = self.p.batch;
        let mut progressed = false;
        // Reads for this batch and the lookahead, and at once for every batch that is sure to
        // be processed: the first ⌊K / B⌋ batches all enter the (not yet full) top-K, so
        // their benefit is 1 and the batch after them is always needed.
        let sure = (self.k / b + 1) * b;
        let end = (self.cursor + (1 + self.p.lookahead) * b)
            .max(sure)
            .min(self.pool.len());
        for i in self.cursor..end {
            if self.in_flight >= cap.max(1) || !engine.can_submit() {
                break;
            }
            let id = self.pool[i].id;
            if self.skip(id, stats) {
                progressed = true;
                continue;
            }
            if !self.requested.contains(&id) {
                self.request(vectors, engine, id, stats)?;
                progressed = true;
            }
        }
        // Process the batch once every distance is in (or its candidate skipped).
        let batch_end = (self.cursor + b).min(self.pool.len());
        if self.pool[self.cursor..batch_end]
            .iter()
            .all(|n| self.exact.contains_key(&n.id) || self.skipped.contains(&n.id))
        {
            self.best.next_batch();
            let mut entered = 0usize;
            for i in self.cursor..batch_end {
                let n = self.pool[i];
                if let Some(&d) = self.exact.get(&n.id) {
                    if self.best.offer(d, n.id) {
                        entered += 1;
                    }
                }
            }
            let outcome = BatchOutcome {
                len: batch_end - self.cursor,
                entered,
                brought: self.best.brought(),
                k: self.k,
            };
            self.cursor = batch_end;
            stats.rerank.rerank_batches += 1;
            if self.stop.after_batch(outcome) || self.cursor >= self.pool.len() {
                self.stopped = true;
            }
            progressed = true;
        }
        Ok(progressed)
    }

    /// Phase 2 under the error bound ([`StopRule::Bound`]): processes the pool in PQ order
    /// while exact distances are in, stopping at the first candidate beyond the bound; reads
    /// the first `K` at once, then every candidate within the bound at once.
    fn phase2_bound<V: VectorSource>(
        &mut self,
        vectors: &V,
        engine: &mut dyn IoEngine,
        stats: &mut QueryStats,
    ) -> Result<bool, SearchError> {
        let mut progressed = false;
        let beyond = |s: &Self, i: usize| s.stop.beyond(s.pool[i].dist, &s.best);
        loop {
            if self.cursor >= self.pool.len() || beyond(self, self.cursor) {
                self.stopped = true;
                stats.rerank.rerank_batches += 1;
                return Ok(true);
            }
            let n = self.pool[self.cursor];
            if self.skip(n.id, stats) {
                self.cursor += 1;
                progressed = true;
                continue;
            }
            let Some(&d) = self.exact.get(&n.id) else {
                break;
            };
            self.best.offer(d, n.id);
            self.stop.learn(n.dist, d);
            self.cursor += 1;
            progressed = true;
        }
        // Reads: the first K, then — once K exact distances are in — every candidate within
        // the bound (a prefix of the pool).
        let cap = self.cap.max(1);
        let mut i = self.cursor;
        while i < self.pool.len() && (i < self.k || (self.best.is_full() && !beyond(self, i))) {
            if self.in_flight >= cap || !engine.can_submit() {
                break;
            }
            let id = self.pool[i].id;
            if !self.skip(id, stats) && !self.requested.contains(&id) {
                self.request(vectors, engine, id, stats)?;
                progressed = true;
            }
            i += 1;
        }
        Ok(progressed)
    }

    /// Whether phase 2 is over (stopped and no read left in flight).
    pub fn done(&self) -> bool {
        self.phase2 && self.stopped && self.in_flight == 0
    }

    /// Vector reads issued but never processed by a batch count as wasted.
    fn count_waste(&self, stats: &mut QueryStats) {
        let processed: HashSet<u32> = self.pool[..self.cursor].iter().map(|n| n.id).collect();
        stats.io.wasted_reads += self
            .reads
            .iter()
            .filter(|r| !r.ids.iter().any(|id| processed.contains(id)))
            .count() as u64;
    }
}

/// The re-rank as a query machine of its own: started with the candidates it is to re-rank
/// ([`Rerank::observe`]), it reads their vectors in batches until the top-`K` settles. Every
/// exact distance it computed is a result, whether or not its batch was processed.
impl<'v, V: VectorSource> QueryMachine<VectorView<'v, V>> for Rerank {
    fn start<T: Element>(
        &mut self,
        _src: &VectorView<'v, V>,
        cfg: &SearchConfig,
        _t: &mut Turn<'_, T>,
        _seeds: &[u32],
        tag_base: u64,
    ) -> Result<(), SearchError> {
        self.begin(cfg, tag_base);
        Ok(())
    }
    fn on_completion<T: Element>(
        &mut self,
        src: &VectorView<'v, V>,
        t: &mut Turn<'_, T>,
        c: Completion,
    ) -> Result<(), SearchError> {
        self.landed(src, t, c)
    }
    fn step<T: Element>(
        &mut self,
        src: &VectorView<'v, V>,
        t: &mut Turn<'_, T>,
    ) -> Result<bool, SearchError> {
        let mut progressed = self.decode_local(src, &mut t.x)?;
        progressed |= self.phase2(src.vectors, &mut *t.engine, t.x.stats)?;
        // Vectors phase 2 just found on kept pages are decoded at once (no read to wait for).
        progressed |= self.decode_local(src, &mut t.x)?;
        Ok(progressed)
    }
    fn finished(&self) -> bool {
        self.done()
    }
    fn results(&mut self, k: usize, out: &mut Vec<(u32, f32)>, stats: &mut QueryStats) {
        self.count_waste(stats);
        self.full.clear();
        self.full
            .extend(self.exact.iter().map(|(&id, &dist)| Neighbor { id, dist }));
        sorted_results(&mut self.full, k, out);
    }
}

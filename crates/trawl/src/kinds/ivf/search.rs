//! Searching an IVF index: centroid graph → gather → accelerator (dedup, PQ-ADC, top-n) →
//! heuristic re-rank from disk with page-merged reads and a per-query page buffer. The
//! re-rank is built from the shared stage's parts ([`crate::search::rerank`]): the vector file
//! as a vector source, the top-`K`, the stop rule ([`StopRule::Stable`], or
//! [`StopRule::Exhaustive`] with the heuristic off) and the page buffer.
//!
//! **Heuristic re-rank** (FusionANNS Algorithm 1): the `top_n` candidates, in PQ order, are
//! re-ranked in mini-batches of `batch`; after each the change rate of the top-k is `Δ = |S_n \
//! S_{n−1}| / k`; the re-rank stops once `Δ < ε` held for `β` batches in a row — strictly, as the
//! paper's text says (its Algorithm 1's `≤` would stop `ε = 0` after `β` unchanged batches;
//! with `<`, `ε = 0` re-ranks all `top_n`, a switch the ablation uses).
//!
//! **Reads.** Within a batch the vectors on one page are read by one request (intra-batch
//! merging); every page read stays in the query's page buffer, so no page is read twice for
//! one query. Both can be switched off; [`crate::search::IvfStats::pages_merged`] and
//! [`crate::search::IvfStats::pages_buffered`] count the reads each saved.
//!
//! **Pipeline** (Figure 6): a batch search hands the accelerator groups of `accel_batch`
//! queries; while it scores group `g`, the thread re-ranks group `g − 1`. With `interleave` > 1
//! a thread whose re-ranks all wait for reads filters the next query. The figure's other
//! overlap (the distance table built on the accelerator during the centroid-graph walk) is not
//! done: the table is host work here (~2% of a MiniLM-200K query's CPU time).

use std::time::{Duration, Instant};

mod gather;

use crate::accel::{FilterJob, FilterPending};
use crate::data::Queries;
use crate::io::{Completion, IoEngine, ReadRequest, PAGE_BYTES};
use crate::kernels::{Element, Metric};
use crate::kinds::ivf::filtered::IvfFilter;
use crate::kinds::ivf::pages::IvfPages;
use crate::kinds::ivf::score::{exact, score_read};
use crate::kinds::ivf::{IvfIndex, IvfSearchParams};
use crate::kinds::Run;
use crate::search::rerank::{BatchOutcome, PageBuffer, Stop, StopRule, TopK, VectorSource, NO_KEY};
use crate::search::runner::{
    batch_threads, drain_engine, on_threads, spin_for, wait_some, Cursor, MAX_INTERLEAVE,
};
use crate::search::{BatchOutput, QueryStats, SearchError};
use crate::vamana::{SearchScratch, VectorStore};

/// One search thread's state: its I/O engine and scratch.
pub struct IvfSearcher<'a> {
    ix: &'a IvfIndex,
    engine: Box<dyn IoEngine>,
    store: VectorStore<'a, f32>,
    scratch: SearchScratch,
    /// The filter stage's batch, its buffers reused.
    job: FilterJob,
    /// RaBitQ queries of earlier batches, their buffers reused.
    rbq_spare: Vec<crate::quant::rabitq::RbqQuery>,
    qc: Vec<f32>,
    spin: Duration,
    done: Vec<Completion>,
    vec_words: Vec<u32>,
    /// Query re-ranks in progress (slots; `None` = free).
    flights: Vec<Option<Flight>>,
    /// Reads waiting for a free engine slot: (flight, read index).
    backlog: std::collections::VecDeque<(usize, usize)>,
    /// Each query's filter and plan, by query row (empty: no filter).
    pub(super) filters: &'a [Option<IvfFilter<'a>>],
}

/// One query's re-rank in progress.
pub(super) struct Flight {
    row: usize,
    cands: Vec<u32>,
    /// RaBitQ: each candidate's lower bound at `skip_eps` (empty: no skipping).
    lowers: Vec<f32>,
    /// Next candidate to batch.
    next: usize,
    pub(super) top: TopK,
    stop: Stop,
    /// Offers made in the current batch that entered the top-`K`.
    pub(super) entered: usize,
    /// Candidates in the current batch.
    batch_len: usize,
    /// The current batch's reads and how many are still out.
    pub(super) reads: Vec<Read>,
    left: usize,
    /// Page buffer (inter-batch).
    kept: PageBuffer,
    pub(super) st: QueryStats,
    started: Instant,
}

pub(super) struct Read {
    pub(super) page: u64,
    /// (id, place in the read) of every vector this read serves.
    pub(super) vectors: Vec<(u32, usize)>,
}

/// A query whose filter stage is done: its candidates for the re-rank.
struct Ready {
    row: usize,
    cands: Vec<u32>,
    lowers: Vec<f32>,
    st: QueryStats,
    started: Instant,
}

/// Where the queries of a search come from and where their results go.
trait Rows<T> {
    fn query(&self, row: usize) -> &[T];
}

impl<T: Element> Rows<T> for Queries<'_, T> {
    fn query(&self, row: usize) -> &[T] {
        self.row(row)
    }
}

struct One<'q, T>(&'q [T]);

impl<T> Rows<T> for One<'_, T> {
    fn query(&self, _: usize) -> &[T] {
        self.0
    }
}

impl std::fmt::Debug for IvfSearcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IvfSearcher")
            .field("engine", &self.engine.info())
            .finish_non_exhaustive()
    }
}

impl IvfIndex {
    /// The vector file as the re-rank reads it.
    pub(crate) fn pages(&self) -> IvfPages<'_> {
        IvfPages {
            file: &self.vectors,
            path: self.vfile.path(),
            verify: self.opts.verify_pages,
        }
    }

    /// A searcher (one per thread: it owns an I/O engine).
    pub fn searcher(&self) -> Result<IvfSearcher<'_>, SearchError> {
        self.searcher_with(self.vfile.engine(self.opts.engine, self.engine_config())?)
    }

    /// A searcher reading through `engine`.
    pub(crate) fn searcher_with(
        &self,
        engine: Box<dyn IoEngine>,
    ) -> Result<IvfSearcher<'_>, SearchError> {
        let g = self.vectors.geometry();
        let store = VectorStore::new(&self.meta.centroids, self.meta.centroid_dim(), Metric::L2)
            .ok_or_else(|| SearchError::Internal("centroid store shape".into()))?;
        Ok(IvfSearcher {
            ix: self,
            engine,
            store,
            scratch: SearchScratch::new(self.meta.nlist()),
            job: FilterJob::default(),
            rbq_spare: Vec::new(),
            qc: vec![0.0; self.meta.centroid_dim()],
            spin: Duration::from_micros(self.opts.spin_us.unwrap_or(0)),
            done: Vec::new(),
            vec_words: vec![0; g.vector_bytes.div_ceil(4) * g.pages_per_vector.max(1)],
            flights: Vec::new(),
            backlog: std::collections::VecDeque::new(),
            filters: &[],
        })
    }

    /// Searches every query on `run.threads` threads (a bare number: that many threads, one
    /// query at a time), each with its own searcher and `run.interleave` queries in its
    /// re-rank at once — while one waits for its reads, the thread filters or re-ranks
    /// another — the filter stage pipelined with the re-rank: with `accel_batch > 1` a thread
    /// hands the accelerator the next group and re-ranks the last.
    pub fn search_batch<'q, T: Element>(
        &self,
        queries: impl Into<Queries<'q, T>>,
        p: &IvfSearchParams,
        run: impl Into<Run>,
    ) -> Result<BatchOutput, SearchError> {
        self.search_batch_with(queries.into(), p, run.into(), &[])
    }

    /// [`IvfIndex::search_batch`] with query `q`'s filter and plan at `filters[q]`.
    pub(crate) fn search_batch_with<T: Element>(
        &self,
        queries: Queries<'_, T>,
        p: &IvfSearchParams,
        run: Run,
        filters: &[Option<IvfFilter<'_>>],
    ) -> Result<BatchOutput, SearchError> {
        let Run {
            threads,
            interleave,
        } = run;
        p.validate(self.n(), self.meta.nlist())?;
        if interleave == 0 || interleave > MAX_INTERLEAVE {
            return Err(SearchError::BadBatch(format!(
                "interleave {interleave} must be between 1 and {MAX_INTERLEAVE}"
            )));
        }
        self.check_dtype::<T>()?;
        let nq = queries.n();
        if queries.dim() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: queries.dim(),
            });
        }
        let threads = batch_threads(threads, nq)?;
        let spin = spin_for(threads, self.opts.spin_us);
        let cursor = Cursor::new(nq);
        let (parts, wall_secs) = on_threads(threads, |_| {
            let mut s = self.searcher()?;
            s.spin = spin;
            s.filters = filters;
            let mut part = Part::new();
            s.run(
                &queries,
                || cursor.next_group(p.accel_batch),
                p,
                interleave,
                &mut part,
            )?;
            Ok(part)
        })?;
        let mut out = BatchOutput::empty(nq, p.k, wall_secs);
        for (q, top, st) in parts.into_iter().flatten() {
            out.put(q, top.hits().map(|(d, id)| (id, d)), st);
        }
        Ok(out)
    }

    fn check_dtype<T: Element>(&self) -> Result<(), SearchError> {
        if T::DTYPE != self.dtype() {
            return Err(SearchError::DTypeMismatch {
                expected: self.dtype().name(),
                got: T::DTYPE.name(),
            });
        }
        Ok(())
    }
}

/// One thread's results: (query row, top-`K`, stats).
type Part = Vec<(usize, TopK, QueryStats)>;

/// A group of queries whose filter stage is in flight.
struct Group {
    range: std::ops::Range<usize>,
    /// RaBitQ with skipping on: the group's prepared queries (for the candidates' bounds).
    rbq: Vec<crate::quant::rabitq::RbqQuery>,
    /// The `skip_eps` of the search.
    skip_eps: f32,
    pending: Box<dyn FilterPending>,
    stats: Vec<QueryStats>,
    started: Vec<Instant>,
}

impl IvfSearcher<'_> {
    /// The I/O engine (its description, counters); `into_engine` hands it back.
    pub fn engine(&self) -> &dyn IoEngine {
        &*self.engine
    }

    pub(crate) fn into_engine(self) -> Box<dyn IoEngine> {
        self.engine
    }

    /// Microseconds to poll for completions before blocking.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Searches one query: the `k` nearest (distance, id) pairs, nearest first, and what
    /// the search did.
    pub fn search<T: Element>(
        &mut self,
        query: &[T],
        p: &IvfSearchParams,
    ) -> Result<(Vec<(f32, u32)>, QueryStats), SearchError> {
        p.validate(self.ix.n(), self.ix.meta.nlist())?;
        self.ix.check_dtype::<T>()?;
        let mut part = Part::new();
        let mut once = Some(0..1);
        let p1 = IvfSearchParams {
            accel_batch: 1,
            ..*p
        };
        self.run(&One(query), || once.take(), &p1, 1, &mut part)?;
        let (_, top, st) = part
            .pop()
            .ok_or_else(|| SearchError::Internal("a query left no result".into()))?;
        Ok((top.hits().collect(), st))
    }

    /// The thread's loop: groups of query rows from `next_group` go through the filter stage
    /// (pipelined when a group holds several queries) into at most `interleave` re-ranks in
    /// flight; finished queries go to `part`.
    fn run<T: Element, R: Rows<T>>(
        &mut self,
        rows: &R,
        mut next_group: impl FnMut() -> Option<std::ops::Range<usize>>,
        p: &IvfSearchParams,
        interleave: usize,
        part: &mut Part,
    ) -> Result<(), SearchError> {
        self.flights.clear();
        self.flights.resize_with(interleave, || None);
        self.backlog.clear();
        let mut ready: std::collections::VecDeque<Ready> = std::collections::VecDeque::new();
        let mut pending: Option<Group> = None;
        let mut exhausted = false;
        let result = (|| -> Result<(), SearchError> {
            loop {
                // Start re-ranks while there are free slots and filtered queries.
                while let Some(slot) = self.flights.iter().position(Option::is_none) {
                    if ready.is_empty() {
                        // The filter stage: the pending group, or a new one.
                        if let Some(g) = pending.take() {
                            self.collect(g, &mut ready)?;
                        } else if !exhausted {
                            match next_group() {
                                Some(r) => {
                                    let g = self.submit_group(rows, r, p)?;
                                    if p.accel_batch == 1 {
                                        self.collect(g, &mut ready)?;
                                    } else {
                                        pending = Some(g);
                                        continue;
                                    }
                                }
                                None => exhausted = true,
                            }
                        }
                        // Keep the accelerator busy with the next group while this one is
                        // re-ranked (FusionANNS Figure 6).
                        if p.accel_batch > 1 && pending.is_none() && !exhausted && !ready.is_empty()
                        {
                            match next_group() {
                                Some(r) => pending = Some(self.submit_group(rows, r, p)?),
                                None => exhausted = true,
                            }
                        }
                    }
                    let Some(r) = ready.pop_front() else {
                        break;
                    };
                    self.flights[slot] = Some(Flight::new(r, p, self.ix.pages()));
                    self.advance(rows, slot, p, part)?;
                    // Start its reads now, not after the next query's filter stage.
                    self.pump(rows, p, part, false)?;
                }
                if self.flights.iter().all(Option::is_none) {
                    if ready.is_empty() && pending.is_none() && exhausted {
                        return Ok(());
                    }
                    continue;
                }
                // Every slot is taken. In throughput mode (interleave > 1), rather than wait
                // for a read, filter the next query (its re-rank starts when a slot frees): the
                // CPU computes while the disk reads. Interleave 1 keeps one query at a time.
                if interleave > 1 && ready.is_empty() && pending.is_none() && !exhausted {
                    if self.pump(rows, p, part, false)? > 0 {
                        continue;
                    }
                    match next_group() {
                        Some(r) => {
                            let g = self.submit_group(rows, r, p)?;
                            if p.accel_batch == 1 {
                                self.collect(g, &mut ready)?;
                            } else {
                                pending = Some(g);
                            }
                        }
                        None => exhausted = true,
                    }
                    continue;
                }
                self.pump(rows, p, part, true)?;
            }
        })();
        if result.is_err() {
            self.drain();
        }
        result
    }

    /// Waits for the filter stage of `g` and queues its queries for the re-rank.
    fn collect(
        &mut self,
        g: Group,
        ready: &mut std::collections::VecDeque<Ready>,
    ) -> Result<(), SearchError> {
        let out = g.pending.wait()?;
        for (j, row) in g.range.clone().enumerate() {
            let mut st = g.stats[j];
            st.ivf.candidates_unique = u64::from(out.unique[j]);
            st.traversal.pq_distances = u64::from(out.unique[j]);
            let (cands, _) = out.query(j);
            // The bound of each kept candidate (RaBitQ's Theorem 3.2 at ε₀ = skip_eps): the
            // accelerator returns estimates only, the scale of the error is the code's.
            let lowers = match g.rbq.get(j) {
                Some(q) => cands
                    .iter()
                    .map(|&id| {
                        let (est, sigma) = q.estimate(self.ix.codes.code(id as usize));
                        est - g.skip_eps * sigma
                    })
                    .collect(),
                None => Vec::new(),
            };
            ready.push_back(Ready {
                row,
                lowers,
                cands: cands.to_vec(),
                st,
                started: g.started[j],
            });
        }
        Ok(())
    }

    fn submit_group<T: Element, R: Rows<T>>(
        &mut self,
        rows: &R,
        range: std::ops::Range<usize>,
        p: &IvfSearchParams,
    ) -> Result<Group, SearchError> {
        // One job's buffers serve every group: the accelerator copies what it needs at
        // submission (a fresh 4·M·256-byte table per query cost page faults and zeroing).
        let mut job = std::mem::take(&mut self.job);
        job.m = self.ix.pq.m();
        job.top_n = p.top_n;
        job.tables.clear();
        self.rbq_spare.append(&mut job.rbq);
        job.ids.clear();
        job.offsets.clear();
        job.offsets.push(0);
        job.lists.clear();
        job.list_offsets.clear();
        // RaBitQ on the CPU backend scores the probed lists' FastScan blocks in place of
        // gathered ids — unless a query of the group has a predicate to apply first.
        let by_lists = self.ix.code_lists.is_some()
            && range
                .clone()
                .all(|r| self.filters.get(r).and_then(Option::as_ref).is_none());
        if by_lists {
            job.list_offsets.push(0);
        }
        let mut stats = Vec::with_capacity(range.len());
        let mut started = Vec::with_capacity(range.len());
        for q in range.clone() {
            started.push(Instant::now());
            let mut st = QueryStats::default();
            let prepared = self.prepare(rows.query(q), q, p, &mut job, &mut st);
            if let Err(e) = prepared {
                self.job = job;
                return Err(e);
            }
            stats.push(st);
        }
        let pending = self.ix.accel.submit(&job);
        let rbq = if p.skip_eps > 0.0 {
            job.rbq.clone()
        } else {
            Vec::new()
        };
        self.job = job;
        let pending = pending?;
        Ok(Group {
            rbq,
            skip_eps: p.skip_eps,
            range,
            pending,
            stats,
            started,
        })
    }

    /// Starts the next mini-batch of flight `slot` — or finishes the query when the
    /// candidates are exhausted or the early stop fired. Batches served from the page
    /// buffer alone complete at once.
    fn advance<T: Element, R: Rows<T>>(
        &mut self,
        rows: &R,
        slot: usize,
        p: &IvfSearchParams,
        part: &mut Part,
    ) -> Result<(), SearchError> {
        let vs = self.ix.pages();
        let metric = self.ix.metric();
        // With page-mate scoring a buffered page's vectors were all scored when it was read.
        let mates = p.page_mates && self.ix.vectors.geometry().per_page > 0;
        loop {
            let Some(f) = self.flights[slot].as_mut() else {
                return Ok(());
            };
            if f.next >= f.cands.len() {
                let f = self.flights[slot]
                    .take()
                    .ok_or_else(|| SearchError::Internal("flight vanished".into()))?;
                return self.finish(f, part);
            }
            let query = rows.query(f.row);
            let end = (f.next + p.batch).min(f.cands.len());
            f.st.rerank.rerank_batches += 1;
            f.top.next_batch();
            f.entered = 0;
            f.batch_len = end - f.next;
            f.reads.clear();
            let mut hit_pages: Vec<u64> = Vec::new();
            let mut misses = 0u64;
            for i in f.next..end {
                let id = f.cands[i];
                if let (Some(&lower), Some(kth)) = (f.lowers.get(i), f.top.kth()) {
                    if f.top.is_full() && lower > kth {
                        f.st.rerank.rerank_skipped += 1;
                        continue;
                    }
                }
                let (page, at) = vs.locate(id, NO_KEY);
                if let Some(bytes) = f.kept.get(page).filter(|_| p.page_buffer) {
                    hit_pages.push(page);
                    if !mates {
                        let v = (id, at);
                        let d =
                            exact::<T>(&vs, metric, query, v, page, bytes, &mut self.vec_words)?;
                        f.st.traversal.exact_distances += 1;
                        f.entered += usize::from(f.top.offer(d, id));
                    }
                    continue;
                }
                misses += 1;
                match f.reads.iter_mut().find(|r| p.page_merge && r.page == page) {
                    Some(r) => r.vectors.push((id, at)),
                    None => f.reads.push(Read {
                        page,
                        vectors: vec![(id, at)],
                    }),
                }
            }
            f.next = end;
            hit_pages.sort_unstable();
            hit_pages.dedup();
            f.st.ivf.pages_buffered += hit_pages.len() as u64;
            f.st.ivf.pages_merged += misses - f.reads.len() as u64;
            f.left = f.reads.len();
            if f.left > 0 {
                for r in 0..f.reads.len() {
                    self.backlog.push_back((slot, r));
                }
                return self.submit_backlog();
            }
            // Served from the buffer: judge the batch now.
            if self.batch_done(slot, p) {
                let f = self.flights[slot]
                    .take()
                    .ok_or_else(|| SearchError::Internal("flight vanished".into()))?;
                return self.finish(f, part);
            }
        }
    }

    /// Whether flight `slot`'s re-rank stops after the batch just completed: its stop rule
    /// (FusionANNS Algorithm 1's, [`StopRule::Stable`]) or its candidates ran out.
    fn batch_done(&mut self, slot: usize, p: &IvfSearchParams) -> bool {
        let Some(f) = self.flights[slot].as_mut() else {
            return true;
        };
        let outcome = BatchOutcome {
            len: f.batch_len,
            entered: f.entered,
            brought: f.top.brought(),
            k: p.k,
        };
        f.stop.after_batch(outcome) || f.next >= f.cands.len()
    }

    fn finish(&mut self, mut f: Flight, part: &mut Part) -> Result<(), SearchError> {
        f.st.total_ns = f.started.elapsed().as_nanos() as u64;
        part.push((f.row, f.top, f.st));
        Ok(())
    }

    /// Submits backlogged reads while the engine has free slots.
    fn submit_backlog(&mut self) -> Result<(), SearchError> {
        let vs = self.ix.pages();
        let pages = vs.pages_per_read();
        while self.engine.can_submit() {
            let Some((slot, r)) = self.backlog.pop_front() else {
                break;
            };
            let Some(f) = self.flights[slot].as_mut() else {
                continue;
            };
            let page = f.reads[r].page;
            self.engine.submit(
                ((slot as u64) << 32) | r as u64,
                ReadRequest {
                    first_page: page,
                    pages,
                },
            )?;
            f.st.count_read(pages, vs.vectors_on_page(page));
            f.st.rerank.vector_reads += 1;
        }
        Ok(())
    }

    /// Submits the queued reads and handles every completion that arrived — waiting for at
    /// least one when `block` (there must be reads in flight), else only polling. Returns the
    /// completions handled.
    fn pump<T: Element, R: Rows<T>>(
        &mut self,
        rows: &R,
        p: &IvfSearchParams,
        part: &mut Part,
        block: bool,
    ) -> Result<usize, SearchError> {
        let vs = self.ix.pages();
        let read_bytes = vs.pages_per_read() as usize * PAGE_BYTES;
        let metric = self.ix.metric();
        self.done.clear();
        if !block && self.engine.wait(0, &mut self.done)? == 0 {
            return Ok(0);
        }
        let t = Instant::now();
        if block {
            wait_some(&mut *self.engine, self.spin, &mut self.done)?;
        }
        self.share_wait(t.elapsed().as_nanos() as u64);
        let done = std::mem::take(&mut self.done);
        let mut finished: Vec<usize> = Vec::new();
        for c in &done {
            let slot = (c.tag >> 32) as usize;
            let r = (c.tag & 0xffff_ffff) as usize;
            let Some(f) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
                self.engine.release(c.slot);
                return Err(SearchError::Internal("a read for no query".into()));
            };
            let bytes = &self.engine.buffer(c.slot)[..read_bytes];
            let query = rows.query(f.row);
            let keep = self.filters.get(f.row).and_then(Option::as_ref);
            let scored = score_read::<T>(
                &vs,
                metric,
                query,
                f,
                r,
                bytes,
                p.page_mates,
                &mut self.vec_words,
                keep.map(|k| &k.pred),
            );
            if scored.is_ok() && p.page_buffer {
                f.kept.keep(f.reads[r].page, bytes);
            }
            self.engine.release(c.slot);
            scored?;
            f.left -= 1;
            if f.left == 0 {
                finished.push(slot);
            }
        }
        let handled = done.len();
        self.done = done;
        self.submit_backlog()?;
        for slot in finished {
            if self.batch_done(slot, p) {
                if let Some(f) = self.flights[slot].take() {
                    self.finish(f, part)?;
                }
            } else {
                self.advance(rows, slot, p, part)?;
            }
        }
        Ok(handled)
    }

    /// Shares `waited` nanoseconds of waiting among the queries that had reads out.
    fn share_wait(&mut self, waited: u64) {
        let waiting = self
            .flights
            .iter()
            .filter(|f| f.as_ref().is_some_and(|f| f.left > 0))
            .count();
        let share = waited / waiting.max(1) as u64;
        for f in self.flights.iter_mut().flatten() {
            if f.left > 0 {
                f.st.io.io_wait_ns += share;
            }
        }
    }

    /// After an error: waits for the reads still out and frees every flight.
    fn drain(&mut self) {
        self.backlog.clear();
        drain_engine(&mut *self.engine, &mut self.done);
        self.flights.iter_mut().for_each(|f| *f = None);
    }
}

impl Flight {
    /// A query whose filter stage is done, its re-rank not started.
    fn new(r: Ready, p: &IvfSearchParams, vs: IvfPages<'_>) -> Self {
        let rule = if p.heuristic {
            StopRule::Stable {
                epsilon: p.epsilon,
                beta: p.beta,
            }
        } else {
            StopRule::Exhaustive
        };
        let mut kept = PageBuffer::default();
        kept.reset(vs.pages_per_read() as usize * PAGE_BYTES);
        Self {
            row: r.row,
            cands: r.cands,
            lowers: r.lowers,
            next: 0,
            top: TopK::new(p.k),
            stop: Stop::new(rule),
            entered: 0,
            batch_len: 0,
            reads: Vec::new(),
            left: 0,
            kept,
            st: r.st,
            started: r.started,
        }
    }
}

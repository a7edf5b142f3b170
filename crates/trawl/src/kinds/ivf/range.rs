//! Range search of an IVF index: every vector whose exact distance to the query is at most
//! `radius` (the kernel the top-k re-rank uses), nearest first, ties by id, each id once, with
//! no cap on their number.
//!
//! **Algorithm.** Each query runs on one of `run.threads` threads, each with its own I/O
//! engine; `run.interleave` is ignored (a thread searches one query at a time, its reads in
//! flight up to the engine's depth).
//!
//! 1. *Lists, nearest centroid first.* The posting lists are probed in the order of their
//!    centroids' distance to the query in the clustering space. The order comes from the
//!    centroid graph (the top-k path's walk) over a window of
//!    [`IvfSearchParams::centroid_list`] lists; when the probe needs more, the window doubles
//!    and the walk is redone (lists already probed are skipped); once the window would reach
//!    half of the lists, every centroid is scored exactly and sorted, so the order is then
//!    complete and every list can be reached.
//! 2. *Candidates by code.* Each member of a probed list is scored once by its code in memory
//!    (PQ-ADC or the RaBitQ estimate, on the host: the accelerator is not used) and becomes a
//!    candidate when its code distance is at most the code radius `radius + slack · |radius|`
//!    (slack [`DEFAULT_RANGE_SLACK`], as the graph kind's range search). A vector that
//!    boundary replication put in several lists is scored, and kept, once.
//! 3. *Lists probed until the radius is covered.* At least `nprobe` lists are probed; past
//!    them the probe goes on while lists still hold members within the code radius, and stops
//!    once `max(2, nprobe / 4)` lists in a row held none (a replica scored in an earlier list
//!    counts for every list it is met in). No list is skipped by a distance bound, not even
//!    with L2: a list's radius (its farthest member from the centroid) is not stored, and
//!    bounding it would take the vectors, so a far list is scored by its codes like any other.
//! 4. *Exact check.* The candidates' vectors are read from the bucketed vector file through
//!    the engine (O_DIRECT, as the top-k re-rank reads them): one read per distinct page, every
//!    candidate on that page served by it, in page order. A candidate is a result when its
//!    exact distance is at most `radius`; with page mates on
//!    ([`IvfSearchParams::page_mates`]) every other vector on a page read is scored too (it
//!    costs no read) and kept when within the radius.
//!
//! A result is always exact; what can be missed is a vector whose code distance exceeds the
//! code radius, or that lies in a list the probe did not reach. Of [`IvfSearchParams`] only
//! `nprobe`, `centroid_l` and `page_mates` apply (the others are checked as a top-k search
//! checks them): the re-rank's mini-batches, early stop, page merging and buffer do not, as
//! every page is read at most once per query anyway.
//!
//! **Filters.** A query's filter is compiled against the index's attributes (none: the top-k
//! path's error) and planned: *inline* — the lists above, a member the filter rejects never a
//! candidate (it still counts for step 3's coverage, which is geometric); *scan* — every match
//! scored by its code, no list probed (chosen when the matches are no more than `nprobe`
//! lists hold on average); *exact* (forced only) — every match read. Page mates the filter
//! rejects are not scored.
//!
//! **Counters** (per query, exact): lists probed, members gathered (`candidates`) and scored
//! once by code (`candidates_unique`, `pq_distances`), centroid distances and hops, reads
//! (`count_read`: requests, pages, bytes, records), candidates served by a read of another
//! (`pages_merged`), exact distances, page mates, the time waiting for reads, and the filter's
//! plan as the top-k path reports it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::data::Queries;
use crate::filter::plan::Planned;
use crate::filter::{FilterError, Plan, Predicate, QueryFilter};
use crate::io::{Completion, IoEngine, ReadRequest, PAGE_BYTES};
use crate::kernels::{Element, Metric};
use crate::kinds::graph::search::{RangeSpec, DEFAULT_RANGE_SLACK};
use crate::kinds::ivf::filtered::IvfFilter;
use crate::kinds::ivf::pages::IvfPages;
use crate::kinds::ivf::score::exact;
use crate::kinds::ivf::{IvfIndex, IvfSearchParams};
use crate::kinds::Run;
use crate::quant::QuantQuery;
use crate::search::rerank::{VectorSource, NO_KEY};
use crate::search::runner::{batch_threads, drain_engine, on_threads, spin_for, wait_some, Cursor};
use crate::search::{BatchOutput, FilterStats, QueryStats, SearchError};
use crate::vamana::{SearchScratch, VectorStore};

/// What every query of a range search shares.
struct Setup<'s> {
    radius: f32,
    /// The radius code distances are compared with.
    code_radius: f32,
    p: &'s IvfSearchParams,
    /// Each query's filter and plan, by query row (empty: no filter).
    filters: &'s [Option<IvfFilter<'s>>],
}

/// One thread's state: its engine, the list order and the buffers reused query to query.
struct Ranger<'a> {
    ix: &'a IvfIndex,
    engine: Box<dyn IoEngine>,
    order: ListOrder<'a>,
    qq: QuantQuery,
    /// Members scored: whether each was within the code radius.
    seen: HashMap<u32, bool>,
    words: Vec<u32>,
    done: Vec<Completion>,
    spin: Duration,
}

/// One query's posting lists, nearest centroid first (module doc, step 1).
struct ListOrder<'a> {
    ix: &'a IvfIndex,
    store: VectorStore<'a, f32>,
    scratch: SearchScratch,
    /// The query in the clustering space.
    qc: Vec<f32>,
    /// The current window's lists, nearest first.
    lists: Vec<u32>,
    next: usize,
    window: usize,
    /// Every centroid was scored: no list lies beyond `lists`.
    complete: bool,
    probed: HashSet<u32>,
}

/// One read of the exact check: its first page and the candidates it serves, as
/// `(page, place in the read, id)`.
struct PageRead<'c> {
    page: u64,
    vectors: &'c [(u64, usize, u32)],
}

/// How a landed read is scored.
struct Scoring<'v, 'f> {
    vs: IvfPages<'v>,
    metric: Metric,
    radius: f32,
    /// Score every vector on the page (page mates).
    mates: bool,
    keep: Option<&'f Predicate<'f>>,
}

/// One thread's results: (query row, hits, stats).
type Part = Vec<(usize, Vec<(u32, f32)>, QueryStats)>;

impl IvfIndex {
    /// Range search of every query: every vector whose exact distance is at most `radius`
    /// (and that the query's filter keeps), nearest first, ties by id — lists probed by
    /// centroid distance until the radius is covered, candidates by their codes, then checked
    /// on their vectors read from disk (the module doc gives the algorithm). Results are exact;
    /// recall depends on `p.nprobe` and on the codes.
    pub fn range_search_batch<T: Element>(
        &self,
        q: Queries<'_, T>,
        radius: f32,
        p: &IvfSearchParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<BatchOutput, SearchError> {
        let spec = RangeSpec {
            radius,
            slack: DEFAULT_RANGE_SLACK,
            width: 0,
            early_stop: 0,
        };
        spec.validate()?;
        // A range search has no k: the rest is checked as a top-k search checks it.
        IvfSearchParams {
            k: 1,
            top_n: p.top_n.max(1),
            ..*p
        }
        .validate(self.n(), self.meta.nlist())?;
        if T::DTYPE != self.dtype() {
            return Err(SearchError::DTypeMismatch {
                expected: self.dtype().name(),
                got: T::DTYPE.name(),
            });
        }
        if q.dim() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: q.dim(),
            });
        }
        let nq = q.n();
        let filters = self.range_filters(filter, nq, p)?;
        let setup = Setup {
            radius,
            code_radius: spec.code_radius(),
            p,
            filters: &filters,
        };
        let threads = batch_threads(run.threads, nq)?;
        let spin = spin_for(threads, self.opts.spin_us);
        let cursor = Cursor::new(nq);
        let vector_bytes = self.dim() * std::mem::size_of::<T>();
        let (parts, wall_secs) = on_threads(threads, |_| {
            let mut r = Ranger::new(self, spin, vector_bytes)?;
            let mut part = Part::new();
            while let Some(row) = cursor.next() {
                let (hits, st) = r.query(row, q.row(row), &setup)?;
                part.push((row, hits, st));
            }
            Ok(part)
        })?;
        let mut out = BatchOutput::empty_ranged(nq, wall_secs);
        for (row, hits, mut st) in parts.into_iter().flatten() {
            if let Some(Some(f)) = filters.get(row) {
                st.filter = FilterStats {
                    plan_inline: u64::from(f.plan.plan == Plan::Inline),
                    plan_scan: u64::from(f.plan.plan == Plan::Scan),
                    plan_exact: u64::from(f.plan.plan == Plan::Exact),
                    matches: f.plan.count.rows,
                    matches_exact: u64::from(f.plan.count.exact),
                    filter_list: f.plan.list as u64,
                    rejected: st.filter.rejected,
                };
            }
            out.put(row, hits, st);
        }
        Ok(out)
    }

    /// Each query's filter compiled and planned (empty when no query is filtered).
    fn range_filters(
        &self,
        filter: &QueryFilter<'_>,
        nq: usize,
        p: &IvfSearchParams,
    ) -> Result<Vec<Option<IvfFilter<'_>>>, SearchError> {
        if filter.is_none() {
            return Ok(Vec::new());
        }
        filter.filters.check(nq).map_err(SearchError::BadBatch)?;
        let attrs = self.attrs().ok_or(SearchError::Filter {
            query: 0,
            source: FilterError::NoAttributes,
        })?;
        let nlist = self.meta.nlist();
        let avg_list = self.meta.list_ids.len() as f64 / nlist.max(1) as f64;
        let inline_members = p.nprobe as f64 * avg_list;
        let mut filters = Vec::with_capacity(nq);
        for q in 0..nq {
            let Some(e) = filter.filters.get(q) else {
                filters.push(None);
                continue;
            };
            let pred = Predicate::compile(e, attrs)
                .map_err(|source| SearchError::Filter { query: q, source })?;
            let count = pred.count();
            let plan = match filter.params.plan {
                Some(plan) => plan,
                // Fewer codes to score than the fewest lists probed would gather.
                None if count.rows as f64 <= inline_members => Plan::Scan,
                None => Plan::Inline,
            };
            let list = if plan == Plan::Inline {
                p.nprobe
            } else {
                count.rows as usize
            };
            filters.push(Some(IvfFilter {
                pred,
                plan: Planned { plan, count, list },
            }));
        }
        Ok(filters)
    }
}

impl<'a> Ranger<'a> {
    /// A thread's state, its engine opened; `vector_bytes`: a query's size in bytes.
    fn new(ix: &'a IvfIndex, spin: Duration, vector_bytes: usize) -> Result<Self, SearchError> {
        let engine = ix.vfile.engine(ix.opts.engine, ix.engine_config())?;
        let store = VectorStore::new(&ix.meta.centroids, ix.meta.centroid_dim(), Metric::L2)
            .ok_or_else(|| SearchError::Internal("centroid store shape".into()))?;
        let words = vector_bytes.max(ix.vectors.geometry().vector_bytes);
        Ok(Self {
            ix,
            engine,
            order: ListOrder {
                ix,
                store,
                scratch: SearchScratch::new(ix.meta.nlist()),
                qc: vec![0.0; ix.meta.centroid_dim()],
                lists: Vec::new(),
                next: 0,
                window: 0,
                complete: false,
                probed: HashSet::new(),
            },
            qq: ix.pq.new_query(),
            seen: HashMap::new(),
            words: vec![0; words.div_ceil(4)],
            done: Vec::new(),
            spin,
        })
    }

    /// Query `row`: its hits, sorted and deduplicated, and what the search did.
    fn query<T: Element>(
        &mut self,
        row: usize,
        query: &[T],
        s: &Setup<'_>,
    ) -> Result<(Vec<(u32, f32)>, QueryStats), SearchError> {
        let started = Instant::now();
        let mut st = QueryStats::default();
        crate::search::check_query_values(query, row)?;
        self.ix
            .pq
            .fill_query(query, &mut self.qq)
            .map_err(|e| SearchError::Internal(format!("code query: {e}")))?;
        let filter = s.filters.get(row).and_then(Option::as_ref);
        let cands = match filter {
            Some(f) if f.plan.plan != Plan::Inline => self.matches(f, s, &mut st)?,
            _ => self.probe(query, filter, s, &mut st)?,
        };
        let checked = self.check(query, cands, filter.map(|f| &f.pred), s, &mut st);
        if checked.is_err() {
            drain_engine(&mut *self.engine, &mut self.done);
        }
        let mut hits = checked?;
        hits.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        hits.dedup_by_key(|h| h.0);
        st.total_ns = started.elapsed().as_nanos() as u64;
        Ok((hits, st))
    }

    /// The code distance of member `id` (scored once per query): whether it is within the
    /// code radius, and whether it was scored now (first met).
    fn within(&mut self, id: u32, code_radius: f32) -> Result<(bool, bool), SearchError> {
        match self.seen.entry(id) {
            Entry::Occupied(e) => Ok((*e.get(), false)),
            Entry::Vacant(e) => {
                if id as usize >= self.ix.codes.n() {
                    return Err(SearchError::Internal(format!(
                        "posting-list id {id} is past the {} codes",
                        self.ix.codes.n()
                    )));
                }
                let d = self.qq.distance(self.ix.codes.code(id as usize));
                Ok((*e.insert(d <= code_radius), true))
            }
        }
    }

    /// Inline: the lists probed until the radius is covered (module doc, steps 1–3); the
    /// candidates, each once, that the filter keeps.
    fn probe<T: Element>(
        &mut self,
        query: &[T],
        filter: Option<&IvfFilter<'_>>,
        s: &Setup<'_>,
        st: &mut QueryStats,
    ) -> Result<Vec<u32>, SearchError> {
        self.seen.clear();
        self.order.start(query, s.p.centroid_list(), st)?;
        let patience = (s.p.nprobe / 4).max(2);
        let (mut probed, mut dry) = (0usize, 0usize);
        let mut cands = Vec::new();
        let meta = &self.ix.meta;
        while let Some(l) = self.order.next(st)? {
            let members = meta.list(l);
            st.ivf.lists_probed += 1;
            st.ivf.candidates += members.len() as u64;
            let mut held = false;
            for &id in members {
                let (within, first) = self.within(id, s.code_radius)?;
                held |= within;
                if !(within && first) {
                    continue;
                }
                match filter {
                    Some(f) if !f.pred.matches(id) => st.filter.rejected += 1,
                    _ => cands.push(id),
                }
            }
            probed += 1;
            dry = if held { 0 } else { dry + 1 };
            if probed >= s.p.nprobe && dry >= patience {
                break;
            }
        }
        let scored = self.seen.len() as u64;
        st.ivf.candidates_unique = scored;
        st.traversal.pq_distances = scored;
        Ok(cands)
    }

    /// Scan and exact plans: the filter's matches, by their codes (scan) or all (exact).
    fn matches(
        &mut self,
        f: &IvfFilter<'_>,
        s: &Setup<'_>,
        st: &mut QueryStats,
    ) -> Result<Vec<u32>, SearchError> {
        let rows = f.pred.collect();
        st.ivf.candidates = rows.len();
        st.ivf.candidates_unique = rows.len();
        if f.plan.plan == Plan::Exact {
            return Ok(rows.iter().collect());
        }
        self.seen.clear();
        let mut cands = Vec::new();
        for id in rows.iter() {
            if self.within(id, s.code_radius)?.0 {
                cands.push(id);
            }
        }
        st.traversal.pq_distances = rows.len();
        Ok(cands)
    }

    /// The exact check (module doc, step 4): one read per distinct page of the candidates,
    /// every vector it serves (or every vector on it, with page mates) scored exactly. Leaves
    /// completions to drain after an error.
    fn check<T: Element>(
        &mut self,
        query: &[T],
        cands: Vec<u32>,
        keep: Option<&Predicate<'_>>,
        s: &Setup<'_>,
        st: &mut QueryStats,
    ) -> Result<Vec<(u32, f32)>, SearchError> {
        let vs = self.ix.pages();
        let mut placed: Vec<(u64, usize, u32)> = Vec::with_capacity(cands.len());
        for id in cands {
            if id as usize >= self.ix.n() {
                return Err(SearchError::Internal(format!(
                    "candidate {id} out of range"
                )));
            }
            let (page, at) = vs.locate(id, NO_KEY);
            placed.push((page, at, id));
        }
        placed.sort_unstable();
        let reads: Vec<PageRead<'_>> = placed
            .chunk_by(|a, b| a.0 == b.0)
            .map(|v| PageRead {
                page: v[0].0,
                vectors: v,
            })
            .collect();
        st.ivf.pages_merged += (placed.len() - reads.len()) as u64;
        let how = Scoring {
            vs,
            metric: self.ix.metric(),
            radius: s.radius,
            mates: s.p.page_mates && self.ix.vectors.geometry().per_page > 0,
            keep,
        };
        let pages = vs.pages_per_read();
        let read_bytes = pages as usize * PAGE_BYTES;
        let mut hits = Vec::new();
        let (mut next, mut left) = (0usize, reads.len());
        while left > 0 {
            while next < reads.len() && self.engine.can_submit() {
                let page = reads[next].page;
                let req = ReadRequest {
                    first_page: page,
                    pages,
                };
                self.engine.submit(next as u64, req)?;
                st.count_read(pages, vs.vectors_on_page(page));
                st.rerank.vector_reads += 1;
                next += 1;
            }
            self.done.clear();
            let t = Instant::now();
            wait_some(&mut *self.engine, self.spin, &mut self.done)?;
            st.io.io_wait_ns += t.elapsed().as_nanos() as u64;
            // Every completion's slot is released, an error or not.
            let mut failed = None;
            for c in &self.done {
                if failed.is_none() {
                    let landed = reads.get(c.tag as usize).and_then(|r| {
                        let bytes = self.engine.buffer(c.slot).get(..read_bytes)?;
                        Some((r, bytes))
                    });
                    let scored = match landed {
                        Some((r, bytes)) => {
                            how.score::<T>(query, r, bytes, &mut self.words, st, &mut hits)
                        }
                        None => Err(SearchError::Internal("a read for no page".into())),
                    };
                    failed = scored.err();
                }
                self.engine.release(c.slot);
                left = left.saturating_sub(1);
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(hits)
    }
}

impl Scoring<'_, '_> {
    /// Scores the vectors read `r` serves — or, with page mates, every vector on its page that
    /// the filter keeps — after checking the read; those within the radius go to `hits`.
    fn score<T: Element>(
        &self,
        query: &[T],
        r: &PageRead<'_>,
        bytes: &[u8],
        words: &mut [u32],
        st: &mut QueryStats,
        hits: &mut Vec<(u32, f32)>,
    ) -> Result<(), SearchError> {
        self.vs.check_read(r.page, bytes)?;
        let on_page = if self.mates {
            self.vs.ids_on_page(r.page)
        } else {
            &[]
        };
        if on_page.is_empty() {
            for &(_, at, id) in r.vectors {
                let d = exact::<T>(&self.vs, self.metric, query, (id, at), r.page, bytes, words)?;
                st.traversal.exact_distances += 1;
                if d <= self.radius {
                    hits.push((id, d));
                }
            }
            return Ok(());
        }
        // Every vector on the page, the j-th at j × vector bytes; the candidates are among
        // them (each matches the filter).
        let n = std::mem::size_of_val(query);
        let mut scored = 0u64;
        for (j, &id) in on_page.iter().enumerate() {
            if id == u32::MAX || self.keep.is_some_and(|k| !k.matches(id)) {
                continue;
            }
            let d = exact::<T>(
                &self.vs,
                self.metric,
                query,
                (id, j * n),
                r.page,
                bytes,
                words,
            )?;
            scored += 1;
            if d <= self.radius {
                hits.push((id, d));
            }
        }
        st.traversal.exact_distances += scored;
        st.ivf.page_mates += scored.saturating_sub(r.vectors.len() as u64);
        Ok(())
    }
}

impl ListOrder<'_> {
    /// Starts the order of `query`'s lists with a window of `window` lists.
    fn start<T: Element>(
        &mut self,
        query: &[T],
        window: usize,
        st: &mut QueryStats,
    ) -> Result<(), SearchError> {
        // The clustering space; an inner-product query is lifted by 0.
        crate::kinds::ivf::build::prepare(self.ix.metric(), query, 0.0, &mut self.qc);
        if let Some(last) = self.qc.get_mut(self.ix.dim()) {
            *last = 0.0;
        }
        self.probed.clear();
        self.window = window.max(1);
        self.fill(st)
    }

    /// The lists of the current window: by the centroid graph, or every centroid scored once
    /// the window reaches half of them.
    fn fill(&mut self, st: &mut QueryStats) -> Result<(), SearchError> {
        let meta = &self.ix.meta;
        let nlist = meta.nlist();
        self.lists.clear();
        self.next = 0;
        self.complete = self.window.saturating_mul(2) >= nlist;
        if self.complete {
            let cd = meta.centroid_dim();
            let mut all: Vec<(f32, u32)> = meta
                .centroids
                .chunks_exact(cd)
                .take(nlist)
                .enumerate()
                .map(|(l, c)| (crate::kernels::distance(Metric::L2, &self.qc, c), l as u32))
                .collect();
            st.ivf.centroid_distances += all.len() as u64;
            all.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            self.lists.extend(all.iter().map(|&(_, l)| l));
            return Ok(());
        }
        let (found, gs) = crate::vamana::search(
            &meta.graph,
            &self.store,
            &self.qc,
            self.window,
            self.window,
            &mut self.scratch,
        )
        .map_err(|e| SearchError::Internal(format!("centroid graph: {e}")))?;
        st.traversal.hops += gs.hops;
        st.ivf.centroid_distances += gs.distance_computations;
        self.lists.extend(found.iter().map(|&(l, _)| l));
        Ok(())
    }

    /// The nearest list not probed yet, the window widened when it is used up; `None` once
    /// every list was probed.
    fn next(&mut self, st: &mut QueryStats) -> Result<Option<u32>, SearchError> {
        loop {
            while let Some(&l) = self.lists.get(self.next) {
                self.next += 1;
                if self.probed.insert(l) {
                    return Ok(Some(l));
                }
            }
            if self.complete {
                return Ok(None);
            }
            self.window = self.window.saturating_mul(2);
            self.fill(st)?;
        }
    }
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod tests;

//! Searching an IVF index: centroid graph → gather → accelerator (dedup, PQ-ADC, top-n) →
//! heuristic re-rank from disk with page-merged reads and a per-query page buffer.
//!
//! **Heuristic re-rank** (FusionANNS Algorithm 1): the `top_n` candidates, in PQ order, are
//! re-ranked in mini-batches of `batch`; after each batch the change rate of the top-k is
//! `Δ = |S_n \ S_{n−1}| / k`; the re-rank stops once `Δ < ε` held for `β` batches in a row.
//! The comparison is strict, as the paper's text says ("smaller than a given threshold"): its
//! Algorithm 1 writes `≤`, under which `ε = 0` would still stop after `β` batches that changed
//! nothing, while with `<` `ε = 0` re-ranks all `top_n` — a switch the ablation uses.
//!
//! **Reads.** Within a batch the vectors on one page are read by one request (intra-batch
//! merging); every page read stays in the query's page buffer, so no page is read twice for
//! one query (inter-batch deduplication). Both can be switched off for the ablation; the
//! counters [`IvfStats::pages_merged`] and [`IvfStats::pages_buffered`] count the reads each
//! saved.
//!
//! **Pipeline** (Figure 6): a batch search hands the accelerator groups of `accel_batch`
//! queries; while it scores group `g`, the thread re-ranks group `g − 1`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::IvfIndex;
use crate::accel::{FilterJob, FilterPending};
use crate::data::Matrix;
use crate::graph::{SearchScratch, VectorStore};
use crate::index::{BatchOutput, AUTO_SPIN_US};
use crate::io::{Completion, EngineConfig, IoEngine, ReadRequest, PAGE_BYTES};
use crate::kernels::{Element, Metric};
use crate::quant::pq::QueryTable;
use crate::search::{QueryStats, SearchError};

/// Parameters of an IVF search.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IvfSearchParams {
    /// Results per query.
    pub k: usize,
    /// Posting lists probed (`m`).
    pub nprobe: usize,
    /// List size of the centroid-graph search (0: `max(2 · nprobe, 32)`).
    pub centroid_l: usize,
    /// Candidates kept by the filter stage for the re-rank (`n`).
    pub top_n: usize,
    /// Re-rank mini-batch size.
    pub batch: usize,
    /// Change-rate threshold ε of the early stop.
    pub epsilon: f32,
    /// Batches in a row below ε that stop the re-rank (β).
    pub beta: usize,
    /// Early stop on (off: re-rank all `top_n`).
    pub heuristic: bool,
    /// Intra-batch page merging on.
    pub page_merge: bool,
    /// Inter-batch page buffer on.
    pub page_buffer: bool,
    /// Queries per accelerator job in a batch search.
    pub accel_batch: usize,
}

impl Default for IvfSearchParams {
    fn default() -> Self {
        Self {
            k: 10,
            nprobe: 32,
            centroid_l: 0,
            top_n: 200,
            batch: 16,
            epsilon: 0.1,
            beta: 2,
            heuristic: true,
            page_merge: true,
            page_buffer: true,
            accel_batch: 1,
        }
    }
}

/// Largest `nprobe`, `top_n`, `batch` or centroid list size accepted.
pub const MAX_IVF_PARAM: usize = 1 << 20;

impl IvfSearchParams {
    /// The centroid-graph list size used.
    pub fn centroid_list(&self) -> usize {
        if self.centroid_l == 0 {
            (2 * self.nprobe).max(32)
        } else {
            self.centroid_l.max(self.nprobe)
        }
    }

    /// Checks the parameters for an index of `n` vectors and `nlist` lists.
    pub fn validate(&self, n: usize, nlist: usize) -> Result<(), SearchError> {
        let bad = |s: String| Err(SearchError::InvalidRerank(s));
        if self.k == 0 {
            return Err(SearchError::InvalidK {
                k: 0,
                l: self.top_n,
            });
        }
        if self.k > n {
            return Err(SearchError::KTooLarge {
                k: self.k,
                n: n as u64,
            });
        }
        for (what, v) in [
            ("nprobe", self.nprobe),
            ("top_n", self.top_n),
            ("re-rank batch", self.batch),
            ("accel batch", self.accel_batch),
        ] {
            if v == 0 || v > MAX_IVF_PARAM {
                return bad(format!("{what} {v} must be between 1 and {MAX_IVF_PARAM}"));
            }
        }
        if self.nprobe > nlist {
            return bad(format!(
                "nprobe {} exceeds the index's {nlist} lists",
                self.nprobe
            ));
        }
        if self.centroid_l > MAX_IVF_PARAM {
            return bad(format!("centroid list size {} too large", self.centroid_l));
        }
        if self.top_n < self.k {
            return Err(SearchError::InvalidK {
                k: self.k,
                l: self.top_n,
            });
        }
        if !(0.0..=1.0).contains(&self.epsilon) {
            return bad(format!("epsilon {} must be in 0..=1", self.epsilon));
        }
        if self.beta == 0 {
            return bad("beta must be at least 1".into());
        }
        Ok(())
    }
}

/// One search thread's state: its I/O engine and scratch.
pub struct IvfSearcher<'a> {
    ix: &'a IvfIndex,
    engine: Box<dyn IoEngine>,
    store: VectorStore<'a, f32>,
    scratch: SearchScratch,
    table: QueryTable,
    qc: Vec<f32>,
    spin: Duration,
    done: Vec<Completion>,
    /// Page buffer: page → offset in `arena`.
    buffered: HashMap<u64, usize>,
    arena: Vec<u8>,
    /// The current batch: (id, page, offset in page) of vectors still to read, per read.
    reads: Vec<Read>,
    vec_words: Vec<u32>,
    top: Vec<(f32, u32)>,
    prev: Vec<u32>,
    now: Vec<u32>,
}

struct Read {
    page: u64,
    /// (id, byte offset in the read) of every vector this read serves.
    vectors: Vec<(u32, usize)>,
}

impl std::fmt::Debug for IvfSearcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IvfSearcher")
            .field("engine", &self.engine.info())
            .finish_non_exhaustive()
    }
}

impl IvfIndex {
    /// A searcher (one per thread: it owns an I/O engine).
    pub fn searcher(&self) -> Result<IvfSearcher<'_>, SearchError> {
        let g = self.vectors.geometry();
        let cfg = EngineConfig {
            depth: self.opts.queue_depth.max(1),
            max_pages_per_read: g.pages_per_vector,
            register_buffers: self.opts.register_buffers,
            sqpoll: self.opts.sqpoll,
        };
        let engine = self.vfile.engine(self.opts.engine, cfg)?;
        let store = VectorStore::new(&self.meta.centroids, self.meta.centroid_dim(), Metric::L2)
            .ok_or_else(|| SearchError::Internal("centroid store shape".into()))?;
        Ok(IvfSearcher {
            ix: self,
            engine,
            store,
            scratch: SearchScratch::new(self.meta.nlist()),
            table: QueryTable::new(self.pq.m()),
            qc: vec![0.0; self.meta.centroid_dim()],
            spin: Duration::from_micros(self.opts.spin_us.unwrap_or(0)),
            done: Vec::new(),
            buffered: HashMap::new(),
            arena: Vec::new(),
            reads: Vec::new(),
            vec_words: vec![0; g.vector_bytes.div_ceil(4) * g.pages_per_vector.max(1)],
            top: Vec::new(),
            prev: Vec::new(),
            now: Vec::new(),
        })
    }

    /// Searches every row of `queries` on `threads` threads (each with its own searcher),
    /// pipelined: groups of `accel_batch` queries go to the accelerator while the thread
    /// re-ranks the previous group.
    pub fn search_batch<T: Element>(
        &self,
        queries: &Matrix<T>,
        p: &IvfSearchParams,
        threads: usize,
    ) -> Result<BatchOutput, SearchError> {
        p.validate(self.n(), self.meta.nlist())?;
        self.check_dtype::<T>()?;
        let nq = queries.n();
        if queries.dim() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: queries.dim(),
            });
        }
        let threads = threads
            .clamp(1, crate::index::batch::MAX_SEARCH_THREADS)
            .min(nq.max(1));
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let spin = Duration::from_micros(self.opts.spin_us.unwrap_or(if threads <= cores {
            AUTO_SPIN_US
        } else {
            0
        }));
        let k = p.k;
        let next = AtomicUsize::new(0);
        let t0 = Instant::now();
        let parts: Vec<Result<Part, SearchError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| -> Result<Part, SearchError> {
                        let mut s = self.searcher()?;
                        s.spin = spin;
                        let mut part = Part::new();
                        let mut prev: Option<Group> = None;
                        // One query per job: nothing to overlap, and a query's latency should
                        // not include its neighbour's re-rank.
                        if p.accel_batch == 1 {
                            loop {
                                let q = next.fetch_add(1, Ordering::Relaxed);
                                if q >= nq {
                                    break;
                                }
                                let g = s.submit_group(queries, q..q + 1, p)?;
                                s.finish_group(queries, g, p, &mut part)?;
                            }
                            return Ok(part);
                        }
                        loop {
                            let start = next.fetch_add(p.accel_batch, Ordering::Relaxed);
                            let cur = if start < nq {
                                let end = (start + p.accel_batch).min(nq);
                                Some(s.submit_group(queries, start..end, p)?)
                            } else {
                                None
                            };
                            if let Some(g) = prev.take() {
                                s.finish_group(queries, g, p, &mut part)?;
                            }
                            match cur {
                                Some(g) => prev = Some(g),
                                None => break,
                            }
                        }
                        Ok(part)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(SearchError::Internal("a search thread panicked".into()))
                    })
                })
                .collect()
        });
        let mut out = BatchOutput {
            k,
            ids: vec![u32::MAX; nq * k],
            dists: vec![f32::INFINITY; nq * k],
            stats: vec![QueryStats::default(); nq],
            wall_secs: 0.0,
        };
        for part in parts {
            for (q, hits, st) in part? {
                for (j, (d, id)) in hits.into_iter().enumerate().take(k) {
                    out.ids[q * k + j] = id;
                    out.dists[q * k + j] = d;
                }
                out.stats[q] = st;
            }
        }
        out.wall_secs = t0.elapsed().as_secs_f64();
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

/// One thread's results: (query row, hits, stats).
type Part = Vec<(usize, Vec<(f32, u32)>, QueryStats)>;

/// A group of queries whose filter stage is in flight.
struct Group {
    range: std::ops::Range<usize>,
    pending: Box<dyn FilterPending>,
    stats: Vec<QueryStats>,
    started: Vec<Instant>,
}

impl IvfSearcher<'_> {
    /// The I/O engine's description.
    pub fn engine(&self) -> &dyn IoEngine {
        &*self.engine
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
        let t0 = Instant::now();
        let mut st = QueryStats::default();
        let mut job = FilterJob {
            m: self.ix.pq.m(),
            offsets: vec![0],
            top_n: p.top_n,
            ..FilterJob::default()
        };
        self.prepare(query, 0, p, &mut job, &mut st)?;
        let out = self.ix.accel.filter(job)?;
        st.ivf.candidates_unique = u64::from(out.unique[0]);
        st.traversal.pq_distances = u64::from(out.unique[0]);
        let (cands, _) = out.query(0);
        let hits = self.rerank(query, cands, p, &mut st)?;
        st.total_ns = t0.elapsed().as_nanos() as u64;
        Ok((hits, st))
    }

    fn submit_group<T: Element>(
        &mut self,
        queries: &Matrix<T>,
        range: std::ops::Range<usize>,
        p: &IvfSearchParams,
    ) -> Result<Group, SearchError> {
        let mut job = FilterJob {
            m: self.ix.pq.m(),
            offsets: vec![0],
            top_n: p.top_n,
            ..FilterJob::default()
        };
        let mut stats = Vec::with_capacity(range.len());
        let mut started = Vec::with_capacity(range.len());
        for q in range.clone() {
            started.push(Instant::now());
            let mut st = QueryStats::default();
            self.prepare(queries.row(q), q, p, &mut job, &mut st)?;
            stats.push(st);
        }
        let pending = self.ix.accel.submit(job)?;
        Ok(Group {
            range,
            pending,
            stats,
            started,
        })
    }

    fn finish_group<T: Element>(
        &mut self,
        queries: &Matrix<T>,
        g: Group,
        p: &IvfSearchParams,
        part: &mut Part,
    ) -> Result<(), SearchError> {
        let out = g.pending.wait()?;
        for (j, q) in g.range.clone().enumerate() {
            let mut st = g.stats[j];
            st.ivf.candidates_unique = u64::from(out.unique[j]);
            st.traversal.pq_distances = u64::from(out.unique[j]);
            let (cands, _) = out.query(j);
            let hits = self.rerank(queries.row(q), cands, p, &mut st)?;
            st.total_ns = g.started[j].elapsed().as_nanos() as u64;
            part.push((q, hits, st));
        }
        Ok(())
    }

    /// Query checks, its distance table, the centroid search and the gather, appended to `job`.
    fn prepare<T: Element>(
        &mut self,
        query: &[T],
        row: usize,
        p: &IvfSearchParams,
        job: &mut FilterJob,
        st: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let ix = self.ix;
        if query.len() != ix.dim() {
            return Err(SearchError::DimMismatch {
                expected: ix.dim(),
                got: query.len(),
            });
        }
        if !query.iter().all(|v| v.is_finite()) {
            return Err(SearchError::NonFiniteQuery { row });
        }
        ix.pq
            .fill_table(query, &mut self.table)
            .map_err(|e| SearchError::Internal(format!("distance table: {e}")))?;
        job.tables.extend_from_slice(self.table.flat());
        // The clustering space; an inner-product query is lifted by 0.
        super::build::prepare(ix.metric(), query, 0.0, &mut self.qc);
        if let Some(last) = self.qc.get_mut(ix.dim()) {
            *last = 0.0;
        }
        let (lists, gs) = crate::graph::search(
            &ix.meta.graph,
            &self.store,
            &self.qc,
            p.nprobe,
            p.centroid_list(),
            &mut self.scratch,
        )
        .map_err(|e| SearchError::Internal(format!("centroid graph: {e}")))?;
        st.traversal.hops += gs.hops;
        st.ivf.centroid_distances += gs.distance_computations;
        st.ivf.lists_probed += lists.len() as u64;
        for &(l, _) in &lists {
            let ids = ix.meta.list(l);
            job.ids.extend_from_slice(ids);
            st.ivf.candidates += ids.len() as u64;
        }
        job.offsets.push(job.ids.len() as u32);
        Ok(())
    }

    /// The heuristic re-rank of `cands` (PQ order) against `query`.
    fn rerank<T: Element>(
        &mut self,
        query: &[T],
        cands: &[u32],
        p: &IvfSearchParams,
        st: &mut QueryStats,
    ) -> Result<Vec<(f32, u32)>, SearchError> {
        let ix = self.ix;
        let geo = *ix.vectors.geometry();
        let read_pages = geo.pages_per_vector as u32;
        let read_bytes = read_pages as usize * PAGE_BYTES;
        let metric = ix.metric();
        self.buffered.clear();
        self.arena.clear();
        self.top.clear();
        let k = p.k;
        let mut stable = 0usize;
        for batch in cands.chunks(p.batch) {
            st.rerank.rerank_batches += 1;
            self.prev.clear();
            self.prev.extend(self.top.iter().map(|t| t.1));
            self.prev.sort_unstable();
            // Plan the batch's reads.
            self.reads.clear();
            let mut hits: Vec<(u32, usize, usize)> = Vec::new(); // (id, arena offset, offset)
            let mut hit_pages: Vec<u64> = Vec::new();
            let mut misses = 0u64;
            for &id in batch {
                let (page, off) = ix.vectors.locate(id);
                if p.page_buffer {
                    if let Some(&at) = self.buffered.get(&page) {
                        hits.push((id, at, off));
                        hit_pages.push(page);
                        continue;
                    }
                }
                misses += 1;
                match self
                    .reads
                    .iter_mut()
                    .find(|r| p.page_merge && r.page == page)
                {
                    Some(r) => r.vectors.push((id, off)),
                    None => self.reads.push(Read {
                        page,
                        vectors: vec![(id, off)],
                    }),
                }
            }
            hit_pages.sort_unstable();
            hit_pages.dedup();
            st.ivf.pages_buffered += hit_pages.len() as u64;
            st.ivf.pages_merged += misses - self.reads.len() as u64;
            // Vectors found in the buffer.
            for (id, at, off) in hits {
                let bytes = &self.arena[at + off..at + off + geo.vector_bytes];
                let d = exact::<T>(metric, query, bytes, &mut self.vec_words);
                st.traversal.exact_distances += 1;
                insert(&mut self.top, k, d, id);
            }
            // Reads: submit as many as the engine takes, handle completions as they come.
            let mut next = 0usize;
            let mut left = self.reads.len();
            while left > 0 {
                while next < self.reads.len() && self.engine.can_submit() {
                    self.engine.submit(
                        next as u64,
                        ReadRequest {
                            first_page: self.reads[next].page,
                            pages: read_pages,
                        },
                    )?;
                    st.count_read(
                        read_pages,
                        ix.vectors.vectors_on_page(self.reads[next].page),
                    );
                    st.rerank.vector_reads += 1;
                    next += 1;
                }
                self.done.clear();
                let t = Instant::now();
                crate::search::wait_some(&mut *self.engine, self.spin, &mut self.done)?;
                st.io.io_wait_ns += t.elapsed().as_nanos() as u64;
                for c in std::mem::take(&mut self.done) {
                    let r = &self.reads[c.tag as usize];
                    let buf = self.engine.buffer(c.slot);
                    let bytes = &buf[..read_bytes];
                    if ix.opts.verify_pages {
                        for (j, page) in bytes.chunks(PAGE_BYTES).enumerate() {
                            let at = r.page + j as u64;
                            if Some(crc32fast::hash(page)) != ix.vectors.page_crc(at) {
                                self.engine.release(c.slot);
                                return Err(SearchError::Corrupt {
                                    path: ix.vfile.path().to_path_buf(),
                                    page: at,
                                    detail: "checksum mismatch".into(),
                                });
                            }
                        }
                    }
                    for &(id, off) in &r.vectors {
                        let d = exact::<T>(
                            metric,
                            query,
                            &bytes[off..off + geo.vector_bytes],
                            &mut self.vec_words,
                        );
                        st.traversal.exact_distances += 1;
                        insert(&mut self.top, k, d, id);
                    }
                    if p.page_buffer {
                        let at = self.arena.len();
                        self.arena.extend_from_slice(bytes);
                        self.buffered.insert(r.page, at);
                    }
                    self.engine.release(c.slot);
                    left -= 1;
                }
            }
            if p.heuristic {
                self.now.clear();
                self.now.extend(self.top.iter().map(|t| t.1));
                self.now.sort_unstable();
                let changed = self
                    .now
                    .iter()
                    .filter(|id| self.prev.binary_search(id).is_err())
                    .count();
                let delta = changed as f32 / k as f32;
                if delta < p.epsilon {
                    stable += 1;
                    if stable >= p.beta {
                        break;
                    }
                } else {
                    stable = 0;
                }
            }
        }
        Ok(std::mem::take(&mut self.top))
    }
}

/// Inserts `(d, id)` into the sorted top-`k` list.
#[inline]
fn insert(top: &mut Vec<(f32, u32)>, k: usize, d: f32, id: u32) {
    let key = (d, id);
    let less = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if top.len() == k {
        match top.last() {
            Some(last) if less(&key, last).is_lt() => {
                top.pop();
            }
            _ => return,
        }
    }
    let at = top.partition_point(|t| less(t, &key).is_lt());
    top.insert(at, key);
}

/// Exact distance between `query` and the vector in `bytes` (copied to aligned words first).
#[inline]
fn exact<T: Element>(metric: Metric, query: &[T], bytes: &[u8], words: &mut [u32]) -> f32 {
    let w: &mut [u8] = bytemuck::cast_slice_mut(words);
    w[..bytes.len()].copy_from_slice(bytes);
    let v: &[T] = bytemuck::cast_slice(&w[..bytes.len()]);
    crate::kernels::distance(metric, query, v)
}

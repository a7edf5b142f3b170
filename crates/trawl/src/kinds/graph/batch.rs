//! Searching an opened index: searchers (one per thread) and batches of queries over threads.

use std::time::{Duration, Instant};

use crate::data::Matrix;
use crate::io::{EngineConfig, IoError};
use crate::kernels::Element;
use crate::kinds::graph::search::{
    GraphSpace, IndexView, PqCodesAt, PqSource, ResultFilter, SearchParams, Searcher, Strategy,
    MAX_INTERLEAVE,
};
use crate::kinds::graph::DiskIndex;
use crate::search::runner::{batch_threads, on_threads, spin_for, Cursor};
use crate::search::{BatchOutput, QueryStats, SearchError, AUTO_SPIN_US};

impl DiskIndex {
    /// The index as a searcher reads it.
    pub fn view(&self) -> IndexView<'_> {
        // The codes are in memory for every layout but All-in-Storage, whose records carry
        // them (and whose header the medoid's).
        let codes = match &self.codes {
            Some(c) => PqCodesAt::Memory(c),
            None => PqCodesAt::Records {
                medoid: self.packed().map_or(&[][..], |p| p.medoid_code()),
            },
        };
        IndexView {
            space: GraphSpace {
                n: self.n(),
                dim: self.dim(),
                dtype: self.dtype(),
                metric: self.metric(),
                medoid: self.medoid(),
                pq: PqSource {
                    quantizer: &self.pq,
                    codes,
                },
                entry: self.entry.as_ref(),
            },
            layout: &self.layout,
        }
    }

    /// The engine configuration of this index's searchers.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            depth: self.opts.queue_depth.max(1),
            max_pages_per_read: self.layout.pages_per_read(),
            register_buffers: self.opts.register_buffers,
            sqpoll: self.opts.sqpoll,
            taskrun: self.opts.taskrun,
        }
    }

    /// A searcher with its own I/O engine (make one per thread).
    pub fn searcher(&self) -> Result<Searcher<'_>, IoError> {
        let engine = self.file.engine(self.opts.engine, self.engine_config())?;
        let mut s = Searcher::with_engine(self.view(), engine);
        s.set_flash_accel(self.flash_gpu());
        Ok(s)
    }

    /// Searches every row of `queries` over `threads` threads (each with its own engine),
    /// timing each query.
    pub fn search_batch<T: Element>(
        &self,
        queries: &Matrix<T>,
        params: &SearchParams,
        threads: usize,
    ) -> Result<BatchOutput, SearchError> {
        self.search_batch_with(queries, params, threads, 1)
    }

    /// [`DiskIndex::search_batch`] with `interleave` queries in flight on each thread
    /// (throughput mode when above 1): each thread's engine gets enough slots for all of them.
    pub fn search_batch_with<T: Element>(
        &self,
        queries: &Matrix<T>,
        params: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<BatchOutput, SearchError> {
        if queries.dim() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: queries.dim(),
            });
        }
        self.search_rows(queries.as_slice(), params, threads, interleave)
    }

    /// [`DiskIndex::search_batch_with`] over row-major queries in a plain slice (its length a
    /// multiple of the index's dimension): the zero-copy entry point of the bindings. The
    /// parameters are checked once for the batch.
    pub fn search_rows<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<BatchOutput, SearchError> {
        self.search_rows_filtered(rows, params, threads, interleave, None)
    }

    /// [`DiskIndex::search_rows`] (one query in flight per thread) where query `q` neither
    /// expands nor returns node `hidden[q]` ([`Searcher::set_hidden`]): the index's own
    /// vectors searched as if held out. Beam search and PipeSearch only.
    pub fn search_rows_hiding<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        hidden: std::sync::Arc<[u32]>,
    ) -> Result<BatchOutput, SearchError> {
        self.search_rows_with(rows, params, threads, 1, None, Some(hidden))
    }

    /// [`DiskIndex::search_rows`] with the nodes `filter` hides left out of the results (still
    /// traversed): the searches of a live index, whose deleted nodes stay in the graph until a
    /// merge.
    pub fn search_rows_filtered<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        filter: Option<&dyn ResultFilter>,
    ) -> Result<BatchOutput, SearchError> {
        self.search_rows_with(rows, params, threads, interleave, filter, None)
    }

    fn search_rows_with<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        filter: Option<&dyn ResultFilter>,
        hidden: Option<std::sync::Arc<[u32]>>,
    ) -> Result<BatchOutput, SearchError> {
        let dim = self.dim();
        if dim == 0 || !rows.len().is_multiple_of(dim) {
            return Err(SearchError::BadBatch(format!(
                "the queries hold {} elements, not a multiple of the dimension {dim}",
                rows.len()
            )));
        }
        let nq = rows.len() / dim;
        let row = |q: usize| &rows[q * dim..(q + 1) * dim];
        if interleave == 0 || interleave > MAX_INTERLEAVE {
            return Err(SearchError::BadBatch(format!(
                "interleave {interleave} must be between 1 and {MAX_INTERLEAVE}"
            )));
        }
        let mut cfg = self.engine_config();
        // Enough slots for every lane (the flash strategy: for its batch); the parameters are
        // checked against the depth the engines get.
        let per_thread = self
            .view()
            .configure(params, usize::MAX)
            .map_or(1, |c| c.slots_per_thread(interleave));
        if interleave > 1
            || matches!(
                params.strategy,
                crate::kinds::graph::search::Strategy::Flash(_)
            )
        {
            cfg.depth = cfg.depth.max(per_thread);
        }
        let k = params.k;
        for q in 0..nq {
            crate::search::check_query_values(row(q), q)?;
        }
        self.view().configure(params, cfg.depth)?;
        if nq > 0 {
            self.view().space.check_query(row(0))?;
        }
        let threads = batch_threads(threads, nq)?;
        let one = nq == 1 && threads == 1 && interleave == 1 && filter.is_none();
        let (parts, wall_secs) =
            if one && hidden.is_none() && !matches!(params.strategy, Strategy::Flash(_)) {
                self.run_one(params, cfg, row(0))?
            } else {
                self.run_threads(params, cfg, threads, interleave, nq, &row, filter, hidden)?
            };
        let mut out = BatchOutput::empty_for(nq, k, params.range.is_some(), wall_secs);
        for (q, hits, st) in parts {
            out.put(q, hits, st);
        }
        Ok(out)
    }

    /// Runs one query on the calling thread with a pooled engine (setting up an engine costs
    /// more than a query); the same search as one thread of [`DiskIndex::run_threads`].
    #[allow(clippy::type_complexity)]
    fn run_one<T: Element>(
        &self,
        params: &SearchParams,
        cfg: EngineConfig,
        q: &[T],
    ) -> Result<(Vec<(usize, Vec<(u32, f32)>, QueryStats)>, f64), SearchError> {
        let t0 = Instant::now();
        let engine = self.engines.take(&self.file, self.opts.engine, cfg)?;
        let mut s = Searcher::with_engine(self.view(), engine);
        s.set_flash_accel(self.flash_gpu());
        s.set_spin(Duration::from_micros(
            self.opts.spin_us.unwrap_or(AUTO_SPIN_US),
        ));
        s.set_time_parts(self.opts.time_parts);
        let mut hits = Vec::with_capacity(params.k);
        let r = s.search(q, params, &mut hits);
        self.engines.give(cfg, s.into_engine());
        let stats = r?;
        Ok((vec![(0, hits, stats)], t0.elapsed().as_secs_f64()))
    }

    /// Runs `nq` queries (`row(q)`) over `threads` threads, each with its own engine of
    /// configuration `cfg`, taking queries from a shared cursor. Returns every `(query, hits,
    /// stats)` and the wall time.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn run_threads<'r, T: Element>(
        &self,
        params: &SearchParams,
        cfg: EngineConfig,
        threads: usize,
        interleave: usize,
        nq: usize,
        row: &(dyn Fn(usize) -> &'r [T] + Sync),
        filter: Option<&dyn ResultFilter>,
        hidden: Option<std::sync::Arc<[u32]>>,
    ) -> Result<(Vec<(usize, Vec<(u32, f32)>, QueryStats)>, f64), SearchError> {
        let spin = spin_for(threads, self.opts.spin_us);
        let cursor = Cursor::new(nq);
        // One thread: the calling one, with a pooled engine (the network service searches a
        // batch in chunks on threads of its own; a thread and an engine per chunk cost more
        // than a query). More: threads of their own, an engine each.
        let pooled = threads == 1;
        let work = |_| {
            let engine = if pooled {
                self.engines.take(&self.file, self.opts.engine, cfg)?
            } else {
                self.file.engine(self.opts.engine, cfg)?
            };
            let mut searcher = Searcher::with_engine(self.view(), engine);
            searcher.set_flash_accel(self.flash_gpu());
            searcher.set_spin(spin);
            searcher.set_time_parts(self.opts.time_parts);
            searcher.set_filter(filter);
            searcher.set_hidden(hidden.clone())?;
            let mut part = Vec::new();
            let r = searcher.search_stream(
                params,
                interleave,
                &mut || cursor.next().map(|q| (q, row(q))),
                &mut |q, hits, st| part.push((q, hits.to_vec(), st)),
            );
            if pooled {
                self.engines.give(cfg, searcher.into_engine());
            }
            r?;
            Ok(part)
        };
        let (parts, wall_secs) = if pooled {
            let t0 = Instant::now();
            let part = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(0)))
                .unwrap_or_else(|_| Err(SearchError::Internal("a search panicked".into())))?;
            (vec![part], t0.elapsed().as_secs_f64())
        } else {
            on_threads(threads, work)?
        };
        Ok((parts.into_iter().flatten().collect(), wall_secs))
    }
}

//! The flat kind's scan: threads split the data pages into contiguous ranges; each streams
//! its range through its own I/O engine (reads in flight up to the queue depth), scores every
//! vector of a landed page against every query of the batch, and keeps per-query top-k lists
//! that are merged at the end. Results are ordered by `(distance, id)`, so they do not depend
//! on the threads or on the order reads land in.

use std::time::Instant;

use crate::data::Queries;
use crate::exact::topk::{order_key, TopK};
use crate::filter::{FilterError, Filters, Predicate};
use crate::io::{Completion, EngineConfig, ReadRequest, PAGE_BYTES};
use crate::kernels::{distance, Element};
use crate::kinds::flat::FlatIndex;
use crate::kinds::{Hits, HOLE};
use crate::search::{QueryStats, SearchError};
use roaring::RoaringBitmap;

/// Reads in flight per thread when the options give no deeper queue.
const MIN_DEPTH: usize = 8;

/// The filters of a scan: per query its predicate (`None`: every row), and the rows any
/// query may return (`None`: every row), so reads holding none of them are skipped.
struct ScanFilter<'a> {
    preds: Vec<Option<Predicate<'a>>>,
    rows: Option<RoaringBitmap>,
}

/// What one thread found: per-query candidates and statistics.
struct Part {
    /// The `k` nearest per query (empty in a range scan).
    top: Vec<TopK>,
    /// A range scan: every row within the radius per query.
    within: Vec<Vec<(u32, f32)>>,
    /// The radius of a range scan.
    radius: Option<f32>,
    stats: Vec<QueryStats>,
}

impl FlatIndex {
    /// The I/O engine configuration of a scan thread.
    pub(super) fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            depth: self.opts.queue_depth.max(MIN_DEPTH),
            max_pages_per_read: self.vectors.geometry().pages_per_vector,
            register_buffers: self.opts.register_buffers,
            sqpoll: self.opts.sqpoll,
            taskrun: self.opts.taskrun,
        }
    }

    /// The predicates of `filters` for `nq` queries, and the rows any of them may return.
    fn scan_filter(&self, filters: Filters<'_>, nq: usize) -> Result<ScanFilter<'_>, SearchError> {
        let mut f = ScanFilter {
            preds: Vec::with_capacity(nq),
            rows: None,
        };
        if filters.is_none() {
            return Ok(f);
        }
        filters.check(nq).map_err(SearchError::BadBatch)?;
        let attrs = self.attrs.as_ref().ok_or(SearchError::Filter {
            query: 0,
            source: FilterError::NoAttributes,
        })?;
        let mut rows = Some(RoaringBitmap::new());
        for qi in 0..nq {
            let p = match filters.get(qi) {
                None => None,
                Some(e) => Some(
                    Predicate::compile(e, attrs)
                        .map_err(|source| SearchError::Filter { query: qi, source })?,
                ),
            };
            match (&p, rows.as_mut()) {
                (None, _) => rows = None,
                (Some(p), Some(r)) if qi == 0 || !matches!(filters, Filters::All(_)) => {
                    *r |= p.collect()
                }
                _ => {}
            }
            f.preds.push(p);
        }
        f.rows = rows;
        Ok(f)
    }

    /// Exact search of every query: the `k` nearest by `(distance, id)` of the rows its
    /// filter matches.
    pub(super) fn scan<T: Element>(
        &self,
        q: Queries<'_, T>,
        k: usize,
        threads: usize,
        filters: Filters<'_>,
    ) -> Result<Hits, SearchError> {
        let (parts, sf, wall_secs) = self.scan_parts(q, k, None, threads, filters)?;
        let nq = q.n();
        let mut top: Vec<TopK> = (0..nq).map(|_| TopK::new(k)).collect();
        let mut stats = vec![QueryStats::default(); nq];
        for part in parts {
            for (qi, (t, st)) in part.top.into_iter().zip(part.stats).enumerate() {
                for c in t.into_sorted_by_dist() {
                    top[qi].push(c.key, c.id, c.dist);
                }
                stats[qi] += st;
            }
        }
        let mut hits = Hits {
            k,
            ids: vec![HOLE; nq * k],
            dists: vec![f32::INFINITY; nq * k],
            stats,
            wall_secs,
        };
        for (qi, t) in top.into_iter().enumerate() {
            for (j, c) in t.into_sorted_by_dist().into_iter().enumerate() {
                hits.ids[qi * k + j] = u64::from(c.id);
                hits.dists[qi * k + j] = c.dist;
            }
            hits.stats[qi].total_ns = (wall_secs * 1e9) as u64;
            filter_stats(&sf, qi, &mut hits.stats[qi]);
        }
        Ok(hits)
    }

    /// Exact range search of every query: every row its filter matches within `radius`,
    /// nearest first (ties by id).
    pub(super) fn range_scan<T: Element>(
        &self,
        q: Queries<'_, T>,
        radius: f32,
        threads: usize,
        filters: Filters<'_>,
    ) -> Result<crate::search::BatchOutput, SearchError> {
        let (parts, sf, wall_secs) = self.scan_parts(q, 1, Some(radius), threads, filters)?;
        let nq = q.n();
        let mut out = crate::search::BatchOutput::empty_ranged(nq, wall_secs);
        let mut all: Vec<Vec<(u32, f32)>> = vec![Vec::new(); nq];
        for part in parts {
            for (qi, (w, st)) in part.within.into_iter().zip(part.stats).enumerate() {
                all[qi].extend(w);
                out.stats[qi] += st;
            }
        }
        for (qi, mut hits) in all.into_iter().enumerate() {
            hits.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let mut st = out.stats[qi];
            st.total_ns = (wall_secs * 1e9) as u64;
            filter_stats(&sf, qi, &mut st);
            out.put(qi, hits, st);
        }
        Ok(out)
    }

    /// The scan of [`FlatIndex::scan`] and [`FlatIndex::range_scan`]: each thread's part, the
    /// filters and the wall time.
    #[allow(clippy::type_complexity)]
    fn scan_parts<T: Element>(
        &self,
        q: Queries<'_, T>,
        k: usize,
        radius: Option<f32>,
        threads: usize,
        filters: Filters<'_>,
    ) -> Result<(Vec<Part>, ScanFilter<'_>, f64), SearchError> {
        let g = *self.vectors.geometry();
        if T::DTYPE != g.dtype {
            return Err(SearchError::DTypeMismatch {
                expected: g.dtype.name(),
                got: T::DTYPE.name(),
            });
        }
        if q.dim() != g.dim {
            return Err(SearchError::DimMismatch {
                expected: g.dim,
                got: q.dim(),
            });
        }
        if k == 0 {
            return Err(SearchError::BadBatch(
                "k = 0: ask for at least one result".into(),
            ));
        }
        if k as u64 > g.n {
            return Err(SearchError::KTooLarge { k, n: g.n });
        }
        let nq = q.n();
        for i in 0..nq {
            crate::search::check_query_values(q.row(i), i)?;
        }
        let sf = self.scan_filter(filters, nq)?;
        let t0 = Instant::now();
        // A read is one page of vectors, or the pages of one vector that spans several.
        let units = g.data_pages / g.pages_per_vector as u64;
        let threads = threads.clamp(1, crate::search::MAX_SEARCH_THREADS);
        let threads = threads.min(units.max(1) as usize);
        let parts: Vec<Part> = if nq == 0 {
            Vec::new()
        } else {
            crate::search::runner::on_threads(threads, |t| {
                let range =
                    units * t as u64 / threads as u64..units * (t as u64 + 1) / threads as u64;
                self.scan_range(q, k, radius, range, &sf)
            })?
            .0
        };
        Ok((parts, sf, t0.elapsed().as_secs_f64()))
    }
    /// Scans the reads `range` for every query.
    fn scan_range<T: Element>(
        &self,
        q: Queries<'_, T>,
        k: usize,
        radius: Option<f32>,
        range: std::ops::Range<u64>,
        sf: &ScanFilter<'_>,
    ) -> Result<Part, SearchError> {
        let g = *self.vectors.geometry();
        let nq = q.n();
        let mut part = Part {
            top: match radius {
                None => (0..nq).map(|_| TopK::new(k)).collect(),
                Some(_) => Vec::new(),
            },
            within: match radius {
                None => Vec::new(),
                Some(_) => vec![Vec::new(); nq],
            },
            radius,
            stats: vec![QueryStats::default(); nq],
        };
        let mut engine = self.file.engine(self.opts.engine, self.engine_config())?;
        let ppv = g.pages_per_vector as u64;
        let mut landed: Vec<Completion> = Vec::new();
        let mut row: Vec<T> = vec![T::default(); g.dim * g.per_page.max(1)];
        let mut reads = 0u64;
        let per = g.per_page.max(1) as u64;
        // Reads holding no row any query may return are not made.
        let wanted = |unit: u64| {
            sf.rows.as_ref().is_none_or(|r| {
                r.range_cardinality((unit * per) as u32..((unit + 1) * per).min(g.n) as u32) > 0
            })
        };
        let units: Vec<u64> = range.clone().filter(|&u| wanted(u)).collect();
        let (mut next, mut done) = (0usize, 0usize);
        while done < units.len() {
            while next < units.len() && engine.can_submit() {
                let unit = units[next];
                let req = ReadRequest {
                    first_page: 1 + unit * ppv,
                    pages: ppv as u32,
                };
                engine.submit(unit, req)?;
                next += 1;
            }
            landed.clear();
            let t = Instant::now();
            engine.wait(1, &mut landed)?;
            let waited = t.elapsed().as_nanos() as u64;
            for c in &landed {
                let unit = c.tag;
                let bytes = engine.buffer(c.slot);
                let res = self.score_unit(unit, bytes, q, &mut row, &mut part, &sf.preds);
                engine.release(c.slot);
                res?;
                // Each read counts once, to one query of the batch in turn.
                let st = &mut part.stats[(reads % nq as u64) as usize];
                st.io.io_requests += 1;
                st.io.pages_read += ppv;
                st.io.bytes_read += ppv * PAGE_BYTES as u64;
                st.io.io_wait_ns += waited / landed.len() as u64;
                reads += 1;
                done += 1;
            }
        }
        Ok(part)
    }

    /// Checks the pages of read `unit` and scores its vectors against every query.
    fn score_unit<T: Element>(
        &self,
        unit: u64,
        bytes: &[u8],
        q: Queries<'_, T>,
        row: &mut [T],
        part: &mut Part,
        preds: &[Option<Predicate<'_>>],
    ) -> Result<(), SearchError> {
        let g = *self.vectors.geometry();
        let ppv = g.pages_per_vector as u64;
        if self.opts.verify_pages {
            for (j, page) in bytes.chunks(PAGE_BYTES).enumerate() {
                let at = 1 + unit * ppv + j as u64;
                if Some(crc32fast::hash(page)) != self.vectors.page_crc(at) {
                    return Err(SearchError::Corrupt {
                        path: self.dir.join(crate::kinds::flat::FILE_NAME),
                        page: at,
                        detail: "checksum mismatch".into(),
                    });
                }
            }
        }
        let per = g.per_page.max(1);
        let first_id = unit * per as u64;
        let count = (g.n.saturating_sub(first_id) as usize).min(per);
        let src = &bytes[..count * g.vector_bytes];
        // The read buffers are page-aligned and a vector's bytes a multiple of its element's
        // size, so the cast holds; a copy covers any other buffer.
        let vecs: &[T] = match bytemuck::try_cast_slice(src) {
            Ok(v) => v,
            Err(_) => {
                let dst = &mut row[..count * g.dim];
                bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(src);
                dst
            }
        };
        // Queries outer, the page's vectors inner: a query stays in cache across the page.
        for (qi, st) in part.stats.iter_mut().enumerate() {
            let qr = q.row(qi);
            let pred = preds.get(qi).and_then(Option::as_ref);
            for (j, v) in vecs.chunks_exact(g.dim).enumerate() {
                let id = (first_id + j as u64) as u32;
                if pred.is_some_and(|p| !p.matches(id)) {
                    st.filter.rejected += 1;
                    continue;
                }
                let d = distance(self.metric, qr, v);
                st.traversal.exact_distances += 1;
                match part.radius {
                    Some(r) if d <= r => part.within[qi].push((id, d)),
                    Some(_) => {}
                    None => part.top[qi].push(order_key(d), id, d),
                }
            }
        }
        Ok(())
    }
}

/// Fills the filter statistics of query `qi` (an exact scan of what its filter matches).
fn filter_stats(sf: &ScanFilter<'_>, qi: usize, st: &mut QueryStats) {
    if let Some(Some(p)) = sf.preds.get(qi) {
        let c = p.count();
        let f = &mut st.filter;
        f.plan_exact = 1;
        f.matches = c.rows;
        f.matches_exact = u64::from(c.exact);
        f.filter_list = c.rows;
    }
}

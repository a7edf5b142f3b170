//! The search path of a live index: the disk index (deleted nodes hidden) and the deltas,
//! merged by exact distance; and the static node cache of its disk files.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::filter::{Attributes, Expr, FilterError, FilterParams, Filters};
use crate::kernels::{DType, Element};
use crate::kinds::graph::search::{CachePolicy, LiveFilter, SearchParams};
use crate::kinds::graph::updates::delta::Delta;
use crate::kinds::graph::updates::ids::HOLE;
use crate::kinds::graph::DiskIndex;
use crate::progress::Control;
use crate::search::runner::BatchOutput;
use crate::search::{QueryStats, SearchError};
use crate::vamana::search::SearchScratch;

use super::{LiveError, LiveIndex, Version};

/// Results of a batch search of a live index: `nq × k` ids (missing results are
/// [`crate::kinds::graph::updates::ids::HOLE`]) and exact distances, per-query statistics of the disk search, and
/// the batch's wall time.
#[derive(Debug, Clone, Default)]
pub struct LiveBatch {
    /// Results per query.
    pub k: usize,
    /// Row-major ids.
    pub ids: Vec<u64>,
    /// Row-major exact distances.
    pub dists: Vec<f32>,
    /// Per-query statistics (the disk search's).
    pub stats: Vec<QueryStats>,
    /// Seconds for the whole batch.
    pub wall_secs: f64,
    /// A range search's results, every one of each query (nearest first); `ids` and `dists`
    /// are then empty and `k` is 0.
    pub ranged: Option<Vec<Vec<(u64, f32)>>>,
}

impl LiveBatch {
    /// A range search's batch.
    fn ranged(ranged: Vec<Vec<(u64, f32)>>, stats: Vec<QueryStats>, t0: Instant) -> Self {
        Self {
            k: 0,
            ids: Vec::new(),
            dists: Vec::new(),
            stats,
            wall_secs: t0.elapsed().as_secs_f64(),
            ranged: Some(ranged),
        }
    }
}

impl LiveIndex {
    /// Searches every row of `rows` (row-major queries) over `threads` threads: the disk
    /// index (deleted nodes hidden) and the delta, merged by exact distance.
    pub fn search_rows<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<LiveBatch, SearchError> {
        self.search_rows_where(
            rows,
            params,
            threads,
            interleave,
            Filters::None,
            &FilterParams::default(),
        )
    }

    /// [`LiveIndex::search_rows`] with `filters` (one per query, or one for all): the disk
    /// slots searched as a disk index searches them (planned by `fp`), the deltas' nodes
    /// that match scanned exactly when they are few, else searched with a list that grows
    /// with the filter's rarity. Each query's filter statistics count the matches of both.
    #[allow(clippy::too_many_arguments)]
    pub fn search_rows_where<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        filters: Filters<'_>,
        fp: &FilterParams,
    ) -> Result<LiveBatch, SearchError> {
        let t0 = Instant::now();
        let v = self.current.read().clone();
        let e = v.epoch.load(Ordering::Acquire);
        let filter = LiveFilter {
            dead: &v.dead,
            epoch: e,
        };
        let attrs = v.attrs.read().clone();
        if !filters.is_none() && attrs.is_none() {
            return Err(SearchError::Filter {
                query: 0,
                source: FilterError::NoAttributes,
            });
        }
        let mut out = if v.disk_empty {
            empty_disk(&v, rows, params, threads, interleave, &filter)?
        } else {
            v.disk.search_rows_where_in(
                rows,
                params,
                threads,
                interleave,
                filters,
                fp,
                Some(&filter),
                attrs.as_deref(),
            )?
        };
        if let (Some(disk), Some(range)) = (out.ranged.take(), params.range) {
            let (radius, stats) = (range.radius, &mut out.stats);
            let ranged = ranged_live(&v, e, rows, disk, stats, filters, attrs.as_deref(), radius)?;
            return Ok(LiveBatch::ranged(ranged, out.stats, t0));
        }
        let k = out.k;
        let dim = v.disk.dim();
        let mut ids: Vec<u64> = out
            .ids
            .iter()
            .map(|&s| if s == u32::MAX { HOLE } else { v.ids.id(s) })
            .collect();
        let mut dists = out.dists;
        let deltas: Vec<(&Arc<Delta>, Option<Arc<Attributes>>)> = std::iter::once(&v.active)
            .chain(v.frozen.iter())
            .filter(|d| d.len() > 0)
            .map(|d| {
                let a = if filters.is_none() {
                    None
                } else {
                    d.attrs_for(attrs.as_deref())
                };
                (d, a)
            })
            .collect();
        if !deltas.is_empty() {
            // L counts pages on the page-node layout (as many as `DEFAULT_L / 4`); the delta's
            // graph has one node per vector.
            let l = if v.disk.options().layout == crate::kinds::graph::IndexLayout::Pages {
                (4 * params.l).max(k)
            } else {
                params.l.max(k)
            };
            ids.par_chunks_mut(k.max(1))
                .zip(dists.par_chunks_mut(k.max(1)))
                .zip(out.stats.par_iter_mut())
                .enumerate()
                .try_for_each_init(
                    || (SearchScratch::new(0), Vec::new(), Vec::new()),
                    |(scratch, hits, all), (q, ((qi, qd), st))| {
                        all.clear();
                        all.extend(
                            qi.iter()
                                .copied()
                                .zip(qd.iter().copied())
                                .filter(|h| h.0 != HOLE),
                        );
                        let query = &rows[q * dim..(q + 1) * dim];
                        for (d, a) in &deltas {
                            match (filters.get(q), a) {
                                (Some(x), Some(a)) => {
                                    st.filter.matches +=
                                        search_delta_where(d, query, k, l, e, x, a, scratch, hits)
                                            .map_err(|source| SearchError::Filter {
                                                query: q,
                                                source,
                                            })?;
                                }
                                _ => search_delta(d, query, k, l, e, scratch, hits),
                            }
                            all.extend_from_slice(hits);
                        }
                        all.sort_by(|a: &(u64, f32), b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                        let mut seen = HashSet::new();
                        all.retain(|h| seen.insert(h.0));
                        for j in 0..k {
                            let (id, d) = all.get(j).copied().unwrap_or((HOLE, f32::INFINITY));
                            qi[j] = id;
                            qd[j] = d;
                        }
                        Ok::<(), SearchError>(())
                    },
                )?;
        }
        Ok(LiveBatch {
            k,
            ids,
            dists,
            stats: out.stats,
            wall_secs: t0.elapsed().as_secs_f64(),
            ranged: None,
        })
    }

    /// Keeps a static node cache of `nodes` nodes chosen by `policy` (page-packed layouts;
    /// [`DiskIndex::load_cache`]): loaded now, and chosen and loaded again from the new files
    /// after every merge of this handle, so it always holds nodes of the current graph.
    /// `nodes` = 0 drops it. Searches go on meanwhile (they switch to the cached version
    /// when it is ready). A read-only handle whose files a writer has merged since it opened
    /// is refused (reopen it).
    pub fn set_node_cache(
        &self,
        nodes: usize,
        policy: CachePolicy,
        threads: usize,
        ctl: &Control,
    ) -> Result<crate::kinds::graph::cache_load::CacheReport, LiveError> {
        let _one = self.merging.lock();
        let cur = self.current.read().clone();
        let mut disk = DiskIndex::open(&self.dir, self.opts)?;
        disk.writer_held = cur.disk.writer_held;
        let id = |d: &DiskIndex| d.manifest().map(|m| (m.build_id.clone(), m.log_seq));
        if id(&disk) != id(&cur.disk) || disk.n() != cur.disk.n() {
            return Err(LiveError::InvalidInput(format!(
                "{}: the index files changed since this handle opened (a merge by another \
                 process); reopen it to cache the new ones",
                self.dir.display()
            )));
        }
        let report = disk
            .load_cache(nodes, policy, threads.max(1), ctl)
            .map_err(|e| LiveError::InvalidInput(e.to_string()))?;
        // Publish under the writer lock (writes apply to the version they read; the new
        // version shares every mutable part with the old one, so none is lost).
        let _w = self.writer.as_ref().map(|w| w.lock());
        let cur = self.current.read().clone();
        let v = Arc::new(Version {
            disk: Arc::new(disk),
            ids: cur.ids.clone(),
            dead: cur.dead.clone(),
            epoch: cur.epoch.clone(),
            frozen: cur.frozen.clone(),
            active: cur.active.clone(),
            disk_empty: cur.disk_empty,
            attrs: cur.attrs.clone(),
        });
        *self.current.write() = v;
        *self.node_cache.lock() = (nodes > 0).then_some((nodes, policy, threads.max(1)));
        Ok(report)
    }
}

/// A range search's results on a live index: the disk's (slots as ids) and every live vector
/// of the deltas within `radius` (an exact scan), merged nearest first.
#[allow(clippy::too_many_arguments)]
fn ranged_live<T: Element>(
    v: &Version,
    e: u32,
    rows: &[T],
    disk: Vec<Vec<(u32, f32)>>,
    stats: &mut [QueryStats],
    filters: Filters<'_>,
    attrs: Option<&Attributes>,
    radius: f32,
) -> Result<Vec<Vec<(u64, f32)>>, SearchError> {
    let dim = v.disk.dim();
    let deltas: Vec<(&Arc<Delta>, Option<Arc<Attributes>>)> = std::iter::once(&v.active)
        .chain(v.frozen.iter())
        .filter(|d| d.len() > 0)
        .map(|d| {
            (
                d,
                if filters.is_none() {
                    None
                } else {
                    d.attrs_for(attrs)
                },
            )
        })
        .collect();
    disk.into_par_iter()
        .zip(stats.par_iter_mut())
        .enumerate()
        .map(|(q, (hits, st))| {
            let mut all: Vec<(u64, f32)> = hits
                .into_iter()
                .map(|(s, d)| (v.ids.id(s), d))
                .filter(|h| h.0 != HOLE)
                .collect();
            let query = &rows[q * dim..(q + 1) * dim];
            let mut found = Vec::new();
            for (d, a) in &deltas {
                let filter = match (filters.get(q), a) {
                    (Some(x), Some(a)) => Some((x, &**a)),
                    _ => None,
                };
                st.filter.matches += range_delta(d, query, radius, e, filter, &mut found)
                    .map_err(|source| SearchError::Filter { query: q, source })?;
                all.extend_from_slice(&found);
            }
            all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let mut seen = HashSet::new();
            all.retain(|h| seen.insert(h.0));
            Ok(all)
        })
        .collect()
}

/// [`Delta::range_scan`] of the delta's own element type.
fn range_delta<T: Element>(
    d: &Delta,
    query: &[T],
    radius: f32,
    e: u32,
    filter: Option<(&Expr, &Attributes)>,
    out: &mut Vec<(u64, f32)>,
) -> Result<u64, FilterError> {
    match T::DTYPE {
        DType::F32 => d.range_scan::<f32>(bytemuck::cast_slice(query), radius, e, filter, out),
        DType::U8 => d.range_scan::<u8>(bytemuck::cast_slice(query), radius, e, filter, out),
        DType::I8 => d.range_scan::<i8>(bytemuck::cast_slice(query), radius, e, filter, out),
    }
}

fn search_delta<T: Element>(
    d: &Delta,
    query: &[T],
    k: usize,
    l: usize,
    e: u32,
    scratch: &mut SearchScratch,
    out: &mut Vec<(u64, f32)>,
) {
    match T::DTYPE {
        DType::F32 => d.search::<f32>(bytemuck::cast_slice(query), k, l, e, scratch, out),
        DType::U8 => d.search::<u8>(bytemuck::cast_slice(query), k, l, e, scratch, out),
        DType::I8 => d.search::<i8>(bytemuck::cast_slice(query), k, l, e, scratch, out),
    }
}

/// The disk part of a search of a version whose disk slots are all free: the queries checked
/// as a disk search checks them, no result (its graph has no vector to start from).
fn empty_disk<T: Element>(
    v: &Version,
    rows: &[T],
    params: &SearchParams,
    threads: usize,
    interleave: usize,
    filter: &LiveFilter<'_>,
) -> Result<BatchOutput, SearchError> {
    let dim = v.disk.dim();
    if dim == 0 || !rows.len().is_multiple_of(dim) {
        return Err(SearchError::BadBatch(format!(
            "the queries hold {} elements, not a multiple of the dimension {dim}",
            rows.len()
        )));
    }
    if T::DTYPE != v.disk.dtype() {
        return Err(SearchError::DTypeMismatch {
            expected: v.disk.dtype().name(),
            got: T::DTYPE.name(),
        });
    }
    let mut out =
        v.disk
            .search_rows_filtered(&rows[..0], params, threads, interleave, Some(filter))?;
    let nq = rows.len() / dim;
    for q in 0..nq {
        crate::search::check_query_values(&rows[q * dim..(q + 1) * dim], q)?;
    }
    if out.ranged.is_some() {
        out.ranged = Some(vec![Vec::new(); nq]);
    }
    out.ids = vec![u32::MAX; nq * out.k];
    out.dists = vec![f32::INFINITY; nq * out.k];
    out.stats = vec![QueryStats::default(); nq];
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn search_delta_where<T: Element>(
    d: &Delta,
    query: &[T],
    k: usize,
    l: usize,
    e: u32,
    filter: &Expr,
    attrs: &Attributes,
    scratch: &mut SearchScratch,
    out: &mut Vec<(u64, f32)>,
) -> Result<u64, FilterError> {
    match T::DTYPE {
        DType::F32 => d.search_where::<f32>(
            bytemuck::cast_slice(query),
            k,
            l,
            e,
            filter,
            attrs,
            scratch,
            out,
        ),
        DType::U8 => d.search_where::<u8>(
            bytemuck::cast_slice(query),
            k,
            l,
            e,
            filter,
            attrs,
            scratch,
            out,
        ),
        DType::I8 => d.search_where::<i8>(
            bytemuck::cast_slice(query),
            k,
            l,
            e,
            filter,
            attrs,
            scratch,
            out,
        ),
    }
}

//! Filtered search of a disk graph: each query's filter compiled against the slots'
//! attributes, counted, and planned ([`crate::filter::plan`]); inline queries run as
//! sub-batches of one list size through the searcher with the filter as a
//! [`ResultFilter`] (traversed, never returned); scan and exact queries read the records of
//! their candidates ([`crate::kinds::graph::search::scan`]).

use std::collections::BTreeMap;

use roaring::RoaringBitmap;

use crate::filter::{plan, FilterError, FilterParams, Filters, Plan, Predicate};
use crate::kernels::Element;
use crate::kinds::graph::search::scan::{can_score, score_records};
use crate::kinds::graph::search::{LiveFilter, ResultFilter, SearchParams, Searcher, MAX_LIST};
use crate::kinds::graph::DiskIndex;
use crate::search::runner::{batch_threads, on_threads, BatchOutput, Cursor};
use crate::search::{FilterStats, QueryStats, SearchError};

/// The filters of one sub-batch: query `q` (numbered within it) keeps what its predicate
/// matches and the live index has not deleted.
struct GroupFilter<'a> {
    preds: Vec<Option<&'a Predicate<'a>>>,
    live: Option<&'a LiveFilter<'a>>,
    /// Query `q`'s start nodes (a label-aware graph's, of the labels its filter requires).
    seeds: Vec<Vec<u32>>,
    /// Query `q`'s traversal: the nodes carrying one of those labels (with start nodes only).
    gates: Vec<Option<RoaringBitmap>>,
}

impl ResultFilter for GroupFilter<'_> {
    #[inline]
    fn keep(&self, query: usize, id: u32) -> bool {
        self.live.is_none_or(|l| l.visible(id))
            && self
                .preds
                .get(query)
                .copied()
                .flatten()
                .is_none_or(|p| p.matches(id))
    }

    fn prunes_rerank(&self) -> bool {
        true
    }

    fn gate(&self, query: usize) -> Option<&RoaringBitmap> {
        self.gates.get(query).and_then(Option::as_ref)
    }

    fn seeds(&self, query: usize, out: &mut Vec<u32>) {
        if let Some(s) = self.seeds.get(query) {
            for &id in s {
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
    }
}

fn stats_of(p: &plan::Planned) -> FilterStats {
    FilterStats {
        plan_inline: u64::from(p.plan == Plan::Inline),
        plan_scan: u64::from(p.plan == Plan::Scan),
        plan_exact: u64::from(p.plan == Plan::Exact),
        matches: p.count.rows,
        matches_exact: u64::from(p.count.exact),
        filter_list: p.list as u64,
        rejected: 0,
    }
}

impl DiskIndex {
    /// Searches every row of `rows` with `filters` (one per query, or one for all), planned
    /// by `fp`; `live` hides a live index's deleted slots.
    #[allow(clippy::too_many_arguments)]
    pub fn search_rows_where<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        filters: Filters<'_>,
        fp: &FilterParams,
        live: Option<&LiveFilter<'_>>,
    ) -> Result<BatchOutput, SearchError> {
        let attrs = self.attrs().map(|a| &**a);
        self.search_rows_where_in(rows, params, threads, interleave, filters, fp, live, attrs)
    }

    /// [`DiskIndex::search_rows_where`] with the filters compiled against `attrs` (rows =
    /// slots) instead of the index's own: a live index's, which know the names its new
    /// vectors brought.
    #[allow(clippy::too_many_arguments)]
    pub fn search_rows_where_in<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        filters: Filters<'_>,
        fp: &FilterParams,
        live: Option<&LiveFilter<'_>>,
        attrs: Option<&crate::filter::Attributes>,
    ) -> Result<BatchOutput, SearchError> {
        let dim = self.dim();
        if filters.is_none() {
            return self.search_rows_filtered(
                rows,
                params,
                threads,
                interleave,
                live.map(|l| l as &dyn ResultFilter),
            );
        }
        if dim == 0 || !rows.len().is_multiple_of(dim) {
            return Err(SearchError::BadBatch(format!(
                "the queries hold {} elements, not a multiple of the dimension {dim}",
                rows.len()
            )));
        }
        let nq = rows.len() / dim;
        filters.check(nq).map_err(SearchError::BadBatch)?;
        let attrs = attrs.ok_or(SearchError::Filter {
            query: 0,
            source: FilterError::NoAttributes,
        })?;
        if attrs.n() as usize != self.n() {
            return Err(SearchError::Internal(format!(
                "attributes of {} rows for an index of {} slots",
                attrs.n(),
                self.n()
            )));
        }
        let (preds, plans) = self.plan_queries(filters, attrs, nq, params, fp)?;
        let mut out = BatchOutput::empty_for(nq, params.k, params.range.is_some(), 0.0);
        let mut inline: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut scans = Vec::new();
        for (q, pl) in plans.iter().enumerate() {
            match pl {
                None => inline.entry(params.l).or_default().push(q),
                Some(p) if p.plan == Plan::Inline => inline.entry(p.list).or_default().push(q),
                Some(_) => scans.push(q),
            }
        }
        for (list, qs) in inline {
            let mut group_rows = Vec::with_capacity(qs.len() * dim);
            for &q in &qs {
                group_rows.extend_from_slice(&rows[q * dim..(q + 1) * dim]);
            }
            let (seeds, gates) = qs
                .iter()
                .map(|&q| self.label_gate(preds[q].as_ref(), params))
                .unzip();
            let gf = GroupFilter {
                preds: qs.iter().map(|&q| preds[q].as_ref()).collect(),
                live,
                seeds,
                gates,
            };
            let mut p = *params;
            p.l = list.max(params.l);
            let got = self.search_rows_filtered(
                &group_rows,
                &p,
                threads,
                interleave,
                Some(&gf as &dyn ResultFilter),
            )?;
            out.wall_secs += got.wall_secs;
            for (i, &q) in qs.iter().enumerate() {
                let mut st = got.stats[i];
                let rejected = st.filter.rejected;
                if let Some(pl) = &plans[q] {
                    st.filter = stats_of(pl);
                    st.filter.rejected = rejected;
                }
                out.put(q, got.hits_of(i), st);
            }
        }
        if !scans.is_empty() {
            let done = self.run_scans(rows, params.k, threads, &scans, &preds, &plans, live)?;
            out.wall_secs += done.1;
            for (q, hits, st) in done.0 {
                out.put(q, hits, st);
            }
        }
        Ok(out)
    }

    /// Each query's filter compiled against `attrs` and planned.
    #[allow(clippy::type_complexity)]
    fn plan_queries<'a>(
        &self,
        filters: Filters<'_>,
        attrs: &'a crate::filter::Attributes,
        nq: usize,
        params: &SearchParams,
        fp: &FilterParams,
    ) -> Result<(Vec<Option<Predicate<'a>>>, Vec<Option<plan::Planned>>), SearchError> {
        let mut preds: Vec<Option<Predicate<'a>>> = Vec::with_capacity(nq);
        for q in 0..nq {
            preds.push(match filters.get(q) {
                None => None,
                Some(e) => Some(
                    Predicate::compile(e, attrs)
                        .map_err(|source| SearchError::Filter { query: q, source })?,
                ),
            });
        }
        let scorable = can_score(self.view().layout);
        let code_bytes = self.codes().map(|c| c.m());
        let n = u64::from(attrs.n());
        let plans: Vec<Option<plan::Planned>> = preds
            .iter()
            .map(|p| {
                p.as_ref().map(|p| {
                    let mut fp = *fp;
                    // A range search traverses: its expansion covers the radius whatever the
                    // filter's selectivity (the exact scans are top-k).
                    if !scorable || params.range.is_some() {
                        fp.plan = Some(Plan::Inline);
                    }
                    // On a label-aware graph only the required labels' nodes are traversed:
                    // the inline list grows with the share of them the filter rejects.
                    let rows = self.gated_rows(p, params).unwrap_or(n);
                    let mut pl = plan::plan(&fp, p.count(), rows, params.k, params.l, code_bytes);
                    pl.list = pl.list.min(MAX_LIST);
                    pl
                })
            })
            .collect();
        Ok((preds, plans))
    }

    /// The start nodes and the gate of a query with predicate `p` on a label-aware graph:
    /// the starts of the labels `p` requires and the nodes carrying them, when every one
    /// has a start (else none: the plain traversal).
    fn label_gate(
        &self,
        p: Option<&Predicate<'_>>,
        params: &SearchParams,
    ) -> (Vec<u32>, Option<RoaringBitmap>) {
        let mut seeds = Vec::new();
        let (Some(ls), Some(p), true) = (self.label_starts(), p, self.gates(params)) else {
            return (seeds, None);
        };
        ls.seeds_for(p, &mut seeds);
        if seeds.is_empty() {
            return (seeds, None);
        }
        let gate =
            p.label_cover()
                .unwrap_or_default()
                .iter()
                .fold(RoaringBitmap::new(), |mut g, &l| {
                    g |= p.attrs().bitmap(l);
                    g
                });
        (seeds, Some(gate))
    }

    /// Whether searches with `params` take start nodes and a gate: beam search and PipeSearch
    /// over a layout of records with the PQ codes in memory (the flash strategy and the
    /// decoupled layout's machines start from the medoid or the entry index only).
    fn gates(&self, params: &SearchParams) -> bool {
        use crate::kinds::graph::search::{LayoutReader, Strategy};
        matches!(params.strategy, Strategy::Beam(_) | Strategy::Pipe(_))
            && matches!(
                self.view().layout,
                LayoutReader::Packed(_) | LayoutReader::Shuffled(_)
            )
    }

    /// The nodes a gated traversal of `p` may enter, counted (`None`: not gated).
    fn gated_rows(&self, p: &Predicate<'_>, params: &SearchParams) -> Option<u64> {
        let ls = self.label_starts().filter(|_| self.gates(params))?;
        let cover = p.label_cover()?;
        if cover.is_empty() || cover.iter().any(|&l| ls.of(l).is_none()) {
            return None;
        }
        Some(cover.iter().map(|&l| p.attrs().bitmap(l).len()).sum())
    }

    /// Runs the scan and exact queries `qs` over `threads` threads.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn run_scans<T: Element>(
        &self,
        rows: &[T],
        k: usize,
        threads: usize,
        qs: &[usize],
        preds: &[Option<Predicate<'_>>],
        plans: &[Option<plan::Planned>],
        live: Option<&LiveFilter<'_>>,
    ) -> Result<(Vec<(usize, Vec<(u32, f32)>, QueryStats)>, f64), SearchError> {
        let dim = self.dim();
        let threads = batch_threads(threads, qs.len())?;
        let cursor = Cursor::new(qs.len());
        let cfg = self.engine_config();
        let (parts, wall) = on_threads(threads, |_| {
            let engine = self.file().engine(self.options().engine, cfg)?;
            let mut s = Searcher::with_engine(self.view(), engine);
            let mut part = Vec::new();
            let mut hits = Vec::new();
            while let Some(i) = cursor.next() {
                let q = qs[i];
                let (Some(pred), Some(pl)) = (&preds[q], &plans[q]) else {
                    continue;
                };
                let t0 = std::time::Instant::now();
                let query = &rows[q * dim..(q + 1) * dim];
                let mut st = QueryStats {
                    filter: stats_of(pl),
                    ..QueryStats::default()
                };
                let mut ids: Vec<u32> = Vec::new();
                pred.rows_into(&mut ids);
                if let Some(l) = live {
                    ids.retain(|&id| l.visible(id));
                }
                if pl.plan == Plan::Scan && ids.len() > pl.list {
                    self.best_by_code(query, &mut ids, pl.list, &mut st)?;
                }
                score_records(&mut s, query, &ids, k, &mut hits, &mut st)?;
                st.total_ns = t0.elapsed().as_nanos() as u64;
                part.push((q, hits.clone(), st));
            }
            Ok(part)
        })?;
        Ok((parts.into_iter().flatten().collect(), wall))
    }

    /// Keeps the `keep` of `ids` nearest to `query` by PQ distance.
    fn best_by_code<T: Element>(
        &self,
        query: &[T],
        ids: &mut Vec<u32>,
        keep: usize,
        st: &mut QueryStats,
    ) -> Result<(), SearchError> {
        let Some(codes) = self.codes() else {
            return Ok(());
        };
        let table = self
            .pq()
            .query(query)
            .map_err(|e| SearchError::Internal(format!("PQ table: {e}")))?;
        let mut d = vec![0u32; ids.len()];
        match table.as_pq() {
            // The table with u16 entries: it stays in L1 over the many codes of a scan.
            Some(t) => t.quantized().distances_of(codes, ids, &mut d),
            None => {
                let mut f = vec![0f32; ids.len()];
                table.distances_of(codes, ids, &mut f);
                // Order-preserving keys of the estimates (all finite or +∞).
                for (k, x) in d.iter_mut().zip(&f) {
                    let b = x.to_bits();
                    *k = if b >> 31 == 1 { !b } else { b | 1 << 31 };
                }
            }
        }
        st.traversal.pq_distances += ids.len() as u64;
        let mut order: Vec<(u32, u32)> = d.into_iter().zip(ids.iter().copied()).collect();
        let cmp = |a: &(u32, u32), b: &(u32, u32)| a.cmp(b);
        if order.len() > keep {
            order.select_nth_unstable_by(keep, cmp);
            order.truncate(keep);
        }
        ids.clear();
        ids.extend(order.into_iter().map(|(_, id)| id));
        Ok(())
    }
}

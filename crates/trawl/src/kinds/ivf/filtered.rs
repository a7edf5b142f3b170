//! Filtered search of an IVF index: each query's filter compiled against the vectors'
//! attributes and planned. Inline: the lists of the `nprobe / selectivity` nearest
//! centroids (at most every list), their ids filtered before PQ scoring, so the accelerator
//! scores only matches; scan: the matches themselves are the candidates, no list probed
//! (chosen when they are fewer than inline would gather). Page mates the filter rejects are
//! not re-ranked.

use crate::filter::plan::Planned;
use crate::filter::{FilterError, Plan, Predicate, QueryFilter};
use crate::kernels::Element;
use crate::kinds::ivf::{IvfIndex, IvfSearchParams};
use crate::kinds::{Queries, Run};
use crate::search::{BatchOutput, FilterStats, SearchError};

/// A query's filter and the plan chosen for it.
#[derive(Debug)]
pub(crate) struct IvfFilter<'a> {
    /// The compiled filter.
    pub pred: Predicate<'a>,
    /// The plan (`list`: lists probed inline, candidates when scanning).
    pub plan: Planned,
}

impl IvfIndex {
    /// Searches `queries` with `filter` (one argument of every kind's search).
    pub fn search_batch_where<T: Element>(
        &self,
        queries: Queries<'_, T>,
        p: &IvfSearchParams,
        run: Run,
        filter: &QueryFilter<'_>,
    ) -> Result<BatchOutput, SearchError> {
        if filter.is_none() {
            return self.search_batch(queries, p, run);
        }
        let nq = queries.n();
        filter.filters.check(nq).map_err(SearchError::BadBatch)?;
        let attrs = self.attrs().ok_or(SearchError::Filter {
            query: 0,
            source: FilterError::NoAttributes,
        })?;
        let nlist = self.meta.nlist();
        let entries: usize = (0..nlist as u32).map(|l| self.meta.list(l).len()).sum();
        let avg_list = entries as f64 / nlist.max(1) as f64;
        let mut filters = Vec::with_capacity(nq);
        for q in 0..nq {
            let Some(e) = filter.filters.get(q) else {
                filters.push(None);
                continue;
            };
            let pred = Predicate::compile(e, attrs)
                .map_err(|source| SearchError::Filter { query: q, source })?;
            let count = pred.count();
            let sel = count.rows as f64 / f64::from(attrs.n().max(1));
            let scale = (1.0 / sel.max(1e-12)).clamp(1.0, filter.params.max_scale.max(1.0));
            let nprobe = ((p.nprobe as f64 * scale).ceil() as usize).clamp(p.nprobe, nlist);
            let plan = match filter.params.plan {
                Some(Plan::Inline) => Plan::Inline,
                Some(_) => Plan::Scan,
                // Fewer PQ scores than the lists would gather, and no list walked.
                None if (count.rows as f64) <= nprobe as f64 * avg_list => Plan::Scan,
                None => Plan::Inline,
            };
            let list = if plan == Plan::Inline {
                nprobe
            } else {
                count.rows as usize
            };
            filters.push(Some(IvfFilter {
                pred,
                plan: Planned { plan, count, list },
            }));
        }
        let mut out = self.search_batch_with(queries, p, run, &filters)?;
        for (q, f) in filters.iter().enumerate() {
            let Some(f) = f else { continue };
            let st = &mut out.stats[q].filter;
            let rejected = st.rejected;
            *st = FilterStats {
                plan_inline: u64::from(f.plan.plan == Plan::Inline),
                plan_scan: u64::from(f.plan.plan == Plan::Scan),
                plan_exact: 0,
                matches: f.plan.count.rows,
                matches_exact: u64::from(f.plan.count.exact),
                filter_list: f.plan.list as u64,
                rejected,
            };
        }
        Ok(out)
    }
}

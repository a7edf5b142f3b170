//! The filter stage's input of one query: its checks, its distance table or RaBitQ query, the
//! centroid-graph search and the gather of the probed lists (or their names, for FastScan).

use crate::accel::{FilterJob, TABLE_ROW};
use crate::filter::Plan;
use crate::kernels::Element;
use crate::kinds::ivf::IvfSearchParams;
use crate::search::{QueryStats, SearchError};

use super::IvfSearcher;

impl IvfSearcher<'_> {
    /// Query checks, its distance table, the centroid search and the gather, appended to `job`.
    pub(super) fn prepare<T: Element>(
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
        crate::search::check_query_values(query, row)?;
        match &ix.pq {
            crate::quant::Quantiser::Pq(pq) => {
                let at = job.tables.len();
                job.tables.resize(at + pq.m() * TABLE_ROW, 0.0);
                let (rows, _) = job.tables[at..].as_chunks_mut::<TABLE_ROW>();
                pq.fill_rows(query, rows)
                    .map_err(|e| SearchError::Internal(format!("distance table: {e}")))?;
            }
            crate::quant::Quantiser::RaBitQ(rq) => {
                // The query's bit planes and constants; its buffers are reused batch to batch.
                let at = job.rbq.len();
                if let Some(slot) = self.rbq_spare.pop() {
                    job.rbq.push(slot);
                } else {
                    job.rbq.push(Default::default());
                }
                rq.fill_query(query, &mut job.rbq[at])
                    .map_err(|e| SearchError::Internal(format!("RaBitQ query: {e}")))?;
            }
        }
        // The clustering space; an inner-product query is lifted by 0.
        let filter = self.filters.get(row).and_then(Option::as_ref);
        if let Some(f) = filter.filter(|f| f.plan.plan != Plan::Inline) {
            // Scan: the matches are the candidates, no list probed.
            let before = job.ids.len();
            job.ids.extend(f.pred.collect().iter());
            st.ivf.candidates += (job.ids.len() - before) as u64;
            job.offsets.push(job.ids.len() as u32);
            return Ok(());
        }
        crate::kinds::ivf::build::prepare(ix.metric(), query, 0.0, &mut self.qc);
        if let Some(last) = self.qc.get_mut(ix.dim()) {
            *last = 0.0;
        }
        let (lists, gs) = crate::vamana::search(
            &ix.meta.graph,
            &self.store,
            &self.qc,
            filter.map_or(p.nprobe, |f| f.plan.list),
            p.centroid_list().max(filter.map_or(0, |f| f.plan.list)),
            &mut self.scratch,
        )
        .map_err(|e| SearchError::Internal(format!("centroid graph: {e}")))?;
        st.traversal.hops += gs.hops;
        st.ivf.centroid_distances += gs.distance_computations;
        st.ivf.lists_probed += lists.len() as u64;
        if !job.list_offsets.is_empty() {
            for &(l, _) in &lists {
                job.lists.push(l);
                st.ivf.candidates += ix.meta.list(l).len() as u64;
            }
            job.list_offsets.push(job.lists.len() as u32);
            job.offsets.push(0);
            return Ok(());
        }
        for &(l, _) in &lists {
            let ids = ix.meta.list(l);
            match filter {
                // The predicate before PQ scoring: the accelerator gets the survivors.
                Some(f) => {
                    let before = job.ids.len();
                    job.ids.extend(ids.iter().filter(|&&id| f.pred.matches(id)));
                    let kept = job.ids.len() - before;
                    st.filter.rejected += (ids.len() - kept) as u64;
                    st.ivf.candidates += kept as u64;
                }
                None => {
                    job.ids.extend_from_slice(ids);
                    st.ivf.candidates += ids.len() as u64;
                }
            }
        }
        job.offsets.push(job.ids.len() as u32);
        Ok(())
    }
}

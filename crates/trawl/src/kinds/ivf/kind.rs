//! The IVF kind ([`IvfIndex`], FusionANNS) under the index-kind contract.

use std::path::Path;

use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::{IndexInfo, KindName, OpenOptions};
use crate::kinds::ivf::{IvfIndex, IvfSearchParams};
use crate::kinds::{Error, Hits, IndexKind, Queries, Run};

impl IndexKind for IvfIndex {
    type Params = IvfSearchParams;

    fn open_dir(dir: &Path, opts: OpenOptions) -> Result<Self, Error> {
        Ok(IvfIndex::open(dir, opts)?)
    }

    fn kind(&self) -> KindName {
        KindName::Ivf
    }

    fn n(&self) -> usize {
        IvfIndex::n(self)
    }

    fn dim(&self) -> usize {
        IvfIndex::dim(self)
    }

    fn dtype(&self) -> DType {
        IvfIndex::dtype(self)
    }

    fn metric(&self) -> Metric {
        IvfIndex::metric(self)
    }

    fn search<T: Element>(
        &self,
        q: Queries<'_, T>,
        p: &IvfSearchParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<Hits, Error> {
        if !filter.is_none() {
            return Ok(self.search_batch_where(q, p, run, filter)?.into());
        }
        if q.n() == 1 && run.threads == 1 && q.dim() == self.dim() {
            return one_query(self, q.rows(), p);
        }
        Ok(self.search_batch(q, p, run)?.into())
    }

    fn range_search<T: Element>(
        &self,
        q: Queries<'_, T>,
        radius: f32,
        p: &IvfSearchParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<crate::kinds::RangeHits, Error> {
        crate::kinds::check_radius(radius)?;
        self.range_search_batch(q, radius, p, run, filter)?
            .try_into()
    }

    fn info(&self) -> Result<IndexInfo, Error> {
        Ok(IvfIndex::info(self)?)
    }

    fn memory_bytes(&self) -> u64 {
        self.memory().total()
    }

    fn verify(&self, ctl: &crate::progress::Control) -> Result<crate::kinds::VerifyReport, Error> {
        Ok(IvfIndex::verify(self, ctl)?)
    }

    fn engine_info(&self) -> Result<crate::io::EngineInfo, Error> {
        Ok(self.searcher()?.engine().info())
    }

    fn disk_bytes(&self) -> u64 {
        self.file_bytes()
            .map_or(0, |f| f.iter().map(|(_, b)| *b).sum())
    }
}

/// One query with a pooled engine, as [`Hits`].
fn one_query<T: Element>(ix: &IvfIndex, q: &[T], p: &IvfSearchParams) -> Result<Hits, Error> {
    let t0 = std::time::Instant::now();
    let (found, stats) = ix.search_one(q, p)?;
    let mut hits = Hits {
        k: p.k,
        ids: vec![crate::kinds::HOLE; p.k],
        dists: vec![f32::INFINITY; p.k],
        stats: Vec::new(),
        wall_secs: 0.0,
    };
    for (j, (d, id)) in found.into_iter().take(p.k).enumerate() {
        hits.ids[j] = u64::from(id);
        hits.dists[j] = d;
    }
    hits.wall_secs = t0.elapsed().as_secs_f64();
    hits.stats.push(stats);
    Ok(hits)
}

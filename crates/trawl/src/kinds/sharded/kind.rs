//! The sharded kind ([`ShardedIndex`]: graph indexes of partitions, each query searched in
//! its nearest shards and the results merged) under the index-kind contract.

use std::path::Path;

use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::search::SearchParams;
use crate::kinds::graph::{IndexInfo, KindName, OpenOptions};
use crate::kinds::sharded::ShardedIndex;
use crate::kinds::{Error, Hits, IndexKind, Queries, Run};

/// Search parameters of a sharded index.
#[derive(Debug, Clone, Copy)]
pub struct ShardedParams {
    /// Every shard's graph search.
    pub graph: SearchParams,
    /// Shards each query visits, nearest centroids first (0 = all).
    pub probe: usize,
}

impl IndexKind for ShardedIndex {
    type Params = ShardedParams;

    fn open_dir(dir: &Path, opts: OpenOptions) -> Result<Self, Error> {
        Ok(ShardedIndex::open(dir, opts)?)
    }

    fn kind(&self) -> KindName {
        KindName::Sharded
    }

    fn n(&self) -> usize {
        ShardedIndex::n(self)
    }

    fn dim(&self) -> usize {
        ShardedIndex::dim(self)
    }

    fn dtype(&self) -> DType {
        ShardedIndex::dtype(self)
    }

    fn metric(&self) -> Metric {
        ShardedIndex::metric(self)
    }

    fn search<T: Element>(
        &self,
        q: Queries<'_, T>,
        p: &ShardedParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<Hits, Error> {
        if q.dim() != self.dim() {
            return Err(crate::search::SearchError::DimMismatch {
                expected: self.dim(),
                got: q.dim(),
            }
            .into());
        }
        Ok(self
            .search_rows_where(
                q.rows(),
                &p.graph,
                run.threads,
                run.interleave,
                p.probe,
                filter,
            )?
            .into())
    }

    fn range_search<T: Element>(
        &self,
        q: Queries<'_, T>,
        radius: f32,
        p: &ShardedParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<crate::kinds::RangeHits, Error> {
        crate::kinds::check_radius(radius)?;
        if q.dim() != self.dim() {
            return Err(crate::search::SearchError::DimMismatch {
                expected: self.dim(),
                got: q.dim(),
            }
            .into());
        }
        let graph = crate::kinds::graph::range_params(&p.graph, radius);
        self.search_rows_where(
            q.rows(),
            &graph,
            run.threads,
            run.interleave,
            p.probe,
            filter,
        )?
        .try_into()
    }

    fn info(&self) -> Result<IndexInfo, Error> {
        Ok(self.describe()?)
    }

    fn memory_bytes(&self) -> u64 {
        ShardedIndex::memory_bytes(self)
    }

    fn verify(&self, ctl: &crate::progress::Control) -> Result<crate::kinds::VerifyReport, Error> {
        // Every shard whole (its files named by the shard's directory), after the shard
        // manifest, which opening checked against every shard.
        let mut report = crate::kinds::VerifyReport {
            manifest: true,
            ..Default::default()
        };
        for (s, e) in self.manifest().header.shards.iter().enumerate() {
            let dir = self.dir().join(&e.dir);
            let r = crate::kinds::graph::verify_index(&dir, ctl)
                .map_err(|source| crate::kinds::sharded::ShardError::Open { shard: s, source })?;
            report.files.extend(r.files.into_iter().map(|mut f| {
                f.name = format!("{}/{}", e.dir, f.name);
                f
            }));
        }
        Ok(report)
    }

    fn engine_info(&self) -> Result<crate::io::EngineInfo, Error> {
        let s = self.shards()[0]
            .searcher()
            .map_err(crate::search::SearchError::from)?;
        Ok(s.engine().info())
    }

    fn disk_bytes(&self) -> u64 {
        ShardedIndex::disk_bytes(self)
    }
}

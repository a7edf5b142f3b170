//! The graph kind: a Vamana graph on disk with PQ codes in memory ([`DiskIndex`]), searched
//! with beam search, PipeSearch or the flash strategy; updates (inserts, deletes, merges) are
//! a capability of the kind ([`LiveIndex`]), taken on as soon as the directory has files of
//! updates.

use std::path::Path;
use std::sync::Arc;

use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::search::SearchParams;
use crate::kinds::graph::updates::live::{Access, LiveIndex};
use crate::kinds::graph::{DiskIndex, IndexInfo, KindName, OpenOptions};
use crate::kinds::{Error, Hits, IndexKind, Queries, Run};
use crate::search::SearchError;

/// A graph index: its disk files alone (ids are row numbers), or — once it has taken updates
/// — those files as a live index (ids are the vectors' ids; the log's unmerged inserts and
/// deletes are searched too).
#[derive(Debug)]
pub struct GraphIndex {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Disk(Arc<DiskIndex>),
    Live(Box<LiveIndex>),
}

impl GraphIndex {
    /// Whether the index in `dir` has taken updates (its ids are not its row numbers, or it
    /// has a log): then it is searched as a live index.
    pub fn has_updates(dir: &Path) -> bool {
        dir.join(crate::kinds::graph::updates::ids::FILE_NAME)
            .is_file()
            || dir
                .join(crate::kinds::graph::updates::wal::FILE_NAME)
                .is_file()
    }

    /// The opened disk files `disk`, as a live index (read-only) when the directory has
    /// updates.
    pub fn from_disk(disk: DiskIndex) -> Result<Self, Error> {
        if !Self::has_updates(disk.dir()) {
            return Ok(Self {
                inner: Inner::Disk(Arc::new(disk)),
            });
        }
        Ok(Self::from_live(LiveIndex::from_disk(disk)?))
    }

    /// A live index.
    pub fn from_live(live: LiveIndex) -> Self {
        Self {
            inner: Inner::Live(Box::new(live)),
        }
    }

    /// Opens `dir` for searching and, with `Access::ReadWrite`, for updates.
    pub fn open_with(dir: &Path, opts: OpenOptions, access: Access) -> Result<Self, Error> {
        match access {
            Access::ReadOnly => Self::from_disk(DiskIndex::open(dir, opts)?),
            Access::ReadWrite => Ok(Self::from_live(LiveIndex::open(dir, opts, access)?)),
        }
    }

    /// The disk files new searches read.
    pub fn disk(&self) -> Arc<DiskIndex> {
        match &self.inner {
            Inner::Disk(d) => Arc::clone(d),
            Inner::Live(l) => l.disk(),
        }
    }

    /// The live index, when the index is searched as one (it has updates, or is open for
    /// writing).
    pub fn live(&self) -> Option<&LiveIndex> {
        match &self.inner {
            Inner::Disk(_) => None,
            Inner::Live(l) => Some(l),
        }
    }
}

impl IndexKind for GraphIndex {
    type Params = SearchParams;

    fn open_dir(dir: &Path, opts: OpenOptions) -> Result<Self, Error> {
        Self::open_with(dir, opts, Access::ReadOnly)
    }

    fn kind(&self) -> KindName {
        KindName::Graph
    }

    fn n(&self) -> usize {
        match &self.inner {
            Inner::Disk(d) => d.n(),
            Inner::Live(l) => l.len(),
        }
    }

    fn dim(&self) -> usize {
        match &self.inner {
            Inner::Disk(d) => d.dim(),
            Inner::Live(l) => l.dim(),
        }
    }

    fn dtype(&self) -> DType {
        match &self.inner {
            Inner::Disk(d) => d.dtype(),
            Inner::Live(l) => l.dtype(),
        }
    }

    fn metric(&self) -> Metric {
        self.disk().metric()
    }

    fn search<T: Element>(
        &self,
        q: Queries<'_, T>,
        p: &SearchParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<Hits, Error> {
        let mut p = *p;
        p.range = None;
        Ok(match self.batch(q, &p, run, filter)? {
            Batch::Disk(b) => b.into(),
            Batch::Live(b) => b.into(),
        })
    }

    fn range_search<T: Element>(
        &self,
        q: Queries<'_, T>,
        radius: f32,
        p: &SearchParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<crate::kinds::RangeHits, Error> {
        crate::kinds::check_radius(radius)?;
        let p = crate::kinds::graph::range_params(p, radius);
        match self.batch(q, &p, run, filter)? {
            Batch::Disk(b) => b.try_into(),
            Batch::Live(b) => b.try_into(),
        }
    }

    fn info(&self) -> Result<IndexInfo, Error> {
        Ok(self.disk().info()?)
    }

    fn memory_bytes(&self) -> u64 {
        let delta = self.live().map_or(0, |l| l.delta_bytes());
        self.disk().memory().total() + delta
    }

    fn disk_bytes(&self) -> u64 {
        self.disk().disk_bytes().total()
    }

    fn verify(&self, ctl: &crate::progress::Control) -> Result<crate::kinds::VerifyReport, Error> {
        Ok(crate::kinds::graph::verify_index(self.disk().dir(), ctl)?)
    }

    fn engine_info(&self) -> Result<crate::io::EngineInfo, Error> {
        let disk = self.disk();
        let s = disk.searcher().map_err(SearchError::from)?;
        Ok(s.engine().info())
    }
}

/// A batch's results: of the disk index, or of a live index.
enum Batch {
    Disk(crate::search::BatchOutput),
    Live(crate::kinds::graph::updates::live::LiveBatch),
}

impl GraphIndex {
    /// Searches `q` with `p` (top-k, or range when `p.range` is set).
    fn batch<T: Element>(
        &self,
        q: Queries<'_, T>,
        p: &SearchParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<Batch, Error> {
        if q.dim() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: q.dim(),
            }
            .into());
        }
        Ok(match &self.inner {
            Inner::Disk(d) => Batch::Disk(d.search_rows_where(
                q.rows(),
                p,
                run.threads,
                run.interleave,
                filter.filters,
                &filter.params,
                None,
            )?),
            Inner::Live(l) => Batch::Live(l.search_rows_where(
                q.rows(),
                p,
                run.threads,
                run.interleave,
                filter.filters,
                &filter.params,
            )?),
        })
    }
}

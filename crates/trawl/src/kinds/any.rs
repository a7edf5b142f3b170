//! [`AnyIndex`]: an opened index of any kind, delegating to it; [`open`], which opens whatever
//! kind a directory holds.

use std::path::Path;

use crate::data::AnyMatrix;
use crate::filter::QueryFilter;
use crate::kernels::{DType, Element, Metric};
use crate::kinds::flat::FlatIndex;
use crate::kinds::graph::{IndexInfo, KindName, Manifest, OpenOptions};
use crate::kinds::ivf::IvfIndex;
use crate::kinds::sharded::ShardedIndex;
use crate::kinds::{Error, GraphIndex, Hits, IndexKind, KindParams, Queries, RangeHits, Run};

/// An opened index of any kind. The variants differ in size; an index is opened once and
/// not moved about, so none is boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum AnyIndex {
    /// A graph index (with or without updates).
    Graph(GraphIndex),
    /// An IVF index.
    Ivf(IvfIndex),
    /// A sharded index.
    Sharded(ShardedIndex),
    /// A flat index (exact search).
    Flat(FlatIndex),
}

/// Calls `$f` on the kind inside `$self`.
macro_rules! delegate {
    ($self:expr, $ix:ident => $e:expr) => {
        match $self {
            AnyIndex::Graph($ix) => $e,
            AnyIndex::Ivf($ix) => $e,
            AnyIndex::Sharded($ix) => $e,
            AnyIndex::Flat($ix) => $e,
        }
    };
}

/// The kind of index `dir` holds: a shard manifest makes it sharded, else the manifest names
/// it; an index without a manifest (built before manifests existed) is a graph index.
pub fn kind_of(dir: &Path) -> Result<KindName, Error> {
    if ShardedIndex::is_sharded(dir) {
        return Ok(KindName::Sharded);
    }
    Ok(Manifest::load_if_present(dir)?.map_or(KindName::Graph, |m| m.kind))
}

/// Opens the index in `dir` for searching, whatever its kind ([`kind_of`]). A graph index that
/// has taken updates is opened as a live index (read-only).
pub fn open(dir: &Path, opts: OpenOptions) -> Result<AnyIndex, Error> {
    Ok(match kind_of(dir)? {
        KindName::Graph => AnyIndex::Graph(GraphIndex::open_dir(dir, opts)?),
        KindName::Ivf => AnyIndex::Ivf(IvfIndex::open_dir(dir, opts)?),
        KindName::Sharded => AnyIndex::Sharded(ShardedIndex::open_dir(dir, opts)?),
        KindName::Flat => AnyIndex::Flat(FlatIndex::open_dir(dir, opts)?),
    })
}

impl AnyIndex {
    /// The index kind.
    pub fn kind(&self) -> KindName {
        delegate!(self, ix => ix.kind())
    }

    /// Vectors a search can return.
    pub fn n(&self) -> usize {
        delegate!(self, ix => IndexKind::n(ix))
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        delegate!(self, ix => IndexKind::dim(ix))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        delegate!(self, ix => IndexKind::dtype(ix))
    }

    /// Metric.
    pub fn metric(&self) -> Metric {
        delegate!(self, ix => IndexKind::metric(ix))
    }

    /// Its description.
    pub fn info(&self) -> Result<IndexInfo, Error> {
        delegate!(self, ix => IndexKind::info(ix))
    }

    /// Bytes held in memory at search time.
    pub fn memory_bytes(&self) -> u64 {
        delegate!(self, ix => IndexKind::memory_bytes(ix))
    }

    /// Bytes on disk of the files searched.
    pub fn disk_bytes(&self) -> u64 {
        delegate!(self, ix => IndexKind::disk_bytes(ix))
    }

    /// The I/O engine a search thread gets.
    pub fn engine_info(&self) -> Result<crate::io::EngineInfo, Error> {
        delegate!(self, ix => IndexKind::engine_info(ix))
    }

    /// Reads every file whole and checks it ([`IndexKind::verify`]).
    pub fn verify(
        &self,
        ctl: &crate::progress::Control,
    ) -> Result<crate::kinds::VerifyReport, Error> {
        delegate!(self, ix => IndexKind::verify(ix, ctl))
    }

    /// How far the static node cache's fill has got (a graph index opened with
    /// `warm_background`; summed over a sharded index's shards); complete (0 of 0) for a kind
    /// or an index without one.
    pub fn warm_progress(&self) -> crate::kinds::graph::search::WarmProgress {
        match self {
            Self::Graph(g) => g.disk().warm_progress(),
            Self::Sharded(s) => {
                let mut p = crate::kinds::graph::search::WarmProgress::default();
                for shard in s.shards() {
                    let q = shard.warm_progress();
                    p.filled += q.filled;
                    p.total += q.total;
                    p.error = p.error.or(q.error);
                }
                p
            }
            _ => crate::kinds::graph::search::WarmProgress::default(),
        }
    }

    /// The graph index, when it is one.
    pub fn graph(&self) -> Option<&GraphIndex> {
        match self {
            Self::Graph(g) => Some(g),
            _ => None,
        }
    }

    /// Searches `queries` with the parameters of this index's kind, filtered by `filter`.
    pub fn search<T: Element>(
        &self,
        queries: Queries<'_, T>,
        params: &KindParams,
        run: Run,
        filter: &QueryFilter<'_>,
    ) -> Result<Hits, Error> {
        let f = filter;
        match (self, params) {
            (Self::Graph(ix), KindParams::Graph(p)) => ix.search(queries, p, run, f),
            (Self::Ivf(ix), KindParams::Ivf(p)) => ix.search(queries, p, run, f),
            (Self::Sharded(ix), KindParams::Sharded(p)) => ix.search(queries, p, run, f),
            (Self::Flat(ix), KindParams::Flat(p)) => ix.search(queries, p, run, f),
            (ix, p) => Err(Error::InvalidInput(format!(
                "search parameters of a {} index given to a {} index",
                p.kind().label(),
                ix.kind().label()
            ))),
        }
    }

    /// Range search ([`IndexKind::range_search`]): every vector within `radius` of each query,
    /// nearest first; `max_results` (when given) keeps only the nearest that many per query.
    pub fn range_search<T: Element>(
        &self,
        queries: Queries<'_, T>,
        radius: f32,
        params: &KindParams,
        run: Run,
        filter: &QueryFilter<'_>,
        max_results: Option<usize>,
    ) -> Result<RangeHits, Error> {
        crate::kinds::check_radius(radius)?;
        let (f, r) = (filter, radius);
        let mut hits = match (self, params) {
            (Self::Graph(ix), KindParams::Graph(p)) => ix.range_search(queries, r, p, run, f),
            (Self::Ivf(ix), KindParams::Ivf(p)) => ix.range_search(queries, r, p, run, f),
            (Self::Sharded(ix), KindParams::Sharded(p)) => ix.range_search(queries, r, p, run, f),
            (Self::Flat(ix), KindParams::Flat(p)) => ix.range_search(queries, r, p, run, f),
            (ix, p) => Err(Error::InvalidInput(format!(
                "search parameters of a {} index given to a {} index",
                p.kind().label(),
                ix.kind().label()
            ))),
        }?;
        if let Some(m) = max_results {
            hits.truncate_each(m);
        }
        Ok(hits)
    }

    /// [`AnyIndex::range_search`] of a matrix of any element type.
    pub fn range_search_matrix(
        &self,
        queries: &AnyMatrix,
        radius: f32,
        params: &KindParams,
        run: Run,
        filter: &QueryFilter<'_>,
        max_results: Option<usize>,
    ) -> Result<RangeHits, Error> {
        let (r, p, f, m) = (radius, params, filter, max_results);
        match queries {
            AnyMatrix::F32(q) => self.range_search(q.into(), r, p, run, f, m),
            AnyMatrix::U8(q) => self.range_search(q.into(), r, p, run, f, m),
            AnyMatrix::I8(q) => self.range_search(q.into(), r, p, run, f, m),
        }
    }

    /// Growing-k range search, the baseline [`AnyIndex::range_search`] is measured against:
    /// a top-k search with `k` doubled from `params`' — and the list size (IVF: the re-rank
    /// candidates) with it, keeping their ratio — until the `k`-th distance of every query is
    /// beyond `radius` or `k` reaches every vector; the results within the radius are kept.
    /// Statistics add up over the rounds; each round searches only the queries not settled
    /// yet.
    pub fn range_search_growing<T: Element>(
        &self,
        queries: Queries<'_, T>,
        radius: f32,
        params: &KindParams,
        run: Run,
        filter: &QueryFilter<'_>,
    ) -> Result<RangeHits, Error> {
        crate::kinds::check_radius(radius)?;
        crate::kinds::growing::range_search_growing(self, queries, radius, params, run, filter)
    }

    /// [`AnyIndex::search`] of a matrix of any element type.
    pub fn search_matrix(
        &self,
        queries: &AnyMatrix,
        params: &KindParams,
        run: Run,
        filter: &QueryFilter<'_>,
    ) -> Result<Hits, Error> {
        match queries {
            AnyMatrix::F32(m) => self.search(m.into(), params, run, filter),
            AnyMatrix::U8(m) => self.search(m.into(), params, run, filter),
            AnyMatrix::I8(m) => self.search(m.into(), params, run, filter),
        }
    }
}

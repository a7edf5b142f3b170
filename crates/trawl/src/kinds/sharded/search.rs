//! Opening and searching a sharded index (see the module docs of [`super`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::filter::{Expr, FilterError, Filters, Predicate, QueryFilter};
use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::search::SearchParams;
use crate::kinds::graph::{updates::wal, BatchOutput, DiskIndex, OpenOptions};
use crate::kinds::sharded::manifest::{ShardManifest, SHARD_MANIFEST_FILE};
use crate::kinds::sharded::partition::{nearest_centroids, prepare};
use crate::kinds::sharded::ShardError;
use crate::search::{QueryStats, SearchError};

/// An open sharded index: the manifest and one open [`DiskIndex`] per shard.
pub struct ShardedIndex {
    dir: PathBuf,
    manifest: ShardManifest,
    shards: Vec<DiskIndex>,
    metric: Metric,
    dtype: DType,
}

impl std::fmt::Debug for ShardedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedIndex")
            .field("dir", &self.dir)
            .field("shards", &self.shards.len())
            .field("n", &self.manifest.header.n)
            .finish()
    }
}

/// Refuses a shard whose write-ahead log holds operations after the last merge into its
/// files: the sharded search would answer without them (see [`crate::kinds::sharded::member`]).
fn check_log(shard: usize, ix: &DiskIndex) -> Result<(), ShardError> {
    let path = ix.dir().join(wal::FILE_NAME);
    if !path.is_file() {
        return Ok(());
    }
    let log = wal::read_log(&path).map_err(|source| ShardError::Log { shard, source })?;
    let merged = ix.manifest().and_then(|m| m.log_seq).unwrap_or(0);
    let ops = log.records.iter().filter(|r| r.seq > merged).count();
    if ops > 0 {
        return Err(ShardError::UnmergedLog { shard, path, ops });
    }
    Ok(())
}

impl ShardedIndex {
    /// Whether `dir` holds a sharded index (a shard manifest).
    pub fn is_sharded(dir: &Path) -> bool {
        dir.join(SHARD_MANIFEST_FILE).is_file()
    }

    /// Opens the sharded index in `dir`: the manifest, then every shard with `opts`, each
    /// checked against the manifest (build id, size, shape, metric) and refused when its
    /// write-ahead log holds operations not merged into its files.
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Self, ShardError> {
        let manifest = ShardManifest::load(&dir.join(SHARD_MANIFEST_FILE))?;
        let h = &manifest.header;
        let metric: Metric = h
            .metric
            .parse()
            .map_err(|e: String| ShardError::Mismatch(format!("shard manifest: {e}")))?;
        let mut shards = Vec::with_capacity(h.shards.len());
        for (s, e) in h.shards.iter().enumerate() {
            let ix = DiskIndex::open(&dir.join(&e.dir), opts)
                .map_err(|source| ShardError::Open { shard: s, source })?;
            let build_id = ix.manifest().map_or("", |m| m.build_id.as_str());
            if build_id != e.build_id {
                return Err(ShardError::Mismatch(format!(
                    "shard {s} ({}) is build {build_id:?}, the shard manifest recorded {:?}: \
                     the shard was rebuilt or replaced; run the sharded build again",
                    e.dir, e.build_id
                )));
            }
            check_log(s, &ix)?;
            if ix.n() as u64 != e.count || ix.dim() != h.dim || ix.metric() != metric {
                return Err(ShardError::Mismatch(format!(
                    "shard {s} holds {} × {} ({}), the manifest {} × {} ({})",
                    ix.n(),
                    ix.dim(),
                    ix.metric(),
                    e.count,
                    h.dim,
                    metric
                )));
            }
            shards.push(ix);
        }
        let dtype = shards[0].dtype();
        if shards.iter().any(|s| s.dtype() != dtype) || dtype.name() != h.dtype {
            return Err(ShardError::Mismatch(format!(
                "shards disagree on the element type (manifest: {})",
                h.dtype
            )));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            shards,
            metric,
            dtype,
        })
    }

    /// The description of this index: the first shard's, with the shape, sizes and files of
    /// the whole, and every shard as the manifest records it.
    pub fn describe(&self) -> Result<crate::kinds::graph::IndexInfo, ShardError> {
        let mut info = self.shards[0]
            .info()
            .map_err(|source| ShardError::Open { shard: 0, source })?;
        info.dir = self.dir.display().to_string();
        info.kind = crate::kinds::graph::KindName::Sharded;
        info.n = self.n();
        let mem: u64 = self.memory_bytes();
        info.memory_total_bytes = mem;
        info.disk_bytes.total = self.disk_bytes();
        info.files = Vec::new();
        info.build_id = String::new();
        info.recall = None;
        info.shards = Some(self.manifest.header.shards.clone());
        Ok(info)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Distinct vectors.
    pub fn n(&self) -> usize {
        self.manifest.header.n as usize
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.manifest.header.dim
    }

    /// Metric.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The manifest.
    pub fn manifest(&self) -> &ShardManifest {
        &self.manifest
    }

    /// The open shards.
    pub fn shards(&self) -> &[DiskIndex] {
        &self.shards
    }

    /// The open shards, to load caches into (see [`DiskIndex::load_cache`]).
    pub fn shards_mut(&mut self) -> &mut [DiskIndex] {
        &mut self.shards
    }

    /// Memory held by all shards (sum of their [`DiskIndex::memory`] totals) plus the
    /// manifest's centroids and id maps.
    pub fn memory_bytes(&self) -> u64 {
        let own = (self.manifest.centroids.len()
            + self.manifest.ids.iter().map(Vec::len).sum::<usize>())
            * 4;
        self.shards.iter().map(|s| s.memory().total()).sum::<u64>() + own as u64
    }

    /// Bytes on disk of the files the shards' searches open, plus the manifest.
    pub fn disk_bytes(&self) -> u64 {
        let man = std::fs::metadata(self.dir.join(SHARD_MANIFEST_FILE)).map_or(0, |m| m.len());
        self.shards
            .iter()
            .map(|s| s.disk_bytes().total())
            .sum::<u64>()
            + man
    }

    /// The shards query `q` visits: its `probe` nearest partitions by centroid distance
    /// (0 or ≥ S: all), nearest first.
    pub fn route<T: Element>(&self, q: &[T], probe: usize) -> Vec<u32> {
        let s = self.shards.len();
        if probe == 0 || probe >= s {
            return (0..s as u32).collect();
        }
        let mut buf = vec![0f32; self.dim()];
        prepare(self.metric, q, &mut buf);
        nearest_centroids(&self.manifest.centroids, &buf, probe)
            .into_iter()
            .map(|(c, _)| c)
            .collect()
    }

    /// Searches row-major `rows` (a multiple of the dimension): each query in its `probe`
    /// nearest shards (0 = all), each shard searched as [`DiskIndex::search_rows`] does with
    /// `threads` and `interleave`, the per-shard results merged by exact distance into the
    /// top `params.k` global ids. Statistics add up over the shards a query visited.
    pub fn search_rows<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        probe: usize,
    ) -> Result<BatchOutput, ShardError> {
        self.search_rows_where(
            rows,
            params,
            threads,
            interleave,
            probe,
            &QueryFilter::none(),
        )
    }

    /// [`ShardedIndex::search_rows`] with `filter`: a filtered query visits every shard
    /// holding a vector that matches it (so a rare label's matches are found whichever
    /// shard they fell in), searched there by the shard's own planner; an unfiltered one its
    /// `probe` nearest shards.
    pub fn search_rows_where<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
        probe: usize,
        filter: &QueryFilter<'_>,
    ) -> Result<BatchOutput, ShardError> {
        let dim = self.dim();
        if T::DTYPE != self.dtype {
            return Err(ShardError::BadQuery(format!(
                "queries are {}, the index holds {}",
                T::DTYPE.name(),
                self.dtype.name()
            )));
        }
        if !rows.len().is_multiple_of(dim) {
            return Err(ShardError::BadQuery(format!(
                "{} query values are not a multiple of the dimension {dim}",
                rows.len()
            )));
        }
        let t0 = Instant::now();
        let nq = rows.len() / dim;
        let k = params.k;
        if k > self.n() {
            return Err(ShardError::BadQuery(format!(
                "k = {k} is larger than the {} indexed vectors",
                self.n()
            )));
        }
        filter.filters.check(nq).map_err(ShardError::BadQuery)?;
        // Route every query; then per shard, the queries that visit it.
        let mut per_shard: Vec<Vec<u32>> = vec![Vec::new(); self.shards.len()];
        for (qi, q) in rows.chunks_exact(dim).enumerate() {
            match filter.filters.get(qi) {
                None => {
                    for s in self.route(q, probe) {
                        per_shard[s as usize].push(qi as u32);
                    }
                }
                Some(e) => {
                    for (s, shard) in self.shards.iter().enumerate() {
                        if self.shard_matches(s, shard, e, qi)? {
                            per_shard[s].push(qi as u32);
                        }
                    }
                }
            }
        }
        let mut cands: Vec<Vec<(f32, u32)>> = vec![Vec::with_capacity(k * 2); nq];
        let mut stats = vec![QueryStats::default(); nq];
        let mut sub: Vec<T> = Vec::new();
        for (s, qs) in per_shard.iter().enumerate() {
            if qs.is_empty() {
                continue;
            }
            sub.clear();
            for &qi in qs {
                sub.extend_from_slice(&rows[qi as usize * dim..(qi as usize + 1) * dim]);
            }
            // A shard smaller than k returns all it holds.
            let mut shard_params = *params;
            shard_params.k = k.min(self.shards[s].n());
            let sub_filters: Vec<Option<Expr>> = qs
                .iter()
                .map(|&qi| filter.filters.get(qi as usize).cloned())
                .collect();
            let out = self.shards[s]
                .search_rows_where(
                    &sub,
                    &shard_params,
                    threads,
                    interleave,
                    Filters::PerQuery(&sub_filters),
                    &filter.params,
                    None,
                )
                .map_err(|source| ShardError::Search { shard: s, source })?;
            let ids = &self.manifest.ids[s];
            for (j, &qi) in qs.iter().enumerate() {
                let qi = qi as usize;
                stats[qi] += out.stats[j];
                for (local, d) in out.hits_of(j) {
                    if let Some(&g) = ids.get(local as usize) {
                        cands[qi].push((d, g));
                    }
                }
            }
        }
        if params.range.is_some() {
            return Ok(merge_ranged(cands, stats, t0));
        }
        Ok(merge_top_k(cands, stats, k, t0))
    }

    /// Whether shard `s` holds a vector matching `e` (query `qi`'s filter).
    fn shard_matches(
        &self,
        s: usize,
        shard: &DiskIndex,
        e: &Expr,
        qi: usize,
    ) -> Result<bool, ShardError> {
        let source = |source| ShardError::Search {
            shard: s,
            source: SearchError::Filter { query: qi, source },
        };
        let attrs = shard
            .attrs()
            .ok_or_else(|| source(FilterError::NoAttributes))?;
        let p = Predicate::compile(e, attrs).map_err(source)?;
        let c = p.count();
        Ok(!c.exact || c.rows > 0)
    }
}

/// A range search's results over the shards: every result of every shard visited, nearest
/// first, a replicated vector once.
fn merge_ranged(
    mut cands: Vec<Vec<(f32, u32)>>,
    stats: Vec<QueryStats>,
    t0: Instant,
) -> BatchOutput {
    let mut out = BatchOutput::empty_ranged(cands.len(), 0.0);
    for (qi, c) in cands.iter_mut().enumerate() {
        c.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut seen = std::collections::HashSet::with_capacity(c.len());
        let hits = c.iter().filter(|h| seen.insert(h.1)).map(|&(d, g)| (g, d));
        out.put(qi, hits, stats[qi]);
    }
    out.wall_secs = t0.elapsed().as_secs_f64();
    out
}

/// A top-k search's results over the shards: the `k` nearest of every shard visited, a
/// replicated vector once (its nearest occurrence).
fn merge_top_k(
    mut cands: Vec<Vec<(f32, u32)>>,
    stats: Vec<QueryStats>,
    k: usize,
    t0: Instant,
) -> BatchOutput {
    let nq = cands.len();
    let mut out_ids = vec![u32::MAX; nq * k];
    let mut out_dists = vec![f32::INFINITY; nq * k];
    for (qi, c) in cands.iter_mut().enumerate() {
        c.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // A replicated vector can come back from two shards: keep its first (nearest)
        // occurrence. `k` is small, so a scan of the ids kept so far is enough.
        let mut slot = 0;
        for &(d, g) in c.iter() {
            if slot == k {
                break;
            }
            let row = &out_ids[qi * k..qi * k + slot];
            if row.contains(&g) {
                continue;
            }
            out_ids[qi * k + slot] = g;
            out_dists[qi * k + slot] = d;
            slot += 1;
        }
    }
    BatchOutput {
        ranged: None,
        k,
        ids: out_ids,
        dists: out_dists,
        stats,
        wall_secs: t0.elapsed().as_secs_f64(),
    }
}

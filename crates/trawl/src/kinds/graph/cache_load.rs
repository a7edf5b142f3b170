//! Choosing and loading the static node cache ([`crate::kinds::graph::search::cache`]).

use std::time::Instant;

use rand::seq::index::sample;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::io::{Completion, IoEngine, ReadRequest};

pub(crate) use super::cache_fill::{fill_buffer_bytes, fill_run_pages};
use super::cache_fill::{idle_io_priority, CacheFill, FILL_DEPTH};
use crate::kernels::{DType, Element};
use crate::kinds::graph::hot::{self, HotOrder};
use crate::kinds::graph::layout::packed::PackedFile;
use crate::kinds::graph::search::{CachePolicy, ListCache, NodeCache, PinnedLists, SearchParams};
use crate::kinds::graph::DiskIndex;
use crate::progress::Control;
use crate::quant::pq::PqCodes;
use crate::search::SearchError;

/// What loading the cache did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CacheReport {
    /// Nodes cached.
    pub nodes: usize,
    /// Bytes of memory the cache holds.
    pub bytes: u64,
    /// Seconds to choose and load it.
    pub secs: f64,
    /// Pages read to choose and load it.
    pub pages_read: u64,
}

impl DiskIndex {
    /// Reads the records of `ids` (any order, duplicates allowed) and calls `f(id, record
    /// bytes)` for each. Returns the pages read.
    pub fn read_records(&self, ids: &[u32], f: impl FnMut(u32, &[u8])) -> Result<u64, SearchError> {
        let mut engine = self
            .file()
            .engine(self.options().engine, self.engine_config())?;
        read_records_in(engine.as_mut(), self.packed_file()?, ids, f)
    }

    /// Chooses `nodes` nodes by `policy`, reads their records and keeps them in memory,
    /// replacing any previous cache. Frequency sampling runs on `threads` threads.
    pub fn load_cache(
        &mut self,
        nodes: usize,
        policy: CachePolicy,
        threads: usize,
        ctl: &Control,
    ) -> Result<CacheReport, SearchError> {
        self.load_cache_with(nodes, policy, threads, false, ctl)
    }

    /// [`DiskIndex::load_cache`], and with `background` the records are read by a thread of
    /// their own while searches run ([`DiskIndex::warm_progress`]): a node is read from disk
    /// until its chunk of the cache has arrived. The default policy takes the index's
    /// hot-node order ([`crate::kinds::graph::hot`]) when it has one, and runs sample
    /// searches otherwise (or when `policy` names a sample count).
    pub fn load_cache_with(
        &mut self,
        nodes: usize,
        policy: CachePolicy,
        threads: usize,
        background: bool,
        ctl: &Control,
    ) -> Result<CacheReport, SearchError> {
        let t0 = Instant::now();
        if let Some(r) = self.layout.records_mut() {
            r.set_cache(NodeCache::empty());
        }
        if self.layout.pages().is_some() {
            return self.load_page_cache(nodes);
        }
        let nodes = nodes.min(self.n());
        if nodes == 0 {
            return Ok(CacheReport::default());
        }
        if self.decoupled().is_some() {
            return Err(SearchError::Unsupported(
                "the decoupled layout caches compressed neighbour lists (its list cache, \
                 OpenOptions::list_cache_bytes); the static node cache holds page-packed records"
                    .into(),
            ));
        }
        let (ids, pages) = match (policy, self.hot_order()?) {
            (
                CachePolicy::Frequency {
                    sample_queries: 0, ..
                },
                Some(hot),
            ) => (hot.first(nodes, self.n()), 0),
            (CachePolicy::Bfs, _) => self.bfs_order(nodes)?,
            (
                CachePolicy::Frequency {
                    sample_queries,
                    l,
                    beam_width,
                },
                _,
            ) => self.frequent_nodes(nodes, sample_queries, l, beam_width, threads, ctl)?,
        };
        let records = self
            .layout
            .records_mut()
            .ok_or_else(|| SearchError::Internal("a record layout lost its records".into()))?;
        // In page order, so that the fill reads the file in long sequential runs.
        let mut ids = ids;
        let packed = records.file();
        ids.sort_by_key(|&id| (packed.locate(id).0, id));
        let (ids_len, packed_rb) = (ids.len(), packed.geometry().record_bytes);
        let cache = NodeCache::planned(ids, packed_rb);
        records.set_cache(cache.clone());
        let fill = CacheFill {
            cache,
            file: self.file.clone(),
            packed: records.shared_file(),
            engine: self.opts.engine,
            config: self.engine_config(),
            depth: if background { 1 } else { FILL_DEPTH },
            run_pages: fill_run_pages((ids_len * packed_rb) as u64, background),
        };
        let bytes = fill.cache.heap_bytes() as u64;
        let nodes = fill.cache.len();
        let filled = if background {
            std::thread::Builder::new()
                .name("trawl-warm".into())
                .spawn(move || {
                    idle_io_priority();
                    if let Err(e) = fill.run() {
                        fill.cache.fail(e.to_string());
                    }
                })
                .map_err(|e| SearchError::Internal(format!("starting the cache fill: {e}")))?;
            0
        } else {
            fill.run()?
        };
        Ok(CacheReport {
            nodes,
            bytes,
            secs: t0.elapsed().as_secs_f64(),
            pages_read: pages + filled,
        })
    }

    /// How far the static cache's fill has got (complete for a cache loaded in the
    /// foreground, and for the decoupled layout, whose list cache fills as searches run).
    pub fn warm_progress(&self) -> crate::kinds::graph::search::WarmProgress {
        self.cache().progress()
    }

    /// The page-node layout's cache: the `pages` page nodes holding the hottest vectors of the
    /// hot-node order (each page once, in order of its hottest vector), read whole and checked
    /// against their CRCs. Emptied with 0.
    fn load_page_cache(&mut self, pages: usize) -> Result<CacheReport, SearchError> {
        use std::os::unix::fs::FileExt;
        let t0 = Instant::now();
        let Some(layout) = self.layout.pages_mut() else {
            return Err(SearchError::Internal("not the page-node layout".into()));
        };
        layout.set_cache(crate::kinds::graph::search::PageCache::default());
        let total = layout.file().meta().pages;
        let pages = pages.min(total as usize);
        if pages == 0 {
            return Ok(CacheReport::default());
        }
        let hot = self.hot_order()?.ok_or_else(|| {
            SearchError::Unsupported(
                "a page cache is chosen by the hot-node order (hot.trawl): rewrite it with \
                 `trawl entry` or `trawl layout`"
                    .into(),
            )
        })?;
        let layout = self
            .layout
            .pages_mut()
            .ok_or_else(|| SearchError::Internal("not the page-node layout".into()))?;
        let file = layout.file();
        let mut chosen = Vec::with_capacity(pages);
        let mut taken = vec![false; total as usize];
        for id in hot.first(self.meta.n as usize, self.meta.n as usize) {
            let p = file.page_of(id);
            if p != crate::kinds::graph::layout::pages::NO_PAGE && !taken[p as usize] {
                taken[p as usize] = true;
                chosen.push(p);
                if chosen.len() == pages {
                    break;
                }
            }
        }
        chosen.sort_unstable();
        let f = std::fs::File::open(file.path())
            .map_err(|e| SearchError::Internal(format!("{}: {e}", file.path().display())))?;
        let mut loaded = Vec::with_capacity(chosen.len());
        for &p in &chosen {
            let mut buf = vec![0u8; crate::io::PAGE_BYTES];
            let at = file.file_page(p) * crate::io::PAGE_BYTES as u64;
            f.read_exact_at(&mut buf, at)
                .map_err(|e| SearchError::Internal(format!("{}: {e}", file.path().display())))?;
            file.check_page(u64::from(p), &buf).map_err(|d| {
                crate::kinds::graph::search::corrupt_page(file.path(), file.file_page(p), d)
            })?;
            loaded.push((p, buf));
        }
        let cache = crate::kinds::graph::search::PageCache::new(total, loaded);
        let report = CacheReport {
            nodes: cache.len(),
            bytes: cache.heap_bytes() as u64,
            secs: t0.elapsed().as_secs_f64(),
            pages_read: chosen.len() as u64,
        };
        layout.set_cache(cache);
        Ok(report)
    }

    /// The index's hot-node order (`hot.trawl`), when it has one.
    pub fn hot_order(&self) -> Result<Option<HotOrder>, SearchError> {
        let path = self.dir().join(hot::FILE_NAME);
        if !path.is_file() {
            return Ok(None);
        }
        HotOrder::load(&path, self.n() as u64, self.meta().pq_codes_crc)
            .map(Some)
            .map_err(|e| SearchError::Internal(e.to_string()))
    }

    /// Ranks the nodes by how often [`hot::sample_searches`] beam searches (L 15, W 4, no
    /// cache) of indexed vectors read them: the hot-node order. The record layouts search
    /// with the vectors their records hold, the decoupled layout with the vectors the PQ
    /// codes decode to. Returns the order and the pages read.
    pub fn rank_hot_nodes(
        &mut self,
        threads: usize,
        ctl: &Control,
    ) -> Result<(HotOrder, u64), SearchError> {
        self.rank_hot_nodes_by(hot::sample_searches(self.n()), threads, ctl)
    }

    /// [`DiskIndex::rank_hot_nodes`] with `samples` sample searches (at most one per slot).
    pub fn rank_hot_nodes_by(
        &mut self,
        samples: usize,
        threads: usize,
        ctl: &Control,
    ) -> Result<(HotOrder, u64), SearchError> {
        let n = self.n();
        let picks = self.live_sample(samples.min(n))?;
        let (l, w) = match CachePolicy::default() {
            CachePolicy::Frequency { l, beam_width, .. } => (l, beam_width),
            CachePolicy::Bfs => (15, 4),
        };
        if picks.is_empty() {
            return Ok((HotOrder::from_counts(&[], 0, l, w), 0));
        }
        // Searched with no cache, so every expansion is a read and is counted.
        let counted = self.without_caches(|ix| ix.sample_visits(&picks, l, w, threads, ctl));
        let (counts, pages) = counted?;
        Ok((HotOrder::from_counts(&counts, picks.len(), l, w), pages))
    }

    /// The seeded sample of `samples` slots ([`sampled_ids`]) less the free ones: a merged
    /// index's freed slots hold no vector to search for.
    fn live_sample(&self, samples: usize) -> Result<Vec<u32>, SearchError> {
        let n = self.n();
        let slots = crate::kinds::graph::updates::ids::SlotIds::load(self.dir(), n)
            .map_err(|e| SearchError::Internal(e.to_string()))?;
        Ok(sampled_ids(n, samples)
            .into_iter()
            .filter(|&s| !slots.is_hole(s))
            .collect())
    }

    /// Runs `f` with the node cache and the list cache taken out (so that every expansion is
    /// a read and is counted), then puts them back as they were (a fill left running).
    pub(super) fn without_caches<R>(&mut self, f: impl FnOnce(&Self) -> R) -> R {
        let old_cache = self
            .layout
            .records_mut()
            .map(|r| r.swap_cache(NodeCache::empty()));
        let old_lists = self
            .layout
            .decoupled_mut()
            .map(|d| d.set_lists(ListCache::disabled()));
        let out = f(self);
        if let (Some(d), Some(old)) = (self.layout.decoupled_mut(), old_lists) {
            d.set_lists(old);
        }
        if let (Some(r), Some(old)) = (self.layout.records_mut(), old_cache) {
            r.swap_cache(old);
        }
        out
    }

    /// Ranks the nodes ([`DiskIndex::rank_hot_nodes`]) and writes the order to `path`
    /// (`hot.trawl` of a staging directory); returns the file's bytes.
    pub(crate) fn save_hot_order(
        &mut self,
        path: &std::path::Path,
        threads: usize,
        ctl: &Control,
    ) -> Result<u64, crate::kinds::graph::IndexBuildError> {
        let (hot, _) = self.rank_hot_nodes(threads, ctl)?;
        let meta = *self.meta();
        Ok(hot.save(path, meta.n, meta.pq_codes_crc)?)
    }

    /// The hot-node order of this index's files, ranked on an index opened afresh from its
    /// directory (no cache), so that `&self` suffices; for the operations that rewrite
    /// files beside it (`trawl layout`, `trawl entry`).
    pub(crate) fn fresh_hot_order(
        &self,
        threads: usize,
        ctl: &Control,
    ) -> Result<HotOrder, crate::kinds::graph::IndexBuildError> {
        // Through the page cache: the counts do not depend on how pages are read, and a file
        // just written is read from memory.
        let opts = crate::kinds::graph::OpenOptions {
            direct: false,
            ..*self.options()
        };
        let mut fresh = DiskIndex::open(self.dir(), opts)?;
        Ok(fresh.rank_hot_nodes(threads, ctl)?.0)
    }

    /// Per-node read counts of beam searches of the indexed vectors `picks` (from their
    /// records, or decoded from their PQ codes when the layout holds no vectors with its
    /// graph), and the pages read.
    fn sample_visits(
        &self,
        picks: &[u32],
        l: usize,
        beam_width: usize,
        threads: usize,
        ctl: &Control,
    ) -> Result<(Vec<u32>, u64), SearchError> {
        let (raw, pages) = match self.packed() {
            Some(_) => self.record_vectors(picks)?,
            None => {
                let codes = self.codes().ok_or_else(|| {
                    SearchError::Internal(
                        "the decoupled layout keeps its PQ codes in memory".into(),
                    )
                })?;
                (self.decoded(codes, picks)?, 0)
            }
        };
        let (counts, more) = self.visit_counts(&raw, l, beam_width, threads, ctl)?;
        Ok((counts, pages + more))
    }

    /// The vectors of `picks` (raw, in their order) from their records, and the pages read.
    pub(super) fn record_vectors(&self, picks: &[u32]) -> Result<(Vec<u8>, u64), SearchError> {
        let vb = self.packed_file()?.geometry().vector_bytes;
        let mut vectors = vec![0u8; picks.len() * vb];
        let mut pos = std::collections::HashMap::with_capacity(picks.len());
        for (i, &id) in picks.iter().enumerate() {
            pos.insert(id, i);
        }
        let pages = self.read_records(picks, |id, rec| {
            let i = pos[&id];
            vectors[i * vb..(i + 1) * vb].copy_from_slice(&rec[..vb]);
        })?;
        Ok((vectors, pages))
    }

    /// The first `nodes` nodes of a breadth-first walk from the medoid.
    fn bfs_order(&self, nodes: usize) -> Result<(Vec<u32>, u64), SearchError> {
        let mut seen = crate::vamana::queue::VisitedSet::new(self.n());
        let mut order = vec![self.medoid()];
        seen.insert(self.medoid());
        let mut level_start = 0;
        let mut pages = 0;
        while order.len() < nodes && level_start < order.len() {
            let level: Vec<u32> = order[level_start..].to_vec();
            level_start = order.len();
            let mut next = Vec::new();
            let packed = self.packed_file()?;
            pages += self.read_records(&level, |id, rec| {
                if let Ok(view) = packed.decode(id, rec) {
                    next.extend(view.neighbors());
                }
            })?;
            // Completion order is arbitrary: sort the next level so the walk is deterministic.
            next.sort_unstable();
            for id in next {
                if order.len() >= nodes {
                    break;
                }
                if seen.insert(id) {
                    order.push(id);
                }
            }
        }
        order.truncate(nodes);
        Ok((order, pages))
    }

    /// The `nodes` nodes read most often by beam searches of `samples` indexed vectors.
    pub(super) fn frequent_nodes(
        &self,
        nodes: usize,
        samples: usize,
        l: usize,
        beam_width: usize,
        threads: usize,
        ctl: &Control,
    ) -> Result<(Vec<u32>, u64), SearchError> {
        let n = self.n();
        let samples = if samples == 0 {
            nodes.saturating_mul(4).max(2000)
        } else {
            samples
        }
        .clamp(1, n);
        let picks = self.live_sample(samples)?;
        let vb = self.packed_file()?.geometry().vector_bytes;
        let mut vectors = vec![0u8; picks.len() * vb];
        let mut pos = std::collections::HashMap::with_capacity(picks.len());
        for (i, &id) in picks.iter().enumerate() {
            pos.insert(id, i);
        }
        let mut pages = self.read_records(&picks, |id, rec| {
            let i = pos[&id];
            vectors[i * vb..(i + 1) * vb].copy_from_slice(&rec[..vb]);
        })?;
        let counts = self.visit_counts(&vectors, l, beam_width, threads, ctl)?;
        pages += counts.1;
        let mut ids = most_read(&counts.0);
        ids.truncate(nodes);
        if ids.len() < nodes {
            // Fewer distinct nodes were read than asked for: top up breadth-first.
            let (bfs, p) = self.bfs_order(nodes)?;
            pages += p;
            let have: std::collections::HashSet<u32> = ids.iter().copied().collect();
            ids.extend(
                bfs.into_iter()
                    .filter(|id| !have.contains(id))
                    .take(nodes - ids.len()),
            );
        }
        Ok((ids, pages))
    }

    /// Decoupled layout: pins the lists sample searches read most often in the list cache,
    /// within `share` of its budget (the budget the index was opened with,
    /// [`crate::kinds::graph::OpenOptions::list_cache_bytes`]); the rest of the budget stays an LRU cache
    /// for the other lists. The sample queries are `samples` indexed vectors as their PQ codes
    /// reconstruct them (no vector read), searched by beam search (`l`, `beam_width`) with no
    /// cache, every expansion from a read counted; lists are pinned from the most read down
    /// while they fit, each at its exact size. Returns what was pinned (`nodes`, `bytes`).
    pub fn pin_lists(
        &mut self,
        share: f64,
        samples: usize,
        l: usize,
        beam_width: usize,
        threads: usize,
        ctl: &Control,
    ) -> Result<CacheReport, SearchError> {
        let t0 = Instant::now();
        if !(0.0..=1.0).contains(&share) {
            return Err(SearchError::Unsupported(format!(
                "pinned share {share} of the list cache must be in [0, 1]"
            )));
        }
        let Some(d) = self.layout.decoupled() else {
            return Err(SearchError::Unsupported(
                "lists are pinned in the decoupled layout's list cache; the page-packed \
                 layouts have the static node cache"
                    .into(),
            ));
        };
        let budget = d.lists().budget_bytes();
        let entry_bytes = d.lists().entry_bytes();
        let n = self.n();
        let fixed = PinnedLists::fixed_bytes(n);
        let pin_budget = (budget as f64 * share) as u64;
        if pin_budget <= fixed {
            return Ok(CacheReport::default());
        }
        let (ranked, pages) = match (samples, self.hot_order()?) {
            // The hot-node order chosen when the index was built or merged.
            (0, Some(hot)) => (hot.into_ids(), 0),
            _ => {
                let codes = self.codes().ok_or_else(|| {
                    SearchError::Internal(
                        "the decoupled layout keeps its PQ codes in memory".into(),
                    )
                })?;
                let samples = if samples == 0 { 20_000 } else { samples }.clamp(1, n);
                let raw = self.decoded(codes, &sampled_ids(n, samples))?;
                // Searched with no list cache, so every expansion is a read and is counted.
                let counts =
                    self.without_caches(|ix| ix.visit_counts(&raw, l, beam_width, threads, ctl));
                let (counts, pages) = counts?;
                (most_read(&counts), pages)
            }
        };
        let d = self
            .layout
            .decoupled()
            .ok_or_else(|| SearchError::Internal("the decoupled layout went away".into()))?;
        // Each list's coded size, from one sequential scan; then the most read that fit.
        let mut size = vec![0u32; n];
        let mut scan_pages = d
            .graph()
            .scan_coded(|id, _, coded| size[id as usize] = coded.len() as u32)
            .map_err(|e| SearchError::Internal(e.to_string()))?;
        let mut pin = vec![false; n];
        // The budget holds the pinned lists and, while they are read, one flag per node.
        let (mut used, mut entries, mut data_bytes) = (fixed + n as u64, 0usize, 0usize);
        for &id in &ranked {
            let coded = size[id as usize] as usize;
            let c = PinnedLists::entry_cost(coded);
            if used + c > pin_budget {
                break;
            }
            used += c;
            entries += 1;
            data_bytes += 2 + coded;
            pin[id as usize] = true;
        }
        drop(size);
        drop(ranked);
        // Pinned straight from a second scan (in id order), into buffers of their final size:
        // the only transient is the one-byte-per-node choice.
        let mut builder = crate::kinds::graph::search::PinnedBuilder::new(n, entries, data_bytes);
        let mut failed = None;
        scan_pages += d
            .graph()
            .scan_coded(|id, degree, coded| {
                if pin[id as usize] && failed.is_none() {
                    failed = builder.push(id, degree, coded).err();
                }
            })
            .map_err(|e| SearchError::Internal(e.to_string()))?;
        if let Some(e) = failed {
            return Err(SearchError::Internal(e));
        }
        drop(pin);
        let pinned = builder.finish();
        let lru = budget.saturating_sub(pinned.heap_bytes());
        let report = CacheReport {
            nodes: pinned.len(),
            bytes: pinned.heap_bytes(),
            secs: 0.0,
            pages_read: pages + scan_pages,
        };
        let cache = ListCache::with_pinned(entry_bytes, lru, pinned);
        if let Some(d) = self.layout.decoupled_mut() {
            d.set_lists(cache);
        }
        Ok(CacheReport {
            secs: t0.elapsed().as_secs_f64(),
            ..report
        })
    }

    /// The vectors `ids`' PQ codes decode to, as raw bytes of the index's element type: the
    /// sample queries of a layout that keeps no vectors beside its graph.
    fn decoded(&self, codes: &PqCodes, ids: &[u32]) -> Result<Vec<u8>, SearchError> {
        let dim = self.dim();
        let mut rec = vec![0f32; dim];
        let mut raw: Vec<u8> = Vec::with_capacity(ids.len() * dim * 4);
        for &id in ids {
            self.pq()
                .decode(codes.code(id as usize), &mut rec)
                .map_err(|e| SearchError::Internal(format!("PQ code of {id}: {e}")))?;
            match self.dtype() {
                DType::F32 => raw.extend(rec.iter().flat_map(|x| x.to_le_bytes())),
                DType::U8 => raw.extend(rec.iter().map(|x| x.round().clamp(0.0, 255.0) as u8)),
                DType::I8 => raw.extend(
                    rec.iter()
                        .map(|x| x.round().clamp(-128.0, 127.0) as i8 as u8),
                ),
            }
        }
        Ok(raw)
    }

    /// Pages read by beam searches for the `k` nearest (list size `l`, width `beam_width`) of
    /// the raw vectors.
    pub(super) fn sample_pages(
        &self,
        raw: &[u8],
        k: usize,
        l: usize,
        beam_width: usize,
        threads: usize,
        ctl: &Control,
    ) -> Result<u64, SearchError> {
        let params = SearchParams::beam(
            k.max(1),
            l.max(k).max(1),
            beam_width.clamp(1, self.engine_config().depth),
        );
        let counted = match self.dtype() {
            DType::F32 => self.count_visits::<f32>(raw, &params, threads, ctl),
            DType::U8 => self.count_visits::<u8>(raw, &params, threads, ctl),
            DType::I8 => self.count_visits::<i8>(raw, &params, threads, ctl),
        };
        Ok(counted?.1)
    }

    /// Per-node counts of reads over beam searches (list size `l`, width `beam_width`) of the
    /// raw vectors, and the pages read.
    pub(super) fn visit_counts(
        &self,
        raw: &[u8],
        l: usize,
        beam_width: usize,
        threads: usize,
        ctl: &Control,
    ) -> Result<(Vec<u32>, u64), SearchError> {
        let params =
            SearchParams::beam(1, l.max(1), beam_width.clamp(1, self.engine_config().depth));
        match self.dtype() {
            DType::F32 => self.count_visits::<f32>(raw, &params, threads, ctl),
            DType::U8 => self.count_visits::<u8>(raw, &params, threads, ctl),
            DType::I8 => self.count_visits::<i8>(raw, &params, threads, ctl),
        }
    }

    /// Per-node counts of reads over beam searches of the given raw vectors, and pages read.
    fn count_visits<T: Element>(
        &self,
        raw: &[u8],
        params: &SearchParams,
        threads: usize,
        ctl: &Control,
    ) -> Result<(Vec<u32>, u64), SearchError> {
        let queries: Vec<T> = raw
            .chunks_exact(std::mem::size_of::<T>())
            .map(bytemuck::pod_read_unaligned::<T>)
            .collect();
        let dim = self.dim();
        let nq = queries.len() / dim;
        let cursor = crate::search::Cursor::new(nq);
        let bar = ctl.bar("choosing the cache", nq as u64);
        let threads = threads.clamp(1, nq.max(1));
        let parts = crate::search::runner::on_threads(threads, |_| {
            let mut s = self.searcher()?;
            let mut hits = Vec::new();
            let mut pages = 0;
            s.start_trace();
            while let Some(q) = cursor.next() {
                let st = s.search(&queries[q * dim..(q + 1) * dim], params, &mut hits)?;
                pages += st.io.pages_read;
                bar.inc(1);
            }
            Ok((s.take_trace(), pages))
        });
        bar.finish_and_clear();
        let mut counts = vec![0u32; self.n()];
        let mut pages = 0;
        for (trace, p) in parts?.0 {
            pages += p;
            for id in trace {
                counts[id as usize] = counts[id as usize].saturating_add(1);
            }
        }
        Ok((counts, pages))
    }
}

/// Reads the records of `ids` (any order, duplicates allowed) from `packed` through
/// `engine`, checking each page, and calls `f(id, record bytes)` for each. Returns the pages
/// read.
fn read_records_in(
    engine: &mut dyn IoEngine,
    packed: &PackedFile,
    ids: &[u32],
    mut f: impl FnMut(u32, &[u8]),
) -> Result<u64, SearchError> {
    let geo = *packed.geometry();
    let pages = geo.read_pages() as u32;
    let mut done: Vec<Completion> = Vec::new();
    let mut read = 0u64;
    for chunk in ids.chunks(engine.depth()) {
        for (i, &id) in chunk.iter().enumerate() {
            let (first_page, _) = packed.locate(id);
            engine.submit(i as u64, ReadRequest { first_page, pages })?;
        }
        done.clear();
        let mut got = 0;
        while got < chunk.len() {
            got += engine.wait(chunk.len() - got, &mut done)?;
        }
        read += chunk.len() as u64 * u64::from(pages);
        let mut result = Ok(());
        for c in &done {
            let id = chunk[c.tag as usize];
            let (page, at) = packed.locate(id);
            let bytes = engine.buffer(c.slot);
            if result.is_ok() {
                result = packed
                    .check_pages(page, bytes)
                    .map_err(|p| format!("checksum mismatch in page {p}"))
                    .and_then(|()| packed.record(id, bytes).map(|_| ()))
                    .map_err(|detail| SearchError::Corrupt {
                        path: packed.path().to_path_buf(),
                        page,
                        detail,
                    });
                if result.is_ok() {
                    f(id, &bytes[at..at + geo.record_bytes]);
                }
            }
            engine.release(c.slot);
        }
        result?;
    }
    Ok(read)
}

/// A seeded sample of `samples` of the ids `0..n`, in id order (the same for every call).
pub(crate) fn sampled_ids(n: usize, samples: usize) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_cace);
    let mut picks: Vec<u32> = sample(&mut rng, n, samples)
        .into_iter()
        .map(|i| i as u32)
        .collect();
    picks.sort_unstable();
    picks
}

/// The nodes read at least once, most read first (ties by id).
fn most_read(counts: &[u32]) -> Vec<u32> {
    HotOrder::from_counts(counts, 1, 0, 0).ids().to_vec()
}

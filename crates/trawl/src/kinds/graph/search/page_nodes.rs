//! The page-node layout's reader ([`crate::kinds::graph::layout::pages`], PageANN): a search
//! node is a page. Expanding one scores every vector on it exactly (all of them go to the
//! result set) and offers the pages its list names, each scored once per query by the nearest
//! PQ code among its vectors (the codes are in slot order, so a page's are contiguous). A page
//! enters a query's list once, so it is read at most once per query.
//!
//! Why the nearest code of the page and not PageANN's priority (the code of the one vector an
//! edge points at): a page's vectors spread around its centre, and the vector an edge happens
//! to point at is often not the one near the query. On 5,000 synthetic 24-d vectors
//! (34 per page) a best-first search with exact distances read 10.9 pages for recall@10 0.69
//! with the edge's vector, 0.61 with the centre, and 1.00 with the page's nearest vector.

use std::path::Path;

use crate::accel::flash::Groups;
use crate::kernels::{self, Element};
use crate::kinds::graph::layout::pages::PageFile;
use crate::kinds::graph::search::explore::{corrupt, Frontier};
use crate::kinds::graph::search::flash::FlashSource;
use crate::kinds::graph::search::source::{
    Expand, GraphSource, GraphSpace, Held, NoRecords, PqCodesAt,
};
use crate::quant::pq::PqCodes;
use crate::quant::QuantQuery;
use crate::search::{stop_part, SearchError};
use crate::vamana::queue::Neighbor;

/// The page-node layout: the file (page table in memory) and the cache of hot pages.
#[derive(Debug)]
pub struct PageLayout {
    file: PageFile,
    cache: PageCache,
    verify: bool,
    /// The pages as the flash strategy's accelerator groups the codes (`None`: too many
    /// slots for its `u32` ids).
    groups: Option<Groups>,
}

/// Whole page nodes held in memory, chosen when made (the hot pages): a search expands them
/// without a read.
#[derive(Debug, Default)]
pub struct PageCache {
    /// Slot of each cached page in `bytes` (`u32::MAX`: not cached); empty when nothing is.
    slot: Vec<u32>,
    bytes: Vec<u8>,
}

impl PageCache {
    /// A cache of `pages` (each with its 4 KiB) for a file of `total` page nodes.
    pub fn new(total: u64, pages: Vec<(u32, Vec<u8>)>) -> Self {
        if pages.is_empty() {
            return Self::default();
        }
        let mut slot = vec![u32::MAX; total as usize];
        let mut bytes = Vec::with_capacity(pages.len() * crate::io::PAGE_BYTES);
        for (i, (p, b)) in pages.into_iter().enumerate() {
            if let Some(s) = slot.get_mut(p as usize) {
                *s = i as u32;
                bytes.extend_from_slice(&b[..crate::io::PAGE_BYTES]);
            }
        }
        Self { slot, bytes }
    }
    /// The bytes of page node `p`, when cached.
    #[inline]
    pub fn page(&self, p: u32) -> Option<&[u8]> {
        let s = *self.slot.get(p as usize)?;
        (s != u32::MAX).then(|| {
            let at = s as usize * crate::io::PAGE_BYTES;
            &self.bytes[at..at + crate::io::PAGE_BYTES]
        })
    }
    /// Pages held.
    pub fn len(&self) -> usize {
        self.bytes.len() / crate::io::PAGE_BYTES
    }
    /// Whether no page is held.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.len() + 4 * self.slot.len()
    }
}

impl PageLayout {
    /// The layout of `file`; pages are checked against their CRCs when `verify`.
    pub fn new(file: PageFile, verify: bool) -> Self {
        let counts = (0..file.meta().pages)
            .map(|p| file.count(p as u32) as u32)
            .collect();
        let groups = Groups::new(file.meta().capacity, counts).ok();
        Self {
            file,
            cache: PageCache::default(),
            verify,
            groups,
        }
    }
    /// The pages as groups of the codes (in slot order) for the flash strategy.
    pub fn groups(&self) -> Option<&Groups> {
        self.groups.as_ref()
    }
    /// Bytes held in memory besides the cache: the file's tables and the page groups.
    pub fn heap_bytes(&self) -> usize {
        self.file.heap_bytes() + self.groups.as_ref().map_or(0, |g| 4 * g.nodes())
    }
    /// The file.
    pub fn file(&self) -> &PageFile {
        &self.file
    }
    /// The cache of hot pages.
    pub fn cache(&self) -> &PageCache {
        &self.cache
    }
    /// Replaces the cache of hot pages.
    pub fn set_cache(&mut self, cache: PageCache) {
        self.cache = cache;
    }

    /// Expands page node `p` from its bytes.
    fn expand_page<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        p: u32,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let page = self.file.file_page(p);
        let view = self
            .file
            .decode(u64::from(p), bytes)
            .map_err(|d| corrupt(self.path(), page, d))?;
        let t0 = x.stats.parts.start();
        for i in 0..view.len() {
            let id = view.id(i);
            if x.hidden == Some(id) {
                continue;
            }
            let v = view.vector::<T>(i, x.scratch);
            let dist = kernels::distance(space.metric, x.query, v);
            f.full.push(Neighbor { id, dist });
            x.stats.traversal.exact_distances += 1;
        }
        stop_part(t0, &mut x.stats.parts.exact_ns);
        x.stats.traversal.nodes_expanded += 1;
        let t0 = x.stats.parts.start();
        let mut nbrs = std::mem::take(&mut f.nbrs);
        let decoded = self.file.neighbors(u64::from(p), &view, &mut nbrs);
        stop_part(t0, &mut x.stats.traversal.list_decode_ns);
        if let Err(d) = decoded {
            f.nbrs = nbrs;
            return Err(corrupt(self.path(), page, d));
        }
        let (PqCodesAt::Memory(codes), Some(table)) = (space.pq.codes, f.table.as_ref()) else {
            f.nbrs = nbrs;
            return Err(SearchError::Internal(
                "the page-node layout searched without PQ codes in memory".into(),
            ));
        };
        let t0 = x.stats.parts.start();
        let mut fresh = std::mem::take(&mut f.fresh_pages);
        fresh.clear();
        for &q in &nbrs {
            if f.visited.insert(q) {
                self.prefetch_page(codes, q);
                fresh.push(q);
            }
        }
        stop_part(t0, &mut x.stats.parts.visited_ns);
        let t0 = x.stats.parts.start();
        let mut scored = 0u64;
        for &q in &fresh {
            let limit = f.list.admission();
            let (d, s) = self.score_within(codes, table, q, limit);
            scored += s;
            if d <= limit {
                f.list.insert(q, d);
            }
        }
        x.stats.traversal.pq_distances += scored;
        stop_part(t0, &mut x.stats.parts.pq_score_ns);
        f.fresh_pages = fresh;
        f.nbrs = nbrs;
        Ok(())
    }

    /// Starts loading page `q`'s codes (every cache line of its slot range: a page's codes
    /// are contiguous, and scoring them is bound by the memory they come from).
    #[inline]
    fn prefetch_page(&self, codes: &PqCodes, q: u32) {
        let m = codes.m();
        let first = q as usize * self.file.meta().capacity * m;
        let end = first + self.file.count(q) * m;
        if let Some(block) = codes.as_bytes().get(first..end) {
            for part in block.chunks(512) {
                crate::mem::prefetch_read(part);
            }
        }
    }

    /// Page `q`'s distance: the nearest code among its vectors (their codes sit in slot order,
    /// contiguous) when it is at most `limit` (else some value above it: the page would not
    /// enter the list); and the codes scored.
    #[inline]
    pub(crate) fn score_within(
        &self,
        codes: &PqCodes,
        table: &QuantQuery,
        q: u32,
        limit: f32,
    ) -> (f32, u64) {
        let m = codes.m();
        let first = q as usize * self.file.meta().capacity;
        let count = self.file.count(q);
        let bytes = &codes.as_bytes()[first * m..(first + count) * m];
        (table.min_within(bytes, m, limit), count as u64)
    }
}

impl GraphSource for PageLayout {
    const RECORDS: bool = true;
    const PAGE_NODES: bool = true;
    type Records = NoRecords;

    fn path(&self) -> &Path {
        self.file.path()
    }
    #[inline]
    fn locate(&self, p: u32) -> u64 {
        self.file.file_page(p)
    }
    #[inline]
    fn pages_per_read(&self) -> u32 {
        1
    }
    #[inline]
    fn nodes_on_page(&self, _page: u64) -> u64 {
        1
    }
    #[inline]
    fn check_read(&self, page: u64, bytes: &[u8]) -> Result<(), SearchError> {
        if self.verify {
            self.file
                .check_page(page.wrapping_sub(1), bytes)
                .map_err(|d| corrupt(self.path(), page, d))?;
        }
        Ok(())
    }
    #[inline]
    fn hold(&self, p: u32, held: &mut Held) -> bool {
        if self.cache.page(p).is_some() {
            held.push_id(p);
            return true;
        }
        false
    }
    fn expand_held<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        p: u32,
        _held: &Held,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let bytes = self.cache.page(p).ok_or_else(|| {
            SearchError::Internal(format!("page node {p} was held but is not cached"))
        })?;
        self.expand_page(space, f, p, bytes, x)?;
        x.stats.traversal.cache_hits += 1;
        Ok(())
    }
    #[inline]
    fn expand<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        p: u32,
        _page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        self.expand_page(space, f, p, bytes, x)
    }
    #[inline]
    fn node_of(&self, id: u32) -> u32 {
        self.file.page_of(id)
    }
    #[inline]
    fn seed_distance(
        &self,
        space: &GraphSpace<'_>,
        table: &QuantQuery,
        _id: u32,
        node: u32,
    ) -> (f32, u64) {
        match space.pq.codes {
            PqCodesAt::Memory(codes) => self.score_within(codes, table, node, f32::INFINITY),
            PqCodesAt::Records { .. } => (f32::INFINITY, 0),
        }
    }
    fn page_records(&self) -> Option<&NoRecords> {
        None
    }
}

impl FlashSource for PageLayout {
    fn max_degree(&self) -> usize {
        self.file.meta().max_degree
    }
    fn expand_read<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        node: u32,
        page: u64,
        bytes: &[u8],
        query: &[T],
        scratch: &mut Vec<T>,
        results: &mut Vec<Neighbor>,
        (nbrs, list): (&mut Vec<u32>, &mut Vec<u32>),
    ) -> Result<u64, SearchError> {
        let view = self
            .file
            .decode(u64::from(node), bytes)
            .map_err(|d| corrupt(self.path(), page, d))?;
        for i in 0..view.len() {
            let v = view.vector::<T>(i, scratch);
            results.push(Neighbor {
                id: view.id(i),
                dist: kernels::distance(space.metric, query, v),
            });
        }
        self.file
            .neighbors(u64::from(node), &view, list)
            .map_err(|d| corrupt(self.path(), page, d))?;
        nbrs.extend_from_slice(list);
        Ok(view.len() as u64)
    }
    #[inline]
    fn cached(&self, node: u32) -> Option<&[u8]> {
        self.cache.page(node)
    }
}

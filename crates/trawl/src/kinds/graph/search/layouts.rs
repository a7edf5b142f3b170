//! The layout readers: one [`LayoutReader`] per opened index, one variant per disk layout, each
//! implementing the narrow views of [`crate::kinds::graph::search::source`] that its layout can serve.
//!
//! | variant | reader | [`GraphSource`] | [`VectorSource`] |
//! |---|---|---|---|
//! | `Packed`, `Shuffled`, `AllInStorage` | [`RecordLayout`]: the page-packed file (identity order, PageShuffle order, or records carrying their neighbours' PQ codes) and the static node cache | records | — (records carry the vectors) |
//! | `Decoupled` | [`DecoupledLayout`]: graph file, vector file, list cache | coded lists | the vector file |

use std::path::Path;

use crate::kernels::Element;
use crate::kinds::graph::layout::decoupled::graph::GraphFile;
use crate::kinds::graph::layout::decoupled::vectors::CompressedVectorFile;
use crate::kinds::graph::layout::packed::{PackedFile, PackedMeta, RecordView};
use crate::kinds::graph::search::explore::{corrupt, Frontier};
use crate::kinds::graph::search::source::NO_KEY;
use crate::kinds::graph::search::source::{
    Expand, GraphSource, GraphSpace, Held, NoRecords, PageRecords, PqCodesAt, RecordSource,
};
use crate::kinds::graph::search::{ListCache, NodeCache};
use crate::quant::sq::RefineCodes;
use crate::search::rerank::VectorSource;
use crate::search::SearchError;

/// A page-packed layout: records (vector, degree, neighbours) in pages, and the static cache of
/// whole records.
#[derive(Debug)]
pub struct RecordLayout {
    /// Shared with a background fill of the cache.
    file: std::sync::Arc<PackedFile>,
    cache: NodeCache,
    verify: bool,
}

impl RecordLayout {
    /// The layout of `file`; pages are checked against their CRCs when `verify`.
    pub fn new(file: PackedFile, verify: bool) -> Self {
        Self {
            file: std::sync::Arc::new(file),
            cache: NodeCache::empty(),
            verify,
        }
    }
    /// The page-packed file, shared (for a background fill of the cache).
    pub(crate) fn shared_file(&self) -> std::sync::Arc<PackedFile> {
        self.file.clone()
    }
    /// The page-packed file.
    pub fn file(&self) -> &PackedFile {
        &self.file
    }
    /// The static node cache.
    pub fn cache(&self) -> &NodeCache {
        &self.cache
    }
    /// Replaces the static node cache and returns the old one, its fill (if any) left running.
    pub(crate) fn swap_cache(&mut self, cache: NodeCache) -> NodeCache {
        std::mem::replace(&mut self.cache, cache)
    }
    /// Replaces the static node cache (a fill of the old one still running stops).
    pub fn set_cache(&mut self, cache: NodeCache) {
        self.cache.stop();
        self.cache = cache;
    }
}

impl Drop for RecordLayout {
    fn drop(&mut self) {
        // A background fill of the cache has no one left to fill it for.
        self.cache.stop();
    }
}

impl PageRecords for PackedFile {
    #[inline]
    fn ids_on_page(&self, page: u64, out: &mut Vec<u32>) {
        PackedFile::ids_on_page(self, page, out)
    }
    #[inline]
    fn offset(&self, id: u32) -> usize {
        self.locate(id).1
    }
    #[inline]
    fn record_bytes(&self) -> usize {
        self.geometry().record_bytes
    }
    #[inline]
    fn record<'a>(&self, id: u32, bytes: &'a [u8]) -> Result<RecordView<'a>, String> {
        PackedFile::record(self, id, bytes)
    }
    #[inline]
    fn decode<'a>(&self, id: u32, rec: &'a [u8]) -> Result<RecordView<'a>, String> {
        PackedFile::decode(self, id, rec)
    }
}

impl RecordSource for RecordLayout {
    fn max_degree(&self) -> usize {
        self.file.meta().r
    }
    #[inline]
    fn record<'b>(
        &self,
        id: u32,
        page: u64,
        bytes: &'b [u8],
    ) -> Result<RecordView<'b>, SearchError> {
        self.file
            .record(id, bytes)
            .map_err(|d| corrupt(self.path(), page, d))
    }
}

impl GraphSource for RecordLayout {
    const RECORDS: bool = true;
    type Records = PackedFile;

    fn path(&self) -> &Path {
        self.file.path()
    }
    #[inline]
    fn locate(&self, id: u32) -> u64 {
        self.file.locate(id).0
    }
    #[inline]
    fn pages_per_read(&self) -> u32 {
        self.file.geometry().read_pages() as u32
    }
    #[inline]
    fn nodes_on_page(&self, page: u64) -> u64 {
        self.file.records_on_page(page)
    }
    #[inline]
    fn check_read(&self, page: u64, bytes: &[u8]) -> Result<(), SearchError> {
        if self.verify {
            self.file.check_pages(page, bytes).map_err(|p| {
                corrupt(self.path(), page, format!("checksum mismatch in page {p}"))
            })?;
        }
        Ok(())
    }
    #[inline]
    fn hold(&self, id: u32, held: &mut Held) -> bool {
        if self.cache.contains(id) {
            held.push_id(id);
            return true;
        }
        false
    }
    fn expand_held<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        _held: &Held,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let rec = self.cache.record(id).unwrap_or(&[]);
        let view = self
            .file
            .decode(id, rec)
            .map_err(|d| corrupt(self.path(), 0, format!("cached {d}")))?;
        f.explore(space, x.query, id, view, x.scratch, x.stats);
        x.stats.traversal.cache_hits += 1;
        Ok(())
    }
    #[inline]
    fn prefetch_expansion(&self, space: &GraphSpace<'_>, id: u32, bytes: &[u8]) {
        let PqCodesAt::Memory(codes) = space.pq.codes else {
            return;
        };
        let (_, at) = self.file.locate(id);
        let geo = self.file.geometry();
        // The degree and the neighbour ids, as `PackedFile::decode` reads them (unchecked:
        // an id out of range prefetches nothing).
        let Some(rest) = bytes.get(at + geo.vector_bytes..at + geo.record_bytes) else {
            return;
        };
        let degree = rest
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        if let Some(ids) = rest.get(4..4 + 4 * degree) {
            for b in ids.chunks_exact(4) {
                codes.prefetch(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            }
        }
    }
    #[inline]
    fn expand<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let view = self
            .file
            .record(id, bytes)
            .map_err(|d| corrupt(self.path(), page, d))?;
        f.explore(space, x.query, id, view, x.scratch, x.stats);
        Ok(())
    }
    fn page_records(&self) -> Option<&PackedFile> {
        Some(&self.file)
    }
}

/// DecoupleVS's layout: compressed neighbour lists in the graph file, compressed vectors in the
/// vector file (read through one page space, the vector file's pages after the graph file's),
/// and the LRU cache of coded lists shared by the index's searchers.
#[derive(Debug)]
pub struct DecoupledLayout {
    graph: GraphFile,
    /// Vector segments (the layout's `vectors.trawl`, then the files merges wrote).
    segments: Vec<CompressedVectorFile>,
    /// First page of each segment in the joint page space (after the graph file's pages).
    bases: Vec<u64>,
    /// Per slot `(segment, local id)` (`None`: slot `s` is local id `s` of segment 0).
    map: Option<Vec<(u32, u32)>>,
    lists: ListCache,
    /// In-memory refinement codes that order the re-rank ([`crate::quant::sq`]), by slot.
    refine: Option<RefineCodes>,
    verify: bool,
}

impl DecoupledLayout {
    /// The layout of `graph` and its vector `segments` (whose pages follow the graph file's
    /// in the engine's page space, in order), with `map` giving each slot's segment and local
    /// id (`None`: one segment holding slot `s` as id `s`), and a list cache of
    /// `list_cache_bytes`.
    pub fn new(
        graph: GraphFile,
        segments: Vec<CompressedVectorFile>,
        map: Option<Vec<(u32, u32)>>,
        list_cache_bytes: u64,
        verify: bool,
    ) -> Self {
        let lists = ListCache::new(graph.cache_entry_bytes(), list_cache_bytes);
        let mut bases = Vec::with_capacity(segments.len());
        let mut at = graph.total_pages();
        for s in &segments {
            bases.push(at);
            at += s.total_pages();
        }
        Self {
            graph,
            segments,
            bases,
            map,
            lists,
            refine: None,
            verify,
        }
    }
    /// The graph file.
    pub fn graph(&self) -> &GraphFile {
        &self.graph
    }
    /// The first vector segment (the layout's `vectors.trawl` until a merge moves vectors).
    pub fn vectors(&self) -> &CompressedVectorFile {
        &self.segments[0]
    }
    /// Every vector segment.
    pub fn segments(&self) -> &[CompressedVectorFile] {
        &self.segments
    }
    /// Per slot `(segment, local id)` from `vmap.trawl` (`None`: slot `s` is local id `s` of
    /// the one segment).
    pub fn slot_map(&self) -> Option<&[(u32, u32)]> {
        self.map.as_deref()
    }
    /// The list cache.
    pub fn lists(&self) -> &ListCache {
        &self.lists
    }
    /// Replaces the list cache, returning the old one.
    pub fn set_lists(&mut self, lists: ListCache) -> ListCache {
        std::mem::replace(&mut self.lists, lists)
    }
    /// The refinement codes, if loaded.
    pub fn refine(&self) -> Option<&RefineCodes> {
        self.refine.as_ref()
    }
    /// Sets (or drops) the refinement codes, returning the old ones.
    pub fn set_refine(&mut self, refine: Option<RefineCodes>) -> Option<RefineCodes> {
        std::mem::replace(&mut self.refine, refine)
    }
    /// Segment and local id (position in the segment) of slot `id`, whose list carried `key`
    /// (segment `usize::MAX` for a slot without a vector).
    #[inline]
    pub(crate) fn loc(&self, id: u32, key: u32) -> (usize, u32) {
        match &self.map {
            None if self.graph.keyed() => (0, key),
            None => (0, id),
            Some(m) => m
                .get(id as usize)
                .map_or((usize::MAX, 0), |&(s, l)| (s as usize, l)),
        }
    }
    /// Segment of joint page `page`.
    #[inline]
    fn segment_of(&self, page: u64) -> usize {
        self.bases.partition_point(|&b| b <= page).saturating_sub(1)
    }
}

impl GraphSource for DecoupledLayout {
    const RECORDS: bool = false;
    type Records = NoRecords;

    fn path(&self) -> &Path {
        self.graph.path()
    }
    #[inline]
    fn locate(&self, id: u32) -> u64 {
        self.graph.locate(id)
    }
    #[inline]
    fn pages_per_read(&self) -> u32 {
        1
    }
    #[inline]
    fn nodes_on_page(&self, page: u64) -> u64 {
        self.graph.lists_on_page(page)
    }
    /// Each list is checked (with its page's CRC) when it is taken from the page.
    #[inline]
    fn check_read(&self, _page: u64, _bytes: &[u8]) -> Result<(), SearchError> {
        Ok(())
    }
    #[inline]
    fn hold(&self, id: u32, held: &mut Held) -> bool {
        match self.lists.get(id, held.scratch()) {
            Some(degree) => {
                held.push_scratch(id, degree as u16);
                true
            }
            None => false,
        }
    }
    fn expand_held<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        held: &Held,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let (degree, coded) = held
            .copy_of(id)
            .ok_or_else(|| SearchError::Internal(format!("list {id} was not kept")))?;
        self.explore_list(space, f, id, degree, coded, 0, x)?;
        x.stats.traversal.cache_hits += 1;
        Ok(())
    }
    #[inline]
    fn expand<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        page: u64,
        bytes: &[u8],
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let (degree, coded) = self
            .graph
            .list_bytes(id, page, bytes, self.verify)
            .map_err(|m| corrupt(self.path(), page, m))?;
        self.lists.insert(id, degree, coded);
        self.explore_list(space, f, id, degree, coded, page, x)
    }
    fn page_records(&self) -> Option<&NoRecords> {
        None
    }
}

impl DecoupledLayout {
    /// Decodes a coded list (timed) and explores `id` from it.
    #[allow(clippy::too_many_arguments)]
    fn explore_list<T: Element>(
        &self,
        space: &GraphSpace<'_>,
        f: &mut Frontier,
        id: u32,
        degree: usize,
        coded: &[u8],
        page: u64,
        x: &mut Expand<'_, T>,
    ) -> Result<(), SearchError> {
        let t0 = std::time::Instant::now();
        self.graph
            .decode_list(degree, coded, &mut f.nbrs)
            .map_err(|e| corrupt(self.path(), page, format!("node {id}: {e}")))?;
        x.stats.traversal.list_decode_ns += t0.elapsed().as_nanos() as u64;
        let key = self.graph.key_of(coded).unwrap_or(NO_KEY);
        f.explore_list(space, id, key, x.stats);
        Ok(())
    }
}

impl VectorSource for DecoupledLayout {
    #[inline]
    fn refine(&self) -> Option<&RefineCodes> {
        self.refine.as_ref()
    }
    /// A slot without a vector (never asked for by a search) maps to page 0, the graph
    /// file's header, whose decoding fails as damage.
    #[inline]
    fn vector_page(&self, id: u32, key: u32) -> u64 {
        let (s, l) = self.loc(id, key);
        match self.segments.get(s) {
            Some(f) => self.bases[s] + f.locate(l),
            None => 0,
        }
    }
    #[inline]
    fn vectors_on_page(&self, page: u64) -> u64 {
        let s = self.segment_of(page);
        self.segments
            .get(s)
            .map_or(0, |f| f.vectors_on_page(page.saturating_sub(self.bases[s])))
    }
    fn decode_vector(
        &self,
        id: u32,
        key: u32,
        page: u64,
        bytes: &[u8],
        out: &mut [u8],
    ) -> Result<(), SearchError> {
        let (s, l) = self.loc(id, key);
        let Some(f) = self.segments.get(s) else {
            return Err(corrupt(
                self.graph.path(),
                page,
                format!("slot {id} has no vector"),
            ));
        };
        let file_page = page.saturating_sub(self.bases[s]);
        f.decode(l, file_page, bytes, self.verify, out)
            .map_err(|detail| corrupt(f.path(), file_page, detail))
    }
}

/// The layout of an opened graph index: exactly one reader, whatever the layout.
#[derive(Debug)]
pub enum LayoutReader {
    /// The page-packed file as built: node `i`'s record in slot `i`.
    Packed(RecordLayout),
    /// PageShuffle: records reordered so graph neighbours share pages.
    Shuffled(RecordLayout),
    /// All-in-Storage: every record carries its neighbours' PQ codes; no codes in memory.
    AllInStorage(RecordLayout),
    /// DecoupleVS: compressed lists and vectors in two files.
    Decoupled(Box<DecoupledLayout>),
    /// PageANN's page-node graph.
    Pages(Box<crate::kinds::graph::search::PageLayout>),
}

impl LayoutReader {
    /// The page-packed reader (`None` for the decoupled layout).
    pub fn records(&self) -> Option<&RecordLayout> {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => Some(r),
            Self::Decoupled(_) | Self::Pages(_) => None,
        }
    }
    /// The page-packed reader, mutable (to load a cache).
    pub fn records_mut(&mut self) -> Option<&mut RecordLayout> {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => Some(r),
            Self::Decoupled(_) | Self::Pages(_) => None,
        }
    }
    /// The page-node reader (`None` for the other layouts).
    pub fn pages(&self) -> Option<&crate::kinds::graph::search::PageLayout> {
        match self {
            Self::Pages(p) => Some(p),
            _ => None,
        }
    }
    /// The page-node reader, mutable (to set its page cache).
    pub fn pages_mut(&mut self) -> Option<&mut crate::kinds::graph::search::PageLayout> {
        match self {
            Self::Pages(p) => Some(p),
            _ => None,
        }
    }
    /// The decoupled reader (`None` for the page-packed layouts).
    pub fn decoupled(&self) -> Option<&DecoupledLayout> {
        match self {
            Self::Decoupled(d) => Some(d),
            _ => None,
        }
    }
    /// The decoupled reader, mutable (to set its list cache).
    pub fn decoupled_mut(&mut self) -> Option<&mut DecoupledLayout> {
        match self {
            Self::Decoupled(d) => Some(d),
            _ => None,
        }
    }
    /// The graph's shape, from the layout's header.
    pub fn meta(&self) -> &PackedMeta {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => r.file.meta(),
            Self::Decoupled(d) => d.graph.meta(),
            Self::Pages(p) => p.file().packed_meta(),
        }
    }
    /// The layout's file (the graph file for the decoupled layout), for errors.
    pub fn path(&self) -> &Path {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => r.file.path(),
            Self::Decoupled(d) => d.graph.path(),
            Self::Pages(p) => p.file().path(),
        }
    }
    /// Pages of the largest read a search makes.
    pub fn pages_per_read(&self) -> usize {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => {
                r.file.geometry().read_pages()
            }
            Self::Decoupled(_) | Self::Pages(_) => 1,
        }
    }
    /// Memory the reader holds besides caches: page checksums (and PageShuffle's order); for
    /// the decoupled layout the graph's sparse index and the vector file's metadata; for the
    /// page-node layout the page table (4 bytes per vector).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => r.file.heap_bytes(),
            Self::Decoupled(d) => {
                d.graph.heap_bytes()
                    + d.segments
                        .iter()
                        .map(CompressedVectorFile::heap_bytes)
                        .sum::<usize>()
                    + d.map.as_ref().map_or(0, |m| m.len() * 8)
            }
            Self::Pages(p) => p.heap_bytes(),
        }
    }
    /// Memory of the caches: the static node cache, or the list cache's budget.
    pub fn cache_bytes(&self) -> (u64, u64) {
        match self {
            Self::Packed(r) | Self::Shuffled(r) | Self::AllInStorage(r) => {
                (r.cache.heap_bytes() as u64, 0)
            }
            Self::Decoupled(d) => (0, d.lists.budget_bytes()),
            Self::Pages(p) => (p.cache().heap_bytes() as u64, 0),
        }
    }
}

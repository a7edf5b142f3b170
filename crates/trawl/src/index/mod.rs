//! The disk index: a directory holding the page-packed graph and vectors, the PQ quantiser and
//! the PQ codes; built by [`build_index`], opened by [`DiskIndex::open`], searched by
//! [`DiskIndex::searcher`] (one per thread) or [`DiskIndex::search_batch`].
//!
//! | file | what | in memory at search time |
//! |---|---|---|
//! | `packed.trawl` | records (vector + neighbours) in 4 KiB pages ([`crate::layout::packed`]) | header, 4 bytes per page of checksums |
//! | `pq.trawl` | PQ codebooks | all |
//! | `pq-codes.trawl` | one PQ code per vector | all |
//! | `entry.trawl` (optional) | the entry index: a sample graph with its vectors ([`crate::search::entry`]) | all |
//!
//! The packed header holds the payload checksums of both PQ files, so files from different
//! builds are never mixed.

mod build;
mod cache_load;
mod entry_build;
mod layouts;

pub use build::{build_index, IndexBuildError, IndexBuildReport, IndexParams};
pub use entry_build::EntryReport;
pub use layouts::{IndexLayout, LayoutReport, ShuffleParams};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::data::Matrix;
use crate::io::{EngineConfig, EngineKind, IoError, IoFile};
use crate::kernels::{DType, Element, Metric};
use crate::layout::decoupled::graph::{self as dgraph, GraphFile};
use crate::layout::decoupled::vectors::{self as dvectors, VectorFile};
use crate::layout::packed::{self, PackedFile, PackedMeta};
use crate::layout::{FileError, FileErrorKind};
use crate::quant::pq::{PqCodes, ProductQuantizer};
use crate::search::entry::{self, EntryIndex};
use crate::search::{ListCache, NodeCache, QueryStats, SearchError, SearchParams, Searcher};

/// File name of the PQ quantiser inside an index directory.
pub const PQ_FILE: &str = "pq.trawl";
/// File name of the PQ codes inside an index directory.
pub const PQ_CODES_FILE: &str = "pq-codes.trawl";

/// How an index is opened and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Read with O_DIRECT (no page cache). On by default: without it, figures measure memory.
    pub direct: bool,
    /// Which I/O engine each searcher uses.
    pub engine: EngineKind,
    /// Slots of each searcher's engine: the largest beam width it accepts.
    pub queue_depth: usize,
    /// Register read buffers with io_uring when allowed.
    pub register_buffers: bool,
    /// io_uring kernel-side submission polling (costs a core).
    pub sqpoll: bool,
    /// Check every page read against its CRC-32 (costs ~0.5 µs per page).
    pub verify_pages: bool,
    /// Microseconds a batch search thread polls for completions before blocking; `None` =
    /// [`AUTO_SPIN_US`] when the batch's threads do not outnumber the cores, else 0.
    pub spin_us: Option<u64>,
    /// Which disk layout of the graph to search (the page-packed file as built, its
    /// PageShuffle reordering, its All-in-Storage form, or the decoupled graph and vector
    /// files), made by [`DiskIndex::write_layout`].
    pub layout: IndexLayout,
    /// Decoupled layout: memory for the LRU cache of compressed neighbour lists (entries and
    /// bookkeeping), shared by the index's searchers.
    pub list_cache_bytes: u64,
}

/// Polling time of [`OpenOptions::spin_us`]'s automatic choice: covers most 4 KiB reads on
/// an SSD, so the thread rarely pays a sleep and a wake-up per round trip.
pub const AUTO_SPIN_US: u64 = 200;

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            direct: true,
            engine: EngineKind::Auto,
            queue_depth: 64,
            register_buffers: true,
            sqpoll: false,
            verify_pages: true,
            spin_us: None,
            layout: IndexLayout::Packed,
            list_cache_bytes: DEFAULT_LIST_CACHE_BYTES,
        }
    }
}

/// Default [`OpenOptions::list_cache_bytes`]: 16 MiB.
pub const DEFAULT_LIST_CACHE_BYTES: u64 = 16 << 20;

/// Why an index could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The directory does not exist or is not an index directory.
    #[error("{}: not an index directory ({reason})", dir.display())]
    NotAnIndex {
        /// The directory.
        dir: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A file is damaged, truncated or of the wrong kind.
    #[error(transparent)]
    File(#[from] FileError),
    /// The files do not belong together (mixed builds): rebuild the index.
    #[error("{}: {reason}", dir.display())]
    Mismatch {
        /// The directory.
        dir: PathBuf,
        /// What disagrees.
        reason: String,
    },
    /// The index file could not be opened for reading.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Memory an opened index holds, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryReport {
    /// PQ codes.
    pub pq_codes_bytes: u64,
    /// PQ codebooks.
    pub pq_codebook_bytes: u64,
    /// The layout's handle: the packed file's page checksums (and for the PageShuffle layout
    /// its order table and id → slot map, 8 bytes per node); for the decoupled layout the
    /// graph's sparse index and the vector file's metadata (code tables, chunk records, base
    /// vectors, first id per page).
    pub checksum_bytes: u64,
    /// Static cache.
    pub cache_bytes: u64,
    /// Entry index (sample graph and vectors).
    pub entry_bytes: u64,
    /// Decoupled layout: the LRU cache of compressed neighbour lists (its budget: the
    /// memory it takes when full).
    pub list_cache_bytes: u64,
}

impl MemoryReport {
    /// Sum of the parts.
    pub fn total(&self) -> u64 {
        self.pq_codes_bytes
            + self.pq_codebook_bytes
            + self.checksum_bytes
            + self.cache_bytes
            + self.entry_bytes
            + self.list_cache_bytes
    }
}

/// Bytes on disk of each file of an index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiskBytes {
    /// The page-packed file (0 for the decoupled layout, which does not read it).
    pub packed: u64,
    /// Decoupled layout: the graph file.
    pub graph: u64,
    /// Decoupled layout: the vector file.
    pub vectors: u64,
    /// The PQ codebooks.
    pub pq: u64,
    /// The PQ codes.
    pub pq_codes: u64,
    /// The entry index (0 without one).
    pub entry: u64,
}

impl DiskBytes {
    /// Sum of the files.
    pub fn total(&self) -> u64 {
        self.packed + self.graph + self.vectors + self.pq + self.pq_codes + self.entry
    }
}

/// Results of a batch: `nq × k` ids and distances (missing results are `u32::MAX` / `+∞`),
/// one [`QueryStats`] per query, and the batch's wall time.
#[derive(Debug, Clone, Default)]
pub struct BatchOutput {
    /// Results per query.
    pub k: usize,
    /// Row-major ids.
    pub ids: Vec<u32>,
    /// Row-major exact distances.
    pub dists: Vec<f32>,
    /// Per-query statistics.
    pub stats: Vec<QueryStats>,
    /// Seconds for the whole batch.
    pub wall_secs: f64,
}

impl BatchOutput {
    /// The statistics summed over queries.
    pub fn total(&self) -> QueryStats {
        let mut t = QueryStats::default();
        for s in &self.stats {
            t += *s;
        }
        t
    }
}

/// An opened disk index.
#[derive(Debug)]
pub struct DiskIndex {
    dir: PathBuf,
    meta: PackedMeta,
    /// The page-packed file (every layout but the decoupled one).
    packed: Option<PackedFile>,
    /// The decoupled layout's files and list cache.
    decoupled: Option<Box<Decoupled>>,
    file: IoFile,
    pq: ProductQuantizer,
    /// The PQ codes in memory (`None` for the All-in-Storage layout, whose records carry their
    /// neighbours' codes).
    codes: Option<PqCodes>,
    cache: NodeCache,
    entry: Option<EntryIndex>,
    opts: OpenOptions,
}

/// The decoupled layout of an opened index: the graph and vector files (read through one
/// page space, the vector file's pages after the graph file's) and the list cache.
#[derive(Debug)]
pub struct Decoupled {
    /// The graph file.
    pub graph: GraphFile,
    /// The vector file.
    pub vectors: VectorFile,
    /// Page of the joint page space where the vector file starts (the graph file's pages).
    pub vector_base: u64,
    /// The LRU cache of compressed neighbour lists.
    pub lists: ListCache,
}

/// Payload CRC recorded in a trawl envelope header (bytes 24..28).
pub(crate) fn payload_crc(path: &Path) -> Result<u32, FileError> {
    use std::io::Read;
    let mut h = [0u8; crate::layout::header::HEADER_BYTES];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut h))
        .map_err(|e| FileError::new(path, FileErrorKind::Io(e)))?;
    Ok(u32::from_le_bytes([h[24], h[25], h[26], h[27]]))
}

impl DiskIndex {
    /// Opens the index in `dir`, checking every file's header and checksums and that the files
    /// belong together. The static cache starts empty ([`DiskIndex::load_cache`]).
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Self, OpenError> {
        if !dir.is_dir() {
            return Err(OpenError::NotAnIndex {
                dir: dir.to_path_buf(),
                reason: "no such directory".into(),
            });
        }
        let packed_path = dir.join(opts.layout.file_name());
        if !packed_path.is_file() {
            return Err(match opts.layout {
                IndexLayout::Packed => OpenError::NotAnIndex {
                    dir: dir.to_path_buf(),
                    reason: format!("{} is missing", packed::FILE_NAME),
                },
                other => OpenError::Mismatch {
                    dir: dir.to_path_buf(),
                    reason: format!(
                        "no {} layout ({} is missing; write it with `trawl layout {} --{}`)",
                        other.name(),
                        other.file_name(),
                        dir.display(),
                        other.name()
                    ),
                },
            });
        }
        let mismatch = |reason: String| OpenError::Mismatch {
            dir: dir.to_path_buf(),
            reason,
        };
        let (meta, packed, decoupled, io_files) = if opts.layout == IndexLayout::Decoupled {
            let graph = GraphFile::open(&packed_path)?;
            let vectors_path = dir.join(dvectors::FILE_NAME);
            if !vectors_path.is_file() {
                return Err(mismatch(format!(
                    "{} is missing beside {} (rewrite the layout with `trawl layout {} --decoupled`)",
                    dvectors::FILE_NAME,
                    dgraph::FILE_NAME,
                    dir.display()
                )));
            }
            let vectors = VectorFile::open(&vectors_path)?;
            let meta = *graph.meta();
            let vg = vectors.geometry();
            if vg.n != meta.n || vg.dim != meta.dim || vg.dtype != meta.dtype {
                return Err(mismatch(format!(
                    "the vector file ({} × {} {}) does not match the graph ({} × {} {})",
                    vg.n,
                    vg.dim,
                    vg.dtype.name(),
                    meta.n,
                    meta.dim,
                    meta.dtype.name()
                )));
            }
            let files = IoFile::concat(&[
                IoFile::open(&packed_path, opts.direct)?,
                IoFile::open(&vectors_path, opts.direct)?,
            ])?;
            let lists = ListCache::new(graph.cache_entry_bytes(), opts.list_cache_bytes);
            let d = Decoupled {
                vector_base: graph.total_pages(),
                graph,
                vectors,
                lists,
            };
            (meta, None, Some(Box::new(d)), files)
        } else {
            let packed = PackedFile::open(&packed_path)?;
            let meta = *packed.meta();
            let ais = meta.neighbor_code_bytes > 0;
            if ais != (opts.layout == IndexLayout::AllInStorage)
                || meta.permuted != (opts.layout == IndexLayout::Shuffled)
            {
                return Err(OpenError::Mismatch {
                    dir: dir.to_path_buf(),
                    reason: format!(
                        "{} is not a {} layout (permuted: {}, neighbour codes: {})",
                        opts.layout.file_name(),
                        opts.layout.name(),
                        meta.permuted,
                        ais
                    ),
                });
            }
            let file = IoFile::open(&packed_path, opts.direct)?;
            (meta, Some(packed), None, file)
        };
        let ais = meta.neighbor_code_bytes > 0;
        let pq_path = dir.join(PQ_FILE);
        let codes_path = dir.join(PQ_CODES_FILE);
        if payload_crc(&pq_path)? != meta.pq_crc || payload_crc(&codes_path)? != meta.pq_codes_crc {
            return Err(mismatch(
                "the PQ files are not the ones this index was built with (mixed builds?)".into(),
            ));
        }
        let pq = ProductQuantizer::load(&pq_path)?;
        // All-in-Storage searches without the codes in memory.
        let codes = if ais {
            None
        } else {
            Some(PqCodes::load(&codes_path)?)
        };
        let (codes_m, codes_n) = codes
            .as_ref()
            .map_or((pq.m(), meta.n as usize), |c| (c.m(), c.n()));
        if pq.dim() != meta.dim
            || pq.metric() != meta.metric
            || pq.m() != meta.pq_bytes
            || codes_m != pq.m()
            || codes_n as u64 != meta.n
        {
            return Err(mismatch(format!(
                "PQ ({} dims, {} bytes, {} codes, {}) does not match the index ({} dims, {} bytes, n = {}, {})",
                pq.dim(),
                pq.m(),
                codes_n,
                pq.metric().name(),
                meta.dim,
                meta.pq_bytes,
                meta.n,
                meta.metric.name()
            )));
        }
        let entry_path = dir.join(entry::FILE_NAME);
        let entry = if entry_path.is_file() {
            Some(EntryIndex::load(
                &entry_path,
                meta.n,
                meta.dtype,
                meta.dim,
                meta.metric,
                meta.pq_codes_crc,
            )?)
        } else {
            None
        };
        let mut file = io_files;
        if opts.engine.needs_resident() {
            file.load_resident()?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            meta,
            packed,
            decoupled,
            file,
            pq,
            codes,
            cache: NodeCache::empty(),
            entry,
            opts,
        })
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Indexed vectors.
    pub fn n(&self) -> usize {
        self.meta.n as usize
    }
    /// Dimension.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.meta.dtype
    }
    /// Metric.
    pub fn metric(&self) -> Metric {
        self.meta.metric
    }
    /// Entry point.
    pub fn medoid(&self) -> u32 {
        self.meta.medoid
    }
    /// The index's shape (for the decoupled layout, read from its graph file).
    pub fn meta(&self) -> &PackedMeta {
        &self.meta
    }
    /// The page-packed file (`None` for the decoupled layout).
    pub fn packed(&self) -> Option<&PackedFile> {
        self.packed.as_ref()
    }
    /// The page-packed file, or an error naming `what` for the decoupled layout.
    pub(crate) fn packed_file(&self) -> Result<&PackedFile, SearchError> {
        self.packed.as_ref().ok_or_else(|| {
            SearchError::Unsupported(
                "this needs a page-packed layout; the decoupled layout keeps vectors and lists \
                 apart (open the index with the packed layout for it)"
                    .into(),
            )
        })
    }
    /// The decoupled layout's files and list cache (`None` for the page-packed layouts).
    pub fn decoupled(&self) -> Option<&Decoupled> {
        self.decoupled.as_deref()
    }
    /// The file of the index's layout (the graph file for the decoupled layout), for errors.
    pub fn layout_path(&self) -> &Path {
        match (&self.packed, &self.decoupled) {
            (Some(p), _) => p.path(),
            (None, Some(d)) => d.graph.path(),
            (None, None) => &self.dir,
        }
    }
    /// The quantiser.
    pub fn pq(&self) -> &ProductQuantizer {
        &self.pq
    }
    /// The PQ codes in memory (`None` for the All-in-Storage layout).
    pub fn codes(&self) -> Option<&PqCodes> {
        self.codes.as_ref()
    }
    /// The static cache.
    pub fn cache(&self) -> &NodeCache {
        &self.cache
    }
    /// The in-memory entry index, when the index has one.
    pub fn entry(&self) -> Option<&EntryIndex> {
        self.entry.as_ref()
    }
    /// How the index was opened.
    pub fn options(&self) -> &OpenOptions {
        &self.opts
    }
    /// Whether pages are checked against their checksums when read.
    #[inline]
    pub fn verify_pages(&self) -> bool {
        self.opts.verify_pages
    }
    /// The opened file (for making engines).
    pub fn file(&self) -> &IoFile {
        &self.file
    }

    /// Memory held by the index, by part.
    pub fn memory(&self) -> MemoryReport {
        MemoryReport {
            pq_codes_bytes: self.codes.as_ref().map_or(0, |c| c.as_bytes().len() as u64),
            pq_codebook_bytes: self.pq.centroids().len() as u64 * 4,
            checksum_bytes: match (&self.packed, &self.decoupled) {
                (Some(p), _) => p.heap_bytes() as u64,
                (None, Some(d)) => (d.graph.heap_bytes() + d.vectors.heap_bytes()) as u64,
                (None, None) => 0,
            },
            cache_bytes: self.cache.heap_bytes() as u64,
            entry_bytes: self.entry.as_ref().map_or(0, |e| e.heap_bytes() as u64),
            list_cache_bytes: self
                .decoupled
                .as_ref()
                .map_or(0, |d| d.lists.budget_bytes()),
        }
    }

    /// Bytes on disk of each file.
    pub fn disk_bytes(&self) -> DiskBytes {
        let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        DiskBytes {
            packed: self.packed.as_ref().map_or(0, |p| p.file_bytes()),
            graph: self.decoupled.as_ref().map_or(0, |d| d.graph.file_bytes()),
            vectors: self
                .decoupled
                .as_ref()
                .map_or(0, |d| d.vectors.file_bytes()),
            pq: len(self.dir.join(PQ_FILE)),
            // All-in-Storage needs no codes file at search time.
            pq_codes: if self.codes.is_some() {
                len(self.dir.join(PQ_CODES_FILE))
            } else {
                0
            },
            entry: if self.entry.is_some() {
                len(self.dir.join(entry::FILE_NAME))
            } else {
                0
            },
        }
    }

    /// The engine configuration of this index's searchers.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            depth: self.opts.queue_depth.max(1),
            max_pages_per_read: self
                .packed
                .as_ref()
                .map_or(1, |p| p.geometry().read_pages()),
            register_buffers: self.opts.register_buffers,
            sqpoll: self.opts.sqpoll,
        }
    }

    /// A searcher with its own I/O engine (make one per thread).
    pub fn searcher(&self) -> Result<Searcher<'_>, IoError> {
        let engine = self.file.engine(self.opts.engine, self.engine_config())?;
        Ok(Searcher::with_engine(self, engine))
    }

    /// Checks a query against the index and the parameters.
    pub(crate) fn check_query<T: Element>(
        &self,
        query: &[T],
        p: &SearchParams,
        depth: usize,
    ) -> Result<(), SearchError> {
        if T::DTYPE != self.dtype() {
            return Err(SearchError::DTypeMismatch {
                expected: self.dtype().name(),
                got: T::DTYPE.name(),
            });
        }
        if query.len() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: query.len(),
            });
        }
        if p.k == 0 || p.k > p.l {
            return Err(SearchError::InvalidK { k: p.k, l: p.l });
        }
        if p.k > self.n() {
            return Err(SearchError::KTooLarge {
                k: p.k,
                n: self.n() as u64,
            });
        }
        if p.beam_width == 0 || p.beam_width > depth {
            return Err(SearchError::InvalidBeamWidth {
                beam_width: p.beam_width,
                max: depth,
            });
        }
        if let crate::search::Strategy::Pipe(pp) = &p.strategy {
            pp.validate(depth)?;
            if p.page_search || p.dynamic_width.is_some() {
                return Err(SearchError::Unsupported(
                    "PageSearch and DynamicWidth are beam-search options (PipeSearch sets its \
                     width with its own policy)"
                        .into(),
                ));
            }
        }
        if self.decoupled.is_some() {
            if p.page_search {
                return Err(SearchError::Unsupported(
                    "PageSearch scores the other records of a page read, and the decoupled \
                     layout's graph pages hold no vectors"
                        .into(),
                ));
            }
            p.rerank.validate()?;
        }
        if p.entry_list > 0 && self.entry.is_none() {
            return Err(SearchError::NoEntryIndex);
        }
        if p.entry_list > 0 && self.codes.is_none() {
            return Err(SearchError::Unsupported(
                "the entry index seeds the list with PQ distances, and the All-in-Storage \
                 layout keeps no PQ codes in memory: search it with entry_list = 0"
                    .into(),
            ));
        }
        if query.iter().any(|x| !x.is_finite()) {
            return Err(SearchError::NonFiniteQuery { row: 0 });
        }
        Ok(())
    }

    /// Searches every row of `queries` over `threads` threads (each with its own engine),
    /// timing each query.
    pub fn search_batch<T: Element>(
        &self,
        queries: &Matrix<T>,
        params: &SearchParams,
        threads: usize,
    ) -> Result<BatchOutput, SearchError> {
        self.search_batch_with(queries, params, threads, 1)
    }

    /// [`DiskIndex::search_batch`] with `interleave` queries in flight on each thread
    /// (throughput mode when above 1): each thread's engine gets enough slots for all of them.
    pub fn search_batch_with<T: Element>(
        &self,
        queries: &Matrix<T>,
        params: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<BatchOutput, SearchError> {
        if queries.dim() != self.dim() {
            return Err(SearchError::DimMismatch {
                expected: self.dim(),
                got: queries.dim(),
            });
        }
        self.search_rows(queries.as_slice(), params, threads, interleave)
    }

    /// [`DiskIndex::search_batch_with`] over row-major queries in a plain slice (its length a
    /// multiple of the index's dimension): the zero-copy entry point of the bindings.
    pub fn search_rows<T: Element>(
        &self,
        rows: &[T],
        params: &SearchParams,
        threads: usize,
        interleave: usize,
    ) -> Result<BatchOutput, SearchError> {
        let dim = self.dim();
        if dim == 0 || !rows.len().is_multiple_of(dim) {
            return Err(SearchError::BadBatch(format!(
                "the queries hold {} elements, not a multiple of the dimension {dim}",
                rows.len()
            )));
        }
        let nq = rows.len() / dim;
        let row = |q: usize| &rows[q * dim..(q + 1) * dim];
        if interleave == 0 || interleave > crate::search::MAX_INTERLEAVE {
            return Err(SearchError::BadBatch(format!(
                "interleave {interleave} must be between 1 and {}",
                crate::search::MAX_INTERLEAVE
            )));
        }
        let mut cfg = self.engine_config();
        if interleave > 1 {
            let per_query = match &params.strategy {
                crate::search::Strategy::Beam => params.beam_width,
                // In flight plus landed-but-unexplored records.
                crate::search::Strategy::Pipe(pp) => 2 * pp.max_width,
            };
            // Decoupled layout: as many vector reads again (prefetch and re-rank).
            let per_query = per_query * if self.decoupled.is_some() { 2 } else { 1 };
            cfg.depth = cfg.depth.max(interleave * per_query);
        }
        let k = params.k;
        if let Some(row) = (0..nq).find(|&q| row(q).iter().any(|x| !x.is_finite())) {
            return Err(SearchError::NonFiniteQuery { row });
        }
        if nq > 0 {
            self.check_query(row(0), params, cfg.depth)?;
        }
        let threads = threads.clamp(1, nq.max(1));
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let spin =
            std::time::Duration::from_micros(self.opts.spin_us.unwrap_or(if threads <= cores {
                AUTO_SPIN_US
            } else {
                0
            }));
        let cursor = AtomicUsize::new(0);
        let t0 = Instant::now();
        type Part = Vec<(usize, Vec<(u32, f32)>, QueryStats)>;
        let parts: Vec<Result<Part, SearchError>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| -> Result<Part, SearchError> {
                        let engine = self.file.engine(self.opts.engine, cfg)?;
                        let mut searcher = Searcher::with_engine(self, engine);
                        searcher.set_spin(spin);
                        let mut part = Vec::new();
                        searcher.search_stream(
                            params,
                            interleave,
                            &mut || {
                                let q = cursor.fetch_add(1, Ordering::Relaxed);
                                (q < nq).then(|| (q, row(q)))
                            },
                            &mut |q, hits, st| part.push((q, hits.to_vec(), st)),
                        )?;
                        Ok(part)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(SearchError::BadBatch("a search thread panicked".into()))
                    })
                })
                .collect()
        });
        let wall_secs = t0.elapsed().as_secs_f64();
        let mut out = BatchOutput {
            k,
            ids: vec![u32::MAX; nq * k],
            dists: vec![f32::INFINITY; nq * k],
            stats: vec![QueryStats::default(); nq],
            wall_secs,
        };
        for part in parts {
            for (q, hits, st) in part? {
                for (j, (id, d)) in hits.into_iter().enumerate() {
                    out.ids[q * k + j] = id;
                    out.dists[q * k + j] = d;
                }
                out.stats[q] = st;
            }
        }
        Ok(out)
    }
}

//! The disk index: a directory holding the page-packed graph and vectors, the PQ quantiser and
//! the PQ codes; built by [`build_index`], opened by [`DiskIndex::open`], searched by
//! [`DiskIndex::searcher`] (one per thread) or [`DiskIndex::search_batch`].
//!
//! | file | what | in memory at search time |
//! |---|---|---|
//! | `packed.trawl` | records (vector + neighbours) in 4 KiB pages ([`crate::kinds::graph::layout::packed`]) | header, 4 bytes per page of checksums |
//! | `pq.trawl` | PQ codebooks | all |
//! | `pq-codes.trawl` | one PQ code per vector | all |
//! | `entry.trawl` (optional) | the entry index: a sample graph with its vectors ([`crate::kinds::graph::search::entry`]) | all |
//! | `hot.trawl` (optional) | the hot-node order: nodes ranked by sample searches' reads ([`hot`]) | while a cache is chosen |
//!
//! The packed header holds the payload checksums of both PQ files, so files from different
//! builds are never mixed.

pub(crate) mod batch;
mod build;
mod cache_fill;
mod cache_load;
mod entry_build;
pub mod files;
mod filtered;
pub mod hot;
mod info;
pub mod kind;
pub mod label_starts;
pub mod layout;
mod layout_name;
mod layouts;
pub mod monitor;
mod open;
pub mod pages_write;
pub mod plan;
mod refine;
pub mod refine_file;
pub mod search;
pub mod updates;
mod verify;

pub use crate::dir::manifest::{
    BuildRecord, IvfRecord, KindName, Manifest, ManifestFile, MANIFEST_FILE,
};
use crate::dir::{manifest, txn};
pub use crate::kinds::common::{
    OpenError, OpenOptions, DEFAULT_LIST_CACHE_BYTES, PQ_CODES_FILE, PQ_FILE,
};
pub use crate::kinds::info::{DiskBytesInfo, IndexInfo, IvfInfo};
pub use crate::search::{BatchOutput, AUTO_SPIN_US, MAX_SEARCH_THREADS};
pub(crate) use build::write_pq;
pub use build::{
    build_index, build_index_with_queries, build_random_link_index, IndexBuildError,
    IndexBuildReport, IndexParams,
};
pub use cache_load::CacheReport;
pub use entry_build::EntryReport;
pub use layouts::{IndexLayout, LayoutReport, ShuffleParams};
pub use refine::RefineReport;
use updates::{segments, wal};
pub use verify::{verify_index, VerifiedFile, VerifyReport};

use std::path::{Path, PathBuf};

use crate::dir::{FileError, FileErrorKind};
use crate::io::IoFile;
use crate::kernels::{DType, Metric};
use crate::kinds::graph::layout::packed::{PackedFile, PackedMeta};
use crate::kinds::graph::search::entry::{self, EntryIndex};
use crate::kinds::graph::search::{DecoupledLayout, LayoutReader, NodeCache};
use crate::quant::pq::PqCodes;
use crate::quant::Quantiser;
use crate::search::SearchError;

/// Memory an opened index holds, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryReport {
    /// PQ codes.
    pub pq_codes_bytes: u64,
    /// PQ codebooks (both layouts the tables are filled from) and the OPQ rotation.
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
    /// Decoupled layout: the in-memory refinement codes that order the re-rank
    /// ([`DiskIndex::load_refine`]).
    pub refine_bytes: u64,
    /// The vectors' attributes (a Roaring bitmap per label, numeric columns;
    /// [`crate::filter::Attributes::memory_bytes`]) and a label-aware graph's start nodes.
    pub attrs_bytes: u64,
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
            + self.refine_bytes
            + self.attrs_bytes
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
    /// The manifest (0 for an index built before manifests).
    pub manifest: u64,
    /// The hot-node order (`hot.trawl`; 0 without one).
    pub hot: u64,
    /// Decoupled layout: the refinement codes (`refine.trawl`; 0 without them).
    pub refine: u64,
}

impl DiskBytes {
    /// Sum of the files.
    pub fn total(&self) -> u64 {
        self.packed
            + self.graph
            + self.vectors
            + self.pq
            + self.pq_codes
            + self.entry
            + self.manifest
            + self.hot
            + self.refine
    }
}

/// An opened disk index.
#[derive(Debug)]
pub struct DiskIndex {
    dir: PathBuf,
    meta: PackedMeta,
    /// The layout searched: exactly one reader.
    layout: LayoutReader,
    /// The file (or joined files) the layout reads.
    file: IoFile,
    pq: Quantiser,
    /// The codes in memory (`None` for the All-in-Storage layout, whose records carry their
    /// neighbours' codes).
    codes: Option<PqCodes>,
    entry: Option<EntryIndex>,
    /// The slots' attributes (`attrs.trawl`), when the index has them.
    attrs: Option<std::sync::Arc<crate::filter::Attributes>>,
    /// The start nodes of its labels, when the graph was built label-aware.
    label_starts: Option<label_starts::LabelStarts>,
    opts: OpenOptions,
    /// The manifest the index was opened with (`None` for an index built before manifests).
    manifest: Option<Manifest>,
    /// The GPU backend of the flash strategy, when [`OpenOptions::accel`] asked for one.
    flash_gpu: Option<std::sync::Arc<dyn crate::accel::flash::FlashAccel>>,
    /// Engines kept between searches of one query ([`DiskIndex::search_rows`]).
    engines: crate::io::EnginePool,
    /// This process holds the directory's writer lock for a live index
    /// ([`live::LiveIndex`]): the index's own writes start their transaction without taking
    /// it again.
    pub(crate) writer_held: bool,
}

/// Payload CRC recorded in a trawl envelope header (bytes 24..28).
pub(crate) fn payload_crc(path: &Path) -> Result<u32, FileError> {
    use std::io::Read;
    let mut h = [0u8; crate::dir::file::HEADER_BYTES];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut h))
        .map_err(|e| FileError::new(path, FileErrorKind::Io(e)))?;
    Ok(u32::from_le_bytes([h[24], h[25], h[26], h[27]]))
}

impl DiskIndex {
    /// The slots' attributes, when the index has them.
    pub fn attrs(&self) -> Option<&std::sync::Arc<crate::filter::Attributes>> {
        self.attrs.as_ref()
    }

    /// The start nodes of the labels, when the graph was built label-aware.
    pub fn label_starts(&self) -> Option<&label_starts::LabelStarts> {
        self.label_starts.as_ref()
    }

    /// The flash strategy's accelerator: what it is (the CPU backend when no GPU was
    /// opened).
    pub fn flash_accel_info(&self) -> crate::accel::AccelInfo {
        match &self.flash_gpu {
            Some(a) => a.info(),
            None => crate::accel::AccelInfo {
                backend: "cpu",
                adapter: "host".into(),
                resident_bytes: 0,
            },
        }
    }

    /// The GPU backend of the flash strategy, if one was opened.
    pub(crate) fn flash_gpu(&self) -> Option<&dyn crate::accel::flash::FlashAccel> {
        self.flash_gpu.as_deref()
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
    /// The layout's reader.
    pub fn layout(&self) -> &LayoutReader {
        &self.layout
    }
    /// The page-packed file (`None` for the decoupled layout).
    pub fn packed(&self) -> Option<&PackedFile> {
        self.layout.records().map(|r| r.file())
    }
    /// The page-packed file, or an error for the decoupled layout.
    pub(crate) fn packed_file(&self) -> Result<&PackedFile, SearchError> {
        self.packed().ok_or_else(|| {
            SearchError::Unsupported(
                "this needs a page-packed layout; the decoupled layout keeps vectors and lists \
                 apart (open the index with the packed layout for it)"
                    .into(),
            )
        })
    }
    /// The decoupled layout's files and list cache (`None` for the page-packed layouts).
    pub fn decoupled(&self) -> Option<&DecoupledLayout> {
        self.layout.decoupled()
    }
    /// The file of the index's layout (the graph file for the decoupled layout), for errors.
    pub fn layout_path(&self) -> &Path {
        self.layout.path()
    }
    /// The quantiser (PQ or RaBitQ).
    pub fn pq(&self) -> &Quantiser {
        &self.pq
    }
    /// The PQ codes in memory (`None` for the All-in-Storage layout).
    pub fn codes(&self) -> Option<&PqCodes> {
        self.codes.as_ref()
    }
    /// The static node cache (always empty for the decoupled layout, which caches lists).
    pub fn cache(&self) -> &NodeCache {
        static EMPTY: std::sync::OnceLock<NodeCache> = std::sync::OnceLock::new();
        match self.layout.records() {
            Some(r) => r.cache(),
            None => EMPTY.get_or_init(NodeCache::empty),
        }
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
    /// The manifest the index was opened with.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }
    /// Starts an atomic write into the index directory.
    pub(crate) fn begin_txn(&self) -> Result<txn::Txn, txn::TxnError> {
        if self.writer_held {
            txn::Txn::begin_held(self.dir())
        } else {
            txn::Txn::begin(self.dir())
        }
    }

    /// Memory held by the index, by part.
    pub fn memory(&self) -> MemoryReport {
        let (cache_bytes, list_cache_bytes) = self.layout.cache_bytes();
        MemoryReport {
            pq_codes_bytes: self.codes.as_ref().map_or(0, |c| c.as_bytes().len() as u64),
            pq_codebook_bytes: self.pq.heap_bytes(),
            checksum_bytes: self.layout.heap_bytes() as u64,
            cache_bytes,
            entry_bytes: self.entry.as_ref().map_or(0, |e| e.heap_bytes() as u64),
            list_cache_bytes,
            refine_bytes: self
                .layout
                .decoupled()
                .and_then(|d| d.refine())
                .map_or(0, |r| r.heap_bytes()),
            attrs_bytes: self.attrs.as_ref().map_or(0, |a| a.memory_bytes())
                + self.label_starts.as_ref().map_or(0, |s| s.heap_bytes()),
        }
    }

    /// Bytes on disk of each file.
    pub fn disk_bytes(&self) -> DiskBytes {
        let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let d = self.layout.decoupled();
        DiskBytes {
            packed: self.packed().map_or(0, |p| p.file_bytes()),
            graph: d.map_or(0, |d| d.graph().file_bytes()),
            // Every vector segment, and the map of a merged index.
            vectors: d.map_or(0, |d| {
                d.segments().iter().map(|f| f.file_bytes()).sum::<u64>()
                    + d.slot_map()
                        .map_or(0, |_| len(self.dir.join(segments::FILE_NAME)))
            }),
            pq: len(self.dir.join(PQ_FILE)),
            // All-in-Storage needs no codes file at search time.
            pq_codes: if self.codes.is_some() {
                len(self.dir.join(PQ_CODES_FILE))
            } else {
                0
            },
            manifest: len(self.dir.join(manifest::MANIFEST_FILE)),
            entry: if self.entry.is_some() {
                len(self.dir.join(entry::FILE_NAME))
            } else {
                0
            },
            hot: len(self.dir.join(hot::FILE_NAME)),
            refine: d.map_or(0, |_| len(self.dir.join(refine_file::FILE_NAME))),
        }
    }
}

/// Refuses a new build (see [`crate::dir::txn::Txn::begin_replacing`]) when `dir`'s
/// write-ahead log holds records after the log position its manifest records, or cannot be
/// read.
pub fn refuse_unmerged_updates(dir: &Path) -> Result<(), crate::dir::txn::TxnError> {
    let path = dir.join(wal::FILE_NAME);
    if !path.is_file() {
        return Ok(());
    }
    let refuse = |what: String| crate::dir::txn::TxnError::UnmergedUpdates {
        dir: dir.to_path_buf(),
        what,
    };
    // A manifest that cannot be read counts as recording nothing merged.
    let merged = Manifest::load_if_present(dir)
        .ok()
        .flatten()
        .and_then(|m| m.log_seq)
        .unwrap_or(0);
    match wal::read_log(&path) {
        Ok(c) => {
            let pending = c.records.iter().filter(|r| r.seq > merged).count();
            if pending > 0 {
                return Err(refuse(format!(
                    "its write-ahead log {} holds {pending} acknowledged update{} not merged yet",
                    wal::FILE_NAME,
                    if pending == 1 { "" } else { "s" }
                )));
            }
            Ok(())
        }
        Err(e) => Err(refuse(format!(
            "its write-ahead log cannot be read ({e}) and may hold acknowledged updates"
        ))),
    }
}

/// `p` made a range search of `radius` ([`crate::kinds::graph::search::SearchParams::range`]),
/// keeping the slack `p` gives (else the default).
pub fn range_params(
    p: &crate::kinds::graph::search::SearchParams,
    radius: f32,
) -> crate::kinds::graph::search::SearchParams {
    use crate::kinds::graph::search::{RangeSpec, DEFAULT_RANGE_SLACK, DEFAULT_RANGE_WIDTH};
    let mut p = *p;
    p.range = Some(RangeSpec {
        radius,
        slack: p.range.map_or(DEFAULT_RANGE_SLACK, |r| r.slack),
        width: p.range.map_or(DEFAULT_RANGE_WIDTH, |r| r.width),
        early_stop: p.range.map_or(0, |r| r.early_stop),
    });
    p
}

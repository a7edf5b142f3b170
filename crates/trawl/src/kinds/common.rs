//! What opening any kind of index takes and how it fails: the options ([`OpenOptions`]), the
//! error ([`OpenError`]) and the file names every kind with PQ codes shares.

use std::path::PathBuf;

use crate::dir::FileError;
use crate::io::{EngineKind, IoError};
use crate::kinds::graph::IndexLayout;
use crate::ErrorKind;

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
    /// io_uring: how completions are posted to the searching threads.
    pub taskrun: crate::io::TaskRun,
    /// Check every page read against its CRC-32 (costs ~0.5 µs per page).
    pub verify_pages: bool,
    /// Time the parts of every query of a batch search ([`crate::search::PartStats`]; a few
    /// percent of CPU). Off by default.
    pub time_parts: bool,
    /// Microseconds a batch search thread polls for completions before blocking; `None` =
    /// [`crate::search::AUTO_SPIN_US`] when the batch's threads do not outnumber the cores, else 0.
    pub spin_us: Option<u64>,
    /// Which disk layout of the graph to search (the page-packed file as built, its
    /// PageShuffle reordering, its All-in-Storage form, or the decoupled graph and vector
    /// files), made by [`crate::kinds::graph::DiskIndex::write_layout`].
    pub layout: IndexLayout,
    /// Decoupled layout: memory for the LRU cache of compressed neighbour lists (entries and
    /// bookkeeping), shared by the index's searchers.
    pub list_cache_bytes: u64,
    /// The accelerator: of an IVF index's filter stage, and of a graph index's flash
    /// strategy (`gpu`/`auto` open the GPU when the index opens; `cpu` opens nothing).
    pub accel: crate::accel::AccelKind,
    /// IVF index: which vector file the re-rank reads.
    pub ivf_vectors: crate::kinds::ivf::IvfVectorLayout,
    /// IVF index with RaBitQ codes on the CPU backend: copy the codes into FastScan blocks by
    /// posting list and score the probed lists' blocks (off, the default: the gathered ids'
    /// codes one by one after the dedup — measured faster with `VPOPCNTQ`,
    /// `bench/results/rabitq.md`, and without the lists' memory).
    pub fastscan: bool,
    /// Graph index: load the entry index when the directory has one (a memory plan may
    /// leave it on disk).
    pub load_entry: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            direct: true,
            engine: EngineKind::Auto,
            queue_depth: 64,
            register_buffers: true,
            sqpoll: false,
            taskrun: crate::io::TaskRun::default(),
            verify_pages: true,
            spin_us: None,
            time_parts: false,
            layout: IndexLayout::Packed,
            list_cache_bytes: DEFAULT_LIST_CACHE_BYTES,
            accel: crate::accel::AccelKind::Cpu,
            ivf_vectors: crate::kinds::ivf::IvfVectorLayout::Bucket,
            fastscan: false,
            load_entry: true,
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
    /// The accelerator asked for could not be opened (`gpu` without an adapter).
    #[error(transparent)]
    Accel(crate::accel::AccelError),
}

impl From<crate::dir::DirError> for OpenError {
    fn from(e: crate::dir::DirError) -> Self {
        match e {
            crate::dir::DirError::File(f) => Self::File(f),
            crate::dir::DirError::Mismatch { dir, reason } => Self::Mismatch { dir, reason },
        }
    }
}

impl OpenError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotAnIndex { .. } => ErrorKind::NotFound,
            Self::File(f) => f.kind(),
            Self::Mismatch { .. } => ErrorKind::Corrupt,
            Self::Io(e) => e.kind(),
            Self::Accel(e) => e.kind(),
        }
    }
}

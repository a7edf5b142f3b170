//! [`IndexInfo`]: one description of an opened index of any kind — shape, layout, files,
//! bytes on disk, memory at search time, build parameters — that `trawl info`, `trawl bench`'s
//! JSON and Python's `Index.info()` all print.

use serde::Serialize;

use crate::dir::manifest::{BuildRecord, KindName, ManifestFile};
use crate::kinds::graph::{DiskBytes, MemoryReport};

/// What an opened index is and holds.
#[derive(Debug, Clone, Serialize)]
pub struct IndexInfo {
    /// The index directory.
    pub dir: String,
    /// The index kind.
    pub kind: KindName,
    /// Vectors.
    pub n: usize,
    /// Dimension.
    pub dim: usize,
    /// Element type (`f32`, `u8`, `i8`).
    pub dtype: String,
    /// Metric (`l2`, `ip`, `cosine`).
    pub metric: String,
    /// Neighbour slots per node (the graph's maximum degree).
    #[serde(rename = "R")]
    pub r: usize,
    /// PQ bytes per vector.
    pub pq_bytes: usize,
    /// The entry point.
    pub medoid: u32,
    /// The layout opened.
    pub layout: String,
    /// Records per 4 KiB page of a page-packed layout (0 for the decoupled layout, or when a
    /// record spans pages).
    pub records_per_page: usize,
    /// Nodes of the in-memory entry index (0 without one).
    pub entry_nodes: usize,
    /// Layouts written for this build (from the manifest; for an index without one, the
    /// layout files present).
    pub layouts: Vec<String>,
    /// Bytes on disk of the files the opened layout searches.
    pub disk_bytes: DiskBytesInfo,
    /// Memory held at search time, by part.
    pub memory_bytes: MemoryReport,
    /// Memory held at search time.
    pub memory_total_bytes: u64,
    /// Whether pages are checked against their checksums when read.
    pub verify_pages: bool,
    /// Whether the directory has a manifest (indexes built before manifests have none).
    pub manifest: bool,
    /// Every file of the index as the manifest records it (empty without a manifest).
    pub files: Vec<ManifestFile>,
    /// The build parameters, when the manifest records them.
    pub build: Option<BuildRecord>,
    /// The recall monitor's figures (from the manifest; `None` for an index built before it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<crate::kinds::graph::monitor::RecallRecord>,
    /// The build every file belongs to (empty without a manifest).
    pub build_id: String,
    /// IVF index: lists, replication, vector file, accelerator, memory by part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ivf: Option<IvfInfo>,
    /// Sharded index: every shard as the shard manifest records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<crate::kinds::sharded::ShardEntry>>,
}

/// What an IVF index is, beyond the shared fields of [`IndexInfo`].
#[derive(Debug, Clone, Serialize)]
pub struct IvfInfo {
    /// Posting lists.
    pub nlist: usize,
    /// Mean lists per vector.
    pub replication: f64,
    /// Target list size of the clustering.
    pub list_size: u32,
    /// Boundary replication's ε.
    pub epsilon: f32,
    /// Most lists per vector.
    pub max_replicas: u32,
    /// Degree bound of the centroid graph.
    pub centroid_r: usize,
    /// The vector file searched (`bucket` or `by_id`).
    pub vector_layout: String,
    /// Vectors per 4 KiB page.
    pub vectors_per_page: usize,
    /// Data pages of the vector file.
    pub vector_pages: u64,
    /// The filter stage's accelerator.
    pub accel: crate::accel::AccelInfo,
    /// Host memory by part.
    pub memory: crate::kinds::ivf::IvfMemory,
}

/// [`DiskBytes`] with its total.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DiskBytesInfo {
    /// Per file.
    #[serde(flatten)]
    pub files: DiskBytes,
    /// Their sum.
    pub total: u64,
}

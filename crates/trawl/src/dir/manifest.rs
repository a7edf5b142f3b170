//! The manifest of an index directory (`manifest.trawl`): what kind of index it is, its files
//! with their sizes and checksums, the layouts written, and the build parameters — in the
//! envelope every trawl file has (magic `TRAWLMAN`, format version, CRC), with a JSON payload.
//!
//! It is written last by every operation that writes index files (build, `trawl layout`,
//! `trawl entry`), from the files present that belong together (a layout file whose header does
//! not name the current PQ files is left out as stale). Opening checks every file the opened
//! layout reads against it: size and the checksum in the file's own header (a payload CRC for
//! envelope files, the header page's CRC for paged files — cheap to read, and they change with
//! any rebuild). An index written before manifests existed has none and still opens; it gets
//! one the next time one of those operations writes into it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dir::file::{read_envelope, EnvelopeWriter, FileError, FileErrorKind, HEADER_BYTES};
use crate::dir::DirError;

/// File name of the manifest inside an index directory.
pub const MANIFEST_FILE: &str = "manifest.trawl";
/// File name of an index's write-ahead log (the graph kind's streaming updates): the manifest
/// records how far into it the index files reach ([`Manifest::log_seq`]); a log the manifest
/// records no position of is stale.
pub const LOG_FILE: &str = "wal.trawl";
const MAGIC: [u8; 8] = *b"TRAWLMAN";
const VERSION: u32 = 1;

/// The kinds of index trawl builds. Opening dispatches on it ([`crate::kinds::open`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KindName {
    /// A Vamana graph on disk with PQ codes in memory ([`crate::kinds::graph::DiskIndex`]).
    Graph,
    /// Posting lists over a centroid graph, PQ codes on an accelerator, vectors on disk in
    /// buckets ([`crate::kinds::ivf::IvfIndex`], FusionANNS).
    Ivf,
    /// Graph indexes of partitions, searched in each query's nearest partitions and merged
    /// ([`crate::kinds::sharded::ShardedIndex`]; its manifest is `shards.trawl`).
    Sharded,
    /// The vectors on disk, searched exactly ([`crate::kinds::flat::FlatIndex`]).
    Flat,
}

impl std::str::FromStr for KindName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "graph" => Ok(Self::Graph),
            "ivf" => Ok(Self::Ivf),
            "sharded" => Ok(Self::Sharded),
            "flat" => Ok(Self::Flat),
            other => Err(format!(
                "unknown index kind {other:?} (graph, ivf, flat; sharded indexes are built by \
                 their own command)"
            )),
        }
    }
}

impl KindName {
    /// `graph`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Graph => "graph",
            Self::Ivf => "ivf",
            Self::Sharded => "sharded",
            Self::Flat => "flat",
        }
    }

    /// The name after an article: `a graph`, `an IVF`, `a sharded`, `a flat`.
    pub fn with_article(&self) -> &'static str {
        match self {
            Self::Graph => "a graph",
            Self::Ivf => "an IVF",
            Self::Sharded => "a sharded",
            Self::Flat => "a flat",
        }
    }

    /// The name in a sentence: `graph`, `IVF`, `sharded`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Ivf => "IVF",
            other => other.name(),
        }
    }
}

/// How the index was built (what `trawl build` or `trawl::build_index` was given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// Maximum degree.
    #[serde(rename = "R")]
    pub r: usize,
    /// Build list size.
    #[serde(rename = "L")]
    pub l: usize,
    /// Pruning α (the `f32` the build used, written with its shortest decimal form).
    pub alpha: f64,
    /// PQ bytes per vector.
    pub pq_bytes: usize,
    /// Entry index: share of the nodes sampled (0 without one).
    pub entry_ratio: f64,
    /// Build memory budget in bytes (0: none).
    pub memory_budget_bytes: u64,
    /// Graph build seed (IVF: the clustering's seed; R, L and α are the centroid graph's).
    pub seed: u64,
    /// The order the graph build linked its points in (`ids`, `random`, `blocks:N`; see
    /// [`crate::vamana::VisitOrder`]); absent in manifests written before it was recorded (those
    /// builds linked in id order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visit_order: Option<String>,
    /// Queries in the sample whose nearest points the graph build linked to one another
    /// (`trawl build --query-sample`); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub query_sample: usize,
    /// The PQ carries an OPQ rotation (`--opq`); absent from the manifest when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub opq: bool,
    /// The index navigates with RaBitQ codes of this many bits per dimension (`--quant rabitq
    /// --bits B`; `pq_bytes` is then the bytes of one code); absent for PQ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabitq_bits: Option<u8>,
    /// IVF index: its clustering and replication parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ivf: Option<IvfRecord>,
}

/// How an IVF index was clustered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IvfRecord {
    /// Target posting-list size.
    pub list_size: usize,
    /// Boundary replication's ε.
    pub epsilon: f64,
    /// Most lists per vector.
    pub max_replicas: usize,
    /// Posting lists made.
    pub nlist: usize,
}

/// One file of the index, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// File name inside the index directory.
    pub name: String,
    /// What it is, as the component owning it names it: `packed`, `shuffle`, `ais`, `graph`,
    /// `vectors`, `vmap`, `ids`, `pq`, `pq_codes`, `entry` (graph kind); `ivf`, `ivf_vectors`,
    /// `ivf_vectors_by_id` (IVF); `flat_vectors` (flat).
    pub role: String,
    /// Bytes.
    pub bytes: u64,
    /// The checksum in the file's own header (see the module docs).
    pub checksum: u32,
}

/// The manifest of an index directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The index kind.
    pub kind: KindName,
    /// The trawl version that wrote the manifest.
    pub written_by: String,
    /// Vectors.
    pub n: u64,
    /// Dimension.
    pub dim: usize,
    /// Element type (`f32`, `u8`, `i8`).
    pub dtype: String,
    /// Metric (`l2`, `ip`, `cosine`).
    pub metric: String,
    /// Layouts whose files are present and belong to this build.
    pub layouts: Vec<String>,
    /// Every file of the index.
    pub files: Vec<ManifestFile>,
    /// The build parameters (`None` for an index built before manifests existed).
    pub build: Option<BuildRecord>,
    /// Identifies the build every file belongs to: derived from the build's files and record
    /// ([`build_id_of`]), kept by the operations that add to it (`trawl layout`, `trawl
    /// entry`); empty in a manifest written before build ids existed.
    #[serde(default)]
    pub build_id: String,
    /// Streaming updates: the last write-ahead log sequence number the files include
    /// (`None`: no log belongs to this index, and a `wal.trawl` left in the directory is
    /// stale). Written by merges; kept by the operations that add to the index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_seq: Option<u64>,
    /// Streaming updates: the next id handed to a vector inserted without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_id: Option<u64>,
    /// The recall monitor's figures ([`crate::kinds::graph::monitor`]): written by builds and merges, kept
    /// by the operations that add to the index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<RecallRecord>,
}

/// The id of a build: 16 hex digits of a hash (FNV-1a, 64 bits) of its files (name, size,
/// header checksum) and build record — the same for two builds that wrote the same bytes, so
/// reproducible builds stay byte-identical, and different whenever any file differs.
pub fn build_id_of(files: &[ManifestFile], build: &Option<BuildRecord>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for f in files {
        eat(f.name.as_bytes());
        eat(&[0]);
        eat(&f.bytes.to_le_bytes());
        eat(&f.checksum.to_le_bytes());
    }
    eat(serde_json::to_string(build).unwrap_or_default().as_bytes());
    format!("{h:016x}")
}

/// The checksum a file's header carries: bytes 24..28 of an envelope file (its payload CRC),
/// the last 4 bytes of a paged file's header page (the CRC of that page, which holds the
/// checksum of its page-checksum table).
pub(crate) fn header_checksum(path: &Path) -> Result<u32, FileError> {
    use std::io::Read;
    const PAGE: usize = crate::io::PAGE_BYTES;
    let mut f = std::fs::File::open(path).map_err(|e| FileError::new(path, e.into()))?;
    let mut h = vec![0u8; PAGE];
    let mut got = 0;
    while got < PAGE {
        match f
            .read(&mut h[got..])
            .map_err(|e| FileError::new(path, e.into()))?
        {
            0 => break,
            r => got += r,
        }
    }
    let le = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    // A paged file's first page carries the CRC of its first 4092 bytes in its last 4; an
    // envelope's 32-byte header the CRC of its first 28 in bytes 28..32. Which one a file is
    // shows in its own bytes: no list of formats is needed.
    let envelope = got >= HEADER_BYTES && crc32fast::hash(&h[..28]) == le(28);
    if !envelope && got == PAGE && crc32fast::hash(&h[..PAGE - 4]) == le(PAGE - 4) {
        return Ok(le(PAGE - 4));
    }
    if got < HEADER_BYTES {
        return Err(FileError::new(
            path,
            FileErrorKind::SizeMismatch {
                expected: HEADER_BYTES as u64,
                actual: got as u64,
            },
        ));
    }
    Ok(le(24))
}

/// What manifests written before the checksum was read from a file's own bytes recorded for
/// a paged file other than the graph's (the IVF vector file): bytes 24..28 of its header page.
/// Still accepted from an older manifest.
fn legacy_checksum(path: &Path) -> Result<u32, FileError> {
    use std::io::Read;
    let mut h = [0u8; HEADER_BYTES];
    let mut f = std::fs::File::open(path).map_err(|e| FileError::new(path, e.into()))?;
    f.read_exact(&mut h)
        .map_err(|e| FileError::new(path, e.into()))?;
    Ok(u32::from_le_bytes([h[24], h[25], h[26], h[27]]))
}

pub(crate) fn entry_of(dir: &Path, name: &str, role: &str) -> Result<ManifestFile, FileError> {
    let path = dir.join(name);
    entry_at(&path, name, role)
}

pub(crate) fn entry_at(path: &Path, name: &str, role: &str) -> Result<ManifestFile, FileError> {
    let path = path.to_path_buf();
    let bytes = std::fs::metadata(&path)
        .map_err(|e| FileError::new(&path, e.into()))?
        .len();
    Ok(ManifestFile {
        name: name.into(),
        role: role.into(),
        bytes,
        checksum: header_checksum(&path)?,
    })
}

impl Manifest {
    /// The manifest of a new build of `kind`: its shape, the layouts written, its files and
    /// build record; `build_id` empty derives the id from them ([`build_id_of`]). No log
    /// position, next id or recall figures yet (merges and the recall monitor add them).
    #[allow(clippy::too_many_arguments)]
    pub fn of_build(
        kind: KindName,
        n: u64,
        dim: usize,
        dtype: crate::kernels::DType,
        metric: crate::kernels::Metric,
        layouts: Vec<String>,
        files: Vec<ManifestFile>,
        build: Option<BuildRecord>,
        build_id: String,
    ) -> Self {
        let build_id = if build_id.is_empty() {
            build_id_of(&files, &build)
        } else {
            build_id
        };
        Self {
            kind,
            written_by: env!("CARGO_PKG_VERSION").into(),
            n,
            dim,
            dtype: dtype.name().into(),
            metric: metric.name().into(),
            layouts,
            files,
            build,
            build_id,
            log_seq: None,
            next_id: None,
            recall: None,
        }
    }

    /// Reads the manifest of `dir`; `None` when the index has none (built before manifests).
    pub fn load_if_present(dir: &Path) -> Result<Option<Self>, FileError> {
        let path = dir.join(MANIFEST_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        Self::load_from(&path).map(Some)
    }

    /// Reads the manifest file at `path`.
    pub fn load_from(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "trawl index manifest", VERSION)?;
        let m: Self = serde_json::from_slice(&payload)
            .map_err(|e| FileError::new(path, FileErrorKind::Invalid(format!("manifest: {e}"))))?;
        Ok(m)
    }

    /// Writes the manifest to `path` (atomically: a temporary file renamed into place).
    /// Returns the bytes written.
    pub fn write_to(&self, path: &Path) -> Result<u64, FileError> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| FileError::new(path, FileErrorKind::Invalid(e.to_string())))?;
        let mut w = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        w.write(&json)?;
        w.finish()
    }

    /// The recorded file named `name`.
    pub fn file(&self, name: &str) -> Option<&ManifestFile> {
        self.files.iter().find(|f| f.name == name)
    }

    /// Checks that `names`, the files an opened index reads, are the ones recorded: listed,
    /// with the recorded header checksum. A missing file is left to the
    /// code that opens it (which says what is missing and how to make it).
    pub fn check_files(&self, dir: &Path, names: &[&str]) -> Result<(), DirError> {
        let mismatch = |reason: String| DirError::Mismatch {
            dir: dir.to_path_buf(),
            reason,
        };
        for &name in names {
            if !dir.join(name).exists() {
                continue;
            }
            let Some(f) = self.file(name) else {
                return Err(mismatch(format!(
                    "{name} is not part of this index (its manifest does not list it: a file \
                     of another build?)"
                )));
            };
            // The header checksum identifies the file; a file that keeps it but changed size
            // is damaged or truncated, which its own reader reports precisely.
            let now = entry_of(dir, name, &f.role)?;
            if now.checksum != f.checksum && legacy_checksum(&dir.join(name))? != f.checksum {
                return Err(mismatch(format!(
                    "{name} is not the file this index was built with, or its header is \
                     damaged (header checksum {:08x}, {} bytes; the manifest records {:08x}, \
                     {} bytes)",
                    now.checksum, now.bytes, f.checksum, f.bytes
                )));
            }
        }
        Ok(())
    }
}

/// Recall@10 at one list size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecallPoint {
    /// List size.
    #[serde(rename = "L")]
    pub l: usize,
    /// Mean recall@10 of the sampled queries.
    pub recall: f64,
}

/// What the recall monitor measured, as the manifest keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallRecord {
    /// Vectors of the index searched as queries.
    pub samples: usize,
    /// Beam width of the searches (the default search settings).
    pub beam_width: usize,
    /// The figures of the current version.
    pub points: Vec<RecallPoint>,
    /// What measured them: `build` or `merge`.
    pub by: String,
    /// The last build's figures (what merges are compared with).
    pub build: Vec<RecallPoint>,
}

fn is_zero(v: &usize) -> bool {
    *v == 0
}

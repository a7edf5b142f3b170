//! The shard manifest, `shards.trawl`: magic `TRAWLSHD`, version 1, in the trawl envelope
//! (length, CRC-32). Payload, little-endian:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | `h`, length of the JSON header, `u32` |
//! | 4 | h | JSON header ([`ShardHeader`]: shape, metric, partition parameters, per shard its directory, vector count and the build id of its index) |
//! | 4+h | 4·S·dim | centroids, `f32`, row-major |
//! | … | 4·Σcount | per shard in order, the global ids of its vectors (`u32`, increasing) |
//!
//! Loading checks the lengths against the header exactly (every count is bounded by the bytes
//! the file holds before anything is allocated from it), that every shard's directory is a
//! plain child name of the sharded index's folder (no separators, no `.` or `..`, not
//! absolute, no two shards sharing one), that ids are increasing and below `n`, that every
//! vector is in at least one shard, and that the centroids are finite.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};

/// File name of the shard manifest inside a sharded index directory.
pub const SHARD_MANIFEST_FILE: &str = "shards.trawl";
const MAGIC: [u8; 8] = *b"TRAWLSHD";
const VERSION: u32 = 1;

/// One shard as the manifest records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// Directory of the shard's index, relative to the sharded index directory.
    pub dir: String,
    /// Vectors in the shard.
    pub count: u64,
    /// Build id of the shard's index (its `manifest.trawl`), checked at open.
    pub build_id: String,
}

/// The JSON header of the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardHeader {
    /// The trawl version that wrote it.
    pub written_by: String,
    /// Vectors in the whole index (distinct ids).
    pub n: u64,
    /// Dimension.
    pub dim: usize,
    /// Element type name.
    pub dtype: String,
    /// Metric name.
    pub metric: String,
    /// Balance slack of the partition.
    pub slack: f64,
    /// Boundary replication's ε (0 = none).
    pub epsilon: f64,
    /// Seed of the partition.
    pub seed: u64,
    /// Vectors placed in their nearest partition.
    pub in_nearest: u64,
    /// Extra copies made by replication.
    pub replicas: u64,
    /// The shards, in order.
    pub shards: Vec<ShardEntry>,
}

/// A loaded shard manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardManifest {
    /// The header.
    pub header: ShardHeader,
    /// `S × dim` centroids, row-major.
    pub centroids: Vec<f32>,
    /// Per shard, the global id of each local id.
    pub ids: Vec<Vec<u32>>,
}

fn invalid(path: &Path, msg: impl Into<String>) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg.into()))
}

impl ShardManifest {
    /// Writes the manifest to `path` atomically. Returns its size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let json = serde_json::to_vec(&self.header)
            .map_err(|e| invalid(path, format!("header does not serialise: {e}")))?;
        let mut w = ByteWriter::new();
        w.u32(u32::try_from(json.len()).map_err(|_| invalid(path, "header too long"))?);
        w.bytes(&json);
        w.f32s(&self.centroids);
        let mut env = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        env.write(&w.into_inner())?;
        for ids in &self.ids {
            let mut w = ByteWriter::new();
            w.u32s(ids);
            env.write(&w.into_inner())?;
        }
        env.finish()
    }

    /// Reads the JSON header of the manifest (or plan) at `path` after checking the file's
    /// envelope (magic, version, length, CRC), without the semantic checks of
    /// [`ShardManifest::load`]: enough to list the shards' directories.
    pub fn read_header(path: &Path) -> Result<ShardHeader, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "shard manifest", VERSION)?;
        let mut r = ByteReader::new(&payload);
        parse_header(path, &mut r)
    }

    /// Reads and fully checks a manifest written by [`ShardManifest::save`].
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "shard manifest", VERSION)?;
        let mut r = ByteReader::new(&payload);
        let short = |e: crate::dir::bytes::ShortPayload| invalid(path, e.to_string());
        let header = parse_header(path, &mut r)?;
        let s = header.shards.len();
        if s == 0 || s > crate::kinds::sharded::MAX_SHARDS || header.dim == 0 {
            return Err(invalid(
                path,
                format!("{s} shards of dimension {}", header.dim),
            ));
        }
        check_dirs(path, &header.shards)?;
        // Every count is checked against the bytes the file holds before anything is
        // allocated from it.
        let total = header
            .shards
            .iter()
            .try_fold(0u64, |t, e| t.checked_add(e.count))
            .ok_or_else(|| invalid(path, "the shard sizes overflow"))?;
        let want = (s as u64)
            .checked_mul(header.dim as u64)
            .and_then(|c| c.checked_add(total))
            .and_then(|c| c.checked_mul(4))
            .ok_or_else(|| invalid(path, "sizes overflow"))?;
        if r.remaining() as u64 != want {
            return Err(invalid(
                path,
                format!("{} bytes after the header, expected {want}", r.remaining()),
            ));
        }
        let n = header.n;
        // Every vector is in at least one shard: `n` is at most the ids the file holds.
        if n > total {
            return Err(invalid(
                path,
                format!("n = {n} vectors, but the shards hold only {total} ids"),
            ));
        }
        if header.in_nearest > n || header.replicas > total {
            return Err(invalid(
                path,
                format!(
                    "{} vectors in their nearest shard and {} replicas do not fit {n} vectors \
                     in {total} ids",
                    header.in_nearest, header.replicas
                ),
            ));
        }
        let centroids = r.f32s(s * header.dim).map_err(short)?;
        if !centroids.iter().all(|v| v.is_finite()) {
            return Err(invalid(path, "a centroid is not finite"));
        }
        let mut seen = vec![false; usize::try_from(n).map_err(|_| invalid(path, "n too large"))?];
        let mut ids = Vec::with_capacity(s);
        for (i, e) in header.shards.iter().enumerate() {
            let list = r.u32s(e.count as usize).map_err(short)?;
            if list.is_empty() {
                return Err(invalid(path, format!("shard {i} is empty")));
            }
            if !list.windows(2).all(|w| w[0] < w[1]) || u64::from(list[list.len() - 1]) >= n {
                return Err(invalid(
                    path,
                    format!("shard {i}'s ids are not increasing and below {n}"),
                ));
            }
            for &g in &list {
                seen[g as usize] = true;
            }
            ids.push(list);
        }
        if let Some(missing) = seen.iter().position(|&x| !x) {
            return Err(invalid(path, format!("vector {missing} is in no shard")));
        }
        Ok(Self {
            header,
            centroids,
            ids,
        })
    }
}

/// The length-prefixed JSON header at the start of the payload.
fn parse_header(path: &Path, r: &mut ByteReader<'_>) -> Result<ShardHeader, FileError> {
    let short = |e: crate::dir::bytes::ShortPayload| invalid(path, e.to_string());
    let h = r.u32().map_err(short)? as usize;
    serde_json::from_slice(r.bytes(h).map_err(short)?)
        .map_err(|e| invalid(path, format!("header: {e}")))
}

/// Whether `dir` is a plain name of a child directory: one normal path component, no
/// separator of any platform, not `.` or `..`, not absolute.
pub fn is_plain_child_name(dir: &str) -> bool {
    let mut c = Path::new(dir).components();
    let one = matches!((c.next(), c.next()), (Some(Component::Normal(n)), None) if n == dir);
    one && !dir.contains(['/', '\\', '\0']) && dir != "." && dir != ".."
}

/// Every shard's directory must stay inside the sharded index's folder, one per shard.
fn check_dirs(path: &Path, shards: &[ShardEntry]) -> Result<(), FileError> {
    let mut seen = std::collections::HashMap::with_capacity(shards.len());
    for (i, e) in shards.iter().enumerate() {
        if !is_plain_child_name(&e.dir) {
            return Err(invalid(
                path,
                format!(
                    "shard {i}'s directory {:?} is not a plain name inside the sharded index's \
                     folder (an absolute path, `..`, `.` or a path separator): refused",
                    e.dir
                ),
            ));
        }
        if let Some(j) = seen.insert(e.dir.as_str(), i) {
            return Err(invalid(
                path,
                format!("shards {j} and {i} share the directory {:?}", e.dir),
            ));
        }
    }
    Ok(())
}

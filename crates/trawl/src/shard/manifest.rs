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
//! Loading checks the lengths against the header exactly, that ids are increasing and below
//! `n`, that every vector is in at least one shard, and that the centroids are finite.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::layout::bytes::{ByteReader, ByteWriter};
use crate::layout::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};

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

    /// Reads and fully checks a manifest written by [`ShardManifest::save`].
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "shard manifest", VERSION)?;
        let mut r = ByteReader::new(&payload);
        let short = |e: crate::layout::bytes::ShortPayload| invalid(path, e.to_string());
        let h = r.u32().map_err(short)? as usize;
        let header: ShardHeader = serde_json::from_slice(r.bytes(h).map_err(short)?)
            .map_err(|e| invalid(path, format!("header: {e}")))?;
        let s = header.shards.len();
        if s == 0 || s > super::MAX_SHARDS || header.dim == 0 {
            return Err(invalid(
                path,
                format!("{s} shards of dimension {}", header.dim),
            ));
        }
        let total: u64 = header.shards.iter().map(|e| e.count).sum();
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
        let centroids = r.f32s(s * header.dim).map_err(short)?;
        if !centroids.iter().all(|v| v.is_finite()) {
            return Err(invalid(path, "a centroid is not finite"));
        }
        let n = header.n;
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

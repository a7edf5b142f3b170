//! The graph file: a [`Graph`] in a trawl envelope (magic `TRAWLGRF`, version 1).
//!
//! Payload, all little-endian, lists stored compactly (no slack):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | `n`: number of nodes, `u64` |
//! | 8 | 4 | `R`: maximum degree, `u32` |
//! | 12 | 4 | medoid (entry point) id, `u32`, `< n` |
//! | 16 | 4·n | degree of each node, `u32`, `≤ R` |
//! | 16 + 4n | 4·Σdeg | neighbour ids of node 0, then node 1, …, each `u32`, `< n` |
//!
//! Loading checks every bound, so a graph that loads never indexes out of range.

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
use crate::vamana::adjacency::Graph;

/// Magic of graph files.
pub const MAGIC: [u8; 8] = *b"TRAWLGRF";
/// Current graph file version.
pub const VERSION: u32 = 1;

/// Largest `R` a graph file may declare: the builder's own bound ([`crate::vamana::VamanaParams`]
/// refuses larger degrees), so a forged header cannot ask for an `n × R` table of exabytes.
pub const MAX_FILE_DEGREE: usize = u16::MAX as usize;

/// A zeroed `n × r` id table, or `None` when its size overflows or the allocation fails
/// (a forged header must not abort the process on an impossible allocation).
pub(crate) fn dense_ids(n: usize, r: usize) -> Option<Vec<u32>> {
    let len = n.checked_mul(r)?;
    // Probe first: an allocation the allocator refuses is an error here, not an abort. The
    // table itself is then allocated zeroed (untouched pages cost no memory: a forged R with
    // few edges stays cheap).
    Vec::<u32>::new().try_reserve_exact(len).ok()?;
    Some(vec![0u32; len])
}

/// A graph from loaded, checked lists (each at most `r` ids, each below `lists.len()`), or
/// `None` when its `n × r` table cannot be allocated.
pub(crate) fn graph_from_checked_lists(lists: &[Vec<u32>], r: usize, medoid: u32) -> Option<Graph> {
    let n = lists.len();
    let mut ids = dense_ids(n, r)?;
    let mut degrees = Vec::with_capacity(n);
    for (i, l) in lists.iter().enumerate() {
        let d = l.len().min(r);
        ids[i * r..i * r + d].copy_from_slice(&l[..d]);
        degrees.push(d as u32);
    }
    Some(Graph {
        n,
        r,
        medoid,
        degrees,
        ids,
    })
}

impl Graph {
    /// Writes the graph to `path` (atomically: a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        let mut head = ByteWriter::new();
        head.u64(self.n as u64);
        head.u32(self.r as u32);
        head.u32(self.medoid);
        head.u32s(&self.degrees);
        w.write(&head.into_inner())?;
        let mut buf = Vec::with_capacity(1 << 20);
        for i in 0..self.n as u32 {
            for id in self.neighbors(i) {
                buf.extend_from_slice(&id.to_le_bytes());
            }
            if buf.len() >= 1 << 20 {
                w.write(&buf)?;
                buf.clear();
            }
        }
        w.write(&buf)?;
        w.finish()
    }

    /// Reads and validates a graph written by [`Graph::save`].
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "trawl graph", VERSION)?;
        let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let short = |e: crate::dir::bytes::ShortPayload| bad(e.to_string());
        let mut rd = ByteReader::new(&payload);
        let n = usize::try_from(rd.u64().map_err(short)?).map_err(|_| bad("n too large".into()))?;
        let r = rd.u32().map_err(short)? as usize;
        let medoid = rd.u32().map_err(short)?;
        if n == 0 || n >= u32::MAX as usize || medoid as usize >= n || r == 0 {
            return Err(bad(format!("n = {n}, R = {r}, medoid = {medoid}")));
        }
        if r > MAX_FILE_DEGREE {
            return Err(bad(format!(
                "R = {r} exceeds the largest degree a graph can have ({MAX_FILE_DEGREE})"
            )));
        }
        if rd.remaining() / 4 < n {
            return Err(bad(format!("payload too short for {n} degrees")));
        }
        let degrees = rd.u32s(n).map_err(short)?;
        if let Some(d) = degrees.iter().find(|&&d| d as usize > r) {
            return Err(bad(format!("degree {d} exceeds R = {r}")));
        }
        // Degrees are ≤ R < 2¹⁶ and n < 2³²: the sum and its byte count fit a u64.
        let total: u64 = degrees.iter().map(|&d| u64::from(d)).sum();
        if rd.remaining() as u64 != total * 4 {
            return Err(bad(format!(
                "{} id bytes for {total} edges",
                rd.remaining()
            )));
        }
        let mut ids = dense_ids(n, r).ok_or_else(|| {
            bad(format!(
                "{n} nodes × R = {r} neighbour slots do not fit in memory"
            ))
        })?;
        for (i, &d) in degrees.iter().enumerate() {
            for slot in &mut ids[i * r..i * r + d as usize] {
                let id = rd.u32().map_err(short)?;
                if id as usize >= n {
                    return Err(bad(format!("node {i} links to {id} ≥ n = {n}")));
                }
                *slot = id;
            }
        }
        Ok(Graph {
            n,
            r,
            medoid,
            degrees,
            ids,
        })
    }
}

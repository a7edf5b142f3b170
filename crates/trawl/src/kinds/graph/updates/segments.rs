//! `vmap.trawl`: where each slot's full-precision vector is in a decoupled index that has
//! taken merges (DecoupleVS §3.3, §3.5).
//!
//! The vectors of a decoupled index live in segment files, each a vector file
//! ([`crate::kinds::graph::layout::decoupled::vectors`]) over local ids `0..count`: `vectors.trawl` as the
//! layout was written, then `vectors-NNNNNN.trawl` — one per merge that added vectors (the
//! merge's new vectors, and the live vectors of the segments it garbage-collected, compressed
//! when the segment is written). The map names the segments and gives every slot its
//! `(segment, local id)`, or [`GONE`] for a slot without a vector. Without a map, slot `s` is
//! local id `s` of `vectors.trawl`.
//!
//! Payload (inside the trawl envelope: magic `TRAWLVMP`, version, CRC): `u32` segments, for
//! each a `u16` name length, the name, `u64` vectors; `u64` slots; per slot `u32` segment and
//! `u32` local id.

use std::path::Path;

use crate::dir::file::{read_envelope, EnvelopeWriter};
use crate::dir::{FileError, FileErrorKind};
use crate::kinds::graph::layout::decoupled::vectors as dvectors;

/// File name inside an index directory.
pub const FILE_NAME: &str = "vmap.trawl";
const MAGIC: [u8; 8] = *b"TRAWLVMP";
const VERSION: u32 = 1;

/// The location of a slot without a vector.
pub const GONE: (u32, u32) = (u32::MAX, u32::MAX);

/// Whether `name` is a segment file name a merge writes (`vectors-NNNNNN.trawl`).
pub fn is_segment_name(name: &str) -> bool {
    name.strip_prefix("vectors-")
        .and_then(|r| r.strip_suffix(".trawl"))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The file name of merge segment `k`.
pub fn segment_name(k: u64) -> String {
    format!("vectors-{k:06}.trawl")
}

/// Segments and slot locations of a decoupled index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorMap {
    /// Segment file names and their vector counts.
    pub segments: Vec<(String, u64)>,
    /// Per slot: `(segment, local id)`, or [`GONE`].
    pub slots: Vec<(u32, u32)>,
}

impl VectorMap {
    /// The map of a layout written whole: `vectors.trawl` holds slot `s` at local id `s`.
    pub fn identity(n: u64) -> Self {
        Self {
            segments: vec![(dvectors::FILE_NAME.to_string(), n)],
            slots: (0..n as u32).map(|s| (0, s)).collect(),
        }
    }

    /// The map of the index in `dir` (`vmap.trawl`), or `None` without one.
    pub fn load(dir: &Path) -> Result<Option<Self>, FileError> {
        let path = dir.join(FILE_NAME);
        if !path.is_file() {
            return Ok(None);
        }
        let (_, p) = read_envelope(&path, MAGIC, "trawl vector map", VERSION)?;
        let bad = |m: &str| FileError::new(&path, FileErrorKind::Invalid(m.to_string()));
        let mut at = 0usize;
        let mut take = |len: usize| -> Result<&[u8], FileError> {
            let s = p.get(at..at + len).ok_or_else(|| bad("cut short"))?;
            at += len;
            Ok(s)
        };
        let nseg = u32::from_le_bytes(take(4)?.try_into().unwrap_or_default()) as usize;
        // Each segment takes at least 10 bytes (name length, count): a larger count is forged.
        if nseg > 1 << 20 || nseg > p.len() / 10 {
            return Err(bad("segment count"));
        }
        let mut segments = Vec::with_capacity(nseg);
        for _ in 0..nseg {
            let len = u16::from_le_bytes(take(2)?.try_into().unwrap_or_default()) as usize;
            let name = std::str::from_utf8(take(len)?)
                .map_err(|_| bad("segment name"))?
                .to_string();
            if name != dvectors::FILE_NAME && !is_segment_name(&name) {
                return Err(bad("segment name"));
            }
            let count = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default());
            segments.push((name, count));
        }
        let n = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default());
        if n > u64::from(u32::MAX) || p.len() - at != n as usize * 8 {
            return Err(bad("slot table length"));
        }
        let mut slots = Vec::with_capacity(n as usize);
        for c in p[at..].chunks_exact(8) {
            let seg = u32::from_le_bytes(c[..4].try_into().unwrap_or_default());
            let local = u32::from_le_bytes(c[4..].try_into().unwrap_or_default());
            if (seg, local) != GONE
                && segments
                    .get(seg as usize)
                    .is_none_or(|s| u64::from(local) >= s.1)
            {
                return Err(bad("a slot points outside its segment"));
            }
            slots.push((seg, local));
        }
        // Each vector belongs to one slot: two slots sharing one would make the index return
        // one vector under two ids.
        let mut keys: Vec<u64> = slots
            .iter()
            .filter(|&&l| l != GONE)
            .map(|&(s, l)| (u64::from(s) << 32) | u64::from(l))
            .collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(&format!(
                "two slots point at one vector (segment {}, vector {})",
                w[0] >> 32,
                w[0] & 0xffff_ffff
            )));
        }
        Ok(Some(Self { segments, slots }))
    }

    /// Checks the map against the index's ids (`ids`, the same slots): a slot has a vector
    /// exactly when it holds an id (a slot freed by a delete has none; a live slot without
    /// one could not be searched). `path` names the map in the error.
    pub fn check_ids(
        &self,
        ids: &crate::kinds::graph::updates::ids::SlotIds,
        path: &Path,
    ) -> Result<(), FileError> {
        for (s, &loc) in self.slots.iter().enumerate() {
            let hole = ids.is_hole(s as u32);
            if hole != (loc == GONE) {
                let what = if hole {
                    format!("slot {s} is free (its id was deleted) but points at a vector")
                } else {
                    format!("slot {s} holds id {} but has no vector", ids.id(s as u32))
                };
                return Err(FileError::new(path, FileErrorKind::Invalid(what)));
            }
        }
        Ok(())
    }

    /// Writes the map to `path`; returns the file's bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        let mut b = Vec::new();
        b.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        for (name, count) in &self.segments {
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(&count.to_le_bytes());
        }
        b.extend_from_slice(&(self.slots.len() as u64).to_le_bytes());
        w.write(&b)?;
        let mut buf = Vec::with_capacity(8 * 8192);
        for &(s, l) in &self.slots {
            buf.extend_from_slice(&s.to_le_bytes());
            buf.extend_from_slice(&l.to_le_bytes());
            if buf.len() >= 8 * 8192 {
                w.write(&buf)?;
                buf.clear();
            }
        }
        w.write(&buf)?;
        w.finish()
    }

    /// Live vectors per segment (slots pointing into it).
    pub fn live_per_segment(&self) -> Vec<u64> {
        let mut live = vec![0u64; self.segments.len()];
        for &(s, _) in &self.slots {
            if let Some(c) = live.get_mut(s as usize) {
                *c += 1;
            }
        }
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let m = VectorMap {
            segments: vec![("vectors.trawl".into(), 3), (segment_name(1), 2)],
            slots: vec![(0, 0), GONE, (1, 1), (0, 2), (1, 0)],
        };
        m.save(&dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(VectorMap::load(dir.path()).unwrap().unwrap(), m);
        assert_eq!(m.live_per_segment(), vec![2, 2]);
        assert!(is_segment_name("vectors-000001.trawl"));
        assert!(!is_segment_name("vectors-.trawl") && !is_segment_name("vectors.trawl"));
        let bad = VectorMap {
            slots: vec![(1, 2)],
            ..m
        };
        bad.save(&dir.path().join(FILE_NAME)).unwrap();
        let e = VectorMap::load(dir.path()).unwrap_err();
        assert!(e.to_string().contains("outside its segment"), "{e}");
    }
}

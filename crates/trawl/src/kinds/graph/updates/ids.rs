//! `ids.trawl`: the external id of every node slot of an index that has taken updates.
//!
//! Callers name vectors by stable `u64` ids; the graph numbers its nodes by slot (`u32`). An
//! index built from a file has no ids file: the id of a node is its slot (row number). A merge
//! ([`crate::kinds::graph::updates::live`]) writes one: slot `s` holds the id of the vector stored there, or
//! [`HOLE`] when the slot is free (its vector was deleted and no new vector took the slot).
//!
//! Payload (inside the trawl envelope: magic `TRAWLIDS`, version, CRC): `u64 n`, then `n`
//! little-endian `u64` ids. Ids other than holes are unique (checked when read).

use std::collections::HashMap;
use std::path::Path;

use crate::dir::file::{read_envelope, EnvelopeWriter};
use crate::dir::{FileError, FileErrorKind};

/// File name inside an index directory.
pub const FILE_NAME: &str = "ids.trawl";
const MAGIC: [u8; 8] = *b"TRAWLIDS";
const VERSION: u32 = 1;

/// The id stored for a free slot: the contract's [`HOLE`], the id of no
/// vector.
pub use crate::kinds::HOLE;

/// The largest id a caller may choose (`HOLE` marks free slots).
pub const MAX_ID: u64 = u64::MAX - 1;

/// Slot → external id of one index version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotIds {
    /// No ids file: the id of slot `s` is `s`, for `n` slots.
    Identity(usize),
    /// One id per slot ([`HOLE`] for free slots).
    Table(Vec<u64>),
}

impl SlotIds {
    /// Slots.
    pub fn len(&self) -> usize {
        match self {
            Self::Identity(n) => *n,
            Self::Table(t) => t.len(),
        }
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of `slot` ([`HOLE`] for a free or out-of-range slot).
    #[inline]
    pub fn id(&self, slot: u32) -> u64 {
        match self {
            Self::Identity(n) => {
                if (slot as usize) < *n {
                    u64::from(slot)
                } else {
                    HOLE
                }
            }
            Self::Table(t) => t.get(slot as usize).copied().unwrap_or(HOLE),
        }
    }

    /// Whether `slot` holds a vector.
    #[inline]
    pub fn is_hole(&self, slot: u32) -> bool {
        self.id(slot) == HOLE
    }

    /// Free slots, ascending.
    pub fn holes(&self) -> Vec<u32> {
        match self {
            Self::Identity(_) => Vec::new(),
            Self::Table(t) => (0..t.len() as u32)
                .filter(|&s| t[s as usize] == HOLE)
                .collect(),
        }
    }

    /// Slots that hold a vector.
    pub fn live(&self) -> usize {
        match self {
            Self::Identity(n) => *n,
            Self::Table(t) => t.iter().filter(|&&i| i != HOLE).count(),
        }
    }

    /// The largest id plus one (0 without ids).
    pub fn next_free_id(&self) -> u64 {
        match self {
            Self::Identity(n) => *n as u64,
            Self::Table(t) => t.iter().filter(|&&i| i != HOLE).max().map_or(0, |&m| m + 1),
        }
    }

    /// Id → slot of every slot that holds a vector.
    pub fn reverse(&self) -> HashMap<u64, u32> {
        let mut m = HashMap::with_capacity(self.live());
        for s in 0..self.len() as u32 {
            let id = self.id(s);
            if id != HOLE {
                m.insert(id, s);
            }
        }
        m
    }

    /// Reads the ids of the index in `dir`: its `ids.trawl`, or the identity over `n` slots
    /// when there is none. The table must have `n` entries and no repeated id.
    pub fn load(dir: &Path, n: usize) -> Result<Self, FileError> {
        let path = dir.join(FILE_NAME);
        if !path.is_file() {
            return Ok(Self::Identity(n));
        }
        let (_, payload) = read_envelope(&path, MAGIC, "trawl ids", VERSION)?;
        let bad = |m: String| FileError::new(&path, FileErrorKind::Invalid(m));
        if payload.len() < 8 {
            return Err(bad("shorter than its count".into()));
        }
        let count = u64::from_le_bytes(payload[..8].try_into().unwrap_or_default());
        if count != n as u64 {
            return Err(bad(format!("{count} ids for an index of {n} slots")));
        }
        let body = &payload[8..];
        if body.len() as u64 != count.saturating_mul(8) {
            return Err(bad(format!(
                "{} bytes of ids for {count} slots",
                body.len()
            )));
        }
        let ids: Vec<u64> = body
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        for (s, &id) in ids.iter().enumerate() {
            if id != HOLE && !seen.insert(id) {
                return Err(bad(format!("id {id} is stored twice (slot {s})")));
            }
        }
        Ok(Self::Table(ids))
    }

    /// Writes the table as `ids.trawl` at `path` (an identity map is written as a table too).
    /// Returns the file's bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        w.write(&(self.len() as u64).to_le_bytes())?;
        let mut buf = Vec::with_capacity(8 * 4096);
        for s in 0..self.len() as u32 {
            buf.extend_from_slice(&self.id(s).to_le_bytes());
            if buf.len() >= 8 * 4096 {
                w.write(&buf)?;
                buf.clear();
            }
        }
        w.write(&buf)?;
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_table_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(SlotIds::load(dir.path(), 5).unwrap(), SlotIds::Identity(5));
        let t = SlotIds::Table(vec![7, HOLE, 3, 9]);
        t.save(&dir.path().join(FILE_NAME)).unwrap();
        let back = SlotIds::load(dir.path(), 4).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.id(1), HOLE);
        assert_eq!(back.id(4), HOLE);
        assert_eq!(back.holes(), vec![1]);
        assert_eq!(back.live(), 3);
        assert_eq!(back.next_free_id(), 10);
        assert_eq!(back.reverse()[&9], 3);
        // The slot count must match the index.
        let e = SlotIds::load(dir.path(), 5).unwrap_err();
        assert!(
            e.to_string().contains("4 ids for an index of 5 slots"),
            "{e}"
        );
    }

    #[test]
    fn repeated_ids_and_damage_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        SlotIds::Table(vec![1, 2, 1]).save(&path).unwrap();
        let e = SlotIds::load(dir.path(), 3).unwrap_err();
        assert!(e.to_string().contains("id 1 is stored twice"), "{e}");
        SlotIds::Table(vec![1, 2, 3]).save(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            SlotIds::load(dir.path(), 3).unwrap_err().kind(),
            crate::ErrorKind::Corrupt
        );
    }
}

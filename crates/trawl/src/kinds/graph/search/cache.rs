//! The static node cache: whole records of chosen nodes kept in memory, so expanding them costs
//! no read. Chosen once when the index is opened ([`crate::kinds::graph::DiskIndex::load_cache`]):
//!
//! - [`CachePolicy::Bfs`]: the nodes nearest the entry point in hops (breadth-first from the
//!   medoid), which every search passes through first;
//! - [`CachePolicy::Frequency`]: the nodes most often read by beam searches of sample queries
//!   (vectors of randomly chosen indexed nodes, read from the index itself), DiskANN's default.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// How the cached nodes are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// Breadth-first from the entry point.
    Bfs,
    /// Most-read nodes over `sample_queries` beam searches with list size `l` and width `w`.
    Frequency {
        /// Sample queries (indexed vectors chosen at random, seeded); 0 = four per cached node,
        /// at least 2000 (with fewer, the counts beyond the first few thousand nodes are mostly
        /// noise: on GloVe-400K with 10K cached nodes, 2K / 10K / 40K samples gave 17.0 / 15.6 /
        /// 15.0 pages per query at L = 10).
        sample_queries: usize,
        /// List size of the sample searches.
        l: usize,
        /// Beam width of the sample searches.
        beam_width: usize,
    },
}

impl Default for CachePolicy {
    /// Frequency over `max(2000, 4 × nodes)` sample searches at `L = 15`, `W = 4`: the nodes
    /// real searches read most, which a BFS only approximates (DiskANN's default too).
    fn default() -> Self {
        Self::Frequency {
            sample_queries: 0,
            l: 15,
            beam_width: 4,
        }
    }
}

impl std::str::FromStr for CachePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bfs" => Ok(Self::Bfs),
            "freq" | "frequency" => Ok(Self::default()),
            other => Err(format!("unknown cache policy {other:?} (bfs, freq)")),
        }
    }
}

/// A multiplicative hash for `u32` node ids (the map's keys are not attacker-chosen).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.0 = (u64::from(v) ^ 0x5bd1_e995).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Cached records: node id → its record bytes (vector, degree, neighbour ids).
#[derive(Debug, Default, Clone)]
pub struct NodeCache {
    slots: HashMap<u32, u32, BuildHasherDefault<IdHasher>>,
    records: Vec<u8>,
    record_bytes: usize,
}

impl NodeCache {
    /// An empty cache.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A cache of `ids` whose records are the consecutive `record_bytes`-byte slices of
    /// `records`.
    pub(crate) fn from_records(ids: &[u32], records: Vec<u8>, record_bytes: usize) -> Self {
        let mut slots = HashMap::with_capacity_and_hasher(ids.len(), Default::default());
        for (i, &id) in ids.iter().enumerate() {
            slots.insert(id, i as u32);
        }
        Self {
            slots,
            records,
            record_bytes,
        }
    }

    /// Cached nodes.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether `id` is cached.
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        !self.slots.is_empty() && self.slots.contains_key(&id)
    }

    /// The record of `id`, if cached.
    #[inline]
    pub fn record(&self, id: u32) -> Option<&[u8]> {
        let i = *self.slots.get(&id)? as usize;
        self.records
            .get(i * self.record_bytes..(i + 1) * self.record_bytes)
    }

    /// The cached ids, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.keys().copied()
    }

    /// Bytes of memory held (records plus the id map).
    pub fn heap_bytes(&self) -> usize {
        self.records.capacity() + self.slots.capacity() * 16
    }
}

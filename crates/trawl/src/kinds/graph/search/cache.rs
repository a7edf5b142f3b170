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

/// Records a chunk of the cache holds: the unit a background fill publishes.
pub const FILL_CHUNK: usize = 256;

/// Cached records: node id → its record bytes (vector, degree, neighbour ids), shared by the
/// index's searchers and, while it fills, by the thread that fills it. The nodes are fixed when
/// the cache is made; their records arrive in chunks of [`FILL_CHUNK`] (at once, or from a
/// background fill while searches run), and a node counts as cached only once its chunk has
/// arrived: until then searches read it from disk. A chunk, once set, never changes, so a node
/// [`NodeCache::contains`] reports stays readable.
#[derive(Debug, Default, Clone)]
pub struct NodeCache {
    inner: std::sync::Arc<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    slots: HashMap<u32, u32, BuildHasherDefault<IdHasher>>,
    /// The ids in slot order (the order they are filled in).
    ids: Vec<u32>,
    chunks: Box<[std::sync::OnceLock<Box<[u8]>>]>,
    record_bytes: usize,
    /// Records filled so far.
    filled: std::sync::atomic::AtomicUsize,
    /// Set when the fill failed (its error), or was stopped.
    failed: std::sync::Mutex<Option<String>>,
    /// Asks a background fill to stop (the cache was dropped or replaced).
    stop: std::sync::atomic::AtomicBool,
}

/// How far a cache's fill has got.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct WarmProgress {
    /// Records in memory.
    pub filled: usize,
    /// Records the cache will hold.
    pub total: usize,
    /// Why the fill stopped early, if it did (searches go on reading those nodes from disk).
    pub error: Option<String>,
}

impl WarmProgress {
    /// Whether the fill is over (complete, or stopped by an error).
    pub fn done(&self) -> bool {
        self.filled >= self.total || self.error.is_some()
    }
}

impl NodeCache {
    /// An empty cache.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A cache of `ids` (distinct), none of whose records has arrived yet
    /// ([`NodeCache::fill_chunk`]).
    pub(crate) fn planned(ids: Vec<u32>, record_bytes: usize) -> Self {
        let mut slots = HashMap::with_capacity_and_hasher(ids.len(), Default::default());
        for (i, &id) in ids.iter().enumerate() {
            slots.insert(id, i as u32);
        }
        let chunks = (0..ids.len().div_ceil(FILL_CHUNK))
            .map(|_| std::sync::OnceLock::new())
            .collect();
        Self {
            inner: std::sync::Arc::new(CacheInner {
                slots,
                ids,
                chunks,
                record_bytes,
                ..CacheInner::default()
            }),
        }
    }

    /// Record size in bytes.
    pub(crate) fn record_bytes(&self) -> usize {
        self.inner.record_bytes
    }

    /// Publishes chunk `c`'s records (its ids' records, in slot order); a chunk already set
    /// is left as it is.
    pub(crate) fn fill_chunk(&self, c: usize, records: Box<[u8]>) {
        use std::sync::atomic::Ordering;
        let start = c * FILL_CHUNK;
        let n = (start + FILL_CHUNK).min(self.inner.ids.len()) - start.min(self.inner.ids.len());
        debug_assert_eq!(records.len(), n * self.inner.record_bytes);
        if self.inner.chunks[c].set(records).is_ok() {
            self.inner.filled.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Records the fill's failure; the nodes not filled are read from disk.
    pub(crate) fn fail(&self, why: String) {
        if let Ok(mut f) = self.inner.failed.lock() {
            f.get_or_insert(why);
        }
    }

    /// Whether the fill should stop (the cache was dropped by its index or replaced).
    pub(crate) fn stopping(&self) -> bool {
        self.inner.stop.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Asks a background fill to stop.
    pub(crate) fn stop(&self) {
        self.inner
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// How far the fill has got.
    pub fn progress(&self) -> WarmProgress {
        WarmProgress {
            filled: self.inner.filled.load(std::sync::atomic::Ordering::Acquire),
            total: self.inner.ids.len(),
            error: self.inner.failed.lock().ok().and_then(|f| f.clone()),
        }
    }

    /// Nodes the cache holds once filled.
    pub fn len(&self) -> usize {
        self.inner.ids.len()
    }

    /// Whether the cache holds no node.
    pub fn is_empty(&self) -> bool {
        self.inner.ids.is_empty()
    }

    /// Whether `id`'s record is in memory.
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        self.record(id).is_some()
    }

    /// The record of `id`, if it is in memory.
    #[inline]
    pub fn record(&self, id: u32) -> Option<&[u8]> {
        if self.inner.ids.is_empty() {
            return None;
        }
        let slot = *self.inner.slots.get(&id)? as usize;
        let chunk = self.inner.chunks.get(slot / FILL_CHUNK)?.get()?;
        let at = (slot % FILL_CHUNK) * self.inner.record_bytes;
        chunk.get(at..at + self.inner.record_bytes)
    }

    /// The cached ids (whether filled yet or not), in fill order.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.inner.ids.iter().copied()
    }

    /// Bytes of memory the cache holds once filled (records, the id map and the id list).
    pub fn heap_bytes(&self) -> usize {
        Self::bytes_for(self.len(), self.inner.record_bytes)
    }

    /// Bytes of memory a filled cache of `nodes` records of `record_bytes` holds: the records,
    /// the id map (16 bytes per entry at its load factor) and the id list.
    pub fn bytes_for(nodes: usize, record_bytes: usize) -> usize {
        if nodes == 0 {
            return 0;
        }
        // The id map: a swiss table of 8-byte entries and a control byte per bucket, its
        // buckets a power of two at most 7/8 full.
        let buckets = if nodes < 4 {
            4
        } else if nodes < 8 {
            8
        } else {
            (nodes * 8 / 7).next_power_of_two()
        };
        nodes * record_bytes + buckets * 9 + 16 + nodes * 4 + nodes.div_ceil(FILL_CHUNK) * 32
    }
}

//! The hot-node order: the index's nodes ranked by how often sample searches read them, chosen
//! when the index is built or merged (and again by `trawl entry` / `trawl layout`), so that
//! opening an index with a node cache or pinned lists reads a ranking instead of running
//! thousands of sample searches, and the memory planner knows what a cache of `k` nodes
//! saves ([`HotOrder::reads_saved`]).
//!
//! A merge carries the order over instead of ranking afresh while little has changed: the
//! nodes it deletes leave the ranking ([`HotOrder::carried`]), and a ranking of the merged
//! index by [`REFRESH_DIV`]-fold fewer sample searches refreshes it ([`HotOrder::refreshed`]):
//! each node's read rate is the mean of the two, a new vector's slot takes the fresh rate.
//! The file counts the slots changed since the full ranking; once they pass [`RERANK_SHARE`]
//! of the live vectors (or the start node or the entry index changes), the merge ranks
//! afresh.
//!
//! Stored beside the index as `hot.trawl` (magic `TRAWLHOT`, version 2, the trawl envelope:
//! length and CRC-32 of the payload and of the header), payload little-endian:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | index tag: payload CRC of the index's `pq-codes.trawl` |
//! | 4 | 8 | `n` of the index, `u64` |
//! | 12 | 4 | sample searches, `u32` |
//! | 16 | 4 | their list size `L`, `u32` |
//! | 20 | 4 | their beam width `W`, `u32` |
//! | 24 | 4 | ranked nodes `m` (those read at least once), `u32` |
//! | 28 | 4·m | the nodes, most read first (ties by id) |
//! | 28 + 4·m | 4·m | how many sample searches read each, non-increasing, ≥ 1 |
//! | 28 + 8·m | 8 | slots deleted or filled since the sample searches ran, `u64` (version 2; a version-1 file has none: 0) |
//!
//! Loading checks the tag (a file of another build is refused), that every node is a node of
//! the index and appears once, and that the counts are ordered and within the sample count.

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};

/// File name inside an index directory.
pub const FILE_NAME: &str = "hot.trawl";
/// Magic.
pub const MAGIC: [u8; 8] = *b"TRAWLHOT";
/// Format version (2 added the count of slots changed since the ranking; version 1 is read).
pub const VERSION: u32 = 2;

/// A merge ranks afresh once the slots deleted or filled since the last full ranking would
/// pass this share of the live vectors; below it, it carries the order over and refreshes it.
/// With 5% deletes and 5% inserts per merge, two merges in three carry it.
///
/// Measured on gen-1M (500,000 vectors, `examples/hot_carry.rs`,
/// `bench/results/hot-carry-gen-1m.md`): a full ranking takes 1.5 s of a 9 s merge, a refresh
/// about 0.8 s. A node cache of 4% of the vectors chosen by the carried order read 22.6 pages
/// per query at L 20 after one merge and 23.4 after two, against 20.2 and 20.1 for a full
/// ranking of the same index; refreshed, 20.4 and 20.4.
pub const RERANK_SHARE: f64 = 0.25;

/// A merge's refresh runs this many times fewer sample searches than a full ranking
/// ([`sample_searches`]). At 5-fold fewer the refresh took 0.3 s and its cache read 20.6 /
/// 20.7 pages per query in the measurement of [`RERANK_SHARE`]; at 2-fold, 20.4 / 20.4.
pub const REFRESH_DIV: usize = 2;

/// Weight of the refresh's read rates against the carried ones (0.3, 0.5 and 0.8 measured at
/// 5-fold fewer samples, new slots weighted too: 20.63 / 20.67, 20.62 / 20.70, 20.73 / 20.81
/// pages per query).
pub const REFRESH_WEIGHT: f64 = 0.5;

/// Sample searches a ranking is made from: `n / 10`, between 2,000 and 100,000 (run through
/// the page cache). On gen-1M, a 41,105-node cache (4%) from 20,000 samples read 38.35 pages
/// per query at L 40, from 100,000 samples 37.32, from the 164,420 sample searches the cache
/// used to run at open 37.16.
pub fn sample_searches(n: usize) -> usize {
    (n / 10).clamp(2000, 100_000).min(n.max(1))
}

/// The nodes sample searches read, most read first, with their counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HotOrder {
    ids: Vec<u32>,
    reads: Vec<u32>,
    samples: u32,
    l: u32,
    beam_width: u32,
    changed: u64,
}

impl HotOrder {
    /// The ranking of per-node read counts `counts` over `samples` searches (list size `l`,
    /// width `beam_width`): the nodes read at least once, most read first, ties by id.
    pub fn from_counts(counts: &[u32], samples: usize, l: usize, beam_width: usize) -> Self {
        let mut ranked: Vec<(u32, u32)> = counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (c, i as u32))
            .collect();
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let (reads, ids) = ranked.into_iter().unzip();
        Self::new(ids, reads, samples as u32, l as u32, beam_width as u32)
    }

    fn new(ids: Vec<u32>, reads: Vec<u32>, samples: u32, l: u32, beam_width: u32) -> Self {
        Self {
            ids,
            reads,
            samples,
            l,
            beam_width,
            changed: 0,
        }
    }

    /// The order carried over a merge: the ranked nodes `keep` accepts keep their rank and
    /// counts, the others leave (the merge deleted them, or gave their slot to a new vector);
    /// `changed` slots (deleted or filled by the merge) are added to the count of those
    /// changed since the ranking. Slots not ranked come after every ranked one
    /// ([`HotOrder::first`]).
    pub fn carried(&self, keep: impl Fn(u32) -> bool, changed: u64) -> Self {
        let (ids, reads) = self
            .ids
            .iter()
            .zip(&self.reads)
            .filter(|(&id, _)| keep(id))
            .map(|(&id, &r)| (id, r))
            .unzip();
        Self {
            ids,
            reads,
            changed: self.changed.saturating_add(changed),
            ..*self
        }
    }

    /// The order refreshed by `fresh`, a ranking of the same index by fewer sample searches:
    /// each node's reads per sample search estimated as `weight` × its rate in `fresh` +
    /// (1 − `weight`) × its rate here, except for the `new` slots (filled since this order was
    /// ranked), whose rate here says nothing: theirs is the rate in `fresh`. The nodes are
    /// ranked by that, the counts scaled to the larger sample count.
    pub fn refreshed(&self, fresh: &HotOrder, weight: f64, new: &[u32]) -> Self {
        let n = self
            .ids
            .iter()
            .chain(&fresh.ids)
            .chain(new)
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0);
        let mut w = vec![weight; n];
        for &s in new {
            w[s as usize] = 1.0;
        }
        let mut rate = vec![0f64; n];
        for (&i, &r) in self.ids.iter().zip(&self.reads) {
            let i = i as usize;
            rate[i] += (1.0 - w[i]) * f64::from(r) / f64::from(self.samples.max(1));
        }
        for (&i, &r) in fresh.ids.iter().zip(&fresh.reads) {
            let i = i as usize;
            rate[i] += w[i] * f64::from(r) / f64::from(fresh.samples.max(1));
        }
        let samples = self.samples.max(fresh.samples);
        let cap = f64::from(samples.saturating_mul(self.l.max(fresh.l).max(1)));
        let counts: Vec<u32> = rate
            .iter()
            .map(|&x| (x * f64::from(samples)).round().min(cap) as u32)
            .collect();
        Self {
            changed: self.changed,
            ..Self::from_counts(
                &counts,
                samples as usize,
                self.l as usize,
                self.beam_width as usize,
            )
        }
    }

    /// Slots deleted or filled since the sample searches ran (0 for a fresh ranking).
    pub fn changed(&self) -> u64 {
        self.changed
    }

    /// Ranked nodes (those read at least once).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no node was read (an empty index).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ranked nodes, most read first.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The ranked nodes, most read first, the counts dropped.
    pub fn into_ids(self) -> Vec<u32> {
        self.ids
    }

    /// Sample searches the ranking was made from.
    pub fn samples(&self) -> usize {
        self.samples as usize
    }

    /// Reads per sample search that a cache of the first `k` nodes would have served: the
    /// expected disk reads it saves a search like the samples (L 15, W 4; a search at a larger
    /// L reads more nodes, the hot ones among them).
    pub fn reads_saved(&self, k: usize) -> f64 {
        let k = k.min(self.ids.len());
        let sum: u64 = self.reads[..k].iter().map(|&r| u64::from(r)).sum();
        sum as f64 / f64::from(self.samples.max(1))
    }

    /// Reads per sample search in all (every read of the samples).
    pub fn reads_per_search(&self) -> f64 {
        self.reads_saved(self.ids.len())
    }

    /// The first `k` nodes, topped up with the unranked nodes in id order when `k` is more
    /// than the ranking holds (nodes no sample search read are about equally unlikely to be
    /// read; choosing among them would cost reads at open).
    pub fn first(&self, k: usize, n: usize) -> Vec<u32> {
        let k = k.min(n);
        let mut out: Vec<u32> = self.ids[..k.min(self.ids.len())].to_vec();
        if out.len() < k {
            let mut ranked = vec![false; n];
            for &id in &self.ids {
                ranked[id as usize] = true;
            }
            out.extend(
                (0..n as u32)
                    .filter(|&i| !ranked[i as usize])
                    .take(k - self.ids.len()),
            );
        }
        out
    }

    /// Writes the file for an index of `n` nodes whose PQ codes have payload CRC `index_tag`;
    /// returns its bytes.
    pub fn save(&self, path: &Path, n: u64, index_tag: u32) -> Result<u64, FileError> {
        let mut w = ByteWriter::new();
        w.u32(index_tag);
        w.u64(n);
        w.u32(self.samples);
        w.u32(self.l);
        w.u32(self.beam_width);
        w.u32(self.ids.len() as u32);
        w.u32s(&self.ids);
        w.u32s(&self.reads);
        w.u64(self.changed);
        let mut env = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        env.write(&w.into_inner())?;
        env.finish()
    }

    /// Reads the file at `path` and checks it belongs to the index of `n` nodes whose PQ codes
    /// have payload CRC `index_tag`.
    pub fn load(path: &Path, n: u64, index_tag: u32) -> Result<Self, FileError> {
        let (version, payload) = read_envelope(path, MAGIC, "trawl hot-node order", VERSION)?;
        let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let short = |e: crate::dir::bytes::ShortPayload| bad(e.to_string());
        let mut r = ByteReader::new(&payload);
        let tag = r.u32().map_err(short)?;
        let file_n = r.u64().map_err(short)?;
        if tag != index_tag || file_n != n {
            return Err(bad(
                "the hot-node order belongs to another build of the index (rebuild it with \
                 `trawl entry` or `trawl layout`)"
                    .into(),
            ));
        }
        let samples = r.u32().map_err(short)?;
        let (l, w) = (r.u32().map_err(short)?, r.u32().map_err(short)?);
        let m = r.u32().map_err(short)? as usize;
        if m as u64 > n {
            return Err(bad(format!("{m} ranked nodes in an index of {n}")));
        }
        let ids = r.u32s(m).map_err(short)?;
        let reads = r.u32s(m).map_err(short)?;
        let changed = if version >= 2 {
            r.u64().map_err(short)?
        } else {
            0
        };
        if r.remaining() != 0 {
            return Err(bad(format!("{} bytes after the counts", r.remaining())));
        }
        let mut seen = vec![false; n as usize];
        for &id in &ids {
            if u64::from(id) >= n || std::mem::replace(&mut seen[id as usize], true) {
                return Err(bad(format!("node {id} is out of range or ranked twice")));
            }
        }
        if reads
            .iter()
            .any(|&c| c == 0 || c > samples.saturating_mul(l.max(1)))
            || reads.windows(2).any(|p| p[0] < p[1])
        {
            return Err(bad("the read counts are not ordered or out of range".into()));
        }
        Ok(Self {
            changed,
            ..Self::new(ids, reads, samples, l, w)
        })
    }

    /// Bytes of the file for `m` ranked nodes.
    pub fn file_bytes(m: usize) -> u64 {
        (crate::dir::file::HEADER_BYTES + 36 + 8 * m) as u64
    }

    /// What a check of the file found, in words.
    pub fn describe(&self) -> String {
        let carried = match self.changed {
            0 => String::new(),
            c => format!("; carried over merges that changed {c} slots since"),
        };
        format!(
            "checksum matches; {} nodes ranked by {} sample searches (L {}, W {}; {:.1} reads \
             each, the first 1% of the ranking {:.1}){carried}",
            self.ids.len(),
            self.samples,
            self.l,
            self.beam_width,
            self.reads_per_search(),
            self.reads_saved(self.ids.len() / 100)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE_NAME);
        let h = HotOrder::from_counts(&[0, 5, 2, 5, 0, 1], 4, 15, 4);
        assert_eq!(h.ids(), &[1, 3, 2, 5]);
        assert_eq!(h.reads_saved(2), 10.0 / 4.0);
        assert_eq!(h.reads_per_search(), 13.0 / 4.0);
        assert_eq!(h.first(6, 6), vec![1, 3, 2, 5, 0, 4]);
        assert_eq!(h.first(2, 6), vec![1, 3]);
        h.save(&p, 6, 77).unwrap();
        assert_eq!(HotOrder::load(&p, 6, 77).unwrap(), h);
        assert!(HotOrder::load(&p, 6, 78).is_err(), "another build");
        assert!(HotOrder::load(&p, 7, 77).is_err(), "another size");
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert!(HotOrder::load(&p, 6, 77).is_err(), "flipped bit");
        std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
        assert!(HotOrder::load(&p, 6, 77).is_err(), "truncated");
    }

    #[test]
    fn a_carried_order_drops_the_nodes_it_is_told_to_and_counts_the_change() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE_NAME);
        let h = HotOrder::from_counts(&[0, 5, 2, 5, 0, 1], 4, 15, 4);
        let c = h.carried(|id| id != 3, 2).carried(|id| id != 5, 3);
        assert_eq!(c.ids(), &[1, 2]);
        assert_eq!(c.reads_saved(2), 7.0 / 4.0);
        assert_eq!(c.changed(), 5);
        assert_eq!(c.samples(), 4);
        // The new slot 6 and the dropped ones come after the ranked nodes.
        assert_eq!(c.first(5, 7), vec![1, 2, 0, 3, 4]);
        c.save(&p, 7, 9).unwrap();
        let back = HotOrder::load(&p, 7, 9).unwrap();
        assert_eq!(back, c);
        assert!(
            back.describe().contains("changed 5 slots"),
            "{}",
            back.describe()
        );
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            HotOrder::file_bytes(2)
        );
    }

    #[test]
    fn a_refresh_averages_the_rates_and_a_new_slot_takes_the_fresh_one() {
        // Rates per search: here 2, 1, -, 0.5; fresh 1, 2, 0.5, -, 1.5; slot 4 is new.
        let old = HotOrder::from_counts(&[8, 4, 0, 2], 4, 15, 4).carried(|_| true, 7);
        let fresh = HotOrder::from_counts(&[2, 4, 1, 0, 3], 2, 15, 4);
        let r = old.refreshed(&fresh, 0.5, &[4]);
        assert_eq!(r.ids(), &[0, 1, 4, 2, 3]);
        assert_eq!(r.reads, vec![6, 6, 6, 1, 1]);
        assert_eq!(r.samples(), 4);
        assert_eq!(r.changed(), 7, "a refresh is no full ranking");
        // Not new, slot 4 would get half the fresh rate.
        let r = old.refreshed(&fresh, 0.5, &[]);
        assert_eq!(r.ids(), &[0, 1, 4, 2, 3]);
        assert_eq!(r.reads, vec![6, 6, 3, 1, 1]);
    }

    #[test]
    fn a_version_1_file_is_read_as_a_fresh_ranking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE_NAME);
        let mut w = ByteWriter::new();
        w.u32(77);
        w.u64(3);
        for v in [4u32, 15, 4, 2, 0, 2, 3, 1] {
            w.u32(v);
        }
        let mut env = EnvelopeWriter::create(&p, MAGIC, 1).unwrap();
        env.write(&w.into_inner()).unwrap();
        env.finish().unwrap();
        let h = HotOrder::load(&p, 3, 77).unwrap();
        assert_eq!(h, HotOrder::from_counts(&[3, 0, 1], 4, 15, 4));
        assert_eq!(h.changed(), 0);
    }

    #[test]
    fn a_ranking_out_of_order_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE_NAME);
        let h = HotOrder::new(vec![0, 1], vec![1, 3], 4, 15, 4);
        h.save(&p, 2, 1).unwrap();
        assert!(HotOrder::load(&p, 2, 1).is_err());
        let h = HotOrder::new(vec![1, 1], vec![3, 3], 4, 15, 4);
        h.save(&p, 2, 1).unwrap();
        assert!(HotOrder::load(&p, 2, 1).is_err());
    }
}

//! The decoupled layout's list cache: compressed neighbour lists kept in memory, shared by every
//! search thread of an index, in two parts:
//!
//! - **Pinned** ([`PinnedLists`]): lists chosen by value — the nodes sample searches read most
//!   often ([`crate::kinds::graph::DiskIndex::pin_lists`]), as the page-packed layout's static cache
//!   chooses its records. Stored at their exact size (no slot padding), found by a rank over a
//!   bitmap (one bit per node, a `u32` count per 64 nodes, a `u32` offset per entry), read
//!   without a lock.
//! - **LRU** (DecoupleVS §3.4): the rest of the budget, for lists the pinned part lacks.
//!
//! Entries are fixed-size, sized by the Elias-Fano worst case of a list of `R` ids
//! ([`crate::kinds::graph::layout::decoupled::graph::GraphFile::cache_entry_bytes`]), so any list fits any
//! slot: the cache is one flat arena with no fragmentation and a capacity known up front.
//! Each entry holds the degree (`u16`) and the coded list. Recency is an intrusive doubly
//! linked list over the slots; a hash map finds a node's slot. One mutex guards it all: an
//! operation is a hash lookup and a copy of at most one entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const NONE: u32 = u32::MAX;

/// Lists pinned in memory by value: immutable once built, each at its exact size.
#[derive(Debug, Default, Clone)]
pub struct PinnedLists {
    /// One bit per node: pinned or not.
    words: Vec<u64>,
    /// Pinned nodes before each word.
    ranks: Vec<u32>,
    /// Entry `r`'s bytes are `data[offsets[r]..offsets[r + 1]]`: its degree (`u16`), then its
    /// coded entry.
    offsets: Vec<u32>,
    data: Vec<u8>,
}

impl PinnedLists {
    /// Bytes one pinned entry of `coded` bytes takes (data, degree, offset; the bitmap's
    /// share is [`PinnedLists::fixed_bytes`]).
    pub fn entry_cost(coded: usize) -> u64 {
        (coded + 2 + 4) as u64
    }

    /// Bytes the bitmap and its rank directory take for `n` nodes, whatever is pinned.
    pub fn fixed_bytes(n: usize) -> u64 {
        (n.div_ceil(64) * 12 + 4) as u64
    }

    /// Pins `entries` — `(id, degree, coded entry)`, ids strictly increasing and below `n` —
    /// or says why it cannot.
    pub fn build<'a>(
        n: usize,
        entries: impl IntoIterator<Item = (u32, usize, &'a [u8])>,
    ) -> Result<Self, String> {
        let mut b = PinnedBuilder::new(n, 0, 0);
        for (id, degree, coded) in entries {
            b.push(id, degree, coded)?;
        }
        Ok(b.finish())
    }

    /// Lists pinned.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether nothing is pinned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> u64 {
        (self.words.len() * 8 + self.ranks.len() * 4 + self.offsets.len() * 4 + self.data.len())
            as u64
    }

    /// Node `id`'s degree and coded entry, if pinned.
    #[inline]
    pub fn get(&self, id: u32) -> Option<(usize, &[u8])> {
        let w = *self.words.get(id as usize / 64)?;
        let bit = 1u64 << (id % 64);
        if w & bit == 0 {
            return None;
        }
        let r = self.ranks[id as usize / 64] as usize + (w & (bit - 1)).count_ones() as usize;
        let e = &self.data[self.offsets[r] as usize..self.offsets[r + 1] as usize];
        Some((usize::from(u16::from_le_bytes([e[0], e[1]])), &e[2..]))
    }
}

/// Builds [`PinnedLists`] one entry at a time, in increasing id order, so that lists can be
/// pinned straight from a scan of the graph file with no second copy.
#[derive(Debug)]
pub struct PinnedBuilder {
    n: usize,
    words: Vec<u64>,
    offsets: Vec<u32>,
    data: Vec<u8>,
    last: Option<u32>,
}

impl PinnedBuilder {
    /// A builder for an index of `n` nodes, with room for `entries` entries of `data_bytes`
    /// bytes in all (degrees included) reserved up front (0: grown as entries come).
    pub fn new(n: usize, entries: usize, data_bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(entries + 1);
        offsets.push(0);
        Self {
            n,
            words: vec![0u64; n.div_ceil(64)],
            offsets,
            data: Vec::with_capacity(data_bytes),
            last: None,
        }
    }

    /// Pins node `id`'s list (`degree`, coded entry); ids must increase and be below `n`.
    pub fn push(&mut self, id: u32, degree: usize, coded: &[u8]) -> Result<(), String> {
        let n = self.n;
        if (id as usize) >= n || self.last.is_some_and(|l| l >= id) || degree > 0xffff {
            return Err(format!("pinned list {id}: ids must increase below {n}"));
        }
        self.last = Some(id);
        self.words[id as usize / 64] |= 1 << (id % 64);
        self.data.extend_from_slice(&(degree as u16).to_le_bytes());
        self.data.extend_from_slice(coded);
        self.offsets.push(
            u32::try_from(self.data.len()).map_err(|_| "pinned lists above 4 GiB".to_string())?,
        );
        Ok(())
    }

    /// The pinned lists.
    pub fn finish(self) -> PinnedLists {
        let mut ranks = Vec::with_capacity(self.words.len());
        let mut acc = 0u32;
        for w in &self.words {
            ranks.push(acc);
            acc += w.count_ones();
        }
        let (mut data, mut offsets) = (self.data, self.offsets);
        data.shrink_to_fit();
        offsets.shrink_to_fit();
        PinnedLists {
            words: self.words,
            ranks,
            offsets,
            data,
        }
    }
}

/// A shared cache of compressed neighbour lists: a pinned part chosen by value and an LRU part.
#[derive(Debug)]
pub struct ListCache {
    entry_bytes: usize,
    capacity: usize,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    pinned: PinnedLists,
    pinned_hits: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    slot_of: HashMap<u32, u32>,
    id: Vec<u32>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// Most and least recently used slots.
    head: u32,
    tail: u32,
    data: Vec<u8>,
}

impl ListCache {
    /// A cache of at most `budget_bytes` (entries and their bookkeeping) for entries of
    /// `entry_bytes` each; a budget below one entry gives a cache that holds nothing.
    pub fn new(entry_bytes: usize, budget_bytes: u64) -> Self {
        let entry_bytes = entry_bytes.max(2);
        let per_entry = (entry_bytes + Self::OVERHEAD) as u64;
        let capacity = usize::try_from(budget_bytes / per_entry)
            .unwrap_or(usize::MAX)
            .min(u32::MAX as usize - 1);
        Self {
            entry_bytes,
            capacity,
            inner: Mutex::new(Inner {
                head: NONE,
                tail: NONE,
                ..Inner::default()
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            pinned: PinnedLists::default(),
            pinned_hits: AtomicU64::new(0),
        }
    }

    /// A cache whose `pinned` lists stay in memory, with an LRU part of at most `lru_bytes`
    /// for the others.
    pub fn with_pinned(entry_bytes: usize, lru_bytes: u64, pinned: PinnedLists) -> Self {
        let mut c = Self::new(entry_bytes, lru_bytes);
        c.pinned = pinned;
        c
    }

    /// The pinned part.
    pub fn pinned(&self) -> &PinnedLists {
        &self.pinned
    }

    /// Lookups served by the pinned part since the index was opened.
    pub fn pinned_hits(&self) -> u64 {
        self.pinned_hits.load(Ordering::Relaxed)
    }

    /// Bookkeeping bytes per entry: id, links, and the hash map's entry (key, value, control
    /// byte, load-factor slack).
    pub const OVERHEAD: usize = 12 + 16;

    /// A cache that holds nothing.
    pub fn disabled() -> Self {
        Self::new(2, 0)
    }

    /// Entries it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of one entry's list data.
    pub fn entry_bytes(&self) -> usize {
        self.entry_bytes
    }

    /// Bytes the cache takes when full (its memory budget share): the pinned lists and the
    /// LRU part's capacity.
    pub fn budget_bytes(&self) -> u64 {
        self.lru_budget_bytes() + self.pinned.heap_bytes()
    }

    /// Bytes the LRU part takes when full.
    pub fn lru_budget_bytes(&self) -> u64 {
        (self.capacity * (self.entry_bytes + Self::OVERHEAD)) as u64
    }

    /// Entries held now (pinned and LRU).
    pub fn len(&self) -> usize {
        self.pinned.len() + self.inner.lock().map_or(0, |g| g.slot_of.len())
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hits and misses since the index was opened.
    pub fn hit_counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Copies node `id`'s coded list into `out` and returns its degree (an LRU entry is
    /// marked most recently used); `None` on a miss.
    pub fn get(&self, id: u32, out: &mut Vec<u8>) -> Option<usize> {
        if let Some((degree, coded)) = self.pinned.get(id) {
            out.clear();
            out.extend_from_slice(coded);
            self.hits.fetch_add(1, Ordering::Relaxed);
            self.pinned_hits.fetch_add(1, Ordering::Relaxed);
            return Some(degree);
        }
        if self.capacity == 0 {
            return None;
        }
        let Ok(mut g) = self.inner.lock() else {
            return None;
        };
        let Some(&slot) = g.slot_of.get(&id) else {
            drop(g);
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        g.touch(slot);
        let at = slot as usize * self.entry_bytes;
        let e = &g.data[at..at + self.entry_bytes];
        let degree = usize::from(u16::from_le_bytes([e[0], e[1]]));
        let len = usize::from(u16::from_le_bytes([e[2], e[3]]));
        out.clear();
        out.extend_from_slice(&e[4..4 + len]);
        drop(g);
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(degree)
    }

    /// Whether `id` is cached (does not change recency).
    pub fn contains(&self, id: u32) -> bool {
        self.pinned.get(id).is_some()
            || (self.capacity > 0 && self.inner.lock().is_ok_and(|g| g.slot_of.contains_key(&id)))
    }

    /// Stores node `id`'s coded list (evicting the least recently used entry when full).
    /// Lists longer than an entry are not stored (they cannot occur for lists the graph file
    /// holds).
    pub fn insert(&self, id: u32, degree: usize, coded: &[u8]) {
        if self.capacity == 0
            || 4 + coded.len() > self.entry_bytes
            || degree > 0xffff
            || self.pinned.get(id).is_some()
        {
            return;
        }
        let Ok(mut guard) = self.inner.lock() else {
            return;
        };
        let g = &mut *guard;
        if let Some(&slot) = g.slot_of.get(&id) {
            g.touch(slot);
            return;
        }
        let slot = if g.id.len() < self.capacity {
            let s = g.id.len() as u32;
            g.id.push(id);
            g.prev.push(NONE);
            g.next.push(NONE);
            let len = g.data.len() + self.entry_bytes;
            g.data.resize(len, 0);
            s
        } else {
            let s = g.tail;
            g.unlink(s);
            let old = g.id[s as usize];
            g.slot_of.remove(&old);
            g.id[s as usize] = id;
            s
        };
        let at = slot as usize * self.entry_bytes;
        let e = &mut g.data[at..at + self.entry_bytes];
        e[0..2].copy_from_slice(&(degree as u16).to_le_bytes());
        e[2..4].copy_from_slice(&(coded.len() as u16).to_le_bytes());
        e[4..4 + coded.len()].copy_from_slice(coded);
        g.slot_of.insert(id, slot);
        g.push_front(slot);
    }
}

impl Inner {
    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        if p == NONE {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NONE {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[s as usize] = NONE;
        self.next[s as usize] = NONE;
    }

    fn push_front(&mut self, s: u32) {
        self.prev[s as usize] = NONE;
        self.next[s as usize] = self.head;
        if self.head != NONE {
            self.prev[self.head as usize] = s;
        }
        self.head = s;
        if self.tail == NONE {
            self.tail = s;
        }
    }

    fn touch(&mut self, s: u32) {
        if self.head != s {
            self.unlink(s);
            self.push_front(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_is_evicted() {
        let c = ListCache::new(12, 3 * (12 + ListCache::OVERHEAD) as u64);
        assert_eq!(c.capacity(), 3);
        let mut out = Vec::new();
        c.insert(1, 3, &[1, 1]);
        c.insert(2, 4, &[2, 2, 2]);
        c.insert(3, 0, &[]);
        assert_eq!(c.get(1, &mut out), Some(3)); // 1 is now the most recent
        assert_eq!(out, [1, 1]);
        c.insert(4, 1, &[4]); // evicts 2, the least recent
        assert!(!c.contains(2));
        assert_eq!(c.get(3, &mut out), Some(0));
        assert!(out.is_empty());
        c.insert(5, 1, &[5]); // evicts 1
        assert!(!c.contains(1) && c.contains(3) && c.contains(4) && c.contains(5));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(5, &mut out), Some(1));
        assert_eq!(out, [5]);
        assert_eq!(c.get(2, &mut out), None);
        assert_eq!(c.hit_counts(), (3, 1));
        // Too long for an entry: not stored.
        c.insert(9, 1, &[0; 9]);
        assert!(!c.contains(9));
    }

    #[test]
    fn pinned_lists_are_found_by_rank_and_never_evicted() {
        let ids: Vec<u32> = vec![0, 5, 63, 64, 65, 200, 999];
        let data: Vec<Vec<u8>> = ids
            .iter()
            .map(|&i| vec![i as u8; (i % 7) as usize])
            .collect();
        let p = PinnedLists::build(
            1000,
            ids.iter()
                .zip(&data)
                .map(|(&id, d)| (id, id as usize % 300, d.as_slice())),
        )
        .unwrap();
        assert_eq!(p.len(), ids.len());
        for id in 0..1000u32 {
            match ids.iter().position(|&x| x == id) {
                Some(k) => assert_eq!(p.get(id), Some((id as usize % 300, data[k].as_slice()))),
                None => assert_eq!(p.get(id), None, "{id}"),
            }
        }
        assert_eq!(p.get(5000), None);
        assert!(PinnedLists::build(10, [(3u32, 1usize, &[][..]), (3, 1, &[][..])]).is_err());
        assert!(PinnedLists::build(10, [(10u32, 1usize, &[][..])]).is_err());
        // Beside a one-entry LRU part: pinned lists hit, are never evicted, never re-inserted.
        let c = ListCache::with_pinned(8, (8 + ListCache::OVERHEAD) as u64, p);
        let mut out = Vec::new();
        c.insert(1, 1, &[1]);
        c.insert(2, 1, &[2]); // evicts 1
        c.insert(5, 9, &[9]); // pinned: ignored
        assert_eq!(c.get(5, &mut out), Some(5));
        assert_eq!(out, data[1]);
        assert_eq!(c.get(1, &mut out), None);
        assert_eq!(c.get(2, &mut out), Some(1));
        assert_eq!(c.pinned_hits(), 1);
        assert_eq!(c.hit_counts(), (2, 1));
        assert_eq!(c.len(), ids.len() + 1);
        assert!(c.budget_bytes() > c.lru_budget_bytes());
    }

    #[test]
    fn a_zero_budget_holds_nothing() {
        let c = ListCache::disabled();
        c.insert(1, 1, &[]);
        assert!(c.is_empty());
        assert_eq!(c.get(1, &mut Vec::new()), None);
    }

    #[test]
    fn random_operations_match_a_reference_lru() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let cap = 17;
        let c = ListCache::new(8, (cap * (8 + ListCache::OVERHEAD)) as u64);
        let mut reference: Vec<(u32, u8)> = Vec::new(); // most recent last
        let mut out = Vec::new();
        for _ in 0..5000 {
            let id = rng.gen_range(0..40u32);
            if rng.gen_bool(0.5) {
                let byte = id as u8;
                c.insert(id, 1, &[byte]);
                if let Some(p) = reference.iter().position(|e| e.0 == id) {
                    let e = reference.remove(p);
                    reference.push(e);
                } else {
                    if reference.len() == cap {
                        reference.remove(0);
                    }
                    reference.push((id, byte));
                }
            } else {
                let got = c.get(id, &mut out);
                match reference.iter().position(|e| e.0 == id) {
                    Some(p) => {
                        assert_eq!(got, Some(1));
                        assert_eq!(out, [reference[p].1]);
                        let e = reference.remove(p);
                        reference.push(e);
                    }
                    None => assert_eq!(got, None),
                }
            }
            assert_eq!(c.len(), reference.len());
        }
    }
}

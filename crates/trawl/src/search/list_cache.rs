//! The decoupled layout's dynamic cache (DecoupleVS §3.4): compressed neighbour lists kept in
//! memory under a least-recently-used policy, shared by every search thread of an index.
//!
//! Entries are fixed-size, sized by the Elias-Fano worst case of a list of `R` ids
//! ([`crate::layout::decoupled::graph::GraphFile::cache_entry_bytes`]), so any list fits any
//! slot: the cache is one flat arena with no fragmentation and a capacity known up front.
//! Each entry holds the degree (`u16`) and the coded list. Recency is an intrusive doubly
//! linked list over the slots; a hash map finds a node's slot. One mutex guards it all: an
//! operation is a hash lookup and a copy of at most one entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const NONE: u32 = u32::MAX;

/// A shared LRU cache of compressed neighbour lists.
#[derive(Debug)]
pub struct ListCache {
    entry_bytes: usize,
    capacity: usize,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
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
        }
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

    /// Bytes the cache takes when full (its memory budget share).
    pub fn budget_bytes(&self) -> u64 {
        (self.capacity * (self.entry_bytes + Self::OVERHEAD)) as u64
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |g| g.slot_of.len())
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

    /// Copies node `id`'s coded list into `out` and returns its degree, marking it most
    /// recently used; `None` on a miss.
    pub fn get(&self, id: u32, out: &mut Vec<u8>) -> Option<usize> {
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
        self.capacity > 0 && self.inner.lock().is_ok_and(|g| g.slot_of.contains_key(&id))
    }

    /// Stores node `id`'s coded list (evicting the least recently used entry when full).
    /// Lists longer than an entry are not stored (they cannot occur for lists the graph file
    /// holds).
    pub fn insert(&self, id: u32, degree: usize, coded: &[u8]) {
        if self.capacity == 0 || 4 + coded.len() > self.entry_bytes || degree > 0xffff {
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

//! Search scratch structures: the bounded sorted candidate list ([`CandidateList`], DiskANN's
//! `NeighborPriorityQueue`) and the visited set ([`VisitedSet`]).

/// A node id with its distance to the probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbor {
    /// Node id.
    pub id: u32,
    /// Distance to the probe.
    pub dist: f32,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    id: u32,
    dist: f32,
    expanded: bool,
}

/// The `capacity` nearest candidates seen so far, sorted by (distance, id), with a cursor at
/// the nearest one not yet expanded.
///
/// With a radius ([`CandidateList::set_radius`], range search) the list is elastic: it also
/// keeps every unexpanded candidate within the radius that a full list would drop, in an
/// overflow heap that is expanded, nearest first, once the sorted list has no unexpanded
/// candidate left. A search then runs as two rounds — the usual best-first search over the
/// `capacity` nearest, then an expansion of everything within the radius it found, and of
/// everything within the radius those expansions find — and ends when neither has an
/// unexpanded candidate.
#[derive(Debug, Clone, Default)]
pub struct CandidateList {
    slots: Vec<Slot>,
    capacity: usize,
    cursor: usize,
    /// Candidates within this distance are never dropped (`-∞`: off).
    radius: f32,
    /// Unexpanded candidates within the radius that the sorted list has no room for.
    overflow: std::collections::BinaryHeap<Overflow>,
}

/// A candidate in the overflow heap, ordered so the heap pops the nearest (ties: smaller id).
#[derive(Debug, Clone, Copy)]
struct Overflow(Neighbor);

impl PartialEq for Overflow {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Overflow {}
impl PartialOrd for Overflow {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Overflow {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.0.dist
            .total_cmp(&self.0.dist)
            .then(o.0.id.cmp(&self.0.id))
    }
}

impl CandidateList {
    /// An empty list that keeps at most `capacity` candidates.
    pub fn new(capacity: usize) -> Self {
        Self {
            slots: Vec::with_capacity(capacity + 1),
            capacity,
            cursor: 0,
            radius: f32::NEG_INFINITY,
            overflow: std::collections::BinaryHeap::new(),
        }
    }

    /// Empties the list and sets its capacity (reusing the allocation); the radius is off.
    pub fn reset(&mut self, capacity: usize) {
        self.slots.clear();
        self.slots.reserve(capacity + 1);
        self.capacity = capacity;
        self.cursor = 0;
        self.radius = f32::NEG_INFINITY;
        self.overflow.clear();
    }

    /// Range search: keeps every candidate at distance `≤ radius` (after [`CandidateList::reset`];
    /// `None` or NaN: off).
    pub fn set_radius(&mut self, radius: Option<f32>) {
        self.radius = radius.filter(|r| !r.is_nan()).unwrap_or(f32::NEG_INFINITY);
    }

    /// Whether the next candidate comes from the overflow heap: the sorted list has no
    /// unexpanded candidate left and the heap has one (a range search's second round).
    #[inline]
    pub fn in_overflow(&self) -> bool {
        self.cursor >= self.slots.len() && !self.overflow.is_empty()
    }

    /// Marks every candidate expanded and empties the overflow heap: the search ends (a range
    /// search's early stop).
    pub fn drop_unexpanded(&mut self) {
        for s in &mut self.slots[self.cursor..] {
            s.expanded = true;
        }
        self.cursor = self.slots.len();
        self.overflow.clear();
    }

    /// Candidates waiting in the overflow heap (range search).
    pub fn overflow_len(&self) -> usize {
        self.overflow.len()
    }

    /// Number of candidates held.
    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Offers a candidate (its id must not be in the list already); returns whether it entered.
    #[inline]
    pub fn insert(&mut self, id: u32, dist: f32) -> bool {
        let len = self.slots.len();
        if len == self.capacity {
            match self.slots.last() {
                Some(last) if (dist, id) >= (last.dist, last.id) => {
                    if dist <= self.radius {
                        self.overflow.push(Overflow(Neighbor { id, dist }));
                        return true;
                    }
                    return false;
                }
                None => return false,
                _ => {}
            }
        }
        let pos = self.slots.partition_point(|s| (s.dist, s.id) < (dist, id));
        if len == self.capacity {
            if let Some(s) = self.slots.pop() {
                if !s.expanded && s.dist <= self.radius {
                    self.overflow.push(Overflow(Neighbor {
                        id: s.id,
                        dist: s.dist,
                    }));
                }
            }
        }
        self.slots.insert(
            pos,
            Slot {
                id,
                dist,
                expanded: false,
            },
        );
        if pos < self.cursor {
            self.cursor = pos;
        }
        true
    }

    /// The distance below which an offered candidate enters (`+∞` while the list has room;
    /// with a radius, at least the radius).
    #[inline]
    pub fn admission(&self) -> f32 {
        if self.slots.len() < self.capacity {
            return f32::INFINITY;
        }
        self.slots
            .last()
            .map_or(f32::INFINITY, |l| l.dist)
            .max(self.radius)
    }

    /// Whether some candidate is not yet expanded (in the overflow heap too).
    #[inline]
    pub fn has_unexpanded(&self) -> bool {
        self.cursor < self.slots.len() || !self.overflow.is_empty()
    }

    /// The nearest unexpanded candidate of the sorted list (else the overflow heap's nearest),
    /// left unexpanded.
    #[inline]
    pub fn peek_unexpanded(&self) -> Option<Neighbor> {
        match self.slots.get(self.cursor) {
            Some(s) => Some(Neighbor {
                id: s.id,
                dist: s.dist,
            }),
            None => self.overflow.peek().map(|o| o.0),
        }
    }

    /// Marks the nearest unexpanded candidate of the sorted list expanded and returns it;
    /// when the sorted list has none, takes the overflow heap's nearest.
    #[inline]
    pub fn pop_unexpanded(&mut self) -> Option<Neighbor> {
        let Some(s) = self.slots.get_mut(self.cursor) else {
            return self.overflow.pop().map(|o| o.0);
        };
        s.expanded = true;
        let out = Neighbor {
            id: s.id,
            dist: s.dist,
        };
        while self.cursor < self.slots.len() && self.slots[self.cursor].expanded {
            self.cursor += 1;
        }
        Some(out)
    }

    /// Position of the nearest unexpanded candidate (the list length when every candidate is
    /// expanded): how many of the nearest candidates are already expanded, PipeANN's estimate of
    /// the vectors recalled so far.
    #[inline]
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Marks the candidate `id` expanded (wherever it is in the list); returns whether it was
    /// there and unexpanded.
    pub fn mark_expanded(&mut self, id: u32) -> bool {
        let Some(pos) = self.slots.iter().position(|s| s.id == id && !s.expanded) else {
            let before = self.overflow.len();
            self.overflow.retain(|o| o.0.id != id);
            return self.overflow.len() < before;
        };
        self.slots[pos].expanded = true;
        while self.cursor < self.slots.len() && self.slots[self.cursor].expanded {
            self.cursor += 1;
        }
        true
    }

    /// Whether a candidate offered earlier as `(id, dist)` (and accepted) is still in the list.
    /// Candidates only leave a full list, so this is a comparison with the farthest one.
    #[inline]
    pub fn still_holds(&self, id: u32, dist: f32) -> bool {
        if self.slots.len() < self.capacity || dist <= self.radius {
            return true;
        }
        match self.slots.last() {
            Some(last) => (dist, id) <= (last.dist, last.id),
            None => false,
        }
    }

    /// The candidates, nearest first.
    pub fn iter(&self) -> impl Iterator<Item = Neighbor> + '_ {
        self.slots.iter().map(|s| Neighbor {
            id: s.id,
            dist: s.dist,
        })
    }
}

/// A set of node ids `< n`: one bit per node (`n / 8` bytes, cache-resident for a million
/// nodes) plus the list of set bits, so clearing costs the number of visits, not `n`.
#[derive(Debug, Clone, Default)]
pub struct VisitedSet {
    bits: Vec<u64>,
    touched: Vec<u32>,
}

impl VisitedSet {
    /// An empty set for ids `< n`.
    pub fn new(n: usize) -> Self {
        Self {
            bits: vec![0; n.div_ceil(64)],
            touched: Vec::new(),
        }
    }

    /// Makes room for ids `< n` and clears the set.
    pub fn reset(&mut self, n: usize) {
        self.clear();
        if self.bits.len() < n.div_ceil(64) {
            self.bits.resize(n.div_ceil(64), 0);
        }
    }

    /// Inserts `id`; returns `true` when it was absent.
    #[inline]
    pub fn insert(&mut self, id: u32) -> bool {
        let (w, b) = ((id >> 6) as usize, id & 63);
        let word = &mut self.bits[w];
        let mask = 1u64 << b;
        if *word & mask != 0 {
            return false;
        }
        *word |= mask;
        self.touched.push(id);
        true
    }

    /// Whether `id` is in the set.
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        self.bits[(id >> 6) as usize] & (1u64 << (id & 63)) != 0
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.touched.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    /// Removes every id.
    pub fn clear(&mut self) {
        for &id in &self.touched {
            self.bits[(id >> 6) as usize] = 0;
        }
        self.touched.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn list_keeps_the_nearest_sorted(dists in proptest::collection::vec(0f32..100.0, 1..200), cap in 1usize..40) {
            let mut l = CandidateList::new(cap);
            for (i, d) in dists.iter().enumerate() {
                l.insert(i as u32, *d);
            }
            let mut want: Vec<(f32, u32)> = dists.iter().enumerate().map(|(i, d)| (*d, i as u32)).collect();
            want.sort_by(|a, b| a.partial_cmp(b).unwrap());
            want.truncate(cap);
            let got: Vec<(f32, u32)> = l.iter().map(|n| (n.dist, n.id)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn elastic_list_expands_everything_within_the_radius(
            dists in proptest::collection::vec(0f32..100.0, 1..300),
            cap in 1usize..40,
            radius in 0f32..60.0,
            pop_every in 1usize..7,
        ) {
            // Pops interleaved with insertions, as a search does: every candidate within the
            // radius is popped exactly once, whatever the list's capacity.
            let mut l = CandidateList::new(cap);
            l.set_radius(Some(radius));
            let mut popped = std::collections::HashSet::new();
            for (i, d) in dists.iter().enumerate() {
                l.insert(i as u32, *d);
                if i % pop_every == 0 {
                    if let Some(n) = l.pop_unexpanded() {
                        prop_assert!(popped.insert(n.id));
                    }
                }
            }
            while let Some(n) = l.pop_unexpanded() {
                prop_assert!(popped.insert(n.id));
            }
            prop_assert!(!l.has_unexpanded());
            for (i, d) in dists.iter().enumerate() {
                if *d <= radius {
                    prop_assert!(popped.contains(&(i as u32)), "{} at {} never expanded", i, d);
                }
            }
        }

        #[test]
        fn visited_set_matches_hash_set(ids in proptest::collection::vec(0u32..1000, 0..300)) {
            let mut v = VisitedSet::new(1000);
            let mut h = std::collections::HashSet::new();
            for &id in &ids {
                prop_assert_eq!(v.insert(id), h.insert(id));
            }
            prop_assert_eq!(v.len(), h.len());
            v.clear();
            prop_assert!(ids.iter().all(|&id| !v.contains(id)));
        }
    }

    #[test]
    fn cursor_follows_insertions() {
        let mut l = CandidateList::new(3);
        l.insert(1, 5.0);
        assert_eq!(l.pop_unexpanded().unwrap().id, 1);
        assert!(!l.has_unexpanded());
        l.insert(2, 1.0);
        l.insert(3, 9.0);
        assert_eq!(l.pop_unexpanded().unwrap().id, 2);
        assert_eq!(l.pop_unexpanded().unwrap().id, 3);
        assert!(l.pop_unexpanded().is_none());
        assert!(!l.insert(4, 10.0), "full list refuses a farther candidate");
    }

    #[test]
    fn cursor_mark_and_still_holds() {
        let mut l = CandidateList::new(3);
        l.insert(1, 1.0);
        l.insert(2, 2.0);
        l.insert(3, 3.0);
        assert_eq!(l.cursor(), 0);
        assert!(l.mark_expanded(2));
        assert!(!l.mark_expanded(2), "already expanded");
        assert!(!l.mark_expanded(9), "absent");
        assert_eq!(l.cursor(), 0);
        assert!(l.mark_expanded(1));
        assert_eq!(l.cursor(), 2, "cursor skips every expanded candidate");
        assert!(l.still_holds(3, 3.0));
        l.insert(4, 0.5);
        assert_eq!(l.cursor(), 0);
        assert!(!l.still_holds(3, 3.0), "evicted by a nearer candidate");
        assert!(l.still_holds(2, 2.0));
    }
}

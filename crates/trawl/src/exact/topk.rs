//! Per-query bounded candidate lists: a max-heap of the best `cap` candidates seen so far.
//!
//! Candidates are ordered by `(key, id)`, so among equal keys the smaller id wins and the result
//! does not depend on the order in which candidates arrive. Each candidate also carries its exact
//! distance: the fast f32 path orders by an approximate key and re-ranks by the exact distance at
//! the end; the exact path uses the exact distance as the key.

use std::cmp::Ordering;

/// One candidate neighbour.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cand {
    /// Ordering key (never NaN: see [`order_key`]).
    pub key: f32,
    /// Base id.
    pub id: u32,
    /// Exact distance as reported to the caller (may be NaN on overflowing input).
    pub dist: f32,
}

/// The key a distance is ordered by: NaN (only from overflowing input) orders like `+∞`, and
/// `−0` equals `+0` (so that `total_cmp` agrees with `<`).
#[inline]
pub(crate) fn order_key(d: f32) -> f32 {
    if d.is_nan() {
        f32::INFINITY
    } else {
        d + 0.0
    }
}

/// Total order on `(key, id)`; keys are never NaN.
#[inline]
fn before(a_key: f32, a_id: u32, b_key: f32, b_id: u32) -> bool {
    a_key < b_key || (a_key == b_key && a_id < b_id)
}

/// The `cap` smallest candidates by `(key, id)`.
#[derive(Debug, Clone)]
pub(crate) struct TopK {
    cap: usize,
    /// Max-heap by `(key, id)`: `heap[0]` is the worst kept candidate.
    heap: Vec<Cand>,
}

impl TopK {
    /// An empty list keeping at most `cap ≥ 1` candidates.
    pub fn new(cap: usize) -> Self {
        assert!(cap >= 1, "TopK capacity must be positive");
        Self {
            cap,
            heap: Vec::with_capacity(cap),
        }
    }

    /// Number of kept candidates.
    #[inline]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether `cap` candidates are kept.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.heap.len() == self.cap
    }

    /// The key a new candidate must beat (`+∞` while not full).
    #[inline]
    pub fn threshold(&self) -> f32 {
        if self.is_full() {
            self.heap[0].key
        } else {
            f32::INFINITY
        }
    }

    /// Whether a candidate with this `(key, id)` would be kept.
    #[inline]
    pub fn accepts(&self, key: f32, id: u32) -> bool {
        !self.is_full() || before(key, id, self.heap[0].key, self.heap[0].id)
    }

    /// Offers a candidate; `key` must not be NaN.
    #[inline]
    pub fn push(&mut self, key: f32, id: u32, dist: f32) {
        debug_assert!(!key.is_nan());
        if !self.accepts(key, id) {
            return;
        }
        let c = Cand { key, id, dist };
        if self.is_full() {
            self.heap[0] = c;
            self.sift_down(0);
        } else {
            self.heap.push(c);
            self.sift_up(self.heap.len() - 1);
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            let (c, p) = (self.heap[i], self.heap[parent]);
            if before(p.key, p.id, c.key, c.id) {
                self.heap.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut top = i;
            for child in [l, r] {
                if child < n {
                    let (c, t) = (self.heap[child], self.heap[top]);
                    if before(t.key, t.id, c.key, c.id) {
                        top = child;
                    }
                }
            }
            if top == i {
                break;
            }
            self.heap.swap(i, top);
            i = top;
        }
    }

    /// Mutable access to the kept candidates, in heap order. Callers may change `dist` only
    /// (the heap is ordered by `(key, id)`).
    pub fn dists_mut(&mut self) -> impl Iterator<Item = (u32, &mut f32)> {
        self.heap.iter_mut().map(|c| (c.id, &mut c.dist))
    }

    /// The kept candidates sorted by `(order_key(dist), id)` ascending.
    pub fn into_sorted_by_dist(self) -> Vec<Cand> {
        let mut v = self.heap;
        v.sort_unstable_by(cmp_dist);
        v
    }
}

/// Order of reported neighbours: exact distance (NaN last), then id.
#[inline]
pub(crate) fn cmp_dist(a: &Cand, b: &Cand) -> Ordering {
    order_key(a.dist)
        .total_cmp(&order_key(b.dist))
        .then(a.id.cmp(&b.id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keeps_the_smallest_by_key_then_id(
            keys in proptest::collection::vec(0u8..20, 1..200),
            cap in 1usize..40,
        ) {
            let mut t = TopK::new(cap);
            for (id, &k) in keys.iter().enumerate() {
                t.push(f32::from(k), id as u32, f32::from(k));
            }
            let mut all: Vec<(u8, u32)> =
                keys.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect();
            all.sort();
            all.truncate(cap);
            let got: Vec<(u8, u32)> = t
                .into_sorted_by_dist()
                .iter()
                .map(|c| (c.key as u8, c.id))
                .collect();
            prop_assert_eq!(got, all);
        }

        #[test]
        fn arrival_order_does_not_matter(
            keys in proptest::collection::vec(0u8..5, 1..100),
            cap in 1usize..20,
        ) {
            let mut fwd = TopK::new(cap);
            let mut rev = TopK::new(cap);
            for (id, &k) in keys.iter().enumerate() {
                fwd.push(f32::from(k), id as u32, 0.0);
            }
            for (id, &k) in keys.iter().enumerate().rev() {
                rev.push(f32::from(k), id as u32, 0.0);
            }
            let ids = |t: TopK| {
                let mut v: Vec<u32> = t.heap.iter().map(|c| c.id).collect();
                v.sort();
                v
            };
            prop_assert_eq!(ids(fwd), ids(rev));
        }
    }

    #[test]
    fn threshold_is_infinite_until_full() {
        let mut t = TopK::new(2);
        assert_eq!(t.threshold(), f32::INFINITY);
        t.push(3.0, 0, 3.0);
        assert_eq!(t.threshold(), f32::INFINITY);
        t.push(1.0, 1, 1.0);
        assert_eq!(t.threshold(), 3.0);
        t.push(2.0, 2, 2.0);
        assert_eq!(t.threshold(), 2.0);
        assert!(t.is_full());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn nan_distances_sort_last() {
        let mut t = TopK::new(3);
        t.push(order_key(f32::NAN), 0, f32::NAN);
        t.push(5.0, 1, 5.0);
        t.push(f32::INFINITY, 2, f32::INFINITY);
        let ids: Vec<u32> = t.into_sorted_by_dist().iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![1, 0, 2]);
    }

    #[test]
    fn negative_zero_ties_with_zero() {
        let mut t = TopK::new(2);
        for (id, d) in [(0, 0.0f32), (1, -0.0), (2, -0.0)] {
            t.push(order_key(d), id, d);
        }
        let ids: Vec<u32> = t.into_sorted_by_dist().iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![0, 1]);
    }
}

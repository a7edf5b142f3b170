//! The exact top-`K` of a re-rank.

/// The `K` nearest `(distance, id)` pairs offered so far, nearest first (ties by id), each
/// stamped with the batch that brought it, so a batch's effect on the top-`K` is known without
/// a copy of the previous set: the entries stamped with the current batch are exactly those
/// not in the top-`K` before it (`|Sₙ \ Sₙ₋₁|`), because the set only improves.
#[derive(Debug, Clone, Default)]
pub struct TopK {
    k: usize,
    batch: u32,
    /// `(distance, id, batch)`, sorted by `(distance, id)`.
    items: Vec<(f32, u32, u32)>,
}

impl TopK {
    /// An empty top-`k`.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            batch: 0,
            items: Vec::with_capacity(k + 1),
        }
    }

    /// Empties it for a new query of `k` results.
    pub fn reset(&mut self, k: usize) {
        self.k = k;
        self.batch = 0;
        self.items.clear();
    }

    /// Offers `id` at exact distance `d`; returns whether it entered. A pair already in is not
    /// entered again (a page scored twice offers its vectors twice).
    #[inline]
    pub fn offer(&mut self, d: f32, id: u32) -> bool {
        let less = |a: &(f32, u32, u32)| a.0.total_cmp(&d).then(a.1.cmp(&id)).is_lt();
        let at = self.items.partition_point(less);
        if at >= self.k || self.items.get(at).is_some_and(|t| t.0 == d && t.1 == id) {
            return false;
        }
        if self.items.len() == self.k {
            self.items.pop();
        }
        self.items.insert(at, (d, id, self.batch));
        true
    }

    /// Starts the next batch: entries offered from now on carry its stamp.
    #[inline]
    pub fn next_batch(&mut self) {
        self.batch += 1;
    }

    /// Entries the current batch brought (those not in the top-`K` when it started).
    pub fn brought(&self) -> usize {
        self.items.iter().filter(|t| t.2 == self.batch).count()
    }

    /// Whether `K` entries are in.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.items.len() >= self.k
    }

    /// The `K`-th distance, once `K` entries are in.
    #[inline]
    pub fn kth(&self) -> Option<f32> {
        if self.is_full() {
            self.items.last().map(|t| t.0)
        } else {
            None
        }
    }

    /// Entries in.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none is in.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The `(distance, id)` pairs, nearest first.
    pub fn hits(&self) -> impl Iterator<Item = (f32, u32)> + '_ {
        self.items.iter().map(|t| (t.0, t.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_k_nearest_in_order_and_refuses_repeats() {
        let mut t = TopK::new(3);
        assert!(t.offer(5.0, 1));
        assert!(t.offer(1.0, 2));
        assert!(!t.offer(1.0, 2), "a repeat");
        assert!(t.offer(3.0, 3));
        assert!(t.is_full());
        assert!(!t.offer(9.0, 4), "beyond the k-th");
        assert!(t.offer(3.0, 0), "a tie enters by id");
        assert_eq!(
            t.hits().collect::<Vec<_>>(),
            vec![(1.0, 2), (3.0, 0), (3.0, 3)]
        );
        assert_eq!(t.kth(), Some(3.0));
    }

    #[test]
    fn brought_counts_the_entries_new_to_the_set() {
        let mut t = TopK::new(2);
        t.offer(2.0, 1);
        t.offer(4.0, 2);
        assert_eq!(t.brought(), 2);
        t.next_batch();
        assert_eq!(t.brought(), 0);
        t.offer(3.0, 3); // evicts 2
        t.offer(1.0, 4); // evicts 3 (brought this batch, gone again)
        assert_eq!(t.hits().collect::<Vec<_>>(), vec![(1.0, 4), (2.0, 1)]);
        assert_eq!(t.brought(), 1, "only 4 is new to the set");
        t.next_batch();
        t.offer(5.0, 5);
        assert_eq!(t.brought(), 0);
    }
}

//! The pages a query's re-rank has read.

use std::collections::HashMap;

/// Copies of the reads a query's re-rank has landed, by first page, each `unit` bytes (one
/// vector read): a vector asked for later on a page already read is decoded from the copy,
/// at no read.
#[derive(Debug, Default)]
pub struct PageBuffer {
    unit: usize,
    at: HashMap<u64, usize>,
    arena: Vec<u8>,
}

impl PageBuffer {
    /// Empties it for a query whose reads are `unit` bytes each.
    pub fn reset(&mut self, unit: usize) {
        self.unit = unit;
        self.at.clear();
        self.arena.clear();
    }

    /// Keeps a copy of the read from `page` (its first `unit` bytes, zero-padded).
    pub fn keep(&mut self, page: u64, bytes: &[u8]) {
        let at = self.arena.len();
        self.arena
            .extend_from_slice(&bytes[..self.unit.min(bytes.len())]);
        self.arena.resize(at + self.unit, 0);
        self.at.insert(page, at);
    }

    /// The copy of the read from `page`, if kept.
    #[inline]
    pub fn get(&self, page: u64) -> Option<&[u8]> {
        self.at
            .get(&page)
            .map(|&at| &self.arena[at..at + self.unit])
    }

    /// Whether the read from `page` is kept.
    #[inline]
    pub fn contains(&self, page: u64) -> bool {
        self.at.contains_key(&page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_each_read_padded_to_its_unit() {
        let mut b = PageBuffer::default();
        b.reset(4);
        b.keep(7, &[1, 2]);
        b.keep(9, &[5, 6, 7, 8, 9]);
        assert_eq!(b.get(7), Some(&[1, 2, 0, 0][..]));
        assert_eq!(b.get(9), Some(&[5, 6, 7, 8][..]));
        assert!(!b.contains(8));
        b.reset(4);
        assert_eq!(b.get(7), None);
    }
}

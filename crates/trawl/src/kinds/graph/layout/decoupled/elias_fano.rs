//! Elias-Fano coding of one sorted list of node ids (DecoupleVS §3.2): each id of a list of `n`
//! ids below `universe` is split into `l = ⌈log2(universe / n)⌉` low bits, stored verbatim one
//! after the other, and a high part `id >> l`, stored in unary as a bitmap where the `i`-th set
//! bit sits at position `(id_i >> l) + i`. The size depends only on `n` and `universe`
//! ([`encoded_bytes`]) and never exceeds `2n + n·⌈log2(universe / n)⌉` bits ([`max_bits`]), the
//! bound that sizes fixed cache entries.
//!
//! Bits are packed little-endian (bit `k` of the stream is bit `k % 8` of byte `k / 8`): first
//! the low bits, then the high bitmap. Decoding checks everything it reads — length, the count
//! of set bits, order, range — so damaged bytes give an [`EfError`], never a panic or a list
//! that breaks the invariants.

use thiserror::Error;

/// Why an Elias-Fano list could not be encoded or decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EfError {
    /// The ids given to the encoder are not in non-decreasing order.
    #[error("ids are not sorted: {prev} before {next}")]
    Unsorted {
        /// The earlier id.
        prev: u32,
        /// The later, smaller id.
        next: u32,
    },
    /// An id is not below the universe.
    #[error("id {id} is not below the universe {universe}")]
    OutOfRange {
        /// The id.
        id: u32,
        /// The universe.
        universe: u32,
    },
    /// Fewer bytes than the list needs.
    #[error("{need} bytes needed for {n} ids, {have} given")]
    Truncated {
        /// Ids in the list.
        n: usize,
        /// Bytes the list occupies.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The high bitmap does not hold the expected ids (damaged bytes).
    #[error("corrupt Elias-Fano list: {0}")]
    Corrupt(&'static str),
}

impl EfError {
    /// An encoder given unsorted or out-of-range ids is a bug of its caller
    /// ([`ErrorKind::Internal`](crate::ErrorKind::Internal)); bytes that decode to no list are
    /// [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Unsorted { .. } | Self::OutOfRange { .. } => crate::ErrorKind::Internal,
            Self::Truncated { .. } | Self::Corrupt(_) => crate::ErrorKind::Corrupt,
        }
    }
}

/// Low bits per id for `n` ids below `universe`: `⌈log2(universe / n)⌉`, 0 when `n ≥ universe`.
pub fn low_bits(n: usize, universe: u32) -> u32 {
    if n == 0 || universe as usize <= n {
        return 0;
    }
    let ratio = (universe as u64).div_ceil(n as u64);
    // ⌈log2(ratio)⌉ for ratio ≥ 2.
    64 - (ratio - 1).leading_zeros()
}

/// Length in bits of the high bitmap: one set bit per id plus one clear bit per bucket.
fn high_len(n: usize, universe: u32, l: u32) -> usize {
    if n == 0 {
        return 0;
    }
    // Saturating: no list this long fits in memory, and a decoder given an absurd `n` then
    // reports it truncated instead of overflowing.
    n.saturating_add(((u64::from(universe.max(1)) - 1) >> l) as usize)
        .saturating_add(1)
}

/// Bits of an encoded list of `n` ids below `universe`.
pub fn encoded_bits(n: usize, universe: u32) -> usize {
    let l = low_bits(n, universe);
    n.saturating_mul(l as usize)
        .saturating_add(high_len(n, universe, l))
}

/// Bytes of an encoded list of `n` ids below `universe` (the same for every such list).
pub fn encoded_bytes(n: usize, universe: u32) -> usize {
    encoded_bits(n, universe).div_ceil(8)
}

/// The worst-case bound `2n + n·⌈log2(universe / n)⌉` bits (DecoupleVS §3.4, from Ottaviano and
/// Venturini) that [`encoded_bits`] never exceeds.
pub fn max_bits(n: usize, universe: u32) -> usize {
    2 * n + n * low_bits(n, universe) as usize
}

/// Appends the encoding of `ids` (non-decreasing, each below `universe`) to `out`:
/// [`encoded_bytes`]`(ids.len(), universe)` bytes.
pub fn encode(ids: &[u32], universe: u32, out: &mut Vec<u8>) -> Result<(), EfError> {
    for w in ids.windows(2) {
        if w[1] < w[0] {
            return Err(EfError::Unsorted {
                prev: w[0],
                next: w[1],
            });
        }
    }
    if let Some(&id) = ids.iter().find(|&&id| id >= universe) {
        return Err(EfError::OutOfRange { id, universe });
    }
    let n = ids.len();
    let l = low_bits(n, universe);
    let start = out.len();
    out.resize(start + encoded_bytes(n, universe), 0);
    let buf = &mut out[start..];
    let mut pos = 0usize;
    if l > 0 {
        let mask = (1u64 << l) - 1;
        for &id in ids {
            put_bits(buf, pos, u64::from(id) & mask, l);
            pos += l as usize;
        }
    }
    for (i, &id) in ids.iter().enumerate() {
        let at = pos + (u64::from(id) >> l) as usize + i;
        buf[at / 8] |= 1 << (at % 8);
    }
    Ok(())
}

/// Decodes a list of `n` ids below `universe` from the front of `bytes` into `out` (cleared
/// first); returns the bytes it occupied.
pub fn decode(bytes: &[u8], n: usize, universe: u32, out: &mut Vec<u32>) -> Result<usize, EfError> {
    out.clear();
    let need = encoded_bytes(n, universe);
    if bytes.len() < need {
        return Err(EfError::Truncated {
            n,
            need,
            have: bytes.len(),
        });
    }
    if n == 0 {
        return Ok(0);
    }
    let l = low_bits(n, universe);
    let high_start = n * l as usize;
    let high_end = high_start + high_len(n, universe, l);
    // Walk the high bitmap byte by byte, taking the set bits in order.
    let mut i = 0usize;
    let mut prev = 0u32;
    let mut byte_at = high_start / 8;
    while i < n {
        if byte_at * 8 >= high_end {
            return Err(EfError::Corrupt("fewer set bits than ids"));
        }
        let mut b = bytes[byte_at];
        if byte_at == high_start / 8 {
            b &= 0xffu8 << (high_start % 8);
        }
        while b != 0 && i < n {
            let bit = byte_at * 8 + b.trailing_zeros() as usize;
            b &= b - 1;
            if bit >= high_end {
                return Err(EfError::Corrupt("set bit past the bitmap"));
            }
            let high = (bit - high_start - i) as u64;
            let low = if l > 0 {
                get_bits(bytes, i * l as usize, l)
            } else {
                0
            };
            let id = (high << l) | low;
            if id >= u64::from(universe) {
                return Err(EfError::Corrupt("id past the universe"));
            }
            let id = id as u32;
            if id < prev {
                return Err(EfError::Corrupt("ids out of order"));
            }
            prev = id;
            out.push(id);
            i += 1;
        }
        if i == n && b != 0 {
            return Err(EfError::Corrupt("more set bits than ids"));
        }
        byte_at += 1;
    }
    // No set bit may follow the last id, in the bitmap or in the padding of its last byte.
    if bytes[byte_at..need].iter().any(|&b| b != 0) {
        return Err(EfError::Corrupt("more set bits than ids"));
    }
    Ok(need)
}

fn put_bits(buf: &mut [u8], pos: usize, v: u64, bits: u32) {
    for k in 0..bits as usize {
        if v >> k & 1 == 1 {
            let at = pos + k;
            buf[at / 8] |= 1 << (at % 8);
        }
    }
}

#[inline]
fn get_bits(buf: &[u8], pos: usize, bits: u32) -> u64 {
    // Fast path: one unaligned little-endian load covers the field (bits ≤ 32, shift ≤ 7).
    let at = pos / 8;
    if let Some(w) = buf.get(at..at + 8) {
        let word = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        return (word >> (pos % 8)) & ((1u64 << bits) - 1);
    }
    let mut v = 0u64;
    for k in 0..bits as usize {
        let at = pos + k;
        v |= u64::from(buf[at / 8] >> (at % 8) & 1) << k;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(ids: &[u32], universe: u32) {
        let mut buf = vec![0xAB]; // encoding appends
        encode(ids, universe, &mut buf).unwrap();
        assert_eq!(buf.len() - 1, encoded_bytes(ids.len(), universe));
        assert!(encoded_bits(ids.len(), universe) <= max_bits(ids.len(), universe));
        let mut out = Vec::new();
        let used = decode(&buf[1..], ids.len(), universe, &mut out).unwrap();
        assert_eq!(used, buf.len() - 1);
        assert_eq!(out, ids);
    }

    #[test]
    fn edge_cases_round_trip() {
        round_trip(&[], 1);
        round_trip(&[], 1_000);
        round_trip(&[0], 1);
        round_trip(&[u32::MAX - 1], u32::MAX);
        round_trip(&[0, u32::MAX - 1], u32::MAX);
        round_trip(&[7; 64], 8);
        round_trip(&[5; 3], 1_000_000);
        round_trip(&(0..64).collect::<Vec<_>>(), 64);
        round_trip(&(0..64).map(|i| i * 1000).collect::<Vec<_>>(), 64_000);
        round_trip(&[u32::MAX - 3, u32::MAX - 2, u32::MAX - 1], u32::MAX);
    }

    #[test]
    fn low_bits_is_the_ceiling_of_log2() {
        assert_eq!(low_bits(0, 100), 0);
        assert_eq!(low_bits(10, 10), 0);
        assert_eq!(low_bits(10, 20), 1);
        assert_eq!(low_bits(10, 21), 2);
        assert_eq!(low_bits(64, 1_000_000), 14); // 15625 → 14
        assert_eq!(low_bits(1, u32::MAX), 32);
    }

    #[test]
    fn bad_input_is_refused() {
        let mut buf = Vec::new();
        assert!(matches!(
            encode(&[3, 2], 10, &mut buf),
            Err(EfError::Unsorted { prev: 3, next: 2 })
        ));
        assert!(matches!(
            encode(&[3, 10], 10, &mut buf),
            Err(EfError::OutOfRange { id: 10, .. })
        ));
        encode(&[1, 5, 9], 10, &mut buf).unwrap();
        let mut out = Vec::new();
        let e = decode(&buf[..buf.len() - 1], 3, 10, &mut out).unwrap_err();
        assert!(matches!(e, EfError::Truncated { .. }), "{e}");
        assert_eq!(e.kind(), crate::ErrorKind::Corrupt);
        assert_eq!(
            encode(&[3, 2], 10, &mut buf).unwrap_err().kind(),
            crate::ErrorKind::Internal
        );
        buf.clear();
        encode(&[1, 5, 9], 10, &mut buf).unwrap();
        // An extra set bit in the high bitmap, and a missing one.
        let l = low_bits(3, 10) as usize;
        let hs = 3 * l;
        let hl = high_len(3, 10, l as u32);
        let mut extra = buf.clone();
        let mut missing = buf.clone();
        let ones: Vec<usize> = (hs..hs + hl)
            .filter(|&b| buf[b / 8] >> (b % 8) & 1 == 1)
            .collect();
        let zero = (hs..hs + hl)
            .find(|&b| buf[b / 8] >> (b % 8) & 1 == 0)
            .unwrap();
        extra[zero / 8] |= 1 << (zero % 8);
        missing[ones[2] / 8] &= !(1 << (ones[2] % 8));
        assert!(decode(&extra, 3, 10, &mut out).is_err());
        assert!(decode(&missing, 3, 10, &mut out).is_err());
    }

    proptest! {
        #[test]
        fn random_sorted_lists_round_trip(
            mut ids in proptest::collection::vec(any::<u32>(), 0..300),
            slack in 1u32..1000,
        ) {
            ids.sort_unstable();
            let max = ids.last().copied().unwrap_or(0);
            let universe = max.saturating_add(slack);
            let ids: Vec<u32> = ids.into_iter().filter(|&i| i < universe).collect();
            round_trip(&ids, universe);
        }

        #[test]
        fn distinct_neighbour_lists_meet_the_bound(
            n in 1usize..129,
            universe in 129u32..2_000_000,
            seed in any::<u64>(),
        ) {
            use rand::{seq::index::sample, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut ids: Vec<u32> = sample(&mut rng, universe as usize, n)
                .into_iter()
                .map(|i| i as u32)
                .collect();
            ids.sort_unstable();
            round_trip(&ids, universe);
            prop_assert!(encoded_bits(n, universe) <= max_bits(n, universe));
            // Smaller than the 32-bit ids it replaces once the universe is far below 2^32.
            prop_assert!(encoded_bytes(n, universe) < 4 * n + 4);
        }

        #[test]
        fn any_bytes_decode_to_an_error_or_a_valid_list(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            n in 0usize..64,
            universe in 1u32..100_000,
        ) {
            let mut out = Vec::new();
            if decode(&bytes, n, universe, &mut out).is_ok() {
                prop_assert_eq!(out.len(), n);
                prop_assert!(out.windows(2).all(|w| w[0] <= w[1]));
                prop_assert!(out.iter().all(|&i| i < universe));
            }
        }
    }
}

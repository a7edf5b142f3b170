//! Byte-wise canonical Huffman coding with one code table per byte *lane* (DecoupleVS §3.2–3.3,
//! with one change): a vector's byte `i` is coded with table `i mod lanes`, where `lanes` is
//! the element size (4 for `f32`, 1 for `u8` / `i8`).
//!
//! The paper builds one table per segment over all bytes. For `f32` vectors that mixes the
//! sign-and-exponent bytes (2–3 bits of entropy) with mantissa bytes (8 bits), and one table
//! over the mixture costs ~0.9 of the raw size; one table per lane reaches the per-position
//! entropy (~0.83 on GloVe and on 384-d embeddings) for 3 more tables of 256 code lengths.
//!
//! Codes are at most [`MAX_CODE_LEN`] bits, so decoding is one table lookup per byte: peek
//! `MAX_CODE_LEN` bits, read the symbol and its length. Bits are packed little-endian (bit `k`
//! of a stream is bit `k % 8` of byte `k / 8`) and a code's first bit is its most significant
//! (canonical codes are bit-reversed for the LSB-first stream). Every vector is coded on its own
//! and starts on a byte boundary. A table is stored as its 256 code lengths; [`CodeTable::from_lengths`]
//! checks them (the Kraft sum), and decoding checks every code it meets, so damaged bytes give a
//! [`HuffError`], never a panic.

use thiserror::Error;

/// Longest code in bits.
pub const MAX_CODE_LEN: u32 = 12;
const TABLE_SIZE: usize = 1 << MAX_CODE_LEN;

/// Why a table could not be built or a stream decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HuffError {
    /// Stored code lengths that no prefix code has (Kraft sum above 1, a length above the
    /// limit).
    #[error("invalid Huffman code lengths: {0}")]
    BadLengths(&'static str),
    /// The encoder met a byte its table has no code for.
    #[error("byte {byte:#04x} in lane {lane} has no code")]
    NoCode {
        /// The byte.
        byte: u8,
        /// Its lane.
        lane: usize,
    },
    /// The stream holds a bit pattern that is no code, ends early, or has bits left over.
    #[error("corrupt Huffman stream: {0}")]
    Corrupt(&'static str),
}

impl HuffError {
    /// A byte without a code is a bug of the encoder's caller
    /// ([`ErrorKind::Internal`](crate::ErrorKind::Internal)); stored lengths or a stream that
    /// no code explains are [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::NoCode { .. } => crate::ErrorKind::Internal,
            Self::BadLengths(_) | Self::Corrupt(_) => crate::ErrorKind::Corrupt,
        }
    }
}

/// One lane's code: lengths, codes (bit-reversed for the LSB-first stream) and the decoding
/// table (`symbol | length << 8` per `MAX_CODE_LEN`-bit window; length 0 = no code).
#[derive(Clone)]
pub struct CodeTable {
    /// No code at all: the lane is stored raw.
    raw: bool,
    lens: [u8; 256],
    codes: [u16; 256],
    decode: Box<[u16; TABLE_SIZE]>,
}

impl std::fmt::Debug for CodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeTable")
            .field("used", &self.lens.iter().filter(|&&l| l > 0).count())
            .finish()
    }
}

/// Code lengths of at most [`MAX_CODE_LEN`] bits for symbol `counts` (0 for unused symbols; a
/// lone symbol gets length 1). Huffman's algorithm, with the counts flattened and the code
/// rebuilt while it is too deep.
pub fn lengths_from_counts(counts: &[u64; 256]) -> [u8; 256] {
    let mut c: Vec<u64> = counts.to_vec();
    loop {
        let lens = huffman_lengths(&c);
        if lens.iter().all(|&l| u32::from(l) <= MAX_CODE_LEN) {
            return lens;
        }
        for x in c.iter_mut().filter(|x| **x > 0) {
            *x = (*x >> 1) | 1;
        }
    }
}

fn huffman_lengths(counts: &[u64]) -> [u8; 256] {
    let mut lens = [0u8; 256];
    let used: Vec<usize> = (0..256).filter(|&s| counts[s] > 0).collect();
    match used.len() {
        0 => return lens,
        1 => {
            lens[used[0]] = 1;
            return lens;
        }
        _ => {}
    }
    // Nodes: leaves 0..k, internal nodes after; parent links give depths.
    let k = used.len();
    let mut weight: Vec<u64> = used.iter().map(|&s| counts[s]).collect();
    let mut parent = vec![usize::MAX; 2 * k - 1];
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        (0..k).map(|i| std::cmp::Reverse((weight[i], i))).collect();
    while heap.len() > 1 {
        let std::cmp::Reverse((wa, a)) = heap.pop().unwrap_or(std::cmp::Reverse((0, 0)));
        let std::cmp::Reverse((wb, b)) = heap.pop().unwrap_or(std::cmp::Reverse((0, 0)));
        let node = weight.len();
        weight.push(wa + wb);
        parent[a] = node;
        parent[b] = node;
        heap.push(std::cmp::Reverse((wa + wb, node)));
    }
    for (i, &s) in used.iter().enumerate() {
        let mut depth = 0u32;
        let mut at = i;
        while parent[at] != usize::MAX {
            at = parent[at];
            depth += 1;
        }
        lens[s] = depth.min(255) as u8;
    }
    lens
}

impl CodeTable {
    /// The canonical code of `lens` (checked: every length ≤ [`MAX_CODE_LEN`], Kraft sum ≤ 1).
    pub fn from_lengths(lens: &[u8; 256]) -> Result<Self, HuffError> {
        let mut kraft = 0u64;
        for &l in lens {
            if u32::from(l) > MAX_CODE_LEN {
                return Err(HuffError::BadLengths("a code is longer than the limit"));
            }
            if l > 0 {
                kraft += 1 << (MAX_CODE_LEN - u32::from(l));
            }
        }
        if kraft > TABLE_SIZE as u64 {
            return Err(HuffError::BadLengths("Kraft sum above 1"));
        }
        // Canonical assignment: by length, then symbol.
        let mut codes = [0u16; 256];
        let mut decode = Box::new([0u16; TABLE_SIZE]);
        let mut next = 0u32;
        let mut prev_len = 0u32;
        for len in 1..=MAX_CODE_LEN {
            for s in 0..256 {
                if u32::from(lens[s]) != len {
                    continue;
                }
                next <<= len - prev_len;
                prev_len = len;
                let rev = reverse_bits(next, len);
                codes[s] = rev as u16;
                let entry = s as u16 | ((len as u16) << 8);
                let mut w = rev as usize;
                while w < TABLE_SIZE {
                    decode[w] = entry;
                    w += 1 << len;
                }
                next += 1;
            }
        }
        Ok(Self {
            raw: lens.iter().all(|&l| l == 0),
            lens: *lens,
            codes,
            decode,
        })
    }

    /// The code lengths (what a file stores).
    pub fn lengths(&self) -> &[u8; 256] {
        &self.lens
    }

    /// Whether the table has no code at all: its lane is stored raw ([`encode_split`]).
    #[inline]
    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// Bits this table spends on `byte` (0 = no code).
    #[inline]
    pub fn len_of(&self, byte: u8) -> u32 {
        u32::from(self.lens[byte as usize])
    }
}

fn reverse_bits(code: u32, len: u32) -> u32 {
    code.reverse_bits() >> (32 - len)
}

/// Bits that coding `bytes` with `lanes` takes (`None` when a byte has no code).
pub fn coded_bits(lanes: &[CodeTable], bytes: &[u8]) -> Option<usize> {
    let k = lanes.len();
    if k == 0 {
        return bytes.is_empty().then_some(0);
    }
    let mut bits = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        let l = lanes[i % k].len_of(b);
        if l == 0 {
            return None;
        }
        bits += l as usize;
    }
    Some(bits)
}

/// Tops the bit buffer `acc` (`nbits` valid bits) up to at least 56 bits from `bits[pos..]`,
/// with one unaligned load when 8 bytes remain, else byte by byte (fewer bits at the end).
#[inline(always)]
fn refill(bits: &[u8], pos: &mut usize, acc: &mut u64, nbits: &mut u32) {
    if let Some(w) = bits.get(*pos..*pos + 8) {
        let word = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let take = (63 - *nbits) / 8;
        *acc |= (word & ((1u64 << (take * 8)) - 1)) << *nbits;
        *pos += take as usize;
        *nbits += take * 8;
    } else {
        while *nbits <= 56 && *pos < bits.len() {
            *acc |= u64::from(bits[*pos]) << *nbits;
            *pos += 1;
            *nbits += 8;
        }
    }
}

/// Decodes `out.len()` bytes from `bits`, which must be exactly their code plus zero padding to
/// a whole byte.
pub fn decode(lanes: &[CodeTable], bits: &[u8], out: &mut [u8]) -> Result<(), HuffError> {
    let k = lanes.len();
    if k == 0 {
        return Err(HuffError::BadLengths("no code tables"));
    }
    let mut acc = 0u64;
    let mut nbits = 0u32;
    let mut pos = 0usize;
    let mut done = 0usize;
    // Fast path: refill to ≥ 56 bits with one load, then decode a whole group of `k ≤ 4`
    // bytes (≤ 48 bits) without further checks, while 8 input bytes remain.
    if k <= 4 {
        while done + k <= out.len() && pos + 8 <= bits.len() {
            refill(bits, &mut pos, &mut acc, &mut nbits);
            for (t, o) in lanes.iter().zip(out[done..done + k].iter_mut()) {
                let entry = t.decode[(acc & (TABLE_SIZE as u64 - 1)) as usize];
                let len = u32::from(entry >> 8);
                if len == 0 {
                    return Err(HuffError::Corrupt("a bit pattern that is no code"));
                }
                *o = entry as u8;
                acc >>= len;
                nbits -= len;
            }
            done += k;
        }
    }
    // The tail, one byte at a time with every check.
    let mut lane = 0usize;
    for o in out[done..].iter_mut() {
        if nbits < MAX_CODE_LEN {
            refill(bits, &mut pos, &mut acc, &mut nbits);
        }
        let entry = lanes[lane].decode[(acc & (TABLE_SIZE as u64 - 1)) as usize];
        let len = u32::from(entry >> 8);
        if len == 0 {
            return Err(HuffError::Corrupt("a bit pattern that is no code"));
        }
        if len > nbits {
            return Err(HuffError::Corrupt("the stream ends inside a code"));
        }
        *o = entry as u8;
        acc >>= len;
        nbits -= len;
        lane += 1;
        if lane == k {
            lane = 0;
        }
    }
    // What is left must be the zero padding of the last byte.
    if pos != bits.len() || nbits >= 8 || acc != 0 {
        return Err(HuffError::Corrupt("bits left over after the last byte"));
    }
    Ok(())
}

/// Code lengths for a lane with byte `counts`, or all zero — the lane is stored raw — when
/// coding would save less than 1% of its bytes (the mantissa bytes of floats: coding them costs a
/// table lookup per byte and saves nothing).
pub fn lane_lengths(counts: &[u64; 256]) -> [u8; 256] {
    let lens = lengths_from_counts(counts);
    let total: u64 = counts.iter().sum();
    let bits: u64 = counts
        .iter()
        .zip(lens.iter())
        .map(|(&c, &l)| c * u64::from(l))
        .sum();
    if total == 0 || bits * 100 >= total * 8 * 99 {
        [0; 256]
    } else {
        lens
    }
}

/// Codes `bytes` (byte `i` with `lanes[i % lanes.len()]`) onto `out`: first the bytes of the
/// lanes whose table [`CodeTable::is_raw`], verbatim and in position order, then the code of
/// the other bytes (position order, each with its lane's table), padded to a whole byte with
/// zero bits. Without raw lanes the output is exactly what [`decode`] reads.
pub fn encode_split(lanes: &[CodeTable], bytes: &[u8], out: &mut Vec<u8>) -> Result<(), HuffError> {
    let k = lanes.len();
    for chunk in bytes.chunks(k) {
        for (&b, t) in chunk.iter().zip(lanes) {
            if t.is_raw() {
                out.push(b);
            }
        }
    }
    if lanes.iter().all(CodeTable::is_raw) {
        return Ok(());
    }
    let mut acc = 0u64;
    let mut nbits = 0u32;
    for (i, &b) in bytes.iter().enumerate() {
        let t = &lanes[i % k];
        if t.is_raw() {
            continue;
        }
        let len = t.len_of(b);
        if len == 0 {
            return Err(HuffError::NoCode {
                byte: b,
                lane: i % k,
            });
        }
        acc |= u64::from(t.codes[b as usize]) << nbits;
        nbits += len;
        while nbits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            nbits -= 8;
        }
    }
    if nbits > 0 {
        out.push(acc as u8);
    }
    Ok(())
}

/// Decodes what [`encode_split`] wrote into `out` (its length is the vector's).
pub fn decode_split(lanes: &[CodeTable], bits: &[u8], out: &mut [u8]) -> Result<(), HuffError> {
    let k = lanes.len();
    let mut raw_lanes = [false; 8];
    if k > raw_lanes.len() {
        return Err(HuffError::BadLengths("more than 8 lanes"));
    }
    if k == 0 {
        return Err(HuffError::BadLengths("no code tables"));
    }
    for (l, t) in lanes.iter().enumerate() {
        raw_lanes[l] = t.is_raw();
    }
    let raw_per_group = raw_lanes[..k].iter().filter(|&&r| r).count();
    let raw_count =
        out.len() / k * raw_per_group + (0..out.len() % k).filter(|&l| raw_lanes[l]).count();
    if bits.len() < raw_count {
        return Err(HuffError::Corrupt("shorter than the raw lanes"));
    }
    let (raw, code) = bits.split_at(raw_count);
    let mut coded = [0usize; 8];
    let mut c = 0;
    for l in 0..k {
        if !raw_lanes[l] {
            coded[c] = l;
            c += 1;
        }
    }
    let coded = &coded[..c];
    if c == k {
        return decode(lanes, code, out);
    }
    // Scatter the raw bytes to their lanes: `raw_idx` lists the raw lanes of a group.
    let mut raw_idx = [0usize; 8];
    let mut nr = 0;
    for (l, &is_raw) in raw_lanes[..k].iter().enumerate() {
        if is_raw {
            raw_idx[nr] = l;
            nr += 1;
        }
    }
    let raw_idx = &raw_idx[..nr];
    for (chunk, src) in out.chunks_mut(k).zip(raw.chunks(nr.max(1))) {
        for (&l, &b) in raw_idx.iter().zip(src) {
            if let Some(o) = chunk.get_mut(l) {
                *o = b;
            }
        }
    }
    if coded.is_empty() {
        return if code.is_empty() {
            Ok(())
        } else {
            Err(HuffError::Corrupt("bits left over after the raw lanes"))
        };
    }
    // The coded lanes' symbols, in position order.
    let groups = out.len() / k;
    let mut acc = 0u64;
    let mut nbits = 0u32;
    let mut pos = 0usize;
    for g in 0..=groups {
        for &l in coded {
            let at = g * k + l;
            if at >= out.len() {
                break;
            }
            if nbits < MAX_CODE_LEN {
                refill(code, &mut pos, &mut acc, &mut nbits);
            }
            let entry = lanes[l].decode[(acc & (TABLE_SIZE as u64 - 1)) as usize];
            let len = u32::from(entry >> 8);
            if len == 0 {
                return Err(HuffError::Corrupt("a bit pattern that is no code"));
            }
            if len > nbits {
                return Err(HuffError::Corrupt("the stream ends inside a code"));
            }
            out[at] = entry as u8;
            acc >>= len;
            nbits -= len;
        }
    }
    if pos != code.len() || nbits >= 8 || acc != 0 {
        return Err(HuffError::Corrupt("bits left over after the last byte"));
    }
    Ok(())
}

/// Shannon entropy in bits of the bytes counted in `counts` (times their number): a lower bound
/// of their Huffman size, used to choose between raw and XOR-delta coding.
pub fn entropy_bits(counts: &[u64; 256]) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let t = total as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let c = c as f64;
            -c * (c / t).log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tables_for(data: &[u8], lanes: usize) -> Vec<CodeTable> {
        (0..lanes)
            .map(|l| {
                let mut c = [0u64; 256];
                for (i, &b) in data.iter().enumerate() {
                    if i % lanes == l {
                        c[b as usize] += 1;
                    }
                }
                CodeTable::from_lengths(&lengths_from_counts(&c)).unwrap()
            })
            .collect()
    }

    fn round_trip(data: &[u8], lanes: usize) {
        let t = tables_for(data, lanes);
        let mut enc = Vec::new();
        encode_split(&t, data, &mut enc).unwrap();
        assert_eq!(enc.len(), coded_bits(&t, data).unwrap().div_ceil(8));
        let mut dec = vec![0u8; data.len()];
        decode(&t, &enc, &mut dec).unwrap();
        assert_eq!(dec, data);
    }

    #[test]
    fn edge_cases_round_trip() {
        round_trip(&[], 1);
        round_trip(&[7], 1);
        round_trip(&[7; 1000], 4); // a constant vector: one symbol per lane, 1 bit each
        let all: Vec<u8> = (0..=255u8).collect();
        round_trip(&all, 1); // all-distinct bytes: 8 bits each
        round_trip(&all, 4);
        let t = tables_for(&[0u8; 10], 1);
        let mut enc = Vec::new();
        encode_split(&t, &[0u8; 10], &mut enc).unwrap();
        assert_eq!(enc.len(), 2, "10 one-bit codes");
    }

    #[test]
    fn skewed_counts_are_limited_to_the_maximum_length() {
        // Fibonacci counts give a maximally deep Huffman tree.
        let mut c = [0u64; 256];
        let (mut a, mut b) = (1u64, 1u64);
        for x in c.iter_mut().take(40) {
            *x = a;
            (a, b) = (b, a + b);
        }
        let lens = lengths_from_counts(&c);
        assert!(lens.iter().all(|&l| u32::from(l) <= MAX_CODE_LEN));
        assert!(lens.iter().take(40).all(|&l| l > 0));
        CodeTable::from_lengths(&lens).unwrap();
    }

    #[test]
    fn bad_lengths_and_unknown_bytes_are_errors() {
        let mut lens = [1u8; 256];
        let Err(e) = CodeTable::from_lengths(&lens) else {
            panic!("Kraft sum 128 accepted")
        };
        assert_eq!(e.kind(), crate::ErrorKind::Corrupt);
        lens = [0u8; 256];
        lens[0] = 13;
        assert!(CodeTable::from_lengths(&lens).is_err());
        let t = tables_for(&[1, 2, 3], 1);
        let mut out = Vec::new();
        assert!(matches!(
            encode_split(&t, &[9], &mut out),
            Err(HuffError::NoCode { byte: 9, .. })
        ));
    }

    #[test]
    fn truncated_and_padded_streams_are_errors() {
        let data: Vec<u8> = (0..500u32).map(|i| (i * i % 251) as u8).collect();
        let t = tables_for(&data, 4);
        let mut enc = Vec::new();
        encode_split(&t, &data, &mut enc).unwrap();
        let mut dec = vec![0u8; data.len()];
        assert!(decode(&t, &enc[..enc.len() - 1], &mut dec).is_err());
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode(&t, &longer, &mut dec).is_err());
    }

    #[test]
    fn uniform_lanes_are_stored_raw_and_split_coding_round_trips() {
        // Float-like data: lanes 0..3 uniform, lane 3 skewed.
        let mut data = Vec::new();
        let mut x = 12345u32;
        for i in 0..4000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            data.push((x >> 8) as u8);
            data.push((x >> 16) as u8);
            data.push((x >> 24) as u8);
            data.push(if i % 7 == 0 { 0xbd } else { 0x3d });
        }
        let lanes: Vec<CodeTable> = (0..4)
            .map(|l| {
                let mut c = [0u64; 256];
                for (i, &b) in data.iter().enumerate() {
                    if i % 4 == l {
                        c[b as usize] += 1;
                    }
                }
                CodeTable::from_lengths(&lane_lengths(&c)).unwrap()
            })
            .collect();
        assert!(lanes[0].is_raw() && lanes[1].is_raw() && lanes[2].is_raw());
        assert!(!lanes[3].is_raw());
        for v in data.chunks(200) {
            let mut enc = Vec::new();
            encode_split(&lanes, v, &mut enc).unwrap();
            assert!(enc.len() < v.len());
            let mut dec = vec![0u8; v.len()];
            decode_split(&lanes, &enc, &mut dec).unwrap();
            assert_eq!(dec, v);
            assert!(decode_split(&lanes, &enc[..enc.len() - 1], &mut dec).is_err());
        }
    }

    proptest! {
        #[test]
        fn split_coding_round_trips(data in proptest::collection::vec(any::<u8>(), 0..2000),
                                    skew in proptest::collection::vec(0u8..3, 0..2000),
                                    lanes in 1usize..5, raw_mask in 0u8..16) {
            // Mix uniform and skewed bytes; force some lanes raw.
            let bytes: Vec<u8> = data.iter().zip(skew.iter().chain(std::iter::repeat(&0)))
                .enumerate()
                .map(|(i, (&a, &b))| if i % 2 == 0 { a } else { b })
                .collect();
            let tables: Vec<CodeTable> = (0..lanes).map(|l| {
                if raw_mask >> l & 1 == 1 {
                    return CodeTable::from_lengths(&[0; 256]).unwrap();
                }
                let mut c = [0u64; 256];
                for (i, &b) in bytes.iter().enumerate() {
                    if i % lanes == l { c[b as usize] += 1; }
                }
                CodeTable::from_lengths(&lengths_from_counts(&c)).unwrap()
            }).collect();
            let mut enc = Vec::new();
            encode_split(&tables, &bytes, &mut enc).unwrap();
            let mut dec = vec![0u8; bytes.len()];
            decode_split(&tables, &enc, &mut dec).unwrap();
            prop_assert_eq!(dec, bytes);
        }

        #[test]
        fn random_bytes_round_trip(data in proptest::collection::vec(any::<u8>(), 0..3000), lanes in 1usize..5) {
            round_trip(&data, lanes);
        }

        #[test]
        fn skewed_bytes_round_trip(data in proptest::collection::vec(0u8..4, 0..3000), lanes in 1usize..5) {
            round_trip(&data, lanes);
        }

        #[test]
        fn damaged_streams_never_panic(data in proptest::collection::vec(any::<u8>(), 1..400),
                                       flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..4)) {
            let t = tables_for(&data, 4);
            let mut enc = Vec::new();
            encode_split(&t, &data, &mut enc).unwrap();
            for (at, bit) in flips {
                let i = at % enc.len();
                enc[i] ^= 1 << bit;
            }
            let mut dec = vec![0u8; data.len()];
            // Either an error or some bytes: never a panic.
            let _ = decode(&t, &enc, &mut dec);
        }
    }
}

//! FastScan: RaBitQ's integer inner products of 32 codes at a time with 4-bit lookup tables in
//! SIMD registers (RQ §3.3.2, after André et al.'s PQ FastScan).
//!
//! A block holds one bit plane of 32 codes, transposed: for every group `g` of four dimensions
//! (`4g … 4g+3`), 16 bytes whose byte `i` is code `i`'s nibble of the group in its low half and
//! code `i + 16`'s in its high half ([`pack_plane`]); `D/8` bytes per code, as in the by-id
//! layout. The query's table ([`FsLut`]) has, per group, the 16 sums
//! `LUT_g[n] = Σ_{t < 4, bit t of n set} q_u[4g + t]`, so a code's `⟨plane, q_u⟩` is the sum over
//! groups of `LUT_g[nibble]`: one byte shuffle (`PSHUFB`) looks up 32 (AVX2) or 64 (AVX-512)
//! entries at once.
//!
//! **Exactness.** A table entry must fit a byte, so the query's `B_q`-bit values are cut into
//! slices of [`SLICE_BITS`] bits (one slice for `B_q ≤ 6`, two up to 12) and every slice has its
//! own table, with entries at most `4 · 63 = 252`; the 16-bit lane sums are flushed into `u32`
//! every [`FLUSH_GROUPS`] groups, before they can overflow. The result is therefore the exact
//! integer `⟨u_p, q_u⟩` of the plane — the same integer the popcount kernels
//! ([`crate::quant::rabitq::kernels`]) compute — and a code's estimate from it is bit for bit
//! [`RbqQuery::estimate`]'s. A `B`-bit code is `B` planes, each a FastScan pass, weighted by
//! `2^{B−1−p}` ([`scan_code_block`]).

use crate::quant::rabitq::RbqQuery;

/// Codes per block.
pub const BLOCK: usize = 32;
/// Bits of the query's values per table slice: `4 · (2^6 − 1) = 252` fits a byte.
pub const SLICE_BITS: u32 = 6;
/// Groups summed in 16-bit lanes before a flush: `256 · 252 < 2^16`.
pub const FLUSH_GROUPS: usize = 256;

/// Bytes of one plane of a block of `pad`-dimensional codes.
pub fn plane_block_bytes(pad: usize) -> usize {
    pad / 4 * 16
}

/// Packs plane bytes of up to 32 codes (`planes[i]` is code `i`'s plane: `pad / 8` bytes, bit
/// `j` of dimension `j` in little-endian order) into `out` ([`plane_block_bytes`]); missing
/// codes are zero.
pub fn pack_plane(planes: &[&[u8]], pad: usize, out: &mut [u8]) {
    assert!(planes.len() <= BLOCK && out.len() >= plane_block_bytes(pad));
    let groups = pad / 4;
    out[..groups * 16].fill(0);
    for (i, plane) in planes.iter().enumerate() {
        assert!(plane.len() >= pad / 8);
        let (byte, shift) = (i % 16, if i < 16 { 0 } else { 4 });
        for g in 0..groups {
            let nib = (plane[g / 2] >> (4 * (g % 2))) & 0x0f;
            out[g * 16 + byte] |= nib << shift;
        }
    }
}

/// A query's FastScan tables: `slices × groups × 16` bytes.
#[derive(Debug, Clone, Default)]
pub struct FsLut {
    /// Groups of four dimensions (`D/4`).
    groups: usize,
    /// Table slices (`⌈B_q / 6⌉`).
    slices: usize,
    /// Slice `k`'s table of group `g` at `(k·groups + g)·16`.
    table: Vec<u8>,
}

impl FsLut {
    /// The tables of `q`.
    pub fn of(q: &RbqQuery) -> Self {
        let mut t = Self::default();
        t.fill(q);
        t
    }

    /// Rebuilds the tables for `q`, reusing the buffer.
    pub fn fill(&mut self, q: &RbqQuery) {
        let (planes, words, qbits) = q.query_planes();
        let pad = words * 64;
        self.groups = pad / 4;
        self.slices = qbits.div_ceil(SLICE_BITS) as usize;
        self.table.clear();
        self.table.resize(self.slices * self.groups * 16, 0);
        let value = |j: usize| -> u32 {
            (0..qbits as usize)
                .map(|b| (((planes[b * words + j / 64] >> (j % 64)) & 1) as u32) << b)
                .sum()
        };
        let mask = (1u32 << SLICE_BITS) - 1;
        for g in 0..self.groups {
            let q4 = [
                value(4 * g),
                value(4 * g + 1),
                value(4 * g + 2),
                value(4 * g + 3),
            ];
            for k in 0..self.slices {
                let s = q4.map(|v| (v >> (SLICE_BITS * k as u32)) & mask);
                let row = &mut self.table[(k * self.groups + g) * 16..][..16];
                for (n, e) in row.iter_mut().enumerate() {
                    let sum: u32 = (0..4).filter(|t| n >> t & 1 == 1).map(|t| s[t]).sum();
                    *e = sum as u8;
                }
            }
        }
    }

    /// Groups of four dimensions.
    pub fn groups(&self) -> usize {
        self.groups
    }
}

/// Which version of the scan runs ([`level`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsLevel {
    /// Portable.
    #[default]
    Portable,
    /// AVX2 `VPSHUFB` on 32 bytes (two groups per step).
    Avx2,
    /// AVX-512BW `VPSHUFB` on 64 bytes (four groups per step).
    Avx512,
}

/// The best version this CPU runs; detected once.
pub fn level() -> FsLevel {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static LEVEL: OnceLock<FsLevel> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            if std::is_x86_feature_detected!("avx512bw") {
                FsLevel::Avx512
            } else if std::is_x86_feature_detected!("avx2") {
                FsLevel::Avx2
            } else {
                FsLevel::Portable
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    FsLevel::Portable
}

/// Adds `⟨plane_i, q_u⟩ << shift` of the block's 32 codes to `out[i]`, with `level`'s version.
pub fn scan_plane(level: FsLevel, block: &[u8], lut: &FsLut, shift: u32, out: &mut [u64; BLOCK]) {
    let g = lut.groups;
    assert!(block.len() >= g * 16 && lut.table.len() >= lut.slices * g * 16);
    for k in 0..lut.slices {
        let table = &lut.table[k * g * 16..(k + 1) * g * 16];
        let mut sums = [0u32; BLOCK];
        match level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `FsLevel::Avx512` is only made by `level()` after detecting AVX-512BW.
            FsLevel::Avx512 => unsafe { scan_avx512(block, table, g, &mut sums) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `FsLevel::Avx2` is only made by `level()` after detecting AVX2.
            FsLevel::Avx2 => unsafe { scan_avx2(block, table, g, &mut sums) },
            _ => scan_scalar(block, table, g, &mut sums),
        }
        let w = shift + SLICE_BITS * k as u32;
        for (o, s) in out.iter_mut().zip(sums) {
            *o += u64::from(s) << w;
        }
    }
}

/// `⟨u_i, q_u⟩` of a block of 32 `bits`-bit codes: `block` holds the codes' planes one after
/// another, most significant first, each [`plane_block_bytes`] long.
pub fn scan_code_block(
    level: FsLevel,
    block: &[u8],
    bits: usize,
    lut: &FsLut,
    out: &mut [u64; BLOCK],
) {
    *out = [0; BLOCK];
    let pb = lut.groups * 16;
    for p in 0..bits {
        scan_plane(
            level,
            &block[p * pb..(p + 1) * pb],
            lut,
            (bits - 1 - p) as u32,
            out,
        );
    }
}

/// The portable loop.
fn scan_scalar(block: &[u8], table: &[u8], groups: usize, out: &mut [u32; BLOCK]) {
    for g in 0..groups {
        let row = &table[g * 16..g * 16 + 16];
        let bytes = &block[g * 16..g * 16 + 16];
        for (i, &b) in bytes.iter().enumerate() {
            out[i] += u32::from(row[usize::from(b & 0x0f)]);
            out[i + 16] += u32::from(row[usize::from(b >> 4)]);
        }
    }
}

/// Two groups per step: a 32-byte load holds group `g`'s 16 bytes and group `g + 1`'s, the
/// table register their two rows, so `VPSHUFB` (which shuffles within each 128-bit half) looks
/// every nibble up in its own group's row. The byte results are summed into 16-bit lanes as
/// even and odd bytes (code `2j` in lane `j`'s low byte, `2j + 1` in its high byte), flushed
/// every [`FLUSH_GROUPS`] groups. The caller checked `block.len() ≥ 16·groups` and
/// `table.len() ≥ 16·groups`; `groups` is even (`D` is a multiple of 64).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(block: &[u8], table: &[u8], groups: usize, out: &mut [u32; BLOCK]) {
    use std::arch::x86_64::*;
    let nib = _mm256_set1_epi8(0x0f);
    let low = _mm256_set1_epi16(0x00ff);
    let mut g = 0;
    while g < groups {
        let end = (g + FLUSH_GROUPS).min(groups);
        let (mut le, mut lo, mut he, mut ho) = (
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
        );
        while g + 2 <= end {
            // SAFETY: bytes `16g .. 16g + 32` lie in `block` (`g + 2 ≤ groups`).
            let c = unsafe { _mm256_loadu_si256(block.as_ptr().wrapping_add(g * 16).cast()) };
            // SAFETY: as above, in `table`.
            let t = unsafe { _mm256_loadu_si256(table.as_ptr().wrapping_add(g * 16).cast()) };
            let rl = _mm256_shuffle_epi8(t, _mm256_and_si256(c, nib));
            let rh = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(c, 4), nib));
            le = _mm256_add_epi16(le, _mm256_and_si256(rl, low));
            lo = _mm256_add_epi16(lo, _mm256_srli_epi16(rl, 8));
            he = _mm256_add_epi16(he, _mm256_and_si256(rh, low));
            ho = _mm256_add_epi16(ho, _mm256_srli_epi16(rh, 8));
            g += 2;
        }
        let lanes = |v: __m256i| -> [u16; 16] {
            let mut a = [0u16; 16];
            // SAFETY: `a` is 32 bytes.
            unsafe { _mm256_storeu_si256(a.as_mut_ptr().cast(), v) };
            a
        };
        let (le, lo, he, ho) = (lanes(le), lanes(lo), lanes(he), lanes(ho));
        for j in 0..8 {
            for h in 0..2 {
                out[2 * j] += u32::from(le[8 * h + j]);
                out[2 * j + 1] += u32::from(lo[8 * h + j]);
                out[16 + 2 * j] += u32::from(he[8 * h + j]);
                out[16 + 2 * j + 1] += u32::from(ho[8 * h + j]);
            }
        }
    }
    // An odd last group (not made by padded dimensions, kept for safety).
    if groups % 2 == 1 {
        let mut tail = [0u32; BLOCK];
        let last = groups - 1;
        scan_scalar(&block[last * 16..], &table[last * 16..], 1, &mut tail);
        for (o, t) in out.iter_mut().zip(tail) {
            *o += t;
        }
    }
}

/// [`scan_avx2`] with four groups per 64-byte step; a tail of fewer than four groups is
/// scanned by the portable loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn scan_avx512(block: &[u8], table: &[u8], groups: usize, out: &mut [u32; BLOCK]) {
    use std::arch::x86_64::*;
    let nib = _mm512_set1_epi8(0x0f);
    let low = _mm512_set1_epi16(0x00ff);
    let full = groups / 4 * 4;
    let mut g = 0;
    while g < full {
        let end = (g + FLUSH_GROUPS).min(full);
        let (mut le, mut lo, mut he, mut ho) = (
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
        );
        while g + 4 <= end {
            // SAFETY: bytes `16g .. 16g + 64` lie in `block` (`g + 4 ≤ groups`).
            let c = unsafe { _mm512_loadu_si512(block.as_ptr().wrapping_add(g * 16).cast()) };
            // SAFETY: as above, in `table`.
            let t = unsafe { _mm512_loadu_si512(table.as_ptr().wrapping_add(g * 16).cast()) };
            let rl = _mm512_shuffle_epi8(t, _mm512_and_si512(c, nib));
            let rh = _mm512_shuffle_epi8(t, _mm512_and_si512(_mm512_srli_epi16(c, 4), nib));
            le = _mm512_add_epi16(le, _mm512_and_si512(rl, low));
            lo = _mm512_add_epi16(lo, _mm512_srli_epi16(rl, 8));
            he = _mm512_add_epi16(he, _mm512_and_si512(rh, low));
            ho = _mm512_add_epi16(ho, _mm512_srli_epi16(rh, 8));
            g += 4;
        }
        let lanes = |v: __m512i| -> [u16; 32] {
            let mut a = [0u16; 32];
            // SAFETY: `a` is 64 bytes.
            unsafe { _mm512_storeu_si512(a.as_mut_ptr().cast(), v) };
            a
        };
        let (le, lo, he, ho) = (lanes(le), lanes(lo), lanes(he), lanes(ho));
        for j in 0..8 {
            for h in 0..4 {
                out[2 * j] += u32::from(le[8 * h + j]);
                out[2 * j + 1] += u32::from(lo[8 * h + j]);
                out[16 + 2 * j] += u32::from(he[8 * h + j]);
                out[16 + 2 * j + 1] += u32::from(ho[8 * h + j]);
            }
        }
    }
    if full < groups {
        let mut tail = [0u32; BLOCK];
        scan_scalar(
            &block[full * 16..],
            &table[full * 16..],
            groups - full,
            &mut tail,
        );
        for (o, t) in out.iter_mut().zip(tail) {
            *o += t;
        }
    }
}

/// Lists of codes in FastScan blocks (an IVF index's posting lists, each vector's code copied
/// into every list it is in): per list, its codes 32 to a block, with each slot's id, `Σ u`
/// and factors beside the block, so a list is scored by reading memory in order. Built from the
/// by-id codes at open time (nothing more on disk).
#[derive(Debug, Clone, Default)]
pub struct BlockLists {
    /// `B`.
    bits: usize,
    /// Bytes of one block (`B` planes).
    block_bytes: usize,
    /// Bytes of a code's factors.
    factor_bytes: usize,
    /// Block index where list `l` starts (`lists + 1` entries).
    starts: Vec<u32>,
    /// Every block.
    blocks: Vec<u8>,
    /// Per slot (`32 × blocks`): the id (`u32::MAX`: empty).
    ids: Vec<u32>,
    /// Per slot: `Σ u` of the code.
    sums: Vec<u32>,
    /// Per slot: the code's factors.
    factors: Vec<u8>,
}

impl BlockLists {
    /// The blocks of `lists` (`lists(l)` are list `l`'s ids, `0 ≤ l < nlist`) over `codes` of
    /// a quantiser with `bits` bits per dimension and padded dimension `pad`.
    pub fn build<'a>(
        nlist: usize,
        lists: impl Fn(usize) -> &'a [u32],
        codes: &crate::quant::pq::PqCodes,
        bits: usize,
        pad: usize,
    ) -> Self {
        let pb = plane_block_bytes(pad);
        let plane = pad / 8;
        let factor_bytes = codes.m() - bits * plane;
        let mut starts = Vec::with_capacity(nlist + 1);
        let mut total = 0u32;
        for l in 0..nlist {
            starts.push(total);
            total += lists(l).len().div_ceil(BLOCK) as u32;
        }
        starts.push(total);
        let slots = total as usize * BLOCK;
        let mut out = Self {
            bits,
            block_bytes: bits * pb,
            factor_bytes,
            starts,
            blocks: vec![0; total as usize * bits * pb],
            ids: vec![u32::MAX; slots],
            sums: vec![0; slots],
            factors: vec![0; slots * factor_bytes],
        };
        let mut planes: Vec<&[u8]> = Vec::with_capacity(BLOCK);
        for l in 0..nlist {
            let ids = lists(l);
            for (b, chunk) in ids.chunks(BLOCK).enumerate() {
                let blk = out.starts[l] as usize + b;
                let block = &mut out.blocks[blk * out.block_bytes..(blk + 1) * out.block_bytes];
                for p in 0..bits {
                    planes.clear();
                    planes.extend(
                        chunk
                            .iter()
                            .map(|&id| &codes.code(id as usize)[p * plane..(p + 1) * plane]),
                    );
                    pack_plane(&planes, pad, &mut block[p * pb..(p + 1) * pb]);
                }
                for (i, &id) in chunk.iter().enumerate() {
                    let slot = blk * BLOCK + i;
                    let code = codes.code(id as usize);
                    out.ids[slot] = id;
                    out.sums[slot] = (0..bits)
                        .map(|p| {
                            let ones: u32 = code[p * plane..(p + 1) * plane]
                                .iter()
                                .map(|b| b.count_ones())
                                .sum();
                            ones << (bits - 1 - p)
                        })
                        .sum();
                    out.factors[slot * factor_bytes..(slot + 1) * factor_bytes]
                        .copy_from_slice(&code[bits * plane..]);
                }
            }
        }
        out
    }

    /// Lists.
    pub fn lists(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Bytes [`BlockLists::build`] takes for lists of these lengths over codes of `m` bytes.
    pub fn bytes_for(list_lens: impl Iterator<Item = usize>, m: usize) -> u64 {
        let (mut slots, mut lists) = (0u64, 0u64);
        for len in list_lens {
            slots += (len.div_ceil(BLOCK) * BLOCK) as u64;
            lists += 1;
        }
        // Planes and factors (`m` bytes), the id and `Σ u` per slot; the block starts.
        slots * (m as u64 + 8) + 4 * (lists + 1)
    }

    /// Bytes in memory.
    pub fn heap_bytes(&self) -> u64 {
        (self.blocks.len()
            + self.factors.len()
            + 4 * (self.ids.len() + self.sums.len() + self.starts.len())) as u64
    }

    /// Scores the codes of list `l` against `q` (whose tables are `lut`), calling
    /// `visit(id, estimate)` for each id `want(id)` accepts (asked first, so a replica already
    /// scored costs no estimate): the estimates are bit for bit [`RbqQuery::distance`]'s of
    /// the by-id codes.
    pub fn scan(
        &self,
        level: FsLevel,
        l: usize,
        q: &RbqQuery,
        lut: &FsLut,
        mut want: impl FnMut(u32) -> bool,
        mut visit: impl FnMut(u32, f32),
    ) {
        let Some(range) = self.starts.get(l..l + 2) else {
            return;
        };
        let mut ip = [0u64; BLOCK];
        for blk in range[0] as usize..range[1] as usize {
            let block = &self.blocks[blk * self.block_bytes..(blk + 1) * self.block_bytes];
            scan_code_block(level, block, self.bits, lut, &mut ip);
            for (i, &ip) in ip.iter().enumerate() {
                let slot = blk * BLOCK + i;
                let id = self.ids[slot];
                if id == u32::MAX {
                    break;
                }
                if !want(id) {
                    continue;
                }
                let f = &self.factors[slot * self.factor_bytes..(slot + 1) * self.factor_bytes];
                visit(id, q.distance_factors(f, ip, u64::from(self.sums[slot])));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Metric;
    use crate::quant::rabitq::{RaBitQuantizer, RbqParams};
    use rand::{Rng, SeedableRng};

    fn levels() -> Vec<FsLevel> {
        let mut l = vec![FsLevel::Portable];
        if matches!(level(), FsLevel::Avx2 | FsLevel::Avx512) {
            l.push(FsLevel::Avx2);
        }
        if level() == FsLevel::Avx512 {
            l.push(FsLevel::Avx512);
        }
        l
    }

    /// Every version's integers equal the popcount kernel's, code by code, for every `B` and
    /// dimensions from 64 to past one flush (1,024 groups of four would be 4,096).
    #[test]
    fn every_version_equals_the_popcount_integers() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for (dim, bits) in [
            (20usize, 1u8),
            (64, 1),
            (100, 2),
            (384, 1),
            (384, 4),
            (1100, 3),
            (2100, 1),
            (300, 8),
        ] {
            let n = 45; // a full block and a partial one
            let data: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let m = crate::data::Matrix::from_vec(data, dim).expect("matrix");
            let params = RbqParams {
                bits,
                ..RbqParams::default()
            };
            let rq =
                RaBitQuantizer::train(&m, Metric::L2, &params, &crate::progress::Control::silent())
                    .expect("train");
            let codes = rq
                .encode(&m, &crate::progress::Control::silent())
                .expect("encode");
            let pad = rq.pad();
            let pb = plane_block_bytes(pad);
            let query: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let q = rq.query(&query).expect("query");
            let lut = FsLut::of(&q);
            for start in (0..n).step_by(BLOCK) {
                let ids: Vec<usize> = (start..(start + BLOCK).min(n)).collect();
                let mut block = vec![0u8; pb * bits as usize];
                for p in 0..bits as usize {
                    let planes: Vec<&[u8]> = ids
                        .iter()
                        .map(|&i| &codes.code(i)[p * pad / 8..(p + 1) * pad / 8])
                        .collect();
                    pack_plane(&planes, pad, &mut block[p * pb..(p + 1) * pb]);
                }
                for l in levels() {
                    let mut out = [0u64; BLOCK];
                    scan_code_block(l, &block, bits as usize, &lut, &mut out);
                    for (k, &i) in ids.iter().enumerate() {
                        let (ip, _) = q.integer_parts(codes.code(i));
                        assert_eq!(out[k], ip, "{l:?} dim {dim} bits {bits} code {i}");
                    }
                    for k in ids.len()..BLOCK {
                        assert_eq!(out[k], 0, "an empty slot scores 0");
                    }
                }
            }
        }
    }

    /// The largest table entries (all query values at their maximum, all code bits set) over
    /// more than one flush still sum exactly.
    #[test]
    fn saturated_tables_do_not_overflow() {
        let groups = 3 * FLUSH_GROUPS + 4;
        let lut = FsLut {
            groups,
            slices: 1,
            table: (0..groups)
                .flat_map(|_| (0..16u8).map(|n| 63 * n.count_ones() as u8))
                .collect(),
        };
        let block = vec![0xffu8; groups * 16];
        for l in levels() {
            let mut out = [0u64; BLOCK];
            scan_plane(l, &block, &lut, 0, &mut out);
            assert!(
                out.iter().all(|&v| v == 252 * groups as u64),
                "{l:?}: {out:?}"
            );
        }
    }
}

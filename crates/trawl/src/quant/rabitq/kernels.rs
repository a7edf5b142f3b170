//! The integer part of a RaBitQ estimate, `⟨u, q_u⟩` and `Σ u` over bit planes, in three
//! versions chosen once per process: AVX-512 with `VPOPCNTQ` (a whole plane of up to 512
//! dimensions per instruction), the scalar loop compiled with the `popcnt` instruction
//! (x86-64 without AVX-512), and the portable scalar loop. All three compute the same integers.

/// Which version runs ([`level`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Portable.
    #[default]
    Portable,
    /// x86-64 `popcnt`.
    Popcnt,
    /// AVX-512F + VPOPCNTDQ.
    Avx512,
}

/// The best version this CPU runs; detected once.
pub fn level() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            if std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vpopcntdq")
            {
                Level::Avx512
            } else if std::is_x86_feature_detected!("popcnt") {
                Level::Popcnt
            } else {
                Level::Portable
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    Level::Portable
}

/// `(⟨u, q_u⟩, Σ u)` of a code's `bits` planes of `words` words each (most significant
/// first) against the query's `qbits` planes (`planes[b·words + w]`, least significant
/// first), with `level`'s version.
#[inline]
pub fn integer_parts(
    level: Level,
    code: &[u8],
    planes: &[u64],
    words: usize,
    bits: usize,
    qbits: usize,
) -> (u64, u64) {
    assert!(code.len() >= bits * words * 8 && planes.len() >= qbits * words);
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level::Avx512` is only made by `level()` after detecting AVX-512F and
        // VPOPCNTDQ on this CPU.
        Level::Avx512 => unsafe { parts_avx512(code, planes, words, bits, qbits) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level::Popcnt` is only made by `level()` after detecting `popcnt`.
        Level::Popcnt => unsafe { parts_popcnt(code, planes, words, bits, qbits) },
        _ => parts_scalar(code, planes, words, bits, qbits),
    }
}

/// The portable loop.
#[inline(always)]
pub fn parts_scalar(
    code: &[u8],
    planes: &[u64],
    words: usize,
    bits: usize,
    qbits: usize,
) -> (u64, u64) {
    let pb = words * 8;
    let (mut ip, mut sum_u) = (0u64, 0u64);
    for p in 0..bits {
        let plane = &code[p * pb..(p + 1) * pb];
        let (mut s, mut c) = (0u64, 0u64);
        for (w, chunk) in plane.chunks_exact(8).enumerate() {
            let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            c += u64::from(x.count_ones());
            for b in 0..qbits {
                s += u64::from((x & planes[b * words + w]).count_ones()) << b;
            }
        }
        let shift = bits - 1 - p;
        ip += s << shift;
        sum_u += c << shift;
    }
    (ip, sum_u)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn parts_popcnt(
    code: &[u8],
    planes: &[u64],
    words: usize,
    bits: usize,
    qbits: usize,
) -> (u64, u64) {
    parts_scalar(code, planes, words, bits, qbits)
}

/// Eight words of a plane per step (masked at the end: masked-off lanes are neither loaded
/// nor able to fault), the query's planes AND-ed and counted into per-lane sums shifted by
/// their weight, one horizontal sum per code plane. The caller checked
/// `code.len() ≥ bits·words·8` and `planes.len() ≥ qbits·words`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn parts_avx512(
    code: &[u8],
    planes: &[u64],
    words: usize,
    bits: usize,
    qbits: usize,
) -> (u64, u64) {
    use std::arch::x86_64::*;
    let pb = words * 8;
    let (mut ip, mut sum_u) = (0u64, 0u64);
    for p in 0..bits {
        let base = code.as_ptr().wrapping_add(p * pb);
        let (mut acc, mut cnt) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        let mut w = 0;
        while w < words {
            let n = (words - w).min(8);
            let mask: __mmask8 = if n == 8 { 0xff } else { (1u8 << n) - 1 };
            // SAFETY: the `n` unmasked words lie in plane `p` of `code` (`w + n ≤ words`).
            let x = unsafe { _mm512_maskz_loadu_epi64(mask, base.wrapping_add(w * 8).cast()) };
            cnt = _mm512_add_epi64(cnt, _mm512_popcnt_epi64(x));
            for b in 0..qbits {
                let at = planes.as_ptr().wrapping_add(b * words + w);
                // SAFETY: the `n` unmasked words lie in query plane `b` (`w + n ≤ words`).
                let q = unsafe { _mm512_maskz_loadu_epi64(mask, at.cast()) };
                let c = _mm512_popcnt_epi64(_mm512_and_si512(x, q));
                acc = _mm512_add_epi64(acc, _mm512_sllv_epi64(c, _mm512_set1_epi64(b as i64)));
            }
            w += 8;
        }
        let shift = bits - 1 - p;
        ip += (_mm512_reduce_add_epi64(acc) as u64) << shift;
        sum_u += (_mm512_reduce_add_epi64(cnt) as u64) << shift;
    }
    (ip, sum_u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn every_version_computes_the_same_integers() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for words in [1usize, 2, 6, 8, 9, 16, 17] {
            for bits in 1..=8usize {
                let qbits = bits + 4;
                let code: Vec<u8> = (0..bits * words * 8 + 8).map(|_| rng.gen()).collect();
                let planes: Vec<u64> = (0..qbits * words).map(|_| rng.gen()).collect();
                let want = parts_scalar(&code, &planes, words, bits, qbits);
                for l in [Level::Portable, Level::Popcnt, Level::Avx512] {
                    if l == Level::Avx512 && level() != Level::Avx512 {
                        continue;
                    }
                    if l == Level::Popcnt && level() == Level::Portable {
                        continue;
                    }
                    assert_eq!(
                        integer_parts(l, &code, &planes, words, bits, qbits),
                        want,
                        "{l:?} words {words} bits {bits}"
                    );
                }
            }
        }
    }
}

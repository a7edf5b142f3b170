//! The f32 register-blocked micro-kernel: `MR` queries × `NR` packed base rows at once.
//!
//! The kernel computes all `MR × NR` dot products of a query tile with a packed base panel
//! (dimension-major, `NR` lanes per dimension), turns them into approximate distance keys
//!
//! `key[i][j] = dot[i][j] · qscale[i] · bscale[j] + boff[j]`
//!
//! and flags the keys below each query's threshold in a bit mask, so the caller only looks at the
//! rare candidates that can enter a top-k list. An AVX-512 version (chosen at run time) keeps the
//! `MR × NR` accumulators in registers; a portable version does the same in plain Rust.

/// Queries per tile.
pub(crate) const MR: usize = 8;
/// Base rows per packed panel (two 16-lane vectors).
pub(crate) const NR: usize = 32;

/// Per-panel coefficients of the key (padding rows have `boff = +∞`, so they never qualify).
#[derive(Debug, Clone)]
pub(crate) struct PanelCoef {
    /// Multiplier of the dot product per base row.
    pub bscale: [f32; NR],
    /// Additive term per base row.
    pub boff: [f32; NR],
}

/// Per-tile query coefficients.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TileCoef {
    /// Multiplier of the dot product per query.
    pub qscale: [f32; MR],
    /// A key strictly below `thr[i]` sets its bit in `masks[i]`.
    pub thr: [f32; MR],
}

/// Keys of one tile and which of them passed the threshold.
#[derive(Debug, Clone)]
pub(crate) struct TileOut {
    /// `keys[i][j]`: key of query `i` against panel row `j`.
    pub keys: [[f32; NR]; MR],
    /// Bit `j` of `masks[i]` is set when `keys[i][j] < thr[i]`.
    pub masks: [u32; MR],
}

impl Default for TileOut {
    fn default() -> Self {
        Self {
            keys: [[0.0; NR]; MR],
            masks: [0; MR],
        }
    }
}

/// The kernel implementation chosen for this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TileKernel {
    /// Plain Rust.
    Portable,
    /// AVX-512F intrinsics; only constructed after runtime detection.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

#[cfg(test)]
thread_local! {
    /// Tests set this to run the portable kernel end to end on a machine with AVX-512.
    pub(crate) static FORCE_PORTABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl TileKernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        #[cfg(test)]
        if FORCE_PORTABLE.with(|f| f.get()) {
            return TileKernel::Portable;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return TileKernel::Avx512;
        }
        TileKernel::Portable
    }

    /// Runs the kernel: `q` is `dim × MR` floats (a query tile packed dimension-major), `panel` is
    /// `dim × NR` floats.
    #[inline]
    pub fn run(
        self,
        q: &[f32],
        panel: &[f32],
        dim: usize,
        pc: &PanelCoef,
        tc: &TileCoef,
        out: &mut TileOut,
    ) {
        assert!(q.len() >= MR * dim && panel.len() >= NR * dim);
        match self {
            TileKernel::Portable => tile_portable(q, panel, dim, pc, tc, out),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx512` is only constructed by `detect` after AVX-512F was detected, and
            // the slice lengths the kernel reads were asserted above.
            TileKernel::Avx512 => unsafe { tile_avx512(q, panel, dim, pc, tc, out) },
        }
    }
}

/// Portable kernel, also the specification the SIMD kernel is tested against.
pub(crate) fn tile_portable(
    q: &[f32],
    panel: &[f32],
    dim: usize,
    pc: &PanelCoef,
    tc: &TileCoef,
    out: &mut TileOut,
) {
    let mut acc = [[0.0f32; NR]; MR];
    for t in 0..dim {
        let b = &panel[t * NR..(t + 1) * NR];
        for (i, row) in acc.iter_mut().enumerate() {
            let a = q[t * MR + i];
            for (x, &y) in row.iter_mut().zip(b) {
                *x += a * y;
            }
        }
    }
    for i in 0..MR {
        let mut mask = 0u32;
        for j in 0..NR {
            let key = acc[i][j] * pc.bscale[j] * tc.qscale[i] + pc.boff[j];
            out.keys[i][j] = key;
            if key < tc.thr[i] {
                mask |= 1 << j;
            }
        }
        out.masks[i] = mask;
    }
}

/// AVX-512 kernel: `MR × 2` zmm accumulators, embedded-broadcast FMAs over the dimension.
///
/// # Safety
/// The CPU must support AVX-512F; `q.len() ≥ MR·dim` and `panel.len() ≥ NR·dim`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512(
    q: &[f32],
    panel: &[f32],
    dim: usize,
    pc: &PanelCoef,
    tc: &TileCoef,
    out: &mut TileOut,
) {
    use std::arch::x86_64::*;
    let qp = q.as_ptr();
    let bp = panel.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for t in 0..dim {
        // SAFETY: `t < dim` and `panel.len() ≥ NR·dim`, so lanes `t·NR .. t·NR + 32` exist.
        let b0 = unsafe { _mm512_loadu_ps(bp.wrapping_add(t * NR)) };
        // SAFETY: as above, second 16 lanes of the same row of the panel.
        let b1 = unsafe { _mm512_loadu_ps(bp.wrapping_add(t * NR + 16)) };
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: `i < MR`, `t < dim` and `q.len() ≥ MR·dim`.
            let x = _mm512_set1_ps(unsafe { *qp.wrapping_add(t * MR + i) });
            a[0] = _mm512_fmadd_ps(x, b0, a[0]);
            a[1] = _mm512_fmadd_ps(x, b1, a[1]);
        }
    }
    // SAFETY: `bscale` and `boff` are `[f32; 32]`: 16 floats from 0 and from 16 exist.
    let bs0 = unsafe { _mm512_loadu_ps(pc.bscale[..16].as_ptr()) };
    // SAFETY: as above.
    let bs1 = unsafe { _mm512_loadu_ps(pc.bscale[16..].as_ptr()) };
    // SAFETY: as above.
    let bo0 = unsafe { _mm512_loadu_ps(pc.boff[..16].as_ptr()) };
    // SAFETY: as above.
    let bo1 = unsafe { _mm512_loadu_ps(pc.boff[16..].as_ptr()) };
    for (i, a) in acc.iter().enumerate() {
        let qs = _mm512_set1_ps(tc.qscale[i]);
        let th = _mm512_set1_ps(tc.thr[i]);
        let k0 = _mm512_fmadd_ps(_mm512_mul_ps(a[0], bs0), qs, bo0);
        let k1 = _mm512_fmadd_ps(_mm512_mul_ps(a[1], bs1), qs, bo1);
        let m0 = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(k0, th);
        let m1 = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(k1, th);
        out.masks[i] = u32::from(m0) | (u32::from(m1) << 16);
        let (lo, hi) = out.keys[i].split_at_mut(16);
        // SAFETY: `lo` and `hi` each hold 16 floats.
        unsafe { _mm512_storeu_ps(lo.as_mut_ptr(), k0) };
        // SAFETY: as above.
        unsafe { _mm512_storeu_ps(hi.as_mut_ptr(), k1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn coefs(seed: &[f32]) -> (PanelCoef, TileCoef) {
        let mut pc = PanelCoef {
            bscale: [1.0; NR],
            boff: [0.0; NR],
        };
        let mut tc = TileCoef {
            qscale: [-2.0; MR],
            thr: [0.0; MR],
        };
        for j in 0..NR {
            pc.bscale[j] = 0.5 + seed[j % seed.len()].abs();
            pc.boff[j] = seed[(j * 7) % seed.len()];
        }
        pc.boff[NR - 1] = f32::INFINITY;
        for i in 0..MR {
            tc.qscale[i] = seed[(i * 3) % seed.len()];
            tc.thr[i] = seed[(i * 5 + 1) % seed.len()] * 4.0;
        }
        (pc, tc)
    }

    proptest! {
        // Fewer cases under Miri, which interprets every lane.
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
            ..ProptestConfig::default()
        })]

        #[test]
        fn detected_kernel_matches_portable(
            dim in 1usize..40,
            vals in proptest::collection::vec(-4.0f32..4.0, 64),
        ) {
            let q: Vec<f32> = (0..MR * dim).map(|i| vals[i % 64] * ((i % 5) as f32 - 2.0)).collect();
            let panel: Vec<f32> = (0..NR * dim).map(|i| vals[(i * 13) % 64]).collect();
            let (pc, tc) = coefs(&vals);
            let mut a = TileOut::default();
            let mut b = TileOut::default();
            tile_portable(&q, &panel, dim, &pc, &tc, &mut a);
            TileKernel::detect().run(&q, &panel, dim, &pc, &tc, &mut b);
            for i in 0..MR {
                for j in 0..NR {
                    let (x, y) = (a.keys[i][j], b.keys[i][j]);
                    let mag: f32 = (0..dim)
                        .map(|t| (q[t * MR + i] * panel[t * NR + j]).abs())
                        .sum::<f32>()
                        * (pc.bscale[j] * tc.qscale[i]).abs()
                        + pc.boff[j].abs();
                    let tol = 1e-5 * (1.0 + mag);
                    prop_assert!(x == y || (x - y).abs() <= tol, "{} vs {}", x, y);
                    // the mask agrees wherever the key is not within rounding of the threshold
                    if (x - tc.thr[i]).abs() > tol {
                        prop_assert_eq!(a.masks[i] >> j & 1, b.masks[i] >> j & 1);
                    }
                }
                prop_assert_eq!(a.masks[i] >> (NR - 1) & 1, 0, "padding never qualifies");
            }
        }
    }

    #[test]
    fn portable_computes_scaled_dots() {
        let dim = 3;
        let q: Vec<f32> = (0..MR * dim).map(|i| i as f32).collect();
        let panel: Vec<f32> = (0..NR * dim).map(|i| (i % 7) as f32).collect();
        let pc = PanelCoef {
            bscale: [2.0; NR],
            boff: [1.0; NR],
        };
        let tc = TileCoef {
            qscale: [0.5; MR],
            thr: [50.0; MR],
        };
        let mut out = TileOut::default();
        tile_portable(&q, &panel, dim, &pc, &tc, &mut out);
        for i in 0..MR {
            for j in 0..NR {
                let dot: f32 = (0..dim).map(|t| q[t * MR + i] * panel[t * NR + j]).sum();
                assert_eq!(out.keys[i][j], dot + 1.0);
                assert_eq!(out.masks[i] >> j & 1 == 1, dot + 1.0 < 50.0);
            }
        }
    }
}

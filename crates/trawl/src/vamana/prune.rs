//! Robust prune (Vamana's `RobustPrune`, DiskANN's `occlude_list`): choose at most `R`
//! diverse out-neighbours of a point from a candidate pool.
//!
//! The pool is sorted by distance and cut to `C` candidates. Candidates are taken nearest
//! first; each taken candidate `c` raises the occlusion factor of every farther candidate `t` to
//! `d(p, t) / d(c, t)`, and a candidate whose factor exceeds the current threshold is skipped.
//! The threshold starts at 1 and is multiplied by [`defaults::ALPHA_STEP`] up to `α`, so the
//! strictly diverse neighbours come first and the long-range ones fill the remaining slots.

use crate::kernels::Element;
use crate::vamana::defaults;
use crate::vamana::queue::Neighbor;
use crate::vamana::store::VectorStore;

/// Reusable buffers of [`robust_prune`].
#[derive(Debug, Default, Clone)]
pub struct PruneScratch {
    occlude: Vec<f32>,
    /// The pool's vectors as f32, dimension-major: `cols[k·len + t]` is element `k` of
    /// candidate `t`.
    cols: Vec<f32>,
    /// [`VectorStore::pair_aux`] of each candidate.
    aux: Vec<f32>,
    /// The chosen candidate's vector.
    x: Vec<f32>,
    /// Raw kernel results of one chosen candidate against the later ones.
    raw: Vec<f32>,
    /// The pool's distances to the pruned point.
    pd: Vec<f32>,
    /// Label masks of the pool ([`robust_prune_labelled`]; zero without labels).
    masks: Vec<u64>,
}

/// The limits of one prune.
#[derive(Debug, Clone, Copy)]
pub struct PruneLimits {
    /// Most neighbours kept (`R`).
    pub degree: usize,
    /// Final occlusion threshold (`α`).
    pub alpha: f32,
    /// Most candidates considered (`C`).
    pub max_candidates: usize,
    /// With `alpha > 1`, fill the list up to `degree` with the nearest candidates left out.
    pub saturate: bool,
}

/// Raises each occlusion factor `occ[t]` still at most `alpha` to `pd[t] / d(chosen, t)`,
/// with `d` rebuilt from the raw kernel result; a zero distance occludes fully. Branch-free per
/// candidate, so the loop vectorises.
/// A candidate `t` is occluded only when its mask has no bit the chosen one's lacks
/// (`masks[t] & !mask_chosen == 0`: every label it shares with the pruned point, the chosen
/// candidate carries too); all-zero masks occlude as plain robust prune does.
#[allow(clippy::too_many_arguments)]
fn occlude_update<T: Element>(
    store: &VectorStore<'_, T>,
    occ: &mut [f32],
    pd: &[f32],
    raw: &[f32],
    aux: &[f32],
    aux_chosen: f32,
    alpha: f32,
    (masks, mask_chosen): (&[u64], u64),
) {
    #[inline(always)]
    fn run(
        occ: &mut [f32],
        pd: &[f32],
        raw: &[f32],
        aux: &[f32],
        alpha: f32,
        (masks, keep): (&[u64], u64),
        dist: impl Fn(f32, f32) -> f32,
    ) {
        for ((((o, &p), &r), &a), &m) in occ.iter_mut().zip(pd).zip(raw).zip(aux).zip(masks) {
            let d = dist(r, a);
            let ratio = if d == 0.0 { f32::MAX } else { p / d };
            let may = m & !keep == 0;
            *o = if may && *o <= alpha && ratio > *o {
                ratio
            } else {
                *o
            };
        }
    }
    let m = (masks, mask_chosen);
    if store.pair_is_l2() {
        run(occ, pd, raw, aux, alpha, m, |r, _| r);
    } else {
        run(occ, pd, raw, aux, alpha, m, |r, a| {
            store.pair_from_raw(r, aux_chosen, a)
        });
    }
}

/// Prunes `pool` (candidates with their build distance to `p`) into at most `limits.degree`
/// neighbours written to `out`. `pool` is sorted, deduplicated, stripped of `p` and cut to
/// `limits.max_candidates` in place. Returns the number of candidate-to-candidate distances
/// computed.
///
/// The pool's vectors are first copied, transposed, into `scratch` (they are few and were
/// just read by the search), so each chosen candidate meets all later ones in one column-kernel
/// call: every SIMD lane is a different candidate. The call covers the later candidates up to
/// the last one not yet occluded beyond `α`; those are the distances counted.
pub fn robust_prune<T: Element>(
    store: &VectorStore<'_, T>,
    p: u32,
    pool: &mut Vec<Neighbor>,
    limits: PruneLimits,
    scratch: &mut PruneScratch,
    out: &mut Vec<u32>,
) -> u64 {
    robust_prune_labelled(store, p, pool, limits, scratch, out, |_| 0)
}

/// [`robust_prune`] keeping a path for every label (Filtered-DiskANN's `FilteredRobustPrune`):
/// `mask(q)` holds a bit for each label of `p` that candidate `q` carries, and a chosen
/// candidate `r` occludes `q` only when it carries every label `p` and `q` share
/// (`mask(q) & !mask(r) == 0`) — so the nearest candidate sharing a rare label with `p` is
/// never pruned away by one without it. `|_| 0` is plain robust prune.
pub fn robust_prune_labelled<T: Element>(
    store: &VectorStore<'_, T>,
    p: u32,
    pool: &mut Vec<Neighbor>,
    limits: PruneLimits,
    scratch: &mut PruneScratch,
    out: &mut Vec<u32>,
    mask: impl Fn(u32) -> u64,
) -> u64 {
    out.clear();
    pool.retain(|c| c.id != p);
    pool.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
    pool.dedup_by_key(|c| c.id);
    pool.truncate(limits.max_candidates);
    if pool.is_empty() || limits.degree == 0 {
        return 0;
    }
    let len = pool.len();
    let dim = store.dim();
    let PruneScratch {
        occlude,
        cols,
        aux,
        x,
        raw,
        pd,
        masks,
    } = scratch;
    masks.clear();
    masks.extend(pool.iter().map(|c| mask(c.id)));
    pd.clear();
    pd.extend(pool.iter().map(|c| c.dist));
    occlude.clear();
    occlude.resize(len, 0.0);
    cols.clear();
    cols.resize(dim * len, 0.0);
    aux.clear();
    for (t, c) in pool.iter().enumerate() {
        for (k, v) in store.row(c.id as usize).iter().enumerate() {
            cols[k * len + t] = v.to_f32();
        }
        aux.push(store.pair_aux(c.id));
    }
    let k = crate::kernels::dispatch::kernels();
    let kernel = if store.pair_is_l2() {
        k.l2_f32_cols
    } else {
        k.dot_f32_cols
    };
    let mut computed = 0u64;
    let mut cur_alpha = 1.0f32;
    while cur_alpha <= limits.alpha && out.len() < limits.degree {
        for i in 0..len {
            if out.len() >= limits.degree {
                break;
            }
            if occlude[i] > cur_alpha {
                continue;
            }
            // Chosen: +∞ marks it (occlusion factors are finite or f32::MAX).
            occlude[i] = f32::INFINITY;
            out.push(pool[i].id);
            // Later candidates that can still change: up to the last one not occluded past α.
            let Some(last) = (i + 1..len).rev().find(|&t| occlude[t] <= limits.alpha) else {
                continue;
            };
            let m = last - i;
            x.clear();
            x.extend((0..dim).map(|k| cols[k * len + i]));
            raw.clear();
            raw.resize(m, 0.0);
            kernel(x, &cols[i + 1..], len, raw);
            computed += m as u64;
            let span = i + 1..=last;
            occlude_update(
                store,
                &mut occlude[span.clone()],
                &pd[span.clone()],
                raw,
                &aux[span.clone()],
                aux[i],
                limits.alpha,
                (&masks[span], masks[i]),
            );
        }
        cur_alpha *= defaults::ALPHA_STEP;
    }
    if limits.saturate && limits.alpha > 1.0 {
        for (i, c) in pool.iter().enumerate() {
            if out.len() >= limits.degree {
                break;
            }
            if occlude[i] != f32::INFINITY {
                out.push(c.id);
            }
        }
    }
    computed
}

/// The replacement edges of an in-place delete (IP-DiskANN): up to `c` of `cands` for node `z` (never `z` itself), chosen as robust prune chooses among
/// them: nearest first, skipping a candidate `x` that one already chosen, `y`, occludes
/// (`α·d(y, x) ≤ d(z, x)`), so a far candidate in another direction is kept over a second
/// near one. Ties by id.
pub(crate) fn replacement_edges<T: Element>(
    store: &VectorStore<'_, T>,
    z: u32,
    cands: &[u32],
    c: usize,
    alpha: f32,
    dists: &mut Vec<f32>,
) -> Vec<u32> {
    let probe = store.point(z);
    store.dist_batch(&probe, cands, dists);
    let mut pool: Vec<(f32, u32)> = cands
        .iter()
        .zip(dists.iter())
        .filter(|(&x, _)| x != z)
        .map(|(&x, &d)| (d, x))
        .collect();
    pool.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    pool.dedup_by_key(|e| e.1);
    let mut chosen: Vec<u32> = Vec::with_capacity(c);
    for &(d, x) in &pool {
        if chosen.len() == c {
            break;
        }
        let px = store.point(x);
        if chosen.iter().all(|&y| alpha * store.dist(&px, y) > d) {
            chosen.push(x);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Metric;

    fn pool_of(store: &VectorStore<'_, f32>, p: u32) -> Vec<Neighbor> {
        (0..store.n() as u32)
            .map(|id| Neighbor {
                id,
                dist: store.dist_points(p, id),
            })
            .collect()
    }

    #[test]
    fn alpha_one_occludes_points_behind_a_nearer_one() {
        // p at the origin; a at (1,0); b at (2,0) hides behind a; c at (0,1.5) does not.
        let data = [0.0f32, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 1.5];
        let store = VectorStore::new(&data, 2, Metric::L2).unwrap();
        let mut pool = pool_of(&store, 0);
        let mut out = Vec::new();
        let limits = PruneLimits {
            degree: 3,
            alpha: 1.0,
            max_candidates: 10,
            saturate: false,
        };
        robust_prune(
            &store,
            0,
            &mut pool,
            limits,
            &mut PruneScratch::default(),
            &mut out,
        );
        assert_eq!(out, vec![1, 3]);
        // A larger alpha lets b back in through the second pass.
        let mut pool = pool_of(&store, 0);
        let limits = PruneLimits {
            degree: 3,
            alpha: 5.0,
            max_candidates: 10,
            saturate: false,
        };
        robust_prune(
            &store,
            0,
            &mut pool,
            limits,
            &mut PruneScratch::default(),
            &mut out,
        );
        assert_eq!(out, vec![1, 3, 2]);
    }

    proptest::proptest! {
        #[test]
        fn bounded_unique_no_self(seed in 0u64..1000, degree in 1usize..12, alpha in 1.0f32..2.0, saturate: bool) {
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let data: Vec<f32> = (0..60 * 3).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let store = VectorStore::new(&data, 3, Metric::L2).unwrap();
            let mut pool = pool_of(&store, 5);
            pool.extend_from_slice(&pool.clone()[..10]);
            let mut out = Vec::new();
            let limits = PruneLimits { degree, alpha, max_candidates: 40, saturate };
            robust_prune(&store, 5, &mut pool, limits, &mut PruneScratch::default(), &mut out);
            proptest::prop_assert!(!out.is_empty() && out.len() <= degree);
            if saturate && alpha > 1.0 {
                // 59 distinct candidates: a saturated list is always full.
                proptest::prop_assert_eq!(out.len(), degree);
                let mut plain = Vec::new();
                let mut pool2 = pool_of(&store, 5);
                let l2 = PruneLimits { saturate: false, ..limits };
                robust_prune(&store, 5, &mut pool2, l2, &mut PruneScratch::default(), &mut plain);
                proptest::prop_assert_eq!(&out[..plain.len()], &plain[..], "prune result comes first");
            }
            proptest::prop_assert!(!out.contains(&5));
            let mut s = out.clone();
            s.sort_unstable();
            s.dedup();
            proptest::prop_assert_eq!(s.len(), out.len());
            // The nearest candidate is always kept.
            proptest::prop_assert_eq!(out[0], pool[0].id);
        }
    }
}

//! Robust prune (Vamana's `RobustPrune`, DiskANN's `occlude_list`): choose at most `R`
//! diverse out-neighbours of a point from a candidate pool.
//!
//! The pool is sorted by distance and cut to `C` candidates. Candidates are taken nearest
//! first; each taken candidate `c` raises the occlusion factor of every farther candidate `t` to
//! `d(p, t) / d(c, t)`, and a candidate whose factor exceeds the current threshold is skipped.
//! The threshold starts at 1 and is multiplied by [`defaults::ALPHA_STEP`] up to `α`, so the
//! strictly diverse neighbours come first and the long-range ones fill the remaining slots.

use super::defaults;
use super::queue::Neighbor;
use super::store::VectorStore;
use crate::kernels::Element;

/// Reusable buffers of [`robust_prune`].
#[derive(Debug, Default, Clone)]
pub struct PruneScratch {
    occlude: Vec<f32>,
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
}

/// Prunes `pool` (candidates with their build distance to `p`) into at most `limits.degree`
/// neighbours written to `out`. `pool` is sorted, deduplicated, stripped of `p` and cut to
/// `limits.max_candidates` in place. Returns the number of distances computed.
pub fn robust_prune<T: Element>(
    store: &VectorStore<'_, T>,
    p: u32,
    pool: &mut Vec<Neighbor>,
    limits: PruneLimits,
    scratch: &mut PruneScratch,
    out: &mut Vec<u32>,
) -> u64 {
    out.clear();
    pool.retain(|c| c.id != p);
    pool.sort_unstable_by(|a, b| a.dist.total_cmp(&b.dist).then(a.id.cmp(&b.id)));
    pool.dedup_by_key(|c| c.id);
    pool.truncate(limits.max_candidates);
    if pool.is_empty() || limits.degree == 0 {
        return 0;
    }
    let occlude = &mut scratch.occlude;
    occlude.clear();
    occlude.resize(pool.len(), 0.0);
    let mut computed = 0u64;
    let mut cur_alpha = 1.0f32;
    while cur_alpha <= limits.alpha && out.len() < limits.degree {
        for i in 0..pool.len() {
            if out.len() >= limits.degree {
                break;
            }
            if occlude[i] > cur_alpha {
                continue;
            }
            occlude[i] = f32::MAX;
            out.push(pool[i].id);
            let chosen = store.point(pool[i].id);
            for t in i + 1..pool.len() {
                if occlude[t] > limits.alpha {
                    continue;
                }
                let djk = store.dist(&chosen, pool[t].id);
                computed += 1;
                let ratio = if djk == 0.0 {
                    f32::MAX
                } else {
                    pool[t].dist / djk
                };
                if ratio > occlude[t] {
                    occlude[t] = ratio;
                }
            }
        }
        cur_alpha *= defaults::ALPHA_STEP;
    }
    computed
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
        fn bounded_unique_no_self(seed in 0u64..1000, degree in 1usize..12, alpha in 1.0f32..2.0) {
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let data: Vec<f32> = (0..60 * 3).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let store = VectorStore::new(&data, 3, Metric::L2).unwrap();
            let mut pool = pool_of(&store, 5);
            pool.extend_from_slice(&pool.clone()[..10]);
            let mut out = Vec::new();
            let limits = PruneLimits { degree, alpha, max_candidates: 40 };
            robust_prune(&store, 5, &mut pool, limits, &mut PruneScratch::default(), &mut out);
            proptest::prop_assert!(!out.is_empty() && out.len() <= degree);
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

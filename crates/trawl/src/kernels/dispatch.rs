//! One cached runtime choice of kernel implementations for this CPU.
//!
//! [`kernels`] returns the best table the CPU supports (`avx512` > `avx2` > `scalar`), chosen
//! once and cached in a [`OnceLock`]; after the first call it costs one atomic load. The
//! environment variable `TRAWL_KERNELS=scalar|avx2|avx512`, read at that first call, caps the
//! level (for testing and comparison). A level the CPU lacks, or an unknown value, falls back
//! silently to the best supported level below it; [`Kernels::name`] says what was chosen.
//!
//! [`available`] lists every table this CPU supports, so one test suite runs over all of them.

use std::sync::OnceLock;

use crate::kernels::scalar;

/// Name of the environment variable that caps the kernel level.
pub const ENV_VAR: &str = "TRAWL_KERNELS";

/// A kernel returning `(⟨a, b⟩, ⟨a, a⟩, ⟨b, b⟩)`.
pub type DotNormsFn = fn(&[f32], &[f32]) -> (f32, f32, f32);

/// A one-to-many kernel: `out[i] = f(query, rows[i·d .. (i+1)·d])` with `d = query.len()`.
///
/// Requires `rows.len() == out.len() · d` (debug builds assert it); release builds fill
/// `min(out.len(), rows.len() / d)` entries (all of `out` with `0` when `d == 0`).
pub type ManyFn = fn(&[f32], &[f32], &mut [f32]);

/// A column kernel: `out[t] = f(x, column t)` where column `t` of the dimension-major block
/// `cols` is `(cols[k·stride + t])` for `k < x.len()`.
///
/// Used where one vector meets many that are kept transposed (robust prune's candidate pool):
/// each lane of a SIMD register holds a different candidate, so there is no horizontal sum.
/// Requires `out.len() ≤ stride` and, when `x` is not empty, `cols.len() ≥ (x.len() − 1)·stride
/// + out.len()`; otherwise every kernel falls back to the scalar reference, which reads only
/// what is in bounds (columns that run past `cols` are cut short).
pub type ColsFn = fn(&[f32], &[f32], usize, &mut [f32]);

/// A table of distance kernels for one instruction set.
///
/// Every kernel requires equal lengths (debug builds assert it); release builds compute over
/// the shorter length and never read out of bounds.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// Name of the instruction set (`scalar`, `avx2`, `avx512`).
    pub name: &'static str,
    /// Squared L2, f32.
    pub l2_f32: fn(&[f32], &[f32]) -> f32,
    /// Inner product, f32.
    pub dot_f32: fn(&[f32], &[f32]) -> f32,
    /// `(⟨a, b⟩, ⟨a, a⟩, ⟨b, b⟩)` in one pass, f32 (for cosine).
    pub dot_norms_f32: DotNormsFn,
    /// Squared L2 of one query against many rows, f32 (see [`ManyFn`]).
    pub l2_f32_many: ManyFn,
    /// Inner product of one query with many rows, f32 (see [`ManyFn`]).
    pub dot_f32_many: ManyFn,
    /// Squared L2 of one vector against the columns of a transposed block (see [`ColsFn`]).
    pub l2_f32_cols: ColsFn,
    /// Inner product of one vector with the columns of a transposed block (see [`ColsFn`]).
    pub dot_f32_cols: ColsFn,
    /// Squared L2, u8 (exact sum, rounded once to f32).
    pub l2_u8: fn(&[u8], &[u8]) -> f32,
    /// Inner product, u8 (exact sum, rounded once to f32).
    pub dot_u8: fn(&[u8], &[u8]) -> f32,
    /// Squared L2, i8 (exact sum, rounded once to f32).
    pub l2_i8: fn(&[i8], &[i8]) -> f32,
    /// Inner product, i8 (exact sum, rounded once to f32).
    pub dot_i8: fn(&[i8], &[i8]) -> f32,
}

/// The scalar reference table.
pub static SCALAR: Kernels = Kernels {
    name: "scalar",
    l2_f32: scalar::l2_f32,
    dot_f32: scalar::dot_f32,
    dot_norms_f32: scalar::dot_norms_f32,
    l2_f32_many: scalar::l2_f32_many,
    dot_f32_many: scalar::dot_f32_many,
    l2_f32_cols: scalar::l2_f32_cols,
    dot_f32_cols: scalar::dot_f32_cols,
    l2_u8: scalar::l2_u8,
    dot_u8: scalar::dot_u8,
    l2_i8: scalar::l2_i8,
    dot_i8: scalar::dot_i8,
};

/// The chosen table, copied in: after initialisation a kernel call is one atomic load of the
/// `OnceLock` state plus a load of the function pointer from this static's fixed address.
static KERNELS: OnceLock<Kernels> = OnceLock::new();

/// The kernels chosen for this process (best supported, capped by `TRAWL_KERNELS`).
#[inline]
pub fn kernels() -> &'static Kernels {
    KERNELS.get_or_init(|| *detect())
}

/// Every table this CPU supports, from the scalar reference up to the best.
pub fn available() -> Vec<&'static Kernels> {
    let mut out = vec![&SCALAR];
    #[cfg(target_arch = "x86_64")]
    {
        out.extend(crate::kernels::x86_64::avx2::table());
        out.extend(crate::kernels::x86_64::avx512::table());
    }
    out
}

/// Rank of a level name; `None` for unknown names.
fn level(name: &str) -> Option<u8> {
    match name {
        "scalar" => Some(0),
        "avx2" => Some(1),
        "avx512" => Some(2),
        _ => None,
    }
}

/// The best table in `available` whose level is at most `cap` (`None`: no cap).
fn choose(available: &[&'static Kernels], cap: Option<&str>) -> &'static Kernels {
    let cap = cap
        .map(|c| c.trim().to_ascii_lowercase())
        .and_then(|c| level(&c))
        .unwrap_or(u8::MAX);
    available
        .iter()
        .copied()
        .filter(|k| level(k.name).is_some_and(|l| l <= cap))
        .max_by_key(|k| level(k.name))
        .unwrap_or(&SCALAR)
}

fn detect() -> &'static Kernels {
    let cap = std::env::var(ENV_VAR).ok();
    choose(&available(), cap.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_available_starts_with_scalar_and_is_ordered() {
        let av = available();
        assert_eq!(av[0].name, "scalar");
        let levels: Vec<u8> = av.iter().map(|k| level(k.name).unwrap()).collect();
        assert!(levels.windows(2).all(|w| w[0] < w[1]), "{levels:?}");
        // Features enabled at compile time are always detected (this is how the SIMD tables
        // run under Miri, which reports only those: see docs/miri.md).
        let names: Vec<&str> = av.iter().map(|k| k.name).collect();
        if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
            assert!(names.contains(&"avx2"), "{names:?}");
        }
        if cfg!(all(
            target_feature = "avx512f",
            target_feature = "avx512bw",
            target_feature = "avx512vnni"
        )) {
            assert!(names.contains(&"avx512"), "{names:?}");
        }
    }

    #[test]
    fn kernels_choose_respects_cap_and_falls_back() {
        let av = available();
        let best = av.last().unwrap().name;
        assert_eq!(choose(&av, None).name, best);
        assert_eq!(choose(&av, Some("bogus")).name, best);
        assert_eq!(choose(&av, Some("scalar")).name, "scalar");
        assert_eq!(choose(&av, Some(" SCALAR ")).name, "scalar");
        // A cap the CPU cannot meet gives the best level below it.
        assert_eq!(choose(&[&SCALAR], Some("avx512")).name, "scalar");
        let avx2 = choose(&av, Some("avx2")).name;
        assert!(avx2 == "avx2" || avx2 == "scalar");
        assert_eq!(avx2, if av.len() > 1 { "avx2" } else { "scalar" });
    }

    #[test]
    fn kernels_chosen_table_is_available() {
        let chosen = kernels().name;
        assert!(available().iter().any(|k| k.name == chosen));
        // Without a cap in the environment, the best available table is chosen.
        if std::env::var(ENV_VAR).is_err() {
            assert_eq!(chosen, available().last().unwrap().name);
        }
    }
}

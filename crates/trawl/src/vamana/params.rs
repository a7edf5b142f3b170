//! Build parameters ([`VamanaParams`]), their validated form ([`VamanaConfig`]) and the build
//! error type ([`BuildError`]).

use crate::progress::Cancelled;
use crate::vamana::defaults;

/// User-facing Vamana build parameters. See [`crate::vamana::defaults`] for the reason of each default.
#[derive(Debug, Clone, PartialEq)]
pub struct VamanaParams {
    /// Maximum out-degree `R` (1 ..= 65 535).
    pub r: usize,
    /// Build search list size `L`; must be at least `R` (a smaller list rarely yields `R` good
    /// candidates, and DiskANN refuses it too).
    pub l: usize,
    /// Pruning factor `α ≥ 1`.
    pub alpha: f32,
    /// Most candidates a prune considers (`C ≥ R`).
    pub max_candidates: usize,
    /// Back-edge slack factor `≥ 1`: lists grow to `ceil(slack × R)` before a re-prune.
    pub slack: f32,
    /// Seed of the visit order and of the shard clustering.
    pub seed: u64,
    /// The order the points are linked in ([`defaults::VISIT_ORDER`]).
    pub order: VisitOrder,
    /// Passes over the points (1 ..= 4; default 1): a second pass searches the finished graph
    /// for each point again and prunes what it finds with the point's list (Vamana's
    /// original two passes).
    pub passes: usize,
    /// Memory the build may use, in bytes; `None` for no limit. When the estimate of a single
    /// build exceeds it, the build is split into overlapping shards.
    pub memory_budget_bytes: Option<u64>,
    /// After each prune (with `α > 1`), fill the list up to `R` with the nearest candidates
    /// the prune left out (DiskANN's `saturate_graph`, on in its disk-index build).
    pub saturate: bool,
}

impl Default for VamanaParams {
    fn default() -> Self {
        Self {
            r: defaults::MAX_DEGREE,
            l: defaults::BUILD_LIST_SIZE,
            alpha: defaults::ALPHA,
            max_candidates: defaults::MAX_CANDIDATES,
            slack: defaults::SLACK,
            seed: defaults::SEED,
            order: defaults::VISIT_ORDER,
            passes: 1,
            memory_budget_bytes: None,
            saturate: false,
        }
    }
}

/// The order a build links its points in.
///
/// The order matters when the ids are grouped by locality (rows appended cluster by cluster,
/// sorted by a key, a live set made of whole clusters): linked in id order, the first points
/// of the build search a graph made of one region only, and the edges between regions that
/// a search needs to cross from one to another are never made. Measured on gen-1M live sets
/// of whole k-means clusters (`bench/results/recall-stability.md`): recall@10 at L 64 0.80 in
/// id order, 0.93 in random order, 0.94 in blocks of 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisitOrder {
    /// Id order (DiskANN's): fastest on grouped ids, worst graph on them.
    Ids,
    /// A seeded random permutation.
    Random,
    /// Blocks of this many consecutive ids, the blocks in a seeded random order: the graph of
    /// a random order at the speed of id order (a thread links nearby points one after the
    /// other, so their searches share cached rows).
    Blocks(usize),
}

impl std::fmt::Display for VisitOrder {
    /// `ids`, `random` or `blocks:N` (what `VisitOrder`'s `FromStr` reads).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ids => f.write_str("ids"),
            Self::Random => f.write_str("random"),
            Self::Blocks(b) => write!(f, "blocks:{b}"),
        }
    }
}

impl std::str::FromStr for VisitOrder {
    type Err = String;

    /// `ids`, `random`, `blocks` (blocks of [`defaults::BUILD_CHUNK`]) or `blocks:N`, N ≥ 1.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ids" => Ok(Self::Ids),
            "random" => Ok(Self::Random),
            "blocks" => Ok(Self::Blocks(defaults::BUILD_CHUNK)),
            other => match other.strip_prefix("blocks:").map(str::parse::<usize>) {
                Some(Ok(b)) if b >= 1 => Ok(Self::Blocks(b)),
                _ => Err(format!(
                    "unknown visit order {other:?} (ids, random, blocks or blocks:N with N ≥ 1)"
                )),
            },
        }
    }
}

/// Validated build parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VamanaConfig {
    /// Maximum out-degree.
    pub r: usize,
    /// Build list size.
    pub l: usize,
    /// Pruning factor.
    pub alpha: f32,
    /// Most prune candidates.
    pub max_candidates: usize,
    /// Neighbour slots per node while building: `ceil(slack × R)`.
    pub slots: usize,
    /// Seed.
    pub seed: u64,
    /// Visit order.
    pub order: VisitOrder,
    /// Passes over the points.
    pub passes: usize,
    /// Memory budget in bytes.
    pub memory_budget_bytes: Option<u64>,
    /// Fill lists up to `R` after each prune.
    pub saturate: bool,
}

impl VamanaConfig {
    /// The limits robust prune runs under with this configuration.
    pub fn prune_limits(&self) -> crate::vamana::PruneLimits {
        crate::vamana::PruneLimits {
            degree: self.r,
            alpha: self.alpha,
            max_candidates: self.max_candidates,
            saturate: self.saturate,
        }
    }
}

/// Why a graph build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A parameter is out of range; fix the named parameter.
    #[error("invalid build parameter `{name}`: {reason}")]
    InvalidParam {
        /// The parameter.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The data set is empty: there is nothing to index.
    #[error("cannot build a graph over zero vectors")]
    Empty,
    /// More vectors than 32-bit node ids can address; split the data set.
    #[error("{n} vectors exceed the 2^32 - 1 node ids")]
    TooManyPoints {
        /// Number of vectors.
        n: usize,
    },
    /// A vector has a different dimension than the index; check the input files.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimMismatch {
        /// Expected dimension.
        expected: usize,
        /// Dimension found.
        got: usize,
    },
    /// Even a sharded build cannot fit the memory budget: raise the budget.
    #[error("memory budget {budget_bytes} bytes is too small; at least {needed_bytes} needed")]
    BudgetTooSmall {
        /// The budget given.
        budget_bytes: u64,
        /// The least the build needs.
        needed_bytes: u64,
    },
    /// Clustering for the sharded build failed (too few points for the shard count).
    #[error("shard clustering failed: {0}")]
    Clustering(#[from] crate::kernels::kmeans::KMeansError),
    /// The caller cancelled the build through [`crate::progress::Control`].
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl BuildError {
    /// What kind of failure this is: `Cancelled` when cancelled, else `InvalidInput` (a
    /// parameter, the data or the budget does not allow the build).
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Cancelled(_)
            | Self::Clustering(crate::kernels::kmeans::KMeansError::Cancelled(_)) => {
                crate::ErrorKind::Cancelled
            }
            _ => crate::ErrorKind::InvalidInput,
        }
    }
}

/// The largest build list size a build accepts (each build thread holds a candidate list of
/// this size; DiskANN's builds use 100–200).
pub const MAX_BUILD_L: usize = 100_000;

fn invalid(name: &'static str, reason: String) -> BuildError {
    BuildError::InvalidParam { name, reason }
}

impl VamanaParams {
    /// Checks every parameter and derives the build configuration.
    pub fn validate(&self) -> Result<VamanaConfig, BuildError> {
        if self.r == 0 || self.r > u16::MAX as usize {
            return Err(invalid("r", format!("{} is not in 1..=65535", self.r)));
        }
        if self.l < self.r {
            return Err(invalid(
                "l",
                format!("{} is smaller than r = {}", self.l, self.r),
            ));
        }
        if self.l > MAX_BUILD_L {
            return Err(invalid(
                "l",
                format!("{} is more than {MAX_BUILD_L}", self.l),
            ));
        }
        let most = 4 * u16::MAX as usize;
        if self.max_candidates > most {
            return Err(invalid(
                "max_candidates",
                format!("{} is more than {most}", self.max_candidates),
            ));
        }
        if self.memory_budget_bytes == Some(0) {
            return Err(invalid(
                "memory_budget",
                "0 bytes: give a positive budget, or none for an unsplit build".into(),
            ));
        }
        if !(self.alpha >= 1.0 && self.alpha.is_finite()) {
            return Err(invalid(
                "alpha",
                format!("{} is not a finite value ≥ 1", self.alpha),
            ));
        }
        if self.max_candidates < self.r {
            return Err(invalid(
                "max_candidates",
                format!("{} is smaller than r = {}", self.max_candidates, self.r),
            ));
        }
        if !(1..=4).contains(&self.passes) {
            return Err(invalid(
                "passes",
                format!("{} is not in 1..=4", self.passes),
            ));
        }
        if self.order == VisitOrder::Blocks(0) {
            return Err(invalid("order", "blocks of 0 points".into()));
        }
        if !(self.slack >= 1.0 && self.slack <= 4.0) {
            return Err(invalid("slack", format!("{} is not in 1..=4", self.slack)));
        }
        let slots = ((self.slack as f64) * self.r as f64).ceil() as usize;
        Ok(VamanaConfig {
            r: self.r,
            l: self.l,
            alpha: self.alpha,
            max_candidates: self.max_candidates,
            saturate: self.saturate,
            slots: slots.max(self.r),
            seed: self.seed,
            order: self.order,
            passes: self.passes,
            memory_budget_bytes: self.memory_budget_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let c = VamanaParams::default().validate().unwrap();
        assert_eq!((c.r, c.l, c.slots), (64, 100, 84));
    }

    #[test]
    fn bad_params_are_refused() {
        let bad = [
            VamanaParams {
                r: 0,
                ..Default::default()
            },
            VamanaParams {
                l: 10,
                ..Default::default()
            },
            VamanaParams {
                alpha: 0.9,
                ..Default::default()
            },
            VamanaParams {
                alpha: f32::NAN,
                ..Default::default()
            },
            VamanaParams {
                max_candidates: 8,
                ..Default::default()
            },
            VamanaParams {
                slack: 0.5,
                ..Default::default()
            },
            VamanaParams {
                order: VisitOrder::Blocks(0),
                ..Default::default()
            },
        ];
        for p in bad {
            assert!(
                matches!(p.validate(), Err(BuildError::InvalidParam { .. })),
                "{p:?}"
            );
        }
    }

    #[test]
    fn visit_orders_read_back_what_they_print() {
        for o in [
            VisitOrder::Ids,
            VisitOrder::Random,
            VisitOrder::Blocks(64),
            VisitOrder::Blocks(1),
        ] {
            assert_eq!(o.to_string().parse::<VisitOrder>(), Ok(o));
        }
        assert_eq!("blocks".parse::<VisitOrder>(), Ok(VisitOrder::Blocks(64)));
        for bad in ["blocks:0", "blocks:", "blocks:x", "id", ""] {
            assert!(bad.parse::<VisitOrder>().is_err(), "{bad:?}");
        }
    }
}

//! When a re-rank stops: the rules as policies over what each batch did.

use crate::search::rerank::TopK;

/// A re-rank's stop rule. Whatever the rule, a re-rank also stops when its candidates run
/// out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopRule {
    /// Re-rank every candidate.
    Exhaustive,
    /// DecoupleVS: stop after a batch in which fewer than `threshold × batch size` of its
    /// candidates entered the top-`K` (its *benefit*); 0 never stops early.
    Benefit {
        /// Share of a batch that must enter the top-`K` for the re-rank to go on.
        threshold: f32,
    },
    /// FusionANNS: stop once the share of the top-`K` a batch brought, `|Sₙ \ Sₙ₋₁| / K`,
    /// stayed below `epsilon` for `beta` batches in a row (strictly below: `epsilon` 0 never
    /// stops early).
    Stable {
        /// Change rate below which a batch counts as stable.
        epsilon: f32,
        /// Stable batches in a row that stop the re-rank.
        beta: usize,
    },
    /// Stop at the first candidate (in PQ order) that cannot enter the top-`K`: once `K`
    /// exact distances are in, `δ` is the largest amount by which a PQ distance overestimated
    /// an exact one so far, and a candidate is admitted only while its PQ distance is within
    /// `m·δ` of the `K`-th exact distance. Decided per candidate, not per batch.
    Bound {
        /// The bound's multiple of `δ`.
        m: f32,
    },
}

/// What one batch of a re-rank did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Candidates in the batch.
    pub len: usize,
    /// Offers made while the batch was re-ranked (its candidates, and what was scored with
    /// them: an IVF read's page mates) that entered the top-`K` (some may have left it again
    /// within the batch).
    pub entered: usize,
    /// Entries of the top-`K` new to it since the batch began ([`TopK::brought`]).
    pub brought: usize,
    /// `K`.
    pub k: usize,
}

/// A stop rule applied to one query: the rule and what it has seen so far.
#[derive(Debug, Clone, Copy)]
pub struct Stop {
    rule: StopRule,
    /// Stable batches in a row ([`StopRule::Stable`]).
    streak: usize,
    /// Largest PQ overestimate seen ([`StopRule::Bound`]).
    delta: f32,
}

impl Default for Stop {
    fn default() -> Self {
        Self::new(StopRule::Exhaustive)
    }
}

impl Stop {
    /// A query's stop state under `rule`.
    pub fn new(rule: StopRule) -> Self {
        Self {
            rule,
            streak: 0,
            delta: 0.0,
        }
    }

    /// The rule.
    pub fn rule(&self) -> StopRule {
        self.rule
    }

    /// Whether the rule decides per candidate ([`StopRule::Bound`]) rather than per batch.
    pub fn per_candidate(&self) -> bool {
        matches!(self.rule, StopRule::Bound { .. })
    }

    /// After a batch: whether the re-rank stops (batch rules; never for
    /// [`StopRule::Bound`] and [`StopRule::Exhaustive`]).
    #[inline]
    pub fn after_batch(&mut self, o: BatchOutcome) -> bool {
        match self.rule {
            StopRule::Exhaustive | StopRule::Bound { .. } => false,
            StopRule::Benefit { threshold } => {
                o.len > 0 && (o.entered as f32) < threshold * o.len as f32
            }
            StopRule::Stable { epsilon, beta } => {
                if (o.brought as f32 / o.k as f32) < epsilon {
                    self.streak += 1;
                    self.streak >= beta
                } else {
                    self.streak = 0;
                    false
                }
            }
        }
    }

    /// [`StopRule::Bound`]: learns from a candidate's PQ and exact distances.
    #[inline]
    pub fn learn(&mut self, pq: f32, exact: f32) {
        self.delta = self.delta.max(pq - exact);
    }

    /// [`StopRule::Bound`]: whether a candidate at PQ distance `pq` is beyond the bound given
    /// the top-`K` so far (never before `K` exact distances are in; never under other rules).
    #[inline]
    pub fn beyond(&self, pq: f32, top: &TopK) -> bool {
        match (self.rule, top.kth()) {
            (StopRule::Bound { m }, Some(kth)) => pq - m * self.delta > kth,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(len: usize, entered: usize, brought: usize) -> BatchOutcome {
        BatchOutcome {
            len,
            entered,
            brought,
            k: 10,
        }
    }

    #[test]
    fn benefit_stops_after_a_batch_below_its_threshold() {
        let mut s = Stop::new(StopRule::Benefit { threshold: 0.2 });
        assert!(!s.after_batch(outcome(10, 2, 0)));
        assert!(s.after_batch(outcome(10, 1, 5)));
        let mut never = Stop::new(StopRule::Benefit { threshold: 0.0 });
        assert!(!never.after_batch(outcome(10, 0, 0)));
    }

    #[test]
    fn stable_stops_after_beta_stable_batches_in_a_row() {
        let mut s = Stop::new(StopRule::Stable {
            epsilon: 0.15,
            beta: 2,
        });
        assert!(!s.after_batch(outcome(10, 9, 1)), "1 of 10 < 0.15: one");
        assert!(
            !s.after_batch(outcome(10, 9, 2)),
            "2 of 10: the streak breaks"
        );
        assert!(!s.after_batch(outcome(10, 0, 0)));
        assert!(s.after_batch(outcome(10, 0, 1)));
        let mut never = Stop::new(StopRule::Stable {
            epsilon: 0.0,
            beta: 1,
        });
        assert!(!never.after_batch(outcome(10, 0, 0)));
    }

    #[test]
    fn bound_admits_within_m_delta_of_the_kth() {
        let mut s = Stop::new(StopRule::Bound { m: 2.0 });
        let mut top = TopK::new(1);
        assert!(!s.beyond(100.0, &top), "nothing is beyond before K are in");
        top.offer(5.0, 1);
        s.learn(6.0, 5.0); // δ = 1
        assert!(!s.beyond(7.0, &top), "7 − 2 ≤ 5");
        assert!(s.beyond(7.5, &top));
        assert!(!s.after_batch(outcome(10, 0, 0)), "not a batch rule");
    }
}

//! A label-aware merge: when the old version was built label-aware (it has label start
//! nodes, [`crate::kinds::graph::label_starts`]), the merged version stays so.
//!
//! - **Labels tracked**: those of the merged attributes the old version tracked, and labels
//!   it did not have (brought by the new vectors), under the build's rule (at least 2 members,
//!   at most [`defaults::LABEL_MAX_SHARE`] of the slots). A label the old version had but did
//!   not track stays untracked: its old members were never linked by label.
//! - **Start nodes**: a label keeps its start while that node stays; otherwise (deleted, or a
//!   new label) the member nearest its members' centroid, as the build chooses.
//! - **Candidates of a new vector**: besides the plain search's, for each of its tracked
//!   labels (its rarest [`defaults::LABEL_SEARCHES`]) the old graph searched for that label
//!   inline from the label's start, through its members only (the query path's gate; not on
//!   the decoupled layout, whose searches start from the medoid), and the nearest new vectors
//!   carrying it (exactly, among at most [`NEW_MEMBERS_EXACT`]).
//! - **Prunes** (the new vectors' lists, the repairs around deleted nodes, the back-edges over
//!   `R`) keep a path for every label ([`crate::vamana::robust_prune_labelled`]).

use std::collections::HashMap;

use rayon::prelude::*;

use super::{live_filter, MergeInput, Plan};
use crate::filter::attrs::LABEL_FIELD;
use crate::filter::{Attributes, CmpOp, Expr, FilterParams, Filters, Value};
use crate::kinds::graph::search::{BeamParams, SearchParams, Strategy};
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::IndexBuildError;
use crate::progress::Control;
use crate::vamana::labels::NO_START;
use crate::vamana::{defaults, BuildLabels, VectorStore};

/// Most new vectors of one label a new vector is compared with exactly (past it, an even
/// sample of them).
pub const NEW_MEMBERS_EXACT: usize = 4096;

/// The labels the merged version links by, with their start nodes; `None` when the merge is
/// not label-aware (the old version has no start nodes, or no label is tracked).
pub(super) fn labels<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    merged: &Attributes,
    store: &VectorStore<'_, T>,
    ctl: &Control,
) -> Result<Option<BuildLabels>, IndexBuildError> {
    let Some(old_starts) = input.old.label_starts() else {
        return Ok(None);
    };
    let old_attrs = input.old.attrs();
    let old_start = |name: &str| -> Option<Option<u32>> {
        let id = old_attrs.and_then(|a| a.label_id(name))?;
        Some(old_starts.of(id))
    };
    let n = plan.n_slots;
    let members: Vec<Vec<u32>> = merged
        .labels()
        .map(|(name, rows)| match old_start(name) {
            // Had by the old version without a start: not linked by label, not tracked.
            Some(None) => Vec::new(),
            _ => rows.iter().filter(|&s| (s as usize) < n).collect(),
        })
        .collect();
    let mut lb =
        BuildLabels::new(n, members, defaults::LABEL_MAX_SHARE).map_err(IndexBuildError::Graph)?;
    if lb.tracked() == 0 {
        return Ok(None);
    }
    lb.choose_starts(store, ctl)
        .map_err(IndexBuildError::Graph)?;
    for (l, (name, _)) in merged.labels().enumerate() {
        if let Some(Some(s)) = old_start(name) {
            if !plan.is_free(s) && lb.starts()[l] != NO_START {
                lb.set_start(l as u32, s);
            }
        }
    }
    Ok(Some(lb))
}

/// Each new vector's candidates from its labels: the old graph searched for each of its
/// tracked labels from the label's start, and the nearest new vectors carrying it.
pub(super) fn candidates<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    lb: &BuildLabels,
    merged: &Attributes,
    store: &VectorStore<'_, T>,
    ctl: &Control,
) -> Result<Vec<Vec<u32>>, IndexBuildError> {
    let old = input.old;
    let dim = old.dim();
    let l = input.cfg.l.max(10);
    let names: Vec<&str> = merged.labels().map(|(name, _)| name).collect();
    let mut is_new = vec![false; plan.n_slots];
    for &s in &plan.new_slot {
        is_new[s as usize] = true;
    }
    // The old graph is searched for a label it tracked, when it keeps a live node and its
    // searches start from the label starts (not the decoupled layout's).
    let old_attrs = old.attrs();
    let old_tracks = |name: &str| {
        let id = old_attrs.and_then(|a| a.label_id(name));
        id.and_then(|id| old.label_starts().and_then(|ls| ls.of(id)))
            .is_some()
    };
    let disk = input.segments.is_none() && (0..old.n() as u32).any(|s| !plan.is_free(s));
    let mut new_members: HashMap<u32, Vec<u32>> = HashMap::new();
    let (mut rows, mut exprs, mut owner) = (Vec::new(), Vec::new(), Vec::new());
    let mut searched = Vec::new();
    for (i, &s) in plan.new_slot.iter().enumerate() {
        lb.searched(s, &mut searched);
        for &lab in &searched {
            new_members.entry(lab).or_insert_with(|| {
                let m: Vec<u32> = lb
                    .members(lab)
                    .iter()
                    .copied()
                    .filter(|&x| is_new[x as usize])
                    .collect();
                spread(m, NEW_MEMBERS_EXACT)
            });
            let name = names[lab as usize];
            if disk && old_tracks(name) {
                rows.extend_from_slice(plan.new_row(i, dim));
                exprs.push(Some(Expr::Cmp {
                    field: LABEL_FIELD.into(),
                    op: CmpOp::Eq,
                    value: Value::Str(name.into()),
                }));
                owner.push(i);
            }
        }
    }
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); plan.new_slot.len()];
    if !owner.is_empty() {
        let params = SearchParams {
            k: l,
            l,
            strategy: Strategy::Beam(BeamParams {
                width: 4,
                ..BeamParams::default()
            }),
            ..SearchParams::default()
        };
        // The label's subgraph from its start, at the build's list size.
        let fp = FilterParams {
            plan: Some(crate::filter::Plan::Inline),
            max_scale: 1.0,
            ..FilterParams::default()
        };
        let found = old
            .search_rows_where(
                &rows,
                &params,
                input.threads,
                8,
                Filters::PerQuery(&exprs),
                &fp,
                Some(&live_filter(input)),
            )
            .map_err(IndexBuildError::Search)?;
        for (q, &i) in owner.iter().enumerate() {
            let hits = &found.ids[q * found.k..(q + 1) * found.k];
            out[i].extend(hits.iter().copied().filter(|&x| x != u32::MAX));
        }
    }
    ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
    // The nearest new vectors of each label, exactly.
    out.par_iter_mut().enumerate().for_each_init(
        || (Vec::new(), Vec::new()),
        |(searched, dists), (i, cands)| {
            let s = plan.new_slot[i];
            lb.searched(s, searched);
            let probe = store.point(s);
            for lab in searched.iter() {
                let Some(m) = new_members.get(lab) else {
                    continue;
                };
                store.dist_batch(&probe, m, dists);
                let mut near: Vec<(f32, u32)> = dists
                    .iter()
                    .copied()
                    .zip(m.iter().copied())
                    .filter(|&(_, x)| x != s)
                    .collect();
                if near.len() > l {
                    near.select_nth_unstable_by(l, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    near.truncate(l);
                }
                cands.extend(near.into_iter().map(|(_, x)| x));
            }
            cands.sort_unstable();
            cands.dedup();
        },
    );
    Ok(out)
}

/// At most `most` of `m`, evenly spread over it.
fn spread(m: Vec<u32>, most: usize) -> Vec<u32> {
    if m.len() <= most {
        return m;
    }
    (0..most).map(|i| m[i * m.len() / most]).collect()
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn a_sample_is_spread_over_the_members() {
        let m: Vec<u32> = (0..10).collect();
        assert_eq!(spread(m.clone(), 20), m);
        assert_eq!(spread(m, 5), vec![0, 2, 4, 6, 8]);
    }
}

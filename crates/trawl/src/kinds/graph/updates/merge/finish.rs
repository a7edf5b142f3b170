//! The merge's other files: the PQ codes, the attributes and their labels' start nodes, the
//! entry index and the recall monitor's figures on the merged version.

use std::path::Path;

use super::{decoupled, MergeInput, Plan};
use crate::data::Matrix;
use crate::filter::Attributes;
use crate::kinds::graph::label_starts::{self, LabelStarts};
use crate::kinds::graph::layout::packed::PackedMeta;
use crate::kinds::graph::monitor::RecallPoint;
use crate::kinds::graph::search::entry::{self, EntryIndex, EntryParams};
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::updates::ids::SlotIds;
use crate::kinds::graph::{
    payload_crc, DiskIndex, IndexBuildError, IndexLayout, PQ_CODES_FILE, PQ_FILE,
};
use crate::progress::Control;
use crate::quant::pq::PqCodes;
use crate::vamana::VectorStore;

/// Writes the PQ codes of the new version (old codes for kept slots, new codes for new
/// vectors) and the old codebook; returns the bytes written.
pub(super) fn write_pq<T: DeltaElement>(
    old: &DiskIndex,
    plan: &Plan<'_, T>,
    staging: &Path,
) -> Result<u64, IndexBuildError> {
    let dim = old.dim();
    let n_slots = plan.n_slots;
    let old_codes = old.codes().ok_or_else(|| {
        IndexBuildError::Search(crate::search::SearchError::Unsupported(
            "merging needs the PQ codes in memory".into(),
        ))
    })?;
    let m = old_codes.m();
    let mut codes = vec![0u8; n_slots * m];
    for s in 0..old.n().min(n_slots) {
        if !plan.is_free(s as u32) {
            codes[s * m..(s + 1) * m].copy_from_slice(old_codes.code(s));
        }
    }
    for (i, &s) in plan.new_slot.iter().enumerate() {
        old.pq()
            .encode_one(
                plan.new_row(i, dim),
                &mut codes[s as usize * m..(s as usize + 1) * m],
            )
            .map_err(IndexBuildError::from)?;
    }
    let codes =
        PqCodes::from_vec(codes, m, old_codes.centroids_per_subspace()).ok_or_else(|| {
            IndexBuildError::Search(crate::search::SearchError::Internal(
                "PQ codes of the merge have a bad shape".into(),
            ))
        })?;
    let mut bytes = codes.save(&staging.join(PQ_CODES_FILE))?;
    bytes += old.pq().save(&staging.join(PQ_FILE))?;
    Ok(bytes)
}

/// When the old version had an entry index: a new one over a sample of the new version's live
/// slots, at the old one's ratio. Returns the bytes written.
pub(super) fn write_entry<T: DeltaElement>(
    old: &DiskIndex,
    ids: &SlotIds,
    store: &VectorStore<'_, T>,
    meta: &PackedMeta,
    staging: &Path,
    ctl: &Control,
) -> Result<u64, IndexBuildError> {
    let Some(e) = old.entry() else {
        return Ok(0);
    };
    let dim = old.dim();
    let live: Vec<u32> = (0..meta.n as u32).filter(|&s| !ids.is_hole(s)).collect();
    let ratio = (e.len() as f64 / old.n().max(1) as f64).clamp(1e-6, 1.0);
    let want = ((live.len() as f64 * ratio).round() as usize).clamp(1, live.len().max(1));
    if live.is_empty() {
        return Ok(0);
    }
    let params = EntryParams {
        ratio,
        ..EntryParams::default()
    };
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(params.seed);
    let mut pick: Vec<u32> = rand::seq::index::sample(&mut rng, live.len(), want)
        .into_iter()
        .map(|i| live[i])
        .collect();
    pick.sort_unstable();
    let mut rows = Vec::with_capacity(pick.len() * dim);
    for &s in &pick {
        rows.extend_from_slice(store.row(s as usize));
    }
    let rows = Matrix::from_vec(rows, dim).ok_or(crate::vamana::BuildError::Empty)?;
    let e = EntryIndex::from_sample(pick, rows, old.metric(), &params, ctl)?;
    Ok(e.save(&staging.join(entry::FILE_NAME), meta.n, meta.pq_codes_crc)?)
}

/// The old version's hot-node order carried over this merge, and the slots the merge fills
/// (see [`crate::kinds::graph::hot`]), when it may be: the old version has a readable one,
/// keeps its start node `medoid` and has no entry index (a merge samples a new one, and
/// searches start from its nodes), and the slots changed since the ranking, this merge's
/// deletes and inserts with them, stay within [`MergeInput::hot_rerank_share`] of the `live`
/// vectors of the new version. `None`: rank afresh.
pub(super) fn carried_hot_order<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    medoid: u32,
    live: usize,
) -> Option<(crate::kinds::graph::hot::HotOrder, Vec<u32>)> {
    let old = input.old;
    if old.medoid() != medoid || old.entry().is_some() || input.hot_rerank_share <= 0.0 {
        return None;
    }
    // An unreadable order (damaged, or of another build) is ranked afresh, not an error.
    let hot = old.hot_order().ok().flatten()?;
    let deleted = plan.deleted.iter().filter(|&&d| d).count() as u64;
    let changed = deleted + plan.new_slot.len() as u64;
    let share = (hot.changed() + changed) as f64 / live.max(1) as f64;
    (share <= input.hot_rerank_share).then(|| {
        let kept = hot.carried(|s| (s as usize) < old.n() && !plan.is_free(s), changed);
        (kept, plan.new_slot.clone())
    })
}

/// The recall monitor on the merged version in `staging` (read through the page cache: just
/// written): its figures and the number of vectors searched. Then the merged version's
/// hot-node order ([`crate::kinds::graph::hot`]: the `carried` order and new slots, when
/// given, refreshed by [`crate::kinds::graph::hot::REFRESH_DIV`]-fold fewer sample searches;
/// else ranked afresh)
/// and, for a decoupled merge of a version that had them, its refinement codes
/// ([`crate::kinds::graph::refine_file`]), written into `staging`; the order's slots changed
/// since its ranking, and the bytes written.
pub(super) fn monitor<T: DeltaElement>(
    input: &MergeInput<'_>,
    staging: &Path,
    vectors: &[T],
    ids: &SlotIds,
    carried: Option<(crate::kinds::graph::hot::HotOrder, Vec<u32>)>,
) -> Result<(Vec<RecallPoint>, usize, u64, u64), IndexBuildError> {
    let dim = input.old.dim();
    let mut staged = DiskIndex::open(
        staging,
        crate::kinds::graph::OpenOptions {
            layout: if decoupled(input).is_some() {
                IndexLayout::Decoupled
            } else {
                IndexLayout::Packed
            },
            direct: false,
            ..crate::kinds::graph::OpenOptions::default()
        },
    )?;
    let measured = crate::kinds::graph::monitor::measure(
        &staged,
        &|s| &vectors[s as usize * dim..(s as usize + 1) * dim],
        &|s| !ids.is_hole(s),
    )?;
    let hot_path = staging.join(crate::kinds::graph::hot::FILE_NAME);
    let (mut bytes, hot_changed) = match carried {
        Some((hot, new_slots)) => {
            use crate::kinds::graph::hot;
            let meta = *staged.meta();
            let samples = hot::sample_searches(staged.n()) / hot::REFRESH_DIV;
            let threads = rayon::current_num_threads();
            let (fresh, _) = staged.rank_hot_nodes_by(samples, threads, &Control::silent())?;
            let hot = hot.refreshed(&fresh, hot::REFRESH_WEIGHT, &new_slots);
            (
                hot.save(&hot_path, meta.n, meta.pq_codes_crc)?,
                hot.changed(),
            )
        }
        None => {
            let threads = rayon::current_num_threads();
            (
                staged.save_hot_order(&hot_path, threads, &Control::silent())?,
                0,
            )
        }
    };
    let refine_path = |d: &Path| d.join(crate::kinds::graph::refine_file::FILE_NAME);
    if decoupled(input).is_some() && refine_path(input.old.dir()).is_file() {
        // The refinement codes of the merged version (the old one had them), measured on
        // live slots' vectors: `n · (dim + 4)` bytes written, every segment read.
        let n = staged.n();
        let picks = crate::kinds::graph::cache_load::sampled_ids(
            n,
            crate::kinds::graph::refine_file::SAMPLES.min(n),
        );
        let mut queries = Vec::new();
        for s in picks.into_iter().filter(|&s| !ids.is_hole(s)) {
            let row = vectors.get(s as usize * dim..(s as usize + 1) * dim);
            queries.extend_from_slice(bytemuck::cast_slice(row.unwrap_or(&[])));
        }
        bytes += staged.save_refine(
            &refine_path(staging),
            &queries,
            rayon::current_num_threads(),
            &Control::silent(),
        )?;
    }
    drop(staged);
    Ok((measured.0, measured.1, hot_changed, bytes))
}

/// The attributes of the new version, when the old one or the delta has any: the kept slots'
/// rows where they are, the new vectors' rows at their slots.
pub(super) fn merged_attrs<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
) -> Result<Option<Attributes>, IndexBuildError> {
    let delta = input.delta.attrs();
    let old = input.old.attrs();
    if delta.is_none() && old.is_none() {
        return Ok(None);
    }
    let n_old = input.old.n() as u32;
    let empty = Attributes::empty(n_old);
    let old = old.map_or(&empty, |a| &**a);
    let kept: roaring::RoaringBitmap = (0..n_old).filter(|&s| !plan.is_free(s)).collect();
    let mut placed: Vec<(u32, u32)> = plan
        .delta_slot
        .iter()
        .map(|(&d, &s)| (d as u32, s))
        .collect();
    placed.sort_unstable();
    let n = u32::try_from(plan.n_slots).map_err(|_| {
        IndexBuildError::Attrs(crate::filter::FilterError::Attrs(format!(
            "{} slots",
            plan.n_slots
        )))
    })?;
    let merged = old
        .merged(n, &kept, delta.as_deref(), &placed)
        .map_err(IndexBuildError::Attrs)?;
    Ok(Some(merged))
}

/// Writes the new version's attributes (`attrs.trawl`) and, from a label-aware merge, the
/// start nodes of their labels (`label-starts.trawl`, tagged with the new PQ codes and
/// attributes). Returns the bytes written.
pub(super) fn write_attrs(
    merged: Option<&Attributes>,
    labels: Option<&crate::vamana::BuildLabels>,
    meta: &PackedMeta,
    staging: &Path,
) -> Result<u64, IndexBuildError> {
    let Some(merged) = merged else {
        return Ok(0);
    };
    let path = staging.join(crate::filter::file::FILE_NAME);
    crate::filter::file::save(merged, &path)?;
    let mut bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if let Some(lb) = labels {
        let starts = staging.join(label_starts::FILE_NAME);
        LabelStarts::new(lb.starts().to_vec()).save(
            &starts,
            meta.n,
            meta.pq_codes_crc,
            payload_crc(&path)?,
        )?;
        bytes += std::fs::metadata(&starts).map(|m| m.len()).unwrap_or(0);
    }
    Ok(bytes)
}

/// A decoupled merge's vector segments ([`super::segment_files`]), with their figures in
/// `report`; nothing for a packed merge.
pub(super) fn write_segments<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    vectors: &[T],
    staging: &Path,
    report: &mut super::MergeReport,
) -> Result<(), IndexBuildError> {
    let (Some(d), Some(policy)) = (decoupled(input), input.segments) else {
        return Ok(());
    };
    let old = input.old;
    let n_old = old.n();
    let keep = |s: u32| (s as usize) < n_old && !plan.is_free(s);
    let seg = super::segment_files::write_segments::<T>(
        d,
        n_old,
        plan.n_slots,
        &keep,
        &plan.new_slot,
        vectors,
        old.dim(),
        policy,
        staging,
        old.dir(),
    )?;
    report.bytes_written += seg.bytes_written;
    report.segments = Some(seg.report);
    Ok(())
}

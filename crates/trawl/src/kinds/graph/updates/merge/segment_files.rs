//! The vector segments of a decoupled merge (DecoupleVS §3.5): which old segments are
//! garbage-collected, the one new segment, the kept segments' hard links and the new vector
//! map.

use std::path::Path;

use super::{SegmentPolicy, SegmentReport};
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::Element;
use crate::kinds::graph::layout::decoupled::vectors::{
    CompressedGeometry, CompressedVectorWriter, VectorParams, VectorPlanner,
};
use crate::kinds::graph::search::DecoupledLayout;
use crate::kinds::graph::updates::segments::{self, VectorMap, GONE};
use crate::kinds::graph::IndexBuildError;

/// Per slot `(segment, local id)` of a decoupled layout (`GONE` past its map): the vector
/// map's, else the vector keys of a keyed graph file (vectors in graph order), else identity.
pub(super) fn slot_map(d: &DecoupledLayout, n: usize) -> Result<Vec<(u32, u32)>, IndexBuildError> {
    Ok(match d.slot_map() {
        Some(m) => m.to_vec(),
        None => match d.graph().keys()? {
            Some(keys) => keys.into_iter().map(|k| (0, k)).collect(),
            None => (0..n as u32).map(|s| (0, s)).collect(),
        },
    })
}

/// What [`write_segments`] wrote.
pub(super) struct SegmentsOut {
    pub report: SegmentReport,
    pub bytes_written: u64,
}

/// The old segments and which of them a merge collects.
struct Collection {
    /// File names of the old segments.
    names: Vec<String>,
    /// Vectors in each.
    counts: Vec<u64>,
    /// Whether each is collected.
    collect: Vec<bool>,
    /// The share of each one's vectors that is dead after this merge.
    dead_share: Vec<f64>,
}

/// Decides which old segments are collected: dead share over the policy's, or the smallest
/// past its segment count.
fn choose(
    d: &DecoupledLayout,
    old_map: &[(u32, u32)],
    keep: &dyn Fn(u32) -> bool,
    has_new: bool,
    policy: SegmentPolicy,
) -> Collection {
    let names: Vec<String> = d
        .segments()
        .iter()
        .map(|f| {
            f.path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let counts: Vec<u64> = d.segments().iter().map(|f| f.geometry().n).collect();
    // Live vectors per old segment after this merge.
    let mut live = vec![0u64; names.len()];
    for (s, &(sg, _)) in old_map.iter().enumerate() {
        if sg != GONE.0 && keep(s as u32) {
            live[sg as usize] += 1;
        }
    }
    let dead_share: Vec<f64> = (0..names.len())
        .map(|i| 1.0 - live[i] as f64 / counts[i].max(1) as f64)
        .collect();
    let mut collect: Vec<bool> = (0..names.len())
        .map(|i| live[i] == 0 || dead_share[i] > policy.gc_dead_share)
        .collect();
    // Bound the segment count: fold the smallest kept segments in too.
    let limit = policy.max_segments.max(1);
    loop {
        let kept = collect.iter().filter(|&&c| !c).count();
        let moving = has_new || collect.iter().zip(&live).any(|(&c, &l)| c && l > 0);
        if kept + usize::from(moving) <= limit {
            break;
        }
        let Some(i) = (0..names.len())
            .filter(|&i| !collect[i])
            .min_by_key(|&i| (live[i], std::cmp::Reverse(i)))
        else {
            break;
        };
        collect[i] = true;
    }
    Collection {
        names,
        counts,
        collect,
        dead_share,
    }
}

/// The vector segments of a decoupled merge: decides which old segments are collected (dead
/// share over the policy's, or the smallest past its segment count), writes the new vectors
/// and the collected segments' live vectors into one new segment (in slot order, compressed
/// like the layout's), hard-links the kept segment files into `staging` (the commit then
/// deletes the others) and writes the new `vmap.trawl`.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_segments<T: Element>(
    d: &DecoupledLayout,
    n_old: usize,
    n_slots: usize,
    keep: &dyn Fn(u32) -> bool,
    new_slot: &[u32],
    vectors: &[T],
    dim: usize,
    policy: SegmentPolicy,
    staging: &Path,
    dir: &Path,
) -> Result<SegmentsOut, IndexBuildError> {
    let old_map = slot_map(d, n_old)?;
    let has_new = !new_slot.is_empty();
    let Collection {
        names,
        counts,
        collect,
        dead_share,
    } = choose(d, &old_map, keep, has_new, policy);
    // Slots whose vectors go into the new segment, in slot order.
    let mut is_new = vec![false; n_slots];
    for &s in new_slot {
        is_new[s as usize] = true;
    }
    let moves = |s: usize| -> bool {
        is_new[s]
            || (s < n_old
                && keep(s as u32)
                && old_map[s].0 != GONE.0
                && collect[old_map[s].0 as usize])
    };
    let written: Vec<u32> = (0..n_slots as u32).filter(|&s| moves(s as usize)).collect();
    // Index of each kept segment in the new map.
    let mut renumber = vec![u32::MAX; names.len()];
    let mut segs: Vec<(String, u64)> = Vec::new();
    for i in 0..names.len() {
        if !collect[i] {
            renumber[i] = segs.len() as u32;
            segs.push((names[i].clone(), counts[i]));
        }
    }
    let mut report = SegmentReport {
        collected: (0..names.len())
            .filter(|&i| collect[i])
            .map(|i| (names[i].clone(), dead_share[i]))
            .collect(),
        ..SegmentReport::default()
    };
    let mut bytes_written = 0u64;
    let new_index = segs.len() as u32;
    if !written.is_empty() {
        let name = segments::segment_name(next_number(&names));
        let file_bytes = write_segment(&staging.join(&name), &written, vectors, dim)?;
        bytes_written += file_bytes;
        report.written = Some(name.clone());
        report.written_vectors = written.len() as u64;
        report.moved_vectors = written.iter().filter(|&&s| !is_new[s as usize]).count() as u64;
        report.written_bytes = file_bytes;
        segs.push((name, written.len() as u64));
    }
    let mut local_of_written = vec![u32::MAX; n_slots];
    for (k, &s) in written.iter().enumerate() {
        local_of_written[s as usize] = k as u32;
    }
    let slots: Vec<(u32, u32)> = (0..n_slots)
        .map(|s| {
            if local_of_written[s] != u32::MAX {
                (new_index, local_of_written[s])
            } else if s < n_old && keep(s as u32) && old_map[s].0 != GONE.0 {
                (renumber[old_map[s].0 as usize], old_map[s].1)
            } else {
                GONE
            }
        })
        .collect();
    let map = VectorMap {
        segments: segs,
        slots,
    };
    bytes_written += link_and_map(&map, staging, dir)?;
    report.segments = map.segments.len();
    report.segment_bytes = map
        .segments
        .iter()
        .map(|(n, _)| std::fs::metadata(staging.join(n)).map_or(0, |m| m.len()))
        .sum();
    Ok(SegmentsOut {
        report,
        bytes_written,
    })
}

/// The number of the merge's new segment: one past the highest of `names`.
fn next_number(names: &[String]) -> u64 {
    names
        .iter()
        .filter_map(|n| {
            n.strip_prefix("vectors-")
                .and_then(|r| r.strip_suffix(".trawl"))
                .and_then(|r| r.parse::<u64>().ok())
        })
        .max()
        .unwrap_or(0)
        + 1
}

/// Writes the vectors of slots `written` (in that order) into a new segment file at `path`,
/// compressed like the layout's; returns its bytes.
fn write_segment<T: Element>(
    path: &Path,
    written: &[u32],
    vectors: &[T],
    dim: usize,
) -> Result<u64, IndexBuildError> {
    let bad = |m: String| IndexBuildError::File(FileError::new(path, FileErrorKind::Invalid(m)));
    let geo = CompressedGeometry::new(
        T::DTYPE,
        dim,
        written.len() as u64,
        &VectorParams::default(),
    )
    .map_err(bad)?;
    let row = |s: u32| -> &[u8] {
        bytemuck::cast_slice(&vectors[s as usize * dim..(s as usize + 1) * dim])
    };
    let mut planner = VectorPlanner::new(geo).map_err(bad)?;
    for &s in written {
        planner.push(row(s)).map_err(bad)?;
    }
    let plan = planner.finish().map_err(bad)?;
    let mut w = CompressedVectorWriter::create(path, plan)?;
    for &s in written {
        w.push(row(s))?;
    }
    Ok(w.finish()?.file_bytes)
}

/// Hard-links the kept segments of `map` into `staging` (the same files: nothing copied) and
/// writes the new vector map there; returns the map's bytes.
fn link_and_map(map: &VectorMap, staging: &Path, dir: &Path) -> Result<u64, IndexBuildError> {
    for (name, _) in &map.segments {
        let to = staging.join(name);
        if to.exists() {
            continue;
        }
        let from = dir.join(name);
        std::fs::hard_link(&from, &to).map_err(|e| FileError::new(&from, e.into()))?;
    }
    Ok(map.save(&staging.join(segments::FILE_NAME))?)
}

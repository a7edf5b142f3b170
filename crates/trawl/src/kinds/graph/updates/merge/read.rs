//! The merge's read pass: one sequential pass over the old version.

use indicatif::ProgressBar;

use super::segment_files::slot_map;
use super::{decoupled, MergeInput, Plan};
use crate::kinds::graph::search::DecoupledLayout;
use crate::kinds::graph::updates::delta::DeltaElement;
use crate::kinds::graph::IndexBuildError;
use crate::progress::Control;

/// What the read pass took from the old version.
pub(super) struct Read<T> {
    /// Every vector of the new version, by slot: the live old ones and the new ones.
    pub vectors: Vec<T>,
    /// The list of every old slot (empty for a hole), as on disk.
    pub lists: Vec<Vec<u32>>,
    /// The vectors of the nodes this merge deletes, in slot order (the in-place delete
    /// phase searches for them).
    pub deleted_vectors: Vec<T>,
    /// The old medoid's vector (empty when the old version had no such slot).
    pub medoid_vec: Vec<T>,
}

/// Reads the vectors of live nodes, every list and the deleted nodes' vectors, then places the
/// new vectors at their slots.
pub(super) fn read<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    ctl: &Control,
) -> Result<Read<T>, IndexBuildError> {
    let old = input.old;
    let dim = old.dim();
    let mut read = Read {
        vectors: vec![T::default(); plan.n_slots * dim],
        lists: vec![Vec::new(); old.n()],
        deleted_vectors: Vec::new(),
        medoid_vec: Vec::new(),
    };
    let bar = ctl.bar("merge: reading", old.n() as u64);
    if let Some(d) = decoupled(input) {
        read_decoupled(d, input, plan, &mut read, &bar, ctl)?;
    } else {
        read_packed(input, plan, &mut read, &bar, ctl)?;
    }
    bar.finish_and_clear();
    for (i, &s) in plan.new_slot.iter().enumerate() {
        read.vectors[s as usize * dim..(s as usize + 1) * dim]
            .copy_from_slice(plan.new_row(i, dim));
    }
    Ok(read)
}

/// Decoupled: the vectors from their segments (each read sequentially), the lists from the
/// graph file.
fn read_decoupled<T: DeltaElement>(
    d: &DecoupledLayout,
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    read: &mut Read<T>,
    bar: &ProgressBar,
    ctl: &Control,
) -> Result<(), IndexBuildError> {
    let medoid = input.old.medoid();
    let vb = input.old.dim() * std::mem::size_of::<T>();
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut read.vectors[..]);
    let medoid_vec = &mut read.medoid_vec;
    let n_deleted = plan.deleted.iter().filter(|&&x| x).count();
    // Where each deleted slot's vector goes in `deleted_vectors` (slot order).
    let mut deleted_at = vec![u32::MAX; input.old.n()];
    for (k, s) in (0..input.old.n()).filter(|&s| plan.deleted[s]).enumerate() {
        deleted_at[s] = k as u32;
    }
    let mut deleted_bytes = vec![0u8; n_deleted * vb];
    let map = slot_map(d, input.old.n())?;
    let mut of_local: Vec<Vec<u32>> = d
        .segments()
        .iter()
        .map(|f| vec![u32::MAX; f.geometry().n as usize])
        .collect();
    for (slot, &(sg, l)) in map.iter().enumerate() {
        if let Some(x) = of_local
            .get_mut(sg as usize)
            .and_then(|v| v.get_mut(l as usize))
        {
            *x = slot as u32;
        }
    }
    for (si, f) in d.segments().iter().enumerate() {
        let inv = &of_local[si];
        f.scan(|local, raw| {
            let Some(&slot) = inv.get(local as usize) else {
                return;
            };
            if slot == u32::MAX {
                return;
            }
            if slot == medoid {
                *medoid_vec = raw
                    .chunks_exact(std::mem::size_of::<T>())
                    .map(bytemuck::pod_read_unaligned::<T>)
                    .collect();
            }
            if !plan.is_free(slot) {
                bytes[slot as usize * vb..(slot as usize + 1) * vb].copy_from_slice(raw);
            } else if let Some(&k) = deleted_at.get(slot as usize).filter(|&&k| k != u32::MAX) {
                deleted_bytes[k as usize * vb..(k as usize + 1) * vb].copy_from_slice(raw);
            }
        })?;
        ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
    }
    read.deleted_vectors = deleted_bytes
        .chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned::<T>)
        .collect();
    let lists = &mut read.lists;
    d.graph().scan_lists(|id, list| {
        if let Some(l) = lists.get_mut(id as usize) {
            if !input.ids.is_hole(id) {
                *l = list.to_vec();
            }
        }
        if id % 4096 == 0 {
            bar.set_position(u64::from(id));
        }
        Ok::<(), IndexBuildError>(())
    })?;
    Ok(())
}

/// Packed: vectors and lists from the records of `packed.trawl`.
fn read_packed<T: DeltaElement>(
    input: &MergeInput<'_>,
    plan: &Plan<'_, T>,
    read: &mut Read<T>,
    bar: &ProgressBar,
    ctl: &Control,
) -> Result<(), IndexBuildError> {
    let old = input.old;
    let dim = old.dim();
    let medoid = old.medoid();
    old.scan_records(ctl, |id, view| {
        let v = view.vector::<T>(&mut Vec::new()).to_vec();
        if id == medoid {
            read.medoid_vec = v.clone();
        }
        if !input.ids.is_hole(id) {
            read.lists[id as usize] = view.neighbors().collect();
        }
        if plan.deleted[id as usize] {
            read.deleted_vectors.extend_from_slice(&v);
        } else if !input.ids.is_hole(id) {
            read.vectors[id as usize * dim..(id as usize + 1) * dim].copy_from_slice(&v);
        }
        if id % 4096 == 0 {
            bar.set_position(u64::from(id));
        }
        Ok(())
    })
}

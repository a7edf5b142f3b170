//! Building a flat index: the vectors in id order in `flat-vectors.trawl`, and a manifest.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::data::Matrix;
use crate::dir::manifest::Manifest;
use crate::dir::txn::Txn;
use crate::io::PAGE_BYTES;
use crate::kernels::{Element, Metric};
use crate::kinds::flat::FILE_NAME;
use crate::kinds::graph::{IndexBuildError, KindName};
use crate::kinds::slot_file as vectors;
use crate::progress::Control;

/// What a flat build wrote.
#[derive(Debug, Clone, Serialize)]
pub struct FlatBuildReport {
    /// Vectors.
    pub n: usize,
    /// Dimension.
    pub dim: usize,
    /// Metric.
    pub metric: String,
    /// Vectors per 4 KiB page (0 when a vector spans pages).
    pub vectors_per_page: usize,
    /// Bytes of the vector file.
    pub vectors_bytes: u64,
    /// Bytes of the manifest.
    pub manifest_bytes: u64,
    /// Bytes on disk in all.
    pub disk_bytes: u64,
    /// Seconds.
    pub total_secs: f64,
}

/// Builds a flat index of `data` for `metric` in `dir` (its index files replaced in one
/// atomic commit).
pub fn build_flat<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    metric: Metric,
    ctl: &Control,
) -> Result<FlatBuildReport, IndexBuildError> {
    build_flat_with_attrs(data, dir, metric, None, ctl)
}

/// [`build_flat`] with the vectors' attributes (`attrs.trawl`, for filtered search).
pub fn build_flat_with_attrs<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    metric: Metric,
    attrs: Option<&crate::filter::Attributes>,
    ctl: &Control,
) -> Result<FlatBuildReport, IndexBuildError> {
    let t0 = Instant::now();
    let (n, dim) = (data.n(), data.dim());
    if n == 0 || dim == 0 {
        return Err(IndexBuildError::InvalidParams(format!(
            "nothing to index ({n} vectors of dimension {dim})"
        )));
    }
    if n >= u32::MAX as usize {
        return Err(IndexBuildError::InvalidParams(format!(
            "{n} vectors: a flat index holds fewer than 2^32"
        )));
    }
    crate::data::validate_finite(data)?;
    crate::filter::attrs::check_rows(attrs, n).map_err(IndexBuildError::Attrs)?;
    ctl.check().map_err(|_| IndexBuildError::Cancelled)?;
    let txn = Txn::begin_replacing(dir, crate::kinds::graph::refuse_unmerged_updates)?;
    let vb = dim * T::DTYPE.size_bytes();
    let per_page = PAGE_BYTES / vb;
    let pages = if per_page == 0 {
        (n * vb.div_ceil(PAGE_BYTES)) as u64
    } else {
        n.div_ceil(per_page) as u64
    };
    let ids: Vec<u32> = (0..n as u32).collect();
    let row = |i: usize| -> &[u8] { bytemuck::cast_slice(data.row(i)) };
    let path = txn.path(FILE_NAME);
    let vectors_bytes = vectors::write(&path, n, dim, T::DTYPE, &ids, pages, false, &row)?;
    let mut attrs_bytes = 0;
    if let Some(a) = attrs {
        crate::filter::file::save(a, &txn.path(crate::filter::file::FILE_NAME))?;
        attrs_bytes =
            std::fs::metadata(txn.path(crate::filter::file::FILE_NAME)).map_or(0, |m| m.len());
    }
    ctl.check().map_err(|_| IndexBuildError::Cancelled)?;
    let files =
        crate::dir::component::entries(txn.staging(), &crate::kinds::flat::files::COMPONENTS)?;
    let manifest = Manifest::of_build(
        KindName::Flat,
        n as u64,
        dim,
        T::DTYPE,
        metric,
        vec!["flat".into()],
        files,
        None,
        String::new(),
    );
    let manifest_bytes = txn.commit(&manifest)?;
    Ok(FlatBuildReport {
        n,
        dim,
        metric: metric.name().into(),
        vectors_per_page: per_page,
        vectors_bytes,
        manifest_bytes,
        disk_bytes: vectors_bytes + manifest_bytes + attrs_bytes,
        total_secs: t0.elapsed().as_secs_f64(),
    })
}

//! Building an IVF index (FusionANNS §4.1): hierarchical balanced k-means into posting lists,
//! a Vamana graph over the centroids, boundary replication (eq. 2), PQ codes of every vector,
//! and the vectors on disk in buckets by their nearest centroid.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::data::Matrix;
use crate::dir::manifest::{BuildRecord, IvfRecord};
use crate::dir::txn::Txn;
use crate::kernels::{Element, Metric};
use crate::kinds::graph::{payload_crc, IndexBuildError, PQ_CODES_FILE, PQ_FILE};
use crate::kinds::ivf::file::{IvfMeta, FILE_NAME};
use crate::kinds::ivf::{IvfParams, VECTORS_BY_ID_FILE, VECTORS_FILE};
use crate::kinds::slot_file as vectors;
use crate::progress::Control;
use crate::vamana::{self, SearchScratch, VectorStore};

/// What an IVF build did and produced.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IvfBuildReport {
    /// Vectors indexed.
    pub n: usize,
    /// Dimension.
    pub dim: usize,
    /// Element type name.
    pub dtype: String,
    /// Metric name.
    pub metric: String,
    /// Posting lists.
    pub nlist: usize,
    /// Lists over vectors.
    pub list_ratio: f64,
    /// Mean lists per vector (boundary replication).
    pub replication: f64,
    /// Vectors that joined more than one list.
    pub replicated_vectors: u64,
    /// Mean posting-list length.
    pub mean_list: f64,
    /// Longest posting list.
    pub max_list: usize,
    /// PQ bytes per vector.
    pub pq_bytes_per_vector: usize,
    /// Vectors per 4 KiB page (0 when a vector spans pages).
    pub vectors_per_page: usize,
    /// Data pages of the bucketed vector file.
    pub vector_pages: u64,
    /// Share of the data pages' vector slots holding a vector.
    pub page_fill: f64,
    /// Seconds: clustering.
    pub cluster_secs: f64,
    /// Seconds: the centroid graph.
    pub graph_secs: f64,
    /// Seconds: assignment and replication.
    pub assign_secs: f64,
    /// Seconds: PQ training and encoding.
    pub pq_secs: f64,
    /// Seconds: the vector file(s).
    pub vectors_secs: f64,
    /// Seconds of the whole build.
    pub total_secs: f64,
    /// Peak resident memory of the process (bytes, 0 where unknown).
    pub peak_rss_bytes: u64,
    /// Bytes of `ivf.trawl`.
    pub ivf_bytes: u64,
    /// Bytes of the bucketed vector file.
    pub vectors_bytes: u64,
    /// Bytes of the by-id vector file (0 unless asked for).
    pub vectors_by_id_bytes: u64,
    /// Bytes of the PQ quantiser file.
    pub pq_bytes: u64,
    /// Bytes of the PQ codes file.
    pub pq_codes_bytes: u64,
    /// Bytes of the manifest.
    pub manifest_bytes: u64,
    /// Bytes of the whole index on disk.
    pub disk_bytes: u64,
}

/// `x` in the clustering space ([`IvfMeta::centroid_dim`]): f32, normalised for cosine, and
/// for inner product lifted by `sqrt(max_norm_sq − ‖x‖²)` (a query is lifted by 0).
pub(crate) fn prepare<T: Element>(metric: Metric, x: &[T], max_norm_sq: f32, out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o = v.to_f32();
    }
    let d = x.len();
    match metric {
        Metric::Cosine => {
            let norm = <f32 as Element>::norm_sq(&out[..d]).sqrt();
            if norm > 0.0 {
                out[..d].iter_mut().for_each(|v| *v /= norm);
            }
        }
        Metric::InnerProduct => {
            let s = <f32 as Element>::norm_sq(&out[..d]);
            out[d] = (max_norm_sq - s).max(0.0).sqrt();
        }
        Metric::L2 => {}
    }
}

/// Every vector in the clustering space (`cdim` dimensions; an inner-product index lifts
/// each vector by the largest norm, [`prepare`]).
fn clustering_space<T: Element>(data: &Matrix<T>, metric: Metric, cdim: usize) -> Vec<f32> {
    let n = data.n();
    let max_norm_sq = if metric == Metric::InnerProduct {
        (0..n)
            .into_par_iter()
            .map(|i| {
                let r: Vec<f32> = data.row(i).iter().map(|v| v.to_f32()).collect();
                <f32 as Element>::norm_sq(&r)
            })
            .reduce(|| 0.0, f32::max)
    } else {
        0.0
    };
    let mut space = vec![0f32; n * cdim];
    space
        .par_chunks_mut(cdim)
        .enumerate()
        .for_each(|(i, o)| prepare(metric, data.row(i), max_norm_sq, o));
    space
}

/// Hierarchical balanced k-means over the clustering space: the leaves (the lists' own
/// members) and their centroids.
fn cluster(
    space: &[f32],
    cdim: usize,
    params: &IvfParams,
    ctl: &Control,
) -> Result<(Vec<Vec<u32>>, Vec<f32>), IndexBuildError> {
    let n = space.len() / cdim.max(1);
    let bar = ctl.bar("clustering", n as u64);
    let done = AtomicU64::new(0);
    let tick = |k: u64| {
        let d = done.fetch_add(k, Ordering::Relaxed) + k;
        if d % 4096 < k {
            bar.set_position(d);
        }
    };
    let leaves = crate::kinds::ivf::cluster::balanced_leaves(
        space,
        cdim,
        params.list_size,
        params.max_leaf(),
        params.seed,
        ctl,
        &tick,
    )
    .map_err(|_| IndexBuildError::Cancelled)?;
    bar.finish_and_clear();
    let nlist = leaves.len();
    let mut centroids = vec![0f32; nlist * cdim];
    centroids
        .par_chunks_mut(cdim)
        .zip(leaves.par_iter())
        .for_each(|(c, leaf)| {
            for &i in leaf {
                for (a, b) in c
                    .iter_mut()
                    .zip(&space[i as usize * cdim..(i as usize + 1) * cdim])
                {
                    *a += b;
                }
            }
            let inv = 1.0 / leaf.len().max(1) as f32;
            c.iter_mut().for_each(|v| *v *= inv);
        });
    Ok((leaves, centroids))
}

/// Each vector's lists (`max_replicas` slots, `u32::MAX` where fewer), boundary replication:
/// v joins list i when dist(v, c_i) ≤ (1 + ε)·dist(v, c_1), at most `max_replicas` lists.
fn assign_lists(
    space: &[f32],
    cdim: usize,
    leaves: &[Vec<u32>],
    cmat: &Matrix<f32>,
    cgraph: &vamana::Graph,
    params: &IvfParams,
    ctl: &Control,
) -> Result<Vec<u32>, IndexBuildError> {
    let n = space.len() / cdim.max(1);
    let nlist = leaves.len();
    let cap = params.max_replicas;
    let store = VectorStore::new(cmat.as_slice(), cdim, Metric::L2)
        .ok_or(IndexBuildError::Internal("centroid store".into()))?;
    let mut own = vec![0u32; n];
    for (l, leaf) in leaves.iter().enumerate() {
        for &i in leaf {
            own[i as usize] = l as u32;
        }
    }
    let bar = ctl.bar("assigning vectors to lists", n as u64);
    let done = AtomicU64::new(0);
    let eps = f64::from(params.epsilon);
    let mut assign = vec![u32::MAX; n * cap];
    let assign_l = params.assign_l.max(cap);
    assign.par_chunks_mut(cap).enumerate().try_for_each_init(
        || SearchScratch::new(nlist),
        |scratch, (i, out)| -> Result<(), IndexBuildError> {
            let x = &space[i * cdim..(i + 1) * cdim];
            let (mut hits, _) = vamana::search(cgraph, &store, x, cap, assign_l, scratch)
                .map_err(|e| IndexBuildError::Internal(e.to_string()))?;
            let o = own[i];
            if !hits.iter().any(|h| h.0 == o) {
                hits.push((o, <f32 as Element>::l2_sq(x, cmat.row(o as usize))));
                hits.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            }
            // The nearest list first (its bucket holds the vector on disk), then the
            // vector's own cluster (so no list is left empty when its members all lie
            // nearer to other centroids), then every list within the (1 + ε) bound.
            let d1 = f64::from(hits[0].1.max(0.0)).sqrt();
            let bound = (1.0 + eps) * d1;
            let mut joined = 0;
            let mut join = |l: u32, out: &mut [u32]| {
                if joined < out.len() && !out[..joined].contains(&l) {
                    out[joined] = l;
                    joined += 1;
                }
            };
            join(hits[0].0, out);
            join(o, out);
            for h in &hits[1..] {
                if f64::from(h.1.max(0.0)).sqrt() <= bound {
                    join(h.0, out);
                }
            }
            let d = done.fetch_add(1, Ordering::Relaxed);
            if d.is_multiple_of(16384) {
                bar.set_position(d);
                ctl.check().map_err(|_| IndexBuildError::Cancelled)?;
            }
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    Ok(assign)
}

/// Posting lists (offsets, then ids ascending) and buckets (each vector in its nearest
/// list's bucket) from the assignment; with the vectors in more than one list.
#[allow(clippy::type_complexity)]
fn posting_lists(
    assign: &[u32],
    cap: usize,
    nlist: usize,
) -> (Vec<u64>, Vec<u32>, Vec<Vec<u32>>, u64) {
    // Posting lists (ids ascending) and buckets (each vector in its nearest list's bucket).
    let mut counts = vec![0u64; nlist + 1];
    for &l in assign.iter().filter(|&&l| l != u32::MAX) {
        counts[l as usize + 1] += 1;
    }
    for i in 0..nlist {
        counts[i + 1] += counts[i];
    }
    let list_offsets = counts.clone();
    let mut list_ids = vec![0u32; counts[nlist] as usize];
    let mut fill = counts;
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); nlist];
    let mut replicated = 0u64;
    for (i, a) in assign.chunks(cap).enumerate() {
        let mut joined = 0;
        for &l in a.iter().filter(|&&l| l != u32::MAX) {
            list_ids[fill[l as usize] as usize] = i as u32;
            fill[l as usize] += 1;
            joined += 1;
        }
        replicated += u64::from(joined > 1);
        buckets[a[0] as usize].push(i as u32);
    }
    (list_offsets, list_ids, buckets, replicated)
}

/// Writes the vectors in buckets (in leaf order: neighbouring leaves are near each other) and,
/// with `by_id`, in id order; returns the vectors per page, the bucketed file's data pages and
/// both files' bytes.
fn write_vectors<T: Element>(
    data: &Matrix<T>,
    buckets: &[Vec<u32>],
    by_id: bool,
    txn: &Txn,
) -> Result<(usize, u64, u64, u64), IndexBuildError> {
    let (n, dim) = (data.n(), data.dim());
    let vb = dim * T::DTYPE.size_bytes();
    let per_page = crate::io::PAGE_BYTES / vb;
    let ppv = vb.div_ceil(crate::io::PAGE_BYTES);
    let (slot, pages) = vectors::bucket_slots(n, buckets, per_page, ppv);
    let row = |i: usize| -> &[u8] { bytemuck::cast_slice(data.row(i)) };
    let vpath = txn.path(VECTORS_FILE);
    let vectors_bytes = vectors::write(&vpath, n, dim, T::DTYPE, &slot, pages, true, &row)?;
    let vectors_by_id_bytes = if by_id {
        let ident: Vec<u32> = (0..n as u32).collect();
        let pages = if per_page == 0 {
            (n * vb.div_ceil(crate::io::PAGE_BYTES)) as u64
        } else {
            n.div_ceil(per_page) as u64
        };
        let p = txn.path(VECTORS_BY_ID_FILE);
        vectors::write(&p, n, dim, T::DTYPE, &ident, pages, false, &row)?
    } else {
        0
    };
    Ok((per_page, pages, vectors_bytes, vectors_by_id_bytes))
}

/// The manifest's record of an IVF build.
fn build_record(params: &IvfParams, pq: &crate::quant::Quantiser, nlist: usize) -> BuildRecord {
    BuildRecord {
        r: params.centroid_graph.r,
        l: params.centroid_graph.l,
        alpha: params
            .centroid_graph
            .alpha
            .to_string()
            .parse()
            .unwrap_or(0.0),
        pq_bytes: pq.m(),
        opq: pq.as_pq().is_some_and(|p| p.rotation().is_some()),
        rabitq_bits: pq.as_rabitq().map(|r| r.bits()),
        entry_ratio: 0.0,
        memory_budget_bytes: 0,
        seed: params.seed,
        visit_order: None,
        query_sample: 0,
        ivf: Some(IvfRecord {
            list_size: params.list_size,
            epsilon: params.epsilon.to_string().parse().unwrap_or(0.0),
            max_replicas: params.max_replicas,
            nlist,
        }),
    }
}

/// Builds an IVF index over `data` into `dir` (created if missing), replacing what the
/// directory holds in one atomic commit. Runs on rayon's current pool.
pub fn build_ivf<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    params: &IvfParams,
    ctl: &Control,
) -> Result<IvfBuildReport, IndexBuildError> {
    build_ivf_with_attrs(data, dir, params, None, ctl)
}

/// [`build_ivf`] with the vectors' attributes (`attrs.trawl`, for filtered search).
pub fn build_ivf_with_attrs<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    params: &IvfParams,
    attrs: Option<&crate::filter::Attributes>,
    ctl: &Control,
) -> Result<IvfBuildReport, IndexBuildError> {
    let t0 = Instant::now();
    let (n, dim) = (data.n(), data.dim());
    params.validate(n, dim)?;
    crate::data::validate_finite(data)?;
    crate::filter::attrs::check_rows(attrs, n).map_err(IndexBuildError::Attrs)?;
    let txn = Txn::begin_replacing(dir, crate::kinds::graph::refuse_unmerged_updates)?;
    let metric = params.metric;

    // The clustering space.
    let cdim = crate::kinds::ivf::file::centroid_dim(dim, metric);
    let space = clustering_space(data, metric, cdim);

    // 1. Hierarchical balanced k-means.
    let t = Instant::now();
    let (leaves, centroids) = cluster(&space, cdim, params, ctl)?;
    let nlist = leaves.len();
    let cluster_secs = t.elapsed().as_secs_f64();

    // 2. The centroid graph.
    let t = Instant::now();
    let cmat = Matrix::from_vec(centroids, cdim)
        .ok_or(IndexBuildError::Internal("centroid matrix shape".into()))?;
    let (cgraph, _) = vamana::build(&cmat, Metric::L2, &params.centroid_graph, ctl)?;
    let graph_secs = t.elapsed().as_secs_f64();

    // 3. Assignment with boundary replication, then the posting lists and buckets.
    let t = Instant::now();
    let cap = params.max_replicas;
    let assign = assign_lists(&space, cdim, &leaves, &cmat, &cgraph, params, ctl)?;
    drop(space);
    let (list_offsets, list_ids, buckets, replicated) = posting_lists(&assign, cap, nlist);
    drop(assign);
    let max_list = longest_list(&list_offsets);
    let assign_secs = t.elapsed().as_secs_f64();

    // 4. PQ.
    let t = Instant::now();
    let (pq, pq_bytes, pq_codes_bytes) =
        crate::kinds::graph::write_pq(data, metric, params.quant, &params.pq, &txn, ctl)?;
    let (pq_path, codes_path) = (txn.path(PQ_FILE), txn.path(PQ_CODES_FILE));
    let pq_secs = t.elapsed().as_secs_f64();
    // 5. Vectors in buckets.
    let t = Instant::now();
    let (per_page, pages, vectors_bytes, vectors_by_id_bytes) =
        write_vectors(data, &buckets, params.by_id_file, &txn)?;
    let vectors_secs = t.elapsed().as_secs_f64();
    let vfile = vectors::SlotFile::open(&txn.path(VECTORS_FILE))?;

    let meta = IvfMeta {
        n: n as u64,
        dim,
        dtype: T::DTYPE,
        metric,
        list_size: params.list_size as u32,
        max_replicas: cap as u32,
        epsilon: params.epsilon,
        pq_crc: payload_crc(&pq_path)?,
        pq_codes_crc: payload_crc(&codes_path)?,
        vectors_crc: vfile.header_crc(),
        centroids: cmat.into_vec(),
        graph: cgraph,
        list_offsets,
        list_ids,
    };
    let ivf_bytes = meta.save(&txn.path(FILE_NAME))?;
    if let Some(a) = attrs {
        crate::filter::file::save(a, &txn.path(crate::filter::file::FILE_NAME))?;
    }
    let manifest =
        crate::kinds::ivf::files::describe(txn.staging(), Some(build_record(params, &pq, nlist)))?;
    let manifest_bytes = txn.commit(&manifest)?;
    let slots_total = pages as f64 * per_page.max(1) as f64;
    Ok(IvfBuildReport {
        n,
        dim,
        dtype: T::DTYPE.name().into(),
        metric: metric.name().into(),
        nlist,
        list_ratio: nlist as f64 / n as f64,
        replication: meta.replication(),
        replicated_vectors: replicated,
        mean_list: meta.list_ids.len() as f64 / nlist as f64,
        max_list,
        pq_bytes_per_vector: pq.m(),
        vectors_per_page: per_page,
        vector_pages: pages,
        page_fill: if per_page == 0 {
            1.0
        } else {
            n as f64 / slots_total
        },
        cluster_secs,
        graph_secs,
        assign_secs,
        pq_secs,
        vectors_secs,
        total_secs: t0.elapsed().as_secs_f64(),
        peak_rss_bytes: crate::mem::peak_rss_bytes(),
        ivf_bytes,
        vectors_bytes,
        vectors_by_id_bytes,
        pq_bytes,
        pq_codes_bytes,
        manifest_bytes,
        disk_bytes: ivf_bytes
            + vectors_bytes
            + vectors_by_id_bytes
            + pq_bytes
            + pq_codes_bytes
            + manifest_bytes,
    })
}

/// The length of the longest posting list.
fn longest_list(offsets: &[u64]) -> usize {
    offsets
        .windows(2)
        .map(|w| (w[1] - w[0]) as usize)
        .max()
        .unwrap_or(0)
}

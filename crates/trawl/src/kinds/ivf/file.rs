//! The IVF index's in-memory part (`ivf.trawl`, an envelope file: magic `TRAWLIVF`, version,
//! CRC of the payload): the centroids, the Vamana graph over them, the posting lists as ids
//! only, the build parameters, and the checksums of the files it belongs with.
//!
//! Payload (little-endian): `n u64, dim u32, dtype u8, metric u8, nlist u32, list_size u32,
//! max_replicas u32, epsilon f32, pq_crc u32, pq_codes_crc u32, vectors_crc u32, graph_r u32,
//! medoid u32`, then `nlist × dim` f32 centroids, `nlist` graph lists (`degree u32, ids`),
//! `nlist + 1` u64 list offsets, and the list ids (u32).

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::file::{read_envelope, EnvelopeWriter};
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::{DType, Metric};
use crate::vamana::file::MAX_FILE_DEGREE;
use crate::vamana::Graph;

/// File name of the IVF file inside an index directory.
pub const FILE_NAME: &str = "ivf.trawl";
const MAGIC: [u8; 8] = *b"TRAWLIVF";
const VERSION: u32 = 1;

/// See [`IvfMeta::centroid_dim`].
pub fn centroid_dim(dim: usize, metric: Metric) -> usize {
    dim + usize::from(metric == Metric::InnerProduct)
}

/// The IVF index's in-memory structures.
#[derive(Debug, Clone, PartialEq)]
pub struct IvfMeta {
    /// Vectors.
    pub n: u64,
    /// Dimension.
    pub dim: usize,
    /// Element type.
    pub dtype: DType,
    /// Metric.
    pub metric: Metric,
    /// Target posting-list size of the clustering.
    pub list_size: u32,
    /// Most lists a vector joins (boundary replication's cap).
    pub max_replicas: u32,
    /// Boundary replication's ε (FusionANNS eq. 2).
    pub epsilon: f32,
    /// Payload CRC of `pq.trawl`.
    pub pq_crc: u32,
    /// Payload CRC of `pq-codes.trawl`.
    pub pq_codes_crc: u32,
    /// Header-page CRC of the bucketed vector file.
    pub vectors_crc: u32,
    /// `nlist × centroid_dim` centroids in the clustering space.
    pub centroids: Vec<f32>,
    /// The Vamana graph over the centroids (squared L2 in the clustering space).
    pub graph: Graph,
    /// `nlist + 1` offsets into `list_ids`.
    pub list_offsets: Vec<u64>,
    /// Posting lists: ids only.
    pub list_ids: Vec<u32>,
}

impl IvfMeta {
    /// Dimension of the clustering space: the vectors' for L2 and cosine (cosine normalises
    /// them); one more for inner product, whose vectors `x` are clustered as
    /// `(x, sqrt(M² − ‖x‖²))` (`M` the largest norm) and queries `q` probe as `(q, 0)`, so
    /// L2 between them ranks like the inner product.
    pub fn centroid_dim(&self) -> usize {
        centroid_dim(self.dim, self.metric)
    }

    /// Posting lists.
    pub fn nlist(&self) -> usize {
        self.list_offsets.len().saturating_sub(1)
    }

    /// The ids of list `l`.
    #[inline]
    pub fn list(&self, l: u32) -> &[u32] {
        let l = l as usize;
        &self.list_ids[self.list_offsets[l] as usize..self.list_offsets[l + 1] as usize]
    }

    /// Mean lists per vector (the replication factor).
    pub fn replication(&self) -> f64 {
        self.list_ids.len() as f64 / (self.n.max(1)) as f64
    }

    /// Largest primary cluster (leaf) the build makes for [`IvfMeta::list_size`]
    /// ([`crate::kinds::ivf::IvfParams::max_leaf`]).
    pub fn max_leaf(&self) -> u64 {
        let s = u64::from(self.list_size);
        (s + s.div_ceil(4)).max(1)
    }

    /// Checks what the build guarantees of the posting lists and what search relies on to
    /// find every vector (beyond the ranges [`IvfMeta::load`] checks):
    ///
    /// - the lists number at least `n / max_leaf` (every primary cluster has at most
    ///   `max_leaf` vectors, and each is a list);
    /// - every vector is in at least one and at most `max_replicas` lists;
    /// - when vectors may join two lists or more, every vector is in its own cluster's list
    ///   as well as its nearest one: so no list is empty, and at most `max_leaf` vectors are
    ///   in list `l` alone (those must all be members of cluster `l`).
    ///
    /// A forgery that moves every id into one list breaks the last two.
    pub fn check_lists(&self) -> Result<(), String> {
        let n = self.n;
        let nlist = self.nlist() as u64;
        let max_leaf = self.max_leaf();
        if nlist.saturating_mul(max_leaf) < n {
            return Err(format!(
                "{nlist} lists of at most {max_leaf} primary members cannot hold {n} vectors"
            ));
        }
        // Per vector: lists it is in (saturating), and the last one.
        let mut count = vec![0u8; n as usize];
        let mut last = vec![0u32; n as usize];
        for l in 0..nlist as u32 {
            for &id in self.list(l) {
                let c = &mut count[id as usize];
                *c = c.saturating_add(1);
                last[id as usize] = l;
            }
        }
        for (id, &c) in count.iter().enumerate() {
            if c == 0 {
                return Err(format!("vector {id} is in no posting list"));
            }
            if u32::from(c) > self.max_replicas {
                return Err(format!(
                    "vector {id} is in {c} posting lists, more than the {} the build allows",
                    self.max_replicas
                ));
            }
        }
        if self.max_replicas >= 2 {
            if let Some(l) = (0..nlist as u32).find(|&l| self.list(l).is_empty()) {
                return Err(format!(
                    "posting list {l} is empty (every list holds at least its own cluster)"
                ));
            }
            let mut alone = vec![0u64; nlist as usize];
            for (id, &c) in count.iter().enumerate() {
                if c == 1 {
                    alone[last[id] as usize] += 1;
                }
            }
            if let Some((l, &a)) = alone.iter().enumerate().find(|(_, &a)| a > max_leaf) {
                return Err(format!(
                    "{a} vectors are in posting list {l} alone, more than its cluster's \
                     {max_leaf} at most"
                ));
            }
        }
        Ok(())
    }

    /// For each vector, the only list it is in, when every vector is in exactly one
    /// (`max_replicas == 1`): then the list is its bucket in the vector file.
    pub fn sole_lists(&self) -> Option<Vec<u32>> {
        let mut of = vec![u32::MAX; self.n as usize];
        for l in 0..self.nlist() as u32 {
            for &id in self.list(l) {
                if of[id as usize] != u32::MAX {
                    return None;
                }
                of[id as usize] = l;
            }
        }
        of.iter().all(|&l| l != u32::MAX).then_some(of)
    }

    /// Bytes held in memory.
    pub fn heap_bytes(&self) -> u64 {
        (self.centroids.len() * 4
            + self.graph.heap_bytes()
            + self.list_offsets.len() * 8
            + self.list_ids.len() * 4) as u64
    }

    /// Writes the file; returns its bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = ByteWriter::new();
        w.u64(self.n);
        w.u32(self.dim as u32);
        w.u8(self.dtype.code());
        w.u8(self.metric.code());
        w.u32(self.nlist() as u32);
        w.u32(self.list_size);
        w.u32(self.max_replicas);
        w.f32(self.epsilon);
        w.u32(self.pq_crc);
        w.u32(self.pq_codes_crc);
        w.u32(self.vectors_crc);
        w.u32(self.graph.max_degree() as u32);
        w.u32(self.graph.medoid());
        w.f32s(&self.centroids);
        for i in 0..self.graph.n() as u32 {
            let nb = self.graph.neighbors(i);
            w.u32(nb.len() as u32);
            w.u32s(nb);
        }
        for &o in &self.list_offsets {
            w.u64(o);
        }
        w.u32s(&self.list_ids);
        let mut env = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        env.write(&w.into_inner())?;
        env.finish()
    }

    /// Reads and checks the file: checksum, then every id and offset in range.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "trawl IVF", VERSION)?;
        let bad = |s: String| FileError::new(path, FileErrorKind::Invalid(s));
        let short = |_| bad("payload shorter than its counts".into());
        let mut r = ByteReader::new(&payload);
        let n = r.u64().map_err(short)?;
        let dim = r.u32().map_err(short)? as usize;
        let dtype = DType::from_code(r.u8().map_err(short)?)
            .ok_or_else(|| bad("unknown element type".into()))?;
        let metric = Metric::from_code(r.u8().map_err(short)?)
            .ok_or_else(|| bad("unknown metric".into()))?;
        let nlist = r.u32().map_err(short)? as usize;
        let list_size = r.u32().map_err(short)?;
        let max_replicas = r.u32().map_err(short)?;
        let epsilon = r.f32().map_err(short)?;
        let pq_crc = r.u32().map_err(short)?;
        let pq_codes_crc = r.u32().map_err(short)?;
        let vectors_crc = r.u32().map_err(short)?;
        let graph_r = r.u32().map_err(short)? as usize;
        let medoid = r.u32().map_err(short)?;
        if dim == 0 || nlist == 0 || n == 0 || n >= u64::from(u32::MAX) {
            return Err(bad(format!("n {n}, dim {dim}, {nlist} lists")));
        }
        if (medoid as usize) >= nlist || graph_r == 0 {
            return Err(bad(format!(
                "medoid {medoid} of {nlist} lists, R {graph_r}"
            )));
        }
        // The builder's own bounds (`VamanaParams`, `IvfParams::validate`).
        if graph_r > MAX_FILE_DEGREE {
            return Err(bad(format!(
                "centroid graph R = {graph_r} exceeds the largest degree a graph can have \
                 ({MAX_FILE_DEGREE})"
            )));
        }
        if list_size == 0
            || list_size > 1 << 20
            || !(1..=64).contains(&max_replicas)
            || !(0.0..=100.0).contains(&epsilon)
        {
            return Err(bad(format!(
                "list size {list_size}, at most {max_replicas} lists per vector, ε {epsilon}"
            )));
        }
        let cdim = centroid_dim(dim, metric);
        // Every count is bounded by the bytes the payload holds before anything is allocated:
        // each list takes at least its centroid, its degree and its offset.
        let per_list = cdim.saturating_mul(4).saturating_add(12);
        if nlist > r.remaining() / per_list {
            return Err(bad(format!(
                "{nlist} lists of dimension {cdim} do not fit in the payload"
            )));
        }
        let need = nlist * cdim;
        // Read at random by every query's centroid search: on huge pages (`f32s` places them).
        let centroids = r.f32s(need).map_err(short)?;
        check_centroids(&centroids, cdim).map_err(bad)?;
        // A list holds distinct centroids other than its own: never more than `nlist`. The
        // in-memory table is `nlist × width` ids.
        let width = graph_r.min(nlist);
        let mut lists = Vec::with_capacity(nlist);
        for i in 0..nlist {
            let d = r.u32().map_err(short)? as usize;
            if d > width || d.saturating_mul(4) > r.remaining() {
                return Err(bad(format!(
                    "centroid {i} has degree {d} (R {graph_r}, {nlist} lists)"
                )));
            }
            let ids = r.u32s(d).map_err(short)?;
            if let Some(&j) = ids.iter().find(|&&j| j as usize >= nlist) {
                return Err(bad(format!("centroid {i} links to {j} of {nlist}")));
            }
            lists.push(ids);
        }
        let (list_offsets, list_ids) = read_posting_lists(path, &mut r, n, nlist)?;
        // The table is zeroed lazily, but an allocation the allocator refuses must be an error
        // here, not an abort.
        if Vec::<u32>::new()
            .try_reserve_exact(nlist.saturating_mul(width))
            .is_err()
        {
            return Err(bad(format!(
                "{nlist} centroids × R = {width} neighbour slots do not fit in memory"
            )));
        }
        Ok(Self {
            n,
            dim,
            dtype,
            metric,
            list_size,
            max_replicas,
            epsilon,
            pq_crc,
            pq_codes_crc,
            vectors_crc,
            centroids,
            graph: Graph::from_lists(lists, width, medoid),
            list_offsets,
            list_ids,
        })
    }
}

/// Reads and checks the posting lists at the end of an IVF file's payload: `nlist + 1`
/// ascending offsets, then the ids — every id below `n`, each list in ascending id order, and
/// every vector in at least one list.
fn read_posting_lists(
    path: &Path,
    r: &mut ByteReader<'_>,
    n: u64,
    nlist: usize,
) -> Result<(Vec<u64>, Vec<u32>), FileError> {
    let bad = |s: String| FileError::new(path, FileErrorKind::Invalid(s));
    let short = |_| bad("payload shorter than its counts".into());
    if (nlist + 1).saturating_mul(8) > r.remaining() {
        return Err(bad("list offsets larger than the payload".into()));
    }
    let mut list_offsets = Vec::with_capacity(nlist + 1);
    for _ in 0..=nlist {
        list_offsets.push(r.u64().map_err(short)?);
    }
    let total = *list_offsets.last().unwrap_or(&0);
    if list_offsets[0] != 0
        || list_offsets.windows(2).any(|w| w[0] > w[1])
        || total.saturating_mul(4) != r.remaining() as u64
    {
        return Err(bad("posting list offsets are inconsistent".into()));
    }
    // Every vector is in at least one list: the ids bound `n` by the payload (what is
    // allocated per vector later, e.g. by the checks of verify, stays within its size).
    if total < n {
        return Err(bad(format!(
            "the posting lists hold {total} ids for {n} vectors"
        )));
    }
    let list_ids = r.u32s(total as usize).map_err(short)?;
    if let Some(&id) = list_ids.iter().find(|&&id| u64::from(id) >= n) {
        return Err(bad(format!("posting list id {id} out of range (n = {n})")));
    }
    for (l, w) in list_offsets.windows(2).enumerate() {
        let ids = &list_ids[w[0] as usize..w[1] as usize];
        if ids.windows(2).any(|p| p[0] >= p[1]) {
            return Err(bad(format!(
                "posting list {l} is not in ascending id order (or holds an id twice)"
            )));
        }
    }
    Ok((list_offsets, list_ids))
}

/// Largest squared norm a centroid may have: distances to it must not overflow `f32` (the
/// bound trawl puts on input vectors, 2^100).
pub const MAX_CENTROID_NORM_SQ: f64 = 1_267_650_600_228_229_401_496_703_205_376.0;

/// Checks that every centroid (rows of `cdim`) is finite and short enough for exact `f32`
/// distances: a NaN or infinite centroid makes every distance to it NaN or infinite, and the
/// centroid search then probes the wrong lists (recall collapses) without any error.
pub fn check_centroids(centroids: &[f32], cdim: usize) -> Result<(), String> {
    for (i, c) in centroids.chunks(cdim.max(1)).enumerate() {
        if c.iter().any(|v| !v.is_finite()) {
            return Err(format!("centroid {i} holds a non-finite value"));
        }
        let norm_sq: f64 = c.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        if norm_sq >= MAX_CENTROID_NORM_SQ {
            return Err(format!(
                "centroid {i} is too large (squared norm {norm_sq:e}): distances to it overflow"
            ));
        }
    }
    Ok(())
}

//! The IVF index's in-memory part (`ivf.trawl`, an envelope file: magic `TRAWLIVF`, version,
//! CRC of the payload): the centroids, the Vamana graph over them, the posting lists as ids
//! only, the build parameters, and the checksums of the files it belongs with.
//!
//! Payload (little-endian): `n u64, dim u32, dtype u8, metric u8, nlist u32, list_size u32,
//! max_replicas u32, epsilon f32, pq_crc u32, pq_codes_crc u32, vectors_crc u32, graph_r u32,
//! medoid u32`, then `nlist × dim` f32 centroids, `nlist` graph lists (`degree u32, ids`),
//! `nlist + 1` u64 list offsets, and the list ids (u32).

use std::path::Path;

use crate::graph::Graph;
use crate::kernels::{DType, Metric};
use crate::layout::bytes::{ByteReader, ByteWriter};
use crate::layout::header::{read_envelope, EnvelopeWriter};
use crate::layout::{FileError, FileErrorKind};

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
        let need = nlist
            .checked_mul(centroid_dim(dim, metric))
            .filter(|&v| v.saturating_mul(4) <= r.remaining())
            .ok_or_else(|| bad("centroids larger than the payload".into()))?;
        // Read at random by every query's centroid search: on huge pages (`f32s` places them).
        let centroids = r.f32s(need).map_err(short)?;
        let mut lists = Vec::with_capacity(nlist);
        for i in 0..nlist {
            let d = r.u32().map_err(short)? as usize;
            if d > graph_r || d.saturating_mul(4) > r.remaining() {
                return Err(bad(format!("centroid {i} has degree {d} (R {graph_r})")));
            }
            let ids = r.u32s(d).map_err(short)?;
            if let Some(&j) = ids.iter().find(|&&j| j as usize >= nlist) {
                return Err(bad(format!("centroid {i} links to {j} of {nlist}")));
            }
            lists.push(ids);
        }
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
        let list_ids = r.u32s(total as usize).map_err(short)?;
        if let Some(&id) = list_ids.iter().find(|&&id| u64::from(id) >= n) {
            return Err(bad(format!("posting list id {id} out of range (n = {n})")));
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
            graph: Graph::from_lists(lists, graph_r, medoid),
            list_offsets,
            list_ids,
        })
    }
}

//! The in-memory entry index: a small Vamana graph over a sample of the indexed vectors, kept
//! in memory with their full-precision copies and searched before the disk search to choose
//! where it starts (PipeANN §4.2.2 "entry-point optimisation"; OctopusANN's MemGraph; Starling's
//! in-memory navigation graph).
//!
//! Stored beside the disk index as `entry.trawl` (magic `TRAWLENT`, version 1), payload
//! little-endian:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | index tag: payload CRC of the index's `pq-codes.trawl` (files of different builds are refused) |
//! | 4 | 8 | `n` of the disk index, `u64` |
//! | 12 | 1 | element type code |
//! | 13 | 1 | metric code |
//! | 14 | 2 | zero |
//! | 16 | 4 | `dim`, `u32` |
//! | 20 | 4 | `m`: sampled nodes, `u32` |
//! | 24 | 4 | `R` of the sample graph, `u32` |
//! | 28 | 4 | medoid of the sample graph (local id `< m`), `u32` |
//! | 32 | 4·m | global id of each sampled node, `u32`, `< n`, distinct |
//! | … | m·dim·size | the sampled vectors, row-major |
//! | … | 4·m | degree of each local node, `u32`, `≤ R` |
//! | … | 4·Σdeg | local neighbour ids, `u32`, `< m` |
//!
//! Loading checks every bound, so a file that loads never indexes out of range.

use std::path::Path;

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::data::Matrix;
use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
use crate::kernels::{self, DType, Element, Metric};
use crate::progress::Control;
use crate::vamana::queue::{CandidateList, VisitedSet};
use crate::vamana::{self, Graph, VamanaParams};

/// File name of the entry index inside an index directory.
pub const FILE_NAME: &str = "entry.trawl";
/// Magic of entry index files.
pub const MAGIC: [u8; 8] = *b"TRAWLENT";
/// Current version.
pub const VERSION: u32 = 1;

/// How the entry index chooses its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EntrySampling {
    /// A uniform random sample (seeded).
    #[default]
    Uniform,
    /// The nodes most read by beam searches of sample indexed vectors over the disk index
    /// (OctopusANN's visit-frequency sampling); needs the disk index built first.
    Frequency,
}

impl EntrySampling {
    /// `"uniform"` or `"freq"`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Frequency => "freq",
        }
    }
}

impl std::str::FromStr for EntrySampling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" | "random" => Ok(Self::Uniform),
            "freq" | "frequency" => Ok(Self::Frequency),
            other => Err(format!("unknown entry sampling {other:?} (uniform, freq)")),
        }
    }
}

/// How the entry index is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryParams {
    /// Share of the indexed vectors sampled, in `(0, 1]` (PipeANN: 1%).
    pub ratio: f64,
    /// Maximum degree of the sample graph (PipeANN: 32).
    pub r: usize,
    /// Build list size of the sample graph (PipeANN: 64).
    pub l: usize,
    /// Sampling seed.
    pub seed: u64,
    /// Which nodes are sampled.
    pub sampling: EntrySampling,
}

impl Default for EntryParams {
    /// PipeANN's entry index: a uniform 1% sample, R = 32, L = 64.
    fn default() -> Self {
        Self {
            ratio: 0.01,
            r: 32,
            l: 64,
            seed: 0x005e_ede1,
            sampling: EntrySampling::Uniform,
        }
    }
}

impl EntryParams {
    /// OctopusANN's MemGraph: a 0.1% sample, R = 48, L = 128.
    pub fn memgraph() -> Self {
        Self {
            ratio: 0.001,
            r: 48,
            l: 128,
            ..Self::default()
        }
    }

    /// Checks the parameters (before anything is built or written).
    pub fn validate(&self) -> Result<(), vamana::BuildError> {
        let bad = |name, reason| Err(vamana::BuildError::InvalidParam { name, reason });
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return bad("entry ratio", format!("{} is not in (0, 1]", self.ratio));
        }
        if self.r == 0 || self.r > u16::MAX as usize {
            return bad("entry degree", format!("{} is not in 1..=65535", self.r));
        }
        if self.l == 0 || self.l > vamana::MAX_BUILD_L {
            return bad(
                "entry list size",
                format!("{} is not in 1..={}", self.l, vamana::MAX_BUILD_L),
            );
        }
        Ok(())
    }

    /// Nodes sampled from `n`: `round(n · ratio)`, at least 1 and at most `n`. Fails when a
    /// parameter is out of range ([`EntryParams::validate`]).
    pub fn sample_size(&self, n: usize) -> Result<usize, vamana::BuildError> {
        self.validate()?;
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(vamana::BuildError::InvalidParam {
                name: "entry ratio",
                reason: format!("{} is not in (0, 1]", self.ratio),
            });
        }
        if n == 0 {
            return Err(vamana::BuildError::Empty);
        }
        Ok(((n as f64 * self.ratio).round() as usize).clamp(1, n))
    }
}

/// The sampled nodes, their vectors and the graph over them.
#[derive(Debug, Clone)]
pub struct EntryIndex {
    dtype: DType,
    metric: Metric,
    dim: usize,
    /// Global id of each local node.
    ids: Vec<u32>,
    /// The vectors' bytes, in a `u32` buffer so that `f32` rows are aligned.
    words: Vec<u32>,
    graph: Graph,
}

/// Reusable buffers of entry-index searches.
#[derive(Debug, Default, Clone)]
pub struct EntryScratch {
    list: CandidateList,
    visited: VisitedSet,
}

impl EntryIndex {
    /// Samples `params.ratio` of `data` uniformly (at least one row) and builds the sample
    /// graph. (Frequency sampling needs the disk index: [`crate::kinds::graph::DiskIndex::build_entry`].)
    pub fn build<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        params: &EntryParams,
        ctl: &Control,
    ) -> Result<Self, vamana::BuildError> {
        let n = data.n();
        let m = params.sample_size(n)?;
        let ids: Vec<u32> = sample(&mut ChaCha8Rng::seed_from_u64(params.seed), n, m)
            .into_iter()
            .map(|i| i as u32)
            .collect();
        let dim = data.dim();
        let rows = Matrix::from_vec(data.gather_rows(&ids), dim).ok_or(
            vamana::BuildError::InvalidParam {
                name: "entry sample",
                reason: "zero dimension".into(),
            },
        )?;
        Self::from_sample(ids, rows, metric, params, ctl)
    }

    /// Builds the sample graph over the given nodes: `ids[i]` is the global id of `rows`' row
    /// `i` (distinct; they are sorted here).
    pub fn from_sample<T: Element>(
        ids: Vec<u32>,
        rows: Matrix<T>,
        metric: Metric,
        params: &EntryParams,
        ctl: &Control,
    ) -> Result<Self, vamana::BuildError> {
        if ids.is_empty() || ids.len() != rows.n() {
            return Err(vamana::BuildError::InvalidParam {
                name: "entry sample",
                reason: format!("{} ids for {} rows", ids.len(), rows.n()),
            });
        }
        let dim = rows.dim();
        let m = ids.len();
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_unstable_by_key(|&i| ids[i]);
        if order.windows(2).any(|w| ids[w[0]] == ids[w[1]]) {
            return Err(vamana::BuildError::InvalidParam {
                name: "entry sample",
                reason: "repeated ids".into(),
            });
        }
        let ids: Vec<u32> = order.iter().map(|&i| ids[i]).collect();
        let mut sorted = Vec::with_capacity(m * dim);
        for &i in &order {
            sorted.extend_from_slice(rows.row(i));
        }
        let sample = Matrix::from_vec(sorted, dim).ok_or(vamana::BuildError::InvalidParam {
            name: "entry sample",
            reason: "zero dimension".into(),
        })?;
        let graph = if m == 1 {
            Graph::from_lists(vec![Vec::new()], params.r.max(1), 0)
        } else {
            let vp = VamanaParams {
                r: params.r.min(m - 1).max(1),
                l: params.l.max(params.r.min(m - 1).max(1)),
                seed: params.seed,
                ..VamanaParams::default()
            };
            vamana::build(&sample, metric, &vp, ctl)?.0
        };
        let bytes: &[u8] = bytemuck::cast_slice(sample.as_slice());
        let mut words = vec![0u32; bytes.len().div_ceil(4)];
        bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Ok(Self {
            dtype: T::DTYPE,
            metric,
            dim,
            ids,
            words,
            graph,
        })
    }

    /// Sampled nodes.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the sample is empty (never, for a built or loaded index).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Maximum degree of the sample graph.
    pub fn max_degree(&self) -> usize {
        self.graph.max_degree()
    }

    /// Global ids of the sampled nodes.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Bytes of memory held.
    pub fn heap_bytes(&self) -> usize {
        self.ids.capacity() * 4 + self.words.capacity() * 4 + self.graph.heap_bytes()
    }

    fn rows<T: Element>(&self) -> &[T] {
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        let len = self.ids.len() * self.dim * self.dtype.size_bytes();
        bytemuck::cast_slice(&bytes[..len])
    }

    /// The `l` sampled nodes nearest to `query` found by a greedy search of the sample graph
    /// (exact distances), as global ids nearest first in `out`; returns the number of distances
    /// computed. `T` must be the index's element type and `query` its dimension (the disk
    /// index checks both before calling).
    pub fn search<T: Element>(
        &self,
        query: &[T],
        l: usize,
        scratch: &mut EntryScratch,
        out: &mut Vec<u32>,
    ) -> u64 {
        out.clear();
        if T::DTYPE != self.dtype || query.len() != self.dim || l == 0 {
            return 0;
        }
        let rows = self.rows::<T>();
        let dim = self.dim;
        let dist = |i: u32| {
            let x = &rows[i as usize * dim..(i as usize + 1) * dim];
            kernels::distance(self.metric, query, x)
        };
        let s = scratch;
        s.list.reset(l);
        s.visited.reset(self.ids.len());
        let start = self.graph.medoid();
        s.visited.insert(start);
        s.list.insert(start, dist(start));
        let mut computed = 1u64;
        while let Some(c) = s.list.pop_unexpanded() {
            for &nb in self.graph.neighbors(c.id) {
                if s.visited.insert(nb) {
                    s.list.insert(nb, dist(nb));
                    computed += 1;
                }
            }
        }
        out.extend(s.list.iter().map(|n| self.ids[n.id as usize]));
        computed
    }

    /// Writes the entry index to `path` for a disk index of `n` vectors whose PQ codes file
    /// has payload CRC `index_tag`.
    pub fn save(&self, path: &Path, n: u64, index_tag: u32) -> Result<u64, FileError> {
        let mut w = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        let mut head = ByteWriter::new();
        head.u32(index_tag);
        head.u64(n);
        head.u8(self.dtype.code());
        head.u8(self.metric.code());
        head.u8(0);
        head.u8(0);
        head.u32(self.dim as u32);
        head.u32(self.ids.len() as u32);
        head.u32(self.graph.max_degree() as u32);
        head.u32(self.graph.medoid());
        head.u32s(&self.ids);
        w.write(&head.into_inner())?;
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        w.write(&bytes[..self.ids.len() * self.dim * self.dtype.size_bytes()])?;
        let mut tail = ByteWriter::new();
        let m = self.ids.len() as u32;
        let degrees: Vec<u32> = (0..m)
            .map(|i| self.graph.neighbors(i).len() as u32)
            .collect();
        tail.u32s(&degrees);
        for i in 0..m {
            tail.u32s(self.graph.neighbors(i));
        }
        w.write(&tail.into_inner())?;
        w.finish()
    }

    /// The bytes an entry index in the file at `path` holds once loaded (ids, vectors and a
    /// graph of `R` slots per node), from its header alone; `None` when the header cannot be
    /// read (loading it then fails with the reason).
    pub fn heap_bytes_of(path: &Path) -> Option<u64> {
        use std::io::Read;
        let mut h = [0u8; crate::dir::file::HEADER_BYTES + 32];
        std::fs::File::open(path).ok()?.read_exact(&mut h).ok()?;
        let p = &h[crate::dir::file::HEADER_BYTES..];
        let u32_at = |o: usize| u64::from(u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]));
        let size = DType::from_code(p[12])?.size_bytes() as u64;
        let (dim, m, r) = (u32_at(16), u32_at(20), u32_at(24));
        Some(m * 4 + (m * dim * size).div_ceil(4) * 4 + m * (r + 1) * 4)
    }

    /// Reads an entry index written by [`EntryIndex::save`] and checks it belongs to a disk
    /// index of `n` vectors of `dtype`, `dim` and `metric` whose PQ codes have CRC `index_tag`.
    pub fn load(
        path: &Path,
        n: u64,
        dtype: DType,
        dim: usize,
        metric: Metric,
        index_tag: u32,
    ) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "trawl entry index", VERSION)?;
        let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let short = |e: crate::dir::bytes::ShortPayload| bad(e.to_string());
        let mut rd = ByteReader::new(&payload);
        let tag = rd.u32().map_err(short)?;
        let file_n = rd.u64().map_err(short)?;
        let (dt, mt) = (rd.u8().map_err(short)?, rd.u8().map_err(short)?);
        rd.bytes(2).map_err(short)?;
        let file_dim = rd.u32().map_err(short)? as usize;
        let m = rd.u32().map_err(short)? as usize;
        let r = rd.u32().map_err(short)? as usize;
        let medoid = rd.u32().map_err(short)?;
        if tag != index_tag
            || file_n != n
            || DType::from_code(dt) != Some(dtype)
            || Metric::from_code(mt) != Some(metric)
            || file_dim != dim
        {
            return Err(bad(
                "the entry index belongs to another build of the index (rebuild it)".into(),
            ));
        }
        if m == 0 || m as u64 > n || r == 0 || medoid as usize >= m {
            return Err(bad(format!("m = {m}, R = {r}, medoid = {medoid}")));
        }
        if r > vamana::file::MAX_FILE_DEGREE {
            return Err(bad(format!(
                "R = {r} exceeds the largest degree a graph can have ({})",
                vamana::file::MAX_FILE_DEGREE
            )));
        }
        let vec_bytes = m
            .checked_mul(dim)
            .and_then(|x| x.checked_mul(dtype.size_bytes()))
            .ok_or_else(|| bad("sample too large".into()))?;
        let need = vec_bytes
            .checked_add(m * 8)
            .ok_or_else(|| bad("sample too large".into()))?;
        if rd.remaining() < need {
            return Err(bad("payload too short".into()));
        }
        let ids = rd.u32s(m).map_err(short)?;
        let mut seen = ids.clone();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) || seen.last().is_some_and(|&x| u64::from(x) >= n)
        {
            return Err(bad("sampled ids are repeated or out of range".into()));
        }
        let vbytes = rd.bytes(vec_bytes).map_err(short)?;
        let mut words = vec![0u32; vec_bytes.div_ceil(4)];
        bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..vec_bytes].copy_from_slice(vbytes);
        let degrees = rd.u32s(m).map_err(short)?;
        if degrees.iter().any(|&d| d as usize > r) {
            return Err(bad("a degree exceeds R".into()));
        }
        // Degrees are ≤ R < 2¹⁶ and m < 2³²: the sum and its byte count fit a u64.
        let total: u64 = degrees.iter().map(|&d| u64::from(d)).sum();
        if rd.remaining() as u64 != total * 4 {
            return Err(bad("neighbour lists do not match their degrees".into()));
        }
        let mut lists = Vec::with_capacity(m);
        for &d in &degrees {
            let list = rd.u32s(d as usize).map_err(short)?;
            if list.iter().any(|&x| x as usize >= m) {
                return Err(bad("a neighbour id is out of range".into()));
            }
            lists.push(list);
        }
        let graph = vamana::file::graph_from_checked_lists(&lists, r, medoid).ok_or_else(|| {
            bad(format!(
                "{m} nodes × R = {r} neighbour slots do not fit in memory"
            ))
        })?;
        Ok(Self {
            dtype,
            metric,
            dim,
            ids,
            words,
            graph,
        })
    }
}

//! Building a disk index: PQ training and encoding, the Vamana graph, the page-packed file.

use std::path::Path;
use std::time::Instant;

use crate::data::{DataError, Matrix};
use crate::dir::manifest::BuildRecord;
use crate::dir::txn::Txn;
use crate::dir::FileError;
use crate::kernels::{Element, Metric};
use crate::kinds::graph::label_starts::{self, LabelAware, LabelStarts};
use crate::kinds::graph::layout::packed::{self, PackedMeta, PackedWriter};
use crate::kinds::graph::search::entry::{self, EntryIndex, EntryParams, EntrySampling};
use crate::kinds::graph::{payload_crc, PQ_CODES_FILE, PQ_FILE};
use crate::progress::Control;
use crate::quant::pq::{PqError, PqParams};
use crate::quant::{QuantKind, Quantiser};
use crate::vamana::{self, BuildError, VamanaParams};

/// Parameters of [`build_index`].
#[derive(Debug, Clone)]
pub struct IndexParams {
    /// Distance to index for.
    pub metric: Metric,
    /// Graph parameters (R, L, α, memory budget, seed …). Lists are not saturated by default
    /// (`saturate: true` fills them up to R after pruning, as DiskANN's disk build does).
    pub graph: VamanaParams,
    /// PQ parameters; `bytes_per_vector` is the in-memory code size (clamped to the dimension).
    pub pq: PqParams,
    /// The quantiser the searches navigate with: PQ (from `pq`) or RaBitQ.
    pub quant: QuantKind,
    /// The in-memory entry index (a sample graph searched before the disk search), or `None`
    /// for none. On by default (1% sample, R = 32, L = 64).
    pub entry: Option<EntryParams>,
    /// The vectors' attributes (labels, numeric fields), stored as `attrs.trawl` for
    /// filtered search; row `i` is vector `i`.
    pub attrs: Option<std::sync::Arc<crate::filter::Attributes>>,
    /// Whether the graph is built label-aware from the attributes' labels (FilteredVamana:
    /// per-label start nodes, a prune that keeps a path for every label; see
    /// [`crate::vamana::labels`]) — when a label is on at most
    /// [`crate::vamana::defaults::LABEL_MAX_SHARE`] of the vectors. `Auto` (the default): unless
    /// a memory budget is given.
    pub label_aware: LabelAware,
}

impl IndexParams {
    /// Checks every parameter against data of `dim` dimensions, before anything is written.
    pub fn validate(&self, dim: usize) -> Result<(), IndexBuildError> {
        self.graph.validate()?;
        let m = self.pq.bytes_per_vector.clamp(1, dim.max(1));
        if self.pq.bytes_per_vector == 0 || dim == 0 {
            return Err(PqError::BadCodeSize {
                bytes_per_vector: self.pq.bytes_per_vector,
                dim,
            }
            .into());
        }
        if self.pq.max_sample == 0 {
            return Err(PqError::ZeroSample.into());
        }
        debug_assert!(m >= 1);
        if let Some(e) = &self.entry {
            e.validate()?;
        }
        Ok(())
    }
}

impl Default for IndexParams {
    fn default() -> Self {
        Self {
            metric: Metric::L2,
            graph: VamanaParams::default(),
            pq: PqParams::default(),
            quant: QuantKind::Pq,
            entry: Some(EntryParams::default()),
            attrs: None,
            label_aware: LabelAware::Auto,
        }
    }
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexBuildError {
    /// The input vectors are unusable (NaN, empty).
    #[error(transparent)]
    Data(#[from] DataError),
    /// PQ training or encoding failed.
    #[error("product quantisation: {0}")]
    Pq(#[from] PqError),
    /// RaBitQ training or encoding failed.
    #[error("RaBitQ: {0}")]
    RaBitQ(#[from] crate::quant::rabitq::RbqError),
    /// The graph build failed.
    #[error("graph build: {0}")]
    Graph(#[from] BuildError),
    /// Writing a file failed.
    #[error(transparent)]
    File(#[from] FileError),
    /// Reading the index back (to choose entry nodes by visit frequency) failed.
    #[error("reading the index back: {0}")]
    Search(#[from] crate::search::SearchError),
    /// Opening the index just written failed.
    #[error("opening the index just written: {0}")]
    Open(#[from] crate::kinds::graph::OpenError),
    /// The directory's atomic write could not start or finish (another writer, the OS).
    #[error(transparent)]
    Txn(#[from] crate::dir::txn::TxnError),
    /// A build parameter is out of range.
    #[error("invalid build parameters: {0}")]
    InvalidParams(String),
    /// The attributes do not fit the data.
    #[error(transparent)]
    Attrs(crate::filter::FilterError),
    /// The build was cancelled (Ctrl-C, a cancel flag); nothing was written.
    #[error("cancelled")]
    Cancelled,
    /// An invariant of the build does not hold: a bug in trawl.
    #[error("internal error: {0} (a bug: please report it)")]
    Internal(String),
    /// The output directory could not be created.
    #[error("{}: {source}", dir.display())]
    Dir {
        /// The directory.
        dir: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<crate::quant::QuantError> for IndexBuildError {
    fn from(e: crate::quant::QuantError) -> Self {
        match e {
            crate::quant::QuantError::Pq(p) => Self::Pq(p),
            crate::quant::QuantError::RaBitQ(r) => Self::RaBitQ(r),
        }
    }
}

impl IndexBuildError {
    /// What kind of failure this is. A file that cannot be written is a storage failure even
    /// when its directory is missing (`NotFound` is for indexes and inputs).
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            Self::Data(d) => d.kind(),
            Self::Pq(p) => p.kind(),
            Self::RaBitQ(p) => p.kind(),
            Self::Graph(g) => g.kind(),
            Self::File(f) => match f.kind() {
                K::NotFound => K::Storage,
                k => k,
            },
            Self::Search(s) => s.kind(),
            Self::Open(o) => o.kind(),
            Self::Txn(t) => t.kind(),
            Self::Dir { .. } => K::Storage,
            Self::InvalidParams(_) => K::InvalidInput,
            Self::Attrs(e) => e.kind(),
            Self::Cancelled => K::Cancelled,
            Self::Internal(_) => K::Internal,
        }
    }
}

/// What a build did and produced.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IndexBuildReport {
    /// Vectors indexed.
    pub n: usize,
    /// Dimension.
    pub dim: usize,
    /// Element type name.
    pub dtype: String,
    /// Metric name.
    pub metric: String,
    /// PQ bytes per vector.
    pub pq_bytes_per_vector: usize,
    /// Whether the PQ carries an OPQ rotation (`PqParams::opq_iters > 0`).
    pub pq_opq: bool,
    /// Seconds to train and encode PQ.
    pub pq_secs: f64,
    /// Seconds of the graph build.
    pub graph_secs: f64,
    /// Seconds to write the page-packed file.
    pub layout_secs: f64,
    /// Seconds of the whole build.
    pub total_secs: f64,
    /// Mean out-degree.
    pub avg_degree: f64,
    /// Largest out-degree (the record's neighbour slots).
    pub max_degree: usize,
    /// Graph shards (1 = unsharded).
    pub shards: usize,
    /// Records per 4 KiB page (0 when a record spans pages).
    pub records_per_page: usize,
    /// Bytes of the page-packed file.
    pub packed_bytes: u64,
    /// Bytes of the PQ quantiser file.
    pub pq_bytes: u64,
    /// Bytes of the PQ codes file.
    pub pq_codes_bytes: u64,
    /// Nodes sampled into the entry index (0 without one).
    pub entry_nodes: usize,
    /// Seconds to build and write the entry index.
    pub entry_secs: f64,
    /// Bytes of the entry index file.
    pub entry_bytes: u64,
    /// Seconds to rank the nodes for caches (the hot-node order, [`crate::kinds::graph::hot`]).
    pub hot_secs: f64,
    /// Bytes of the hot-node order's file.
    pub hot_bytes: u64,
    /// Bytes of the manifest.
    pub manifest_bytes: u64,
    /// Bytes of the whole index on disk.
    pub disk_bytes: u64,
    /// How the graph's nodes are reached from the medoid (after the build linked back the
    /// nodes it did not reach: `unreachable` is 0).
    pub connectivity: vamana::connectivity::Connectivity,
    /// Edges the build added to link back nodes the medoid did not reach.
    pub relinked: usize,
    /// Queries of the build's query sample (0 without one).
    pub query_sample: usize,
    /// Edges the query sample added (query-aware edges).
    pub query_edges: usize,
    /// Labels with a start node in a label-aware graph (0: the plain build).
    pub label_starts: usize,
    /// Label-restricted searches the label-aware build ran.
    pub label_searches: u64,
    /// The recall monitor's figures (also in the manifest; `None` for a random-link index).
    pub recall: Option<crate::kinds::graph::monitor::RecallRecord>,
    /// Seconds the recall monitor took.
    pub monitor_secs: f64,
}

/// Builds a disk index over `data` into `dir` (created if missing). The parameters and the
/// data are checked before anything is written; the new files are written beside the index
/// the directory may hold and replace it in one atomic commit ([`crate::dir::txn`]), so a build
/// that fails or is killed leaves the old index as it was. Runs on rayon's current thread
/// pool.
pub fn build_index<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    params: &IndexParams,
    ctl: &Control,
) -> Result<IndexBuildReport, IndexBuildError> {
    build_with(data, dir, params, None, None, ctl)
}

/// [`build_index`] with a sample of the queries the index will serve: the graph gets
/// query-aware edges between the nearest points of each sample query
/// ([`vamana::link_query_neighbours`]), which lifts the recall of queries that lie away from
/// the data — regions with no points of their own — where a search otherwise stays in the
/// first cluster it enters (`bench/results/recall-stability.md`). The sample must have the
/// data's element type and dimension; it is not stored.
pub fn build_index_with_queries<T: Element>(
    data: &Matrix<T>,
    queries: &Matrix<T>,
    dir: &Path,
    params: &IndexParams,
    ctl: &Control,
) -> Result<IndexBuildReport, IndexBuildError> {
    build_with(data, dir, params, None, Some(queries), ctl)
}

/// [`build_index`] with a graph of `params.graph.r` random links per node (seed
/// `params.graph.seed`) instead of a Vamana graph: a sample index for FlashANNS's degree
/// selector, which profiles reads and per-step work, not recall.
pub fn build_random_link_index<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    params: &IndexParams,
    ctl: &Control,
) -> Result<IndexBuildReport, IndexBuildError> {
    build_with(data, dir, params, Some(params.graph.seed), None, ctl)
}

/// Writes the page-packed file: every vector with its neighbours in graph `g`.
fn write_packed<T: Element>(
    data: &Matrix<T>,
    g: &vamana::Graph,
    path: &Path,
    meta: PackedMeta,
    ctl: &Control,
) -> Result<u64, IndexBuildError> {
    let mut w = PackedWriter::create(path, meta)?;
    let bar = ctl.bar("writing the disk index", data.n() as u64);
    for i in 0..data.n() {
        w.push(data.row(i), g.neighbors(i as u32))?;
        if i % 65536 == 0 {
            bar.set_position(i as u64);
            // A mapped source stays out of the resident set behind the writer.
            data.release_rows(i.saturating_sub(65536), i);
        }
    }
    data.release_rows(0, data.n());
    let bytes = w.finish()?;
    bar.finish_and_clear();
    Ok(bytes)
}

/// Builds and writes the entry index `params.entry` asks for (by visit frequency: searching
/// the index staged in `txn`); returns its nodes and bytes.
fn write_entry<T: Element>(
    data: &Matrix<T>,
    params: &IndexParams,
    txn: &Txn,
    meta: &PackedMeta,
    ctl: &Control,
) -> Result<(usize, u64), IndexBuildError> {
    let entry_path = txn.path(entry::FILE_NAME);
    Ok(match &params.entry {
        Some(ep) if ep.sampling == EntrySampling::Uniform => {
            let e = EntryIndex::build(data, params.metric, ep, ctl)?;
            (e.len(), e.save(&entry_path, meta.n, meta.pq_codes_crc)?)
        }
        Some(ep) => {
            // Visit frequency needs searches over the index just written (still staged).
            let ix = crate::kinds::graph::DiskIndex::open(
                txn.staging(),
                crate::kinds::graph::OpenOptions::default(),
            )?;
            let (e, _) = ix.build_entry(ep, rayon::current_num_threads(), ctl)?;
            drop(ix);
            (e.len(), e.save(&entry_path, meta.n, meta.pq_codes_crc)?)
        }
        None => (0, 0),
    })
}

/// Ranks the nodes of the index staged in `txn` for caches and writes the hot-node order;
/// returns its bytes and the seconds it took.
fn write_hot(txn: &Txn, ctl: &Control) -> Result<(u64, f64), IndexBuildError> {
    let t = Instant::now();
    // Through the page cache: the file was just written, and the counts do not depend on
    // how pages are read.
    let mut ix = crate::kinds::graph::DiskIndex::open(
        txn.staging(),
        crate::kinds::graph::OpenOptions {
            direct: false,
            ..crate::kinds::graph::OpenOptions::default()
        },
    )?;
    let bytes = ix.save_hot_order(
        &txn.path(crate::kinds::graph::hot::FILE_NAME),
        rayon::current_num_threads(),
        ctl,
    )?;
    Ok((bytes, t.elapsed().as_secs_f64()))
}

/// The recall monitor's figures of the index written in `dir` (the build's record).
fn measure_recall<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
) -> Result<Option<crate::kinds::graph::monitor::RecallRecord>, IndexBuildError> {
    let ix = crate::kinds::graph::DiskIndex::open(
        dir,
        crate::kinds::graph::OpenOptions {
            direct: false,
            ..crate::kinds::graph::OpenOptions::default()
        },
    )?;
    let (points, samples) =
        crate::kinds::graph::monitor::measure(&ix, &|s| data.row(s as usize), &|_| true)?;
    Ok(
        (!points.is_empty()).then(|| crate::kinds::graph::monitor::RecallRecord {
            samples,
            beam_width: crate::kinds::graph::search::DEFAULT_BEAM_WIDTH,
            build: points.clone(),
            points,
            by: "build".into(),
        }),
    )
}

/// Trains the PQ quantiser (its bytes per vector at most the dimension), encodes every vector
/// and writes both files into `txn`'s staging directory: the quantiser and the files' bytes.
/// Shared by the graph and IVF builds.
pub(crate) fn write_pq<T: Element>(
    data: &Matrix<T>,
    metric: Metric,
    kind: QuantKind,
    params: &PqParams,
    txn: &Txn,
    ctl: &Control,
) -> Result<(Quantiser, u64, u64), IndexBuildError> {
    let mut pq_params = params.clone();
    pq_params.bytes_per_vector = pq_params.bytes_per_vector.clamp(1, data.dim());
    let pq = Quantiser::train(data, metric, kind, &pq_params, ctl)?;
    let codes = pq.encode(data, ctl)?;
    data.release_rows(0, data.n());
    let pq_bytes = pq.save(&txn.path(PQ_FILE))?;
    let pq_codes_bytes = codes.save(&txn.path(PQ_CODES_FILE))?;
    Ok((pq, pq_bytes, pq_codes_bytes))
}

/// The manifest's record of a graph build.
fn build_record(params: &IndexParams, pq: &Quantiser, query_sample: usize) -> BuildRecord {
    BuildRecord {
        r: params.graph.r,
        l: params.graph.l,
        // 1.2f32 as 1.2, not 1.2000000476837158.
        alpha: params.graph.alpha.to_string().parse().unwrap_or(0.0),
        pq_bytes: pq.m(),
        opq: pq.as_pq().is_some_and(|p| p.rotation().is_some()),
        rabitq_bits: pq.as_rabitq().map(|r| r.bits()),
        entry_ratio: params.entry.map_or(0.0, |e| e.ratio),
        memory_budget_bytes: params.graph.memory_budget_bytes.unwrap_or(0),
        seed: params.graph.seed,
        visit_order: Some(params.graph.order.to_string()),
        query_sample,
        ivf: None,
    }
}

/// Writes the attributes and, from a label-aware build, the start nodes of their labels.
fn write_attrs(
    params: &IndexParams,
    labels: Option<&vamana::BuildLabels>,
    txn: &Txn,
    meta: &PackedMeta,
) -> Result<(), IndexBuildError> {
    let Some(a) = &params.attrs else {
        return Ok(());
    };
    crate::filter::attrs::check_rows(Some(a), meta.n as usize).map_err(IndexBuildError::Attrs)?;
    let attrs_path = txn.path(crate::filter::file::FILE_NAME);
    crate::filter::file::save(a, &attrs_path)?;
    if let Some(lb) = labels {
        LabelStarts::new(lb.starts().to_vec()).save(
            &txn.path(label_starts::FILE_NAME),
            meta.n,
            meta.pq_codes_crc,
            payload_crc(&attrs_path)?,
        )?;
    }
    Ok(())
}

/// Whether the build is label-aware: `On`, or `Auto` without a memory budget (a budget is
/// given for the largest sets, where the build's time and memory matter most).
fn label_aware(params: &IndexParams) -> bool {
    match params.label_aware {
        LabelAware::On => true,
        LabelAware::Auto => params.graph.memory_budget_bytes.is_none(),
        LabelAware::Off => false,
    }
}

/// The labels of the attributes a label-aware build links by (`None`: not label-aware, no
/// attributes, no label tracked; `vamana`: a Vamana graph is built).
fn build_labels(
    params: &IndexParams,
    n: usize,
    vamana: bool,
) -> Result<Option<vamana::BuildLabels>, IndexBuildError> {
    let Some(attrs) = params
        .attrs
        .as_ref()
        .filter(|_| vamana && label_aware(params))
    else {
        return Ok(None);
    };
    let share = vamana::defaults::LABEL_MAX_SHARE;
    let most = (share * n as f64) as u64;
    let members: Vec<Vec<u32>> = attrs
        .labels()
        .map(|(_, bits)| {
            if (2..=most).contains(&bits.len()) {
                bits.iter().collect()
            } else {
                Vec::new()
            }
        })
        .collect();
    let labels = vamana::BuildLabels::new(n, members, share)?;
    Ok((labels.tracked() > 0).then_some(labels))
}

fn build_with<T: Element>(
    data: &Matrix<T>,
    dir: &Path,
    params: &IndexParams,
    random_links: Option<u64>,
    queries: Option<&Matrix<T>>,
    ctl: &Control,
) -> Result<IndexBuildReport, IndexBuildError> {
    let t0 = Instant::now();
    params.validate(data.dim())?;
    if let Some(q) = queries {
        if q.dim() != data.dim() {
            return Err(vamana::BuildError::DimMismatch {
                expected: data.dim(),
                got: q.dim(),
            }
            .into());
        }
        crate::data::validate_finite(q)?;
    }
    crate::data::validate_finite(data)?;
    let txn = Txn::begin_replacing(dir, crate::kinds::graph::refuse_unmerged_updates)?;
    let (pq, pq_bytes, pq_codes_bytes) =
        write_pq(data, params.metric, params.quant, &params.pq, &txn, ctl)?;
    let (pq_path, codes_path) = (txn.path(PQ_FILE), txn.path(PQ_CODES_FILE));
    let pq_secs = t0.elapsed().as_secs_f64();

    let mut labels = build_labels(params, data.n(), random_links.is_none())?;
    let (g, gstats) = match random_links {
        None => vamana::build_labelled(
            data,
            params.metric,
            &params.graph,
            queries,
            labels.as_mut(),
            ctl,
        )?,
        Some(seed) => vamana::random_links(data, params.metric, params.graph.r, seed, ctl)?,
    };
    let graph_secs = gstats.wall_secs;
    let connectivity = vamana::connectivity::measure(&g, &[g.medoid()], None);

    let t_layout = Instant::now();
    let meta = PackedMeta {
        dtype: T::DTYPE,
        metric: params.metric,
        dim: data.dim(),
        n: data.n() as u64,
        r: g.max_degree().max(1),
        medoid: g.medoid(),
        pq_bytes: pq.m(),
        pq_crc: payload_crc(&pq_path)?,
        pq_codes_crc: payload_crc(&codes_path)?,
        neighbor_code_bytes: 0,
        permuted: false,
    };
    let packed_bytes = write_packed(data, &g, &txn.path(packed::FILE_NAME), meta, ctl)?;
    let layout_secs = t_layout.elapsed().as_secs_f64();

    let starts = labels.as_ref().filter(|_| gstats.label_starts > 0);
    write_attrs(params, starts, &txn, &meta)?;
    let t_entry = Instant::now();
    let (entry_nodes, entry_bytes) = write_entry(data, params, &txn, &meta, ctl)?;
    let entry_secs = t_entry.elapsed().as_secs_f64();
    let (hot_bytes, hot_secs) = write_hot(&txn, ctl)?;
    let t_monitor = Instant::now();
    let recall = if random_links.is_none() {
        measure_recall(data, txn.staging())?
    } else {
        None
    };
    let monitor_secs = t_monitor.elapsed().as_secs_f64();
    let mut manifest = crate::kinds::graph::files::describe(
        &[txn.staging()],
        Some(build_record(params, &pq, gstats.query_sample)),
        String::new(),
    )?;
    manifest.recall = recall.clone();
    let manifest_bytes = txn.commit(&manifest)?;
    let per_page = packed::PackedGeometry::of(&meta).map_or(0, |g| g.per_page);
    let disk_bytes = packed_bytes + pq_bytes + pq_codes_bytes + entry_bytes + hot_bytes;
    Ok(IndexBuildReport {
        n: data.n(),
        dim: data.dim(),
        dtype: T::DTYPE.name().into(),
        metric: params.metric.name().into(),
        pq_bytes_per_vector: pq.m(),
        pq_opq: params.pq.opq_iters > 0,
        pq_secs,
        graph_secs,
        layout_secs,
        total_secs: t0.elapsed().as_secs_f64(),
        avg_degree: gstats.avg_degree,
        max_degree: gstats.max_degree,
        shards: gstats.shards,
        records_per_page: per_page,
        packed_bytes,
        pq_bytes,
        pq_codes_bytes,
        entry_nodes,
        entry_secs,
        entry_bytes,
        hot_secs,
        hot_bytes,
        manifest_bytes,
        disk_bytes: disk_bytes + manifest_bytes,
        connectivity,
        relinked: gstats.relinked,
        query_sample: gstats.query_sample,
        query_edges: gstats.query_edges,
        label_starts: gstats.label_starts,
        label_searches: gstats.label_searches,
        recall,
        monitor_secs,
    })
}

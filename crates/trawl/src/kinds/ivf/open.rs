//! Opening an IVF index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::accel::{self, Accelerator};
use crate::dir::FileError;
use crate::io::IoFile;
use crate::kinds::graph::{payload_crc, Manifest, OpenError, OpenOptions, PQ_CODES_FILE, PQ_FILE};
use crate::kinds::ivf::file::{IvfMeta, FILE_NAME};
use crate::kinds::ivf::{VECTORS_BY_ID_FILE, VECTORS_FILE};
use crate::kinds::slot_file::SlotFile;
use crate::quant::pq::PqCodes;
use crate::quant::rabitq::fastscan::BlockLists;

/// Which vector file an IVF index reads its re-rank vectors from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IvfVectorLayout {
    /// Buckets by nearest centroid (`ivf-vectors.trawl`).
    #[default]
    Bucket,
    /// Id order (`ivf-vectors-by-id.trawl`, written by `--by-id-vectors`): the ablation
    /// baseline.
    ById,
}

impl IvfVectorLayout {
    /// `bucket` or `by_id`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Bucket => "bucket",
            Self::ById => "by_id",
        }
    }

    /// The file it reads.
    pub fn file_name(&self) -> &'static str {
        match self {
            Self::Bucket => VECTORS_FILE,
            Self::ById => VECTORS_BY_ID_FILE,
        }
    }
}

impl std::str::FromStr for IvfVectorLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bucket" => Ok(Self::Bucket),
            "by_id" | "by-id" | "id" => Ok(Self::ById),
            o => Err(format!("unknown IVF vector layout {o:?} (bucket, by_id)")),
        }
    }
}

/// An opened IVF index: everything but the vectors in memory, the PQ codes on the
/// accelerator.
pub struct IvfIndex {
    pub(super) dir: PathBuf,
    pub(super) opts: OpenOptions,
    pub(super) meta: IvfMeta,
    pub(super) pq: crate::quant::Quantiser,
    pub(super) codes: Arc<PqCodes>,
    pub(super) vectors: SlotFile,
    pub(super) vfile: IoFile,
    pub(super) accel: Arc<dyn Accelerator>,
    /// RaBitQ on the CPU backend: the codes in FastScan blocks by posting list.
    pub(super) code_lists: Option<Arc<BlockLists>>,
    /// Engines kept between searches of one query ([`IvfIndex::search_one`]).
    pub(super) engines: crate::io::EnginePool,
    /// The vectors' attributes, when the index has them.
    pub(super) attrs: Option<crate::filter::Attributes>,
}

impl std::fmt::Debug for IvfIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IvfIndex")
            .field("dir", &self.dir)
            .field("n", &self.meta.n)
            .field("dim", &self.meta.dim)
            .field("nlist", &self.meta.nlist())
            .field("accel", &self.accel.info().backend)
            .finish_non_exhaustive()
    }
}

impl IvfIndex {
    /// Opens the IVF index in `dir`: checks every file (magic, version, checksums, that they
    /// belong to one build), loads the in-memory parts, opens the accelerator
    /// (`opts.accel`) with the PQ codes, and the vector file (`opts.ivf_vectors`) for reads.
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Self, OpenError> {
        let mismatch = |reason: String| OpenError::Mismatch {
            dir: dir.to_path_buf(),
            reason,
        };
        let manifest = Manifest::load_if_present(dir)?;
        let vname = opts.ivf_vectors.file_name();
        let attrs_path = dir.join(crate::filter::file::FILE_NAME);
        if let Some(m) = &manifest {
            let mut names = vec![FILE_NAME, PQ_FILE, PQ_CODES_FILE, vname];
            if attrs_path.is_file() {
                names.push(crate::filter::file::FILE_NAME);
            }
            m.check_files(dir, &names)?;
        }
        let meta = IvfMeta::load(&dir.join(FILE_NAME))?;
        let pq_path = dir.join(PQ_FILE);
        let codes_path = dir.join(PQ_CODES_FILE);
        if payload_crc(&pq_path)? != meta.pq_crc || payload_crc(&codes_path)? != meta.pq_codes_crc {
            return Err(mismatch(
                "pq.trawl / pq-codes.trawl are not the ones ivf.trawl was built with".into(),
            ));
        }
        let pq = crate::quant::Quantiser::load(&pq_path)?;
        let codes = PqCodes::load(&codes_path)?;
        pq.check_codes(&codes, &codes_path)?;
        if codes.n() as u64 != meta.n || pq.dim() != meta.dim || codes.m() != pq.m() {
            return Err(mismatch(format!(
                "PQ codes of {} vectors × {} bytes, quantiser of dimension {}, index of {} × {}",
                codes.n(),
                codes.m(),
                pq.dim(),
                meta.n,
                meta.dim
            )));
        }
        let vpath = dir.join(vname);
        if !vpath.is_file() && opts.ivf_vectors == IvfVectorLayout::ById {
            return Err(OpenError::NotAnIndex {
                dir: dir.to_path_buf(),
                reason: format!(
                    "{vname} is missing: build with --by-id-vectors to search the by-id layout"
                ),
            });
        }
        let vectors = SlotFile::open(&vpath)?;
        let g = vectors.geometry();
        if g.n != meta.n || g.dim != meta.dim || g.dtype != meta.dtype {
            return Err(mismatch(format!(
                "{vname} holds {} × {} {}, the index {} × {} {}",
                g.n, g.dim, g.dtype, meta.n, meta.dim, meta.dtype
            )));
        }
        if opts.ivf_vectors == IvfVectorLayout::Bucket && vectors.header_crc() != meta.vectors_crc {
            return Err(mismatch(format!(
                "{vname} is not the vector file ivf.trawl was built with"
            )));
        }
        let mut vfile = IoFile::open(&vpath, opts.direct)?;
        if opts.engine.needs_resident() {
            vfile.load_resident()?;
        }
        let attrs = if attrs_path.is_file() {
            Some(crate::filter::file::load(&attrs_path, meta.n)?)
        } else {
            None
        };
        let codes = Arc::new(codes);
        let (accel, code_lists) =
            open_accel(opts.accel, opts.fastscan, &codes, &pq, &meta).map_err(OpenError::Accel)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            opts,
            meta,
            pq,
            codes,
            vectors,
            vfile,
            accel,
            code_lists,
            engines: Default::default(),
            attrs,
        })
    }

    /// The vectors' attributes, when the index has them.
    pub fn attrs(&self) -> Option<&crate::filter::Attributes> {
        self.attrs.as_ref()
    }

    /// The I/O engine configuration of a searcher.
    pub(crate) fn engine_config(&self) -> crate::io::EngineConfig {
        crate::io::EngineConfig {
            depth: self.opts.queue_depth.max(1),
            max_pages_per_read: self.vectors.geometry().pages_per_vector,
            register_buffers: self.opts.register_buffers,
            sqpoll: self.opts.sqpoll,
            taskrun: self.opts.taskrun,
        }
    }

    /// Searches one query on the calling thread with a pooled engine (setting up an engine
    /// costs more than a query): results by distance and the query's statistics.
    pub fn search_one<T: crate::Element>(
        &self,
        query: &[T],
        p: &crate::kinds::ivf::IvfSearchParams,
    ) -> Result<(Vec<(f32, u32)>, crate::search::QueryStats), crate::search::SearchError> {
        let cfg = self.engine_config();
        let engine = self.engines.take(&self.vfile, self.opts.engine, cfg)?;
        let mut s = self.searcher_with(engine)?;
        // Poll for completions a while before blocking, as single graph searches do.
        s.set_spin(std::time::Duration::from_micros(
            self.opts
                .spin_us
                .unwrap_or(crate::kinds::graph::AUTO_SPIN_US),
        ));
        let r = s.search(query, p);
        self.engines.give(cfg, s.into_engine());
        r
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How it was opened.
    pub fn options(&self) -> &OpenOptions {
        &self.opts
    }

    /// The in-memory structures.
    pub fn meta(&self) -> &IvfMeta {
        &self.meta
    }

    /// Vectors.
    pub fn n(&self) -> usize {
        self.meta.n as usize
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// Element type.
    pub fn dtype(&self) -> crate::DType {
        self.meta.dtype
    }

    /// Metric.
    pub fn metric(&self) -> crate::Metric {
        self.meta.metric
    }

    /// The quantiser of the filter stage (PQ or RaBitQ).
    pub fn pq(&self) -> &crate::quant::Quantiser {
        &self.pq
    }

    /// The PQ codes (also resident on the accelerator).
    pub fn codes(&self) -> &Arc<PqCodes> {
        &self.codes
    }

    /// The vector file.
    pub fn vectors(&self) -> &SlotFile {
        &self.vectors
    }

    /// The accelerator of the filter stage.
    pub fn accel(&self) -> &Arc<dyn Accelerator> {
        &self.accel
    }

    /// Replaces the accelerator (the same codes on another backend).
    pub fn set_accel(&mut self, kind: accel::AccelKind) -> Result<(), accel::AccelError> {
        (self.accel, self.code_lists) =
            open_accel(kind, self.opts.fastscan, &self.codes, &self.pq, &self.meta)?;
        self.opts.accel = kind;
        Ok(())
    }

    /// Host memory held at search time, in bytes, by part.
    pub fn memory(&self) -> IvfMemory {
        IvfMemory {
            centroids: (self.meta.centroids.len() * 4) as u64,
            centroid_graph: self.meta.graph.heap_bytes() as u64,
            posting_lists: (self.meta.list_offsets.len() * 8 + self.meta.list_ids.len() * 4) as u64,
            pq_codes: self.codes.as_bytes().len() as u64,
            pq_codebooks: self.pq.heap_bytes(),
            vector_table: self.vectors.heap_bytes(),
            code_lists: self.code_lists.as_ref().map_or(0, |l| l.heap_bytes()),
        }
    }

    /// The description `trawl info`, bench JSON and Python print.
    pub fn info(&self) -> Result<crate::kinds::graph::IndexInfo, OpenError> {
        use crate::kinds::graph::{DiskBytes, DiskBytesInfo, IndexInfo, IvfInfo, MemoryReport};
        let manifest = Manifest::load_if_present(&self.dir)?;
        let size = |name: &str| std::fs::metadata(self.dir.join(name)).map_or(0, |m| m.len());
        let db = DiskBytes {
            packed: 0,
            graph: size(FILE_NAME),
            vectors: size(self.opts.ivf_vectors.file_name()),
            pq: size(PQ_FILE),
            pq_codes: size(PQ_CODES_FILE),
            entry: 0,
            manifest: size(crate::kinds::graph::MANIFEST_FILE),
            hot: 0,
            refine: 0,
        };
        let mem = self.memory();
        let report = MemoryReport {
            // RaBitQ on the CPU: the FastScan copies by list are codes in memory too.
            pq_codes_bytes: mem.pq_codes + mem.code_lists,
            pq_codebook_bytes: mem.pq_codebooks,
            checksum_bytes: mem.vector_table,
            // The centroids, their graph and the posting lists: the IVF index's "entry".
            entry_bytes: mem.centroids + mem.centroid_graph + mem.posting_lists,
            attrs_bytes: self.attrs.as_ref().map_or(0, |a| a.memory_bytes()),
            ..MemoryReport::default()
        };
        let g = self.vectors.geometry();
        Ok(IndexInfo {
            dir: self.dir.display().to_string(),
            kind: crate::kinds::graph::KindName::Ivf,
            n: self.n(),
            dim: self.dim(),
            dtype: self.dtype().name().into(),
            metric: self.metric().name().into(),
            r: self.meta.graph.max_degree(),
            pq_bytes: self.pq.m(),
            medoid: self.meta.graph.medoid(),
            layout: self.opts.ivf_vectors.name().into(),
            records_per_page: g.per_page,
            entry_nodes: 0,
            layouts: manifest
                .as_ref()
                .map_or_else(|| vec!["bucket".into()], |m| m.layouts.clone()),
            disk_bytes: DiskBytesInfo {
                files: db,
                total: db.total(),
            },
            memory_bytes: report,
            memory_total_bytes: report.total(),
            verify_pages: self.opts.verify_pages,
            manifest: manifest.is_some(),
            files: manifest.as_ref().map_or_else(Vec::new, |m| m.files.clone()),
            build_id: manifest
                .as_ref()
                .map_or_else(String::new, |m| m.build_id.clone()),
            build: manifest.and_then(|m| m.build),
            recall: None,
            ivf: Some(IvfInfo {
                nlist: self.meta.nlist(),
                replication: self.meta.replication(),
                list_size: self.meta.list_size,
                epsilon: self.meta.epsilon,
                max_replicas: self.meta.max_replicas,
                centroid_r: self.meta.graph.max_degree(),
                vector_layout: self.opts.ivf_vectors.name().into(),
                vectors_per_page: g.per_page,
                vector_pages: g.data_pages,
                accel: self.accel.info(),
                memory: mem,
            }),
            shards: None,
        })
    }

    /// Reads every file of the index whole and checks it with the component that owns it
    /// ([`crate::kinds::ivf::files`]): the index file's structure ([`IvfIndex::check_structure`]'s
    /// checks), the PQ files against it, and every data page of the vector files against its
    /// checksum. Errors name the file at fault.
    pub fn verify(
        &self,
        ctl: &crate::progress::Control,
    ) -> Result<crate::kinds::VerifyReport, OpenError> {
        crate::kinds::ivf::files::verify(&self.dir, ctl)
    }

    /// The semantic checks of the opened index: its index file's
    /// ([`crate::kinds::ivf::files::check_meta`]: finite centroids, the posting lists'
    /// invariants, agreement with the manifest's build record) and, searching the bucketed
    /// vector file with every vector in exactly one list, that the file lays the vectors out by
    /// those lists. Errors name `ivf.trawl`.
    pub fn check_structure(&self) -> Result<(), FileError> {
        let path = self.dir.join(FILE_NAME);
        let record = Manifest::load_if_present(&self.dir)
            .ok()
            .flatten()
            .and_then(|m| m.build);
        crate::kinds::ivf::files::check_meta(&path, &self.meta, record.as_ref())?;
        if self.opts.ivf_vectors == IvfVectorLayout::Bucket {
            crate::kinds::ivf::files::check_buckets(&path, &self.meta, &self.vectors)?;
        }
        Ok(())
    }

    /// Bytes of each file.
    pub fn file_bytes(&self) -> Result<Vec<(String, u64)>, FileError> {
        let mut v = Vec::new();
        for name in [
            FILE_NAME,
            VECTORS_FILE,
            VECTORS_BY_ID_FILE,
            PQ_FILE,
            PQ_CODES_FILE,
        ] {
            let p = self.dir.join(name);
            if let Ok(md) = std::fs::metadata(&p) {
                v.push((name.to_string(), md.len()));
            }
        }
        Ok(v)
    }
}

/// Host memory of an opened IVF index, by part.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct IvfMemory {
    /// The centroids.
    pub centroids: u64,
    /// The centroid graph.
    pub centroid_graph: u64,
    /// Posting lists (ids and offsets).
    pub posting_lists: u64,
    /// PQ codes (host copy; the GPU backend also holds them on the device).
    pub pq_codes: u64,
    /// PQ codebooks.
    pub pq_codebooks: u64,
    /// The vector file's slot table and page checksums.
    pub vector_table: u64,
    /// RaBitQ on the CPU backend: the codes copied into FastScan blocks by posting list.
    pub code_lists: u64,
}

impl IvfMemory {
    /// The sum.
    pub fn total(&self) -> u64 {
        self.centroids
            + self.centroid_graph
            + self.posting_lists
            + self.pq_codes
            + self.pq_codebooks
            + self.vector_table
            + self.code_lists
    }
}

/// An accelerator and the FastScan lists it was given.
type OpenedAccel = (Arc<dyn Accelerator>, Option<Arc<BlockLists>>);

/// Opens the accelerator `kind` over `codes`; with RaBitQ codes on the CPU backend, also lays
/// the codes out in FastScan blocks by posting list and gives them to the backend (the GPU
/// backend scores gathered ids).
fn open_accel(
    kind: accel::AccelKind,
    fastscan: bool,
    codes: &Arc<PqCodes>,
    pq: &crate::quant::Quantiser,
    meta: &IvfMeta,
) -> Result<OpenedAccel, accel::AccelError> {
    let a = accel::open(kind, codes.clone())?;
    match pq.as_rabitq() {
        Some(rq) if fastscan && a.info().backend == "cpu" => {
            let lists = Arc::new(BlockLists::build(
                meta.nlist(),
                |l| meta.list(l as u32),
                codes,
                usize::from(rq.bits()),
                rq.pad(),
            ));
            let cpu = accel::CpuAccel::with_lists(codes.clone(), lists.clone());
            Ok((Arc::new(cpu), Some(lists)))
        }
        _ => Ok((a, None)),
    }
}

//! The flat kind: exact search over the vectors on disk. The vectors sit in id order in 4 KiB
//! pages (`flat-vectors.trawl`, each page with its checksum), and a batch of queries streams
//! the file once with O_DIRECT reads, every vector scored against every query of the batch by
//! the SIMD distance kernels, the best `k` kept per query by `(distance, id)` — the results of
//! exact ground truth. For small collections, exact baselines, and (later) very selective
//! filters.
//!
//! I/O accounting: a batch reads each page once, whatever the number of queries; each read is
//! counted to one query of the batch in turn (read `i` to query `i mod nq`), so the per-query
//! counters add up to the pages the batch read. Every query counts `n` exact distances.

mod build;
pub mod files;
mod search;

pub use build::{build_flat, build_flat_with_attrs, FlatBuildReport};

use std::path::{Path, PathBuf};

use crate::dir::FileError;
use crate::io::IoFile;
use crate::kernels::{DType, Element, Metric};
use crate::kinds::graph::{IndexInfo, KindName, Manifest, OpenError, OpenOptions};
use crate::kinds::slot_file::SlotFile;
use crate::kinds::{Error, Hits, IndexKind, Queries, Run};

/// The vector file of a flat index.
pub const FILE_NAME: &str = "flat-vectors.trawl";

/// Search parameters of the flat kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlatParams {
    /// Results per query.
    pub k: usize,
}

/// An opened flat index.
#[derive(Debug)]
pub struct FlatIndex {
    dir: PathBuf,
    opts: OpenOptions,
    manifest: Manifest,
    metric: Metric,
    vectors: SlotFile,
    file: IoFile,
    /// The vectors' attributes, when the index has them.
    attrs: Option<crate::filter::Attributes>,
}

impl FlatIndex {
    /// Opens the flat index in `dir`: its manifest, and its vector file checked against it
    /// (header, tables, shape).
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Self, OpenError> {
        crate::dir::txn::settle_for_reading(dir)?;
        let manifest = Manifest::load_if_present(dir)?.ok_or_else(|| OpenError::NotAnIndex {
            dir: dir.to_path_buf(),
            reason: "no manifest".into(),
        })?;
        let mismatch = |reason: String| OpenError::Mismatch {
            dir: dir.to_path_buf(),
            reason,
        };
        if manifest.kind != KindName::Flat {
            return Err(mismatch(format!(
                "a {} index, not a flat one",
                manifest.kind.label()
            )));
        }
        let has_attrs = manifest.file(crate::filter::file::FILE_NAME).is_some();
        let mut names = vec![FILE_NAME];
        if has_attrs {
            names.push(crate::filter::file::FILE_NAME);
        }
        manifest.check_files(dir, &names)?;
        let path = dir.join(FILE_NAME);
        let vectors = SlotFile::open(&path)?;
        let g = *vectors.geometry();
        let metric: Metric = manifest
            .metric
            .parse()
            .map_err(|e: String| mismatch(format!("manifest: {e}")))?;
        if g.n != manifest.n || g.dim != manifest.dim || g.dtype.name() != manifest.dtype {
            return Err(mismatch(format!(
                "{FILE_NAME} holds {} × {} {}, the manifest records {} × {} {}",
                g.n,
                g.dim,
                g.dtype.name(),
                manifest.n,
                manifest.dim,
                manifest.dtype
            )));
        }
        if g.bucketed || g.n == 0 {
            return Err(FileError::new(
                &path,
                crate::dir::FileErrorKind::Invalid("not a flat vector file".into()),
            )
            .into());
        }
        let attrs = if has_attrs {
            Some(crate::filter::file::load(
                &dir.join(crate::filter::file::FILE_NAME),
                g.n,
            )?)
        } else {
            None
        };
        let mut file = IoFile::open(&path, opts.direct)?;
        if opts.engine.needs_resident() {
            file.load_resident()?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            opts,
            manifest,
            metric,
            vectors,
            file,
            attrs,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options it was opened with.
    pub fn options(&self) -> &OpenOptions {
        &self.opts
    }

    /// The vector file.
    pub fn vectors(&self) -> &SlotFile {
        &self.vectors
    }

    /// Reads the index whole and checks it ([`files::verify`]): the vector file against the
    /// manifest, every data page against its checksum.
    pub fn verify(
        &self,
        ctl: &crate::progress::Control,
    ) -> Result<crate::kinds::VerifyReport, OpenError> {
        files::verify(&self.dir, ctl)
    }
}

impl IndexKind for FlatIndex {
    type Params = FlatParams;

    fn open_dir(dir: &Path, opts: OpenOptions) -> Result<Self, Error> {
        Ok(Self::open(dir, opts)?)
    }

    fn kind(&self) -> KindName {
        KindName::Flat
    }

    fn n(&self) -> usize {
        self.vectors.geometry().n as usize
    }

    fn dim(&self) -> usize {
        self.vectors.geometry().dim
    }

    fn dtype(&self) -> DType {
        self.vectors.geometry().dtype
    }

    fn metric(&self) -> Metric {
        self.metric
    }

    fn search<T: Element>(
        &self,
        q: Queries<'_, T>,
        p: &FlatParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<Hits, Error> {
        Ok(self.scan(q, p.k, run.threads, filter.filters)?)
    }

    fn range_search<T: Element>(
        &self,
        q: Queries<'_, T>,
        radius: f32,
        _p: &FlatParams,
        run: Run,
        filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<crate::kinds::RangeHits, Error> {
        crate::kinds::check_radius(radius)?;
        self.range_scan(q, radius, run.threads, filter.filters)?
            .try_into()
    }

    fn info(&self) -> Result<IndexInfo, Error> {
        let m = Manifest::load_if_present(&self.dir)?.unwrap_or_else(|| self.manifest.clone());
        let disk = self.disk_bytes();
        let mem = crate::kinds::graph::MemoryReport {
            attrs_bytes: self.attrs.as_ref().map_or(0, |a| a.memory_bytes()),
            ..Default::default()
        };
        Ok(IndexInfo {
            dir: self.dir.display().to_string(),
            kind: KindName::Flat,
            n: self.n(),
            dim: self.dim(),
            dtype: self.dtype().name().into(),
            metric: self.metric.name().into(),
            r: 0,
            pq_bytes: 0,
            medoid: 0,
            layout: "flat".into(),
            records_per_page: self.vectors.geometry().per_page,
            entry_nodes: 0,
            layouts: m.layouts.clone(),
            disk_bytes: crate::kinds::graph::DiskBytesInfo {
                files: crate::kinds::graph::DiskBytes::default(),
                total: disk,
            },
            memory_bytes: mem,
            memory_total_bytes: self.memory_bytes(),
            verify_pages: self.opts.verify_pages,
            manifest: true,
            files: m.files.clone(),
            build: m.build.clone(),
            recall: None,
            build_id: m.build_id.clone(),
            ivf: None,
            shards: None,
        })
    }

    fn memory_bytes(&self) -> u64 {
        self.vectors.heap_bytes() + self.attrs.as_ref().map_or(0, |a| a.memory_bytes())
    }

    fn disk_bytes(&self) -> u64 {
        self.vectors.geometry().file_bytes()
    }

    fn verify(&self, ctl: &crate::progress::Control) -> Result<crate::kinds::VerifyReport, Error> {
        Ok(FlatIndex::verify(self, ctl)?)
    }

    fn engine_info(&self) -> Result<crate::io::EngineInfo, Error> {
        let e = self
            .file
            .engine(self.opts.engine, self.engine_config())
            .map_err(crate::search::SearchError::from)?;
        Ok(e.info())
    }
}

/// The flat kind's memory plan ([`crate::kinds::plan`]): the vector file's slot table and page
/// checksums, the attributes, and per search thread the scan's buffers; nothing is cached, so
/// a larger budget buys nothing more.
pub fn plan(
    dir: &Path,
    budget: u64,
    threads: usize,
) -> Result<crate::kinds::plan::MemoryPlan, crate::kinds::Error> {
    use crate::kinds::plan::{MemoryPlan, PlanItem};
    let table = SlotFile::open(&dir.join(FILE_NAME))?.heap_bytes();
    let attrs = crate::kinds::plan::payload_bytes(dir, crate::filter::file::FILE_NAME);
    let mut items = vec![
        PlanItem {
            name: "vector_table",
            bytes: table,
            required: true,
            detail: "the vector file's slot table and page checksums".into(),
        },
        PlanItem {
            name: "search",
            bytes: threads as u64 * (1 << 20),
            required: true,
            detail: format!("{threads} thread(s): pages in flight and the top-k"),
        },
    ];
    items.extend(PlanItem::attrs(attrs));
    Ok(MemoryPlan::required_only(
        budget,
        items,
        vec![
            "a flat index reads every vector and caches nothing: a larger budget buys \
              nothing more"
                .into(),
        ],
    )?)
}

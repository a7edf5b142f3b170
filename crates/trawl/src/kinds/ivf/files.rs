//! The IVF kind's files as components ([`crate::dir::component`]): each names its file, the
//! role the manifest records for it, and how it is checked whole — the index file first (it
//! says what the others must be), then the PQ files and the vector files. The manifest's
//! file list ([`describe`]) and `trawl info DIR --verify` ([`verify`]) are written over
//! [`COMPONENTS`].

use std::path::{Path, PathBuf};

use crate::dir::component::{entries, verified_manifest, verify_files, Component, Named};
use crate::dir::manifest::{BuildRecord, KindName, Manifest};
use crate::dir::{FileError, FileErrorKind};
use crate::kinds::graph::{payload_crc, OpenError, PQ_CODES_FILE, PQ_FILE};
use crate::kinds::ivf::file::{check_centroids, IvfMeta, FILE_NAME};
use crate::kinds::ivf::{VECTORS_BY_ID_FILE, VECTORS_FILE};
use crate::kinds::slot_file::{self, SlotFile};
use crate::kinds::VerifyReport;
use crate::progress::Control;
use crate::quant::pq::PqCodes;

/// What the checks of an IVF index's files share: the directory, the build record of its
/// manifest, the index file once checked (the others are checked against it) and the
/// progress handle.
#[derive(Debug)]
pub struct IvfCx {
    /// The index directory.
    pub dir: PathBuf,
    /// The manifest's build record, if any.
    pub record: Option<BuildRecord>,
    /// `ivf.trawl`, once checked.
    pub meta: Option<IvfMeta>,
    /// Data pages of vectors checked.
    pub vector_pages: u64,
    /// Progress and cancellation.
    pub ctl: Control,
}

impl IvfCx {
    fn mismatch(&self, reason: String) -> OpenError {
        OpenError::Mismatch {
            dir: self.dir.clone(),
            reason,
        }
    }

    fn meta(&self, what: &str) -> Result<&IvfMeta, OpenError> {
        self.meta
            .as_ref()
            .ok_or_else(|| self.mismatch(format!("{what} without {FILE_NAME} to check it against")))
    }
}

/// A component of the IVF kind.
pub type IvfComponent = dyn Component<IvfCx, OpenError>;

/// The index file: centroids, centroid graph, posting lists and the checksums of the files
/// built with it.
static META: Named<IvfCx, OpenError> = Named {
    name: FILE_NAME,
    role: "ivf",
    first: true,
    required: true,
    verify: |cx, name| {
        let path = cx.dir.join(name);
        let meta = IvfMeta::load(&path)?;
        check_meta(&path, &meta, cx.record.as_ref())?;
        let done = format!(
            "checksums match; {} lists over {} vectors, centroids finite, posting lists keep \
             the build's invariants",
            meta.nlist(),
            meta.n
        );
        cx.meta = Some(meta);
        Ok(done)
    },
};

/// What search relies on in the index file beyond its checksums: the centroids are finite and
/// short enough for exact distances; the posting lists keep the build's invariants
/// ([`IvfMeta::check_lists`]); and they agree with the manifest's build `record` (lists, list
/// size, replication cap, centroid graph degree). Errors name `path`.
pub fn check_meta(
    path: &Path,
    meta: &IvfMeta,
    record: Option<&BuildRecord>,
) -> Result<(), FileError> {
    let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
    check_centroids(&meta.centroids, meta.centroid_dim()).map_err(bad)?;
    meta.check_lists().map_err(bad)?;
    let Some((rec, ivf)) = record.and_then(|r| r.ivf.as_ref().map(|i| (r, i))) else {
        return Ok(());
    };
    if ivf.nlist != meta.nlist()
        || ivf.max_replicas != meta.max_replicas as usize
        || ivf.list_size != meta.list_size as usize
        || meta.graph.max_degree() > rec.r.max(1)
    {
        return Err(bad(format!(
            "{} lists of target size {}, at most {} per vector, centroid graph R {}; the \
             manifest's build record says {} lists of size {}, at most {}, R {}",
            meta.nlist(),
            meta.list_size,
            meta.max_replicas,
            meta.graph.max_degree(),
            ivf.nlist,
            ivf.list_size,
            ivf.max_replicas,
            rec.r
        )));
    }
    Ok(())
}

/// The PQ codebooks the index was built with.
static PQ: Named<IvfCx, OpenError> = Named {
    name: PQ_FILE,
    role: "pq",
    first: false,
    required: true,
    verify: |cx, name| {
        let path = cx.dir.join(name);
        let meta = cx.meta(name)?;
        if payload_crc(&path)? != meta.pq_crc {
            return Err(cx.mismatch(format!("{name} is not the one {FILE_NAME} was built with")));
        }
        let pq = crate::quant::Quantiser::load(&path)?;
        if pq.dim() != meta.dim {
            return Err(cx.mismatch(format!(
                "{name} quantises dimension {}, the index {}",
                pq.dim(),
                meta.dim
            )));
        }
        Ok(format!("checksum matches; {}", pq.describe()))
    },
};

/// The PQ code of every vector.
static PQ_CODES: Named<IvfCx, OpenError> = Named {
    name: PQ_CODES_FILE,
    role: "pq_codes",
    first: false,
    required: true,
    verify: |cx, name| {
        let path = cx.dir.join(name);
        let meta = cx.meta(name)?;
        if payload_crc(&path)? != meta.pq_codes_crc {
            return Err(cx.mismatch(format!("{name} is not the one {FILE_NAME} was built with")));
        }
        let codes = PqCodes::load(&path)?;
        if codes.n() as u64 != meta.n {
            return Err(cx.mismatch(format!(
                "{name} holds {} codes, the index {} vectors",
                codes.n(),
                meta.n
            )));
        }
        Ok(format!(
            "checksum matches; {} codes of {} bytes",
            codes.n(),
            codes.m()
        ))
    },
};

/// The vectors in bucket order (what a search reads by default).
static VECTORS: Named<IvfCx, OpenError> = Named {
    name: VECTORS_FILE,
    role: "ivf_vectors",
    first: false,
    required: true,
    verify: |cx, name| check_vectors(cx, name, true),
};

/// The vectors in id order (built with `--by-id-vectors`; the layout ablation's).
static VECTORS_BY_ID: Named<IvfCx, OpenError> = Named {
    name: VECTORS_BY_ID_FILE,
    role: "ivf_vectors_by_id",
    first: false,
    required: false,
    verify: |cx, name| check_vectors(cx, name, false),
};

/// A vector file: its shape against the index's, its layout against the posting lists (the
/// bucketed file: built with the index, its slots follow the lists when each vector is in one)
/// and every data page against its checksum.
fn check_vectors(cx: &mut IvfCx, name: &str, bucketed: bool) -> Result<String, OpenError> {
    let path = cx.dir.join(name);
    let file = SlotFile::open(&path)?;
    let meta = cx.meta(name)?;
    let g = *file.geometry();
    if g.n != meta.n || g.dim != meta.dim || g.dtype != meta.dtype {
        return Err(cx.mismatch(format!(
            "{name} holds {} × {} {}, the index {} × {} {}",
            g.n, g.dim, g.dtype, meta.n, meta.dim, meta.dtype
        )));
    }
    let mut layout = "";
    if bucketed {
        if file.header_crc() != meta.vectors_crc {
            return Err(cx.mismatch(format!(
                "{name} is not the vector file {FILE_NAME} was built with"
            )));
        }
        if check_buckets(&cx.dir.join(FILE_NAME), meta, &file)? {
            layout = "; its slots follow the posting lists";
        }
    }
    let pages = file.verify_all(&path, &cx.ctl)?;
    cx.vector_pages += pages;
    Ok(format!(
        "all {pages} data pages match their checksums{layout}"
    ))
}

/// With one posting list per vector, the bucketed vector `file`'s slots must be the buckets
/// those lists make (with replicas the layout cannot be derived from the lists, and any is
/// accepted). Returns whether the layout was checked; errors name `path`, the index file.
pub fn check_buckets(path: &Path, meta: &IvfMeta, file: &SlotFile) -> Result<bool, FileError> {
    let g = file.geometry();
    let Some(sole) = meta.sole_lists().filter(|_| g.bucketed) else {
        return Ok(false);
    };
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); meta.nlist()];
    for (id, &l) in sole.iter().enumerate() {
        buckets[l as usize].push(id as u32);
    }
    let (slot, pages) =
        slot_file::bucket_slots(meta.n as usize, &buckets, g.per_page, g.pages_per_vector);
    if pages != g.data_pages || slot.as_slice() != file.slots() {
        return Err(FileError::new(
            path,
            FileErrorKind::Invalid(format!(
                "the posting lists do not match the buckets of {}",
                VECTORS_FILE
            )),
        ));
    }
    Ok(true)
}

/// The vectors' attributes (labels, numeric fields) filters read.
static ATTRS: Named<IvfCx, OpenError> = Named {
    name: crate::filter::file::FILE_NAME,
    role: "attrs",
    first: false,
    required: false,
    verify: |cx, name| {
        let n = match &cx.meta {
            Some(m) => m.n,
            None => IvfMeta::load(&cx.dir.join(FILE_NAME))?.n,
        };
        Ok(crate::filter::file::verify(&cx.dir, name, n)?)
    },
};

/// Every component of the IVF kind, the index file first.
pub static COMPONENTS: [&IvfComponent; 6] =
    [&META, &PQ, &PQ_CODES, &VECTORS, &VECTORS_BY_ID, &ATTRS];

/// Describes the IVF index whose files are in `dir`: the files of [`COMPONENTS`] present
/// (the by-id vector file is optional) and the vector layouts they make.
pub fn describe(dir: &Path, build: Option<BuildRecord>) -> Result<Manifest, FileError> {
    let meta = IvfMeta::load(&dir.join(FILE_NAME))?;
    let files = entries(dir, &COMPONENTS)?;
    let mut layouts = vec!["bucket".to_string()];
    if files.iter().any(|f| f.role == VECTORS_BY_ID.role) {
        layouts.push("by_id".into());
    }
    Ok(Manifest::of_build(
        KindName::Ivf,
        meta.n,
        meta.dim,
        meta.dtype,
        meta.metric,
        layouts,
        files,
        build,
        String::new(),
    ))
}

/// Reads every file of the IVF index in `dir` whole and checks it with its component (the
/// manifest's files, each against the manifest; the index file first).
pub fn verify(dir: &Path, ctl: &Control) -> Result<VerifyReport, OpenError> {
    crate::dir::txn::settle_for_reading(dir)?;
    let _lock = crate::dir::txn::Flock::dir(dir, false)?;
    let manifest = Manifest::load_if_present(dir)?;
    let mut cx = IvfCx {
        dir: dir.to_path_buf(),
        record: manifest.as_ref().and_then(|m| m.build.clone()),
        meta: None,
        vector_pages: 0,
        ctl: ctl.clone(),
    };
    let mut files = verify_files(dir, manifest.as_ref(), &COMPONENTS, &mut cx)?;
    if manifest.is_some() {
        files.push(verified_manifest(dir)?);
    }
    Ok(VerifyReport {
        manifest: manifest.is_some(),
        files,
        connectivity: None,
        vector_pages: Some(cx.vector_pages),
    })
}

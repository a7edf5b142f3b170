//! The flat kind's one file as a component ([`crate::dir::component`]): the vectors in id
//! order, checked against the manifest's shape and page by page against their checksums.

use std::path::{Path, PathBuf};

use crate::dir::component::{verified_manifest, verify_files, Component, Named};
use crate::dir::manifest::Manifest;
use crate::kinds::flat::FILE_NAME;
use crate::kinds::graph::OpenError;
use crate::kinds::slot_file::SlotFile;
use crate::kinds::VerifyReport;
use crate::progress::Control;

/// What the check of a flat index's file uses: the directory, its manifest and the progress
/// handle; the pages checked.
#[derive(Debug)]
pub struct FlatCx {
    /// The index directory.
    pub dir: PathBuf,
    /// Its manifest (a flat index always has one).
    pub manifest: Manifest,
    /// Data pages checked.
    pub vector_pages: u64,
    /// Progress and cancellation.
    pub ctl: Control,
}

/// A component of the flat kind.
pub type FlatComponent = dyn Component<FlatCx, OpenError>;

/// The vectors, in id order.
static VECTORS: Named<FlatCx, OpenError> = Named {
    name: FILE_NAME,
    role: "flat_vectors",
    first: true,
    required: true,
    verify: |cx, name| {
        let path = cx.dir.join(name);
        let file = SlotFile::open(&path)?;
        let g = *file.geometry();
        let m = &cx.manifest;
        if g.n != m.n || g.dim != m.dim || g.dtype.name() != m.dtype {
            return Err(OpenError::Mismatch {
                dir: cx.dir.clone(),
                reason: format!(
                    "{name} holds {} × {} {}, the manifest says {} × {} {}",
                    g.n, g.dim, g.dtype, m.n, m.dim, m.dtype
                ),
            });
        }
        let pages = file.verify_all(&path, &cx.ctl)?;
        cx.vector_pages += pages;
        Ok(format!("all {pages} data pages match their checksums"))
    },
};

/// The vectors' attributes (labels, numeric fields) filters read.
static ATTRS: Named<FlatCx, OpenError> = Named {
    name: crate::filter::file::FILE_NAME,
    role: "attrs",
    first: false,
    required: false,
    verify: |cx, name| Ok(crate::filter::file::verify(&cx.dir, name, cx.manifest.n)?),
};

/// Every component of the flat kind.
pub static COMPONENTS: [&FlatComponent; 2] = [&VECTORS, &ATTRS];

/// Reads the flat index in `dir` whole and checks it: its vector file against the manifest
/// and every data page against its checksum.
pub fn verify(dir: &Path, ctl: &Control) -> Result<VerifyReport, OpenError> {
    crate::dir::txn::settle_for_reading(dir)?;
    let _lock = crate::dir::txn::Flock::dir(dir, false)?;
    let manifest = Manifest::load_if_present(dir)?.ok_or_else(|| OpenError::NotAnIndex {
        dir: dir.to_path_buf(),
        reason: "no manifest".into(),
    })?;
    let mut cx = FlatCx {
        dir: dir.to_path_buf(),
        manifest: manifest.clone(),
        vector_pages: 0,
        ctl: ctl.clone(),
    };
    let mut files = verify_files(dir, Some(&manifest), &COMPONENTS, &mut cx)?;
    files.push(verified_manifest(dir)?);
    Ok(VerifyReport {
        manifest: true,
        files,
        connectivity: None,
        vector_pages: Some(cx.vector_pages),
    })
}

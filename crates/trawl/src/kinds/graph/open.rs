//! Opening an index directory: every file's header and checksums, that the files belong
//! together, and the layout reader the options ask for.

use std::path::Path;

use crate::io::IoFile;
use crate::kinds::graph::layout::decoupled::graph::{self as dgraph, GraphFile};
use crate::kinds::graph::layout::decoupled::vectors::{self as dvectors, CompressedVectorFile};
use crate::kinds::graph::layout::packed::{self, PackedFile, PackedMeta};
use crate::kinds::graph::search::entry::{self, EntryIndex};
use crate::kinds::graph::search::{DecoupledLayout, LayoutReader, PageLayout, RecordLayout};
use crate::kinds::graph::{
    payload_crc, DiskIndex, IndexLayout, OpenError, OpenOptions, PQ_CODES_FILE, PQ_FILE,
};
use crate::quant::pq::PqCodes;
use crate::quant::Quantiser;

impl DiskIndex {
    /// Opens the index in `dir`, checking every file's header and checksums and that the files
    /// belong together. The static cache starts empty ([`DiskIndex::load_cache`]).
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Self, OpenError> {
        if !dir.is_dir() {
            return Err(OpenError::NotAnIndex {
                dir: dir.to_path_buf(),
                reason: "no such directory".into(),
            });
        }
        // Finish what an interrupted write left (`txn`), then hold the commit lock (shared)
        // while the files are opened: a commit never moves files under an opening reader.
        crate::dir::txn::settle_for_reading(dir)?;
        let _lock = crate::dir::txn::Flock::dir(dir, false)?;
        if dir.join(crate::dir::txn::COMMIT_DIR).exists() {
            return Err(OpenError::Mismatch {
                dir: dir.to_path_buf(),
                reason: "a write into this index is being finished by another process: retry"
                    .into(),
            });
        }
        let layout_path = dir.join(opts.layout.file_name());
        if !layout_path.is_file() {
            // An index of another kind is named as such, not as a graph index missing a file.
            if let Ok(Some(m)) = crate::dir::manifest::Manifest::load_if_present(dir) {
                if m.kind != crate::kinds::graph::KindName::Graph {
                    return Err(OpenError::Mismatch {
                        dir: dir.to_path_buf(),
                        reason: format!(
                            "this is {} index; this operation works on graph indexes only \
                             ({} indexes take no updates, entry indexes or layouts: rebuild \
                             to change one)",
                            m.kind.with_article(),
                            m.kind.label()
                        ),
                    });
                }
            }
            return Err(missing_layout(dir, opts.layout));
        }
        // The manifest (when the index has one) first: a file of another build is named as
        // such before its contents are looked at.
        let manifest = crate::dir::manifest::Manifest::load_if_present(dir)?;
        if let Some(m) = &manifest {
            let mut names = vec![opts.layout.file_name(), PQ_FILE, PQ_CODES_FILE];
            if opts.layout == IndexLayout::Decoupled {
                // The vector segments the manifest lists (the layout's file, or the map and
                // the segments merges wrote).
                names.extend(m.files.iter().map(|f| f.name.as_str()).filter(|n| {
                    *n == dvectors::FILE_NAME
                        || *n == crate::kinds::graph::updates::segments::FILE_NAME
                        || crate::kinds::graph::updates::segments::is_segment_name(n)
                }));
            }
            if dir
                .join(crate::kinds::graph::updates::ids::FILE_NAME)
                .is_file()
            {
                names.push(crate::kinds::graph::updates::ids::FILE_NAME);
            }
            names.extend(OPTIONAL_FILES.iter().filter(|n| dir.join(n).is_file()));
            m.check_files(dir, &names)?;
        }
        let (layout, file) = open_layout(dir, &opts)?;
        let meta = *layout.meta();
        let (pq, codes) = open_codes(dir, &meta, &layout)?;
        let entry_path = dir.join(entry::FILE_NAME);
        let entry = if opts.load_entry && entry_path.is_file() {
            Some(EntryIndex::load(
                &entry_path,
                meta.n,
                meta.dtype,
                meta.dim,
                meta.metric,
                meta.pq_codes_crc,
            )?)
        } else {
            None
        };
        let (attrs, label_starts) = load_attrs(dir, &meta)?;
        let mut file = file;
        if opts.engine.needs_resident() {
            file.load_resident()?;
        }
        // The flash strategy's accelerator: the GPU when asked for (`auto`: when there is
        // one); the CPU backend needs nothing opened.
        let flash_gpu = match (opts.accel, codes.as_ref()) {
            (crate::accel::AccelKind::Cpu, _) | (_, None) => None,
            (kind, Some(c)) => {
                match crate::accel::open_flash_gpu(c, layout.pages().and_then(|p| p.groups())) {
                    Ok(a) => Some(a),
                    Err(
                        crate::accel::AccelError::NoAdapter(_) | crate::accel::AccelError::NotBuilt,
                    ) if kind == crate::accel::AccelKind::Auto => None,
                    Err(e) => return Err(OpenError::Accel(e)),
                }
            }
        };
        let ix = Self {
            dir: dir.to_path_buf(),
            meta,
            layout,
            file,
            pq,
            codes,
            entry,
            attrs,
            label_starts,
            opts,
            manifest,
            flash_gpu,
            engines: Default::default(),
            writer_held: false,
        };
        Ok(ix)
    }
}

/// The files an index may hold beside its layout and PQ files.
const OPTIONAL_FILES: [&str; 4] = [
    entry::FILE_NAME,
    crate::kinds::graph::hot::FILE_NAME,
    crate::filter::file::FILE_NAME,
    crate::kinds::graph::label_starts::FILE_NAME,
];

type Attrs = (
    Option<std::sync::Arc<crate::filter::Attributes>>,
    Option<crate::kinds::graph::label_starts::LabelStarts>,
);

/// The slots' attributes (`attrs.trawl`) and the start nodes of their labels, when the index
/// has them.
fn load_attrs(
    dir: &Path,
    meta: &crate::kinds::graph::layout::packed::PackedMeta,
) -> Result<Attrs, OpenError> {
    let path = dir.join(crate::filter::file::FILE_NAME);
    if !path.is_file() {
        return Ok((None, None));
    }
    let attrs = crate::filter::file::load(&path, meta.n)?;
    let starts = load_label_starts(dir, meta, Some(&attrs))?;
    Ok((Some(std::sync::Arc::new(attrs)), starts))
}

/// The start nodes of a label-aware graph's labels (`label-starts.trawl`), when the index has
/// them and its attributes.
fn load_label_starts(
    dir: &Path,
    meta: &crate::kinds::graph::layout::packed::PackedMeta,
    attrs: Option<&crate::filter::Attributes>,
) -> Result<Option<crate::kinds::graph::label_starts::LabelStarts>, OpenError> {
    use crate::kinds::graph::label_starts::{LabelStarts, FILE_NAME};
    let path = dir.join(FILE_NAME);
    let Some(attrs) = attrs.filter(|_| path.is_file()) else {
        return Ok(None);
    };
    let attrs_tag = crate::kinds::graph::payload_crc(&dir.join(crate::filter::file::FILE_NAME))?;
    Ok(Some(LabelStarts::load(
        &path,
        meta.n,
        meta.pq_codes_crc,
        attrs_tag,
        attrs,
    )?))
}

/// The error for a layout whose file is missing.
fn missing_layout(dir: &Path, layout: IndexLayout) -> OpenError {
    match layout {
        IndexLayout::Packed => OpenError::NotAnIndex {
            dir: dir.to_path_buf(),
            reason: format!("{} is missing", packed::FILE_NAME),
        },
        other => OpenError::Mismatch {
            dir: dir.to_path_buf(),
            reason: format!(
                "no {} layout ({} is missing; write it with `trawl layout {} --{}`)",
                other.name(),
                other.file_name(),
                dir.display(),
                other.name()
            ),
        },
    }
}

/// Opens the layout's reader and the file (or files) searches read.
pub(crate) fn open_layout(
    dir: &Path,
    opts: &OpenOptions,
) -> Result<(LayoutReader, IoFile), OpenError> {
    let path = dir.join(opts.layout.file_name());
    let mismatch = |reason: String| OpenError::Mismatch {
        dir: dir.to_path_buf(),
        reason,
    };
    if opts.layout == IndexLayout::Decoupled {
        let graph = GraphFile::open(&path)?;
        let meta = *graph.meta();
        // The vector segments: the map's, or the one file a layout written whole has.
        let vmap = crate::kinds::graph::updates::segments::VectorMap::load(dir)?;
        let names: Vec<(String, u64)> = match &vmap {
            Some(m) => {
                if m.slots.len() as u64 != meta.n {
                    return Err(mismatch(format!(
                        "{} maps {} slots for a graph of {}",
                        crate::kinds::graph::updates::segments::FILE_NAME,
                        m.slots.len(),
                        meta.n
                    )));
                }
                let ids = crate::kinds::graph::updates::ids::SlotIds::load(dir, meta.n as usize)?;
                m.check_ids(
                    &ids,
                    &dir.join(crate::kinds::graph::updates::segments::FILE_NAME),
                )?;
                m.segments.clone()
            }
            None => vec![(dvectors::FILE_NAME.to_string(), meta.n)],
        };
        let mut segments = Vec::with_capacity(names.len());
        let mut files = vec![IoFile::open(&path, opts.direct)?];
        for (name, count) in &names {
            let vectors_path = dir.join(name);
            if !vectors_path.is_file() {
                return Err(mismatch(format!(
                    "{name} is missing beside {} (rewrite the layout with `trawl layout {} \
                     --decoupled`)",
                    dgraph::FILE_NAME,
                    dir.display()
                )));
            }
            let vectors = CompressedVectorFile::open(&vectors_path)?;
            let vg = vectors.geometry();
            if vg.n != *count || vg.dim != meta.dim || vg.dtype != meta.dtype {
                return Err(mismatch(format!(
                    "the vector file {name} ({} × {} {}) does not match the graph ({} × {} {})",
                    vg.n,
                    vg.dim,
                    vg.dtype.name(),
                    count,
                    meta.dim,
                    meta.dtype.name()
                )));
            }
            files.push(IoFile::open(&vectors_path, opts.direct)?);
            segments.push(vectors);
        }
        let files = IoFile::concat(&files)?;
        let d = DecoupledLayout::new(
            graph,
            segments,
            vmap.map(|m| m.slots),
            opts.list_cache_bytes,
            opts.verify_pages,
        );
        return Ok((LayoutReader::Decoupled(Box::new(d)), files));
    }
    if opts.layout == IndexLayout::Pages {
        let pages = crate::kinds::graph::layout::pages::PageFile::open(&path)?;
        let file = IoFile::open(&path, opts.direct)?;
        let r = PageLayout::new(pages, opts.verify_pages);
        return Ok((LayoutReader::Pages(Box::new(r)), file));
    }
    let packed = PackedFile::open(&path)?;
    let meta = *packed.meta();
    let ais = meta.neighbor_code_bytes > 0;
    if ais != (opts.layout == IndexLayout::AllInStorage)
        || meta.permuted != (opts.layout == IndexLayout::Shuffled)
    {
        return Err(mismatch(format!(
            "{} is not a {} layout (permuted: {}, neighbour codes: {})",
            opts.layout.file_name(),
            opts.layout.name(),
            meta.permuted,
            ais
        )));
    }
    let file = IoFile::open(&path, opts.direct)?;
    let r = RecordLayout::new(packed, opts.verify_pages);
    let reader = match opts.layout {
        IndexLayout::Packed => LayoutReader::Packed(r),
        IndexLayout::Shuffled => LayoutReader::Shuffled(r),
        IndexLayout::AllInStorage => LayoutReader::AllInStorage(r),
        IndexLayout::Decoupled | IndexLayout::Pages => unreachable!("handled above"),
    };
    Ok((reader, file))
}

/// The quantiser and the codes `layout` searches with: [`open_pq`]'s, and on the page-node
/// layout in slot order (page by page: a page is scored by its vectors' codes), replacing the
/// id-ordered ones.
fn open_codes(
    dir: &Path,
    meta: &PackedMeta,
    layout: &LayoutReader,
) -> Result<(Quantiser, Option<PqCodes>), OpenError> {
    let ais = layout
        .records()
        .is_some_and(|r| r.file().meta().neighbor_code_bytes > 0);
    let (pq, mut codes) = open_pq(dir, meta, ais)?;
    if let Some(p) = layout.pages() {
        if let Some(c) = codes.take() {
            codes = Some(slot_codes(p.file(), c)?);
        }
    }
    Ok((pq, codes))
}

/// `codes` (by vector id) in the page-node file's slot order: slot `s` holds the code of the
/// vector in slot `s`, an empty slot zeros.
fn slot_codes(
    file: &crate::kinds::graph::layout::pages::PageFile,
    codes: PqCodes,
) -> Result<PqCodes, OpenError> {
    let order = file.read_order()?;
    let m = codes.m();
    let mut out = vec![0u8; order.len() * m];
    for (s, &id) in order.iter().enumerate() {
        if id != crate::kinds::graph::layout::pages::NO_VECTOR && (id as usize) < codes.n() {
            out[s * m..(s + 1) * m].copy_from_slice(codes.code(id as usize));
        }
    }
    let ks = codes.centroids_per_subspace();
    drop(codes);
    PqCodes::from_vec(out, m, ks).ok_or_else(|| OpenError::Mismatch {
        dir: file.path().to_path_buf(),
        reason: "the PQ codes could not be put in page order".into(),
    })
}

/// Loads the quantiser and (unless the records carry them: `ais`) the codes, checking that
/// they are the ones the graph was built with.
fn open_pq(
    dir: &Path,
    meta: &PackedMeta,
    ais: bool,
) -> Result<(Quantiser, Option<PqCodes>), OpenError> {
    let mismatch = |reason: String| OpenError::Mismatch {
        dir: dir.to_path_buf(),
        reason,
    };
    let pq_path = dir.join(PQ_FILE);
    let codes_path = dir.join(PQ_CODES_FILE);
    if payload_crc(&pq_path)? != meta.pq_crc || payload_crc(&codes_path)? != meta.pq_codes_crc {
        return Err(mismatch(
            "the PQ files are not the ones this index was built with (mixed builds?)".into(),
        ));
    }
    let pq = Quantiser::load(&pq_path)?;
    // All-in-Storage searches without the codes in memory.
    let codes = if ais {
        None
    } else {
        let codes = PqCodes::load(&codes_path)?;
        pq.check_codes(&codes, &codes_path)?;
        Some(codes)
    };
    let (codes_m, codes_n) = codes
        .as_ref()
        .map_or((pq.m(), meta.n as usize), |c| (c.m(), c.n()));
    if pq.dim() != meta.dim
        || pq.metric() != meta.metric
        || pq.m() != meta.pq_bytes
        || codes_m != pq.m()
        || codes_n as u64 != meta.n
    {
        return Err(mismatch(format!(
            "PQ ({} dims, {} bytes, {} codes, {}) does not match the index ({} dims, {} bytes, n = {}, {})",
            pq.dim(),
            pq.m(),
            codes_n,
            pq.metric().name(),
            meta.dim,
            meta.pq_bytes,
            meta.n,
            meta.metric.name()
        )));
    }
    Ok((pq, codes))
}

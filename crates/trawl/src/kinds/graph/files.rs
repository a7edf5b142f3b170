//! The graph kind's files: how its manifest is written from the files present
//! ([`describe`]), and its components — one per kind of file, each with its name, its role in
//! the manifest and its whole-file check ([`COMPONENTS`], which `trawl info DIR --verify` runs).

use std::path::{Path, PathBuf};

use crate::dir::component::{Component, Named, Verified};
use crate::dir::manifest::{entry_at, BuildRecord, KindName, Manifest};
use crate::dir::{FileError, FileErrorKind};
use crate::kinds::graph::label_starts::{self, LabelStarts};
use crate::kinds::graph::layout::decoupled::graph::GraphFile;
use crate::kinds::graph::layout::decoupled::vectors::{self as dvectors, CompressedVectorFile};
use crate::kinds::graph::layout::packed::{PackedFile, PackedMeta};
use crate::kinds::graph::layout::pages::PageFile;
use crate::kinds::graph::refine_file;
use crate::kinds::graph::search::entry::{self, EntryIndex};
use crate::kinds::graph::{
    updates::ids, updates::segments, IndexLayout, OpenError, PQ_CODES_FILE, PQ_FILE,
};
use crate::progress::Control;
use crate::quant::pq::PqCodes;
use crate::quant::Quantiser;

/// Whether a layout's graph header belongs to the build of `meta` (same shape, same PQ files).
fn same_build(a: &PackedMeta, b: &PackedMeta) -> bool {
    a.n == b.n
        && a.dim == b.dim
        && a.dtype == b.dtype
        && a.metric == b.metric
        && a.pq_crc == b.pq_crc
        && a.pq_codes_crc == b.pq_codes_crc
}

/// Describes the index whose files are found in `sources` (each name in the first source
/// directory that holds it: the files an operation just wrote, then the index it adds
/// to): the packed file (or, without it, the decoupled graph) sets the build; PQ files,
/// entry index and every layout whose header matches it are listed. A layout of another
/// graph (an earlier build) is left out. An empty `build_id` is derived from the files
/// ([`crate::dir::manifest::build_id_of`]).
pub fn describe(
    sources: &[&Path],
    build: Option<BuildRecord>,
    build_id: String,
) -> Result<Manifest, FileError> {
    let find = |name: &str| sources.iter().map(|d| d.join(name)).find(|p| p.is_file());
    let packed_name = IndexLayout::Packed.file_name();
    let graph_name = IndexLayout::Decoupled.file_name();
    let base = match (find(packed_name), find(graph_name)) {
        (Some(p), _) => *crate::kinds::graph::layout::packed::PackedFile::open(&p)?.meta(),
        (None, Some(g)) => {
            *crate::kinds::graph::layout::decoupled::graph::GraphFile::open(&g)?.meta()
        }
        (None, None) => {
            return Err(FileError::new(
                sources
                    .first()
                    .map_or(Path::new("."), |d| d)
                    .join(packed_name),
                FileErrorKind::Io(std::io::ErrorKind::NotFound.into()),
            ))
        }
    };
    let needed = |name: &str| {
        find(name).ok_or_else(|| {
            FileError::new(
                sources.first().map_or(Path::new("."), |d| d).join(name),
                FileErrorKind::Io(std::io::ErrorKind::NotFound.into()),
            )
        })
    };
    let mut files = vec![
        entry_at(&needed(PQ_FILE)?, PQ_FILE, PQ.role)?,
        entry_at(&needed(PQ_CODES_FILE)?, PQ_CODES_FILE, PQ_CODES.role)?,
    ];
    let mut layouts = Vec::new();
    for layout in IndexLayout::ALL {
        let Some(path) = find(layout.file_name()) else {
            continue;
        };
        // The decoupled layout's vectors: the segments named by the vector map beside its
        // graph file (a merged index), else the one vector file of a layout written whole.
        let vectors: Option<Vec<(PathBuf, &'static str)>> = if layout == IndexLayout::Decoupled {
            let graph_dir = path.parent().unwrap_or(Path::new("."));
            match segments::VectorMap::load(graph_dir)? {
                Some(m) => {
                    let mut v = vec![(graph_dir.join(segments::FILE_NAME), VECTOR_MAP.role)];
                    for (name, _) in &m.segments {
                        v.push((needed(name)?, SEGMENTS.role()));
                    }
                    Some(v)
                }
                None => find(dvectors::FILE_NAME).map(|p| vec![(p, DECOUPLED_VECTORS.role)]),
            }
        } else {
            None
        };
        let meta = match (layout, &vectors) {
            (IndexLayout::Decoupled, None) => continue,
            (IndexLayout::Decoupled, Some(_)) => {
                *crate::kinds::graph::layout::decoupled::graph::GraphFile::open(&path)?.meta()
            }
            (IndexLayout::Pages, _) => *PageFile::open(&path)?.packed_meta(),
            _ => *crate::kinds::graph::layout::packed::PackedFile::open(&path)?.meta(),
        };
        if !same_build(&meta, &base) {
            continue; // a layout of an earlier build
        }
        layouts.push(layout.name().to_string());
        let role = if layout == IndexLayout::Decoupled {
            DECOUPLED_GRAPH.role
        } else if layout == IndexLayout::Pages {
            PAGE_NODES.role
        } else {
            PackedLayout(layout).role()
        };
        files.push(entry_at(&path, layout.file_name(), role)?);
        for (p, role) in vectors.into_iter().flatten() {
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            files.push(entry_at(&p, &name, role)?);
        }
    }
    if let Some(e) = find(entry::FILE_NAME) {
        files.push(entry_at(&e, entry::FILE_NAME, ENTRY.role)?);
    }
    if let Some(e) = find(crate::kinds::graph::hot::FILE_NAME) {
        files.push(entry_at(&e, crate::kinds::graph::hot::FILE_NAME, HOT.role)?);
    }
    if let Some(e) = find(refine_file::FILE_NAME) {
        files.push(entry_at(&e, refine_file::FILE_NAME, REFINE.role)?);
    }
    if let Some(e) = find(ids::FILE_NAME) {
        files.push(entry_at(&e, ids::FILE_NAME, IDS.role)?);
    }
    if let Some(e) = find(crate::filter::file::FILE_NAME) {
        files.push(entry_at(&e, crate::filter::file::FILE_NAME, ATTRS.role)?);
    }
    if let Some(e) = find(label_starts::FILE_NAME) {
        files.push(entry_at(&e, label_starts::FILE_NAME, LABEL_STARTS.role)?);
    }
    Ok(Manifest::of_build(
        KindName::Graph,
        base.n,
        base.dim,
        base.dtype,
        base.metric,
        layouts,
        files,
        build,
        build_id,
    ))
}

/// The manifest of `dir`'s index after an operation added the files in `staging` to it:
/// the build record, build id, log position and next id are kept (an index without a
/// manifest gets a new id), and so is the write-ahead log with its unmerged updates.
pub fn with_additions(dir: &Path, staging: &Path) -> Result<Manifest, FileError> {
    let old = Manifest::load_if_present(dir)?;
    let (build, id, log_seq, next_id, recall) = match old {
        Some(m) => (m.build, m.build_id, m.log_seq, m.next_id, m.recall),
        None => (None, String::new(), None, None, None),
    };
    let mut m = describe(&[staging, dir], build, id)?;
    // The write-ahead log belongs to the index this operation adds to: it stays (`None`
    // would tell the commit it is stale). A log written before any merge counts from
    // sequence number 0.
    m.log_seq = log_seq.or_else(|| dir.join(crate::dir::LOG_FILE).is_file().then_some(0));
    m.next_id = next_id;
    m.recall = recall;
    Ok(m)
}

#[derive(Debug)]
/// What the checks of a graph index's files share: the directory, the build the first graph
/// file set (the files after it are checked against it) and the progress handle.
pub struct GraphCx {
    /// The index directory.
    pub dir: PathBuf,
    /// The build of the first graph file checked.
    pub base: Option<PackedMeta>,
    /// Progress and cancellation.
    pub ctl: Control,
}

impl GraphCx {
    fn mismatch(&self, reason: String) -> OpenError {
        OpenError::Mismatch {
            dir: self.dir.to_path_buf(),
            reason,
        }
    }

    /// The build the graph file set, for a file checked against it.
    fn built(&self, what: &str) -> Result<PackedMeta, OpenError> {
        self.base.ok_or_else(|| {
            self.mismatch(format!("{what} without a graph file to check it against"))
        })
    }

    /// The first graph file sets the build; a later one must be of the same build.
    fn same_build(&mut self, name: &str, meta: &PackedMeta) -> Result<(), OpenError> {
        match self.base {
            None => {
                self.base = Some(*meta);
                Ok(())
            }
            Some(b)
                if b.n == meta.n
                    && b.dim == meta.dim
                    && b.pq_crc == meta.pq_crc
                    && b.pq_codes_crc == meta.pq_codes_crc =>
            {
                Ok(())
            }
            Some(_) => Err(self.mismatch(format!(
                "{name} holds the graph of another build (its PQ files differ)"
            ))),
        }
    }
}

/// A component of the graph kind.
pub type GraphComponent = dyn Component<GraphCx, OpenError>;

/// A layout's page-packed graph file (the packed file as built, its PageShuffle order, its
/// All-in-Storage form).
struct PackedLayout(IndexLayout);

impl Component<GraphCx, OpenError> for PackedLayout {
    fn role(&self) -> &'static str {
        self.0.name()
    }
    fn owns(&self, name: &str) -> bool {
        name == self.0.file_name()
    }
    fn first(&self) -> bool {
        true
    }
    fn verify(&self, cx: &mut GraphCx, name: &str) -> Result<Verified, OpenError> {
        let p = PackedFile::open(&cx.dir.join(name))?;
        cx.same_build(name, p.meta())?;
        let m = p.meta();
        if m.permuted != (self.0 == IndexLayout::Shuffled)
            || (m.neighbor_code_bytes > 0) != (self.0 == IndexLayout::AllInStorage)
        {
            return Err(cx.mismatch(format!("{name} is not a {} layout", self.0.name())));
        }
        p.verify_all(&cx.ctl)?;
        Ok(format!(
            "all {} data pages match their checksums",
            p.geometry().data_pages
        ))
    }
}

/// The vector segments a merge of a decoupled index wrote (`vectors-NNNNNN.trawl`).
struct Segments;

impl Component<GraphCx, OpenError> for Segments {
    fn role(&self) -> &'static str {
        "vectors"
    }
    fn owns(&self, name: &str) -> bool {
        segments::is_segment_name(name)
    }
    fn verify(&self, cx: &mut GraphCx, name: &str) -> Result<Verified, OpenError> {
        check_vectors(cx, name, true)
    }
}

static PACKED: PackedLayout = PackedLayout(IndexLayout::Packed);
static SHUFFLED: PackedLayout = PackedLayout(IndexLayout::Shuffled);
static ALL_IN_STORAGE: PackedLayout = PackedLayout(IndexLayout::AllInStorage);
static SEGMENTS: Segments = Segments;

/// The decoupled layout's graph file.
static DECOUPLED_GRAPH: Named<GraphCx, OpenError> = Named {
    name: crate::kinds::graph::layout::decoupled::graph::FILE_NAME,
    role: "graph",
    first: true,
    required: false,
    verify: |cx, name| {
        let g = GraphFile::open(&cx.dir.join(name))?;
        cx.same_build(name, g.meta())?;
        let pages = g.verify_all()?;
        Ok(format!(
            "all {pages} data pages decode and match their checksums"
        ))
    },
};

/// The page-node layout's file (PageANN).
static PAGE_NODES: Named<GraphCx, OpenError> = Named {
    name: crate::kinds::graph::layout::pages::FILE_NAME,
    role: "pages",
    first: true,
    required: false,
    verify: |cx, name| {
        let p = PageFile::open(&cx.dir.join(name))?;
        cx.same_build(name, p.packed_meta())?;
        p.verify_all(&cx.ctl)?;
        Ok(format!(
            "all {} page nodes decode and match their checksums; {} vectors placed",
            p.meta().pages,
            p.meta().placed
        ))
    },
};

/// The decoupled layout's vector file (every slot's vector, compressed).
static DECOUPLED_VECTORS: Named<GraphCx, OpenError> = Named {
    name: dvectors::FILE_NAME,
    role: "vectors",
    first: false,
    required: false,
    verify: |cx, name| check_vectors(cx, name, false),
};

/// A vector file of the decoupled layout: every vector decodes, every page matches its
/// checksum, and its shape is the graph's (a segment, or the one file of an index whose
/// vector map says where each slot's vector is, holds only some of them).
fn check_vectors(cx: &mut GraphCx, name: &str, segment: bool) -> Result<Verified, OpenError> {
    let v = CompressedVectorFile::open(&cx.dir.join(name))?;
    let mut n = 0u64;
    v.scan(|_, _| n += 1)?;
    let mapped = cx.dir.join(segments::FILE_NAME).is_file();
    if let Some(b) = cx.base {
        let g = v.geometry();
        if g.dim != b.dim || g.dtype != b.dtype || (!mapped && !segment && g.n != b.n) {
            return Err(cx.mismatch(format!(
                "{name} ({} × {}) does not match the graph ({} × {})",
                g.n, g.dim, b.n, b.dim
            )));
        }
    }
    Ok(format!(
        "all {n} vectors decode and all {} data pages match their checksums",
        v.data_pages()
    ))
}

/// The vector map of a merged decoupled index: which segment holds each slot's vector.
static VECTOR_MAP: Named<GraphCx, OpenError> = Named {
    name: segments::FILE_NAME,
    role: "vmap",
    first: false,
    required: false,
    verify: |cx, name| {
        let map = segments::VectorMap::load(&cx.dir)?
            .ok_or_else(|| cx.mismatch(format!("{name} is missing")))?;
        let b = cx
            .base
            .ok_or_else(|| cx.mismatch(format!("{name} without a graph file")))?;
        if map.slots.len() as u64 != b.n {
            return Err(cx.mismatch(format!(
                "{name} maps {} slots for a graph of {}",
                map.slots.len(),
                b.n
            )));
        }
        let ids = ids::SlotIds::load(&cx.dir, b.n as usize)?;
        map.check_ids(&ids, &cx.dir.join(name))?;
        for (seg, count) in &map.segments {
            let v = CompressedVectorFile::open(&cx.dir.join(seg))?;
            if v.geometry().n != *count {
                return Err(cx.mismatch(format!(
                    "{seg} holds {} vectors, {name} says {count}",
                    v.geometry().n
                )));
            }
        }
        let live = map.slots.iter().filter(|&&s| s != segments::GONE).count();
        Ok(format!(
            "{} segments; {live} slots point at vectors inside them",
            map.segments.len()
        ))
    },
};

/// The PQ codebooks the graph was built with.
static PQ: Named<GraphCx, OpenError> = Named {
    name: PQ_FILE,
    role: "pq",
    first: false,
    required: true,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let path = cx.dir.join(name);
        if crate::kinds::graph::payload_crc(&path)? != meta.pq_crc {
            return Err(cx.mismatch(format!("{name} is not the one the graph was built with")));
        }
        let pq = Quantiser::load(&path)?;
        if pq.dim() != meta.dim || pq.m() != meta.pq_bytes {
            return Err(cx.mismatch(format!("{name} does not match the graph")));
        }
        Ok(format!(
            "checksum matches; {} over {} dimensions",
            pq.describe(),
            pq.dim()
        ))
    },
};

/// The PQ codes of every node.
static PQ_CODES: Named<GraphCx, OpenError> = Named {
    name: PQ_CODES_FILE,
    role: "pq_codes",
    first: false,
    required: true,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let path = cx.dir.join(name);
        if crate::kinds::graph::payload_crc(&path)? != meta.pq_codes_crc {
            return Err(cx.mismatch(format!("{name} is not the one the graph was built with")));
        }
        let codes = PqCodes::load(&path)?;
        if codes.n() as u64 != meta.n || codes.m() != meta.pq_bytes {
            return Err(cx.mismatch(format!("{name} does not match the graph")));
        }
        // RaBitQ codes carry factors the quantiser checks (finite, in range).
        Quantiser::load(&cx.dir.join(PQ_FILE))?.check_codes(&codes, &path)?;
        Ok(format!(
            "checksum matches; {} codes of {} bytes",
            codes.n(),
            codes.m()
        ))
    },
};

/// The entry index (a sample of the nodes and their graph, searched in memory first).
static ENTRY: Named<GraphCx, OpenError> = Named {
    name: entry::FILE_NAME,
    role: "entry",
    first: false,
    required: false,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let e = EntryIndex::load(
            &cx.dir.join(name),
            meta.n,
            meta.dtype,
            meta.dim,
            meta.metric,
            meta.pq_codes_crc,
        )?;
        Ok(format!("checksum matches; {} sampled nodes", e.len()))
    },
};

/// The hot-node order (nodes ranked by sample searches' reads; chooses caches at open).
static HOT: Named<GraphCx, OpenError> = Named {
    name: crate::kinds::graph::hot::FILE_NAME,
    role: "hot",
    first: false,
    required: false,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let h = crate::kinds::graph::hot::HotOrder::load(
            &cx.dir.join(name),
            meta.n,
            meta.pq_codes_crc,
        )?;
        Ok(h.describe())
    },
};

/// The decoupled layout's refinement codes (and what sample searches measured them to save).
static REFINE: Named<GraphCx, OpenError> = Named {
    name: refine_file::FILE_NAME,
    role: "refine",
    first: false,
    required: false,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let (codes, h) = refine_file::load(
            &cx.dir.join(name),
            meta.n,
            meta.dim,
            meta.pq_codes_crc,
            meta.metric,
        )?;
        Ok(format!(
            "checksum matches; {} codes of {} bits per dimension; {:.1} of {:.1} pages per \
             sample search saved",
            codes.len(),
            h.bits,
            h.savings.saved(),
            h.savings.pages_without
        ))
    },
};

/// The stable ids of a live index's slots.
static IDS: Named<GraphCx, OpenError> = Named {
    name: ids::FILE_NAME,
    role: "ids",
    first: false,
    required: false,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let ids = ids::SlotIds::load(&cx.dir, meta.n as usize)?;
        Ok(format!(
            "checksum matches; {} slots, {} free, no id twice",
            ids.len(),
            ids.len() - ids.live()
        ))
    },
};

/// The attributes of the slots (labels, numeric fields) filters read.
static ATTRS: Named<GraphCx, OpenError> = Named {
    name: crate::filter::file::FILE_NAME,
    role: "attrs",
    first: false,
    required: false,
    verify: |cx, name| {
        let n = cx.built(name)?.n;
        Ok(crate::filter::file::verify(&cx.dir, name, n)?)
    },
};

/// The start nodes of a label-aware graph's labels.
static LABEL_STARTS: Named<GraphCx, OpenError> = Named {
    name: label_starts::FILE_NAME,
    role: "label_starts",
    first: false,
    required: false,
    verify: |cx, name| {
        let meta = cx.built(name)?;
        let attrs_path = cx.dir.join(crate::filter::file::FILE_NAME);
        let attrs = crate::filter::file::load(&attrs_path, meta.n)?;
        let starts = LabelStarts::load(
            &cx.dir.join(name),
            meta.n,
            meta.pq_codes_crc,
            crate::kinds::graph::payload_crc(&attrs_path)?,
            &attrs,
        )?;
        Ok(starts.describe())
    },
};

/// Every component of the graph kind.
pub static COMPONENTS: [&GraphComponent; 16] = [
    &PACKED,
    &SHUFFLED,
    &ALL_IN_STORAGE,
    &DECOUPLED_GRAPH,
    &PAGE_NODES,
    &DECOUPLED_VECTORS,
    &SEGMENTS,
    &VECTOR_MAP,
    &PQ,
    &PQ_CODES,
    &ENTRY,
    &HOT,
    &REFINE,
    &IDS,
    &ATTRS,
    &LABEL_STARTS,
];

/// Checks the file `name` with the component that owns it.
pub fn verify_file(cx: &mut GraphCx, name: &str) -> Result<Verified, OpenError> {
    match crate::dir::component::owner(&COMPONENTS, name) {
        Some(c) => c.verify(cx, name),
        None => Err(cx.mismatch(format!("{name} is not a file of this index kind"))),
    }
}

/// Whether the file `name` sets the build the others are checked against (a graph file).
pub fn checked_first(name: &str) -> bool {
    crate::dir::component::owner(&COMPONENTS, name).is_some_and(|c| c.first())
}

//! The disk layouts of one graph, written from the page-packed file the build made and chosen
//! at open time ([`crate::kinds::graph::OpenOptions::layout`]):
//!
//! | layout | file | records | in memory at search time |
//! |---|---|---|---|
//! | [`IndexLayout::Packed`] | `packed.trawl` | node `i` in slot `i` | PQ codes |
//! | [`IndexLayout::Shuffled`] | `packed-shuffled.trawl` | PageShuffle order ([`crate::kinds::graph::layout::shuffle`]) | PQ codes + id → slot map (8 B per node) |
//! | [`IndexLayout::AllInStorage`] | `packed-ais.trawl` | each record also holds its neighbours' PQ codes (AiSAQ) | codebooks only |
//! | [`IndexLayout::Pages`] | `pages.trawl` | page nodes: similar vectors and one list of neighbouring pages ([`crate::kinds::graph::layout::pages`]) | PQ codes in slot order + each vector's page (4 B per vector) |
//!
//! All three share the PQ files and the entry index (bound to the PQ codes' checksum), so
//! search-time switches (cache, MemGraph, DynamicWidth, PageSearch, PipeSearch) combine with
//! any of them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::time::Instant;

use crate::dir::{FileError, FileErrorKind};
use crate::io::PAGE_BYTES;
use crate::kinds::graph::layout::decoupled::graph::GraphWriter;
use crate::kinds::graph::layout::decoupled::vectors::{
    self as dvectors, CompressedGeometry, CompressedVectorWriter, VectorOrder, VectorParams,
    VectorPlanner,
};
use crate::kinds::graph::layout::packed::{self, PackedMeta, PackedWriter, RecordView};
use crate::kinds::graph::layout::shuffle::{self, Csr, ShuffleReport};
use crate::kinds::graph::refine_file::RefineSavings;
use crate::kinds::graph::{DiskIndex, IndexBuildError};
use crate::progress::Control;
use crate::search::SearchError;

pub use crate::kinds::graph::layout_name::IndexLayout;

/// Parameters of PageShuffle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShuffleParams {
    /// Most refinement rounds after the neighbour packing (each kept only if it raises
    /// `OR(G)`; they stop early once a round gains little).
    pub rounds: usize,
}

impl ShuffleParams {
    /// The most refinement rounds a layout write takes.
    pub const MAX_ROUNDS: usize = 1000;
}

impl Default for ShuffleParams {
    fn default() -> Self {
        Self { rounds: 8 }
    }
}

/// What [`DiskIndex::write_layout`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LayoutReport {
    /// The layout written.
    pub layout: String,
    /// Its file.
    pub file: String,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Bytes of the source page-packed file.
    pub packed_bytes: u64,
    /// Records per page of the layout.
    pub records_per_page: usize,
    /// Seconds reading the graph (PageShuffle), placing nodes, and writing.
    pub read_secs: f64,
    /// Seconds placing the nodes (PageShuffle).
    pub shuffle_secs: f64,
    /// Seconds writing the file.
    pub write_secs: f64,
    /// Seconds of the whole conversion.
    pub total_secs: f64,
    /// Bytes of the graph held while shuffling (out-lists and their transpose).
    pub graph_bytes: u64,
    /// PageShuffle: the overlap ratios (identity, after packing, per round, final).
    pub shuffle: Option<ShuffleReport>,
    /// Decoupled layout: bytes per component and the compression figures.
    pub decoupled: Option<DecoupledReport>,
    /// Page-node layout: the pages and their lists.
    pub pages: Option<crate::kinds::graph::pages_write::PagesReport>,
}

/// What writing the decoupled layout produced, by component.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DecoupledReport {
    /// The vectors' order in the vector file (graph order falls back to id order when a
    /// page holds fewer than two coded vectors).
    pub vector_order: VectorOrder,
    /// Coded vectors per page (the id-order file's average; PageShuffle's page size in graph
    /// order).
    pub vectors_per_page: usize,
    /// Bytes of the graph file.
    pub graph_bytes: u64,
    /// Bytes of the vector file.
    pub vectors_bytes: u64,
    /// Edges (sum of degrees).
    pub edges: u64,
    /// Bytes the lists take uncompressed (`4 · (1 + degree)` per node: count and ids).
    pub lists_raw_bytes: u64,
    /// Graph data pages.
    pub graph_pages: u64,
    /// Bytes the vectors take uncompressed (`n · V`).
    pub vectors_raw_bytes: u64,
    /// Coded vector bytes with their offset tables.
    pub vectors_payload_bytes: u64,
    /// Vector metadata bytes (code lengths, chunk records with base vectors, first id per
    /// page), all held in memory at search time.
    pub vectors_metadata_bytes: u64,
    /// Vector data pages.
    pub vector_pages: u64,
    /// Chunks, and those XOR-coded against a base vector.
    pub chunks: u64,
    /// Chunks coded with XOR.
    pub xor_chunks: u64,
    /// Segments.
    pub segments: u64,
    /// Vectors per chunk.
    pub chunk_vectors: u64,
    /// Vectors stored raw.
    pub raw_vectors: u64,
    /// The β the chunks were sized for.
    pub beta: f64,
    /// Seconds of the first pass (graph file, vector statistics).
    pub pass1_secs: f64,
    /// Seconds of the second pass (vector coding).
    pub pass2_secs: f64,
    /// Bytes of the refinement codes' component (`refine.trawl`).
    pub refine_bytes: u64,
    /// What sample searches measured the refinement codes to save.
    pub refine_savings: RefineSavings,
    /// Seconds to build, measure and write them.
    pub refine_secs: f64,
}

/// A layout write refused for what the source file `path` holds.
fn invalid(path: &std::path::Path, m: String) -> IndexBuildError {
    IndexBuildError::File(FileError::new(path, FileErrorKind::Invalid(m)))
}

/// What writing the decoupled layout in graph order produced.
struct GraphOrdered {
    shuffle: ShuffleReport,
    shuffle_secs: f64,
    graph_bytes: u64,
    vectors: dvectors::VectorWriteReport,
    pass1_secs: f64,
    pass2_secs: f64,
}

impl DiskIndex {
    /// Writes the `layout` form of this index's graph into its directory (replacing an older
    /// one atomically), reading the page-packed file sequentially. The index must have been
    /// opened with the [`IndexLayout::Packed`] layout. Writing `Packed` itself is refused.
    pub fn write_layout(
        &self,
        layout: IndexLayout,
        params: &ShuffleParams,
        ctl: &Control,
    ) -> Result<LayoutReport, IndexBuildError> {
        if layout == IndexLayout::Decoupled {
            return self.write_decoupled(&VectorParams::default(), ctl);
        }
        if layout == IndexLayout::Pages {
            return self.write_pages(&Default::default(), ctl);
        }
        let t0 = Instant::now();
        let src = self.layout_source()?;
        let bad = |m: String| invalid(src.path(), m);
        if layout == IndexLayout::Packed {
            return Err(bad("the packed layout is the one the build writes".into()));
        }
        if params.rounds > ShuffleParams::MAX_ROUNDS {
            return Err(IndexBuildError::Graph(
                crate::vamana::BuildError::InvalidParam {
                    name: "shuffle rounds",
                    reason: format!(
                        "{} is more than {}",
                        params.rounds,
                        ShuffleParams::MAX_ROUNDS
                    ),
                },
            ));
        }
        let hot = self.fresh_hot_order(rayon::current_num_threads(), ctl)?;
        let txn = self.begin_txn()?;
        let out_path = txn.path(layout.file_name());
        let mut report = LayoutReport {
            layout: layout.name().into(),
            file: layout.file_name().into(),
            packed_bytes: src.file_bytes(),
            ..LayoutReport::default()
        };
        let meta = *src.meta();
        let file_bytes = match layout {
            IndexLayout::Decoupled | IndexLayout::Pages => unreachable!("handled above"),
            IndexLayout::Packed => {
                return Err(bad("the packed layout is the one the build writes".into()))
            }
            IndexLayout::AllInStorage => self.write_ais(&out_path, &mut report, ctl)?,
            IndexLayout::Shuffled => self.write_shuffled(&out_path, params, &mut report, ctl)?,
        };
        report.file_bytes = file_bytes;
        hot.save(
            &txn.path(crate::kinds::graph::hot::FILE_NAME),
            meta.n,
            meta.pq_codes_crc,
        )?;
        report.records_per_page = packed::PackedGeometry::of(&PackedMeta {
            neighbor_code_bytes: if layout == IndexLayout::AllInStorage {
                meta.pq_bytes
            } else {
                0
            },
            ..meta
        })
        .map_or(0, |g| g.per_page);
        let manifest = crate::kinds::graph::files::with_additions(self.dir(), txn.staging())?;
        txn.commit(&manifest)?;
        report.total_secs = t0.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Writes the All-in-Storage form of the packed file at `out_path` (every record carries
    /// its neighbours' PQ codes); returns its bytes.
    fn write_ais(
        &self,
        out_path: &std::path::Path,
        report: &mut LayoutReport,
        ctl: &Control,
    ) -> Result<u64, IndexBuildError> {
        let src = self.layout_source()?;
        let bad = |m: String| invalid(src.path(), m);
        let meta = *src.meta();
        let codes = self
            .codes()
            .ok_or_else(|| bad("no PQ codes in memory".into()))?;
        let c = codes.m();
        let ais = PackedMeta {
            neighbor_code_bytes: c,
            ..meta
        };
        let mut w = PackedWriter::create(out_path, ais)?;
        w.set_medoid_code(codes.code(meta.medoid as usize))?;
        let mut buf = Vec::new();
        let bar = ctl.bar("writing all-in-storage", meta.n);
        let t_w = Instant::now();
        self.scan_records(ctl, |_, view| {
            buf.clear();
            for nb in view.neighbors() {
                buf.extend_from_slice(codes.code(nb as usize));
            }
            let ids: Vec<u32> = view.neighbors().collect();
            push_raw(&mut w, &meta, view, &ids, &buf)?;
            bar.inc(1);
            Ok(())
        })?;
        let bytes = w.finish()?;
        bar.finish_and_clear();
        report.write_secs = t_w.elapsed().as_secs_f64();
        Ok(bytes)
    }

    /// Writes the PageShuffle order of the packed file at `out_path` (the graph read, its pages
    /// shuffled, the records written in the new order); returns its bytes.
    fn write_shuffled(
        &self,
        out_path: &std::path::Path,
        params: &ShuffleParams,
        report: &mut LayoutReport,
        ctl: &Control,
    ) -> Result<u64, IndexBuildError> {
        let src = self.layout_source()?;
        let bad = |m: String| invalid(src.path(), m);
        let meta = *src.meta();
        let per = src.geometry().per_page;
        if per < 2 {
            return Err(bad(format!(
                "PageShuffle needs several records per page; this index has {per}"
            )));
        }
        let t_r = Instant::now();
        let mut offsets = Vec::with_capacity(meta.n as usize + 1);
        offsets.push(0u64);
        let mut targets = Vec::new();
        let bar = ctl.bar("reading the graph", meta.n);
        self.scan_records(ctl, |_, view| {
            targets.extend(view.neighbors());
            offsets.push(targets.len() as u64);
            bar.inc(1);
            Ok(())
        })?;
        bar.finish_and_clear();
        targets.shrink_to_fit();
        let graph = Csr { offsets, targets };
        report.read_secs = t_r.elapsed().as_secs_f64();
        report.graph_bytes = 2 * graph.heap_bytes() as u64;
        let t_s = Instant::now();
        let bar = ctl.bar("shuffling pages", meta.n * (2 + params.rounds as u64));
        let (page_of, rep) = shuffle::shuffle(&graph, per, params.rounds, || bar.inc(1));
        bar.finish_and_clear();
        ctl.check().map_err(|c| bad(c.to_string()))?;
        report.shuffle_secs = t_s.elapsed().as_secs_f64();
        report.shuffle = Some(rep);
        drop(graph);
        let order = shuffle::order_table(&page_of, per);
        drop(page_of);
        let t_w = Instant::now();
        let bytes = self.write_permuted(out_path, order, ctl)?;
        report.write_secs = t_w.elapsed().as_secs_f64();
        Ok(bytes)
    }

    /// The page-packed file every other layout is written from: the index must be open with
    /// the packed layout.
    pub(crate) fn layout_source(&self) -> Result<&packed::PackedFile, IndexBuildError> {
        let src = self.packed_file()?;
        if self.options().layout != IndexLayout::Packed || src.is_permuted() {
            return Err(IndexBuildError::File(FileError::new(
                src.path(),
                FileErrorKind::Invalid(
                    "layouts are written from the packed layout: open the index with it".into(),
                ),
            )));
        }
        Ok(src)
    }

    /// Writes the decoupled layout (`graph.trawl` and `vectors.trawl`) from the page-packed
    /// file. In id order ([`VectorOrder::Id`]), two sequential passes: the first writes the
    /// graph file and gathers the vector statistics (base vectors, XOR decisions, code tables),
    /// the second codes the vectors. In graph order ([`VectorOrder::Graph`]) the id-order
    /// vector file is written first (it tells how many coded vectors a page holds), then the
    /// graph is read, PageShuffle places the nodes on pages of that many, and the vectors are
    /// planned and coded again in that order (records fetched by positional reads) while the
    /// graph file is written keyed with each node's position. Memory: one chunk's byte counts
    /// per position (`256 · V · 4` bytes) and the plan; in graph order also the graph twice
    /// (out-lists and their transpose) and the order.
    ///
    /// Then the refinement codes (`refine.trawl`), in a transaction of their own
    /// ([`crate::kinds::graph::refine_file`], with what sample searches measured them to save).
    pub fn write_decoupled(
        &self,
        params: &VectorParams,
        ctl: &Control,
    ) -> Result<LayoutReport, IndexBuildError> {
        let mut report = self.write_decoupled_files(params, ctl)?;
        let (bytes, savings, secs) = self.write_refine(ctl)?;
        report.total_secs += secs;
        if let Some(d) = report.decoupled.as_mut() {
            (d.refine_bytes, d.refine_savings, d.refine_secs) = (bytes, savings, secs);
        }
        Ok(report)
    }

    fn write_decoupled_files(
        &self,
        params: &VectorParams,
        ctl: &Control,
    ) -> Result<LayoutReport, IndexBuildError> {
        let t0 = Instant::now();
        let src = self.layout_source()?;
        let bad = |m: String| invalid(src.path(), m);
        let meta = *src.meta();
        let hot = self.fresh_hot_order(rayon::current_num_threads(), ctl)?;
        let txn = self.begin_txn()?;
        hot.save(
            &txn.path(crate::kinds::graph::hot::FILE_NAME),
            meta.n,
            meta.pq_codes_crc,
        )?;
        let graph_path = txn.path(IndexLayout::Decoupled.file_name());
        let vectors_path = txn.path(dvectors::FILE_NAME);
        let geo = CompressedGeometry::new(meta.dtype, meta.dim, meta.n, params).map_err(bad)?;
        let gmeta = PackedMeta {
            neighbor_code_bytes: 0,
            permuted: false,
            ..meta
        };
        let mut planner = VectorPlanner::new(geo).map_err(bad)?;
        let mut gw = Some(GraphWriter::create(&graph_path, gmeta)?);
        let mut offsets = Vec::new();
        let mut targets = Vec::new();
        let graph_order = params.order == VectorOrder::Graph;
        if graph_order {
            offsets.reserve(meta.n as usize + 1);
            offsets.push(0u64);
        }
        let bar = ctl.bar("decoupled: graph file and vector statistics", meta.n);
        let mut ids = Vec::with_capacity(meta.r);
        let mut edges = 0u64;
        self.scan_records(ctl, |_, view| {
            ids.clear();
            ids.extend(view.neighbors());
            edges += ids.len() as u64;
            if let Some(w) = gw.as_mut() {
                w.push(&ids)?;
            }
            if graph_order {
                targets.extend_from_slice(&ids);
                offsets.push(targets.len() as u64);
            }
            planner.push(view.vector_bytes()).map_err(bad)?;
            bar.inc(1);
            Ok(())
        })?;
        bar.finish_and_clear();
        let mut graph_bytes = gw.take().map_or(Ok(0), GraphWriter::finish)?;
        let plan = planner.finish().map_err(bad)?;
        let mut pass1_secs = t0.elapsed().as_secs_f64();
        let t2 = Instant::now();
        let mut vrep = self.code_vectors(&vectors_path, plan, ctl)?;
        let mut pass2_secs = t2.elapsed().as_secs_f64();
        let mut order_used = VectorOrder::Id;
        let mut shuffle_report = None;
        let mut shuffle_secs = 0.0;
        // Coded vectors per page, as the id-order file holds them.
        let per = (meta.n as f64 / vrep.data_pages.max(1) as f64).round() as usize;
        if graph_order && per >= 2 && meta.n > per as u64 {
            targets.shrink_to_fit();
            let graph = Csr {
                offsets: std::mem::take(&mut offsets),
                targets: std::mem::take(&mut targets),
            };
            let g = self.write_decoupled_in_graph_order(graph, per, geo, gmeta, &txn, ctl)?;
            shuffle_report = Some(g.shuffle);
            shuffle_secs = g.shuffle_secs;
            graph_bytes = g.graph_bytes;
            vrep = g.vectors;
            pass1_secs += g.pass1_secs;
            pass2_secs += g.pass2_secs;
            order_used = VectorOrder::Graph;
        }
        let manifest = crate::kinds::graph::files::with_additions(self.dir(), txn.staging())?;
        txn.commit(&manifest)?;
        Ok(LayoutReport {
            layout: IndexLayout::Decoupled.name().into(),
            file: format!(
                "{} + {}",
                IndexLayout::Decoupled.file_name(),
                dvectors::FILE_NAME
            ),
            file_bytes: graph_bytes + vrep.file_bytes,
            packed_bytes: src.file_bytes(),
            shuffle_secs,
            write_secs: pass1_secs + pass2_secs,
            total_secs: t0.elapsed().as_secs_f64(),
            shuffle: shuffle_report,
            decoupled: Some(DecoupledReport {
                vector_order: order_used,
                vectors_per_page: per,
                graph_bytes,
                vectors_bytes: vrep.file_bytes,
                edges,
                lists_raw_bytes: 4 * (meta.n + edges),
                graph_pages: graph_bytes / PAGE_BYTES as u64,
                vectors_raw_bytes: meta.n * geo.vector_bytes() as u64,
                vectors_payload_bytes: vrep.payload_bytes,
                vectors_metadata_bytes: vrep.metadata_bytes,
                vector_pages: vrep.data_pages,
                chunks: vrep.chunks,
                xor_chunks: vrep.xor_chunks,
                segments: vrep.segments,
                chunk_vectors: geo.chunk_vectors,
                raw_vectors: vrep.raw_vectors,
                beta: params.beta,
                pass1_secs,
                pass2_secs,
                ..DecoupledReport::default()
            }),
            ..LayoutReport::default()
        })
    }

    /// Codes every vector of the packed file, in id order, into the vector file at `path`
    /// (its plan made by a first pass).
    fn code_vectors(
        &self,
        path: &std::path::Path,
        plan: dvectors::VectorPlan,
        ctl: &Control,
    ) -> Result<dvectors::VectorWriteReport, IndexBuildError> {
        let mut vw = CompressedVectorWriter::create(path, plan)?;
        let bar = ctl.bar("decoupled: coding vectors", self.n() as u64);
        self.scan_records(ctl, |_, view| {
            vw.push(view.vector_bytes())?;
            bar.inc(1);
            Ok(())
        })?;
        bar.finish_and_clear();
        Ok(vw.finish()?)
    }

    /// The decoupled layout with its vectors in graph order (OctopusANN's PageShuffle over
    /// the graph `graph`, `per` vectors a page): the graph file rewritten keyed with each
    /// node's position, the vectors planned and coded again in that order.
    fn write_decoupled_in_graph_order(
        &self,
        graph: Csr,
        per: usize,
        geo: CompressedGeometry,
        gmeta: PackedMeta,
        txn: &crate::dir::txn::Txn,
        ctl: &Control,
    ) -> Result<GraphOrdered, IndexBuildError> {
        let src = self.layout_source()?;
        let bad = |m: String| invalid(src.path(), m);
        let meta = *src.meta();
        let graph_path = txn.path(IndexLayout::Decoupled.file_name());
        let vectors_path = txn.path(dvectors::FILE_NAME);
        let t_s = Instant::now();
        let rounds = ShuffleParams::default().rounds;
        let bar = ctl.bar(
            "decoupled: placing vectors (PageShuffle)",
            meta.n * (2 + rounds as u64),
        );
        let (page_of, rep) = shuffle::shuffle(&graph, per, rounds, || bar.inc(1));
        bar.finish_and_clear();
        ctl.check().map_err(|c| bad(c.to_string()))?;
        // Position of each node: its rank in page order.
        let order: Vec<u32> = shuffle::order_table(&page_of, per)
            .into_iter()
            .filter(|&id| id != packed::EMPTY_SLOT)
            .collect();
        drop(page_of);
        if order.len() as u64 != meta.n {
            return Err(bad(format!(
                "vector order has {} nodes, not {}",
                order.len(),
                meta.n
            )));
        }
        let mut pos = vec![u32::MAX; meta.n as usize];
        for (p, &id) in order.iter().enumerate() {
            pos[id as usize] = p as u32;
        }
        let shuffle_secs = t_s.elapsed().as_secs_f64();
        // The graph file again, keyed with each node's position.
        let t1 = Instant::now();
        let mut gw = GraphWriter::create_keyed(&graph_path, gmeta)?;
        let bar = ctl.bar("decoupled: keyed graph file", meta.n);
        for u in 0..meta.n as usize {
            gw.push_keyed(graph.row(u), pos[u])?;
            if u % 4096 == 0 {
                ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
                bar.set_position(u as u64);
            }
        }
        bar.finish_and_clear();
        drop(graph);
        let graph_bytes = gw.finish()?;
        // The vectors in position order: planned, then coded.
        let file = File::open(src.path()).map_err(|e| FileError::new(src.path(), e.into()))?;
        let rgeo = *src.geometry();
        let mut buf = vec![0u8; rgeo.read_pages() * PAGE_BYTES];
        let mut each = |what: &str, f: &mut dyn FnMut(&[u8]) -> Result<(), IndexBuildError>| {
            let bar = ctl.bar(what, meta.n);
            for (k, &id) in order.iter().enumerate() {
                let (page, _) = src.locate(id);
                std::os::unix::fs::FileExt::read_exact_at(
                    &file,
                    &mut buf,
                    page * PAGE_BYTES as u64,
                )
                .map_err(|e| FileError::new(src.path(), e.into()))?;
                src.check_pages(page, &buf)
                    .map_err(|p| corrupt(self, p, "checksum mismatch"))?;
                let view = src.record(id, &buf).map_err(|d| corrupt(self, page, &d))?;
                f(view.vector_bytes())?;
                if k % 4096 == 0 {
                    ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
                    bar.set_position(k as u64);
                }
            }
            bar.finish_and_clear();
            Ok::<(), IndexBuildError>(())
        };
        let mut planner = VectorPlanner::new(geo).map_err(bad)?;
        each("decoupled: vector statistics in graph order", &mut |v| {
            planner.push(v).map_err(bad)
        })?;
        let plan = planner.finish().map_err(bad)?;
        let pass1_secs = t1.elapsed().as_secs_f64();
        let t3 = Instant::now();
        let mut vw = CompressedVectorWriter::create(&vectors_path, plan)?;
        each("decoupled: coding vectors in graph order", &mut |v| {
            vw.push(v).map_err(IndexBuildError::from)
        })?;
        let vectors = vw.finish()?;
        Ok(GraphOrdered {
            shuffle: rep,
            shuffle_secs,
            graph_bytes,
            vectors,
            pass1_secs,
            pass2_secs: t3.elapsed().as_secs_f64(),
        })
    }

    /// Writes the records in the slot order `order`, fetching each from the source file (every
    /// page read is checked against its checksum).
    fn write_permuted(
        &self,
        path: &std::path::Path,
        order: Vec<u32>,
        ctl: &Control,
    ) -> Result<u64, IndexBuildError> {
        let src = self.packed_file()?;
        let meta = *src.meta();
        let geo = *src.geometry();
        // Records are fetched one page at a time with positional reads (no mapping: the
        // conversion's memory stays the order table plus one page).
        let file = File::open(src.path()).map_err(|e| FileError::new(src.path(), e.into()))?;
        let nodes: Vec<u32> = order
            .iter()
            .copied()
            .filter(|&id| id != packed::EMPTY_SLOT)
            .collect();
        let mut w = PackedWriter::create_permuted(path, meta, order)?;
        let bar = ctl.bar("writing shuffled pages", meta.n);
        let mut buf = vec![0u8; geo.read_pages() * PAGE_BYTES];
        let mut ids = Vec::with_capacity(meta.r);
        for (k, &id) in nodes.iter().enumerate() {
            let (page, _) = src.locate(id);
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, page * PAGE_BYTES as u64)
                .map_err(|e| FileError::new(src.path(), e.into()))?;
            src.check_pages(page, &buf)
                .map_err(|p| corrupt(self, p, "checksum mismatch"))?;
            let view = src.record(id, &buf).map_err(|d| corrupt(self, page, &d))?;
            ids.clear();
            ids.extend(view.neighbors());
            push_raw(&mut w, &meta, view, &ids, &[])?;
            if k % 4096 == 0 {
                ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
                bar.set_position(k as u64);
            }
        }
        let bytes = w.finish()?;
        bar.finish_and_clear();
        Ok(bytes)
    }

    /// How the graph's nodes are reached from the medoid: every neighbour list read (the
    /// page-packed file, or the decoupled graph file of an index without one) with its
    /// checksums checked; the free slots of an updated index (`hole`) are not nodes.
    pub fn connectivity(
        &self,
        hole: Option<&[bool]>,
        ctl: &Control,
    ) -> Result<crate::vamana::connectivity::Connectivity, IndexBuildError> {
        let mut lists = crate::vamana::connectivity::Lists::new(self.n());
        match self.decoupled().filter(|_| self.packed_file().is_err()) {
            Some(d) => {
                d.graph().scan_lists(|id, list| {
                    lists.set(id, list.iter().copied());
                    Ok::<(), IndexBuildError>(())
                })?;
            }
            None => self.scan_records(ctl, |id, view| {
                lists.set(id, view.neighbors());
                Ok(())
            })?,
        }
        Ok(crate::vamana::connectivity::measure(
            &lists,
            &[self.medoid()],
            hole,
        ))
    }

    /// Calls `f(id, record)` for every node in id order, reading the page-packed file
    /// sequentially and checking every page's checksum.
    pub(crate) fn scan_records(
        &self,
        ctl: &Control,
        mut f: impl FnMut(u32, RecordView<'_>) -> Result<(), IndexBuildError>,
    ) -> Result<(), IndexBuildError> {
        let src = self.packed_file()?;
        let geo = *src.geometry();
        let mut file = File::open(src.path()).map_err(|e| FileError::new(src.path(), e.into()))?;
        file.seek(SeekFrom::Start(PAGE_BYTES as u64))
            .map_err(|e| FileError::new(src.path(), e.into()))?;
        let step = geo.read_pages().max(1);
        let chunk_pages = (256 / step).max(1) * step;
        let mut buf = vec![0u8; chunk_pages * PAGE_BYTES];
        let mut page = 1u64;
        let mut ids = Vec::new();
        while page <= geo.data_pages {
            ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
            let count = (geo.data_pages + 1 - page).min(chunk_pages as u64) as usize;
            let chunk = &mut buf[..count * PAGE_BYTES];
            file.read_exact(chunk)
                .map_err(|e| FileError::new(src.path(), e.into()))?;
            src.check_pages(page, chunk)
                .map_err(|p| corrupt(self, p, "checksum mismatch"))?;
            for k in 0..count as u64 {
                ids.clear();
                src.ids_on_page(page + k, &mut ids);
                let at = k as usize * PAGE_BYTES;
                for &id in &ids {
                    let view = src
                        .record(id, &chunk[at..])
                        .map_err(|d| corrupt(self, page + k, &d))?;
                    f(id, view)?;
                }
            }
            page += count as u64;
        }
        Ok(())
    }
}

fn corrupt(ix: &DiskIndex, page: u64, detail: &str) -> IndexBuildError {
    IndexBuildError::Search(SearchError::Corrupt {
        path: ix.layout_path().to_path_buf(),
        page,
        detail: detail.into(),
    })
}

/// Pushes a record given as raw vector bytes (the source file's element type).
fn push_raw(
    w: &mut PackedWriter,
    meta: &PackedMeta,
    view: RecordView<'_>,
    ids: &[u32],
    codes: &[u8],
) -> Result<(), IndexBuildError> {
    use crate::kernels::DType;
    let raw = view.vector_bytes();
    let r = match meta.dtype {
        DType::F32 => {
            let v: Vec<f32> = raw
                .chunks_exact(4)
                .map(bytemuck::pod_read_unaligned::<f32>)
                .collect();
            w.push_with_codes(&v, ids, codes)
        }
        DType::U8 => w.push_with_codes(raw, ids, codes),
        DType::I8 => w.push_with_codes::<i8>(bytemuck::cast_slice(raw), ids, codes),
    };
    Ok(r?)
}

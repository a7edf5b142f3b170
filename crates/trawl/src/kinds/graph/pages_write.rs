//! Writing the page-node layout (`trawl layout --pages`) from the page-packed file.

use std::time::Instant;

use crate::kernels::{DType, Element};
use crate::kinds::graph::layout::pages::build::{
    group, page_edges, EdgeReport, Grouping, PageParams,
};
use crate::kinds::graph::layout::pages::place::{regroup, PlaceReport};
use crate::kinds::graph::layout::pages::{
    self, auto_capacity, entries_that_fit, max_capacity, room_bytes, PagesMeta,
};
use crate::kinds::graph::layout::shuffle::Csr;
use crate::kinds::graph::{DiskIndex, IndexBuildError, IndexLayout, LayoutReport};
use crate::progress::Control;

/// What writing the page-node layout produced.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PagesReport {
    /// Vectors per page node (the capacity).
    pub capacity: usize,
    /// Page nodes.
    pub pages: u64,
    /// Pages holding fewer vectors than the capacity.
    pub underfull: u64,
    /// Vectors placed over capacity × pages.
    pub fill: f64,
    /// Hops around a centre its members were chosen from.
    pub hops: usize,
    /// Neighbour-list entries a page needed per vector when the capacity was chosen.
    pub min_degree: usize,
    /// The merged lists.
    pub edges: EdgeReport,
    /// Mean entries per page.
    pub mean_degree: f64,
    /// How the pages a merge found were kept (absent when the vectors were grouped afresh).
    pub placement: Option<PlaceReport>,
}

/// The page nodes a layout had before a merge, kept by the next write ([`regroup`]).
#[derive(Debug, Clone)]
pub struct PreviousPages {
    /// The parameters the layout was written with (its capacity as it was).
    pub params: PageParams,
    /// Member slots of each page node.
    pub pages: Vec<Vec<u32>>,
    /// The id each slot held ([`crate::kinds::HOLE`] for a free one).
    pub ids: Vec<u64>,
}

impl PreviousPages {
    /// The page nodes of the layout in `dir` (none when it has no page-node file), with the
    /// ids its slots held, `ids`.
    pub fn read(
        dir: &std::path::Path,
        ids: &crate::kinds::graph::updates::ids::SlotIds,
    ) -> Result<Option<Self>, crate::dir::FileError> {
        let path = dir.join(pages::FILE_NAME);
        if !path.is_file() {
            return Ok(None);
        }
        let file = pages::PageFile::open(&path)?;
        let order = file.read_order()?;
        let cap = file.meta().capacity;
        let pages = order
            .chunks_exact(cap)
            .map(|c| {
                c.iter()
                    .copied()
                    .filter(|&s| s != pages::NO_VECTOR)
                    .collect()
            })
            .collect();
        let ids = (0..file.meta().n as u32).map(|s| ids.id(s)).collect();
        Ok(Some(Self {
            params: file.meta().params(),
            pages,
            ids,
        }))
    }
}

fn bad_param(name: &'static str, reason: String) -> IndexBuildError {
    IndexBuildError::Graph(crate::vamana::BuildError::InvalidParam { name, reason })
}

impl DiskIndex {
    /// Writes the page-node layout (`pages.trawl`) into the index's directory, replacing an
    /// older one atomically: the graph and the vectors are read from the page-packed file
    /// (held in memory: `n·(V + 4R)` bytes), grouped into page nodes, their edges merged, and
    /// the file written. The index must be open with the packed layout.
    pub fn write_pages(
        &self,
        params: &PageParams,
        ctl: &Control,
    ) -> Result<LayoutReport, IndexBuildError> {
        self.write_pages_kept(params, None, ctl)
    }

    /// [`DiskIndex::write_pages`] keeping the page nodes `prev` of the index before a merge
    /// when their capacity is this one: the vectors that kept their slot stay on their page,
    /// the new ones go to the page of their nearest neighbour (splitting full pages),
    /// [`regroup`]. Without `prev` (or at another capacity) the vectors are grouped afresh.
    pub fn write_pages_kept(
        &self,
        params: &PageParams,
        prev: Option<&PreviousPages>,
        ctl: &Control,
    ) -> Result<LayoutReport, IndexBuildError> {
        let t0 = Instant::now();
        let src = self.layout_source()?;
        let meta = *src.meta();
        let v = meta.dim * meta.dtype.size_bytes();
        let n = meta.n as usize;
        let (capacity, hops, min_degree) = page_shape(&meta, params)?;
        let t_r = Instant::now();
        let (graph, raw) = self.read_graph(ctl)?;
        let ids_path = self
            .dir()
            .join(crate::kinds::graph::updates::ids::FILE_NAME);
        let slots = if ids_path.is_file() {
            Some(crate::kinds::graph::updates::ids::SlotIds::load(
                self.dir(),
                n,
            )?)
        } else {
            None
        };
        let include = |id: u32| slots.as_ref().is_none_or(|s| !s.is_hole(id));
        let mut report = LayoutReport {
            layout: IndexLayout::Pages.name().into(),
            file: pages::FILE_NAME.into(),
            packed_bytes: src.file_bytes(),
            records_per_page: capacity,
            read_secs: t_r.elapsed().as_secs_f64(),
            graph_bytes: graph.heap_bytes() as u64,
            ..LayoutReport::default()
        };
        let t_s = Instant::now();
        let bar = ctl.bar(
            "grouping vectors into pages",
            meta.n.div_ceil(capacity as u64),
        );
        let medoid = meta.medoid;
        let shape = (capacity, hops, medoid);
        let (grouping, placement) = match prev.filter(|p| p.params.capacity == capacity) {
            Some(prev) => {
                let slot_ids = slots.as_ref();
                let id_of = |s: u32| slot_ids.map_or(u64::from(s), |t| t.id(s));
                let kept = |s: u32| prev.ids.get(s as usize) == Some(&id_of(s));
                let (g, r) = regroup_any(&graph, &raw, &meta, capacity, &prev.pages, kept, include);
                (g, Some(r))
            }
            None => (
                group_any(&graph, &raw, &meta, shape, include, || bar.inc(1)),
                None,
            ),
        };
        bar.finish_and_clear();
        ctl.check().map_err(|c| IndexBuildError::Graph(c.into()))?;
        let universe = grouping.pages.len() as u32;
        let most = if params.max_degree > 0 {
            params.max_degree
        } else {
            pages::default_degree_cap(meta.r)
        };
        let room = |m: usize| {
            room_bytes(m, v)
                .map_or(0, |r| entries_that_fit(r, universe))
                .min(most)
        };
        let (lists, edges) = page_edges(&graph, &grouping, room);
        report.shuffle_secs = t_s.elapsed().as_secs_f64();
        drop(graph);
        let pages_meta = PagesMeta {
            dtype: meta.dtype,
            metric: meta.metric,
            dim: meta.dim,
            n: meta.n,
            pages: grouping.pages.len() as u64,
            capacity,
            medoid,
            max_degree: edges.max_degree,
            pq_crc: meta.pq_crc,
            pq_codes_crc: meta.pq_codes_crc,
            placed: grouping.pages.iter().map(|p| p.len() as u64).sum(),
            pq_bytes: meta.pq_bytes,
            graph_r: meta.r,
            hops,
            min_degree,
            degree_cap: params.max_degree,
        };
        let t_w = Instant::now();
        let txn = self.begin_txn()?;
        let bar = ctl.bar("writing page nodes", pages_meta.pages);
        report.file_bytes = pages::write_file(
            &txn.path(pages::FILE_NAME),
            &pages_meta,
            &grouping.pages,
            &lists,
            &grouping.page_of,
            |id| &raw[id as usize * v..(id as usize + 1) * v],
            || bar.inc(1),
        )?;
        bar.finish_and_clear();
        let manifest = crate::kinds::graph::files::with_additions(self.dir(), txn.staging())?;
        txn.commit(&manifest)?;
        report.write_secs = t_w.elapsed().as_secs_f64();
        let pages_n = pages_meta.pages.max(1);
        report.pages = Some(PagesReport {
            capacity,
            pages: pages_meta.pages,
            underfull: grouping.underfull(capacity) as u64,
            fill: pages_meta.placed as f64 / (capacity as u64 * pages_n) as f64,
            hops,
            min_degree,
            mean_degree: edges.page_edges as f64 / pages_n as f64,
            edges,
            placement,
        });
        report.total_secs = t0.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// Capacity, hops and the entries per vector asked when the capacity was chosen, from
/// `params` and the graph's shape.
fn page_shape(
    meta: &crate::kinds::graph::layout::packed::PackedMeta,
    params: &PageParams,
) -> Result<(usize, usize, usize), IndexBuildError> {
    let v = meta.dim * meta.dtype.size_bytes();
    let most = max_capacity(v);
    if most == 0 {
        return Err(bad_param(
            "page capacity",
            format!("a vector of {v} bytes does not fit a page with its id"),
        ));
    }
    let min_degree = if params.min_degree > 0 {
        params.min_degree
    } else {
        meta.r.max(1)
    };
    let capacity = match params.capacity {
        0 => auto_capacity(v, meta.n, min_degree).max(1),
        c if c > most => {
            return Err(bad_param(
                "page capacity",
                format!("{c} vectors of {v} bytes do not fit a page (at most {most})"),
            ))
        }
        c => c,
    };
    let hops = match params.hops {
        0 if meta.r >= 23 => 2,
        0 => 3,
        h if h > 8 => return Err(bad_param("page hops", format!("{h} is more than 8"))),
        h => h,
    };
    Ok((capacity, hops, min_degree))
}

impl DiskIndex {
    /// The graph (out-lists) and every vector's bytes, read from the page-packed file in one
    /// sequential pass.
    fn read_graph(&self, ctl: &Control) -> Result<(Csr, Vec<u8>), IndexBuildError> {
        let meta = *self.layout_source()?.meta();
        let n = meta.n as usize;
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u64);
        let mut targets = Vec::new();
        let mut raw = Vec::with_capacity(n * meta.dim * meta.dtype.size_bytes());
        let bar = ctl.bar("reading the graph", meta.n);
        self.scan_records(ctl, |_, view| {
            targets.extend(view.neighbors());
            offsets.push(targets.len() as u64);
            raw.extend_from_slice(view.vector_bytes());
            bar.inc(1);
            Ok(())
        })?;
        bar.finish_and_clear();
        Ok((Csr { offsets, targets }, raw))
    }
}

/// [`group`] over the vectors' bytes as the index's element type; `shape` is (capacity, hops,
/// first centre).
fn group_any(
    graph: &Csr,
    raw: &[u8],
    meta: &crate::kinds::graph::layout::packed::PackedMeta,
    shape: (usize, usize, u32),
    include: impl Fn(u32) -> bool,
    tick: impl FnMut(),
) -> crate::kinds::graph::layout::pages::build::Grouping {
    let (capacity, hops, start) = shape;
    match meta.dtype {
        DType::F32 => group_typed::<f32>(graph, raw, meta, capacity, hops, start, include, tick),
        DType::U8 => group_typed::<u8>(graph, raw, meta, capacity, hops, start, include, tick),
        DType::I8 => group_typed::<i8>(graph, raw, meta, capacity, hops, start, include, tick),
    }
}

/// [`group`] over the vectors' bytes as `T`.
#[allow(clippy::too_many_arguments)]
fn group_typed<T: Element>(
    graph: &Csr,
    raw: &[u8],
    meta: &crate::kinds::graph::layout::packed::PackedMeta,
    capacity: usize,
    hops: usize,
    start: u32,
    include: impl Fn(u32) -> bool,
    tick: impl FnMut(),
) -> crate::kinds::graph::layout::pages::build::Grouping {
    let typed: Vec<T> = raw
        .chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned::<T>)
        .collect();
    group(
        graph,
        &typed,
        meta.dim,
        meta.metric,
        capacity,
        hops,
        start,
        include,
        tick,
    )
}

/// [`regroup`] over the vectors' bytes as the index's element type.
fn regroup_any(
    graph: &Csr,
    raw: &[u8],
    meta: &crate::kinds::graph::layout::packed::PackedMeta,
    capacity: usize,
    prev: &[Vec<u32>],
    kept: impl Fn(u32) -> bool,
    include: impl Fn(u32) -> bool,
) -> (Grouping, PlaceReport) {
    fn typed<T: Element>(raw: &[u8]) -> Vec<T> {
        raw.chunks_exact(std::mem::size_of::<T>())
            .map(bytemuck::pod_read_unaligned::<T>)
            .collect()
    }
    let (d, m) = (meta.dim, meta.metric);
    macro_rules! typed_regroup {
        ($t:ty) => {
            regroup(
                graph,
                &typed::<$t>(raw),
                d,
                m,
                capacity,
                prev,
                kept,
                include,
            )
        };
    }
    match meta.dtype {
        DType::F32 => typed_regroup!(f32),
        DType::U8 => typed_regroup!(u8),
        DType::I8 => typed_regroup!(i8),
    }
}

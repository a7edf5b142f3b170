//! Building an index of any kind from flat options ([`BuildOptions`], named as Python's
//! `BuildParams` and — with `-` for `_` — `trawl build`'s flags): every default and check in
//! one place, the kind's parameters derived here, and the kind's report with the lines a front
//! end prints ([`Built`]).

use std::path::Path;
use std::time::Instant;

use crate::data::AnyMatrix;
use crate::kernels::Metric;
use crate::kinds::graph::layout::decoupled::vectors::VectorParams;
use crate::kinds::graph::search::entry::{EntryParams, EntrySampling};
use crate::kinds::graph::{self, DiskIndex, IndexParams, KindName, OpenOptions};
use crate::kinds::ivf::IvfParams;
use crate::kinds::Error;
use crate::progress::{human_bytes, Control};
use crate::quant::pq::{PqParams, OPQ_ITERS};
use crate::vamana::{VamanaParams, VisitOrder};

/// PQ bytes per vector when `pq_bytes` is not given (fewer for data of fewer dimensions).
pub const DEFAULT_PQ_BYTES: usize = 32;

/// Every option of building an index, of every kind; a kind reads its own and ignores the
/// others'.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildOptions {
    /// The kind to build.
    pub kind: KindName,
    /// The vectors' attributes for filtered search (graph kind; row `i` is vector `i`).
    pub attrs: Option<std::sync::Arc<crate::filter::Attributes>>,
    /// Distance.
    pub metric: Metric,
    /// Graph: maximum out-degree R.
    pub r: usize,
    /// Graph: build list size L.
    pub l: usize,
    /// Graph: pruning factor α.
    pub alpha: f32,
    /// Graph and IVF: PQ bytes per vector (`None`: 32, or the dimension when smaller).
    pub pq_bytes: Option<usize>,
    /// Seed.
    pub seed: u64,
    /// Graph: memory budget of the build in GiB (a larger build is sharded).
    pub memory_budget_gb: Option<f64>,
    /// Graph: fill neighbour lists up to R after pruning.
    pub saturate: bool,
    /// Graph: the order points are linked in.
    pub visit_order: VisitOrder,
    /// Graph and IVF: optimised PQ.
    pub opq: bool,
    /// Graph: the quantiser searches navigate with — PQ (`pq_bytes`, `opq`) or RaBitQ
    /// (`QuantKind::RaBitQ { bits }`, 1–8 bits per dimension).
    pub quant: crate::quant::QuantKind,
    /// Graph: share of the vectors in the entry index (0: none).
    pub entry_ratio: f64,
    /// Graph: degree of the entry index's graph.
    pub entry_degree: usize,
    /// Graph: build list size of the entry index's graph.
    pub entry_build_list: usize,
    /// Graph: how the entry index picks its nodes.
    pub entry_sampling: EntrySampling,
    /// Graph: also write the decoupled layout.
    pub decoupled: bool,
    /// Graph: also write the page-node layout (PageANN) with its default parameters.
    pub pages: bool,
    /// IVF: target posting-list size.
    pub ivf_list_size: usize,
    /// IVF: boundary replication's ε.
    pub ivf_epsilon: f32,
    /// IVF: most lists per vector.
    pub ivf_max_replicas: usize,
    /// IVF: also write the vectors in id order.
    pub by_id_vectors: bool,
    /// Graph: build the graph label-aware from the attributes' labels (FilteredVamana).
    pub label_aware: crate::kinds::graph::label_starts::LabelAware,
}

impl Default for BuildOptions {
    fn default() -> Self {
        let g = VamanaParams::default();
        let e = EntryParams::default();
        let ivf = IvfParams::default();
        Self {
            kind: KindName::Graph,
            attrs: None,
            metric: Metric::L2,
            r: g.r,
            l: g.l,
            alpha: g.alpha,
            pq_bytes: None,
            seed: g.seed,
            memory_budget_gb: None,
            saturate: g.saturate,
            visit_order: g.order,
            opq: false,
            quant: crate::quant::QuantKind::Pq,
            entry_ratio: e.ratio,
            entry_degree: e.r,
            entry_build_list: e.l,
            entry_sampling: e.sampling,
            decoupled: false,
            pages: false,
            ivf_list_size: ivf.list_size,
            ivf_epsilon: ivf.epsilon,
            ivf_max_replicas: ivf.max_replicas,
            by_id_vectors: false,
            label_aware: Default::default(),
        }
    }
}

fn bad<T>(s: String) -> Result<T, Error> {
    Err(Error::InvalidInput(s))
}

impl BuildOptions {
    /// Checks the options that need no data, naming each.
    pub fn validate(&self) -> Result<(), Error> {
        if self.kind == KindName::Graph {
            self.validate_graph()?;
        }
        if let crate::quant::QuantKind::RaBitQ { bits } = self.quant {
            if !(1..=crate::quant::rabitq::MAX_BITS).contains(&bits) {
                return bad(format!("bits = {bits} must be between 1 and 8"));
            }
            if self.opq {
                return bad("opq: RaBitQ codes take no OPQ rotation (they have their own)".into());
            }
            if let Some(b) = self.pq_bytes {
                return bad(format!(
                    "pq_bytes = {b} sets PQ's code size; a RaBitQ code's is set by its bits per \
                     dimension"
                ));
            }
        }
        if self.pq_bytes == Some(0) {
            return bad("pq_bytes = 0 must be at least 1".into());
        }
        if self.kind == KindName::Ivf {
            if !(self.ivf_epsilon.is_finite() && self.ivf_epsilon >= 0.0) {
                return bad(format!(
                    "ivf_epsilon = {} must be a finite value of at least 0",
                    self.ivf_epsilon
                ));
            }
            if !(1..=64).contains(&self.ivf_max_replicas) {
                return bad(format!(
                    "ivf_max_replicas = {} must be between 1 and 64",
                    self.ivf_max_replicas
                ));
            }
            self.ivf_params(self.pq_bytes.unwrap_or(DEFAULT_PQ_BYTES))?
                .validate(1, self.pq_bytes.unwrap_or(DEFAULT_PQ_BYTES))?;
        }
        Ok(())
    }

    fn validate_graph(&self) -> Result<(), Error> {
        if self.r == 0 || self.r > u16::MAX as usize {
            return bad(format!("R = {} must be between 1 and 65535", self.r));
        }
        if self.l < self.r || self.l > crate::vamana::MAX_BUILD_L {
            return bad(format!(
                "L = {} must be between R ({}) and {}",
                self.l,
                self.r,
                crate::vamana::MAX_BUILD_L
            ));
        }
        if !(self.alpha.is_finite() && self.alpha >= 1.0) {
            return bad(format!("alpha = {} must be a finite value ≥ 1", self.alpha));
        }
        if let Some(g) = self.memory_budget_gb {
            if !(g.is_finite() && g > 0.0 && g * (1u64 << 30) as f64 >= 1.0 && g < 1.0e9) {
                return bad(format!(
                    "memory_budget_gb = {g} must be a positive number of GiB"
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.entry_ratio) {
            return bad(format!(
                "entry_ratio = {} must be between 0 (no entry index) and 1",
                self.entry_ratio
            ));
        }
        if self.entry_ratio > 0.0 {
            if self.entry_degree == 0 || self.entry_degree > u16::MAX as usize {
                return bad(format!(
                    "entry_degree = {} must be between 1 and 65535",
                    self.entry_degree
                ));
            }
            if self.entry_build_list == 0 || self.entry_build_list > crate::vamana::MAX_BUILD_L {
                return bad(format!(
                    "entry_build_list = {} must be between 1 and {}",
                    self.entry_build_list,
                    crate::vamana::MAX_BUILD_L
                ));
            }
        }
        Ok(())
    }

    /// PQ bytes for data of `dim` dimensions.
    pub fn pq_bytes_for(&self, dim: usize) -> Result<usize, Error> {
        match self.pq_bytes {
            Some(b) if b > dim => bad(format!(
                "pq_bytes {b} is more than the dimension ({dim}): PQ codes hold at most one byte \
                 per dimension"
            )),
            Some(b) => Ok(b),
            None => Ok(DEFAULT_PQ_BYTES.min(dim)),
        }
    }

    fn pq(&self, bytes: usize) -> PqParams {
        PqParams {
            bytes_per_vector: bytes,
            seed: self.seed,
            opq_iters: if self.opq { OPQ_ITERS } else { 0 },
            ..PqParams::default()
        }
    }

    /// The graph index parameters for data of `dim` dimensions (also every shard's).
    pub fn graph_params(&self, dim: usize) -> Result<IndexParams, Error> {
        self.validate_graph()?;
        Ok(IndexParams {
            metric: self.metric,
            graph: VamanaParams {
                r: self.r,
                l: self.l,
                alpha: self.alpha,
                seed: self.seed,
                memory_budget_bytes: self
                    .memory_budget_gb
                    .map(|g| (g * (1u64 << 30) as f64) as u64),
                saturate: self.saturate,
                order: self.visit_order,
                ..VamanaParams::default()
            },
            pq: self.pq(self.pq_bytes_for(dim)?),
            quant: self.quant,
            entry: (self.entry_ratio > 0.0).then_some(EntryParams {
                ratio: self.entry_ratio,
                r: self.entry_degree,
                l: self.entry_build_list,
                seed: self.seed,
                sampling: self.entry_sampling,
            }),
            attrs: self.attrs.clone(),
            label_aware: self.label_aware,
        })
    }

    /// The IVF parameters for data of `dim` dimensions.
    pub fn ivf_params(&self, dim: usize) -> Result<IvfParams, Error> {
        Ok(IvfParams {
            metric: self.metric,
            list_size: self.ivf_list_size,
            epsilon: self.ivf_epsilon,
            max_replicas: self.ivf_max_replicas,
            pq: self.pq(self.pq_bytes_for(dim)?),
            quant: self.quant,
            seed: self.seed,
            by_id_file: self.by_id_vectors,
            ..IvfParams::default()
        })
    }
}

/// What a build made: the kind, its report (JSON, with `kind`) and the lines that describe
/// it.
#[derive(Debug, Clone)]
pub struct Built {
    /// The kind built.
    pub kind: KindName,
    /// The kind's build report, with `kind`.
    pub report: serde_json::Value,
    /// What was built, in lines for a person.
    pub summary: Vec<String>,
}

/// Builds the index `o.kind` of `data` in `dir` (its index files replaced in one atomic
/// commit), on rayon's current pool. `sample`: queries whose exact neighbours are linked in
/// the graph (graph kind only).
pub fn build_with(
    data: &AnyMatrix,
    sample: Option<&AnyMatrix>,
    dir: &Path,
    o: &BuildOptions,
    ctl: &Control,
) -> Result<Built, Error> {
    o.validate()?;
    if sample.is_some() && o.kind != KindName::Graph {
        return bad(format!(
            "query_sample: a {} index takes no query sample (only a graph index does)",
            o.kind.label()
        ));
    }
    if let Some(q) = sample {
        if q.dtype() != data.dtype() || q.dim() != data.dim() {
            return bad(format!(
                "query_sample holds {} × {} {} vectors, the data is {} × {} {}: the sample \
                 must have the data's element type and dimension",
                q.n(),
                q.dim(),
                q.dtype(),
                data.n(),
                data.dim(),
                data.dtype()
            ));
        }
        if q.n() == 0 {
            return bad("query_sample holds no vectors".into());
        }
    }
    let t0 = Instant::now();
    let built = match o.kind {
        KindName::Graph => build_graph(data, sample, dir, o, ctl, t0)?,
        KindName::Ivf => build_ivf(data, dir, o, ctl, t0)?,
        KindName::Flat => build_flat(data, dir, o, ctl)?,
        KindName::Sharded => {
            return bad(
                "a sharded index is built by its own call (build_sharded_index, `trawl shard \
                 build`, trawl.build_sharded): it takes the number of shards"
                    .into(),
            )
        }
    };
    Ok(built)
}

fn build_graph(
    data: &AnyMatrix,
    sample: Option<&AnyMatrix>,
    dir: &Path,
    o: &BuildOptions,
    ctl: &Control,
    t0: Instant,
) -> Result<Built, Error> {
    let params = o.graph_params(data.dim())?;
    let mut r = match (data, sample) {
        (AnyMatrix::F32(m), Some(AnyMatrix::F32(q))) => {
            graph::build_index_with_queries(m, q, dir, &params, ctl)
        }
        (AnyMatrix::U8(m), Some(AnyMatrix::U8(q))) => {
            graph::build_index_with_queries(m, q, dir, &params, ctl)
        }
        (AnyMatrix::I8(m), Some(AnyMatrix::I8(q))) => {
            graph::build_index_with_queries(m, q, dir, &params, ctl)
        }
        (AnyMatrix::F32(m), _) => graph::build_index(m, dir, &params, ctl),
        (AnyMatrix::U8(m), _) => graph::build_index(m, dir, &params, ctl),
        (AnyMatrix::I8(m), _) => graph::build_index(m, dir, &params, ctl),
    }?;
    r.total_secs = t0.elapsed().as_secs_f64();
    let mut summary = graph_summary(&r, dir);
    let mut report = serde_json::to_value(&r).unwrap_or_default();
    report["kind"] = "graph".into();
    if o.decoupled {
        let ix = DiskIndex::open(dir, OpenOptions::default())?;
        let d = ix.write_decoupled(&VectorParams::default(), ctl)?;
        summary.extend(decoupled_summary(&d, r.pq_bytes + r.pq_codes_bytes));
        report["decoupled"] = serde_json::to_value(&d).unwrap_or_default();
    }
    if o.pages {
        let ix = DiskIndex::open(dir, OpenOptions::default())?;
        let p = ix.write_pages(&Default::default(), ctl)?;
        if let Some(s) = &p.pages {
            summary.push(format!(
                "page-node layout: pages.trawl {} page nodes of up to {} vectors ({:.1}% full), \
                 mean list {:.0} pages",
                s.pages,
                s.capacity,
                100.0 * s.fill,
                s.mean_degree
            ));
        }
        report["pages"] = serde_json::to_value(&p).unwrap_or_default();
    }
    Ok(Built {
        kind: KindName::Graph,
        report,
        summary,
    })
}

fn graph_summary(r: &graph::IndexBuildReport, dir: &Path) -> Vec<String> {
    let mut out = vec![format!(
        "built disk index over {} × {} {} ({}) in {:.1} s: PQ {:.1} s, graph {:.1} s ({} \
         shard(s), avg degree {:.1}, max {}), layout {:.1} s",
        r.n,
        r.dim,
        r.dtype,
        r.metric,
        r.total_secs,
        r.pq_secs,
        r.graph_secs,
        r.shards,
        r.avg_degree,
        r.max_degree,
        r.layout_secs
    )];
    if let Some(m) = &r.recall {
        out.push(format!(
            "recall monitor: {} ({} of its vectors searched as held-out queries, {:.1} s)",
            m.describe_points(),
            m.samples,
            r.monitor_secs
        ));
    }
    let c = &r.connectivity;
    out.push(format!(
        "graph: {} of {} nodes reachable from the medoid{}; in-degree median {}, max {}",
        c.nodes - c.unreachable,
        c.nodes,
        if r.relinked > 0 {
            format!(
                " ({} edges added to link back the nodes the build left unreachable)",
                r.relinked
            )
        } else {
            String::new()
        },
        c.in_degree[2],
        c.in_degree[4]
    ));
    if r.label_starts > 0 {
        out.push(format!(
            "label-aware graph: {} labels with a start node, {} label searches",
            r.label_starts, r.label_searches
        ));
    }
    if r.query_sample > 0 {
        out.push(format!(
            "query sample: the nearest points of {} queries linked to one another ({} edges)",
            r.query_sample, r.query_edges
        ));
    }
    out.push(format!(
        "on disk in {}: packed.trawl {} ({} records per page), pq.trawl {}, pq-codes.trawl {} \
         ({} B per vector), entry.trawl {} ({} nodes, {:.1} s), hot.trawl {} ({:.1} s), \
         manifest.trawl {}; total {}",
        dir.display(),
        human_bytes(r.packed_bytes),
        r.records_per_page,
        human_bytes(r.pq_bytes),
        human_bytes(r.pq_codes_bytes),
        r.pq_bytes_per_vector,
        human_bytes(r.entry_bytes),
        r.entry_nodes,
        r.entry_secs,
        human_bytes(r.hot_bytes),
        r.hot_secs,
        human_bytes(r.manifest_bytes),
        human_bytes(r.disk_bytes)
    ));
    out
}

fn decoupled_summary(r: &graph::LayoutReport, pq: u64) -> Vec<String> {
    let Some(d) = &r.decoupled else {
        return Vec::new();
    };
    vec![format!(
        "decoupled layout: graph.trawl {} ({:.3}× the lists' {}), vectors.trawl {} ({:.3}× \
         the vectors' {}), together {:.3}× packed.trawl; with the PQ files {} ({:.3}× the \
         packed layout's {}); metadata in memory {}; {:.1} s",
        human_bytes(d.graph_bytes),
        d.graph_bytes as f64 / d.lists_raw_bytes.max(1) as f64,
        human_bytes(d.lists_raw_bytes),
        human_bytes(d.vectors_bytes),
        d.vectors_bytes as f64 / d.vectors_raw_bytes.max(1) as f64,
        human_bytes(d.vectors_raw_bytes),
        r.file_bytes as f64 / r.packed_bytes.max(1) as f64,
        human_bytes(r.file_bytes + pq),
        (r.file_bytes + pq) as f64 / (r.packed_bytes + pq).max(1) as f64,
        human_bytes(r.packed_bytes + pq),
        human_bytes(d.vectors_metadata_bytes + 4 * d.graph_pages),
        r.total_secs
    )]
}

fn build_ivf(
    data: &AnyMatrix,
    dir: &Path,
    o: &BuildOptions,
    ctl: &Control,
    t0: Instant,
) -> Result<Built, Error> {
    let p = o.ivf_params(data.dim())?;
    let a = o.attrs.as_deref();
    let mut r = match data {
        AnyMatrix::F32(m) => crate::kinds::ivf::build_ivf_with_attrs(m, dir, &p, a, ctl),
        AnyMatrix::U8(m) => crate::kinds::ivf::build_ivf_with_attrs(m, dir, &p, a, ctl),
        AnyMatrix::I8(m) => crate::kinds::ivf::build_ivf_with_attrs(m, dir, &p, a, ctl),
    }?;
    r.total_secs = t0.elapsed().as_secs_f64();
    let summary = vec![
        format!(
            "built IVF index over {} × {} {} ({}) in {:.1} s: clustering {:.1} s, centroid \
             graph {:.1} s, assignment {:.1} s, PQ {:.1} s, vectors {:.1} s",
            r.n,
            r.dim,
            r.dtype,
            r.metric,
            r.total_secs,
            r.cluster_secs,
            r.graph_secs,
            r.assign_secs,
            r.pq_secs,
            r.vectors_secs
        ),
        format!(
            "{} lists ({:.1}% of n, mean {:.1} ids, longest {}), replication {:.2} ({} vectors \
             in more than one list), {} vectors per page, {} pages {:.1}% full",
            r.nlist,
            100.0 * r.list_ratio,
            r.mean_list,
            r.max_list,
            r.replication,
            r.replicated_vectors,
            r.vectors_per_page,
            r.vector_pages,
            100.0 * r.page_fill
        ),
        format!(
            "on disk in {}: ivf.trawl {}, ivf-vectors.trawl {}{}, pq.trawl {}, pq-codes.trawl \
             {} ({} B per vector), manifest.trawl {}; total {}",
            dir.display(),
            human_bytes(r.ivf_bytes),
            human_bytes(r.vectors_bytes),
            if r.vectors_by_id_bytes > 0 {
                format!(
                    ", ivf-vectors-by-id.trawl {}",
                    human_bytes(r.vectors_by_id_bytes)
                )
            } else {
                String::new()
            },
            human_bytes(r.pq_bytes),
            human_bytes(r.pq_codes_bytes),
            r.pq_bytes_per_vector,
            human_bytes(r.manifest_bytes),
            human_bytes(r.disk_bytes)
        ),
    ];
    let mut report = serde_json::to_value(&r).unwrap_or_default();
    report["kind"] = "ivf".into();
    Ok(Built {
        kind: KindName::Ivf,
        report,
        summary,
    })
}

fn build_flat(
    data: &AnyMatrix,
    dir: &Path,
    o: &BuildOptions,
    ctl: &Control,
) -> Result<Built, Error> {
    use crate::kinds::flat::build_flat_with_attrs;
    let attrs = o.attrs.as_deref();
    let r = match data {
        AnyMatrix::F32(m) => build_flat_with_attrs(m, dir, o.metric, attrs, ctl),
        AnyMatrix::U8(m) => build_flat_with_attrs(m, dir, o.metric, attrs, ctl),
        AnyMatrix::I8(m) => build_flat_with_attrs(m, dir, o.metric, attrs, ctl),
    }?;
    let summary = vec![format!(
        "built flat index over {} × {} ({}) in {:.1} s: {} in {} ({} vectors per page), \
         manifest.trawl {}; total {}",
        r.n,
        r.dim,
        r.metric,
        r.total_secs,
        crate::kinds::flat::FILE_NAME,
        human_bytes(r.vectors_bytes),
        r.vectors_per_page,
        human_bytes(r.manifest_bytes),
        human_bytes(r.disk_bytes)
    )];
    let mut report = serde_json::to_value(&r).unwrap_or_default();
    report["kind"] = "flat".into();
    Ok(Built {
        kind: KindName::Flat,
        report,
        summary,
    })
}

//! `trawl build`: a disk index from a vector file.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use trawl::kinds::graph::label_starts::LabelAware;
use trawl::kinds::graph::search::entry::{EntryParams, EntrySampling};
use trawl::kinds::graph::{IndexParams, KindName};
use trawl::kinds::{build_with, BuildOptions};
use trawl::progress::Control;
use trawl::vamana::{VamanaParams, VisitOrder};
use trawl::Metric;

use crate::runtime::write_json;
use crate::runtime::{human_bytes, peak_rss_bytes, with_threads};

pub use trawl::kinds::build::DEFAULT_PQ_BYTES;

/// Arguments of `trawl build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Vector file (.fbin/.u8bin/.i8bin, .fvecs/.bvecs, .npy).
    pub data: PathBuf,
    /// Index directory to create (files inside are replaced).
    pub index_dir: PathBuf,
    /// Distance: l2, ip or cosine.
    #[arg(long, value_parser = crate::parse_metric)]
    pub metric: Metric,
    /// Maximum out-degree R.
    #[arg(short = 'R', long = "max-degree", default_value_t = VamanaParams::default().r)]
    pub r: usize,
    /// Build search list size L.
    #[arg(short = 'L', long = "list-size", default_value_t = VamanaParams::default().l)]
    pub l: usize,
    /// Pruning factor α (≥ 1).
    #[arg(long, default_value_t = VamanaParams::default().alpha)]
    pub alpha: f32,
    /// PQ bytes per vector kept in memory at search time (≤ dimension; default 32, or the
    /// dimension when it is smaller).
    #[arg(long)]
    pub pq_bytes: Option<usize>,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Memory budget of the graph build in GiB; a build whose estimate passes 31/32 of it (the
    /// rest is kept for the process around it) is sharded. With a budget, a
    /// .fbin/.u8bin/.i8bin/.npy input is memory-mapped rather than read into memory, and each
    /// pass drops the pages behind it: the file must not change while the build runs.
    #[arg(long)]
    pub memory_budget_gb: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = VamanaParams::default().seed)]
    pub seed: u64,
    /// The order the graph build links its points in: `blocks:N` (blocks of N consecutive
    /// ids in a seeded random order, the default), `random`, or `ids` (DiskANN's, fastest
    /// and worst when the ids are grouped by region, e.g. rows appended cluster by cluster).
    #[arg(long, default_value_t = VamanaParams::default().order.to_string())]
    pub visit_order: String,
    /// A sample of the queries the index will serve (a vector file of the data's element type
    /// and dimension, e.g. from a query log): the exact 10 nearest points of each are linked to
    /// one another in the graph (query-aware edges), for queries that lie away from the data,
    /// whose neighbours sit in regions the graph does not otherwise connect. Not stored. Such
    /// queries also need finer codes to choose between nearly tied candidates: with
    /// `--pq-bytes 64` as well, recall@10 at L 64 on gen-1M live sets of whole clusters rose from
    /// 0.935–0.957 to 0.991–0.997 (`bench/results/recall-stability.md`).
    #[arg(long)]
    pub query_sample: Option<PathBuf>,
    /// Fill neighbour lists up to R after pruning with the nearest candidates the prune left
    /// out (DiskANN's disk build does; off by default: measured on GloVe-400K, the pruned graph
    /// reads as many pages per query at equal recall and computes fewer PQ distances).
    #[arg(long)]
    pub saturate: bool,
    /// Optimised PQ: learn an orthogonal rotation of the vectors together with the PQ
    /// codebooks (8 alternations on at most 64 Ki vectors), for a lower quantisation error and
    /// better-ranked neighbours at the same code size; costs dim² multiply-adds per query.
    #[arg(long)]
    pub opq: bool,
    /// The codes searches navigate with: `pq` (product quantisation, `--pq-bytes` per vector,
    /// `--opq` optional) or `rabitq` (Extended RaBitQ, `--bits` per dimension after a random
    /// rotation, plus 8–16 bytes of factors: an unbiased distance estimate with an error bound,
    /// which also lets a re-rank skip vectors that cannot enter the results). Graph and IVF kinds.
    #[arg(long, default_value = "pq", value_parser = ["pq", "rabitq"])]
    pub quant: String,
    /// RaBitQ bits per dimension, 1–8 (with `--quant rabitq`; default 4). A code takes
    /// `bits × dim / 8` bytes (the dimension rounded up to a multiple of 64) plus 8 (L2 and
    /// cosine up to 4 bits; 12 for inner product, 4 more above 4 bits).
    #[arg(long)]
    pub bits: Option<u8>,
    /// Share of the vectors sampled into the in-memory entry index (0 = no entry index).
    #[arg(long, default_value_t = EntryParams::default().ratio)]
    pub entry_ratio: f64,
    /// Maximum degree of the entry index's sample graph.
    #[arg(long, default_value_t = EntryParams::default().r)]
    pub entry_degree: usize,
    /// Build list size of the entry index's sample graph.
    #[arg(long, default_value_t = EntryParams::default().l)]
    pub entry_build_list: usize,
    /// How the entry index picks its nodes: uniform (a seeded random sample) or freq (the
    /// nodes most read by sample searches of the built index, OctopusANN's visit frequency).
    #[arg(long, default_value = "uniform", value_parser = |s: &str| s.parse::<EntrySampling>())]
    pub entry_sampling: EntrySampling,
    /// Also write the decoupled layout (graph.trawl + vectors.trawl, DecoupleVS) and report
    /// its bytes per component against packed.trawl.
    #[arg(long)]
    pub decoupled: bool,
    /// Also write the page-node layout (pages.trawl, PageANN) with its default parameters
    /// (`trawl layout --pages` sets them).
    #[arg(long)]
    pub pages: bool,
    /// Write the build report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Index kind: graph (Vamana graph on disk, PQ in memory), ivf (FusionANNS: posting
    /// lists over a centroid graph, PQ on an accelerator, bucketed vectors on disk) or flat
    /// (exact search over the vectors on disk).
    #[arg(long, default_value = "graph", value_parser = |s: &str| s.parse::<KindName>())]
    pub kind: KindName,
    /// Labels of the vectors for filtered search, DiskANN's format: one line per vector,
    /// its labels separated by commas (an empty line: none). A label `key=value` is read by
    /// filters as `key = "value"`, a plain label as `label = "…"`.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Attributes of the vectors for filtered search, JSON lines: one object per vector; a
    /// number is a numeric field (`year >= 2024`), a string or list of strings labels
    /// `key=value` (`lang = "en"`), null or a missing key no value. Or a numpy column,
    /// `NAME=PATH.npy` (or `PATH.npy`, named by its file name), one value per vector:
    /// integers an int64 field, floats a float64 one, booleans the labels `NAME=true|false`.
    /// Repeatable.
    #[arg(long)]
    pub attrs: Vec<PathBuf>,
    /// Build the graph label-aware from the labels (FilteredVamana: a start node per label,
    /// each vector also linked through searches among the vectors sharing a label, a prune
    /// that keeps a path for every label), so that a filtered search for a rare label reaches
    /// its matches: `on`, `off`, or `auto` (on unless --memory-budget-gb is given). Labels on
    /// more than 10% of the vectors are left to the plain graph; each vector searches at most
    /// 4 of its labels, the rarest.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<LabelAware>())]
    pub label_aware: LabelAware,
    #[command(flatten)]
    pub ivf: super::ivf::IvfBuildArgs,
}

/// The attributes `--labels` and `--attrs` give for `n` vectors (`None`: neither given).
pub(crate) fn read_attributes(
    labels: Option<&std::path::Path>,
    attrs: &[PathBuf],
    n: usize,
) -> Result<Option<std::sync::Arc<trawl::filter::Attributes>>> {
    if labels.is_none() && attrs.is_empty() {
        return Ok(None);
    }
    let mut b = trawl::filter::AttrsBuilder::new(n)?;
    if let Some(p) = labels {
        trawl::filter::input::read_label_file(p, n, &mut b)?;
    }
    for p in attrs {
        let text = p.to_string_lossy();
        if text.ends_with(".npy") {
            let (name, path) = match text.split_once('=') {
                Some((name, path)) => (name.to_string(), PathBuf::from(path)),
                None => (
                    p.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    p.clone(),
                ),
            };
            trawl::filter::input::read_npy_column(&path, &name, n, &mut b)?;
        } else {
            trawl::filter::input::read_attrs_jsonl(p, n, &mut b)?;
        }
    }
    Ok(Some(std::sync::Arc::new(b.finish()?)))
}

impl BuildArgs {
    /// The library's build options these flags give (checked by the library, each named).
    pub fn options(&self) -> Result<BuildOptions> {
        let visit_order = self
            .visit_order
            .parse::<VisitOrder>()
            .map_err(|e| anyhow::anyhow!("--visit-order {}: {e}", self.visit_order))?;
        let iv = &self.ivf;
        let o = BuildOptions {
            kind: self.kind,
            attrs: None,
            metric: self.metric,
            r: self.r,
            l: self.l,
            alpha: self.alpha,
            pq_bytes: self.pq_bytes,
            seed: self.seed,
            memory_budget_gb: self.memory_budget_gb,
            saturate: self.saturate,
            visit_order,
            opq: self.opq,
            quant: match (self.quant.as_str(), self.bits) {
                ("rabitq", bits) => trawl::quant::QuantKind::RaBitQ {
                    bits: bits.unwrap_or(4),
                },
                (_, Some(_)) => anyhow::bail!("--bits sets RaBitQ codes: add --quant rabitq"),
                _ => trawl::quant::QuantKind::Pq,
            },
            entry_ratio: self.entry_ratio,
            entry_degree: self.entry_degree,
            entry_build_list: self.entry_build_list,
            entry_sampling: self.entry_sampling,
            decoupled: self.decoupled,
            pages: self.pages,
            ivf_list_size: iv.ivf_list_size,
            ivf_epsilon: iv.ivf_epsilon,
            ivf_max_replicas: iv.ivf_max_replicas,
            by_id_vectors: iv.by_id_vectors,
            label_aware: self.label_aware,
        };
        o.validate().map_err(build_flag_names)?;
        Ok(o)
    }
}

/// A library error about a build option, with the option named as its flag.
pub(crate) fn build_flag_names(e: trawl::kinds::Error) -> anyhow::Error {
    use clap::Args as _;
    super::rename_options(e, BuildArgs::augment_args(clap::Command::new("build")))
}

/// `trawl build`: an index of the kind asked for.
pub fn build(args: &BuildArgs, ctl: &Control) -> Result<trawl::kinds::Built> {
    let mut o = args.options()?;
    let data = if args.memory_budget_gb.is_some() && o.kind == trawl::kinds::graph::KindName::Graph
    {
        crate::runtime::map_vectors(&args.data)?
    } else {
        crate::runtime::read_vectors(&args.data)?
    };
    let sample = match &args.query_sample {
        Some(path) => Some(crate::runtime::read_vectors(path)?),
        None => None,
    };
    // Read and checked before anything is written.
    o.attrs = read_attributes(args.labels.as_deref(), &args.attrs, data.n())?;
    let dir = &args.index_dir;
    let (built, threads) = with_threads(args.threads, || -> Result<_> {
        let b = build_with(&data, sample.as_ref(), dir, &o, ctl).map_err(build_flag_names)?;
        Ok((b, rayon::current_num_threads()))
    })??;
    let rss = peak_rss_bytes();
    for line in &built.summary {
        println!("{line}");
    }
    println!("{threads} thread(s), peak RSS {}", human_bytes(rss));
    if let Some(path) = &args.report {
        let mut v = built.report.clone();
        v["peak_rss_bytes"] = rss.into();
        v["threads"] = threads.into();
        write_json(path, &v)?;
    }
    Ok(built)
}

/// The graph index parameters of `trawl build`'s flags for data of dimension `dim` (every
/// shard's in `trawl shard build`).
pub fn index_params(args: &BuildArgs, dim: usize) -> Result<IndexParams> {
    args.options()?.graph_params(dim).map_err(build_flag_names)
}

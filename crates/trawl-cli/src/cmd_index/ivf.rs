//! The IVF index kind's flags of `trawl build` and `trawl search | bench`.

use clap::Args;
use trawl::accel::AccelKind;
use trawl::kinds::ivf::{IvfSearchParams, IvfVectorLayout};

/// `trawl build --kind ivf` options.
#[derive(Debug, Args, Clone)]
pub struct IvfBuildArgs {
    /// IVF: target posting-list size before replication (lists ≈ n / size).
    #[arg(long, default_value_t = trawl::kinds::ivf::DEFAULT_LIST_SIZE)]
    pub ivf_list_size: usize,
    /// IVF: boundary replication's ε — a vector joins list i when dist(v, c_i) ≤ (1 + ε) ·
    /// dist(v, c_1).
    #[arg(long, default_value_t = trawl::kinds::ivf::DEFAULT_EPSILON)]
    pub ivf_epsilon: f32,
    /// IVF: most lists a vector joins.
    #[arg(long, default_value_t = trawl::kinds::ivf::DEFAULT_MAX_REPLICAS)]
    pub ivf_max_replicas: usize,
    /// IVF: also write the vectors in id order (ivf-vectors-by-id.trawl), the bucket
    /// layout's ablation baseline (`--ivf-vectors by_id`).
    #[arg(long)]
    pub by_id_vectors: bool,
}

impl Default for IvfBuildArgs {
    fn default() -> Self {
        Self {
            ivf_list_size: trawl::kinds::ivf::DEFAULT_LIST_SIZE,
            ivf_epsilon: trawl::kinds::ivf::DEFAULT_EPSILON,
            ivf_max_replicas: trawl::kinds::ivf::DEFAULT_MAX_REPLICAS,
            by_id_vectors: false,
        }
    }
}

/// `trawl search/bench` options of the IVF kind (`-L` is the number of lists probed).
#[derive(Debug, Args, Clone)]
pub struct IvfSearchArgs {
    /// IVF: candidates the filter stage keeps for the re-rank (n); 0 = max(10·k, 4·nprobe).
    #[arg(long, default_value_t = 0)]
    pub rerank_n: usize,
    /// IVF: re-rank mini-batch size.
    #[arg(long, default_value_t = IvfSearchParams::default().batch)]
    pub ivf_batch: usize,
    /// IVF: the early stop's change-rate threshold ε (0 re-ranks all n).
    #[arg(long, default_value_t = IvfSearchParams::default().epsilon)]
    pub ivf_epsilon: f32,
    /// IVF: batches in a row below ε that stop the re-rank (β).
    #[arg(long, default_value_t = IvfSearchParams::default().beta)]
    pub ivf_beta: usize,
    /// IVF: re-rank all n (no early stop).
    #[arg(long)]
    pub no_heuristic: bool,
    /// IVF: one read per vector, even for vectors on one page (no intra-batch merging).
    #[arg(long)]
    pub no_page_merge: bool,
    /// IVF: no page buffer across mini-batches (a page may be read again).
    #[arg(long)]
    pub no_page_buffer: bool,
    /// IVF: re-rank only the candidates, not the other vectors on the pages read for them
    /// (page-mate scoring off).
    #[arg(long)]
    pub no_page_mates: bool,
    /// IVF: list size of the centroid-graph search (0 = max(2·nprobe, 32)).
    #[arg(long, default_value_t = 0)]
    pub centroid_list: usize,
    /// The accelerator of an IVF index's filter stage and of the flash strategy's steps: cpu,
    /// gpu (wgpu; an error without an adapter) or auto (the GPU when one is found).
    #[arg(long, default_value = "cpu", value_parser = |s: &str| s.parse::<AccelKind>())]
    pub accel: AccelKind,
    /// IVF: queries per accelerator job (0 = 1 on the CPU, 32 on a GPU).
    #[arg(long, default_value_t = 0)]
    pub accel_batch: usize,
    /// IVF with RaBitQ codes on the CPU: copy the codes into FastScan blocks by posting list
    /// (memory × the replication factor) and score the probed lists' blocks instead of the
    /// gathered ids' codes one by one after the dedup (the default, measured faster with
    /// AVX-512 VPOPCNTQ: bench/results/rabitq.md). The results are the same.
    #[arg(long)]
    pub fastscan: bool,
    /// IVF: vector file the re-rank reads: bucket (by nearest centroid) or by_id.
    #[arg(long, default_value = "bucket", value_parser = |s: &str| s.parse::<IvfVectorLayout>())]
    pub ivf_vectors: IvfVectorLayout,
}

impl Default for IvfSearchArgs {
    fn default() -> Self {
        let p = IvfSearchParams::default();
        Self {
            rerank_n: 0,
            ivf_batch: p.batch,
            ivf_epsilon: p.epsilon,
            ivf_beta: p.beta,
            no_heuristic: false,
            no_page_merge: false,
            no_page_buffer: false,
            no_page_mates: false,
            centroid_list: 0,
            accel: AccelKind::Cpu,
            accel_batch: 0,
            fastscan: false,
            ivf_vectors: IvfVectorLayout::Bucket,
        }
    }
}

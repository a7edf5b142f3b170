//! `trawl bench`: sweep list sizes over a disk index.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use trawl::data::matrix::AnyMatrix;
use trawl::data::GroundTruth;
use trawl::progress::Control;

use crate::runtime::peak_rss_bytes;
use crate::runtime::write_json;

use super::*;

/// Arguments of `trawl bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Index directory.
    pub index_dir: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Ground truth (DiskANN/big-ann .bin or .ivecs).
    #[arg(long)]
    pub gt: PathBuf,
    /// Neighbours per query.
    #[arg(short = 'k', default_value_t = 10)]
    pub k: usize,
    /// Comma-separated list sizes to sweep (IVF index: numbers of lists probed).
    #[arg(
        short = 'L',
        long = "list-sizes",
        default_value = "10,20,40,80",
        value_delimiter = ','
    )]
    pub l: Vec<usize>,
    /// Write the sweep as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the sweep as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Search only the first N queries (and the ground truth's first N rows).
    #[arg(long)]
    pub max_queries: Option<usize>,
    /// Each list size of the sweep searches queries of its own: the i-th takes the i-th
    /// block of --max-queries queries of the file (with their ground truth), so that a cache
    /// filled as searches run (the decoupled layout's LRU list cache) never serves a query
    /// from what the same query read at an earlier list size. Needs --max-queries × (list
    /// sizes) queries.
    #[arg(long, requires = "max_queries")]
    pub fresh_queries: bool,
    /// Run OctopusANN's ablation instead of one configuration: Baseline (beam search, width
    /// -W), Cache, MemGraph, PageShuffle, PageSearch, DynamicWidth, Pipeline, C1–C5 and
    /// All-in-Storage, each a sweep of -L; writes ablation.{csv,md,json} into --ablation-out.
    /// Missing layouts are written first (`trawl layout`).
    #[arg(long)]
    pub ablation: bool,
    /// Directory of the ablation's outputs.
    #[arg(long, default_value = "ablation-out")]
    pub ablation_out: PathBuf,
    /// Ablation configurations to run, comma-separated (default: all, in the paper's order).
    #[arg(long, value_delimiter = ',')]
    pub ablation_configs: Vec<String>,
    /// Ablation: list size of the MemGraph (entry index) search.
    #[arg(long, default_value_t = 10)]
    pub memgraph_list: usize,
    /// Ablation: largest width of DynamicWidth and of PipeSearch's dynamic policy.
    #[arg(long, default_value_t = 32)]
    pub dw_max_width: usize,
    /// Ablation: cached nodes of the Cache configuration (default: 0.1% of the nodes).
    #[arg(long)]
    pub ablation_cache_nodes: Option<usize>,
    /// Range search: every vector within this radius (trawl's distance: squared L2, negated
    /// inner product, 1 − cos) instead of the k nearest; --gt is then a range ground truth
    /// (`trawl gt --radius`), and the rows report mean per-query recall, overall recall,
    /// results per query (precision is checked to be 1).
    #[arg(long, allow_negative_numbers = true, conflicts_with_all = ["ablation", "fresh_queries"])]
    pub radius: Option<f32>,
    /// Range search: also run the growing-k baseline (top-k with k doubled from -k, and the
    /// list size with it from -L, until the k-th distance is beyond the radius) right after
    /// trawl's range search at each list size.
    #[arg(long, requires = "radius")]
    pub range_baseline: bool,
    #[command(flatten)]
    pub opts: SearchOptions,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

/// One row of a bench sweep.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    #[serde(rename = "L")]
    pub l: usize,
    pub recall: f64,
    pub qps: f64,
    pub latency_us: Latency,
    pub pages_per_query: f64,
    pub ios_per_query: f64,
    pub bytes_per_query: f64,
    pub hops_per_query: f64,
    pub nodes_expanded_per_query: f64,
    pub cache_hits_per_query: f64,
    pub pq_distances_per_query: f64,
    pub exact_distances_per_query: f64,
    pub io_wait_us_per_query: f64,
    pub compute_us_per_query: f64,
    /// CPU time of the whole process during the batch (all threads, user space), per query.
    pub cpu_user_us_per_query: f64,
    /// CPU time of the whole process during the batch (all threads, kernel: system calls and
    /// the interrupts it was charged), per query.
    pub cpu_sys_us_per_query: f64,
    /// `--time-parts`: CPU per query by part (zero otherwise); see `trawl::search::PartStats`.
    pub io_call_us_per_query: f64,
    pub poll_us_per_query: f64,
    pub checksum_us_per_query: f64,
    pub pq_table_us_per_query: f64,
    pub visited_us_per_query: f64,
    pub pq_score_us_per_query: f64,
    pub exact_us_per_query: f64,
    pub entry_us_per_query: f64,
    /// Mean reads in flight / width while reads were in flight.
    pub occupancy: f64,
    /// Flash search: steps (records expanded) per query.
    pub steps_per_query: f64,
    /// Flash search: steps a strict best-first search would not have taken then.
    pub stale_steps_per_query: f64,
    /// Flash search: times its thread blocked while the query's next record was missing.
    pub waits_per_query: f64,
    /// Flash search: mean read latency as the pipeline saw it, µs.
    pub read_us: f64,
    /// Reads none of whose records were explored.
    pub wasted_reads_per_query: f64,
    /// Records on the pages read.
    pub records_read_per_query: f64,
    /// Nodes expanded from pages already read (PageSearch).
    pub page_hits_per_query: f64,
    /// I/O utilisation: nodes expanded from read pages / records on those pages.
    pub io_utilisation: f64,
    /// Decoupled layout: vector-file reads (the rest of `ios_per_query` are graph reads).
    pub vector_reads_per_query: f64,
    /// Decoupled layout: vector reads issued during the traversal (prefetch).
    pub prefetched_per_query: f64,
    /// Decoupled layout: re-rank batches.
    pub rerank_batches_per_query: f64,
    /// Decoupled layout: vectors taken from a vector page the query had read already.
    pub page_reuses_per_query: f64,
    /// Decoupled layout: vectors that joined a read of their page in flight.
    pub page_joins_per_query: f64,
    /// Decoupled layout: re-rank round trips after the traversal.
    pub rerank_rounds_per_query: f64,
    /// Decoupled layout: expanded nodes ordered by the refinement codes.
    pub refined_per_query: f64,
    /// Decoupled layout with RaBitQ codes: re-rank candidates skipped by their lower bound.
    pub rerank_skipped_per_query: f64,
    /// Decoupled layout: microseconds computing refinement-code distances.
    pub refine_us_per_query: f64,
    /// Decoupled layout: microseconds decoding neighbour lists.
    pub list_decode_us_per_query: f64,
    /// Decoupled layout: microseconds decoding vectors.
    pub vector_decode_us_per_query: f64,
    /// IVF: posting lists probed.
    pub lists_probed_per_query: f64,
    /// IVF: candidate ids gathered (duplicates included).
    pub candidates_per_query: f64,
    /// IVF: distinct candidates (after deduplication).
    pub candidates_unique_per_query: f64,
    /// IVF: reads saved by intra-batch page merging.
    pub pages_merged_per_query: f64,
    /// IVF: reads saved by the page buffer.
    pub pages_buffered_per_query: f64,
    /// IVF: vectors re-ranked as page mates of a candidate (no read of their own).
    pub page_mates_per_query: f64,
    /// IVF: the re-rank budget n (0 for graph indexes).
    pub rerank_n: usize,
}

impl BenchRow {
    /// The row of one batch search at sweep point `l`: recall@k against `gt`, QPS, latency
    /// percentiles and the per-query counters.
    pub fn of_batch(l: usize, out: &trawl::kinds::Hits, gt: &GroundTruth, k: usize) -> Self {
        let nq_rows = out.stats.len();
        let nq = nq_rows.max(1) as f64;
        let truth = GroundTruth {
            nq: nq_rows,
            k: gt.k,
            ids: gt.ids[..nq_rows * gt.k].to_vec(),
            dists: Vec::new(),
        };
        // (An id past 32 bits matches no ground truth.)
        let ids: Vec<u32> = out
            .ids
            .iter()
            .map(|&i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        let recall = trawl::vamana::recall_at_k(&ids, k, &truth).unwrap_or(0.0);
        let mut lat: Vec<f64> = out.stats.iter().map(|s| s.total_ns as f64 / 1e3).collect();
        lat.sort_by(f64::total_cmp);
        let mut row = BenchRow::from_stats(l, recall, nq, out.wall_secs, &out.total());
        row.latency_us = Latency {
            mean: lat.iter().sum::<f64>() / nq,
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            p999: percentile(&lat, 0.999),
        };
        row
    }

    /// A row from the summed statistics of `nq` queries run in `wall_secs` (latencies left
    /// at zero for the caller).
    pub fn from_stats(
        l: usize,
        recall: f64,
        nq: f64,
        wall_secs: f64,
        t: &trawl::search::QueryStats,
    ) -> Self {
        let per = |x: u64| x as f64 / nq;
        BenchRow {
            l,
            recall,
            qps: nq / wall_secs,
            latency_us: Latency {
                mean: 0.0,
                p50: 0.0,
                p99: 0.0,
                p999: 0.0,
            },
            pages_per_query: per(t.io.pages_read),
            ios_per_query: per(t.io.io_requests),
            bytes_per_query: per(t.io.bytes_read),
            hops_per_query: per(t.traversal.hops),
            nodes_expanded_per_query: per(t.traversal.nodes_expanded),
            cache_hits_per_query: per(t.traversal.cache_hits),
            pq_distances_per_query: per(t.traversal.pq_distances),
            exact_distances_per_query: per(t.traversal.exact_distances),
            io_wait_us_per_query: t.io.io_wait_ns as f64 / 1e3 / nq,
            compute_us_per_query: t.compute_ns() as f64 / 1e3 / nq,
            cpu_user_us_per_query: 0.0,
            cpu_sys_us_per_query: 0.0,
            io_call_us_per_query: t.parts.io_call_ns as f64 / 1e3 / nq,
            poll_us_per_query: t.parts.poll_ns as f64 / 1e3 / nq,
            checksum_us_per_query: t.parts.checksum_ns as f64 / 1e3 / nq,
            pq_table_us_per_query: t.parts.pq_table_ns as f64 / 1e3 / nq,
            visited_us_per_query: t.parts.visited_ns as f64 / 1e3 / nq,
            pq_score_us_per_query: t.parts.pq_score_ns as f64 / 1e3 / nq,
            exact_us_per_query: t.parts.exact_ns as f64 / 1e3 / nq,
            entry_us_per_query: t.parts.entry_ns as f64 / 1e3 / nq,
            occupancy: t.occupancy(),
            steps_per_query: per(t.flash.steps),
            stale_steps_per_query: per(t.flash.stale_steps),
            waits_per_query: per(t.flash.waits),
            read_us: if t.flash.steps > 0 {
                t.flash.read_ns as f64 / 1e3 / t.io.io_requests.max(1) as f64
            } else {
                0.0
            },
            wasted_reads_per_query: per(t.io.wasted_reads),
            records_read_per_query: per(t.io.records_read),
            page_hits_per_query: per(t.traversal.page_hits),
            io_utilisation: t.io_utilisation(),
            vector_reads_per_query: per(t.rerank.vector_reads),
            prefetched_per_query: per(t.rerank.prefetched),
            rerank_batches_per_query: per(t.rerank.rerank_batches),
            page_reuses_per_query: per(t.rerank.page_reuses),
            page_joins_per_query: per(t.rerank.page_joins),
            rerank_rounds_per_query: per(t.rerank.rounds),
            refined_per_query: per(t.rerank.refined),
            rerank_skipped_per_query: per(t.rerank.rerank_skipped),
            refine_us_per_query: t.rerank.refine_ns as f64 / 1e3 / nq,
            list_decode_us_per_query: t.traversal.list_decode_ns as f64 / 1e3 / nq,
            vector_decode_us_per_query: t.rerank.vector_decode_ns as f64 / 1e3 / nq,
            lists_probed_per_query: per(t.ivf.lists_probed),
            candidates_per_query: per(t.ivf.candidates),
            candidates_unique_per_query: per(t.ivf.candidates_unique),
            pages_merged_per_query: per(t.ivf.pages_merged),
            pages_buffered_per_query: per(t.ivf.pages_buffered),
            page_mates_per_query: per(t.ivf.page_mates),
            rerank_n: 0,
        }
    }
}

/// CPU seconds (user, system) of this process so far.
pub(crate) fn process_cpu() -> (f64, f64) {
    // SAFETY: `rusage` is plain integers, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one `rusage` through the valid, exclusive pointer passed.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

impl BenchRow {
    /// Sets the process CPU columns from the CPU times before the batch of `nq` queries.
    pub(crate) fn set_cpu(&mut self, before: (f64, f64), nq: usize) {
        let now = process_cpu();
        let nq = nq.max(1) as f64;
        self.cpu_user_us_per_query = (now.0 - before.0).max(0.0) * 1e6 / nq;
        self.cpu_sys_us_per_query = (now.1 - before.1).max(0.0) * 1e6 / nq;
    }
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

/// One bench row per list size of `ls` (IVF: lists probed).
pub(crate) fn run_sweep(
    ix: &AnyIndex,
    queries: &AnyMatrix,
    gt: &GroundTruth,
    k: usize,
    ls: &[usize],
    o: &SearchOptions,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for &l in ls {
        let cpu0 = process_cpu();
        let (out, p) = search_at(ix, queries, k, Some(l), o)?;
        let mut row = BenchRow::of_batch(l, &out, gt, k);
        row.set_cpu(cpu0, out.stats.len());
        if let KindParams::Ivf(p) = p {
            row.rerank_n = p.top_n;
        }
        rows.push(row);
    }
    Ok(rows)
}

pub(super) fn check_gt(gt: &GroundTruth, nq: usize, k: usize) -> Result<()> {
    if gt.nq < nq {
        bail!("ground truth covers {} queries but there are {nq}", gt.nq);
    }
    if gt.k < k {
        bail!(
            "ground truth has {} neighbours per query, fewer than k = {k}",
            gt.k
        );
    }
    Ok(())
}

/// Runs the bench sweep; returns the rows and the run description.
pub fn bench(args: &BenchArgs, ctl: &Control) -> Result<(Vec<BenchRow>, serde_json::Value)> {
    if args.l.is_empty() {
        bail!("give at least one list size with -L");
    }
    let (ix, mut info) = super::open(&args.index_dir, &args.opts, ctl)?;
    let (nq, rows) = if args.fresh_queries {
        fresh_sweep(&ix, args)?
    } else {
        let (queries, gt) = load_queries(args)?;
        let rows = run_sweep(&ix, &queries, &gt, args.k, &args.l, &args.opts)?;
        (queries.n(), rows)
    };
    info["fresh_queries"] = args.fresh_queries.into();
    info["k"] = args.k.into();
    info["queries"] = nq.into();
    info["peak_rss_bytes"] = peak_rss_bytes().into();
    if let Some(path) = &args.json {
        let mut v = info.clone();
        v["rows"] = serde_json::to_value(&rows)?;
        write_json(path, &v)?;
    }
    if let Some(path) = &args.csv {
        write_csv(path, &rows)?;
    }
    Ok((rows, info))
}

/// The sweep of `--fresh-queries`: list size `i` searches queries `[i·m, (i+1)·m)` of the
/// file (`m` = `--max-queries`). Returns the queries each list size searched, and the rows.
fn fresh_sweep(ix: &AnyIndex, args: &BenchArgs) -> Result<(usize, Vec<BenchRow>)> {
    let m = args.max_queries.unwrap_or(0).max(1);
    let all = crate::runtime::read_vectors(&args.queries)?;
    let gt_all = trawl::data::groundtruth::read_ground_truth(&args.gt)?;
    let need = m * args.l.len();
    if all.n() < need || gt_all.nq < need {
        bail!(
            "--fresh-queries: {} list sizes × {m} queries need {need} queries and ground-truth \
             rows; the files have {} and {}",
            args.l.len(),
            all.n(),
            gt_all.nq
        );
    }
    let mut rows = Vec::new();
    for (i, &l) in args.l.iter().enumerate() {
        let q = match &all {
            AnyMatrix::F32(q) => AnyMatrix::F32(q.slice_rows(i * m, m)),
            AnyMatrix::U8(q) => AnyMatrix::U8(q.slice_rows(i * m, m)),
            AnyMatrix::I8(q) => AnyMatrix::I8(q.slice_rows(i * m, m)),
        };
        let k = gt_all.k;
        let gt = GroundTruth {
            nq: m,
            k,
            ids: gt_all.ids[i * m * k..(i + 1) * m * k].to_vec(),
            dists: gt_all
                .dists
                .get(i * m * k..(i + 1) * m * k)
                .map_or_else(Vec::new, <[f32]>::to_vec),
        };
        check_gt(&gt, m, args.k)?;
        rows.extend(run_sweep(ix, &q, &gt, args.k, &[l], &args.opts)?);
    }
    Ok((m, rows))
}

/// The bench's queries (the first `--max-queries`) and their checked ground truth.
pub(crate) fn load_queries(args: &BenchArgs) -> Result<(AnyMatrix, GroundTruth)> {
    let mut queries = crate::runtime::read_vectors(&args.queries)?;
    if let Some(m) = args.max_queries {
        if m == 0 {
            bail!("--max-queries must be at least 1");
        }
        queries = match queries {
            AnyMatrix::F32(q) => AnyMatrix::F32(q.slice_rows(0, m)),
            AnyMatrix::U8(q) => AnyMatrix::U8(q.slice_rows(0, m)),
            AnyMatrix::I8(q) => AnyMatrix::I8(q.slice_rows(0, m)),
        };
    }
    let gt = trawl::data::groundtruth::read_ground_truth(&args.gt)?;
    check_gt(&gt, queries.n(), args.k)?;
    Ok((queries, gt))
}

fn write_csv(path: &Path, rows: &[BenchRow]) -> Result<()> {
    let mut s = String::from(
        "L,recall,qps,mean_us,p50_us,p99_us,p999_us,pages_per_query,ios_per_query,bytes_per_query,\
         hops_per_query,nodes_expanded_per_query,cache_hits_per_query,pq_distances_per_query,\
         exact_distances_per_query,io_wait_us_per_query,compute_us_per_query,occupancy,\
         wasted_reads_per_query,records_read_per_query,page_hits_per_query,io_utilisation\n",
    );
    for r in rows {
        s += &format!(
            "{},{:.5},{:.1},{:.1},{:.1},{:.1},{:.1},{:.3},{:.3},{:.1},{:.3},{:.3},{:.3},{:.1},{:.1},{:.1},{:.1},{:.4},{:.3},{:.2},{:.3},{:.4}\n",
            r.l, r.recall, r.qps, r.latency_us.mean, r.latency_us.p50, r.latency_us.p99,
            r.latency_us.p999, r.pages_per_query, r.ios_per_query, r.bytes_per_query,
            r.hops_per_query, r.nodes_expanded_per_query, r.cache_hits_per_query,
            r.pq_distances_per_query, r.exact_distances_per_query, r.io_wait_us_per_query,
            r.compute_us_per_query, r.occupancy, r.wasted_reads_per_query,
            r.records_read_per_query, r.page_hits_per_query, r.io_utilisation
        );
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// Prints a bench sweep as a table.
pub fn print_bench(rows: &[BenchRow], k: usize) {
    println!(
        "{:>5} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>7} {:>8} {:>8} {:>5} {:>6} {:>5}",
        "L",
        format!("recall@{k}"),
        "QPS",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "pages",
        "I/Os",
        "hops",
        "cached",
        "I/O µs",
        "CPU µs",
        "occ",
        "wasted",
        "U_io"
    );
    for r in rows {
        println!(
            "{:>5} {:>9.4} {:>8.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>7.1} {:>7.1} {:>6.1} {:>7.1} {:>8.0} {:>8.0} {:>5.2} {:>6.1} {:>5.2}",
            r.l, r.recall, r.qps, r.latency_us.mean, r.latency_us.p50, r.latency_us.p99,
            r.latency_us.p999, r.pages_per_query, r.ios_per_query, r.hops_per_query,
            r.cache_hits_per_query, r.io_wait_us_per_query, r.compute_us_per_query,
            r.occupancy, r.wasted_reads_per_query, r.io_utilisation
        );
    }
}

/// The CPU breakdown of `--time-parts`: process CPU per query (user + system, all threads)
/// and the timed parts, µs per query; `other` is what the parts leave (candidate-list and
/// scheduling bookkeeping, kernel work outside the timed calls); per page = CPU without the
/// polling over pages read.
pub fn print_parts(rows: &[BenchRow]) {
    println!();
    println!(
        "{:>5} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "L",
        "pages",
        "user",
        "sys",
        "µs/page",
        "io call",
        "poll",
        "check",
        "pq tab",
        "visited",
        "pq scr",
        "exact",
        "entry",
        "decode",
        "other"
    );
    for r in rows {
        let cpu = r.cpu_user_us_per_query + r.cpu_sys_us_per_query;
        let decode =
            r.list_decode_us_per_query + r.vector_decode_us_per_query + r.refine_us_per_query;
        let parts = r.io_call_us_per_query
            + r.poll_us_per_query
            + r.checksum_us_per_query
            + r.pq_table_us_per_query
            + r.visited_us_per_query
            + r.pq_score_us_per_query
            + r.exact_us_per_query
            + r.entry_us_per_query
            + decode;
        let per_page = if r.pages_per_query > 0.0 {
            (cpu - r.poll_us_per_query) / r.pages_per_query
        } else {
            0.0
        };
        println!(
            "{:>5} {:>7.1} {:>7.1} {:>7.1} {:>8.2} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1}",
            r.l,
            r.pages_per_query,
            r.cpu_user_us_per_query,
            r.cpu_sys_us_per_query,
            per_page,
            r.io_call_us_per_query,
            r.poll_us_per_query,
            r.checksum_us_per_query,
            r.pq_table_us_per_query,
            r.visited_us_per_query,
            r.pq_score_us_per_query,
            r.exact_us_per_query,
            r.entry_us_per_query,
            decode,
            cpu - parts
        );
    }
}

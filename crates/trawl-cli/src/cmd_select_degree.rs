//! `trawl select-degree DATA`: FlashANNS's sampling-based graph degree selector (§4.3). On a
//! sample of the data it writes, for each candidate degree, an index whose graph has that many
//! *random* links per node (no neighbourhoods built: minutes, not hours), runs the flash search
//! pipeline on it with this machine's disk and accelerator, and measures per step the compute
//! time of the batch (`T_c`) and the read latency (`T_io`). The recommended degree is where the
//! two balance: a line `T_c(R) = a + b·R` fitted through the candidates meets the measured
//! `T_io` (staleness 1 then hides one behind the other, §4.1.4).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use trawl::data::matrix::AnyMatrix;
use trawl::data::Matrix;
use trawl::io::EngineKind;
use trawl::kinds::graph::search::{FlashParams, Grain, SearchParams, Strategy};
use trawl::kinds::graph::{build_random_link_index, DiskIndex, IndexParams, OpenOptions};
use trawl::progress::Control;
use trawl::quant::pq::PqParams;
use trawl::vamana::VamanaParams;
use trawl::{Element, Metric};

use crate::runtime::with_threads;

/// Arguments of `trawl select-degree`.
#[derive(Debug, Args)]
pub struct SelectDegreeArgs {
    /// Vector file to sample (the data the index will be built over).
    pub data: PathBuf,
    /// Distance metric.
    #[arg(long, default_value = "l2", value_parser = |s: &str| s.parse::<Metric>())]
    pub metric: Metric,
    /// Vectors in the sample.
    #[arg(long, default_value_t = 100_000)]
    pub sample: usize,
    /// Candidate degrees, comma-separated.
    #[arg(long, default_value = "32,64,128,250", value_delimiter = ',')]
    pub degrees: Vec<usize>,
    /// PQ bytes per vector of the sample indexes (default: that of `trawl build`).
    #[arg(long)]
    pub pq_bytes: Option<usize>,
    /// Candidate list size of the profiling searches.
    #[arg(short = 'L', long, default_value_t = 100)]
    pub list_size: usize,
    /// Profiling queries (sample rows).
    #[arg(long, default_value_t = 2000)]
    pub queries: usize,
    /// Search threads.
    #[arg(long, default_value_t = 1, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Flash search: queries in flight per thread (0 = 32, or 1024 with --accel gpu).
    #[arg(long, default_value_t = 0)]
    pub flash_batch: usize,
    /// The accelerator of the steps: cpu, gpu or auto.
    #[arg(long, default_value = "cpu", value_parser = |s: &str| s.parse::<trawl::accel::AccelKind>())]
    pub accel: trawl::accel::AccelKind,
    /// I/O engine (as `trawl bench --engine`).
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<EngineKind>())]
    pub engine: EngineKind,
    /// Where the sample indexes are written (default: a temporary directory, removed after).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Seed of the sample and of the random links.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What one candidate degree measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DegreeProfile {
    /// The degree.
    pub degree: usize,
    /// Records per 4 KiB page (pages per record when below 1: 1 / pages).
    pub records_per_page: f64,
    /// Per-step compute time of a thread's batch, µs (`batch × step time per query`).
    pub t_compute_us: f64,
    /// Read latency per step as the pipeline sees it, µs.
    pub t_io_us: f64,
    /// `T_io / T_c`: above 1 the pipeline waits for the disk, below 1 for the compute.
    pub io_over_compute: f64,
    /// Steps per query.
    pub steps: f64,
    /// Queries per second of the profiling run.
    pub qps: f64,
}

pub fn run(args: &SelectDegreeArgs, ctl: &Control) -> Result<()> {
    if args.degrees.is_empty() || args.degrees.iter().any(|&r| r == 0 || r > 4096) {
        bail!("--degrees must list degrees between 1 and 4096");
    }
    if args.sample < 2 || args.queries == 0 || args.list_size < 10 {
        bail!("--sample must be at least 2, --queries at least 1 and -L at least 10");
    }
    let data = crate::runtime::read_vectors(&args.data)?;
    let profiles = match &data {
        AnyMatrix::F32(m) => profile(m, args, ctl)?,
        AnyMatrix::U8(m) => profile(m, args, ctl)?,
        AnyMatrix::I8(m) => profile(m, args, ctl)?,
    };
    let (fit, recommended) = recommend(&profiles);
    println!(
        "{:>7} {:>9} {:>10} {:>10} {:>8} {:>8} {:>9}",
        "degree", "rec/page", "T_c µs", "T_io µs", "io/c", "steps", "QPS"
    );
    for p in &profiles {
        println!(
            "{:>7} {:>9.2} {:>10.1} {:>10.1} {:>8.2} {:>8.1} {:>9.0}",
            p.degree,
            p.records_per_page,
            p.t_compute_us,
            p.t_io_us,
            p.io_over_compute,
            p.steps,
            p.qps
        );
    }
    println!(
        "T_c(R) ≈ {:.1} + {:.3}·R µs; T_io ≈ {:.1} µs → recommended degree R = {recommended} \
         ({})",
        fit.0,
        fit.1,
        fit.2,
        if profiles.iter().all(|p| p.io_over_compute > 1.0) {
            "I/O-bound at every candidate: the largest degrees use the wasted page bytes"
        } else if profiles.iter().all(|p| p.io_over_compute < 1.0) {
            "compute-bound at every candidate: fewer links per step"
        } else {
            "where the compute of a step matches its read"
        }
    );
    if let Some(path) = &args.json {
        let v = serde_json::json!({
            "data": args.data, "sample": args.sample, "metric": args.metric.name(),
            "queries": args.queries, "L": args.list_size, "threads": args.threads,
            "batch": flash_params(args).batch, "accel": args.accel.name(),
            "fit": {"a_us": fit.0, "b_us_per_link": fit.1, "t_io_us": fit.2},
            "recommended": recommended, "profiles": profiles,
        });
        std::fs::write(path, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn flash_params(args: &SelectDegreeArgs) -> FlashParams {
    FlashParams {
        batch: match (args.flash_batch, args.accel) {
            (0, trawl::accel::AccelKind::Gpu) => 1024,
            (0, _) => trawl::kinds::graph::search::flash::DEFAULT_FLASH_BATCH,
            (b, _) => b,
        },
        staleness: 1,
        grain: Grain::Query,
        ..FlashParams::default()
    }
}

/// Fits `T_c(R) = a + b·R` by least squares and solves `T_c(R) = mean T_io`; returns
/// `((a, b, T_io), R)` with R rounded and clamped to the candidates' range.
fn recommend(p: &[DegreeProfile]) -> ((f64, f64, f64), usize) {
    let n = p.len() as f64;
    let mx = p.iter().map(|x| x.degree as f64).sum::<f64>() / n;
    let my = p.iter().map(|x| x.t_compute_us).sum::<f64>() / n;
    let sxx: f64 = p.iter().map(|x| (x.degree as f64 - mx).powi(2)).sum();
    let sxy: f64 = p
        .iter()
        .map(|x| (x.degree as f64 - mx) * (x.t_compute_us - my))
        .sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let a = my - b * mx;
    let t_io = p.iter().map(|x| x.t_io_us).sum::<f64>() / n;
    let lo = p.iter().map(|x| x.degree).min().unwrap_or(1);
    let hi = p.iter().map(|x| x.degree).max().unwrap_or(1);
    let r = if b > 0.0 {
        ((t_io - a) / b).round().clamp(lo as f64, hi as f64) as usize
    } else {
        hi
    };
    ((a, b, t_io), r)
}

fn profile<T: Element>(
    data: &Matrix<T>,
    args: &SelectDegreeArgs,
    ctl: &Control,
) -> Result<Vec<DegreeProfile>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let mut rows: Vec<usize> = (0..data.n()).collect();
    rows.shuffle(&mut rng);
    rows.truncate(args.sample.min(data.n()));
    let dim = data.dim();
    let mut v = Vec::with_capacity(rows.len() * dim);
    for &r in &rows {
        v.extend_from_slice(data.row(r));
    }
    let sample = Matrix::from_vec(v, dim).context("sampling the data")?;
    let nq = args.queries.min(sample.n());
    let queries = sample.slice_rows(0, nq);
    let tmp;
    let work = match &args.work_dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let pq_bytes = args
        .pq_bytes
        .unwrap_or(crate::cmd_index::DEFAULT_PQ_BYTES)
        .min(dim);
    let fp = flash_params(args);
    let params = SearchParams {
        k: 10,
        l: args.list_size,
        strategy: Strategy::Flash(fp),
        ..SearchParams::default()
    };
    println!(
        "degree selector: {} of {} vectors × {dim}, {nq} queries, L {}, batch {} per thread, {} \
         thread(s), accelerator {}",
        sample.n(),
        data.n(),
        args.list_size,
        fp.batch,
        args.threads,
        args.accel.name()
    );
    let mut out = Vec::new();
    for &r in &args.degrees {
        let dir = work.join(format!("degree-{r}"));
        let t0 = Instant::now();
        let ip = IndexParams {
            attrs: None,
            metric: args.metric,
            graph: VamanaParams {
                r,
                l: r.max(10),
                seed: args.seed,
                ..VamanaParams::default()
            },
            pq: PqParams {
                bytes_per_vector: pq_bytes,
                seed: args.seed,
                ..PqParams::default()
            },
            quant: trawl::quant::QuantKind::Pq,
            entry: None,
            label_aware: Default::default(),
        };
        let report = with_threads(args.threads.max(1), || {
            build_random_link_index(&sample, &dir, &ip, ctl)
        })??;
        let ix = DiskIndex::open(
            &dir,
            OpenOptions {
                engine: args.engine,
                accel: args.accel,
                ..OpenOptions::default()
            },
        )?;
        // A short warm-up, then the measured run.
        let warm = queries.slice_rows(0, nq.min(200));
        ix.search_batch(&warm, &params, args.threads)?;
        let b = ix.search_batch(&queries, &params, args.threads)?;
        let t = b.total();
        let steps = t.flash.steps.max(1) as f64;
        let reads = t.io.io_requests.max(1) as f64;
        let t_c = fp.batch as f64 * t.flash.step_ns as f64 / steps / 1e3;
        let t_io = t.flash.read_ns as f64 / reads / 1e3;
        let per_page = if report.records_per_page > 0 {
            report.records_per_page as f64
        } else {
            let rec = dim * std::mem::size_of::<T>() + 4 + 4 * r;
            1.0 / rec.div_ceil(trawl::io::PAGE_BYTES) as f64
        };
        out.push(DegreeProfile {
            degree: r,
            records_per_page: per_page,
            t_compute_us: t_c,
            t_io_us: t_io,
            io_over_compute: if t_c > 0.0 { t_io / t_c } else { f64::INFINITY },
            steps: steps / nq as f64,
            qps: nq as f64 / b.wall_secs,
        });
        eprintln!(
            "  degree {r}: sample index in {:.1} s, T_c {t_c:.1} µs, T_io {t_io:.1} µs",
            t0.elapsed().as_secs_f64()
        );
        drop(ix);
        if args.work_dir.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(out)
}

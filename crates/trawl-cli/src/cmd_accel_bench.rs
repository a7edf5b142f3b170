//! `trawl accel-bench`: the accelerators alone, without an index or a disk — FusionANNS's
//! filter stage (dedup → PQ-ADC → top-n over a batch of queries) and FlashANNS's search step
//! (visited test, PQ-ADC, list update and choice over a batch of query slots), each on the CPU
//! backend (on `--threads` cores) and on the GPU backend, across batch sizes. Every point's
//! GPU output is compared with the CPU backend's, which is the reference.
//!
//! Inputs are random: PQ codes for `--n` vectors, one distance table per query; the filter
//! stage's candidates are drawn uniformly (so a few duplicates), a flash step's neighbours are
//! a hash of (slot, step, position). The figures therefore measure the kernels and the
//! transfers, not a search: `trawl bench` measures searches.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use trawl::accel::flash::{CpuFlash, FlashAccel, FlashShape, StepEntry, StepJob, StepOutput, NONE};
use trawl::accel::{AccelKind, Accelerator, FilterJob, FilterOutput, TABLE_ROW};
use trawl::quant::pq::PqCodes;

/// Arguments of `trawl accel-bench`.
#[derive(Debug, Args)]
pub struct AccelBenchArgs {
    /// Stages to measure, comma-separated: filter (FusionANNS's filter stage), flash
    /// (FlashANNS's search step) and rabitq (the filter stage on RaBitQ codes of random
    /// vectors: gathered ids scored one by one, the same lists scored by FastScan blocks, and
    /// PQ codes of the same bytes; CPU only, not in the default).
    #[arg(long, value_delimiter = ',', default_value = "filter,flash")]
    pub stages: Vec<String>,
    /// Backends, comma-separated: cpu, gpu. A GPU that does not open is reported and skipped
    /// (an error with --require-gpu).
    #[arg(long, value_delimiter = ',', default_value = "cpu,gpu",
          value_parser = |s: &str| s.parse::<AccelKind>())]
    pub accel: Vec<AccelKind>,
    /// Fail when the GPU backend does not open.
    #[arg(long)]
    pub require_gpu: bool,
    /// Threads of the CPU backend (0 = one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub threads: usize,
    /// Vectors with (random) PQ codes.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    pub n: usize,
    /// Bytes per PQ code (M).
    #[arg(long, default_value_t = 32)]
    pub m: usize,
    /// Filter stage: queries per batch, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024")]
    pub batches: Vec<usize>,
    /// Filter stage: candidate ids gathered per query.
    #[arg(long, default_value_t = 20_000)]
    pub cands: usize,
    /// Filter stage: candidates kept per query.
    #[arg(long, default_value_t = 1000)]
    pub top_n: usize,
    /// Flash step: query slots per step, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024,2048,4096,8192")]
    pub slots: Vec<usize>,
    /// Flash step: candidate list size L.
    #[arg(long = "list", default_value_t = 64)]
    pub l: usize,
    /// Flash step: neighbours each expanded node has (the graph's degree).
    #[arg(long, default_value_t = 64)]
    pub degree: usize,
    /// Flash step: steps a query runs before its slot starts a new query (the starts are
    /// staggered over the slots, as in a running search).
    #[arg(long, default_value_t = 64)]
    pub query_steps: usize,
    /// Least time measured per point and backend, in seconds (each point also runs at least
    /// three batches or one query's steps).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Write the figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// rabitq stage: dimension of the random vectors.
    #[arg(long, default_value_t = 384)]
    pub dim: usize,
    /// rabitq stage: bits per dimension.
    #[arg(long, default_value_t = 1)]
    pub bits: u8,
    /// rabitq stage: posting lists each query probes.
    #[arg(long, default_value_t = 32)]
    pub nprobe: usize,
    /// rabitq stage: ids per posting list (each vector is in `replication` lists).
    #[arg(long, default_value_t = 64)]
    pub list_len: usize,
    /// rabitq stage: lists each vector is in.
    #[arg(long, default_value_t = 6)]
    pub replication: usize,
}

/// Most queries in one filter batch, slots in one flash step, and vectors.
const MAX_BATCH: usize = 1 << 16;
const MAX_N: usize = 1 << 30;

pub fn run(args: &AccelBenchArgs) -> Result<()> {
    check_args(args)?;
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |c| c.get())
    } else {
        args.threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("the CPU backend's thread pool")?;
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let codes: Vec<u8> = (0..args.n * args.m).map(|_| rng.gen()).collect();
    let codes = Arc::new(PqCodes::from_vec(codes, args.m, 256).context("random PQ codes")?);
    let want_gpu = args.accel.iter().any(|k| *k != AccelKind::Cpu);
    let mut skipped = Vec::new();
    let mut problems = Vec::new();
    let mut out = json!({
        "host": {"cpu": cpu_model(), "cores": std::thread::available_parallelism().map_or(1, |c| c.get())},
        "threads": threads,
        "n": args.n,
        "m": args.m,
        "seed": args.seed,
        "adapters": trawl::accel::adapters(),
    });
    if args.stages.iter().any(|s| s == "filter") {
        let gpu = if want_gpu {
            open_or_skip(
                trawl::accel::open(AccelKind::Gpu, codes.clone()),
                "filter",
                args.require_gpu,
                &mut skipped,
            )?
        } else {
            None
        };
        let points = filter_stage(args, &codes, &pool, gpu.as_deref(), &mut problems)?;
        out["filter"] = json!({
            "cands": args.cands, "top_n": args.top_n, "points": points,
        });
    }
    if args.stages.iter().any(|s| s == "flash") {
        let gpu = if want_gpu {
            open_or_skip(
                trawl::accel::open_flash_gpu(&codes, None),
                "flash",
                args.require_gpu,
                &mut skipped,
            )?
        } else {
            None
        };
        let points = flash_stage(args, &codes, threads, gpu.as_deref(), &mut problems)?;
        out["flash"] = json!({
            "list": args.l, "degree": args.degree, "query_steps": args.query_steps,
            "points": points,
        });
    }
    if args.stages.iter().any(|s| s == "rabitq") {
        out["rabitq"] = rabitq_stage(args, &pool)?;
    }
    out["skipped"] = json!(skipped);
    out["problems"] = json!(problems);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(())
}

fn check_args(args: &AccelBenchArgs) -> Result<()> {
    for s in &args.stages {
        if s != "filter" && s != "flash" && s != "rabitq" {
            bail!("unknown stage {s:?} (filter, flash, rabitq)");
        }
    }
    if args.n == 0 || args.n > MAX_N {
        bail!("-n {} must be between 1 and {MAX_N}", args.n);
    }
    if args.m == 0 || args.m > 1024 {
        bail!("--m {} must be between 1 and 1024", args.m);
    }
    let sizes = args.batches.iter().chain(&args.slots);
    if let Some(b) = sizes.into_iter().find(|&&b| b == 0 || b > MAX_BATCH) {
        bail!("a batch of {b}: batches and slots must be between 1 and {MAX_BATCH}");
    }
    if args.cands == 0
        || args
            .cands
            .saturating_mul(*args.batches.iter().max().unwrap_or(&1))
            > 1 << 30
    {
        bail!(
            "--cands {} must be at least 1 and at most 2^30 per batch",
            args.cands
        );
    }
    if args.top_n == 0 || args.l == 0 || args.degree == 0 || args.query_steps == 0 {
        bail!("--top-n, --list, --degree and --query-steps must be at least 1");
    }
    if !(args.seconds.is_finite() && args.seconds >= 0.0) {
        bail!("--seconds {} must be a finite number ≥ 0", args.seconds);
    }
    Ok(())
}

/// The accelerator, or `None` after recording why it did not open.
fn open_or_skip<T: ?Sized>(
    r: Result<Arc<T>, trawl::accel::AccelError>,
    stage: &str,
    require: bool,
    skipped: &mut Vec<Value>,
) -> Result<Option<Arc<T>>> {
    match r {
        Ok(a) => Ok(Some(a)),
        Err(e) if require => Err(e).context(format!("the GPU backend of the {stage} stage")),
        Err(e) => {
            eprintln!("{stage}: GPU backend not measured: {e}");
            skipped.push(json!({"stage": stage, "backend": "gpu", "reason": e.to_string()}));
            Ok(None)
        }
    }
}

/// The host's processor, from `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs `f` until `seconds` have been timed and at least `min_reps` times; returns each run's
/// seconds.
fn timed(seconds: f64, min_reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let budget = Duration::from_secs_f64(seconds);
    let mut secs = Vec::new();
    let mut total = Duration::ZERO;
    while secs.len() < min_reps || total < budget {
        let t = Instant::now();
        f()?;
        let d = t.elapsed();
        total += d;
        secs.push(d.as_secs_f64());
    }
    Ok(secs)
}

/// One random filter batch of `nq` queries.
fn filter_job(rng: &mut ChaCha8Rng, args: &AccelBenchArgs, nq: usize) -> FilterJob {
    FilterJob {
        m: args.m,
        rbq: Vec::new(),
        lists: Vec::new(),
        list_offsets: Vec::new(),
        tables: (0..nq * args.m * TABLE_ROW)
            .map(|_| rng.gen_range(-1.0f32..1.0))
            .collect(),
        offsets: (0..=nq).map(|q| (q * args.cands) as u32).collect(),
        ids: (0..nq * args.cands)
            .map(|_| rng.gen_range(0..args.n as u32))
            .collect(),
        top_n: args.top_n,
    }
}

/// Where two filter outputs differ: `None` when the ids and counts are equal (distances are
/// compared bit for bit and counted).
fn filter_diff(got: &FilterOutput, want: &FilterOutput) -> (Option<String>, usize) {
    let bits = got
        .dists
        .iter()
        .zip(&want.dists)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    if got.ids != want.ids || got.unique != want.unique || got.dists.len() != want.dists.len() {
        let q = (0..want.unique.len()).find(|&q| {
            got.query(q).0 != want.query(q).0 || got.unique.get(q) != want.unique.get(q)
        });
        return (Some(format!("first differing query {q:?}")), bits);
    }
    (None, bits)
}

fn filter_stage(
    args: &AccelBenchArgs,
    codes: &Arc<PqCodes>,
    pool: &rayon::ThreadPool,
    gpu: Option<&dyn Accelerator>,
    problems: &mut Vec<String>,
) -> Result<Vec<Value>> {
    let cpu = trawl::accel::CpuAccel::new(codes.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed ^ 0xF11);
    let mut points = Vec::new();
    for &nq in &args.batches {
        let job = filter_job(&mut rng, args, nq);
        let want = pool.install(|| cpu.filter(job.clone()))?;
        let distinct: u64 = want.unique.iter().map(|&u| u64::from(u)).sum();
        let gathered = (nq * args.cands) as f64;
        let point = |backend: &str, adapter: String, secs: &mut [f64], extra: Value| {
            let s = median(secs);
            let mut p = json!({
                "backend": backend, "adapter": adapter, "batch": nq, "reps": secs.len(),
                "batch_ms": s * 1e3, "queries_per_s": nq as f64 / s,
                "candidates_per_s": gathered / s, "distances_per_s": distinct as f64 / s,
            });
            if let (Some(p), Value::Object(e)) = (p.as_object_mut(), extra) {
                p.extend(e);
            }
            p
        };
        let mut secs = pool.install(|| {
            timed(args.seconds, 3, || {
                cpu.filter(job.clone())?;
                Ok(())
            })
        })?;
        let p = point(
            "cpu",
            format!("{} threads", pool.current_num_threads()),
            &mut secs,
            json!({}),
        );
        println!("{}", filter_line(&p));
        points.push(p);
        let Some(gpu) = gpu else { continue };
        let p = filter_gpu(args, gpu, &job, &want, distinct);
        record(
            p,
            &format!("filter batch {nq}"),
            json!({"batch": nq}),
            &mut points,
            problems,
        );
    }
    Ok(points)
}

/// The GPU's point of one filter batch: its output against the CPU's (`want`), then its
/// time per batch alone and with two batches in flight.
fn filter_gpu(
    args: &AccelBenchArgs,
    gpu: &dyn Accelerator,
    job: &FilterJob,
    want: &FilterOutput,
    distinct: u64,
) -> Result<Value> {
    let nq = job.queries();
    let got = gpu.filter(job.clone())?;
    let (diff, bits) = filter_diff(&got, want);
    let mut secs = timed(args.seconds, 3, || {
        gpu.filter(job.clone())?;
        Ok(())
    })?;
    // Two batches in flight (the IVF searcher's double buffering): submit the next, then
    // collect the previous.
    let reps = secs.len().max(2);
    let t = Instant::now();
    let mut pending = gpu.submit(job)?;
    for _ in 1..reps {
        let next = gpu.submit(job)?;
        pending.wait()?;
        pending = next;
    }
    pending.wait()?;
    let pipelined = t.elapsed().as_secs_f64() / reps as f64;
    let s = median(&mut secs);
    Ok(json!({
        "backend": "gpu", "adapter": gpu.info().adapter, "batch": nq, "reps": secs.len(),
        "batch_ms": s * 1e3, "queries_per_s": nq as f64 / s,
        "candidates_per_s": (nq * args.cands) as f64 / s, "distances_per_s": distinct as f64 / s,
        "equal_to_cpu": diff.is_none(), "difference": diff, "dists_not_bit_identical": bits,
        "pipelined_batch_ms": pipelined * 1e3,
        "pipelined_queries_per_s": nq as f64 / pipelined,
        "pipelined_distances_per_s": distinct as f64 / pipelined,
    }))
}

/// Adds a GPU point to `points` and prints it; a failed point is kept as its error, and it or
/// a point whose output differs from the CPU's becomes a problem.
fn record(
    p: Result<Value>,
    what: &str,
    at: Value,
    points: &mut Vec<Value>,
    problems: &mut Vec<String>,
) {
    match p {
        Ok(p) => {
            if p["equal_to_cpu"] == false {
                problems.push(format!("{what}: the GPU's output differs from the CPU's"));
            }
            println!(
                "{}",
                if p.get("slots").is_some() {
                    flash_line(&p)
                } else {
                    filter_line(&p)
                }
            );
            points.push(p);
        }
        Err(e) => {
            eprintln!("{what} on the GPU failed: {e:#}");
            problems.push(format!("{what} on the GPU failed: {e:#}"));
            let mut p = json!({"backend": "gpu", "error": format!("{e:#}")});
            if let (Some(p), Value::Object(at)) = (p.as_object_mut(), at) {
                p.extend(at);
            }
            points.push(p);
        }
    }
}

fn filter_line(p: &Value) -> String {
    let mut s = format!(
        "filter {:>3} batch {:>5}: {:>9.3} ms/batch {:>11.0} queries/s {:>14.0} distances/s",
        p["backend"].as_str().unwrap_or("?"),
        p["batch"],
        p["batch_ms"].as_f64().unwrap_or(f64::NAN),
        p["queries_per_s"].as_f64().unwrap_or(f64::NAN),
        p["distances_per_s"].as_f64().unwrap_or(f64::NAN),
    );
    if let Some(q) = p["pipelined_queries_per_s"].as_f64() {
        s += &format!(
            " (2 in flight: {q:.0} queries/s; equal to cpu: {})",
            p["equal_to_cpu"]
        );
    }
    s
}

/// The random steps of the flash benchmark: slot `x` starts a query at step `s` when
/// `(s + x) % query_steps == 0` (every slot at step 0); every entry expands a node whose
/// neighbours are a hash of (slot, step, position).
struct StepGen<'a> {
    args: &'a AccelBenchArgs,
    tables: Vec<Vec<f32>>,
}

impl<'a> StepGen<'a> {
    fn new(args: &'a AccelBenchArgs) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(args.seed ^ 0xF1A5);
        let tables = (0..16)
            .map(|_| {
                (0..args.m * TABLE_ROW)
                    .map(|_| rng.gen_range(0.0f32..1.0))
                    .collect()
            })
            .collect();
        Self { args, tables }
    }

    fn shape(&self, slots: usize) -> FlashShape {
        let a = self.args;
        FlashShape {
            slots,
            l: a.l,
            max_degree: a.degree,
            max_visited: (a.query_steps + 1) * a.degree + 1,
        }
    }

    fn hash(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Step `s` for slots `range` (numbered from 0 in the job).
    fn job(&self, s: usize, range: std::ops::Range<usize>, job: &mut StepJob) {
        let a = self.args;
        job.clear();
        for (i, x) in range.enumerate() {
            let key = |j: u64| Self::hash(a.seed ^ ((x as u64) << 40) ^ ((s as u64) << 12) ^ j);
            let start = s == 0 || (s + x).is_multiple_of(a.query_steps);
            let off = job.nbrs.len() as u32;
            job.nbrs
                .extend((0..a.degree as u64).map(|j| (key(j + 1) % a.n as u64) as u32));
            let entry = if start {
                job.tables
                    .extend_from_slice(&self.tables[(x + s) % self.tables.len()]);
                (key(0) % a.n as u64) as u32
            } else {
                NONE
            };
            job.entries.push(StepEntry {
                slot: i as u32,
                entry,
                node: if start {
                    NONE
                } else {
                    (key(0) % a.n as u64) as u32
                },
                node_key: 0,
                nbr_off: off,
                nbr_len: a.degree as u32,
                fill: if start { 2 } else { 1 },
            });
        }
    }
}

/// Figures of one flash point: steps, entries expanded and PQ distances over the busy time.
struct StepRun {
    step_secs: Vec<f64>,
    entries: u64,
    scored: u64,
    busy: f64,
}

/// Runs steps `1..` (step 0, every slot starting, is the untimed warm-up) of `slots` slots on
/// `accel` until `seconds` are timed and one query's steps have run.
fn run_steps(
    accel: &dyn FlashAccel,
    gen: &StepGen<'_>,
    slots: std::ops::Range<usize>,
    seconds: f64,
) -> Result<StepRun> {
    let mut session = accel.session(gen.shape(slots.len()))?;
    let (mut job, mut out) = (StepJob::default(), StepOutput::default());
    gen.job(0, slots.clone(), &mut job);
    session.submit(&job)?;
    session.wait(&mut out)?;
    let mut run = StepRun {
        step_secs: Vec::new(),
        entries: 0,
        scored: 0,
        busy: 0.0,
    };
    let mut s = 1;
    while s <= gen.args.query_steps || run.busy < seconds {
        gen.job(s, slots.clone(), &mut job);
        let t = Instant::now();
        session.submit(&job)?;
        session.wait(&mut out)?;
        let d = t.elapsed().as_secs_f64();
        run.busy += d;
        run.step_secs.push(d);
        run.entries += job.entries.len() as u64;
        run.scored += out.scored.iter().map(|&c| u64::from(c)).sum::<u64>();
        s += 1;
    }
    Ok(run)
}

/// Whether the GPU's outputs equal the CPU's over one query's steps (at most 16).
fn flash_equal(
    gpu: &dyn FlashAccel,
    codes: &PqCodes,
    gen: &StepGen<'_>,
    slots: usize,
) -> Result<Option<String>> {
    let cpu = CpuFlash::new(codes);
    let shape = gen.shape(slots);
    let (mut g, mut c) = (gpu.session(shape)?, cpu.session(shape)?);
    let mut job = StepJob::default();
    let (mut go, mut co) = (StepOutput::default(), StepOutput::default());
    for s in 0..=gen.args.query_steps.min(16) {
        gen.job(s, 0..slots, &mut job);
        g.submit(&job)?;
        g.wait(&mut go)?;
        c.submit(&job)?;
        c.wait(&mut co)?;
        if go != co {
            return Ok(Some(format!("flash {slots} slots: step {s} differs")));
        }
    }
    Ok(None)
}

fn flash_stage(
    args: &AccelBenchArgs,
    codes: &Arc<PqCodes>,
    threads: usize,
    gpu: Option<&dyn FlashAccel>,
    problems: &mut Vec<String>,
) -> Result<Vec<Value>> {
    let gen = StepGen::new(args);
    let cpu = CpuFlash::new(codes);
    let mut points = Vec::new();
    for &slots in &args.slots {
        // The CPU backend: the slots split over `threads` sessions stepping at once.
        let parts = threads.min(slots);
        let runs: Vec<Result<StepRun>> = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..parts)
                .map(|t| {
                    let range = slots * t / parts..slots * (t + 1) / parts;
                    let (gen, cpu) = (&gen, &cpu);
                    scope.spawn(move || run_steps(cpu, gen, range, args.seconds))
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a step thread panicked")))
                })
                .collect()
        });
        let runs = runs.into_iter().collect::<Result<Vec<_>>>()?;
        let busy = runs.iter().map(|r| r.busy).fold(0.0, f64::max);
        let entries: u64 = runs.iter().map(|r| r.entries).sum();
        let scored: u64 = runs.iter().map(|r| r.scored).sum();
        // A batch-wide step takes as long as its slowest part.
        let step = runs
            .iter()
            .map(|r| median(&mut r.step_secs.clone()))
            .fold(0.0, f64::max);
        let steps = runs.iter().map(|r| r.step_secs.len()).min().unwrap_or(0);
        let p = json!({
            "backend": "cpu", "adapter": format!("{parts} threads"), "slots": slots,
            "steps": steps, "step_ms": step * 1e3,
            "expansions_per_s": entries as f64 / busy, "distances_per_s": scored as f64 / busy,
        });
        println!("{}", flash_line(&p));
        points.push(p);
        let Some(gpu) = gpu else { continue };
        let p = flash_gpu(args, gpu, codes, &gen, slots);
        record(
            p,
            &format!("flash {slots} slots"),
            json!({"slots": slots}),
            &mut points,
            problems,
        );
    }
    Ok(points)
}

/// The GPU's point of one flash batch: its outputs against the CPU's, then its steps timed.
fn flash_gpu(
    args: &AccelBenchArgs,
    gpu: &dyn FlashAccel,
    codes: &PqCodes,
    gen: &StepGen<'_>,
    slots: usize,
) -> Result<Value> {
    let diff = flash_equal(gpu, codes, gen, slots)?;
    let mut r = run_steps(gpu, gen, 0..slots, args.seconds)?;
    Ok(json!({
        "backend": "gpu", "adapter": gpu.info().adapter, "slots": slots,
        "steps": r.step_secs.len(), "step_ms": median(&mut r.step_secs) * 1e3,
        "expansions_per_s": r.entries as f64 / r.busy,
        "distances_per_s": r.scored as f64 / r.busy,
        "equal_to_cpu": diff.is_none(), "difference": diff,
    }))
}

fn flash_line(p: &Value) -> String {
    let mut s = format!(
        "flash  {:>3} slots {:>5}: {:>9.3} ms/step {:>12.0} expansions/s {:>14.0} distances/s",
        p["backend"].as_str().unwrap_or("?"),
        p["slots"],
        p["step_ms"].as_f64().unwrap_or(f64::NAN),
        p["expansions_per_s"].as_f64().unwrap_or(f64::NAN),
        p["distances_per_s"].as_f64().unwrap_or(f64::NAN),
    );
    if let Some(e) = p["equal_to_cpu"].as_bool() {
        s += &format!(" (equal to cpu: {e})");
    }
    s
}

/// The filter stage on RaBitQ codes (CPU): random vectors of `--dim` dimensions quantised to
/// `--bits`, posting lists of `--list-len` ids with every vector in `--replication` lists, and
/// batches of queries each probing `--nprobe` lists. Three ways, timed alternately per batch
/// size: the gathered ids' codes scored one by one (AND/popcount), the lists' FastScan blocks,
/// and random PQ codes of the same bytes per vector scored by ADC over the same ids. The two
/// RaBitQ outputs must be equal.
fn rabitq_stage(args: &AccelBenchArgs, pool: &rayon::ThreadPool) -> Result<Value> {
    use trawl::quant::rabitq::fastscan::BlockLists;
    use trawl::quant::rabitq::{RaBitQuantizer, RbqParams};
    let (n, dim) = (args.n, args.dim);
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed ^ 0x5AB);
    let data: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
    let data = trawl::data::Matrix::from_vec(data, dim).context("random vectors")?;
    let params = RbqParams {
        bits: args.bits,
        ..RbqParams::default()
    };
    let ctl = trawl::progress::Control::silent();
    let rq = RaBitQuantizer::train(&data, trawl::Metric::L2, &params, &ctl)?;
    let codes = Arc::new(rq.encode(&data, &ctl)?);
    let m = codes.m();
    let nlist = (n * args.replication).div_ceil(args.list_len.max(1)).max(1);
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); nlist];
    for r in 0..args.replication {
        for id in 0..n as u32 {
            let l = (u64::from(id) * 0x9E37_79B9 + r as u64 * 7919) as usize % nlist;
            lists[(l + rng.gen_range(0..nlist)) % nlist].push(id);
        }
    }
    let blocks = Arc::new(BlockLists::build(
        nlist,
        |l| &lists[l],
        &codes,
        usize::from(args.bits),
        rq.pad(),
    ));
    let by_ids = trawl::accel::CpuAccel::new(codes.clone());
    let by_lists = trawl::accel::CpuAccel::with_lists(codes.clone(), blocks.clone());
    let pq_codes: Vec<u8> = (0..n * m).map(|_| rng.gen()).collect();
    let pq_codes = PqCodes::from_vec(pq_codes, m, 256).context("random PQ codes")?;
    let pq = trawl::accel::CpuAccel::new(Arc::new(pq_codes));
    let mut points = Vec::new();
    for &nq in &args.batches {
        let mut ids_job = FilterJob {
            m,
            top_n: args.top_n,
            offsets: vec![0],
            ..FilterJob::default()
        };
        let mut lists_job = FilterJob {
            m,
            top_n: args.top_n,
            offsets: vec![0],
            list_offsets: vec![0],
            ..FilterJob::default()
        };
        for _ in 0..nq {
            let q: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let q = rq.query(&q)?;
            ids_job.rbq.push(q.clone());
            lists_job.rbq.push(q);
            for _ in 0..args.nprobe {
                let l = rng.gen_range(0..nlist);
                ids_job.ids.extend_from_slice(&lists[l]);
                lists_job.lists.push(l as u32);
            }
            ids_job.offsets.push(ids_job.ids.len() as u32);
            lists_job.offsets.push(0);
            lists_job.list_offsets.push(lists_job.lists.len() as u32);
        }
        let mut pq_job = ids_job.clone();
        pq_job.rbq.clear();
        pq_job.tables = (0..nq * m * TABLE_ROW)
            .map(|_| rng.gen_range(-1.0f32..1.0))
            .collect();
        let want = pool.install(|| by_ids.filter(ids_job.clone()))?;
        let got = pool.install(|| by_lists.filter(lists_job.clone()))?;
        if got != want {
            bail!("rabitq batch {nq}: the FastScan lists' output differs from the gathered ids'");
        }
        let gathered = ids_job.ids.len() as f64;
        // Alternate the three, a round at a time, until each has its time.
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        let budget = args.seconds.max(0.01);
        while a.len() < 5 || a.iter().sum::<f64>() < budget {
            for (acc, job, times) in [
                (&by_ids, &ids_job, &mut a),
                (&by_lists, &lists_job, &mut b),
                (&pq, &pq_job, &mut c),
            ] {
                let t = Instant::now();
                pool.install(|| acc.filter(job.clone()))?;
                times.push(t.elapsed().as_secs_f64());
            }
        }
        let (sa, sb, sc) = (median(&mut a), median(&mut b), median(&mut c));
        println!(
            "rabitq {} bits × {dim}, batch {nq}: {:.1} M candidates/s by ids, {:.1} M by FastScan \
             lists ({:.2}×), PQ {m} B by ids {:.1} M ({:.2}× of FastScan)",
            args.bits,
            gathered / sa / 1e6,
            gathered / sb / 1e6,
            sa / sb,
            gathered / sc / 1e6,
            sc / sb
        );
        points.push(json!({
            "batch": nq, "reps": a.len(), "gathered": gathered,
            "by_ids_ms": sa * 1e3, "fastscan_ms": sb * 1e3, "pq_ms": sc * 1e3,
            "fastscan_speedup": sa / sb, "pq_over_fastscan": sc / sb,
        }));
    }
    Ok(json!({
        "dim": dim, "bits": args.bits, "code_bytes": m, "nprobe": args.nprobe,
        "list_len": args.list_len, "replication": args.replication, "nlist": nlist,
        "fastscan_level": format!("{:?}", trawl::quant::rabitq::fastscan::level()),
        "lists_bytes": blocks.heap_bytes(), "codes_bytes": codes.as_bytes().len(),
        "points": points,
    }))
}

//! `trawl bench --ablation`: OctopusANN's design-space ablation on one index, one machine, one
//! run — every single technique and the paper's combinations C1–C5, each a recall sweep — and
//! its CSV, markdown and JSON outputs (`bench/plot_ablation.py` draws the figures).
//!
//! The measurement is paired: every configuration's index is opened first, then for each list
//! size every configuration runs the query set, in alternating order from one list size to the
//! next, so two configurations' points at one list size are taken seconds apart rather than
//! minutes (a shared disk's speed drifts over minutes; ratios are what the ablation reports).

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use trawl::data::matrix::AnyMatrix;
use trawl::data::GroundTruth;
use trawl::kinds::graph::search::{PipeParams, WidthPolicy, WidthSchedule};
use trawl::kinds::graph::{DiskIndex, IndexLayout, OpenOptions, ShuffleParams};
use trawl::kinds::AnyIndex;
use trawl::progress::Control;

use crate::cmd_index::{load_queries, open, run_sweep, BenchArgs, BenchRow, SearchOptions};
use crate::runtime::human_bytes;
use crate::runtime::write_json;

/// One configuration of the ablation: which techniques are on.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Techniques {
    /// Static cache (0.1% of the nodes, by visit frequency).
    pub cache: bool,
    /// In-memory navigation graph (the entry index) seeds the search.
    pub memgraph: bool,
    /// PageShuffle layout.
    pub page_shuffle: bool,
    /// PageSearch.
    pub page_search: bool,
    /// DynamicWidth (beam search), or PipeSearch's dynamic width policy.
    pub dynamic_width: bool,
    /// PipeSearch.
    pub pipeline: bool,
    /// All-in-Storage layout.
    pub all_in_storage: bool,
}

/// The configurations, in the paper's order: name, techniques.
pub fn configurations() -> Vec<(&'static str, Techniques)> {
    let t = Techniques::default;
    vec![
        ("Baseline", t()),
        ("Cache", Techniques { cache: true, ..t() }),
        (
            "MemGraph",
            Techniques {
                memgraph: true,
                ..t()
            },
        ),
        (
            "PageShuffle",
            Techniques {
                page_shuffle: true,
                ..t()
            },
        ),
        (
            "PageSearch",
            Techniques {
                page_search: true,
                ..t()
            },
        ),
        (
            "DynamicWidth",
            Techniques {
                dynamic_width: true,
                ..t()
            },
        ),
        (
            "Pipeline",
            Techniques {
                pipeline: true,
                ..t()
            },
        ),
        (
            "C1",
            Techniques {
                page_shuffle: true,
                page_search: true,
                ..t()
            },
        ),
        (
            "C2",
            Techniques {
                pipeline: true,
                dynamic_width: true,
                ..t()
            },
        ),
        (
            "C3",
            Techniques {
                memgraph: true,
                page_shuffle: true,
                page_search: true,
                ..t()
            },
        ),
        (
            "C4",
            Techniques {
                memgraph: true,
                pipeline: true,
                dynamic_width: true,
                ..t()
            },
        ),
        (
            "C5",
            Techniques {
                memgraph: true,
                page_shuffle: true,
                page_search: true,
                dynamic_width: true,
                ..t()
            },
        ),
        (
            "AllInStorage",
            Techniques {
                all_in_storage: true,
                ..t()
            },
        ),
    ]
}

/// The search options of a configuration, from the bench's own (`base`).
fn options(base: &SearchOptions, t: &Techniques, args: &BenchArgs, n: usize) -> SearchOptions {
    let mut o = base.clone();
    o.layout = crate::cmd_index::LayoutArg::Named(if t.all_in_storage {
        IndexLayout::AllInStorage
    } else if t.page_shuffle {
        IndexLayout::Shuffled
    } else {
        IndexLayout::Packed
    });
    o.cache_nodes = if t.cache {
        args.ablation_cache_nodes.unwrap_or((n / 1000).max(1))
    } else {
        0
    };
    o.entry_list = if t.memgraph { args.memgraph_list } else { 0 };
    o.page_search = t.page_search;
    if t.pipeline {
        o.strategy = "pipe".into();
        // Pipeline alone keeps the baseline's width; with DynamicWidth it is PipeANN's
        // dynamic policy from 4 up to the DynamicWidth cap.
        if t.dynamic_width {
            o.pipe_width = WidthPolicy::Dynamic;
            o.pipe_start_width = PipeParams::default().start_width;
            o.pipe_max_width = args.dw_max_width;
        } else {
            o.pipe_width = WidthPolicy::Fixed;
            o.pipe_max_width = base.beam_width;
        }
        o.dynamic_width = None;
    } else {
        o.strategy = "beam".into();
        if t.dynamic_width {
            o.dynamic_width = Some(WidthSchedule::default());
            o.beam_width = args.dw_max_width;
        } else {
            o.dynamic_width = None;
        }
    }
    o
}

/// One configuration's sweep and footprint.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigRun {
    pub name: String,
    pub techniques: Techniques,
    /// The `trawl bench` options that reproduce it.
    pub command: String,
    /// Bytes the search keeps in memory (PQ codes and codebooks, checksums, order map, cache,
    /// and the MemGraph when it is used).
    pub memory_bytes: u64,
    /// Bytes of the files the configuration reads (its layout, the PQ files it needs, the
    /// MemGraph when used).
    pub disk_bytes: u64,
    pub rows: Vec<BenchRow>,
}

fn command_line(o: &SearchOptions) -> String {
    let mut s = format!(
        "--layout {} --threads {}",
        o.layout.named().name(),
        o.threads
    );
    if o.strategy == "pipe" {
        let _ = write!(
            s,
            " --strategy pipe --pipe-width {:?} --pipe-max-width {}",
            o.pipe_width, o.pipe_max_width
        );
        s = s.replace("Dynamic", "dynamic").replace("Fixed", "fixed");
    } else {
        let _ = write!(s, " -W {}", o.beam_width);
    }
    if let Some(dw) = &o.dynamic_width {
        let _ = write!(s, " --dynamic-width {dw}");
    }
    if o.page_search {
        s += " --page-search";
    }
    if o.entry_list > 0 {
        let _ = write!(s, " --entry-list {}", o.entry_list);
    }
    if o.cache_nodes > 0 {
        let _ = write!(s, " --cache-nodes {}", o.cache_nodes);
    }
    s
}

/// Linear interpolation of `key` at recall `target` over rows sorted by L (`None` when the
/// sweep does not reach it).
pub fn at_recall(rows: &[BenchRow], target: f64, key: impl Fn(&BenchRow) -> f64) -> Option<f64> {
    let mut prev: Option<&BenchRow> = None;
    for r in rows {
        if r.recall >= target {
            return Some(match prev {
                Some(p) if r.recall > p.recall => {
                    let w = (target - p.recall) / (r.recall - p.recall);
                    key(p) + w * (key(r) - key(p))
                }
                _ => key(r),
            });
        }
        prev = Some(r);
    }
    None
}

/// Runs the ablation.
pub fn run(args: &BenchArgs, ctl: &Control) -> Result<()> {
    if args.l.is_empty() {
        bail!("give at least one list size with -L");
    }
    let chosen = chosen_configurations(args)?;
    std::fs::create_dir_all(&args.ablation_out)
        .with_context(|| format!("creating {}", args.ablation_out.display()))?;
    let (n, layout_reports) = prepare_index(args, &chosen, ctl)?;
    let (queries, gt) = load_queries(args)?;
    let opened = open_configurations(args, &chosen, n, ctl)?;
    let (rows, secs) = measure_paired(args, &opened, &queries, &gt, ctl)?;
    let runs = report_runs(args, &chosen, &opened, rows, &secs)?;
    write_outputs(args, queries.n(), layout_reports, &runs)
}

/// The configurations `--ablation-configs` names (matched ignoring case, in its order), or
/// every configuration when it names none.
fn chosen_configurations(args: &BenchArgs) -> Result<Vec<(&'static str, Techniques)>> {
    let all = configurations();
    if args.ablation_configs.is_empty() {
        return Ok(all);
    }
    let mut v = Vec::new();
    for name in &args.ablation_configs {
        match all.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some(c) => v.push(*c),
            None => bail!(
                "unknown ablation configuration {name:?} (known: {})",
                all.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    Ok(v)
}

/// Readies the index for the chosen configurations: checks that it has the entry index
/// MemGraph needs and writes the layouts they need that it does not have yet (PageShuffle,
/// All-in-Storage). Returns its number of vectors and the reports of the layouts written.
fn prepare_index(
    args: &BenchArgs,
    chosen: &[(&str, Techniques)],
    ctl: &Control,
) -> Result<(usize, Vec<serde_json::Value>)> {
    let base_ix = DiskIndex::open(&args.index_dir, OpenOptions::default())
        .with_context(|| format!("opening {}", args.index_dir.display()))?;
    let n = base_ix.n();
    if chosen.iter().any(|(_, t)| t.memgraph) && base_ix.entry().is_none() {
        bail!(
            "MemGraph needs an entry index: build one with `trawl entry {}`",
            args.index_dir.display()
        );
    }
    let mut layout_reports = Vec::new();
    for (kind, needed) in [
        (
            IndexLayout::Shuffled,
            chosen.iter().any(|(_, t)| t.page_shuffle),
        ),
        (
            IndexLayout::AllInStorage,
            chosen.iter().any(|(_, t)| t.all_in_storage),
        ),
    ] {
        if needed && !args.index_dir.join(kind.file_name()).is_file() {
            println!("writing the {} layout", kind.name());
            let r = base_ix.write_layout(kind, &ShuffleParams::default(), ctl)?;
            layout_reports.push(serde_json::to_value(&r)?);
        }
    }
    Ok((n, layout_reports))
}

/// A configuration opened for the measurement: its search options, the index opened with
/// them and the seconds the open took.
type Opened = (SearchOptions, AnyIndex, f64);

/// Opens every chosen configuration's index (`n`: the index's vectors, which size the cache),
/// before any is measured.
fn open_configurations(
    args: &BenchArgs,
    chosen: &[(&str, Techniques)],
    n: usize,
    ctl: &Control,
) -> Result<Vec<Opened>> {
    let mut opened = Vec::with_capacity(chosen.len());
    for (name, t) in chosen {
        let o = options(&args.opts, t, args, n);
        let t0 = Instant::now();
        let (ix, _) =
            open(&args.index_dir, &o, ctl).with_context(|| format!("configuration {name}"))?;
        opened.push((o, ix, t0.elapsed().as_secs_f64()));
    }
    Ok(opened)
}

/// The paired measurement: list sizes outer, configurations inner in alternating order, so
/// that the points compared at one list size are taken seconds apart (this disk's speed
/// drifts by 10-20% over minutes). Returns each configuration's rows and its seconds of
/// sweeping.
fn measure_paired(
    args: &BenchArgs,
    opened: &[Opened],
    queries: &AnyMatrix,
    gt: &GroundTruth,
    ctl: &Control,
) -> Result<(Vec<Vec<BenchRow>>, Vec<f64>)> {
    let mut rows: Vec<Vec<BenchRow>> = vec![Vec::new(); opened.len()];
    let mut secs = vec![0.0f64; opened.len()];
    for (li, &l) in args.l.iter().enumerate() {
        let order: Vec<usize> = if li % 2 == 0 {
            (0..opened.len()).collect()
        } else {
            (0..opened.len()).rev().collect()
        };
        for ci in order {
            ctl.check()?;
            let (o, ix, _) = &opened[ci];
            let t0 = Instant::now();
            let r = run_sweep(ix, queries, gt, args.k, &[l], o)?;
            secs[ci] += t0.elapsed().as_secs_f64();
            rows[ci].extend(r);
        }
    }
    Ok((rows, secs))
}

/// Prints each configuration's command line, times and footprint, and its sweep's table;
/// returns the runs.
fn report_runs(
    args: &BenchArgs,
    chosen: &[(&str, Techniques)],
    opened: &[Opened],
    mut rows: Vec<Vec<BenchRow>>,
    secs: &[f64],
) -> Result<Vec<ConfigRun>> {
    let mut runs = Vec::new();
    for (ci, ((name, t), (o, ix, open_secs))) in chosen.iter().zip(opened).enumerate() {
        let Some(graph) = ix.graph() else {
            anyhow::bail!("the ablation runs on graph indexes");
        };
        let mem = graph.disk().memory();
        let memory_bytes = mem.total() - if t.memgraph { 0 } else { mem.entry_bytes };
        let db = graph.disk().disk_bytes();
        let disk_bytes = db.packed + db.pq + db.pq_codes + if t.memgraph { db.entry } else { 0 };
        println!(
            "{name:>13}: {} (open {:.1} s, sweep {:.0} s); memory {}, disk {}",
            command_line(o),
            open_secs,
            secs[ci],
            human_bytes(memory_bytes),
            human_bytes(disk_bytes)
        );
        let rows = std::mem::take(&mut rows[ci]);
        crate::cmd_index::print_bench(&rows, args.k);
        runs.push(ConfigRun {
            name: (*name).into(),
            techniques: *t,
            command: command_line(o),
            memory_bytes,
            disk_bytes,
            rows,
        });
    }
    Ok(runs)
}

/// Writes `ablation.json`, `ablation.csv` and `ablation.md` to `--ablation-out` and prints
/// the markdown tables.
fn write_outputs(
    args: &BenchArgs,
    queries: usize,
    layout_reports: Vec<serde_json::Value>,
    runs: &[ConfigRun],
) -> Result<()> {
    let out = &args.ablation_out;
    let json = serde_json::json!({
        "index": args.index_dir.display().to_string(),
        "queries": queries, "k": args.k, "threads": args.opts.threads,
        "engine": format!("{:?}", args.opts.engine), "direct": !args.opts.buffered,
        "layouts_written": layout_reports,
        "runs": runs,
    });
    write_json(&out.join("ablation.json"), &json)?;
    std::fs::write(out.join("ablation.csv"), csv(runs))?;
    let md = markdown(runs);
    std::fs::write(out.join("ablation.md"), &md)?;
    println!("\n{md}");
    println!(
        "wrote {}/ablation.{{csv,md,json}}; figures: python3 bench/plot_ablation.py {}/ablation.json",
        out.display(),
        out.display()
    );
    Ok(())
}

fn csv(runs: &[ConfigRun]) -> String {
    let mut s = String::from(
        "config,L,recall,qps,mean_us,p99_us,pages_per_query,ios_per_query,hops_per_query,\
         records_read_per_query,page_hits_per_query,io_utilisation,cache_hits_per_query,\
         io_wait_us_per_query,compute_us_per_query,memory_bytes,disk_bytes\n",
    );
    for r in runs {
        for row in &r.rows {
            let _ = writeln!(
                s,
                "{},{},{:.5},{:.1},{:.1},{:.1},{:.3},{:.3},{:.3},{:.2},{:.3},{:.4},{:.3},{:.1},{:.1},{},{}",
                r.name, row.l, row.recall, row.qps, row.latency_us.mean, row.latency_us.p99,
                row.pages_per_query, row.ios_per_query, row.hops_per_query,
                row.records_read_per_query, row.page_hits_per_query, row.io_utilisation,
                row.cache_hits_per_query, row.io_wait_us_per_query, row.compute_us_per_query,
                r.memory_bytes, r.disk_bytes
            );
        }
    }
    s
}

fn markdown(runs: &[ConfigRun]) -> String {
    let fmt = |v: Option<f64>, p: usize| v.map_or("—".to_string(), |x| format!("{x:.p$}"));
    let base = runs.iter().find(|r| r.name == "Baseline");
    let mut s = String::new();
    for target in [0.90, 0.95] {
        let _ = writeln!(s, "### recall@10 = {target:.2}\n");
        s += "| config | L | QPS | × Baseline QPS | mean µs | pages/q | × Baseline pages | I/Os/q | U_io | memory | disk |\n";
        s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
        let b_qps = base.and_then(|b| at_recall(&b.rows, target, |r| r.qps));
        let b_pages = base.and_then(|b| at_recall(&b.rows, target, |r| r.pages_per_query));
        for r in runs {
            let g = |f: fn(&BenchRow) -> f64| at_recall(&r.rows, target, f);
            let qps = g(|r| r.qps);
            let pages = g(|r| r.pages_per_query);
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                fmt(g(|r| r.l as f64), 1),
                fmt(qps, 0),
                fmt(ratio(qps, b_qps), 2),
                fmt(g(|r| r.latency_us.mean), 0),
                fmt(pages, 1),
                fmt(ratio(pages, b_pages), 2),
                fmt(g(|r| r.ios_per_query), 1),
                fmt(g(|r| r.io_utilisation), 3),
                human_bytes(r.memory_bytes),
                human_bytes(r.disk_bytes)
            );
        }
        s += "\n";
    }
    s
}

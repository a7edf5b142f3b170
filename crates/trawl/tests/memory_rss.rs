//! The memory budget, measured: a process that opens an index with a budget and runs two
//! threads — one searching, one inserting until the update delta's budget refuses more — never
//! peaks above the budget plus the fixed overhead [`OVERHEAD`] over the RSS it had before
//! opening (the runtime: binary, libraries, the test harness), by the process's own peak RSS
//! counter (`VmHWM`), at budgets from the index's minimum to one that holds every node.
//!
//! Each budget runs in a child process (this test binary run again with `TRAWL_RSS_CHILD`
//! set), so each peak is its own.

mod common;

use std::path::Path;

use common::{build, data};
use trawl::filter::QueryFilter;
use trawl::kinds::{open_with, Options, Queries, Run};
use trawl::progress::Control;
use trawl::Metric;

/// The fixed overhead over the budget: two threads' stacks, the allocator's per-thread arenas
/// and slack, and what the standard library keeps (documented in `docs/memory.md`; 1.3–3.5
/// MiB measured on 2 cores).
const OVERHEAD: u64 = 8 << 20;

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn options(budget: u64) -> Options {
    Options {
        memory_budget: Some(budget),
        writable: true,
        threads: 2,
        l: Some(40),
        ..Options::default()
    }
}

/// The child: open with the budget, search and insert on two threads, print the peak.
fn child(dir: &Path, budget: u64) {
    let (_, q) = data::<f32>(1, 200, 48, 77);
    let (extra, _) = data::<f32>(20_000, 1, 48, 78);
    let before = status_kib("VmRSS:") << 10;
    let o = options(budget);
    let (ix, _) = open_with(dir, &o, &Control::silent()).unwrap();
    let p = o.params(&ix, 10).unwrap();
    let live = ix.graph().unwrap().live().unwrap();
    let refused = std::thread::scope(|s| {
        let searches = s.spawn(|| {
            for _ in 0..5 {
                ix.search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
                    .unwrap();
            }
        });
        let mut refused = false;
        for chunk in extra.as_slice().chunks(48 * 250) {
            match live.insert(None, chunk) {
                Ok(_) => {}
                Err(trawl::kinds::graph::updates::live::LiveError::DeltaFull { .. }) => {
                    refused = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        searches.join().unwrap();
        refused
    });
    let peak = status_kib("VmHWM:") << 10;
    println!("RSS-RESULT {before} {peak} {refused} {}", live.delta_len());
}

#[test]
fn peak_rss_stays_within_the_budget_and_the_overhead() {
    if let Ok(spec) = std::env::var("TRAWL_RSS_CHILD") {
        let (dir, budget) = spec.split_once('|').unwrap();
        child(Path::new(dir), budget.parse().unwrap());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data::<f32>(30_000, 1, 48, 77);
    build(&base, dir.path(), Metric::L2, 16);
    let min = trawl::kinds::plan_memory(dir.path(), &options(u64::MAX / 4))
        .unwrap()
        .minimum;
    // Everything in RAM: what a read-only plan holds with every node cached, and the
    // writable open's delta (a quarter of what is left after its minimum) on top.
    let ro = Options {
        writable: false,
        ..options(1 << 40)
    };
    let all = trawl::kinds::plan_memory(dir.path(), &ro).unwrap();
    assert_eq!(all.cache_nodes, 30_000);
    let everything = min + (all.planned() - all.minimum) * 4 / 3 + (1 << 20);
    let plan = trawl::kinds::plan_memory(dir.path(), &options(everything)).unwrap();
    assert_eq!(plan.cache_nodes, 30_000, "{}", plan.describe());
    for budget in [min, min + (2 << 20), min + (8 << 20), everything] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "peak_rss_stays_within_the_budget_and_the_overhead",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(
                "TRAWL_RSS_CHILD",
                format!("{}|{budget}", dir.path().display()),
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = text
            .lines()
            .find_map(|l| l.find("RSS-RESULT").map(|at| &l[at..]))
            .unwrap_or_else(|| panic!("no result from the child:\n{text}"));
        let f: Vec<&str> = line.split_whitespace().collect();
        let (before, peak): (u64, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let (refused, delta): (bool, usize) = (f[3].parse().unwrap(), f[4].parse().unwrap());
        eprintln!(
            "budget {budget}: peak {peak} = runtime {before} + {} (budget + overhead {}); \
             inserts refused: {refused} after {delta}",
            peak - before,
            budget + OVERHEAD
        );
        assert!(
            peak <= before + budget + OVERHEAD,
            "budget {budget}: peak RSS {peak} above {before} + {budget} + {OVERHEAD}"
        );
        assert!(
            refused,
            "20,000 inserts must fill the delta's share of {budget}"
        );
        assert!(delta > 0, "the delta took inserts before it was full");
    }
}

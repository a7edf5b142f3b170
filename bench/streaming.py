#!/usr/bin/env python3
"""The streaming runbook (big-ann-benchmarks' streaming track style) on real and generated data.

For each dataset and layout, `crates/trawl/examples/streaming.rs` (built here in release mode)
runs the stream: an index of the first half of the vectors, taken whole k-means clusters at a
time; then rounds that delete the oldest clusters (~5% of the live vectors) and insert the next
unused clusters (~5%) — whole clusters, in cluster order, the hard case — with a merge after
each round. After every round it measures

- recall@10 at a fixed L over the live set (exact ground truth of the live set), before and
  after the merge, and the same for an index built from scratch on the live set;
- the merge's time against that fresh build's (odd rounds: the merge alone on all threads);
- search QPS while the merge runs (even rounds: 2 search threads, the merge on 1 thread at
  niceness 10) against idle QPS right after it (both O_DIRECT, the same loop);
- bytes written by the merge and the peak RSS.

Usage:
  python3 bench/streaming.py glove-400k gen-1m [--layouts packed,decoupled] [--rounds 10]
  python3 bench/streaming.py --report-only

Writes bench/out/streaming-<dataset>-<layout>.json, bench/results/streaming.md and
bench/results/streaming-<dataset>.png (recall and QPS per round).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import (OUT_DIR, REPO_ROOT, cargo_target_dir, import_pyplot, log,  # noqa: E402
                    machine_info, write_json)

RESULTS = REPO_ROOT / "bench" / "results"


def example_bin() -> Path:
    """The example `cargo build --release --example streaming` writes (in cargo's target
    directory, `CARGO_TARGET_DIR` honoured)."""
    return cargo_target_dir() / "release" / "examples" / "streaming"


def build_example() -> None:
    log("cargo build --release --example streaming")
    subprocess.run(["cargo", "build", "--release", "--example", "streaming", "-q"],
                   cwd=REPO_ROOT, check=True)


def run(name: str, layout: str, args) -> Path:
    ds = datasets.prepare(name)
    out = OUT_DIR / f"streaming-{name}-{layout}.json"
    work = Path(args.work) / f"{name}-{layout}"
    cmd = [str(example_bin()), "--base", ds.base, "--queries", ds.query, "--metric", ds.metric,
           "--dir", str(work), "--out", str(out), "--rounds", str(args.rounds),
           "--clusters", str(args.clusters), "-L", str(args.search_l), "--threads",
           str(args.threads), "--layout", layout, "--max-queries", str(args.queries),
           "--extra-l", args.extra_l]
    log(" ".join(cmd))
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(cmd, check=True)
    doc = json.loads(out.read_text())
    doc["machine"] = machine_info()
    doc["dataset"] = name
    write_json(out, doc)
    return out


def summarize(doc: dict) -> dict:
    rounds = doc["rounds"]
    last = rounds[-1]
    alone = [r["merge_over_fresh"] for r in rounds if r["merge_mode"] == "alone"]
    during = [r["qps_ratio"] for r in rounds if r.get("qps_ratio") is not None]
    return {
        "final_recall": last["recall"],
        "final_recall_fresh": last["recall_fresh"],
        "final_gap_points": 100 * (last["recall_fresh"] - last["recall"]),
        "max_gap_points": max(100 * (r["recall_fresh"] - r["recall"]) for r in rounds),
        "merge_over_fresh_median": statistics.median(alone) if alone else None,
        "merge_over_fresh_max": max(alone) if alone else None,
        "qps_ratio_median": statistics.median(during) if during else None,
        "qps_ratio_min": min(during) if during else None,
        "bytes_written_median": statistics.median(r["bytes_written"] for r in rounds),
        "peak_rss_max": max(r["peak_rss_bytes"] for r in rounds),
        "final_at": [(x["L"], x["recall"], x["recall_fresh"]) for x in last.get("recall_at", [])],
        "max_gap_at": {x["L"]: max(100 * (y["recall_fresh"] - y["recall"])
                                   for r in rounds for y in r.get("recall_at", [])
                                   if y["L"] == x["L"])
                       for x in last.get("recall_at", [])},
    }


def mib(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def report(paths: list[Path]) -> None:
    docs = [json.loads(p.read_text()) for p in sorted(paths)]
    if not docs:
        log("no results in bench/out")
        return
    lines = ["# Streaming runbook", "",
             "`python3 bench/streaming.py " + " ".join(sorted({d["dataset"] for d in docs}))
             + "` (driver: `crates/trawl/examples/streaming.rs`). Start: half of the vectors, whole "
             "k-means clusters; each round deletes the oldest clusters (≈5% of the live vectors) "
             "and inserts the next unused ones (≈5%), then merges. Recall@10 at a fixed L over "
             "the live set against exact ground truth; *fresh* = an index built from scratch on "
             "the same live set, searched the same way. Odd rounds: the merge alone on all "
             "threads (its time against the fresh build's); even rounds: the merge on one thread "
             "at niceness 10 while 2 threads search with O_DIRECT (QPS against idle QPS measured "
             "right after, same loop). Gap = fresh − merged recall in points (negative: the merged "
             "index is the better one); its max is the worst round.", ""]
    m = docs[0].get("machine", {})
    lines += [f"Machine: {m.get('cpu_model')}, {m.get('logical_cpus')} logical CPUs, "
              f"{(m.get('mem_total_kib') or 0) // 2**20} GiB; commit {m.get('git_commit', '?')[:10]}.",
              ""]
    lines += ["| dataset | layout | n live | L | final recall (fresh) | gap, points (max over rounds) "
              "| merge / fresh build, median (max) | QPS during merge / idle, median (min) "
              "| bytes written per merge, median | peak RSS | smaller L: final recall (fresh), max gap |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in docs:
        s = summarize(d)
        gaps = s["max_gap_at"]
        small = "; ".join(f"L {lv}: {m:.4f} ({f:.4f}), {gaps[lv]:+.2f}"
                          for lv, m, f in s["final_at"])
        lines.append(
            f"| {d['dataset']} | {d['layout']} | {d['rounds'][-1]['live']:,} | {d['L']} "
            f"| {s['final_recall']:.4f} ({s['final_recall_fresh']:.4f}) "
            f"| {s['final_gap_points']:+.2f} ({s['max_gap_points']:+.2f}) "
            f"| {s['merge_over_fresh_median']:.3f} ({s['merge_over_fresh_max']:.3f}) "
            f"| {s['qps_ratio_median']:.2f} ({s['qps_ratio_min']:.2f}) "
            f"| {mib(s['bytes_written_median'])} | {mib(s['peak_rss_max'])} | {small} |")
    lines.append("")
    for d in docs:
        lines += [f"## {d['dataset']}, {d['layout']} layout", "",
                  f"{d['n']:,} × {d['dim']} {d['metric']}; initial index {d['initial']:,} vectors "
                  f"built in {d['initial_build_secs']:.1f} s; R {d['R']}, build L {d['build_L']}, "
                  f"{d['pq_bytes']} PQ bytes; search L {d['L']}, beam width 4, {d['queries']} queries.",
                  "",
                  "| round | live | deleted | inserted | recall before merge | after | fresh "
                  "| merge s (mode) | fresh build s | merge/fresh | QPS idle | QPS during | ratio "
                  "| written | peak RSS | smaller L: merged / fresh |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in d["rounds"]:
            alone = r["merge_mode"] == "alone"
            seg = (r.get("merge") or {}).get("segments")
            during = "" if alone else f"{r['qps_during_merge']:.0f}"
            ratio = "" if alone else f"{r['qps_ratio']:.2f}"
            small = "; ".join(f"L {x['L']}: {x['recall']:.4f} / {x['recall_fresh']:.4f}"
                              for x in r.get("recall_at", []))
            lines.append(
                f"| {r['round']} | {r['live']:,} | {r['deleted']:,} | {r['inserted']:,} "
                f"| {r['recall_before_merge']:.4f} | {r['recall']:.4f} | {r['recall_fresh']:.4f} "
                f"| {r['merge_secs']:.1f} ({'alone' if alone else 'beside searches'}) "
                f"| {r['fresh_build_secs']:.1f} | {r['merge_over_fresh']:.3f} "
                f"| {r['qps_idle']:.0f} | {during} | {ratio} "
                f"| {mib(r['bytes_written'])}{' (' + str(seg['segments']) + ' segments)' if seg else ''} "
                f"| {mib(r['peak_rss_bytes'])} | {small} |")
        lines.append("")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "streaming.md").write_text("\n".join(lines) + "\n")
    log(f"wrote {RESULTS / 'streaming.md'}")
    plt = import_pyplot("streaming.py")
    if plt is None:
        return
    for name in sorted({d["dataset"] for d in docs}):
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        for d in (d for d in docs if d["dataset"] == name):
            x = [r["round"] for r in d["rounds"]]
            a.plot(x, [r["recall"] for r in d["rounds"]], "o-", label=f"{d['layout']}: merged")
            a.plot(x, [r["recall_fresh"] for r in d["rounds"]], "x--",
                   label=f"{d['layout']}: fresh build")
            b.plot(x, [r["qps_idle"] for r in d["rounds"]], "o-", label=f"{d['layout']}: idle")
            xs = [r["round"] for r in d["rounds"] if r.get("qps_during_merge")]
            b.plot(xs, [r["qps_during_merge"] for r in d["rounds"] if r.get("qps_during_merge")],
                   "s--", label=f"{d['layout']}: during merge")
        a.set_xlabel("round")
        a.set_ylabel(f"recall@10 at L = {docs[0]['L']}")
        a.set_title(f"{name}: recall over the live set")
        a.legend(fontsize=8)
        b.set_xlabel("round")
        b.set_ylabel("QPS (2 threads, O_DIRECT)")
        b.set_title(f"{name}: search QPS")
        b.legend(fontsize=8)
        fig.tight_layout()
        png = RESULTS / f"streaming-{name}.png"
        fig.savefig(png, dpi=110)
        log(f"wrote {png}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="*", default=["glove-400k", "gen-1m"])
    ap.add_argument("--layouts", default="packed,decoupled")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--search-l", type=int, default=64)
    ap.add_argument("--extra-l", default="16,32",
                    help="more list sizes at which recall is measured (merged and fresh)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--work", default=str(REPO_ROOT / "bench" / "out" / "streaming-work"))
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    if not args.report_only:
        build_example()
        for name in args.datasets:
            for layout in args.layouts.split(","):
                run(name, layout, args)
    report(list(OUT_DIR.glob("streaming-*-*.json")))


if __name__ == "__main__":
    main()

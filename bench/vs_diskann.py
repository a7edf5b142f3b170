#!/usr/bin/env python3
"""Side-by-side Vamana graph build: trawl (`trawl graph build/search`) vs diskannpy
(`build_memory_index` + `StaticMemoryIndex`), same data file, same R / L / alpha / threads.

Each side runs as child processes; the parent measures each with os.wait4 (wall time and
ru_maxrss). diskannpy runs in its own virtualenv (bench/.venv-diskann, made on demand) because
diskannpy 0.7.0 ships cp310/cp311 wheels only and pins numpy==1.25.

Usage:
  python bench/vs_diskann.py glove-400k                     # both sides, 1 repetition
  python bench/vs_diskann.py gen-1m --repeat 3              # median of 3; side order alternates
  python bench/vs_diskann.py glove-400k --sides diskann     # one side only
  python bench/vs_diskann.py glove-400k --report-only       # re-render from bench/out/raw/

Writes bench/out/vs_diskann-<dataset>.{md,csv,json} (and raw per-side JSON under bench/out/raw/).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import (BENCH_DIR, OUT_DIR, log, machine_info, run_measured,  # noqa: E402
                    trawl_bin, trawl_version, warm_page_cache, write_json)

DISKANNPY_REQ = "diskannpy==0.7.0"
DEFAULT_VENV = BENCH_DIR / ".venv-diskann"
MIB = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# diskannpy virtualenv
# ---------------------------------------------------------------------------------------------

def ensure_venv(venv: Path, python: str) -> Path:
    """Create the diskannpy virtualenv if needed; return its python."""
    py = venv / "bin" / "python"
    if py.exists():
        ok = subprocess.run([str(py), "-c", "import diskannpy"], capture_output=True)
        if ok.returncode == 0:
            return py
    log(f"creating {venv} with {python} and installing {DISKANNPY_REQ}")
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", DISKANNPY_REQ], check=True)
    return py


def venv_freeze(py: Path) -> list[str]:
    out = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True)
    return out.stdout.split()


# ---------------------------------------------------------------------------------------------
# One repetition of one side
# ---------------------------------------------------------------------------------------------

def run_diskann(ds: datasets.Dataset, args: argparse.Namespace, py: Path, work: Path) -> dict:
    idx = work / "diskann-index"
    shutil.rmtree(idx, ignore_errors=True)
    idx.mkdir(parents=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    worker = str(BENCH_DIR / "diskann_worker.py")
    metric = {"ip": "mips"}.get(ds.metric, ds.metric)
    warm_page_cache(Path(ds.base), Path(ds.query))
    build = run_measured(
        [str(py), worker, "build", "--data", ds.base, "--metric", metric, "--index-dir", str(idx),
         "-R", str(args.R), "-L", str(args.L), "--alpha", str(args.alpha),
         "--threads", str(args.threads), "--result", str(work / "diskann-build.json")],
        work / "diskann-build.log", env=env)
    inner = json.loads((work / "diskann-build.json").read_text())
    search = run_measured(
        [str(py), worker, "search", "--index-dir", str(idx), "--queries", ds.query,
         "--gt", ds.gt, "-k", str(args.k), "--Ls", args.search_L, "--threads", str(args.threads),
         "--search-repeat", str(args.search_repeat), "--result", str(work / "diskann-search.json")],
        work / "diskann-search.log", env=env)
    s = json.loads((work / "diskann-search.json").read_text())
    if not args.keep_index:
        shutil.rmtree(idx, ignore_errors=True)
    return {"build_secs": inner["build_call_secs"], "process_wall_secs": build.wall_secs,
            "peak_rss_bytes": build.peak_rss_bytes,
            "baseline_rss_bytes": inner["rss_before_build_bytes"],
            "vmhwm_bytes": inner["peak_rss_self_bytes"],
            "cpu_secs": build.user_secs + build.sys_secs, "index_bytes": inner["index_bytes"],
            "rows": s["rows"], "search_process": search.to_dict(), "build_process": build.to_dict(),
            "versions": {k: inner[k] for k in ("diskannpy", "numpy", "python")}}


def run_trawl(ds: datasets.Dataset, args: argparse.Namespace, work: Path) -> dict:
    exe = str(trawl_bin())
    graph = work / "trawl.graph"
    graph.unlink(missing_ok=True)
    warm_page_cache(Path(ds.base), Path(ds.query))
    report = work / "trawl-build-report.json"
    build = run_measured(
        [exe, "graph", "build", ds.base, str(graph), "--metric", ds.metric, "-R", str(args.R),
         "-L", str(args.L), "--alpha", str(args.alpha), "--threads", str(args.threads),
         "--report", str(report), "--quiet"], work / "trawl-build.log")
    rep = json.loads(report.read_text())
    out = work / "trawl-search.json"
    search = run_measured(
        [exe, "graph", "search", ds.base, str(graph), "--queries", ds.query, "--gt", ds.gt,
         "--metric", ds.metric, "-k", str(args.k), "-L", args.search_L,
         "--threads", str(args.threads), "--json", str(out), "--quiet"],
        work / "trawl-search.log")
    s = json.loads(out.read_text())
    index_bytes = graph.stat().st_size if graph.exists() else None
    if not args.keep_index:
        graph.unlink(missing_ok=True)
    # The parent's wall time of the whole process (load + build + save) is the figure compared;
    # trawl's self-reported build_secs is kept beside it.
    return {"build_secs": build.wall_secs, "process_wall_secs": build.wall_secs,
            "self_reported_build_secs": rep.get("build_secs"),
            "self_reported_peak_rss_bytes": rep.get("peak_rss_bytes"),
            "peak_rss_bytes": build.peak_rss_bytes, "baseline_rss_bytes": 0,
            "cpu_secs": build.user_secs + build.sys_secs, "index_bytes": index_bytes,
            "rows": s["rows"], "report": rep, "search_process": search.to_dict(),
            "build_process": build.to_dict(), "versions": {"trawl": trawl_version()}}


# ---------------------------------------------------------------------------------------------
# Aggregation and report
# ---------------------------------------------------------------------------------------------

def _median_or_none(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def median_side(reps: list[dict]) -> dict:
    """Median over repetitions of the build figures and of recall/QPS per L."""
    med = lambda key: statistics.median(r[key] for r in reps)  # noqa: E731
    rows = []
    for i, row in enumerate(reps[0]["rows"]):
        per = [r["rows"][i] for r in reps]
        rows.append({"L": row["L"],
                     "recall": statistics.median(p["recall"] for p in per),
                     "qps": statistics.median(p["qps"] for p in per),
                     "mean_latency_us": statistics.median(p["mean_latency_us"] for p in per),
                     "qps_per_cpu": _median_or_none(p.get("qps_per_cpu") for p in per)})
    return {"build_secs": med("build_secs"), "build_secs_all": [r["build_secs"] for r in reps],
            "process_wall_secs": med("process_wall_secs"),
            "peak_rss_bytes": med("peak_rss_bytes"),
            "peak_rss_all": [r["peak_rss_bytes"] for r in reps],
            "baseline_rss_bytes": med("baseline_rss_bytes"), "cpu_secs": med("cpu_secs"),
            "index_bytes": reps[0]["index_bytes"], "rows": rows,
            "versions": reps[0]["versions"], "repeats": len(reps)}


def render(dataset: str, sides: dict, meta: dict) -> tuple[str, list[dict]]:
    """Markdown report and CSV rows from the per-side medians."""
    d, t = sides.get("diskann"), sides.get("trawl")
    ds = meta["dataset"]
    lines = [f"# trawl vs diskannpy: {dataset}", "",
             f"{ds['n']} x {ds['dim']} f32, {ds['nq']} queries, metric {ds['metric']}, "
             f"GT backend {ds['gt_backend']}. R={meta['params']['R']} L={meta['params']['L']} "
             f"alpha={meta['params']['alpha']} threads={meta['params']['threads']}, "
             f"k={meta['params']['k']}. Machine: {meta['machine'].get('cpu_model')}, "
             f"{meta['machine'].get('affinity_cpus')} CPUs. {meta['when']}.", "",
             "## Build", "",
             "| side | build s (median) | all runs | peak RSS MiB | RSS above baseline MiB | CPU s |",
             "|---|---|---|---|---|---|"]
    for name, s in sides.items():
        lines.append(f"| {name} | {s['build_secs']:.2f} | "
                     f"{', '.join(f'{v:.1f}' for v in s['build_secs_all'])} | "
                     f"{s['peak_rss_bytes'] / MIB:.0f} | "
                     f"{(s['peak_rss_bytes'] - s['baseline_rss_bytes']) / MIB:.0f} | "
                     f"{s['cpu_secs']:.1f} |")
    if d and t:
        lines += ["", f"**Ratio trawl/diskann**: build time {t['build_secs'] / d['build_secs']:.3f}, "
                      f"peak RSS {t['peak_rss_bytes'] / d['peak_rss_bytes']:.3f} (whole process) / "
                      f"{t['peak_rss_bytes'] / (d['peak_rss_bytes'] - d['baseline_rss_bytes']):.3f} "
                      "(vs diskann above its interpreter baseline); build CPU time "
                      f"{t['cpu_secs'] / d['cpu_secs']:.3f} (user+sys: less sensitive to other "
                      "load on the machine than wall time)."]
    lines += ["", "## In-memory search (recall@k, QPS)", ""]
    names = list(sides)
    head = "| L | " + " | ".join(f"{n} recall | {n} QPS | {n} QPS/CPU-s" for n in names)
    if d and t:
        head += " | recall diff (t-d) | QPS ratio (t/d)"
    lines += [head + " |", "|" + "---|" * (1 + 3 * len(names) + (2 if d and t else 0))]
    csv_rows = []
    by_l = {n: {r["L"]: r for r in sides[n]["rows"]} for n in names}
    for L in sorted(set().union(*(set(v) for v in by_l.values()))):
        cells = [str(L)]
        for n in names:
            r = by_l[n].get(L)
            qpc = r.get("qps_per_cpu") if r else None
            cells += [f"{r['recall']:.4f}", f"{r['qps']:.0f}", f"{qpc:.0f}" if qpc else "-"] \
                if r else ["-", "-", "-"]
            if r:
                csv_rows.append({"dataset": dataset, "side": n, "L": L, "recall": r["recall"],
                                 "qps": r["qps"], "mean_latency_us": r["mean_latency_us"],
                                 "build_secs": sides[n]["build_secs"],
                                 "peak_rss_mib": sides[n]["peak_rss_bytes"] / MIB,
                                 "build_cpu_secs": sides[n]["cpu_secs"],
                                 "qps_per_cpu": r.get("qps_per_cpu")})
        if d and t:
            rd, rt = by_l["diskann"].get(L), by_l["trawl"].get(L)
            cells += [f"{rt['recall'] - rd['recall']:+.4f}", f"{rt['qps'] / rd['qps']:.2f}"] \
                if rd and rt else ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Load average (1/5/15 min) at start {_fmt_load(meta.get('loadavg_start'))}, "
                  f"at end {_fmt_load(meta.get('loadavg_end'))}."]
    lines += ["", "Build time: diskann = the build_memory_index call timed inside its child "
              "(file load + build + save; excludes Python start-up); trawl = wall time of the "
              "`trawl graph build` process. Peak RSS = ru_maxrss of the build process (os.wait4). "
              "diskann QPS = nq / wall of one batch_search call (median of repeats); "
              "QPS/CPU-s = queries per CPU-second of all threads (robust to other load)."]
    return "\n".join(lines) + "\n", csv_rows


def _fmt_load(v) -> str:
    return "/".join(f"{x:.1f}" for x in v) if v else "?"


def write_outputs(dataset: str, meta: dict) -> Path:
    """Combine the raw per-side results under bench/out/raw/ into md/csv/json."""
    sides = {}
    for side in ("diskann", "trawl"):
        p = OUT_DIR / "raw" / f"{dataset}.{side}.json"
        if p.exists():
            sides[side] = json.loads(p.read_text())
    if not sides:
        raise SystemExit(f"no raw results for {dataset} under {OUT_DIR / 'raw'}")
    meta = meta or next(iter(sides.values()))["meta"]
    run_ids = {s["meta"]["run_id"] for s in sides.values()}
    if len(run_ids) > 1:
        log("note: the two sides come from different runs: " + ", ".join(sorted(run_ids)))
    for v in sides.values():  # recompute, so a re-render picks up newer aggregation code
        v["median"] = median_side(v["runs"])
    md, csv_rows = render(dataset, {k: v["median"] for k, v in sides.items()}, meta)
    if len(run_ids) > 1:
        md += "\n**Note:** the sides were measured in different runs: " + \
              ", ".join(f"{k}: {v['meta']['when']}" for k, v in sides.items()) + "\n"
    base = OUT_DIR / f"vs_diskann-{dataset}"
    Path(f"{base}.md").write_text(md)
    with open(f"{base}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
        w.writeheader()
        w.writerows(csv_rows)
    write_json(Path(f"{base}.json"), {"meta": meta, "sides": sides})
    print(md)
    return Path(f"{base}.md")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--sides", default="diskann,trawl", help="comma list: diskann,trawl")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions; medians are reported")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=1.2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--search-L", default="10,20,40,60,80,100,150")
    ap.add_argument("--search-repeat", type=int, default=3,
                    help="diskann: batch_search passes per L (median QPS)")
    ap.add_argument("--gt-backend", default="auto", choices=["auto", "trawl", "numpy"])
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--venv-python", default="python3.11",
                    help="interpreter used to create the diskannpy venv (3.10 or 3.11)")
    ap.add_argument("--keep-index", action="store_true", help="keep the built indexes")
    ap.add_argument("--report-only", action="store_true",
                    help="only re-render md/csv/json from bench/out/raw/")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.report_only:
        write_outputs(args.dataset, {})
        return
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    assert set(sides) <= {"diskann", "trawl"}, f"unknown side in {sides}"
    ds = datasets.prepare(args.dataset, args.gt_backend, args.threads)
    py = ensure_venv(args.venv, args.venv_python) if "diskann" in sides else None
    if "trawl" in sides:
        trawl_bin()  # fail early
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = Path(ds.base).parent / "runs" / run_id
    machine = machine_info()
    if py:
        machine["diskann_venv"] = venv_freeze(py)
    meta = {"run_id": run_id, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "dataset": ds.__dict__, "machine": machine,
            "params": {"R": args.R, "L": args.L, "alpha": args.alpha, "threads": args.threads,
                       "k": args.k, "search_L": args.search_L, "repeat": args.repeat,
                       "order": "alternating: even repetitions run sides in the given order, "
                                "odd ones reversed"}}
    results: dict[str, list] = {s: [] for s in sides}
    for rep in range(args.repeat):
        order = sides if rep % 2 == 0 else list(reversed(sides))
        for side in order:
            log(f"rep {rep + 1}/{args.repeat}: {side} on {ds.name}")
            rdir = work / f"rep{rep}"
            rdir.mkdir(parents=True, exist_ok=True)
            r = run_diskann(ds, args, py, rdir) if side == "diskann" else run_trawl(ds, args, rdir)
            log(f"  {side}: build {r['build_secs']:.1f}s, peak RSS "
                f"{r['peak_rss_bytes'] / MIB:.0f} MiB, recall@{args.k} "
                + ", ".join(f"L{x['L']}={x['recall']:.3f}" for x in r["rows"]))
            results[side].append(r)
    meta["loadavg_start"] = machine.get("loadavg")
    meta["loadavg_end"] = os.getloadavg()
    for side, reps in results.items():
        write_json(OUT_DIR / "raw" / f"{ds.name}.{side}.json",
                   {"meta": meta, "median": median_side(reps), "runs": reps})
    write_outputs(ds.name, meta)


if __name__ == "__main__":
    main()

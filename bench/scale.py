#!/usr/bin/env python3
"""Cost growth from 1M to 10M vectors on one machine (issue 21, step 1).

For each size N in --sizes: `trawl gen` N × 128 f32 vectors (L2) and --nq held-out queries
(cached in --work), exact ground truth with `trawl gt`, a build under --memory-budget-gb (the
input memory-mapped; a larger N than the budget holds is built in overlapping shards), the
PageShuffle layout for C5, then two recall sweeps read with O_DIRECT:

* PipeSearch (`--strategy pipe`, PipeANN's dynamic width, entry index of 10),
* C5 (OctopusANN: MemGraph + PageShuffle + PageSearch + DynamicWidth).

Reports per size: build seconds and µs per vector (wall and CPU), peak RSS against the budget,
bytes on disk, and pages, hops and QPS at recall@10 = 0.90 / 0.95 (linear interpolation between
the sweep points). Writes bench/results/scale-<tag>.{json,md}.

    python3 bench/scale.py --sizes 1000000,10000000 --budget-gb 8 --work /work/scale
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import time
from pathlib import Path

from common import log, machine_info, trawl_bin, write_json

PIPE = ["--strategy", "pipe", "--entry-list", "10"]
C5 = ["--layout", "shuffle", "-W", "32", "--dynamic-width", "5:4,4,8,8,16,16,24,24,32",
      "--page-search", "--entry-list", "10"]


def run(cmd: list[str]) -> tuple[float, float]:
    """Runs `cmd`; returns (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    log(" ".join(cmd))
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k"


def at_recall(rows: list[dict], target: float, key: str) -> float | None:
    rows = sorted(rows, key=lambda r: r["recall"])
    for a, b in zip(rows, rows[1:]):
        if a["recall"] <= target <= b["recall"] and b["recall"] > a["recall"]:
            t = (target - a["recall"]) / (b["recall"] - a["recall"])
            return a[key] + t * (b[key] - a[key])
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--budget-gb", type=float, default=8.0)
    ap.add_argument("--work", type=Path, default=Path("/work/scale"))
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--list-sizes", default="10,15,20,25,30,40,50,60,80,100,130")
    ap.add_argument("--tag", default="gen-1m-10m")
    ap.add_argument("--skip-search", action="store_true")
    ap.add_argument("--variant", default="",
                    help="suffix of the index, report and sweep files in --work (a second build "
                         "of the same size beside the first)")
    ap.add_argument("--reuse-bench", action="store_true",
                    help="tables from the sweeps already in --work (no new search runs)")
    args = ap.parse_args()
    trawl = str(trawl_bin())
    args.work.mkdir(parents=True, exist_ok=True)
    out: dict = {"machine": machine_info(), "budget_gb": args.budget_gb, "threads": args.threads,
                 "list_sizes": args.list_sizes, "sizes": []}
    for n in [int(s) for s in args.sizes.split(",")]:
        tag = label(n)
        base, queries, gt = (args.work / f"gen{tag}.fbin", args.work / f"q{tag}.fbin",
                             args.work / f"gt{tag}.bin")
        if not base.exists():
            run([trawl, "gen", str(base), "--queries", str(queries), "-n", str(n), "--nq",
                 str(args.nq), "--dim", "128", "--quiet"])
        if not gt.exists():
            gt_secs, _ = run([trawl, "gt", str(base), str(queries), "--out", str(gt), "-k", "100",
                              "--metric", "l2", "--quiet"])
        else:
            gt_secs = None
        var = f"-{args.variant}" if args.variant else ""
        idx = args.work / f"idx{tag}-b{args.budget_gb:g}{var}"
        report = args.work / f"build-{tag}{var}.json"
        if not (idx / "manifest.trawl").exists() or not report.exists():
            wall, cpu = run([trawl, "build", str(base), str(idx), "--metric", "l2",
                             "--memory-budget-gb", str(args.budget_gb), "--threads",
                             str(args.threads), "--report", str(report), "--quiet"])
            r = json.loads(report.read_text())
            r["wall_secs_measured"], r["cpu_secs"] = wall, cpu
            report.write_text(json.dumps(r, indent=2))
        r = json.loads(report.read_text())
        lay_report = args.work / f"layout-{tag}{var}.json"
        if not (idx / "packed-shuffled.trawl").exists():
            lay_wall, lay_cpu = run([trawl, "layout", str(idx), "--shuffle", "--report",
                                     str(lay_report), "--quiet"])
            lay = {"wall_secs": lay_wall, "cpu_secs": lay_cpu}
            (args.work / f"layout-{tag}{var}-time.json").write_text(json.dumps(lay))
        lay = json.loads((args.work / f"layout-{tag}{var}-time.json").read_text())
        entry = {"n": n, "build": {k: r.get(k) for k in (
            "total_secs", "pq_secs", "graph_secs", "layout_secs", "entry_secs", "shards",
            "avg_degree", "peak_rss_bytes", "disk_bytes", "packed_bytes", "cpu_secs",
            "wall_secs_measured")}, "gt_secs": gt_secs, "shuffle": lay}
        if not args.skip_search:
            for name, flags in (("pipe", PIPE), ("c5", C5)):
                js = args.work / f"bench-{tag}{var}-{name}.json"
                if not (args.reuse_bench and js.exists()):
                    run([trawl, "bench", str(idx), "--queries", str(queries), "--gt", str(gt),
                         "-k", "10", "-L", args.list_sizes, "--threads", str(args.threads),
                         "--json", str(js), "--quiet", *flags])
                rows = json.loads(js.read_text())["rows"]
                for row in rows:
                    row["cpu_us_per_query"] = (row.get("cpu_user_us_per_query", 0.0)
                                               + row.get("cpu_sys_us_per_query", 0.0))
                    row["p50_us"] = row["latency_us"]["p50"]
                    row["L_value"] = row["L"]
                entry[name] = {"rows": rows, "flags": " ".join(flags)}
                for target in (0.90, 0.95):
                    entry[name][f"at_{target:.2f}"] = {
                        key: at_recall(rows, target, key)
                        for key in ("qps", "pages_per_query", "hops_per_query",
                                    "cpu_us_per_query", "p50_us", "L_value")}
        out["sizes"].append(entry)
        write_json(Path(__file__).parent / "results" / f"scale-{args.tag}.json", out)
    write_md(out, Path(__file__).parent / "results" / f"scale-{args.tag}.md")


def fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def write_md(out: dict, path: Path) -> None:
    m = out["machine"]
    lines = [f"# Cost growth with size (`bench/scale.py`, budget {out['budget_gb']:g} GiB)", "",
             f"CPU: {m.get('cpu_model', '?')}; {out['threads']} threads; O_DIRECT reads; "
             f"list sizes {out['list_sizes']}; recall@10 over the held-out queries.", "",
             "| N | build s | µs/vector (wall) | µs/vector (CPU) | graph shards | avg degree | "
             "peak RSS | disk | shuffle s |", "|---|---|---|---|---|---|---|---|---|"]
    for e in out["sizes"]:
        b, n = e["build"], e["n"]
        lines.append(
            f"| {n:,} | {fmt(b['total_secs'])} | {fmt(1e6 * b['total_secs'] / n, '.0f')} | "
            f"{fmt(1e6 * (b.get('cpu_secs') or 0) / n, '.0f')} | {b['shards']} | "
            f"{fmt(b['avg_degree'])} | {b['peak_rss_bytes'] / 2**30:.2f} GiB | "
            f"{b['disk_bytes'] / 2**30:.2f} GiB | {fmt(e['shuffle']['wall_secs'])} |")
    lines += ["", "| N | search | recall | L | pages | hops | CPU µs/query | p50 µs | QPS |",
              "|---|---|---|---|---|---|---|---|---|"]
    for e in out["sizes"]:
        for name in ("pipe", "c5"):
            if name not in e:
                continue
            for t in ("0.90", "0.95"):
                a = e[name][f"at_{t}"]
                lines.append(f"| {e['n']:,} | {name} | {t} | {fmt(a.get('L_value'), '.0f')} | "
                             f"{fmt(a['pages_per_query'])} | {fmt(a['hops_per_query'])} | "
                             f"{fmt(a.get('cpu_us_per_query'), '.0f')} | "
                             f"{fmt(a.get('p50_us'), '.0f')} | {fmt(a['qps'], '.0f')} |")
    lines += ["", "Flags: pipe `" + " ".join(PIPE) + "`; C5 `" + " ".join(C5) + "`."]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

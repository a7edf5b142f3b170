#!/usr/bin/env python3
"""Sharded vs single index on one dataset (issue 21, steps 2–3).

Builds a single graph index and `trawl shard build` indexes of each --shards count with the same
graph parameters, then, read with O_DIRECT and `--strategy pipe`:

* recall@10 / pages / QPS of every index over the same per-shard list sizes L, all shards
  probed (sides alternating, --repeat passes, medians);
* the probe trade-off of each sharded index: `--probe P` for P = 1 … S;
* with --ray (needs `trawl` and `ray` importable, the extension built in release mode): the
  in-process `trawl.ShardedIndex` against `trawl.ray.RayShardedIndex` (one actor per shard on a
  local Ray cluster of --ray-cpus CPUs) on the largest shard count: QPS of one batch of every
  query, and latency p50/p99 of single-query calls (Ray's scatter-gather overhead).

Writes bench/results/shards-<dataset>.{json,md}.

    python3 bench/shards.py gen-1m --shards 2,4 --ray
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (log, machine_info, read_gt, run_measured, trawl_bin,  # noqa: E402
                    write_json)
from datasets import prepare  # noqa: E402

BUILD = ["-R", "64", "-L", "100", "--threads", "2"]


def build(ds, out: Path, shards: int) -> dict:
    report = out.with_suffix(".build.json")
    if (out / ("shards.trawl" if shards > 1 else "manifest.trawl")).exists() and report.exists():
        return json.loads(report.read_text())
    cmd = ([str(trawl_bin()), "shard", "build", ds.base, str(out), "--shards", str(shards)]
           if shards > 1 else [str(trawl_bin()), "build", ds.base, str(out)])
    cmd += ["--metric", ds.metric, *BUILD, "--report", str(report), "--quiet"]
    m = run_measured(cmd, out.with_suffix(".build.log"))
    r = json.loads(report.read_text())
    r["wall_secs"], r["cpu_secs"], r["peak_rss"] = m.wall_secs, m.user_secs + m.sys_secs, m.peak_rss_bytes
    report.write_text(json.dumps(r, indent=2))
    return r


def bench(ds, idx: Path, ls: str, nq: int, probe: int, out: Path) -> list[dict]:
    cmd = [str(trawl_bin()), "bench", str(idx), "--queries", ds.query, "--gt", ds.gt, "-k", "10",
           "-L", ls, "--threads", "2", "--strategy", "pipe", "--max-queries", str(nq),
           "--probe", str(probe), "--json", str(out), "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["rows"]


def median_rows(runs: list[list[dict]]) -> list[dict]:
    rows = []
    for group in zip(*runs):
        row = dict(group[0])
        for key in ("qps", "pages_per_query", "hops_per_query", "recall"):
            row[key] = statistics.median(r[key] for r in group)
        row["latency_p50"] = statistics.median(r["latency_us"]["p50"] for r in group)
        rows.append(row)
    return rows


def ray_overhead(ds, idx: Path, L: int, nq: int, single: int, cpus: int, probe: int) -> dict:
    """In-process `trawl.ShardedIndex` against `trawl.ray.RayShardedIndex` on the same index.

    PipeSearch's results depend on when reads complete, so its two paths are compared by
    recall; the same queries with beam search (deterministic) must return identical ids."""
    import numpy as np
    import ray

    import trawl
    import trawl.ray as tray

    q = np.fromfile(ds.query, dtype=np.float32, offset=8).reshape(-1, ds.dim)[:nq]
    gt = read_gt(Path(ds.gt))[0][:nq, :10]
    p = trawl.SearchParams(L=L, strategy="pipe")
    beam = trawl.SearchParams(L=L, strategy="beam")
    res: dict = {"L": L, "queries": nq, "single_queries": single, "ray_cpus": cpus, "probe": probe}

    def recall(ids) -> float:
        return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / 10
                              for a, b in zip(ids, gt)]))

    def lat(fn) -> dict:
        ts = []
        for i in range(single):
            t0 = time.perf_counter()
            fn(q[i:i + 1])
            ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort()
        return {"p50_us": ts[len(ts) // 2], "p99_us": ts[int(0.99 * (len(ts) - 1))]}

    def qps(fn) -> float:
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn(q)
            walls.append(time.perf_counter() - t0)
        return nq / statistics.median(walls)

    local = trawl.ShardedIndex(idx)
    beam_local = local.batch_search(q, k=10, params=beam, threads=2, probe=probe)[0]
    res["in_process"] = {
        "recall": recall(local.batch_search(q, k=10, params=p, threads=2, probe=probe)[0]),
        "qps": qps(lambda x: local.batch_search(x, k=10, params=p, threads=2, probe=probe)),
        **lat(lambda x: local.batch_search(x, k=10, params=p, threads=1, probe=probe)),
    }
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        rix = tray.RayShardedIndex(idx)
        beam_ray = rix.batch_search(q, k=10, params=beam, probe=probe, threads=1)[0]
        res["same_results_beam"] = bool(np.array_equal(beam_local, beam_ray))
        res["ray"] = {
            "recall": recall(rix.batch_search(q, k=10, params=p, probe=probe, threads=1)[0]),
            "qps": qps(lambda x: rix.batch_search(x, k=10, params=p, probe=probe, threads=1)),
            **lat(lambda x: rix.batch_search(x, k=10, params=p, probe=probe, threads=1)),
        }
        rix.close()
    finally:
        ray.shutdown()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--shards", default="2,4")
    ap.add_argument("--list-sizes", default="10,15,20,30,40,60,80")
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--probe-L", type=int, default=40, help="L of the probe curve")
    ap.add_argument("--ray", action="store_true")
    ap.add_argument("--ray-cpus", type=int, default=2)
    ap.add_argument("--ray-L", type=int, default=40)
    ap.add_argument("--ray-single", type=int, default=300)
    ap.add_argument("--ray-only", action="store_true",
                    help="rerun only the Ray comparison, into the existing results")
    args = ap.parse_args()
    ds = prepare(args.dataset)
    res = Path(__file__).resolve().parent / "results"
    counts = [int(s) for s in args.shards.split(",")]
    if args.ray_only:
        out = json.loads((res / f"shards-{ds.name}.json").read_text())
        out["ray"] = ray_overhead(ds, Path(ds.base).parent / "shards" / f"s{max(counts)}",
                                  args.ray_L, args.queries, args.ray_single, args.ray_cpus, 0)
        write_json(res / f"shards-{ds.name}.json", out)
        write_md(out, res / f"shards-{ds.name}.md")
        return
    root = Path(ds.base).parent / "shards"
    root.mkdir(exist_ok=True)
    sides = [1, *counts]
    out: dict = {"machine": machine_info(), "dataset": ds.name, "n": ds.n, "dim": ds.dim,
                 "metric": ds.metric, "queries": args.queries, "list_sizes": args.list_sizes,
                 "build": {}, "sweep": {}, "probe": {}}
    for s in sides:
        log(f"build {ds.name}, {s} shard(s)")
        out["build"][s] = build(ds, root / f"s{s}", s)
    runs: dict = {s: [] for s in sides}
    for rep in range(args.repeat):
        order = sides if rep % 2 == 0 else sides[::-1]
        for s in order:
            log(f"sweep {s} shard(s), pass {rep + 1}")
            runs[s].append(bench(ds, root / f"s{s}", args.list_sizes, args.queries, 0,
                                 root / f"bench-s{s}-{rep}.json"))
    out["sweep"] = {s: median_rows(runs[s]) for s in sides}
    for s in counts:
        out["probe"][s] = []
        for probe in range(1, s + 1):
            rows = bench(ds, root / f"s{s}", str(args.probe_L), args.queries, probe,
                         root / f"probe-s{s}-{probe}.json")
            out["probe"][s].append({"probe": probe, **rows[0]})
    if args.ray:
        out["ray"] = ray_overhead(ds, root / f"s{max(counts)}", args.ray_L, args.queries,
                                  args.ray_single, args.ray_cpus, 0)
    write_json(res / f"shards-{ds.name}.json", out)
    write_md(out, res / f"shards-{ds.name}.md")


def write_md(out: dict, path: Path) -> None:
    m = out["machine"]
    sides = list(out["sweep"])
    lines = [f"# Sharded vs single index: {out['dataset']} ({out['n']:,} × {out['dim']}, "
             f"{out['metric']})", "",
             f"`bench/shards.py`; CPU {m.get('cpu_model', '?')}; 2 threads, `--strategy pipe`, O_DIRECT; "
             f"{out['queries']} queries; medians of the alternating passes. A sharded index is "
             "searched shard after shard in this process, each with the same L (per-shard L).", "",
             "## Build", "", "| shards | sizes | build s | CPU s | peak RSS | disk |",
             "|---|---|---|---|---|---|"]
    for s in sides:
        b = out["build"][s]
        sizes = b["plan"]["counts"] if "plan" in b else [b["n"]]
        secs = b.get("total_secs", 0)
        lines.append(f"| {s} | {sizes} | {secs:.1f} | {b['cpu_secs']:.1f} | "
                     f"{b['peak_rss'] / 2**20:.0f} MiB | {b['disk_bytes'] / 2**20:.0f} MiB |")
    lines += ["", "## Recall at equal per-shard L, every shard probed", "",
              "| L | " + " | ".join(f"{s} shard(s): recall / pages / QPS" for s in sides) +
              " | " + " | ".join(f"Δrecall {s} − 1" for s in sides[1:]) + " |",
              "|---|" + "---|" * (2 * len(sides) - 1)]
    base = out["sweep"][sides[0]]
    for i, row in enumerate(base):
        cells = []
        for s in sides:
            r = out["sweep"][s][i]
            cells.append(f"{r['recall']:.4f} / {r['pages_per_query']:.1f} / {r['qps']:.0f}")
        deltas = [f"{100 * (out['sweep'][s][i]['recall'] - row['recall']):+.2f} pt"
                  for s in sides[1:]]
        lines.append(f"| {row['L']} | " + " | ".join(cells) + " | " + " | ".join(deltas) + " |")
    for s, rows in out["probe"].items():
        lines += ["", f"## Probe trade-off, {s} shards (L {rows[0]['L']})", "",
                  "| probe | recall@10 | pages | hops | QPS | mean µs |", "|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['probe']} | {r['recall']:.4f} | {r['pages_per_query']:.1f} | "
                         f"{r['hops_per_query']:.1f} | {r['qps']:.0f} | "
                         f"{r['latency_us']['mean']:.0f} |")
    if "ray" in out:
        r = out["ray"]
        lines += ["", f"## Through Ray ({r['ray_cpus']} CPUs, one actor per shard, L {r['L']}, "
                  f"all shards, `--strategy pipe`)", "",
                  "| path | recall@10 | QPS (one batch) | p50 µs (one query) | p99 µs |",
                  "|---|---|---|---|---|"]
        for name in ("in_process", "ray"):
            x = r[name]
            lines.append(f"| {name} | {x.get('recall', float('nan')):.4f} | {x['qps']:.0f} | "
                         f"{x['p50_us']:.0f} | {x['p99_us']:.0f} |")
        lines.append("")
        lines.append(f"Identical ids through Ray and in process with beam search (deterministic; "
                     f"PipeSearch's results depend on read timing): "
                     f"{r.get('same_results_beam', r.get('same_results'))}. In process: 2 search "
                     "threads per shard, shards one after another; Ray: 1 thread per actor, "
                     "actors in parallel on the CPUs Ray has.")
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()

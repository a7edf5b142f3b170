#!/usr/bin/env python3
"""The diskannpy half of vs_diskann.py. Runs INSIDE bench/.venv-diskann (diskannpy 0.7.0,
numpy 1.25), one subprocess per phase so the parent can measure each with os.wait4.

  build:  diskannpy.build_memory_index on an .fbin file; the call itself is timed here.
  search: diskannpy.StaticMemoryIndex + batch_search at each L; recall@k against the GT ids.

Each phase writes a JSON result file (--result). Only numpy + diskannpy are needed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402

from common import read_fbin, read_gt, recall_at_k  # noqa: E402


def _self_peak_rss_bytes() -> int:
    """VmHWM of this process's own address space (not inherited from the spawner, unlike
    ru_maxrss); falls back to ru_maxrss where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build(args: argparse.Namespace) -> dict:
    import diskannpy as dap  # imported before the baseline RSS is taken

    os.makedirs(args.index_dir, exist_ok=True)
    rss_before = _self_peak_rss_bytes()
    t0 = time.perf_counter()
    dap.build_memory_index(
        data=args.data, distance_metric=args.metric, index_directory=args.index_dir,
        complexity=args.L, graph_degree=args.R, num_threads=args.threads, alpha=args.alpha,
        vector_dtype=np.float32, index_prefix="ann",
    )
    secs = time.perf_counter() - t0
    return {"build_call_secs": secs, "rss_before_build_bytes": rss_before,
            "peak_rss_self_bytes": _self_peak_rss_bytes(),
            "index_bytes": sum(p.stat().st_size for p in Path(args.index_dir).iterdir()),
            "diskannpy": getattr(dap, "__version__", None) or _dist_version("diskannpy"),
            "numpy": np.__version__, "python": sys.version.split()[0],
            "params": {"R": args.R, "L": args.L, "alpha": args.alpha, "threads": args.threads,
                       "metric": args.metric, "use_pq_build": False}}


def search(args: argparse.Namespace) -> dict:
    import diskannpy as dap

    queries = np.ascontiguousarray(read_fbin(Path(args.queries), mmap=False))
    gt_ids, _ = read_gt(Path(args.gt))
    ls = [int(v) for v in args.Ls.split(",")]
    t0 = time.perf_counter()
    index = dap.StaticMemoryIndex(index_directory=args.index_dir, num_threads=args.threads,
                                  initial_search_complexity=max(ls), index_prefix="ann")
    load_secs = time.perf_counter() - t0
    # Warm-up: one pass at the smallest L (touches the graph and data pages).
    index.batch_search(queries, k_neighbors=args.k, complexity=max(ls[0], args.k),
                       num_threads=args.threads)
    rows = []
    for L in ls:
        walls, cpus, ids = [], [], None
        for _ in range(args.search_repeat):
            t, c = time.perf_counter(), time.process_time()
            ids, _dists = index.batch_search(queries, k_neighbors=args.k, complexity=L,
                                             num_threads=args.threads)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        wall, cpu = float(np.median(walls)), float(np.median(cpus))
        nq = queries.shape[0]
        rows.append({"L": L, "recall": recall_at_k(ids, gt_ids, args.k), "qps": nq / wall,
                     # batch_search gives no per-query times: threads * wall / nq is the mean
                     # latency if the threads were busy all the time (an estimate).
                     "mean_latency_us": args.threads * wall / nq * 1e6,
                     # queries per CPU-second (all threads): robust to other load on the box.
                     "qps_per_cpu": nq / cpu if cpu > 0 else None,
                     "wall_secs_all": walls, "cpu_secs_all": cpus})
    return {"load_secs": load_secs, "k": args.k, "threads": args.threads, "rows": rows}


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: BLE001 - version is informational only
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--data", required=True)
    b.add_argument("--metric", required=True, choices=["l2", "mips", "cosine"])
    b.add_argument("--index-dir", required=True)
    b.add_argument("-R", type=int, default=64)
    b.add_argument("-L", type=int, default=100)
    b.add_argument("--alpha", type=float, default=1.2)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--result", required=True)
    s = sub.add_parser("search")
    s.add_argument("--index-dir", required=True)
    s.add_argument("--queries", required=True)
    s.add_argument("--gt", required=True)
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--Ls", default="10,20,40,60,80,100,150")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--search-repeat", type=int, default=3)
    s.add_argument("--result", required=True)
    args = ap.parse_args()
    out = build(args) if args.cmd == "build" else search(args)
    Path(args.result).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()

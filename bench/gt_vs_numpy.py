#!/usr/bin/env python3
"""Exact ground truth: trawl (`gt_bench` example) vs numpy's BLAS on the same data.

Writes a seeded Gaussian mixture as raw little-endian f32 files, runs
`cargo run --release -p trawl --example gt_bench` on them, and times what a numpy user would
write: per block of queries, `d = ‖q‖² + ‖b‖² − 2 q @ b.T`, then `np.argpartition` for the top k
and a sort of those k. It also times the matmul alone (the pure BLAS bound). Both sides use the
same number of threads (OPENBLAS/OMP/MKL_NUM_THREADS for numpy, a rayon pool for trawl).
Prints the medians of --reps runs, throughputs (queries/s, distance evaluations/s) and the ratios
trawl/numpy, plus the agreement of the two id sets (recall of trawl's ids against numpy's).

Usage: python3 bench/gt_vs_numpy.py [--n 200000] [--nq 2000] [--dim 128] [--k 100]
       [--threads 2] [--reps 3] [--workdir DIR]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ARGS = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ARGS.add_argument("--n", type=int, default=200_000)
ARGS.add_argument("--nq", type=int, default=2_000)
ARGS.add_argument("--dim", type=int, default=128)
ARGS.add_argument("--k", type=int, default=100)
ARGS.add_argument("--threads", type=int, default=2)
ARGS.add_argument("--reps", type=int, default=3)
ARGS.add_argument("--query-block", type=int, default=256, help="numpy queries per matmul block")
ARGS.add_argument("--workdir", default=None)
OPTS = ARGS.parse_args()

# Thread counts must be set before numpy loads its BLAS.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(OPTS.threads)

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mixture(rng, centres, n):
    """Points at spread 0.3 around random centres."""
    labels = rng.integers(0, len(centres), size=n)
    pts = centres[labels] + 0.3 * rng.standard_normal((n, centres.shape[1]), dtype=np.float32)
    return np.ascontiguousarray(pts, dtype="<f4")


def numpy_gt(b, q, k, qblock):
    """What a numpy user writes: blocked expansion, argpartition, sort of the k."""
    bn = (b * b).sum(1)
    ids = np.empty((len(q), k), dtype=np.int64)
    for s in range(0, len(q), qblock):
        qq = q[s : s + qblock]
        d = (qq * qq).sum(1)[:, None] + bn[None, :] - 2.0 * (qq @ b.T)
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, 1), axis=1, kind="stable")
        ids[s : s + qblock] = np.take_along_axis(part, order, 1)
    return ids


def numpy_matmul(b, q, qblock):
    """The matmul alone, same blocking: the BLAS bound."""
    acc = 0.0
    for s in range(0, len(q), qblock):
        acc += float((q[s : s + qblock] @ b.T)[0, 0])
    return acc


def median_time(fn, reps):
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2], out


def run_trawl(base_path, query_path, ids_path):
    cmd = [
        "cargo", "run", "--release", "-q", "-p", "trawl", "--example", "gt_bench", "--",
        "--base", base_path, "--query", query_path, "--dim", str(OPTS.dim),
        "--k", str(OPTS.k), "--threads", str(OPTS.threads), "--reps", str(OPTS.reps),
        "--ids-out", ids_path,
    ]
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout
    print(out.strip())
    return float(re.search(r"median_s=([0-9.]+)", out).group(1))


def main():
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((64, OPTS.dim), dtype=np.float32)
    b = mixture(rng, centres, OPTS.n)
    q = mixture(rng, centres, OPTS.nq)
    work = OPTS.workdir or tempfile.mkdtemp(prefix="gt_bench_")
    os.makedirs(work, exist_ok=True)
    base_path, query_path = os.path.join(work, "base.f32"), os.path.join(work, "query.f32")
    ids_path = os.path.join(work, "trawl_ids.u32")
    b.tofile(base_path)
    q.tofile(query_path)

    t_trawl = run_trawl(base_path, query_path, ids_path)
    t_np, np_ids = median_time(lambda: numpy_gt(b, q, OPTS.k, OPTS.query_block), OPTS.reps)
    t_mm, _ = median_time(lambda: numpy_matmul(b, q, OPTS.query_block), OPTS.reps)

    trawl_ids = np.fromfile(ids_path, dtype="<u4").reshape(OPTS.nq, OPTS.k)
    agree = np.mean([len(set(a) & set(c)) / OPTS.k for a, c in zip(trawl_ids, np_ids)])

    evals = OPTS.n * OPTS.nq
    print(f"numpy {np.__version__}, BLAS: {blas_name()}, threads={OPTS.threads}")
    print(f"data: n={OPTS.n} nq={OPTS.nq} dim={OPTS.dim} k={OPTS.k} (median of {OPTS.reps})")
    for name, t in (("trawl knn", t_trawl), ("numpy matmul+topk", t_np), ("numpy matmul only", t_mm)):
        print(f"{name:>18}: {t:8.3f} s  {OPTS.nq / t:10.1f} q/s  {evals / t:.3e} dist/s")
    print(f"ratio trawl/numpy full pipeline (throughput): {t_np / t_trawl:.2f}x")
    print(f"ratio trawl/numpy matmul only   (throughput): {t_mm / t_trawl:.2f}x")
    print(f"id agreement trawl vs numpy (recall@{OPTS.k}): {agree:.5f}")


def blas_name():
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # older numpy: no dict mode
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())

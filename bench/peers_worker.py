#!/usr/bin/env python3
"""The in-memory half of peers.py: faiss HNSW, faiss IVF-PQ (+ exact re-rank) and hnswlib.

Runs INSIDE bench/.venv-peers (faiss-cpu, hnswlib, numpy; made on demand by peers.py), one
subprocess per phase so the parent can measure each from outside (wall time, ru_maxrss and
/proc/<pid>/io through bench/measure_io.py).

  build:  read the base .fbin, L2-normalise it for cosine, build the index, write it to --index.
          The whole of that (load + build + save) is timed here, after the imports.
  search: read the index back into RAM, then for each sweep point one batch search of all the
          queries with --threads threads: QPS = nq / wall of that call; recall@k from the ids
          against the GT ids (the same recall_at_k as every other side).

Libraries (`--lib`):
  faiss-hnsw   faiss.IndexHNSWFlat(d, M), efConstruction; sweep hnsw.efSearch
  faiss-ivfpq  faiss.IndexRefineFlat(faiss.IndexIVFPQ(flat quantizer, d, nlist, m, 8)): IVF
               lists of m-byte PQ codes (by residual), then the k_factor * k best candidates
               re-ranked exactly with the full f32 vectors kept in RAM; sweep (nprobe, k_factor)
  hnswlib      hnswlib.Index(space, d), M, ef_construction; sweep ef

Metrics: l2 -> L2; ip -> inner product; cosine -> vectors (base and queries) L2-normalised here,
then inner product (faiss) or space 'cosine' (hnswlib, which normalises again: a no-op).

Each phase writes a JSON result file (--result). Needs numpy + faiss + hnswlib only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402

from common import read_fbin, read_gt, recall_at_k  # noqa: E402
from diskann_worker import _dist_version, _self_peak_rss_bytes  # noqa: E402

LIBS = ("faiss-hnsw", "faiss-ivfpq", "hnswlib")


def _vm_rss_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def load_vectors(path: str, metric: str) -> np.ndarray:
    x = np.ascontiguousarray(read_fbin(Path(path), mmap=False), dtype=np.float32)
    if metric == "cosine":
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        if (norms == 0).any():
            raise SystemExit(f"{path}: zero vectors, cannot normalise for cosine")
        x = np.ascontiguousarray(x / norms, dtype=np.float32)
    return x


def versions() -> dict:
    out = {"numpy": np.__version__, "python": sys.version.split()[0]}
    try:
        import faiss
        out["faiss"] = faiss.__version__
        out["faiss_compile_options"] = faiss.get_compile_options()
    except ImportError:
        pass
    out["hnswlib"] = _dist_version("hnswlib")
    return out


# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------

def build(args: argparse.Namespace) -> dict:
    import faiss
    import hnswlib

    faiss.omp_set_num_threads(args.threads)
    rss_before = _self_peak_rss_bytes()
    t0 = time.perf_counter()
    x = load_vectors(args.data, args.metric)
    n, d = x.shape
    t_load = time.perf_counter() - t0
    info: dict = {"n": n, "dim": d}
    faiss_metric = faiss.METRIC_L2 if args.metric == "l2" else faiss.METRIC_INNER_PRODUCT
    t1 = time.perf_counter()
    if args.lib == "faiss-hnsw":
        index = faiss.IndexHNSWFlat(d, args.M, faiss_metric)
        index.hnsw.efConstruction = args.ef_construction
        index.add(x)
        t_build = time.perf_counter() - t1
        t2 = time.perf_counter()
        faiss.write_index(index, args.index)
        info.update(M=args.M, ef_construction=args.ef_construction,
                    max_level=int(index.hnsw.max_level))
    elif args.lib == "faiss-ivfpq":
        if d % args.pq_m:
            raise SystemExit(f"PQ m={args.pq_m} does not divide the dimension {d}")
        quantizer = faiss.IndexFlat(d, faiss_metric)
        ivf = faiss.IndexIVFPQ(quantizer, d, args.nlist, args.pq_m, 8, faiss_metric)
        index = faiss.IndexRefineFlat(ivf)
        # Train on at most --train-max points (seeded sample); add every point.
        train = x
        if args.train_max and n > args.train_max:
            rows = np.sort(np.random.default_rng(1234).choice(n, args.train_max, replace=False))
            train = x[rows]
        tt = time.perf_counter()
        index.train(train)
        info["train_secs"] = time.perf_counter() - tt
        info["train_points"] = int(train.shape[0])
        index.add(x)
        t_build = time.perf_counter() - t1
        t2 = time.perf_counter()
        faiss.write_index(index, args.index)
        sizes = faiss.downcast_index(index.base_index).invlists
        lens = np.array([sizes.list_size(i) for i in range(args.nlist)])
        info.update(nlist=args.nlist, pq_m=args.pq_m, pq_nbits=8, by_residual=True,
                    list_len_min=int(lens.min()), list_len_max=int(lens.max()),
                    list_len_mean=float(lens.mean()), empty_lists=int((lens == 0).sum()))
        del quantizer, ivf
    elif args.lib == "hnswlib":
        space = {"l2": "l2", "ip": "ip", "cosine": "cosine"}[args.metric]
        index = hnswlib.Index(space=space, dim=d)
        index.init_index(max_elements=n, ef_construction=args.ef_construction, M=args.M,
                         random_seed=100)
        index.add_items(x, np.arange(n), num_threads=args.threads)
        t_build = time.perf_counter() - t1
        t2 = time.perf_counter()
        index.save_index(args.index)
        info.update(M=args.M, ef_construction=args.ef_construction, space=space)
    else:
        raise SystemExit(f"unknown --lib {args.lib}")
    t_save = time.perf_counter() - t2
    secs = time.perf_counter() - t0
    return {"lib": args.lib, "build_call_secs": secs, "load_secs": t_load,
            "index_build_secs": t_build, "save_secs": t_save,
            "rss_before_build_bytes": rss_before, "peak_rss_self_bytes": _self_peak_rss_bytes(),
            "index_file": args.index, "index_bytes": Path(args.index).stat().st_size,
            "metric": args.metric, "threads": args.threads, "info": info, **versions()}


# ---------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------

def sweep_points(args: argparse.Namespace) -> list[dict]:
    if args.lib == "faiss-ivfpq":
        return [{"nprobe": int(p), "k_factor": int(f)}
                for f in args.k_factors.split(",") for p in args.nprobes.split(",")]
    return [{"ef": int(e)} for e in args.efs.split(",")]


def param_str(p: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in p.items())


def search(args: argparse.Namespace) -> dict:
    import faiss
    import hnswlib

    faiss.omp_set_num_threads(args.threads)
    queries = load_vectors(args.queries, args.metric)
    gt_ids, _ = read_gt(Path(args.gt))
    nq = queries.shape[0]
    gt_ids = gt_ids[:nq]
    rss_before = _vm_rss_bytes()
    hwm_before = _self_peak_rss_bytes()
    t0 = time.perf_counter()
    if args.lib == "hnswlib":
        space = {"l2": "l2", "ip": "ip", "cosine": "cosine"}[args.metric]
        index = hnswlib.Index(space=space, dim=queries.shape[1])
        index.load_index(args.index)
        index.set_num_threads(args.threads)
    else:
        index = faiss.read_index(args.index)
    load_secs = time.perf_counter() - t0
    rss_after = _vm_rss_bytes()
    print(f"[worker] {args.lib}: index loaded in {load_secs:.2f}s, RSS {rss_before} -> "
          f"{rss_after}", flush=True)

    def run(p: dict):
        if args.lib == "hnswlib":
            index.set_ef(max(p["ef"], args.k))
            ids, _ = index.knn_query(queries, k=args.k, num_threads=args.threads)
            return ids
        if args.lib == "faiss-hnsw":
            index.hnsw.efSearch = max(p["ef"], args.k)
            _, ids = index.search(queries, args.k)
            return ids
        faiss.downcast_index(index.base_index).nprobe = p["nprobe"]
        index.k_factor = float(p["k_factor"])
        _, ids = index.search(queries, args.k)
        return ids

    points = sweep_points(args)
    if not args.no_warmup:  # one pass at the first point (threads, allocator, page faults)
        run(points[0])
    rows = []
    for p in points:
        walls, cpus, ids = [], [], None
        for _ in range(args.search_repeat):
            t, c = time.perf_counter(), time.process_time()
            ids = run(p)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        wall, cpu = float(np.median(walls)), float(np.median(cpus))
        row = {"param": param_str(p), **p, "recall": recall_at_k(ids, gt_ids, args.k),
               "qps": nq / wall,
               # batch search gives no per-query times: threads * wall / nq is the mean latency
               # if the threads were busy all the time (exact only for threads = 1).
               "mean_latency_us": args.threads * wall / nq * 1e6,
               "qps_per_cpu": nq / cpu if cpu > 0 else None,
               "pages_per_query": 0.0, "wall_secs_all": walls, "cpu_secs_all": cpus}
        rows.append(row)
        print(f"[worker] {row['param']} recall={row['recall']:.4f} qps={row['qps']:.0f}",
              flush=True)
    return {"lib": args.lib, "load_secs": load_secs, "k": args.k, "threads": args.threads,
            "nq": nq, "rss_before_load_bytes": rss_before, "hwm_before_load_bytes": hwm_before,
            "rss_after_load_bytes": rss_after, "peak_rss_self_bytes": _self_peak_rss_bytes(),
            "rows": rows, **versions()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--lib", required=True, choices=LIBS)
    b.add_argument("--data", required=True)
    b.add_argument("--metric", required=True, choices=["l2", "ip", "cosine"])
    b.add_argument("--index", required=True, help="index file to write")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("-M", type=int, default=32, help="HNSW M (both HNSW libraries)")
    b.add_argument("--ef-construction", type=int, default=100)
    b.add_argument("--nlist", type=int, default=0, help="IVF lists")
    b.add_argument("--pq-m", type=int, default=0, help="IVF-PQ sub-quantizers (bytes/vector)")
    b.add_argument("--train-max", type=int, default=0,
                   help="IVF-PQ: train on a seeded sample of at most N points (0 = all)")
    b.add_argument("--result", required=True)
    s = sub.add_parser("search")
    s.add_argument("--lib", required=True, choices=LIBS)
    s.add_argument("--index", required=True)
    s.add_argument("--metric", required=True, choices=["l2", "ip", "cosine"])
    s.add_argument("--queries", required=True)
    s.add_argument("--gt", required=True)
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--efs", default="10,20,40,80", help="HNSW: ef values")
    s.add_argument("--nprobes", default="1,4,16,64", help="IVF-PQ: nprobe values")
    s.add_argument("--k-factors", default="2,4,8", help="IVF-PQ: re-rank k_factor values")
    s.add_argument("--search-repeat", type=int, default=1)
    s.add_argument("--no-warmup", action="store_true")
    s.add_argument("--result", required=True)
    args = ap.parse_args()
    out = build(args) if args.cmd == "build" else search(args)
    Path(args.result).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()

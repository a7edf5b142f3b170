#!/usr/bin/env python3
"""The diskannpy half of vs_diskann_disk.py (DiskANN's SSD index). Runs INSIDE
bench/.venv-diskann (diskannpy 0.7.0, numpy 1.25), one subprocess per phase so the parent can
measure each (wall time, ru_maxrss) with bench/measure.py.

  build:  diskannpy.build_disk_index on an .fbin file (PQ + Vamana + disk layout); the call
          itself is timed here. Checks afterwards that the PQ code has the requested bytes per
          vector (header of ann_pq_compressed.bin).
  search: diskannpy.StaticDiskIndex (O_DIRECT + libaio reads, node cache) + batch_search at each
          L; recall@k against the GT ids; pages read from the device per query from the
          read_bytes counter of /proc/self/io (diskannpy returns no QueryStats).

Each phase writes a JSON result file (--result). Only numpy + diskannpy are needed.
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

SECTOR = 4096  # DiskANN's disk sector (defaults::SECTOR_LEN): every node read is whole sectors


def proc_io() -> dict:
    """This process's I/O counters (all threads). read_bytes counts bytes fetched from the block
    layer (submit_bio), so O_DIRECT/libaio reads issued by DiskANN's threads are counted and
    page-cache hits are not."""
    out = {}
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            k, v = line.split(":")
            out[k.strip()] = int(v)
    except OSError:
        pass
    return out


def _vm_rss_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def pq_header(index_dir: Path, prefix: str = "ann") -> dict:
    """(npts, bytes per vector) from the u32 header of <prefix>_pq_compressed.bin."""
    p = index_dir / f"{prefix}_pq_compressed.bin"
    npts, nchunks = (int(v) for v in np.fromfile(p, dtype="<u4", count=2))
    return {"npts": npts, "pq_bytes": nchunks, "file_bytes": p.stat().st_size}


def build(args: argparse.Namespace) -> dict:
    import diskannpy as dap  # imported before the baseline RSS is taken

    idx = Path(args.index_dir)
    idx.mkdir(parents=True, exist_ok=True)
    rss_before = _self_peak_rss_bytes()
    t0 = time.perf_counter()
    dap.build_disk_index(
        data=args.data, distance_metric=args.metric, index_directory=str(idx),
        complexity=args.L, graph_degree=args.R,
        search_memory_maximum=args.search_memory_gb, build_memory_maximum=args.build_memory_gb,
        num_threads=args.threads, pq_disk_bytes=0, vector_dtype=np.float32, index_prefix="ann",
    )
    secs = time.perf_counter() - t0
    sys.stdout.flush()
    pq = pq_header(idx)
    files = {p.name: p.stat().st_size for p in sorted(idx.iterdir()) if p.is_file()}
    result = {"build_call_secs": secs, "rss_before_build_bytes": rss_before,
              "peak_rss_self_bytes": _self_peak_rss_bytes(),
              "index_files": files, "index_bytes": sum(files.values()),
              "pq": pq,
              "diskannpy": getattr(dap, "__version__", None) or _dist_version("diskannpy"),
              "numpy": np.__version__, "python": sys.version.split()[0],
              "params": {"R": args.R, "L": args.L, "threads": args.threads, "metric": args.metric,
                         "search_memory_maximum_gb": args.search_memory_gb,
                         "build_memory_maximum_gb": args.build_memory_gb, "pq_disk_bytes": 0,
                         "expected_pq_bytes": args.expect_pq_bytes}}
    if args.expect_pq_bytes and pq["pq_bytes"] != args.expect_pq_bytes:
        Path(args.result).write_text(json.dumps(result, indent=2) + "\n")
        raise SystemExit(f"diskann used {pq['pq_bytes']} PQ bytes per vector, expected "
                         f"{args.expect_pq_bytes} (search_memory_maximum={args.search_memory_gb})")
    return result


def search(args: argparse.Namespace) -> dict:
    import diskannpy as dap

    queries = np.ascontiguousarray(read_fbin(Path(args.queries), mmap=False))
    gt_ids, _ = read_gt(Path(args.gt))
    if args.nq:
        queries, gt_ids = queries[: args.nq], gt_ids[: args.nq]
    nq = queries.shape[0]
    ls = [int(v) for v in args.Ls.split(",")]
    rss_before_load = _vm_rss_bytes()
    hwm_before_load = _self_peak_rss_bytes()
    io0 = proc_io()
    t0 = time.perf_counter()
    # DiskANN 0.7.0 deadlocks in load() with one thread context (use_medoids_data_as_centroids
    # borrows a second scratch while one is held; DiskANN issue #462, "search_disk_index hangs
    # when using single thread (-T 1)"). So load with >= 2 contexts; batch_search still runs
    # on args.threads OpenMP threads.
    load_threads = max(2, args.threads)
    # With no nodes to cache, no cache mechanism: mechanism 1 would still run every sample query
    # of ann_sample_data.bin through the disk index at load (GBs of reads, 20-60 s) only to
    # keep none of it. 0 disables caching (diskannpy: any value but 1 or 2); the search is the
    # same.
    mechanism = args.cache_mechanism if args.cache_nodes > 0 else 0
    index = dap.StaticDiskIndex(index_directory=args.index_dir, num_threads=load_threads,
                                num_nodes_to_cache=args.cache_nodes,
                                cache_mechanism=mechanism, index_prefix="ann")
    load_secs = time.perf_counter() - t0
    io1 = proc_io()
    rss_after_load = _vm_rss_bytes()
    sys.stdout.flush()
    print(f"[worker] index loaded in {load_secs:.2f}s, read {io1.get('read_bytes', 0) - io0.get('read_bytes', 0)} "
          f"bytes from the device, RSS {rss_after_load}", flush=True)
    # Warm-up: one pass at the smallest L (threads, aio contexts, allocator; O_DIRECT reads do
    # not warm the page cache, so the disk reads stay cold-path reads in every pass).
    if not args.no_warmup:
        index.batch_search(queries, k_neighbors=args.k, complexity=max(ls[0], args.k),
                           num_threads=args.threads, beam_width=args.beam_width)
    rows = []
    for L in ls:
        walls, cpus, reads, ids = [], [], [], None
        for _ in range(args.search_repeat):
            a = proc_io()
            t, c = time.perf_counter(), time.process_time()
            ids, _dists = index.batch_search(queries, k_neighbors=args.k, complexity=L,
                                             num_threads=args.threads, beam_width=args.beam_width)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            b = proc_io()
            reads.append(b.get("read_bytes", 0) - a.get("read_bytes", 0) if a and b else None)
        wall, cpu = float(np.median(walls)), float(np.median(cpus))
        rb = [r for r in reads if r is not None]
        read_bytes = float(np.median(rb)) if rb else None
        row = {"L": L, "recall": recall_at_k(ids, gt_ids, args.k), "qps": nq / wall,
               # batch_search gives no per-query times: threads * wall / nq is the mean latency
               # if the threads were busy all the time (exact only for threads = 1).
               "mean_latency_us": args.threads * wall / nq * 1e6,
               "qps_per_cpu": nq / cpu if cpu > 0 else None,
               # 4 KiB pages fetched from the device per query (DiskANN reads one sector per
               # node, nodes <= 4 KiB here, so this is also its n_ios per query).
               "pages_per_query": read_bytes / SECTOR / nq if read_bytes is not None else None,
               "read_bytes_per_query": read_bytes / nq if read_bytes is not None else None,
               "wall_secs_all": walls, "cpu_secs_all": cpus, "read_bytes_all": reads}
        rows.append(row)
        print(f"[worker] L={L} recall={row['recall']:.4f} qps={row['qps']:.0f} "
              f"pages/q={row['pages_per_query']}", flush=True)
    return {"load_secs": load_secs, "k": args.k, "threads": args.threads, "nq": nq,
            "load_threads": load_threads,
            "beam_width": args.beam_width, "cache_nodes": args.cache_nodes,
            "cache_mechanism": args.cache_mechanism, "cache_mechanism_used": mechanism,
            "load_read_bytes": io1.get("read_bytes", 0) - io0.get("read_bytes", 0),
            "rss_before_load_bytes": rss_before_load, "hwm_before_load_bytes": hwm_before_load,
            "rss_after_load_bytes": rss_after_load, "peak_rss_self_bytes": _self_peak_rss_bytes(),
            "proc_io_end": proc_io(), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--data", required=True)
    b.add_argument("--metric", required=True, choices=["l2", "mips"])
    b.add_argument("--index-dir", required=True)
    b.add_argument("-R", type=int, default=64)
    b.add_argument("-L", type=int, default=100)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--search-memory-gb", type=float, required=True)
    b.add_argument("--build-memory-gb", type=float, default=16.0)
    b.add_argument("--expect-pq-bytes", type=int, default=0)
    b.add_argument("--result", required=True)
    s = sub.add_parser("search")
    s.add_argument("--index-dir", required=True)
    s.add_argument("--queries", required=True)
    s.add_argument("--gt", required=True)
    s.add_argument("--nq", type=int, default=0, help="use the first NQ queries (0 = all)")
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--Ls", default="10,20,40,80")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--beam-width", type=int, default=4)
    s.add_argument("--cache-nodes", type=int, default=10000)
    s.add_argument("--cache-mechanism", type=int, default=1)
    s.add_argument("--search-repeat", type=int, default=1)
    s.add_argument("--no-warmup", action="store_true")
    s.add_argument("--result", required=True)
    args = ap.parse_args()
    out = build(args) if args.cmd == "build" else search(args)
    Path(args.result).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()

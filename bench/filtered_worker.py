#!/usr/bin/env python3
"""The peers' half of bench/filtered.py: builds and filtered searches of LanceDB, faiss HNSW and
diskannpy, each run INSIDE its own virtualenv (bench/.venv-lancedb, bench/.venv-peers,
bench/.venv-diskann), one process per phase so the driver measures each from outside.

Usage (the driver writes the job file):
  python filtered_worker.py JOB.json RESULT.json

JOB.json: {"peer": "lancedb" | "faiss-hnsw" | "diskann", "phase": "build" | "search",
           "dataset": {...filtered_data.FilteredDataset...}, "index": DIR, "params": {...},
           "cells": [{"name", "jsonl", "lance", "diskann", "gt"}], "nq", "threads",
           "sweep_threads", "stop_recall", "target", "knobs": {...}}

Search: per cell, the peer's knob is swept at `sweep_threads` threads (queries issued one per
call from a thread pool) until recall >= stop_recall; then at the best point whose recall is at
least `target` (highest QPS) every count of `threads` runs and each QPS is kept. Recall@10 with
denominator min(10, matches) against the cell's exact filtered GT (bench/filtered.py). Needs
numpy plus the peer's package; filtered_data.py and common.py come from bench/.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402

import filtered_data as fd  # noqa: E402
from common import read_fbin, read_gt  # noqa: E402

K = 10
PAD_ID = 0xFFFFFFFF


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] worker: {msg}", file=sys.stderr, flush=True)


def peak_rss() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cur_rss() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)


def dir_bytes(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def recall(found: list, gt_ids: np.ndarray) -> float:
    per = []
    for f, t in zip(found, gt_ids):
        t = t[t != PAD_ID].astype(np.int64)
        if t.size:
            f = np.asarray(f, dtype=np.int64)[:K]
            per.append(np.intersect1d(f[f >= 0], t).size / t.size)
    return float(np.mean(per)) if per else float("nan")


def run_pool(fn, nq: int, threads: int) -> tuple[list, float, np.ndarray]:
    """fn(i) for every query, `threads` at a time; (results, wall seconds, latencies µs)."""
    out: list = [None] * nq
    lat = np.zeros(nq)

    def one(i: int) -> None:
        t = time.perf_counter()
        out[i] = fn(i)
        lat[i] = (time.perf_counter() - t) * 1e6

    if threads == 1:
        t0 = time.perf_counter()
        for i in range(nq):
            one(i)
        return out, time.perf_counter() - t0, lat
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda _: None, range(threads)))  # threads started before the clock
        t0 = time.perf_counter()
        list(ex.map(one, range(nq)))
        wall = time.perf_counter() - t0
    return out, wall, lat


def plateau(points: list, stop_recall: float) -> bool:
    """A sweep ends once recall reaches stop_recall, or, above 0.3, has gained under 0.003 over
    its last two steps (more of the knob buys nothing)."""
    r = [p["recall"] for p in points]
    return r[-1] >= stop_recall or (len(r) >= 3 and r[-1] > 0.3 and r[-1] - r[-3] < 0.003)


def sweep_points(cell: dict, job: dict, knobs: list, make_fn, stop: bool = True,
                 clean=None) -> list:
    """Run `knobs` (dicts, cheapest first) for one cell at sweep_threads threads; make_fn(knob)
    -> fn(i) returning the ids of query i. Ends early at a plateau (see `plateau`). clean(i,
    ids) -> the valid ids, applied after the timed batch (recall and mean_results)."""
    nq = job["nq"]
    gt_ids, _ = read_gt(Path(cell["gt"]))
    gt_ids = gt_ids[:nq]
    st = job["sweep_threads"]
    points = []
    for knob in knobs:
        fn = make_fn(knob)
        fn(0)  # warm this configuration once
        ids, wall, lat = run_pool(fn, nq, st)
        if clean is not None:
            ids = [clean(i, x) for i, x in enumerate(ids)]
        r = recall(ids, gt_ids)
        p = {**knob, "recall": r, "qps": nq / wall, "threads": st,
             "mean_us": float(lat.mean()), "p50_us": float(np.percentile(lat, 50)),
             "p99_us": float(np.percentile(lat, 99)),
             "mean_results": float(np.mean([len(x) for x in ids]))}
        points.append(p)
        log(f"{cell['name']} {knob}: recall {r:.4f}, {p['qps']:.0f} QPS ({st} threads)")
        if stop and plateau(points, job["stop_recall"]):
            break
    return points


def best_over_threads(cell: dict, job: dict, points: list, keys: tuple, make_fn) -> dict | None:
    """At the point with recall >= target and the highest QPS, run every thread count of
    job["threads"]; the best QPS (ties: fewer threads) and every count's."""
    ok = [p for p in points if p["recall"] >= job["target"]]
    if not ok:
        return None
    p = max(ok, key=lambda p: p["qps"])
    knob = {k: p[k] for k in keys if k in p}
    fn = make_fn(knob)
    per_threads = {p["threads"]: p["qps"]}
    for t in job["threads"]:
        if t not in per_threads:
            _, wall, _ = run_pool(fn, job["nq"], t)
            per_threads[t] = job["nq"] / wall
    bt = max(per_threads, key=lambda t: (per_threads[t], -t))
    log(f"{cell['name']} best at recall >= {job['target']}: {knob} {per_threads[bt]:.0f} QPS "
        f"({bt} threads)")
    return {"knob": knob, "recall": p["recall"], "qps": per_threads[bt], "threads": bt,
            "qps_per_threads": {str(t): q for t, q in sorted(per_threads.items())}}


def sweep(cell: dict, job: dict, knobs: list, make_fn, clean=None) -> dict:
    """sweep_points, then best_over_threads: {"points", "best", "max_recall"}."""
    points = sweep_points(cell, job, knobs, make_fn, clean=clean)
    best = best_over_threads(cell, job, points, tuple(knobs[0]), make_fn)
    return {"points": points, "best": best,
            "max_recall": max((p["recall"] for p in points), default=None)}


def load_cells(job: dict) -> list[dict]:
    for c in job["cells"]:
        with open(c["jsonl"]) as f:
            c["rows"] = [json.loads(line) for _, line in zip(range(job["nq"]), f)]
    return job["cells"]


# ---------------------------------------------------------------------------------------------
# LanceDB
# ---------------------------------------------------------------------------------------------

def import_lancedb():
    """lancedb, imported with bench/ off the path: LanceDB probes for Hugging Face's `datasets`
    package, which bench/datasets.py would shadow."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.modules.pop("datasets", None)
    import lancedb
    return lancedb


def lance_build(job: dict) -> dict:
    lancedb = import_lancedb()
    import pyarrow as pa
    from lancedb.index import BTree, Bitmap, IvfPq, LabelList

    ds, p = job["dataset"], job["params"]
    x = np.asarray(read_fbin(Path(ds["base"])), dtype=np.float32)
    n, dim = x.shape
    labels = fd.read_labels(Path(ds["labels"]))
    attrs = fd.read_attrs(Path(ds["attrs"]))
    kinds = p["label_columns"]
    cols = {"id": pa.array(np.arange(n, dtype=np.uint32)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), dim)}
    for field, kind in kinds.items():
        vals = [[fd.label_key(lab)[1] for lab in ls if fd.label_key(lab)[0] == field]
                for ls in labels]
        name = fd.lance_column_name(field)
        cols[name] = (pa.array(vals, pa.list_(pa.string())) if kind == "list" else
                      pa.array([v[0] if v else None for v in vals], pa.string()))
    for key in ds["numeric_fields"]:
        cols[f"n_{key}"] = pa.array([a.get(key) for a in attrs], pa.int64())
    table = pa.table(cols)
    del x
    rss0 = cur_rss()
    t0 = time.perf_counter()
    db = lancedb.connect(job["index"])
    t = db.create_table("t", table, mode="overwrite")
    t_data = time.perf_counter() - t0
    t.create_index("vector", config=IvfPq(distance_type="cosine",
                                          num_partitions=p["partitions"],
                                          num_sub_vectors=p["sub_vectors"]))
    t_vec = time.perf_counter() - t0 - t_data
    for field, kind in kinds.items():
        t.create_index(fd.lance_column_name(field),
                       config=LabelList() if kind == "list" else Bitmap())
    for key in ds["numeric_fields"]:
        t.create_index(f"n_{key}", config=BTree())
    secs = time.perf_counter() - t0
    return {"build_secs": secs, "data_secs": t_data, "vector_index_secs": t_vec,
            "scalar_index_secs": secs - t_data - t_vec,
            "indices": [str(i.name) + ":" + str(i.index_type) for i in t.list_indices()],
            "disk_bytes": dir_bytes(Path(job["index"])), "rss_before_bytes": rss0,
            "peak_rss_self_bytes": peak_rss(), "lancedb": lancedb.__version__,
            "pyarrow": pa.__version__}


def lance_search(job: dict) -> dict:
    lancedb = import_lancedb()

    ds, p = job["dataset"], job["params"]
    q = np.asarray(read_fbin(Path(ds["queries"])), dtype=np.float32)[:job["nq"]]
    rss0 = cur_rss()
    db = lancedb.connect(job["index"], session=lancedb.Session(
        index_cache_size_bytes=p["index_cache_bytes"]))
    t = db.open_table("t")

    def query(i: int, sql, knob: dict):
        b = t.search(q[i]).distance_type("cosine")
        if sql:
            b = b.where(sql, prefilter=True)
        if knob.get("flat"):
            b = b.bypass_vector_index()
        else:
            b = b.nprobes(knob["nprobes"])
            if knob.get("refine"):
                b = b.refine_factor(knob["refine"])
        return b.limit(K).select(["id", "_distance"]).to_arrow()["id"].to_numpy()

    # Warm-up: the index's partitions into the (capped) cache, unfiltered, widest probe.
    t0 = time.perf_counter()
    for i in range(min(len(q), 200)):
        query(i, None, {"nprobes": max(p["nprobes"])})
    warm = time.perf_counter() - t0
    out = {"warmup_secs": warm, "cells": {}}
    for cell in load_cells(job):
        sqls = Path(cell["lance"]).read_text().split("\n")[:job["nq"]]
        sqls = [s or None for s in sqls]
        def make(k):
            return lambda i: query(i, sqls[i], k)

        # One refine factor at a time, nprobes rising (each series to its plateau), then the
        # thread counts at the best point of all series.
        pts = []
        for r in p["refine"]:
            pts += sweep_points(cell, job, [{"nprobes": n, "refine": r} for n in p["nprobes"]],
                                make)
        res = {"points": pts, "max_recall": max((x["recall"] for x in pts), default=None),
               "best": best_over_threads(cell, job, pts, ("nprobes", "refine"), make)}
        if cell["median_sel"] <= p["flat_max_sel"]:
            res["flat"] = sweep(cell, job, [{"flat": True}], make)
        out["cells"][cell["name"]] = res
    out["rss_before_open_bytes"] = rss0
    out["peak_rss_self_bytes"] = peak_rss()
    out["lancedb"] = lancedb.__version__
    return out


# ---------------------------------------------------------------------------------------------
# faiss HNSW with an ID-selector bitmap
# ---------------------------------------------------------------------------------------------

def faiss_build(job: dict) -> dict:
    import faiss

    ds, p = job["dataset"], job["params"]
    x = unit(read_fbin(Path(ds["base"])))
    faiss.omp_set_num_threads(p["threads"])
    t0 = time.perf_counter()
    index = faiss.IndexHNSWFlat(x.shape[1], p["M"], faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = p["efc"]
    index.add(x)
    secs = time.perf_counter() - t0
    faiss.write_index(index, job["index"])
    return {"build_secs": secs, "disk_bytes": dir_bytes(Path(job["index"])),
            "peak_rss_self_bytes": peak_rss(), "faiss": faiss.__version__}


def faiss_search(job: dict) -> dict:
    import faiss

    ds, p = job["dataset"], job["params"]
    q = unit(read_fbin(Path(ds["queries"]))[:job["nq"]])
    rss0 = cur_rss()
    index = faiss.read_index(job["index"])
    rss_index = cur_rss() - rss0
    faiss.omp_set_num_threads(1)  # one query per call; the thread pool gives the parallelism
    idx = fd.AttrIndex.from_files(ds["labels"], ds["attrs"])
    n = index.ntotal
    out = {"index_rss_bytes": rss_index, "cells": {}}
    for cell in load_cells(job):
        t0 = time.perf_counter()
        bitmaps = []
        for r in cell["rows"]:
            if r["filter"]["op"] == "all":
                bitmaps.append(None)
                continue
            m = np.zeros(n, dtype=bool)
            m[idx.ids(r["filter"])] = True
            bitmaps.append(np.packbits(m, bitorder="little"))
        filter_us = (time.perf_counter() - t0) / len(cell["rows"]) * 1e6
        sels = [faiss.IDSelectorBitmap(n, faiss.swig_ptr(b)) if b is not None else None
                for b in bitmaps]

        def make(knob: dict):
            params = []
            for s in sels:
                sp = faiss.SearchParametersHNSW()
                sp.efSearch = knob["ef"]
                if s is not None:
                    sp.sel = s
                params.append(sp)

            def fn(i: int):
                _, ids = index.search(q[i:i + 1], K, params=params[i])
                return ids[0]
            return fn

        knobs = [{"ef": e} for e in p["ef"]]
        res = sweep(cell, job, knobs, make)
        res["filter_us_per_query"] = filter_us
        out["cells"][cell["name"]] = res
    out["peak_rss_self_bytes"] = peak_rss()
    out["faiss"] = faiss.__version__
    return out


# ---------------------------------------------------------------------------------------------
# diskannpy: filtered in-memory Vamana (one label per query)
# ---------------------------------------------------------------------------------------------

NO_LABEL = "__none__"


def diskann_build(job: dict) -> dict:
    import diskannpy as dap

    ds, p = job["dataset"], job["params"]
    labels = fd.read_labels(Path(ds["labels"]))
    # DiskANN wants a label on every point: a vector without any gets one no filter names.
    labels = [ls if ls else [NO_LABEL] for ls in labels]
    os.makedirs(job["index"], exist_ok=True)
    t0 = time.perf_counter()
    dap.build_memory_index(
        data=p["unit_base"], distance_metric="l2", index_directory=job["index"],
        complexity=p["L"], graph_degree=p["R"], num_threads=p["threads"], alpha=p["alpha"],
        vector_dtype=np.float32, filter_labels=labels, universal_label="",
        filter_complexity=p["filter_L"], index_prefix="ann")
    secs = time.perf_counter() - t0
    return {"build_secs": secs, "disk_bytes": dir_bytes(Path(job["index"])),
            "peak_rss_self_bytes": peak_rss(), "numpy": np.__version__,
            "label_awareness": label_awareness(Path(job["index"]) / "ann", labels)}


def label_awareness(graph: Path, labels: list[list[str]]) -> list[dict]:
    """How label-aware the built graph is: for labels of several frequencies, the mean number
    of out-neighbours of a point of the label that carry the label, against what a graph blind
    to labels would give (degree x frequency). Filtered Vamana should be far above chance for
    rare labels. Graph file: u64 size, u32 max degree, u32 start, u64 frozen; per node u32 k
    and k u32 ids."""
    raw = np.fromfile(graph, dtype=np.uint32)
    pos, nbrs = 6, []
    while pos < raw.size:
        k = int(raw[pos])
        nbrs.append(raw[pos + 1:pos + 1 + k])
        pos += 1 + k
    n = len(nbrs)
    idx = fd.AttrIndex(labels, [{} for _ in labels])
    by_freq = sorted(idx.counts, key=lambda lab: -idx.counts[lab])
    picks = [by_freq[int(i)] for i in np.unique(np.geomspace(1, len(by_freq), 6).astype(int) - 1)]
    out = []
    for lab in picks:
        m = idx.mask(lab)
        pts = idx.postings[lab]
        deg = np.mean([nbrs[p].size for p in pts])
        out.append({"label": lab, "count": int(pts.size),
                    "same_label_neighbours": float(np.mean([m[nbrs[p]].sum() for p in pts])),
                    "chance": float(deg * (pts.size - 1) / (n - 1))})
    return out


def diskann_search(job: dict) -> dict:
    import diskannpy as dap

    ds, p = job["dataset"], job["params"]
    q = unit(read_fbin(Path(ds["queries"]))[:job["nq"]])
    rss0 = cur_rss()
    index = dap.StaticMemoryIndex(index_directory=job["index"], num_threads=max(job["threads"]),
                                  initial_search_complexity=max(p["L"]), index_prefix="ann",
                                  distance_metric="l2", vector_dtype=np.float32,
                                  dimensions=q.shape[1], enable_filters=True)
    out = {"index_rss_bytes": cur_rss() - rss0, "cells": {}}
    # diskannpy 0.7.0's search(filter_label=) returns k slots whatever it found: when the
    # filtered search reaches fewer than k points ("Found fewer than K elements for query" on
    # stderr) the rest are uninitialised memory (any id, a denormal distance). A real result
    # carries the query's label, so the ids kept for recall are those that carry it.
    labels_of = fd.read_labels(Path(ds["labels"]))
    post: dict = {}
    for j, ls in enumerate(labels_of):
        for lab in ls:
            post.setdefault(lab, []).append(j)
    postings = {lab: np.asarray(v, dtype=np.int64) for lab, v in post.items()}
    del labels_of, post
    for cell in load_cells(job):
        labs = Path(cell["diskann"]).read_text().split("\n")[:job["nq"]]

        def make(knob: dict):
            def fn(i: int):
                r = index.search(q[i], K, knob["L"], filter_label=labs[i])
                return np.asarray(r.identifiers)
            return fn

        def clean(i: int, ids: np.ndarray) -> np.ndarray:
            if not labs[i]:
                return ids
            m = postings.get(labs[i], np.zeros(0, dtype=np.int64))
            ids = np.asarray(ids, dtype=np.int64)
            pos = np.searchsorted(m, ids)
            ok = (pos < m.size) & (m[np.minimum(pos, max(m.size - 1, 0))] == ids) \
                if m.size else np.zeros(ids.size, dtype=bool)
            return ids[ok]

        res = sweep(cell, job, [{"L": v} for v in p["L"]], make, clean=clean)
        out["cells"][cell["name"]] = res
    out["peak_rss_self_bytes"] = peak_rss()
    return out


PHASES = {("lancedb", "build"): lance_build, ("lancedb", "search"): lance_search,
          ("faiss-hnsw", "build"): faiss_build, ("faiss-hnsw", "search"): faiss_search,
          ("diskann", "build"): diskann_build, ("diskann", "search"): diskann_search}


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    res = PHASES[(job["peer"], job["phase"])](job)
    res["python"] = sys.version.split()[0]
    tmp = Path(sys.argv[2] + ".tmp")
    tmp.write_text(json.dumps(res, indent=1) + "\n")
    os.replace(tmp, sys.argv[2])


if __name__ == "__main__":
    main()

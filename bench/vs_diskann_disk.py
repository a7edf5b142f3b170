#!/usr/bin/env python3
"""Side-by-side SSD index: trawl (`trawl build` / `trawl bench`) vs diskannpy
(`build_disk_index` + `StaticDiskIndex`), same data, R, L, PQ bytes per vector, threads, k,
search L list, beam width and number of cached nodes.

Every build and every search sweep runs in a child process of its own, measured from outside
(wall time, ru_maxrss, and the /proc/<pid>/io device-read counter) by bench/measure_io.py.
diskannpy runs in bench/.venv-diskann (see vs_diskann.py). Built indexes are kept in the dataset
cache (.bench-cache/<dataset>/{diskann,trawl}-disk-<metric>-R<R>-L<L>-pq<M>/) and reused while
their parameters (and, for trawl, the binary) match, unless --rebuild.

Usage:
  python3 bench/vs_diskann_disk.py glove-400k                     # both sides
  python3 bench/vs_diskann_disk.py gen-1m --repeat 3 --rebuild    # 3 builds + 3 search rounds
  python3 bench/vs_diskann_disk.py glove-400k --sides diskann --search-L 10,40,100
  python3 bench/vs_diskann_disk.py glove-400k --report-only       # re-render from bench/out/raw/

Writes bench/out/vs_diskann_disk-<dataset>.{md,csv,json} (raw per-side JSON under
bench/out/raw/<dataset>.disk.<side>.json) and, when bench/.venv-plot exists, PNG plots through
bench/plot_bench.py.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import (BENCH_DIR, OUT_DIR, Measured, log, machine_info, read_fbin,  # noqa: E402
                    read_gt, trawl_bin, trawl_version, warm_page_cache, write_fbin, write_gt,
                    write_json)
from vs_diskann import DEFAULT_VENV, ensure_venv, venv_freeze  # noqa: E402

MIB = 1024 * 1024
GIB = 1024 ** 3
PLOT_VENV = BENCH_DIR / ".venv-plot"
TARGETS = (0.90, 0.95)
# DiskANN (src/disk_utils.cpp, build_disk_index / get_memory_budget): the search RAM budget B
# (GB, passed through std::to_string, i.e. 6 decimals) becomes
#   limit = (B - 0.25 if B - 0.25 > 1.0 else B) * 2^30 bytes,
#   num_pq_chunks = floor(limit / npts), clamped to [1, min(dim, 512)].
SPACE_FOR_CACHED_NODES_IN_GB = 0.25
THRESHOLD_FOR_CACHING_IN_GB = 1.0
MAX_PQ_CHUNKS = 512


# ---------------------------------------------------------------------------------------------
# PQ bytes: DiskANN's search_memory_maximum that gives exactly M bytes per vector
# ---------------------------------------------------------------------------------------------

def diskann_pq_chunks(budget_gb_str: str, npts: int, dim: int) -> int:
    """What DiskANN's build_disk_index derives from the budget string (see the note above)."""
    b = float(budget_gb_str)
    limit = b - SPACE_FOR_CACHED_NODES_IN_GB if b - SPACE_FOR_CACHED_NODES_IN_GB > \
        THRESHOLD_FOR_CACHING_IN_GB else b
    chunks = int(limit * 1024 * 1024 * 1024 / float(npts))
    return max(1, min(chunks, dim, MAX_PQ_CHUNKS))


def diskann_search_memory_gb(pq_bytes: int, npts: int, dim: int) -> float:
    """search_memory_maximum (GB) for which DiskANN compresses to exactly `pq_bytes` per vector.

    Aim at (M + 0.5) * npts bytes (the middle of the floor's interval, so the 6-decimal rounding
    of std::to_string, ~1 KiB, cannot tip it) and add the 0.25 GB DiskANN sets aside for cached
    nodes when the budget is above 1.25 GB. The naive M * npts / 2^30 gives M - 1 after rounding.
    """
    if not 1 <= pq_bytes <= min(dim, MAX_PQ_CHUNKS):
        raise SystemExit(f"--pq-bytes {pq_bytes}: DiskANN allows 1..min(dim={dim}, 512)")
    for extra in (0.0, SPACE_FOR_CACHED_NODES_IN_GB):
        for frac in (0.5, 0.25, 0.75):
            s = f"{(pq_bytes + frac) * npts / GIB + extra:.6f}"
            if diskann_pq_chunks(s, npts, dim) == pq_bytes:
                return float(s)
    raise SystemExit(f"no search_memory_maximum gives {pq_bytes} PQ bytes for {npts} points")


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

def unit_copy(src: Path) -> Path:
    """L2-normalised copy of an .fbin next to it (`<stem>.unit.fbin`), made once."""
    dst = src.with_name(src.stem + ".unit.fbin")
    if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime:
        return dst
    x = read_fbin(src, mmap=False).astype(np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise SystemExit(f"{src}: zero vectors, cannot normalise for cosine")
    log(f"writing L2-normalised copy {dst}")
    write_fbin(dst, (x / norms).astype(np.float32))
    return dst


SUBSET_SEED = 7


def subset(q: Path, gt: Path, nq: int, folder: Path) -> tuple[Path, Path]:
    """A seeded random sample of `nq` queries (kept in query order) and their GT rows, for the
    1-thread sweep; made once. Not the first nq: GloVe's queries are in word-frequency order,
    and the frequent words are far easier (recall@10 0.95 vs 0.84 at L = 10)."""
    folder.mkdir(parents=True, exist_ok=True)
    qo, go = folder / f"{q.stem}.sample{nq}.fbin", folder / f"{gt.stem}.sample{nq}.bin"
    if qo.exists() and go.exists():
        return qo, go
    queries = read_fbin(q, mmap=False)
    if nq >= queries.shape[0]:
        return q, gt
    rows = np.sort(np.random.default_rng(SUBSET_SEED).choice(queries.shape[0], nq, replace=False))
    write_fbin(qo, queries[rows])
    ids, dists = read_gt(gt)
    write_gt(go, ids[rows], dists[rows])
    return qo, go


def dir_bytes(p: Path) -> dict:
    files = {f.name: f.stat().st_size for f in sorted(p.rglob("*")) if f.is_file()}
    return {"total": sum(files.values()), "files": files}


# ---------------------------------------------------------------------------------------------
# Measured children
# ---------------------------------------------------------------------------------------------

def run_io(cmd: list[str], log_path: Path, env: dict | None = None) -> tuple[Measured, dict | None]:
    """common.run_measured through measure_io.py: also the child's /proc/<pid>/io at exit."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    res = Path(str(log_path) + ".rusage.json")
    res.unlink(missing_ok=True)
    launcher = [sys.executable, "-S", str(BENCH_DIR / "measure_io.py"), str(res)]
    with open(log_path, "wb") as logf:
        proc = subprocess.run(launcher + [str(c) for c in cmd], stdout=logf,
                              stderr=subprocess.STDOUT, env=env)
    if not res.exists():
        raise RuntimeError(f"launcher failed (rc={proc.returncode}) for {' '.join(map(str, cmd))}")
    r = json.loads(res.read_text())
    m = Measured(r["returncode"], r["wall_secs"], r["peak_rss_bytes"], r["user_secs"],
                 r["sys_secs"], str(log_path))
    if m.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"command failed (rc={m.returncode}): {' '.join(map(str, cmd))}\n{tail}")
    return m, r.get("proc_io")


def maybe_drop_caches(args: argparse.Namespace) -> None:
    if not args.drop_caches:
        return
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as e:
        log(f"cannot drop the page cache ({e}); going on without")


# ---------------------------------------------------------------------------------------------
# Index cache
# ---------------------------------------------------------------------------------------------

PARAMS_FILE = "bench-params.json"


def cached_build(idx: Path, params: dict) -> dict | None:
    """The stored build record if `idx` was completed with exactly these parameters."""
    p = idx / PARAMS_FILE
    if not p.exists():
        return None
    rec = json.loads(p.read_text())
    return rec if rec.get("params") == params else None


def trawl_identity() -> dict:
    exe = trawl_bin()
    st = exe.stat()
    return {"bin": str(exe), "size": st.st_size, "mtime": int(st.st_mtime),
            "version": trawl_version()}


# ---------------------------------------------------------------------------------------------
# diskann side
# ---------------------------------------------------------------------------------------------

class DiskannSide:
    name = "diskann"

    def __init__(self, ds: datasets.Dataset, args: argparse.Namespace, py: Path):
        self.ds, self.args, self.py = ds, args, py
        self.metric = {"l2": "l2", "ip": "mips", "cosine": "l2"}[ds.metric]
        if ds.metric == "cosine":  # diskannpy's disk index rejects cosine: unit vectors + L2
            self.base, self.query = unit_copy(Path(ds.base)), unit_copy(Path(ds.query))
        else:
            self.base, self.query = Path(ds.base), Path(ds.query)
        eff_dim = ds.dim + (1 if self.metric == "mips" else 0)  # MIPS adds one coordinate
        self.search_memory_gb = diskann_search_memory_gb(args.pq_bytes, ds.n, eff_dim)
        self.params = {"R": args.R, "L": args.L, "pq_bytes": args.pq_bytes, "metric": self.metric,
                       "threads": args.threads, "data": str(self.base),
                       "data_bytes": self.base.stat().st_size,
                       "search_memory_maximum_gb": self.search_memory_gb,
                       "build_memory_maximum_gb": args.build_memory_gb,
                       "diskannpy": "0.7.0"}
        self.idx = Path(ds.base).parent / (f"diskann-disk-{self.metric}-R{args.R}-L{args.L}"
                                           f"-pq{args.pq_bytes}")
        self.env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
                        MKL_NUM_THREADS=str(args.threads))

    def build(self, work: Path) -> dict:
        rec = None if self.args.rebuild else cached_build(self.idx, self.params)
        if rec:
            log(f"  diskann: reusing {self.idx} (built {rec['when']})")
            return dict(rec["build"], reused=True, reused_from=rec["when"])
        shutil.rmtree(self.idx, ignore_errors=True)
        self.idx.mkdir(parents=True)
        warm_page_cache(self.base)
        res = work / "diskann-build.json"
        m, io = run_io([str(self.py), str(BENCH_DIR / "diskann_disk_worker.py"), "build",
                        "--data", self.base, "--metric", self.metric, "--index-dir", self.idx,
                        "-R", self.args.R, "-L", self.args.L, "--threads", self.args.threads,
                        "--search-memory-gb", repr(self.search_memory_gb),
                        "--build-memory-gb", self.args.build_memory_gb,
                        "--expect-pq-bytes", self.args.pq_bytes, "--result", res],
                       work / "diskann-build.log", env=self.env)
        inner = json.loads(res.read_text())
        text = Path(m.log_path).read_text(errors="replace")
        said = [ln.strip() for ln in text.splitlines()
                if "bytes per vector" in ln or "Index built with degree" in ln
                or "Query RAM budget" in ln or ln.startswith("Indexing time")
                or ln.startswith("Time for ")]
        steps = {}
        for ln in said:  # DiskANN's own step timings: PQ, Vamana graph, disk layout
            mt = re.match(r"Time for (.+?): ([0-9.]+) seconds", ln)
            if mt:
                steps[mt.group(1)] = float(mt.group(2))
        db = dir_bytes(self.idx)
        build = {"build_secs": inner["build_call_secs"], "process_wall_secs": m.wall_secs,
                 "peak_rss_bytes": m.peak_rss_bytes,
                 "baseline_rss_bytes": inner["rss_before_build_bytes"],
                 "vmhwm_bytes": inner["peak_rss_self_bytes"],
                 "cpu_secs": m.user_secs + m.sys_secs,
                 "disk_bytes": db["total"],
                 # ann_mem.index.data is a full-precision copy left by the build; the disk
                 # search never opens it (checked by loading and searching without it).
                 "disk_bytes_search": db["total"] - db["files"].get("ann_mem.index.data", 0),
                 "files": db["files"], "pq_bytes_used": inner["pq"]["pq_bytes"],
                 "search_memory_maximum_gb": self.search_memory_gb, "build_log_lines": said,
                 "build_steps_secs": steps,
                 "proc_io": io, "log": m.log_path, "reused": False,
                 "versions": {k: inner[k] for k in ("diskannpy", "numpy", "python")},
                 "loadavg_after": os.getloadavg()}
        write_json(self.idx / PARAMS_FILE, {"params": self.params, "build": build,
                                            "when": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                  time.gmtime())})
        return build

    def search(self, work: Path, threads: int, ls: str, tag: str, nq: int) -> dict:
        q, gt = self.query, Path(self.ds.gt)
        if nq:
            q, gt = subset(q, gt, nq, Path(self.ds.base).parent / "subsets")
        res = work / f"diskann-search-{tag}.json"
        # Thread pinning follows this sweep's count (peers.py sweeps several per side).
        env = dict(self.env, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                   OPENBLAS_NUM_THREADS=str(threads))
        maybe_drop_caches(self.args)
        m, io = run_io([str(self.py), str(BENCH_DIR / "diskann_disk_worker.py"), "search",
                        "--index-dir", self.idx, "--queries", q, "--gt", gt, "-k", self.args.k,
                        "--Ls", ls, "--threads", threads, "--beam-width", self.args.beam_width,
                        "--cache-nodes", self.args.cache_nodes,
                        "--cache-mechanism", {"freq": 1, "bfs": 2}[self.args.cache_policy],
                        "--search-repeat", self.args.search_repeat, "--result", res],
                       work / f"diskann-search-{tag}.log", env=env)
        s = json.loads(res.read_text())
        rows = [{"L": r["L"], "recall": r["recall"], "qps": r["qps"],
                 "mean_latency_us": r["mean_latency_us"], "p50_us": None, "p99_us": None,
                 "p999_us": None, "pages_per_query": r["pages_per_query"],
                 "ios_per_query": r["pages_per_query"], "hops_per_query": None,
                 "qps_per_cpu": r["qps_per_cpu"]} for r in s["rows"]]
        return {"threads": threads, "nq": s["nq"], "rows": rows, "load_secs": s["load_secs"],
                "process": m.to_dict(), "proc_io": io, "peak_rss_bytes": m.peak_rss_bytes,
                "baseline_rss_bytes": s["hwm_before_load_bytes"], "io": "libaio, O_DIRECT",
                "load_read_bytes": s["load_read_bytes"], "worker": s}


# ---------------------------------------------------------------------------------------------
# trawl side
# ---------------------------------------------------------------------------------------------

class TrawlSide:
    name = "trawl"

    def __init__(self, ds: datasets.Dataset, args: argparse.Namespace):
        self.ds, self.args = ds, args
        self.exe = str(trawl_bin())
        self.params = {"R": args.R, "L": args.L, "pq_bytes": args.pq_bytes, "metric": ds.metric,
                       "threads": args.threads, "data": ds.base,
                       "data_bytes": Path(ds.base).stat().st_size, "trawl": trawl_identity()}
        # `--opq` (optimised PQ) is part of the build's identity when on; absent, the params
        # and directory names stay as they were, so older cached builds are still reused.
        self.opq = bool(getattr(args, "opq", False))
        if self.opq:
            self.params["opq"] = True
        self.idx = Path(ds.base).parent / (f"trawl-disk-{ds.metric}-R{args.R}-L{args.L}"
                                           f"-pq{args.pq_bytes}{'-opq' if self.opq else ''}")

    def build(self, work: Path) -> dict:
        rec = None if self.args.rebuild else cached_build(self.idx, self.params)
        if rec:
            log(f"  trawl: reusing {self.idx} (built {rec['when']})")
            return dict(rec["build"], reused=True, reused_from=rec["when"])
        shutil.rmtree(self.idx, ignore_errors=True)
        warm_page_cache(Path(self.ds.base))
        report = work / "trawl-build-report.json"
        m, io = run_io([self.exe, "build", self.ds.base, self.idx, "--metric", self.ds.metric,
                        "-R", self.args.R, "-L", self.args.L, "--pq-bytes", self.args.pq_bytes,
                        "--threads", self.args.threads, "--alpha", "1.2", "--report", report,
                        "--quiet", *(["--opq"] if self.opq else [])],
                       work / "trawl-build.log")
        rep = json.loads(report.read_text())
        db = dir_bytes(self.idx)
        build = {"build_secs": m.wall_secs, "process_wall_secs": m.wall_secs,
                 "self_reported_total_secs": rep.get("total_secs"),
                 "self_reported_peak_rss_bytes": rep.get("peak_rss_bytes"),
                 "self_reported_disk_bytes": rep.get("disk_bytes"),
                 "peak_rss_bytes": m.peak_rss_bytes, "baseline_rss_bytes": 0,
                 "cpu_secs": m.user_secs + m.sys_secs, "disk_bytes": db["total"],
                 "disk_bytes_search": db["total"], "files": db["files"],
                 "pq_bytes_used": rep.get("pq_bytes_per_vector"), "report": rep,
                 "proc_io": io, "log": m.log_path, "reused": False,
                 "versions": {"trawl": trawl_version()}, "loadavg_after": os.getloadavg()}
        self.idx.mkdir(parents=True, exist_ok=True)
        write_json(self.idx / PARAMS_FILE, {"params": self.params, "build": build,
                                            "when": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                  time.gmtime())})
        return build

    def search(self, work: Path, threads: int, ls: str, tag: str, nq: int) -> dict:
        q, gt = Path(self.ds.query), Path(self.ds.gt)
        if nq:
            q, gt = subset(q, gt, nq, Path(self.ds.base).parent / "subsets")
        out = work / f"trawl-search-{tag}.json"
        maybe_drop_caches(self.args)
        m, io = run_io([self.exe, "bench", self.idx, "--queries", q, "--gt", gt,
                        "-k", self.args.k, "-L", ls, "--threads", threads,
                        "--beam-width", self.args.beam_width,
                        "--cache-nodes", self.args.cache_nodes,
                        "--cache-policy", self.args.cache_policy, "--json", out, "--quiet"],
                       work / f"trawl-search-{tag}.log")
        s = json.loads(out.read_text())
        rows = []
        for r in s["rows"]:
            lat = r.get("latency_us") or {}
            rows.append({"L": r["L"], "recall": r["recall"], "qps": r["qps"],
                         "mean_latency_us": lat.get("mean"), "p50_us": lat.get("p50"),
                         "p99_us": lat.get("p99"), "p999_us": lat.get("p999"),
                         "pages_per_query": r.get("pages_per_query"),
                         "ios_per_query": r.get("ios_per_query"),
                         "hops_per_query": r.get("hops_per_query"),
                         "qps_per_cpu": r.get("qps_per_cpu")})
        nq_used = s.get("queries") or s.get("nq") or read_fbin(q).shape[0]
        # Cross-check of trawl's own page counter against the kernel's: device reads of the
        # whole process vs bytes it says it read in the measured passes (warm-up not counted).
        claimed = sum(r.get("bytes_per_query") or (r.get("pages_per_query") or 0) * 4096
                      for r in s["rows"]) * nq_used
        eng = s.get("engine") or {}
        io_desc = f"{eng.get('name', '?')}, {'O_DIRECT' if eng.get('direct') else 'BUFFERED'}"
        load = s.get("load_secs") or (s.get("cache") or {}).get("secs")
        return {"threads": threads, "nq": nq_used, "rows": rows, "load_secs": load,
                "io": io_desc,
                "process": m.to_dict(), "proc_io": io, "peak_rss_bytes": m.peak_rss_bytes,
                "baseline_rss_bytes": 0, "claimed_read_bytes": claimed, "bench": s}


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------

def _med(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


ROW_KEYS = ("recall", "qps", "mean_latency_us", "p50_us", "p99_us", "p999_us", "pages_per_query",
            "ios_per_query", "hops_per_query", "qps_per_cpu")


def median_rows(sweeps: list[dict]) -> list[dict]:
    """Median per L over repetitions (each sweep: {'rows': [...]})."""
    by_l: dict[int, list[dict]] = {}
    for s in sweeps:
        for r in s["rows"]:
            by_l.setdefault(r["L"], []).append(r)
    return [{"L": L, **{k: _med(r.get(k) for r in rs) for k in ROW_KEYS}, "n": len(rs)}
            for L, rs in sorted(by_l.items())]


def interpolate(rows: list[dict], key: str, target: float) -> dict:
    """`key` at recall = target, linear between the two sweep points (in L order) bracketing the
    first crossing. bound '<=' / '>=': the target lies outside the sweep (value at the edge)."""
    pts = [(r["recall"], r[key]) for r in sorted(rows, key=lambda r: r["L"])
           if r.get(key) is not None and r.get("recall") is not None]
    if not pts:
        return {"value": None, "bound": None}
    if pts[0][0] >= target:
        return {"value": pts[0][1], "bound": "at-first-L", "recall": pts[0][0]}
    for (r0, v0), (r1, v1) in zip(pts, pts[1:]):
        if r0 < target <= r1:
            t = (target - r0) / (r1 - r0)
            return {"value": v0 + t * (v1 - v0), "bound": None}
    return {"value": None, "bound": "not-reached", "recall": max(p[0] for p in pts)}


def summarize_side(builds: list[dict], sweeps: list[dict], lat_sweeps: list[dict]) -> dict:
    rows = median_rows(sweeps)
    lrows = median_rows(lat_sweeps) if lat_sweeps else []
    for r in lrows:  # single-thread mean latency measured the same way on both sides
        r["wall_latency_us"] = 1e6 / r["qps"] if r["qps"] else None
    at = {}
    for tgt in TARGETS:
        at[f"{tgt:.2f}"] = {
            "qps": interpolate(rows, "qps", tgt),
            "pages_per_query": interpolate(rows, "pages_per_query", tgt),
            "ios_per_query": interpolate(rows, "ios_per_query", tgt),
            "mean_latency_us": interpolate(rows, "mean_latency_us", tgt),
            "p99_us": interpolate(rows, "p99_us", tgt),
            "L": interpolate([dict(r, Lv=float(r["L"])) for r in rows], "Lv", tgt),
            "lat1_wall_us": interpolate(lrows, "wall_latency_us", tgt) if lrows else None,
            "lat1_self_mean_us": interpolate(lrows, "mean_latency_us", tgt) if lrows else None,
        }
    fresh = [b for b in builds if not b.get("reused")]
    use = fresh or builds[:1]
    return {
        "build_secs": _med(b["build_secs"] for b in use),
        "build_secs_all": [b["build_secs"] for b in use],
        "build_reused": not fresh, "build_reused_from": builds[0].get("reused_from"),
        "build_cpu_secs": _med(b["cpu_secs"] for b in use),
        "build_peak_rss_bytes": _med(b["peak_rss_bytes"] for b in use),
        "build_baseline_rss_bytes": _med(b.get("baseline_rss_bytes") for b in use),
        "disk_bytes": builds[0]["disk_bytes"], "disk_bytes_search": builds[0]["disk_bytes_search"],
        "pq_bytes_used": builds[0].get("pq_bytes_used"),
        "build_steps_secs": builds[0].get("build_steps_secs") or {
            k: v for k, v in (builds[0].get("report") or {}).items()
            if k.endswith("_secs") and isinstance(v, (int, float))},
        "search_peak_rss_bytes": _med(s["peak_rss_bytes"] for s in sweeps),
        "search_baseline_rss_bytes": _med(s.get("baseline_rss_bytes") for s in sweeps),
        "search_load_secs": _med(s.get("load_secs") for s in sweeps),
        "search_io": sweeps[0].get("io") if sweeps else None,
        "search_read_bytes": _med((s.get("proc_io") or {}).get("read_bytes") for s in sweeps),
        "search_claimed_read_bytes": _med(s.get("claimed_read_bytes") for s in sweeps),
        "lat1_peak_rss_bytes": _med(s["peak_rss_bytes"] for s in lat_sweeps),
        "rows": rows, "lat1_rows": lrows, "at_recall": at,
        "nq": sweeps[0]["nq"] if sweeps else None,
        "lat1_nq": lat_sweeps[0]["nq"] if lat_sweeps else None,
        "repeats": len(sweeps),
    }


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _f(v, fmt="{:.0f}", none="-"):
    return none if v is None else fmt.format(v)


def _ratio(a, b, fmt="{:.3f}"):
    return fmt.format(a / b) if a is not None and b not in (None, 0) else "-"


def _iv(d: dict | None, fmt="{:.0f}") -> str:
    if not d or d.get("value") is None:
        return "n/r" if d and d.get("bound") == "not-reached" else "-"
    s = fmt.format(d["value"])
    return s + ("*" if d.get("bound") == "at-first-L" else "")


def render(dataset: str, sides: dict, meta: dict) -> tuple[str, list[dict]]:
    d, t = sides.get("diskann"), sides.get("trawl")
    p, ds, mach = meta["params"], meta["dataset"], meta["machine"]
    names = list(sides)
    lines = [f"# trawl vs diskannpy, SSD index: {dataset}", "",
             f"{ds['n']} x {ds['dim']} f32, {ds['nq']} queries, metric {ds['metric']} (diskann: "
             f"{meta.get('diskann_metric_note', ds['metric'])}), GT backend {ds['gt_backend']}. "
             f"Build R={p['R']} L={p['L']}, PQ {p['pq_bytes']} B/vector. Search k={p['k']}, "
             f"W={p['beam_width']}, {p['cache_nodes']} cached nodes, {p['threads']} threads "
             f"(QPS) and 1 thread (latency). Machine: {mach.get('cpu_model')}, "
             f"{mach.get('affinity_cpus')} CPUs. {meta['when']}.", "",
             "## Build", "",
             "| side | build s (median) | all | CPU s | peak RSS MiB | index MiB (all / search) "
             "| PQ B/vector | note |", "|---|---|---|---|---|---|---|---|"]
    for n, s in sides.items():
        note = f"reused index built {s['build_reused_from']}" if s["build_reused"] else "built now"
        lines.append(
            f"| {n} | {_f(s['build_secs'], '{:.1f}')} | "
            f"{', '.join(f'{v:.1f}' for v in s['build_secs_all'])} | "
            f"{_f(s['build_cpu_secs'], '{:.1f}')} | {_f(s['build_peak_rss_bytes'] / MIB)} | "
            f"{s['disk_bytes'] / MIB:.1f} / {s['disk_bytes_search'] / MIB:.1f} | "
            f"{_f(s['pq_bytes_used'])} | {note} |")
    for n, s in sides.items():
        if s.get("build_steps_secs"):
            lines.append(f"\n{n} build steps (s, as the side reports them): " + ", ".join(
                f"{k} {v:.1f}" for k, v in s["build_steps_secs"].items()))
    if d and t:
        lines += ["", f"**Ratio trawl/diskann**: build time {_ratio(t['build_secs'], d['build_secs'])}, "
                      f"build peak RSS {_ratio(t['build_peak_rss_bytes'], d['build_peak_rss_bytes'])}, "
                      f"index bytes used by search "
                      f"{_ratio(t['disk_bytes_search'], d['disk_bytes_search'])}."]
    lines += ["", f"## Search, {p['threads']} threads (medians over {max(s['repeats'] for s in sides.values())} "
                  "repetitions)", ""]
    head = "| L |" + "".join(f" {n} recall | {n} QPS | {n} pages/q |" for n in names)
    if t:
        head += " trawl ios/q | trawl hops/q | trawl p99 us |"
    if d and t:
        head += " QPS ratio t/d |"
    ncol = 1 + 3 * len(names) + (3 if t else 0) + (1 if d and t else 0)
    lines += [head, "|" + "---|" * ncol]
    by_l = {n: {r["L"]: r for r in sides[n]["rows"]} for n in names}
    csv_rows = []
    for L in sorted(set().union(*(set(v) for v in by_l.values()))):
        cells = [str(L)]
        for n in names:
            r = by_l[n].get(L)
            cells += [_f(r["recall"], "{:.4f}"), _f(r["qps"]), _f(r["pages_per_query"], "{:.1f}")] \
                if r else ["-"] * 3
        if t:
            r = by_l["trawl"].get(L) or {}
            cells += [_f(r.get("ios_per_query"), "{:.1f}"), _f(r.get("hops_per_query"), "{:.1f}"),
                      _f(r.get("p99_us"))]
        if d and t:
            rd, rt = by_l["diskann"].get(L), by_l["trawl"].get(L)
            cells.append(_ratio(rt["qps"], rd["qps"], "{:.2f}") if rd and rt else "-")
        lines.append("| " + " | ".join(cells) + " |")
    for n in names:
        s = sides[n]
        lrows = {r["L"]: r for r in s["lat1_rows"]}
        for r in s["rows"]:
            l1 = lrows.get(r["L"], {})
            csv_rows.append({"dataset": dataset, "side": n, "L": r["L"], "recall": r["recall"],
                             "qps": r["qps"], "mean_latency_us": r["mean_latency_us"],
                             "p99_us": r["p99_us"], "pages_per_query": r["pages_per_query"],
                             "ios_per_query": r["ios_per_query"],
                             "hops_per_query": r["hops_per_query"],
                             "lat1_recall": l1.get("recall"),
                             "lat1_wall_latency_us": l1.get("wall_latency_us"),
                             "lat1_self_mean_latency_us": l1.get("mean_latency_us"),
                             "build_secs": s["build_secs"],
                             "build_peak_rss_mib": s["build_peak_rss_bytes"] / MIB,
                             "search_peak_rss_mib": (s["search_peak_rss_bytes"] or 0) / MIB,
                             "disk_bytes": s["disk_bytes"]})
    if any(s["lat1_rows"] for s in sides.values()):
        nq1 = {n: s["lat1_nq"] for n, s in sides.items()}
        lines += ["", f"## Single-thread mean latency (us; wall / nq of a 1-thread sweep, "
                      f"{', '.join(f'{n}: {v} queries' for n, v in nq1.items())})", ""]
        head = "| L |" + "".join(f" {n} recall | {n} latency us |" for n in names)
        if t:
            head += " trawl self-reported mean us |"
        if d and t:
            head += " latency ratio t/d |"
        lines += [head, "|" + "---|" * (1 + 2 * len(names) + (1 if t else 0) + (1 if d and t else 0))]
        l1 = {n: {r["L"]: r for r in sides[n]["lat1_rows"]} for n in names}
        for L in sorted(set().union(*(set(v) for v in l1.values()))):
            cells = [str(L)]
            for n in names:
                r = l1[n].get(L)
                cells += [_f(r["recall"], "{:.4f}"), _f(r["wall_latency_us"])] if r else ["-", "-"]
            if t:
                cells.append(_f((l1["trawl"].get(L) or {}).get("mean_latency_us")))
            if d and t:
                rd, rt = l1["diskann"].get(L), l1["trawl"].get(L)
                cells.append(_ratio(rt["wall_latency_us"], rd["wall_latency_us"])
                             if rd and rt else "-")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## At equal recall@10 (linear interpolation between the bracketing sweep "
                  "points; * = already above the target at the smallest L, value at that L; "
                  "n/r = not reached)", ""]
    head = "| recall | figure |" + "".join(f" {n} |" for n in names) + \
        (" ratio t/d |" if d and t else "")
    lines += [head, "|" + "---|" * (2 + len(names) + (1 if d and t else 0))]
    figs = [("L", "search L", "{:.1f}"), ("qps", f"QPS ({p['threads']} threads)", "{:.0f}"),
            ("lat1_wall_us", "1-thread mean latency us", "{:.0f}"),
            ("pages_per_query", "pages / query", "{:.1f}"),
            ("ios_per_query", "read requests / query", "{:.1f}"),
            ("p99_us", f"p99 latency us ({p['threads']} threads)", "{:.0f}")]
    for tgt in TARGETS:
        key = f"{tgt:.2f}"
        for fk, label, fmt in figs:
            vals = {n: sides[n]["at_recall"][key].get(fk) for n in names}
            cells = [key, label] + [_iv(vals[n], fmt) for n in names]
            if d and t:
                vd, vt = vals["diskann"], vals["trawl"]
                cells.append(_ratio(vt and vt.get("value"), vd and vd.get("value")))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Search processes", "",
              "| side | reads | index load s | peak RSS MiB (T threads) | RSS above interpreter baseline "
              "MiB | peak RSS MiB (1 thread) | device reads MiB (whole process) | pages claimed "
              "x 4 KiB, MiB |", "|---|---|---|---|---|---|---|---|"]
    for n, s in sides.items():
        base = s.get("search_baseline_rss_bytes") or 0
        lines.append(f"| {n} | {s.get('search_io') or '-'} | {_f(s['search_load_secs'], '{:.2f}')} | "
                     f"{_f((s['search_peak_rss_bytes'] or 0) / MIB)} | "
                     f"{_f(((s['search_peak_rss_bytes'] or 0) - base) / MIB)} | "
                     f"{_f((s['lat1_peak_rss_bytes'] or 0) / MIB) if s['lat1_peak_rss_bytes'] else '-'} | "
                     f"{_f((s['search_read_bytes'] or 0) / MIB) if s['search_read_bytes'] is not None else '-'} | "
                     f"{_f((s['search_claimed_read_bytes'] or 0) / MIB) if s.get('search_claimed_read_bytes') else '-'} |")
    lines += ["", f"Load average (1/5/15 min) at start {_fmt_load(meta.get('loadavg_start'))}, at "
                  f"end {_fmt_load(meta.get('loadavg_end'))}.", "", NOTES]
    return "\n".join(lines) + "\n", csv_rows


NOTES = """Notes:
- Build time: diskann = the build_disk_index call timed inside its child (PQ training + Vamana
  + disk layout + sample file; Python start-up excluded); trawl = wall time of the `trawl build`
  process. Peak RSS = ru_maxrss of the process. The diskann index keeps `ann_mem.index.data`, a
  full-precision copy its search never opens: "search" bytes leave it out.
- diskann builds with saturate_graph=true (disk_utils.cpp: `with_saturate_graph(!use_filters)`):
  every node gets R neighbours. Cosine: the disk index has no cosine, so diskann gets
  L2-normalised base and queries with metric l2 (same ranking); trawl gets the original data.
- PQ bytes: diskann has no "bytes" knob; search_memory_maximum is chosen so that
  floor(budget * 2^30 / n) = M (checked against the header of ann_pq_compressed.bin).
- QPS = nq / wall of a whole sweep point. diskann: one batch_search call (OpenMP over queries).
  Its "pages/q" = read_bytes of /proc/self/io during the call / 4096 / nq (diskannpy returns no
  QueryStats; DiskANN reads one 4 KiB sector per node, so this is also its reads per query;
  cached nodes are not read). Hops are not available for diskann.
- 1-thread latency: wall / nq of a 1-thread sweep for both sides (the same measurement); trawl's
  own per-query mean is shown beside it.
- Both sides read the index with O_DIRECT (DiskANN: LinuxAlignedFileReader, libaio), so the
  page cache does not serve index reads; the page cache was not dropped (needs root; see
  --drop-caches). "device reads" is the kernel's read_bytes of each search process: a side whose
  reads were served by the page cache would show far fewer than it claims.
- Cache: both sides cache the same number of nodes, chosen by --cache-policy: freq = the nodes
  most visited by sample searches at L=15, W=4 (diskann cache_mechanism=1 over its sample file,
  10% of the points capped at 100K; trawl over its own sample), bfs = BFS from the entry point.
  "index load s" includes choosing and reading the cache.
- DiskANN 0.7.0 deadlocks loading a disk index with one thread context (DiskANN issue #462), so
  its 1-thread sweep loads with 2 contexts and runs batch_search on 1 thread."""


def _fmt_load(v) -> str:
    return "/".join(f"{x:.1f}" for x in v) if v else "?"


def write_outputs(dataset: str, meta: dict, plot: bool = True) -> Path:
    sides = {}
    for side in ("diskann", "trawl"):
        pth = OUT_DIR / "raw" / f"{dataset}.disk.{side}.json"
        if pth.exists():
            sides[side] = json.loads(pth.read_text())
    if not sides:
        raise SystemExit(f"no raw results for {dataset} under {OUT_DIR / 'raw'}")
    meta = meta or next(iter(sides.values()))["meta"]
    run_ids = {s["meta"]["run_id"] for s in sides.values()}
    for v in sides.values():  # recompute, so a re-render picks up newer aggregation code
        v["summary"] = summarize_side(v["builds"], v["sweeps"], v["lat1_sweeps"])
    md, csv_rows = render(dataset, {k: v["summary"] for k, v in sides.items()}, meta)
    if len(run_ids) > 1:
        log("note: the two sides come from different runs: " + ", ".join(sorted(run_ids)))
        md += "\n**Note:** the sides were measured in different runs: " + \
              ", ".join(f"{k}: {v['meta']['when']}" for k, v in sides.items()) + "\n"
    base = OUT_DIR / f"vs_diskann_disk-{dataset}"
    Path(f"{base}.md").write_text(md)
    with open(f"{base}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
        w.writeheader()
        w.writerows(csv_rows)
    write_json(Path(f"{base}.json"), {"meta": meta, "sides": sides})
    print(md)
    if plot:
        run_plot(Path(f"{base}.json"), base)
    return Path(f"{base}.md")


def run_plot(json_path: Path, base: Path) -> None:
    py = PLOT_VENV / "bin" / "python"
    if not py.exists():
        log(f"no {PLOT_VENV}: skipping plots (see bench/README.md)")
        return
    r = subprocess.run([str(py), str(BENCH_DIR / "plot_bench.py"), str(json_path),
                        "--out", f"{base}"], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"plot_bench.py failed: {r.stderr.strip()[-500:]}")
    else:
        log(r.stdout.strip())


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--sides", default="diskann,trawl", help="comma list: diskann,trawl")
    ap.add_argument("--repeat", type=int, default=1,
                    help="repetitions of the search sweeps (and of the builds with --rebuild); "
                         "medians reported, side order alternating")
    ap.add_argument("--rebuild", action="store_true",
                    help="build every repetition instead of reusing a cached index")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--pq-bytes", type=int, default=48, help="PQ bytes per vector (both sides)")
    ap.add_argument("--threads", type=int, default=2, help="build and QPS-sweep threads")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--search-L", default="10,20,30,40,50,60,80,100,150,200")
    ap.add_argument("--beam-width", type=int, default=4)
    ap.add_argument("--cache-nodes", type=int, default=10000,
                    help="nodes cached in memory by both sides")
    ap.add_argument("--cache-policy", default="freq", choices=["freq", "bfs"],
                    help="how both sides choose the cached nodes: freq = most visited by sample "
                         "searches (diskann cache_mechanism=1, trawl --cache-policy freq), "
                         "bfs = BFS from the entry point (cache_mechanism=2)")
    ap.add_argument("--no-latency-sweep", action="store_true",
                    help="skip the 1-thread sweep (single-thread mean latency)")
    ap.add_argument("--latency-L", default=None, help="L list of the 1-thread sweep "
                                                      "(default: --search-L)")
    ap.add_argument("--latency-nq", type=int, default=2000,
                    help="queries in the 1-thread sweep (a seeded random sample of N, the same "
                         "rows on both sides; 0 = all queries)")
    ap.add_argument("--search-repeat", type=int, default=1,
                    help="diskann: batch_search passes per L within one process (median)")
    ap.add_argument("--build-memory-gb", type=float, default=16.0,
                    help="diskann build_memory_maximum (large: one shard, no partitioning)")
    ap.add_argument("--drop-caches", action="store_true",
                    help="write 1 to /proc/sys/vm/drop_caches before each search (root only)")
    ap.add_argument("--gt-backend", default="auto", choices=["auto", "trawl", "numpy"])
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--venv-python", default="python3.11")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="only re-render md/csv/json (and plots) from bench/out/raw/")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.report_only:
        write_outputs(args.dataset, {}, plot=not args.no_plot)
        return
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    assert set(sides) <= {"diskann", "trawl"}, f"unknown side in {sides}"
    ds = datasets.prepare(args.dataset, args.gt_backend, args.threads)
    py = ensure_venv(args.venv, args.venv_python) if "diskann" in sides else None
    objs = {}
    if "diskann" in sides:
        objs["diskann"] = DiskannSide(ds, args, py)
        log(f"diskann: search_memory_maximum = {objs['diskann'].search_memory_gb} GB -> "
            f"{args.pq_bytes} PQ bytes per vector")
    if "trawl" in sides:
        objs["trawl"] = TrawlSide(ds, args)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = Path(ds.base).parent / "runs" / f"disk-{run_id}"
    machine = machine_info()
    if py:
        machine["diskann_venv"] = venv_freeze(py)
    lat_ls = args.latency_L or args.search_L
    meta = {"run_id": run_id, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "dataset": ds.__dict__, "machine": machine,
            "diskann_metric_note": ("l2 on L2-normalised base and queries" if ds.metric == "cosine"
                                    else {"ip": "mips"}.get(ds.metric, ds.metric)),
            "params": {"R": args.R, "L": args.L, "pq_bytes": args.pq_bytes,
                       "threads": args.threads, "k": args.k, "search_L": args.search_L,
                       "beam_width": args.beam_width, "cache_nodes": args.cache_nodes,
                       "cache_policy": args.cache_policy,
                       "latency_sweep": not args.no_latency_sweep, "latency_L": lat_ls,
                       "latency_nq": args.latency_nq, "repeat": args.repeat,
                       "rebuild": args.rebuild, "search_repeat": args.search_repeat,
                       "diskann_search_memory_maximum_gb":
                           objs["diskann"].search_memory_gb if "diskann" in objs else None,
                       "order": "alternating: even repetitions run sides in the given order, "
                                "odd ones reversed"},
            "loadavg_start": os.getloadavg()}
    res = {s: {"builds": [], "sweeps": [], "lat1_sweeps": []} for s in sides}
    for rep in range(args.repeat):
        order = sides if rep % 2 == 0 else list(reversed(sides))
        rdir = work / f"rep{rep}"
        rdir.mkdir(parents=True, exist_ok=True)
        for side in order:  # builds first (both), then searches, so a search never overlaps
            if rep == 0 or args.rebuild:
                log(f"rep {rep + 1}/{args.repeat}: {side} build on {ds.name}")
                b = objs[side].build(rdir)
                log(f"  {side}: build {b['build_secs']:.1f}s, peak RSS "
                    f"{b['peak_rss_bytes'] / MIB:.0f} MiB, {b['disk_bytes'] / MIB:.0f} MiB on disk, "
                    f"PQ {b.get('pq_bytes_used')} B/vector{' (reused)' if b.get('reused') else ''}")
                res[side]["builds"].append(b)
        for side in order:
            log(f"rep {rep + 1}/{args.repeat}: {side} search, {args.threads} threads")
            s = objs[side].search(rdir, args.threads, args.search_L, f"t{args.threads}", 0)
            log(f"  {side}: " + ", ".join(f"L{r['L']}={r['recall']:.3f}/{r['qps']:.0f}qps"
                                          for r in s["rows"]))
            res[side]["sweeps"].append(s)
            if not args.no_latency_sweep:
                log(f"rep {rep + 1}/{args.repeat}: {side} search, 1 thread")
                s1 = objs[side].search(rdir, 1, lat_ls, "t1", args.latency_nq)
                log(f"  {side}: " + ", ".join(f"L{r['L']}={1e6 / r['qps']:.0f}us"
                                              for r in s1["rows"]))
                res[side]["lat1_sweeps"].append(s1)
    meta["loadavg_end"] = os.getloadavg()
    for side, r in res.items():
        write_json(OUT_DIR / "raw" / f"{ds.name}.disk.{side}.json", {"meta": meta, **r})
    write_outputs(ds.name, meta, plot=not args.no_plot)


if __name__ == "__main__":
    main()

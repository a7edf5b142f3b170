#!/usr/bin/env python3
"""trawl against its peers on one dataset, in one run: trawl's disk index (beam search,
PipeSearch, the decoupled layout), DiskANN's disk index (diskannpy 0.7.0) and three in-memory
references (faiss HNSW, faiss IVF-PQ with an exact re-rank, hnswlib).

Sides (--sides, default all):
  (trawl's sides run with --interleave 4 by default for QPS: --trawl-interleave,
   --ivf-interleave; their 1-thread latency sweeps always run one query at a time, so the
   latency is a single query's, as for every other side; --trawl-extra adds flags to every
   trawl graph side, e.g. "--taskrun defer")
  trawl-beam       `trawl bench --strategy beam -W 4` on a `trawl build` index (R 64, L 100,
                   α 1.2, 48 PQ bytes, entry index 1%), O_DIRECT
  trawl-pipe       the same index, `--strategy pipe --entry-list 10` (PipeSearch, dynamic width)
  trawl-flash      the same index, `--strategy flash --staleness 1 --entry-list 10` (FlashANNS's
                   batch search: 32 queries per thread, a read chosen one step ahead, seeded by
                   the entry index like trawl-pipe; CPU accelerator; it keeps its own batch, so
                   --trawl-interleave does not apply)
  trawl-pipe-ps    PipeSearch with PageSearch on the PageShuffle layout: `--layout shuffle
                   --strategy pipe --page-search --entry-list 10` (a landed page's other records
                   scored and kept, explored later without a read)
  trawl-c5         the same graph in PageShuffle order (`trawl layout --shuffle`), OctopusANN's
                   C5: `--layout shuffle -W 32 --dynamic-width 5:4,4,8,8,16,16,24,24,32
                   --page-search --entry-list 10` (page-mates scored, widths growing)
  trawl-decoupled  the same graph written by `trawl layout --decoupled` (graph.trawl +
                   vectors.trawl), `--layout decoupled`, beam search -W 4
  trawl-ivf        `trawl build --kind ivf` (FusionANNS: balanced k-means lists ~10% of n,
                   boundary replication, PQ codes with the same bytes, bucketed vectors),
                   `trawl bench` sweeping the lists probed (--ivf-nprobe), CPU accelerator
  diskann          diskannpy `build_disk_index` + `StaticDiskIndex` (bench/vs_diskann_disk.py's
                   DiskannSide: same R, L, α, PQ bytes, beam width, cached nodes), O_DIRECT
  faiss-hnsw       faiss.IndexHNSWFlat, M 32, efConstruction 100; sweep efSearch
  faiss-ivfpq      faiss.IndexRefineFlat(IndexIVFPQ): ~4·sqrt(n) lists, m-byte PQ codes (m = the
                   divisor of the dimension closest to the PQ bytes), exact re-rank of
                   k_factor·k candidates from the full vectors in RAM; sweep nprobe × k_factor
  hnswlib          hnswlib.Index, M 32, ef_construction 100; sweep ef

Every build and every search sweep runs in a child process of its own, measured from outside
(wall time, ru_maxrss, /proc/<pid>/io read_bytes: bench/measure_io.py). Every build runs with
--threads threads; every side searches the same query file (a seeded random subset of --queries
queries), k = 10, recall against the dataset's GT with common.recall_at_k. QPS sweeps: trawl's
sides run with --threads threads (and their own queries in flight per thread, above); every
other side (diskann, faiss-hnsw, faiss-ivfpq, hnswlib) runs once per thread count of
--peer-threads (default 2,8,16,32: a peer gets its best oversubscription too, as trawl keeps
several queries in flight per thread; OMP/MKL/OpenBLAS threads and diskannpy's num_threads follow
each run's count). At each recall target a peer's figures are those of its best thread count
there (the highest interpolated QPS; ties: fewer threads), named beside them; the report keeps a
table of every thread count's QPS. For each sweep point: recall@10, QPS (nq / wall of the batch,
index load excluded), mean latency from a 1-thread sweep (wall / nq; a peer's 1-thread QPS run is
that sweep when 1 is in --peer-threads), pages (4 KiB) read per query. Per side: peak RSS of the
search process (a peer's: at its best thread count at recall 0.90; and the index's own RAM:
trawl's memory_total_bytes, RSS growth at load for the others), disk bytes, build time and build
peak RSS. The in-memory peers run in bench/.venv-peers (made on demand: faiss-cpu, hnswlib, numpy),
diskannpy in bench/.venv-diskann.

Built indexes are cached in .bench-cache/<dataset>/ (the parameters are in the directory name and
in bench-params.json; reused unless --rebuild):
  trawl-peers-<metric>-R<R>-L<L>-pq<B>/       (+ graph.trawl / vectors.trawl for decoupled)
  diskann-disk-<metric>-R<R>-L<L>-pq<B>/      (shared with vs_diskann_disk.py)
  faiss-hnsw-<metric>-M<M>-efc<E>/, hnswlib-<metric>-M<M>-efc<E>/,
  faiss-ivfpq-<metric>-nlist<N>-m<m>-refineflat/

Usage:
  python3 bench/peers.py gmm-20k-numpy                           # smoke test, seconds
  python3 bench/peers.py glove-400k --repeat 1
  python3 bench/peers.py glove-400k --sides faiss-hnsw,hnswlib    # some sides (others: last run)
  python3 bench/peers.py glove-400k --peer-threads 2              # peers at --threads only
  python3 bench/peers.py glove-400k --report-only [--publish] [--update-readme]

Writes bench/out/peers-<dataset>.{md,csv,json} and PNG plots bench/out/peers-<dataset>-{qps,
pages,latency}.png (through bench/.venv-plot); raw per-side results under
bench/out/raw/peers-<dataset>.<side>.json. --publish copies the md and PNGs to bench/results/;
--update-readme rewrites the block between `<!-- peers:begin -->` and `<!-- peers:end -->` in
the repository's README.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import (BENCH_DIR, OUT_DIR, REPO_ROOT, log, machine_info, read_fbin,  # noqa: E402
                    read_gt, recall_at_k, trawl_version, warm_page_cache, write_json)
from vs_diskann import DEFAULT_VENV, ensure_venv, venv_freeze  # noqa: E402
from vs_diskann_disk import (PARAMS_FILE, DiskannSide, TrawlSide, cached_build,  # noqa: E402
                             dir_bytes, interpolate, run_io, subset)

MIB = 1024 * 1024
TARGETS = (0.90, 0.95)
ALL_SIDES = ("trawl-beam", "trawl-pipe", "trawl-pipe-ps", "trawl-c5", "trawl-flash",
             "trawl-decoupled",
             "trawl-ivf",
             "diskann", "faiss-hnsw", "faiss-ivfpq", "hnswlib")
TRAWL_SIDES = ("trawl-beam", "trawl-pipe", "trawl-pipe-ps", "trawl-c5", "trawl-flash",
               "trawl-decoupled",
               "trawl-ivf")
# The graph sides share one index; trawl-ivf has its own.
TRAWL_GRAPH_SIDES = ("trawl-beam", "trawl-pipe", "trawl-pipe-ps", "trawl-c5", "trawl-flash",
                     "trawl-decoupled")
PY_SIDES = ("faiss-hnsw", "faiss-ivfpq", "hnswlib")
# The sides whose QPS sweeps run at every --peer-threads count (trawl's keep --threads).
PEER_SIDES = ("diskann",) + PY_SIDES
DISK_SIDES = TRAWL_SIDES + ("diskann",)
PEERS_VENV = BENCH_DIR / ".venv-peers"
# The versions this script was validated with (current faiss-cpu wheels need numpy 2).
PEERS_REQ = ["faiss-cpu==1.15.1", "hnswlib==0.8.0", "numpy==2.4.6"]
PLOT_VENV = BENCH_DIR / ".venv-plot"
README_BEGIN, README_END = "<!-- peers:begin -->", "<!-- peers:end -->"


# ---------------------------------------------------------------------------------------------
# The peers' virtualenv
# ---------------------------------------------------------------------------------------------

def ensure_peers_venv(venv: Path, python: str) -> Path:
    """Create bench/.venv-peers if needed (faiss-cpu, hnswlib, numpy); return its python."""
    py = venv / "bin" / "python"
    if py.exists():
        ok = subprocess.run([str(py), "-c", "import faiss, hnswlib, numpy"], capture_output=True)
        if ok.returncode == 0:
            return py
    log(f"creating {venv} with {python} and installing {' '.join(PEERS_REQ)}")
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + [r for r in PEERS_REQ if not r.startswith("hnswlib")], check=True)
    hnsw = next(r for r in PEERS_REQ if r.startswith("hnswlib"))
    if subprocess.run(pip + [hnsw]).returncode != 0:
        # hnswlib ships an sdist: if the isolated build fails, build it against the venv's numpy.
        log("hnswlib did not build in an isolated environment; retrying without build isolation")
        subprocess.run(pip + ["pybind11", "setuptools", "wheel"], check=True)
        subprocess.run(pip + ["--no-build-isolation", hnsw], check=True)
    return py


# ---------------------------------------------------------------------------------------------
# Sides
# ---------------------------------------------------------------------------------------------

def thread_counts(spec: str) -> list[int]:
    """--peer-threads: a comma list of positive thread counts, deduplicated, ascending."""
    try:
        counts = sorted({int(v) for v in spec.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of thread counts: {spec!r}")
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1: {spec!r}")
    return counts


def thread_env(threads: int) -> dict:
    return dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                OPENBLAS_NUM_THREADS=str(threads))


def when() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


class TrawlIndex(TrawlSide):
    """vs_diskann_disk.TrawlSide's measured, cached build, into a directory of this script's own,
    plus the decoupled layout (`trawl layout --decoupled`, measured) on demand. One index serves
    the three trawl sides."""

    LAYOUT_FILE = "peers-layout.json"

    def __init__(self, ds: datasets.Dataset, args: argparse.Namespace):
        super().__init__(ds, args)
        self.idx = Path(ds.base).parent / (f"trawl-peers-{ds.metric}-R{args.R}-L{args.L}"
                                           f"-pq{args.pq_bytes}{'-opq' if self.opq else ''}")
        self._build: dict | None = None
        self._layouts: dict[str, dict] = {}

    def build_once(self, work: Path) -> dict:
        if self._build is None:
            self._build = self.build(work)
        return self._build

    # The extra layouts `trawl layout` writes: flag, files it leaves, cache record, log stem,
    # name in the log.
    LAYOUTS = {
        "decoupled": ("--decoupled", ("graph.trawl", "vectors.trawl"), LAYOUT_FILE,
                      "trawl-layout", "decoupled"),
        "shuffle": ("--shuffle", ("packed-shuffled.trawl",), "peers-shuffle.json",
                    "trawl-shuffle", "PageShuffle"),
    }

    def layout_once(self, work: Path, kind: str = "decoupled") -> dict:
        """`trawl layout --decoupled` or `--shuffle` on the index, measured once and cached
        (reused while the index it was written from is the same build)."""
        if kind in self._layouts:
            return self._layouts[kind]
        flag, files, record, stem, what = self.LAYOUTS[kind]
        built = json.loads((self.idx / PARAMS_FILE).read_text())["when"]
        rec_path = self.idx / record
        if rec_path.exists() and all((self.idx / f).exists() for f in files) and \
                not self.args.rebuild:
            rec = json.loads(rec_path.read_text())
            if rec.get("index_built") == built:
                log(f"  trawl: reusing the {what} layout of {self.idx} ({rec['when']})")
                self._layouts[kind] = dict(rec["layout"], reused=True,
                                           reused_from=rec["when"])
                return self._layouts[kind]
        report = work / f"{stem}-report.json"
        m, io = run_io([self.exe, "layout", self.idx, flag, "--report", report, "--quiet"],
                       work / f"{stem}.log")
        rep = json.loads(report.read_text()) if report.exists() else {}
        lay = {"secs": m.wall_secs, "peak_rss_bytes": m.peak_rss_bytes,
               "cpu_secs": m.user_secs + m.sys_secs, "report": rep, "log": m.log_path,
               "reused": False}
        write_json(rec_path, {"index_built": built, "layout": lay, "when": when()})
        self._layouts[kind] = lay
        return lay


class TrawlIvfIndex(TrawlSide):
    """The IVF index of the trawl-ivf side: `trawl build --kind ivf` (with the by-id vector
    file too, for the ablation), measured and cached like the graph index."""

    def __init__(self, ds: datasets.Dataset, args: argparse.Namespace):
        super().__init__(ds, args)
        self.pq_bytes = args.ivf_pq_bytes or args.pq_bytes
        self.params.update(kind="ivf", ivf_list_size=args.ivf_list_size,
                           ivf_epsilon=args.ivf_epsilon, pq_bytes=self.pq_bytes)
        for k in ("R", "L", "opq"):
            self.params.pop(k, None)
        self.opq = False  # --opq is for the graph sides; the IVF build does not take it here
        self.idx = Path(ds.base).parent / (f"trawl-peers-ivf-{ds.metric}-ls{args.ivf_list_size}"
                                           f"-eps{args.ivf_epsilon}-pq{self.pq_bytes}")
        self._build: dict | None = None

    def build_once(self, work: Path) -> dict:
        if self._build is None:
            self._build = self.build(work)
        return self._build

    def build(self, work: Path) -> dict:
        rec = None if self.args.rebuild else cached_build(self.idx, self.params)
        if rec:
            log(f"  trawl-ivf: reusing {self.idx} (built {rec['when']})")
            return dict(rec["build"], reused=True, reused_from=rec["when"])
        shutil.rmtree(self.idx, ignore_errors=True)
        report = work / "trawl-ivf-build-report.json"
        m, io = run_io([self.exe, "build", self.ds.base, self.idx, "--metric", self.ds.metric,
                        "--kind", "ivf", "--ivf-list-size", self.args.ivf_list_size,
                        "--ivf-epsilon", self.args.ivf_epsilon, "--by-id-vectors",
                        "--pq-bytes", self.pq_bytes, "--threads", self.args.threads,
                        "--report", report, "--quiet"], work / "trawl-ivf-build.log")
        rep = json.loads(report.read_text())
        db = dir_bytes(self.idx)
        by_id = rep.get("vectors_by_id_bytes") or 0
        build = {"build_secs": m.wall_secs, "process_wall_secs": m.wall_secs,
                 "self_reported_total_secs": rep.get("total_secs"),
                 "self_reported_peak_rss_bytes": rep.get("peak_rss_bytes"),
                 "self_reported_disk_bytes": rep.get("disk_bytes"),
                 "peak_rss_bytes": m.peak_rss_bytes, "baseline_rss_bytes": 0,
                 "cpu_secs": m.user_secs + m.sys_secs, "disk_bytes": db["total"],
                 # The by-id vector file is the ablation's; the search reads the bucketed one.
                 "disk_bytes_search": db["total"] - by_id, "files": db["files"],
                 "pq_bytes_used": rep.get("pq_bytes_per_vector"), "report": rep,
                 "replication": rep.get("replication"), "nlist": rep.get("nlist"),
                 "proc_io": io, "log": m.log_path, "reused": False,
                 "versions": {"trawl": trawl_version()}, "loadavg_after": os.getloadavg()}
        write_json(self.idx / PARAMS_FILE, {"params": self.params, "build": build,
                                            "when": when()})
        return build


def ivf_flags(args: argparse.Namespace) -> list[str]:
    """`trawl bench` flags of the trawl-ivf side shared by its re-rank variants."""
    return ["--ivf-batch", str(args.ivf_batch), "--interleave", str(args.ivf_interleave),
            "--accel", "cpu"]


def ivf_rerank_variants(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """The trawl-ivf re-rank variants swept (each over the lists probed): `h` = the heuristic
    early stop (ε, β), a number = a fixed re-rank budget n (heuristic off)."""
    out = []
    for v in str(args.trawl_ivf_rerank).split(","):
        v = v.strip()
        if v == "h":
            f = ["--ivf-epsilon", str(args.ivf_rerank_epsilon), "--ivf-beta", str(args.ivf_beta)]
            if args.ivf_rerank_n:
                f += ["--rerank-n", str(args.ivf_rerank_n)]
            out.append(("h", f))
        elif v:
            out.append((f"n{int(v)}", ["--no-heuristic", "--rerank-n", str(int(v))]))
    if not out:
        raise SystemExit("--trawl-ivf-rerank: no variant")
    return out


TRAWL_FLAGS = {
    "trawl-beam": ["--strategy", "beam", "-W", "{W}"],
    "trawl-pipe": ["--strategy", "pipe", "--entry-list", "{entry_list}"],
    "trawl-pipe-ps": ["--layout", "shuffle", "--strategy", "pipe", "--page-search",
                      "--entry-list", "{entry_list}"],
    "trawl-c5": ["--layout", "shuffle", "--strategy", "beam", "-W", "32", "--dynamic-width",
                 "5:4,4,8,8,16,16,24,24,32", "--page-search", "--entry-list", "{entry_list}"],
    "trawl-flash": ["--strategy", "flash", "--staleness", "1", "--entry-list", "{entry_list}"],
    "trawl-decoupled": ["--layout", "decoupled", "--strategy", "beam", "-W", "{W}",
                        "--list-cache-mb", "{list_cache_mb}"],
}


class TrawlPeer:
    kind = "disk"

    def __init__(self, name: str, index, args: argparse.Namespace):
        self.name, self.index, self.args = name, index, args
        self.sweep = args.trawl_ivf_nprobe if name == "trawl-ivf" else args.search_L
        self.pname = "nprobe" if name == "trawl-ivf" else "L"
        if name == "trawl-ivf":
            self.flags = ivf_flags(args)
            self.variants = ivf_rerank_variants(args)
            return
        fmt = {"W": args.beam_width, "entry_list": args.entry_list,
               "list_cache_mb": args.list_cache_mb}
        self.flags = [f.format(**fmt) for f in TRAWL_FLAGS[name]]
        if args.trawl_extra:
            self.flags += shlex.split(args.trawl_extra)
        # The QPS sweeps' interleave; the 1-thread latency sweeps run one query at a time.
        self.interleave = args.trawl_interleave if name != "trawl-flash" else 1
        if name != "trawl-decoupled" and args.cache_nodes:
            self.flags += ["--cache-nodes", str(args.cache_nodes), "--cache-policy",
                           args.cache_policy]

    def describe(self) -> dict:
        a = self.args
        if self.name == "trawl-ivf":
            return {"ram": f"PQ codes ({a.ivf_pq_bytes or a.pq_bytes} B/vector, the "
                           "accelerator's) + codebooks, "
                           "centroids (~10% of n) and their Vamana graph, posting lists as ids "
                           "(× the replication factor), the id → slot table (4 B/vector)",
                    "disk": "full f32 vectors in buckets by nearest centroid (ivf-vectors.trawl), "
                            "read with O_DIRECT (io_uring) by the heuristic re-rank",
                    "flags": " ".join(self.flags) + f"; -L = lists probed {a.trawl_ivf_nprobe}"
                             + "; re-rank variants (a grid with -L, figures along the "
                             "recall-QPS frontier): "
                             + ", ".join(f"{n}: {' '.join(f)}" for n, f in self.variants),
                    "build": f"`trawl build --kind ivf` (list size {a.ivf_list_size}, ε "
                             f"{a.ivf_epsilon}, at most 8 lists per vector, PQ bytes)"}
        ram = (f"PQ codes ({a.pq_bytes} B/vector) + codebooks, entry index (1% sample: ids and "
               "full vectors of its nodes, small graph)")
        if self.name == "trawl-beam":
            ram += ", loaded but not searched (entry list 0: queries start at the medoid)"
        elif self.name == "trawl-pipe":
            ram += f", searched at list size {a.entry_list} to seed each query"
        elif self.name in ("trawl-c5", "trawl-pipe-ps"):
            ram += (f", searched at list size {a.entry_list} to seed each query; the PageShuffle "
                    "layout's node → page table")
        elif self.name == "trawl-flash":
            ram += f", searched at list size {a.entry_list} to seed each query; per thread " \
                   "the lists and visited sets of its batch"
        else:
            ram += (", loaded but not searched; per-page metadata of the compressed files; "
                    f"LRU cache of compressed neighbour lists {a.list_cache_mb} MiB")
        if self.name != "trawl-decoupled" and a.cache_nodes:
            ram += f"; {a.cache_nodes} cached nodes (policy {a.cache_policy})"
        if self.name == "trawl-decoupled":
            disk = ("neighbour lists Elias-Fano coded (graph.trawl) and vectors losslessly "
                    "compressed (vectors.trawl), read with O_DIRECT (io_uring); packed.trawl "
                    "unused")
        elif self.name in ("trawl-c5", "trawl-pipe-ps"):
            disk = ("full f32 vectors + neighbour lists, page-packed in PageShuffle order "
                    "(packed-shuffled.trawl), read with O_DIRECT (io_uring); packed.trawl unused")
        else:
            disk = ("full f32 vectors + neighbour lists, page-packed (packed.trawl), read with "
                    "O_DIRECT (io_uring)")
        il = (f"; QPS sweeps --interleave {self.interleave}, 1-thread latency sweeps one query "
              "at a time" if self.interleave != 1 else "")
        return {"ram": ram, "disk": disk, "flags": " ".join(self.flags) + il,
                "build": "`trawl build` (R, L, α 1.2, PQ bytes, entry index 1%" +
                         (", OPQ rotation)" if self.index.opq else ")") +
                         {"trawl-decoupled": " + `trawl layout --decoupled`",
                          "trawl-c5": " + `trawl layout --shuffle`",
                          "trawl-pipe-ps": " + `trawl layout --shuffle`"}.get(self.name, "")}

    def build(self, work: Path) -> dict:
        b = dict(self.index.build_once(work))
        b["index_dir"] = str(self.index.idx)
        if self.name in ("trawl-decoupled", "trawl-c5", "trawl-pipe-ps"):
            lay = self.index.layout_once(
                work, "decoupled" if self.name == "trawl-decoupled" else "shuffle")
            b["layout"] = lay
            b["build_secs"] = b["build_secs"] + lay["secs"]
            b["peak_rss_bytes"] = max(b["peak_rss_bytes"], lay["peak_rss_bytes"])
            b["reused"] = b.get("reused") and lay.get("reused")
        return b

    def search(self, work: Path, threads: int, q: Path, gt: Path, tag: str) -> dict:
        a = self.args
        variants = self.variants if self.name == "trawl-ivf" else [("", [])]
        rows, procs = [], []
        for vname, vflags in variants:
            suffix = f"-{vname}" if vname else ""
            out = work / f"{self.name}-search-{tag}{suffix}.json"
            m, io = run_io([self.index.exe, "bench", self.index.idx, "--queries", q, "--gt", gt,
                            "-k", a.k, "-L", self.sweep, "--threads", threads, "--json", out,
                            "--quiet", *self.flags, *self._interleave(threads), *vflags],
                           work / f"{self.name}-search-{tag}{suffix}.log")
            s = json.loads(out.read_text())
            procs.append((m, io, s, out))
            for r in s["rows"]:
                lat = r.get("latency_us") or {}
                param = f"{self.pname}={r['L']}" + (f",{vname}" if vname else "")
                rows.append({"param": param, "x": r["L"], "recall": r["recall"],
                             "qps": r["qps"], "mean_latency_us": lat.get("mean"),
                             "p99_us": lat.get("p99"), "pages_per_query": r.get("pages_per_query"),
                             "ios_per_query": r.get("ios_per_query"),
                             "hops_per_query": r.get("hops_per_query")})
        # Process figures: the variant with the largest peak RSS (the same index for all);
        # device reads summed over the variants.
        m, io, s, out = max(procs, key=lambda t: t[0].peak_rss_bytes)
        if len(procs) > 1 and all(p[1] for p in procs):
            io = dict(io)
            io["read_bytes"] = sum(p[1].get("read_bytes") or 0 for p in procs)
        nq = s.get("queries") or read_fbin(q).shape[0]
        claimed = sum(r.get("bytes_per_query") or (r.get("pages_per_query") or 0) * 4096
                      for _, _, ps, _ in procs for r in ps["rows"]) * nq
        eng = s.get("engine") or {}
        return {"threads": threads, "nq": nq, "rows": rows, "load_secs": s.get("load_secs"),
                "io": f"{eng.get('name', '?')}, {'O_DIRECT' if eng.get('direct') else 'BUFFERED'}",
                "process": m.to_dict(), "proc_io": io, "peak_rss_bytes": m.peak_rss_bytes,
                "index_ram_bytes": s.get("memory_total_bytes"),
                "memory_bytes": s.get("memory_bytes"),
                "self_reported_peak_rss_bytes": s.get("peak_rss_bytes"),
                "disk_bytes_searched": (s.get("disk_bytes") or {}).get("total"),
                "disk_bytes_detail": s.get("disk_bytes"),
                "read_bytes": (io or {}).get("read_bytes"), "claimed_read_bytes": claimed,
                "bench_json": str(out)}


    def _interleave(self, threads: int) -> list[str]:
        """The QPS sweeps interleave queries per thread; a 1-thread sweep measures a single
        query's latency (wall / nq), so it runs one query at a time."""
        if self.name == "trawl-ivf" or threads == 1 or self.interleave == 1:
            return []
        return ["--interleave", str(self.interleave)]

    def recall_check(self, work: Path, threads: int, q: Path, gt: Path, L: int,
                     bench_recall: float | None) -> dict:
        """`trawl bench` computes recall itself (graph::recall_at_k, the same definition). Check
        it once: `trawl search` at one L writes its result ids, scored here with
        common.recall_at_k against the same GT rows."""
        out = work / f"{self.name}-search-L{L}.bin"
        m, _ = run_io([self.index.exe, "search", self.index.idx, "--queries", q, "-k",
                       self.args.k, "-L", L, "--threads", threads, "-o", out, *self.flags,
                       *(self.variants[0][1] if self.name == "trawl-ivf" else [])],
                      work / f"{self.name}-search-L{L}.log")
        ids, _ = read_gt(out)
        truth, _ = read_gt(gt)
        r = recall_at_k(ids, truth, self.args.k)
        out.unlink()
        return {"L": L, "recall_at_k": r, "bench_recall": bench_recall,
                "abs_diff": None if bench_recall is None else abs(r - bench_recall)}


class DiskannPeer:
    kind = "disk"
    name = "diskann"

    def __init__(self, ds: datasets.Dataset, args: argparse.Namespace, py: Path):
        self.args = args
        dargs = argparse.Namespace(
            R=args.R, L=args.L, pq_bytes=args.pq_bytes, threads=args.threads,
            build_memory_gb=args.build_memory_gb, rebuild=args.rebuild, k=args.k,
            beam_width=args.beam_width, cache_nodes=args.cache_nodes,
            cache_policy=args.cache_policy, search_repeat=1, drop_caches=False)
        self.side = DiskannSide(ds, dargs, py)

    def describe(self) -> dict:
        a = self.args
        ram = (f"PQ codes ({a.pq_bytes} B/vector) + pivots, the medoid"
               + (f"; {a.cache_nodes} cached nodes (cache_mechanism "
                  f"{ {'freq': 1, 'bfs': 2}[a.cache_policy]})" if a.cache_nodes else
                  "; no cached nodes"))
        return {"ram": ram,
                "disk": "full f32 vectors + neighbour lists, one 4 KiB sector per node "
                        "(ann_disk.index), read with O_DIRECT (libaio)",
                "flags": f"beam_width {a.beam_width}, num_nodes_to_cache {a.cache_nodes}",
                "build": f"build_disk_index (R, L, α 1.2 as DiskANN fixes it, "
                         f"search_memory_maximum {self.side.search_memory_gb} GB -> "
                         f"{a.pq_bytes} PQ bytes)"}

    def build(self, work: Path) -> dict:
        b = self.side.build(work)
        b["index_dir"] = str(self.side.idx)
        return b

    def search(self, work: Path, threads: int, q: Path, gt: Path, tag: str) -> dict:
        nq = read_fbin(q).shape[0]
        s = self.side.search(work, threads, self.args.search_L, tag, nq)
        rows = [{"param": f"L={r['L']}", "x": r["L"], "recall": r["recall"], "qps": r["qps"],
                 "mean_latency_us": r["mean_latency_us"], "p99_us": None,
                 "pages_per_query": r["pages_per_query"], "ios_per_query": r["ios_per_query"],
                 "hops_per_query": None} for r in s["rows"]]
        w = s["worker"]
        ram = (w["rss_after_load_bytes"] - w["rss_before_load_bytes"]
               if w.get("rss_after_load_bytes") and w.get("rss_before_load_bytes") else None)
        return {"threads": threads, "nq": s["nq"], "rows": rows, "load_secs": s["load_secs"],
                "io": s["io"], "process": s["process"], "proc_io": s["proc_io"],
                "peak_rss_bytes": s["peak_rss_bytes"], "index_ram_bytes": ram,
                "baseline_rss_bytes": w.get("rss_before_load_bytes"),
                "read_bytes": (s["proc_io"] or {}).get("read_bytes"),
                "load_read_bytes": s["load_read_bytes"], "worker": w}


def ivf_nlist(n: int) -> int:
    return max(1, int(round(4 * math.sqrt(n))))


def pq_m_for(dim: int, target: int) -> int:
    """The divisor of `dim` closest to `target` (ties: the smaller, i.e. not above target)."""
    divs = [m for m in range(1, dim + 1) if dim % m == 0]
    return min(divs, key=lambda m: (abs(m - target), m))


class PyPeer:
    """faiss HNSW, faiss IVF-PQ + exact re-rank, hnswlib: bench/peers_worker.py in .venv-peers."""

    kind = "memory"

    def __init__(self, name: str, ds: datasets.Dataset, args: argparse.Namespace, py: Path,
                 freeze: list[str]):
        self.name, self.ds, self.args, self.py = name, ds, args, py
        folder = Path(ds.base).parent
        if name == "faiss-ivfpq":
            self.nlist = args.ivf_nlist or ivf_nlist(ds.n)
            self.pq_m = args.ivf_m or pq_m_for(ds.dim, args.pq_bytes)
            self.idx = folder / f"faiss-ivfpq-{ds.metric}-nlist{self.nlist}-m{self.pq_m}-refineflat"
            lib_params = {"nlist": self.nlist, "pq_m": self.pq_m, "pq_nbits": 8,
                          "refine": "IndexRefineFlat", "train_max": args.ivf_train_max}
        else:
            self.idx = folder / f"{name}-{ds.metric}-M{args.hnsw_M}-efc{args.hnsw_efc}"
            lib_params = {"M": args.hnsw_M, "ef_construction": args.hnsw_efc}
        self.file = self.idx / ("index.faiss" if name.startswith("faiss") else "index.hnswlib")
        self.params = {"lib": name, **lib_params, "metric": ds.metric, "threads": args.threads,
                       "data": ds.base, "data_bytes": Path(ds.base).stat().st_size,
                       "venv": sorted(v for v in freeze if v.split("==")[0].lower() in
                                      ("faiss-cpu", "hnswlib", "numpy"))}
        self.env = thread_env(args.threads)

    def describe(self) -> dict:
        a, d = self.args, self.ds.dim
        norm = " (L2-normalised, inner product)" if self.ds.metric == "cosine" else ""
        if self.name == "faiss-hnsw":
            return {"ram": f"all vectors (f32, {4 * d} B/vector){norm} + HNSW graph "
                           f"(M {a.hnsw_M}, {2 * a.hnsw_M} links on level 0)",
                    "disk": "nothing at search time (index file read into RAM at load)",
                    "flags": f"IndexHNSWFlat M {a.hnsw_M}, efConstruction {a.hnsw_efc}; "
                             f"efSearch {a.hnsw_ef}",
                    "build": "IndexHNSWFlat.add (single pass, OpenMP)"}
        if self.name == "hnswlib":
            sp = {"l2": "l2", "ip": "ip", "cosine": "cosine"}[self.ds.metric]
            return {"ram": f"all vectors (f32, {4 * d} B/vector) + HNSW graph (M {a.hnsw_M}, "
                           f"{2 * a.hnsw_M} links on level 0); space '{sp}'",
                    "disk": "nothing at search time (index file read into RAM at load)",
                    "flags": f"M {a.hnsw_M}, ef_construction {a.hnsw_efc}; ef {a.hnsw_ef}",
                    "build": "Index.add_items (num_threads)"}
        return {"ram": f"IVF lists: PQ codes ({self.pq_m} B/vector, {self.pq_m} sub-quantizers "
                       f"x 8 bits, by residual) + 8 B ids, {self.nlist} coarse centroids; "
                       f"and the full f32 vectors ({4 * d} B/vector){norm} for the exact "
                       "re-rank (IndexRefineFlat)",
                "disk": "nothing at search time (index file read into RAM at load)",
                "flags": f"IndexRefineFlat(IndexIVFPQ(nlist {self.nlist}, m {self.pq_m}, "
                         f"nbits 8)); nprobe {a.ivf_nprobe} x k_factor {a.ivf_kfactor} "
                         "(re-rank k_factor x k candidates)",
                "build": "train (k-means coarse quantizer + PQ on residuals) + add"}

    def build(self, work: Path) -> dict:
        rec = None if self.args.rebuild else cached_build(self.idx, self.params)
        if rec and self.file.exists():
            log(f"  {self.name}: reusing {self.idx} (built {rec['when']})")
            return dict(rec["build"], reused=True, reused_from=rec["when"])
        shutil.rmtree(self.idx, ignore_errors=True)
        self.idx.mkdir(parents=True)
        warm_page_cache(Path(self.ds.base))
        res = work / f"{self.name}-build.json"
        cmd = [str(self.py), str(BENCH_DIR / "peers_worker.py"), "build", "--lib", self.name,
               "--data", self.ds.base, "--metric", self.ds.metric, "--index", self.file,
               "--threads", self.args.threads, "--result", res]
        if self.name == "faiss-ivfpq":
            cmd += ["--nlist", self.nlist, "--pq-m", self.pq_m,
                    "--train-max", self.args.ivf_train_max]
        else:
            cmd += ["-M", self.args.hnsw_M, "--ef-construction", self.args.hnsw_efc]
        m, io = run_io(cmd, work / f"{self.name}-build.log", env=self.env)
        inner = json.loads(res.read_text())
        db = dir_bytes(self.idx)
        build = {"build_secs": inner["build_call_secs"], "process_wall_secs": m.wall_secs,
                 "peak_rss_bytes": m.peak_rss_bytes,
                 "baseline_rss_bytes": inner["rss_before_build_bytes"],
                 "vmhwm_bytes": inner["peak_rss_self_bytes"],
                 "cpu_secs": m.user_secs + m.sys_secs, "disk_bytes": db["total"],
                 "files": db["files"], "steps_secs": {k: inner[k] for k in (
                     "load_secs", "index_build_secs", "save_secs")},
                 "info": inner["info"], "proc_io": io, "log": m.log_path, "reused": False,
                 "index_dir": str(self.idx),
                 "versions": {k: inner.get(k) for k in ("faiss", "hnswlib", "numpy", "python",
                                                        "faiss_compile_options")}}
        write_json(self.idx / PARAMS_FILE, {"params": self.params, "build": build,
                                            "when": when()})
        return build

    def search(self, work: Path, threads: int, q: Path, gt: Path, tag: str) -> dict:
        a = self.args
        res = work / f"{self.name}-search-{tag}.json"
        cmd = [str(self.py), str(BENCH_DIR / "peers_worker.py"), "search", "--lib", self.name,
               "--index", self.file, "--metric", self.ds.metric, "--queries", q, "--gt", gt,
               "-k", a.k, "--threads", threads, "--result", res]
        if self.name == "faiss-ivfpq":
            cmd += ["--nprobes", a.ivf_nprobe, "--k-factors", a.ivf_kfactor]
        else:
            cmd += ["--efs", a.hnsw_ef]
        m, io = run_io(cmd, work / f"{self.name}-search-{tag}.log", env=thread_env(threads))
        s = json.loads(res.read_text())
        rows = []
        for r in s["rows"]:
            x = [r["k_factor"], r["nprobe"]] if self.name == "faiss-ivfpq" else r["ef"]
            rows.append({"param": r["param"], "x": x, "recall": r["recall"], "qps": r["qps"],
                         "mean_latency_us": r["mean_latency_us"], "p99_us": None,
                         "pages_per_query": 0.0, "ios_per_query": 0.0, "hops_per_query": None})
        ram = (s["rss_after_load_bytes"] - s["rss_before_load_bytes"]
               if s.get("rss_after_load_bytes") and s.get("rss_before_load_bytes") else None)
        return {"threads": threads, "nq": s["nq"], "rows": rows, "load_secs": s["load_secs"],
                "io": "in memory", "process": m.to_dict(), "proc_io": io,
                "peak_rss_bytes": m.peak_rss_bytes, "index_ram_bytes": ram,
                "baseline_rss_bytes": s.get("rss_before_load_bytes"),
                "read_bytes": (io or {}).get("read_bytes"), "worker": s}


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------

ROW_KEYS = ("recall", "qps", "mean_latency_us", "p99_us", "pages_per_query", "ios_per_query",
            "hops_per_query")


def _med(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def median_rows(sweeps: list[dict]) -> list[dict]:
    """Median per sweep point over repetitions, in the sweep's order."""
    by: dict[str, list[dict]] = {}
    for s in sweeps:
        for r in s["rows"]:
            by.setdefault(r["param"], []).append(r)
    return [{"param": p, "x": rs[0]["x"], **{k: _med(r.get(k) for r in rs) for k in ROW_KEYS},
             "n": len(rs)} for p, rs in by.items()]


def frontier(rows: list[dict]) -> list[dict]:
    """The recall-QPS Pareto frontier (no other point has both higher recall and higher QPS),
    by increasing recall: what a 2-D sweep (IVF-PQ: nprobe x k_factor) offers at each recall."""
    pts = sorted((r for r in rows if r.get("recall") is not None and r.get("qps")),
                 key=lambda r: (-r["recall"], -r["qps"]))
    out, best = [], -1.0
    for r in pts:
        if r["qps"] > best:
            out.append(r)
            best = r["qps"]
    return list(reversed(out))


def at_recall(rows: list[dict], key: str, target: float, two_d: bool) -> dict:
    """`key` at recall = target: vs_diskann_disk.interpolate along the sweep (1-D sweeps: in
    the order of L / ef) or along the recall-QPS frontier (2-D sweeps)."""
    if not rows:
        return {"value": None, "bound": None}
    seq = frontier(rows) if two_d else rows
    return interpolate([dict(r, L=i) for i, r in enumerate(seq)], key, target)


def sweeps_by_threads(raw: dict) -> dict[int, list[dict]]:
    """A side's QPS sweeps grouped by their thread count, ascending (a raw result from before
    --peer-threads has one count: its run's --threads)."""
    default = raw["meta"]["params"]["threads"]
    by: dict[int, list[dict]] = {}
    for s in raw["sweeps"]:
        by.setdefault(int(s.get("threads") or default), []).append(s)
    return dict(sorted(by.items()))


def best_threads(qps_by_threads: dict[int, dict]) -> int | None:
    """The thread count with the highest QPS at a recall target (at_recall's interpolated
    value, or the first point's where already above the target); ties: fewer threads. None
    where no thread count reaches the target."""
    reached = [(d["value"], -t) for t, d in qps_by_threads.items() if d.get("value") is not None]
    return -max(reached)[1] if reached else None


def summarize(side: str, raw: dict) -> dict:
    groups = sweeps_by_threads(raw)
    rows_by_t = {t: median_rows(sw) for t, sw in groups.items()}
    lrows = median_rows(raw["lat1_sweeps"]) if raw.get("lat1_sweeps") else []
    for r in lrows:  # 1-thread mean latency: wall / nq of the 1-thread batch, every side alike
        r["wall_latency_us"] = 1e6 / r["qps"] if r["qps"] else None
    two_d = side == "faiss-ivfpq" or (side == "trawl-ivf" and any(
        "," in str(r.get("param")) for rows in rows_by_t.values() for r in rows))
    # QPS at each target for every thread count; the side's figures at a target come from the
    # thread count with the highest QPS there (a peer's sweep over --peer-threads; trawl's
    # sides and older results have one count).
    qps_t = {f"{tgt:.2f}": {t: at_recall(rows, "qps", tgt, two_d)
                            for t, rows in rows_by_t.items()} for tgt in TARGETS}
    best = {key: best_threads(per_t) for key, per_t in qps_t.items()}
    run_threads = raw["meta"]["params"]["threads"]
    # The headline thread count (the side's sweep table, plots, process figures): the best at
    # the first target reached; where none is, the run's --threads (else the fewest).
    headline = next((b for b in best.values() if b is not None),
                    run_threads if run_threads in rows_by_t or not rows_by_t
                    else next(iter(rows_by_t)))
    at = {}
    for tgt in TARGETS:
        key = f"{tgt:.2f}"
        t = best[key] if best[key] is not None else headline
        rows = rows_by_t.get(t, [])
        at[key] = {
            "qps": qps_t[key].get(t) or at_recall(rows, "qps", tgt, two_d),
            "threads": t, "best_threads": best[key],
            "qps_by_threads": {str(n): v for n, v in qps_t[key].items()},
            "pages_per_query": at_recall(rows, "pages_per_query", tgt, two_d),
            "batch_mean_latency_us": at_recall(rows, "mean_latency_us", tgt, two_d),
            "lat1_us": at_recall(lrows, "wall_latency_us", tgt, two_d) if lrows else None,
            "param": _param_at(rows, tgt, two_d),
        }
    builds = raw["builds"]
    fresh = [b for b in builds if not b.get("reused")]
    use = fresh or builds[:1]
    sw = groups.get(headline, [])
    disk = (_med(s.get("disk_bytes_searched") for s in sw) if side in TRAWL_SIDES else
            builds[0].get("disk_bytes_search") or builds[0].get("disk_bytes"))
    return {
        "rows": rows_by_t.get(headline, []), "threads": headline,
        "thread_counts": list(rows_by_t),
        "rows_by_threads": {str(n): rows for n, rows in rows_by_t.items()},
        "lat1_rows": lrows, "at_recall": at, "two_d": two_d,
        "build_secs": _med(b["build_secs"] for b in use),
        "build_secs_all": [b["build_secs"] for b in use],
        "build_peak_rss_bytes": _med(b["peak_rss_bytes"] for b in use),
        "build_reused": not fresh, "build_reused_from": builds[0].get("reused_from"),
        "build_cpu_secs": _med(b.get("cpu_secs") for b in use),
        "disk_bytes": disk,
        "index_files_bytes": builds[0].get("disk_bytes"),
        # Process figures: the headline thread count's runs.
        "search_peak_rss_bytes": _med(s["peak_rss_bytes"] for s in sw),
        "index_ram_bytes": _med(s.get("index_ram_bytes") for s in sw),
        "search_load_secs": _med(s.get("load_secs") for s in sw),
        "search_read_bytes": _med(s.get("read_bytes") for s in sw),
        "search_claimed_read_bytes": _med(s.get("claimed_read_bytes") for s in sw),
        "search_io": sw[0].get("io") if sw else None,
        "lat1_peak_rss_bytes": _med(s["peak_rss_bytes"] for s in raw.get("lat1_sweeps") or []),
        "nq": sw[0]["nq"] if sw else None,
        "lat1_nq": raw["lat1_sweeps"][0]["nq"] if raw.get("lat1_sweeps") else None,
        "repeats": len(sw),
    }


def _param_at(rows: list[dict], tgt: float, two_d: bool) -> str | None:
    """The first sweep point reaching the target (in sweep order, or along the frontier)."""
    seq = frontier(rows) if two_d else rows
    for r in seq:
        if r.get("recall") is not None and r["recall"] >= tgt:
            return r["param"]
    return None


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _f(v, fmt="{:.0f}", none="-"):
    return none if v is None else fmt.format(v)


def _iv(d: dict | None, fmt="{:.0f}") -> str:
    if not d or d.get("value") is None:
        return "not reached" if d and d.get("bound") == "not-reached" else "-"
    s = fmt.format(d["value"])
    return s + ("*" if d.get("bound") == "at-first-L" else "")


def _mib(b) -> str:
    return "-" if b is None else f"{b / MIB:.1f}"


def at_table(sides: dict, tgt: float) -> list[str]:
    key = f"{tgt:.2f}"
    lines = ["| side | QPS | QPS configuration | latency µs (1 thread) | pages/query | "
             "RAM MiB (search peak RSS) | index RAM MiB | disk MiB | build s | "
             "build peak RSS MiB | sweep point |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, v in sides.items():
        s = v["summary"]
        a = s["at_recall"][key]
        lat = _iv(a["lat1_us"]) if a.get("lat1_us") else \
            (_iv(a["batch_mean_latency_us"]) + " (batch)")
        reached = a["qps"].get("value") is not None
        lines.append(
            f"| {n} | {_iv(a['qps'])} | {qps_config(n, v, key)} | "
            f"{lat if reached else 'not reached'} | "
            f"{_pages(n, a, reached)} | "
            f"{_mib(s['search_peak_rss_bytes'])} | {_mib(s['index_ram_bytes'])} | "
            f"{_mib(s['disk_bytes'])} | {_f(s['build_secs'], '{:.1f}')}"
            f"{' (reused)' if s['build_reused'] else ''} | {_mib(s['build_peak_rss_bytes'])} | "
            f"{a['param'] or '-'} |")
    return lines


def qps_config(side: str, v: dict, key: str | None = None, short: bool = False) -> str:
    """How a side's QPS at recall `key` was measured: trawl's threads x queries in flight per
    thread; a peer's thread count there (its best of --peer-threads; "best of ..." unless
    short). key None: the side's headline sweep."""
    s, p = v["summary"], v["meta"]["params"]
    if side in TRAWL_SIDES:
        t = s["threads"]
        if side == "trawl-flash":
            return f"{_nthreads(t)} × {_flash_batch(v)} in flight (flash batch)"
        il = p.get("ivf_interleave" if side == "trawl-ivf" else "trawl_interleave") or 1
        if t == 1 and side != "trawl-ivf":
            il = 1  # TrawlPeer._interleave: a 1-thread sweep runs one query at a time
        return _nthreads(t) + (f" × {il} in flight" if il > 1 else "")
    a = s["at_recall"][key] if key else None
    if a is not None and a["qps"].get("value") is None and len(s["thread_counts"]) > 1:
        return f"not reached at {_counts(s['thread_counts'])} threads"
    t = a["threads"] if a is not None else s["threads"]
    best_of = (f" (best of {_counts(s['thread_counts'])})"
               if len(s["thread_counts"]) > 1 and not short else "")
    return f"{_nthreads(t)}{best_of}"


def _counts(counts: list[int]) -> str:
    return "/".join(str(c) for c in counts)


def _nthreads(n: int) -> str:
    return f"{n} thread" + ("" if n == 1 else "s")


def _flash_batch(v: dict) -> int:
    """trawl-flash's queries in flight per thread: --flash-batch where given (trawl-extra),
    else trawl's CPU default, 32."""
    flags = v["describe"]["flags"].split()
    if "--flash-batch" in flags:
        i = flags.index("--flash-batch")
        if i + 1 < len(flags) and flags[i + 1].isdigit() and int(flags[i + 1]) > 0:
            return int(flags[i + 1])
    return 32


def threads_table(sides: dict, tgt: float) -> list[str]:
    """QPS at recall `tgt` of every peer side at each of its thread counts (the best in bold:
    the one the tables above use); empty when no peer swept more than one count."""
    key = f"{tgt:.2f}"
    peers = {n: v for n, v in sides.items() if n not in TRAWL_SIDES}
    if not any(len(v["summary"]["thread_counts"]) > 1 for v in peers.values()):
        return []
    counts = sorted({c for v in peers.values() for c in v["summary"]["thread_counts"]})
    trawl = "; ".join(f"{n} {qps_config(n, v)}" for n, v in sides.items() if n in TRAWL_SIDES)
    lines = [f"QPS at recall@10 = {key} of each peer by search thread count (--peer-threads; "
             "bold = the best, used above" + (f"; trawl's sides: {trawl}" if trawl else "")
             + ").", "",
             "| side | " + " | ".join(_nthreads(c) for c in counts) + " |",
             "|---|" + "---|" * len(counts)]
    for n, v in peers.items():
        a = v["summary"]["at_recall"][key]
        cells = []
        for c in counts:
            d = a["qps_by_threads"].get(str(c))
            cell = _iv(d) if d else "-"
            cells.append(f"**{cell}**" if c == a["best_threads"] else cell)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def ratio_table(sides: dict, tgt: float) -> list[str]:
    """trawl's sides over each peer at recall `tgt`, each side in the configuration measured
    there (trawl: threads x queries in flight; a peer: its best thread count there)."""
    key = f"{tgt:.2f}"
    trawl = {n: v for n, v in sides.items() if n in TRAWL_SIDES}
    peers = {n: v for n, v in sides.items() if n not in TRAWL_SIDES}
    if not trawl or not peers:
        return []

    def qps(v: dict) -> float | None:
        return v["summary"]["at_recall"][key]["qps"].get("value")

    lines = [f"QPS ratio at recall@10 = {key}, trawl side / peer, each in its configuration "
             "there (* = a side already above the target at its first sweep point).", "",
             "| trawl side (configuration) | " + " | ".join(
                 f"/ {n} ({qps_config(n, v, key, short=True)})" for n, v in peers.items())
             + " |", "|---|" + "---|" * len(peers)]
    for n, v in trawl.items():
        cells = []
        for pv in peers.values():
            a, b = qps(v), qps(pv)
            star = "*" if "at-first-L" in (v["summary"]["at_recall"][key]["qps"].get("bound"),
                                           pv["summary"]["at_recall"][key]["qps"].get("bound")) \
                else ""
            cells.append(f"{a / b:.2f}×{star}" if a is not None and b else "-")
        lines.append(f"| {n} ({qps_config(n, v, key)}) | " + " | ".join(cells) + " |")
    return lines


def _pages(side: str, a: dict, reached: bool) -> str:
    if side in PY_SIDES:
        return "0 (in RAM)"
    return _iv(a["pages_per_query"], "{:.1f}") if reached else "not reached"


def _repeats(sides: dict) -> str:
    reps = {n: v["summary"]["repeats"] for n, v in sides.items()}
    if len(set(reps.values())) == 1:
        return str(next(iter(reps.values())))
    return ", ".join(f"{n} {r}" for n, r in reps.items())


def _peer_threads(sides: dict) -> str:
    """The thread counts the peers' QPS sweeps ran at (from their results: older runs have
    one, their --threads), in words."""
    ts = sorted({c for n, v in sides.items() if n not in TRAWL_SIDES
                 for c in v["summary"]["thread_counts"]})
    if len(ts) <= 1:
        return _nthreads(ts[0]) if ts else "- (no peer side)"
    return f"each of {_counts(ts)} threads, the best at each recall target"


def render(dataset: str, sides: dict) -> tuple[str, list[dict]]:
    meta = max((v["meta"] for v in sides.values()), key=lambda m: m["run_id"])
    p, ds, mach = meta["params"], meta["dataset"], meta["machine"]
    lines = [f"# trawl and its peers: {dataset}", "",
             f"{ds['n']} x {ds['dim']} f32, metric {ds['metric']}, GT backend "
             f"{ds['gt_backend']} (exact top-100). {meta['when']}; command: "
             f"`{meta['command']}`.", "",
             "## Setup", "",
             f"- Machine: {mach.get('cpu_model')}, {mach.get('affinity_cpus')} CPUs available "
             f"({mach.get('logical_cpus')} logical), "
             f"{(mach.get('mem_total_kib') or 0) / 2**20:.1f} GiB RAM, {mach.get('platform')}; git {str(mach.get('git_commit'))[:12]}; load "
             f"average at start {_load(meta.get('loadavg_start'))}, at end "
             f"{_load(meta.get('loadavg_end'))}.",
             f"- Versions: {meta['versions'].get('trawl')}; diskannpy venv: "
             f"{', '.join(meta['versions'].get('diskann_venv') or ['-'])}; peers venv: "
             f"{', '.join(meta['versions'].get('peers_venv') or ['-'])}; faiss compile options: "
             f"{meta['versions'].get('faiss_compile_options') or '-'}.",
             f"- Queries: {p['nq_used']} (a seeded random sample of the dataset's "
             f"{ds['nq']} queries, the same file for every side; cosine: L2-normalised for "
             "diskann, faiss and hnswlib), k = 10, recall@10 against the dataset's GT, "
             f"{p['threads']} threads for builds and trawl's QPS sweeps (trawl --threads, with "
             "its queries in flight per thread: the configuration column); the peers' QPS "
             f"sweeps at {_peer_threads(sides)} (--peer-threads; faiss omp_set_num_threads, "
             "hnswlib num_threads, diskann num_threads; OMP/MKL/OpenBLAS threads pinned to the "
             "run's count); 1 thread for the latency sweeps"
             + ("" if p["latency"] else " (skipped: --no-latency)") + ".",
             f"- Disk index parameters: R {p['R']}, L {p['L']}, α 1.2, {p['pq_bytes']} PQ "
             f"bytes per vector, beam width {p['beam_width']}, {p['cache_nodes']} cached nodes"
             f"; search L {p['search_L']}. In-memory: HNSW M {p['hnsw_M']}, efConstruction "
             f"{p['hnsw_efc']}, ef {p['hnsw_ef']}; IVF-PQ nprobe {p['ivf_nprobe']}, k_factor "
             f"{p['ivf_kfactor']}.",
             f"- Repetitions of the search sweeps: {_repeats(sides)} (sides in alternating "
             "order; medians per sweep point). Builds: once, cached (\"reused\" = built by an "
             "earlier run with the same parameters, its measured figures shown).", "",
             "| side | in RAM at search time | on disk at search time | configuration | build |",
             "|---|---|---|---|---|"]
    for n, v in sides.items():
        d = v["describe"]
        lines.append(f"| {n} | {d['ram']} | {d['disk']} | {d['flags']} | {d['build']} |")
    for tgt in TARGETS:
        lines += ["", f"## At recall@10 = {tgt:.2f}", "",
                  "Linear interpolation between the two sweep points bracketing the target "
                  "(IVF-PQ: along its recall-QPS frontier); * = already above the target at "
                  "the first sweep point (its value); \"not reached\" = no sweep point gets "
                  "there. Sweep point = the first one at or above the target. QPS "
                  "configuration = trawl's threads x queries in flight per thread; a peer's "
                  "thread count with the highest QPS at this recall.", ""]
        lines += at_table(sides, tgt)
        for extra in (threads_table(sides, tgt), ratio_table(sides, tgt)):
            if extra:
                lines += [""] + extra
    lines += ["", "Columns: QPS = nq / wall of one batch (all queries, all threads; index load "
                  "excluded; a peer: at its best thread count for that recall, interpolated "
                  "along each thread count's sweep, the highest taken). Latency = wall / nq "
                  "of the 1-thread sweep at the same point (every "
                  "side measured alike; \"(batch)\" = threads x wall / nq of the multi-thread "
                  "batch where no 1-thread sweep ran). Pages/query = 4 KiB reads per query: "
                  "trawl's own counter (pages_per_query of its bench JSON), diskann's "
                  "/proc/self/io read_bytes during the batch / 4096 / nq, 0 for the in-memory "
                  "sides. RAM = peak RSS (ru_maxrss) of the search process, interpreter "
                  "included for the Python sides; index RAM = trawl's memory_total_bytes (what "
                  "it holds for the index: PQ codes, codebooks, entry index, caches, page "
                  "metadata), for the others the RSS growth while loading the index. Disk = "
                  "bytes of the files the search opens (trawl: its bench JSON's disk_bytes; "
                  "diskann: the index directory without ann_mem.index.data, which its search "
                  "never reads; in-memory sides: the saved index file, read once at load). "
                  "Build s = trawl: wall time of `trawl build` (+ `trawl layout --decoupled`); "
                  "diskann and the Python sides: the build call timed inside the child "
                  "(reading the data, building, saving; interpreter start and imports "
                  "excluded). Build peak RSS = ru_maxrss of the build process(es)."]
    lines += ["", "## Sweeps", ""]
    csv_rows = []
    for n, v in sides.items():
        s = v["summary"]
        l1 = {r["param"]: r for r in s["lat1_rows"]}
        swept = (f"; QPS sweeps at {_counts(s['thread_counts'])} threads (process figures: "
                 f"the {s['threads']}-thread runs)" if len(s["thread_counts"]) > 1 else
                 f"; QPS sweep: {qps_config(n, v)}")
        lines += [f"### {n}", "",
                  f"{s['nq']} queries, {s['repeats']} repetition(s){swept}; search process peak "
                  "RSS "
                  f"{_mib(s['search_peak_rss_bytes'])} MiB, index load "
                  f"{_f(s['search_load_secs'], '{:.2f}')} s, reads: {s['search_io']}"
                  + (f", device reads of the whole process {_mib(s['search_read_bytes'])} MiB"
                     if s.get("search_read_bytes") is not None and n in DISK_SIDES else "")
                  + (f" (pages claimed x 4 KiB: {_mib(s['search_claimed_read_bytes'])} MiB)"
                     if s.get("search_claimed_read_bytes") else "") + "."
                  + _check_text(v.get("recall_check")) + " Build: "
                  f"{_f(s['build_secs'], '{:.1f}')} s, peak RSS "
                  f"{_mib(s['build_peak_rss_bytes'])} MiB, "
                  + (f"reused (built {s['build_reused_from']})" if s["build_reused"] else
                     "built in this run") + f"; {v['describe']['build']}.", "",
                  "| point | threads | recall@10 | QPS | batch mean latency µs | "
                  "1-thread recall | 1-thread latency µs | pages/q | I/Os/q | p99 µs |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        # Every thread count's sweep (a peer: one per --peer-threads count), ascending.
        counts = sorted(s["rows_by_threads"], key=int)
        for c in counts:
            rows = s["rows_by_threads"][c]
            front = {r["param"] for r in frontier(rows)} if s["two_d"] else set()
            for r in rows:
                q1 = l1.get(r["param"], {})
                mark = " (frontier)" if r["param"] in front else ""
                lines.append(
                    f"| {r['param']}{mark} | {c} | {_f(r['recall'], '{:.4f}')} | "
                    f"{_f(r['qps'])} | {_f(r['mean_latency_us'])} | "
                    f"{_f(q1.get('recall'), '{:.4f}')} | {_f(q1.get('wall_latency_us'))} | "
                    f"{_f(r['pages_per_query'], '{:.1f}')} | "
                    f"{_f(r['ios_per_query'], '{:.1f}')} | {_f(r['p99_us'])} |")
                csv_rows.append({
                    "dataset": dataset, "side": n, "point": r["param"], "recall": r["recall"],
                    "qps": r["qps"], "threads": int(c),
                    "headline_threads": int(c) == s["threads"],
                    "batch_mean_latency_us": r["mean_latency_us"], "p99_us": r["p99_us"],
                    "lat1_recall": q1.get("recall"),
                    "lat1_latency_us": q1.get("wall_latency_us"),
                    "pages_per_query": r["pages_per_query"], "ios_per_query": r["ios_per_query"],
                    "hops_per_query": r["hops_per_query"], "repeats": r["n"],
                    "search_peak_rss_mib": _num(s["search_peak_rss_bytes"], MIB),
                    "index_ram_mib": _num(s["index_ram_bytes"], MIB),
                    "disk_mib": _num(s["disk_bytes"], MIB), "build_secs": s["build_secs"],
                    "build_peak_rss_mib": _num(s["build_peak_rss_bytes"], MIB),
                    "build_reused": s["build_reused"]})
        lines.append("")
    runs = {v["meta"]["run_id"] for v in sides.values()}
    if len(runs) > 1:
        lines += ["**Note:** the sides were measured in different runs: " + ", ".join(
            f"{n}: {v['meta']['when']}" for n, v in sides.items()), ""]
    lines += [NOTES, "", "## Run time per phase (s, wall)", ""]
    for run_id in sorted(runs):
        m = next(v["meta"] for v in sides.values() if v["meta"]["run_id"] == run_id)
        lines.append(f"- run {run_id} (`{m['command']}`): " + ", ".join(
            f"{k} {v:.1f}" for k, v in (m.get("phase_secs") or {}).items()) +
            f"; total {m.get('total_secs', 0):.1f}.")
    return "\n".join(lines) + "\n", csv_rows


NOTES = """Notes:
- Honesty of the disk figures: trawl reads with O_DIRECT (io_uring) and diskann with O_DIRECT
  (libaio), so the page cache serves none of their index reads; the device-read counter of each
  search process (/proc/<pid>/io read_bytes) is shown beside trawl's own page count. The page
  cache was not dropped between runs (needs root).
- Cosine: diskann's disk index has no cosine, so it gets L2-normalised base and queries with
  metric l2; faiss gets normalised vectors and inner product; hnswlib gets normalised vectors
  and space 'cosine'; trawl gets the original vectors with its cosine metric. Same ranking.
- IVF-PQ is faiss.IndexRefineFlat over IndexIVFPQ: the PQ codes shortlist k_factor x k
  candidates, which are re-ranked exactly with the full f32 vectors, also in RAM. Its sweep is
  a grid (nprobe x k_factor): the figures at a recall follow its recall-QPS frontier.
- QPS of the Python sides: one batch call with all queries (faiss: OpenMP over queries; hnswlib:
  its thread pool); a warm-up pass at the first sweep point precedes the timed ones (diskann's
  worker does the same; trawl bench runs no warm-up pass: O_DIRECT reads are never warm).
- In-memory sides read nothing from disk while searching; their index file is read into RAM at
  load (excluded from QPS, like every side's load)."""


def _check_text(c: dict | None) -> str:
    if not c:
        return ""
    return (f" Recall check: `trawl search -L {c['L']}` ids scored by common.recall_at_k give "
            f"{c['recall_at_k']:.4f}, `trawl bench` reported {_f(c['bench_recall'], '{:.4f}')} "
            "(trawl computes recall with the same definition, ids only).")


def _num(v, div):
    return None if v is None else v / div


def _load(v) -> str:
    return "/".join(f"{x:.1f}" for x in v) if v else "?"


def raw_path(dataset: str, side: str) -> Path:
    return OUT_DIR / "raw" / f"peers-{dataset}.{side}.json"


def load_sides(dataset: str) -> dict:
    sides = {}
    for side in ALL_SIDES:
        pth = raw_path(dataset, side)
        if pth.exists():
            v = json.loads(pth.read_text())
            v["summary"] = summarize(side, v)
            sides[side] = v
    if not sides:
        raise SystemExit(f"no raw results for {dataset} under {OUT_DIR / 'raw'} (peers-*)")
    return sides


def write_outputs(dataset: str, plot: bool = True) -> dict:
    sides = load_sides(dataset)
    md, csv_rows = render(dataset, sides)
    base = OUT_DIR / f"peers-{dataset}"
    Path(f"{base}.md").write_text(md)
    with open(f"{base}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
        w.writeheader()
        w.writerows(csv_rows)
    write_json(Path(f"{base}.json"), {"dataset": dataset, "sides": sides})
    print(md)
    pngs = run_plot(Path(f"{base}.json"), base) if plot else []
    return {"md": Path(f"{base}.md"), "pngs": pngs, "sides": sides}


def run_plot(json_path: Path, base: Path) -> list[Path]:
    py = PLOT_VENV / "bin" / "python"
    if not py.exists():
        log(f"no {PLOT_VENV}: skipping plots (python3 -m venv bench/.venv-plot && "
            "bench/.venv-plot/bin/pip install matplotlib)")
        return []
    r = subprocess.run([str(py), str(BENCH_DIR / "peers_plot.py"), str(json_path),
                        "--out", str(base)], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"peers_plot.py failed: {r.stderr.strip()[-800:]}")
        return []
    log(r.stdout.strip())
    return [Path(ln) for ln in r.stdout.split() if ln.endswith(".png")]


# ---------------------------------------------------------------------------------------------
# --publish, --update-readme
# ---------------------------------------------------------------------------------------------

def publish(md: Path, pngs: list[Path], dest: Path = BENCH_DIR / "results") -> None:
    dest.mkdir(exist_ok=True)
    for p in [md, *pngs]:
        shutil.copy2(p, dest / p.name)
        log(f"published {dest / p.name}")


def readme_block(dataset: str, sides: dict) -> str:
    meta = max((v["meta"] for v in sides.values()), key=lambda m: m["run_id"])
    p, ds = meta["params"], meta["dataset"]
    lines = [README_BEGIN,
             f"Peers (generated by `{meta['command']}`, {meta['when']}; full report "
             f"`bench/results/peers-{dataset}.md`): {ds['n']} x {ds['dim']} f32, "
             f"{ds['metric']}; {p['nq_used']} random queries, k = 10; QPS: trawl "
             f"{p['threads']} threads (with its queries in flight per thread), peers at "
             f"{_peer_threads(sides)} (the QPS configuration column); 1 thread (latency); "
             f"disk sides R = {p['R']}, L = {p['L']}, "
             f"{p['pq_bytes']} PQ bytes, beam width {p['beam_width']}, {p['cache_nodes']} "
             f"cached nodes, O_DIRECT; HNSW M = {p['hnsw_M']}, efConstruction = {p['hnsw_efc']}; "
             f"medians of {p['repeat']} repetition(s); interpolated at equal recall@10.", "",
             "| side | in RAM | recall@10 | QPS | QPS configuration | latency µs | pages/query | "
             "RAM MiB | disk MiB | build s |", "|---|---|---|---|---|---|---|---|---|---|"]
    short = {"trawl-beam": "PQ codes", "trawl-pipe": "PQ codes + entry index",
             "trawl-flash": "PQ codes + entry index",
             "trawl-c5": "PQ codes + entry index + page table",
             "trawl-pipe-ps": "PQ codes + entry index + page table",
             "trawl-ivf": "PQ codes + centroids + lists",
             "trawl-decoupled": "PQ codes", "diskann": "PQ codes",
             "faiss-hnsw": "vectors + graph", "faiss-ivfpq": "PQ codes + vectors (re-rank)",
             "hnswlib": "vectors + graph"}
    for tgt in TARGETS:
        key = f"{tgt:.2f}"
        for n, v in sides.items():
            s = v["summary"]
            a = s["at_recall"][key]
            ok = a["qps"].get("value") is not None
            lat = _iv(a["lat1_us"]) if a.get("lat1_us") else _iv(a["batch_mean_latency_us"])
            lines.append(
                f"| {n} | {short.get(n, '')} | {key} | {_iv(a['qps'])} | "
                f"{qps_config(n, v, key, short=True)} | {lat if ok else 'not reached'} | "
                f"{_pages(n, a, ok)} | "
                f"{_mib(s['search_peak_rss_bytes'])} | {_mib(s['disk_bytes'])} | "
                f"{_f(s['build_secs'], '{:.1f}')} |")
    lines += ["", "RAM = peak RSS of the search process; disk = files the search opens; "
                  "latency = wall / nq of a 1-thread batch; * = above the target at the first "
                  "sweep point.", README_END]
    return "\n".join(lines)


def update_readme(dataset: str, sides: dict, readme: Path) -> None:
    text = readme.read_text()
    block = readme_block(dataset, sides)
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        _, tail = rest.split(README_END, 1)
        new = head + block + tail
    else:  # no block yet: put one at the end of the "## Results" section
        lines = text.split("\n")
        try:
            start = next(i for i, ln in enumerate(lines) if ln.strip() == "## Results")
        except StopIteration:
            raise SystemExit(f"{readme}: no {README_BEGIN} / {README_END} block and no "
                             "'## Results' section to put one in")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        lines[end:end] = ["", block]
        new = "\n".join(lines)
        log(f"{readme}: no peers block yet; added one at the end of '## Results'")
    readme.write_text(new)
    log(f"rewrote the peers block of {readme}")


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--sides", default=",".join(ALL_SIDES),
                    help="comma list of " + ",".join(ALL_SIDES))
    ap.add_argument("--threads", type=int, default=2,
                    help="build threads of every side; QPS-sweep threads of trawl's sides")
    ap.add_argument("--peer-threads", default="2,8,16,32", type=thread_counts,
                    help="comma list: the QPS sweep of every non-trawl side (diskann, "
                         "faiss-hnsw, faiss-ivfpq, hnswlib) runs once per thread count; the "
                         "report takes each peer's best count at each recall target (trawl "
                         "keeps several queries in flight per thread, so a peer gets its best "
                         "oversubscription too); builds stay at --threads. A single count "
                         "equal to --threads is the old like-for-like run")
    ap.add_argument("--queries", type=int, default=3000,
                    help="queries: a seeded random sample of N (vs_diskann_disk.subset), the "
                         "same file for every side; 0 = all")
    ap.add_argument("--repeat", type=int, default=1,
                    help="repetitions of the search sweeps (sides alternating); medians")
    ap.add_argument("--search-L", default="10,15,20,30,40,50,60,80,100,150,200",
                    help="list sizes swept by trawl and diskann")
    ap.add_argument("--hnsw-ef", default="10,16,24,32,48,64,96,128,192,256,384,512",
                    help="ef swept by faiss HNSW and hnswlib")
    ap.add_argument("--ivf-nprobe", default="1,2,4,8,16,32,64,128,256")
    ap.add_argument("--ivf-kfactor", default="2,4,8",
                    help="IVF-PQ re-rank: k_factor x k candidates re-ranked exactly")
    ap.add_argument("--no-latency", dest="latency", action="store_false",
                    help="skip the 1-thread sweeps (latency then = threads x wall / nq of the "
                         "multi-thread batch, marked '(batch)')")
    ap.add_argument("--rebuild", action="store_true", help="rebuild every index of the run")
    ap.add_argument("--report-only", action="store_true",
                    help="re-render md/csv/json/plots from bench/out/raw/peers-<dataset>.*.json")
    ap.add_argument("--publish", action="store_true",
                    help="copy the md and the PNG plots into bench/results/")
    ap.add_argument("--update-readme", action="store_true",
                    help=f"rewrite the {README_BEGIN} ... {README_END} block of README.md")
    ap.add_argument("--no-plot", action="store_true")
    g = ap.add_argument_group("disk indexes (trawl, diskann)")
    g.add_argument("-R", type=int, default=64)
    g.add_argument("-L", type=int, default=100)
    g.add_argument("--pq-bytes", type=int, default=48,
                   help="PQ bytes per vector (capped at the dimension); IVF-PQ's m is the "
                        "divisor of the dimension closest to it")
    g.add_argument("-k", type=int, default=10)
    g.add_argument("--opq", action="store_true",
                   help="trawl graph sides: build with `trawl build --opq` (optimised PQ: a learned "
                        "rotation before the PQ codebooks; same code size). DiskANN's disk build "
                        "has no OPQ, so this is trawl's technique, not a changed budget")
    g.add_argument("--beam-width", type=int, default=4, help="trawl -W and diskann beam width")
    g.add_argument("--entry-list", type=int, default=10, help="trawl-pipe --entry-list")
    g.add_argument("--cache-nodes", type=int, default=0,
                   help="static node cache of trawl-beam, trawl-pipe and diskann (0 = none)")
    g.add_argument("--cache-policy", default="freq", choices=["freq", "bfs"])
    g.add_argument("--list-cache-mb", type=float, default=0,
                   help="trawl-decoupled: LRU cache of compressed neighbour lists, MiB")
    g.add_argument("--ivf-list-size", type=int, default=10, help="trawl-ivf --ivf-list-size")
    g.add_argument("--ivf-pq-bytes", type=int, default=0,
                   help="trawl-ivf PQ bytes per vector (0: --pq-bytes, as the graph sides)")
    g.add_argument("--ivf-epsilon", type=float, default=0.25, help="trawl-ivf --ivf-epsilon")
    g.add_argument("--trawl-ivf-nprobe", default="8,12,16,24,32,48,64,96,128",
                   help="trawl-ivf: lists probed (its -L sweep)")
    g.add_argument("--trawl-ivf-rerank", default="h,12,16,24",
                   help="trawl-ivf re-rank variants, each swept over the lists probed: h = the "
                        "heuristic early stop (--ivf-batch, --ivf-rerank-epsilon, --ivf-beta), "
                        "a number = that fixed re-rank budget n, heuristic off")
    g.add_argument("--ivf-batch", type=int, default=2, help="trawl-ivf re-rank mini-batch")
    g.add_argument("--ivf-rerank-epsilon", type=float, default=0.1,
                   help="trawl-ivf early-stop ε")
    g.add_argument("--ivf-beta", type=int, default=2, help="trawl-ivf early-stop β")
    g.add_argument("--ivf-rerank-n", type=int, default=0, help="trawl-ivf --rerank-n (0 = auto)")
    g.add_argument("--ivf-interleave", type=int, default=4,
                   help="trawl-ivf --interleave (queries in flight per thread; above 1 a thread "
                        "filters the next query while the re-rank reads of others are out)")
    g.add_argument("--trawl-extra", default="",
                   help="flags added to every trawl graph side's trawl bench / search, e.g. "
                        "\"--taskrun defer\"")
    g.add_argument("--trawl-interleave", type=int, default=4,
                   help="trawl-beam/-pipe/-decoupled --interleave (queries in flight per thread; "
                        "the same throughput mode as trawl-ivf's by default)")
    g.add_argument("--build-memory-gb", type=float, default=16.0,
                   help="diskann build_memory_maximum (large: one shard)")
    g = ap.add_argument_group("in-memory peers")
    g.add_argument("--hnsw-M", type=int, default=32)
    g.add_argument("--hnsw-efc", type=int, default=100)
    g.add_argument("--ivf-nlist", type=int, default=0, help="0 = round(4 sqrt(n))")
    g.add_argument("--ivf-m", type=int, default=0, help="0 = divisor of dim closest to --pq-bytes")
    g.add_argument("--ivf-train-max", type=int, default=0,
                   help="train IVF-PQ on a seeded sample of at most N points (0 = all)")
    g = ap.add_argument_group("environment")
    g.add_argument("--gt-backend", default="auto", choices=["auto", "trawl", "numpy"])
    g.add_argument("--venv", type=Path, default=PEERS_VENV, help="faiss/hnswlib virtualenv")
    g.add_argument("--venv-python", default="python3")
    g.add_argument("--diskann-venv", type=Path, default=DEFAULT_VENV)
    g.add_argument("--diskann-venv-python", default="python3.11")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args.report_only:
        out = write_outputs(args.dataset, plot=not args.no_plot)
    else:
        out = run(args)
    if args.publish:
        publish(out["md"], out["pngs"])
    if args.update_readme:
        update_readme(args.dataset, out["sides"], REPO_ROOT / "README.md")


def run(args: argparse.Namespace) -> dict:
    t_start = time.perf_counter()
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(sides) - set(ALL_SIDES)
    if unknown:
        raise SystemExit(f"unknown side(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(ALL_SIDES)}")
    ds = datasets.prepare(args.dataset, args.gt_backend, args.threads)
    if args.pq_bytes > ds.dim:
        log(f"--pq-bytes {args.pq_bytes} > dimension {ds.dim}: using {ds.dim}")
        args.pq_bytes = ds.dim
    folder = Path(ds.base).parent
    q, gt = subset(Path(ds.query), Path(ds.gt), args.queries or ds.nq, folder / "subsets")
    nq = read_fbin(q).shape[0]
    versions = {"trawl": trawl_version() if set(sides) & set(TRAWL_SIDES) else None}
    objs: dict = {}
    phases: dict = {}
    if set(sides) & set(TRAWL_GRAPH_SIDES):
        tindex = TrawlIndex(ds, args)
        for s in TRAWL_GRAPH_SIDES:
            if s in sides:
                objs[s] = TrawlPeer(s, tindex, args)
    if "trawl-ivf" in sides:
        objs["trawl-ivf"] = TrawlPeer("trawl-ivf", TrawlIvfIndex(ds, args), args)
    if "diskann" in sides:
        t0 = time.perf_counter()
        dpy = ensure_venv(args.diskann_venv, args.diskann_venv_python)
        phases["diskann-venv"] = time.perf_counter() - t0
        versions["diskann_venv"] = venv_freeze(dpy)
        objs["diskann"] = DiskannPeer(ds, args, dpy)
        log(f"diskann: search_memory_maximum = {objs['diskann'].side.search_memory_gb} GB -> "
            f"{args.pq_bytes} PQ bytes per vector")
    if set(sides) & set(PY_SIDES):
        t0 = time.perf_counter()
        ppy = ensure_peers_venv(args.venv, args.venv_python)
        phases["peers-venv"] = time.perf_counter() - t0
        versions["peers_venv"] = venv_freeze(ppy)
        r = subprocess.run([str(ppy), "-c", "import faiss; print(faiss.get_compile_options())"],
                           capture_output=True, text=True)
        versions["faiss_compile_options"] = r.stdout.strip() or None
        for s in PY_SIDES:
            if s in sides:
                objs[s] = PyPeer(s, ds, args, ppy, versions["peers_venv"])
    sides = [s for s in ALL_SIDES if s in sides]
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = OUT_DIR / "raw" / f"peers-{ds.name}" / run_id
    work.mkdir(parents=True, exist_ok=True)
    params = {k: getattr(args, k) for k in (
        "threads", "repeat", "search_L", "hnsw_ef", "ivf_nprobe", "ivf_kfactor", "latency",
        "R", "L", "pq_bytes", "k", "beam_width", "entry_list", "cache_nodes", "cache_policy",
        "list_cache_mb", "hnsw_M", "hnsw_efc", "rebuild", "trawl_ivf_nprobe", "ivf_list_size",
        "ivf_epsilon", "ivf_batch", "ivf_rerank_epsilon", "ivf_beta", "ivf_rerank_n",
        "ivf_interleave", "trawl_interleave", "trawl_ivf_rerank", "ivf_pq_bytes",
        "peer_threads")}
    params.update(nq_used=nq, queries_file=str(q), gt_file=str(gt))
    if "faiss-ivfpq" in objs:
        params.update(ivf_nlist=objs["faiss-ivfpq"].nlist, ivf_m=objs["faiss-ivfpq"].pq_m)
    meta = {"run_id": run_id, "when": when(), "dataset": ds.__dict__,
            "command": "python3 bench/peers.py " + " ".join(sys.argv[1:]),
            "machine": machine_info(), "versions": versions, "params": params,
            "loadavg_start": os.getloadavg()}
    res = {s: {"builds": [], "sweeps": [], "lat1_sweeps": [], "recall_check": None}
           for s in sides}
    for s in sides:  # builds first, so no search overlaps a build
        log(f"{s}: build on {ds.name}")
        t0 = time.perf_counter()
        b = objs[s].build(work)
        phases[f"{s} build"] = time.perf_counter() - t0
        res[s]["builds"].append(b)
        log(f"  {s}: build {b['build_secs']:.1f}s, peak RSS {b['peak_rss_bytes'] / MIB:.0f} MiB"
            f"{' (reused)' if b.get('reused') else ''} [{phases[f'{s} build']:.1f}s]")
    for rep in range(args.repeat):
        order = sides if rep % 2 == 0 else list(reversed(sides))
        rdir = work / f"rep{rep}"
        rdir.mkdir(parents=True, exist_ok=True)
        for s in order:
            # trawl's sides sweep at --threads (their in-flight depth is their own knob); the
            # peers at every --peer-threads count (alternating order, as the sides), the report
            # taking the best.
            counts = args.peer_threads if s in PEER_SIDES else [args.threads]
            counts = counts if rep % 2 == 0 else list(reversed(counts))
            by_threads: dict[int, dict] = {}
            for threads in counts:
                log(f"rep {rep + 1}/{args.repeat}: {s} search, {threads} thread"
                    f"{'s' if threads != 1 else ''}, {nq} queries")
                phase = f"{s} search t{threads} rep{rep}"
                t0 = time.perf_counter()
                sw = objs[s].search(rdir, threads, q, gt, f"t{threads}")
                phases[phase] = time.perf_counter() - t0
                res[s]["sweeps"].append(sw)
                by_threads[threads] = sw
                if rep == 0 and hasattr(objs[s], "recall_check"):
                    ls = [int(v) for v in objs[s].sweep.split(",")]
                    L = ls[0]  # the lowest recall of the sweep: the most telling check
                    br = next((r["recall"] for r in sw["rows"] if r["x"] == L), None)
                    chk = objs[s].recall_check(rdir, threads, q, gt, L, br)
                    res[s]["recall_check"] = chk
                    log(f"  {s}: recall check at L={L}: common.recall_at_k of `trawl search` "
                        f"ids {chk['recall_at_k']:.4f}, trawl bench {br}")
                log(f"  {s} {threads} threads: " + ", ".join(
                    f"{r['param']}={r['recall']:.3f}/{r['qps']:.0f}qps" for r in sw["rows"]) +
                    f" [{phases[phase]:.1f}s]")
            if args.latency and 1 in by_threads:  # the sweep above is the 1-thread sweep
                res[s]["lat1_sweeps"].append(by_threads[1])
            elif args.latency:
                t0 = time.perf_counter()
                s1 = objs[s].search(rdir, 1, q, gt, "t1")
                phases[f"{s} search t1 rep{rep}"] = time.perf_counter() - t0
                res[s]["lat1_sweeps"].append(s1)
                log(f"  {s} 1 thread: " + ", ".join(
                    f"{r['param']}={1e6 / r['qps']:.0f}us" for r in s1["rows"]) +
                    f" [{phases[f'{s} search t1 rep{rep}']:.1f}s]")
    meta["loadavg_end"] = os.getloadavg()
    meta["phase_secs"] = phases
    meta["total_secs"] = time.perf_counter() - t_start
    for s in sides:
        write_json(raw_path(ds.name, s), {"meta": meta, "side": s,
                                          "describe": objs[s].describe(), **res[s]})
    out = write_outputs(ds.name, plot=not args.no_plot)
    log("phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()) +
        f"; total {time.perf_counter() - t_start:.1f}")
    return out


if __name__ == "__main__":
    main()

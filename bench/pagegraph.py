#!/usr/bin/env python3
"""trawl's page-node layout (PageANN's design: `trawl layout --pages`, `--layout pages`) side by
side, in one run, with trawl's best existing disk modes and with DiskANN, at several memory
budgets, on the same index, queries and machine.

Sides (--sides, default all; flags of `trawl bench`, every trawl side on one index):
  trawl-pages-beam  `--layout pages --strategy beam -W 4 --entry-list 10` (page nodes: similar
                    vectors grouped into 4 KiB pages, one merged neighbour list per page)
  trawl-pages-pipe  `--layout pages --strategy pipe --entry-list 10` (PipeSearch on page nodes)
  trawl-pages-flash `--layout pages --strategy flash --staleness 1 --entry-list 10` (FlashANNS's
                    batch search on page nodes: a page scored by its nearest code on the
                    accelerator, the CPU backend here; its own batch of 32 queries per thread)
  trawl-c5          OctopusANN's C5 as bench/peers.py defines it: `--layout shuffle -W 32
                    --dynamic-width 5:4,4,8,8,16,16,24,24,32 --page-search --entry-list 10`
  trawl-pipe-ps     PipeSearch + PageSearch on the PageShuffle layout, as peers.py: `--layout
                    shuffle --strategy pipe --page-search --entry-list 10`
  trawl-flash       as peers.py: `--strategy flash --staleness 1 --entry-list 10` (packed layout,
                    its own batch of 32 queries per thread)
  diskann           diskannpy 0.7.0 `build_disk_index` + `StaticDiskIndex` (peers.DiskannPeer /
                    vs_diskann_disk.DiskannSide: the same R, L, α, PQ bytes, beam width 4)
--entry-list 10 is given only where the index has an entry index (`trawl info`: entry_nodes) and
the budget's plan keeps it in memory (below).

Measurement (peers.py's machinery, by import): every sweep is a child process measured from
outside (bench/measure_io.py: wall, ru_maxrss, /proc/<pid>/io). QPS sweeps: the trawl sides at
--threads threads (2) with --trawl-interleave queries in flight per thread (4; flash: its batch),
diskann once per thread count of --peer-threads (default 2,8,16,32), its figures at each recall
target taken from its best thread count there (peers.best_threads). Every side also gets a
1-thread sweep, one query at a time: mean latency = wall / nq of that batch, the same
measurement for every side. QPS, pages per query and round trips (trawl's hops_per_query) at
recall@10 = 0.90 and 0.95 are interpolated along the sweep of -L (peers.at_recall); `*` = the
target is passed at the first list size. Queries: a seeded random sample of --queries
(vs_diskann_disk.subset, the same rows for every side), k = 10, the dataset's exact GT.
--repeats N repeats everything with budgets and sides in alternating order; medians per sweep
point.

Memory budgets (--budgets, comma list; default none,10%,30%):
  none   trawl: no --memory-budget (PQ codes, the layout's tables and the entry index in memory,
         no node cache); diskann: 0 cached nodes.
  N%     N% of the base vectors' bytes (n x dim x 4, the f32 data set), e.g. 30% of GloVe-400K
         (390,000 x 50) = 22.3 MiB.
  N[K|M|G]  a size (binary units as `trawl bench --memory-budget`: M = 2^20 bytes; MB/MiB = M).
  Each budget is turned into bytes B once.
  trawl sides: `--memory-budget B` (bytes). trawl's planner fits the PQ codes, the layout's
    tables and the search buffers (threads x queries in flight) first, then spends the rest on
    its static node cache (hot-node order), then the entry index only once every node is cached
    (docs/memory.md). The page-node layout spends it on whole cached pages (4 KiB each, those of
    the hot-node order's hottest vectors), then the entry index (the report gives each side's
    planned memory_total_bytes). A plan that leaves the entry index on disk refuses --entry-list; such a
    side then runs with --entry-list 0 (searches start at the medoid), and the report says so. A
    budget below the index's minimum (`trawl info --plan`: an error naming it) is reported as
    "impossible" for that side, with trawl's message; nothing is run.
  diskann: the same B as cached nodes, num_nodes_to_cache = floor((B - fixed) / per_node), at
    most n, where fixed = n x PQ bytes (the compressed codes) + 4 x 257 x dim' (PQ pivots and
    centroid) + 4 x (PQ bytes + 1) (chunk offsets), per_node = 4 x (R + 1) + 4 x roundup(dim', 8)
    (PQFlashIndex::load_cache_list: one neighbour slot array of max degree + 1 and one aligned
    vector per cached node), dim' = dim (+1 for inner product). Not charged to diskann: its
    per-thread scratch (grows with its thread count) and the cache's two hash maps; trawl is
    charged its search buffers. Where B < fixed the budget is impossible for diskann. The cache
    is chosen by DiskANN's sample searches (--cache-policy freq: cache_mechanism 1; bfs: 2).

Index: the trawl sides search one index: --index DATASET=DIR, else peers.py's
`trawl-peers-<metric>-R64-L100-pq48` in .bench-cache/<dataset>/, else `idx-R64-L100-pq25`
(glove-400k), `idx-R64-L100-pq48` (minilm-200k), `idx-R64-L100-pq32` (gen-1m), else built
with peers.TrawlIndex (peers.py's name). It is hard-linked (`cp -al`) to
.bench-cache/<dataset>/pagegraph-<source>/ (re-copied when the source's build_id changes), and
the layouts are written there, never into the source: the PageShuffle layout is reused if present
(else `trawl layout --shuffle`), the page-node layout is written by `trawl layout --pages`
(--page-capacity, --page-degree; 0 = trawl's choice) and reused while its parameters and the
trawl binary (size, mtime, version) are the ones recorded in pagegraph-pages.json (--relayout
rewrites it; --reuse-pages takes whatever pages.trawl is there). `trawl layout` writes files by
rename, so the source's hard-linked files are never changed. diskann's index is
.bench-cache/<dataset>/diskann-disk-<metric>-R<R>-L<L>-pq<B>/ with the trawl index's R, L and PQ
bytes (shared with vs_diskann_disk.py / peers.py; built, ~minutes, when missing).

Report: <out>/pagegraph-<dataset>.md and .json (--out, default bench/results): setup (CPU from
/proc/cpuinfo, versions, index, layouts), the budget mapping per side, per budget and recall
target each side's best QPS, 1-thread latency, pages and round trips per query, and the ratios
trawl-pages (the better of pages-beam / pages-pipe) / diskann (its best thread count) and /
trawl's best existing mode (the better of c5 / pipe-ps / flash), for 1-thread latency and QPS;
then every sweep. Logs and every `trawl bench` JSON under bench/out/raw/pagegraph-<dataset>/.

Usage:
  python3 bench/pagegraph.py                                       # 3 datasets, all sides
  python3 bench/pagegraph.py --datasets glove-400k --queries 200 \\
      --sides trawl-pages-beam,trawl-c5 --budgets none --search-L 10,20,40 --repeats 1 \\
      --out bench/out/pagegraph-smoke                               # smoke test
  python3 bench/pagegraph.py --datasets gen-1m --budgets none,64M,30% --peer-threads 2,16
  python3 bench/pagegraph.py --datasets glove-400k --report-only   # re-render from the JSON
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
import peers  # noqa: E402
from common import (BENCH_DIR, OUT_DIR, log, machine_info, read_fbin, trawl_bin,  # noqa: E402
                    trawl_version, write_json)
from peers import (TARGETS, DiskannPeer, TrawlPeer, _counts, _f, _iv, _load, _mib,  # noqa: E402
                   _nthreads, _param_at, at_recall, best_threads, median_rows, thread_counts,
                   when)
from vs_diskann import DEFAULT_VENV, ensure_venv, venv_freeze  # noqa: E402
from vs_diskann_disk import run_io, subset, trawl_identity  # noqa: E402

MIB = 1024 * 1024
PAGES_SIDES = ("trawl-pages-beam", "trawl-pages-pipe", "trawl-pages-flash")
FLASH_SIDES = ("trawl-flash", "trawl-pages-flash")
EXISTING_SIDES = ("trawl-c5", "trawl-pipe-ps", "trawl-flash")
TRAWL_SIDES = PAGES_SIDES + EXISTING_SIDES
ALL_SIDES = TRAWL_SIDES + ("diskann",)
FLAGS = {
    "trawl-pages-beam": ["--layout", "pages", "--strategy", "beam", "-W", "{W}",
                         "--entry-list", "{entry_list}"],
    "trawl-pages-pipe": ["--layout", "pages", "--strategy", "pipe", "--entry-list",
                         "{entry_list}"],
    "trawl-pages-flash": ["--layout", "pages", "--strategy", "flash", "--staleness", "1",
                          "--entry-list", "{entry_list}"],
    **{s: peers.TRAWL_FLAGS[s] for s in EXISTING_SIDES},
}
LAYOUT_OF = {"trawl-pages-beam": "pages", "trawl-pages-pipe": "pages",
             "trawl-pages-flash": "pages", "trawl-c5": "shuffle",
             "trawl-pipe-ps": "shuffle", "trawl-flash": "packed"}
# The index each dataset's acceptance runs used (bench/range.py's INDEX).
DEFAULT_INDEX = {"glove-400k": "idx-R64-L100-pq25", "minilm-200k": "idx-R64-L100-pq48",
                 "gen-1m": "idx-R64-L100-pq32"}
PAGES_RECORD = "pagegraph-pages.json"
NO_ENTRY = "no entry index in memory"


class Impossible(Exception):
    """A budget a side cannot run in (the reason is the message)."""


# ---------------------------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------------------------

def parse_budget(spec: str, vector_bytes: int) -> dict:
    """`none`, `N%` (of the base vectors' bytes) or a size with K/M/G (2^10 ...; MB, MiB = M)."""
    s = spec.strip()
    if s.lower() == "none":
        return {"label": "none", "bytes": None, "rule": "no budget"}
    if s.endswith("%"):
        pct = float(s[:-1])
        return {"label": s, "bytes": int(round(pct / 100 * vector_bytes)),
                "rule": f"{pct:g}% of the base vectors' {vector_bytes} bytes"}
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT])(i?B)?", s, re.IGNORECASE)
    if not m:
        raise SystemExit(f"--budgets: {spec!r} is not none, N% or a size like 64M / 1.5G")
    mult = 1024 ** ("KMGT".index(m.group(2).upper()) + 1)
    return {"label": s, "bytes": int(float(m.group(1)) * mult), "rule": "a size"}


def diskann_cache(budget: int | None, n: int, dim: int, metric: str, pq_bytes: int,
                  R: int) -> dict:
    """Cached nodes diskann gets for the budget (see the docstring), or why it cannot run."""
    dim_e = dim + 1 if metric == "ip" else dim  # DiskANN's MIPS adds one coordinate
    fixed = n * pq_bytes + 4 * 257 * dim_e + 4 * (pq_bytes + 1)
    per_node = 4 * (R + 1) + 4 * (-(-dim_e // 8) * 8)
    out = {"fixed_bytes": fixed, "per_node_bytes": per_node, "dim_eff": dim_e}
    if budget is None:
        return dict(out, cache_nodes=0, used_bytes=fixed)
    if budget < fixed:
        return dict(out, cache_nodes=None, impossible=(
            f"budget {budget / MIB:.1f} MiB is below diskann's PQ codes and pivots "
            f"({fixed / MIB:.1f} MiB)"))
    nodes = min(n, (budget - fixed) // per_node)
    return dict(out, cache_nodes=int(nodes), used_bytes=fixed + nodes * per_node)


# ---------------------------------------------------------------------------------------------
# The trawl index and its layouts
# ---------------------------------------------------------------------------------------------

def trawl_info(idx: Path) -> dict:
    r = subprocess.run([str(trawl_bin()), "info", str(idx), "--json"], capture_output=True,
                       text=True)
    if r.returncode:
        raise RuntimeError(f"trawl info {idx}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def source_index(ds: datasets.Dataset, args: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """The index the trawl sides search (hard-linked, below) and how it was chosen."""
    folder = Path(ds.base).parent
    if ds.name in args.index:
        p = Path(args.index[ds.name])
        return (p if p.is_absolute() else Path.cwd() / p), "--index"
    pq = min(args.pq_bytes, ds.dim)
    cands = [(folder / f"trawl-peers-{ds.metric}-R{args.R}-L{args.L}-pq{pq}", "peers.py's index"),
             (folder / DEFAULT_INDEX.get(ds.name, "-"), "the dataset's acceptance index")]
    for p, how in cands:
        if (p / "packed.trawl").exists() and (p / "manifest.trawl").exists():
            return p, how
    log(f"{ds.name}: no trawl index found; building peers.py's ({cands[0][0].name})")
    ns = argparse.Namespace(R=args.R, L=args.L, pq_bytes=pq, threads=args.threads,
                            rebuild=args.rebuild, opq=False)
    ti = peers.TrawlIndex(ds, ns)
    ti.build(work)
    return ti.idx, "built now by peers.TrawlIndex"


def prepare_copy(src: Path, folder: Path, args: argparse.Namespace, sides: list[str],
                 work: Path) -> tuple[Path, dict]:
    """The hard-linked copy of `src` the trawl sides search, with the layouts they need."""
    copy = folder / f"pagegraph-{src.name}"
    src_info = trawl_info(src)
    if copy.exists():
        try:
            same = trawl_info(copy).get("build_id") == src_info.get("build_id")
        except RuntimeError:
            same = False
        if not same:
            log(f"  {copy} is not a copy of {src}'s current build: copying again")
            shutil.rmtree(copy)
    if not copy.exists():
        log(f"  cp -al {src} {copy}")
        subprocess.run(["cp", "-al", str(src), str(copy)], check=True)
        # Its own lock file: the source's (a hard link) would tie the two directories' locks.
        lock = copy / ".trawl.lock"
        if lock.exists():
            lock.unlink()
        for stale in (copy / PAGES_RECORD,):
            stale.unlink(missing_ok=True)
    info = trawl_info(copy)
    layouts: dict = {"source": str(src), "copy": str(copy), "build_id": info.get("build_id")}
    exe = str(trawl_bin())
    if set(sides) & {"trawl-c5", "trawl-pipe-ps"}:
        if "shuffle" in info.get("layouts", []) and (copy / "packed-shuffled.trawl").exists():
            layouts["shuffle"] = {"reused": True, "note": "present beside the index (hard link)"}
        else:
            rep = work / "layout-shuffle-report.json"
            m, _ = run_io([exe, "layout", copy, "--shuffle", "--report", rep, "--quiet"],
                          work / "layout-shuffle.log")
            layouts["shuffle"] = {"reused": False, "secs": m.wall_secs,
                                  "peak_rss_bytes": m.peak_rss_bytes,
                                  "report": json.loads(rep.read_text()) if rep.exists() else None}
    if set(sides) & set(PAGES_SIDES):
        params = {"page_capacity": args.page_capacity, "page_degree": args.page_degree}
        ident = trawl_identity()
        rec_path = copy / PAGES_RECORD
        rec = json.loads(rec_path.read_text()) if rec_path.exists() else None
        present = "pages" in info.get("layouts", []) and (copy / "pages.trawl").exists()
        if present and args.reuse_pages:
            layouts["pages"] = dict((rec or {}).get("layout") or {}, reused=True,
                                    note="--reuse-pages: the pages.trawl present"
                                         + ("" if rec else " (not written by this script: "
                                            "its parameters and writer are unknown)"))
        elif present and rec and not args.relayout and rec.get("params") == params \
                and rec.get("trawl") == ident and rec.get("build_id") == info.get("build_id"):
            layouts["pages"] = dict(rec["layout"], reused=True, reused_from=rec["when"])
        else:
            rep = work / "layout-pages-report.json"
            cmd = [exe, "layout", copy, "--pages", "--report", rep, "--quiet"]
            if args.page_capacity:
                cmd += ["--page-capacity", args.page_capacity]
            if args.page_degree:
                cmd += ["--page-degree", args.page_degree]
            log("  " + " ".join(map(str, cmd)))
            m, _ = run_io(cmd, work / "layout-pages.log")
            report = json.loads(rep.read_text()) if rep.exists() else None
            lay = {"reused": False, "secs": m.wall_secs, "peak_rss_bytes": m.peak_rss_bytes,
                   "params": params, "report": report, "command": " ".join(map(str, cmd))}
            write_json(rec_path, {"params": params, "trawl": ident,
                                  "build_id": info.get("build_id"), "layout": lay,
                                  "when": when()})
            layouts["pages"] = lay
        layouts["pages"]["params"] = params
    layouts["info"] = trawl_info(copy)
    return copy, layouts


# ---------------------------------------------------------------------------------------------
# Sides
# ---------------------------------------------------------------------------------------------

class TrawlRun(TrawlPeer):
    """One trawl side at one budget: peers.TrawlPeer's measured `trawl bench` sweep and recall
    check, with this script's flags, the budget's --memory-budget and the entry list its plan
    allows (decided per thread configuration: the plan depends on threads x in flight)."""

    def __init__(self, name: str, exe: str, idx: Path, args: argparse.Namespace,
                 budget: dict, has_entry: bool):
        self.name, self.args, self.budget = name, args, budget
        self.index = SimpleNamespace(exe=exe, idx=idx)
        # L counts pages on the page-node layout (k may exceed it): its own, shorter sweep.
        self.sweep = args.pages_search_L if name.startswith("trawl-pages") else args.search_L
        self.pname = "L"
        self.interleave = args.trawl_interleave if name not in FLASH_SIDES else 1
        self.entry_wanted = args.entry_list if has_entry else 0
        self.flags: list[str] = []
        self._configs: dict[int, dict] = {}

    def in_flight(self, threads: int) -> int:
        return 1 if threads == 1 else self.interleave

    def config(self, threads: int) -> dict:
        """Flags for a sweep at `threads` threads: the plan of `trawl info --plan` with the same
        layout, threads and queries in flight (trawl bench plans the same way)."""
        if threads in self._configs:
            return self._configs[threads]
        cfg = {"entry_list": self.entry_wanted, "plan": None, "impossible": None, "notes": []}
        b = self.budget["bytes"]
        if b is not None:
            cmd = [self.index.exe, "info", str(self.index.idx), "--plan", str(b), "--layout",
                   LAYOUT_OF[self.name], "--threads", str(threads), "--interleave",
                   str(self.in_flight(threads)), "--json"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
                cfg["impossible"] = msg[-1] if msg else f"trawl info --plan failed ({r.returncode})"
            else:
                cfg["plan"] = json.loads(r.stdout)
                if cfg["entry_list"] and not cfg["plan"].get("entry"):
                    cfg["entry_list"] = 0
                    cfg["notes"].append("the plan leaves the entry index on disk (the cache took "
                                        "the budget): --entry-list 0, searches start at the "
                                        "medoid")
        if self.entry_wanted == 0 and self.args.entry_list:
            cfg["notes"].append("the index has no entry index: --entry-list 0")
        cfg["flags"] = self.flags_for(cfg["entry_list"])
        self._configs[threads] = cfg
        return cfg

    def flags_for(self, entry_list: int) -> list[str]:
        fmt = {"W": self.args.beam_width, "entry_list": entry_list, "list_cache_mb": 0}
        flags = [f.format(**fmt) for f in FLAGS[self.name]]
        if self.budget["bytes"] is not None:
            flags += ["--memory-budget", str(self.budget["bytes"])]
        if self.args.trawl_extra:
            flags += shlex.split(self.args.trawl_extra)
        return flags

    def search(self, work: Path, threads: int, q: Path, gt: Path, tag: str) -> dict:
        cfg = self.config(threads)
        if cfg["impossible"]:
            raise Impossible(cfg["impossible"])
        self.flags = cfg["flags"]
        try:
            sw = super().search(work, threads, q, gt, tag)
        except RuntimeError as e:
            if NO_ENTRY not in str(e) or not cfg["entry_list"]:
                raise
            # trawl bench's own plan left the entry index out where `trawl info --plan` kept it.
            cfg["entry_list"] = 0
            cfg["flags"] = self.flags = self.flags_for(0)
            cfg["notes"].append("trawl bench refused the entry list (its plan left the entry "
                                "index on disk): --entry-list 0")
            sw = super().search(work, threads, q, gt, tag)
        bench = json.loads(Path(sw["bench_json"]).read_text())
        sw.update(flags=" ".join(self.flags), in_flight=self.in_flight(threads),
                  entry_list=cfg["entry_list"], notes=list(cfg["notes"]),
                  memory_plan=bench.get("memory_plan"), cache=bench.get("cache"),
                  layout=bench.get("layout"))
        return sw


class DiskannRun:
    """diskann at one budget: peers.DiskannPeer with the budget's cached nodes."""

    def __init__(self, ds: datasets.Dataset, args: argparse.Namespace, py: Path, R: int,
                 L: int, pq_bytes: int, mapping: dict):
        self.mapping = mapping
        dargs = argparse.Namespace(
            R=R, L=L, pq_bytes=pq_bytes, threads=args.threads,
            build_memory_gb=args.build_memory_gb, rebuild=args.rebuild, k=args.k,
            beam_width=args.beam_width, cache_nodes=mapping.get("cache_nodes") or 0,
            cache_policy=args.cache_policy, search_L=args.search_L)
        self.peer = DiskannPeer(ds, dargs, py)

    def build(self, work: Path) -> dict:
        return self.peer.build(work)

    def search(self, work: Path, threads: int, q: Path, gt: Path, tag: str) -> dict:
        if self.mapping.get("impossible"):
            raise Impossible(self.mapping["impossible"])
        sw = self.peer.search(work, threads, q, gt, tag)
        sw["cache_nodes"] = self.mapping.get("cache_nodes")
        return sw


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------

def summarize_cell(cell: dict, default_threads: int) -> dict:
    """A side at a budget: per recall target its best thread count's QPS (interpolated), the
    1-thread latency, pages and round trips per query there (peers.py's rules)."""
    by_t: dict[int, list[dict]] = {}
    for s in cell.get("sweeps") or []:
        by_t.setdefault(int(s["threads"]), []).append(s)
    rows_by_t = {t: median_rows(sw) for t, sw in sorted(by_t.items())}
    lrows = median_rows(cell["lat1_sweeps"]) if cell.get("lat1_sweeps") else []
    for r in lrows:
        r["wall_latency_us"] = 1e6 / r["qps"] if r["qps"] else None
    at = {}
    for tgt in TARGETS:
        key = f"{tgt:.2f}"
        qps_t = {t: at_recall(rows, "qps", tgt, False) for t, rows in rows_by_t.items()}
        bt = best_threads(qps_t)
        t = bt if bt is not None else (default_threads if default_threads in rows_by_t
                                       else next(iter(rows_by_t), None))
        rows = rows_by_t.get(t, [])
        at[key] = {"qps": qps_t.get(t) or {"value": None, "bound": None}, "threads": t,
                   "best_threads": bt,
                   "qps_by_threads": {str(n): v for n, v in qps_t.items()},
                   "pages_per_query": at_recall(rows, "pages_per_query", tgt, False),
                   "hops_per_query": at_recall(rows, "hops_per_query", tgt, False),
                   "lat1_us": at_recall(lrows, "wall_latency_us", tgt, False) if lrows else None,
                   "param": _param_at(rows, tgt, False)}
    head = next((a["threads"] for a in at.values() if a["best_threads"] is not None),
                default_threads if default_threads in rows_by_t else next(iter(rows_by_t), None))
    sw = by_t.get(head, [])

    def med(key, sweeps):
        return peers._med(s.get(key) for s in sweeps)

    notes = sorted({n for s in (cell.get("sweeps") or []) + (cell.get("lat1_sweeps") or [])
                    for n in s.get("notes") or []})
    return {"rows_by_threads": {str(t): r for t, r in rows_by_t.items()}, "lat1_rows": lrows,
            "at_recall": at, "threads": head, "thread_counts": list(rows_by_t),
            "index_ram_bytes": med("index_ram_bytes", sw),
            "search_peak_rss_bytes": med("peak_rss_bytes", sw),
            "lat1_index_ram_bytes": med("index_ram_bytes", cell.get("lat1_sweeps") or []),
            "memory_plan": next((s.get("memory_plan") for s in sw if s.get("memory_plan")),
                                None),
            "entry_lists": sorted({s.get("entry_list") for s in sw
                                   if s.get("entry_list") is not None}),
            "cache_nodes": med("cache_nodes", sw) if sw and "cache_nodes" in sw[0] else
            peers._med((s.get("cache") or {}).get("nodes") for s in sw),
            "notes": notes, "repeats": len(sw)}


def short_reason(msg: str) -> str:
    """trawl's below-the-minimum error in a few words (the JSON keeps it whole)."""
    m = re.search(r"below this index's minimum of ([0-9.]+ [KMGT]?i?B)", msg or "")
    return f"below the index's minimum of {m.group(1)}" if m else (msg or "")


def _val(d):
    return None if not d else d.get("value")


def _best(summ: dict, sides, key: str, field: str, lower: bool):
    """The side of `sides` with the best figure at recall `key` (lower or higher), or None."""
    cands = []
    for s in sides:
        a = (summ.get(s) or {}).get("at_recall", {}).get(key)
        v = _val(a.get(field)) if a else None
        if v is not None:
            cands.append((v if lower else -v, s, a[field]))
    if not cands:
        return None
    _, s, d = min(cands)
    return {"side": s, "value": d["value"], "bound": d.get("bound")}


def ratios(summ: dict, key: str) -> dict:
    """trawl-pages (the best of beam / pipe / flash) over diskann and over trawl's best existing mode
    (the better of c5 / pipe-ps / flash): 1-thread latency (lower is better) and QPS."""
    out = {}
    for field, lower in (("lat1_us", True), ("qps", False)):
        pg = _best(summ, PAGES_SIDES, key, field, lower)
        ex = _best(summ, EXISTING_SIDES, key, field, lower)
        da = _best(summ, ("diskann",), key, field, lower)
        r = {"pages": pg, "existing": ex, "diskann": da}
        for other in ("existing", "diskann"):
            o = r[other]
            r[f"pages_over_{other}"] = (pg["value"] / o["value"]
                                        if pg and o and o["value"] else None)
            r[f"{other}_star"] = bool(pg and o and "at-first-L" in (pg["bound"], o["bound"]))
        out[field] = r
    return out


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def qps_config(side: str, s: dict, key: str, p: dict) -> str:
    a = s["at_recall"][key]
    if side == "diskann":
        if a["best_threads"] is None:
            return f"not reached at {_counts(s['thread_counts'])} threads"
        return f"{_nthreads(a['threads'])} (best of {_counts(s['thread_counts'])})"
    t = s["threads"]
    if side in FLASH_SIDES:
        return f"{_nthreads(t)} × {p['flash_batch']} in flight (flash batch)"
    il = p["trawl_interleave"] if t != 1 else 1
    return _nthreads(t) + (f" × {il} in flight" if il > 1 else "")


def _ratio_cell(r: dict, other: str) -> str:
    v = r.get(f"pages_over_{other}")
    return "-" if v is None else f"{v:.2f}×" + ("*" if r.get(f"{other}_star") else "")


def _who(d: dict | None, fmt="{:.0f}") -> str:
    if not d:
        return "-"
    return fmt.format(d["value"]) + ("*" if d.get("bound") == "at-first-L" else "") + \
        f" ({d['side']})"


def mapping_table(res: dict) -> list[str]:
    p = res["params"]
    lines = ["| budget | bytes (MiB) | " + " | ".join(res["sides"]) + " |",
             "|---|---|" + "---|" * len(res["sides"])]
    for b in res["budgets"]:
        cells = []
        for side in res["sides"]:
            c = res["cells"][b["label"]][side]
            if c.get("impossible"):
                cells.append(f"impossible: {short_reason(c['impossible'])}")
                continue
            s = c.get("summary") or {}
            if side == "diskann":
                mp = c["mapping"]
                cells.append(f"{mp['cache_nodes']} cached nodes ({_mib(mp['used_bytes'])} MiB "
                             f"charged; RSS growth at load {_mib(s.get('index_ram_bytes'))} MiB)")
                continue
            plan = s.get("memory_plan") or c.get("plan") or {}
            what = f"index RAM {_mib(s.get('index_ram_bytes'))} MiB"
            if plan.get("items"):
                what += f" (plan {_mib(sum(i['bytes'] for i in plan['items']))} MiB with the " \
                        "search buffers)"
            nodes = s.get("cache_nodes")
            if nodes:
                what += f", {nodes:.0f} cached nodes"
            el = s.get("entry_lists") or []
            if el:
                what += f", entry list {'/'.join(map(str, el))}"
            if plan.get("minimum"):
                what += f"; minimum {_mib(plan['minimum'])} MiB"
            cells.append(what)
        mb = "-" if b["bytes"] is None else f"{b['bytes'] / MIB:.1f}"
        lines.append(f"| {b['label']} | {mb} | " + " | ".join(cells) + " |")
    lines += ["", f"trawl sides: `--memory-budget <bytes>`; index RAM = the QPS run's "
                  "memory_total_bytes (what the index holds), plan = the items of its "
                  f"memory_plan, which also counts the search buffers ({p['threads']} threads × "
                  "their queries in flight; the 1-thread runs plan their own, smaller ones). diskann: cached nodes "
                  "= floor((B − n·PQ bytes − 4·257·dim' − 4·(PQ bytes + 1)) / (4·(R + 1) + "
                  "4·roundup(dim', 8))) (see the script's docstring); its RSS growth at load "
                  "includes its per-thread scratch, which is not charged."]
    return lines


def at_table(res: dict, label: str, key: str) -> list[str]:
    p = res["params"]
    lines = ["| side | QPS | QPS configuration | latency µs (1 thread) | pages/query | "
             "round trips/query | sweep point | index RAM MiB | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for side in res["sides"]:
        c = res["cells"][label][side]
        if c.get("impossible"):
            lines.append(f"| {side} | impossible | {short_reason(c['impossible'])} "
                         "| | | | | | |")
            continue
        s = c["summary"]
        a = s["at_recall"][key]
        ok = _val(a["qps"]) is not None
        nr = "not reached"
        lines.append(
            f"| {side} | {_iv(a['qps'])} | {qps_config(side, s, key, p)} | "
            f"{_iv(a['lat1_us']) if ok else nr} | "
            f"{_iv(a['pages_per_query'], '{:.1f}') if ok else nr} | "
            f"{(_iv(a['hops_per_query'], '{:.1f}') if ok else nr) if side != 'diskann' else 'n/a'}"
            f" | {a['param'] or '-'} | {_mib(s.get('index_ram_bytes'))} | "
            f"{_mib(s.get('search_peak_rss_bytes'))} |")
    return lines


def ratio_lines(res: dict, label: str, key: str) -> list[str]:
    r = res["ratios"][label][key]
    lines = ["| figure | trawl-pages (best of beam / pipe / flash) | trawl's best existing mode "
             "(better of c5 / pipe-ps / flash) | diskann | trawl-pages / existing | "
             "trawl-pages / diskann |", "|---|---|---|---|---|---|"]
    for field, name in (("lat1_us", "latency µs, 1 thread (lower is better)"),
                        ("qps", "QPS (higher is better)")):
        x = r[field]
        lines.append(f"| {name} | {_who(x['pages'])} | {_who(x['existing'])} | "
                     f"{_who(x['diskann'])} | {_ratio_cell(x, 'existing')} | "
                     f"{_ratio_cell(x, 'diskann')} |")
    return lines


def threads_lines(res: dict, label: str, key: str) -> list[str]:
    c = res["cells"][label].get("diskann")
    if not c or c.get("impossible") or len(c["summary"]["thread_counts"]) < 2:
        return []
    s = c["summary"]
    a = s["at_recall"][key]
    cells = []
    for t in s["thread_counts"]:
        d = a["qps_by_threads"].get(str(t))
        cell = _iv(d) if d else "-"
        cells.append(f"**{cell}**" if t == a["best_threads"] else cell)
    return ["diskann's QPS by search thread count (bold: the best, used above): " +
            ", ".join(f"{t}: {v}" for t, v in zip(s["thread_counts"], cells)) + "."]


def render(res: dict) -> str:
    m, ds, p, lay = res["meta"], res["dataset"], res["params"], res["layouts"]
    mach = m["machine"]
    info = lay.get("info") or {}
    lines = [f"# Page-node layout (PageANN) vs trawl's modes and DiskANN: {ds['name']}", "",
             f"{ds['n']} x {ds['dim']} f32, metric {ds['metric']}, GT {ds['gt_backend']} "
             f"(exact top-100). {m['when']}; command: `{m['command']}`.", "",
             "## Setup", "",
             f"- CPU: **{mach.get('cpu_model')}** (/proc/cpuinfo), {mach.get('affinity_cpus')} "
             f"CPUs available ({mach.get('logical_cpus')} logical), "
             f"{(mach.get('mem_total_kib') or 0) / 2**20:.1f} GiB RAM, {mach.get('platform')}; "
             f"git {str(mach.get('git_commit'))[:12]}; load average at start "
             f"{_load(m.get('loadavg_start'))}, at end {_load(m.get('loadavg_end'))}.",
             f"- Versions: {m['versions'].get('trawl')}; diskannpy venv: "
             f"{', '.join(m['versions'].get('diskann_venv') or ['-'])}."
             + ("" if m.get("trawl_unchanged", True) else
                " **The trawl binary changed during the run** (its identity at the start and "
                "the end differ: see the JSON)."),
             f"- Queries: {p['nq_used']} (a seeded random sample of the dataset's {ds['nq']}, "
             f"the same rows for every side; diskann gets L2-normalised copies for cosine), k = "
             f"{p['k']}, recall@10. QPS sweeps: trawl sides {p['threads']} threads × "
             f"{p['trawl_interleave']} queries in flight (trawl-flash, trawl-pages-flash: a batch of "
             f"{p['flash_batch']}); diskann at each of {_counts(p['peer_threads'])} threads, the "
             "best at each recall target. Latency: a 1-thread sweep of every side, one query at "
             f"a time (wall / nq). Search L {p['search_L']} (page-node sides: "
             f"{p.get('pages_search_L', p['search_L'])} page nodes). Repeats: {p['repeats']} (budgets "
             "and sides in alternating order; medians per sweep point).",
             f"- trawl index: `{lay['source']}` ({res['index_how']}), searched through its "
             f"hard-linked copy `{lay['copy']}`: R {info.get('R')}, build L "
             f"{(info.get('build') or {}).get('L')}, {info.get('pq_bytes')} PQ bytes, entry "
             f"index {info.get('entry_nodes') or 0} nodes, build_id {lay.get('build_id')}.",
             ]
    pg = lay.get("pages")
    if pg:
        rep = pg.get("report") or {}
        if isinstance(rep, list):  # `trawl layout --report` writes one report per layout
            rep = rep[0] if rep else {}
        pr = rep.get("pages") or {}
        lines.append(
            "- Page-node layout: " + ("reused" if pg.get("reused") else "written in this run")
            + (f" ({pg['reused_from']})" if pg.get("reused_from") else "")
            + (f"; {pg['note']}" if pg.get("note") else "")
            + f"; --page-capacity {pg['params']['page_capacity']}, --page-degree "
              f"{pg['params']['page_degree']} (0 = trawl's choice)"
            + (f"; {pr.get('capacity')} vectors per page, {pr.get('pages')} pages, mean list "
               f"{_f(pr.get('mean_degree'), '{:.0f}')} entries, hops {pr.get('hops')}, fill "
               f"{_f(pr.get('fill'), '{:.3f}')}; pages.trawl {_mib(rep.get('file_bytes'))} MiB "
               f"(packed.trawl {_mib(rep.get('packed_bytes'))} MiB)" if pr else "")
            + (f"; `trawl layout --pages` {pg['secs']:.1f} s, peak RSS "
               f"{_mib(pg.get('peak_rss_bytes'))} MiB" if pg.get("secs") else "") + ".")
    sh = lay.get("shuffle")
    if sh:
        lines.append("- PageShuffle layout: " + ("reused, " + sh.get("note", "") if sh.get("reused")
                                                 else f"written in this run ({sh['secs']:.1f} s)")
                     + ".")
    if res.get("diskann_index"):
        d = res["diskann_index"]
        lines.append(f"- diskann index: `{d['dir']}` (R {d['R']}, L {d['L']}, {d['pq_bytes']} PQ "
                     f"bytes, beam width {p['beam_width']}, cache policy {p['cache_policy']}), "
                     + ("reused" if d.get("reused") else "built in this run")
                     + (f" (built {d.get('reused_from')})" if d.get("reused_from") else "") + ".")
    lines += ["", "## Memory budgets", "",
              "Budgets: " + "; ".join(f"{b['label']} = " + (
                  "no budget" if b["bytes"] is None else f"{b['bytes']} bytes ({b['rule']})")
                  for b in res["budgets"]) + ".", ""]
    lines += mapping_table(res)
    for b in res["budgets"]:
        label = b["label"]
        for tgt in TARGETS:
            key = f"{tgt:.2f}"
            lines += ["", f"## Budget {label}, recall@10 = {key}", ""]
            lines += at_table(res, label, key)
            lines += [""] + ratio_lines(res, label, key)
            extra = threads_lines(res, label, key)
            if extra:
                lines += [""] + extra
        notes = sorted({f"{side}: {n}" for side in res["sides"]
                        for n in (res["cells"][label][side].get("summary") or {}).get("notes", [])})
        if notes:
            lines += ["", f"Budget {label} notes: " + "; ".join(notes) + "."]
    lines += ["", "## Ratios at a glance", "",
              "trawl-pages = the best of trawl-pages-beam / -pipe / -flash at each figure; existing = "
              "the better of trawl-c5 / -pipe-ps / -flash; latency = 1 thread (below 1× = "
              "trawl-pages faster), QPS = each side's QPS configuration (above 1× = trawl-pages "
              "faster); * = a side already past the target at its first list size.", "",
              "| budget | recall@10 | latency / existing | latency / diskann | QPS / existing | "
              "QPS / diskann |", "|---|---|---|---|---|---|"]
    for b in res["budgets"]:
        for tgt in TARGETS:
            key = f"{tgt:.2f}"
            r = res["ratios"][b["label"]][key]
            lines.append(f"| {b['label']} | {key} | {_ratio_cell(r['lat1_us'], 'existing')} | "
                         f"{_ratio_cell(r['lat1_us'], 'diskann')} | "
                         f"{_ratio_cell(r['qps'], 'existing')} | "
                         f"{_ratio_cell(r['qps'], 'diskann')} |")
    lines += ["", "## Sweeps", "",
              "Medians over repeats. Round trips = trawl's hops_per_query (beam search: its "
              "rounds of W reads; PipeSearch and flash keep reads in flight without rounds, so "
              "their count is not a round-trip count in the same sense); diskann reports none.",
              ""]
    for b in res["budgets"]:
        for side in res["sides"]:
            c = res["cells"][b["label"]][side]
            if c.get("impossible"):
                continue
            s = c["summary"]
            l1 = {r["param"]: r for r in s["lat1_rows"]}
            flags = next((sw.get("flags") for sw in c.get("sweeps") or [] if sw.get("flags")),
                         None)
            lines += [f"### {side}, budget {b['label']}", ""]
            if flags:
                lines += [f"`trawl bench ... {flags}`", ""]
            lines += ["| point | threads | recall@10 | QPS | pages/q | round trips/q | "
                      "1-thread recall | 1-thread latency µs |",
                      "|---|---|---|---|---|---|---|---|"]
            for t, rows in s["rows_by_threads"].items():
                for r in rows:
                    q1 = l1.get(r["param"], {})
                    lines.append(f"| {r['param']} | {t} | {_f(r['recall'], '{:.4f}')} | "
                                 f"{_f(r['qps'])} | {_f(r['pages_per_query'], '{:.1f}')} | "
                                 f"{_f(r['hops_per_query'], '{:.1f}')} | "
                                 f"{_f(q1.get('recall'), '{:.4f}')} | "
                                 f"{_f(q1.get('wall_latency_us'))} |")
            rc = c.get("recall_check")
            if rc and rc.get("error"):
                lines += ["", f"Recall check at L {rc['L']} failed: {rc['error'][-200:]}"]
            elif rc:
                lines += ["", f"Recall check: `trawl search -L {rc['L']}` ids scored by "
                              f"common.recall_at_k: {rc['recall_at_k']:.4f}, trawl bench "
                              f"{_f(rc['bench_recall'], '{:.4f}')}."]
            lines.append("")
    lines += [NOTES, "", "## Run time per phase (s, wall)", "",
              ", ".join(f"{k} {v:.1f}" for k, v in (m.get("phase_secs") or {}).items())
              + f"; total {m.get('total_secs', 0):.1f}."]
    return "\n".join(lines) + "\n"


NOTES = """Notes:
- Both engines read with O_DIRECT (trawl: io_uring; DiskANN: libaio); the page cache was not
  dropped (needs root), but serves neither's index reads.
- Pages per query: trawl's own counter (4 KiB pages read from disk; cached nodes are not read);
  diskann: /proc/self/io read_bytes during the batch / 4096 / nq.
- Memory: trawl's planned memory is memory_total_bytes of its `trawl bench` JSON (what the
  index holds: PQ codes, codebooks, layout tables, entry index, node cache). The page-node layout
  spends the rest on cached pages (whole 4 KiB pages of the hottest vectors; the flash side
  expands a cached page without a read, as beam and pipe do). trawl-flash, trawl-pages-flash: trawl's
  plan sizes the search buffers for the bench's --interleave (1), though flash keeps its batch in
  flight, so its real buffers exceed the planned ones by that difference (peak RSS column).
- diskann's per-thread scratch (its thread contexts: one per search thread, 2 at least) is not
  charged to its budget; at 16 or 32 threads its RSS exceeds the budget by it (peak RSS column).
- Cosine: diskann's disk index has no cosine, so it gets L2-normalised copies with l2 (same
  ranking); trawl gets the original vectors with its cosine metric."""


# ---------------------------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------------------------

def summarize_all(res: dict) -> None:
    for b in res["budgets"]:
        for side in res["sides"]:
            c = res["cells"][b["label"]][side]
            if not c.get("impossible"):
                c["summary"] = summarize_cell(c, res["params"]["threads"])
    res["ratios"] = {b["label"]: {f"{t:.2f}": ratios(
        {s: res["cells"][b["label"]][s].get("summary") for s in res["sides"]
         if not res["cells"][b["label"]][s].get("impossible")}, f"{t:.2f}") for t in TARGETS}
        for b in res["budgets"]}


def out_paths(args: argparse.Namespace, name: str) -> tuple[Path, Path]:
    out = Path(args.out)
    return out / f"pagegraph-{name}.md", out / f"pagegraph-{name}.json"


def write_report(res: dict, args: argparse.Namespace) -> Path:
    summarize_all(res)
    md, js = out_paths(args, res["dataset"]["name"])
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(render(res))
    write_json(js, res)
    log(f"wrote {md} and {js}")
    return md


def flash_batch(args: argparse.Namespace) -> int:
    f = shlex.split(args.trawl_extra or "")
    if "--flash-batch" in f:
        i = f.index("--flash-batch")
        if i + 1 < len(f) and f[i + 1].isdigit() and int(f[i + 1]) > 0:
            return int(f[i + 1])
    return 32


def run_dataset(name: str, args: argparse.Namespace, sides: list[str]) -> Path:
    t_start = time.perf_counter()
    loadavg_start = os.getloadavg()
    phases: dict[str, float] = {}
    ds = datasets.prepare(name, args.gt_backend, args.threads)
    folder = Path(ds.base).parent
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = OUT_DIR / "raw" / f"pagegraph-{ds.name}" / run_id
    work.mkdir(parents=True, exist_ok=True)
    q, gt = subset(Path(ds.query), Path(ds.gt), args.queries or ds.nq, folder / "subsets")
    nq = read_fbin(q).shape[0]
    ident0 = trawl_identity()
    versions: dict = {"trawl": trawl_version(), "trawl_identity": ident0}

    t0 = time.perf_counter()
    src, how = source_index(ds, args, work)
    copy, layouts = prepare_copy(src, folder, args, sides, work)
    phases["index + layouts"] = time.perf_counter() - t0
    info = layouts["info"]
    R, L, pq_bytes = info["R"], (info.get("build") or {}).get("L", args.L), info["pq_bytes"]
    has_entry = bool(info.get("entry_nodes"))
    vector_bytes = ds.n * ds.dim * 4
    budgets = [parse_budget(b, vector_bytes) for b in args.budgets.split(",") if b.strip()]
    if len({b["label"] for b in budgets}) != len(budgets):
        raise SystemExit("--budgets: a budget is given twice")

    exe = str(trawl_bin())
    objs: dict[str, dict[str, object]] = {b["label"]: {} for b in budgets}
    cells: dict[str, dict[str, dict]] = {b["label"]: {} for b in budgets}
    diskann_index, dpy = None, None
    if "diskann" in sides:
        t0 = time.perf_counter()
        dpy = ensure_venv(args.diskann_venv, args.diskann_venv_python)
        versions["diskann_venv"] = venv_freeze(dpy)
        phases["diskann venv"] = time.perf_counter() - t0
    for b in budgets:
        for s in sides:
            if s == "diskann":
                mp = diskann_cache(b["bytes"], ds.n, ds.dim, ds.metric, pq_bytes, R)
                objs[b["label"]][s] = DiskannRun(ds, args, dpy, R, L, pq_bytes, mp)
                cells[b["label"]][s] = {"mapping": mp, "impossible": mp.get("impossible"),
                                        "sweeps": [], "lat1_sweeps": []}
            else:
                o = TrawlRun(s, exe, copy, args, b, has_entry)
                cfg = o.config(args.threads)
                objs[b["label"]][s] = o
                cells[b["label"]][s] = {"impossible": cfg["impossible"], "plan": cfg["plan"],
                                        "sweeps": [], "lat1_sweeps": []}
            if cells[b["label"]][s]["impossible"]:
                log(f"{ds.name}: {s} at budget {b['label']}: impossible: "
                    f"{cells[b['label']][s]['impossible']}")
    if "diskann" in sides:
        t0 = time.perf_counter()
        first = objs[budgets[0]["label"]]["diskann"]
        bd = first.build(work)
        phases["diskann build"] = time.perf_counter() - t0
        diskann_index = {"dir": str(first.peer.side.idx), "R": R, "L": L, "pq_bytes": pq_bytes,
                         "reused": bool(bd.get("reused")), "reused_from": bd.get("reused_from"),
                         "build_secs": bd.get("build_secs"),
                         "build_peak_rss_bytes": bd.get("peak_rss_bytes")}

    checked: set[str] = set()
    for rep in range(args.repeats):
        border = budgets if rep % 2 == 0 else list(reversed(budgets))
        sorder = sides if rep % 2 == 0 else list(reversed(sides))
        for b in border:
            rdir = work / f"rep{rep}" / re.sub(r"[^A-Za-z0-9.]+", "_", b["label"])
            rdir.mkdir(parents=True, exist_ok=True)
            for s in sorder:
                cell = cells[b["label"]][s]
                if cell["impossible"]:
                    continue
                o = objs[b["label"]][s]
                counts = args.peer_threads if s == "diskann" else [args.threads]
                counts = counts if rep % 2 == 0 else list(reversed(counts))
                by_t = {}
                for t in counts:
                    phase = f"{s} {b['label']} t{t} rep{rep}"
                    log(f"{ds.name} rep {rep + 1}/{args.repeats}: {s}, budget {b['label']}, "
                        f"{_nthreads(t)}, {nq} queries")
                    t0 = time.perf_counter()
                    try:
                        sw = o.search(rdir, t, q, gt, f"t{t}")
                    except Impossible as e:
                        cell["impossible"] = str(e)
                        log(f"  impossible: {e}")
                        break
                    phases[phase] = time.perf_counter() - t0
                    cell["sweeps"].append(sw)
                    by_t[t] = sw
                    log(f"  {s}: " + ", ".join(f"{r['param']}={r['recall']:.3f}/{r['qps']:.0f}qps"
                                               for r in sw["rows"]) + f" [{phases[phase]:.1f}s]")
                    if s != "diskann" and s not in checked:
                        checked.add(s)
                        Lc = int((args.pages_search_L if s.startswith("trawl-pages")
                                  else args.search_L).split(",")[0])
                        br = next((r["recall"] for r in sw["rows"] if r["x"] == Lc), None)
                        try:
                            cell["recall_check"] = o.recall_check(rdir, t, q, gt, Lc, br)
                        except RuntimeError as e:  # a check, not a result: say it, go on
                            cell["recall_check"] = {"L": Lc, "error": str(e)[-600:]}
                            log(f"  recall check failed: {str(e)[-300:]}")
                if cell["impossible"]:
                    continue
                if 1 in by_t:
                    cell["lat1_sweeps"].append(by_t[1])
                    continue
                phase = f"{s} {b['label']} t1 rep{rep}"
                t0 = time.perf_counter()
                s1 = o.search(rdir, 1, q, gt, "t1")
                phases[phase] = time.perf_counter() - t0
                cell["lat1_sweeps"].append(s1)
                log(f"  {s} 1 thread: " + ", ".join(
                    f"{r['param']}={r['recall']:.3f}/{1e6 / r['qps']:.0f}us" for r in s1["rows"])
                    + f" [{phases[phase]:.1f}s]")
    ident1 = trawl_identity()
    params = {k: getattr(args, k) for k in (
        "threads", "trawl_interleave", "peer_threads", "search_L", "pages_search_L", "k",
        "beam_width",
        "entry_list", "cache_policy", "repeats", "page_capacity", "page_degree", "trawl_extra",
        "queries")}
    params.update(nq_used=nq, queries_file=str(q), gt_file=str(gt), flash_batch=flash_batch(args),
                  vector_bytes=vector_bytes)
    meta = {"run_id": run_id, "when": when(), "machine": machine_info(), "versions": versions,
            "command": "python3 bench/pagegraph.py " + " ".join(sys.argv[1:]),
            "loadavg_start": loadavg_start, "loadavg_end": os.getloadavg(),
            "trawl_unchanged": ident0 == ident1, "trawl_identity_end": ident1,
            "phase_secs": phases, "total_secs": time.perf_counter() - t_start,
            "work_dir": str(work)}
    for lab in cells:  # the plan objects of trawl sides are kept in the cells already
        for s, c in cells[lab].items():
            if s != "diskann":
                c["configs"] = {str(t): {k: v for k, v in cfg.items() if k != "plan"}
                                for t, cfg in objs[lab][s]._configs.items()}
    res = {"meta": meta, "dataset": ds.__dict__, "params": params, "sides": sides,
           "budgets": budgets, "index_how": how, "layouts": layouts,
           "diskann_index": diskann_index, "cells": cells}
    return write_report(res, args)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["glove-400k", "minilm-200k", "gen-1m"],
                    choices=list(datasets.DATASETS))
    ap.add_argument("--queries", type=int, default=1000,
                    help="a seeded random sample of N queries, the same for every side (0 = all)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="repetitions of every sweep (budgets and sides in alternating order); "
                         "medians")
    ap.add_argument("--sides", default=",".join(ALL_SIDES),
                    help="comma list of " + ",".join(ALL_SIDES))
    ap.add_argument("--budgets", default="none,10%,30%",
                    help="comma list: none, N%% (of the base vectors' n x dim x 4 bytes) or a "
                         "size such as 64M, 1.5G (binary units)")
    ap.add_argument("--peer-threads", default="2,8,16,32", type=thread_counts,
                    help="diskann's QPS sweep runs once per thread count; the best is taken at "
                         "each recall target (as bench/peers.py)")
    ap.add_argument("--out", default=str(BENCH_DIR / "results"),
                    help="directory of pagegraph-<dataset>.md / .json")
    ap.add_argument("--report-only", action="store_true",
                    help="re-render the markdown from <out>/pagegraph-<dataset>.json")
    ap.add_argument("--threads", type=int, default=2,
                    help="the trawl sides' QPS-sweep threads (and builds)")
    ap.add_argument("--trawl-interleave", type=int, default=4,
                    help="queries in flight per thread in the trawl sides' QPS sweeps (not flash)")
    ap.add_argument("--search-L", default="10,12,15,20,25,30,40,50,60,80,100",
                    help="list sizes swept by every side (at least k)")
    ap.add_argument("--pages-search-L", default="4,5,6,7,8,10,12,15,20,25,30",
                    help="the sweep of the trawl-pages-* sides (L counts page nodes; k may exceed "
                         "it)")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--beam-width", type=int, default=4, help="trawl-pages-beam -W, diskann's")
    ap.add_argument("--entry-list", type=int, default=10,
                    help="the trawl sides' --entry-list (where the index and plan allow)")
    ap.add_argument("--trawl-extra", default="", help="flags added to every trawl side")
    ap.add_argument("--index", action="append", default=[], metavar="DATASET=DIR",
                    help="the trawl index of a dataset (default: peers.py's, else the "
                         "acceptance index idx-R64-L100-pq<B>)")
    ap.add_argument("--page-capacity", type=int, default=0,
                    help="trawl layout --pages --page-capacity (0: trawl's choice)")
    ap.add_argument("--page-degree", type=int, default=0,
                    help="trawl layout --pages --page-degree (0: trawl's choice)")
    ap.add_argument("--relayout", action="store_true",
                    help="write the page-node layout again even when the recorded one is current")
    ap.add_argument("--reuse-pages", action="store_true",
                    help="search whatever pages.trawl the copy has, whoever wrote it")
    ap.add_argument("--cache-policy", default="freq", choices=["freq", "bfs"],
                    help="diskann's cache choice: freq = sample searches (cache_mechanism 1), "
                         "bfs = from the medoid (2)")
    ap.add_argument("--rebuild", action="store_true",
                    help="rebuild the diskann index (and a trawl index this script builds)")
    ap.add_argument("-R", type=int, default=64, help="for an index built here (peers.py's)")
    ap.add_argument("-L", type=int, default=100, help="for an index built here (peers.py's)")
    ap.add_argument("--pq-bytes", type=int, default=48,
                    help="for an index built here (peers.py's); diskann takes the trawl "
                         "index's PQ bytes")
    ap.add_argument("--build-memory-gb", type=float, default=16.0)
    ap.add_argument("--gt-backend", default="auto", choices=["auto", "trawl", "numpy"])
    ap.add_argument("--diskann-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--diskann-venv-python", default="python3.11")
    args = ap.parse_args(argv)
    idx = {}
    for spec in args.index:
        name, sep, d = spec.partition("=")
        if not sep or name not in datasets.DATASETS:
            raise SystemExit(f"--index {spec!r}: expected DATASET=DIR with a known dataset")
        idx[name] = d
    args.index = idx
    if int(args.search_L.split(",")[0]) < args.k:
        raise SystemExit(f"--search-L must start at k = {args.k} or above")
    return args


def main() -> None:
    args = parse_args()
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(sides) - set(ALL_SIDES)
    if unknown:
        raise SystemExit(f"unknown side(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(ALL_SIDES)}")
    sides = [s for s in ALL_SIDES if s in sides]
    if args.report_only:
        for name in args.datasets:
            _, js = out_paths(args, name)
            if not js.exists():
                raise SystemExit(f"no {js} to re-render")
            write_report(json.loads(js.read_text()), args)
        return
    for name in args.datasets:
        md = run_dataset(name, args, sides)
        print(md.read_text())


if __name__ == "__main__":
    main()

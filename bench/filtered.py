#!/usr/bin/env python3
"""Filtered vector search: trawl against LanceDB (IVF_PQ, prefiltered, the disk peer), faiss HNSW
with an ID-selector bitmap and diskannpy's filtered in-memory Vamana index, per filter type and
selectivity bucket, recall@10 against an exact filtered ground truth.

Data (bench/filtered_data.py, cached in .bench-cache/<dataset>/):
  pypi-labelled      MiniLM embeddings of 200K PyPI summaries + 10K queries; keyed labels kw=<w>
                     (200-word vocabulary), month=YYYY-MM, year=YYYY; numbers rank, month_num.
                     The labels are correlated with the vectors (a summary's own words).
  zipf-glove-400k    GloVe-400K with 1-4 Zipf labels L0000..L0999 per vector and a number u
                     uniform in [0, 1e6): labels independent of the vectors.
  --quick            20,000 base vectors and 200 queries of the same data (development).

Filters (.bench-cache/<dataset>/filters/, one line per query of the dataset, made once):
  types    label (one label), and2 (two labels, AND), or2 (two labels, OR), range (a numeric
           range), none (no filter: the 100% bucket), and range-all (a range matching every
           vector that has the field: 100% through the filter machinery)
  buckets  s0.1: 10 matches .. 0.1% of the base; s1: 0.5-2%; s10: 5-20%; s50: 35-65%; s100
  choice   per query, seeded: labels the query itself carries whose selectivity falls in the
           bucket (the realistic "documents like this one with the same keyword"), else labels
           of the right frequency drawn from the whole label set; ranges centred on the query's
           own value when that gives a selectivity in the bucket, else placed at random. A
           cell (type, bucket) no label or pair of labels can fill is n/a (e.g. and2 at 50%).
  files    <cell>.jsonl (the expression tree, match count, selectivity, own or not),
           <cell>.trawl.txt (trawl's syntax), <cell>.lance.txt (LanceDB SQL),
           <cell>.diskann.txt (diskannpy's one label; label cells only), summary.json
Ground truth: exact top-10 among the matching base vectors (cosine: 1 - cos), numpy, float32;
queries with fewer than 10 matches keep what exists (padded with u32::MAX / +inf; recall's
denominator is min(10, matches)). Written per cell in the big-ann GT format.

Sides (--sides, default all; each peer in a venv of its own, like bench/peers.py):
  lancedb     bench/.venv-lancedb (lancedb 0.40): IVF_PQ (num_partitions ~ sqrt(n), PQ bytes
              the divisor of dim closest to --pq-bytes, cosine), scalar indexes LabelList on
              list columns, Bitmap on single-valued label columns, BTree on numbers;
              search(q).where(sql, prefilter=True).nprobes(n).refine_factor(r).limit(10) and
              the exact prefiltered scan (bypass_vector_index); index cache capped with
              lancedb.Session(index_cache_size_bytes = n * (pq + 8) + 16 MiB: the PQ codes and
              row ids, as trawl keeps its PQ codes in memory). Reads through the page cache.
  faiss-hnsw  bench/.venv-peers (faiss-cpu 1.15.1): IndexHNSWFlat M 32, efConstruction 100,
              inner product on unit vectors; SearchParametersHNSW(sel=IDSelectorBitmap,
              efSearch=ef) per query, the bitmap made from the filter beforehand (its cost is
              reported apart as filter_us); ef swept. In memory.
  diskann     bench/.venv-diskann (diskannpy 0.7.0): build_memory_index(filter_labels=...,
              R 64, L 100, filter_complexity 100, α 1.2) on unit vectors (l2), search(q,
              filter_label=label) with complexity swept; one label per query: n/a for and2,
              or2 and range. In memory.
  trawl-naive the naive baseline today's CLI can run: `trawl search -k K -L max(K, 100)` without
              a filter (--naive-k, default 10,100,1000) on an index without attributes (the
              filtered one when built), the first 10 matching results kept here; QPS is the
              search's own (the post-filter is not timed). O_DIRECT.
  trawl       (unless --skip-trawl; needs a binary with filters, else a clear error)
              `trawl build BASE --out DIR ... --labels --attrs` (positional DIR when the binary
              has no --out), `trawl gt --filters --labels --attrs` per cell (compared with the
              numpy truth: same ids except ties), `trawl bench --filters F --filter-plan P` per
              plan of --filter-plans (default auto,inline,scan), list sizes --trawl-list-sizes
              at --threads, then at the fastest list size with recall >= 0.90 every count of
              --trawl-threads (default --peer-threads; the best kept, as for the peers).
              --trawl-interleave N passes `--interleave N` (N queries in flight per thread) to
              trawl bench and trawl search.
The trawl binary: $TRAWL_BIN, else release/trawl in cargo's target directory (common.py).
Each peer's knob is swept (--sweep-threads threads, cheapest first) until recall reaches
--stop-recall or stops rising (under 0.003 over two steps, above 0.3); at the point with recall
>= 0.90 and the highest QPS every --peer-threads count runs and the best QPS is kept.
QPS = queries / wall of the batch, queries issued from a thread pool (one query per call).

Usage:
  python3 bench/filtered.py zipf-glove-400k --quick --skip-trawl      # development, minutes
  python3 bench/filtered.py pypi-labelled --quick --skip-trawl
  python3 bench/filtered.py pypi-labelled --sides lancedb --skip-trawl --nq 200 \
      --sweep-threads 1 --cells label-s0.1,label-s1,label-s10,label-s50,none-s100
  python3 bench/filtered.py pypi-labelled --filters-only               # data, filters, GT only
  python3 bench/filtered.py pypi-labelled --report-only

Writes bench/out/filtered-<dataset>.{json,md}; raw per-side results and logs under
bench/out/raw/filtered-<dataset>/. The report's Acceptance table (also `acceptance` in the JSON):
per cell, each side's QPS at recall@10 >= 0.90 at its best thread count (LanceDB: the faster of
IVF_PQ and its exact prefiltered scan), trawl / LanceDB, trawl / trawl's own unfiltered QPS
(none-s100), trawl's pages per query and their ratio to the unfiltered search's; then trawl /
LanceDB per type x bucket, the 10% cells over unfiltered and the 1% cells' pages over
unfiltered.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

try:
    import numpy as np
except ImportError:
    sys.exit("filtered.py needs numpy on the host python: python3 -m pip install numpy")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import filtered_data as fd  # noqa: E402
from common import (BENCH_DIR, OUT_DIR, Measured, log, machine_info, read_fbin,  # noqa: E402
                    read_gt, run_measured, trawl_bin, trawl_version, write_fbin, write_gt,
                    write_json)

K = 10
PAD_ID = np.uint32(0xFFFFFFFF)
TYPES = ("label", "and2", "or2", "range")
# name -> (lowest count as a share of n, highest share, the 10-match floor applies)
BUCKETS = {"s0.1": (0.0, 0.001), "s1": (0.005, 0.02), "s10": (0.05, 0.2), "s50": (0.35, 0.65)}
MIN_MATCHES = 10
SELECT_SEED = 1234
SIDES = ("lancedb", "faiss-hnsw", "diskann", "trawl-naive", "trawl")
LANCE_VENV = BENCH_DIR / ".venv-lancedb"
LANCE_REQ = ["lancedb==0.40.0", "pyarrow==26.0.1", "numpy==2.4.6"]
WORKER = BENCH_DIR / "filtered_worker.py"
TARGET = 0.90


# ---------------------------------------------------------------------------------------------
# Choosing the filters
# ---------------------------------------------------------------------------------------------

def bucket_range(bucket: str, n: int) -> tuple[int, int]:
    """Match counts [lo, hi] of a bucket over n base vectors."""
    lo, hi = BUCKETS[bucket]
    return max(MIN_MATCHES, math.ceil(lo * n)), max(MIN_MATCHES, math.floor(hi * n))


def parse_label(lab: str) -> dict:
    field, value = fd.label_key(lab)
    return {"op": "label", "field": field, "value": value}


def _nested(a: str, b: str) -> bool:
    """month=YYYY-MM and year=YYYY of the same year: one holds the other (a redundant pair)."""
    fa, va = fd.label_key(a)
    fb, vb = fd.label_key(b)
    return {fa, fb} == {"month", "year"} and (va.startswith(vb) or vb.startswith(va))


class Chooser:
    """Picks, per query, a filter of each type in each bucket (seeded)."""

    def __init__(self, idx: fd.AttrIndex, seed: int = SELECT_SEED):
        self.idx, self.n = idx, idx.n
        self.rng = np.random.default_rng(seed)
        self.labels = sorted(idx.counts, key=lambda lab: (-idx.counts[lab], lab))
        self._pair_pool: dict[tuple[str, str], list] = {}

    def _in(self, c: int, bucket: str) -> bool:
        lo, hi = bucket_range(bucket, self.n)
        return lo <= c <= hi

    def pair_pool(self, op: str, bucket: str) -> list[tuple[str, str, int]]:
        """Label pairs whose AND / OR count is in the bucket, over all labels (the fallback):
        for AND every pair among the 60 most frequent labels, then (both ops) 5000 pairs drawn
        uniformly among the labels that can take part (AND: count >= the bucket's low end; OR:
        count <= its high end)."""
        key = (op, bucket)
        if key in self._pair_pool:
            return self._pair_pool[key]
        lo, hi = bucket_range(bucket, self.n)
        rng = np.random.default_rng([SELECT_SEED, ("and", "or").index(op),
                                     list(BUCKETS).index(bucket)])
        eligible = [lab for lab in self.labels
                    if (self.idx.counts[lab] >= lo if op == "and" else self.idx.counts[lab] <= hi)]
        pairs = []
        if op == "and":
            top = eligible[:60]
            pairs = [(a, b) for i, a in enumerate(top) for b in top[i + 1:]]
        if len(eligible) >= 2:
            for _ in range(5000):
                a, b = rng.choice(len(eligible), 2, replace=False)
                pairs.append((eligible[a], eligible[b]))
        cand, seen = [], set()
        for a, b in pairs:
            if (a, b) in seen or _nested(a, b):
                continue
            seen.add((a, b))
            ca, cb = self.idx.counts[a], self.idx.counts[b]
            if op == "or" and ca + cb < lo:
                continue
            inter, union = self.idx.pair_counts(a, b)
            c = inter if op == "and" else union
            if lo <= c <= hi and inter not in (ca, cb):  # no pair where one holds the other
                cand.append((a, b, c))
        self._pair_pool[key] = cand
        return cand

    def label(self, own: list[str], bucket: str) -> tuple[dict, int, bool] | None:
        mine = [lab for lab in own if self._in(self.idx.counts.get(lab, 0), bucket)]
        if mine:
            lab = mine[self.rng.integers(len(mine))]
            return parse_label(lab), self.idx.counts[lab], True
        pool = [lab for lab in self.labels if self._in(self.idx.counts[lab], bucket)]
        if not pool:
            return None
        lab = pool[self.rng.integers(len(pool))]
        return parse_label(lab), self.idx.counts[lab], False

    def pair(self, op: str, own: list[str], bucket: str) -> tuple[dict, int, bool] | None:
        lo, hi = bucket_range(bucket, self.n)
        mine = []
        known = [lab for lab in own if lab in self.idx.counts]
        for i, a in enumerate(known):
            for b in known[i + 1:]:
                if _nested(a, b):
                    continue
                ca, cb = self.idx.counts[a], self.idx.counts[b]
                if op == "and" and min(ca, cb) < lo or op == "or" and (max(ca, cb) > hi
                                                                       or ca + cb < lo):
                    continue
                inter, union = self.idx.pair_counts(a, b)
                c = inter if op == "and" else union
                if lo <= c <= hi and inter not in (ca, cb):
                    mine.append((a, b, c))
        if mine:
            a, b, c = mine[self.rng.integers(len(mine))]
            own_pick = True
        else:
            pool = self.pair_pool(op, bucket)
            if not pool:
                return None
            a, b, c = pool[self.rng.integers(len(pool))]
            own_pick = False
        return {"op": op, "args": [parse_label(a), parse_label(b)]}, c, own_pick

    def range(self, own: dict, bucket: str) -> tuple[dict, int, bool] | None:
        """A numeric window of about t*n matches, t log-uniform in the bucket (drawn anew at
        each try): centred on the query's own value of a field when that lands in the bucket
        (ties can push a window out of it), else placed at random (50 tries per field);
        fields tried in order of presence (most present first)."""
        lo, hi = bucket_range(bucket, self.n)
        fields = sorted(self.idx.numeric, key=lambda k: -self.idx.numeric[k][0].size)
        for centred in (True, False):
            for field in fields:
                ids, vals = self.idx.numeric[field]
                if vals.size < lo or (centred and field not in own):
                    continue
                for attempt in range(5 if centred else 50):
                    target = min(max(int(round(math.exp(self.rng.uniform(math.log(lo),
                                                                         math.log(hi))))),
                                     lo), hi)
                    c = min(target, vals.size)
                    if centred:
                        mid = int(np.searchsorted(vals, own[field]))
                        start = min(max(mid - c // 2, 0), vals.size - c)
                    else:
                        start = int(self.rng.integers(0, vals.size - c + 1))
                    a, b = int(vals[start]), int(vals[start + c - 1])
                    got = int(np.searchsorted(vals, b, side="right")
                              - np.searchsorted(vals, a, side="left"))
                    if lo <= got <= hi:
                        return {"op": "range", "field": field, "lo": a, "hi": b}, got, centred
        return None

    def match_all(self) -> tuple[dict, int, bool] | None:
        """The numeric field present on the most vectors, >= its minimum."""
        if not self.idx.numeric:
            return None
        field = max(self.idx.numeric, key=lambda k: self.idx.numeric[k][0].size)
        ids, vals = self.idx.numeric[field]
        return {"op": "ge", "field": field, "lo": int(vals[0])}, int(vals.size), False


def cells() -> list[tuple[str, str]]:
    out = [(t, b) for t in TYPES for b in BUCKETS]
    return out + [("range-all", "s100"), ("none", "s100")]


def cell_name(t: str, b: str) -> str:
    return f"{t}-{b}"


def make_filters(ds: fd.FilteredDataset, idx: fd.AttrIndex) -> dict:
    """Choose the filters of every cell for every query of the dataset (cached); return the
    summary (per cell: available or not, selectivity distribution, share of own labels)."""
    folder = Path(ds.folder) / "filters"
    summary_path = folder / "summary.json"
    if summary_path.exists():
        return json.loads(summary_path.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    qlabels = fd.read_labels(Path(ds.query_labels))
    qattrs = fd.read_attrs(Path(ds.query_attrs))
    meta = json.loads((Path(ds.folder) / "meta.json").read_text())
    kinds = fd.lance_columns(meta["base_labels"]["max_values_per_vector"])
    summary: dict = {"n": ds.n, "nq": ds.nq, "seed": SELECT_SEED,
                     "buckets": {b: dict(zip(("lo", "hi"), bucket_range(b, ds.n)))
                                 for b in BUCKETS},
                     "lance_label_columns": kinds, "cells": {}}
    for t, b in cells():
        ch = Chooser(idx, seed=[SELECT_SEED, len(t), list(BUCKETS).index(b)
                                if b in BUCKETS else 9, sum(map(ord, t))])
        rows = []
        for i in range(ds.nq):
            if t == "label":
                got = ch.label(qlabels[i], b)
            elif t in ("and2", "or2"):
                got = ch.pair(t[:-1], qlabels[i], b)
            elif t == "range":
                got = ch.range(qattrs[i], b)
            elif t == "range-all":
                got = ch.match_all()
            else:
                got = ({"op": "all"}, ds.n, False)
            if got is None:
                rows.append(None)
                continue
            f, c, own = got
            rows.append({"q": i, "filter": f, "count": c, "sel": c / ds.n, "own": own})
        name = cell_name(t, b)
        # A query no filter of the bucket was found for borrows another query's (seeded).
        done = [r for r in rows if r is not None]
        borrowed = len(rows) - len(done)
        for i, r in enumerate(rows):
            if r is None and done:
                d = done[ch.rng.integers(len(done))]
                rows[i] = {**d, "q": i, "own": False, "borrowed": True}
        if not done:
            rows = None
        if rows is None:
            summary["cells"][name] = {"type": t, "bucket": b, "available": False,
                                      "why": "no label, pair or range of this selectivity"}
            log(f"filters {name}: n/a")
            continue
        sel = np.array([r["sel"] for r in rows])
        cnt = np.array([r["count"] for r in rows])
        summary["cells"][name] = {
            "type": t, "bucket": b, "available": True,
            "sel": {"min": float(sel.min()), "p10": float(np.percentile(sel, 10)),
                    "median": float(np.median(sel)), "p90": float(np.percentile(sel, 90)),
                    "max": float(sel.max()), "mean": float(sel.mean())},
            "matches_min": int(cnt.min()), "own_share": float(np.mean([r["own"] for r in rows])),
            "borrowed": borrowed,
            "distinct_filters": len({json.dumps(r["filter"], sort_keys=True) for r in rows}),
            "example": fd.to_trawl(rows[0]["filter"])}
        with open(folder / f"{name}.jsonl", "w") as f:
            for r in rows:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
        for ext, fn in (("trawl.txt", fd.to_trawl),
                        ("lance.txt", lambda g: fd.to_lance(g, kinds) or ""),
                        ("diskann.txt", fd.to_diskann)):
            texts = [fn(r["filter"]) for r in rows]
            if any(x is None for x in texts):
                continue
            (folder / f"{name}.{ext}").write_text("".join(x + "\n" for x in texts))
        s = summary["cells"][name]
        log(f"filters {name}: selectivity median {s['sel']['median']:.4%} "
            f"[{s['sel']['min']:.4%}, {s['sel']['max']:.4%}], own {s['own_share']:.0%}, "
            f"{s['distinct_filters']} distinct")
    summary["secs"] = round(time.perf_counter() - t0, 1)
    write_json(summary_path, summary)
    return summary


def read_cell(ds: fd.FilteredDataset, name: str, nq: int) -> list[dict]:
    with open(Path(ds.folder) / "filters" / f"{name}.jsonl") as f:
        return [json.loads(line) for _, line in zip(range(nq), f)]


# ---------------------------------------------------------------------------------------------
# Exact filtered ground truth (numpy)
# ---------------------------------------------------------------------------------------------

def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)


class IdsCache:
    """Filter -> sorted matching ids, with a small LRU (pairs and ranges differ per query)."""

    def __init__(self, idx: fd.AttrIndex, size: int = 256):
        self.idx, self.size = idx, size
        self.d: collections.OrderedDict = collections.OrderedDict()

    def __call__(self, f: dict) -> np.ndarray:
        if f["op"] == "label":
            return self.idx.ids(f)
        key = json.dumps(f, sort_keys=True)
        v = self.d.get(key)
        if v is None:
            v = self.idx.ids(f)
            self.d[key] = v
            if len(self.d) > self.size:
                self.d.popitem(last=False)
        else:
            self.d.move_to_end(key)
        return v


def _topk(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (highest score; ties: smaller id) of scores over ids, best first."""
    if scores.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        scores, ids = scores[part], ids[part]
    order = np.lexsort((ids, -scores))
    return ids[order], scores[order]


def filtered_gt(base_unit: np.ndarray, queries: np.ndarray, filters: dict[str, list[dict]],
                idx: fd.AttrIndex, k: int = K, qblock: int = 128,
                shortlist: int = 1024) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Exact top-k per cell: scores S = q . b (unit vectors) for a block of queries, once; per
    query and cell, the matching ids' scores. A filter matching more than n/16 vectors first
    tries the query's unfiltered top-`shortlist`: when k of it match, they are the answer (no
    matching vector outside it can score higher)."""
    n = base_unit.shape[0]
    nq = queries.shape[0]
    q_unit = unit(queries)
    cache = IdsCache(idx)
    out = {name: (np.full((nq, k), PAD_ID, dtype=np.uint32),
                  np.full((nq, k), np.inf, dtype=np.float32)) for name in filters}
    t0 = time.perf_counter()
    m = min(shortlist, n)
    for qs in range(0, nq, qblock):
        s_blk = q_unit[qs:qs + qblock] @ base_unit.T  # [b, n] float32
        part = np.argpartition(-s_blk, m - 1, axis=1)[:, :m] if m < n else \
            np.tile(np.arange(n), (s_blk.shape[0], 1))
        for r in range(s_blk.shape[0]):
            qi = qs + r
            row = s_blk[r]
            cand = part[r]
            cand = cand[np.lexsort((cand, -row[cand]))]  # the shortlist, best first
            for name, rows in filters.items():
                ids = cache(rows[qi]["filter"])
                if ids.size == 0:
                    continue
                if ids.size > n // 16 and m < n:
                    pos = np.searchsorted(ids, cand)
                    hit = cand[(pos < ids.size) & (ids[np.minimum(pos, ids.size - 1)] == cand)]
                    if hit.size >= k:
                        top_i = hit[:k]
                        top_s = row[top_i]
                    else:
                        top_i, top_s = _topk(row[ids], ids, k)
                else:
                    top_i, top_s = _topk(row[ids], ids, k)
                out[name][0][qi, :top_i.size] = top_i
                out[name][1][qi, :top_i.size] = 1.0 - top_s
        log(f"filtered gt: {min(qs + qblock, nq)}/{nq} queries x {len(filters)} cells, "
            f"{time.perf_counter() - t0:.0f}s")
    return out


def recall_filtered(found: np.ndarray, gt_ids: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean over queries of |found[:10] ∩ truth| / |truth|, truth = the GT's valid ids (fewer
    than 10 when fewer vectors match; a query matching none is left out). Per-query values."""
    per = np.full(gt_ids.shape[0], np.nan)
    for i, (f, t) in enumerate(zip(found, gt_ids)):
        t = t[t != PAD_ID]
        if t.size:
            f = np.asarray(f[:K], dtype=np.int64)
            per[i] = np.intersect1d(f[f >= 0], t.astype(np.int64)).size / t.size
    return float(np.nanmean(per)), per


def compare_gt(a_path: Path, b_path: Path, rel_tol: float = 1e-4) -> dict:
    """Two filtered GTs of the same queries: the share of queries whose valid ids are the same
    (as sets, ties at the k-th distance allowed to differ), and the largest distance gap."""
    ai, ad = read_gt(a_path)
    bi, bd = read_gt(b_path)
    if ai.shape != bi.shape:
        return {"error": f"shapes {ai.shape} vs {bi.shape}"}
    same = tie_only = count_diff = 0
    max_rel = 0.0
    for ia, da, ib, db in zip(ai, ad, bi, bd):
        va, vb = ia != PAD_ID, ib != PAD_ID
        if va.sum() != vb.sum():
            count_diff += 1
            continue
        fa, fb = da[va].astype(np.float64), db[vb].astype(np.float64)
        if fa.size:
            max_rel = max(max_rel, float(np.max(np.abs(fa - fb) / np.maximum(np.abs(fa), 1e-6))))
        sa, sb = set(ia[va].tolist()), set(ib[vb].tolist())
        if sa == sb:
            same += 1
        elif fa.size and all(abs(x - fa[-1]) <= rel_tol * max(abs(fa[-1]), 1e-6)
                             for x in list(fa[[i for i, v in enumerate(ia[va]) if v not in sb]])
                             + list(fb[[i for i, v in enumerate(ib[vb]) if v not in sa]])):
            tie_only += 1
    nq = ai.shape[0]
    return {"queries": nq, "same_ids": same, "differ_only_in_ties": tie_only,
            "different_match_count": count_diff,
            "different": nq - same - tie_only - count_diff, "dist_max_rel_diff": max_rel}


# ---------------------------------------------------------------------------------------------
# The run folder: the first nq queries, their filters and ground truth
# ---------------------------------------------------------------------------------------------

def prepare_run(ds: fd.FilteredDataset, idx: fd.AttrIndex, summary: dict, names: list[str],
                nq: int) -> tuple[Path, list[dict]]:
    """filters/run-nq<nq>/: queries.fbin, <cell>.{trawl,lance,diskann}.txt cut to nq lines,
    <cell>.gt.numpy.bin (computed here for the cells that lack it)."""
    src = Path(ds.folder) / "filters"
    run = src / f"run-nq{nq}"
    run.mkdir(parents=True, exist_ok=True)
    if not (run / "queries.fbin").exists():
        write_fbin(run / "queries.fbin", np.asarray(read_fbin(Path(ds.queries))[:nq]))
    out = []
    for name in names:
        for ext in ("trawl.txt", "lance.txt", "diskann.txt"):
            p = src / f"{name}.{ext}"
            if p.exists() and not (run / f"{name}.{ext}").exists():
                with open(p) as f:
                    (run / f"{name}.{ext}").write_text("".join(line for _, line in
                                                               zip(range(nq), f)))
        c = summary["cells"][name]
        out.append({"name": name, "type": c["type"], "bucket": c["bucket"],
                    "jsonl": str(src / f"{name}.jsonl"),
                    "lance": str(run / f"{name}.lance.txt"),
                    "diskann": str(run / f"{name}.diskann.txt")
                    if (src / f"{name}.diskann.txt").exists() else None,
                    "trawl": str(run / f"{name}.trawl.txt"),
                    "gt": str(run / f"{name}.gt.numpy.bin"), "median_sel": c["sel"]["median"]})
    missing = [c for c in out if not Path(c["gt"]).exists()]
    if missing:
        t0 = time.perf_counter()
        base_unit = unit(read_fbin(Path(ds.base)))
        gts = filtered_gt(base_unit, np.asarray(read_fbin(Path(ds.queries))[:nq]),
                          {c["name"]: read_cell(ds, c["name"], nq) for c in missing}, idx)
        for c in missing:
            write_gt(Path(c["gt"]), *gts[c["name"]])
        log(f"numpy filtered gt of {len(missing)} cells x {nq} queries in "
            f"{time.perf_counter() - t0:.0f}s")
    return run, out


# ---------------------------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------------------------

def ensure_lance_venv(python: str) -> Path:
    py = LANCE_VENV / "bin" / "python"
    probe = "import lancedb, pyarrow, numpy; from lancedb.index import LabelList, Bitmap, BTree"
    if py.exists() and subprocess.run([str(py), "-c", probe], capture_output=True).returncode == 0:
        return py
    log(f"creating {LANCE_VENV} with {python}: pip install {' '.join(LANCE_REQ)}")
    subprocess.run([python, "-m", "venv", str(LANCE_VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *LANCE_REQ], check=True)
    subprocess.run([str(py), "-c", probe], check=True)
    return py


def peer_python(side: str, args: argparse.Namespace) -> Path:
    """The venv python of a peer, made on demand; a clear error when it cannot be."""
    try:
        if side == "lancedb":
            return ensure_lance_venv(args.venv_python)
        if side == "faiss-hnsw":
            from peers import PEERS_VENV, ensure_peers_venv
            return ensure_peers_venv(PEERS_VENV, args.venv_python)
        if side == "diskann":
            from vs_diskann import DEFAULT_VENV, ensure_venv
            return ensure_venv(DEFAULT_VENV, args.diskann_venv_python)
    except (subprocess.CalledProcessError, OSError) as e:
        raise SystemExit(f"filtered.py: cannot make the virtualenv of {side} ({e}); install its "
                         "packages by hand or leave it out with --sides") from e
    raise ValueError(side)


def divisor_near(dim: int, want: int) -> int:
    divs = [d for d in range(1, dim + 1) if dim % d == 0]
    return min(divs, key=lambda d: (abs(d - want), -d))


def doubling(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v < hi:
        out.append(v)
        v *= 2
    return out + [hi]


def peer_params(side: str, ds: fd.FilteredDataset, args: argparse.Namespace) -> tuple[dict, dict, Path]:
    """(build params, search params, index path) of a peer."""
    folder = Path(ds.folder) / "filtered-idx"
    if side == "lancedb":
        parts = max(1, int(round(math.sqrt(ds.n))))
        m = divisor_near(ds.dim, args.pq_bytes)
        meta = json.loads((Path(ds.folder) / "meta.json").read_text())
        kinds = fd.lance_columns(meta["base_labels"]["max_values_per_vector"])
        b = {"partitions": parts, "sub_vectors": m, "label_columns": kinds}
        s = {"nprobes": doubling(1, parts), "refine": args.lance_refine,
             "index_cache_bytes": ds.n * (m + 8) + 16 * 2 ** 20,
             "flat_max_sel": args.lance_flat_max_sel}
        return b, s, folder / f"lancedb-ivfpq-P{parts}-m{m}"
    if side == "faiss-hnsw":
        b = {"M": 32, "efc": 100, "threads": args.threads}
        return b, {"ef": doubling(10, args.max_ef)}, folder / "faiss-hnsw-M32-efc100.index"
    if side == "diskann":
        b = {"R": args.R, "L": args.L, "filter_L": args.L, "alpha": 1.2, "threads": args.threads}
        return b, {"L": doubling(10, args.max_ef)}, \
            folder / f"diskann-filtered-R{args.R}-L{args.L}"
    raise ValueError(side)


def run_worker(py: Path, job: dict, work: Path, tag: str) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    job_path, res_path = work / f"{tag}.job.json", work / f"{tag}.result.json"
    write_json(job_path, job)
    res_path.unlink(missing_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(job.get("omp", 1)),
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    log(f"{tag}: {py} {WORKER.name} (log {work / (tag + '.log')})")
    m = run_measured([str(py), str(WORKER), str(job_path), str(res_path)], work / f"{tag}.log",
                     env=env)
    res = json.loads(res_path.read_text())
    res["process"] = m.to_dict()
    return res


def run_peer(side: str, ds: fd.FilteredDataset, cells: list[dict], nq: int,
             args: argparse.Namespace, work: Path) -> dict:
    py = peer_python(side, args)
    bparams, sparams, index = peer_params(side, ds, args)
    index.parent.mkdir(parents=True, exist_ok=True)
    if side == "diskann":
        ub = Path(ds.folder) / "base.unit.fbin"
        if not ub.exists():
            write_fbin(ub, unit(read_fbin(Path(ds.base))))
        bparams["unit_base"] = str(ub)
    record = index.parent / (index.name + ".build.json")
    build = None
    if record.exists() and index.exists() and not args.rebuild:
        rec = json.loads(record.read_text())
        if rec.get("params") == bparams:
            build = dict(rec["build"], reused=True)
            log(f"{side}: reusing {index}")
    if build is None:
        if index.is_dir():
            shutil.rmtree(index)
        elif index.exists():
            index.unlink()
        job = {"peer": side, "phase": "build", "dataset": fd.asdict(ds), "index": str(index),
               "params": bparams, "omp": args.threads}
        build = run_worker(py, job, work, f"{side}-build")
        write_json(record, {"params": bparams, "build": build})
    usable = [c for c in cells if side != "diskann" or c["diskann"]]
    job = {"peer": side, "phase": "search", "dataset": fd.asdict(ds), "index": str(index),
           "params": {**bparams, **sparams}, "cells": usable, "nq": nq,
           "threads": args.peer_threads, "sweep_threads": args.sweep_threads,
           "stop_recall": args.stop_recall, "target": TARGET}
    res = run_worker(py, job, work, f"{side}-search")
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True,
                            text=True).stdout.split()
    return {"side": side, "build_params": bparams, "search_params": sparams, "build": build,
            "search": res, "venv": freeze,
            "not_run": {c["name"]: "diskannpy takes one label per query"
                        for c in cells if c not in usable}}


# ---------------------------------------------------------------------------------------------
# trawl (needs a binary with filters: `trawl build --labels --attrs`, `bench --filters`)
# ---------------------------------------------------------------------------------------------

def help_text(exe: str, sub: str) -> str:
    r = subprocess.run([exe, sub, "--help"], capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def trawl_caps(exe: str) -> dict:
    """Which of the filter flags this trawl binary has (from each subcommand's --help)."""
    h = {s: help_text(exe, s) for s in ("build", "gt", "bench", "search")}
    caps = {"build_out": re.search(r"--out(?![\w-])", h["build"]) is not None,
            "build_labels": "--labels" in h["build"]
            and "--attrs" in h["build"], "gt_filters": "--filters" in h["gt"],
            "bench_filters": "--filters" in h["bench"], "filter_plan": "--filter-plan" in h["bench"],
            "search_filters": "--filters" in h["search"]}
    missing = [k for k in ("build_labels", "gt_filters", "bench_filters") if not caps[k]]
    if missing:
        raise SystemExit(f"filtered.py: {exe} has no filter support yet ({', '.join(missing)} "
                         "missing in its --help: `trawl build --labels/--attrs`, `trawl gt "
                         "--filters`, `trawl bench --filters`); rerun with --skip-trawl")
    return caps


QPS_RE = re.compile(r"(\d+) queries in ([\d.]+) s \(([\d.]+) QPS")


def run_trawl(ds: fd.FilteredDataset, idx: fd.AttrIndex, cells: list[dict], run: Path,
              nq: int, args: argparse.Namespace, work: Path) -> dict:
    exe = str(trawl_bin())
    caps = trawl_caps(exe)
    index = Path(ds.folder) / "filtered-idx" / (f"trawl-{ds.metric}-R{args.R}-L{args.L}"
                                                f"-pq{args.pq_bytes}")
    interleave = ["--interleave", str(args.trawl_interleave)] if args.trawl_interleave else []
    out: dict = {"side": "trawl", "version": trawl_version(), "caps": caps, "cells": {},
                 "interleave": args.trawl_interleave or None,
                 "threads": sorted({args.threads, *args.trawl_threads})}
    labels_flags = ["--labels", ds.labels, "--attrs", ds.attrs]
    if args.rebuild or not (index / "manifest.trawl").exists():
        shutil.rmtree(index, ignore_errors=True)
        index.parent.mkdir(parents=True, exist_ok=True)
        cmd = [exe, "build", ds.base, *(["--out", str(index)] if caps["build_out"]
                                        else [str(index)]),
               "--metric", ds.metric, "-R", args.R, "-L", args.L, "--pq-bytes", args.pq_bytes,
               "--threads", args.threads, *labels_flags,
               "--report", work / "trawl-build-report.json", "--quiet"]
        m = run_measured(cmd, work / "trawl-build.log")
        out["build"] = {"process": m.to_dict(),
                        "report": json.loads((work / "trawl-build-report.json").read_text())}
    else:
        out["build"] = {"reused": str(index)}
    queries = run / "queries.fbin"
    for c in cells:
        name, rec = c["name"], {}
        filt = ["--filters", c["trawl"]] if c["type"] != "none" else []
        # Exact filtered truth from trawl, compared with numpy's.
        tgt = run / f"{name}.gt.trawl.bin"
        if not tgt.exists() or args.rebuild:
            m = run_measured([exe, "gt", ds.base, queries, "-k", K, "--metric", ds.metric,
                              "-o", tgt, *filt, *labels_flags, "--threads", args.threads,
                              "--quiet"], work / f"trawl-gt-{name}.log")
            rec["gt_secs"] = m.wall_secs
        rec["gt_vs_numpy"] = compare_gt(Path(c["gt"]), tgt)
        # Filtered search, per filter plan.
        rec["bench"] = {}
        plans = args.filter_plans if filt and caps["filter_plan"] else ["default"]
        for plan in plans:
            def bench(tag: str, lists: str, threads: int) -> tuple[dict, Measured]:
                js = work / f"trawl-bench-{name}-{plan}{tag}.json"
                cmd = [exe, "bench", index, "--queries", queries, "--gt", c["gt"], *filt,
                       *(["--filter-plan", plan] if plan != "default" else []),
                       "-L", lists, "--threads", threads, "--json", js, "--quiet",
                       *interleave, *args.trawl_extra.split()]
                m = run_measured(cmd, work / f"trawl-bench-{name}-{plan}{tag}.log")
                return json.loads(js.read_text()), m

            # The sweep of list sizes at --threads, then every --trawl-threads count at the
            # fastest list size with recall >= TARGET (as the peers: best thread count kept).
            b, m = bench("", args.trawl_list_sizes, args.threads)
            rows = [trawl_row(r, args.threads) for r in b.get("rows", [])]
            rec["bench"][plan] = {"rows": rows, "json": str(work / f"trawl-bench-{name}-{plan}.json"),
                                  "process": m.to_dict(), "threads": args.threads}
            ok = [r for r in rows if (r.get("recall") or 0) >= TARGET and r.get("qps")]
            if ok:
                best = max(ok, key=lambda r: r["qps"])
                per_threads = {args.threads: best}
                for t in args.trawl_threads:
                    if t not in per_threads:
                        bt, _ = bench(f"-t{t}-L{best['L']}", str(best["L"]), t)
                        per_threads[t] = trawl_row(bt["rows"][0], t)
                top = max(per_threads.values(), key=lambda r: (r["qps"], -r["threads"]))
                rec["bench"][plan]["best"] = {
                    **top, "qps_per_threads": {str(t): r["qps"]
                                               for t, r in sorted(per_threads.items())}}
                log(f"trawl {name} {plan}: {top['qps']:.0f} QPS at L {top['L']}, "
                    f"{top['threads']} threads, recall {top['recall']:.3f}")
        out["cells"][name] = rec
    return out


TRAWL_ROW_KEYS = ("L", "recall", "qps", "latency_us", "pages_per_query", "ios_per_query",
                  "hops_per_query", "exact_distances_per_query", "pq_distances_per_query",
                  "cpu_user_us_per_query", "cpu_sys_us_per_query", "occupancy",
                  "lists_probed_per_query", "plan_inline", "plan_scan", "plan_exact",
                  "matches", "matches_exact", "filter_list", "rejected")


def trawl_row(r: dict, threads: int) -> dict:
    """The fields of a `trawl bench --json` row the report keeps (those the binary has), and
    the thread count it ran at. pages_per_query: 4 KiB pages read per query (O_DIRECT)."""
    return {**{k: r[k] for k in TRAWL_ROW_KEYS if k in r}, "threads": threads}


def run_trawl_naive(ds: fd.FilteredDataset, idx: fd.AttrIndex, cells: list[dict], run: Path,
                    nq: int, args: argparse.Namespace, work: Path) -> dict:
    """The naive baseline, which today's CLI can run: an index without attributes (the
    filtered one when it exists), unfiltered `trawl search -k K`, post-filtered here."""
    exe = str(trawl_bin())
    folder = Path(ds.folder) / "filtered-idx"
    index = folder / f"trawl-{ds.metric}-R{args.R}-L{args.L}-pq{args.pq_bytes}"
    build: dict = {"reused": str(index)}
    if not (index / "manifest.trawl").exists():
        index = folder / f"trawl-plain-{ds.metric}-R{args.R}-L{args.L}-pq{args.pq_bytes}"
        if args.rebuild or not (index / "manifest.trawl").exists():
            shutil.rmtree(index, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)
            report = work / "trawl-plain-build-report.json"
            m = run_measured([exe, "build", ds.base, index, "--metric", ds.metric, "-R", args.R,
                              "-L", args.L, "--pq-bytes", args.pq_bytes, "--threads",
                              args.threads, "--report", report, "--quiet"],
                             work / "trawl-plain-build.log")
            build = {"process": m.to_dict(), "report": json.loads(report.read_text()),
                     "build_secs": m.wall_secs,
                     "disk_bytes": sum(f.stat().st_size for f in index.iterdir())}
    return {"side": "trawl-naive", "version": trawl_version(), "index": str(index),
            "build": build, "build_params": {"R": args.R, "L": args.L, "pq": args.pq_bytes},
            "naive": naive_baseline(exe, index, run / "queries.fbin", cells, idx, nq, args,
                                    work)}


def naive_baseline(exe: str, index: Path, queries: Path, cells: list[dict], idx: fd.AttrIndex,
                   nq: int, args: argparse.Namespace, work: Path) -> dict:
    """`trawl search -k K` without a filter, then the first 10 results that match, per cell.
    QPS is the search's own (post-filtering in Python not counted)."""
    res: dict = {"k": {}}
    cache = IdsCache(idx)
    for k in args.naive_k:
        o = work / f"trawl-naive-k{k}.bin"
        cmd = [exe, "search", index, "--queries", queries, "-k", k, "-L", max(k, 100),
               "-o", o, "--threads", args.threads,
               *(["--interleave", str(args.trawl_interleave)] if args.trawl_interleave else []),
               *args.trawl_extra.split()]
        m = run_measured(cmd, work / f"trawl-naive-k{k}.log")
        mt = QPS_RE.search(Path(m.log_path).read_text())
        ids, _ = read_gt(o)
        per_cell = {}
        for c in cells:
            rows = read_cell_rows(c, nq)
            gt_ids, _ = read_gt(Path(c["gt"]))
            found = []
            for i in range(nq):
                match = cache(rows[i]["filter"])
                cand = ids[i].astype(np.int64)
                pos = np.searchsorted(match, cand)
                ok = (pos < match.size) & (match[np.minimum(pos, match.size - 1)] == cand)
                found.append(cand[ok][:K])
            per_cell[c["name"]] = recall_filtered(found, gt_ids[:nq])[0]
        res["k"][str(k)] = {"L": max(k, 100), "qps": float(mt.group(3)) if mt else None,
                            "process": m.to_dict(), "recall": per_cell}
    return res


def read_cell_rows(c: dict, nq: int) -> list[dict]:
    with open(c["jsonl"]) as f:
        return [json.loads(line) for _, line in zip(range(nq), f)]


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _knob(k: dict) -> str:
    return ",".join(f"{a}={b}" for a, b in k.items() if b is not None)


def _best_cell(res: dict | None) -> str:
    """'QPS (threads, knob)' at recall >= 0.90, else the best recall reached."""
    if not res:
        return "-"
    if res.get("best"):
        b = res["best"]
        return f"{b['qps']:.0f} ({b['threads']}t, {_knob(b['knob'])}, r {b['recall']:.3f})"
    mr = res.get("max_recall")
    return f"< 0.90 (max {mr:.3f})" if mr is not None else "-"


def trawl_best(rec: dict | None, plan: str) -> dict | None:
    """trawl's row at recall >= TARGET with the highest QPS for one plan, at its best thread
    count (`best`, from the thread runs; a result without them: the sweep's row)."""
    b = (rec or {}).get("bench", {}).get(plan)
    if not b:
        return None
    if b.get("best"):
        return b["best"]
    ok = [r for r in b["rows"] if (r.get("recall") or 0) >= TARGET and r.get("qps")]
    return dict(max(ok, key=lambda r: r["qps"]), threads=b.get("threads")) if ok else None


def trawl_headline(rec: dict | None) -> tuple[str | None, dict | None]:
    """(plan, best row) of trawl's headline figure of a cell: the `auto` plan (the planner's
    choice, what a user gets), `default` for the cell without a filter, else the fastest plan
    that reaches the target."""
    bench = (rec or {}).get("bench", {})
    for plan in ("auto", "default"):
        if plan in bench:
            return plan, trawl_best(rec, plan)
    got = [(p, trawl_best(rec, p)) for p in bench]
    got = [x for x in got if x[1]]
    return max(got, key=lambda x: x[1]["qps"]) if got else (None, None)


def _trawl_cell(rec: dict | None) -> str:
    if not rec:
        return "-"
    parts = []
    for plan, b in rec.get("bench", {}).items():
        r = trawl_best(rec, plan)
        if r:
            parts.append(f"{plan}: {r['qps']:.0f} ({r.get('threads') or '?'}t, L {r['L']}, "
                         f"r {r['recall']:.3f})")
        else:
            mr = max((r.get("recall") or 0 for r in b["rows"]), default=0)
            parts.append(f"{plan}: < 0.90 (max {mr:.3f})")
    return "; ".join(parts) or "-"


UNFILTERED = "none-s100"


def acceptance(meta: dict) -> list[dict]:
    """Per cell (type x bucket, every cell of the filter summary, n/a ones included): each
    side's QPS at recall@10 >= 0.90 at its best thread count, trawl / LanceDB, trawl /
    trawl's own unfiltered QPS (none-s100), trawl's pages per query and their ratio to the
    unfiltered search's (both at the row whose QPS is reported)."""
    sides, summary = meta["sides"], meta["filters"]
    run = {c["name"] for c in meta["cells"]}
    trawl_cells = sides.get("trawl", {}).get("cells", {})
    _, unf = trawl_headline(trawl_cells.get(UNFILTERED))
    out = []
    for name, c in summary["cells"].items():
        row: dict = {"cell": name, "type": c["type"], "bucket": c["bucket"],
                     "available": c["available"], "run": name in run,
                     "median_sel": c["sel"]["median"] if c["available"] else None}
        for side in ("lancedb", "faiss-hnsw", "diskann"):
            if side not in sides:
                continue
            res = sides[side]["search"]["cells"].get(name)
            b = (res or {}).get("best")
            fb = ((res or {}).get("flat") or {}).get("best")
            if side == "lancedb" and fb and (not b or fb["qps"] > b["qps"]):
                b = fb  # LanceDB's best of IVF_PQ and the exact prefiltered scan
            row[side] = ({"qps": b["qps"], "threads": b["threads"], "recall": b["recall"],
                          "knob": b["knob"]} if b else
                         {"qps": None, "max_recall": res.get("max_recall")} if res else None)
        if "trawl" in sides:
            plan, b = trawl_headline(trawl_cells.get(name))
            best_plan = [(p, trawl_best(trawl_cells.get(name), p))
                         for p in trawl_cells.get(name, {}).get("bench", {})]
            best_plan = max((x for x in best_plan if x[1]), key=lambda x: x[1]["qps"],
                            default=(None, None))
            row["trawl"] = ({"plan": plan, "qps": b["qps"], "threads": b.get("threads"),
                             "L": b["L"], "recall": b["recall"],
                             "pages_per_query": b.get("pages_per_query")} if b else None)
            row["trawl_best_plan"] = ({"plan": best_plan[0], "qps": best_plan[1]["qps"]}
                                      if best_plan[1] else None)
            lq = (row.get("lancedb") or {}).get("qps")
            row["trawl_over_lancedb"] = b["qps"] / lq if b and lq else None
            row["trawl_over_unfiltered"] = b["qps"] / unf["qps"] if b and unf else None
            pu = (unf or {}).get("pages_per_query")
            row["pages_over_unfiltered"] = (b["pages_per_query"] / pu if b and pu
                                            and b.get("pages_per_query") is not None else None)
        out.append(row)
    return out


def _q(v) -> str:
    return f"{v:.0f}" if v is not None else "-"


def _x(v) -> str:
    return f"{v:.2f}×" if v is not None else "-"


def render_acceptance(meta: dict) -> list[str]:
    rows = acceptance(meta)
    sides = meta["sides"]
    peers = [s for s in ("lancedb", "faiss-hnsw", "diskann") if s in sides]
    has_trawl = "trawl" in sides
    unf = next((r for r in rows if r["cell"] == UNFILTERED), {}).get("trawl")
    lines = ["## Acceptance: QPS at recall@10 = 0.90", "",
             "Each side at its best thread count (peers: " + ",".join(
                 map(str, meta["args"]["peer_threads"]))
             + ("; trawl: " + ",".join(map(str, sides["trawl"].get("threads", [])))
                if has_trawl else "") + "), the fastest "
             "configuration with recall >= 0.90 (LanceDB: IVF_PQ or the exact prefiltered "
             "scan, whichever is faster; `flat` marks the scan)." + (" trawl: the `auto` plan (the planner's choice; "
             "the fastest plan beside it)"
             + (f", --interleave {sides['trawl']['interleave']}"
                if sides.get("trawl", {}).get("interleave") else "")
             + ". trawl / unfiltered: over trawl's own QPS without a filter (none-s100"
             + (f": {unf['qps']:.0f} QPS, {unf.get('pages_per_query') or 0:.1f} pages/query"
                if unf else "") + "); pages / unfiltered: trawl's pages per query over the "
             "unfiltered search's, each at the row reported." if has_trawl else "")
             + " n/a: no filter of that type has "
             "that selectivity here (or diskannpy, one label per query, cannot express it).", ""]
    head = ["cell", "sel. median"] + peers + (
        ["trawl", "trawl best plan", "trawl / LanceDB", "trawl / unfiltered", "trawl pages/q",
         "pages / unfiltered"] if has_trawl else [])
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in rows:
        if not r["available"]:
            lines.append(f"| {r['cell']} | n/a |" + " n/a |" * (len(head) - 2))
            continue
        cells = [r["cell"], f"{r['median_sel']:.3%}"]
        for side in peers:
            v = r.get(side)
            if v is None:
                cells.append("n/a" if r["cell"] in sides[side].get("not_run", {}) else "-")
            elif v["qps"] is None:
                cells.append(f"< 0.90 (max {v['max_recall']:.3f})"
                             if v.get("max_recall") is not None else "-")
            else:
                cells.append(f"{v['qps']:.0f} ({v['threads']}t"
                             + (", flat" if v["knob"].get("flat") else "") + ")")
        if has_trawl:
            t = r.get("trawl")
            bp = r.get("trawl_best_plan")
            cells += [f"{t['qps']:.0f} ({t['threads']}t, L {t['L']})" if t else
                      ("< 0.90" if r["run"] and r["cell"] in sides["trawl"]["cells"] else "-"),
                      f"{bp['plan']}: {bp['qps']:.0f}" if bp else "-",
                      _x(r.get("trawl_over_lancedb")), _x(r.get("trawl_over_unfiltered")),
                      f"{t['pages_per_query']:.1f}" if t and t.get("pages_per_query")
                      is not None else "-", _x(r.get("pages_over_unfiltered"))]
        lines.append("| " + " | ".join(cells) + " |")
    if has_trawl:
        by = {(r["type"], r["bucket"]): r for r in rows}
        types = [t for t in TYPES if any(k[0] == t for k in by)]
        lines += ["", "trawl / LanceDB per filter type and bucket:", "",
                  "| bucket | " + " | ".join(types) + " |", "|---" * (len(types) + 1) + "|"]
        for b in BUCKETS:
            lines.append(f"| {b} | " + " | ".join(
                ("n/a" if not by[(t, b)]["available"] else _x(by[(t, b)].get("trawl_over_lancedb")))
                if (t, b) in by else "-" for t in types) + " |")
        r100 = by.get(("none", "s100"))
        lines.append(f"| s100 (no filter) | {_x(r100.get('trawl_over_lancedb')) if r100 else '-'} |"
                     + " |" * (len(types) - 1))
        lines += ["", "trawl at 10% over its unfiltered QPS: " + "; ".join(
                      f"{t} {_x(by[(t, 's10')].get('trawl_over_unfiltered'))}"
                      if by.get((t, "s10"), {}).get("available") else f"{t} n/a" for t in types),
                  "", "trawl pages per query at 1% over unfiltered: " + "; ".join(
                      f"{t} {_x(by[(t, 's1')].get('pages_over_unfiltered'))}"
                      if by.get((t, "s1"), {}).get("available") else f"{t} n/a" for t in types)]
    return lines + [""]


def planner_fit(meta: dict) -> dict | None:
    """The planner's costs (`CostModel`) measured on this run from trawl's forced plans at
    --threads, machine time per query = threads / QPS: `page_ns` = time / pages over every
    inline row; `inline_pages` = pages − L over the unfiltered sweep (what a search reads
    beyond its list); `code_byte_ns` from the scan rows of cells with at least 10,000
    matches = (time − page_ns × pages) / (matches × code bytes). Medians. Then per cell,
    `auto` against the faster of the forced plans at recall >= 0.90."""
    t = meta["sides"].get("trawl")
    if not t:
        return None
    code_bytes = int(meta["args"].get("pq_bytes") or 0)
    page, beyond, byte_ns, per_cell = [], [], [], {}
    for c in meta["cells"]:
        rec = t["cells"].get(c["name"], {}).get("bench", {})
        for r in rec.get("inline", {}).get("rows", []):
            if r.get("qps") and r.get("pages_per_query"):
                page.append(rec["inline"]["threads"] * 1e9 / r["qps"] / r["pages_per_query"])
        for r in rec.get("default", {}).get("rows", []):
            if r.get("pages_per_query"):
                beyond.append(r["pages_per_query"] - r["L"])
    if not page:
        return None
    e = float(np.median(page))
    for c in meta["cells"]:
        rec = t["cells"].get(c["name"], {}).get("bench", {})
        rows = read_cell_rows(c, meta["nq"]) if c.get("jsonl") and c["type"] != "none" else []
        m = float(np.mean([r["count"] for r in rows])) if rows else 0.0
        if "scan" in rec and m >= 10_000 and code_bytes:
            for r in rec["scan"]["rows"]:
                if r.get("qps"):
                    ns = rec["scan"]["threads"] * 1e9 / r["qps"]
                    byte_ns.append((ns - e * (r.get("pages_per_query") or 0))
                                   / (m * code_bytes))
        best = {p: trawl_best({"bench": rec}, p) for p in ("auto", "inline", "scan")}
        forced = [b["qps"] for p, b in best.items() if p != "auto" and b]
        if best["auto"] and forced:
            per_cell[c["name"]] = {"auto": best["auto"]["qps"], "best_forced": max(forced),
                                   "auto_over_best": best["auto"]["qps"] / max(forced)}
    return {"page_ns": e, "inline_pages": float(np.median(beyond)) if beyond else None,
            "code_byte_ns": float(np.median(byte_ns)) if byte_ns else None,
            "inline_rows": len(page), "scan_rows": len(byte_ns), "cells": per_cell}


def render_planner(meta: dict) -> list[str]:
    f = planner_fit(meta)
    if not f:
        return []
    cb = f"{f['code_byte_ns']:.2f}" if f["code_byte_ns"] is not None else "n/a"
    ip = f"{f['inline_pages']:.1f}" if f["inline_pages"] is not None else "n/a"
    lines = ["## Planner: the cost model measured on this run", "",
             f"Machine time per query (threads / QPS) of trawl's forced plans: a page read "
             f"costs {f['page_ns'] / 1000:.1f} µs (`page_ns`; median of {f['inline_rows']} "
             f"inline rows); an unfiltered search reads {ip} pages beyond its list "
             f"(`inline_pages`); a scan {cb} ns per code byte scored beside its re-rank "
             f"reads (`code_byte_ns`; median of {f['scan_rows']} rows with >= 10,000 "
             "matches). The planner's defaults are `CostModel` in "
             "`crates/trawl/src/filter/plan.rs`.", "",
             "| cell | auto QPS | faster forced plan | auto / forced |", "|---|---|---|---|"]
    for name, c in f["cells"].items():
        lines.append(f"| {name} | {c['auto']:.0f} | {c['best_forced']:.0f} | "
                     f"{c['auto_over_best']:.2f} |")
    return lines + [""]


def _load(v) -> str:
    return "/".join(f"{x:.1f}" for x in v) if v else "-"


def render(meta: dict) -> str:
    ds, summary, sides = meta["dataset"], meta["filters"], meta["sides"]
    mi = meta["machine"]
    lines = [f"# Filtered search: {ds['name']} ({ds['n']:,} base vectors, {meta['nq']} "
             f"queries, k = {K})", "",
             f"{meta['when']}; {mi.get('cpu_model')} ({mi.get('logical_cpus')} CPUs), "
             f"commit {str(mi.get('git_commit'))[:12]}; load average (1, 5, 15 min) before "
             f"{_load(meta['loadavg_before'])}, after {_load(meta.get('loadavg_after'))} (the "
             "machine's other work shares the cores: compare within one run).", "",
             "Sides run (end, load after): " + "; ".join(
                 f"{k} {v.get('when', '?')} ({_load(v.get('loadavg_after'))}, {v.get('secs', 0):.0f} s)"
                 for k, v in sides.items()) + ".", "",
             "Recall@10 against the exact filtered top-10 (numpy; denominator min(10, "
             "matches)). QPS at the configuration with recall >= 0.90 and the highest QPS, at "
             "the best thread count of " + ",".join(map(str, meta["args"]["peer_threads"]))
             + " (queries issued one per call from a thread pool). LanceDB reads through the "
             "page cache; faiss HNSW and diskannpy are in memory.", "",
             "## Filters", "",
             "| cell | selectivity median [min, max] | own labels | distinct filters | example |",
             "|---|---|---|---|---|"]
    for name, c in summary["cells"].items():
        if not c["available"]:
            lines.append(f"| {name} | n/a: {c['why']} | | | |")
            continue
        s = c["sel"]
        lines.append(f"| {name} | {s['median']:.3%} [{s['min']:.3%}, {s['max']:.3%}] | "
                     f"{c['own_share']:.0%}"
                     + (f" ({c['borrowed']} borrowed)" if c.get("borrowed") else "")
                     + f" | {c['distinct_filters']} | "
                     f"`{c['example'] or '(none)'}` |")
    cols = [s for s in ("lancedb", "lancedb-flat", "faiss-hnsw", "diskann", "trawl",
                        "trawl-naive") if s.split("-flat")[0] in sides]
    lines += [""] + render_acceptance(meta) + render_planner(meta)
    lines += ["## QPS at recall@10 >= 0.90, every configuration", "",
              "| cell | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for c in meta["cells"]:
        name = c["name"]
        row = []
        for col in cols:
            if col in ("lancedb", "faiss-hnsw", "diskann"):
                sres = sides[col]["search"]["cells"].get(name)
                cell = _best_cell(sres) if sres else ("n/a" if name in sides[col].get(
                    "not_run", {}) else "-")
                if col == "faiss-hnsw" and sres:
                    cell += f"; filter {sres['filter_us_per_query']:.0f} µs/q"
                row.append(cell)
            elif col == "lancedb-flat":
                sres = sides["lancedb"]["search"]["cells"].get(name, {}).get("flat")
                row.append(_best_cell(sres) if sres else "-")
            elif col == "trawl":
                row.append(_trawl_cell(sides["trawl"]["cells"].get(name)))
            else:
                nv = sides["trawl-naive"]["naive"]["k"]
                ok = [(v["qps"], k) for k, v in nv.items()
                      if (v["recall"].get(name) or 0) >= TARGET and v["qps"]]
                rs = [v["recall"][name] for v in nv.values() if name in v["recall"]]
                row.append(f"{max(ok)[0]:.0f} (k {max(ok)[1]})" if ok else
                           f"< 0.90 (max {max(rs):.3f})" if rs else "-")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += ["", "## Recall / QPS curves (sweep threads "
              f"{meta['args']['sweep_threads']})", ""]
    for side in ("lancedb", "faiss-hnsw", "diskann"):
        if side not in sides:
            continue
        lines += [f"### {side}", ""]
        for name, res in sides[side]["search"]["cells"].items():
            pts = "; ".join(f"{_knob({k: v for k, v in p.items() if k in ('nprobes', 'refine', 'ef', 'L', 'flat')})}"
                            f": {p['recall']:.3f} / {p['qps']:.0f}" for p in res["points"])
            lines.append(f"- {name}: {pts}")
            if res.get("flat"):
                p = res["flat"]["points"][0]
                lines.append(f"  - flat prefilter scan: {p['recall']:.3f} / {p['qps']:.0f}")
        lines.append("")
    lines += ["## Builds", "", "| side | params | build s | disk MiB | peak RSS MiB |",
              "|---|---|---|---|---|"]
    for side, s in sides.items():
        b = s.get("build") or {}
        proc = b.get("process") or {}
        lines.append(f"| {side} | {json.dumps(s.get('build_params', {}))} | "
                     f"{b.get('build_secs', proc.get('wall_secs', 0)) or 0:.0f}"
                     f"{' (reused)' if b.get('reused') else ''} | "
                     f"{(b.get('disk_bytes') or 0) / 2 ** 20:.0f} | "
                     f"{(proc.get('peak_rss_bytes') or 0) / 2 ** 20:.0f} |")
    la = (sides.get("diskann", {}).get("build") or {}).get("label_awareness")
    if la:
        lines += ["", "diskannpy graph, label awareness (mean out-neighbours of a label's points "
                  "that carry the label, against a label-blind graph's expectation): "
                  + "; ".join(f"{x['label']} ({x['count']} points): {x['same_label_neighbours']:.2f}"
                              f" vs {x['chance']:.2f}" for x in la)]
    if "trawl" in sides:
        lines += ["", "## trawl gt --filters against the numpy truth", ""]
        for name, rec in sides["trawl"]["cells"].items():
            lines.append(f"- {name}: {json.dumps(rec.get('gt_vs_numpy'))}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def int_list(s: str) -> list[int]:
    return [int(v) for v in s.split(",") if v.strip()]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dataset", choices=fd.NAMES)
    ap.add_argument("--quick", action="store_true",
                    help="20,000 base vectors and 200 queries (development)")
    ap.add_argument("--nq", type=int, default=0,
                    help="queries searched (the first nq; default 200 with --quick, else 1000)")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma list of {', '.join(SIDES)}")
    ap.add_argument("--skip-trawl", action="store_true",
                    help="leave trawl out (a binary without filters cannot run it)")
    ap.add_argument("--cells", default="", help="comma list of cells (e.g. label-s1,none-s100); "
                                                "default all available")
    ap.add_argument("--filters-only", action="store_true",
                    help="prepare data, filters and ground truth, then stop")
    ap.add_argument("--report-only", action="store_true",
                    help="re-render the report from bench/out/filtered-<dataset>.json")
    ap.add_argument("--peer-threads", type=int_list, default=[1, 2, 4, 8])
    ap.add_argument("--sweep-threads", type=int, default=2,
                    help="threads of the knob sweeps (recall does not depend on it)")
    ap.add_argument("--stop-recall", type=float, default=0.99,
                    help="a knob sweep stops once recall reaches this")
    ap.add_argument("--threads", type=int, default=2, help="build threads (all sides)")
    ap.add_argument("--max-ef", type=int, default=5120,
                    help="largest faiss efSearch / diskann search L of the sweeps")
    ap.add_argument("--lance-refine", type=int_list, default=[1, 5],
                    help="LanceDB refine factors swept (0: no refine)")
    ap.add_argument("--lance-flat-max-sel", type=float, default=0.2,
                    help="LanceDB's exact prefiltered scan (bypass_vector_index) also runs on "
                         "the cells whose median selectivity is at most this (0: never); it "
                         "reads every match, so on the full datasets it costs minutes per cell "
                         "above ~2%%")
    ap.add_argument("--pq-bytes", type=int, default=48,
                    help="trawl PQ bytes; LanceDB takes the divisor of dim closest to it")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--trawl-list-sizes", default="10,20,40,80,160,320")
    ap.add_argument("--filter-plans", default="auto,inline,scan",
                    help="trawl bench --filter-plan values to run (auto|inline|scan|exact)")
    ap.add_argument("--naive-k", type=int_list, default=[10, 100, 1000],
                    help="k of the unfiltered trawl search post-filtered here")
    ap.add_argument("--trawl-extra", default="", help="extra flags for trawl bench / search")
    ap.add_argument("--trawl-interleave", type=int, default=0,
                    help="trawl bench/search --interleave N: N queries in flight per thread "
                         "(0: the flag is not passed, trawl's default 1)")
    ap.add_argument("--trawl-threads", type=int_list, default=None,
                    help="thread counts trawl bench runs at its fastest list size with recall "
                         ">= 0.90 (the best kept; default: --peer-threads)")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--venv-python", default=sys.executable,
                    help="python that makes bench/.venv-lancedb and bench/.venv-peers")
    ap.add_argument("--diskann-venv-python", default="python3.11",
                    help="python that makes bench/.venv-diskann (diskannpy 0.7.0: cp310/cp311)")
    a = ap.parse_args()
    a.sides = [s for s in a.sides.split(",") if s]
    bad = [s for s in a.sides if s not in SIDES]
    if bad:
        ap.error(f"unknown sides {bad}; known: {', '.join(SIDES)}")
    if a.skip_trawl and "trawl" in a.sides:
        a.sides.remove("trawl")
    a.filter_plans = [p for p in a.filter_plans.split(",") if p]
    a.lance_refine = [r or None for r in a.lance_refine]
    if a.trawl_threads is None:
        a.trawl_threads = list(a.peer_threads)
    return a


def main() -> None:
    args = parse_args()
    tag = args.dataset + ("-quick" if args.quick else "")
    out_json = OUT_DIR / f"filtered-{tag}.json"
    if args.report_only:
        meta = json.loads(out_json.read_text())
        meta["acceptance"] = acceptance(meta)
        meta["planner"] = planner_fit(meta)
        write_json(out_json, meta)
        (OUT_DIR / f"filtered-{tag}.md").write_text(render(meta))
        print(OUT_DIR / f"filtered-{tag}.md")
        return
    loadavg_before = os.getloadavg()
    if "trawl" in args.sides and not args.filters_only:
        trawl_caps(str(trawl_bin()))  # fail before any work when the CLI has no filters
    ds = fd.prepare(args.dataset, args.quick)
    t0 = time.perf_counter()
    idx = fd.AttrIndex.from_files(ds.labels, ds.attrs)
    log(f"attribute index of {ds.n} vectors in {time.perf_counter() - t0:.1f}s")
    summary = make_filters(ds, idx)
    nq = min(args.nq or (200 if args.quick else 1000), ds.nq)
    names = [n for n, c in summary["cells"].items() if c["available"]]
    if args.cells:
        want = [c for c in args.cells.split(",") if c]
        unknown = [c for c in want if c not in summary["cells"]]
        if unknown:
            raise SystemExit(f"unknown cells {unknown}; known: {', '.join(summary['cells'])}")
        names = [n for n in names if n in want]
    run, cells = prepare_run(ds, idx, summary, names, nq)
    if args.filters_only:
        print(json.dumps({"dataset": fd.asdict(ds), "run": str(run),
                          "cells": [c["name"] for c in cells]}, indent=2))
        return
    work = OUT_DIR / "raw" / f"filtered-{tag}"
    work.mkdir(parents=True, exist_ok=True)
    old = json.loads(out_json.read_text()) if out_json.exists() else {}
    sides = {s: v for s, v in old.get("sides", {}).items()
             if old.get("nq") == nq and s not in args.sides}  # keep other sides of a past run
    for side in args.sides:
        t1 = time.perf_counter()
        if side == "trawl":
            sides[side] = run_trawl(ds, idx, cells, run, nq, args, work)
        elif side == "trawl-naive":
            sides[side] = run_trawl_naive(ds, idx, cells, run, nq, args, work)
        else:
            sides[side] = run_peer(side, ds, cells, nq, args, work)
        sides[side]["secs"] = round(time.perf_counter() - t1, 1)
        sides[side]["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        sides[side]["loadavg_after"] = os.getloadavg()
        write_json(work / f"{side}.json", sides[side])
        log(f"{side} done in {sides[side]['secs']:.0f}s")
    if sides and old.get("nq") == nq:  # a partial run (--cells) keeps the other cells' rows
        cells = cells + [c for c in old.get("cells", [])
                         if c["name"] not in {x["name"] for x in cells}]
        order = list(summary["cells"])
        cells.sort(key=lambda c: order.index(c["name"]) if c["name"] in order else len(order))
    meta = {"dataset": fd.asdict(ds), "nq": nq, "run": str(run), "cells": cells,
            "filters": summary, "sides": sides, "args": vars(args),
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine_info(), "loadavg_before": loadavg_before,
            "loadavg_after": os.getloadavg()}
    meta["acceptance"] = acceptance(meta)
    meta["planner"] = planner_fit(meta)
    write_json(out_json, meta)
    md = OUT_DIR / f"filtered-{tag}.md"
    md.write_text(render(meta))
    log(f"wrote {out_json} and {md}")
    print(md.read_text())


if __name__ == "__main__":
    try:
        main()
    except FileNotFoundError as e:  # a missing trawl binary, label list or dataset file
        sys.exit(f"filtered.py: {e}")
    except subprocess.CalledProcessError as e:
        sys.exit(f"filtered.py: {' '.join(map(str, e.cmd))} failed (exit {e.returncode}); "
                 "see the log above")
    except RuntimeError as e:  # run_measured: a trawl or worker command that failed (log tail)
        sys.exit(f"filtered.py: {e}")

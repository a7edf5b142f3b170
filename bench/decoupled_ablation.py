#!/usr/bin/env python3
"""Each change to the decoupled layout's search, alone, at equal memory (issue 20).

The same graph in three forms, side by side in one run: the page-packed layout (the reference,
its static node cache frequency-chosen), the decoupled layout with its vectors in id order
(`--vector-order id`) and in graph order (`--vector-order graph`, the default). Configurations,
each adding one change to the one before:

  packed         the page-packed layout, static cache by visit frequency
  A id-lru-B10   decoupled as issue 5 left it: vectors by id, LRU list cache, re-rank B = 10
  B graph        + vectors in graph-locality order (positions keyed beside the lists; landed
                   vector pages kept per query)
  C pin          + the list cache pinned by visit frequency (--list-pin), the rest LRU
  D B2           + re-rank batches of 2 (the benefit rule stops after the first batch that
                   changes nothing)
  E bound        C with the error-bound re-rank instead (--rerank-bound 1)

At one list size L per dataset and budget (two passes over the queries, the first warming the
LRU caches, the second measured), configurations alternate within each repetition;
medians and the ratio to packed per repetition. Counters per query: graph reads, vector reads
(pages of the vector file), list-cache hits, vectors found on a page already read, and the
re-rank's round trips after the traversal.

Usage:
  python3 bench/decoupled_ablation.py glove-400k --packed .bench-cache/glove-400k/trawl-peers-cosine-R64-L100-pq48 \
      --id .bench-cache/glove-400k/dec-id --graph .bench-cache/glove-400k/dec-graph -L 20 --repeat 3

The three directories hold the same index (hard-linked copies); each decoupled one has its
layout written (`trawl layout DIR --decoupled --vector-order id|graph`).
Writes bench/out/decoupled-ablation-<dataset>.{json,md}.
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
import datasets  # noqa: E402
from common import OUT_DIR, log, machine_info, trawl_bin, write_json  # noqa: E402
from vs_diskann_disk import subset  # noqa: E402

COLS = ("recall", "qps", "ios_per_query", "vector_reads_per_query", "cache_hits_per_query",
        "page_reuses_per_query", "page_joins_per_query", "rerank_rounds_per_query",
        "compute_us_per_query")


def bench(idx: Path, q: Path, gt: Path, L: int, threads: int, extra: list[str], out: Path) -> dict:
    # Two passes over the queries at the same L: the first warms the LRU part of a list cache
    # (and the page cache of nothing: O_DIRECT), the second is measured.
    cmd = [str(trawl_bin()), "bench", str(idx), "--queries", str(q), "--gt", str(gt), "-k", "10",
           "-L", f"{L},{L}", "--threads", str(threads), "--json", str(out), "--quiet", *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    d = json.loads(out.read_text())
    d["rows"] = d["rows"][-1:]
    return d


def memory(idx: Path, q: Path, gt: Path, extra: list[str], out: Path) -> tuple[int, int]:
    cmd = [str(trawl_bin()), "bench", str(idx), "--queries", str(q), "--gt", str(gt), "-k", "10",
           "-L", "10", "--threads", "1", "--max-queries", "10", "--json", str(out), "--quiet",
           *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    d = json.loads(out.read_text())
    return d["memory_total_bytes"], d["memory_bytes"]["entry_bytes"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--packed", type=Path, required=True)
    ap.add_argument("--id", type=Path, required=True)
    ap.add_argument("--graph", type=Path, required=True)
    ap.add_argument("-L", type=int, default=20)
    ap.add_argument("--budgets", default="none,1%,20%")
    ap.add_argument("--strategy", default="beam", choices=["beam", "pipe"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nq", type=int, default=3000)
    ap.add_argument("--pin", type=float, default=0.9)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    path = OUT_DIR / f"decoupled-ablation-{args.dataset}-{args.strategy}.json"
    if not args.report_only:
        run(args, path)
    doc = json.loads(path.read_text())
    md = render(doc)
    path.with_suffix(".md").write_text(md)
    print(md)


def run(args, path: Path) -> None:
    ds = datasets.prepare(args.dataset)
    q, gt = subset(Path(ds.query), Path(ds.gt), args.nq, Path(ds.base).parent / "subsets")
    work = OUT_DIR / "raw" / f"decoupled-ablation-{args.dataset}"
    work.mkdir(parents=True, exist_ok=True)
    strat = ["--strategy", "beam", "-W", "8"] if args.strategy == "beam" else ["--strategy", "pipe"]
    probe = work / "probe.json"
    configs = []
    for budget in args.budgets.split(","):
        packed_extra = ["--layout", "packed"]
        if budget != "none":
            nn = json.loads(subprocess.run(
                [str(trawl_bin()), "info", str(args.packed), "--json"], check=True,
                capture_output=True, text=True).stdout).get("n")
            nodes = int(round(float(budget.rstrip("%")) / 100 * nn))
            packed_extra += ["--cache-nodes", str(nodes), "--cache-policy", "freq",
                             "--cache-samples", str(min(4 * nodes, 20000))]
        pm, _ = memory(args.packed, q, gt, packed_extra, probe)
        dm, _ = memory(args.graph, q, gt, ["--layout", "decoupled", "--list-cache-mb", "0"], probe)
        mb = f"{max(pm - dm, 0) / 2**20:.6f}"
        lru = ["--layout", "decoupled", "--list-cache-mb", mb]
        pin = [*lru, "--list-pin", str(args.pin), "--cache-samples", str(args.samples)]
        configs += [
            (budget, "packed", args.packed, [*packed_extra, *strat]),
            (budget, "A id-lru-B10", args.id, [*lru, "--rerank-batch", "10", *strat]),
            (budget, "B graph", args.graph, [*lru, "--rerank-batch", "10", *strat]),
            (budget, "C pin", args.graph, [*pin, "--rerank-batch", "10", *strat]),
            (budget, "D B2", args.graph, [*pin, "--rerank-batch", "2", *strat]),
            (budget, "E bound", args.graph, [*pin, "--rerank-bound", "1", *strat]),
        ]
        log(f"budget {budget}: {pm / 2**20:.2f} MiB each (decoupled list cache {mb} MiB)")
    runs: dict[tuple, list[dict]] = {(c[0], c[1]): [] for c in configs}
    for rep in range(args.repeat):
        order = configs if rep % 2 == 0 else list(reversed(configs))
        for budget, name, idx, extra in order:
            t0 = time.time()
            out = work / f"{budget}-{name.split()[0]}-{rep}.json"
            d = bench(idx, q, gt, args.L, args.threads, extra, out)
            runs[(budget, name)].append({**{k: d["rows"][0].get(k) for k in COLS},
                                         "memory": d["memory_total_bytes"]})
            log(f"  {budget} {name} rep {rep}: {d['rows'][0]['qps']:.0f} QPS "
                f"({time.time() - t0:.0f} s)")
    doc = {"dataset": args.dataset, "L": args.L, "strategy": args.strategy,
           "threads": args.threads, "queries": args.nq, "repetitions": args.repeat,
           "pin": args.pin, "machine": machine_info(),
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "configs": [{"budget": b, "name": nm, "flags": ex, "reps": runs[(b, nm)]}
                       for b, nm, _, ex in configs]}
    write_json(path, doc)


def render(doc: dict) -> str:
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    lines = [f"# Decoupled layout, one change at a time: {doc['dataset']}", "",
             f"{doc['strategy']} search, L = {doc['L']}, {doc['queries']} queries, k = 10, "
             f"{doc['threads']} threads, O_DIRECT; configurations alternating within each of "
             f"{doc['repetitions']} repetitions, medians; ratio = QPS / packed QPS per repetition "
             f"(median). Pinned share {doc['pin']:.0%}. {doc['when']}.", "",
             "| budget | configuration | memory | recall@10 | QPS | × packed | graph reads | "
             "vector reads | list hits | vectors on pages read | re-rank round trips | CPU µs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    packed = {c["budget"]: c for c in doc["configs"] if c["name"] == "packed"}
    for c in doc["configs"]:
        r = c["reps"]
        g = lambda k: med([x[k] or 0.0 for x in r])  # noqa: E731
        p = packed[c["budget"]]["reps"]
        ratio = med([a["qps"] / b["qps"] for a, b in zip(r, p)])
        lines.append(
            f"| {c['budget']} | {c['name']} | {r[0]['memory'] / 2**20:.2f} MiB | {g('recall'):.3f} | "
            f"{g('qps'):.0f} | {ratio:.2f} | {g('ios_per_query') - g('vector_reads_per_query'):.1f} | "
            f"{g('vector_reads_per_query'):.1f} | {g('cache_hits_per_query'):.1f} | "
            f"{g('page_joins_per_query') + g('page_reuses_per_query'):.1f} | "
            f"{g('rerank_rounds_per_query'):.2f} | {g('compute_us_per_query'):.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Memory budget between PQ codes and MemGraph (OctopusANN §6.2, Figure 14, Finding 6).

For each PQ size (bytes per vector) and each MemGraph sampling ratio (none, 0.01%, 0.1%, 1%;
R = 48, L = 128, uniform), the index of the same build parameters gets its own directory
(hard links to the graph and PQ files, its own `entry.trawl` from `trawl entry --ratio`), and
`trawl bench` sweeps it with beam search W = 8 and, with a MemGraph, 10 entry points. The
configurations run in alternating order per repetition; medians per list size.

Usage:
  python3 bench/memgraph_budget.py glove-400k --repeat 2
  python3 bench/memgraph_budget.py glove-400k --report-only

Writes bench/out/memgraph_budget-<dataset>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import OUT_DIR, build_trawl_index, log, machine_info, trawl_bin, write_json  # noqa: E402
from plot_ablation import at_recall  # noqa: E402
from vs_diskann_disk import subset  # noqa: E402

RATIOS = [0.0, 0.0001, 0.001, 0.01]
KEYS = ("recall", "qps", "pages_per_query", "hops_per_query")


def prepare(ds, args, pq: int) -> list[tuple[str, Path, int, float]]:
    """The index with `pq` PQ bytes and one directory per ratio: (name, dir, pq, ratio)."""
    a = argparse.Namespace(R=args.R, L=args.L, pq_bytes=pq, threads=args.threads,
                           rebuild=False)
    idx = build_trawl_index(ds, "trawl-octopus", a, [
        "--entry-ratio", "0.001", "--entry-degree", "48", "--entry-build-list", "128"])
    out = []
    for ratio in RATIOS:
        name = f"pq{pq}-memgraph{ratio:g}"
        if ratio == 0.0:
            out.append((name, idx, pq, ratio))
            continue
        d = Path(ds.base).parent / "memgraph-budget" / name
        if not (d / "entry.trawl").exists():
            d.mkdir(parents=True, exist_ok=True)
            for f in ("packed.trawl", "pq.trawl", "pq-codes.trawl"):
                if not (d / f).exists():
                    os.link(idx / f, d / f)
            subprocess.run([str(trawl_bin()), "entry", str(d), "--ratio", str(ratio),
                            "--degree", "48", "--build-list", "128"], check=True,
                           stdout=subprocess.DEVNULL)
        out.append((name, d, pq, ratio))
    return out


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def render(dataset: str, doc: dict) -> str:
    lines = [f"# PQ vs MemGraph memory budget: {dataset}", "",
             f"{doc['queries']} queries, k = 10, {doc['threads']} threads, O_DIRECT, beam search "
             f"W = 8; MemGraph uniform, R = 48, L = 128, 10 entry points. Medians of "
             f"{doc['repetitions']} repetitions. {doc['when']}.", "",
             "| PQ B/vector | MemGraph ratio | memory | MemGraph bytes | recall@10 at L = 10 "
             "| QPS at 0.90 | pages/q at 0.90 | hops/q at 0.90 | QPS at 0.95 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in doc["configs"]:
        rows = c["rows"]
        r10 = next((r["recall"] for r in rows if r["L"] == 10), None)

        def g(k, t):
            v = at_recall(rows, k, t)
            return "—" if v is None else (f"{v:.0f}" if k == "qps" else f"{v:.1f}")
        lines.append(
            f"| {c['pq']} | {c['ratio'] * 100:g}% | {c['memory_bytes'] / 2**20:.1f} MiB | "
            f"{c['entry_bytes'] / 2**10:.0f} KiB | {'—' if r10 is None else f'{r10:.3f}'} | "
            f"{g('qps', 0.90)} | {g('pages_per_query', 0.90)} | {g('hops_per_query', 0.90)} | "
            f"{g('qps', 0.95)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--pq", default="24,48", help="PQ bytes per vector to compare")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--search-L", default="10,15,20,25,30,40,50,60")
    ap.add_argument("--nq", type=int, default=5000)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    path = OUT_DIR / f"memgraph_budget-{args.dataset}.json"
    if not args.report_only:
        ds = datasets.prepare(args.dataset)
        configs = [c for pq in args.pq.split(",") for c in prepare(ds, args, int(pq))]
        q, gt = subset(Path(ds.query), Path(ds.gt), args.nq, Path(ds.base).parent / "subsets")
        work = OUT_DIR / "raw" / f"memgraph_budget-{args.dataset}"
        work.mkdir(parents=True, exist_ok=True)
        runs: dict[str, list[dict]] = {c[0]: [] for c in configs}
        for rep in range(args.repeat):
            order = configs if rep % 2 == 0 else list(reversed(configs))
            for name, d, pq, ratio in order:
                out = work / f"{name}-rep{rep}.json"
                extra = ["--entry-list", "10"] if ratio > 0 else []
                t0 = time.time()
                subprocess.run([str(trawl_bin()), "bench", str(d), "--queries", str(q), "--gt",
                                str(gt), "-k", "10", "-L", args.search_L, "--threads",
                                str(args.threads), "-W", "8", "--json", str(out), "--quiet",
                                *extra], check=True, stdout=subprocess.DEVNULL)
                runs[name].append(json.loads(out.read_text()))
                log(f"  {name} rep {rep}: {time.time() - t0:.0f} s")
        doc = {"dataset": args.dataset, "queries": args.nq, "threads": args.threads,
               "repetitions": args.repeat, "machine": machine_info(),
               "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "configs": []}
        for name, d, pq, ratio in configs:
            reps = runs[name]
            by_l: dict[int, list[dict]] = {}
            for r in reps:
                for row in r["rows"]:
                    by_l.setdefault(row["L"], []).append(row)
            rows = [{"L": L, **{k: med(x[k] for x in rs) for k in KEYS}}
                    for L, rs in sorted(by_l.items())]
            # In memory: the search's structures, the MemGraph only when it is used (the
            # ratio-0 configuration opens the index that has one and never searches it).
            mem = reps[0]["memory_bytes"]
            entry_bytes = mem["entry_bytes"] if ratio > 0 else 0
            doc["configs"].append({
                "name": name, "pq": pq, "ratio": ratio, "index": str(d),
                "memory_bytes": reps[0]["memory_total_bytes"] - mem["entry_bytes"] + entry_bytes,
                "entry_bytes": entry_bytes, "rows": rows})
        write_json(path, doc)
    doc = json.loads(path.read_text())
    md = render(args.dataset, doc)
    (OUT_DIR / f"memgraph_budget-{args.dataset}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""FusionANNS's techniques one at a time, on one trawl IVF index, paired in one run.

Configurations (each a `trawl bench` sweep of the lists probed, -L), run in alternating order
for --repeat repetitions, medians per sweep point:

  full            every technique on (bucket layout, page merging, page buffer, heuristic re-rank,
                  page mates)
  no-dedup        --no-page-merge: one read per vector, even for vectors on one page
  no-heuristic    --no-heuristic: re-rank all n candidates (fixed n, the default n = max(10k, 4m))
  fixed-n16       --no-heuristic --rerank-n 16: a small fixed n instead of the early stop
  no-page-mates   --no-page-mates: only the candidates are re-ranked, not their page mates
  no-buffer       --no-page-buffer: a page read by an earlier mini-batch is read again
  no-bucket       --ivf-vectors by_id: the vectors in id order instead of buckets

and, for reference, trawl's graph index (beam search -W 4) on the same queries when --graph is
given. Figures at recall@10 = 0.90 and 0.95 (linear interpolation between the bracketing sweep
points): QPS, pages and I/O requests per query, vectors re-ranked, reads saved by each dedup.

Usage:
  python3 bench/ivf_ablation.py glove-400k --index .bench-cache/glove-400k/trawl-peers-ivf-... \\
      [--graph .bench-cache/glove-400k/trawl-peers-cosine-R64-L100-pq48] [--repeat 2]
Writes bench/results/ivf-ablation-<dataset>.md (and the raw JSON under bench/out/).
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
from common import log, machine_info, trawl_bin, write_json  # noqa: E402
import datasets  # noqa: E402
from vs_diskann_disk import interpolate  # noqa: E402

BENCH = Path(__file__).resolve().parent
CONFIGS = {
    "full": [],
    "no-dedup": ["--no-page-merge"],
    "no-heuristic": ["--no-heuristic"],
    "fixed-n16": ["--no-heuristic", "--rerank-n", "16"],
    "no-page-mates": ["--no-page-mates"],
    "no-buffer": ["--no-page-buffer"],
    "no-bucket": ["--ivf-vectors", "by_id"],
}
KEYS = ("qps", "pages_per_query", "ios_per_query", "exact_distances_per_query",
        "pages_merged_per_query", "pages_buffered_per_query", "page_mates_per_query",
        "candidates_unique_per_query",
        "compute_us_per_query", "io_wait_us_per_query")


def bench(exe: str, idx: Path, q: str, gt: str, ls: str, extra: list[str], out: Path,
          threads: int, nq: int) -> list[dict]:
    cmd = [exe, "bench", str(idx), "--queries", q, "--gt", gt, "-k", "10", "-L", ls,
           "--threads", str(threads), "--max-queries", str(nq), "--json", str(out), "--quiet",
           *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["rows"]


def median_rows(runs: list[list[dict]]) -> list[dict]:
    rows = []
    for pts in zip(*runs):
        r = {"L": pts[0]["L"], "recall": statistics.median(p["recall"] for p in pts)}
        for k in KEYS:
            r[k] = statistics.median(p.get(k) or 0.0 for p in pts)
        rows.append(r)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--index", type=Path, required=True, help="IVF index (with --by-id-vectors)")
    ap.add_argument("--graph", type=Path, help="graph index for the beam reference")
    ap.add_argument("--nprobe", default="8,12,16,24,32,48,64,96,128,192")
    ap.add_argument("--graph-L", default="10,15,20,30,40,60,80")
    ap.add_argument("--ivf-flags", default="--ivf-batch 2 --ivf-epsilon 0.1 --ivf-beta 2",
                    help="flags every IVF configuration shares")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    ds = datasets.prepare(args.dataset, "auto", args.threads)
    exe = str(trawl_bin())
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = BENCH / "out" / "raw" / f"ivf-ablation-{ds.name}" / run_id
    work.mkdir(parents=True, exist_ok=True)
    shared = args.ivf_flags.split()
    sides = {n: (args.index, args.nprobe, shared + f) for n, f in CONFIGS.items()}
    if args.graph:
        sides["graph-beam-W4"] = (args.graph, args.graph_L, ["--strategy", "beam", "-W", "4"])
    runs: dict[str, list] = {n: [] for n in sides}
    for rep in range(args.repeat):
        order = list(sides) if rep % 2 == 0 else list(reversed(sides))
        for n in order:
            idx, ls, flags = sides[n]
            t0 = time.perf_counter()
            rows = bench(exe, idx, ds.query, ds.gt, ls, flags, work / f"{n}-rep{rep}.json",
                         args.threads, args.queries)
            runs[n].append(rows)
            log(f"rep {rep + 1}: {n}: " + ", ".join(f"{r['L']}={r['recall']:.3f}/{r['qps']:.0f}"
                                                     for r in rows)
                + f" [{time.perf_counter() - t0:.1f}s]")
    med = {n: median_rows(r) for n, r in runs.items()}
    write_json(work / "ablation.json", {"runs": runs, "median": med, "args": vars(args) | {
        "index": str(args.index), "graph": str(args.graph) if args.graph else None}})
    m = machine_info()
    lines = [f"# FusionANNS techniques one at a time: {ds.name}", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; command: `python3 "
             f"bench/ivf_ablation.py {' '.join(sys.argv[1:])}`; machine: {m.get('cpu_model', '?')}, "
             f"{m.get('affinity_cpus', m.get('logical_cpus', '?'))} CPUs; {args.queries} queries, k = 10, {args.threads} threads, "
             f"O_DIRECT, CPU accelerator; IVF flags `{args.ivf_flags}`; medians of "
             f"{args.repeat} repetitions, configurations in alternating order.", ""]
    for tgt in (0.90, 0.95):
        lines += [f"## At recall@10 = {tgt:.2f}", "",
                  "| configuration | QPS | pages/query | I/Os/query | vectors re-ranked | "
                  "reads saved by merging | reads saved by the buffer | of them page mates | "
                  "unique candidates | CPU µs | I/O wait µs |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for n, rows in med.items():
            v = {k: interpolate(rows, k, tgt) for k in KEYS}

            def f(k: str, d: int = 1) -> str:
                x = v[k]
                if x["value"] is None:
                    return "not reached"
                return f"{x['value']:.{d}f}" + ("*" if x.get("bound") == "at-first-L" else "")
            lines.append(f"| {n} | {f('qps', 0)} | {f('pages_per_query')} | "
                         f"{f('ios_per_query')} | {f('exact_distances_per_query')} | "
                         f"{f('pages_merged_per_query')} | {f('pages_buffered_per_query')} | "
                         f"{f('page_mates_per_query')} | "
                         f"{f('candidates_unique_per_query', 0)} | {f('compute_us_per_query', 0)}"
                         f" | {f('io_wait_us_per_query', 0)} |")
        lines.append("")
    lines += ["## Sweeps (medians)", ""]
    for n, rows in med.items():
        lines += [f"### {n}", "", "| -L | recall@10 | QPS | pages/q | re-ranked/q |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['L']} | {r['recall']:.4f} | {r['qps']:.0f} | "
                  f"{r['pages_per_query']:.1f} | {r['exact_distances_per_query']:.1f} |"
                  for r in rows]
        lines.append("")
    out = BENCH / "results" / f"ivf-ablation-{ds.name}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    main()

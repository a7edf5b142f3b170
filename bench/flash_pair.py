#!/usr/bin/env python3
"""Focused paired ratios of FlashANNS's pipeline: staleness 1 vs 0 and query vs kernel grain.

`flash.py` sweeps many sides once per repetition; on this machine's disk, whose speed drifts by
tens of percent within minutes, a ratio of medians taken minutes apart is noisy. Here a few
sides run short sweeps (-L values bracketing the target recalls) back to back, alternating
order, after one discarded warm-up sweep; each repetition gives its own QPS at the target
recall (linear interpolation) for every side, hence its own ratios; the report gives the median
ratio and its spread over repetitions.

Usage:
  python3 bench/flash_pair.py gen-1m --index .bench-cache/gen-1m/trawl-peers-l2-R64-L100-pq48 \\
      --L 12,14,16,20 --repeat 7
Writes bench/results/flash-pair-<dataset>.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import log, machine_info, trawl_bin, write_json  # noqa: E402
import datasets  # noqa: E402
from flash import bench, sides  # noqa: E402
from vs_diskann_disk import interpolate  # noqa: E402

BENCH = Path(__file__).resolve().parent
PAIRS = (("flash-k1", "flash-k0", "QPS staleness 1 / staleness 0 (≥ 1.3)"),
         ("flash-k1", "flash-k1-kernel", "QPS query grain / kernel grain (≥ 1.2)"),
         ("flash-k1", "flash-k0-2B", "QPS staleness 1 / staleness 0 at twice the batch"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--L", required=True, help="list sizes bracketing the target recalls")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sides", default="flash-k1,flash-k0,flash-k1-kernel,flash-k0-2B")
    ap.add_argument("--entry-list", type=int, default=0,
                    help="seed every flash side from the entry index")
    args = ap.parse_args()
    ds = datasets.prepare(args.dataset, "auto", args.threads)
    exe = str(trawl_bin())
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = BENCH / "out" / "raw" / f"flash-pair-{ds.name}" / run_id
    work.mkdir(parents=True, exist_ok=True)
    all_sides = {k: v for k, v in sides(args.batch, "cpu", [], args.entry_list).items()
                 if k in args.sides.split(",")}
    first = next(iter(all_sides))
    bench(exe, args.index, ds.query, ds.gt, args.L, all_sides[first], work / "warmup.json",
          args.threads, args.queries)
    runs: dict[str, list] = {n: [] for n in all_sides}
    for rep in range(args.repeat):
        order = list(all_sides) if rep % 2 == 0 else list(reversed(all_sides))
        for n in order:
            rows = bench(exe, args.index, ds.query, ds.gt, args.L, all_sides[n],
                         work / f"{n}-rep{rep}.json", args.threads, args.queries)
            runs[n].append(rows)
        log(f"rep {rep + 1}: " + "; ".join(
            f"{n} " + ",".join(f"{r['recall']:.3f}/{r['qps']:.0f}" for r in runs[n][-1])
            for n in all_sides))
    write_json(work / "pair.json", {"runs": runs, "args": vars(args) | {"index": str(args.index)}})
    m = machine_info()
    lines = [f"# FlashANNS pipeline, focused paired ratios: {ds.name}", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; command: `python3 "
             f"bench/flash_pair.py {' '.join(sys.argv[1:])}`; machine: {m.get('cpu_model', '?')}, "
             f"{m.get('affinity_cpus', m.get('logical_cpus', '?'))} CPUs; index "
             f"`{args.index.name}`; {args.queries} queries, k = 10, {args.threads} threads, "
             f"O_DIRECT, CPU accelerator, flash batch {args.batch} per thread, entry list "
             f"{args.entry_list}; one discarded "
             f"warm-up sweep, then {args.repeat} repetitions, sides in alternating order; "
             "ratios taken within each repetition.", ""]
    for tgt in (0.90, 0.95):
        lines += [f"## At recall@10 = {tgt:.2f}", "", "| ratio | median | min | max | per "
                  "repetition |", "|---|---|---|---|---|"]
        qps = {n: [interpolate(r, "qps", tgt)["value"] for r in runs[n]] for n in all_sides}
        for a, b, what in PAIRS:
            if a not in qps or b not in qps:
                continue
            rs = [x / y for x, y in zip(qps[a], qps[b]) if x and y]
            if not rs:
                lines.append(f"| {what} | not reached | | | |")
                continue
            lines.append(f"| {what} | **{statistics.median(rs):.2f}×** | {min(rs):.2f}× | "
                         f"{max(rs):.2f}× | {', '.join(f'{x:.2f}' for x in rs)} |")
        steps = {n: interpolate(runs[n][0], "steps_per_query", tgt)["value"] for n in all_sides}
        if steps.get("flash-k1") and steps.get("flash-k0"):
            lines.append(f"| steps staleness 1 / staleness 0 (≤ 1.10; deterministic) | "
                         f"**{steps['flash-k1'] / steps['flash-k0']:.3f}×** "
                         f"({steps['flash-k1']:.1f} / {steps['flash-k0']:.1f}) | | | |")
        lines += ["", "| side | median QPS | per repetition |", "|---|---|---|"]
        for n, v in qps.items():
            ok = [x for x in v if x]
            lines.append(f"| {n} | {statistics.median(ok):.0f} | "
                         f"{', '.join(f'{x:.0f}' for x in ok)} |" if ok else f"| {n} | - | |")
        lines.append("")
    suffix = f"-e{args.entry_list}" if args.entry_list else ""
    out = BENCH / "results" / f"flash-pair-{ds.name}{suffix}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    main()

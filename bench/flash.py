#!/usr/bin/env python3
"""FlashANNS's batch search against itself and trawl's other strategies, paired in one run.

Sides (each a `trawl bench` sweep of -L on one graph index, O_DIRECT, CPU accelerator unless
--accel), run in alternating order for --repeat repetitions, medians per sweep point:

  flash-k1          --strategy flash --staleness 1 (the default: a read chosen one step ahead)
  flash-k0          --staleness 0: strict best-first, each query's read waits for its step
  flash-k1-kernel   --staleness 1 --grain kernel: a batch-wide barrier per step (CAM-like)
  flash-k0-2B       --staleness 0 with twice the batch: as many reads in flight as flash-k1
  flash-k1-sN       (with --strict-steps N,...) staleness 1 after N strict steps per query
  beam-W4           beam search -W 4 in throughput mode (--interleave 4, as bench/peers.py)
  beam-W4-i16       beam search -W 4 with 16 queries per thread: up to 64 reads in flight per
                    thread, as flash-k1's 32 queries × 2
  pipe              PipeSearch in throughput mode (--interleave 4)

Figures at recall@10 = 0.90 and 0.95 (linear interpolation between the bracketing sweep
points): QPS, steps, stale steps, reads and waits per query, mean read latency, and the ratios
the FlashANNS issue asks for (k1 / k0 QPS and steps, query / kernel grain QPS, flash vs beam and
PipeSearch).

Usage:
  python3 bench/flash.py gen-1m --index .bench-cache/gen-1m/trawl-peers-l2-R64-L100-pq48 \\
      [--L 10,12,14,16,20,30] [--batch 32] [--repeat 3]
Writes bench/results/flash-<dataset>.md (raw JSON under bench/out/).
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
KEYS = ("qps", "pages_per_query", "ios_per_query", "steps_per_query", "stale_steps_per_query",
        "waits_per_query", "read_us", "compute_us_per_query", "io_wait_us_per_query")


def sides(batch: int, accel: str, strict: list[int], entry_list: int = 0) -> dict[str, list[str]]:
    f = ["--strategy", "flash", "--accel", accel, "--entry-list", str(entry_list)]
    extra = {f"flash-k1-s{n}": f + ["--staleness", "1", "--strict-steps", str(n),
                                    "--flash-batch", str(batch)] for n in strict}
    return extra | {
        "flash-k1": f + ["--staleness", "1", "--flash-batch", str(batch)],
        "flash-k0": f + ["--staleness", "0", "--flash-batch", str(batch)],
        "flash-k1-kernel": f + ["--staleness", "1", "--grain", "kernel",
                                "--flash-batch", str(batch)],
        "flash-k0-2B": f + ["--staleness", "0", "--flash-batch", str(2 * batch)],
        "beam-W4": ["--strategy", "beam", "-W", "4", "--interleave", "4"],
        "beam-W4-i16": ["--strategy", "beam", "-W", "4", "--interleave", "16"],
        "pipe": ["--strategy", "pipe", "--interleave", "4", "--entry-list", str(entry_list)],
    }


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


def ratio(a: dict, b: dict) -> str:
    if a["value"] is None or b["value"] is None or not b["value"]:
        return "-"
    return f"{a['value'] / b['value']:.2f}×"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", help="a bench/datasets.py name, or a directory with base.fbin, "
                    "query.fbin and gt.bin")
    ap.add_argument("--index", type=Path, required=True, help="graph index")
    ap.add_argument("--L", default="10,12,14,16,20,30,40")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--accel", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sides", help="comma-separated subset of the sides")
    ap.add_argument("--entry-list", type=int, default=0,
                    help="seed the flash and PipeSearch sides from the entry index")
    ap.add_argument("--strict-steps", default="",
                    help="also run staleness 1 after N strict steps (sides flash-k1-sN), "
                         "comma-separated N")
    args = ap.parse_args()
    d = Path(args.dataset)
    if d.is_dir():
        name, q, gt = d.name, str(d / "query.fbin"), str(d / "gt.bin")
    else:
        ds = datasets.prepare(args.dataset, "auto", args.threads)
        name, q, gt = ds.name, ds.query, ds.gt
    exe = str(trawl_bin())
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = BENCH / "out" / "raw" / f"flash-{name}" / run_id
    work.mkdir(parents=True, exist_ok=True)
    strict = [int(x) for x in args.strict_steps.split(",") if x]
    all_sides = sides(args.batch, args.accel, strict, args.entry_list)
    if args.sides:
        all_sides = {k: all_sides[k] for k in args.sides.split(",")}
    runs: dict[str, list] = {n: [] for n in all_sides}
    for rep in range(args.repeat):
        order = list(all_sides) if rep % 2 == 0 else list(reversed(all_sides))
        for n in order:
            t0 = time.perf_counter()
            rows = bench(exe, args.index, q, gt, args.L, all_sides[n],
                         work / f"{n}-rep{rep}.json", args.threads, args.queries)
            runs[n].append(rows)
            log(f"rep {rep + 1}: {n}: " + ", ".join(f"{r['L']}={r['recall']:.3f}/{r['qps']:.0f}"
                                                     for r in rows)
                + f" [{time.perf_counter() - t0:.1f}s]")
    med = {n: median_rows(r) for n, r in runs.items()}
    write_json(work / "flash.json", {"runs": runs, "median": med,
                                     "args": vars(args) | {"index": str(args.index)}})
    m = machine_info()
    lines = [f"# FlashANNS batch search: {name}", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; command: `python3 "
             f"bench/flash.py {' '.join(sys.argv[1:])}`; machine: {m.get('cpu_model', '?')}, "
             f"{m.get('affinity_cpus', m.get('logical_cpus', '?'))} CPUs; index "
             f"`{args.index.name}`; {args.queries} queries, k = 10, {args.threads} threads, "
             f"O_DIRECT, accelerator {args.accel}, flash batch {args.batch} per thread; medians "
             f"of {args.repeat} repetitions, sides in alternating order.", ""]
    for tgt in (0.90, 0.95):
        at = {n: {k: interpolate(rows, k, tgt) for k in KEYS} for n, rows in med.items()}
        lines += [f"## At recall@10 = {tgt:.2f}", "",
                  "| side | QPS | steps/query | stale steps/query | reads/query | waits/query | "
                  "read µs | CPU µs | I/O wait µs |", "|---|---|---|---|---|---|---|---|---|"]
        for n, v in at.items():
            def f(k: str, dd: int = 1) -> str:
                x = v[k]
                if x["value"] is None:
                    return "not reached"
                return f"{x['value']:.{dd}f}" + ("*" if x.get("bound") == "at-first-L" else "")
            lines.append(f"| {n} | {f('qps', 0)} | {f('steps_per_query')} | "
                         f"{f('stale_steps_per_query')} | {f('ios_per_query')} | "
                         f"{f('waits_per_query')} | {f('read_us', 0)} | "
                         f"{f('compute_us_per_query', 0)} | {f('io_wait_us_per_query', 0)} |")
        lines.append("")
        if "flash-k1" in at:
            k1 = at["flash-k1"]
            rows = []
            for other, what in (("flash-k0", "QPS staleness 1 / staleness 0 (≥ 1.3)"),
                                ("flash-k1-kernel", "QPS query grain / kernel grain (≥ 1.2)"),
                                ("flash-k0-2B", "QPS staleness 1 / staleness 0 at equal reads "
                                 "in flight"),
                                ("beam-W4", "QPS flash / beam W=4"),
                                ("beam-W4-i16", "QPS flash / beam W=4 at 16 queries per thread"),
                                ("pipe", "QPS flash / PipeSearch")):
                if other in at:
                    rows.append(f"| {what} | {ratio(k1['qps'], at[other]['qps'])} |")
            if "flash-k0" in at:
                rows.append("| steps staleness 1 / staleness 0 (≤ 1.10) | "
                            f"{ratio(k1['steps_per_query'], at['flash-k0']['steps_per_query'])} |")
                for n in strict:
                    sn = at.get(f"flash-k1-s{n}")
                    if sn:
                        rows.append(f"| QPS staleness 1 after {n} strict steps / staleness 0 | "
                                    f"{ratio(sn['qps'], at['flash-k0']['qps'])} |")
                        rows.append(f"| steps staleness 1 after {n} strict steps / staleness 0 "
                                    f"| {ratio(sn['steps_per_query'], at['flash-k0']['steps_per_query'])} |")
            lines += ["| ratio | value |", "|---|---|", *rows, ""]
    lines += ["## Sweeps (medians)", ""]
    for n, rows in med.items():
        lines += [f"### {n} (`{' '.join(all_sides[n])}`)", "",
                  "| -L | recall@10 | QPS | steps/q | stale/q | reads/q | read µs |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['L']} | {r['recall']:.4f} | {r['qps']:.0f} | {r['steps_per_query']:.1f} "
                  f"| {r['stale_steps_per_query']:.1f} | {r['ios_per_query']:.1f} | "
                  f"{r['read_us']:.0f} |" for r in rows]
        lines.append("")
    suffix = f"-e{args.entry_list}" if args.entry_list else ""
    out = BENCH / "results" / f"flash-{name}{suffix}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    main()

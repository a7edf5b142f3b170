#!/usr/bin/env python3
"""FlashANNS's degree selector against a measured sweep of real graphs, on one dataset.

1. `trawl select-degree BASE` (random-link sample indexes of each candidate degree, per-step
   compute T_c and read time T_io measured with the flash pipeline): the recommended degree.
2. For each degree, a real index (`trawl build -R DEG --saturate`, so every list holds DEG
   links, as FlashANNS's graphs do; built beforehand, named --index-pattern) searched with
   `--strategy flash --staleness 1` over a sweep of -L, indexes in alternating order for
   --repeat repetitions; QPS at recall@10 = 0.90 / 0.95 (interpolated), the measured best
   degree.

Usage:
  python3 bench/flash_degree.py .bench-cache/gen-200k --degrees 32,64,128,250 \\
      [--index-pattern 'ix-sR{R}'] [--L 10,12,16,20,30,40,60] [--repeat 3]
DIR holds base.fbin, query.fbin, gt.bin and the indexes. Writes
bench/results/flash-degree-<DIR name>.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import log, machine_info, trawl_bin, write_json  # noqa: E402
from flash import bench, median_rows  # noqa: E402
from vs_diskann_disk import interpolate  # noqa: E402

BENCH = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--degrees", default="32,64,128,250")
    ap.add_argument("--index-pattern", default="ix-sR{R}")
    ap.add_argument("--metric", default="l2")
    ap.add_argument("--L", default="10,12,16,20,30,40,60")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", type=int, default=100_000)
    args = ap.parse_args()
    exe = str(trawl_bin())
    d = args.dir
    degrees = [int(x) for x in args.degrees.split(",")]
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = BENCH / "out" / "raw" / f"flash-degree-{d.name}" / run_id
    work.mkdir(parents=True, exist_ok=True)
    sel_json = work / "select-degree.json"
    t0 = time.perf_counter()
    subprocess.run([exe, "select-degree", str(d / "base.fbin"), "--metric", args.metric,
                    "--degrees", args.degrees, "--threads", str(args.threads),
                    "--sample", str(args.sample), "--flash-batch", str(args.batch),
                    "--json", str(sel_json), "--quiet"], check=True)
    sel = json.loads(sel_json.read_text())
    sel_secs = time.perf_counter() - t0
    log(f"select-degree: recommended {sel['recommended']} in {sel_secs:.0f} s")
    flags = ["--strategy", "flash", "--staleness", "1", "--flash-batch", str(args.batch)]
    runs: dict[int, list] = {r: [] for r in degrees}
    for rep in range(args.repeat):
        order = degrees if rep % 2 == 0 else list(reversed(degrees))
        for r in order:
            idx = d / args.index_pattern.format(R=r)
            rows = bench(exe, idx, str(d / "query.fbin"), str(d / "gt.bin"), args.L, flags,
                         work / f"R{r}-rep{rep}.json", args.threads, args.queries)
            runs[r].append(rows)
            log(f"rep {rep + 1}: R {r}: " + ", ".join(
                f"{x['L']}={x['recall']:.3f}/{x['qps']:.0f}" for x in rows))
    med = {r: median_rows(v) for r, v in runs.items()}
    write_json(work / "degree.json", {"select": sel, "runs": runs, "median": med,
                                      "args": vars(args) | {"dir": str(d)}})
    m = machine_info()
    lines = [f"# FlashANNS degree selector vs a measured degree sweep: {d.name}", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; command: `python3 "
             f"bench/flash_degree.py {' '.join(sys.argv[1:])}`; machine: "
             f"{m.get('cpu_model', '?')}, {m.get('affinity_cpus', m.get('logical_cpus', '?'))} "
             f"CPUs; {args.threads} threads, O_DIRECT, CPU accelerator, flash batch "
             f"{args.batch} per thread, staleness 1.", "",
             "## The selector (`trawl select-degree`, random-link sample indexes)", "",
             f"{sel['sample']} sampled vectors, {sel['queries']} queries, L {sel['L']}; "
             f"{sel_secs:.0f} s in all. Fit: T_c(R) = {sel['fit']['a_us']:.1f} + "
             f"{sel['fit']['b_us_per_link']:.3f}·R µs, T_io = {sel['fit']['t_io_us']:.1f} µs → "
             f"**recommended R = {sel['recommended']}**.", "",
             "| degree | records/page | T_c µs | T_io µs | T_io / T_c |", "|---|---|---|---|---|"]
    lines += [f"| {p['degree']} | {p['records_per_page']:.2f} | {p['t_compute_us']:.1f} | "
              f"{p['t_io_us']:.1f} | {p['io_over_compute']:.2f} |" for p in sel["profiles"]]
    lines += ["", "## The measured sweep (real graphs, every list full)", ""]
    for tgt in (0.90, 0.95):
        lines += [f"### At recall@10 = {tgt:.2f}", "",
                  "| degree | QPS | steps/query | reads/query | CPU µs |", "|---|---|---|---|---|"]
        best = None
        for r, rows in med.items():
            q = interpolate(rows, "qps", tgt)
            s = interpolate(rows, "steps_per_query", tgt)
            c = interpolate(rows, "compute_us_per_query", tgt)
            io = interpolate(rows, "ios_per_query", tgt)

            def f(x, dd=1):
                return "not reached" if x["value"] is None else f"{x['value']:.{dd}f}"
            lines.append(f"| {r} | {f(q, 0)} | {f(s)} | {f(io)} | {f(c, 0)} |")
            if q["value"] is not None and (best is None or q["value"] > best[1]):
                best = (r, q["value"])
        lines += ["", f"Measured best degree at {tgt:.2f}: **{best[0] if best else '-'}**; "
                  f"the selector recommended {sel['recommended']}.", ""]
    lines += ["## Sweeps (medians)", ""]
    for r, rows in med.items():
        lines += [f"### R = {r}", "", "| -L | recall@10 | QPS | steps/q |", "|---|---|---|---|"]
        lines += [f"| {x['L']} | {x['recall']:.4f} | {x['qps']:.0f} | "
                  f"{x['steps_per_query']:.1f} |" for x in rows]
        lines.append("")
    out = BENCH / "results" / f"flash-degree-{d.name}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    main()

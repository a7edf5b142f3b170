#!/usr/bin/env python3
"""Cold start: open → first result, the first queries' latency over time after open, and the
steady state, with the page cache dropped before every open (root: /proc/sys/vm/drop_caches).

Runs `crates/trawl/examples/cold_start.rs` (built with `cargo build --release -p trawl
--example cold_start`) for each configuration, alternating, `--reps` times; optionally a second
binary of the same example built at an older commit (`--before BIN`: today's open, which chose
the cache by sample searches). Writes bench/results/cold-start-<tag>.md/.json and a plot of the
first queries' latency against time since open (bench/.venv-plot).

Usage:
  python3 bench/cold_start.py --index DIR --queries Q --gt GT --tag gen-1m \\
      --configs "cache=41105:wait,cache=41105:background,budget=256M:wait" [--before BIN]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO_ROOT, cargo_target_dir, import_pyplot, log, machine_info  # noqa: E402


def run(binary: Path, args, spec: str) -> dict:
    what, warm = spec.split(":")
    key, val = what.split("=")
    flags = ["--cache-nodes", val] if key == "cache" else ["--memory-budget", val]
    if warm == "background":
        flags += ["--warm", "background"]
    cmd = [str(binary), str(args.index), str(args.queries), str(args.gt), *flags, "-L",
           str(args.l), "--first", str(args.first), "--threads", "2", "--reps", "3",
           "--drop-caches"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--gt", type=Path, required=True)
    ap.add_argument("--tag", default="gen-1m")
    ap.add_argument("--configs", default="cache=41105:wait,cache=41105:background")
    ap.add_argument("--before", type=Path, help="the example built at an older commit")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-L", dest="l", type=int, default=40)
    ap.add_argument("--first", type=int, default=1000)
    args = ap.parse_args()
    after = cargo_target_dir() / "release" / "examples" / "cold_start"
    sides = [(f"{c}", after, c) for c in args.configs.split(",")]
    if args.before:
        sides += [(f"before {c}", args.before, c) for c in args.configs.split(",")
                  if c.startswith("cache=") and c.endswith(":wait")]
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in sides}
    for rep in range(args.reps):
        order = sides if rep % 2 == 0 else sides[::-1]
        for name, binary, spec in order:
            r = run(binary, args, spec)
            log(f"{name} rep {rep}: first result {r['first_result_secs']:.3f} s, cold p99 "
                f"{r['cold_p99_ms']:.2f} ms, steady p99 {r['steady_p99_ms']:.2f} ms, QPS "
                f"{r['qps_median']:.0f}")
            runs[name].append(r)
    med = lambda name, k: statistics.median(r[k] for r in runs[name])  # noqa: E731
    m = machine_info()
    lines = [f"# Cold start ({args.tag})", "",
             f"Machine: {m.get('cpu_model')}, {m.get('logical_cpus')} logical CPUs; O_DIRECT; page cache dropped "
             f"before each open; L {args.l}; medians of {args.reps} alternating runs. Command: "
             f"`python3 bench/cold_start.py --index {args.index} --queries {args.queries} --gt "
             f"{args.gt} --tag {args.tag} --configs {args.configs}"
             f"{' --before ' + str(args.before) if args.before else ''}`.", "",
             "| configuration | open | first result | first 1,000 p50 / p99 | steady p50 / p99 "
             "| p99 ratio | QPS (2 threads) | recall@10 | peak RSS |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in runs:
        ratio = statistics.median(r["cold_p99_ms"] / r["steady_p99_ms"] for r in runs[name])
        lines.append(
            f"| {name} | {med(name, 'open_secs'):.3f} s | {med(name, 'first_result_secs'):.3f} s "
            f"| {med(name, 'cold_p50_ms'):.2f} / {med(name, 'cold_p99_ms'):.2f} ms "
            f"| {med(name, 'steady_p50_ms'):.2f} / {med(name, 'steady_p99_ms'):.2f} ms "
            f"| {ratio:.2f} | {med(name, 'qps_median'):.0f} | {runs[name][0]['recall']:.3f} "
            f"| {med(name, 'peak_rss_bytes') / 2**20:.0f} MiB |")
    res = REPO_ROOT / "bench" / "results"
    (res / f"cold-start-{args.tag}.md").write_text("\n".join(lines) + "\n")
    slim = {n: [{k: v for k, v in r.items() if k not in ("cold_ms", "cold_at_secs")}
                for r in rs] for n, rs in runs.items()}
    (res / f"cold-start-{args.tag}.json").write_text(json.dumps({"machine": m, "runs": slim},
                                                                indent=1))
    plt = import_pyplot("cold_start")
    if plt is not None:
        fig, ax = plt.subplots(figsize=(8, 4))
        for name in runs:
            # The run whose first result is the median one (a slow phase of the disk in one
            # run would otherwise stand for the configuration).
            by_first = sorted(runs[name], key=lambda r: r["first_result_secs"])
            r = by_first[len(by_first) // 2]
            if "cold_ms" in r:
                ax.plot(r["cold_at_secs"], r["cold_ms"], ".", ms=2, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("seconds since open (first result at the first point)")
        ax.set_ylabel("query latency (ms)")
        ax.legend(markerscale=5)
        fig.tight_layout()
        fig.savefig(res / f"cold-start-{args.tag}.png", dpi=120)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Paired runs of `trawl bench` over IVF indexes that differ in their codes (PQ or RaBitQ) or in
a search switch (`--fastscan`): for every list count L (lists probed) and repetition, the
configurations run one after another, so the machine's drift hits them alike. Prints a markdown
table of median QPS and recall@10 per configuration and L.

    python3 bench/ivf_rabitq.py --queries Q.fbin --gt GT.bin -L 16,32,64 --reps 3 \\
        --config pq16=/tmp/ivfb/pq16 --config "rbq1=/tmp/ivfb/rbq1" \\
        --config "rbq1-fs=/tmp/ivfb/rbq1 --fastscan"
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trawl", default="target/release/trawl")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--gt", required=True)
    ap.add_argument("-L", default="16,32,64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", action="append", required=True,
                    help="NAME=DIR [extra trawl bench arguments]")
    a = ap.parse_args()
    configs = []
    for c in a.config:
        name, rest = c.split("=", 1)
        parts = shlex.split(rest)
        configs.append((name, parts[0], parts[1:]))
    ls = [int(x) for x in a.L.split(",")]
    qps = {}
    recall = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        for rep in range(a.reps):
            for l in ls:
                for name, d, extra in configs:
                    cmd = [a.trawl, "bench", d, "--queries", a.queries, "--gt", a.gt, "-k", "10",
                           "-L", str(l), "--threads", str(a.threads), "--interleave", "4",
                           "--json", out] + extra
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                    row = json.load(open(out))["rows"][0]
                    qps.setdefault((name, l), []).append(row["qps"])
                    recall[(name, l)] = row["recall"]
    names = [c[0] for c in configs]
    print("| L | " + " | ".join(f"{n} recall | {n} QPS" for n in names) + " |")
    print("|---:|" + "---:|---:|" * len(names))
    for l in ls:
        cells = []
        for n in names:
            cells.append(f"{recall[(n, l)]:.4f}")
            cells.append(f"{statistics.median(qps[(n, l)]):,.0f}")
        print(f"| {l} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

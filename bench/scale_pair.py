#!/usr/bin/env python3
"""Paired search comparison of two indexes over the same data (e.g. the whole and the sharded
10M builds of `bench/scale.py`): the two sides alternate within one run, `--reps` times, so
that a disk whose speed drifts by the hour touches both alike. Reports medians.

    python3 bench/scale_pair.py \
        --index whole=/work/scale/idx10m-b8 --index sharded=/work/scale/idx10m-b8-sharded \
        --queries /work/scale/q10m.fbin --gt /work/scale/gt10m.bin \
        --pipe-L 30,45 --c5-L 30,44 --reps 5 --tag 10m

The binary is $TRAWL_BIN, else `release/trawl` where cargo builds (`cargo metadata`'s
`target_directory`, so `CARGO_TARGET_DIR` is honoured; see `common.trawl_bin`).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import machine_info, trawl_bin, write_json
from scale import C5, PIPE

HERE = Path(__file__).resolve().parent


def bench(trawl, index, args, ls, flags):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        cmd = [trawl, "bench", index, "--queries", args.queries, "--gt", args.gt, "-k", "10",
               "-L", ",".join(map(str, ls)), "--threads", str(args.threads), "--json", out,
               "--quiet"] + flags
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out).read_text())["rows"]
    finally:
        os.unlink(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", action="append", required=True, help="NAME=DIR, two or more")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--gt", required=True)
    ap.add_argument("--pipe-L", default="30,45")
    ap.add_argument("--c5-L", default="30,44")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tag", default="pair")
    a = ap.parse_args()
    trawl = str(trawl_bin())
    machine = machine_info()
    cpu = machine.get("cpu_model", "?")
    sides = [s.split("=", 1) for s in a.index]
    if any(len(s) != 2 for s in sides) or len(sides) < 2:
        sys.exit("--index NAME=DIR, at least two")
    searches = [("pipe", [int(x) for x in a.pipe_L.split(",")], PIPE),
                ("c5", [int(x) for x in a.c5_L.split(",")], C5)]
    runs = {}  # (side, search, L) -> list of rows
    for rep in range(a.reps):
        order = sides if rep % 2 == 0 else sides[::-1]
        for name, index in order:
            for search, ls, flags in searches:
                for row in bench(trawl, index, a, ls, flags):
                    runs.setdefault((name, search, row["L"]), []).append(row)
        print(f"rep {rep + 1}/{a.reps} done", file=sys.stderr)

    def med(rows, f):
        return statistics.median(f(r) for r in rows)

    table = []
    for (name, search, L), rows in runs.items():
        table.append({
            "index": name, "search": search, "L": L, "reps": len(rows),
            "recall": med(rows, lambda r: r["recall"]),
            "pages": med(rows, lambda r: r["pages_per_query"]),
            "hops": med(rows, lambda r: r["hops_per_query"]),
            "cpu_us": med(rows, lambda r: r["cpu_user_us_per_query"] + r["cpu_sys_us_per_query"]),
            "p50_us": med(rows, lambda r: r["latency_us"]["p50"]),
            "p99_us": med(rows, lambda r: r["latency_us"]["p99"]),
            "qps": med(rows, lambda r: r["qps"]),
        })
    table.sort(key=lambda r: (r["search"], r["L"], r["index"]))
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    write_json(res / f"scale-pair-{a.tag}.json",
               {"machine": machine, "threads": a.threads, "reps": a.reps,
                "indexes": dict(sides), "rows": table})
    base = sides[0][0]
    lines = [f"# Paired search (`bench/scale_pair.py`), {a.reps} alternating repetitions, medians",
             "", f"CPU: {cpu}; {a.threads} threads; O_DIRECT reads; indexes: "
             + ", ".join(f"{n} = `{d}`" for n, d in sides) + ".", "",
             f"| search | L | index | recall | pages | hops | CPU µs/query | p50 µs | p99 µs | QPS | QPS / {base} |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["index"], r["search"], r["L"]): r for r in table}
    for r in table:
        ref = by[(base, r["search"], r["L"])]["qps"]
        lines.append(f"| {r['search']} | {r['L']} | {r['index']} | {r['recall']:.4f} | "
                     f"{r['pages']:.1f} | {r['hops']:.1f} | {r['cpu_us']:.0f} | {r['p50_us']:.0f} | "
                     f"{r['p99_us']:.0f} | {r['qps']:.0f} | {r['qps'] / ref:.2f} |")
    (res / f"scale-pair-{a.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

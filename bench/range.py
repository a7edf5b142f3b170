#!/usr/bin/env python3
"""Range search vs the growing-k baseline, side by side on the same index, data, threads.

For each dataset and radius: the exact range ground truth (`trawl gt --radius`, first
--queries queries), then `trawl bench --radius R --range-baseline` runs, in which trawl's range
search and the growing-k baseline (top-k with k doubled until the k-th distance is beyond the
radius) alternate at every list size, on the same queries, O_DIRECT. Each side gets a sweep of
its own knobs — trawl: list size L and the code-space slack; the baseline: its starting k and
list size (both doubled each round, so L/k stays) — and the table keeps, per repeat, each side's best QPS among the configurations
whose mean per-query recall is at least --target; the ratio is the median over repeats of
trawl's best / the baseline's best (each repeat pairs both sides in one run).

Usage:
  python bench/range.py [--datasets glove-400k:0.2,0.3 minilm-200k@idx-rbq4:0.45 gen-1m:40]
      [--queries 1000] [--threads 2] [--interleave 16] [--repeats 3] [--layout shuffle]
A dataset is `name[@index]:radii`; the index is a directory in the dataset's cache folder
(default: the PQ index of INDEX; `idx-rbq4` = `trawl build --quant rabitq --bits 4`, then
`trawl layout --shuffle`). Writes bench/results/range.md and range.json (--out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cache_dir, log, machine_info, trawl_bin, write_json  # noqa: E402

INDEX = {
    "glove-400k": ("idx-R64-L100-pq25", "cosine"),
    "minilm-200k": ("idx-R64-L100-pq48", "cosine"),
    "gen-1m": ("idx-R64-L100-pq32", "l2"),
}
# trawl: (L, slack); the baseline: (starting k, L).
RANGE_CONFIGS = [(5, 0.05), (10, 0.05), (10, 0.1), (20, 0.15)]
BASELINE_CONFIGS = [(5, 5), (10, 10), (10, 20), (10, 40), (20, 40)]


def sh(cmd: list[str]) -> str:
    log(" ".join(map(str, cmd)))
    return subprocess.run(list(map(str, cmd)), check=True, capture_output=True, text=True).stdout


def queries_file(d: Path, n: int) -> Path:
    """The first n queries of the dataset, as their own file."""
    out = d / f"q{n}.fbin"
    if not out.exists():
        b = (d / "query.fbin").read_bytes()
        nq, dim = (int.from_bytes(b[i:i + 4], "little") for i in (0, 4))
        n = min(n, nq)
        out.write_bytes(n.to_bytes(4, "little") + dim.to_bytes(4, "little") + b[8:8 + 4 * n * dim])
    return out


def range_gt(t: Path, d: Path, q: Path, metric: str, r: str, threads: int) -> tuple[Path, str]:
    out = d / f"range-{q.stem}-{r}.bin"
    line = ""
    if not out.exists():
        line = sh([t, "gt", d / "base.fbin", q, "--radius", r, "--metric", metric, "-o", out,
                   "--threads", threads, "--quiet"])
    return out, line.strip()


def bench(t: Path, idx: Path, q: Path, gt: Path, r: str, args, k: int, ls: list[int],
          extra: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        sh([t, "bench", idx, "--queries", q, "--gt", gt, "--radius", r, "--range-baseline",
            "-k", k, "-L", ",".join(map(str, ls)), "--threads", args.threads,
            "--interleave", args.interleave, "--layout", args.layout, *args.search_flags.split(),
            *extra, "--json", f.name, "--quiet"])
        return json.loads(Path(f.name).read_text())


def best(rows: list[dict], target: float) -> dict | None:
    ok = [r for r in rows if r["recall"] >= target]
    return max(ok, key=lambda r: r["qps"]) if ok else None


def one_repeat(t, idx, q, gt, r, args) -> tuple[list[dict], list[dict], dict]:
    """Every configuration of both methods once, alternating: trawl's i-th, then the
    baseline's i-th (each run of `trawl bench --range-baseline` times both; the other
    method's row of a run is dropped)."""
    ours, theirs, info = [], [], {}
    for i in range(max(len(RANGE_CONFIGS), len(BASELINE_CONFIGS))):
        if i < len(RANGE_CONFIGS):
            l, slack = RANGE_CONFIGS[i]
            v = bench(t, idx, q, gt, r, args, min(10, l), [l], ["--range-slack", slack])
            info = v
            for row in v["rows"]:
                if row["method"] == "range":
                    row["config"] = {"L": l, "slack": slack}
                    ours.append(row)
        if i < len(BASELINE_CONFIGS):
            k0, bl = BASELINE_CONFIGS[i]
            v = bench(t, idx, q, gt, r, args, k0, [bl], [])
            for row in v["rows"]:
                if row["method"] == "growing-k":
                    row["config"] = {"k": k0, "L": bl}
                    theirs.append(row)
    return ours, theirs, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+",
                    default=["glove-400k:0.2,0.3", "minilm-200k:0.35,0.45", "gen-1m:40"])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--interleave", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--layout", default="shuffle")
    ap.add_argument("--search-flags", default="--page-search --entry-list 10",
                    help="flags of `trawl bench` both methods search with (one string)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "range"))
    args = ap.parse_args()
    t = trawl_bin()
    out = {"machine": machine_info(), "args": vars(args), "results": []}
    lines = ["# Range search vs the growing-k baseline", "",
             f"Machine: {out['machine'].get('cpu_model')}, {out['machine'].get('logical_cpus')} "
             f"CPUs; {args.threads} search threads, {args.interleave} queries in flight per "
             f"thread for both methods, layout {args.layout} {args.search_flags}, "
             f"O_DIRECT; {args.queries} queries; best QPS of each method among its "
             f"configurations at mean per-query recall ≥ {args.target}; median of "
             f"{args.repeats} repeats (each repeat runs both methods paired).", "",
             f"Command: `python bench/range.py {' '.join(sys.argv[1:])}`", "",
             "| data | radius | true results / query (median, p90, p99, max; zero) | trawl "
             "config | recall | QPS | pages/q | growing-k config | recall | QPS | pages/q | "
             "ratio (median) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for spec in args.datasets:
        name, radii = spec.split(":")
        name, _, idx_name = name.partition("@")
        d = cache_dir() / name
        default_idx, metric = INDEX[name]
        idx_name = idx_name or default_idx
        idx = d / idx_name
        q = queries_file(d, args.queries)
        for r in radii.split(","):
            gt, gt_line = range_gt(t, d, q, metric, r, args.threads)
            ratios, reps = [], []
            spread = None
            for rep in range(args.repeats):
                ours, theirs, info = one_repeat(t, idx, q, gt, r, args)
                spread = info.get("true_results", spread)
                a, b = best(ours, args.target), best(theirs, args.target)
                reps.append({"range": ours, "growing_k": theirs, "best": [a, b]})
                if a and b:
                    ratios.append(a["qps"] / b["qps"])
                log(f"{name} r={r} repeat {rep}: trawl {a and round(a['qps'])} "
                    f"baseline {b and round(b['qps'])}")
            out["results"].append({"dataset": name, "index": idx_name, "radius": r, "gt": gt_line,
                                   "true_results": spread, "repeats": reps,
                                   "ratios": ratios})
            a, b = reps[-1]["best"]
            med = statistics.median(ratios) if ratios else float("nan")
            s = spread or {}

            def cell(x):
                if not x:
                    return "— | — | — | —"
                c = ", ".join(f"{k} {v}" for k, v in x["config"].items())
                return (f"{c} | {x['recall']:.3f} | {x['qps']:.0f} | "
                        f"{x['pages_per_query']:.1f}")
            lines.append(
                f"| {name} ({idx_name}) | {r} | {s.get('median', 0):.0f}, {s.get('p90', 0):.0f}, "
                f"{s.get('p99', 0):.0f}, {s.get('max', 0):.0f}; {s.get('zero', 0)} | {cell(a)} | "
                f"{cell(b)} | **{med:.2f}×** ({', '.join(f'{x:.2f}' for x in ratios)}) |")
    lines += ["", "The trawl and growing-k cells are the last repeat's best configurations; the "
              "ratio is the median over repeats of best/best. Precision is 1 in every row "
              "(`trawl bench` fails otherwise)."]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    write_json(Path(args.out + ".json"), out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

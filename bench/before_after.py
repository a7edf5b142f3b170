#!/usr/bin/env python3
"""Two trawl binaries side by side on one index: QPS at equal recall, paired and alternating.

A refactoring that must not cost speed is measured here: both binaries search the same index
with the same flags, one `trawl bench` sweep each, alternating A B / B A within every repetition
(a shared disk's speed drifts over minutes, so only interleaved runs give a ratio). For each
configuration the QPS at the target recalls is interpolated on each sweep's recall–QPS curve;
the report gives the medians per binary and the median of the per-repetition ratios B / A.

    python3 bench/before_after.py gen-1m --bin-a /tmp/trawl-before
    python3 bench/before_after.py glove-400k --repeat 5 --configs beam,pipe
    python3 bench/before_after.py glove-400k --repeat 30 --configs decoupled --lsizes 15
    python3 bench/before_after.py glove-400k --configs decoupled,c5 --extra "--engine sim:80"

With one list size per sweep the QPS at a target is that point's QPS when its recall reaches
the target (both binaries must reach the same recall there; the report lists it).

--bin-b defaults to the release binary where cargo builds (`release/trawl` in `cargo metadata`'s
`target_directory`: `CARGO_TARGET_DIR` is honoured).

The index is built once (by --bin-a, R/L/PQ as the other bench scripts) beside the dataset, with
its PageShuffle and decoupled layouts and a MemGraph entry index for C5.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import datasets  # noqa: E402

# name -> flags (every configuration at 2 threads, k = 10, O_DIRECT, the default engine).
CONFIGS = {
    "beam": ["--strategy", "beam", "-W", "4"],
    "pipe": ["--strategy", "pipe"],
    # OctopusANN's C5: MemGraph + PageShuffle + PageSearch + DynamicWidth.
    "c5": ["--layout", "shuffle", "--page-search", "--dynamic-width", "-W", "32",
           "--entry-list", "10"],
    "decoupled": ["--layout", "decoupled", "-W", "8"],
    # FlashANNS's batch search (CPU accelerator), seeded by the entry index like PipeSearch.
    "flash": ["--strategy", "flash", "--entry-list", "10"],
    # FusionANNS's IVF kind (its own index, built beside the graph one); -L = lists probed.
    "ivf": [],
}
DEFAULT_L = {
    "beam": "10,15,20,30,40,60",
    "pipe": "10,15,20,30,40,60",
    "c5": "10,15,20,30,40,60",
    "decoupled": "10,15,20,30,40,60,80",
    "flash": "10,15,20,30,40,60",
    "ivf": "8,16,32,64,128",
}


def qps_at(points: list[tuple[float, float]], target: float) -> float | None:
    """QPS at `target` recall, linear between the two sweep points around it (None when the
    sweep never reaches it)."""
    pts = sorted(points)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= target <= r1:
            if r1 == r0:
                return max(q0, q1)
            return q0 + (q1 - q0) * (target - r0) / (r1 - r0)
    if pts and pts[0][0] >= target:
        return pts[0][1]
    return None


def paired_sweeps(sweep, repeat: int, targets: list[float], name=lambda side: side):
    """Sweeps of two sides "A" and "B" alternating A B / B A within each of `repeat`
    repetitions (a shared disk's speed drifts); `sweep(side, rep)` returns one sweep's rows
    (`L`, `recall`, `qps`). Returns each side's recall per L (last sweep) and its QPS at each
    target per repetition."""
    qps: dict = {"A": [], "B": []}
    recall: dict = {}
    for rep in range(repeat):
        for side in (["A", "B"] if rep % 2 == 0 else ["B", "A"]):
            rows = sweep(side, rep)
            recall[side] = {r["L"]: r["recall"] for r in rows}
            qps[side].append({t: qps_at([(r["recall"], r["qps"]) for r in rows], t)
                              for t in targets})
            common.log(f"rep {rep} {name(side)}: " + ", ".join(
                f"{t}: {qps[side][-1][t] or float('nan'):.0f}" for t in targets))
    return recall, qps


def qps_lines(qps: dict, targets: list[float]) -> list[str]:
    """Table rows: each side's median QPS at each target and the median of the paired B/A
    ratios."""
    lines = []
    for t in targets:
        med = {s: statistics.median([x[t] for x in qps[s] if x[t] is not None] or [float("nan")])
               for s in "AB"}
        ratios = [b[t] / a[t] for a, b in zip(qps["A"], qps["B"]) if a[t] and b[t]]
        lines.append(f"| QPS at recall {t} (median) | {med['A']:.0f} | {med['B']:.0f} "
                     f"(B/A median {statistics.median(ratios) if ratios else float('nan'):.3f}) |")
    return lines


def run_one(binary: str, idx: Path, ds, flags: list[str], lsizes: str, out: Path,
            threads: int) -> list[tuple[float, float]]:
    cmd = [binary, "bench", str(idx), "--queries", ds.query, "--gt", ds.gt, "-k", "10",
           "-L", lsizes, "--threads", str(threads), "--json", str(out), "--quiet", *flags]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads(out.read_text())
    rows = rows["rows"]
    return [(r["recall"], r["qps"], r["pages_per_query"]) for r in rows]


def ensure_ivf_index(ds, args) -> Path:
    """The IVF index of the dataset (built once by --bin-a, the graph's PQ bytes)."""
    idx = Path(ds.base).parent / f"ba-ivf-{ds.metric}-pq{args.pq_bytes}"
    if args.rebuild or not (idx / "manifest.trawl").exists():
        subprocess.run([args.bin_a, "build", ds.base, str(idx), "--kind", "ivf", "--metric",
                        ds.metric, "--pq-bytes", str(args.pq_bytes), "--quiet"], check=True)
    return idx


def ensure_index(ds, args) -> Path:
    idx = common.build_trawl_index(ds, "ba", args)
    binary = args.bin_a
    for layout, name in (("--shuffle", "packed-shuffled.trawl"), ("--decoupled", "graph.trawl")):
        if not (idx / name).exists():
            subprocess.run([binary, "layout", str(idx), layout, "--quiet"], check=True)
    return idx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--bin-a", required=True, help="the reference binary (before)")
    ap.add_argument("--bin-b", default=None,
                    help="the binary measured against it (after; default: release/trawl in "
                         "cargo's target directory)")
    ap.add_argument("--configs", default="beam,pipe,c5,decoupled,flash,ivf")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--targets", default="0.90,0.95")
    ap.add_argument("--lsizes", default=None,
                    help="list sizes of every sweep (default: per configuration); one size "
                         "near a target makes the sweeps short and the alternation fine")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--pq-bytes", type=int, default=32)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--out", default="bench/out/before_after")
    ap.add_argument("--extra", default="",
                    help="flags added to every sweep of both binaries, e.g. \"--engine sim:80\" "
                         "(the simulated disk takes the shared disk's drift out of a ratio)")
    args = ap.parse_args()
    if args.bin_b is None:
        args.bin_b = str(common.default_trawl_bin())
    for b in (args.bin_a, args.bin_b):
        if not Path(b).is_file():
            sys.exit(f"before_after.py: no trawl binary at {b}")
    import os
    os.environ["TRAWL_BIN"] = args.bin_a  # builds the index and prepares the data
    ds = datasets.prepare(args.dataset)
    idx = ensure_index(ds, args)
    configs = args.configs.split(",")
    ivf_idx = ensure_ivf_index(ds, args) if "ivf" in configs else None
    out = Path(args.out) / args.dataset
    out.mkdir(parents=True, exist_ok=True)
    targets = [float(t) for t in args.targets.split(",")]
    bins = {"A": args.bin_a, "B": args.bin_b}
    # results[config][bin] = list of per-repetition {target: qps}
    results: dict = {c: {"A": [], "B": []} for c in configs}
    sweeps: dict = {}  # (config, side) -> per repetition [(recall, pages per query) per L]
    for rep in range(args.repeat):
        for ci, c in enumerate(configs):
            order = ["A", "B"] if (rep + ci) % 2 == 0 else ["B", "A"]
            for side in order:
                f = out / f"{c}.{side}.{rep}.json"
                rows = run_one(bins[side], ivf_idx if c == "ivf" else idx, ds,
                               CONFIGS[c] + args.extra.split(), args.lsizes or DEFAULT_L[c], f,
                               args.threads)
                pts = [(r, q) for r, q, _ in rows]
                results[c][side].append({t: qps_at(pts, t) for t in targets})
                sweeps.setdefault((c, side), []).append([(r, p) for r, _, p in rows])
                common.log(f"rep {rep} {c} {side}: " + ", ".join(
                    f"{t}: {results[c][side][-1][t] or float('nan'):.0f}" for t in targets))
    lines = [f"# before/after on {args.dataset}", "",
             f"A = `{args.bin_a}`, B = `{args.bin_b}`; {args.repeat} repetitions, A/B order "
             f"alternating; {args.threads} threads, "
             f"{('flags ' + repr(args.extra)) if args.extra else 'O_DIRECT'}; index R{args.R} L{args.L} "
             f"pq{args.pq_bytes}; machine: {json.dumps(common.machine_info())}",
             "", "| config | recall | QPS A (median) | QPS B (median) | B/A per repetition | "
             "B/A median |", "|---|---|---|---|---|---|"]
    summary = {}
    for c in configs:
        for t in targets:
            a = [r[t] for r in results[c]["A"]]
            b = [r[t] for r in results[c]["B"]]
            ratios = [y / x for x, y in zip(a, b) if x and y]
            if not ratios:
                lines.append(f"| {c} | {t} | – | – | not reached | – |")
                continue
            med = statistics.median(ratios)
            summary[f"{c}@{t}"] = med
            lines.append(
                f"| {c} | {t} | {statistics.median([x for x in a if x]):.0f} | "
                f"{statistics.median([y for y in b if y]):.0f} | "
                f"{', '.join(f'{r:.3f}' for r in ratios)} | **{med:.3f}** |")
    lines += ["", "Recall and pages per query per list size, A vs B (identical where the search "
              "is deterministic: beam search, flash and IVF; PipeSearch, the decoupled "
              "layout's prefetch and C5's PageSearch depend on when reads land):", ""]
    for c in configs:
        a, b = sweeps.get((c, "A"), []), sweeps.get((c, "B"), [])
        same = all(x == y for x, y in zip(a, b)) and len(a) == len(b)
        lines.append(f"- {c}: {'identical in every repetition' if same else 'differ'}; A "
                     f"{a[0] if a else []}, B {b[0] if b else []}")
    md = "\n".join(lines) + "\n"
    (out / "before_after.md").write_text(md)
    (out / "before_after.json").write_text(json.dumps(
        {"results": results, "summary": summary}, indent=1, default=str))
    print(md)


if __name__ == "__main__":
    main()

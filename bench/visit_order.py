#!/usr/bin/env python3
"""The graph build's visit order, before and after: two indexes of one dataset, one built in
id order (`--visit-order ids`, trawl's order before the recall-stability study) and one in the
default order (blocks of 64 consecutive ids in a seeded random order), searched side by side.

Per index: graph build seconds (from the build report), recall@10 per list size (beam search,
width 4, 2 threads, O_DIRECT), QPS at the target recalls interpolated on each sweep, the
sweeps alternating A B / B A within every repetition (a shared disk's speed drifts); and the
build's recall monitor (`trawl info --json`: 300 of the index's own vectors searched at L 32 /
64 / 128) beside the recall of the held-out queries at the same L.

    python3 bench/visit_order.py glove-400k --repeat 3
    python3 bench/visit_order.py minilm-200k --repeat 3 --pq-bytes 48
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import datasets  # noqa: E402
from before_after import paired_sweeps, qps_lines  # noqa: E402

ORDERS = {"A": "ids", "B": "blocks:64"}


def build(ds, order: str, args) -> tuple[Path, dict]:
    idx = Path(ds.base).parent / f"vo-{order.replace(':', '')}-R{args.R}-L{args.L}-pq{args.pq_bytes}"
    report = idx.parent / (idx.name + ".report.json")
    if not (idx / "manifest.trawl").exists() or args.rebuild:
        cmd = [str(common.trawl_bin()), "build", ds.base, str(idx), "--metric", ds.metric,
               "-R", str(args.R), "-L", str(args.L), "--pq-bytes", str(args.pq_bytes),
               "--threads", str(args.threads), "--visit-order", order, "--report", str(report),
               "--quiet"]
        common.log(" ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return idx, json.loads(report.read_text())


def sweep(idx: Path, ds, lsizes: str, out: Path, threads: int) -> list[dict]:
    cmd = [str(common.trawl_bin()), "bench", str(idx), "--queries", ds.query, "--gt", ds.gt,
           "-k", "10", "-L", lsizes, "--threads", str(threads), "-W", "4", "--json", str(out),
           "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--targets", default="0.90,0.95")
    ap.add_argument("--lsizes", default="10,15,20,32,40,64,128")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--pq-bytes", type=int, default=32)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--out", default="bench/out/visit_order")
    args = ap.parse_args()
    ds = datasets.prepare(args.dataset)
    out = Path(args.out) / args.dataset
    out.mkdir(parents=True, exist_ok=True)
    targets = [float(t) for t in args.targets.split(",")]
    built = {s: build(ds, o, args) for s, o in ORDERS.items()}
    recall, qps = paired_sweeps(
        lambda side, rep: sweep(built[side][0], ds, args.lsizes, out / f"{side}.{rep}.json",
                                args.threads),
        args.repeat, targets, name=lambda side: ORDERS[side])
    lines = [f"# visit order before/after on {args.dataset}", "",
             f"A = `--visit-order ids`, B = default (`blocks:64`); R {args.R}, build L {args.L}, "
             f"PQ {args.pq_bytes} bytes, {args.threads} threads, beam width 4, O_DIRECT; "
             f"{args.repeat} repetitions, A/B order alternating; machine: "
             f"{json.dumps(common.machine_info())}", ""]
    lines += ["| | A ids | B blocks:64 |", "|---|---|---|"]
    lines.append("| graph build s | " + " | ".join(
        f"{built[s][1].get('graph_secs', float('nan')):.1f}" for s in "AB") + " |")
    for L in sorted(recall["A"]):
        lines.append(f"| recall@10 L {L} | {recall['A'][L]:.4f} | {recall['B'][L]:.4f} |")
    lines += qps_lines(qps, targets)
    lines += ["", "Recall monitor (build) against the held-out queries at the same L:", "",
              "| index | L | monitor | held-out | difference (points) |", "|---|---|---|---|---|"]
    for s in "AB":
        info = json.loads(subprocess.run(
            [str(common.trawl_bin()), "info", str(built[s][0]), "--json"], check=True,
            capture_output=True, text=True).stdout)
        for p in (info.get("recall") or {}).get("points", []):
            held = recall[s].get(p["L"])
            diff = "–" if held is None else f"{100 * (p['recall'] - held):+.2f}"
            lines.append(f"| {ORDERS[s]} | {p['L']} | {p['recall']:.4f} | "
                         f"{'–' if held is None else f'{held:.4f}'} | {diff} |")
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

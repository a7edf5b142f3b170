#!/usr/bin/env python3
"""Figures of a `trawl bench --ablation` run (OctopusANN's Figures 11, 13, 15 and 20).

Input: the run's ablation.json (or a bench/ablation.py median JSON of the same shape).
Output, next to --out (default: the JSON's directory / "ablation"):
  <out>-fig11-qps.png    recall@10 vs QPS, the single techniques (Baseline, Cache, MemGraph,
                         PageShuffle, PageSearch, DynamicWidth, Pipeline, AllInStorage)
  <out>-fig13-ios.png    I/Os per query at recall@10 = 0.90 and 0.95, every configuration
  <out>-fig15-qps.png    recall@10 vs QPS, the combinations C1-C5 with Baseline
  <out>-fig20-breakdown.png  OctopusANN's cumulative breakdown at recall 0.90: Baseline,
                         +MemGraph, +PageShuffle & PageSearch (C3), +DynamicWidth (C5): QPS
                         and pages per query

Usage: bench/.venv-plot/bin/python bench/plot_ablation.py OUT/ablation.json [--out PREFIX]
Needs matplotlib (bench/.venv-plot).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import import_pyplot  # noqa: E402

SINGLE = ["Baseline", "Cache", "MemGraph", "PageShuffle", "PageSearch", "DynamicWidth",
          "Pipeline", "AllInStorage"]
COMBOS = ["Baseline", "C1", "C2", "C3", "C4", "C5"]
BREAKDOWN = [("Baseline", "Baseline"), ("MemGraph", "+MemGraph"), ("C3", "+PS & PSe"),
             ("C5", "+DynamicWidth (C5)")]


def at_recall(rows: list[dict], key: str, target: float) -> float | None:
    prev = None
    for r in sorted(rows, key=lambda r: r["L"]):
        if r["recall"] >= target:
            if prev is None or r["recall"] <= prev["recall"]:
                return r[key]
            w = (target - prev["recall"]) / (r["recall"] - prev["recall"])
            return prev[key] + w * (r[key] - prev[key])
        prev = r
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--out", default=None)
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    plt = import_pyplot("plot_ablation.py")
    if plt is None:
        return 2
    doc = json.loads(Path(args.json).read_text())
    runs = {r["name"]: r for r in doc["runs"]}
    out = args.out or str(Path(args.json).with_name("ablation"))
    title = args.title or Path(doc.get("index", args.json)).name
    written = []

    def sweep(names: list[str], fname: str, what: str) -> None:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for n in names:
            if n not in runs:
                continue
            rows = sorted(runs[n]["rows"], key=lambda r: r["L"])
            ax.plot([r["recall"] for r in rows], [r["qps"] for r in rows], marker="o",
                    markersize=3, label=n, linestyle="--" if n == "Baseline" else "-")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("QPS")
        ax.set_title(f"{title}: {what}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = f"{out}-{fname}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)

    sweep(SINGLE, "fig11-qps", "single techniques")
    sweep(COMBOS, "fig15-qps", "combinations")

    names = [n for n in SINGLE + COMBOS[1:] if n in runs]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.4
    for k, target in enumerate((0.90, 0.95)):
        vals = [at_recall(runs[n]["rows"], "ios_per_query", target) or 0 for n in names]
        ax.bar([i + (k - 0.5) * width for i in range(len(names))], vals, width,
               label=f"recall@10 = {target:.2f}")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("I/Os per query")
    ax.set_title(f"{title}: I/Os per query at matched recall")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = f"{out}-fig13-ios.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

    steps = [(n, label) for n, label in BREAKDOWN if n in runs]
    if steps:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
        labels = [label for _, label in steps]
        qps = [at_recall(runs[n]["rows"], "qps", 0.90) or 0 for n, _ in steps]
        pages = [at_recall(runs[n]["rows"], "pages_per_query", 0.90) or 0 for n, _ in steps]
        a1.bar(labels, qps, color="tab:blue")
        a1.set_ylabel("QPS at recall@10 = 0.90")
        a2.bar(labels, pages, color="tab:orange")
        a2.set_ylabel("pages per query at recall@10 = 0.90")
        for a in (a1, a2):
            a.tick_params(axis="x", rotation=30, labelsize=8)
            a.grid(axis="y", alpha=0.3)
        fig.suptitle(f"{title}: OctopusANN breakdown")
        fig.tight_layout()
        path = f"{out}-fig20-breakdown.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())

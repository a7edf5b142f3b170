#!/usr/bin/env python3
"""Plots of search sweeps: recall@k vs QPS and recall@k vs pages read per query.

Inputs (any number, mixed):
  - a `trawl bench --json` file: {"rows": [{"L", "recall", "qps", "pages_per_query", ...}]}
    (one series, named after the file, or NAME=PATH to name it);
  - a vs_diskann_disk.py output (bench/out/vs_diskann_disk-<dataset>.json): one series per side
    (median rows of the multi-thread sweep).

Usage:
  bench/.venv-plot/bin/python bench/plot_bench.py A.json [name=B.json ...] --out bench/out/plot
  -> bench/out/plot-qps.png, bench/out/plot-pages.png

Needs matplotlib (bench/.venv-plot: `python3 -m venv bench/.venv-plot &&
bench/.venv-plot/bin/pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import import_pyplot  # noqa: E402


def load_series(spec: str) -> list[tuple[str, list[dict]]]:
    name, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
    doc = json.loads(Path(path).read_text())
    if "sides" in doc:  # vs_diskann_disk.py output
        out = []
        for side, v in doc["sides"].items():
            s = v.get("summary") or {}
            rows = s.get("rows") or []
            threads = doc.get("meta", {}).get("params", {}).get("threads")
            label = f"{name + ': ' if name else ''}{side}" + (f" ({threads} thr)" if threads else "")
            out.append((label, rows))
        return out
    if "rows" in doc:
        return [(name or Path(path).stem, doc["rows"])]
    raise SystemExit(f"{path}: neither a trawl bench JSON (rows) nor a vs_diskann_disk JSON (sides)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="JSON files, optionally NAME=PATH")
    ap.add_argument("--out", required=True, help="output prefix: <out>-qps.png, <out>-pages.png")
    ap.add_argument("--title", default=None)
    ap.add_argument("--k", type=int, default=10, help="k of recall@k (axis label only)")
    args = ap.parse_args()
    plt = import_pyplot("plot_bench.py")
    if plt is None:
        return 2
    series = [s for spec in args.inputs for s in load_series(spec)]
    title = args.title or ", ".join(Path(i.rpartition("=")[2]).stem for i in args.inputs)
    written = []
    for key, ylabel, suffix, logy in (("qps", "queries per second", "qps", True),
                                      ("pages_per_query", "pages read per query", "pages", False)):
        fig, ax = plt.subplots(figsize=(7, 5))
        drawn = 0
        for label, rows in series:
            pts = sorted((r["recall"], r[key], r["L"]) for r in rows
                         if r.get(key) is not None and r.get("recall") is not None)
            if not pts:
                continue
            xs, ys, ls = zip(*pts)
            ax.plot(xs, ys, marker="o", label=label)
            for x, y, L in pts:
                ax.annotate(str(L), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
            drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(f"recall@{args.k}")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        path = Path(f"{args.out}-{suffix}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(str(path))
    print("plot_bench.py wrote " + (", ".join(written) if written else "nothing (no data)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

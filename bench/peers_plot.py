#!/usr/bin/env python3
"""Plots of a bench/peers.py run: recall@10 vs QPS (every side), recall@10 vs pages read per
query (the disk sides) and recall@10 vs 1-thread mean latency (every side, when measured).

Usage: bench/.venv-plot/bin/python bench/peers_plot.py bench/out/peers-<dataset>.json \
           --out bench/out/peers-<dataset>
  -> <out>-qps.png, <out>-pages.png, <out>-latency.png (paths printed on stdout)

A 2-D sweep (IVF-PQ: nprobe x k_factor) is drawn as its recall-QPS frontier (line) over all its
points (small dots). Needs matplotlib (bench/.venv-plot).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import import_pyplot  # noqa: E402

DISK = ("trawl-beam", "trawl-pipe", "trawl-flash", "trawl-decoupled", "diskann")
STYLE = {  # side: (colour, marker, line style)
    "trawl-beam": ("tab:blue", "o", "-"), "trawl-pipe": ("tab:cyan", "s", "-"),
    "trawl-flash": ("tab:brown", "*", "-"),
    "trawl-decoupled": ("tab:purple", "D", "-"), "diskann": ("tab:red", "^", "-"),
    "faiss-hnsw": ("tab:green", "v", "--"), "faiss-ivfpq": ("tab:olive", "P", "--"),
    "hnswlib": ("tab:orange", "X", "--"),
}


def frontier(rows: list[dict], key: str, higher_better: bool) -> list[dict]:
    sign = 1 if higher_better else -1
    pts = sorted((r for r in rows if r.get("recall") is not None and r.get(key) is not None),
                 key=lambda r: (-r["recall"], -sign * r[key]))
    out, best = [], None
    for r in pts:
        v = r[key] if higher_better else -r[key]
        if best is None or v > best:
            out.append(r)
            best = v
    return list(reversed(out))


def label_of(param: str) -> str:
    return param.replace("nprobe=", "").replace(",k_factor=", "/").split("=")[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-recall", type=float, default=0.5, help="left edge of the x axis")
    args = ap.parse_args()
    plt = import_pyplot("peers_plot.py")
    if plt is None:
        return 2
    doc = json.loads(Path(args.json).read_text())
    sides = doc["sides"]
    any_meta = next(iter(sides.values()))["meta"]
    ds = any_meta["dataset"]
    threads = any_meta["params"]["threads"]
    nq = any_meta["params"].get("nq_used")
    sub = f"{doc['dataset']}: {ds['n']} x {ds['dim']}, {ds['metric']}, {nq} queries, k = 10"
    plots = [
        ("qps", "rows", "qps", True, True, f"queries per second ({threads} threads)", None),
        ("pages", "rows", "pages_per_query", False, False, "4 KiB pages read per query", DISK),
        ("latency", "lat1_rows", "wall_latency_us", False, True,
         "mean latency, 1 thread (µs)", None),
    ]
    written = []
    for suffix, rkey, key, higher, logy, ylabel, only in plots:
        fig, ax = plt.subplots(figsize=(8, 5.5))
        drawn = 0
        for name, v in sides.items():
            if only and name not in only:
                continue
            s = v["summary"]
            rows = [r for r in s.get(rkey) or [] if r.get(key) is not None
                    and r.get("recall") is not None and r["recall"] >= args.min_recall]
            if not rows:
                continue
            colour, marker, ls = STYLE.get(name, (None, "o", "-"))
            if s.get("two_d"):
                ax.scatter([r["recall"] for r in rows], [r[key] for r in rows], s=8,
                           color=colour, alpha=0.35)
                line = frontier(rows, "qps" if rkey == "rows" else key,
                                higher if rkey != "rows" else True)
                line = [r for r in line if r.get(key) is not None]
            else:
                line = rows
            ax.plot([r["recall"] for r in line], [r[key] for r in line], marker=marker,
                    linestyle=ls, color=colour, label=name, markersize=5)
            for r in line:
                ax.annotate(label_of(r["param"]), (r["recall"], r[key]),
                            textcoords="offset points", xytext=(3, 3), fontsize=6,
                            color=colour)
            drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        for t in (0.90, 0.95):
            ax.axvline(t, color="grey", linewidth=0.8, linestyle=":")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("recall@10")
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        path = Path(f"{args.out}-{suffix}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(str(path))
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""QPS at a recall target and peak RSS against the memory budget, per layout, and the planner's
mix against mixes chosen by hand.

For every budget (sizes, or `min`: each layout's minimum) and every layout whose file the index
has (packed, shuffle with PageSearch, ais, decoupled), alternating within each budget:
`trawl bench --memory-budget B --layout X` over list sizes bracketing the recall target, 2
threads, O_DIRECT; QPS at the target is interpolated between the list sizes around it. On the
packed layout, at each budget, two mixes by hand beside the planner's: the entry index first and
the cache in what it leaves (twice the entry index's bytes: it and its file while it loads); the
entry index and no cache. On the decoupled layout, the other split of the budget between the
list cache and the refinement codes (`refine.trawl`) than the planner's. At each budget the planner's own pick (`--layout auto`) is run too
and compared with the best of the rows measured by hand at that budget. With `--ivf-index`, an
IVF index of the same data is run at each budget its minimum fits (list sizes = lists probed,
`--ivf-lists`). Writes bench/results/memory-budget-<tag>.md/.json and a plot (bench/.venv-plot).

Usage:
  python3 bench/memory_budget.py --index .bench-cache/gen-1m/idx-R64-L100-pq32 \\
      --queries .bench-cache/gen-1m/query.fbin --gt .bench-cache/gen-1m/gt100.bin --tag gen-1m \\
      [--budgets 6M,33M,41M,48M,64M,128M,256M,1G] [--target 0.90] [--max-queries 3000] \\
      [--ivf-index .bench-cache/gen-1m/ivf-nl4096-pq32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO_ROOT, import_pyplot, log, machine_info, trawl_bin  # noqa: E402

LAYOUT_FILES = {"packed": "packed.trawl", "shuffle": "packed-shuffled.trawl",
                "ais": "packed-ais.trawl", "decoupled": "graph.trawl"}
LAYOUT_FLAGS = {"shuffle": ["--page-search"]}


def size(s: str) -> int:
    units = {"K": 10, "M": 20, "G": 30, "T": 40}
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    if s and s[-1] in units:
        return int(float(s[:-1]) * (1 << units[s[-1]]))
    return int(s)


def plan(index: Path, budget: int, layout: str) -> dict | None:
    """The plan `trawl info --plan` prints (layout `auto`: the planner's pick), or None below
    the minimum."""
    r = subprocess.run([str(trawl_bin()), "info", str(index), "--plan", str(budget), "--layout",
                        layout, "--threads", "2", "--json"], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def entry_heap(index: Path) -> int:
    """The entry index's bytes in memory, as the plan at a budget holding everything says."""
    p = plan(index, 1 << 40, "packed")
    return next((i["bytes"] for i in p["items"] if i["name"] == "entry"), 0)


def refine_heap(index: Path) -> int:
    """The refinement codes' planned bytes (codes and their load's transient), as the plan at a
    budget holding everything says (0 without current codes)."""
    p = plan(index, 1 << 40, "decoupled")
    return next((i["bytes"] for i in (p or {}).get("items", []) if i["name"] == "refine"), 0)


def bench(args, layout: str, extra: list[str], out: Path, index: Path | None = None,
          lists: str | None = None) -> dict:
    layout_args = [] if layout == "ivf" else ["--layout", layout, *LAYOUT_FLAGS.get(layout, [])]
    cmd = [str(trawl_bin()), "bench", str(index or args.index), "--queries", str(args.queries),
           "--gt", str(args.gt), "-k", "10", "-L", lists or args.lists, "--threads", "2",
           "--max-queries", str(args.max_queries), "--json", str(out), "--quiet", *layout_args,
           *(["--fresh-queries"] if args.fresh_queries else []), *extra]
    t = time.time()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    r = json.loads(out.read_text())
    r["wall"] = time.time() - t
    return r


def at_target(rows: list[dict], target: float) -> tuple[float | None, float | None]:
    """QPS and pages per query at the recall target, linear between the list sizes around it."""
    pts = sorted((r["recall"], r["qps"], r.get("pages_per_query", 0.0)) for r in rows)
    for (r0, q0, p0), (r1, q1, p1) in zip(pts, pts[1:]):
        if r0 <= target <= r1:
            f = 0.0 if r1 == r0 else (target - r0) / (r1 - r0)
            return q0 + f * (q1 - q0), p0 + f * (p1 - p0)
    return None, None


def rows_of(r: dict) -> list[dict]:
    return r.get("rows") or r.get("results") or []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--gt", type=Path, required=True)
    ap.add_argument("--tag", default="gen-1m")
    ap.add_argument("--budgets", default="6M,33M,41M,48M,64M,128M,256M,1G")
    ap.add_argument("--layouts", default="packed,shuffle,ais,decoupled")
    ap.add_argument("--lists", default="10,12,14,16,20,25,30,40")
    ap.add_argument("--target", type=float, default=0.90)
    ap.add_argument("--max-queries", type=int, default=3000)
    ap.add_argument("--ivf-index", type=Path, default=None)
    ap.add_argument("--ivf-lists", default="4,6,8,12,16,24,32,48,64")
    ap.add_argument("--ivf-flags", default="--no-heuristic --rerank-n 60",
                    help="extra `trawl bench` flags of the IVF runs (the re-rank's candidates: "
                         "with 32-byte codes the default tops out below recall 0.90)")
    ap.add_argument("--no-auto", action="store_true", help="skip the --layout auto runs")
    ap.add_argument("--fresh-queries", action="store_true",
                    help="each list size searches its own --max-queries queries (`trawl bench "
                         "--fresh-queries`): an LRU list cache is not served by what the same "
                         "queries read at the list sizes before")
    ap.add_argument("--update", action="store_true",
                    help="keep the rows of the existing report this run does not redo")
    args = ap.parse_args()
    out_dir = REPO_ROOT / "bench" / "out" / f"memory-budget-{args.tag}"
    out_dir.mkdir(parents=True, exist_ok=True)
    layouts = [l for l in args.layouts.split(",")
               if l and (args.index / LAYOUT_FILES[l]).exists()]
    results = []

    def record(layout, budget, mix, extra, p, index=None, lists=None):
        r = bench(args, layout, extra, out_dir / f"{layout}-{budget}-{len(results)}.json",
                  index, lists)
        qps, pages = at_target(rows_of(r), args.target)
        res = {"layout": r.get("layout", layout) if layout != "ivf" else "ivf",
               "budget": budget, "mix": mix, "fits": True,
               "qps_at_target": qps, "pages_at_target": pages,
               "peak_rss": r.get("info", r).get("peak_rss_bytes"),
               "planned": sum(i["bytes"] for i in p["items"]) if p else None,
               "cache_nodes": r.get("cache", {}).get("nodes", 0),
               "entry": "--entry-list" in extra, "page_search": r.get("page_search")}
        log(json.dumps(res))
        results.append(res)

    for b in args.budgets.split(","):
        for layout in layouts:
            mins = plan(args.index, 1 << 40, layout)
            budget = mins["minimum"] if b == "min" else size(b)
            p = plan(args.index, budget, layout)
            if p is None or (p["layout"] != layout and b != "min"):
                log(f"{layout} at {budget}: below the minimum")
                results.append({"layout": layout, "budget": budget, "mix": "plan", "fits": False})
                continue
            entry = ["--entry-list", "10"] if p["entry"] else []
            record(layout, budget, "plan", ["--memory-budget", str(budget), *entry], p)
            if layout == "packed" and p["cache_nodes"] > 0 and not p["entry"]:
                # By hand: the entry index first and the cache in what it leaves (the order
                # the planner had before this measurement), and the entry index alone.
                items = {i["name"]: i["bytes"] for i in p["items"]}
                per = items["node_cache"] / p["cache_nodes"]
                entry_bytes = entry_heap(args.index)
                fewer = max(0, p["cache_nodes"] - int(2 * entry_bytes / per) - 1)
                seeds = ["--entry-list", "10"]
                record(layout, budget, "entry first, the cache in what it leaves",
                       ["--cache-nodes", str(fewer), *seeds], None)
                record(layout, budget, "entry index, no cache", seeds, None)
            if layout == "decoupled" and refine_heap(args.index) > 0:
                # By hand: the other way to spend what is left above the minimum — all of it
                # on the list cache, or the refinement codes first and the list cache in the
                # rest (whichever the planner did not choose, where it fits).
                items = {i["name"]: i["bytes"] for i in p["items"]}
                spare = budget - p["minimum"] - items.get("entry", 0)
                mib = lambda b: f"{b / (1 << 20):.2f}"  # noqa: E731
                pin = ["--list-pin", "1"] if p.get("list_pinned") else []
                if p.get("refine_bits", 0):
                    record(layout, budget, "list cache only, no refinement codes",
                           ["--list-cache-mb", mib(spare), *pin, *entry], None)
                elif spare > refine_heap(args.index):
                    record(layout, budget, "refinement codes, the list cache in the rest",
                           ["--list-cache-mb", mib(spare - refine_heap(args.index)),
                            "--refine-bits", "8", *pin, *entry], None)
                if p.get("list_pinned"):
                    # The planner's split with an LRU list cache instead (filled as searches
                    # run; the sweep repeats its queries at every list size, which flatters it).
                    lru = ["--list-cache-mb", mib(items.get("list_cache", 0))]
                    if p.get("refine_bits", 0):
                        lru += ["--refine-bits", "8"]
                    record(layout, budget, "the planner's split, LRU list cache", [*lru, *entry],
                           None)
        if b == "min":
            continue
        budget = size(b)
        p = None if args.no_auto else plan(args.index, budget, "auto")
        if p is not None:
            entry = ["--entry-list", "10"] if p["entry"] else []
            # `--layout auto` turns PageSearch on for shuffle itself (no LAYOUT_FLAGS).
            record("auto", budget, "planner's pick (--layout auto)",
                   ["--memory-budget", str(budget), *entry], p)
        if args.ivf_index:
            r = subprocess.run([str(trawl_bin()), "info", str(args.ivf_index), "--plan",
                                str(budget), "--threads", "2", "--json"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                record("ivf", budget, "plan",
                       ["--memory-budget", str(budget), *args.ivf_flags.split()],
                       json.loads(r.stdout), args.ivf_index, args.ivf_lists)
            else:
                results.append({"layout": "ivf", "budget": budget, "mix": "plan",
                                "fits": False})
    res_dir = REPO_ROOT / "bench" / "results"
    old_path = res_dir / f"memory-budget-{args.tag}.json"
    if args.update and old_path.exists():
        # The planner's pick is one row per budget, whatever layout it picked.
        key = lambda r: (None if r["mix"].startswith("planner") else r["layout"],  # noqa: E731
                         r["budget"], r["mix"])
        redone = {key(r) for r in results}
        old = json.loads(old_path.read_text())["results"]
        results = [r for r in old if key(r) not in redone] + results
        results.sort(key=lambda r: r["budget"])
    report = {"machine": machine_info(), "args": {k: str(v) for k, v in vars(args).items()},
              "results": results}
    (res_dir / f"memory-budget-{args.tag}.json").write_text(json.dumps(report, indent=1))
    write_md(report, res_dir / f"memory-budget-{args.tag}.md", args)
    plot(report, res_dir / f"memory-budget-{args.tag}.png", args.target)


def write_md(report: dict, path: Path, args) -> None:
    m = report["machine"]
    lines = [f"# QPS at recall {args.target} and peak RSS against the memory budget ({args.tag})",
             "", f"Machine: {m.get('cpu_model')}, {m.get('logical_cpus')} logical CPUs; O_DIRECT; 2 search threads; "
             f"{args.max_queries} queries; list sizes {args.lists}. Command: `python3 "
             f"bench/memory_budget.py --index {args.index} --queries {args.queries} --gt "
             f"{args.gt} --tag {args.tag} --budgets {args.budgets} --layouts {args.layouts} "
             f"--max-queries {args.max_queries}{' --fresh-queries' if args.fresh_queries else ''}"
             f"{' --no-auto' if args.no_auto else ''}`"
             f"{' (each list size searched its own queries)' if args.fresh_queries else ''}.", "",
             "QPS is noisy (single runs on a shared disk); pages per query at the target are "
             "exact counts. Peak RSS is the bench process's: the budget plus its runtime, the "
             "queries and the ground truth.", "",
             "| budget | layout | mix | cache nodes | entry index | QPS @ target | pages/query | "
             "peak RSS |", "|---|---|---|---|---|---|---|---|"]
    lines_pick = picks(report)
    for r in report["results"]:
        if not r["fits"]:
            lines.append(f"| {r['budget'] / 2**20:.1f} MiB | {r['layout']} | below the minimum "
                         "| | | | | |")
            continue
        q = "—" if r["qps_at_target"] is None else f"{r['qps_at_target']:.0f}"
        pg = "—" if r["pages_at_target"] is None else f"{r['pages_at_target']:.1f}"
        rss = "" if r["peak_rss"] is None else f"{r['peak_rss'] / 2**20:.0f} MiB"
        lines.append(f"| {r['budget'] / 2**20:.1f} MiB | {r['layout']} | {r['mix']} | "
                     f"{r['cache_nodes']} | {r['entry']} | {q} | {pg} | {rss} |")
    path.write_text("\n".join(lines + lines_pick) + "\n")


def picks(report: dict) -> list[str]:
    """The planner's pick at each budget against the best graph row measured by hand there."""
    out = ["", "## The planner's pick against the best measured by hand", "",
           "At each budget: the graph rows measured (every layout with the planner's cache, "
           "and the packed mixes by hand), the best of them by QPS and by pages per query, and "
           "the run of `--layout auto` (the planner's pick, measured in its own run).", "",
           "| budget | best by hand (QPS) | QPS | planner's pick | QPS | ratio | pages: best | "
           "pages: pick |", "|---|---|---|---|---|---|---|---|"]
    budgets = sorted({r["budget"] for r in report["results"] if r["mix"].startswith("planner")})
    for b in budgets:
        rows = [r for r in report["results"] if r["budget"] == b and r["fits"]
                and r["layout"] != "ivf" and r.get("qps_at_target")]
        hand = [r for r in rows if not r["mix"].startswith("planner")]
        auto = next((r for r in rows if r["mix"].startswith("planner")), None)
        if not hand or auto is None:
            continue
        best = max(hand, key=lambda r: r["qps_at_target"])
        fewest = min(r["pages_at_target"] for r in hand)
        out.append(f"| {b / 2**20:.0f} MiB | {best['layout']} ({best['mix']}) | "
                   f"{best['qps_at_target']:.0f} | {auto['layout']} | {auto['qps_at_target']:.0f} "
                   f"| {auto['qps_at_target'] / best['qps_at_target']:.2f} | {fewest:.1f} | "
                   f"{auto['pages_at_target']:.1f} |")
    return out


def plot(report: dict, path: Path, target: float) -> None:
    plt = import_pyplot("memory_budget")
    if plt is None:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for layout in [*LAYOUT_FILES, "ivf"]:
        pts = [r for r in report["results"] if r["layout"] == layout and r["mix"] == "plan"
               and r["fits"] and r["qps_at_target"]]
        if not pts:
            continue
        xs = [r["budget"] / 2**20 for r in pts]
        a.plot(xs, [r["qps_at_target"] for r in pts], marker="o", label=layout)
        b.plot(xs, [r["peak_rss"] / 2**20 for r in pts], marker="o", label=layout)
    auto = [r for r in report["results"] if r["mix"].startswith("planner")
            and r["fits"] and r["qps_at_target"]]
    if auto:
        a.scatter([r["budget"] / 2**20 for r in auto], [r["qps_at_target"] for r in auto],
                  marker="*", s=160, c="k", zorder=5, label="planner's pick (--layout auto)")
        for r in auto:
            a.annotate(r["layout"], (r["budget"] / 2**20, r["qps_at_target"]),
                       textcoords="offset points", xytext=(4, 6), fontsize=7)
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("memory budget (MiB)")
    a.set_ylabel(f"QPS at recall@10 {target}")
    a.legend()
    b.set_xscale("log")
    b.set_yscale("log")
    lim = [min(r["budget"] for r in report["results"]) / 2**20,
           max(r["budget"] for r in report["results"]) / 2**20]
    b.plot(lim, lim, "k--", lw=0.8, label="RSS = budget")
    b.set_xlabel("memory budget (MiB)")
    b.set_ylabel("peak RSS of the bench process (MiB)")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

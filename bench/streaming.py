#!/usr/bin/env python3
"""The streaming runbook (big-ann-benchmarks' streaming track style) on real and generated data.

For each dataset, layout, pattern and delete repair, `crates/trawl/examples/streaming.rs`
(built here in release mode) runs the stream: an index of half the vectors, then rounds that
delete ~5% of the live vectors and insert as many unused ones, with a merge after each round.
Which vectors, by `--pattern` (seeded by `--seed`, deterministic):

- `cluster` (default): the start is whole k-means clusters in cluster order; each round deletes
  the oldest clusters and inserts the next unused ones, whole clusters (the hard case);
- `uniform`: the start is a random half; each round deletes live vectors chosen uniformly at
  random and inserts unused vectors chosen uniformly at random;
- `expire`: the start is a random half inserted in random order (the order is the age); each
  round deletes the oldest live vectors (first in, first out) and inserts unused ones;
- `upsert`: the start is a random half; each round half of the deletes are upserts (a live id
  gets a new vector, the id stays), the other half plain deletes, plus as many inserts.

`--deletes` chooses how the merge takes deleted nodes out of the graph: `inplace` (the
library's default: every in-neighbour, no search), `inplace-search` (IP-DiskANN: the
in-neighbours a search finds), `inplace-nearest`
(replacement edges to the 32 nodes nearest to the deleted vector), `consolidate`
(FreshDiskANN); `--replace C` is the in-place variants' edges per lost edge. After every round
the example measures

- recall@10 at a fixed L over the live set (exact ground truth of the live set; a deleted id,
  or an upserted id found through its old vector, is never a hit), before and after the merge,
  and the same for an index built from scratch on the live set (also at `--extra-l`, each ≥ 10);
  also recall over the top-10 entries that are vectors the stream added (inserted or upserted);
- the merge's time against that fresh build's (odd rounds: the merge alone on all threads);
- search QPS while the merge runs (even rounds: 2 search threads, the merge on 1 thread at
  niceness 10) against idle QPS right after it (both O_DIRECT, the same loop);
- QPS after the merge against the fresh index, paired (merged, fresh, merged, … 2 s each,
  5 times each; medians);
- what the merge touched: nodes whose list changed and graph pages rewritten per deleted vector
  and as a share of the graph's pages, in-edges of deleted nodes found and replaced, the delete
  phase's time; bytes written by the merge and the peak RSS.

Usage:
  python3 bench/streaming.py glove-400k gen-1m [--layouts packed,decoupled] [--rounds 10] \\
      [--pattern cluster,uniform,expire,upsert] [--deletes inplace,consolidate] [--replace 3] \\
      [--seed 1] [--results NAME]
  python3 bench/streaming.py --report-only [--inputs 'bench/out/streaming-*-upsert-*.json'] \\
      [--results NAME]

Writes bench/out/streaming-<dataset>-<layout>-<pattern>-<deletes>.json, bench/results/NAME.md
(NAME: `--results`, default `streaming`) and bench/results/NAME-<dataset>.png (recall and QPS
per round). A run reports the files it wrote (or `--inputs`); `--report-only` reports the files
`--inputs` matches, by default every bench/out/streaming-*.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import (OUT_DIR, REPO_ROOT, cargo_target_dir, import_pyplot, log,  # noqa: E402
                    machine_info, write_json)

RESULTS = REPO_ROOT / "bench" / "results"
PATTERNS = ("cluster", "uniform", "expire", "upsert")
DELETES = ("inplace", "inplace-search", "inplace-nearest", "consolidate")


def example_bin() -> Path:
    """The example `cargo build --release --example streaming` writes (in cargo's target
    directory, `CARGO_TARGET_DIR` honoured)."""
    return cargo_target_dir() / "release" / "examples" / "streaming"


def build_example() -> None:
    log("cargo build --release --example streaming")
    subprocess.run(["cargo", "build", "--release", "--example", "streaming", "-q"],
                   cwd=REPO_ROOT, check=True)


def default_extra_l(search_l: int) -> list[int]:
    """List sizes measured beside L: L/4 and L/2 (16, 32 at L 64) where those are at least
    10 (recall@10 needs L ≥ 10), else larger ones (2L, 4L: 20, 40 at L 10)."""
    out = [x for x in (search_l // 4, search_l // 2) if x >= 10 and x != search_l]
    for x in (2 * search_l, 4 * search_l):
        if len(out) < 2:
            out.append(x)
    return sorted(set(out))


def run(name: str, layout: str, pattern: str, deletes: str, args) -> Path:
    ds = datasets.prepare(name)
    out = OUT_DIR / f"streaming-{name}-{layout}-{pattern}-{deletes}.json"
    work = Path(args.work) / f"{name}-{layout}"
    cmd = [str(example_bin()), "--base", ds.base, "--queries", ds.query, "--metric", ds.metric,
           "--dir", str(work), "--out", str(out), "--rounds", str(args.rounds),
           "--clusters", str(args.clusters), "-L", str(args.search_l), "--threads",
           str(args.threads), "--layout", layout, "--max-queries", str(args.queries),
           "--extra-l", ",".join(map(str, args.extra_l)), "--pattern", pattern,
           "--deletes", deletes, "--replace", str(args.replace), "--seed", str(args.seed)]
    log(" ".join(cmd))
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(cmd, check=True)
    doc = json.loads(out.read_text())
    doc["machine"] = machine_info()
    doc["dataset"] = name
    doc["driver_command"] = "python3 bench/streaming.py " + shlex.join(sys.argv[1:])
    write_json(out, doc)
    return out


def med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(doc: dict) -> dict:
    rounds = doc["rounds"]
    last = rounds[-1]
    alone = [r["merge_over_fresh"] for r in rounds if r["merge_mode"] == "alone"]
    during = [r["qps_ratio"] for r in rounds if r.get("qps_ratio") is not None]
    after = [r["qps_after_over_fresh"] for r in rounds if r.get("qps_after_over_fresh")]
    return {
        "final_recall": last["recall"],
        "final_recall_fresh": last["recall_fresh"],
        "final_gap_points": 100 * (last["recall_fresh"] - last["recall"]),
        "max_gap_points": max(100 * (r["recall_fresh"] - r["recall"]) for r in rounds),
        "merge_over_fresh_median": med(alone),
        "merge_over_fresh_max": max(alone) if alone else None,
        "merge_over_fresh_mean": statistics.mean(alone) if alone else None,
        "qps_ratio_median": med(during),
        "qps_ratio_min": min(during) if during else None,
        "qps_after_over_fresh_median": med(after),
        "qps_after_over_fresh_min": min(after) if after else None,
        "nodes_touched_per_delete_median": med([r.get("nodes_touched_per_delete")
                                                for r in rounds]),
        "pages_touched_share_median": med([r.get("pages_touched_share") for r in rounds]),
        "bytes_written_median": statistics.median(r["bytes_written"] for r in rounds),
        "peak_rss_max": max(r["peak_rss_bytes"] for r in rounds),
        "final_at": [(x["L"], x["recall"], x["recall_fresh"]) for x in last.get("recall_at", [])],
        "max_gap_at": {x["L"]: max(100 * (y["recall_fresh"] - y["recall"])
                                   for r in rounds for y in r.get("recall_at", [])
                                   if y["L"] == x["L"])
                       for x in last.get("recall_at", [])},
    }


def mib(b: float | None) -> str:
    return "—" if b is None else f"{b / 2**20:.1f} MiB"


def f(x: float | None, fmt: str) -> str:
    """`x` formatted, or a dash when it was not measured (older result files)."""
    return "—" if x is None else format(x, fmt)


def pattern_of(d: dict) -> str:
    return d.get("pattern", "cluster")


def deletes_of(d: dict) -> str:
    # Files from before `--deletes` do not record it (the merge consolidated then).
    return d.get("deletes", "not recorded")


def commands(docs: list[dict]) -> list[str]:
    """The exact commands behind the results: the driver's, else the example's."""
    out = []
    for d in docs:
        c = d.get("driver_command") or (shlex.join(d["command"]) if d.get("command") else None)
        if c and c not in out:
            out.append(c)
    return out


def machine_lines(docs: list[dict]) -> list[str]:
    """One line per machine (CPU model, CPUs, memory) with the commits run there."""
    machines: dict[str, list[str]] = {}
    for d in docs:
        m = d.get("machine")
        note = ""
        if m is None:
            m, note = machine_info(), " (this machine: the result file does not record one)"
        key = (f"Machine: {m.get('cpu_model')}, {m.get('logical_cpus')} logical CPUs, "
               f"{(m.get('mem_total_kib') or 0) // 2**20} GiB{note}")
        commit = (m.get("git_commit") or "?")[:10]
        if commit not in machines.setdefault(key, []):
            machines[key].append(commit)
    return [f"{k}; commit{'s' if len(c) > 1 else ''} {', '.join(c)}." for k, c in machines.items()]


def report(paths: list[Path], results: str, argv: list[str]) -> None:
    docs = []
    for p in sorted(set(paths)):
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            log(f"skipping {p}: {e}")
            continue
        if not isinstance(d, dict) or not d.get("rounds"):
            log(f"skipping {p}: no rounds")
            continue
        # Files the example wrote directly (not through this driver) name no dataset: the one
        # in the file name (streaming-<dataset>-<layout>-<pattern>-<deletes>.json), else the
        # base file's name.
        if "dataset" not in d:
            tail = f"-{d.get('layout')}-{pattern_of(d)}-{deletes_of(d)}"
            named = p.stem.startswith("streaming-") and p.stem.endswith(tail)
            d["dataset"] = (p.stem[len("streaming-"):-len(tail)] if named
                            else Path(d.get("base", p.stem)).stem)
        docs.append(d)
    if not docs:
        log("no results to report")
        return
    docs.sort(key=lambda d: (d["dataset"], d["layout"], PATTERNS.index(pattern_of(d))
                             if pattern_of(d) in PATTERNS else 9, deletes_of(d)))
    title = "# Streaming runbook" + ("" if results == "streaming" else f": {results}")
    lines = [title, "",
             "Driver: `crates/trawl/examples/streaming.rs` (through `bench/streaming.py`). Start: "
             "half of the vectors. Each round deletes ≈5% of the live vectors and inserts as many "
             "unused ones, then merges. Patterns: *cluster* = whole k-means clusters, the oldest "
             "deleted and the next unused inserted, in cluster order; *uniform* = random live "
             "vectors deleted, random unused ones inserted; *expire* = the oldest deleted (first "
             "in, first out), random unused ones inserted; *upsert* = half of the deletes are "
             "upserts (a random live id gets an unused vector), the other half plain deletes, "
             "plus as many inserts. Deletes: how the merge takes deleted nodes out of the graph "
             "(*inplace* = every in-neighbour takes replacement edges to the deleted node's "
             "out-neighbours; *inplace-search* = IP-DiskANN: the in-neighbours a search finds; "
             "*inplace-nearest*: "
             "edges to the 32 nodes nearest to the deleted vector; *consolidate* = FreshDiskANN). "
             "Recall@10 at a fixed L over the live set against exact ground truth (a deleted id, "
             "or an upserted id found through its old vector, is never a hit); *fresh* = an "
             "index built from scratch on the same live set, searched the same way; *added "
             "vectors*: recall over the exact top-10 entries that the stream inserted or "
             "upserted. Odd rounds: "
             "the merge alone on all threads (its time against the fresh build's); even rounds: "
             "the merge on one thread at niceness 10 while 2 threads search with O_DIRECT (QPS "
             "against idle QPS measured right after, same loop). QPS after merge / fresh: the "
             "same loop on the merged and the fresh index in turn, 2 s each, 5 times each "
             "(medians). Touched: nodes whose list the merge changed per deleted vector, and "
             "graph pages rewritten as a share of the graph's pages. Gap = fresh − merged recall "
             "in points (negative: the merged index is the better one); its max is the worst "
             "round.", ""]
    lines += machine_lines(docs)
    lines += ["", "Commands:", ""]
    lines += [f"    {c}" for c in commands(docs)]
    if "--report-only" in argv:
        lines += [f"    python3 bench/streaming.py {shlex.join(argv)}"]
    lines += ["",
              "| dataset | layout | pattern | deletes | n live | L | final recall (fresh) "
              "| gap, points (max over rounds) | merge / fresh build, median (max; mean), merge alone "
              "| QPS during merge / idle, median (min) | QPS after merge / fresh, median (min) "
              "| nodes touched per deleted vector, median | pages touched share, median "
              "| bytes written per merge, median | peak RSS | other L: final recall (fresh), "
              "max gap |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in docs:
        s = summarize(d)
        gaps = s["max_gap_at"]
        other = "; ".join(f"L {lv}: {m:.4f} ({fr:.4f}), {gaps[lv]:+.2f}"
                          for lv, m, fr in s["final_at"])
        lines.append(
            f"| {d['dataset']} | {d['layout']} | {pattern_of(d)} | {deletes_of(d)} "
            f"| {d['rounds'][-1]['live']:,} | {d['L']} "
            f"| {s['final_recall']:.4f} ({s['final_recall_fresh']:.4f}) "
            f"| {s['final_gap_points']:+.2f} ({s['max_gap_points']:+.2f}) "
            f"| {f(s['merge_over_fresh_median'], '.3f')} ({f(s['merge_over_fresh_max'], '.3f')}; "
            f"mean {f(s['merge_over_fresh_mean'], '.3f')}) "
            f"| {f(s['qps_ratio_median'], '.2f')} ({f(s['qps_ratio_min'], '.2f')}) "
            f"| {f(s['qps_after_over_fresh_median'], '.2f')} "
            f"({f(s['qps_after_over_fresh_min'], '.2f')}) "
            f"| {f(s['nodes_touched_per_delete_median'], '.1f')} "
            f"| {f(s['pages_touched_share_median'], '.3f')} "
            f"| {mib(s['bytes_written_median'])} | {mib(s['peak_rss_max'])} | {other} |")
    lines.append("")
    for d in docs:
        how = (f"pattern {pattern_of(d)}"
               + (f" ({d['clusters']} clusters)" if d.get("clusters") else "")
               + (f", seed {d['seed']}" if pattern_of(d) != "cluster" and "seed" in d else "")
               + f", share {d.get('share', 0.05)}; deletes {deletes_of(d)}"
               + (f", replace {d['replace']}" if str(deletes_of(d)).startswith("inplace")
                  and "replace" in d else ""))
        lines += [f"## {d['dataset']}, {d['layout']} layout, {pattern_of(d)}, {deletes_of(d)}", "",
                  f"{d['n']:,} × {d['dim']} {d['metric']}; initial index {d['initial']:,} vectors "
                  f"built in {d['initial_build_secs']:.1f} s; R {d['R']}, build L {d['build_L']}, "
                  f"{d['pq_bytes']} PQ bytes; search L {d['L']}, beam width 4, {d['queries']} "
                  f"queries; {how}.",
                  "",
                  "| round | live | deleted | inserted | recall before merge | after | fresh "
                  "| after, added vectors (fresh) "
                  "| merge s (mode) | delete s | fresh build s | merge/fresh | QPS idle "
                  "| QPS during | ratio | QPS after merge / fresh | touched nodes per delete "
                  "| touched pages share | written | peak RSS | other L: merged / fresh "
                  "| hops, pages per query: merged / fresh |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
                  "---|---|---|"]
        for r in d["rounds"]:
            alone = r["merge_mode"] == "alone"
            seg = (r.get("merge") or {}).get("segments")
            during = "" if alone else f"{r['qps_during_merge']:.0f}"
            ratio = "" if alone else f"{r['qps_ratio']:.2f}"
            other = "; ".join(f"L {x['L']}: {x['recall']:.4f} / {x['recall_fresh']:.4f}"
                              for x in r.get("recall_at", []))
            ups = f" ({r['upserted']:,} upserts)" if r.get("upserted") else ""
            after = ("—" if r.get("qps_after_merge") is None else
                     f"{r['qps_after_merge']:.0f} / {r['qps_fresh']:.0f} "
                     f"({r['qps_after_over_fresh']:.2f})")
            added = ("—" if r.get("recall_added") is None else
                     f"{r['recall_added']:.4f} ({r['recall_added_fresh']:.4f})")
            carried = (r.get("merge") or {}).get("hot_carried")
            hot = "" if carried is None else (
                "; hot order carried" if carried else "; hot order ranked")
            wa, wf = r.get("work_after_merge"), r.get("work_fresh")
            work = ("—" if not wa or not wf else
                    f"{wa['hops']:.1f}, {wa['pages']:.1f} / {wf['hops']:.1f}, {wf['pages']:.1f}")
            lines.append(
                f"| {r['round']} | {r['live']:,} | {r['deleted']:,}{ups} | {r['inserted']:,} "
                f"| {r['recall_before_merge']:.4f} | {r['recall']:.4f} | {r['recall_fresh']:.4f} "
                f"| {added} "
                f"| {r['merge_secs']:.1f} ({'alone' if alone else 'beside searches'}{hot}) "
                f"| {f(r.get('delete_secs'), '.2f')} "
                f"| {r['fresh_build_secs']:.1f} | {r['merge_over_fresh']:.3f} "
                f"| {r['qps_idle']:.0f} | {during} | {ratio} | {after} "
                f"| {f(r.get('nodes_touched_per_delete'), '.1f')} "
                f"| {f(r.get('pages_touched_share'), '.3f')} "
                f"| {mib(r['bytes_written'])}"
                f"{' (' + str(seg['segments']) + ' segments)' if seg else ''} "
                f"| {mib(r['peak_rss_bytes'])} | {other} | {work} |")
        bad = [(r["round"], r.get("dead_results", 0), r.get("stale_results", 0))
               for r in d["rounds"] if r.get("dead_results") or r.get("stale_results")]
        if bad:
            lines += ["", "Results after the merge of a deleted id (dead) or of an id's old "
                      "vector (stale), never counted as hits: "
                      + "; ".join(f"round {k}: {a} dead, {b} stale" for k, a, b in bad) + "."]
        lines.append("")
    RESULTS.mkdir(parents=True, exist_ok=True)
    md = RESULTS / f"{results}.md"
    md.write_text("\n".join(lines) + "\n")
    log(f"wrote {md}")
    plt = import_pyplot("streaming.py")
    if plt is None:
        return
    for name in sorted({d["dataset"] for d in docs}):
        mine = [d for d in docs if d["dataset"] == name]
        # Name each curve by what varies among this dataset's runs.
        keys = [k for k in (lambda d: d["layout"], pattern_of, deletes_of)
                if len({k(d) for d in mine}) > 1] or [lambda d: d["layout"]]

        def label(d: dict) -> str:
            return "/".join(str(k(d)) for k in keys)  # noqa: B023

        # One colour per run (legend at the right); line styles tell the series apart.
        fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.5))
        cmap = plt.get_cmap("tab10" if len(mine) <= 10 else "tab20")
        for i, d in enumerate(mine):
            col = cmap(i % cmap.N)
            rs = d["rounds"]
            x = [r["round"] for r in rs]
            a.plot(x, [r["recall"] for r in rs], "o-", color=col, label=label(d))
            a.plot(x, [r["recall_fresh"] for r in rs], "x--", color=col)
            after = [r for r in rs if r.get("qps_after_merge") is not None]
            b.plot([r["round"] for r in after], [r["qps_after_merge"] for r in after], "o-",
                   color=col)
            b.plot([r["round"] for r in after], [r["qps_fresh"] for r in after], "x--", color=col)
            c.plot(x, [r["qps_idle"] for r in rs], "o-", color=col)
            during = [r for r in rs if r.get("qps_during_merge")]
            c.plot([r["round"] for r in during], [r["qps_during_merge"] for r in during], "s:",
                   color=col)
        a.set_ylabel(f"recall@10 at L = {mine[0]['L']}")
        a.set_title(f"{name}: recall (solid: merged, dashed: fresh build)", fontsize=9)
        b.set_ylabel("QPS (2 threads, O_DIRECT)")
        b.set_title("QPS after merge (solid) / fresh index (dashed)", fontsize=9)
        c.set_ylabel("QPS (2 threads, O_DIRECT)")
        c.set_title("QPS idle (solid) / during merge (dotted, even rounds)", fontsize=9)
        for ax in (a, b, c):
            ax.set_xlabel("round")
        if not b.lines or not any(len(ln.get_xdata()) for ln in b.lines):
            b.text(0.5, 0.5, "not measured (older result files)", transform=b.transAxes,
                   ha="center")
        fig.legend(*a.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5),
                   fontsize=8)
        fig.tight_layout()
        png = RESULTS / f"{results}-{name}.png"
        fig.savefig(png, dpi=110, bbox_inches="tight")
        log(f"wrote {png}")


def choices(ap: argparse.ArgumentParser, value: str, allowed: tuple, what: str) -> list[str]:
    out = [x for x in value.split(",") if x]
    bad = [x for x in out if x not in allowed]
    if bad or not out:
        ap.error(f"{what}: {','.join(bad) or value!r} not among {', '.join(allowed)}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="*", default=["glove-400k", "gen-1m"])
    ap.add_argument("--layouts", default="packed,decoupled")
    ap.add_argument("--pattern", default="cluster",
                    help="comma list of cluster, uniform, expire, upsert")
    ap.add_argument("--deletes", default="inplace",
                    help="comma list of inplace, inplace-search, inplace-nearest, consolidate")
    ap.add_argument("--replace", type=int, default=3,
                    help="in-place deletes: edges added per edge lost")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--search-l", type=int, default=64)
    ap.add_argument("--extra-l", default=None,
                    help="more list sizes at which recall is measured (merged and fresh), each "
                         "≥ 10; default L/4,L/2 where ≥ 10, else 2L,4L (16,32 at L 64)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--work", default=str(REPO_ROOT / "bench" / "out" / "streaming-work"))
    ap.add_argument("--results", default="streaming",
                    help="report name: bench/results/NAME.md and NAME-<dataset>.png")
    ap.add_argument("--inputs", default=None,
                    help="glob of result JSON files to report (default: a run's own files; "
                         "with --report-only every bench/out/streaming-*.json)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    patterns = choices(ap, args.pattern, PATTERNS, "--pattern")
    deletes = choices(ap, args.deletes, DELETES, "--deletes")
    if args.search_l < 10:
        ap.error(f"--search-l {args.search_l}: recall@10 needs L ≥ 10")
    if args.extra_l is None:
        args.extra_l = default_extra_l(args.search_l)
    else:
        try:
            args.extra_l = [int(x) for x in args.extra_l.split(",") if x]
        except ValueError:
            ap.error(f"--extra-l {args.extra_l!r}: expected a comma list of integers")
        if any(x < 10 for x in args.extra_l):
            ap.error(f"--extra-l {min(args.extra_l)}: recall@10 needs L ≥ 10 (a smaller L "
                     "would be searched at 10 and repeat the L 10 figures)")
    if "/" in args.results or not args.results:
        ap.error("--results: a plain name (the report goes to bench/results/NAME.md)")
    written: list[Path] = []
    if not args.report_only:
        build_example()
        for name in args.datasets:
            for layout in args.layouts.split(","):
                for pattern in patterns:
                    for d in deletes:
                        written.append(run(name, layout, pattern, d, args))
    if args.inputs:
        paths = [Path(p) for p in glob.glob(args.inputs)]
    elif args.report_only:
        paths = [p for p in OUT_DIR.glob("streaming-*.json")]
    else:
        paths = written
    report(paths, args.results, sys.argv[1:])


if __name__ == "__main__":
    main()

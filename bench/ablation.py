#!/usr/bin/env python3
"""OctopusANN's design-space ablation on one dataset, in one run: `trawl bench --ablation`
repeated with the configurations in alternating order, medians per configuration and list
size, the acceptance figures, and the paper's figures. Within one repetition the measurement
is paired: list sizes outer, every configuration inner (in alternating order), so the points
compared at one list size are taken seconds apart.

The index (R = 64, L = 100, 48 PQ bytes) is built once per dataset with OctopusANN's MemGraph
(a 0.1% sample graph, R = 48, L = 128) as its entry index; `trawl bench --ablation` writes
the PageShuffle and All-in-Storage layouts of the same graph beside it on first use.

Configurations (see `trawl bench --help`, --ablation): Baseline (beam search, W = 8 as in the
paper), Cache (0.1% of the nodes by visit frequency), MemGraph (entry list 10), PageShuffle,
PageSearch, DynamicWidth (4,4,8,8,16,16,24,24,32 per 5 explored positions, cap 32), Pipeline
(PipeSearch at fixed width 8), C1 = PS+PSe, C2 = Pipe+DW (PipeSearch's dynamic width 4..32),
C3 = MemG+PS+PSe, C4 = MemG+Pipe+DW, C5 = MemG+PS+PSe+DW (OctopusANN), AllInStorage.

Usage:
  python3 bench/ablation.py glove-400k --repeat 2
  python3 bench/ablation.py gen-1m --repeat 2
  python3 bench/ablation.py glove-400k --report-only

Writes bench/out/ablation-<dataset>/{rep*/, ablation.json (medians), ablation.md, *.png}.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import (OUT_DIR, build_trawl_index, log, machine_info, trawl_bin,  # noqa: E402
                    write_json)
from plot_ablation import at_recall  # noqa: E402
from vs_diskann_disk import subset  # noqa: E402

LS = "10,15,20,25,30,40,50,60,80"
ORDER = ["Baseline", "Cache", "MemGraph", "PageShuffle", "PageSearch", "DynamicWidth",
         "Pipeline", "C1", "C2", "C3", "C4", "C5", "AllInStorage"]
NUM = ("recall", "qps", "pages_per_query", "ios_per_query", "hops_per_query",
       "records_read_per_query", "page_hits_per_query", "io_utilisation",
       "cache_hits_per_query", "io_wait_us_per_query", "compute_us_per_query")


def build(ds: datasets.Dataset, args: argparse.Namespace) -> Path:
    # OctopusANN's MemGraph as the entry index.
    return build_trawl_index(ds, "trawl-octopus", args, [
        "--entry-ratio", "0.001", "--entry-degree", "48", "--entry-build-list", "128",
        "--entry-sampling", args.sampling])


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def median_runs(reps: list[dict]) -> dict:
    """One ablation JSON whose rows are the medians over the repetitions."""
    out = json.loads(json.dumps(reps[0]))
    by_name = {r["name"]: r for r in out["runs"]}
    for name, run in by_name.items():
        rows_by_l: dict[int, list[dict]] = {}
        for rep in reps:
            for r in rep["runs"]:
                if r["name"] == name:
                    for row in r["rows"]:
                        rows_by_l.setdefault(row["L"], []).append(row)
        rows = []
        for L, rs in sorted(rows_by_l.items()):
            m = {"L": L, **{k: med(r.get(k) for r in rs) for k in NUM}}
            m["latency_us"] = {"mean": med(r["latency_us"]["mean"] for r in rs),
                               "p99": med(r["latency_us"]["p99"] for r in rs)}
            rows.append(m)
        run["rows"] = rows
    out["repetitions"] = len(reps)
    return out


def fmt(v, f="{:.0f}"):
    return "—" if v is None else f.format(v)


def human(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{b} B"
        b /= 1024


def render(dataset: str, doc: dict, meta: dict) -> str:
    runs = {r["name"]: r for r in doc["runs"]}
    base = runs.get("Baseline")
    lines = [f"# OctopusANN ablation: {dataset}", "",
             f"{meta['n']} × {meta['dim']}, {meta['metric']}; {doc['queries']} queries, k = 10, "
             f"{doc['threads']} threads, O_DIRECT; index R = {meta['R']}, L = {meta['L']}, "
             f"{meta['pq_bytes']} PQ bytes, MemGraph 0.1% ({meta['sampling']}), R = 48, L = 128. "
             f"Medians of {doc['repetitions']} repetitions; in each, list sizes outer and the "
             f"configurations inner, in alternating order (paired). "
             f"{meta['when']}.", ""]
    for target in (0.90, 0.95):
        lines += [f"## recall@10 = {target:.2f}", "",
                  "| config | L | QPS | × Baseline | mean µs | pages/q | × Baseline | I/Os/q | "
                  "U_io | memory | disk | command |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        bq = at_recall(base["rows"], "qps", target) if base else None
        bp = at_recall(base["rows"], "pages_per_query", target) if base else None
        for name in ORDER:
            if name not in runs:
                continue
            r = runs[name]
            g = lambda k: at_recall(r["rows"], k, target)  # noqa: E731
            q, p = g("qps"), g("pages_per_query")
            lat = at_recall([{**x, "mean": x["latency_us"]["mean"]} for x in r["rows"]], "mean",
                            target)
            lines.append(
                f"| {name} | {fmt(g('L'), '{:.1f}')} | {fmt(q)} | "
                f"{fmt(q / bq if q and bq else None, '{:.2f}')} | {fmt(lat)} | "
                f"{fmt(p, '{:.1f}')} | {fmt(p / bp if p and bp else None, '{:.2f}')} | "
                f"{fmt(g('ios_per_query'), '{:.1f}')} | {fmt(g('io_utilisation'), '{:.3f}')} | "
                f"{human(r['memory_bytes'])} | {human(r['disk_bytes'])} | `{r['command']}` |")
        lines.append("")
    c5 = runs.get("C5")
    if c5 and base:
        q = at_recall(c5["rows"], "qps", 0.90)
        bq = at_recall(base["rows"], "qps", 0.90)
        p = at_recall(c5["rows"], "pages_per_query", 0.90)
        bp = at_recall(base["rows"], "pages_per_query", 0.90)
        lines += ["## Acceptance (recall@10 = 0.90)", "",
                  f"- C5 pages per query / Baseline: {fmt(p / bp if p and bp else None, '{:.3f}')} "
                  "(target ≤ 0.6)",
                  f"- C5 QPS / Baseline: {fmt(q / bq if q and bq else None, '{:.3f}')} "
                  "(target ≥ 1.5)", ""]
    lines += findings(doc)
    return "\n".join(lines) + "\n"


def pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else None


def findings(doc: dict) -> list[str]:
    """The figures each of OctopusANN's Findings 2-11 is about, from this run (the verdicts,
    agree or not, are written by hand in the README from these)."""
    runs = {r["name"]: r for r in doc["runs"]}
    if "Baseline" not in runs:
        return []

    def ratio(name, key, t):
        if name not in runs:
            return None
        a = at_recall(runs[name]["rows"], key, t)
        b = at_recall(runs["Baseline"]["rows"], key, t)
        return a / b if a and b else None

    def both(name, t=0.90):
        q, p = ratio(name, "qps", t), ratio(name, "pages_per_query", t)
        return f"{name} {fmt(q, '{:.2f}')}× QPS / {fmt(p, '{:.2f}')}× pages"

    out = ["## Figures behind the paper's Findings (recall@10 = 0.90 unless said; × Baseline)", ""]
    pts = [(x["latency_us"]["mean"], x["ios_per_query"]) for n, r in runs.items()
           if n != "AllInStorage" for x in r["rows"]]
    rr = pearson([p[1] for p in pts], [p[0] for p in pts])
    out.append(f"- F2 (I/O sets latency): Pearson r between I/Os per query and mean latency over "
               f"every sweep point of every configuration but All-in-Storage: {fmt(rr, '{:.3f}')} "
               f"({len(pts)} points).")
    singles = ["Cache", "MemGraph", "PageShuffle", "PageSearch", "DynamicWidth", "Pipeline"]
    ranked = sorted((s for s in singles if ratio(s, "qps", 0.90)),
                    key=lambda s: -ratio(s, "qps", 0.90))
    out.append("- F3 (memory layout and DynamicWidth strongest alone), single factors by QPS: "
               + "; ".join(both(s) for s in ranked) + ".")
    out.append(f"- F4 (PageShuffle, PageSearch weak alone): {both('PageShuffle')}; "
               f"{both('PageSearch')}.")
    out.append(f"- F5 (Pipeline counterproductive under concurrency): {both('Pipeline')}.")
    out.append(f"- F8 (PS + PSe synergy; more with MemGraph): {both('C1')} vs {both('PageShuffle')},"
               f" {both('PageSearch')}; {both('C3')} vs {both('MemGraph')}.")
    out.append(f"- F9 (DW dominates Pipe + DW): {both('C2')} vs {both('DynamicWidth')}; "
               f"{both('C4')} vs {both('C5')}.")
    best = {t: max((n for n in runs if n != "Baseline" and ratio(n, "qps", t)),
                   key=lambda n: ratio(n, "qps", t), default=None) for t in (0.90, 0.95)}
    out.append(f"- F10 (C5 best overall): highest QPS at 0.90 {best[0.90]} "
               f"({fmt(ratio(best[0.90], 'qps', 0.90) if best[0.90] else None, '{:.2f}')}×), "
               f"at 0.95 {best[0.95]} "
               f"({fmt(ratio(best[0.95], 'qps', 0.95) if best[0.95] else None, '{:.2f}')}×); "
               f"fewest pages: " + min((n for n in runs if ratio(n, "pages_per_query", 0.90)),
                                       key=lambda n: ratio(n, "pages_per_query", 0.90)) + ".")
    out.append(f"- F11 (gains largest at moderate recall): C5 {fmt(ratio('C5', 'qps', 0.90), '{:.2f}')}"
               f"× QPS at 0.90, {fmt(ratio('C5', 'qps', 0.95), '{:.2f}')}× at 0.95.")
    reps = doc.get("per_repetition_c5")
    if reps:
        out += ["", "C5 / Baseline at recall@10 = 0.90 in each repetition (QPS, pages): "
                + "; ".join(f"{q:.2f} / {p:.3f}" for q, p in reps) + "."]
    return out + [""]


def per_rep_c5(reps: list[dict]) -> list[tuple[float, float]]:
    out = []
    for rep in reps:
        runs = {r["name"]: r for r in rep["runs"]}
        if "C5" in runs and "Baseline" in runs:
            b, c = runs["Baseline"]["rows"], runs["C5"]["rows"]
            vals = [at_recall(c, k, 0.90) / at_recall(b, k, 0.90)
                    if at_recall(c, k, 0.90) and at_recall(b, k, 0.90) else float("nan")
                    for k in ("qps", "pages_per_query")]
            out.append(tuple(vals))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--pq-bytes", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2, help="build and search threads")
    ap.add_argument("-W", type=int, default=8, help="baseline beam width (the paper's 8)")
    ap.add_argument("--sampling", default="uniform", choices=["uniform", "freq"])
    ap.add_argument("--search-L", default=LS)
    ap.add_argument("--nq", type=int, default=5000,
                    help="queries: a seeded random sample (GloVe's query file is in word "
                         "frequency order, its first queries far easier); 0 = all")
    ap.add_argument("--configs", default=",".join(ORDER))
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--append", action="store_true",
                    help="add --repeat repetitions to the ones already under bench/out "
                         "(same index and settings) instead of starting over")
    args = ap.parse_args()
    out = OUT_DIR / f"ablation-{args.dataset}"
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "meta.json"
    if not args.report_only:
        ds = datasets.prepare(args.dataset)
        idx = build(ds, args)
        names = [c for c in args.configs.split(",") if c]
        q, gt = Path(ds.query), Path(ds.gt)
        if args.nq:
            q, gt = subset(q, gt, args.nq, Path(ds.base).parent / "subsets")
        meta = {"n": ds.n, "dim": ds.dim, "metric": ds.metric, "R": args.R, "L": args.L,
                "pq_bytes": args.pq_bytes, "sampling": args.sampling, "index": str(idx),
                "machine": machine_info(),
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        if args.append and meta_path.exists():
            meta["when"] = json.loads(meta_path.read_text())["when"] + " and " + meta["when"]
        write_json(meta_path, meta)
        first = len(list(out.glob("rep*/ablation.json"))) if args.append else 0
        if not args.append:
            for old in out.glob("rep*"):
                shutil.rmtree(old, ignore_errors=True)
        for rep in range(first, first + args.repeat):
            order = names if rep % 2 == 0 else list(reversed(names))
            rep_dir = out / f"rep{rep}"
            log(f"repetition {rep + 1}/{first + args.repeat}: {','.join(order)}")
            cmd = [str(trawl_bin()), "bench", str(idx), "--queries", str(q), "--gt", str(gt),
                   "-k", "10", "-L", args.search_L, "--threads", str(args.threads),
                   "-W", str(args.W), "--ablation",
                   "--ablation-out", str(rep_dir), "--ablation-configs", ",".join(order),
                   "--quiet"]
            t0 = time.time()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            log(f"  {time.time() - t0:.0f} s")
    meta = json.loads(meta_path.read_text())
    reps = [json.loads(p.read_text()) for p in sorted(out.glob("rep*/ablation.json"))]
    if not reps:
        raise SystemExit(f"no runs under {out}")
    doc = median_runs(reps)
    doc["per_repetition_c5"] = per_rep_c5(reps)
    write_json(out / "ablation.json", doc)
    md = render(args.dataset, doc, meta)
    (out / "ablation.md").write_text(md)
    print(md)
    plot_py = Path(__file__).resolve().parent / ".venv-plot" / "bin" / "python"
    py = str(plot_py) if plot_py.exists() else sys.executable
    subprocess.run([py, str(Path(__file__).resolve().parent / "plot_ablation.py"),
                    str(out / "ablation.json"), "--title", args.dataset], check=False)
    log(f"wrote {out}/ablation.{{md,json}} and figures")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""RaBitQ against (O)PQ on one dataset: graph indexes that differ only in their quantiser
(same R, L, α, seed), searched side by side — every repetition runs each index's L sweep in
turn (O_DIRECT, 2 threads by default) — and compared at recall@10 = 0.95 (QPS, pages, hops
interpolated linearly between the two L values around it; medians over repetitions).

    python3 bench/rabitq.py --tag minilm-200k --metric cosine \
        --base .bench-cache/pypi-labelled/base.fbin --queries .bench-cache/pypi-labelled/queries.fbin \
        --config opq60="--pq-bytes 60 --opq" --config rbq1="--quant rabitq --bits 1" \
        -L 20,30,40,60,80,120,160 --reps 3

Indexes are built once into `<cache>/<tag>/rabitq-<name>` (kept between runs), the ground truth
of the first `--nq` queries into `<cache>/<tag>/rabitq-gt.bin`. Writes
`bench/results/rabitq-<tag>.{json,md}`. The binary is $TRAWL_BIN, else cargo's release build.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from common import cache_dir, log, machine_info, read_fbin, trawl_bin, write_fbin, write_json

HERE = Path(__file__).resolve().parent


def build(trawl, base, metric, flags, out, r, l):
    if (out / "manifest.trawl").exists():
        return json.loads((out / "build.json").read_text()) if (out / "build.json").exists() else {}
    rep = out.with_suffix(".build.json")
    cmd = [trawl, "build", str(base), str(out), "--metric", metric, "-R", str(r), "-L", str(l),
           "--report", str(rep), "--quiet"] + flags
    log(" ".join(cmd))
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    info = json.loads(rep.read_text())
    info["wall_secs"] = time.time() - t0
    (out / "build.json").write_text(json.dumps(info))
    return info


def bench(trawl, index, queries, gt, ls, threads, extra):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        cmd = [trawl, "bench", str(index), "--queries", str(queries), "--gt", str(gt), "-k", "10",
               "-L", ",".join(map(str, ls)), "--threads", str(threads), "--json", out,
               "--quiet"] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def at_recall(rows, target, key):
    """`key` interpolated at recall `target` on the recall curve (None when never reached)."""
    pts = sorted((r["recall"], r[key]) for r in rows)
    for (r0, v0), (r1, v1) in zip(pts, pts[1:]):
        if r0 <= target <= r1 and r1 > r0:
            return v0 + (v1 - v0) * (target - r0) / (r1 - r0)
    if pts and pts[0][0] >= target:
        return pts[0][1]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", required=True)
    ap.add_argument("--base", required=True, type=Path)
    ap.add_argument("--queries", required=True, type=Path)
    ap.add_argument("--metric", required=True)
    ap.add_argument("--config", action="append", required=True, help='NAME="build flags"')
    ap.add_argument("-L", "--list-sizes", default="20,30,40,60,80,120,160")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("--build-L", type=int, default=100)
    ap.add_argument("--search-flags", default="", help="extra `trawl bench` flags, all sides")
    args = ap.parse_args()
    trawl = str(trawl_bin())
    work = cache_dir() / args.tag
    work.mkdir(parents=True, exist_ok=True)
    q = work / f"rabitq-q{args.nq}.fbin"
    if not q.exists():
        write_fbin(q, np.asarray(read_fbin(args.queries)[: args.nq]))
    gt = work / f"rabitq-gt{args.nq}.bin"
    if not gt.exists():
        subprocess.run([trawl, "gt", str(args.base), str(q), "--metric", args.metric, "-k", "10",
                        "-o", str(gt), "--quiet"], check=True)
    configs = [c.split("=", 1) for c in args.config]
    builds = {}
    for name, flags in configs:
        builds[name] = build(trawl, args.base, args.metric, shlex.split(flags),
                             work / f"rabitq-{name}", args.R, args.build_L)
    ls = [int(x) for x in args.list_sizes.split(",")]
    runs = {name: [] for name, _ in configs}
    code_bytes = {}
    for rep in range(args.reps):
        for name, _ in configs:
            log(f"rep {rep + 1}/{args.reps}: {name}")
            j = bench(trawl, work / f"rabitq-{name}", q, gt, ls, args.threads,
                      shlex.split(args.search_flags))
            runs[name].append(j["rows"])
            code_bytes[name] = j["pq_bytes"]
    summary = {}
    for name, flags in configs:
        def med(key):
            return [statistics.median(r[i][key] for r in runs[name]) for i in range(len(ls))]
        rows = [{"L": l, "recall": runs[name][0][i]["recall"], "qps": q_, "pages": p, "hops": h,
                 "pq_us": c}
                for i, (l, q_, p, h, c) in enumerate(zip(
                    ls, med("qps"), med("pages_per_query"), med("hops_per_query"),
                    med("pq_score_us_per_query")))]
        per_rep = [at_recall(r, args.target, "qps") for r in runs[name]]
        vals = [v for v in per_rep if v is not None]
        b = builds[name]
        summary[name] = {
            "flags": flags,
            "code_bytes": code_bytes[name],
            "build_secs": b.get("wall_secs"),
            "rows": rows,
            "qps_at_target": per_rep,
            "qps_at_target_median": statistics.median(vals) if vals else None,
            "pages_at_target": at_recall(rows, args.target, "pages"),
            "hops_at_target": at_recall(rows, args.target, "hops"),
            "runs": runs[name],
        }
    out = {"tag": args.tag, "metric": args.metric, "target": args.target, "nq": args.nq,
           "threads": args.threads, "reps": args.reps, "list_sizes": ls, "R": args.R,
           "build_L": args.build_L, "machine": machine_info(), "configs": summary,
           "search_flags": args.search_flags}
    res = HERE / "results"
    write_json(res / f"rabitq-{args.tag}.json", out)
    lines = [f"# RaBitQ vs PQ/OPQ: {args.tag} ({args.metric}), recall@10 = {args.target}", "",
             f"{args.nq} queries, {args.threads} threads, O_DIRECT, R {args.R}, build L "
             f"{args.build_L}, {args.reps} paired repetitions (medians); CPU "
             f"{out['machine'].get('cpu_model', '?')}.", "",
             "| config | build flags | code bytes | QPS @ target | pages @ target | hops @ target |",
             "|---|---|---:|---:|---:|---:|"]
    fmt = lambda v, f="{:.0f}": "—" if v is None else f.format(v)  # noqa: E731
    for name, s in summary.items():
        lines.append(f"| {name} | `{s['flags']}` | {s['code_bytes']} | "
                     f"{fmt(s['qps_at_target_median'])} | {fmt(s['pages_at_target'], '{:.1f}')} | "
                     f"{fmt(s['hops_at_target'], '{:.1f}')} |")
    lines += ["", "Recall by L (first repetition) and median QPS:", "",
              "| config | " + " | ".join(f"L {l}" for l in ls) + " |",
              "|---|" + "---:|" * len(ls)]
    for name, s in summary.items():
        lines.append(f"| {name} | " + " | ".join(f"{r['recall']:.3f} / {r['qps']:.0f}"
                                                 for r in s["rows"]) + " |")
    (res / f"rabitq-{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The GPU kit's report: merges the JSON the steps of bench/gpu/kit.sh wrote into kit.json and
renders kit.md (environment, steps, equality tests, the filter stage and flash step GPU vs CPU,
flash and IVF searches end to end). Standard library only: it runs on the GPU machine.

    report.py --work DIR --stage DIR --out DIR --gpu 0|1 [--check]

--check (the dry run's): fails unless every step ran and passed, the tests passed, and every
output the steps should have written is there, parses and holds figures. --require-gpu: fails
when no GPU adapter opened.
"""

import argparse
import glob
import json
import math
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def steps(work):
    rows = []
    try:
        with open(os.path.join(work, "steps.tsv")) as f:
            for line in f:
                name, rc, secs = line.rstrip("\n").split("\t")
                rows.append({"step": name, "status": rc, "seconds": float(secs)})
    except (OSError, ValueError):
        pass
    return rows


def tests(out):
    try:
        text = open(os.path.join(out, "tests.log")).read()
    except OSError:
        return {"results": [], "skips": 0, "failed": True}
    results = []
    for m in re.finditer(r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored", text):
        results.append({"result": m.group(1), "passed": int(m.group(2)),
                        "failed": int(m.group(3)), "ignored": int(m.group(4))})
    return {
        "results": results,
        "skips": text.count("skipping a GPU test"),
        "failed": "FAILED" in text or any(r["result"] != "ok" for r in results) or len(results) < 2,
    }


def bench_summary(path):
    """A `trawl bench --json` file reduced to what the report shows."""
    d = load(path)
    if d is None:
        return None
    tag = os.path.basename(path)[: -len(".json")]
    flash = d.get("flash") or {}
    accel = (flash.get("accel") or d.get("accel") or {})
    rows = []
    for r in d.get("rows", []):
        lat = r.get("latency_us", {})
        rows.append({
            "L": r.get("L"), "recall": r.get("recall"), "qps": r.get("qps"),
            "mean_us": lat.get("mean"), "p50_us": lat.get("p50"), "p99_us": lat.get("p99"),
            "pages_per_query": r.get("pages_per_query"), "ios_per_query": r.get("ios_per_query"),
        })
    return {
        "run": tag, "kind": d.get("kind"), "engine": (d.get("engine") or {}).get("name"),
        "direct": (d.get("engine") or {}).get("direct"),
        "threads": d.get("threads"), "flash_batch": flash.get("batch"),
        "accel_batch": d.get("accel_batch"),
        "accel": accel.get("backend"), "adapter": accel.get("adapter"),
        "queries": d.get("queries"), "rows": rows,
    }


def fmt(x, digits=0):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def filter_table(ab):
    pts = (ab or {}).get("filter", {}).get("points", [])
    if not pts:
        return ["(not measured)"]
    by = {}
    for p in pts:
        by.setdefault(p["batch"], {})[p["backend"]] = p
    out = ["| queries per batch | CPU queries/s | GPU queries/s | GPU, 2 batches in flight | GPU/CPU | CPU distances/s | GPU distances/s (2 in flight) | GPU = CPU |",
           "|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for b in sorted(by):
        c, g = by[b].get("cpu", {}), by[b].get("gpu", {})
        gq = g.get("pipelined_queries_per_s")
        out.append(f"| {b} | {fmt(c.get('queries_per_s'))} | {fmt(g.get('queries_per_s'))} | {fmt(gq)} | "
                   f"{ratio(gq, c.get('queries_per_s'))} | {fmt(c.get('distances_per_s'))} | "
                   f"{fmt(g.get('pipelined_distances_per_s'))} | {g.get('equal_to_cpu', '–')} |")
    return out


def flash_table(ab):
    pts = (ab or {}).get("flash", {}).get("points", [])
    if not pts:
        return ["(not measured)"]
    by = {}
    for p in pts:
        by.setdefault(p["slots"], {})[p["backend"]] = p
    out = ["| slots | CPU ms/step | GPU ms/step | CPU expansions/s | GPU expansions/s | GPU/CPU | GPU distances/s | GPU = CPU |",
           "|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for s in sorted(by):
        c, g = by[s].get("cpu", {}), by[s].get("gpu", {})
        out.append(f"| {s} | {fmt(c.get('step_ms'), 3)} | {fmt(g.get('step_ms'), 3)} | "
                   f"{fmt(c.get('expansions_per_s'))} | {fmt(g.get('expansions_per_s'))} | "
                   f"{ratio(g.get('expansions_per_s'), c.get('expansions_per_s'))} | "
                   f"{fmt(g.get('distances_per_s'))} | {g.get('equal_to_cpu', '–')} |")
    return out


def search_table(runs):
    if not runs:
        return ["(not measured)"]
    best_cpu = {}
    for r in runs:
        for row in r["rows"]:
            if r["accel"] == "cpu" or r["kind"] == "ivf" and "-cpu-" in r["run"]:
                key = (r["engine"], r["kind"], row["L"])
                best_cpu[key] = max(best_cpu.get(key, 0), row["qps"] or 0)
    out = ["| run | engine | accel | threads | batch | L / nprobe | recall@10 | QPS | vs best CPU | mean µs | p99 µs | pages/query |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        accel = r["accel"] or ("gpu" if "-gpu-" in r["run"] else "cpu")
        batch = r["flash_batch"] if r["kind"] != "ivf" else r["accel_batch"]
        for row in r["rows"]:
            cpu = best_cpu.get((r["engine"], r["kind"], row["L"]))
            out.append(f"| {r['run']} | {r['engine']}{' (O_DIRECT)' if r['direct'] else ''} | {accel} | "
                       f"{r['threads']} | {batch if batch is not None else '–'} | {row['L']} | "
                       f"{fmt(row['recall'], 4)} | {fmt(row['qps'])} | {ratio(row['qps'], cpu)} | "
                       f"{fmt(row['mean_us'])} | {fmt(row['p99_us'])} | {fmt(row['pages_per_query'], 1)} |")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--stage", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--require-gpu", action="store_true")
    a = ap.parse_args()

    stage = load(os.path.join(a.stage, "STAGE.json")) or {}
    accel = load(os.path.join(a.work, "accel.json"))
    ab = load(os.path.join(a.work, "accel-bench.json"))
    runs = {}
    for group in ("flash", "disk"):
        files = sorted(glob.glob(os.path.join(a.work, f"{group}-*.json")))
        runs[group] = [s for s in map(bench_summary, files) if s is not None]
    st = steps(a.work)
    ts = tests(a.out)
    try:
        env = open(os.path.join(a.out, "env.txt")).read()
    except OSError:
        env = ""
    kit = {"stage": stage, "gpu_measured": a.gpu == "1", "accel": accel, "steps": st,
           "tests": ts, "accel_bench": ab, "flash": runs["flash"], "disk": runs["disk"],
           "env": env}
    with open(os.path.join(a.out, "kit.json"), "w") as f:
        json.dump(kit, f, indent=1)

    host = (ab or {}).get("host", {})
    md = ["# trawl GPU kit report", ""]
    if accel and a.gpu == "1":
        md.append(f"GPU: **{accel.get('adapter')}**. Host: {host.get('cpu', '?')}, {host.get('cores', '?')} cores.")
    else:
        md.append(f"**No usable GPU**: only the CPU sides were measured (what was found: the environment below). "
                  f"Host: {host.get('cpu', '?')}, {host.get('cores', '?')} cores.")
    md += ["", f"Staged from commit `{stage.get('commit', '?')[:12]}` ({stage.get('profile', '?')} profile, "
           f"{stage.get('size', '?')} data: {json.dumps(stage.get('data', {}))}; staged "
           f"{stage.get('staged_bytes', 0) / 2**20:.1f} MiB).", "",
           "## Environment", "", "```", env.strip(), "```", "",
           "## Steps", "", "| step | exit status | seconds |", "|---|---:|---:|"]
    md += [f"| {s['step']} | {s['status']} | {s['seconds']:.1f} |" for s in st]
    md += ["", "## GPU-vs-CPU equality tests", ""]
    md += [f"- {r['result']}: {r['passed']} passed, {r['failed']} failed, {r['ignored']} ignored" for r in ts["results"]]
    md += [f"- GPU tests skipped (no adapter): {ts['skips']}", ""]
    if ab:
        md += [f"## FusionANNS filter stage (`trawl accel-bench`: n {ab.get('n')}, M {ab.get('m')}, "
               f"{ab.get('filter', {}).get('cands', '?')} candidates per query, top {ab.get('filter', {}).get('top_n', '?')}; "
               f"CPU backend on {ab.get('threads')} threads)", ""]
        md += filter_table(ab)
        fl = ab.get("flash", {})
        md += ["", f"## FlashANNS step (`trawl accel-bench`: L {fl.get('list')}, degree {fl.get('degree')}, "
               f"{fl.get('query_steps')} steps per query; the CPU backend's slots split over {ab.get('threads')} threads)", ""]
        md += flash_table(ab)
        errors = [p for st in ("filter", "flash") for p in (ab.get(st) or {}).get("points", []) if "error" in p]
        if errors:
            md += ["", "GPU points that failed: " + "; ".join(
                f"{p.get('batch', p.get('slots'))}: {p['error']}" for p in errors)]
        if ab.get("skipped"):
            md += ["", "Not measured: " + "; ".join(f"{s['stage']} on the {s['backend']}: {s['reason']}" for s in ab["skipped"])]
    md += ["", "## Flash search end to end, no disk (`--engine memory`, `--engine sim:80`)", ""]
    md += search_table(runs["flash"])
    try:
        with open(os.path.join(a.out, "kit.log"), errors="replace") as f:
            unfit = sorted({ln.strip() for ln in f if "does not fit this device" in ln})
    except OSError:
        unfit = []
    if unfit:
        md += ["", "Not measured (the batch's buffers pass one binding of this device; kit.log has "
               "the error): " + "; ".join(unfit)]
    md += ["", "## End to end on the device's disk (O_DIRECT): IVF and flash", ""]
    md += search_table(runs["disk"])
    md.append("")
    with open(os.path.join(a.out, "kit.md"), "w") as f:
        f.write("\n".join(md))

    problems = [f"step {s['step']}: {s['status']}" for s in st if s["status"] not in ("0", "skipped")]
    if a.require_gpu and a.gpu != "1":
        problems.append("no GPU adapter opened (TRAWL_REQUIRE_GPU=1)")
    if a.check:
        names = {s["step"] for s in st}
        for want in ("env", "accel-info", "tests", "accel", "flash-memory", "flash-sim", "disk"):
            if want not in names:
                problems.append(f"step {want} did not run")
        problems += [f"step {s['step']} was skipped" for s in st if s["status"] == "skipped"]
        if ts["failed"]:
            problems.append("the equality tests failed or did not run")
        if not accel or "backend" not in accel or "adapters" not in accel:
            problems.append("trawl info --accel --json did not parse")
        backends = {"cpu", "gpu"} if a.gpu == "1" else {"cpu"}
        for stage_name, key in (("filter", "batch"), ("flash", "slots")):
            pts = ((ab or {}).get(stage_name) or {}).get("points", [])
            got = {p["backend"] for p in pts}
            if got != backends or any(not (p.get("distances_per_s") or 0) > 0 for p in pts):
                problems.append(f"accel-bench {stage_name}: backends {sorted(got)}, figures missing")
            if any(p.get("equal_to_cpu") is False for p in pts):
                problems.append(f"accel-bench {stage_name}: the GPU disagreed with the CPU")
        sides = ["cpu", "gpu"] if a.gpu == "1" else ["cpu"]
        want = [f"flash-{e}-{b}-" for e in ("memory", "sim-80") for b in sides]
        want += [f"disk-{k}-{b}-" for k in ("ivf", "flash") for b in sides]
        all_runs = runs["flash"] + runs["disk"]
        for prefix in want:
            if not any(r["run"].startswith(prefix) for r in all_runs):
                problems.append(f"no run {prefix}*")
        for r in all_runs:
            if not r["rows"] or not all((row["recall"] or 0) > 0.5 and (row["qps"] or 0) > 0
                                        for row in r["rows"]):
                problems.append(f"run {r['run']}: no figures, or recall@10 at most 0.5")
    for p in problems:
        print(f"report: {p}", file=sys.stderr)
    print(f"report: {os.path.join(a.out, 'kit.md')} ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

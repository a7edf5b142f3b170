#!/usr/bin/env python3
"""The service under load: `trawl serve` against the same searches in-process, on loopback.

Starts `trawl serve` (read-only, 2 search threads, O_DIRECT) on a graph index of the dataset,
then runs the Rust load generator (`crates/trawl-serve/examples/serve_load.rs`), which
alternates, `--reps` times:

- batch search: every query in-process on 2 threads against the binary endpoint (`.npy`
  bodies of `--batch` queries on 2 keep-alive connections, raw answers) — QPS each;
- single queries: one at a time in-process against one at a time over one keep-alive
  connection — latency percentiles each (the p50 difference is the service's overhead);

and then an overload: `--clients` keep-alive clients sending single queries for
`--overload-secs` (a 429 makes a client back off `--backoff-ms`, jittered): every status
counted, timeouts and connection errors too, and the admitted requests' p99 against the
unloaded p99. Bounded in count and time; writes bench/results/serve-<dataset>.md, the raw
JSON in bench/out/ and a plot (with matplotlib: bench/.venv-plot).

Usage:
  python3 bench/serve.py glove-400k [--nq 2000] [--reps 3] [--clients 64] [--overload-secs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (REPO_ROOT, cache_dir, import_pyplot, log, read_fbin,  # noqa: E402
                    trawl_bin, write_fbin)


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def dataset(name: str) -> dict:
    d = cache_dir() / name
    meta = d / "meta.json"
    if not (d / "base.fbin").exists():
        out = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "datasets.py"), name],
                             check=True, capture_output=True, text=True).stdout
        json.loads(out)
    m = json.loads(meta.read_text())
    return {"dir": d, "base": d / "base.fbin", "query": d / "query.fbin", "metric": m["metric"]}


def index(ds: dict, args) -> Path:
    out = ds["dir"] / f"serve-idx-R{args.R}-L{args.L_build}-pq{args.pq}"
    if (out / "manifest.trawl").exists():
        return out
    log(f"building {out}")
    subprocess.run([str(trawl_bin()), "build", str(ds["base"]), str(out), "--metric", ds["metric"],
                    "-R", str(args.R), "-L", str(args.L_build), "--pq-bytes", str(args.pq)],
                   check=True)
    return out


def example_bin() -> Path:
    log("building the load generator (cargo build --release --example serve_load)")
    subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "trawl-serve",
                    "--example", "serve_load"], cwd=REPO_ROOT, check=True)
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                                     cwd=REPO_ROOT, capture_output=True, text=True,
                                     check=True).stdout)
    return Path(meta["target_directory"]) / "release" / "examples" / "serve_load"


def start_server(ix: Path, args, log_path: Path):
    cmd = [str(trawl_bin()), "serve", f"bench={ix}", "--read-only", "--listen", "127.0.0.1:0",
           "--search-threads", str(args.threads)]
    if args.queue:
        cmd += ["--queue", str(args.queue)]
    cmd += args.server_args.split()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True)
    line = p.stdout.readline()
    url = line.split()[2]
    for _ in range(3000):
        try:
            urllib.request.urlopen(url + "/readyz", timeout=5)
            return p, url
        except Exception:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError(f"the server never became ready: {log_path.read_text()}")


def plot(res: dict, path: Path) -> bool:
    plt = import_pyplot("serve.py")
    if plt is None:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    reps = range(1, len(res["batch_qps_in_process"]) + 1)
    w = 0.38
    a.bar([r - w / 2 for r in reps], res["batch_qps_in_process"], w, label="in-process")
    a.bar([r + w / 2 for r in reps], res["batch_qps_remote"], w, label="served (binary)")
    a.set_xlabel("repetition")
    a.set_ylabel("QPS")
    a.set_title(f"batch search, {res['threads']} search threads")
    a.legend()
    curves = [("in-process, one at a time", res["single_latency_ms_in_process"]),
              ("served, one client", res["single_latency_ms_remote"])]
    for o in res["overload"]:
        curves.append((f"served, {o['clients']} clients, {o['backoff']} (admitted)",
                       o["admitted_latency_ms"]))
    for label, xs in curves:
        xs = np.sort(np.asarray(xs))
        if len(xs):
            b.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=label)
    b.set_xscale("log")
    b.set_xlabel("latency (ms)")
    b.set_ylabel("fraction of queries")
    b.set_title("single-query latency")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def overload_lines(o: dict, res: dict) -> list:
    counts = o["counts"]
    other = {k: v for k, v in counts.items() if k not in ("200", "429")}
    return [
        f"### {o['clients']} clients for {o['secs']:.0f} s, backing off {o['backoff']} after a 429",
        "",
        f"{o['requests_per_sec']:.0f} requests/s answered, {o['admitted_per_sec']:.0f}/s admitted.",
        "",
        "| status | count |",
        "|---|---:|",
        f"| 200 | {counts.get('200', 0)} |",
        f"| 429 | {counts.get('429', 0)} |",
    ] + [f"| {k} | {v} |" for k, v in other.items()] + [
        "",
        f"Only 200 and 429: **{'yes' if not other else 'NO'}**. Admitted p50 "
        f"{o['admitted_p50_ms']:.3f} ms, p99 {o['admitted_p99_ms']:.3f} ms; unloaded (one "
        f"client) p99 {res['unloaded_p99_ms']:.3f} ms: admitted p99 / unloaded p99 = "
        f"**{o['admitted_p99_over_unloaded_p99']:.2f}×** (target ≤ 3×).",
        "",
    ]


def report(res: dict, args, ds_name: str, png: str | None) -> str:
    # Paired statistics: each repetition ran in-process and served back to back.
    ratios = [b / a for a, b in zip(res["batch_qps_in_process"], res["batch_qps_remote"])]
    diffs = [b - a for a, b in zip(res["single_p50_ms_in_process"], res["single_p50_ms_remote"])]
    lines = [
        f"# The service under load: {ds_name}",
        "",
        f"`python3 bench/serve.py {ds_name} --nq {args.nq} --reps {args.reps} --singles "
        f"{args.singles} --clients {args.clients} --overload-secs {args.overload_secs}` — "
        f"{time.strftime('%Y-%m-%d')}, {cpu_name()}, {os.cpu_count()} cores, loopback, O_DIRECT, "
        f"`trawl serve --read-only --search-threads {args.threads}{(' ' + args.server_args) if args.server_args else ''}` (queue: "
        f"{args.queue or 'default, half the threads'}); k {res['k']}, L {res['L']}, {res['nq']} queries; "
        f"in-process and served alternated {res['reps']} times, medians.",
        "",
        "| measure | in-process | served | ratio / difference | target |",
        "|---|---:|---:|---:|---|",
        f"| batch QPS ({res['threads']} threads; served: `.npy` batches of {res['batch']}, "
        f"{res['connections']} connections) | {np.median(res['batch_qps_in_process']):.0f} | "
        f"{np.median(res['batch_qps_remote']):.0f} | {np.median(ratios):.3f}× | ≥ 0.9× |",
        f"| single query p50 (ms; {res['singles']} one at a time) | "
        f"{np.median(res['single_p50_ms_in_process']):.3f} | "
        f"{np.median(res['single_p50_ms_remote']):.3f} | +{np.median(diffs):.3f} ms "
        f"| ≤ +0.3 ms |",
        "",
        "Ratio and difference: medians of the per-repetition pairs (served / in-process QPS: "
        f"{', '.join(f'{x:.3f}' for x in ratios)}; served − in-process p50: "
        f"{', '.join(f'{x:+.3f}' for x in diffs)} ms). The served side's own search time "
        f"(`Server-Timing`) per repetition: {', '.join(f'{x:.3f}' for x in res.get('single_server_search_p50_ms', []))} ms, "
        f"its queue wait {', '.join(f'{x:.3f}' for x in res.get('single_server_queue_p50_ms', []))} ms.",
        "",
        f"Per repetition: batch QPS in-process {', '.join(f'{x:.0f}' for x in res['batch_qps_in_process'])}; "
        f"served {', '.join(f'{x:.0f}' for x in res['batch_qps_remote'])}. Single p50 in-process "
        f"{', '.join(f'{x:.3f}' for x in res['single_p50_ms_in_process'])} ms; served "
        f"{', '.join(f'{x:.3f}' for x in res['single_p50_ms_remote'])} ms. Unloaded served "
        f"latency (one client): p50 {res['unloaded_p50_ms']:.3f} ms, p99 {res['unloaded_p99_ms']:.3f} ms.",
        "",
        "## Overload",
        "",
        "Each client sends single queries on a keep-alive connection, the next as soon as the "
        "last is answered; after a 429 it waits (±50% jitter) either what the server's "
        "`Retry-After` says (a well-behaved client) or a fixed short time (an impatient one).",
        "",
    ]
    for o in res["overload"]:
        lines += overload_lines(o, res)
    if png:
        lines += [f"![batch QPS and latency CDFs]({png})"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", nargs="?", default="glove-400k")
    ap.add_argument("--nq", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--L", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queue", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--singles", type=int, default=300)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--overload-secs", type=float, default=10.0)
    ap.add_argument("--backoff-ms", type=float, default=10.0)
    ap.add_argument("--R", type=int, default=64)
    ap.add_argument("--L-build", type=int, default=100)
    ap.add_argument("--pq", type=int, default=32)
    ap.add_argument("--tag", default="")
    ap.add_argument("--server-args", default="", help="more flags of trawl serve, e.g. '--spin-us 0'")
    args = ap.parse_args()

    ds = dataset(args.dataset)
    ix = index(ds, args)
    out_dir = REPO_ROOT / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    q = read_fbin(ds["query"])[: args.nq]
    qpath = out_dir / f"serve-{args.dataset}-queries.fbin"
    write_fbin(qpath, np.ascontiguousarray(q, dtype=np.float32))
    gen = example_bin()
    server, url = start_server(ix, args, out_dir / f"serve-{args.dataset}.log")
    raw = out_dir / f"serve-{args.dataset}{args.tag}.json"
    try:
        log(f"server at {url}; load generator running")
        subprocess.run([str(gen), url, "bench", str(ix), str(qpath), str(raw),
                        f"k={args.k}", f"L={args.L}", f"threads={args.threads}",
                        f"reps={args.reps}", f"batch={args.batch}",
                        f"connections={args.connections}", f"singles={args.singles}",
                        f"clients={args.clients}", f"overload_secs={args.overload_secs}",
                        f"backoff_ms={args.backoff_ms}"], check=True)
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=120)
        log(f"server stopped with exit code {code}")
    res = json.loads(raw.read_text())
    results = REPO_ROOT / "bench" / "results"
    png_name = f"serve-{args.dataset}{args.tag}.png"
    has_png = plot(res, results / png_name)
    md = report(res, args, args.dataset, png_name if has_png else None)
    (results / f"serve-{args.dataset}{args.tag}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

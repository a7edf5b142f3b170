#!/usr/bin/env python3
"""A paper plan for two billion-vector deployments, from measured per-shard figures (issue 21).

Nothing here runs an index: it reads what `bench/scale.py` measured on this machine at 1M and
10M vectors (pages, CPU µs and hops per query at a recall target, build CPU per vector, bytes on
disk) and `bench/shards.py` measured through Ray, extrapolates them to the shard sizes of a
1B × 128 u8 and a 1B × 768 f32 deployment, and writes the arithmetic out as a table
(bench/results/plan-1b.md). Every input is named in the report with where it comes from; the
node hardware is an assumption (the constants below), not a measurement.

    python3 bench/plan_1b.py [--scale bench/results/scale-gen-1m-10m.json] [--target 0.95]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# The node every plan row assumes: a common storage-heavy server. Assumed, not measured.
NODE_CORES = 32
NODE_RAM_GIB = 256
NODE_DRIVES = 4
DRIVE_TB = 3.84
DRIVE_IOPS = 800_000  # 4 KiB random reads, a PCIe 4.0 data-centre NVMe's datasheet figure
UTILISATION = 0.7  # share of cores / IOPS a node is planned to run at
TARGET_QPS = 10_000  # cluster throughput the node counts are sized for
K = 10
R = 64
PAGE = 4096
RESULT_BYTES = K * (8 + 4)  # u64 global id + f32 distance per result (trawl.ray returns these)
STATS_BYTES = 160  # the per-shard counters a sub-batch returns, per query
HEADER_BYTES = 64  # k, L, probe and framing per query per shard

DEPLOYMENTS = {
    "1B × 128 u8 (L2)": {
        "n": 1_000_000_000, "dim": 128, "elem": 1, "pq_bytes": 32, "search": "c5",
        "cpu_factor": 1.0,
        # decoupled: vectors stored as they are (8-bit data has no float bits to XOR-code),
        # neighbour lists at the measured 0.47–0.49× of their raw bytes
        "vector_ratio": 1.0,
        "shards": [4, 8, 16],
        "note": "10 records per 4 KiB page: PageShuffle + PageSearch (C5) apply; CPU per "
                "query taken from the f32 measurement (8-bit distances are cheaper: an upper "
                "bound)",
    },
    "1B × 768 f32 (cosine)": {
        "n": 1_000_000_000, "dim": 768, "elem": 4, "pq_bytes": 96, "search": "pipe",
        # CPU per query: the distance part (compute µs) scaled by the PQ code length
        # (96 / 32 bytes scored per candidate); the I/O and queue part unchanged
        "cpu_factor": None,
        "vector_ratio": 0.89,  # measured on MiniLM-200K (384-d f32), decoupled-minilm-200k.md
        "shards": [8, 16, 32],
        "note": "1 record per page: PageShuffle/PageSearch cannot co-locate neighbours; "
                "PipeSearch is the search",
    },
}


def interp_log(v1: float, v10: float, n: float) -> float:
    """Value at n by a straight line in log10(n) through the 1M and 10M measurements."""
    return v1 + (v10 - v1) * math.log10(n / 1e6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=Path, default=RESULTS / "scale-gen-1m-10m.json")
    ap.add_argument("--shards-report", type=Path, default=RESULTS / "shards-gen-1m.json")
    ap.add_argument("--target", default="0.95", choices=["0.90", "0.95"])
    ap.add_argument("--out", type=Path, default=RESULTS / "plan-1b.md")
    args = ap.parse_args()
    scale = json.loads(args.scale.read_text())
    by_n = {e["n"]: e for e in scale["sizes"]}
    if 1_000_000 not in by_n or 10_000_000 not in by_n:
        raise SystemExit(f"{args.scale} needs both the 1M and the 10M rows (run bench/scale.py)")
    m1, m10 = by_n[1_000_000], by_n[10_000_000]
    key = f"at_{args.target}"
    ray = json.loads(args.shards_report.read_text()).get("ray") if args.shards_report.exists() \
        else None

    def search_at(e: dict, name: str) -> dict:
        a = e[name][key]
        if a["pages_per_query"] is None or a.get("cpu_us_per_query") is None:
            raise SystemExit(f"{args.scale}: {name} at N={e['n']} does not reach {args.target}")
        # compute share of the CPU at the same interpolated point (compute µs is in the rows)
        rows = sorted(e[name]["rows"], key=lambda r: r["recall"])
        t = float(args.target)
        share = None
        for lo, hi in zip(rows, rows[1:]):
            if lo["recall"] <= t <= hi["recall"]:
                f = (t - lo["recall"]) / max(hi["recall"] - lo["recall"], 1e-12)
                comp = lo["compute_us_per_query"] + f * (hi["compute_us_per_query"]
                                                         - lo["compute_us_per_query"])
                share = comp / a["cpu_us_per_query"]
        return {**a, "compute_share": share if share is not None else 0.5}

    def build_us(e: dict) -> float:
        return 1e6 * (e["build"]["cpu_secs"] or 0.0) / e["n"]

    lines = [f"# A billion vectors on paper (`bench/plan_1b.py`, recall@10 = {args.target})", ""]
    mi = scale["machine"]
    lines += [
        "Measured inputs (this machine, " + mi.get("cpu_model", "?") + f", {scale['threads']} "
        "threads, O_DIRECT; `bench/results/scale-gen-1m-10m.md`): pages and CPU µs per query at "
        f"the recall target, at 1M and 10M vectors (`trawl gen`, 128-d f32, L2, R {R}), "
        f"build CPU µs per vector (10M: the build under --memory-budget-gb "
        f"{scale['budget_gb']:g}, {m10['build']['shards']} graph shard(s)). Per shard they are extrapolated along a straight line in "
        "log10(N) through the two sizes (graph search's hop count grows with log N). Recall: a "
        "sharded search with every shard probed and the same per-shard L was never below the "
        "single index (`bench/results/shards-*.md`), so each shard is run at the single "
        "index's operating point.", "",
        f"Assumed node: {NODE_CORES} cores, {NODE_RAM_GIB} GiB RAM, {NODE_DRIVES} × "
        f"{DRIVE_TB} TB NVMe at {DRIVE_IOPS:,} 4 KiB random reads/s each, planned at "
        f"{UTILISATION:.0%} of its cores and IOPS; this machine's per-core CPU cost is used "
        f"as is. One shard per node; throughput by replica groups (each holds all shards); "
        f"node counts sized for {TARGET_QPS:,} queries/s.", "",
    ]
    for pi, (name, d) in enumerate(DEPLOYMENTS.items()):
        s1, s10 = search_at(m1, d["search"]), search_at(m10, d["search"])
        rec = d["dim"] * d["elem"] + 4 + 4 * R
        per_page = PAGE // rec
        packed = PAGE / per_page if per_page >= 1 else math.ceil(rec / PAGE) * PAGE
        avg_deg = m10["build"]["avg_degree"] or 40.0
        lists = (4 + 4 * avg_deg) * 0.48
        decoupled = d["dim"] * d["elem"] * d["vector_ratio"] + lists
        entry = 0.01 * (d["dim"] * d["elem"] + 4 + 4 * 32)
        ram_pv = d["pq_bytes"] + entry + 4 + 4  # PQ, 1% entry index, node→page, global id
        copy = d["dim"] if d["elem"] == 4 else 0
        build_floor_pv = (R + 1) * 4 + 1 + copy + 8
        qbytes = d["dim"] * d["elem"]
        lines += [f"## {name}", "",
                  f"{d['note']}. Record {rec} B → {per_page} per page, {packed:.0f} B per vector "
                  f"packed; decoupled ≈ {decoupled:.0f} B (vectors × {d['vector_ratio']}, lists "
                  f"{4 + 4 * avg_deg:.0f} B × 0.48 as measured); RAM at search "
                  f"{ram_pv:.1f} B per vector ({d['pq_bytes']} B PQ, {entry:.1f} B 1% entry index,"
                  " 4 B node → page table, 4 B global id); a budgeted build needs at least "
                  f"{build_floor_pv} B per vector of the shard (final graph, "
                  + ("8-bit copy, " if copy else "") + "assignments) plus one sub-build.", "",
                  "| shards | vectors per shard | SSD per shard packed / decoupled | RAM per shard "
                  "at search | build RAM floor | build hours per shard | pages per query per "
                  "shard | CPU µs per query per shard | node QPS (limit) | nodes for "
                  f"{TARGET_QPS:,} QPS | driver bytes per query out / in |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        factor = d["cpu_factor"]
        for s in d["shards"]:
            ns = math.ceil(d["n"] / s)
            pages = interp_log(s1["pages_per_query"], s10["pages_per_query"], ns)
            cpu128 = interp_log(s1["cpu_us_per_query"], s10["cpu_us_per_query"], ns)
            share = s10["compute_share"]
            if factor is None:
                cpu = cpu128 * (1 - share) + cpu128 * share * d["pq_bytes"] / 32
            else:
                cpu = cpu128 * factor
            bus = interp_log(build_us(m1), build_us(m10), ns) * d["dim"] / 128
            build_h = ns * bus / 1e6 / NODE_CORES / 3600
            cpu_qps = UTILISATION * NODE_CORES * 1e6 / cpu
            io_qps = UTILISATION * NODE_DRIVES * DRIVE_IOPS / pages
            node_qps = min(cpu_qps, io_qps)
            limit = "CPU" if cpu_qps < io_qps else "IOPS"
            replicas = math.ceil(TARGET_QPS / node_qps)
            ssd_fit = ns * packed <= NODE_DRIVES * DRIVE_TB * 1e12
            out_b = s * (qbytes + HEADER_BYTES)
            in_b = s * (RESULT_BYTES + STATS_BYTES)
            lines.append(
                f"| {s} | {ns / 1e6:.1f}M | {ns * packed / 1e9:.0f} / {ns * decoupled / 1e9:.0f} GB"
                + ("" if ssd_fit else " (over the node's SSD)")
                + f" | {ns * ram_pv / 2**30:.1f} GiB | {ns * build_floor_pv / 2**30:.0f} GiB | "
                f"{build_h:.1f} | {pages:.0f} | {cpu:.0f} | {node_qps:,.0f} ({limit}) | "
                f"{s} × {replicas} = {s * replicas} | {out_b / 1024:.1f} / {in_b / 1024:.1f} KiB |")
        lines.append("")
    lines += [
        "Column notes: *pages / CPU per query per shard* are at the shard's size, not 1B; "
        "*node QPS* = min(cores × 10^6 / CPU µs, IOPS / pages) at the planned utilisation, one "
        "shard per node, every query visiting every shard; *build hours* = vectors × measured "
        "build CPU µs per vector (log-extrapolated, × dim/128 as if every µs were distance "
        "arithmetic: an upper bound) over the node's cores; *driver bytes* = query vector + header to every shard, "
        f"{K} × (8 B id + 4 B distance) + counters back.", ""]
    if ray:
        a, b = ray["in_process"], ray["ray"]
        lines += [f"Scatter-gather through Ray, measured on one machine (`bench/shards.py --ray`, "
                  f"4 shards, L {ray['L']}): batch QPS {b['qps']:.0f} against {a['qps']:.0f} "
                  f"in process ({b['qps'] / a['qps']:.2f}×), one query p50 "
                  f"{b['p50_us'] / 1e3:.1f} ms against {a['p50_us'] / 1e3:.1f} ms: about "
                  f"{(b['p50_us'] - a['p50_us']) / 4e3:.1f} ms per remote call there, so the "
                  "driver sends queries in batches and one call per shard per batch.", ""]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

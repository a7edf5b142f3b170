#!/usr/bin/env python3
"""DecoupleVS's decoupled layout against the page-packed layout of the same graph.

One index (R 64, L 100, 48 PQ bytes), two layouts of its graph: `packed.trawl` as built, and
`graph.trawl` + `vectors.trawl` written by `trawl layout --decoupled`. Reports

- disk bytes per component (graph, vectors, PQ, metadata) and the ratio to the packed layout;
- QPS at recall@10 = 0.90 / 0.95, 2 threads, O_DIRECT, at equal memory budgets: for each
  budget the packed layout gets a static node cache (frequency-chosen) and the decoupled layout
  a list cache of the same total search-time memory (PQ codes, codebooks, the layout's
  metadata and the cache, as `trawl bench` reports it) — `--pin` of it pinned by visit
  frequency (the lists sample searches read most, at their exact size), the rest LRU.
  Budgets: `none` (no cache: the decoupled layout's list cache gets only what its metadata
  saves on the packed page checksums), `1%` (the packed cache holds 1% of the nodes,
  DecoupleVS's setting) and `20%`;
- a breakdown like DecoupleVS's Table 2 at the list size nearest recall 0.90: graph reads,
  vector reads, cache hits, decode time per query.

Each run makes a first, unreported pass at its first list size (it warms LRU caches).
Configurations run in alternating order per repetition (paired, minutes apart at most);
medians over repetitions and the decoupled / packed ratio of each repetition.

Usage:
  python3 bench/decoupled.py glove-400k --index .bench-cache/glove-400k/dec-graph --repeat 3
  python3 bench/decoupled.py minilm-200k --repeat 3
  python3 bench/decoupled.py glove-400k --report-only

Writes bench/out/decoupled-<dataset>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import OUT_DIR, build_trawl_index, log, machine_info, trawl_bin, write_json  # noqa: E402
from plot_ablation import at_recall  # noqa: E402
from vs_diskann_disk import subset  # noqa: E402

KEYS = ("recall", "qps", "pages_per_query", "ios_per_query", "hops_per_query",
        "vector_reads_per_query", "prefetched_per_query", "cache_hits_per_query",
        "nodes_expanded_per_query", "list_decode_us_per_query", "vector_decode_us_per_query",
        "compute_us_per_query", "io_wait_us_per_query", "rerank_batches_per_query",
        "wasted_reads_per_query", "page_reuses_per_query", "page_joins_per_query",
        "refine_us_per_query")


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def bench(idx: Path, q: Path, gt: Path, args, out: Path, extra: list[str]) -> dict:
    # A first pass at the first L warms the LRU part of a list cache; it is not reported.
    first = args.search_L.split(",")[0]
    cmd = [str(trawl_bin()), "bench", str(idx), "--queries", str(q), "--gt", str(gt), "-k", "10",
           "-L", f"{first},{args.search_L}", "--threads", str(args.threads), "--json", str(out),
           "--quiet", *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    d = json.loads(out.read_text())
    d["rows"] = d["rows"][1:]
    return d


def probe_memory(idx: Path, q: Path, gt: Path, args, work: Path, extra: list[str]) -> dict:
    """Memory of a configuration as `trawl bench` reports it (a 10-query run)."""
    out = work / "probe.json"
    cmd = [str(trawl_bin()), "bench", str(idx), "--queries", str(q), "--gt", str(gt), "-k", "10",
           "-L", "10", "--threads", "1", "--max-queries", "10", "--json", str(out), "--quiet",
           *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def refine_bits(spec: str) -> int:
    """Bits of a re-rank spec's refinement codes (`R4M1` → 4), 0 without."""
    if spec.startswith("R"):
        i = 1
        while i < len(spec) and spec[i].isdigit():
            i += 1
        return int(spec[1:i])
    return 0


def strategy_flags(s: str) -> list[str]:
    return ["--strategy", "beam", "-W", "8"] if s == "beam" else ["--strategy", "pipe"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--pq-bytes", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--search-L", default="10,15,20,30,40,60")
    ap.add_argument("--nq", type=int, default=3000)
    ap.add_argument("--strategies", default="beam,pipe")
    ap.add_argument("--index", type=Path, default=None,
                    help="an index directory to use (its decoupled layout is written if missing) "
                         "instead of building one")
    ap.add_argument("--pin", type=float, default=0.9,
                    help="share of the decoupled list cache pinned by visit frequency (0: LRU)")
    ap.add_argument("--list-samples", type=int, default=20000,
                    help="sample searches choosing the pinned lists")
    ap.add_argument("--budgets", default="none,1%,20%",
                    help="packed static cache as a share of the nodes; the decoupled list cache "
                         "gets the same total memory")
    ap.add_argument("--rerank", default="B10,B2,M1",
                    help="re-rank settings of the decoupled configurations: Bx = the benefit rule "
                         "with batch x (B10: the paper's), Mx = the error bound with multiplier x; "
                         "a prefix Rb (R4M1) orders the re-rank by b-bit in-memory refinement "
                         "codes, paid out of the list cache's share of the budget (skipped at a "
                         "budget they do not fit)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    path = OUT_DIR / f"decoupled-{args.dataset}.json"
    if not args.report_only:
        run(args, path)
    doc = json.loads(path.read_text())
    md = render(doc)
    (OUT_DIR / f"decoupled-{args.dataset}.md").write_text(md)
    print(md)


def run(args, path: Path) -> None:
    ds = datasets.prepare(args.dataset)
    args.rebuild = False
    idx = args.index.resolve() if args.index else build_trawl_index(ds, "trawl-pipe", args)
    layout_report = idx.parent / (idx.name + ".decoupled.json")
    if not (idx / "graph.trawl").exists() or not (idx / "vectors.trawl").exists() \
            or not layout_report.exists():
        log(f"writing the decoupled layout of {idx}")
        subprocess.run([str(trawl_bin()), "layout", str(idx), "--decoupled", "--report",
                        str(layout_report)], check=True)
    layout = json.loads(layout_report.read_text())[0]
    q, gt = subset(Path(ds.query), Path(ds.gt), args.nq, Path(ds.base).parent / "subsets")
    work = OUT_DIR / "raw" / f"decoupled-{args.dataset}"
    work.mkdir(parents=True, exist_ok=True)
    files = {f.name: f.stat().st_size for f in idx.iterdir() if f.is_file()}
    n = probe_memory(idx, q, gt, args, work, ["--layout", "packed"])["n"]
    # Configurations: (name, layout, strategy, budget, flags).
    configs = []
    for budget in args.budgets.split(","):
        packed_extra = []
        if budget != "none":
            nodes = int(round(float(budget.rstrip("%")) / 100 * n))
            # Frequency cache from 4 sample searches per cached node, at most 20,000 (the
            # default would run 4 × 78K searches at every open for the 20% budget).
            packed_extra = ["--cache-nodes", str(nodes), "--cache-policy", "freq",
                            "--cache-samples", str(min(4 * nodes, 20000))]
        pm = probe_memory(idx, q, gt, args, work, ["--layout", "packed", *packed_extra])
        dm = probe_memory(idx, q, gt, args, work, ["--layout", "decoupled", "--list-cache-mb", "0"])
        spare = pm["memory_total_bytes"] - dm["memory_total_bytes"]
        list_mb = max(spare, 0) / 2**20
        refine_bytes: dict[int, int] = {}
        for spec in args.rerank.split(","):
            bits = refine_bits(spec)
            if bits and bits not in refine_bytes:
                rm = probe_memory(idx, q, gt, args, work, ["--layout", "decoupled", "--list-cache-mb",
                                                           "0", "--refine-bits", str(bits)])
                refine_bytes[bits] = rm["memory_total_bytes"] - dm["memory_total_bytes"]
        for s in args.strategies.split(","):
            configs.append((f"packed-{s}-{budget}", "packed", s, budget,
                            ["--layout", "packed", *packed_extra, *strategy_flags(s)],
                            pm["memory_total_bytes"]))
        for spec in args.rerank.split(","):
            bits = refine_bits(spec)
            rest = spare - refine_bytes.get(bits, 0)
            if rest < 0:
                log(f"budget {budget}: {spec} skipped (refinement codes of "
                    f"{refine_bytes[bits] / 2**20:.1f} MiB, {spare / 2**20:.1f} MiB to spare)")
                continue
            list_mb = rest / 2**20
            dec_extra = ["--layout", "decoupled", "--list-cache-mb", f"{list_mb:.6f}"]
            if args.pin > 0:
                dec_extra += ["--list-pin", str(args.pin), "--cache-samples", str(args.list_samples)]
            if bits:
                dec_extra += ["--refine-bits", str(bits)]
            check = probe_memory(idx, q, gt, args, work, dec_extra)
            rule = spec[len(f"R{bits}"):] if bits else spec
            flag = (["--rerank-batch", rule[1:]] if rule[0] == "B"
                    else ["--rerank-bound", rule[1:]])
            for s in args.strategies.split(","):
                configs.append((f"decoupled-{spec}-{s}-{budget}", "decoupled", s, budget,
                                [*dec_extra, *flag, *strategy_flags(s)],
                                check["memory_total_bytes"]))
            log(f"budget {budget} {spec}: packed {pm['memory_total_bytes'] / 2**20:.2f} MiB, "
                f"decoupled {check['memory_total_bytes'] / 2**20:.2f} MiB (list cache "
                f"{list_mb:.2f} MiB, refinement codes {refine_bytes.get(bits, 0) / 2**20:.2f} MiB)")
    runs: dict[str, list[dict]] = {c[0]: [] for c in configs}
    for rep in range(args.repeat):
        order = configs if rep % 2 == 0 else list(reversed(configs))
        for name, _, _, _, extra, _ in order:
            t0 = time.time()
            runs[name].append(bench(idx, q, gt, args, work / f"{name}-rep{rep}.json", extra))
            log(f"  {name} rep {rep}: {time.time() - t0:.0f} s")
    doc = {"dataset": args.dataset, "queries": args.nq, "threads": args.threads, "pin": args.pin,
           "repetitions": args.repeat, "index": str(idx), "machine": machine_info(),
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "files": files, "layout_report": layout, "configs": []}
    for name, lay, strat, budget, extra, mem in configs:
        reps = runs[name]
        # The entry index is loaded but not searched (entry list 0): not part of the budget.
        mem -= reps[0]["memory_bytes"]["entry_bytes"]
        by_l: dict[int, list[dict]] = {}
        for r in reps:
            for row in r["rows"]:
                by_l.setdefault(row["L"], []).append(row)
        rows = [{"L": L, **{k: med(x.get(k) for x in rs) for k in KEYS},
                 "latency_us": med(x["latency_us"]["mean"] for x in rs)}
                for L, rs in sorted(by_l.items())]
        doc["configs"].append({
            "name": name, "layout": lay, "strategy": strat, "budget": budget, "flags": extra,
            "memory_bytes": mem, "memory": reps[0]["memory_bytes"], "rows": rows,
            "reps": [[{k: row.get(k) for k in ("L", "recall", "qps")} for row in r["rows"]]
                     for r in reps]})
    write_json(path, doc)


def render(doc: dict) -> str:
    f = doc["files"]
    lay = doc["layout_report"]["decoupled"]
    pq = f.get("pq.trawl", 0) + f.get("pq-codes.trawl", 0)
    packed_total = f["packed.trawl"] + pq
    dec_total = f["graph.trawl"] + f["vectors.trawl"] + pq
    mib = lambda b: f"{b / 2**20:.1f} MiB"  # noqa: E731
    lines = [f"# Decoupled layout vs page-packed: {doc['dataset']}", "",
             f"Index `{Path(doc['index']).name}`; {doc['queries']} queries, k = 10, "
             f"{doc['threads']} threads, O_DIRECT; medians of {doc['repetitions']} repetitions "
             f"(configurations in alternating order). {doc['when']}.", "",
             "## Disk bytes", "",
             "| component | page-packed | decoupled | ratio |", "|---|---|---|---|",
             f"| neighbour lists (raw {mib(lay['lists_raw_bytes'])}) | in packed.trawl | "
             f"graph.trawl {mib(lay['graph_bytes'])} | {lay['graph_bytes'] / lay['lists_raw_bytes']:.3f}× raw |",
             f"| vectors (raw {mib(lay['vectors_raw_bytes'])}) | in packed.trawl | "
             f"vectors.trawl {mib(lay['vectors_bytes'])} | {lay['vectors_bytes'] / lay['vectors_raw_bytes']:.3f}× raw |",
             f"| graph + vectors | packed.trawl {mib(f['packed.trawl'])} | "
             f"{mib(f['graph.trawl'] + f['vectors.trawl'])} | "
             f"**{(f['graph.trawl'] + f['vectors.trawl']) / f['packed.trawl']:.3f}×** |",
             f"| PQ codebooks + codes | {mib(pq)} | {mib(pq)} | 1 |",
             f"| **total** | {mib(packed_total)} | {mib(dec_total)} | **{dec_total / packed_total:.3f}×** |",
             "", f"Vector metadata held in memory (code tables, {lay['chunks']} chunk records, "
             f"{lay['xor_chunks']} XOR-coded, first id per page): {lay['vectors_metadata_bytes'] / 1024:.1f} KiB; "
             f"graph sparse index: {4 * lay['graph_pages'] / 1024:.1f} KiB. Vectors stored raw: "
             f"{lay['raw_vectors']}. Written in {lay['pass1_secs'] + lay['pass2_secs']:.1f} s.", ""]
    by = {c["name"]: c for c in doc["configs"]}
    lines += ["## QPS at equal memory", "",
              "Budget: the packed layout's static node cache as a share of the nodes (frequency "
              f"policy); the decoupled layout's list cache gets the same total memory "
              f"({doc.get('pin', 0):.0%} of it pinned by visit frequency, the rest LRU). Vectors "
              f"in {lay.get('vector_order', 'Id').lower()} order.", "",
              "| strategy | budget | decoupled re-rank | memory (packed / decoupled) | packed QPS @0.90 | decoupled QPS @0.90 "
              "| ratio (per repetition) | packed QPS @0.95 | decoupled @0.95 | ratio |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for d in doc["configs"]:
        if d["layout"] != "decoupled":
            continue
        c = by[f"packed-{d['strategy']}-{d['budget']}"]

        def q(cfg, t):
            return at_recall(cfg["rows"], "qps", t)

        per = []
        for rp, rd in zip(c["reps"], d["reps"]):
            a, b = at_recall(rp, "qps", 0.90), at_recall(rd, "qps", 0.90)
            per.append(None if a is None or b is None else b / a)
        fmt = lambda v: "—" if v is None else f"{v:.0f}"  # noqa: E731
        ratio = lambda a, b: "—" if a is None or b is None else f"{b / a:.2f}"  # noqa: E731
        lines.append(
            f"| {c['strategy']} | {c['budget']} | {d['name'].split('-')[1]} | {c['memory_bytes'] / 2**20:.2f} / "
            f"{d['memory_bytes'] / 2**20:.2f} MiB | {fmt(q(c, 0.90))} | {fmt(q(d, 0.90))} | "
            f"**{ratio(q(c, 0.90), q(d, 0.90))}** ({', '.join('—' if x is None else f'{x:.2f}' for x in per)}) | "
            f"{fmt(q(c, 0.95))} | {fmt(q(d, 0.95))} | {ratio(q(c, 0.95), q(d, 0.95))} |")
    lines += ["", "## Per-query work at recall 0.90 (DecoupleVS Table 2)", "",
              "| configuration | graph reads | vector reads (prefetched) | vectors from pages read "
              "(joined / kept) | cache hits | hops | list decode µs | vector decode µs | refine µs | "
              "CPU µs | I/O wait µs | latency µs |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc["configs"]:
        g = lambda k: at_recall(c["rows"], k, 0.90)  # noqa: E731
        if g("qps") is None:
            continue
        vr = g("vector_reads_per_query") or 0.0
        lines.append(
            f"| {c['name']} | {g('ios_per_query') - vr:.1f} | {vr:.1f} ({g('prefetched_per_query') or 0:.1f}) | "
            f"{g('page_joins_per_query') or 0:.1f} / {g('page_reuses_per_query') or 0:.1f} | "
            f"{g('cache_hits_per_query'):.1f} | {g('hops_per_query'):.1f} | "
            f"{g('list_decode_us_per_query') or 0:.1f} | {g('vector_decode_us_per_query') or 0:.1f} | "
            f"{g('refine_us_per_query') or 0:.1f} | {g('compute_us_per_query'):.0f} | {g('io_wait_us_per_query'):.0f} | {g('latency_us'):.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

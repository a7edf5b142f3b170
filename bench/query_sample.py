#!/usr/bin/env python3
"""A query sample in the graph build, before and after, on a dataset whose queries are of the
data's own distribution: two indexes, A built from the data alone (the default), B with
`trawl build --query-sample` given queries the evaluation does not use, searched side by side.

The dataset's query file is split by a seeded permutation (`--seed`): `--eval` queries are
measured (their ground truth taken from the dataset's), the next `--sample` are B's sample
(a query file kept in some order — GloVe's by word frequency — is not split by position). Per index: graph build
seconds and the query edges (build report), recall@10 per list size (beam search, width 4,
2 threads, O_DIRECT), QPS at the target recalls interpolated on each sweep, the sweeps
alternating A B / B A within every repetition (a shared disk's speed drifts).

    python3 bench/query_sample.py glove-400k --repeat 3
    python3 bench/query_sample.py minilm-200k --repeat 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import datasets  # noqa: E402
from before_after import paired_sweeps, qps_lines  # noqa: E402


def read_fbin(path: str) -> np.ndarray:
    n, dim = np.fromfile(path, dtype=np.int32, count=2)
    return np.fromfile(path, dtype=np.float32, offset=8, count=int(n) * int(dim)).reshape(n, dim)


def write_fbin(path: Path, x: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.array(x.shape, dtype=np.int32).tofile(f)
        np.ascontiguousarray(x, dtype=np.float32).tofile(f)


def slice_gt(src: str, dst: Path, rows: np.ndarray) -> None:
    """Queries `rows` of a trawl ground-truth file (nq, k, ids u32, dists f32)."""
    total, k = (int(v) for v in np.fromfile(src, dtype=np.int32, count=2))
    ids = np.fromfile(src, dtype=np.uint32, offset=8, count=total * k).reshape(total, k)
    dists = np.fromfile(src, dtype=np.float32, offset=8 + 4 * total * k,
                        count=total * k).reshape(total, k)
    with open(dst, "wb") as f:
        np.array([len(rows), k], dtype=np.int32).tofile(f)
        ids[rows].tofile(f)
        dists[rows].tofile(f)


def build(ds, idx: Path, sample: Path | None, args) -> dict:
    report = idx.parent / (idx.name + ".report.json")
    if not (idx / "manifest.trawl").exists() or args.rebuild:
        cmd = [str(common.trawl_bin()), "build", ds.base, str(idx), "--metric", ds.metric,
               "-R", str(args.R), "-L", str(args.L), "--pq-bytes", str(args.pq_bytes),
               "--threads", str(args.threads), "--report", str(report), "--quiet"]
        if sample is not None:
            cmd += ["--query-sample", str(sample)]
        common.log(" ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(report.read_text())


def sweep(idx: Path, queries: Path, gt: Path, lsizes: str, out: Path, threads: int) -> list:
    cmd = [str(common.trawl_bin()), "bench", str(idx), "--queries", str(queries), "--gt",
           str(gt), "-k", "10", "-L", lsizes, "--threads", str(threads), "-W", "4", "--json",
           str(out), "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=9000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", choices=("random", "first"), default="random",
                    help="first: the first --eval queries measured, the next --sample the sample")
    ap.add_argument("--targets", default="0.90,0.95")
    ap.add_argument("--lsizes", default="10,15,20,32,40,64,128")
    ap.add_argument("-R", type=int, default=64)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--pq-bytes", type=int, default=32)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--out", default="bench/out/query_sample")
    args = ap.parse_args()
    ds = datasets.prepare(args.dataset)
    out = Path(args.out) / args.dataset
    out.mkdir(parents=True, exist_ok=True)
    q = read_fbin(ds.query)
    if q.shape[0] <= args.eval:
        sys.exit(f"{ds.query} holds {q.shape[0]} queries: none left for a sample")
    perm = (np.random.default_rng(args.seed).permutation(q.shape[0]) if args.split == "random"
            else np.arange(q.shape[0]))
    evalq, sample = out / "eval.fbin", out / "sample.fbin"
    write_fbin(evalq, q[perm[: args.eval]])
    write_fbin(sample, q[perm[args.eval: args.eval + args.sample]])
    gt = out / "eval.gt.bin"
    slice_gt(ds.gt, gt, perm[: args.eval])
    stem = f"R{args.R}-L{args.L}-pq{args.pq_bytes}"
    base = Path(ds.base).parent
    taken = min(args.sample, q.shape[0] - args.eval)
    tag = f"s{args.seed}" if args.split == "random" else "first"
    idx = {"A": base / f"qs-none-{stem}", "B": base / f"qs-{taken}-{tag}-{stem}"}
    reports = {"A": build(ds, idx["A"], None, args), "B": build(ds, idx["B"], sample, args)}
    targets = [float(t) for t in args.targets.split(",")]
    recall, qps = paired_sweeps(
        lambda side, rep: sweep(idx[side], evalq, gt, args.lsizes, out / f"{side}.{rep}.json",
                                args.threads),
        args.repeat, targets)
    lines = [f"# query sample before/after on {args.dataset}", "",
             f"A = no sample (default), B = `--query-sample` of {reports['B'].get('query_sample')} "
             f"queries (disjoint from the {args.eval} measured, split {args.split}); R {args.R}, build L {args.L}, "
             f"PQ {args.pq_bytes} bytes, {args.threads} threads, beam width 4, O_DIRECT; "
             f"{args.repeat} repetitions, A/B order alternating; machine: "
             f"{json.dumps(common.machine_info())}", ""]
    lines += ["| | A no sample | B query sample |", "|---|---|---|"]
    lines.append("| graph build s | " + " | ".join(
        f"{reports[s].get('graph_secs', float('nan')):.1f}" for s in "AB") + " |")
    lines.append("| query edges changed | – | " + f"{reports['B'].get('query_edges')} |")
    for L in sorted(recall["A"]):
        lines.append(f"| recall@10 L {L} | {recall['A'][L]:.4f} | {recall['B'][L]:.4f} |")
    lines += qps_lines(qps, targets)
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

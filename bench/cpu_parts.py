#!/usr/bin/env python3
"""CPU per query by part, from trawl's own timers: `trawl bench --time-parts` for several
configurations, alternating within each repetition, medians per configuration.

Where bench/cpu_profile.py samples the whole machine with perf (kernel interrupt work
included, symbols classified after the fact), this reads the parts the search times itself
(`trawl::search::PartStats`) against the process's CPU time (getrusage around each batch):

  user, sys   process CPU per query during the batch (all threads; sys = system calls and
              the kernel work charged to them)
  io call     non-blocking I/O calls: submitting reads (io_uring_enter) and collecting
              completions
  poll        completion polling before sleeping (--spin-us): CPU spent waiting
  check       page checks (CRC-32, header)
  pq table    the query's PQ distance table
  visited     visited-set checks of the neighbours of expanded nodes
  pq score    PQ distances of new neighbours and their insertion into the candidate list
  exact       full-precision distances of the records read
  entry       the entry-index search seeding the query
  other       user + sys − the parts: candidate-list and scheduling bookkeeping, sleeping and
              waking, kernel work outside the timed calls
  µs/page     (user + sys − poll) / pages read: all the CPU a query costs per page it reads
  I/O µs/page (io call + check) / pages read: the thread-side I/O path of one read

Configuration names as in cpu_profile.py: a base (beam, pipe, c5, decoupled) and modifiers
joined by '-': nospin (--spin-us 0), i<N> (--interleave N), int / coop / defer (--taskrun).

Usage (the machine otherwise quiet):
  python3 bench/cpu_parts.py glove-400k --index .bench-cache/glove-400k/trawl-peers-cosine-R64-L100-pq48 \\
      --configs pipe-i4-int,pipe-i4-coop,pipe-nospin-int,pipe-nospin-coop -L 15 --repeat 3

Writes bench/out/cpu-parts-<dataset>[-<tag>].{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import OUT_DIR, log, machine_info, trawl_bin, write_json  # noqa: E402
from cpu_profile import config_flags  # noqa: E402
from vs_diskann_disk import subset  # noqa: E402

PARTS = ["io_call", "poll", "checksum", "pq_table", "visited", "pq_score", "exact", "entry"]
COLS = ["qps", "recall", "pages_per_query", "cpu_user_us_per_query", "cpu_sys_us_per_query",
        *[f"{p}_us_per_query" for p in PARTS], "list_decode_us_per_query",
        "vector_decode_us_per_query", "refine_us_per_query"]


def run_one(exe: Path, index: Path, q: Path, gt: Path, args, name: str, tmp: Path) -> dict:
    out = tmp / f"{name}.json"
    cmd = [str(exe), "bench", str(index), "--queries", str(q), "--gt", str(gt), "-k", "10",
           "-L", str(args.L), "--threads", str(args.threads), "--json", str(out), "--quiet",
           "--time-parts", *config_flags(name)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    row = json.loads(out.read_text())["rows"][-1]
    return {c: row.get(c, 0.0) for c in COLS}


def summarize(runs: list[dict]) -> dict:
    med = {c: statistics.median(r[c] for r in runs) for c in COLS}
    cpu = med["cpu_user_us_per_query"] + med["cpu_sys_us_per_query"]
    decode = (med["list_decode_us_per_query"] + med["vector_decode_us_per_query"]
              + med["refine_us_per_query"])
    parts = sum(med[f"{p}_us_per_query"] for p in PARTS) + decode
    pages = med["pages_per_query"] or float("nan")
    med.update(cpu_us_per_query=cpu, decode_us_per_query=decode, other_us_per_query=cpu - parts,
               cpu_per_page_us=(cpu - med["poll_us_per_query"]) / pages,
               io_per_page_us=(med["io_call_us_per_query"] + med["checksum_us_per_query"])
               / pages, repeats=len(runs))
    return med


def render(doc: dict) -> str:
    m = doc["machine"]
    lines = [f"# CPU per query by part: {doc['dataset']}", "",
             f"{doc['when']}; `trawl bench --time-parts`, index `{doc['index']}`, L = {doc['L']}, "
             f"{doc['nq']} queries, {doc['threads']} threads, O_DIRECT; medians of "
             f"{doc['repeat']} repetitions (configurations alternating within each). Machine: "
             f"{m.get('cpu_model', '?')}, {m.get('logical_cpus', '?')} CPUs. "
             f"Command: `{doc['command']}`.", "",
             "µs per query. user / sys: process CPU during the batch (all threads). Parts are "
             "the search's own timers (PartStats); other = user + sys − parts (list and "
             "scheduling bookkeeping, sleeping and waking, kernel work outside the timed calls); "
             "CPU/page = (user + sys − poll) / pages; I/O/page = (io call + check) / pages.", "",
             "| config | QPS | recall | pages | user | sys | CPU/page | I/O/page | io call | "
             "poll | check | pq table | visited | pq score | exact | entry | decode | other |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in doc["configs"].items():
        f = lambda c: f"{s[c]:.1f}"  # noqa: E731
        lines.append(
            f"| {name} | {s['qps']:.0f} | {s['recall']:.4f} | {s['pages_per_query']:.1f} | "
            f"{f('cpu_user_us_per_query')} | {f('cpu_sys_us_per_query')} | "
            f"{s['cpu_per_page_us']:.2f} | {s['io_per_page_us']:.2f} | "
            + " | ".join(f(f"{p}_us_per_query") for p in PARTS)
            + f" | {f('decode_us_per_query')} | {f('other_us_per_query')} |")
    lines += ["", "Flags: " + "; ".join(f"{n}: `{' '.join(doc['flags'][n])}`"
                                        for n in doc["configs"]), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--configs", default="beam,pipe,c5")
    ap.add_argument("-L", type=int, default=40)
    ap.add_argument("--nq", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tag", default="", help="suffix of the output files' names")
    args = ap.parse_args()
    names = args.configs.split(",")
    flags = {n: config_flags(n) for n in names}
    ds = datasets.prepare(args.dataset)
    q, gt = subset(Path(ds.query), Path(ds.gt), args.nq, Path(ds.base).parent / "subsets")
    exe = trawl_bin()
    runs: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            order = names if rep % 2 == 0 else list(reversed(names))
            for n in order:
                r = run_one(exe, args.index.resolve(), q, gt, args, n, Path(tmp))
                runs[n].append(r)
                log(f"rep {rep + 1}/{args.repeat} {n}: {r['qps']:.0f} QPS, "
                    f"{r['cpu_user_us_per_query'] + r['cpu_sys_us_per_query']:.0f} µs CPU/query")
    tag = f"-{args.tag}" if args.tag else ""
    doc = {"dataset": args.dataset, "index": str(args.index), "L": args.L, "nq": args.nq,
           "threads": args.threads, "repeat": args.repeat, "machine": machine_info(),
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": "python3 bench/cpu_parts.py " + " ".join(sys.argv[1:]),
           "flags": flags, "runs": runs,
           "configs": {n: summarize(runs[n]) for n in names}}
    write_json(OUT_DIR / f"cpu-parts-{args.dataset}{tag}.json", doc)
    md = render(doc)
    (OUT_DIR / f"cpu-parts-{args.dataset}{tag}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

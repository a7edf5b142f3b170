#!/usr/bin/env python3
"""Where the CPU of a disk search goes: a `perf`-sampled breakdown, in µs per query per part.

Runs `trawl bench` once per configuration under `perf record -a` (every CPU, so the interrupt
and softirq work of completing reads is seen wherever it runs), then classifies the samples of
the search process and of interrupt contexts by symbol into parts:

  io submit      io_uring_enter and the block layer down to the virtio doorbell
  io complete    interrupts, softirqs, task work and CQE harvesting
  polling        the completion poll loop (`--spin-us`), its clock reads and non-blocking waits
  sched/syscall  entry/exit, scheduling, futex, sleeping and waking
  checksum       CRC-32 of pages
  pq table       building the per-query PQ distance table
  pq scoring     neighbours' PQ distances
  exact          full-precision distances
  decode         neighbour-list and vector decoding (decoupled layout)
  bookkeeping    candidate list, visited set, hash maps, sorting
  memory         memcpy / memset / allocation
  other user / other kernel

Idle samples are dropped; samples of other processes are dropped. A 10-query run of the same
configuration (opening the index, loading caches, computing recall) is profiled too and
subtracted symbol by symbol. CPU per query is the rest (samples / frequency) over the queries
searched (`--passes` passes over the query set); CPU per page read
divides the whole by the pages read (the I/O path's share and the rest are both shown). The
search code inlines much of the scoring and bookkeeping into the strategies' loops: what a
symbol-level profile cannot split is reported under the strategy's own symbols (`search`).

Usage (the machine otherwise quiet — no build, no other benchmark):
  python3 bench/cpu_profile.py glove-400k --index .bench-cache/glove-400k/trawl-peers-cosine-R64-L100-pq48 \
      --configs beam,beam-nospin,pipe,pipe-nospin,c5,c5-nospin -L 40 --nq 3000

Configuration names: a base (beam, pipe, c5, decoupled) and modifiers joined by '-': nospin
(--spin-us 0), i<N> (--interleave N), int / coop / defer (--taskrun); e.g. pipe-i4-nospin-int.

Writes bench/out/cpu-profile-<dataset>[-<tag>].{json,md}.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datasets  # noqa: E402
from common import OUT_DIR, log, machine_info, trawl_bin, write_json  # noqa: E402
from vs_diskann_disk import subset  # noqa: E402

CONFIGS = {
    "beam": ["--strategy", "beam", "-W", "4"],
    "pipe": ["--strategy", "pipe", "--entry-list", "10"],
    # OctopusANN's C5: MemGraph (entry index) + PageShuffle + PageSearch + DynamicWidth.
    "c5": ["--layout", "shuffle", "--strategy", "beam", "--page-search", "--dynamic-width",
           "--entry-list", "10", "-W", "32"],
    "decoupled": ["--layout", "decoupled", "--strategy", "beam", "-W", "8"],
}


def config_flags(name: str) -> list[str]:
    """The flags of configuration `name`: a base (beam, pipe, c5, decoupled) and modifiers
    joined by '-': `nospin` (block in io_uring_enter at once: --spin-us 0), `i<N>` (throughput
    mode: --interleave N), `int` / `coop` / `defer` (--taskrun). E.g. pipe-i4-int."""
    base, *mods = name.split("-")
    if base not in CONFIGS:
        raise SystemExit(f"unknown configuration {name!r} (bases: {', '.join(CONFIGS)})")
    flags = list(CONFIGS[base])
    for m in mods:
        if m == "nospin":
            flags += ["--spin-us", "0"]
        elif re.fullmatch(r"i\d+", m):
            flags += ["--interleave", m[1:]]
        elif m in ("int", "coop", "defer"):
            flags += ["--taskrun", {"int": "interrupt"}.get(m, m)]
        else:
            raise SystemExit(f"unknown modifier {m!r} in {name!r} (nospin, i<N>, int, coop, "
                             "defer)")
    return flags


# (part, regex on the symbol), first match wins.
PARTS = [
    # Polling for completions (`--spin-us`): the poll loop, its clock reads, the engine's
    # non-blocking waits. CPU a thread burns instead of sleeping, not work a read needs.
    ("polling", r"wait_some|clock_gettime|sub_timespec|Timespec|Instant::|take_failed|"
                r"spin_loop|UringEngine as trawl::io::IoEngine>::wait|vec_deque::iter"),
    ("checksum", r"crc32|crc_|checksum|check_pages|page_crc"),
    ("io complete", r"irq|softirq|vring_interrupt|virtblk_done|blk_mq_complete|blk_complete|"
                    r"io_complete_rw|io_req_task|task_work|tctx_task|io_cqring|io_cqe|"
                    r"io_req_complete|io_run_local|io_do_iopoll|__io_post|io_free_batch|"
                    r"harvest|deliver|RingSlots.*complete|blk_mq_end_request|bio_endio|"
                    r"blkdev_bio_end_io|iomap_dio_bio_end_io|dio_bio_end|"
                    r"blk_update_request|nvme_.*complete|kmem_cache_free"),
    ("io submit", r"io_uring_enter|io_submit_sqes|io_issue_sqe|io_read|io_rw_|io_import|"
                  r"blkdev_|iomap_dio|__blkdev_direct|blk_mq_submit|blk_mq_|submit_bio|"
                  r"virtio_queue_rq|virtqueue|iowrite16|vp_notify|bio_|blk_|"
                  r"UringEngine|io_uring::|submit_and_wait|rw_verify|security_file|"
                  r"fsnotify|__fget|fget|iov_iter|get_user_pages|pin_user_pages|gup_|"
                  r"ReadFixed|io_assign_file|io_prep_rw|io_init_req|io_alloc|kmem_cache_alloc"),
    ("sched/syscall", r"entry_SYSCALL|syscall|do_syscall|__schedule|schedule|futex|"
                      r"finish_task_switch|pick_next|enqueue|dequeue|try_to_wake|wake_up|"
                      r"update_curr|update_load|psi_|switch_mm|__switch_to|restore_regs|"
                      r"native_sched|hrtimer|nanosleep|clock_gettime|vdso|ktime_get|"
                      r"std::time|Instant::now|cpuacct|account_|rcu_|native_write_msr"),
    ("decode", r"elias_fano|huffman|decode_list|decode_split|list_bytes"),
    ("pq table", r"pq.*table.*(build|new|fill|prepare)|DistanceTable.*new|build_table|"
                 r"fill_table|PqTable"),
    ("pq scoring", r"pq_distance|adc|lookup|PqCodes|pq::.*distance|score_neighbou?rs|"
                   r"explore_list|pq_batch|gather"),
    ("exact", r"kernels::|l2_sq|dot_norms|\bdot\b|avx512|avx2|distance"),
    ("memory", r"memcpy|memmove|memset|malloc|free|realloc|alloc::|__rust_alloc|"
               r"__rust_dealloc|clear_page|copy_user|rep_movs"),
    ("bookkeeping", r"hashbrown|HashMap|HashSet|visited|Visited|Frontier|candidate|Candidate|"
                    r"insert|sort|binary_search|Neighbor|BinaryHeap|retain|dedup"),
    ("search", r"search::|Searcher|QueryMachine|beam::|pipe::|explore|Reranked|rerank"),
]
IDLE = re.compile(r"idle|halt|mwait|poll_idle|cpuidle|do_idle|cpu_startup|"
                  r"acpi_processor|default_idle|native_safe_halt|intel_idle")
IRQ_COMMS = re.compile(r"^(swapper|ksoftirqd|kworker|irq/)")


def classify(sym: str, kernel: bool) -> str:
    for part, rx in PARTS:
        if re.search(rx, sym):
            return part
    return "other kernel" if kernel else "other user"


def sampled(idx: Path, q: Path, gt: Path, args, flags: list[str], work: Path, Ls: str,
            extra: list[str]) -> tuple[dict[str, int], dict, float]:
    """Samples per (part | symbol) of one `trawl bench` run under `perf record -a`."""
    data = work / "run.perf"
    out = work / "run.json"
    cmd = ["perf", "record", "-a", "-F", str(args.freq), "-o", str(data), "-q", "--",
           str(trawl_bin()), "bench", str(idx), "--queries", str(q), "--gt", str(gt), "-k", "10",
           "-L", Ls, "--threads", str(args.threads), "--json", str(out), "--quiet",
           *flags, *extra]
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.time() - t0
    bench = json.loads(out.read_text())
    rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                          "--sort", "comm,dso,sym", "-F", "sample,comm,dso,sym",
                          "--percent-limit", "0", "-q"],
                         check=True, capture_output=True, text=True).stdout
    data.unlink(missing_ok=True)
    by_sym: dict[str, int] = {}
    for line in rep.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)\s+(\S+)\s+\[(.)\]\s+(.*)$", line)
        if not m:
            continue
        samples, comm, kind, sym = int(m[1]), m[2], m[4], m[5].strip()
        kernel = kind == "k"
        if IDLE.search(sym):
            continue
        if not comm.startswith("trawl") and not (IRQ_COMMS.match(comm) and kernel):
            continue  # other processes; interrupt work on other CPUs is kept
        key = f"{classify(sym, kernel)} | {sym}"
        by_sym[key] = by_sym.get(key, 0) + samples
    return by_sym, bench, wall


def profile(idx: Path, q: Path, gt: Path, args, name: str, flags: list[str], work: Path) -> dict:
    # The searches: `passes` passes of the same L. The load (open, PQ codes, caches) and the
    # recall computation are measured apart by a 10-query run and subtracted symbol by symbol.
    full, bench, wall = sampled(idx, q, gt, args, flags, work, ",".join([str(args.L)] * args.passes), [])
    base, _, _ = sampled(idx, q, gt, args, flags, work, str(args.L), ["--max-queries", "10"])
    by_sym = {k: max(v - base.get(k, 0), 0) for k, v in full.items()}
    total = sum(by_sym.values())
    parts: dict[str, int] = {}
    for k, v in by_sym.items():
        p = k.split(" | ", 1)[0]
        parts[p] = parts.get(p, 0) + v
    rows = bench["rows"]
    nq = bench["queries"] * len(rows) - 10
    per_q = lambda s: s / args.freq / nq * 1e6  # noqa: E731
    io_parts = ("io submit", "io complete", "sched/syscall", "checksum", "polling")
    pages = sum(r["pages_per_query"] for r in rows) / len(rows)
    med = lambda k: sorted(r[k] for r in rows)[len(rows) // 2]  # noqa: E731
    return {
        "name": name, "flags": flags, "wall_s": wall, "queries": nq, "cpu_s": total / args.freq,
        "recall": med("recall"), "qps": med("qps"), "pages_per_query": pages,
        "ios_per_query": med("ios_per_query"),
        "us_per_query": {p: per_q(s) for p, s in sorted(parts.items(), key=lambda x: -x[1])},
        "cpu_us_per_query": per_q(total),
        "cpu_us_per_page": per_q(total) / pages if pages else None,
        "io_us_per_page": sum(per_q(parts.get(p, 0)) for p in io_parts) / pages if pages else None,
        "top": sorted(((k, v / total) for k, v in by_sym.items()), key=lambda x: -x[1])[:25],
    }


def render(doc: dict) -> str:
    parts = []
    for c in doc["configs"]:
        for p in c["us_per_query"]:
            if p not in parts:
                parts.append(p)
    lines = [f"# CPU per query by part: {doc['dataset']}", "",
             f"`perf record -a -F {doc['freq']}` over `trawl bench` (index `{Path(doc['index']).name}`, "
             f"L {doc['L']}, {doc['threads']} threads, O_DIRECT, {doc['nq']} queries, k = 10); "
             f"{doc['machine'].get('cpu_model', '')}; {doc['when']}. Samples of the search process and of "
             "interrupt contexts, classified by symbol (`bench/cpu_profile.py`); idle dropped.", "",
             "| part (µs per query) | " + " | ".join(c["name"] for c in doc["configs"]) + " |",
             "|---|" + "---|" * len(doc["configs"])]
    for p in parts:
        lines.append(f"| {p} | " + " | ".join(f"{c['us_per_query'].get(p, 0):.0f}"
                                               for c in doc["configs"]) + " |")
    lines.append("| **total CPU µs per query** | " + " | ".join(
        f"**{c['cpu_us_per_query']:.0f}**" for c in doc["configs"]) + " |")
    lines.append("| pages read per query | " + " | ".join(
        f"{c['pages_per_query']:.1f}" for c in doc["configs"]) + " |")
    lines.append("| CPU µs per page read (all / I/O path incl. polling) | " + " | ".join(
        f"{c['cpu_us_per_page']:.1f} / {c['io_us_per_page']:.1f}" for c in doc["configs"]) + " |")
    lines.append("| recall@10 / QPS | " + " | ".join(
        f"{c['recall']:.3f} / {c['qps']:.0f}" for c in doc["configs"]) + " |")
    lines += ["", "Top symbols (share of the configuration's samples):", ""]
    for c in doc["configs"]:
        lines.append(f"- **{c['name']}**: " + "; ".join(
            f"{k.split(' | ', 1)[1][:60]} ({k.split(' | ')[0]}) {v:.1%}" for k, v in c["top"][:12]))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", choices=list(datasets.DATASETS))
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--configs", default="beam,pipe,c5")
    ap.add_argument("-L", type=int, default=40)
    ap.add_argument("--nq", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--freq", type=int, default=1999)
    ap.add_argument("--passes", type=int, default=3, help="passes over the queries at L")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--tag", default="", help="suffix of the output files' names")
    args = ap.parse_args()
    for name in args.configs.split(","):
        config_flags(name)
    tag = f"-{args.tag}" if args.tag else ""
    path = OUT_DIR / f"cpu-profile-{args.dataset}{tag}.json"
    if not args.report_only:
        ds = datasets.prepare(args.dataset)
        q, gt = subset(Path(ds.query), Path(ds.gt), args.nq, Path(ds.base).parent / "subsets")
        configs = []
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.configs.split(","):
                log(f"profiling {name}")
                configs.append(profile(args.index.resolve(), q, gt, args, name, config_flags(name),
                                       Path(tmp)))
        write_json(path, {"dataset": args.dataset, "index": str(args.index), "L": args.L,
                          "nq": args.nq, "threads": args.threads, "freq": args.freq,
                          "machine": machine_info(),
                          "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          "configs": configs})
    doc = json.loads(path.read_text())
    md = render(doc)
    (OUT_DIR / f"cpu-profile-{args.dataset}{tag}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

"""Shared helpers for the bench scripts: file formats, paths, measured subprocesses, machine info.

Host side only needs Python 3 and numpy. Nothing here imports diskannpy (that runs in its own
virtualenv, see diskann_worker.py).

File formats (little-endian):
  .fbin  u32 npts, u32 dim, then npts*dim float32, row-major (big-ann-benchmarks / DiskANN).
  GT     i32 nq, i32 K, nq*K u32 ids, then nq*K f32 distances (DiskANN / big-ann ground truth).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"


def cache_dir() -> Path:
    """The dataset cache: $TRAWL_BENCH_CACHE, else `.bench-cache/` at the repo root (git-ignored)."""
    env = os.environ.get("TRAWL_BENCH_CACHE")
    return Path(env).resolve() if env else REPO_ROOT / ".bench-cache"


def log(msg: str) -> None:
    """Progress line on stderr (stdout is kept for results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------

def write_fbin(path: Path, data: np.ndarray) -> None:
    """Write a 2-D float32 array as .fbin (u32 header), atomically (tmp file + rename)."""
    data = np.ascontiguousarray(data, dtype=np.float32)
    assert data.ndim == 2
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        np.array(data.shape, dtype="<u4").tofile(f)
        data.tofile(f)
    os.replace(tmp, path)


def read_fbin(path: Path, mmap: bool = True) -> np.ndarray:
    """Read an .fbin file as an (npts, dim) float32 array (memory-mapped by default)."""
    npts, dim = np.fromfile(path, dtype="<u4", count=2)
    expect = 8 + int(npts) * int(dim) * 4
    size = Path(path).stat().st_size
    if size != expect:
        raise ValueError(f"{path}: size {size} != {expect} from header ({npts} x {dim} f32)")
    if mmap:
        return np.memmap(path, dtype="<f4", mode="r", offset=8, shape=(int(npts), int(dim)))
    return np.fromfile(path, dtype="<f4", offset=8).reshape(int(npts), int(dim))


def fbin_shape(path: Path) -> tuple[int, int]:
    npts, dim = np.fromfile(path, dtype="<u4", count=2)
    return int(npts), int(dim)


def write_gt(path: Path, ids: np.ndarray, dists: np.ndarray) -> None:
    """Write ground truth in the DiskANN / big-ann format (atomically)."""
    assert ids.shape == dists.shape and ids.ndim == 2
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        np.array(ids.shape, dtype="<i4").tofile(f)
        np.ascontiguousarray(ids, dtype="<u4").tofile(f)
        np.ascontiguousarray(dists, dtype="<f4").tofile(f)
    os.replace(tmp, path)


def read_gt(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a DiskANN / big-ann ground-truth file: (ids u32 [nq, K], dists f32 [nq, K])."""
    nq, k = (int(v) for v in np.fromfile(path, dtype="<i4", count=2))
    expect = 8 + nq * k * 8
    size = Path(path).stat().st_size
    if size != expect:
        raise ValueError(f"{path}: size {size} != {expect} from header (nq={nq}, K={k})")
    ids = np.fromfile(path, dtype="<u4", count=nq * k, offset=8).reshape(nq, k)
    dists = np.fromfile(path, dtype="<f4", count=nq * k, offset=8 + nq * k * 4).reshape(nq, k)
    return ids, dists


def recall_at_k(found: np.ndarray, gt_ids: np.ndarray, k: int) -> float:
    """Mean over queries of |found[:, :k] ∩ gt[:, :k]| / k (ids only; ties not credited)."""
    found = np.asarray(found)[:, :k].astype(np.int64)
    truth = np.asarray(gt_ids)[: found.shape[0], :k].astype(np.int64)
    hits = 0
    for f, t in zip(found, truth):
        hits += np.intersect1d(f, t, assume_unique=False).size
    return hits / (found.shape[0] * k)


# ---------------------------------------------------------------------------------------------
# Measured subprocesses
# ---------------------------------------------------------------------------------------------

@dataclass
class Measured:
    """What one child process cost: wall seconds, peak RSS (ru_maxrss) and CPU seconds."""

    returncode: int
    wall_secs: float
    peak_rss_bytes: int
    user_secs: float
    sys_secs: float
    log_path: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_measured(cmd: list[str], log_path: Path, env: dict | None = None,
                 cwd: Path | None = None, check: bool = True) -> Measured:
    """Run `cmd`, stdout+stderr to `log_path`; wall time and rusage (os.wait4) of the command.

    The command is started through bench/measure.py, a bare interpreter that fork()s and exec()s
    it: a child's ru_maxrss starts from its spawner's RSS high-water mark, so spawning straight
    from this (large) driver would inflate small children. Floor: ~10 MiB. ru_maxrss (KiB on
    Linux) is the peak resident set of the command, including mapped page-cache pages.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    res = Path(str(log_path) + ".rusage.json")
    res.unlink(missing_ok=True)
    launcher = [sys.executable, "-S", str(Path(__file__).resolve().parent / "measure.py"), str(res)]
    with open(log_path, "wb") as logf:
        proc = subprocess.run(launcher + [str(c) for c in cmd], stdout=logf,
                              stderr=subprocess.STDOUT, env=env, cwd=cwd)
    if not res.exists():
        raise RuntimeError(f"launcher failed (rc={proc.returncode}) for {' '.join(map(str, cmd))}")
    r = json.loads(res.read_text())
    m = Measured(r["returncode"], r["wall_secs"], r["peak_rss_bytes"], r["user_secs"],
                 r["sys_secs"], str(log_path))
    if check and m.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"command failed (rc={m.returncode}): {' '.join(map(str, cmd))}\n{tail}")
    return m


def warm_page_cache(*paths: Path) -> None:
    """Read files once so both sides start with the data in the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


# ---------------------------------------------------------------------------------------------
# trawl binary
# ---------------------------------------------------------------------------------------------

_TARGET_DIR: Path | None = None


def cargo_target_dir() -> Path:
    """Where cargo builds this workspace: `cargo metadata`'s `target_directory`, so that
    `CARGO_TARGET_DIR` and a `build.target-dir` in a cargo config are honoured; without cargo,
    $CARGO_TARGET_DIR (relative to the repository root), else `target/` at the root."""
    global _TARGET_DIR
    if _TARGET_DIR is None:
        try:
            out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                                 cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                                 check=True)
            _TARGET_DIR = Path(json.loads(out.stdout)["target_directory"])
        except (OSError, subprocess.SubprocessError, ValueError, KeyError):
            env = os.environ.get("CARGO_TARGET_DIR")
            _TARGET_DIR = REPO_ROOT / env if env else REPO_ROOT / "target"
    return _TARGET_DIR


def default_trawl_bin() -> Path:
    """The release binary where cargo builds it (see `cargo_target_dir`)."""
    return cargo_target_dir() / "release" / "trawl"


def trawl_bin() -> Path:
    """Path of the trawl binary ($TRAWL_BIN, else `release/trawl` in cargo's target directory,
    see `cargo_target_dir`); raises if it is missing."""
    env = os.environ.get("TRAWL_BIN")
    p = Path(env) if env else default_trawl_bin()
    if not p.exists():
        raise FileNotFoundError(
            f"trawl binary not found at {p}; build it with `cargo build --release -p trawl-cli` "
            "(or set TRAWL_BIN)")
    return p


def trawl_version() -> str | None:
    try:
        out = subprocess.run([str(trawl_bin()), "--version"], capture_output=True, text=True,
                             timeout=30)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


# ---------------------------------------------------------------------------------------------
# Machine info
# ---------------------------------------------------------------------------------------------

def machine_info() -> dict:
    """CPU model, core counts, memory, OS, Python/numpy versions, git commit."""
    info: dict = {"hostname": platform.node(), "platform": platform.platform(),
                  "python": sys.version.split()[0], "numpy": np.__version__,
                  "logical_cpus": os.cpu_count(), "loadavg": os.getloadavg()}
    try:
        info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                  if ln.startswith("model name")]
        info["cpu_model"] = models[0] if models else None
        flags = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
        info["cpu_flags_simd"] = sorted(f for f in flags.split()
                                        if f.startswith(("avx", "fma", "amx")))
    except OSError:
        pass
    try:
        mem = Path("/proc/meminfo").read_text().splitlines()[0]
        info["mem_total_kib"] = int(mem.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    try:
        info["git_commit"] = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
            timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def which(name: str) -> str | None:
    return shutil.which(name)


def build_trawl_index(ds, prefix: str, args, extra: list[str] = ()) -> Path:
    """The trawl index `<prefix>-<metric>-R<R>-L<L>-pq<B>` beside the dataset's base file, built
    once (R, L, PQ bytes and threads from `args`, plus `extra` build flags) and reused unless
    `args.rebuild`; the build report is written beside it."""
    idx = Path(ds.base).parent / f"{prefix}-{ds.metric}-R{args.R}-L{args.L}-pq{args.pq_bytes}"
    if (idx / "packed.trawl").exists() and (idx / "entry.trawl").exists() and not args.rebuild:
        log(f"reusing {idx}")
        return idx
    shutil.rmtree(idx, ignore_errors=True)
    warm_page_cache(Path(ds.base))
    cmd = [str(trawl_bin()), "build", ds.base, str(idx), "--metric", ds.metric, "-R",
           str(args.R), "-L", str(args.L), "--pq-bytes", str(args.pq_bytes), "--threads",
           str(args.threads), *extra, "--report", str(idx.parent / (idx.name + ".report.json")),
           "--quiet"]
    log(" ".join(cmd))
    subprocess.run(cmd, check=True)
    return idx


def import_pyplot(script: str):
    """matplotlib.pyplot with the Agg backend, or None after saying how to get it (the plotting
    scripts run inside bench/.venv-plot)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{script}: matplotlib is missing; use bench/.venv-plot/bin/python "
              "(python3 -m venv bench/.venv-plot && bench/.venv-plot/bin/pip install matplotlib)",
              file=sys.stderr)
        return None
    return plt

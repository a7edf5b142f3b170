import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

import trawl

REPO = Path(__file__).resolve().parents[2]

# The Ctrl-C tests send SIGINT to this process. A shell without job control starts background
# commands with SIGINT ignored, and Python then installs no KeyboardInterrupt handler: install it.
signal.signal(signal.SIGINT, signal.default_int_handler)


def gaussian(n, dim, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((32, dim)) * 3
    x = centers[rng.integers(32, size=n)] + rng.standard_normal((n, dim))
    if dtype == np.float32:
        return x.astype(np.float32)
    if dtype == np.uint8:
        return np.clip(x * 12 + 128, 0, 255).astype(np.uint8)
    return np.clip(x * 12, -128, 127).astype(np.int8)


def brute_force(data, queries, k, metric="l2"):
    d = data.astype(np.float64)
    q = queries.astype(np.float64)
    if metric == "l2":
        dist = (q * q).sum(1)[:, None] - 2 * q @ d.T + (d * d).sum(1)[None, :]
    elif metric == "ip":
        dist = -(q @ d.T)
    else:
        dn = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-30)
        qn = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30)
        dist = 1 - qn @ dn.T
    return np.argsort(dist, axis=1, kind="stable")[:, :k]


def recall(found, truth):
    k = truth.shape[1]
    return float(np.mean([len(set(f[:k]) & set(t)) / k for f, t in zip(found, truth)]))


FAST = dict(R=32, L=64, pq_bytes=16, progress=False)


@pytest.fixture(scope="session")
def f32_index(tmp_path_factory):
    """A float32 L2 index over 4,000 × 32 clustered vectors, built with one thread."""
    data = gaussian(4000, 32, seed=1)
    queries = gaussian(50, 32, seed=2)
    d = tmp_path_factory.mktemp("f32") / "index"
    report = trawl.build(data, d, trawl.BuildParams(threads=1, **FAST))
    return d, data, queries, report


def cargo_target_dir():
    """Where cargo builds the workspace: `cargo metadata`'s `target_directory` (so that
    CARGO_TARGET_DIR and a cargo config's build.target-dir are honoured); without cargo,
    $CARGO_TARGET_DIR (relative to the repository root), else target/ at the root."""
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return Path(json.loads(out.stdout)["target_directory"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        env = os.environ.get("CARGO_TARGET_DIR")
        return REPO / env if env else REPO / "target"


def trawl_cli():
    """The trawl binary: $TRAWL_BIN (required to exist when set), else release/ or debug/ in
    cargo's target directory (see cargo_target_dir), else `trawl` on the PATH."""
    env = os.environ.get("TRAWL_BIN")
    if env:
        if not Path(env).is_file():
            pytest.fail(f"TRAWL_BIN={env} does not exist")
        return Path(env)
    target = cargo_target_dir()
    for profile in ("release", "debug"):
        p = target / profile / "trawl"
        if p.is_file():
            return p
    found = shutil.which("trawl")
    if found:
        return Path(found)
    pytest.skip("no trawl binary (cargo build -p trawl-cli, or set TRAWL_BIN)")

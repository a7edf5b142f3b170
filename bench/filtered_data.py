#!/usr/bin/env python3
"""Datasets with attributes for the filtered-search benchmark (bench/filtered.py), prepared into
the cache (`.bench-cache/<name>/`, git-ignored; override with $TRAWL_BENCH_CACHE).

Datasets:
  pypi-labelled        all-MiniLM-L6-v2 embeddings (384-d, cosine) of 200,000 PyPI package
                       summaries + 10,000 held-out queries, with attributes that are correlated
                       with the text: keyed labels month=YYYY-MM, year=YYYY, kw=<w> for each word
                       of a fixed 200-word vocabulary found in the summary; numeric fields rank
                       (only for the ranked packages) and month_num (year*12 + month-1)
  pypi-labelled-quick  the same pipeline on 20,000 base + 200 queries (--quick): the first 20,000
                       base rows and 200 queries of the same seeded permutation
  zipf-glove-400k      GloVe-400K's base and queries (bench/datasets.py glove-400k) with labels
                       independent of the vectors: each vector 1-4 plain labels L0000..L0999 drawn
                       from a Zipf law (s = 1.1), plus a numeric field u uniform in [0, 1e6)
  zipf-glove-400k-quick  the first 20,000 base and 200 queries of zipf-glove-400k

Files in each folder:
  base.fbin, queries.fbin        float32 (u32 n, u32 dim, data), big-ann / DiskANN format
  labels.txt, queries-labels.txt one line per vector, comma-separated labels (DiskANN's filter
                                 label format; keyed labels written K=V); empty line = none
  attrs.jsonl, queries-attrs.jsonl  one JSON object per vector with its numeric fields, keys
                                 absent when missing: {"rank": 123, "month_num": 24290}
  meta.json                      sources, seeds, counts, the keyword vocabulary and how it was
                                 chosen, the label frequency table
  texts.jsonl (pypi only)        line i = vector i (base rows, then the queries): the package
                                 name, version, month, rank and summary

Embedding (pypi-labelled): bench/minilm_embed.py in bench/.venv-minilm (bench/datasets.py's
ensure_minilm_venv), ~400 texts/s on 2 idle cores: ~9 min for 210,000 texts (31 min, 114
texts/s, on 2 cores shared with compilers). Every step is idempotent (an output that exists is
reused; delete the folder to redo it). --embed-nice is added to this script's own niceness
(`nice -n 10 python3 ... --embed-nice 10` runs the embedding at 19): under an outer nice, pass
--embed-nice 0.

Usage:
  python3 bench/filtered_data.py pypi-labelled [--quick] [--embed-nice 10]
  python3 bench/filtered_data.py zipf-glove-400k [--quick]
Prints the dataset's paths as JSON on stdout.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cache_dir, log, read_fbin, write_fbin, write_json  # noqa: E402

# bench/datasets.py is imported where it is used: the peers' workers import this module, and
# a module named `datasets` on their path would shadow the Hugging Face package LanceDB probes.
# The same folder as bench/datasets.py's MINILM_TEXT_DIR.
PYPI_TSV = Path(os.environ.get("TRAWL_MINILM_TEXT_DIR", "/work/.library/env/packages")) / "pypi.tsv"
PYPI_SEED = 7
PYPI_N, PYPI_NQ = 200_000, 10_000
QUICK_N, QUICK_NQ = 20_000, 200
N_KEYWORDS = 200
ZIPF_SEED = 11
ZIPF_VOCAB = 1000
ZIPF_S = 1.1
U_MAX = 1_000_000

# English (and a few Spanish/French/Portuguese) function words. The keyword vocabulary is the
# N_KEYWORDS most frequent other words (>= 2 characters, at least one letter) of the full base
# pool's summaries (document frequency), ties broken alphabetically.
STOPWORDS = frozenset("""
a about all also an and any are as at be been being both but by can could did do does each for
from had has have he her his how i if in into is it its just may me more most my no nor not of on
one only or other our out over own same she should so some such than that the their them then
there these they this those through to too under up us very via was we were what when where which
while who whom why will with within without would yet you your
de la le les el en et des du un une una para por con com em do da na no os um
""".split())
WORD_RE = re.compile(r"[a-z0-9][a-z0-9+#._-]*[a-z0-9+#]|[a-z0-9]")


@dataclass
class FilteredDataset:
    """A prepared dataset with attributes: the paths and what a benchmark needs to know."""

    name: str
    metric: str
    folder: str
    base: str
    queries: str
    labels: str
    attrs: str
    query_labels: str
    query_attrs: str
    n: int
    nq: int
    dim: int
    label_fields: list      # keyed label fields (e.g. kw, month, year); "label" for plain ones
    numeric_fields: list    # numeric attribute names


def words(text: str) -> set[str]:
    """The lower-cased words of a summary (the keyword match: whole words, punctuation split
    off; `c++`, `c#`, `asp.net`, `scikit-learn` kept whole)."""
    return set(WORD_RE.findall(text.lower()))


# ---------------------------------------------------------------------------------------------
# pypi-labelled: the summaries, sampled
# ---------------------------------------------------------------------------------------------

def read_pypi_rows(path: Path = PYPI_TSV) -> tuple[list[dict], dict]:
    """PyPI rows whose summary has at least 3 whitespace-separated words, deduplicated on the
    exact stripped summary (first one kept: identical texts would give identical vectors, i.e.
    exact distance ties that make a ground truth ambiguous)."""
    seen: set[str] = set()
    rows: list[dict] = []
    c = {"rows": 0, "malformed": 0, "empty": 0, "under_3_words": 0, "duplicates": 0, "kept": 0}
    if not path.exists():
        raise FileNotFoundError(f"{path}: the PyPI package list (name, version, month, rank, "
                                "summary) is missing; set TRAWL_MINILM_TEXT_DIR to its folder")
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline().rstrip("\n").split("\t")
        want = ["name", "version", "month", "rank_among_15000_most_downloaded", "summary"]
        if header[:5] != want:
            raise ValueError(f"{path}: header {header}, expected {want}")
        for line in f:
            c["rows"] += 1
            parts = line.rstrip("\n").split("\t")
            if len(parts) != len(header):
                c["malformed"] += 1
                continue
            name, version, month, rank, text = parts[:5]
            text = text.strip()
            if not text:
                c["empty"] += 1
            elif len(text.split()) < 3:
                c["under_3_words"] += 1
            elif text in seen:
                c["duplicates"] += 1
            else:
                seen.add(text)
                rows.append({"name": name, "version": version, "month": month.strip(),
                             "rank": int(rank) if rank.strip() else None, "text": text})
                c["kept"] += 1
    return rows, c


def pypi_texts(folder: Path, n: int, nq: int) -> dict:
    """Write texts.jsonl (n base rows, then nq queries) from a seeded permutation of the usable
    rows: queries = perm[:PYPI_NQ][:nq], base = perm[PYPI_NQ:PYPI_NQ + PYPI_N][:n], so the quick
    dataset is a prefix of the full one. Returns the sampling notes (texts.meta.json)."""
    texts_path = folder / "texts.jsonl"
    meta_path = folder / "texts.meta.json"
    if texts_path.exists() and meta_path.exists():
        return json.loads(meta_path.read_text())
    t0 = time.perf_counter()
    rows, counts = read_pypi_rows()
    if len(rows) < PYPI_N + PYPI_NQ:
        raise ValueError(f"only {len(rows)} usable summaries, {PYPI_N + PYPI_NQ} wanted")
    perm = np.random.default_rng(PYPI_SEED).permutation(len(rows))
    pick = np.concatenate([perm[PYPI_NQ:PYPI_NQ + n], perm[:nq]])
    tmp = Path(str(texts_path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for i in pick:
            f.write(json.dumps({"src": int(i), **rows[i]}, ensure_ascii=False) + "\n")
    os.replace(tmp, texts_path)
    notes = {"source": f"{PYPI_TSV}", "per_source": counts, "n_usable": len(rows),
             "sample": f"numpy default_rng({PYPI_SEED}).permutation over the usable rows: the "
                       f"first {PYPI_NQ} are the query pool, the next {PYPI_N} the base pool; "
                       f"this dataset takes the first {nq} queries and the first {n} base rows "
                       "(texts.jsonl: base rows then queries; src = index among usable rows)"}
    write_json(meta_path, notes)
    log(f"{len(rows)} usable pypi summaries; wrote {n}+{nq} to {texts_path} in "
        f"{time.perf_counter() - t0:.1f}s")
    return notes


def pypi_embed(folder: Path, nice: int) -> np.ndarray:
    """embeddings.npy (n + nq, 384) of texts.jsonl through bench/minilm_embed.py (niced)."""
    import datasets
    emb = folder / "embeddings.npy"
    if not emb.exists():
        py = datasets.ensure_minilm_venv()
        cmd = ["nice", "-n", str(nice), str(py), str(datasets.MINILM_WORKER),
               str(folder / "texts.jsonl"), str(emb), "--batch", "128", "--threads", "2"]
        log(" ".join(cmd))
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        (folder / "embed_secs.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    return np.load(emb, mmap_mode="r")


def pypi_vocabulary(base_texts: list[str]) -> tuple[list[str], dict]:
    """The N_KEYWORDS words with the highest document frequency in `base_texts` (not stop
    words, >= 2 characters, at least one letter), ties broken alphabetically."""
    df: collections.Counter = collections.Counter()
    for t in base_texts:
        df.update(w for w in words(t)
                  if len(w) >= 2 and w not in STOPWORDS and re.search("[a-z]", w))
    vocab = sorted(df.items(), key=lambda kv: (-kv[1], kv[0]))[:N_KEYWORDS]
    return [w for w, _ in vocab], {w: c for w, c in vocab}


def pypi_attrs(row: dict, vocab: frozenset) -> tuple[list[str], dict]:
    """Labels and numeric attributes of one package: kw=<w> for each vocabulary word of its
    summary (sorted), month=YYYY-MM and year=YYYY when the month is known; rank when ranked,
    month_num = year*12 + month-1 when the month is known."""
    labels = [f"kw={w}" for w in sorted(words(row["text"]) & vocab)]
    attrs: dict = {}
    m = re.fullmatch(r"(\d{4})-(\d{2})", row["month"] or "")
    if m:
        labels += [f"month={row['month']}", f"year={m.group(1)}"]
        attrs["month_num"] = int(m.group(1)) * 12 + int(m.group(2)) - 1
    if row["rank"] is not None:
        attrs["rank"] = int(row["rank"])
    return labels, attrs


# ---------------------------------------------------------------------------------------------
# Files: labels.txt, attrs.jsonl
# ---------------------------------------------------------------------------------------------

def write_labels(path: Path, labels: list[list[str]]) -> None:
    """DiskANN's label file: one line per vector, comma-separated labels (empty line: none)."""
    for ls in labels:
        for lab in ls:
            if "," in lab or "\n" in lab or not lab:
                raise ValueError(f"label {lab!r} cannot be written in a label file")
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for ls in labels:
            f.write(",".join(ls) + "\n")
    os.replace(tmp, path)


def read_labels(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split(",") if line.strip() else [] for line in f]


def write_attrs(path: Path, attrs: list[dict]) -> None:
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for a in attrs:
            f.write(json.dumps(a, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def read_attrs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def label_key(label: str) -> tuple[str, str]:
    """(field, value) of a label: `K=V` is keyed (field K), a plain label has the field
    `label`."""
    if "=" in label:
        k, v = label.split("=", 1)
        return k, v
    return "label", label


def frequency_table(labels: list[list[str]], top: int | None = None) -> dict:
    c = collections.Counter(lab for ls in labels for lab in ls)
    items = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
    return dict(items[:top] if top else items)


def _write_set(folder: Path, prefix: str, x: np.ndarray, labels: list[list[str]],
               attrs: list[dict]) -> None:
    """base.fbin/labels.txt/attrs.jsonl (prefix '') or queries.fbin/queries-labels.txt/... """
    if not (len(labels) == len(attrs) == x.shape[0]):
        raise ValueError(f"{prefix or 'base'}: {x.shape[0]} vectors, {len(labels)} label lines, "
                         f"{len(attrs)} attribute lines")
    write_fbin(folder / ("queries.fbin" if prefix else "base.fbin"), x)
    write_labels(folder / f"{prefix}labels.txt", labels)
    write_attrs(folder / f"{prefix}attrs.jsonl", attrs)


def _numeric_summary(attrs: list[dict]) -> dict:
    out = {}
    for key in sorted({k for a in attrs for k in a}):
        v = np.array([a[key] for a in attrs if key in a], dtype=np.int64)
        out[key] = {"present": int(v.size), "min": int(v.min()), "max": int(v.max()),
                    "median": float(np.median(v))}
    return out


def _describe_labels(labels: list[list[str]]) -> dict:
    per_vec = np.array([len(ls) for ls in labels])
    fields = collections.Counter(label_key(lab)[0] for ls in labels for lab in ls)
    multi = {f: int(max((sum(label_key(lab)[0] == f for lab in ls) for ls in labels),
                        default=0)) for f in fields}
    return {"labels_per_vector": {"mean": float(per_vec.mean()), "max": int(per_vec.max()),
                                  "none": int((per_vec == 0).sum())},
            "distinct_labels": len({lab for ls in labels for lab in ls}),
            "label_fields": dict(fields), "max_values_per_vector": multi}


# ---------------------------------------------------------------------------------------------
# pypi-labelled
# ---------------------------------------------------------------------------------------------

def make_pypi(folder: Path, quick: bool, nice: int) -> dict:
    """texts.jsonl -> embeddings (or the full dataset's, sliced, for --quick) -> the files."""
    n, nq = (QUICK_N, QUICK_NQ) if quick else (PYPI_N, PYPI_NQ)
    notes = pypi_texts(folder, n, nq)
    with open(folder / "texts.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    full = cache_dir() / "pypi-labelled"
    emb_src = "embedded here"
    if quick and (full / "base.fbin").exists() and (full / "queries.fbin").exists():
        x = np.concatenate([read_fbin(full / "base.fbin")[:n], read_fbin(full / "queries.fbin")[:nq]])
        emb_src = f"the first {n} base rows and {nq} queries of {full}"
    else:
        x = np.asarray(pypi_embed(folder, nice), dtype=np.float32)
    if x.shape != (n + nq, 384):
        raise ValueError(f"embeddings: shape {x.shape}, expected ({n + nq}, 384)")
    if quick:  # the vocabulary of the full base pool, so the quick data is a true prefix
        all_rows, _ = read_pypi_rows()
        perm = np.random.default_rng(PYPI_SEED).permutation(len(all_rows))
        pool = [all_rows[i]["text"] for i in perm[PYPI_NQ:PYPI_NQ + PYPI_N]]
    else:
        pool = [r["text"] for r in rows[:n]]
    vocab, vocab_df = pypi_vocabulary(pool)
    vs = frozenset(vocab)
    la = [pypi_attrs(r, vs) for r in rows]
    _write_set(folder, "", x[:n], [l for l, _ in la[:n]], [a for _, a in la[:n]])
    _write_set(folder, "queries-", x[n:], [l for l, _ in la[n:]], [a for _, a in la[n:]])
    base_labels = [l for l, _ in la[:n]]
    embed_secs = folder / "embed_secs.txt"
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    (folder / "embeddings.npy").unlink(missing_ok=True)  # base + queries hold the same vectors
    return {"metric": "cosine", "source": notes["source"] + ": name, month, "
                                          "rank_among_15000_most_downloaded, summary",
            "texts": "non-empty summaries of at least 3 whitespace-separated words, "
                     "deduplicated on the exact stripped summary (first kept)",
            "texts_counts": notes["per_source"], "n_usable": notes["n_usable"],
            "sample": notes["sample"], "n": n, "nq": nq,
            "embedding": "all-MiniLM-L6-v2 int8 ONNX (bench/minilm_embed.py in "
                         "bench/.venv-minilm, bench/datasets.py MINILM_REQS), unit norm; "
                         + emb_src,
            "embed_secs": float(embed_secs.read_text()) if embed_secs.exists() else None,
            "norm_max_abs_err": float(np.abs(norms - 1.0).max()),
            "labels": "kw=<w> for each vocabulary word among the summary's lower-cased words "
                      f"(regex {WORD_RE.pattern}); month=YYYY-MM and year=YYYY from the "
                      "`month` column when present",
            "numeric": "rank = rank_among_15000_most_downloaded (ranked packages only); "
                       "month_num = year*12 + month-1 (when the month is known)",
            "vocabulary_rule": f"the {N_KEYWORDS} words with the highest document frequency "
                               f"over the {PYPI_N} summaries of the full base pool, not in "
                               "STOPWORDS (bench/filtered_data.py), >= 2 characters with a "
                               "letter; ties alphabetical",
            "vocabulary": vocab, "vocabulary_doc_freq_full_pool": vocab_df,
            "base_labels": _describe_labels(base_labels),
            "query_labels": _describe_labels([l for l, _ in la[n:]]),
            "numeric_base": _numeric_summary([a for _, a in la[:n]]),
            "label_frequency": frequency_table(base_labels)}


# ---------------------------------------------------------------------------------------------
# zipf-<base>: labels independent of the vectors
# ---------------------------------------------------------------------------------------------

def zipf_labels(count: int, rng: np.random.Generator) -> list[list[str]]:
    """Each vector: c ~ uniform{1..4} distinct labels, drawn one after another without
    replacement from p_k ∝ k^-ZIPF_S over L0000..L0999 (the first c distinct of i.i.d. draws)."""
    p = np.arange(1, ZIPF_VOCAB + 1, dtype=np.float64) ** -ZIPF_S
    p /= p.sum()
    ncount = rng.integers(1, 5, size=count)
    draws = rng.choice(ZIPF_VOCAB, size=(count, 16), p=p)
    out = []
    for i in range(count):
        seen: list[int] = []
        row = draws[i]
        j = 0
        while len(seen) < ncount[i]:
            if j == row.size:  # (very rare) not enough distinct labels among 16 draws
                row = rng.choice(ZIPF_VOCAB, size=16, p=p)
                j = 0
            v = int(row[j])
            j += 1
            if v not in seen:
                seen.append(v)
        out.append([f"L{v:04d}" for v in sorted(seen)])
    return out


def glove_base_queries() -> tuple[Path, Path]:
    """bench/datasets.py's glove-400k base.fbin and query.fbin (made if missing; no GT)."""
    import datasets
    spec = datasets.DATASETS["glove-400k"]
    folder = cache_dir() / "glove-400k"
    folder.mkdir(parents=True, exist_ok=True)
    meta_path = folder / "meta.json"
    if not (meta_path.exists() and (folder / "base.fbin").exists()
            and (folder / "query.fbin").exists()):
        log(f"preparing glove-400k in {folder}")
        meta = {"name": "glove-400k", "metric": spec.metric, "description": spec.description,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **spec.make(folder)}
        write_json(meta_path, meta)
    return folder / "base.fbin", folder / "query.fbin"


def make_zipf_glove(folder: Path, quick: bool) -> dict:
    base_p, query_p = glove_base_queries()
    base, queries = read_fbin(base_p), read_fbin(query_p)
    rng = np.random.default_rng(ZIPF_SEED)
    n_full, nq_full = base.shape[0], queries.shape[0]
    # Always drawn for the whole base and query set, so --quick is a prefix of the full data.
    bl = zipf_labels(n_full, rng)
    ql = zipf_labels(nq_full, rng)
    bu = rng.integers(0, U_MAX, size=n_full)
    qu = rng.integers(0, U_MAX, size=nq_full)
    n, nq = (QUICK_N, QUICK_NQ) if quick else (n_full, nq_full)
    _write_set(folder, "", np.asarray(base[:n]), bl[:n], [{"u": int(v)} for v in bu[:n]])
    _write_set(folder, "queries-", np.asarray(queries[:nq]), ql[:nq],
               [{"u": int(v)} for v in qu[:nq]])
    return {"metric": "cosine", "source": f"{base_p}, {query_p} (bench/datasets.py glove-400k)"
                                          + (f": the first {n} base rows and {nq} queries"
                                             if quick else ""),
            "n": n, "nq": nq,
            "labels": f"per vector c ~ uniform{{1..4}} distinct plain labels L0000..L{ZIPF_VOCAB - 1:04d}, "
                      f"Zipf p_k ∝ k^-{ZIPF_S} (k = 1 + label number), drawn without replacement "
                      f"(first c distinct of i.i.d. draws); independent of the vectors; numpy "
                      f"default_rng({ZIPF_SEED}): base labels, query labels, base u, query u",
            "numeric": f"u uniform integer in [0, {U_MAX})",
            "base_labels": _describe_labels(bl[:n]),
            "query_labels": _describe_labels(ql[:nq]),
            "numeric_base": _numeric_summary([{"u": int(v)} for v in bu[:n]]),
            "label_frequency": frequency_table(bl[:n])}


# ---------------------------------------------------------------------------------------------
# Filters: the expression trees, their matching ids, and their text in each engine's syntax
# ---------------------------------------------------------------------------------------------
# A filter is a JSON-able dict:
#   {"op": "label", "field": F, "value": V}   the vector carries the label (F = "label": plain V,
#                                             else the keyed label F=V)
#   {"op": "and" | "or", "args": [f, g, ...]}
#   {"op": "range", "field": F, "lo": a, "hi": b}  numeric a <= F <= b (inclusive; missing: no)
#   {"op": "ge", "field": F, "lo": a}          numeric F >= a
#   {"op": "all"}                              no filter: every vector

def label_string(f: dict) -> str:
    """The label as written in labels.txt."""
    return f["value"] if f["field"] == "label" else f"{f['field']}={f['value']}"


class AttrIndex:
    """Postings per label and sorted values per numeric field of one vector set: evaluates a
    filter to the sorted ids of the vectors it matches."""

    def __init__(self, labels: list[list[str]], attrs: list[dict]):
        self.n = len(labels)
        post: dict[str, list[int]] = collections.defaultdict(list)
        for i, ls in enumerate(labels):
            for lab in ls:
                post[lab].append(i)
        self.postings = {lab: np.asarray(v, dtype=np.int64) for lab, v in post.items()}
        self.counts = {lab: int(v.size) for lab, v in self.postings.items()}
        self.numeric: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for key in sorted({k for a in attrs for k in a}):
            ids = np.array([i for i, a in enumerate(attrs) if key in a], dtype=np.int64)
            vals = np.array([attrs[i][key] for i in ids], dtype=np.int64)
            order = np.argsort(vals, kind="stable")
            self.numeric[key] = (ids[order], vals[order])  # ids by value, values ascending
        self._masks: dict[str, np.ndarray] = {}
        self._pairs: dict[tuple[str, str], tuple[int, int]] = {}

    @classmethod
    def from_files(cls, labels_path, attrs_path) -> "AttrIndex":
        return cls(read_labels(Path(labels_path)), read_attrs(Path(attrs_path)))

    def ids(self, f: dict) -> np.ndarray:
        """Sorted int64 ids of the vectors matching filter f."""
        op = f["op"]
        if op == "label":
            return self.postings.get(label_string(f), np.zeros(0, dtype=np.int64))
        if op in ("and", "or"):
            parts = [self.ids(g) for g in f["args"]]
            out = parts[0]
            for p in parts[1:]:
                out = (np.intersect1d(out, p, assume_unique=True) if op == "and"
                       else np.union1d(out, p))
            return out
        if op in ("range", "ge"):
            if f["field"] not in self.numeric:
                return np.zeros(0, dtype=np.int64)
            ids, vals = self.numeric[f["field"]]
            a = np.searchsorted(vals, f["lo"], side="left")
            b = vals.size if op == "ge" else np.searchsorted(vals, f["hi"], side="right")
            return np.sort(ids[a:b])
        if op == "all":
            return np.arange(self.n, dtype=np.int64)
        raise ValueError(f"unknown filter op {op!r}")

    def mask(self, label: str) -> np.ndarray:
        """Boolean membership of one label (cached)."""
        m = self._masks.get(label)
        if m is None:
            m = np.zeros(self.n, dtype=bool)
            m[self.postings.get(label, [])] = True
            self._masks[label] = m
        return m

    def pair_counts(self, a: str, b: str) -> tuple[int, int]:
        """(|A and B|, |A or B|) of two labels (memoised)."""
        key = (a, b) if a < b else (b, a)
        got = self._pairs.get(key)
        if got is None:
            got = self._pairs[key] = self._pair_counts(*key)
        return got

    def _pair_counts(self, a: str, b: str) -> tuple[int, int]:
        ca, cb = self.counts.get(a, 0), self.counts.get(b, 0)
        if ca > cb:
            a, b, ca, cb = b, a, cb, ca
        if ca == 0:
            return 0, cb
        if cb >= 0.001 * self.n:
            inter = int(np.count_nonzero(self.mask(b)[self.postings[a]]))
        else:
            inter = int(np.intersect1d(self.postings[a], self.postings[b],
                                       assume_unique=True).size)
        return inter, ca + cb - inter


def _quote(v: str, q: str) -> str:
    return q + v.replace(q, q + q) + q if q == "'" else q + v.replace("\\", "\\\\").replace('"', '\\"') + q


def to_trawl(f: dict) -> str:
    """trawl's filter syntax: kw = "django", label = "L0012", A AND B, A OR B,
    rank BETWEEN 100 AND 2000, u >= 0; "" (empty line) for no filter."""
    op = f["op"]
    if op == "label":
        return f'{f["field"]} = {_quote(str(f["value"]), chr(34))}'
    if op in ("and", "or"):
        return f" {op.upper()} ".join(
            f"({to_trawl(g)})" if g["op"] in ("and", "or") else to_trawl(g) for g in f["args"])
    if op == "range":
        return f'{f["field"]} BETWEEN {f["lo"]} AND {f["hi"]}'
    if op == "ge":
        return f'{f["field"]} >= {f["lo"]}'
    if op == "all":
        return ""
    raise ValueError(op)


def lance_columns(label_fields: dict) -> dict:
    """Lance column of each label field: a list<string> column (LabelList index) when a vector
    can carry several values of it, else a string column (Bitmap index). Plain labels: the list
    column `labels`. label_fields: field -> most values one vector carries."""
    return {f: ("list" if m > 1 or f == "label" else "scalar") for f, m in label_fields.items()}


def lance_column_name(field: str) -> str:
    return "labels" if field == "label" else f"l_{field}"


def to_lance(f: dict, kinds: dict) -> str | None:
    """LanceDB SQL for `where` (None for no filter). List columns: array_has_any (served by the
    LabelList index), scalar string columns: = (Bitmap index), numbers: BETWEEN / >= (BTree)."""
    op = f["op"]
    if op == "label":
        col = lance_column_name(f["field"])
        v = _quote(str(f["value"]), "'")
        return f"array_has_any({col}, [{v}])" if kinds[f["field"]] == "list" else f"{col} = {v}"
    if op in ("and", "or"):
        return f" {op.upper()} ".join(f"({to_lance(g, kinds)})" for g in f["args"])
    if op == "range":
        return f'n_{f["field"]} BETWEEN {f["lo"]} AND {f["hi"]}'
    if op == "ge":
        return f'n_{f["field"]} >= {f["lo"]}'
    if op == "all":
        return None
    raise ValueError(op)


def to_diskann(f: dict) -> str | None:
    """diskannpy's filter_label: one label only (None where DiskANN cannot express it)."""
    if f["op"] == "label":
        return label_string(f)
    if f["op"] == "all":
        return ""
    return None


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------

NAMES = ("pypi-labelled", "zipf-glove-400k")


def dataset_folder(name: str, quick: bool) -> Path:
    return cache_dir() / (name + ("-quick" if quick else ""))


def load(folder: Path) -> FilteredDataset:
    meta = json.loads((folder / "meta.json").read_text())
    n, dim = read_fbin(folder / "base.fbin").shape
    nq = read_fbin(folder / "queries.fbin").shape[0]
    fields = sorted(meta["base_labels"]["label_fields"])
    numeric = sorted(meta["numeric_base"])
    return FilteredDataset(meta["name"], meta["metric"], str(folder), str(folder / "base.fbin"),
                           str(folder / "queries.fbin"), str(folder / "labels.txt"),
                           str(folder / "attrs.jsonl"), str(folder / "queries-labels.txt"),
                           str(folder / "queries-attrs.jsonl"), n, nq, dim, fields, numeric)


def prepare(name: str, quick: bool = False, nice: int = 10) -> FilteredDataset:
    """Make the dataset (idempotent: reused when meta.json exists) and return its paths."""
    if name not in NAMES:
        raise SystemExit(f"unknown dataset {name!r}; known: {', '.join(NAMES)}")
    folder = dataset_folder(name, quick)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "meta.json").exists():
        log(f"preparing {folder.name} in {folder}")
        t0 = time.perf_counter()
        made = make_pypi(folder, quick, nice) if name == "pypi-labelled" else \
            make_zipf_glove(folder, quick)
        meta = {"name": folder.name, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                              time.gmtime()),
                "files": "base.fbin, queries.fbin (float32 fbin); labels.txt, "
                         "queries-labels.txt (comma-separated, DiskANN format, keyed labels "
                         "K=V); attrs.jsonl, queries-attrs.jsonl (numeric fields, absent when "
                         "missing)", **made}
        write_json(folder / "meta.json", meta)
        log(f"{folder.name} ready in {time.perf_counter() - t0:.0f}s")
    return load(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("name", choices=NAMES)
    ap.add_argument("--quick", action="store_true", help="20,000 base vectors, 200 queries")
    ap.add_argument("--embed-nice", type=int, default=10,
                    help="nice level of the embedding process (pypi-labelled)")
    args = ap.parse_args()
    print(json.dumps(asdict(prepare(args.name, args.quick, args.embed_nice)), indent=2))


if __name__ == "__main__":
    main()

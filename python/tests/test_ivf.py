"""The IVF index kind (FusionANNS) from Python: build, open, search, statistics, info, verify,
the parameters of both kinds, and the command line's results."""

import os
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import trawl
from conftest import FAST, brute_force, gaussian, recall, trawl_cli
from test_trawl import read_result, write_fbin

IVF = dict(kind="ivf", pq_bytes=16, progress=False)
# Generous: many lists, a deep candidate list, an early stop that waits for three quiet
# batches of 8 (the defaults stop sooner, for speed).
GENEROUS = trawl.SearchParams(L=64, rerank_n=300, ivf_batch=8, ivf_beta=3)
DTYPE_NAMES = {np.float32: "float32", np.uint8: "uint8", np.int8: "int8"}


def exact_distances(data, queries, ids, metric):
    x = data[ids.astype(np.int64)].astype(np.float64)
    q = queries.astype(np.float64)[:, None, :]
    if metric == "l2":
        return ((x - q) ** 2).sum(-1)
    if metric == "ip":
        return -(x * q).sum(-1)
    xn = np.linalg.norm(x, axis=-1)
    qn = np.linalg.norm(q, axis=-1)
    return 1 - (x * q).sum(-1) / np.maximum(xn * qn, 1e-30)


@pytest.fixture(scope="session")
def ivf_index(tmp_path_factory):
    """A float32 L2 IVF index over 4,000 × 32 clustered vectors, built with one thread."""
    data = gaussian(4000, 32, seed=1)
    queries = gaussian(50, 32, seed=2)
    d = tmp_path_factory.mktemp("ivf") / "index"
    report = trawl.build(data, d, trawl.BuildParams(threads=1, by_id_vectors=True, **IVF))
    return d, data, queries, report


# --- build, open, search, batch_search ------------------------------------------------------

def test_build_report_and_open(ivf_index):
    d, data, _, report = ivf_index
    assert report["kind"] == "ivf"
    assert (report["n"], report["dim"], report["metric"]) == (4000, 32, "l2")
    assert 0 < report["nlist"] < 4000 and report["replication"] >= 1
    assert report["pq_bytes_per_vector"] == 16 and report["vectors_by_id_bytes"] > 0
    assert report["disk_bytes"] == sum(f.stat().st_size for f in d.iterdir()
                                       if f.name != ".trawl.lock")
    assert not (d / "packed.trawl").exists()
    with trawl.Index.open(d) as index:
        assert index.kind == "ivf"
        assert (index.n, index.dim, index.dtype, index.metric, len(index)) == \
            (4000, 32, "float32", "l2", 4000)
        assert not index.writable and index.delta_len == 0
        r = repr(index)
        assert "kind=ivf" in r and "vectors=bucket" in r and "accel=cpu" in r
    assert index.closed and "closed" in repr(index)
    with pytest.raises(trawl.InvalidInputError, match="closed"):
        index.search(data[0])


def test_search_and_batch_search(ivf_index):
    d, data, queries, _ = ivf_index
    index = trawl.Index(d)
    truth = brute_force(data, queries, 10)
    ids, dists = index.batch_search(queries, k=10, params=GENEROUS, threads=2)
    assert ids.shape == (50, 10) and dists.shape == (50, 10)
    assert ids.dtype == np.uint64 and dists.dtype == np.float32
    assert recall(ids, truth) >= 0.95
    assert not np.any(ids == trawl.MISSING_ID)
    # Exact squared L2 distances of the returned ids, sorted.
    np.testing.assert_allclose(dists, exact_distances(data, queries, ids, "l2"),
                               rtol=1e-4, atol=1e-3)
    assert np.all(np.diff(dists, axis=1) >= 0)
    # One query at a time gives the batch's rows; so does a batch on one thread.
    for i in range(5):
        one_ids, one_dists = index.search(queries[i], k=10, params=GENEROUS)
        assert one_ids.shape == (10,) and one_ids.dtype == np.uint64
        np.testing.assert_array_equal(one_ids, ids[i])
        np.testing.assert_array_equal(one_dists, dists[i])
    again = index.batch_search(queries, k=10, params=GENEROUS, threads=1)
    np.testing.assert_array_equal(again[0], ids)
    # The indexed vectors find themselves.
    self_ids, self_dists = index.batch_search(data[:20], k=1, params=GENEROUS)
    np.testing.assert_array_equal(self_ids[:, 0], np.arange(20))
    np.testing.assert_array_equal(self_dists[:, 0], 0)


@pytest.mark.parametrize("metric,dtype", [
    ("l2", np.float32), ("cosine", np.float32), ("ip", np.float32), ("l2", np.uint8),
    ("l2", np.int8),
])
def test_metrics_and_dtypes(tmp_path, metric, dtype):
    data = gaussian(3000, 24, seed=3, dtype=dtype)
    queries = gaussian(30, 24, seed=4, dtype=dtype)
    report = trawl.build(data, tmp_path / "ix",
                         trawl.BuildParams(metric=metric, threads=2, **IVF))
    assert report["kind"] == "ivf" and report["metric"] == metric
    index = trawl.Index.open(tmp_path / "ix")
    assert (index.kind, index.metric, index.dtype) == ("ivf", metric, DTYPE_NAMES[dtype])
    truth = brute_force(data, queries, 10, metric)
    ids, dists = index.batch_search(queries, k=10, params=GENEROUS)
    assert recall(ids, truth) >= 0.95, (metric, dtype)
    np.testing.assert_allclose(dists, exact_distances(data, queries, ids, metric),
                               rtol=1e-4, atol=1e-3)
    one = np.stack([index.search(q, k=10, params=GENEROUS)[0] for q in queries])
    np.testing.assert_array_equal(one, ids)
    # A query of another dtype is refused, not converted.
    other = np.float32 if dtype != np.float32 else np.uint8
    with pytest.raises(trawl.InvalidInputError, match="dtype"):
        index.search(queries[0].astype(other), k=10)


def test_build_from_a_file(ivf_index, tmp_path):
    d, data, queries, _ = ivf_index
    path = tmp_path / "base.fbin"
    write_fbin(path, data)
    trawl.build(str(path), tmp_path / "from-file",
                trawl.BuildParams(threads=1, by_id_vectors=True, **IVF))
    for name in ("ivf.trawl", "ivf-vectors.trawl", "pq.trawl", "pq-codes.trawl"):
        assert (d / name).read_bytes() == (tmp_path / "from-file" / name).read_bytes(), name


def test_non_contiguous_queries(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    want = index.batch_search(queries, 10, GENEROUS, threads=1)
    for q in (np.asfortranarray(queries), np.repeat(queries, 2, axis=0)[::2]):
        assert not q.flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(index.batch_search(q, 10, GENEROUS, threads=1)[0], want[0])


def test_concurrent_searches_from_python_threads(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    want, _ = index.batch_search(queries, 10, GENEROUS, threads=1)
    got = np.zeros_like(want)
    errors = []

    def work(rows):
        try:
            for i in rows:
                got[i] = index.search(queries[i], 10, GENEROUS)[0]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(range(t, 50, 4),)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    np.testing.assert_array_equal(got, want)


# --- parameters ------------------------------------------------------------------------------

def test_l_is_the_number_of_lists_probed(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    for L in (1, 8, 16):
        index.batch_search(queries, 10, trawl.SearchParams(L=L))
        assert np.all(index.last_stats["lists_probed"] == L)
    # L = None probes 32 lists.
    index.search(queries[0], 10)
    assert index.last_stats["lists_probed"].tolist() == [32]
    # More lists, better recall (on average).
    data = ivf_index[1]
    truth = brute_force(data, queries, 10)
    few = recall(index.batch_search(queries, 10, trawl.SearchParams(L=2))[0], truth)
    many = recall(index.batch_search(queries, 10, trawl.SearchParams(L=64))[0], truth)
    assert many > few


def test_rerank_n_bounds_the_reranked_candidates(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    # Page mates off: only the candidates are re-ranked (mates would add distances, no reads).
    for n in (10, 40, 120):
        index.batch_search(queries, 10, trawl.SearchParams(L=32, rerank_n=n, heuristic=False,
                                                            page_mates=False))
        st = index.last_stats
        assert np.all(st["exact_distances"] <= n)
        assert np.all(st["exact_distances"] == np.minimum(n, st["candidates_unique"]))
    # By default rerank_n = max(10·k, 4·L) (all re-ranked without the early stop).
    for L, n in ((4, 100), (16, 100), (64, 256)):
        index.batch_search(queries, 10, trawl.SearchParams(L=L, heuristic=False,
                                                            page_mates=False))
        st = index.last_stats
        assert np.all(st["exact_distances"] == np.minimum(n, st["candidates_unique"])), L
    assert np.any(st["exact_distances"] == 256)


def test_fewer_candidates_than_k_give_missing_ids(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    # One list probed: lists hold about ivf_list_size = 10 ids, often fewer (page mates off,
    # or the other vectors on the pages read would fill the rest).
    one = trawl.SearchParams(L=1, page_mates=False)
    ids, dists = index.batch_search(queries, 10, one, threads=1)
    found = np.minimum(10, index.last_stats["candidates_unique"]).astype(np.int64)
    assert np.any(found < 10)
    for row_ids, row_dists, f in zip(ids, dists, found):
        assert np.all(row_ids[:f] != trawl.MISSING_ID) and np.all(np.isfinite(row_dists[:f]))
        assert np.all(row_ids[f:] == trawl.MISSING_ID) and np.all(row_dists[f:] == np.inf)
    one_ids, one_dists = index.search(queries[int(np.argmin(found))], 10, one)
    assert one_ids[-1] == trawl.MISSING_ID and one_dists[-1] == np.inf


def test_heuristic_off_equals_epsilon_zero(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    off = index.batch_search(queries, 10, trawl.SearchParams(L=32, heuristic=False), threads=1)
    off_exact = index.last_stats["exact_distances"].copy()
    zero = index.batch_search(queries, 10, trawl.SearchParams(L=32, ivf_epsilon=0.0), threads=1)
    np.testing.assert_array_equal(off[0], zero[0])
    np.testing.assert_array_equal(off[1], zero[1])
    np.testing.assert_array_equal(index.last_stats["exact_distances"], off_exact)
    # The early stop (the default) re-ranks no more.
    index.batch_search(queries, 10, trawl.SearchParams(L=32), threads=1)
    assert np.all(index.last_stats["exact_distances"] <= off_exact)
    assert index.last_stats["exact_distances"].sum() < off_exact.sum()


def test_page_mates_add_exact_candidates_at_no_read(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    assert trawl.SearchParams().page_mates
    off = trawl.SearchParams(L=16, rerank_n=20, heuristic=False, page_mates=False)
    on = trawl.SearchParams(L=16, rerank_n=20, heuristic=False)
    _, d_off = index.batch_search(queries, 10, off, threads=1)
    st_off = index.last_stats
    ids_on, d_on = index.batch_search(queries, 10, on, threads=1)
    st_on = index.last_stats
    # A superset of vectors re-ranked from the same pages: no rank gets worse.
    assert np.all(d_on <= d_off)
    assert np.any(d_on < d_off)
    assert all(len(set(row)) == len(row) for row in ids_on.tolist())
    np.testing.assert_array_equal(st_on["pages_read"], st_off["pages_read"])
    assert st_off["page_mates"].sum() == 0 and st_on["page_mates"].sum() > 0


def test_page_merge_and_buffer_change_reads_not_results(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    base = trawl.SearchParams(L=32, heuristic=False)
    want = index.batch_search(queries, 10, base, threads=1)
    st = index.last_stats
    assert st["pages_merged"].sum() > 0 and st["pages_buffered"].sum() > 0
    reads = st["pages_read"].sum()
    for kw, zero in (({"page_merge": False}, "pages_merged"),
                     ({"page_buffer": False}, "pages_buffered")):
        p = trawl.SearchParams(L=32, heuristic=False, **kw)
        got = index.batch_search(queries, 10, p, threads=1)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert index.last_stats[zero].sum() == 0
        assert index.last_stats["pages_read"].sum() > reads


def test_accel_batch_and_batch_size_keep_the_results(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    want = index.batch_search(queries, 10, trawl.SearchParams(L=16), threads=2)
    for kw in ({"accel_batch": 1}, {"accel_batch": 8}, {"accel_batch": 64},
               {"centroid_list": 100}):
        got = index.batch_search(queries, 10, trawl.SearchParams(L=16, **kw), threads=2)
        np.testing.assert_array_equal(got[0], want[0], err_msg=str(kw))
        np.testing.assert_array_equal(got[1], want[1], err_msg=str(kw))


def test_by_id_vector_layout(ivf_index, tmp_path):
    d, _, queries, _ = ivf_index
    bucket = trawl.Index.open(d)
    by_id = trawl.Index.open(d, ivf_vectors="by_id")
    assert "vectors=by_id" in repr(by_id)
    assert by_id.info()["ivf"]["vector_layout"] == "by_id"
    # Page mates off: the layouts put different vectors beside a candidate.
    p = trawl.SearchParams(L=32, heuristic=False, page_mates=False)
    want = bucket.batch_search(queries, 10, p, threads=1)
    got = by_id.batch_search(queries, 10, p, threads=1)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    # Without BuildParams(by_id_vectors=True) there is no by-id file.
    data = gaussian(500, 8, seed=9)
    trawl.build(data, tmp_path / "plain", trawl.BuildParams(kind="ivf", progress=False))
    with pytest.raises(trawl.IndexNotFoundError, match="by-id"):
        trawl.Index.open(tmp_path / "plain", ivf_vectors="by_id")


def test_accelerators(ivf_index):
    """accel="gpu" works (the same results: both backends compute the same PQ distances bit
    for bit) or raises a clear InvalidInputError; "auto" always opens."""
    d, _, queries, _ = ivf_index
    cpu = trawl.Index.open(d, accel="cpu")
    assert cpu.info()["ivf"]["accel"]["backend"] == "cpu"
    want = cpu.batch_search(queries, 10, trawl.SearchParams(L=16), threads=1)
    opened = []
    try:
        opened.append(trawl.Index.open(d, accel="gpu"))
    except trawl.InvalidInputError as e:
        assert "GPU" in str(e) or "gpu" in str(e)
    auto = trawl.Index.open(d, accel="auto")
    assert auto.info()["ivf"]["accel"]["backend"] in ("cpu", "gpu")
    opened.append(auto)
    for index in opened:
        backend = index.info()["ivf"]["accel"]["backend"]
        assert f"accel={backend}" in repr(index)
        for kw in ({}, {"accel_batch": 4}):
            got = index.batch_search(queries, 10, trawl.SearchParams(L=16, **kw), threads=1)
            np.testing.assert_array_equal(got[0], want[0], err_msg=f"{backend} {kw}")
            np.testing.assert_array_equal(got[1], want[1], err_msg=f"{backend} {kw}")
        np.testing.assert_array_equal(
            index.search(queries[0], 10, trawl.SearchParams(L=16))[0], want[0][0])
        index.close()


def test_params_objects():
    b = trawl.BuildParams()
    assert b.kind == "graph" and b.by_id_vectors is False
    assert (b.ivf_list_size, b.ivf_epsilon, b.ivf_max_replicas) == (10, 0.25, 8)
    b = trawl.BuildParams(kind="ivf", ivf_list_size=20, ivf_epsilon=0.2, by_id_vectors=True)
    r = repr(b)
    assert 'kind="ivf"' in r and "ivf_list_size=20" in r and "ivf_epsilon=0.2" in r
    assert "by_id_vectors=True" in r
    s = trawl.SearchParams()
    assert s.rerank_n is None and s.ivf_batch == 2 and s.ivf_epsilon == 0.1
    assert s.ivf_beta == 2 and s.heuristic and s.page_merge and s.page_buffer
    assert s.centroid_list == 0 and s.accel_batch == 0
    s.rerank_n = 77
    s.heuristic = False
    assert "rerank_n=77" in repr(s) and "heuristic=False" in repr(s)


# --- statistics, info, verify ----------------------------------------------------------------

def test_stats_include_the_ivf_counters(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    assert index.stats["queries"] == 0
    index.batch_search(queries, 10, trawl.SearchParams(L=16), threads=2)
    last = index.last_stats
    for key in ("lists_probed", "candidates", "candidates_unique", "pages_merged",
                "pages_buffered", "page_mates", "centroid_distances"):
        assert key in last and key in index.stats, key
        assert last[key].shape == (50,) and last[key].dtype == np.uint64
    assert np.all(last["lists_probed"] == 16)
    assert np.all(last["candidates"] >= last["candidates_unique"])
    assert np.all(last["candidates_unique"] > 0)
    assert np.all(last["pq_distances"] == last["candidates_unique"])
    assert np.all(last["centroid_distances"] > 0)
    assert np.all(last["exact_distances"] >= 10)
    assert np.all(last["pages_read"] == last["io_requests"])
    assert np.all(last["latency_us"] > 0)
    # stats sums every query since opening.
    index.search(queries[0], 10, trawl.SearchParams(L=16))
    one = index.last_stats
    st = index.stats
    assert st["queries"] == 51
    for key in ("lists_probed", "candidates", "candidates_unique", "pages_read",
                "exact_distances", "centroid_distances"):
        assert st[key] == int(last[key].sum()) + int(one[key].sum()), key
    assert st["lists_probed"] == 51 * 16
    index.reset_stats()
    assert index.stats["queries"] == 0 and index.stats["lists_probed"] == 0


def test_info_describes_the_index(ivf_index):
    d, _, _, report = ivf_index
    index = trawl.Index.open(d)
    info = index.info()
    assert info["kind"] == "ivf"
    assert (info["n"], info["dim"], info["dtype"], info["metric"]) == (4000, 32, "float32", "l2")
    iv = info["ivf"]
    assert iv["nlist"] > 0 and iv["nlist"] == report["nlist"]
    assert iv["vector_layout"] == "bucket" and iv["vector_pages"] == report["vector_pages"]
    assert iv["list_size"] == 10 and iv["max_replicas"] == 8
    assert iv["accel"]["backend"] == "cpu"
    assert iv["memory"]["pq_codes"] == 4000 * 16
    assert info["manifest"] and {f["name"] for f in info["files"]} >= {
        "ivf.trawl", "ivf-vectors.trawl", "pq.trawl", "pq-codes.trawl"}
    assert info["live"] == {"writable": False, "updated": False, "vectors": 4000,
                            "delta_vectors": 0, "delta_bytes": 0}
    assert info["engine"]["name"] in ("uring", "pread")
    assert info["cache"]["nodes"] == 0
    # The same description as `trawl info --json` (what only the handle knows aside).
    cli = trawl_cli()
    import json
    out = json.loads(subprocess.run([str(cli), "info", str(d), "--json"], check=True,
                                    capture_output=True, text=True).stdout)
    for key in ("kind", "n", "dim", "metric", "layout", "files", "build_id", "ivf"):
        if key == "ivf":
            for k in ("nlist", "replication", "list_size", "vector_pages", "vectors_per_page"):
                assert out["ivf"][k] == iv[k], k
        else:
            assert out[key] == info[key], key


def test_verify_reads_every_vector_page(ivf_index, tmp_path):
    d, _, queries, report = ivf_index
    rep = trawl.Index.open(d).verify()
    names = [f["name"] for f in rep["files"]]
    # Every file, each by its component: the index file first (it says what the others must
    # be), the manifest last.
    assert names[0] == "ivf.trawl" and names[-1] == "manifest.trawl", names
    assert sorted(names[1:-1]) == ["ivf-vectors-by-id.trawl", "ivf-vectors.trawl",
                                   "pq-codes.trawl", "pq.trawl"], names
    bucket = next(f for f in rep["files"] if f["name"] == "ivf-vectors.trawl")
    assert f"all {report['vector_pages']} data pages" in bucket["checked"]
    # Both vector files' pages were read.
    assert rep["manifest"] and rep["vector_pages"] > report["vector_pages"]
    broken = tmp_path / "broken"
    shutil.copytree(d, broken)
    vectors = broken / "ivf-vectors.trawl"
    raw = bytearray(vectors.read_bytes())
    raw[4096 * 3 + 100] ^= 0xFF  # a data page: its checksum no longer matches
    vectors.write_bytes(bytes(raw))
    index = trawl.Index.open(broken)
    with pytest.raises(trawl.CorruptIndexError, match="ivf-vectors.trawl"):
        index.verify()
    # Searches that read the page find it too.
    with pytest.raises(trawl.CorruptIndexError):
        index.batch_search(np.concatenate([queries] * 4), 10,
                           trawl.SearchParams(L=64, rerank_n=1000, heuristic=False), threads=1)


# --- the GIL and Ctrl-C ----------------------------------------------------------------------

def test_search_releases_the_gil(ivf_index):
    d, data, _, _ = ivf_index
    index = trawl.Index.open(d, engine="memory")
    queries = np.concatenate([data[:2000]] * 4)
    p = trawl.SearchParams(L=64, rerank_n=300, heuristic=False)
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
    assert alone > 0.02, alone
    assert ticks >= 10, (ticks, alone)


def test_ctrl_c_interrupts_an_ivf_build(tmp_path):
    data = gaussian(100_000, 64, seed=10)
    params = trawl.BuildParams(kind="ivf", pq_bytes=32, threads=1, progress=False)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        trawl.build(data, tmp_path / "ix", params)
    elapsed = time.perf_counter() - t0
    timer.join()
    # The whole build takes several seconds on one thread; the interrupt lands at the current
    # phase's next cancellation check, and nothing is committed.
    assert elapsed < 6.0, elapsed
    assert not (tmp_path / "ix" / "ivf.trawl").exists()


# --- what an IVF index does not do, and bad input --------------------------------------------

def test_writable_and_graph_options_are_refused(ivf_index):
    d = ivf_index[0]
    with pytest.raises(trawl.InvalidInputError, match="IVF indexes do not take updates yet"):
        trawl.Index.open(d, writable=True)
    with pytest.raises(trawl.InvalidInputError, match="layout"):
        trawl.Index.open(d, layout="shuffle")
    with pytest.raises(trawl.InvalidInputError, match="cache_nodes"):
        trawl.Index.open(d, cache_nodes=10)
    for kw in ({"accel": "tpu"}, {"ivf_vectors": "zigzag"}):
        with pytest.raises(trawl.InvalidInputError):
            trawl.Index.open(d, **kw)
    index = trawl.Index.open(d)
    for call in (lambda: index.insert(np.zeros((1, 32), np.float32)),
                 lambda: index.upsert([1], np.zeros((1, 32), np.float32)),
                 lambda: index.delete([1]),
                 lambda: index.merge(),
                 lambda: index.flush()):
        with pytest.raises(trawl.InvalidInputError, match="IVF indexes do not take updates"):
            call()
    assert len(index) == 4000


def test_the_kind_of_a_graph_index(f32_index):
    index = trawl.Index.open(f32_index[0])
    assert index.kind == "graph" and index.info()["kind"] == "graph"
    assert f32_index[3].get("kind") == "graph"
    # The IVF-only open options are accepted and ignored.
    trawl.Index.open(f32_index[0], accel="auto", ivf_vectors="by_id").close()


def test_bad_queries_and_params_raise_invalid_input(ivf_index):
    d, _, queries, _ = ivf_index
    index = trawl.Index.open(d)
    nlist = index.info()["ivf"]["nlist"]
    P = trawl.SearchParams
    nan = queries.copy()
    nan[7, 3] = np.nan
    cases = [
        (lambda: index.search(queries[0][:31]), "dimension"),
        (lambda: index.batch_search(queries[:, :31]), "dimension"),
        (lambda: index.search(queries[0].astype(np.float64)), "dtype|float64"),
        (lambda: index.search(queries[:2]), "1-D"),
        (lambda: index.search(queries[0], k=0), "k = 0"),
        (lambda: index.search(queries[0], k=4001), "larger than the 4000"),
        (lambda: index.search(nan[7]), "non-finite"),
        (lambda: index.batch_search(nan), "query 7"),
        (lambda: index.search(queries[0], params=P(L=0)), "L = 0"),
        (lambda: index.search(queries[0], params=P(L=nlist + 1)), "posting lists"),
        (lambda: index.search(queries[0], params=P(rerank_n=0)), "rerank_n"),
        (lambda: index.search(queries[0], k=10, params=P(rerank_n=5)), "rerank_n = 5"),
        (lambda: index.search(queries[0], params=P(ivf_batch=0)), "ivf_batch"),
        (lambda: index.search(queries[0], params=P(ivf_epsilon=1.5)), "epsilon"),
        (lambda: index.search(queries[0], params=P(ivf_epsilon=-0.1)), "epsilon"),
        (lambda: index.search(queries[0], params=P(ivf_epsilon=float("nan"))), "epsilon"),
        (lambda: index.search(queries[0], params=P(ivf_beta=0)), "ivf_beta"),
        (lambda: index.search(queries[0], params=P(accel_batch=-1)), "accel_batch"),
        (lambda: index.search(queries[0], params=P(centroid_list=-1)), "centroid_list"),
        (lambda: index.search(queries[0], params=P(centroid_list=1 << 21)), "centroid"),
        (lambda: index.batch_search(queries, params=P(rerank_n=1 << 21)), "top_n"),
        (lambda: index.batch_search(queries, threads=-1), "threads"),
    ]
    for call, pattern in cases:
        with pytest.raises(trawl.InvalidInputError, match=pattern):
            call()
    # Graph-only parameters are ignored by an IVF index.
    want = index.batch_search(queries, 10, P(L=16), threads=1)
    got = index.batch_search(queries, 10, P(L=16, beam_width=1, strategy="pipe",
                                             rerank_batch=3, dynamic_width="5:4,8"), threads=1)
    np.testing.assert_array_equal(got[0], want[0])


def test_bad_build_params_raise_invalid_input(tmp_path):
    data = gaussian(500, 8, seed=7)
    nan = data.copy()
    nan[42, 5] = np.nan
    B = trawl.BuildParams
    cases = [
        (lambda: trawl.build(data, tmp_path / "a", B(kind="hnsw")), "kind"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", ivf_list_size=0)),
         "ivf_list_size"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", ivf_epsilon=-1.0)),
         "ivf_epsilon"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", ivf_epsilon=float("nan"))),
         "ivf_epsilon"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", ivf_epsilon=1000.0)),
         "epsilon"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", ivf_max_replicas=0)),
         "ivf_max_replicas"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", ivf_max_replicas=65)),
         "replicas"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", pq_bytes=9)),
         "more than the dimension"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", pq_bytes=0)), "pq_bytes"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", metric="hamming")), "metric"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", seed=-1)), "seed"),
        (lambda: trawl.build(data, tmp_path / "a", B(kind="ivf", threads=-1)), "threads"),
        (lambda: trawl.build(nan, tmp_path / "a", B(kind="ivf", progress=False)), "row 42"),
    ]
    for call, pattern in cases:
        with pytest.raises(trawl.InvalidInputError, match=pattern):
            call()
        assert not (tmp_path / "a" / "ivf.trawl").exists()
    # Graph-only parameters are ignored by an IVF build (even invalid ones); by default data
    # of fewer dimensions than 32 gets one PQ byte per dimension.
    report = trawl.build(data, tmp_path / "b",
                         B(kind="ivf", R=0, alpha=0.5, entry_ratio=2.0, decoupled=True,
                           progress=False))
    assert report["kind"] == "ivf" and report["pq_bytes_per_vector"] == 8
    assert not (tmp_path / "b" / "graph.trawl").exists()


def test_a_rebuild_replaces_the_other_kind(ivf_index, tmp_path):
    d, data, queries, _ = ivf_index
    both = tmp_path / "both"
    trawl.build(data, both, trawl.BuildParams(threads=1, **FAST))
    assert trawl.Index.open(both).kind == "graph"
    trawl.build(data, both, trawl.BuildParams(threads=1, **IVF))
    with trawl.Index.open(both) as index:
        assert index.kind == "ivf"
        assert not (both / "packed.trawl").exists()
        want = trawl.Index.open(d).batch_search(queries, 10, GENEROUS, threads=1)
        np.testing.assert_array_equal(index.batch_search(queries, 10, GENEROUS, threads=1)[0],
                                      want[0])
    trawl.build(data, both, trawl.BuildParams(threads=1, **FAST))
    assert trawl.Index.open(both).kind == "graph"


# --- the same as the command line ------------------------------------------------------------

def test_results_identical_to_the_cli(ivf_index, tmp_path):
    cli = trawl_cli()
    d, _, queries, _ = ivf_index
    qpath = tmp_path / "q.fbin"
    write_fbin(qpath, queries)
    index = trawl.Index.open(d)
    for extra, params in [
        ([], trawl.SearchParams(L=16)),
        (["--rerank-n", "300", "--ivf-batch", "8", "--no-heuristic"],
         trawl.SearchParams(L=16, rerank_n=300, ivf_batch=8, heuristic=False)),
        (["--ivf-epsilon", "0.3", "--ivf-beta", "1", "--centroid-list", "40", "--no-page-merge",
          "--no-page-buffer", "--accel-batch", "8"],
         trawl.SearchParams(L=16, ivf_epsilon=0.3, ivf_beta=1, centroid_list=40,
                            page_merge=False, page_buffer=False, accel_batch=8)),
    ]:
        out = tmp_path / "res.bin"
        subprocess.run([str(cli), "search", str(d), "--queries", str(qpath), "-k", "10",
                        "-L", "16", "--threads", "1", "-o", str(out), *extra],
                       check=True, capture_output=True)
        cli_ids, cli_dists = read_result(out)
        ids, dists = index.batch_search(queries, 10, params, threads=1)
        np.testing.assert_array_equal(ids, cli_ids, err_msg=" ".join(extra))
        np.testing.assert_array_equal(dists, cli_dists, err_msg=" ".join(extra))


def test_cli_build_writes_the_same_index(ivf_index, tmp_path):
    cli = trawl_cli()
    d, data, _, _ = ivf_index
    path = tmp_path / "base.fbin"
    write_fbin(path, data)
    subprocess.run([str(cli), "build", str(path), str(tmp_path / "cli"), "--kind", "ivf",
                    "--metric", "l2", "--pq-bytes", "16", "--threads", "1", "--by-id-vectors"],
                   check=True, capture_output=True)
    names = sorted(f.name for f in d.iterdir() if f.name != ".trawl.lock")
    assert names == sorted(f.name for f in (tmp_path / "cli").iterdir()
                           if f.name != ".trawl.lock")
    for name in names:
        assert (d / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name

"""Streaming updates through the Python API: Index.open(..., writable=True), insert, upsert,
delete, merge, flush, len — on a small index (2,000 × 16) copied afresh for each test."""

import os
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import trawl
from conftest import FAST, gaussian, trawl_cli

N, DIM = 2000, 16
P = trawl.SearchParams(L=64)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    data = gaussian(N, DIM, seed=21)
    d = tmp_path_factory.mktemp("updates") / "base"
    trawl.build(data, d, trawl.BuildParams(threads=2, **FAST))
    return d, data


@pytest.fixture
def index_dir(base, tmp_path):
    src, data = base
    d = tmp_path / "index"
    shutil.copytree(src, d)
    return d, data


def nearest(index, vectors, k=1):
    ids, dists = index.batch_search(np.atleast_2d(vectors), k=k, params=P, threads=2)
    return ids, dists


def new_vectors(n, seed):
    # From the same clusters as the base rows, so every one sits among indexed neighbours.
    return gaussian(n, DIM, seed=seed)


def test_insert_then_search_finds_the_new_ids(index_dir):
    d, data = index_dir
    with trawl.Index.open(d, writable=True) as index:
        assert index.writable and len(index) == N and index.n == N
        fresh = new_vectors(50, seed=22)
        ids = index.insert(fresh)
        assert ids.dtype == np.uint64
        np.testing.assert_array_equal(ids, np.arange(N, N + 50))
        assert len(index) == N + 50 and index.delta_len == 50
        got, dists = nearest(index, fresh)
        assert got.dtype == np.uint64
        np.testing.assert_array_equal(got[:, 0], ids)
        np.testing.assert_array_equal(dists[:, 0], 0)
        one, one_d = index.search(fresh[7], k=3, params=P)
        assert one.dtype == np.uint64 and one[0] == ids[7] and one_d[0] == 0
        # The base rows are still found under their row numbers.
        got, dists = nearest(index, data[:20])
        np.testing.assert_array_equal(got[:, 0], np.arange(20))
        np.testing.assert_array_equal(dists[:, 0], 0)

        # Ids chosen by the caller: any integer array or list, up to 2**64 - 2; one 1-D vector.
        more = new_vectors(4, seed=23)
        out = index.insert(more[:1], ids=np.array([10**12], dtype=np.int64))
        np.testing.assert_array_equal(out, [10**12])
        out = index.insert(more[1], ids=[77_000])
        np.testing.assert_array_equal(out, [77_000])
        # Assigned ids continue above every id the index has held.
        np.testing.assert_array_equal(index.insert(more[2:3]), [10**12 + 1])
        big = 2**64 - 2
        out = index.insert(more[3:], ids=[big])  # a list: converted without a float on the way
        assert out.dtype == np.uint64 and int(out[0]) == big
        got, dists = nearest(index, more)
        assert [int(x) for x in got[:, 0]] == [10**12, 77_000, 10**12 + 1, big]
        np.testing.assert_array_equal(dists[:, 0], 0)
        assert len(index) == N + 54
        # Above the largest id there is none left to assign.
        with pytest.raises(trawl.InvalidInputError, match="no ids left"):
            index.insert(more[:1])
        assert len(index) == N + 54


def test_delete_hides_ids(index_dir):
    d, data = index_dir
    with trawl.Index.open(d, writable=True) as index:
        fresh = new_vectors(20, seed=24)
        new_ids = index.insert(fresh)
        gone = np.concatenate([np.arange(10, dtype=np.uint64), new_ids[:5]])
        assert index.delete(gone) == 15
        assert len(index) == N + 20 - 15
        for queries in (data[:10], fresh[:5]):
            got, _ = nearest(index, queries, k=10)
            assert not set(got.ravel().tolist()) & set(gone.tolist())
        for i in range(3):
            one, _ = index.search(data[i], k=10, params=P)
            assert not set(one.tolist()) & set(gone.tolist())
        # The rest is still there.
        got, dists = nearest(index, data[10:30])
        np.testing.assert_array_equal(got[:, 0], np.arange(10, 30))
        got, _ = nearest(index, fresh[5:])
        np.testing.assert_array_equal(got[:, 0], new_ids[5:])
        # A deleted id is unknown from now on; a single int is accepted.
        with pytest.raises(trawl.InvalidInputError, match="not in the index"):
            index.delete([3])
        assert index.delete(np.int32(42)) == 1
        assert len(index) == N + 20 - 16


def test_upsert_replaces_a_vector(index_dir):
    d, data = index_dir
    with trawl.Index.open(d, writable=True) as index:
        replacement = new_vectors(2, seed=25)
        assert index.upsert([3, 5], replacement) is None
        assert len(index) == N
        got, dists = nearest(index, replacement)
        np.testing.assert_array_equal(got[:, 0], [3, 5])
        np.testing.assert_array_equal(dists[:, 0], 0)
        # The old vectors of 3 and 5 are gone: a search for them no longer finds them at 0.
        got, dists = nearest(index, data[[3, 5]], k=5)
        for row, want in zip(range(2), (3, 5)):
            assert not (got[row, 0] == want and dists[row, 0] == 0)
        # An id the index does not hold is inserted.
        index.upsert(np.array([9_999_999]), replacement[:1] + 0.5)
        assert len(index) == N + 1
        got, dists = nearest(index, replacement[:1] + 0.5)
        assert got[0, 0] == 9_999_999 and dists[0, 0] == 0


def test_reopen_sees_the_same(index_dir):
    d, data = index_dir
    fresh = new_vectors(30, seed=26)
    with trawl.Index.open(d, writable=True) as w:
        ids = w.insert(fresh)
        w.delete(np.arange(100, 110))
        w.upsert([200], fresh[:1] * 0.5)
        want = nearest(w, np.concatenate([data[:50], fresh]), k=10)
        want_len = len(w)
        # A reader opened while the writer runs sees what was logged before it opened.
        with trawl.Index.open(d) as r:
            assert len(r) == want_len and not r.writable
            got = nearest(r, np.concatenate([data[:50], fresh]), k=10)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            with pytest.raises(trawl.InvalidInputError, match="read-only"):
                r.insert(fresh[:1])
    assert (d / "wal.trawl").is_file()
    for writable in (False, True):
        with trawl.Index.open(d, writable=writable) as again:
            assert len(again) == want_len
            got = nearest(again, np.concatenate([data[:50], fresh]), k=10)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    # The constructor opens the same way.
    again = trawl.Index(d, writable=True)
    got, _ = nearest(again, fresh)
    np.testing.assert_array_equal(got[:, 0], ids)
    again.close()


def test_merge_keeps_everything(index_dir):
    d, data = index_dir
    fresh = new_vectors(40, seed=27)
    with trawl.Index.open(d, writable=True) as index:
        ids = index.insert(fresh)
        index.delete(np.arange(0, 20))
        index.upsert([500], fresh[:1] + 0.25)
        queries = np.concatenate([data[20:60], fresh, fresh[:1] + 0.25])
        before = nearest(index, queries, k=10)
        live = len(index)
        assert live == N + 40 - 20

        report = index.merge(threads=2)
        assert isinstance(report, dict)
        assert report["inserted"] == 41 and report["deleted"] == 21
        assert report["slots"] - report["holes"] == live
        assert report["slots"] >= live and report["bytes_written"] > 0
        # The recall monitor measured the merged version (its own vectors as queries).
        assert [p["L"] for p in report["recall"]] == [32, 64, 128]
        assert all(0.5 < p["recall"] <= 1.0 for p in report["recall"])
        assert report["recall_samples"] == min(300, live)
        assert report["recall_warning"] is None or "fell more than 2 points" in report["recall_warning"]
        assert report["relinked"] >= 0
        assert index.delta_len == 0 and len(index) == live
        assert (d / "ids.trawl").is_file()

        got, dists = nearest(index, fresh)
        np.testing.assert_array_equal(got[:, 0], ids)
        np.testing.assert_array_equal(dists[:, 0], 0)
        got, dists = nearest(index, data[20:60])
        np.testing.assert_array_equal(got[:, 0], np.arange(20, 60))
        got, _ = nearest(index, data[:20], k=10)
        assert not set(got.ravel().tolist()) & set(range(20))
        got, dists = nearest(index, fresh[:1] + 0.25)
        assert got[0, 0] == 500 and dists[0, 0] == 0
        after = nearest(index, queries, k=10)
        # The merged graph is a new graph: same self-matches, nearly the same neighbours.
        overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(before[0], after[0])])
        assert overlap >= 0.95, overlap

        # Writes after a merge go on, and a second merge folds them in.
        more = index.insert(new_vectors(5, seed=28))
        assert len(index) == live + 5
        assert index.merge()["inserted"] == 5
    with trawl.Index.open(d) as r:
        assert len(r) == live + 5
        got, dists = nearest(r, fresh)
        np.testing.assert_array_equal(got[:, 0], ids)
        got, _ = nearest(r, new_vectors(5, seed=28))
        np.testing.assert_array_equal(got[:, 0], more)
        assert r.verify()["manifest"] is True


def test_read_only_index_refuses_writes(index_dir):
    d, data = index_dir
    for index in (trawl.Index.open(d), trawl.Index(d)):
        assert not index.writable
        for call in (lambda: index.insert(data[:2]),
                     lambda: index.upsert([1], data[:1]),
                     lambda: index.delete([1]),
                     lambda: index.merge(),
                     lambda: index.flush()):
            with pytest.raises(trawl.InvalidInputError, match="read-only"):
                call()
        assert len(index) == N
        index.close()
    assert not (d / "wal.trawl").exists()
    # The same for a read-only handle of an index with updates.
    with trawl.Index.open(d, writable=True) as w:
        w.delete([0])
    with trawl.Index.open(d) as r:
        assert len(r) == N - 1
        with pytest.raises(trawl.InvalidInputError, match="read-only"):
            r.delete([1])


def test_second_writer_is_refused(index_dir):
    d, data = index_dir
    first = trawl.Index.open(d, writable=True)
    with pytest.raises(trawl.StorageError) as e:
        trawl.Index.open(d, writable=True)
    assert isinstance(e.value, OSError) and isinstance(e.value, trawl.Error)
    with pytest.raises(trawl.StorageError):
        trawl.Index(d, writable=True)
    # Readers are welcome meanwhile.
    with trawl.Index.open(d) as r:
        assert len(r) == N
    first.insert(data[:1] + 1)
    first.close()
    assert first.closed
    with pytest.raises(trawl.InvalidInputError, match="closed"):
        first.search(data[0])
    with pytest.raises(trawl.InvalidInputError, match="closed"):
        first.insert(data[:1])
    first.close()  # closing twice is fine
    # Closed: the lock is released.
    with trawl.Index.open(d, writable=True) as second:
        assert len(second) == N + 1


def test_bad_update_inputs_change_nothing(index_dir):
    d, data = index_dir
    with trawl.Index.open(d, writable=True, durability="buffered") as index:
        index.insert(new_vectors(3, seed=29), ids=[5000, 5001, 5002])
        before = nearest(index, data[:30], k=10)
        n0, delta0 = len(index), index.delta_len
        v = new_vectors(4, seed=30)
        nan = v.copy()
        nan[2, 7] = np.nan
        inf = v.copy()
        inf[1, 0] = np.inf
        cases = [
            (lambda: index.insert(v[:2], ids=[9000, 9000]), "twice"),
            (lambda: index.upsert([9000, 9000], v[:2]), "twice"),
            (lambda: index.delete([1, 1]), "twice"),
            (lambda: index.insert(v[:2], ids=[9000, 17]), "already in the index"),
            (lambda: index.insert(v[:1], ids=[5001]), "already in the index"),
            (lambda: index.insert(v[:, :15]), "dimension"),
            (lambda: index.insert(np.ones((3, 17), np.float32)), "dimension"),
            (lambda: index.insert(v[0][:15]), "dimension"),
            (lambda: index.upsert([1], v[:1, :8]), "dimension"),
            (lambda: index.insert(v[None]), "2-D"),
            (lambda: index.insert(nan), "NaN"),
            (lambda: index.upsert([0, 1, 2, 3], inf), "NaN or infinite"),
            (lambda: index.insert(v * np.float32(1e30)), "squared norm"),
            (lambda: index.upsert([0], np.full((1, DIM), 3e38, np.float32)), "squared norm"),
            (lambda: index.insert(v.astype(np.float64)), "float64|dtype"),
            (lambda: index.insert(v.astype(np.uint8)), "dtype"),
            (lambda: index.insert(list(v[0])), "numpy array"),
            (lambda: index.insert(v[:2], ids=[-1, 9001]), "at least 0: found -1"),
            (lambda: index.insert(v[:2], ids=np.array([9001, -7], np.int64)), "found -7"),
            (lambda: index.upsert(np.array([-2]), v[:1]), "found -2"),
            (lambda: index.delete([-3]), "found -3"),
            (lambda: index.insert(v[:2], ids=[1.5, 2.0]), "integers"),
            (lambda: index.insert(v[:2], ids=["a", "b"]), "integers"),
            (lambda: index.insert(v[:2], ids=[[1, 2]]), "integers"),
            (lambda: index.insert(v[:2], ids=np.array([[1, 2]])), "1-D"),
            (lambda: index.insert(v[:2], ids=np.array([1.0, 2.0])), "float64"),
            (lambda: index.insert(v[:2], ids=[2**64 - 1, 9001]), "reserved"),
            (lambda: index.insert(v[:2], ids=np.array([2**64 - 1, 9001], np.uint64)), "reserved"),
            (lambda: index.insert(v[:2], ids=[2**64, 9001]), "integers"),
            (lambda: index.insert(v[:2], ids=3.5), "not float"),
            (lambda: index.insert(v[:2], ids=[9001]), "1 ids for 2 vectors"),
            (lambda: index.delete([1, 2, 123_456]), "123456"),
            (lambda: index.merge(threads=-1), "threads"),
        ]
        for call, pattern in cases:
            with pytest.raises(trawl.InvalidInputError, match=pattern) as e:
                call()
            assert isinstance(e.value, ValueError)
            assert len(index) == n0 and index.delta_len == delta0, pattern
        after = nearest(index, data[:30], k=10)
        np.testing.assert_array_equal(after[0], before[0])
        np.testing.assert_array_equal(after[1], before[1])
        index.flush()
    # Nothing of the refused calls was logged.
    with trawl.Index.open(d) as r:
        assert len(r) == n0
        np.testing.assert_array_equal(nearest(r, data[:30], k=10)[0], before[0])


def test_a_build_over_unmerged_updates_is_refused(index_dir):
    d, data = index_dir
    with trawl.Index.open(d, writable=True) as index:
        index.insert(new_vectors(2, seed=31), ids=[7000, 7001])
        index.delete([3])
    log = (d / "wal.trawl").read_bytes()
    with pytest.raises(trawl.InvalidInputError, match="2 acknowledged updates not merged yet"):
        trawl.build(data, d, trawl.BuildParams(threads=2, **FAST))
    assert (d / "wal.trawl").read_bytes() == log
    with trawl.Index.open(d) as r:
        assert len(r) == N + 1 and 7001 in nearest(r, new_vectors(2, seed=31))[0][:, 0]
    with trawl.Index.open(d, writable=True) as index:
        index.merge(threads=2)
    trawl.build(data, d, trawl.BuildParams(threads=2, **FAST))
    assert not (d / "wal.trawl").exists()
    with trawl.Index.open(d) as r:
        assert len(r) == N


def test_open_options_of_updates(index_dir):
    d, _ = index_dir
    with pytest.raises(trawl.InvalidInputError, match="durability"):
        trawl.Index.open(d, writable=True, durability="eventually")
    # A read-only index without updates keeps its static cache.
    with trawl.Index.open(d, cache_nodes=10) as index:
        assert index.info()["cache"]["nodes"] == 10
    with trawl.Index.open(d, writable=True) as w:
        info = w.info()
        assert info["live"]["writable"] is True and info["live"]["vectors"] == N
        w.delete([0])
        assert w.info()["live"]["vectors"] == N - 1
        assert "writable" in repr(w)
    # An updated index keeps a static cache too, chosen again after every merge.
    with trawl.Index.open(d, cache_nodes=10) as index:
        assert index.info()["cache"]["nodes"] == 10
    with trawl.Index.open(d, writable=True, cache_nodes=50) as w:
        assert w.info()["cache"]["nodes"] == 50
        w.delete([1, 2, 3])
        w.merge()
        ids, _ = w.batch_search(np.zeros((4, w.dim), np.float32) + 0.5, k=10)
        assert not ({1, 2, 3} & set(ids.ravel().tolist()))
        assert w.stats["cache_hits"] > 0, "the cache chosen after the merge is searched"


def test_the_cli_searches_what_python_wrote(index_dir, tmp_path):
    cli = trawl_cli()
    d, data = index_dir
    fresh = new_vectors(25, seed=31)
    with trawl.Index.open(d, writable=True) as w:
        w.insert(fresh)
        w.delete(np.arange(50))
    queries = np.concatenate([data[:60], fresh])
    qpath = tmp_path / "q.fbin"
    with open(qpath, "wb") as f:
        np.array(queries.shape, dtype="<u4").tofile(f)
        queries.astype(np.float32).tofile(f)
    out = tmp_path / "res.bin"
    subprocess.run([str(cli), "search", str(d), "--queries", str(qpath), "-k", "10", "-L", "64",
                    "--threads", "1", "-o", str(out)], check=True, capture_output=True)
    raw = np.fromfile(out, dtype=np.uint8)
    nq, k = np.frombuffer(raw[:8].tobytes(), dtype="<i4")
    cli_ids = np.frombuffer(raw[8:8 + 4 * nq * k].tobytes(), dtype="<u4").reshape(nq, k)
    with trawl.Index.open(d) as r:
        ids, _ = r.batch_search(queries, k=10, params=P, threads=1)
    np.testing.assert_array_equal(ids, cli_ids.astype(np.uint64))


def test_ctrl_c_interrupts_a_merge_and_keeps_the_updates(index_dir):
    d, data = index_dir
    fresh = new_vectors(1000, seed=32)
    with trawl.Index.open(d, writable=True) as index:
        ids = index.insert(fresh)
        index.delete(np.arange(100))
        live = len(index)
        # The merge's insert phase takes a second or more on one thread; Ctrl-C lands at the
        # next cancellation check (after that phase, as the library stands).
        timer = threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT))
        t0 = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            index.merge(threads=1)
        timer.join()
        took = time.perf_counter() - t0
        assert took >= 0.1, took
        # Whether or not the merge got to commit, nothing is lost.
        assert len(index) == live
        got, dists = nearest(index, fresh[:50])
        np.testing.assert_array_equal(got[:, 0], ids[:50])
        np.testing.assert_array_equal(dists[:, 0], 0)
        got, _ = nearest(index, data[:100], k=10)
        assert not set(got.ravel().tolist()) & set(range(100))
    with trawl.Index.open(d) as r:
        assert len(r) == live
        got, _ = nearest(r, fresh[:50])
        np.testing.assert_array_equal(got[:, 0], ids[:50])


def test_searches_run_while_another_thread_writes(index_dir):
    d, data = index_dir
    batches = [new_vectors(40, seed=40 + i) for i in range(10)]
    errors = []
    with trawl.Index.open(d, writable=True) as index:
        def writer():
            try:
                for i, b in enumerate(batches):
                    ids = index.insert(b)
                    index.upsert(ids[:5], b[:5] + 0.5)
                    index.delete(np.array([2 * i, 2 * i + 1]))
                    if i == 5:
                        index.merge(threads=1)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        w = threading.Thread(target=writer)
        w.start()
        rounds = 0
        while w.is_alive() or rounds == 0:
            ids, dists = nearest(index, data[:40], k=10)
            # A search sees each operation whole: never an id twice, never a missing result.
            for row in ids:
                assert len(set(row.tolist())) == 10
            assert np.all(ids != trawl.MISSING_ID)
            assert np.all(np.diff(dists, axis=1) >= 0)
            rounds += 1
        w.join()
        assert not errors, errors
        assert rounds > 1
        assert len(index) == N + 400 - 20
        for b in batches:
            got, dists = nearest(index, b[5:])
            np.testing.assert_array_equal(dists[:, 0], 0)
            got, dists = nearest(index, b[:5] + 0.5)
            np.testing.assert_array_equal(dists[:, 0], 0)


def test_pinned_lists_and_refinement_codes_need_merged_updates(tmp_path):
    # They are built for one version of the files: an index with updates not merged yet is
    # refused with a clear error rather than opened without them.
    d = tmp_path / "dec"
    trawl.build(gaussian(N, DIM, seed=31), d, trawl.BuildParams(threads=2, decoupled=True, **FAST))
    with trawl.Index.open(d, writable=True) as index:
        index.insert(new_vectors(5, seed=32))
    for kw in ({"refine_bits": 4}, {"list_pin": 0.5}):
        with pytest.raises(trawl.InvalidInputError, match="merge it first"):
            trawl.Index.open(d, layout="decoupled", **kw)
    # Without them the index opens live and finds the new vectors.
    index = trawl.Index.open(d, layout="decoupled")
    assert len(index) == N + 5


@pytest.mark.parametrize("deletes", ["in-place", "in-place-search", "consolidate"])
def test_every_way_of_taking_deletes_out_keeps_the_live_vectors_findable(index_dir, deletes):
    d, data = index_dir
    rng = np.random.default_rng(5)
    gone = rng.choice(N, size=N // 10, replace=False)
    with trawl.Index.open(d, writable=True) as index:
        index.delete(gone)
        report = index.merge(threads=2, deletes=deletes, replace=2)
        assert report["deleted"] == len(gone)
        # Every live node pointing to a deleted one lost that edge: these many changed.
        assert report["touched_nodes"] > 0 and report["graph_pages"] > 0
        assert 0 < report["touched_pages"] <= report["graph_pages"]
        if deletes == "consolidate":
            assert report["in_edges"] == 0
        else:
            assert report["in_edges"] > 0 and 0 < report["in_edges_found"] <= report["in_edges"]
            if deletes == "in-place":
                assert report["in_edges_found"] == report["in_edges"]
        keep = np.setdiff1d(np.arange(N), gone)
        got, dists = nearest(index, data[keep])
        assert (got[:, 0] == keep).mean() >= 0.98
        got, _ = nearest(index, data[gone], k=10)
        assert not set(got.ravel().tolist()) & set(gone.tolist())


def test_bad_merge_options_are_refused(index_dir):
    d, _ = index_dir
    with trawl.Index.open(d, writable=True) as index:
        index.delete([1, 2, 3])
        with pytest.raises(trawl.InvalidInputError, match="deletes"):
            index.merge(deletes="rebuild")
        with pytest.raises(trawl.InvalidInputError, match="replace"):
            index.merge(replace=0)
        assert len(index) == N - 3

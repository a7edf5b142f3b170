"""trawl.ShardedIndex and the sharded build (in one process)."""

import numpy as np
import pytest

import trawl
from conftest import FAST, brute_force, gaussian, recall


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """4,000 × 32 clustered vectors: a single index and a 3-shard index, same parameters."""
    data = gaussian(4000, 32, seed=11)
    queries = gaussian(60, 32, seed=12)
    root = tmp_path_factory.mktemp("shard")
    params = trawl.BuildParams(threads=1, **FAST)
    trawl.build(data, root / "single", params)
    report = trawl.build_sharded(data, root / "s3", 3, params)
    return root, data, queries, report


def test_build_report_and_manifest(sharded):
    root, data, _, report = sharded
    assert report["plan"]["shards"] == 3
    assert sum(report["plan"]["counts"]) == len(data)
    assert len(report["shard_reports"]) == 3
    m = trawl.shard_manifest(root / "s3")
    assert (m["n"], m["dim"], m["metric"]) == (4000, 32, "l2")
    assert m["centroids"].shape == (3, 32)
    ids = np.concatenate([s["ids"] for s in m["shards"]])
    # Without replication every vector is in exactly one shard.
    assert np.array_equal(np.sort(ids), np.arange(4000, dtype=np.uint64))
    for s in m["shards"]:
        assert s["count"] == len(s["ids"]) and s["build_id"]


def test_sharded_search_matches_single_index(sharded):
    root, data, queries, _ = sharded
    truth = brute_force(data, queries, 10)
    p = trawl.SearchParams(L=60)
    single = trawl.Index.open(root / "single")
    ids1, _ = single.batch_search(queries, k=10, params=p, threads=1)
    with trawl.ShardedIndex(root / "s3") as ix:
        assert (ix.n, ix.dim, ix.shards, ix.metric, ix.dtype) == (4000, 32, 3, "l2", "float32")
        ids, dists = ix.batch_search(queries, k=10, params=p, threads=1)
        assert ids.shape == (60, 10) and ids.dtype == np.uint64
        assert recall(ids, truth) >= recall(ids1, truth) - 0.005
        # Distances are exact squared L2 to the returned global ids, ascending.
        exact = ((data[ids.astype(np.int64)] - queries[:, None, :]) ** 2).sum(axis=2)
        np.testing.assert_allclose(dists, exact, rtol=1e-4, atol=1e-3)
        assert np.all(np.diff(dists, axis=1) >= 0)
        pages_all = ix.last_stats["pages_read"].sum()
        # One shard per query reads fewer pages and cannot find more.
        ids_p1, _ = ix.batch_search(queries, k=10, params=p, threads=1, probe=1)
        assert ix.last_stats["pages_read"].sum() < pages_all
        assert recall(ids_p1, truth) <= recall(ids, truth) + 1e-9
        route = ix.route(queries, 2)
        assert route.shape == (60, 2)
        assert np.all(route[:, 0] != route[:, 1])
        assert np.array_equal(ix.route(queries[:2], 0), [[0, 1, 2], [0, 1, 2]])


def test_distributed_steps_equal_one_call(sharded, tmp_path):
    root, data, queries, _ = sharded
    params = trawl.BuildParams(threads=1, **FAST)
    plan = trawl.plan_shards(data, tmp_path, 3, metric="l2", seed=params.seed)
    assert plan["counts"] == sharded[3]["plan"]["counts"]
    with pytest.raises(trawl.Error):
        trawl.finish_sharded(tmp_path)  # no shard built yet
    for s in (2, 0, 1):  # any order
        trawl.build_shard(data, tmp_path, s, params)
    trawl.finish_sharded(tmp_path)
    p = trawl.SearchParams(L=40)
    a = trawl.ShardedIndex(root / "s3").batch_search(queries, k=10, params=p, threads=1)
    b = trawl.ShardedIndex(tmp_path).batch_search(queries, k=10, params=p, threads=1)
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1], b[1])


def test_replication_counts_a_vector_once(tmp_path):
    data = gaussian(2000, 16, seed=21)
    queries = gaussian(30, 16, seed=22)
    rep = trawl.build_sharded(data, tmp_path, 2, trawl.BuildParams(threads=1, **FAST),
                              epsilon=0.5)
    assert rep["plan"]["replication"] > 1.0
    ix = trawl.ShardedIndex(tmp_path)
    assert len(ix) == 2000
    ids, _ = ix.batch_search(queries, k=20, threads=1)
    for row in ids:
        assert len(set(row.tolist())) == 20


def test_errors(sharded, tmp_path):
    root, data, queries, _ = sharded
    with pytest.raises(trawl.IndexNotFoundError):
        trawl.ShardedIndex(tmp_path / "nothing")
    ix = trawl.ShardedIndex(root / "s3")
    with pytest.raises(trawl.InvalidInputError):
        ix.batch_search(queries[:, :8], k=10)
    with pytest.raises(trawl.InvalidInputError):
        ix.batch_search(queries.astype(np.uint8), k=10)
    with pytest.raises(trawl.InvalidInputError):
        ix.batch_search(queries, k=0)
    with pytest.raises(trawl.InvalidInputError):
        trawl.build_sharded(data, tmp_path / "x", 0)
    with pytest.raises(trawl.InvalidInputError):
        trawl.build_sharded(data, tmp_path / "x", 2, epsilon=-1.0)
    with pytest.raises(trawl.InvalidInputError):
        trawl.build_sharded(data, tmp_path / "x", 2, trawl.BuildParams(kind="ivf"))
    ix.close()
    with pytest.raises(trawl.InvalidInputError):
        ix.batch_search(queries, k=10)


def test_damaged_manifest_is_refused(sharded, tmp_path):
    import shutil

    root = sharded[0]
    copy = tmp_path / "s3"
    shutil.copytree(root / "s3", copy)
    man = copy / "shards.trawl"
    raw = bytearray(man.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    man.write_bytes(bytes(raw))
    with pytest.raises(trawl.CorruptIndexError):
        trawl.ShardedIndex(copy)
    with pytest.raises(trawl.CorruptIndexError):
        trawl.shard_manifest(copy)

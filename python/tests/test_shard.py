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


def _copy(sharded, tmp_path):
    import shutil

    copy = tmp_path / "s3"
    shutil.copytree(sharded[0] / "s3", copy)
    return copy


def _forge(man, edit):
    """Rewrites the JSON header of a shard manifest with `edit`, envelope checksums resealed."""
    import json
    import struct
    import zlib

    raw = man.read_bytes()
    head, payload = raw[:32], raw[32:]
    (h,) = struct.unpack_from("<I", payload, 0)
    header = json.loads(payload[4 : 4 + h])
    edit(header)
    js = json.dumps(header).encode()
    payload = struct.pack("<I", len(js)) + js + payload[4 + h :]
    head = head[:16] + struct.pack("<QI", len(payload), zlib.crc32(payload))
    head += struct.pack("<I", zlib.crc32(head))
    man.write_bytes(head + payload)


def test_updates_through_a_shard_are_refused(sharded, tmp_path):
    copy = _copy(sharded, tmp_path)
    _, data, _, _ = sharded
    shard0 = copy / "shard-000"
    man = copy / "shards.trawl"
    with pytest.raises(trawl.InvalidInputError) as e:
        trawl.Index.open(shard0, writable=True)
    assert str(e.value) == (
        f"{shard0}: this directory is shard 0 of a sharded index ({man}): updates to sharded "
        "indexes are not supported (insert, delete, upsert and merge through a shard's "
        "directory are refused: the sharded search would not see them); rebuild the sharded "
        "index from the updated data (`trawl shard build`)"
    )
    assert not (shard0 / "wal.trawl").exists()
    # Reading a shard on its own is fine.
    assert len(trawl.Index.open(shard0)) == trawl.shard_manifest(copy)["shards"][0]["count"]
    # A delete an older trawl acknowledged through the shard (the manifest out of the way):
    # the sharded search refuses the index, naming the shard's log, instead of returning it.
    plan = copy / "shards.plan.trawl"
    assert plan.is_file()  # the build's plan also marks the shards
    man.rename(copy / "hidden")
    plan.rename(copy / "hidden-plan")
    ix = trawl.Index.open(shard0, writable=True)
    assert ix.delete([0]) == 1
    ix.close()
    (copy / "hidden").rename(man)
    with pytest.raises(trawl.CorruptIndexError) as e:
        trawl.ShardedIndex(copy)
    assert str(e.value).startswith(
        f"shard 0: {shard0 / 'wal.trawl'} holds 1 logged update(s) not merged into the "
        "shard's files; a sharded search does not apply its shards' logs and updates to "
        "sharded indexes are not supported"
    )


@pytest.mark.parametrize("n", [10**15, 2**40, 2**63])
def test_forged_vector_count_is_refused(sharded, tmp_path, n):
    copy = _copy(sharded, tmp_path)
    man = copy / "shards.trawl"
    _forge(man, lambda h: h.update(n=n))
    want = f"{man}: invalid content: n = {n} vectors, but the shards hold only 4000 ids"
    with pytest.raises(trawl.CorruptIndexError) as e:
        trawl.ShardedIndex(copy)
    assert str(e.value) == want
    with pytest.raises(trawl.CorruptIndexError) as e:
        trawl.shard_manifest(copy)
    assert str(e.value) == want


@pytest.mark.parametrize("bad", ["../x", "/tmp", "..", "a/shard-001"])
def test_shard_directories_escaping_the_folder_are_refused(sharded, tmp_path, bad):
    copy = _copy(sharded, tmp_path)
    man = copy / "shards.trawl"
    _forge(man, lambda h: h["shards"][1].update(dir=bad))
    want = (
        f'{man}: invalid content: shard 1\'s directory "{bad}" is not a plain name inside the '
        "sharded index's folder (an absolute path, `..`, `.` or a path separator): refused"
    )
    for call in (trawl.ShardedIndex, trawl.shard_manifest):
        with pytest.raises(trawl.CorruptIndexError) as e:
            call(copy)
        assert str(e.value) == want

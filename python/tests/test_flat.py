"""The flat kind from Python: built with BuildParams(kind="flat"), opened, searched, described
and verified through the same calls as every kind, with exact results."""

import numpy as np
import pytest

import trawl
from conftest import brute_force, gaussian


def distances(data, q, ids, metric):
    x = data[ids.astype(np.int64)].astype(np.float64)
    q = q.astype(np.float64)
    if metric == "l2":
        return ((x - q) ** 2).sum(1)
    if metric == "ip":
        return -(x @ q)
    return 1 - (x @ q) / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(q), 1e-30)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int8])
def test_flat_is_exact(tmp_path, metric, dtype):
    data = gaussian(3000, 24, seed=11, dtype=dtype)
    queries = gaussian(30, 24, seed=12, dtype=dtype)
    report = trawl.build(data, tmp_path / "flat",
                         trawl.BuildParams(kind="flat", metric=metric, progress=False))
    assert report["kind"] == "flat" and report["n"] == 3000
    truth = brute_force(data, queries, 10, metric)
    with trawl.Index.open(tmp_path / "flat") as index:
        assert index.kind == "flat" and len(index) == 3000
        ids, dists = index.batch_search(queries, k=10, threads=2)
        assert ids.shape == (30, 10)
        # Exact: as near as brute force's neighbours (the same ids but where distances tie).
        for q in range(30):
            got = np.sort(distances(data, queries[q], ids[q], metric))
            want = np.sort(distances(data, queries[q], truth[q], metric))
            assert np.allclose(got, want, rtol=1e-5, atol=1e-5), (q, ids[q], truth[q])
        hit = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth)])
        assert hit >= 0.99, hit
        one, _ = index.search(queries[3], k=10)
        assert list(one) == list(ids[3])
        st = index.last_stats
        assert int(st["exact_distances"][0]) == 3000


def test_flat_info_verify_and_refusals(tmp_path):
    data = gaussian(1000, 16, seed=13)
    trawl.build(data, tmp_path / "f", trawl.BuildParams(kind="flat", progress=False))
    with trawl.Index.open(tmp_path / "f") as index:
        info = index.info()
        assert info["kind"] == "flat" and info["n"] == 1000
        assert [f["name"] for f in info["files"]] == ["flat-vectors.trawl"]
        rep = index.verify()
        assert "data pages" in rep["files"][0]["checked"]
        with pytest.raises(trawl.InvalidInputError, match="flat indexes do not take updates"):
            index.insert(data[:1])
    with pytest.raises(trawl.InvalidInputError, match="do not take updates"):
        trawl.Index.open(tmp_path / "f", writable=True)
    with pytest.raises(trawl.InvalidInputError, match="query_sample"):
        trawl.build(data, tmp_path / "g", trawl.BuildParams(kind="flat", progress=False),
                    query_sample=data[:10])

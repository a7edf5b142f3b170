"""Range search from Python (`Index.range_search`, faiss's `range_search`): every vector within
a radius of each query as `(lims, ids, distances)`, compared with a numpy brute force on a
graph index and on a flat (exact) index."""

import math

import numpy as np
import pytest

import trawl
from conftest import FAST, gaussian

GENEROUS = dict(L=200, range_slack=1.0)


def sq_l2(data, queries):
    """Squared L2 distances, queries × data, in float64."""
    d = data.astype(np.float64)
    q = np.atleast_2d(queries).astype(np.float64)
    return ((q[:, None, :] - d[None, :, :]) ** 2).sum(-1)


def check_layout(lims, ids, dists, nq):
    assert lims.dtype == np.int64 and lims.shape == (nq + 1,)
    assert ids.dtype == np.uint64 and dists.dtype == np.float32
    assert ids.shape == dists.shape == (int(lims[-1]),)
    assert lims[0] == 0 and np.all(np.diff(lims) >= 0)
    for i in range(nq):
        d = dists[lims[i]:lims[i + 1]]
        assert np.all(np.diff(d) >= 0), (i, d)  # nearest first


def check_against_truth(data, queries, radius, lims, ids, dists, min_recall=1.0):
    """Every result within the radius with its exact distance; the results found are the true
    ones (all of them when min_recall is 1). Vectors within float32 rounding of the radius may
    go either way."""
    truth = sq_l2(data, queries)
    band = 1e-5 * max(abs(radius), 1.0)
    found = wanted = 0
    for i in range(len(queries)):
        got = ids[lims[i]:lims[i + 1]].astype(np.int64)
        assert len(set(got.tolist())) == len(got), i  # each id once
        want = dists[lims[i]:lims[i + 1]].astype(np.float64)
        assert np.allclose(want, truth[i, got], rtol=1e-5, atol=1e-4), i
        sure = set(np.flatnonzero(truth[i] <= radius - band).tolist())
        maybe = set(np.flatnonzero(truth[i] <= radius + band).tolist())
        assert set(got.tolist()) <= maybe, (i, sorted(set(got.tolist()) - maybe))
        found += len(sure & set(got.tolist()))
        wanted += len(sure)
        if min_recall >= 1.0:
            assert sure <= set(got.tolist()), (i, sorted(sure - set(got.tolist())))
    assert wanted > 0
    assert found / wanted >= min_recall, found / wanted


def radius_for(data, queries, rank=20):
    """A radius holding about `rank` results per query: the median rank-th distance."""
    d = np.sort(sq_l2(data, queries), axis=1)
    return float(np.median(d[:, rank]))


@pytest.fixture(scope="module")
def flat_index(tmp_path_factory, f32_index):
    _, data, queries, _ = f32_index
    d = tmp_path_factory.mktemp("range-flat") / "flat"
    trawl.build(data, d, trawl.BuildParams(kind="flat", progress=False))
    return d, data, queries


@pytest.mark.parametrize("kind", ["graph", "flat"])
def test_range_search_matches_brute_force(kind, f32_index, flat_index):
    d, data, queries = (f32_index[:3] if kind == "graph" else flat_index)
    radius = radius_for(data, queries)
    with trawl.Index.open(d) as index:
        assert index.kind == kind
        params = trawl.SearchParams(**GENEROUS)
        lims, ids, dists = index.range_search(queries, radius, params=params, threads=2)
        check_layout(lims, ids, dists, len(queries))
        check_against_truth(data, queries, radius, lims, ids, dists)
        # Some queries have results, and their number varies.
        counts = np.diff(lims)
        assert counts.max() > counts.min() and counts.sum() > 0
        st = index.last_stats
        assert len(st["latency_us"]) == len(queries)
        assert int(index.stats["queries"]) >= len(queries)
        # One thread gives the same results.
        again = index.range_search(queries, radius, params=params, threads=1)
        for a, b in zip((lims, ids, dists), again):
            assert np.array_equal(a, b)
        # A 1-D query is one query: the same as its row of the batch.
        l1, i1, d1 = index.range_search(queries[5], radius, params=params)
        check_layout(l1, i1, d1, 1)
        assert np.array_equal(i1, ids[lims[5]:lims[6]])
        assert np.array_equal(d1, dists[lims[5]:lims[6]])
        assert len(index.last_stats["latency_us"]) == 1


def test_default_params_are_precise(f32_index):
    d, data, queries, _ = f32_index
    radius = radius_for(data, queries)
    with trawl.Index.open(d) as index:
        lims, ids, dists = index.range_search(queries, radius)
        check_layout(lims, ids, dists, len(queries))
        # Approximate: nothing outside the radius, most of what is inside.
        check_against_truth(data, queries, radius, lims, ids, dists, min_recall=0.8)


@pytest.mark.parametrize("kind", ["graph", "flat"])
def test_radius_below_every_distance_finds_nothing(kind, f32_index, flat_index):
    d, data, queries = (f32_index[:3] if kind == "graph" else flat_index)
    radius = float(sq_l2(data, queries).min()) * 0.5
    with trawl.Index.open(d) as index:
        lims, ids, dists = index.range_search(queries, radius,
                                              params=trawl.SearchParams(**GENEROUS))
        check_layout(lims, ids, dists, len(queries))
        assert np.all(lims == 0) and ids.size == 0 and dists.size == 0
        # Negative with l2: nothing either.
        lims, ids, _ = index.range_search(queries, -1.0)
        assert np.all(lims == 0) and ids.size == 0


@pytest.mark.parametrize("kind", ["graph", "flat"])
def test_max_results_caps_each_query(kind, f32_index, flat_index):
    d, data, queries = (f32_index[:3] if kind == "graph" else flat_index)
    radius = radius_for(data, queries)
    params = trawl.SearchParams(**GENEROUS)
    with trawl.Index.open(d) as index:
        lims, ids, dists = index.range_search(queries, radius, params=params)
        cl, ci, cd = index.range_search(queries, radius, max_results=3, params=params)
        check_layout(cl, ci, cd, len(queries))
        assert np.array_equal(np.diff(cl), np.minimum(np.diff(lims), 3))
        assert np.diff(lims).max() > 3
        for i in range(len(queries)):
            n = cl[i + 1] - cl[i]
            assert np.array_equal(ci[cl[i]:cl[i + 1]], ids[lims[i]:lims[i] + n])
            assert np.array_equal(cd[cl[i]:cl[i + 1]], dists[lims[i]:lims[i] + n])


def test_bad_input_raises(f32_index):
    d, _, queries, _ = f32_index
    with trawl.Index.open(d) as index:
        for bad in (math.nan, math.inf, -math.inf, 1e300):
            with pytest.raises(ValueError, match="radius"):
                index.range_search(queries, bad)
        with pytest.raises(trawl.InvalidInputError, match="radius"):
            index.range_search(queries, math.nan)
        with pytest.raises(ValueError, match="max_results = 0"):
            index.range_search(queries, 1.0, max_results=0)
        with pytest.raises(trawl.InvalidInputError, match="max_results = -2"):
            index.range_search(queries, 1.0, max_results=-2)
        with pytest.raises(trawl.InvalidInputError, match="dimension"):
            index.range_search(queries[:, :31], 1.0)
        with pytest.raises(trawl.InvalidInputError, match="dimension"):
            index.range_search(queries[0][:31], 1.0)
        with pytest.raises(trawl.InvalidInputError, match="3-D"):
            index.range_search(queries[None], 1.0)
        with pytest.raises(trawl.InvalidInputError, match="dtype|float64"):
            index.range_search(queries.astype(np.float64), 1.0)
        with pytest.raises(trawl.InvalidInputError, match="numpy array"):
            index.range_search(queries.tolist(), 1.0)
        with pytest.raises(trawl.InvalidInputError, match="threads"):
            index.range_search(queries, 1.0, threads=-1)
        nan = queries.copy()
        nan[3, 1] = np.nan
        with pytest.raises(trawl.InvalidInputError):
            index.range_search(nan, 1.0)
        with pytest.raises(trawl.InvalidInputError, match="range_slack"):
            index.range_search(queries, 1.0, params=trawl.SearchParams(range_slack=-0.5))
        with pytest.raises(trawl.InvalidInputError, match="range_slack"):
            index.range_search(queries, 1.0, params=trawl.SearchParams(range_slack=math.nan))
        with pytest.raises(trawl.InvalidInputError, match="range_width"):
            index.range_search(queries, 1.0, params=trawl.SearchParams(range_width=-1))
        with pytest.raises(trawl.InvalidInputError, match="range_early_stop"):
            index.range_search(queries, 1.0, params=trawl.SearchParams(range_early_stop=-1))
        with pytest.raises(trawl.InvalidInputError, match="filter"):
            index.range_search(queries, 1.0, filter='lang = "en"')
    with pytest.raises(trawl.InvalidInputError, match="closed"):
        index.range_search(queries, 1.0)


def test_range_params_and_a_small_list(f32_index):
    s = trawl.SearchParams()
    assert (s.range_slack, s.range_width, s.range_early_stop) == (0.15, 16, 0)
    s = trawl.SearchParams(range_slack=0.5, range_width=8, range_early_stop=3)
    assert "range_slack=0.5" in repr(s) and "range_width=8" in repr(s)
    assert "range_early_stop=3" in repr(s)
    d, data, queries, _ = f32_index
    radius = radius_for(data, queries, rank=5)
    with trawl.Index.open(d) as index:
        # Every setting searches; a list smaller than 10 is fine for a range search.
        for p in (s, trawl.SearchParams(L=4), trawl.SearchParams(strategy="pipe", L=50),
                  trawl.SearchParams(range_early_stop=2, range_width=0)):
            lims, ids, dists = index.range_search(queries, radius, params=p)
            check_layout(lims, ids, dists, len(queries))
            check_against_truth(data, queries, radius, lims, ids, dists, min_recall=0.0)


def test_updates_are_found(tmp_path):
    data = gaussian(1000, 16, seed=31)
    trawl.build(data, tmp_path / "ix", trawl.BuildParams(threads=1, **FAST))
    new = gaussian(5, 16, seed=32) + 100.0  # far from every indexed vector
    with trawl.Index.open(tmp_path / "ix", writable=True) as index:
        index.insert(new, ids=np.arange(10_000, 10_005))
        index.delete([3])
        lims, ids, dists = index.range_search(new, 1e-3, params=trawl.SearchParams(**GENEROUS))
        check_layout(lims, ids, dists, 5)
        assert list(ids) == list(range(10_000, 10_005)) and np.all(dists <= 1e-3)
        # A deleted vector is not found.
        lims, ids, _ = index.range_search(data[3], 1e-3, params=trawl.SearchParams(**GENEROUS))
        assert 3 not in set(ids.tolist())

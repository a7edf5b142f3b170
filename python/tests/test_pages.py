"""The page-node layout (PageANN) from Python: BuildParams(pages=True) writes it,
Index.open(..., layout="pages") searches it (beam search, flash), and a writable open on it takes updates whose
merge keeps the page nodes."""

import numpy as np
import pytest

import trawl
from conftest import FAST, gaussian

N, DIM = 3000, 16


def exact_top(data, queries, k):
    d = ((queries[:, None, :] - data[None, :, :]) ** 2).sum(-1)
    return np.argsort(d, axis=1, kind="stable")[:, :k]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    data = gaussian(N, DIM, seed=41)
    d = tmp_path_factory.mktemp("pages") / "index"
    trawl.build(data, d, trawl.BuildParams(threads=2, pages=True, **FAST))
    return d, data


def recall(got, want):
    return np.mean([len(set(g) & set(w)) / len(w) for g, w in zip(got, want)])


def test_pages_layout_is_written_and_searched(built):
    d, data = built
    assert (d / "pages.trawl").is_file()
    queries = gaussian(50, DIM, seed=42)
    want = exact_top(data, queries, 10)
    with trawl.Index.open(d, layout="pages") as index:
        few, _ = index.batch_search(queries, k=10, params=trawl.SearchParams(L=10), threads=2)
        many, dists = index.batch_search(queries, k=10, params=trawl.SearchParams(L=40),
                                         threads=2)
    # L counts page nodes: a longer list reads more pages and finds more.
    assert recall(many, want) >= 0.95
    assert recall(many, want) >= recall(few, want)
    assert np.all(np.diff(dists, axis=1) >= 0)
    # Exact distances: the first result of a base row is the row itself at distance 0.
    with trawl.Index.open(d, layout="pages") as index:
        ids, dists = index.batch_search(data[:20], k=1, params=trawl.SearchParams(L=20),
                                        threads=2)
    np.testing.assert_array_equal(ids[:, 0], np.arange(20))
    np.testing.assert_array_equal(dists[:, 0], 0)


def test_flash_strategy_on_page_nodes(built):
    d, data = built
    queries = gaussian(50, DIM, seed=44)
    want = exact_top(data, queries, 10)
    with trawl.Index.open(d, layout="pages") as index:
        # Staleness 0 is beam search with one read per round trip over the pages, to the bit.
        strict = index.batch_search(queries, 10, trawl.SearchParams(L=12, beam_width=1),
                                    threads=1)
        flash0 = index.batch_search(
            queries, 10, trawl.SearchParams(L=12, strategy="flash", staleness=0), threads=2)
        np.testing.assert_array_equal(flash0[0], strict[0])
        np.testing.assert_array_equal(flash0[1], strict[1])
        ids, _ = index.batch_search(queries, 10, trawl.SearchParams(L=20, strategy="flash"),
                                    threads=2)
        st = index.last_stats
    assert recall(ids, want) >= 0.9
    # A read is one page node, and every vector on it is measured exactly.
    np.testing.assert_array_equal(st["steps"], st["io_requests"])
    np.testing.assert_array_equal(st["pages_read"], st["io_requests"])
    assert np.all(st["exact_distances"] > st["pages_read"])


def test_updates_on_the_pages_layout_survive_a_merge(built, tmp_path):
    import shutil

    src, data = built
    d = tmp_path / "index"
    shutil.copytree(src, d)
    fresh = gaussian(300, DIM, seed=43)
    gone = np.arange(0, N, 10, dtype=np.uint64)
    p = trawl.SearchParams(L=20)
    with trawl.Index.open(d, layout="pages", writable=True) as index:
        ids = index.insert(fresh)
        index.delete(gone)
        got, _ = index.batch_search(fresh, k=1, params=p, threads=2)
        assert np.mean(got[:, 0] == ids) >= 0.98
        index.merge()
        assert len(index) == N + 300 - len(gone)
        got, _ = index.batch_search(fresh, k=1, params=p, threads=2)
        assert np.mean(got[:, 0] == ids) >= 0.98
        near, _ = index.batch_search(data[:200], k=10, params=p, threads=2)
        assert not set(near.ravel().tolist()) & set(gone.tolist())
    assert (d / "pages.trawl").is_file()
